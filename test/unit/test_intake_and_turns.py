"""The manager's ROS-free plumbing: the frame intake, the turn queue, the reply deadline."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from conftest import until
from vision_dialogue.common.frame_intake import FrameIntake
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.entries import UserEntry
from vision_dialogue.common.images import ImageDecodeError
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.turn_queue import PendingTurn, TurnQueue
from vision_dialogue.core.turn_taking import TurnHooks


IMG = np.zeros((4, 4, 3), np.uint8)


def bad(cause):
    def decode():
        raise ImageDecodeError(f"bad ({cause})", cause)
    return decode


def test_intake_dedups_after_decode_and_a_bad_frame_takes_no_slot():
    added = []
    intake = FrameIntake(lambda bgr, ns: added.append(ns), min_interval=5.0,
                         errors=(ImageDecodeError,))
    try:
        intake.offer(("cam", 1), 1, bad("encoding"))       # raw copy: unreadable
        intake.offer(("cam", 1), 1, lambda: IMG)            # its JPEG copy, same key
        intake.offer(("cam", 1), 1, lambda: IMG)            # a true duplicate
        intake.offer(("cam", 2), 2, lambda: IMG)            # inside min_interval
        assert until(lambda: intake.received == 4 and intake.accepted + intake.rejected
                     + intake.duplicates + intake.skipped == 4)
        assert added == [1] and intake.duplicates == 1 and intake.skipped == 1
        assert dict(intake.rejected_by_cause) == {"encoding": 1}
        intake.min_interval = 0.0                           # a live change applies at once
        intake.offer(("cam", 3), 3, lambda: IMG)
        assert until(lambda: added == [1, 3])
    finally:
        intake.close()


def test_intake_spaces_frames_by_their_stamps_not_by_when_a_burst_delivers_them():
    """Frames delivered in a burst are spaced by their stamps.

    A loaded machine delivers 8 fps frames in bursts: the interval keeps every other frame by
    the camera's stamps; a stamp going back (a looped bag) is spaced by arrival.
    """
    now = [100.0]
    added = []
    intake = FrameIntake(lambda bgr, ns: added.append(ns), min_interval=0.2,
                         clock=lambda: now[0])
    try:
        ns = [round(i * 0.125e9) + 1 for i in range(8)]     # 8 frames a second, one burst
        for stamp in ns:
            intake.offer(None, stamp, lambda: IMG)
        assert until(lambda: intake.finished == 8)
        assert added == ns[::2], "by arrival only the first of the burst would be kept"
        intake.offer(None, ns[1], lambda: IMG)              # back in time, same arrival
        now[0] += 0.5
        intake.offer(None, ns[2], lambda: IMG)              # later by arrival: kept
        assert until(lambda: intake.finished == 10)
        assert added == ns[::2] + [ns[2]] and intake.skipped == 5
    finally:
        intake.close()


def test_intake_drops_the_oldest_of_a_burst_it_cannot_keep_up_with():
    gate, added = threading.Event(), []

    def slow_add(bgr, ns):
        gate.wait(2.0)
        added.append(ns)
    intake = FrameIntake(slow_add, backlog=3)
    try:
        for i in range(10):
            intake.offer(None, i, lambda: IMG)
        gate.set()
        assert until(lambda: intake.accepted + intake.dropped == 10)
        assert added == sorted(added) and added[-1] == 9 and intake.dropped >= 6
    finally:
        intake.close()


def test_a_turn_waits_for_the_frames_that_arrived_before_it():
    gate, added = threading.Event(), []

    def slow_decode():
        gate.wait(5.0)
        return IMG
    intake = FrameIntake(lambda bgr, ns: added.append(ns))
    try:
        intake.offer(None, 1, lambda: IMG)
        intake.offer(None, 2, slow_decode)                  # still decoding ...
        before = intake.received                            # ... when the utterance comes
        assert not intake.wait_through(before, timeout=0.2) and added == [1]
        threading.Timer(0.1, gate.set).start()
        assert intake.wait_through(before, timeout=5.0) and added == [1, 2]
        intake.offer(None, 3, bad("encoding"))              # a rejected frame counts as done
        assert intake.wait_through(before + 1, timeout=5.0) and intake.rejected == 1
    finally:
        intake.close()
    assert intake.wait_through(99, timeout=0.1)             # closed: nobody waits


def test_turn_queue_bound_expiry_order_and_close():
    now = [100.0]
    dropped = []
    q = TurnQueue(2, on_drop=lambda item, why: dropped.append((item.payload, why.split(":")[0])),
                  clock=lambda: now[0])
    for i in range(4):
        q.put(PendingTurn("turn", f"u{i}", deadline=now[0] + 10))
    assert dropped == [("u0", "queue full"), ("u1", "queue full")] and len(q) == 2
    now[0] += 11                                           # u2 and u3 are now stale
    q.put(PendingTurn("turn", "u4", deadline=now[0] + 10))  # pushes u2 out
    assert q.get(timeout=0.1).payload == "u4"               # u3 expired on the way
    assert dropped[2:] == [("u2", "queue full"), ("u3", "expired")]
    q.put(PendingTurn("turn", "u5", deadline=now[0] + 10))
    q.close()
    assert q.get(timeout=0.1) is None and dropped[-1][0] == "u5" and q.dropped == 5


def test_drop_waiting_reports_each_waiting_item_and_the_queue_stays_open():
    """A deactivated manager drops what waits, on record; later lines are taken as before."""
    dropped = []
    q = TurnQueue(10, on_drop=lambda item, why: dropped.append((item.payload, why)))
    for text in ("a", "b"):
        q.put(PendingTurn("turn", text, deadline=time.monotonic() + 10))
    assert q.drop_waiting("deactivated") == 2 and len(q) == 0
    assert dropped == [("a", "deactivated"), ("b", "deactivated")] and q.dropped == 2
    q.put(PendingTurn("turn", "c", deadline=time.monotonic() + 10))
    assert q.get(timeout=0.1).payload == "c"


def test_a_run_of_lines_leaves_together_and_only_when_its_newest_has_expired():
    now = [100.0]
    dropped = []
    q = TurnQueue(10, on_drop=lambda item, why: dropped.append(item.payload), clock=lambda: now[0])
    line = lambda text, age=0: PendingTurn("turn", text, deadline=now[0] + 10 - age)  # noqa
    q.put(line("a", age=20))                        # expired, but a newer line follows it
    q.put(line("b"))
    q.put(PendingTurn("say", "said"))               # not a person's line: ends the run
    q.put(line("c"))
    joins = lambda item: item.kind == "turn"        # noqa: E731
    assert [i.payload for i in q.get_run(joins, timeout=0.1)] == ["a", "b"] and not dropped
    assert [i.payload for i in q.get_run(joins, timeout=0.1)] == ["said"]
    q.put(line("d"))
    now[0] += 11                                    # c and d expire: the whole run goes
    assert q.get_run(joins, timeout=0.05) is None and dropped == ["c", "d"]
    q.put(line("e"))
    assert [i.payload for i in q.get_run(joins, timeout=0.1)] == ["e"]


class Arrived:
    """Frames that arrived before each line (a frame intake, as a test sets it)."""

    def __init__(self, received: int = 0):
        self.received, self.waited = received, []

    def wait_through(self, count: int) -> bool:
        self.waited.append(count)
        return True


def gated_turn_taker(greet_first: bool, stream: bool, **kw):
    """A TurnTaker on a fake LLM whose first reply waits for `backend.gate["reply"]`.

    Returns (backend, conversation, turn taker, published chunks).
    """
    from fake_chat_backend import FakeChatBackend
    from vision_dialogue.core.proactive import ProactiveConfig, ProactivePolicy
    from vision_dialogue.core.turn_taking import TurnTaker

    backend = FakeChatBackend()
    backend.gate["reply"] = threading.Event()
    conv = Conversation(backend, load_persona(), ConversationConfig())
    settings = {"reply_deadline": 30.0, "greet_first": greet_first, "stream": stream,
                "proactive": "paper"}
    out = []
    turns = TurnTaker(conv, ProactivePolicy(ProactiveConfig("paper")), settings, out.append,
                      max_waiting=4, **kw)
    turns.start_worker()
    return backend, conv, turns, out


def test_lines_said_while_the_robot_is_busy_get_one_reply_in_order():
    """A person says three things while the robot answers: one reply takes them all."""
    heard = []
    frames = Arrived()
    waited = frames.waited
    backend, conv, turns, out = gated_turn_taker(False, False, frames=frames, hooks=TurnHooks(
        on_person_line=lambda text, speaker: heard.append(text)))
    records = []                                             # what the transcript writes
    conv.add_listener(lambda entry: records.append((entry.turn_id, entry.text))
                      if isinstance(entry, UserEntry) else None)
    try:
        turns.utterance("hello robot")
        assert until(lambda: backend.calls, timeout=10)      # the first reply is being asked
        for i, text in enumerate(["what is on the table?", "the red thing", "on the left"]):
            frames.received = i + 1                          # a frame came before each
            turns.utterance(text, "ada")
        backend.gate["reply"].set()
        assert until(lambda: sum(c.final for c in out) == 2, timeout=10)
        assert until(lambda: len(heard) == 4, timeout=5)
    finally:
        turns.close()
        conv.close()
    finals = [c for c in out if c.final]
    assert [c.in_reply_to for c in finals] == ["hello robot", "on the left"]
    assert len(backend.calls) == 2 and turns.queue.dropped == 0
    prompt = " ".join(str(m["content"]) for m in backend.calls[1][1])
    spots = [prompt.find(t) for t in ("what is on the table?", "the red thing", "on the left")]
    assert -1 not in spots and spots == sorted(spots), prompt
    assert heard == ["hello robot", "what is on the table?", "the red thing", "on the left"]
    assert waited == [0, 1, 2, 3]                            # each line after its frames
    assert records == [(1, "hello robot"), (2, "what is on the table?"), (2, "the red thing"),
                       (2, "on the left")]                   # each names the reply that took it
    assert finals[1].turn_id == 2
    user = [line for line in conv.state()["timeline"] if line.startswith("user")]
    assert len(user) == 4


def test_each_line_is_read_for_intents_before_its_reply_and_a_line_only_heard_too():
    """on_person_line runs on the worker before the reply is asked (an intent is timely)."""
    seen, talk, made = [], [True], {}
    backend, conv, turns, out = made["rig"] = gated_turn_taker(False, False, hooks=TurnHooks(
        on_person_line=lambda text, speaker: seen.append(
            (text, speaker, len(made["rig"][0].calls), threading.current_thread().name)),
        converse=lambda: talk[0]))
    try:
        turns.utterance("hello robot", "ada")
        assert until(lambda: seen, timeout=10)
        backend.gate["reply"].set()
        assert until(lambda: sum(c.final for c in out) == 1, timeout=10)
        talk[0] = False                              # outside a chat: heard, not answered
        assert turns.utterance("take me to the kitchen", "ada")
        assert until(lambda: len(seen) == 2, timeout=10)
    finally:
        turns.close()
        conv.close()
    assert seen == [("hello robot", "ada", 0, "vd-turns"),
                    ("take me to the kitchen", "ada", 1, "vd-turns")]
    assert sum(c.final for c in out) == 1 and len(backend.calls) == 1


def test_every_hearer_hears_every_line_at_once_in_the_order_given():
    """The robot's tools and the memory both hear each line (and its stamp) before a reply."""
    heard, talk = [], [True]
    backend, conv, turns, out = gated_turn_taker(False, False,
                                                 hooks=TurnHooks(converse=lambda: talk[0]))
    turns.hear_with(lambda text, at: heard.append(("tools", text, len(backend.calls))))
    turns.hear_with(lambda text, at: 1 / 0)                 # a failing one stops nobody
    turns.hear_with(lambda text, at: heard.append(("memory", text, at)))
    try:
        turns.utterance("hello robot", "ada", said_at=12.5)
        talk[0] = False                              # a line only heard is heard by both too
        turns.utterance("I like sailing", "ada")
    finally:
        backend.gate["reply"].set()
        turns.close()
        conv.close()
    assert heard[:2] == [("tools", "hello robot", 0), ("memory", "hello robot", 12.5)]
    assert [h[:2] for h in heard[2:]] == [("tools", "I like sailing"),
                                          ("memory", "I like sailing")]
    assert heard[3][2] is None


