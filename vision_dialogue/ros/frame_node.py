"""A managed node that analyses camera frames one at a time on its intake's worker.

detector_node and events_node share this skeleton: models behind one lock, so a cleanup frees
them between frames and never during one; a frame looked at only while the node is active
and its models are loaded; deactivate and exit wait (a bounded time) for the frame in hand;
the work's rate and time per frame for `/diagnostics`. Each says what its models are and what
a frame gives (`look_at`, `free_models`; `detector` is its model once loaded).
"""
from __future__ import annotations

import threading
import time

from vision_dialogue.common.frame_intake import FrameIntake, wait_for_frame_in_hand
from vision_dialogue.common.health import Throughput
from vision_dialogue.ros.managed import ManagedNode


class FrameAnalysisNode(ManagedNode):
    """Frames in on `intake` (made by the subclass), looked at under the models' lock."""

    #: the node's word for itself in its log lines ("detector", "events")
    WHAT = "frames"

    def __init__(self, node_name: str, **kwargs):
        super().__init__(node_name, **kwargs)
        self.intake: FrameIntake | None = None      # until built (destroy_node after a refusal)
        self.detector = None                        # the model a frame goes through, once loaded
        self._models = threading.Lock()
        self.published = 0
        self.work = Throughput()

    # --- what a subclass says ----------------------------------------------------------------
    def models_ready(self) -> bool:
        """Whether the models are loaded (a frame before is not looked at)."""
        return self.detector is not None

    def look_at(self, bgr, stamp_ns: int) -> None:
        """One frame through the models, its messages published (the models' lock held)."""
        raise NotImplementedError

    def free_models(self) -> None:
        """Close and drop the models (the models' lock held)."""
        raise NotImplementedError

    def exit_summary(self) -> str | None:
        """A line for the log at exit, or None."""
        return None

    # --- the shared part ---------------------------------------------------------------------
    def look(self, bgr, stamp_ns: int) -> None:
        """On the intake worker: one frame, stamped as it came (else now), timed."""
        stamp_ns = stamp_ns or self.get_clock().now().nanoseconds
        t0 = time.monotonic()
        with self._models:               # cleanup frees them between frames, not during one;
            if not self.models_ready() or not self.active:   # deactivate waits for the frame
                return
            self.look_at(bgr, stamp_ns)
            self.work.add(time.monotonic() - t0)

    def deactivate(self) -> None:
        wait_for_frame_in_hand(self._models, self.get_logger().warning, "inactive")
        self.get_logger().info(f"{self.WHAT} inactive: frames ignored, the models kept")

    def cleanup(self) -> None:
        """Free the models (the next configure loads them again)."""
        with self._models:
            self.free_models()

    def destroy_node(self):
        if self.intake is not None:
            self.intake.close(timeout=0)     # no new frame; the one in hand is waited for below
            summary = self.exit_summary()
            if summary:
                self.get_logger().info(summary)
        # a frame still in the models is waited for, not past FRAME_AT_EXIT_S (they load at
        # configure, so a frame takes its usual time even on a loaded machine)
        if wait_for_frame_in_hand(self._models, self.get_logger().warning, "exiting"):
            self.cleanup()
        return super().destroy_node()
