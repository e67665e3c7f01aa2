"""When the eyes look away while the robot speaks, and where to.

People speaking hold eye contact for a few seconds, then glance away and back; a robot that
stares while it talks reads as cold, one whose eyes wander while it listens as inattentive.
`GazeAversion` is the timing alone (no clock, no thread): `start(now)` when speech begins,
`step(now)` says what is due, `stop()` when speech ends; the controller owns the clock.
"""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class GazeTiming:
    """How long eye contact and looking away last, and where the eyes go.

    Eye contact lasts `contact_s`, looking away `away_s` (random in each range, s); the eyes
    go to a random pan within +-`pan` and tilt within +-`tilt` degrees in `move_s` s.
    """

    contact_s: tuple[float, float] = (2.0, 5.0)
    away_s: tuple[float, float] = (0.5, 4.0)
    pan: float = 20.0
    tilt: float = 15.0
    move_s: float = 0.2


@dataclass(frozen=True)
class GazeMove:
    """The eyes go to (pan, tilt) degrees in move_s; (0, 0) is eye contact."""

    pan: float
    tilt: float
    move_s: float

    @property
    def contact(self) -> bool:
        return self.pan == 0.0 and self.tilt == 0.0


class GazeAversion:
    """Alternates eye contact and looking away while `active` (see the module docstring)."""

    def __init__(self, timing: GazeTiming, rng: random.Random | None = None):
        self.timing, self.rng = timing, rng or random.Random()
        self.active, self.away = False, False
        self.next_at: float | None = None

    def start(self, now: float) -> None:
        """Speech began: eye contact first, for a while."""
        if not self.active:
            self.active, self.away = True, False
            self.next_at = now + self.rng.uniform(*self.timing.contact_s)

    def stop(self) -> GazeMove | None:
        """Speech ended or was cut: back to eye contact (the move, if the eyes were away)."""
        was_away = self.active and self.away
        self.active, self.away, self.next_at = False, False, None
        return GazeMove(0.0, 0.0, self.timing.move_s) if was_away else None

    def step(self, now: float) -> GazeMove | None:
        """The move due at `now`, if any (call again at `next_at`)."""
        if not self.active or self.next_at is None or now < self.next_at:
            return None
        t = self.timing
        self.away = not self.away
        if self.away:
            self.next_at = now + t.move_s + self.rng.uniform(*t.away_s)
            return GazeMove(round(self.rng.uniform(-t.pan, t.pan), 2),
                            round(self.rng.uniform(-t.tilt, t.tilt), 2), t.move_s)
        self.next_at = now + t.move_s + self.rng.uniform(*t.contact_s)
        return GazeMove(0.0, 0.0, t.move_s)