class SlowBackend:
    """Streams its reply after `delay` seconds; records whether its stream was closed."""

    supports_images = False

    def __init__(self, delay):
        self.delay, self.closed = delay, threading.Event()

    def complete(self, messages, **kw):
        return "A summary."

    def stream(self, messages, **kw):
        try:
            time.sleep(self.delay)
            yield "Late hello."
            yield "More."
        finally:
            self.closed.set()


@pytest.mark.fault("LLM", "slow model past the reply deadline (core)")
def test_reply_deadline_gives_the_fallback_and_stops_the_late_stream():
    backend = SlowBackend(delay=3.0)
    conv = Conversation(backend, load_persona(), ConversationConfig())
    try:
        spoken = []
        t0 = time.monotonic()
        res = conv.turn("hello", on_sentence=lambda s, i, fallback=False: spoken.append(
            (s, fallback)), deadline=time.monotonic() + 0.2)
        assert time.monotonic() - t0 < backend.delay   # the fallback did not wait for it
        assert res.fallback and "DeadlineExceeded" in res.error
        assert spoken == [(res.text, True)] and res.text in load_persona().fallback_lines
        assert backend.closed.wait(10.0)            # the late generation was stopped
        lines = conv.state()["timeline"]
        assert lines[-1] == f"robot: {res.text}"    # the timeline holds what was said
        ok = conv.turn("again", deadline=time.monotonic() + 5.0)
        assert not ok.fallback and ok.text == "Late hello. More."
    finally:
        conv.close()


