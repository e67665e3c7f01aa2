"""Who speaks next: the turn queue, its worker, and when the robot speaks unasked (ROS-free).

The manager node only hands things in (an utterance, a frame added, an event seen, a shared
picture) and publishes what comes out (`publish(ReplyChunk)`). Here is decided:

* the order: one FIFO of user turns, remarks unasked and shared pictures, served by one worker
  thread so an LLM call never blocks the ROS executor; a turn first waits for the camera
  frames that came before its utterance (`wait_frames`), so the prompt keeps arrival order;
  a person's lines that waited together while the robot was busy get one reply that takes
  them all (each enters the prompt in order; the bound `max_waiting` still holds for floods);
* the opening remark (`greet_first`), once, when someone is first in view or engages;
* a remark on an arrival, a changed scene or a wave (core/proactive.py), never while a turn
  waits or runs;
* who takes a person's line: a skill listening for it (`claim`, the Ask skill), a reply (the
  free conversation, or a Chat), or nobody (`converse()` false: the line is only heard);
* the application's lines (`say`, the Say skill) and turns (`start`, the Chat skill), in the
  same order as the replies; `on_person_line(text, speaker)` for each person's line no skill
  took, on the worker before its reply (intents: from their own line, before the robot
  answers and before the next line; a line only heard is queued for it alone);
  every function given to `hear_with(fn)` hears every line at once, as `fn(text, said_at)`
  (barge-in stops a running robot action; the memory of people reads it), in the order given.

`settings` is read at each use, so a live parameter change applies at the next turn:
`reply_deadline` (s), `greet_first`, `stream`, `proactive`.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from vision_dialogue.core.conversation import Conversation, TurnResult
from vision_dialogue.core.entries import Entry, FrameEntry
from vision_dialogue.common.images import Frame
from vision_dialogue.core.proactive import ProactivePolicy
from vision_dialogue.core.turn_queue import PendingTurn, TurnQueue


@dataclass
class ReplyChunk:
    """One sentence of a reply (final=False), or the whole reply (final=True)."""

    turn_id: int
    index: int
    text: str
    in_reply_to: str
    final: bool
    fallback: bool


def _person_line(item: PendingTurn) -> bool:
    """A person's line to answer (not a skill's turn): lines that wait together join."""
    return item.kind == "turn" and item.done is None


def _never(*_args) -> bool:
    return False


#: seconds (camera time) a reporting person manager has to name someone the camera shows
#: before the opening remark comes from the frame anyway: people_node reports nobody for a
#: person whose face it cannot print (turned away, too small), and
#: the robot then never greeted (the demo with people_node: its script waited its 120 s).
#: More than people_node's own wait for a first print (FIRST_PRINT_WAIT_S, 5 s).
PERSON_REPORT_WAIT_S = 6.0
#: longest an opening remark on a person manager's report waits for the frames the manager
#: had received by then to be in its prompt (a frame is looked at for a second or more)
GREETING_FRAME_WAIT_S = 10.0
#: longest the opening remark waits for a speech node to listen: said before one, nobody heard
#: it (the demo's speech node started half a second after the camera's first frame on a
#: loaded machine, and its script waited its 120 s for a greeting already gone)
GREETING_LISTENER_WAIT_S = 10.0


@dataclass(frozen=True)
class TurnHooks:
    """What the owner plugs into the turn-taking, given when it is made (each may be left out).

    on_start(): once on the worker before the first turn (the VFM tools discovered);
    on_shared(bgr): serve a shared picture; claim(text, speaker, said_at): a skill takes the
    line (an Ask's answer), or not; converse(): whether a line no skill took gets a reply
    (False: it is only heard); on_person_line(text, speaker): each person's line no skill took,
    on the worker before its reply (intents); persons_from_a_manager(): a person manager
    publishes persons (ROS4HRI), so the opening remark waits for its report, which names the
    people it knows, rather than the first frame with someone in it (for
    PERSON_REPORT_WAIT_S at most once person_manager_reports(): a list of persons came);
    on_dropped(): a turn was dropped unanswered (publish the state); speech_listens(): a
    speech node listens to the replies (the opening remark waits for one,
    GREETING_LISTENER_WAIT_S at most).
    """

    on_start: Callable[[], None] = lambda: None
    on_shared: Callable[[np.ndarray], None] = lambda bgr: None
    claim: Callable[[str, str, float | None], bool] = _never
    converse: Callable[[], bool] = lambda: True
    on_person_line: Callable[[str, str], None] = lambda text, speaker: None
    persons_from_a_manager: Callable[[], bool] = _never
    person_manager_reports: Callable[[], bool] = lambda: True
    on_dropped: Callable[[], None] = lambda: None
    speech_listens: Callable[[], bool] = lambda: True


class GreetingCue:
    """Whether a frame showing someone is the opening remark's cue.

    Without a person manager it is. With one its report is (it names people it knows), for
    PERSON_REPORT_WAIT_S after the first such frame once it reports (before, it may still be
    loading its models); then the frame is.
    """

    def __init__(self, hooks: "TurnHooks"):
        self.hooks = hooks
        self.someone_since: float | None = None     # the first frame showing someone (stamp)

    def __call__(self, frame: Frame) -> bool:
        if not self.hooks.persons_from_a_manager():
            return True
        if not self.hooks.person_manager_reports():
            return False
        if self.someone_since is None:
            self.someone_since = frame.stamp
        return frame.stamp - self.someone_since >= PERSON_REPORT_WAIT_S


def _wait_for_a_listener(hooks: TurnHooks, queue: TurnQueue, log) -> None:
    """Until a speech node listens (the opening remark), the person spoke first, or a stop."""
    end = time.monotonic() + GREETING_LISTENER_WAIT_S
    while not (hooks.speech_listens() or len(queue) or queue.closed):
        if time.monotonic() >= end:
            log.warning("no speech node listens to the replies: the opening remark goes out "
                        "unheard")
            return
        time.sleep(0.05)


class ArrivingFrames(Protocol):
    """What a turn waits on: frames that arrived before its utterance (common/frame_intake.py)."""

    received: int

    def wait_through(self, count: int, timeout: float = ...) -> bool: ...


class TurnTaker:
    """The manager's turn-taking, with its worker thread (see the module docstring).

    `frames`: the frame intake a turn waits on (None: no camera); `tracked()`: how many people
    a camera that tracks users counts now. It hears of each frame the conversation takes (its
    FrameEntry). `hooks`: what the owner plugs in (TurnHooks), all given here.
    """

    def __init__(self, conversation: Conversation, proactive: ProactivePolicy,
                 settings: Mapping[str, Any], publish: Callable[[ReplyChunk], None], *,
                 max_waiting: int, frames: ArrivingFrames | None = None,
                 tracked: Callable[[], int | None] = lambda: None,
                 hooks: TurnHooks = TurnHooks(), logger: logging.Logger | None = None):
        self.conversation, self.proactive, self.settings = conversation, proactive, settings
        self._publish, self._frames, self._tracked = publish, frames, tracked
        self.hooks = hooks
        self._hearers: list[Callable[[str, float | None], None]] = []    # any line, at once
        self.log = logger or logging.getLogger("vision_dialogue.turns")
        self.queue = TurnQueue(max_waiting, on_drop=self._dropped)
        self._spoken_to = False         # an utterance came, or the opening remark is queued
        self._greets = GreetingCue(hooks)
        self._answering = 0             # 1 while the worker serves an item
        self.replies = self.fallback_replies = 0
        self._worker = threading.Thread(target=self._serve, name="vd-turns", daemon=True)
        conversation.add_listener(self._on_conversation)

    def hear_with(self, hear: Callable[[str, float | None], None]) -> None:
        """Have `hear(text, said_at)` hear every person's line at once, after those before.

        `said_at`: the line's stamp (s) as `utterance` got it, None without one.

        A list, not one hook: the robot's tools and the memory of people both listen, and
        one setting the hook after the other silenced the first.
        """
        self._hearers.append(hear)

    def start_worker(self) -> None:
        """Serve the queue from now on (what came before waits in it)."""
        self._worker.start()

    def _on_conversation(self, entry: Entry) -> None:
        if isinstance(entry, FrameEntry):
            self.frame_added(entry.frame, self._tracked())

    # --- what comes in -----------------------------------------------------------------------
    def utterance(self, text: str, speaker: str = "", language: str = "",
                  said_at: float | None = None) -> bool:
        """Queue a user turn; False (and a warning) for an empty one.

        `said_at`: when the line ended (the message's stamp, s), for a skill's claim: a line
        said before a question went out is no answer to it, however late it arrives.
        """
        text = " ".join(text.split())
        if not text:
            self.log.warning("ignoring an empty utterance")
            return False
        self._spoken_to = True
        self.proactive.user_spoke()
        for hear in self._hearers:
            try:
                hear(text, said_at)
            except Exception as e:  # noqa: BLE001 - the line is still taken, the next hears it
                self.log.error(f"a hearer of the line failed: {type(e).__name__}: {e}")
        if self.hooks.claim(text, speaker, said_at):
            return True
        if not self.hooks.converse():
            self.conversation.hear(text, speaker)
            self.log.info("outside a chat (free_conversation:=false): heard, not answered")
            self.queue.put(PendingTurn("heard", text, speaker))
            return True
        waiting = len(self.queue)
        if waiting:
            self.log.info(f"utterance queued behind {waiting} waiting turn(s)")
        self.queue.put(PendingTurn("turn", text, speaker, deadline=self._deadline(),
                                   language=language, frames_before=self._received()))
        return True

    def frame_added(self, frame: Frame, tracked: int | None = None) -> None:
        """After a camera frame entered the prompt: the opening remark, or one unasked.

        `tracked`: how many people a camera that tracks users counts now (None: unknown);
        used when perception did not count the frame's people.
        """
        if frame.people != 0 and self._greets(frame) and self.greet_once():
            return
        people = frame.people if frame.people is not None else tracked
        self._maybe_speak(self.proactive.on_frame(frame.bgr, people, self._busy()))

    def seen(self, kind: str, text: str, stamp: float | None = None) -> None:
        """Something seen between frames into the prompt; a wave may be answered."""
        self.conversation.add_event(text, stamp=stamp, event=kind)
        self._maybe_speak(self.proactive.on_event(kind, self._busy()))

    def say(self, text: str, done: Callable[[TurnResult | None], None],
            started: Callable[[], None] | None = None) -> PendingTurn:
        """Queue a line to say as given (the Say skill); `done(result)` once it was sent.

        `started()` just before it is sent (an Ask's question: a line said from then on may
        be its answer). Returns the queued item (`queue.remove(item)` takes it back while it
        waits).
        """
        item = PendingTurn("say", text, done=done, started=started)
        self.queue.put(item)
        return item

    def start(self, text: str | None, instruction: str = "", speaker: str = "",
              done: Callable[[TurnResult | None], None] | None = None) -> None:
        """Queue a turn the application starts (the Chat skill).

        A person's line to answer, or (text None) a remark with `instruction` (an opening).
        """
        if text is None:
            self.queue.put(PendingTurn("remark", instruction, "", deadline=self._deadline(),
                                       done=done))
            return
        self.queue.put(PendingTurn("turn", text, speaker, deadline=self._deadline(),
                                   frames_before=self._received(), done=done))

    def shared_image(self, bgr: np.ndarray) -> None:
        """Queue a picture the person shared (served by `on_shared`, in turn order)."""
        self.queue.put(PendingTurn("shared", bgr))

    def greet_once(self, on_report: bool = False) -> bool:
        """The opening remark (greet_first), once per session; whether it was queued now.

        `on_report`: a person manager reported someone (or a person engaged): the remark waits
        for the frames received by then, `GREETING_FRAME_WAIT_S` at most (people_node reports
        the frame's person while the manager still looks at that frame; a greeting before it
        said the robot's eyes were not working).
        """
        if not self.settings["greet_first"] or self._spoken_to:
            return False
        self._spoken_to = True
        self.queue.put(PendingTurn("remark", "", "", deadline=self._deadline(),
                                   frames_before=self._received() if on_report else 0))
        self.proactive.remark_made()
        return True

    # --- the worker --------------------------------------------------------------------------
    def _deadline(self) -> float:
        return time.monotonic() + self.settings["reply_deadline"]

    def _busy(self) -> int:
        return len(self.queue) + self._answering

    def _maybe_speak(self, trigger: str | None) -> None:
        """Queue a remark unasked on `trigger` ("arrival", "scene", "wave"; None: nothing)."""
        if trigger is None:
            return
        self.proactive.remark_made()
        self.log.info(f"speaking first: {trigger} (proactive:={self.settings['proactive']})")
        self.queue.put(PendingTurn("remark", trigger, "", deadline=self._deadline()))

    def _dropped(self, item: PendingTurn, reason: str) -> None:
        if item.done is not None:
            item.done(None)
        if item.kind == "say":
            self.log.warning(f"line not said ({reason}): {item.payload[:80]!r}")
        elif item.kind == "turn":
            self.conversation.note_dropped(item.payload, reason, item.speaker)
        elif item.kind == "remark":
            self.log.info(f"{item.payload or 'opening'} remark skipped ({reason})")
        elif item.kind == "heard":
            self.log.warning(f"line not read for an intent ({reason}): {item.payload[:80]!r}")
        else:
            self.log.warning(f"shared image dropped ({reason})")
        self.hooks.on_dropped()

    def _received(self) -> int:
        return self._frames.received if self._frames is not None else 0

    def _wait_frames(self, count: int) -> None:
        if self._frames is not None:
            self._frames.wait_through(count)

    def _serve(self) -> None:
        self.hooks.on_start()
        while True:
            run = self.queue.get_run(_person_line)
            if run is None:
                return
            item = run[-1]
            self._answering = 1
            result = None
            try:
                if item.kind in ("turn", "heard"):
                    self._before_reply(run)
                self._hear_first(run[:-1])
                if item.started is not None:
                    item.started()
                result = self._serve_one(item)
            except Exception as e:  # noqa: BLE001 - the worker must survive anything
                self.log.error(f"turn failed unexpectedly: {type(e).__name__}: {e}")
            finally:
                self._answering = 0
                if item.done is not None:
                    item.done(result)

    def _before_reply(self, lines: list[PendingTurn]) -> None:
        """Each person's line to `on_person_line` (intents) before the robot answers it."""
        for line in lines:
            try:
                self.hooks.on_person_line(line.payload, line.speaker)
            except Exception as e:  # noqa: BLE001 - the line is still answered
                self.log.error(f"on_person_line failed: {type(e).__name__}: {e}")

    def _hear_first(self, lines: list[PendingTurn]) -> None:
        """A person's lines that waited before the last one: heard, in order, then one reply."""
        if lines:
            self.log.info(f"{len(lines) + 1} lines waited while the robot was busy: "
                          "one reply takes them all")
        for line in lines:
            self._wait_frames(line.frames_before)
            self.conversation.hear(line.payload, line.speaker, next_reply=True)

    def _serve_one(self, item: PendingTurn) -> TurnResult | None:
        if item.kind == "heard":             # read for an intent (above), not answered
            return None
        if item.kind == "shared":
            self.hooks.on_shared(item.payload)
            return None
        if item.kind == "say":
            return self._answer(lambda chunk: self.conversation.say(
                item.payload, on_sentence=chunk), "", counted=False)
        if item.kind == "remark":
            if item.frames_before and self._frames is not None:     # greet_once(on_report)
                self._frames.wait_through(item.frames_before, GREETING_FRAME_WAIT_S)
            if not item.payload:
                _wait_for_a_listener(self.hooks, self.queue, self.log)
            return self._remark(item.deadline, item.payload)
        self._wait_frames(item.frames_before)
        return self._answer(lambda chunk: self.conversation.turn(
            item.payload, on_sentence=chunk, speaker=item.speaker,
            deadline=item.deadline, language=item.language), item.payload)

    def _remark(self, deadline: float, trigger: str = "") -> TurnResult | None:
        """A remark unasked, or with an application's instruction (a Chat's opening).

        trigger: "" (the opening one), "arrival", "scene", "wave", or the instruction itself.
        Skipped if the user spoke while it waited (they go first then).
        """
        persona = self.conversation.persona
        known = {"arrival": persona.arrival_instruction, "scene": persona.scene_instruction,
                 "wave": persona.wave_instruction}
        unasked = trigger in known or not trigger      # not an application's instruction
        if unasked and (len(self.queue) or (not trigger and self.conversation.turn_count)):
            return None
        instruction = known.get(trigger, trigger)
        return self._answer(lambda chunk: self.conversation.remark(
            on_sentence=chunk, deadline=deadline, instruction=instruction), "")

    def _answer(self, ask: Callable[..., TurnResult], in_reply_to: str,
                counted: bool = True) -> TurnResult:
        """Run one turn (`ask(on_sentence)`), publishing its sentences and the whole reply.

        `counted`: an LLM reply (a said line is not: every_reply_failed counts replies).
        """
        turn_id = self.conversation.turn_count + 1   # only this thread starts turns

        def chunk(sentence, index, fallback=False):
            self._publish(ReplyChunk(turn_id, index, sentence, in_reply_to, False, fallback))

        res = ask(chunk)
        self.replies += counted
        self.fallback_replies += bool(res.fallback) and counted
        n_chunks = len(res.sentences) if self.settings["stream"] else 0
        self._publish(ReplyChunk(res.turn_id, n_chunks, res.text, in_reply_to, True,
                                 res.fallback))
        return res

    @property
    def every_reply_failed(self) -> bool:
        """Replies were asked for and each was the fallback line (the run must fail)."""
        return bool(self.replies) and self.fallback_replies == self.replies

    def close(self, timeout: float = 5.0) -> None:
        """Drop what waits and stop the worker (a turn in progress may finish)."""
        self.queue.close()
        if self._worker.ident is not None:
            self._worker.join(timeout=timeout)
