"""Stable ids for faces across frames, as REP-155 (ROS4HRI) asks of a face detector.

A face keeps its id while its box overlaps the previous frame's (IoU at least `min_iou`, the
best match first); a face that is not matched for `max_missed` frames is gone. Ids are five
random letters, as hri_face_detect makes them (a ROS name token must not start with a digit:
the id is part of /humans/faces/<id>/roi). No ROS imports.
"""
from __future__ import annotations

import secrets
import string
from dataclasses import dataclass

from vision_dialogue.perception.object_detector import box_iou


def new_id() -> str:
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(5))


def iou(a: tuple, b: tuple) -> float:
    """Intersection over union of two (x, y, w, h) boxes."""
    def corners(box):
        return box[0], box[1], box[0] + box[2], box[1] + box[3]
    return box_iou(corners(a), corners(b))


@dataclass
class Track:
    id: str
    box: tuple            # x, y, w, h (relative)
    missed: int = 0


class FaceTracker:
    """update(boxes) -> the id of each box, in order; `tracked` lists the ids in view."""

    def __init__(self, min_iou: float = 0.2, max_missed: int = 1):
        self.min_iou, self.max_missed = min_iou, max_missed
        self._tracks: list[Track] = []

    @property
    def tracked(self) -> list[str]:
        return [t.id for t in self._tracks if t.missed == 0]

    def update(self, boxes: list[tuple]) -> list[str]:
        pairs = sorted(((iou(t.box, b), ti, bi) for ti, t in enumerate(self._tracks)
                        for bi, b in enumerate(boxes)), reverse=True)
        ids: list[str | None] = [None] * len(boxes)
        used: set[int] = set()
        for overlap, ti, bi in pairs:
            if overlap < self.min_iou:
                break
            if ti in used or ids[bi] is not None:
                continue
            used.add(ti)
            track = self._tracks[ti]
            track.box, track.missed = boxes[bi], 0
            ids[bi] = track.id
        for ti, track in enumerate(self._tracks):
            if ti not in used:
                track.missed += 1
        self._tracks = [t for t in self._tracks if t.missed <= self.max_missed]
        for bi, box in enumerate(boxes):
            if ids[bi] is None:
                track = Track(new_id(), box)
                self._tracks.append(track)
                ids[bi] = track.id
        return [i for i in ids if i is not None]
