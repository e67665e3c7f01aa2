"""The speech backend interface (no ROS): where utterances come from and replies are spoken.

A backend produces user utterances through the `SpeechEvents` its owner (the speech node)
passes to `start()`, and the owner drives the turn through these hooks, in this order::

    events.utterance(text)      backend heard something (from the backend's own thread)
    on_thinking()               the utterance is out; the reply is being produced
    begin_reply()               just before the first sentence of a reply is spoken
    speak(sentence) ...         one call per sentence, blocking while it is spoken
    end_reply(text)             the reply is complete (or timed out / was interrupted)

`stop_speaking()` may come from any thread at any time (barge-in) and makes a running
`speak()` return early.

`RobotTurnTaking` implements the paper's turn-taking for robots once (attend the user and
listen; gaze away while thinking; attend again and say the reply; listen again), with
backoff and reconnection when the robot is unreachable; the Furhat backends fill in the
robot calls.
"""
from __future__ import annotations

import logging
import math
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from vision_dialogue.variants import Param, nonempty


class SpeechBackendError(RuntimeError):
    """A backend cannot start (bad configuration, missing file)."""


class RobotUnavailable(RuntimeError):
    """The robot did not answer (connection refused, timeout, HTTP/API error)."""


@dataclass(frozen=True)
class ListenResult:
    """What one listen produced: `text` when the user said something, else a `status`."""

    text: str = ""
    status: str = "OK"        # OK | SILENCE | INTERRUPTED | FAILED


class SpeechEvents(Protocol):
    """Callbacks a backend uses to report to its owner (thread-safe)."""

    def utterance(self, text: str, speaker: str = "", language: str = "",
                  confidence: float = -1.0,
                  spoken: tuple[float, float] | None = None) -> None: ...

    def partial(self, text: str, speaker: str = "") -> None:
        """The words so far of a line still being said (optional: backends check for it)."""

    def speaking(self, on: bool) -> None:
        """Report that the person's voice began (True) or ended (False); optional."""

    def listening(self) -> None:
        """The backend is now waiting for the user."""

    def input_finished(self) -> None:
        """No more input will come (end of file / end of script)."""

    def unavailable(self) -> None:
        """The robot cannot be reached: nobody is listening until it is back."""


class AudioTopics(Protocol):
    """The speech node's audio topics, for a backend that hears and speaks audio itself.

    The backend asks, from its own parameters, for what it uses; the node creates a topic
    only when asked (at the backend's build). Samples are mono float in [-1, 1].
    """

    def publisher_in(self) -> Callable[[np.ndarray], None]:
        """publish(chunk): the microphone's 16 kHz chunks on audio/input."""

    def publisher_out(self) -> Callable[[np.ndarray, int, str], None]:
        """publish(samples, rate, text): each sentence said, on audio/output."""

    def subscribe_in(self, push: Callable[[np.ndarray], None]) -> None:
        """audio/input's chunks (resampled to 16 kHz) to `push`, instead of a microphone."""


@dataclass
class SpeechIO:
    """What the speech node gives a backend it builds besides its parameters.

    `audio`: the node's audio topics (AudioTopics), the base class's optional part: a backend
    that hears or speaks audio itself uses them; None where no node carries audio (a test).
    """

    input_stream: object = None
    output_stream: object = None
    logger: logging.Logger | None = None
    audio: AudioTopics | None = None


class SpeechBackend(ABC):
    """Base class of every speech I/O backend.

    A backend builds itself from the speech node's parameters (`from_params`); the node
    declares the parameters it lists in `PARAMS` and imports it by name from
    speech.SPEECH_BACKENDS (variants/table.py: `FILE_PARAM`, `check`).
    """

    name = "base"
    PARAMS: list[Param] = []      # the node parameters this backend reads besides the node's
    FILE_PARAM = ""               # a file parameter that, given, means this backend
    reads_text_input = False      # lines are read at once (terminal, script): listening at start
    ROBOT_HOST_PARAM = ""         # the parameter naming the robot it talks through (doctor)
    AUDIO_IN_PARAM = ""           # the parameter naming what it hears: 'mic', a file, 'topic'

    @classmethod
    def check(cls, p) -> str | None:
        """This backend's checks of the node's parameters together (an error or None)."""
        return None

    @classmethod
    def from_params(cls, p, io: SpeechIO) -> "SpeechBackend":
        """Build the backend from the speech node's parameters `p` (a mapping)."""
        raise NotImplementedError

    def __init__(self, logger: logging.Logger | None = None):
        self.log = logger or logging.getLogger(f"vision_dialogue.speech.{self.name}")
        self.events: SpeechEvents | None = None

    def start(self, events: SpeechEvents) -> None:
        """Begin producing input (start threads); must return quickly."""
        self.events = events

    def on_thinking(self) -> None:
        """An utterance was published and the reply is being produced."""

    def begin_reply(self) -> None:
        """The first sentence of a reply is about to be spoken."""

    @abstractmethod
    def speak(self, text: str) -> bool:
        """Speak one sentence, blocking until done; False if stopped or it failed."""

    def acknowledge(self, text: str) -> bool:
        """Say a short acknowledgement while the reply is late ("Let me see."); as `speak`."""
        return self.speak(text)

    def stop_speaking(self) -> None:
        """Stop the sentence being spoken now (barge-in)."""

    def end_reply(self, text: str, timed_out: bool = False) -> None:
        """The reply is complete (`timed_out`: none came in time); input may resume."""

    def face(self, max_gaze: float):
        """The robot face this backend drives (a face.controller.FaceOutput), or None."""
        return None

    def close(self) -> None:
        """Stop threads and release resources; idempotent."""


