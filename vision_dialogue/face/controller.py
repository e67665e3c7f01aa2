"""The face that follows the conversation: turn events in; expressions, gestures and gaze out.

The speech node tells it what happens (`heard` a person's line, a reply `sentence` about to be
said, `reply_done`, `interrupted`, the turn `state`). It answers at once on `publish` (ROS
topics: never blocks) and, for a robot face such as Furhat, through one outbox thread: a robot
that is slow or gone delays only its own gestures, never speech, and a newer command replaces
one still waiting of the same slot (expression, gaze, idle), so the face never lags behind the
conversation. One clock thread runs gaze aversion while the robot speaks, idle movements while
it listens, and lets an expression fade to neutral after `hold_s`.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from vision_dialogue.face.affect import NEUTRAL, Affect, reaction, read_affect
from vision_dialogue.face.gaze import GazeAversion, GazeMove, GazeTiming
from vision_dialogue.face.gestures import GestureError, builtin_gesture, expression_gesture, \
    idle_gesture

GENERATED, BUILTIN = "generated", "builtin"
#: the moments a face record is made at
HEARD, SENTENCE = "heard", "sentence"


@dataclass(frozen=True)
class FaceConfig:
    """What the face does (the speech node's parameters); each part can be off."""

    expressions: bool = True
    gaze_aversion: bool = True
    idle: bool = True
    gaze: GazeTiming = field(default_factory=GazeTiming)
    max_head: float = 15.0
    hold_s: float = 4.0
    idle_every_s: tuple[float, float] = (4.0, 8.0)
    gesture_style: str = GENERATED


@dataclass(frozen=True)
class FaceCue:
    """An expression shown: at what moment, for which line, with which gesture (or none)."""

    moment: str
    affect: Affect
    line: str = ""
    turn_id: int = 0
    gesture: dict | str | None = None

    def as_record(self) -> dict:
        g = self.gesture
        name = g if isinstance(g, str) else (g or {}).get("name", "")
        return {"moment": self.moment, "line": self.line, "turn_id": int(self.turn_id),
                **self.affect.as_record(), "gesture": name}


class FaceOutput:
    """Where the face goes; every method may be left out (a no-op)."""

    def expression(self, cue: FaceCue) -> None:
        """Show the cue's face; its gesture, if any, comes through `gesture` too."""

    def gesture(self, gesture: dict | str) -> None:
        """Play a gesture: a checked GestureDefinition, or a built-in gesture's name."""

    def gaze(self, move: GazeMove) -> None:
        """Move the eyes ((0, 0): eye contact with the person attended)."""


class _Outbox:
    """One thread sending to a robot face; newer commands replace waiting ones of their slot."""

    def __init__(self, robot: FaceOutput, log: logging.Logger):
        self.robot, self.log = robot, log
        self._cv = threading.Condition()
        self._pending: dict[str, tuple] = {}
        self._closed = False
        self.failing = False          # logged once per outage, as the speech backends do
        self._thread = threading.Thread(target=self._run, name="face-robot", daemon=True)
        self._thread.start()

    def put(self, slot: str, method: str, arg) -> None:
        with self._cv:
            self._pending.pop(slot, None)       # re-inserted last: keeps the order of arrival
            self._pending[slot] = (method, arg)
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                slot = next(iter(self._pending))
                method, arg = self._pending.pop(slot)
            try:
                getattr(self.robot, method)(arg)
            except Exception as e:  # noqa: BLE001 - a robot's failure must not stop the face
                if not self.failing:
                    self.log.warning(f"face: the robot's {method} failed ({e}); its face "
                                     "waits until it answers again")
                self.failing = True
                continue
            if self.failing:
                self.log.info("face: the robot's face answers again")
            self.failing = False

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout=1.0)


