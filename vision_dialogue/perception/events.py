"""Events between frames: gestures, arrivals, departures and scene changes from a fast stream.

The conversation sees a frame every few seconds; a wave lasts one or two. The detector looks
at the camera's stream (5-10 frames a second) and turns what persists or moves into events:

* ``wave``: an open hand raised whose wrist swings sideways (``wave_swings`` changes of
  direction of at least ``wave_amplitude`` of the frame width within ``wave_window_s``; a
  machine that looks at fewer frames, e.g. 1.5 a second on a loaded CPU, sees a wave of one
  swing a second as a slower one and cannot see two changes of direction in that window, so
  the window is twice as long while it holds fewer than 2 * (``wave_swings`` + 1) glimpses
  of the hand);
* ``raised_hand``: an open hand or an arm held up, and still, for ``hold_s``, seen still
  (within half of ``wave_amplitude``) in at least ``still_glimpses`` frames: one or two
  frames cannot tell a held hand from a waving one (a loaded machine that looks at two
  frames a second would call every wave a raise);
* ``point``, ``thumbs_up``: the hand gesture seen in ``confirm_frames`` frames in a row;
* ``arrived``, ``left``: the number of people changed and stayed changed for
  ``presence_frames`` frames (trackers lose people for a frame or two);
* ``scene_change``: the view differs from the last settled view (the observer's measure,
  ``common.images.thumbnail_difference``, above ``scene_change_level``) for ``confirm_frames``
  frames, with the same number of people.

A gesture or a scene change is not repeated within ``cooldown_s``; every settled change of
the number of people is reported. `EventDetector.update` takes a
`Glimpse` (what one frame shows, from `FrameObserver.analyse`), so the timing logic is tested
without models; `EventDetector.observe` runs the observer (faces, pose and hands only) on a
frame first. No ROS imports; the events node publishes the events, the manager puts them in
the timeline.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from vision_dialogue.common.images import thumbnail_difference
from vision_dialogue.common.objects import horizontal_position
from vision_dialogue.perception.observer import ARMS_RAISED, OPEN_HAND, POINTING, THUMBS_UP, \
    VIEW_CHANGE_LEVEL, FrameObserver, HandSeen, Observation

EVENT_KINDS = ("wave", "raised_hand", "point", "thumbs_up", "arrived", "left", "scene_change")
EVENT_DETECTORS = ("faces", "pose", "hands")
"""The observer's detectors the event detector needs (no OCR, colours or segmentation)."""
_COUNTED = ("arrived", "left")
_HELD_GESTURES = {POINTING: "point", THUMBS_UP: "thumbs_up"}
_NUMBERS = ("no one", "one person", "two people", "three people", "four people")


@dataclass(frozen=True)
class VisualEvent:
    """One event: its kind (EVENT_KINDS), a short sentence, when, and where in the image."""

    kind: str
    text: str
    stamp: float
    where: str = ""          # "on the left" | "in the middle" | "on the right" | ""
    confidence: float = 1.0


@dataclass
class Glimpse:
    """What one stream frame shows, as far as events go."""

    stamp: float
    people: int
    hands: list[HandSeen] = field(default_factory=list)
    arm_raised: bool = False
    thumbnail: np.ndarray | None = None
    dark: bool = False

    @classmethod
    def from_observation(cls, obs: Observation, stamp: float) -> "Glimpse":
        return cls(stamp, len(obs.people), list(obs.hands), obs.posture in ARMS_RAISED,
                   obs.thumbnail, obs.dark)


def _people(n: int) -> str:
    return _NUMBERS[n] if n < len(_NUMBERS) else f"{n} people"


#: frames a second the detector must look at to see a wave of one swing a second (a sparse
#: look, see the module docstring; at two a second a wave can alias to no motion at all)
WAVE_MIN_RATE = 1.5