def _xyz(v) -> str | None:
    if len(v) != 3 or not all(math.isfinite(float(x)) for x in v):
        return "must be 3 finite numbers [x, y, z] in metres"
    return None


BARGE_IN = Param("barge_in", True, "Furhat and local backends: keep listening while the robot "
                 "speaks, so the user can interrupt (speech stops and the new utterance is "
                 "published).")
BACKOFF = [
    Param("backoff_initial", 0.5, "Robot or microphone unreachable: first retry delay, s "
          "(doubles).", range=(0.01, 60.0)),
    Param("backoff_max", 10.0, "Robot or microphone unreachable: longest retry delay, s.",
          range=(0.01, 600.0)),
]
"""Retrying an unreachable robot or microphone (RobotTurnTaking, the local voice)."""


def check_backoff(p) -> str | None:
    if p["backoff_initial"] > p["backoff_max"]:
        return (f"backoff_initial: {p['backoff_initial']} is larger than "
                f"backoff_max={p['backoff_max']}")
    return None


ROBOT_PARAMS = [
    Param("voice", "", "Furhat voice name; empty keeps the robot's current voice."),
    Param("gaze_away_gesture", "GazeAway", "Gesture played while the reply is produced; "
          "empty for none."),
    Param("gaze_away_location", [0.5, 0.4, 1.0], "Point [x, y, z] (metres, robot frame) "
          "attended while the reply is produced.", check=_xyz),
    BARGE_IN,
    Param("listen_timeout", 30.0, "Furhat: longest wait for one listen to return, s.",
          range=(0.5, 600.0)),
    Param("say_timeout", 120.0, "Furhat: longest a blocking say may take, s.",
          range=(1.0, 3600.0)),
    Param("request_timeout", 5.0, "Furhat: timeout of other robot calls, s.",
          range=(0.05, 60.0)),
    *BACKOFF,
    Param("furhat_host", "localhost", "Furhat robot (or SDK) host name or IP.",
          check=nonempty),
    Param("furhat_port", 0, "Furhat port; 0: the API's default (54321 Remote API, "
          "9000 Realtime API).", range=(0, 65535)),
]
"""What every robot backend (RobotTurnTaking) reads: robot_options, and where the robot is."""


def robot_options(p, logger) -> dict:
    """RobotTurnTaking's keyword arguments from the speech node's parameters."""
    return dict(voice=p["voice"], language=p["language"],
                gaze_away_gesture=p["gaze_away_gesture"],
                gaze_away_location=list(p["gaze_away_location"]),
                listen_timeout=p["listen_timeout"], say_timeout=p["say_timeout"],
                request_timeout=p["request_timeout"], barge_in=p["barge_in"],
                reply_timeout=p["reply_timeout"], backoff_initial=p["backoff_initial"],
                backoff_max=p["backoff_max"], logger=logger)


