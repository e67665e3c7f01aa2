"""A camera image topic and its image_transport `/compressed` companion into one FrameIntake.

Used by every node that takes camera frames (the manager, the events node): both topics are
subscribed with a QoS that follows the camera's (`ros/qos.py`), on one mutually exclusive
callback group; the callbacks only queue (`common/frame_intake.py`), and a frame that comes on both
topics with one stamp is decoded and added once.

Frames lost between processes are noticed (camera/loss.py): from each message's publication
sequence number, from the middleware's "message lost" reports (which come also when no frame
arrives at all), and from a publisher heard from not at all (while its node's /compressed, if
it publishes one, delivers: a camera that waits to start is silent on both). One warning names
the publisher, the loss and the fix; when `<topic>/compressed` is published, the raw
subscription is dropped and the frames come from there. Frames larger than WORK_MAX_SIDE are
downscaled on arrival (one log line).
"""
from __future__ import annotations

from typing import Callable

import cv2
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image

from vision_dialogue.common.frame_intake import FrameIntake
from vision_dialogue.camera.loss import LossMeter, PublisherLoss, loss_fix
from vision_dialogue.ros.dds import profile_path
from vision_dialogue.ros.image_msgs import from_compressed_msg, from_image_msg, stamp_to_ns
from vision_dialogue.ros.qos import (FollowingSubscription, endpoint_named, endpoint_node,
                                     image_qos)

#: frames whose longer side is larger are downscaled to it on arrival (a 4000x3000 driver
#: frame is 36 MB; nothing downstream needs more than this)
WORK_MAX_SIDE = 1920
#: a publisher matched this long with no frame from it (and no loss reported): its frames are
#: lost (a camera publishing more seldom than this is told apart by the loss reports)
SILENT_S = 8.0
#: a losing publisher whose node the ROS graph does not name yet is reported after this
#: long at the latest (named as soon as the graph knows it)
NAME_WAIT_S = 3.0
#: how often the loss is judged: a warning comes within this of the loss being clear
CHECK_PERIOD_S = 1.0