@dataclass
class EventConfig:
    """The detector's thresholds (see the module docstring); validated on construction."""

    confirm_frames: int = 2
    presence_frames: int = 3
    hold_s: float = 1.0
    wave_window_s: float = 2.0
    wave_swings: int = 2
    wave_amplitude: float = 0.03
    still_glimpses: int = 3
    cooldown_s: float = 5.0
    scene_change_level: float = VIEW_CHANGE_LEVEL
    kinds: tuple[str, ...] = EVENT_KINDS

    def __post_init__(self):
        for name in ("confirm_frames", "presence_frames", "wave_swings", "still_glimpses"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)!r} must be >= 1")
        for name in ("hold_s", "wave_window_s", "wave_amplitude", "cooldown_s",
                     "scene_change_level"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be > 0")
        unknown = [k for k in self.kinds if k not in EVENT_KINDS]
        if unknown:
            raise ValueError(f"kinds: unknown {unknown}; known: {list(EVENT_KINDS)}")


class EventDetector:
    """Glimpses in, VisualEvents out (see the module docstring). Thread-safe."""

    def __init__(self, config: EventConfig | None = None, observer: FrameObserver | None = None):
        self.cfg = config or EventConfig()
        self._observer = observer
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}              # kind -> stamp of its last event
        self._streaks: dict[str, int] = {}             # held gesture -> frames in a row
        self._open_hand: deque[tuple[float, float]] = deque()   # (stamp, wrist x)
        self._raised_since: float | None = None
        self._raised_glimpses = 0                      # glimpses with it up since then
        self._people_settled = 0
        self._people_candidate: tuple[int, int] = (0, 0)        # (count, frames in a row)
        self._scene: np.ndarray | None = None           # thumbnail of the settled view
        self._scene_streak = 0
        self._scene_people = 0                           # settled count when it began

    def observe(self, frame_bgr: np.ndarray, stamp: float) -> list[VisualEvent]:
        """Run the observer on a BGR frame, then update()."""
        return self.update(Glimpse.from_observation(self._observing().analyse(frame_bgr), stamp))

    def warm_up(self) -> list[str]:
        """Load the models now (the detectors available are returned).

        Loading takes seconds on a busy machine; done on the first frame, it spent the frames
        of a short arrival, so the events node loads them when it is configured.
        """
        return self._observing().warm_up()

    def _observing(self) -> FrameObserver:
        if self._observer is None:
            self._observer = FrameObserver(EVENT_DETECTORS, max_side=320)
        return self._observer

    def close(self) -> None:
        if self._observer is not None:
            self._observer.close()

    def update(self, g: Glimpse) -> list[VisualEvent]:
        """The events this glimpse completes (usually none)."""
        with self._lock:
            found = self._scene_change(g)
            if not g.dark:          # in the dark nobody is seen, which is not nobody there
                found = self._presence(g) + found + self._gestures(g)
            return [e for e in found if self._allowed(e)]

    # -- parts ----------------------------------------------------------------------------------
    def _allowed(self, e: VisualEvent) -> bool:
        if e.kind not in self.cfg.kinds:
            return False
        if e.kind in _COUNTED:
            return True             # already settled over presence_frames; each one counts
        if e.stamp - self._last.get(e.kind, -1e18) < self.cfg.cooldown_s:
            return False
        self._last[e.kind] = e.stamp
        return True

    def _presence(self, g: Glimpse) -> list[VisualEvent]:
        count, streak = self._people_candidate
        streak = streak + 1 if g.people == count else 1
        self._people_candidate = (g.people, streak)
        before = self._people_settled
        if streak < self.cfg.presence_frames or g.people == before:
            return []
        self._people_settled = g.people
        now = _people(g.people)
        if g.people > before:
            who = "a person" if g.people - before == 1 else "people"
            return [VisualEvent("arrived", f"{who} came into view ({now} in view now)",
                                g.stamp)]
        who = "a person" if before - g.people == 1 else "people"
        return [VisualEvent("left", f"{who} left ({now} in view now)", g.stamp)]

    def _scene_change(self, g: Glimpse) -> list[VisualEvent]:
        if g.thumbnail is None:
            return []
        if self._scene is None:
            self._scene = g.thumbnail
            return []
        if thumbnail_difference(g.thumbnail, self._scene) < self.cfg.scene_change_level:
            self._scene, self._scene_streak = g.thumbnail, 0     # follow slow drift
            return []
        self._scene_streak += 1
        if self._scene_streak == 1:
            self._scene_people = self._people_settled
        if self._scene_streak < self.cfg.confirm_frames:
            return []
        self._scene, self._scene_streak = g.thumbnail, 0
        if (not g.dark and g.people != self._people_settled) \
                or self._people_settled != self._scene_people:
            return []               # people came or went: that is the event, not the view
        return [VisualEvent("scene_change", "it went dark" if g.dark else "the view changed",
                            g.stamp)]

    def _gestures(self, g: Glimpse) -> list[VisualEvent]:
        out: list[VisualEvent] = []
        seen = {h.gesture: h for h in g.hands if h.gesture}
        for gesture, kind in _HELD_GESTURES.items():
            streak = self._streaks.get(gesture, 0) + 1 if gesture in seen else 0
            self._streaks[gesture] = streak
            if streak == self.cfg.confirm_frames:
                where = horizontal_position(seen[gesture].x)
                verb = "pointed" if kind == "point" else "gave a thumbs up"
                out.append(VisualEvent(kind, f"someone {where} {verb}", g.stamp, where))
        out += self._wave_or_raise(g, seen.get(OPEN_HAND))
        return out

    def _wave_or_raise(self, g: Glimpse, hand: HandSeen | None) -> list[VisualEvent]:
        track = self._open_hand
        if hand is not None:
            track.append((g.stamp, hand.x))
        window = self.cfg.wave_window_s
        if sum(g.stamp - t <= window for t, _ in track) < 2 * (self.cfg.wave_swings + 1):
            window *= 2         # too few glimpses to see the swings: a sparse look (docstring)
        while track and g.stamp - track[0][0] > window:
            track.popleft()
        if hand is None and not g.arm_raised:
            self._raised_since, self._raised_glimpses = None, 0
            if not track:
                return []
        elif self._raised_since is None:
            self._raised_since, self._raised_glimpses = g.stamp, 1
        elif g.stamp >= self._raised_since:
            self._raised_glimpses += 1
        xs = [x for _, x in track]
        where = horizontal_position(float(np.mean(xs))) if xs else ""
        if _swings(xs, self.cfg.wave_amplitude) >= self.cfg.wave_swings:
            track.clear()
            self._raised_since = g.stamp + self.cfg.cooldown_s    # a wave is not also a raise
            self._raised_glimpses = 0
            return [VisualEvent("wave", f"someone {where} waved".replace("  ", " "), g.stamp,
                                where)]
        if self._raised_since is None or self._raised_glimpses < self.cfg.still_glimpses \
                or g.stamp - self._raised_since < self.cfg.hold_s:
            return []
        up = [x for t, x in track if t >= self._raised_since]   # the hand since it went up
        if up and max(up) - min(up) >= self.cfg.wave_amplitude / 2:
            return []               # it moved: maybe a wave seen too sparsely to count
        self._raised_since, self._raised_glimpses = g.stamp + self.cfg.cooldown_s, 0
        who = f"someone {where}" if where else "someone"
        return [VisualEvent("raised_hand", f"{who} raised a hand", g.stamp, where)]


def _swings(xs: list[float], amplitude: float) -> int:
    """Changes of direction of a 1-D track, counting only moves of at least `amplitude`."""
    swings, direction, anchor = 0, 0, None
    for x in xs:
        if anchor is None:
            anchor = x
            continue
        step = x - anchor
        if abs(step) < amplitude:
            continue
        d = 1 if step > 0 else -1
        if direction and d != direction:
            swings += 1
        direction, anchor = d, x
    return swings
