"""Turn taking between the user and the robot, for any speech backend.

ROS-free.

`SpeechTurns` is what the speech node does, without ROS: it receives the backend's events
(it is the backend's `SpeechEvents`), publishes utterances through a callback, takes reply
chunks, speaks them in order on one speaker thread, and reports the turn state:

    LISTENING --user speaks--> THINKING --first sentence--> SPEAKING --reply ends--> LISTENING
    (IDLE while the robot is unreachable, or before input starts and after it ends)

Replies: each non-empty chunk (final=False) is spoken as it arrives; the final message is
spoken only if no chunk of its turn came. Barge-in: an utterance that arrives while a reply is
queued or being spoken stops speech (`backend.stop_speaking()`), drops the rest of that reply
(later chunks of its turn are ignored) and is published as usual. No reply within
`reply_timeout` seconds: the backend is told (`end_reply(..., timed_out=True)`) and the robot
listens again. A reply late by the `acknowledger`'s seconds gets a short acknowledgement first
("Let me see.", speech/acknowledgement.py; `backend.acknowledge`).

An `observer` (the robot's face, face/controller.py) hears of each moment as it happens:
`heard(text)`, `sentence(turn_id, text, first)` just before a sentence is said,
`reply_done(turn_id)`, `interrupted()` and `state(name)`; its failures are logged, not raised.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Callable

from vision_dialogue.llm.sentences import split_sentences
from vision_dialogue.speech.acknowledgement import Acknowledger
from vision_dialogue.speech.base import SpeechBackend

#: turn states, the values of vision_dialogue_interfaces/SpeechState
IDLE, LISTENING, THINKING, SPEAKING = 0, 1, 2, 3
#: what happened to a reply turn, the values of vision_dialogue_interfaces/Spoken
BEGAN, SENTENCE, DONE, INTERRUPTED = 1, 2, 3, 4
STATE_NAMES = {IDLE: "idle", LISTENING: "listening", THINKING: "thinking",
               SPEAKING: "speaking"}

_log = logging.getLogger("vision_dialogue.speech")
#: how often a late reply is checked for (an acknowledgement is due at most this much late)
ACK_POLL_S = 0.02


@dataclass(frozen=True)
class HeardUtterance:
    """What the user said, as the backend heard it ('' / -1: the backend did not say)."""

    text: str
    speaker: str = ""
    language: str = ""
    confidence: float = -1.0
    # when the voice began and ended (time.monotonic()); None: the backend does not know
    spoken: tuple[float, float] | None = None


class ReplyQueue:
    """The sentences waiting for the speaker thread, and the turns not to be said any more.

    Items are ("say", turn_id, sentence) and ("end", turn_id, reply). A turn once interrupted
    (barge-in, cancel, or cancelled before its first sentence came) stays so; the last 16 are
    kept.
    """

    def __init__(self):
        self._q: "queue.Queue[tuple[str, int, str]]" = queue.Queue()
        self.interrupted: deque[int] = deque(maxlen=16)

    def put(self, kind: str, turn_id: int, text: str) -> None:
        self._q.put((kind, turn_id, text))

    def get(self, timeout: float) -> tuple[str, int, str]:
        """The next item; raises queue.Empty after `timeout` s."""
        return self._q.get(timeout=timeout)

    def empty(self) -> bool:
        return self._q.empty()

    def turns(self) -> list[int]:
        """The turns with sentences waiting."""
        with self._q.mutex:
            return [item[1] for item in self._q.queue]

    def interrupt(self, turn_id: int) -> None:
        if turn_id not in self.interrupted:
            self.interrupted.append(turn_id)

    def drain(self) -> None:
        """Drop every waiting item; its turn is interrupted."""
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            self.interrupt(item[1])


class TurnReports:
    """What the node (`on_spoken`) and the observer (the face) hear of the turns.

    Their failures are logged, never raised: reporting must not stop speech.
    """

    def __init__(self, on_spoken: Callable[[int, int, str], None], observer, log):
        self.on_spoken, self.observer, self.log = on_spoken, observer, log

    def observe(self, moment: str, *args) -> None:
        fn = getattr(self.observer, moment, None)
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - the face must not stop speech
            self.log.error(f"turn observer {moment} failed: {e!r}")

    def spoken(self, turn_id: int, event: int, text: str = "") -> None:
        try:
            self.on_spoken(int(turn_id), event, text)
        except Exception as e:  # noqa: BLE001 - reporting must not stop speech
            self.log.error(f"spoken report failed: {e!r}")


class SpeechTurns:
    """The turn logic of the speech node (see the module docstring).

    publish(utterance): sends a HeardUtterance on (the node publishes dialogue/utterance).
    on_state(state): a new turn state (the node publishes dialogue/speech_state).
    on_input_finished(): the backend has no more input (end of script or of stdin).
    on_spoken(turn_id, event, text): a reply turn BEGAN, a SENTENCE was said, the turn is DONE
    or was INTERRUPTED (barge-in, cancel) (the node publishes dialogue/spoken).
    on_partial(utterance): the words so far of a line still being said, while the robot
    listens (the node publishes dialogue/partial; the manager reads its prompt ahead).
    on_speaking(on): the person began or stopped speaking (the node publishes it on
    dialogue/hearing; the manager holds its frame summaries back meanwhile).
    """

    def __init__(self, backend: SpeechBackend, *,
                 publish: Callable[[HeardUtterance], None],
                 on_state: Callable[[int], None] = lambda state: None,
                 on_input_finished: Callable[[], None] = lambda: None,
                 on_spoken: Callable[[int, int, str], None] = lambda tid, event, text: None,
                 on_partial: Callable[[HeardUtterance], None] = lambda utterance: None,
                 on_speaking: Callable[[bool], None] = lambda on: None,
                 reply_timeout: float = 30.0, logger=None, observer=None,
                 acknowledger: Acknowledger | None = None):
        self.backend, self.publish, self.on_state = backend, publish, on_state
        self.on_partial, self.on_speaking = on_partial, on_speaking
        self.on_input_finished, self.reply_timeout = on_input_finished, float(reply_timeout)
        self.log = logger or _log
        self.reports = TurnReports(on_spoken, observer, self.log)
        self.acknowledger = acknowledger or Acknowledger(0.0)
        self._acking = False                    # an acknowledgement is being said
        self._closed = threading.Event()
        self._cv = threading.Condition(threading.RLock())
        self._state: int | None = None
        self._replies = ReplyQueue()
        self._reply_turn: int | None = None    # newest turn with reply queued/being spoken
        self._speaking_turn: int | None = None  # turn whose reply the speaker thread began
        self._chunks: dict[int, int] = defaultdict(int)
        self._awaiting_since: float | None = None
        self._finished = False                  # finish(): IDLE for good
        self.unavailable_since: float | None = None   # monotonic: the robot went away
        self.input_done = threading.Event()
        self.set_state(IDLE)
        self._speaker = threading.Thread(target=self._speak_loop, name="speech-speaker",
                                         daemon=True)
        self._speaker.start()

    # ---------------------------------------------------------------- state
    @property
    def state(self) -> int:
        return self._state

    def set_state(self, state: int) -> None:
        with self._cv:
            if state == self._state:
                return
            self._state = state
            self.log.debug(f"turn state: {STATE_NAMES[state]}")
            if not self._closed.is_set():
                self.on_state(state)
                self.reports.observe("state", STATE_NAMES[state])
            self._cv.notify_all()

    def _idle(self) -> bool:
        return (self._reply_turn is None and self._awaiting_since is None
                and self._replies.empty() and self._speaking_turn is None)

    def wait_idle(self, timeout: float) -> bool:
        """Until no reply is awaited, queued or being spoken; False on timeout."""
        with self._cv:
            return self._cv.wait_for(self._idle, timeout=timeout)

    def finish(self, timeout: float) -> bool:
        """The input is over: wait for the last reply (False on timeout), then stay IDLE.

        The speaker thread announces LISTENING after a reply ends, outside the lock it shares
        with this wait; without `_finished`, that could come after this IDLE.
        """
        done = self.wait_idle(timeout)
        with self._cv:
            self._finished = True
            self.set_state(IDLE)
        return done

    # ---------------------------------------------------------------- SpeechEvents
    def utterance(self, text: str, speaker: str = "", language: str = "",
                  confidence: float = -1.0,
                  spoken: tuple[float, float] | None = None) -> None:
        """The backend heard the user: barge in if the robot is replying, then publish.

        `spoken`: when the voice began and ended (time.monotonic()), where the backend knows.
        """
        text = (text or "").strip()
        if not text or self._closed.is_set():
            return
        self.barge_in("the user spoke during the reply", awaiting=True)
        self.acknowledger.heard(text)
        self.publish(HeardUtterance(text, speaker, language, float(confidence), spoken))
        self.reports.observe("heard", text)
        self.set_state(THINKING)
        self._backend_call(self.backend.on_thinking)

    def speaking(self, on: bool) -> None:
        """Report that the person's voice began or ended, as the voice backend's VAD heard it."""
        if not self._closed.is_set():
            self.on_speaking(bool(on))

    def partial(self, text: str, speaker: str = "") -> None:
        """The words so far of a line the person is still saying (a head start, no turn)."""
        text = (text or "").strip()
        if text and not self._closed.is_set() and self._state == LISTENING:
            self.on_partial(HeardUtterance(text, speaker))

    def barge_in(self, why: str, awaiting: bool = False) -> bool:
        """Stop the reply being spoken or awaited (the user talks); whether there was one.

        `awaiting`: a new turn starts now (an utterance of ours); a ROS4HRI recogniser's
        speech reaches the manager by itself, so only the speech stops.
        """
        with self._cv:
            stopped = self._stop_turns()
            if awaiting:
                self._awaiting_since = time.monotonic()
            acking = self._acking
        if acking and not stopped:         # the acknowledgement stops too
            self._backend_call(self.backend.stop_speaking)
        if stopped:
            self.log.info(f"barge-in: {why}; stopping speech")
            self._stopped(stopped)
        return bool(stopped)

    def cancel(self, turn_id: int = 0) -> bool:
        """Stop reply turn `turn_id` (0: whatever is said now), as a barge-in would.

        The manager asks for it when an application cancels its Say; True if it was stopped.
        """
        with self._cv:
            mine = {self._reply_turn, self._speaking_turn, *self._replies.turns()}
            if turn_id and turn_id not in mine:
                self._replies.interrupt(int(turn_id))     # not here yet: never say it
                return False
            stopped = self._stop_turns()
        if stopped:
            self.log.info(f"reply turn {turn_id or stopped[0]} cancelled; stopping speech")
            self._stopped(stopped)
            self._listen_if_idle()
        return bool(stopped)

    def _stop_turns(self) -> list[int]:
        """Mark the turns being said or queued as interrupted (call with the lock held)."""
        turns = [t for t in (self._reply_turn, self._speaking_turn) if t is not None]
        turns += self._replies.turns()
        if not turns:
            return []
        for t in turns:
            self._replies.interrupt(t)
        self._replies.drain()
        self._reply_turn = self._speaking_turn = None
        return sorted(set(turns))

    def _stopped(self, turns: list[int]) -> None:
        self._backend_call(self.backend.stop_speaking)
        self.reports.observe("interrupted")
        for t in turns:
            self.reports.spoken(t, INTERRUPTED)

    def listening(self) -> None:
        self.unavailable_since = None
        with self._cv:
            if self._idle() and not self._finished:
                self.set_state(LISTENING)

    def unavailable(self) -> None:
        if self.unavailable_since is None:
            self.unavailable_since = time.monotonic()
        with self._cv:
            if self._idle():
                self.set_state(IDLE)      # not listening while the robot is away

    def input_finished(self) -> None:
        self.input_done.set()
        self.log.info("input finished")
        self.on_input_finished()

    # ---------------------------------------------------------------- replies
    def on_reply(self, turn_id: int, text: str, final: bool, fallback: bool = False) -> None:
        """A Reply message: a chunk to speak now, or the final text of turn `turn_id`."""
        tid = int(turn_id)
        with self._cv:
            if tid in self._replies.interrupted:
                self.log.debug(f"ignoring reply of interrupted turn {tid}")
                return
            self._awaiting_since = None
            if not final:
                text = text.strip()
                if text:
                    self._chunks[tid] += 1
                    self._reply_turn = tid
                    self._replies.put("say", tid, text)
                return
            if self._chunks.pop(tid, 0) == 0:
                for sentence in split_sentences(text):
                    self._replies.put("say", tid, sentence)
            if fallback:
                self.log.warning(f"turn {tid}: the reply is the fallback (the LLM failed)")
            self._reply_turn = tid
            self._replies.put("end", tid, text)
            for old in [t for t in self._chunks if t < tid - 8]:  # forget abandoned turns
                self._chunks.pop(old, None)

    def _speak_loop(self) -> None:
        while not self._closed.is_set():
            try:
                late_soon = self._awaiting_since and self.acknowledger.after > 0
                kind, tid, text = self._replies.get(ACK_POLL_S if late_soon else 0.1)
            except queue.Empty:
                self._acknowledge_if_late()
                self._check_reply_timeout()
                continue
            if kind == "say":
                self._say(tid, text)
            else:
                self._end(tid, text)

    def _say(self, tid: int, text: str) -> None:
        with self._cv:
            if tid in self._replies.interrupted:
                return
            begin = self._speaking_turn != tid
            self._speaking_turn = tid
            self.set_state(SPEAKING)
        if begin:
            self._backend_call(self.backend.begin_reply)
            self.reports.spoken(tid, BEGAN, text)
        self.reports.observe("sentence", tid, text, begin)
        if self._backend_call(self.backend.speak, text) is False:
            self.log.debug(f"turn {tid}: sentence not (fully) spoken")
        elif tid not in self._replies.interrupted:
            self.reports.spoken(tid, SENTENCE, text)

    def _end(self, tid: int, text: str) -> None:
        with self._cv:                          # the reply is complete
            if tid in self._replies.interrupted:
                return
            self._speaking_turn = None
            if self._reply_turn == tid:
                self._reply_turn = None
        self._backend_call(self.backend.end_reply, text)
        self.reports.observe("reply_done", tid)
        self.reports.spoken(tid, DONE, text)
        self._listen_if_idle()

    def _acknowledge_if_late(self) -> None:
        """The reply is late: a short acknowledgement now (the Acknowledger decides)."""
        with self._cv:
            since = self._awaiting_since
            phrase = None if since is None else self.acknowledger.due(time.monotonic() - since)
            if phrase is None:
                return
            self._acking = True
        self.log.info(f"the reply is late: acknowledging ({phrase!r})")
        try:
            self._backend_call(self.backend.acknowledge, phrase)
        finally:
            with self._cv:
                self._acking = False

    def _check_reply_timeout(self) -> None:
        with self._cv:
            since = self._awaiting_since
            if since is None or time.monotonic() - since < self.reply_timeout:
                return
            self._awaiting_since = None
        self.log.warning(f"no reply within {self.reply_timeout:g} s; listening again")
        self._backend_call(self.backend.end_reply, "", True)
        self._listen_if_idle()

    def _listen_if_idle(self) -> None:
        with self._cv:
            if self._idle() and not self._finished:
                self.set_state(LISTENING)
            self._cv.notify_all()

    def _backend_call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - a backend bug must not stop the node
            self.log.error(f"speech backend {fn.__name__} failed: {e!r}")
            return None

    # ---------------------------------------------------------------- shutdown
    def close(self) -> None:
        """Stop the backend and the speaker thread (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._backend_call(self.backend.close)
        if self._speaker is not threading.current_thread():
            self._speaker.join(timeout=2.0)
