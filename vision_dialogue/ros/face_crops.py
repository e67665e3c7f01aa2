"""The faces in view and their crops, as people_node follows them (REP-155).

`/humans/faces/tracked` (latched or plain) lists the faces in view; each has its own
`/humans/faces/<id>/cropped` image, subscribed while the face is tracked and dropped when it
leaves. A face whose id came on a latched list (our detector's) gets a latched crop
subscription as well as a plain one: our detector latches each face's last crop, so a face
that one of the demo's 5-second frames showed still reaches people_node, which subscribes
only once it has read the id (that crop used to go out before anyone listened). A face that
came only on a plain list (a third party's, ROS4HRI's `hri_face_detect`) gets a plain one:
a latched subscription to a plain publisher is refused with a QoS warning on both sides.
A crop that comes through both is taken once, by its stamp. Endpoints made and destroyed
while the node spins have no event handlers (rclpy#1284).
"""
from __future__ import annotations

import time
from typing import Callable

from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image

from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS, no_event_handlers
from vision_dialogue.ros.topics import FACES_TRACKED_TOPIC, hri_topic


class FaceCrops:
    """Crop subscriptions per face in view; `tracked`: face id -> (id, subscriptions, since).

    `on_crop(face_id, image)` for each crop; `on_gone(face_id)` once a face left the list.
    """

    def __init__(self, node, on_crop: Callable[[str, Image], None],
                 on_gone: Callable[[str], None]):
        self.node, self.on_crop, self.on_gone = node, on_crop, on_gone
        self.tracked: dict[str, tuple[str, dict, float]] = {}
        self._last_stamp: dict[str, tuple[int, int]] = {}
        quiet = no_event_handlers("subscription")
        for qos in (LATCHED_QOS, RELIABLE_QOS):     # latched lists and plain ones
            node.create_subscription(pm.IdsList, FACES_TRACKED_TOPIC,
                                     lambda msg, qos=qos: self._on_faces(msg, qos), qos,
                                     **quiet)

    def _on_faces(self, msg, qos: QoSProfile = RELIABLE_QOS) -> None:
        pm.follow_ids(self.tracked, msg.ids, self._follow, self._drop)
        for fid in msg.ids:
            self._subscribe(str(fid), qos)
            if qos is LATCHED_QOS:
                self._subscribe(str(fid), RELIABLE_QOS)

    def _follow(self, fid: str) -> tuple[str, dict, float]:
        return fid, {}, time.monotonic()

    def _subscribe(self, fid: str, qos: QoSProfile) -> None:
        """The face's crop with the durability of the list it came on, once each."""
        subs = self.tracked[fid][1]
        if qos.durability not in subs:
            subs[qos.durability] = self.node.create_subscription(
                Image, hri_topic("faces", fid, "cropped"), lambda m: self._once(fid, m), qos,
                **no_event_handlers("subscription"))

    def _once(self, fid: str, msg) -> None:
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        if stamp != (0, 0) and stamp == self._last_stamp.get(fid):
            return                      # the same crop through the other subscription
        self._last_stamp[fid] = stamp
        self.on_crop(fid, msg)

    def _drop(self, entry: tuple[str, dict, float]) -> None:
        fid, subs, _ = entry
        for sub in subs.values():
            self.node.destroy_subscription(sub)
        self._last_stamp.pop(fid, None)
        self.on_gone(fid)