def test_turn_taker_orders_turns_greets_once_and_reports_an_all_fallback_run():
    from vision_dialogue.core.proactive import ProactiveConfig, ProactivePolicy
    from vision_dialogue.core.turn_taking import TurnTaker

    frames = Arrived(7)
    frames_waited = frames.waited
    backend, conv, turns, out = gated_turn_taker(True, True, frames=frames)
    settings = turns.settings
    try:
        frame = conv.add_frame(IMG)     # the turn-taker hears of it: maybe someone, the greeting
        frame.people = 1
        turns.frame_added(frame)                           # ... only once
        assert until(lambda: backend.calls, timeout=10)     # the greeting is being asked for
        assert not turns.utterance("   ")                  # empty: refused, nothing queued
        assert turns.utterance("what is this?", "ada")
        backend.gate["reply"].set()
        assert until(lambda: sum(c.final for c in out) == 2, timeout=10)
        finals = [c for c in out if c.final]
        assert [c.in_reply_to for c in finals] == ["", "what is this?"]
        assert [c.turn_id for c in finals] == [1, 2] and frames_waited == [7]
        chunks = [c for c in out if not c.final and c.turn_id == 2]
        assert [c.index for c in chunks] == list(range(len(chunks))) and chunks
        assert not turns.every_reply_failed
        backend.fail["reply"] = 99                           # from now on the LLM fails
    finally:
        turns.close()
    failing = TurnTaker(conv, ProactivePolicy(ProactiveConfig("paper")),
                        {**settings, "greet_first": False}, out.append, max_waiting=4)
    failing.start_worker()
    try:
        failing.utterance("hello?")
        assert until(lambda: failing.replies == 1, timeout=10)
        assert failing.every_reply_failed and out[-1].fallback
    finally:
        failing.close()
        conv.close()


