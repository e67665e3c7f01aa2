"""Dialogue budget: old lines fold into a running summary, newest turns stay verbatim."""
import threading
import time

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.timeline import LineItem


def conv(be, **cfg):
    return Conversation(be, load_persona(), ConversationConfig(**cfg))


def lines(c):
    return [i.text for i in c.timeline.snapshot() if isinstance(i, LineItem)]


def test_old_lines_fold_and_recent_stay_verbatim():
    be = FakeChatBackend(responder=lambda msgs, kind: {
        "reply": "Sure thing.", "fold": "We talked about fruit.", "summary": "S."}[kind])
    c = conv(be, history_budget_chars=120, keep_recent_lines=4)
    try:
        for i in range(6):
            c.turn(f"Tell me about fruit number {i} please")
            c.wait_idle(5)
        st = c.state()
        assert st["history_summary"] == "We talked about fruit."
        assert st["folded_lines"] >= 2
        kept = lines(c)
        assert len(kept) >= 4
        assert kept[-2:] == ["Tell me about fruit number 5 please", "Sure thing."]
        assert sum(len(t) for t in kept) <= 120 + 2 * 40     # bounded near the budget
        # the fold requests got the old lines in order, each with the earlier memory
        bodies = [m[-1]["content"] for _, m, _ in be.of_kind("fold")]
        assert "Person: Tell me about fruit number 0 please" in bodies[0]
        assert "Earlier memory: (none)" in bodies[0]
        assert "Earlier memory: We talked about fruit." in bodies[1]
        allb = "\n".join(bodies)
        assert allb.index("number 0") < allb.index("number 1") < allb.index("number 2")
        # the next reply prompt carries the running summary before the kept lines
        c.turn("And now?")
        reply_msgs = be.of_kind("reply")[-1][1]
        assert "We talked about fruit." in reply_msgs[1]["content"]
    finally:
        c.close()


def test_fold_runs_in_background_and_failure_keeps_lines():
    be = FakeChatBackend()
    be.fail["fold"] = 1
    be.gate["fold"] = threading.Event()
    c = conv(be, history_budget_chars=50, keep_recent_lines=2)
    try:
        c.turn("A fairly long first sentence from the user.")
        r = c.turn("Second one.")        # starts a fold (after the turn) that blocks on the gate
        deadline = time.monotonic() + 5
        while not be.of_kind("fold") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(be.of_kind("fold")) == 1
        assert not r.fallback            # ... and the turn did not wait for it
        be.gate["fold"].set()            # the fold fails: the lines stay verbatim
        assert c.wait_idle(5)
        assert c.state()["folded_lines"] == 0
        assert lines(c)[0] == "A fairly long first sentence from the user."
        c.turn("Third one.")             # next trigger: the fold is retried and succeeds
        assert c.wait_idle(5)
        st = c.state()
        assert st["folded_lines"] >= 1 and st["history_summary"].startswith("Memory")
        assert "A fairly long first sentence from the user." not in lines(c)
        assert lines(c)[-2:] == ["Third one.", "Hello there. Lovely day!"]
    finally:
        be.gate["fold"].set()
        c.close()
