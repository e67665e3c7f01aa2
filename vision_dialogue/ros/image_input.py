"""A camera image topic and its image_transport `/compressed` companion into one FrameIntake.

Used by every node that takes camera frames (the manager, the events node): both topics are
subscribed with a QoS that follows the camera's (`ros/qos.py`), on one mutually exclusive
callback group; the callbacks only queue (`camera/intake.py`), and a frame that comes on both
topics with one stamp is decoded and added once.
"""
from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import CompressedImage, Image

from vision_dialogue.camera.intake import FrameIntake
from vision_dialogue.ros.image_msgs import from_compressed_msg, from_image_msg, stamp_to_ns
from vision_dialogue.ros.qos import FollowingSubscription, image_qos


class ImageTopicInput:
    """`topic` (Image) and `<resolved topic>/compressed` (CompressedImage) into `intake`.

    qos_choice: an IMAGE_QOS_CHOICES value ("auto" follows the publishers). max_pixels: the
    largest image decoded. `frame_id` is the newest frame's header frame_id (`default_frame_id`
    until one comes); `subs` are the two FollowingSubscriptions.
    """

    def __init__(self, node, topic: str, intake: FrameIntake, qos_choice: str,
                 max_pixels: int, default_frame_id: str = "camera"):
        self.intake, self.max_pixels = intake, max_pixels
        self.frame_id = default_frame_id
        # image_transport naming: the compressed topic follows the resolved (remapped) image
        self.topic = node.resolve_topic_name(topic)
        follow, base = qos_choice == "auto", image_qos(qos_choice)
        group, log = MutuallyExclusiveCallbackGroup(), node.get_logger()
        self.subs = [FollowingSubscription(node, msg_type, name, callback, base, follow=follow,
                                           callback_group=group,
                                           on_change=lambda sub: log.info(sub.status))
                     for msg_type, name, callback in (
                         (Image, self.topic, self._on_image),
                         (CompressedImage, self.topic + "/compressed", self._on_compressed))]

    def _offer(self, decode, msg) -> None:
        ns = stamp_to_ns(msg.header.stamp)
        if msg.header.frame_id:
            self.frame_id = msg.header.frame_id
        key = (msg.header.frame_id, ns) if ns else None
        self.intake.offer(key, ns, lambda: decode(msg, self.max_pixels))

    def _on_image(self, msg: Image) -> None:
        self._offer(from_image_msg, msg)

    def _on_compressed(self, msg: CompressedImage) -> None:
        self._offer(from_compressed_msg, msg)
