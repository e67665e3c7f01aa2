"""The faces in view and their crops, as people_node follows them (REP-155).

`/humans/faces/tracked` (latched or plain) lists the faces in view; each has its own
`/humans/faces/<id>/cropped` image, subscribed while the face is tracked and dropped when it
leaves. Endpoints made and destroyed while the node spins have no event handlers (rclpy#1284).
"""
from __future__ import annotations

import time
from typing import Callable

from sensor_msgs.msg import Image

from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS, no_event_handlers
from vision_dialogue.ros.topics import FACES_TRACKED_TOPIC, hri_topic


class FaceCrops:
    """One crop subscription per face in view; `tracked`: face id -> (id, subscription, since).

    `on_crop(face_id, image)` for each crop; `on_gone(face_id)` once a face left the list.
    """

    def __init__(self, node, on_crop: Callable[[str, Image], None],
                 on_gone: Callable[[str], None]):
        self.node, self.on_crop, self.on_gone = node, on_crop, on_gone
        self.tracked: dict[str, tuple[str, object, float]] = {}
        quiet = no_event_handlers("subscription")
        for qos in (LATCHED_QOS, RELIABLE_QOS):     # latched lists and plain ones
            node.create_subscription(pm.IdsList, FACES_TRACKED_TOPIC, self._on_faces, qos,
                                     **quiet)

    def _on_faces(self, msg) -> None:
        pm.follow_ids(self.tracked, msg.ids, self._follow, self._drop)

    def _follow(self, fid: str) -> tuple[str, object, float]:
        sub = self.node.create_subscription(Image, hri_topic("faces", fid, "cropped"),
                                            lambda m: self.on_crop(fid, m), RELIABLE_QOS,
                                            **no_event_handlers("subscription"))
        return fid, sub, time.monotonic()

    def _drop(self, entry: tuple[str, object, float]) -> None:
        fid, sub, _ = entry
        self.node.destroy_subscription(sub)
        self.on_gone(fid)
