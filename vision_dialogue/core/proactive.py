"""When the robot speaks first, beyond the paper's user-initiated turns.

Triggers: someone waves at the robot (an event of the events node); a person arrives
(someone in view after nobody for `absent_s`; needs a people count, which the perception
observer gives for text-only models, or an "arrived" event); and the scene changes
notably (`common.images.thumbnail_difference` of consecutive frames, the perception observer's
measure of "the view just changed", above `scene_change`). A remark is made only when the
robot is not talking or thinking, the user has been quiet for `quiet_s`, nothing is waiting
to be answered, and the last remark was at least `min_interval_s` ago. A wave that comes
while the robot may not speak (it is busy with someone else, or was just spoken to) is held for
`wave_hold_s` and answered at the first frame when it may: a wave asks for attention, and the
person is still there a few seconds later. Mode "paper" never speaks first (the paper's
behaviour).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from vision_dialogue.common.images import change_thumbnail, thumbnail_difference

PROACTIVE_MODES = ("paper", "arrivals", "arrivals_and_scenes")


@dataclass
class ProactiveConfig:
    mode: str = "paper"
    min_interval_s: float = 60.0
    quiet_s: float = 8.0
    absent_s: float = 20.0
    scene_change: float = 40.0
    wave_hold_s: float = 15.0

    def __post_init__(self):
        if self.mode not in PROACTIVE_MODES:
            raise ValueError(f"proactive mode {self.mode!r}: one of {list(PROACTIVE_MODES)}")
        if self.wave_hold_s < 0:
            raise ValueError(f"wave_hold_s {self.wave_hold_s}: 0 (answer at once or never) "
                             "or more")


class ProactivePolicy:
    """Decides, frame by frame, whether to make a remark now (see the module docstring)."""

    def __init__(self, config: ProactiveConfig, clock=time.monotonic):
        self.cfg, self.clock = config, clock
        self._lock = threading.Lock()
        self._busy = False                   # the robot speaks or thinks
        self._last_user = -1e9
        self._last_remark = clock()          # none in the first min_interval_s either
        self._nobody_since: float | None = None
        self._prev: np.ndarray | None = None   # the previous frame's change thumbnail
        self._wave_at: float | None = None   # a wave not answered yet (held, wave_hold_s)

    def user_spoke(self) -> None:
        with self._lock:
            self._last_user = self.clock()

    def robot_busy(self, busy: bool) -> None:
        with self._lock:
            self._busy = busy

    def remark_made(self) -> None:
        with self._lock:
            self._last_remark = self.clock()

    def on_event(self, kind: str, waiting: int = 0) -> str | None:
        """'wave' or 'arrival' for a detector's event (camera/events), else None.

        A wave is answered in every mode but paper (it asks for the robot's attention), now or,
        held, at a later frame (on_frame); an arrival counts only when nobody was seen for
        `absent_s` before it, as on_frame does.
        """
        with self._lock:
            if kind == "wave":
                trigger = "wave"
                if self.cfg.mode != "paper":
                    self._wave_at = self.clock()
            elif kind == "arrived" and self._nobody_since is not None and \
                    self.clock() - self._nobody_since >= self.cfg.absent_s:
                trigger = "arrival"
            else:
                return None
            if not self._may_speak(waiting):
                return None
            self._wave_at = None
            return trigger

    def _may_speak(self, waiting: int) -> bool:
        now = self.clock()
        return not (self.cfg.mode == "paper" or self._busy or waiting
                    or now - self._last_user < self.cfg.quiet_s
                    or now - self._last_remark < self.cfg.min_interval_s)

    def on_frame(self, bgr: np.ndarray, people: int | None, waiting: int = 0) -> str | None:
        """'wave' (a held one), 'arrival', 'scene' or None now; `waiting`: turns queued."""
        now = self.clock()
        scenes = self.cfg.mode == "arrivals_and_scenes"
        thumb = change_thumbnail(bgr) if scenes else None     # no work for other modes
        with self._lock:
            prev, self._prev = self._prev, thumb
            arrived = False
            if people is not None:
                if people == 0:
                    if self._nobody_since is None:
                        self._nobody_since = now
                else:
                    arrived = (self._nobody_since is not None
                               and now - self._nobody_since >= self.cfg.absent_s)
                    self._nobody_since = None
            if self._wave_at is not None and now - self._wave_at > self.cfg.wave_hold_s:
                self._wave_at = None                  # held too long: the moment has passed
            if not self._may_speak(waiting):
                return None
            if self._wave_at is not None:
                self._wave_at = None
                return "wave"
            if arrived:
                return "arrival"
            if (scenes and prev is not None
                    and thumbnail_difference(prev, thumb) >= self.cfg.scene_change):
                return "scene"
            return None