def test_a_paused_deadline_waits_for_the_robot_to_act():
    """A tool call that moves the robot pauses the reply deadline (its own timeout bounds it)."""
    from vision_dialogue.core.deadlines import DeadlineExceeded, FirstBy
    box: list = []

    def parts():
        with box[0].pause():           # the robot walks for 0.5 s, past the 0.2 s deadline
            time.sleep(0.5)
        yield "I took you there."

    box.append(FirstBy(parts, time.monotonic() + 0.2, lambda late: None))
    assert list(box[0]) == ["I took you there."]

    def slow():
        time.sleep(0.5)                # the LLM itself: the deadline holds
        yield "Too late."
    with pytest.raises(DeadlineExceeded):
        list(FirstBy(slow, time.monotonic() + 0.2, lambda late: None))


def test_with_a_person_manager_a_frame_does_not_greet_its_report_does():
    """A person manager publishes persons: the greeting waits for its report (which names).

    The first frame with someone in it queues nothing; greet_once (the manager's report or
    an engagement) queues the one opening remark.
    """
    backend, conv, turns, out = gated_turn_taker(
        True, False, hooks=TurnHooks(persons_from_a_manager=lambda: True))
    backend.gate["reply"].set()
    try:
        frame = conv.add_frame(IMG)
        frame.people = 1
        turns.frame_added(frame)
        assert len(turns.queue) == 0 and turns._answering == 0 and not backend.calls
        assert turns.greet_once() and not turns.greet_once()
        assert until(lambda: sum(c.final for c in out) == 1, timeout=10)
        assert [c.in_reply_to for c in out if c.final] == [""]
    finally:
        turns.close()
        conv.close()


