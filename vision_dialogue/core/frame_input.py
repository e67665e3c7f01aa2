"""The one way a decoded camera frame enters the conversation, with its detections' note.

The manager's frame intake (common/frame_intake.py) hands every frame it accepts to
`FrameInput.take` on its worker thread: the frame is stamped (the camera's stamp, else the
clock's), the detections that came for it before it (common/objects.ObjectNotes) become its note,
and it enters the conversation, whose listeners hear it as a FrameEntry (core/entries.py) on
the intake's worker: the turn-taker, the manager's outputs, the transcript. ROS-free.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from vision_dialogue.core.conversation import Conversation
from vision_dialogue.common.images import Frame
from vision_dialogue.common.objects import ObjectNotes


class FrameInput:
    """A frame with its objects' note into the conversation (see the module docstring).

    notes: the detections matched to frames (None: no detector input). clock_ns(): now, for a
    frame the camera did not stamp. `width`: the newest frame's width (detections' positions).
    """

    def __init__(self, conversation: Conversation, notes: ObjectNotes | None,
                 clock_ns: Callable[[], int]):
        self.conversation, self.notes, self.clock_ns = conversation, notes, clock_ns
        self.width = 0

    def take(self, bgr: np.ndarray, stamp_ns: int) -> Frame:
        """Add one decoded frame (ValueError for a malformed one: the intake rejects it)."""
        stamp = (stamp_ns or self.clock_ns()) / 1e9
        self.width = bgr.shape[1]
        if self.notes is None:
            return self.conversation.add_frame(bgr, stamp=stamp)
        with self.notes.in_order:         # a set for this frame waits till the frame is in
            return self.conversation.add_frame(bgr, stamp=stamp,
                                               objects=self.notes.attach(stamp))