class FaceController:
    """See the module docstring. `on_record(dict)`: every expression shown, for the transcript."""

    def __init__(self, config: FaceConfig, publish: FaceOutput, robot: FaceOutput | None = None,
                 *, on_record: Callable[[dict], None] = lambda record: None,
                 rng: random.Random | None = None, logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.config, self.publish, self.on_record = config, publish, on_record
        self.rng, self.clock = rng or random.Random(), clock
        self.log = logger or logging.getLogger("vision_dialogue.face")
        self._outbox = _Outbox(robot, self.log) if robot is not None else None
        self._gaze = GazeAversion(config.gaze, self.rng)
        self._cv = threading.Condition()
        self._closed = False
        self._listening = False
        self._shown: tuple[str, float] = (NEUTRAL, 0.0)     # expression, when
        self._idle_at = self._next_idle(self.clock())
        self._thread = threading.Thread(target=self._clock_loop, name="face-clock", daemon=True)
        self._thread.start()
        read_affect("warm")           # the lexicon loads now (~20 ms), not at the first line

    # ------------------------------------------------------------------ turn events
    def heard(self, text: str) -> Affect:
        """The person said `text`: the robot's face reacts now."""
        felt = reaction(read_affect(text))
        if self.config.expressions:
            self._show(FaceCue(HEARD, felt, text, 0, self._gesture_for(felt)), record=True)
        return felt

    def sentence(self, turn_id: int, text: str, first: bool = False) -> None:
        """A sentence of the reply is about to be said: its own expression, if it has one."""
        with self._cv:
            self._listening = False
            if self.config.gaze_aversion:
                self._gaze.start(self.clock())
            self._cv.notify()
        own = read_affect(text)
        if self.config.expressions and own.strong:
            self._show(FaceCue(SENTENCE, own, text, turn_id, self._gesture_for(own)),
                       record=True)

    def reply_done(self, turn_id: int = 0) -> None:
        """The reply was said: eye contact again."""
        self._end_speech()

    def interrupted(self) -> None:
        """The person barged in (or the reply was cancelled): eye contact at once."""
        self._end_speech()

    def state(self, name: str) -> None:
        """The turn state: idle movements only while the robot listens."""
        with self._cv:
            self._listening = name == "listening"
            if self._listening:
                self._idle_at = self._next_idle(self.clock())
            self._cv.notify()

    # ------------------------------------------------------------------ outputs
    def _gesture_for(self, affect: Affect):
        if not affect.strong:
            return None
        if self.config.gesture_style == BUILTIN:
            return builtin_gesture(affect) or None
        try:
            return expression_gesture(affect, self.rng, max_head=self.config.max_head)
        except GestureError as e:       # never sent: the face shows on the topics alone
            self.log.warning(f"face: a {affect.expression} gesture was dropped: {e}")
            return None

    def _show(self, cue: FaceCue, record: bool = False) -> None:
        with self._cv:
            self._shown = (cue.affect.expression, self.clock())
            self._cv.notify()
        self._safely(self.publish.expression, cue)
        if cue.gesture:
            self._safely(self.publish.gesture, cue.gesture)
            self._to_robot("expression", "gesture", cue.gesture)
        if record:
            self._safely(self.on_record, cue.as_record())

    def _move_eyes(self, move: GazeMove) -> None:
        self._safely(self.publish.gaze, move)
        self._to_robot("gaze", "gaze", move)

    def _to_robot(self, slot: str, method: str, arg) -> None:
        if self._outbox is not None:
            self._outbox.put(slot, method, arg)

    def _safely(self, fn, arg) -> None:
        try:
            fn(arg)
        except Exception as e:  # noqa: BLE001 - the face must never stop the conversation
            self.log.warning(f"face: {getattr(fn, '__name__', fn)} failed: {e!r}")

    def _end_speech(self) -> None:
        with self._cv:
            back = self._gaze.stop()
            self._cv.notify()
        if back is not None:
            self._move_eyes(back)

    # ------------------------------------------------------------------ the clock
    def _next_idle(self, now: float) -> float:
        return now + self.rng.uniform(*self.config.idle_every_s)

    def _due(self, now: float):
        """What the clock must do now (a gaze move, an idle gesture, a fade) and when next."""
        move = self._gaze.step(now)
        idle = None
        if self.config.idle and self._listening and now >= self._idle_at:
            idle = idle_gesture(self.rng, self.config.max_head)
            self._idle_at = self._next_idle(now)
        expression, at = self._shown
        fade = expression != NEUTRAL and now - at >= self.config.hold_s
        if fade:
            self._shown = (NEUTRAL, now)
        times = [t for t in (self._gaze.next_at,
                             self._idle_at if self.config.idle and self._listening else None,
                             at + self.config.hold_s if expression != NEUTRAL and not fade
                             else None) if t is not None]
        return move, idle, fade, (min(times) if times else None)

    def _clock_loop(self) -> None:
        while True:
            with self._cv:
                if self._closed:
                    return
                move, idle, fade, next_at = self._due(self.clock())
                if move is None and idle is None and not fade:
                    wait = None if next_at is None else max(0.0, next_at - self.clock())
                    self._cv.wait(timeout=wait if wait is None else min(wait, 1.0))
                    continue
            if move is not None:
                self._move_eyes(move)
            if idle is not None:
                self._safely(self.publish.gesture, idle)
                self._to_robot("idle", "gesture", idle)
            if fade:
                self._safely(self.publish.expression, FaceCue("fade", Affect(NEUTRAL)))

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        if self._outbox is not None:
            self._outbox.close()