def test_the_opening_remark_waits_for_a_speech_node_to_listen(monkeypatch):
    """Said before a speech node listens, nobody hears the greeting: it waits for one.

    CI's demo: the speech node started half a second after the camera's first frame, and
    its script waited 120 s for a greeting already gone. With no listener it goes out after
    GREETING_LISTENER_WAIT_S, and a person who speaks first is answered (no remark).
    """
    import vision_dialogue.core.turn_taking as turn_taking
    listens, asked = threading.Event(), []

    def speech_listens():
        asked.append(time.monotonic())
        return listens.is_set()
    backend, conv, turns, out = gated_turn_taker(True, False, hooks=TurnHooks(
        speech_listens=speech_listens))
    backend.gate["reply"].set()
    try:
        assert turns.greet_once()
        assert until(lambda: len(asked) >= 3, timeout=10)   # the worker waits for a listener
        assert not backend.calls and not out
        listens.set()
        assert until(lambda: sum(c.final for c in out) == 1, timeout=10)
        assert [c.in_reply_to for c in out if c.final] == [""]
    finally:
        turns.close()
        conv.close()
    monkeypatch.setattr(turn_taking, "GREETING_LISTENER_WAIT_S", 0.3)
    for person_first in (False, True):
        backend, conv, turns, out = gated_turn_taker(True, False, hooks=TurnHooks(
            speech_listens=lambda: False))
        backend.gate["reply"].set()
        try:
            assert turns.greet_once()
            if person_first:
                assert turns.utterance("hello?")
            assert until(lambda: sum(c.final for c in out) == 1, timeout=10)
            assert [c.in_reply_to for c in out if c.final] == ["hello?" if person_first else ""]
        finally:
            turns.close()
            conv.close()


def test_a_greeting_on_a_report_waits_for_the_frame_the_manager_was_looking_at():
    """A report while the manager still looks at its first frame: the greeting waits for it.

    people_node reported the demo's person before the manager had taken that frame into its
    prompt: the greeting went out with no frame and said the robot's eyes were not working.
    Without a frame received (no camera) it greets at once.
    """
    from vision_dialogue.core.turn_taking import GREETING_FRAME_WAIT_S
    for received in (1, 0):
        frames = Arrived(received)
        backend, conv, turns, out = gated_turn_taker(
            True, False, frames=frames, hooks=TurnHooks(persons_from_a_manager=lambda: True))

        def frame_in(count, timeout=0.0):       # the intake takes the frame into the prompt
            frames.waited.append((count, timeout))
            conv.add_frame(IMG)
            return True
        frames.wait_through = frame_in
        backend.gate["reply"].set()
        try:
            assert turns.greet_once(on_report=True) and not turns.greet_once(on_report=True)
            assert until(lambda: sum(c.final for c in out) == 1, timeout=10)
            [(_kind, msgs, _kw)] = backend.of_kind("reply")
            prompt = json.dumps(msgs)
            assert ("image_url" in prompt) == bool(received), prompt
            assert frames.waited == ([(1, GREETING_FRAME_WAIT_S)] if received else [])
        finally:
            turns.close()
            conv.close()


def test_a_person_the_person_manager_never_reports_is_greeted_from_the_frames():
    """people_node reports nobody for a face it cannot print: the frames greet after a while.

    Frames every 5 s (the demo's camera) showing someone: nothing while the person manager
    has sent no list (it may still be loading); once it reports, nothing for
    PERSON_REPORT_WAIT_S (camera time), then the opening remark, once.
    """
    from vision_dialogue.core.turn_taking import PERSON_REPORT_WAIT_S
    reports = [False]
    backend, conv, turns, out = gated_turn_taker(True, False, hooks=TurnHooks(
        persons_from_a_manager=lambda: True, person_manager_reports=lambda: reports[0]))
    backend.gate["reply"].set()
    try:
        t0 = 1000.0
        for k, stamp in enumerate((t0, t0 + 20.0, t0 + 25.0, t0 + 30.0)):
            reports[0] = k >= 2                     # its first list comes after 20 s
            conv.add_frame(IMG, stamp=stamp)        # the turn-taker hears of it at once
            assert not turns._spoken_to and len(turns.queue) == 0, k
            assert all(kind == "summary" for kind, *_ in backend.calls), k   # the paper's rule
        assert 30.0 - 25.0 < PERSON_REPORT_WAIT_S <= 35.0 - 25.0
        conv.add_frame(IMG, stamp=t0 + 35.0)
        assert until(lambda: sum(c.final for c in out) == 1, timeout=10)
        assert [c.in_reply_to for c in out if c.final] == [""]
        assert not turns.greet_once()                     # once: a late report greets no more
    finally:
        turns.close()
        conv.close()


def test_a_line_to_say_tells_that_it_starts_before_its_words_go_out():
    """An Ask's question: `started` comes before the line is published, `done` after.

    (An answer said as soon as the question is heard then comes after `started`.)
    """
    order = []
    backend, conv, turns, out = gated_turn_taker(False, False)
    turns._publish = lambda chunk: (order.append("published"), out.append(chunk))
    try:
        backend.gate["reply"].set()
        turns.say("May I remember you?", lambda r: order.append("done"),
                  started=lambda: order.append("started"))
        assert until(lambda: "done" in order, timeout=10)
    finally:
        turns.close()
        conv.close()
    assert order[0] == "started" and order[-1] == "done" and "published" in order[1:-1]