class ImageTopicInput:
    """`topic` (Image) and `<resolved topic>/compressed` (CompressedImage) into `intake`.

    qos_choice: an IMAGE_QOS_CHOICES value ("auto" follows the publishers). max_pixels: the
    largest image decoded. taking(): whether frames go on to the intake now (False: an inactive
    managed node; their loss is still counted). `frame_id` is the newest frame's header
    frame_id (`default_frame_id` until one comes); `subs` are the two FollowingSubscriptions.
    """

    def __init__(self, node, topic: str, intake: FrameIntake, qos_choice: str,
                 max_pixels: int, default_frame_id: str = "camera",
                 taking: Callable[[], bool] = lambda: True):
        self.intake, self.max_pixels, self.taking = intake, max_pixels, taking
        self.frame_id = default_frame_id
        self.node, self.log = node, node.get_logger()
        self.loss = LossMeter()                   # the raw topic's publishers
        self.heard: set[bytes] = set()            # publishers a frame came from
        self.reported: set[bytes] = set()
        self.unnamed_since: dict[bytes, float] = {}   # losing, its node not yet named
        self._downscale_logged = False
        # image_transport naming: the compressed topic follows the resolved (remapped) image
        self.topic = node.resolve_topic_name(topic)
        follow, base = qos_choice == "auto", image_qos(qos_choice)
        group, log = MutuallyExclusiveCallbackGroup(), node.get_logger()
        self.subs = [FollowingSubscription(node, msg_type, name, callback, base, follow=follow,
                                           callback_group=group,
                                           on_change=lambda sub: log.info(sub.status),
                                           on_lost=on_lost)
                     for msg_type, name, callback, on_lost in (
                         (Image, self.topic, self._on_image, self.loss.lost),
                         (CompressedImage, self.topic + "/compressed", self._on_compressed,
                          None))]
        self._timer = node.create_timer(CHECK_PERIOD_S, self.check_loss, callback_group=group)

    def _offer(self, decode, msg, info, kind: str) -> None:
        gid = bytes(info.get("publisher_gid", {}).get("data", b"")) if info else b""
        self.heard.add(gid)
        if kind == "raw":
            self.loss.arrived(gid, info.get("publication_sequence_number") if info else None)
        ns = stamp_to_ns(msg.header.stamp)
        if msg.header.frame_id:
            self.frame_id = msg.header.frame_id
        key = (msg.header.frame_id, ns) if ns else None
        if not self.taking():       # an inactive (lifecycle) node: counted above, not decoded
            return
        self.intake.offer(key, ns, lambda: self._downscaled(decode(msg, self.max_pixels)))

    def _on_image(self, msg: Image, info) -> None:    # info: rclpy passes MessageInfo
        self._offer(from_image_msg, msg, info, "raw")

    def _on_compressed(self, msg: CompressedImage, info) -> None:
        self._offer(from_compressed_msg, msg, info, "compressed")

    def _downscaled(self, img):
        h, w = img.shape[:2]
        if max(h, w) <= WORK_MAX_SIDE:
            return img
        f = WORK_MAX_SIDE / max(h, w)
        out = cv2.resize(img, (max(1, round(w * f)), max(1, round(h * f))),
                         interpolation=cv2.INTER_AREA)
        if not self._downscale_logged:
            self._downscale_logged = True
            self.log.info(f"{self.topic}: frames of {w}x{h} are downscaled to "
                          f"{out.shape[1]}x{out.shape[0]} on arrival")
        return out

    # --- loss between processes ------------------------------------------------------------
    def check_loss(self) -> None:
        """Report each losing publisher once; drop the raw topic when /compressed is there."""
        now = self.loss.clock()
        raw_sub, comp_sub = self.subs
        publishers = {bytes(i.endpoint_gid): i for i in
                      self.node.get_publishers_info_by_topic(raw_sub.topic)} \
            if raw_sub.sub is not None else {}
        for gid in publishers:
            self.loss.seen(gid)             # the first time it was matched, kept by the meter
        for gid, info in publishers.items():
            if gid in self.reported:
                continue
            losing = self._losing(gid, info)
            matched_for = now - self.loss.first_seen(gid)
            silent = matched_for >= SILENT_S and self._silent(gid, info)
            if (losing or silent) and not endpoint_named(info) and \
                    now - self.unnamed_since.setdefault(gid, now) < NAME_WAIT_S:
                continue                    # the warning names the node: wait for the graph
            if losing or silent:
                self.reported.add(gid)
                got = (f"{losing.arrived} of {losing.announced} frames arrived in "
                       f"{max(1.0, now - losing.since):.0f} s" if losing else
                       f"none of its frames arrived in {matched_for:.0f} s")
                self._report(info, got)

    def _silent(self, gid: bytes, info) -> bool:
        """No frame from this raw publisher, while its node's /compressed, if any, delivers.

        A camera that publishes nothing yet (waiting for its listeners, or an inactive
        lifecycle node) is silent on both topics: that is no loss.
        """
        if gid in self.heard:
            return False
        node = endpoint_node(info)
        companions = [bytes(i.endpoint_gid) for i in
                      self.node.get_publishers_info_by_topic(self.subs[1].topic)
                      if endpoint_node(i) == node]
        return not companions or any(c in self.heard for c in companions)

    def _losing(self, gid: bytes, info) -> PublisherLoss | None:
        """`gid`'s loss, by its sequence numbers or, best effort, by the middleware's reports."""
        by_seq = next((p for p in self.loss.losing() if p.publisher == gid), None)
        if by_seq is not None or not _best_effort(info):   # reliable frames are not lost
            return by_seq
        return self.loss.reported_loss(gid)

    def losing(self) -> list[PublisherLoss]:
        """The raw topic's publishers that lose frames on the way (for /diagnostics)."""
        raw_sub = self.subs[0]
        if raw_sub.sub is None:
            return []
        infos = {bytes(i.endpoint_gid): i for i in
                 self.node.get_publishers_info_by_topic(raw_sub.topic)}
        return [loss for gid, info in infos.items() if (loss := self._losing(gid, info))]

    def _report(self, info, got: str) -> None:
        raw_sub, comp_sub = self.subs
        who = endpoint_node(info) if endpoint_named(info) else "a publisher (node not named)"
        compressed = self.node.get_publishers_info_by_topic(comp_sub.topic)
        qos = info.qos_profile.reliability.name.lower().replace("_", " ")
        profile = profile_path()
        self.log.warning(
            f"{raw_sub.topic}: frames from {who} ({qos}) are lost between processes: {got}. "
            f"Fix: {loss_fix(raw_sub.topic, str(profile or 'config/fastdds.xml'))}"
            + (f"; {comp_sub.topic} is published: using it instead" if compressed else ""))
        if compressed:
            raw_sub.destroy()


def _best_effort(info) -> bool:
    """Whether a graph endpoint (TopicEndpointInfo) offers best-effort delivery."""
    return info.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
