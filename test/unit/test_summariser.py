"""Background frame summaries: the request, splicing, not blocking turns, failures, threads."""
import threading
import time

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.summariser import SummaryRule
from vision_dialogue.core.timeline import FrameItem, LineItem, SummaryItem


def img(v=128, h=48, w=64):
    return np.full((h, w, 3), v, np.uint8)


def conv(backend, **cfg):
    return Conversation(backend, load_persona(), ConversationConfig(**cfg))


@pytest.mark.parametrize("n,m,name", [(3, 3, "m="), (4, 5, "m="), (4, 0, "m="), (1, 1, "n="),
                                      (0, 1, "n=")])
def test_invalid_n_m_rejected_naming_parameter(n, m, name):
    err = SummaryRule.problem(n, m)
    assert err is not None and err.startswith(name)
    with pytest.raises(ValueError, match=f"^{name}"):
        SummaryRule(n, m)
    with pytest.raises(ValueError, match=f"^{name}"):
        Conversation(FakeChatBackend(), load_persona(), ConversationConfig(n=n, m=m))


def test_valid_n_m_accepted():
    assert SummaryRule.problem(4, 3) is None and SummaryRule.problem(2, 1) is None


def test_summary_request_holds_instructions_conversation_then_frames():
    be = FakeChatBackend()
    c = conv(be, n=3, m=2)
    try:
        c.add_frame(img())
        c.add_frame(img())
        c.turn("My name is Ada.")
        c.add_frame(img())            # 3 raw frames: frames 1-2 are summarised
        assert c.wait_idle(5)
        (kind, msgs, kw), = be.of_kind("summary")
        assert msgs[0]["role"] == "system" and "curious child" in msgs[0]["content"]
        # conversation up to the frames: frames 1-2 came before the user line, so none of it
        assert "Ada" not in str(msgs)
        last = msgs[-1]["content"]
        assert [p["type"] for p in last] == ["image_url", "image_url", "text"]
        assert "one short sentence" in last[-1]["text"]
        st = c.state()
        assert st["timeline"][0].startswith("summary 1-2: I saw thing")
        assert st["raw_frames"] == 1 and st["frame_summaries"] == 1
    finally:
        c.close()


def test_summary_request_includes_earlier_lines_and_summaries():
    be = FakeChatBackend()
    c = conv(be, n=3, m=2)
    try:
        c.add_frame(img())
        c.add_frame(img())
        c.add_frame(img())            # summary of 1-2
        c.wait_idle(5)
        c.turn("I like red apples.")
        c.add_frame(img())
        c.add_frame(img())            # raw 3,4,5 -> 3 alone (user + robot line after it)
        c.wait_idle(5)
        msgs = be.of_kind("summary")[1][1]
        text = str(msgs)
        assert "I saw thing" in text        # the earlier summary
        assert "red apples" not in text     # the lines come after frame 3: not included
        assert sum(p["type"] == "image_url" for p in msgs[-1]["content"]) == 1
        c.add_frame(img())                  # raw 4,5,6 -> 4,5 (after the dialogue)
        c.wait_idle(5)
        msgs = be.of_kind("summary")[2][1]
        assert "red apples" in str(msgs)    # conversation before frames 4-5 is included
    finally:
        c.close()


def test_turn_never_waits_for_a_summary_and_splice_is_in_place():
    be = FakeChatBackend()
    be.gate["summary"] = threading.Event()
    c = conv(be, n=4, m=3)
    try:
        for _ in range(4):
            c.add_frame(img())        # summary of 1-3 starts and blocks on the gate
        assert be_wait(lambda: len(be.of_kind("summary")) == 1)
        r = c.turn("Can you see me?")            # must not wait for the blocked summary
        assert not r.fallback and r.text == "Hello there. Lovely day!"
        c.add_frame(img())
        assert c.state()["pending_summaries"] == 1
        be.gate["summary"].set()
        assert c.wait_idle(5)
        tl = c.state()["timeline"]
        assert tl[0].startswith("summary 1-3") and tl[1:] == [
            "frame 4", "user: Can you see me?", "robot: Hello there. Lovely day!", "frame 5"]
    finally:
        be.gate["summary"].set()
        c.close()


def be_wait(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_failed_summary_keeps_frames_retries_then_marks():
    be = FakeChatBackend()
    be.fail["summary"] = 3
    c = conv(be, n=3, m=2, max_summary_failures=3)
    try:
        for _ in range(3):
            c.add_frame(img())
        c.wait_idle(5)
        st = c.state()
        assert st["raw_frames"] == 3 and st["frame_summaries"] == 0   # nothing lost
        c.add_frame(img())            # retry (fails again), frames still kept
        c.wait_idle(5)
        assert c.state()["raw_frames"] == 4
        c.add_frame(img())            # third failure: neutral marker replaces frames 1-2
        c.wait_idle(5)
        st = c.state()
        assert st["timeline"][0] == "summary 1-2: " + c.persona.lost_frames_marker
        assert c.summariser.failed == 3
        c.add_frame(img())            # the backend works again: normal summaries resume
        c.wait_idle(5)
        assert any("I saw thing" in s for s in c.state()["summaries"])
    finally:
        c.close()


def test_concurrent_frames_lines_and_summaries_lose_nothing():
    be = FakeChatBackend(latency=0.002)
    c = conv(be, n=4, m=3, history_budget_chars=10 ** 9, stream=False)
    frames_per_thread, threads = 30, 4
    errors = []

    def camera():
        try:
            for _ in range(frames_per_thread):
                c.add_frame(img(h=24, w=32))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    def talker(k):
        try:
            for i in range(5):
                c.turn(f"talker {k} line {i}")
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=camera) for _ in range(threads)]
    ts += [threading.Thread(target=talker, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors
    assert c.wait_idle(10)
    items = c.timeline.snapshot()
    covered = []
    for it in items:
        if isinstance(it, FrameItem):
            covered.append(it.id)
        elif isinstance(it, SummaryItem):
            ids = list(it.frame_ids)
            assert ids == list(range(ids[0], ids[0] + len(ids)))   # consecutive frames
            covered.extend(ids)
    assert covered == list(range(1, frames_per_thread * threads + 1))   # in order, each once
    assert not any(isinstance(it, FrameItem) and it.pending for it in items)
    lines = [it for it in items if isinstance(it, LineItem)]
    assert len(lines) == 2 * 3 * 5
    for k in range(3):
        mine = [ln.text for ln in lines if ln.text.startswith(f"talker {k} ")]
        assert mine == [f"talker {k} line {i}" for i in range(5)]
    raw = sum(isinstance(it, FrameItem) for it in items)
    assert raw < 4        # the rule keeps fewer than n raw frames once everything settled
    c.close()