class RobotTurnTaking(SpeechBackend):
    """Turn-taking for a robot.

    A thread attends the user and listens; on text it publishes the utterance (with the id of
    the user the robot attends, when the robot tracks users, as its speaker) and (without barge-
    in) waits for the reply to end before listening again. With `barge_in` it listens again as soon
    as the reply starts, so the user can interrupt. The reply is said looking at the user who
    spoke, even if someone else is closer by then.

    Subclasses implement the `_robot_*` calls; each raises RobotUnavailable when the robot
    does not answer. Outages are logged once, retried with exponential backoff from
    `backoff_initial` up to `backoff_max` seconds, and the robot is set up again
    (`_robot_setup`) when it answers.
    """

    PARAMS = ROBOT_PARAMS

    @classmethod
    def check(cls, p) -> str | None:
        return check_backoff(p)

    def __init__(self, *, language: str = "en-US", barge_in: bool = False,
                 reply_timeout: float = 30.0, backoff_initial: float = 0.5,
                 backoff_max: float = 10.0, logger: logging.Logger | None = None):
        super().__init__(logger)
        self.language, self.barge_in = language, barge_in
        self.reply_timeout = reply_timeout
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self._stop = threading.Event()
        self._reply_started = threading.Event()
        self._reply_done = threading.Event()
        self._reply_done.set()
        self._thread: threading.Thread | None = None
        self._down = False       # in an outage (logged once)
        self._ready = False      # _robot_setup done since the last outage
        self._state_lock = threading.Lock()
        self._speaker = ""       # the user who spoke last (a robot user id, or "")
        # who the robot attends, from elsewhere (the speech node: the closest user on
        # camera/users), for robots whose speech API does not say
        self.tracked_user: Callable[[], str] | None = None
        self.outages = 0

    # robot calls --------------------------------------------------------------
    @abstractmethod
    def _robot_setup(self) -> None:
        """Check the robot answers and configure it (voice...)."""

    @abstractmethod
    def _robot_attend_user(self, user_id: str = "") -> None:
        """Look at user `user_id`; "" = the closest one."""

    def _robot_attended_user(self) -> str:
        """Id of the user the robot attends now ("" if it cannot tell)."""
        return self.tracked_user() if self.tracked_user is not None else ""

    @abstractmethod
    def _robot_listen(self) -> ListenResult: ...

    @abstractmethod
    def _robot_gaze_away(self) -> None: ...

    @abstractmethod
    def _robot_say(self, text: str) -> bool: ...

    @abstractmethod
    def _robot_stop_speaking(self) -> None: ...

    # backend hooks ------------------------------------------------------------
    def start(self, events: SpeechEvents) -> None:
        super().start(events)
        self._thread = threading.Thread(target=self._loop, name=f"{self.name}-listen",
                                        daemon=True)
        self._thread.start()

    def on_thinking(self) -> None:
        self._guard(self._robot_gaze_away)

    def begin_reply(self) -> None:
        self._reply_started.set()
        self._guard(self._robot_attend_user, self._speaker)

    def speak(self, text: str) -> bool:
        result = self._guard(self._robot_say, text)
        return bool(result)

    def stop_speaking(self) -> None:
        self._guard(self._robot_stop_speaking)

    def end_reply(self, text: str, timed_out: bool = False) -> None:
        self._reply_done.set()

    def close(self) -> None:
        self._stop.set()
        self._reply_done.set()
        self._reply_started.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    # internals ----------------------------------------------------------------
    def _guard(self, fn, *args):
        """Run a robot call from a hook; log a robot problem instead of raising."""
        try:
            result = fn(*args)
        except RobotUnavailable as e:
            self._outage(e)
            return None
        if self._ready:
            self._recovered()
        return result

    def _outage(self, error: Exception) -> None:
        with self._state_lock:             # hooks and the listen loop may fail together
            self._ready = False
            first = not self._down
            if first:
                self._down = True
                self.outages += 1
        if first:
            self.log.error(f"{self.name}: robot unavailable ({error}); retrying with backoff")
            self._notify("unavailable")

    def _notify(self, event: str) -> None:
        """Call an optional SpeechEvents method; a failing callback is logged, not raised."""
        fn = getattr(self.events, event, None)
        if fn is None:
            return
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the listen loop must survive its owner's bugs
            self.log.error(f"{self.name}: events.{event}() failed: {e!r}")

    def _recovered(self) -> None:
        with self._state_lock:
            was_down, self._down = self._down, False
        if was_down:
            self.log.info(f"{self.name}: robot reachable again")

    def _loop(self) -> None:
        delay = self.backoff_initial
        while not self._stop.is_set():
            try:
                if not self._ready:
                    self._robot_setup()
                    self._ready = True
                self._listen_once()
                delay = self.backoff_initial
            except RobotUnavailable as e:
                self._outage(e)
                if self._stop.wait(delay):
                    break
                delay = min(delay * 2, self.backoff_max)
            except Exception as e:  # noqa: BLE001 - a bug must not end the listen loop
                self.log.error(f"{self.name}: unexpected error in the listen loop: {e!r}")
                if self._stop.wait(delay):
                    break

    def _listen_once(self) -> None:
        replying = self._reply_started.is_set() and not self._reply_done.is_set()
        if not replying:
            self._robot_attend_user()      # during a reply we already look at the user
        if self._reply_done.is_set():
            self._notify("listening")
        result = self._robot_listen()
        self._recovered()                   # the outage is over once a listen answers
        if self._stop.is_set():
            return
        if result.status != "OK" or not result.text.strip():
            if result.status in ("INTERRUPTED", "FAILED"):
                self.log.warning(f"{self.name}: listen {result.status.lower()}; listening again")
                self._stop.wait(min(self.backoff_initial, 0.5))
            return                          # SILENCE (or empty): just listen again
        self._reply_started.clear()
        self._reply_done.clear()
        self._speaker = self._robot_attended_user()
        self.events.utterance(result.text.strip(), speaker=self._speaker, language=self.language)
        # Wait for the reply: to its start with barge-in, else to its end.
        wait_for = self._reply_started if self.barge_in else self._reply_done
        if not wait_for.wait(self.reply_timeout + 5.0) and not self._stop.is_set():
            self.log.warning(f"{self.name}: no reply after {self.reply_timeout:g} s; "
                             "listening again")
            self._reply_done.set()
