"""The paper's prompt bound holds at any backend speed (issue 11).

A reply prompt never shows more than `n` raw frames, a reply never waits behind a background
summary on a one-at-a-time model, and no frame is lost at exit: every frame ends up either
summarised or still raw in the timeline, and each summary is reported (the transcript's
"summary" events).
"""
import time

import numpy as np
import pytest

from fake_chat_backend import OneAtATimeBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.summariser import bounded, merge_observations
from vision_dialogue.core.timeline import FrameItem, LineItem, SummaryItem

pytestmark = pytest.mark.timeout(120)

FRAMES, TURNS = 100, 20


def img(v):
    return np.full((48, 64, 3), v % 200 + 30, np.uint8)


def images_in(msgs) -> int:
    """Raw frames a vision model's reply prompt shows: its image parts.

    (A text model's earlier frame reads as its one-frame summary, so its raw frames are
    counted from the reply's frame ids.)
    """
    return sum(1 for m in msgs if isinstance(m["content"], list)
               for p in m["content"] if p.get("type") == "image_url")


def as_pair(entry) -> tuple:
    """(record type, record) of a conversation's entry."""
    return entry.TYPE, entry.to_record()


def run_session(backend, n, m, pace=0.005, **cfg):
    """100 frames, a turn after every 5th; returns the conversation's events and replies."""
    events = []
    observer = (lambda bgr: f"seen: grey level {int(bgr.mean())}") \
        if not backend.supports_images else None
    c = Conversation(backend, load_persona(), ConversationConfig(n=n, m=m, **cfg),
                     observer=observer, listeners=[lambda e: events.append(as_pair(e))])
    results = []
    try:
        for i in range(FRAMES):
            c.add_frame(img(i))
            if i % 5 == 4:
                results.append(c.turn(f"question {i // 5}"))
            time.sleep(pace)
    finally:
        c.close(timeout=0.2)
    return c, events, results


def check_nothing_lost(c, events):
    summarised = [fid for k, d in events if k == "summary" for fid in d["frame_ids"]]
    raw = [it.id for it in c.timeline.snapshot() if isinstance(it, FrameItem)]
    assert sorted(summarised + raw) == list(range(1, FRAMES + 1)), "a frame went missing"
    assert not any(it.pending for it in c.timeline.snapshot() if isinstance(it, FrameItem))


@pytest.mark.parametrize("n,m,summary_tokens", [(4, 3, 8), (3, 1, 8), (4, 3, 40)])
def test_llm_summaries_on_a_slow_model_never_hold_up_a_reply_or_break_the_bound(
        n, m, summary_tokens):
    # a reply takes 5 tokens, a summary 8 (some finish between turns) or 40 (too slow to ever
    # finish between turns: the backlog is merged without the LLM)
    be = OneAtATimeBackend(token_s=0.01, summary_tokens=summary_tokens)
    c, events, results = run_session(be, n, m, pace=0.02, summary_mode="llm")
    assert len(results) == TURNS and not any(r.fallback for r in results)
    replies = be.of_kind("reply")
    assert len(replies) == TURNS
    shown = [images_in(msgs) for _, msgs, _ in replies]
    assert max(shown) <= n, shown
    assert all(len(r.frame_ids) <= n for r in results)
    # a reply waits at most for the token the background call is computing
    assert max(be.reply_waits) <= 1, sorted(be.reply_waits)[-3:]
    assert be.preempted > 0            # summaries did give way
    check_nothing_lost(c, events)
    methods = {d["method"] for k, d in events if k == "summary"}
    assert ("llm" in methods) == (summary_tokens < 10), methods
    assert "merge" in methods or summary_tokens < 10


def test_text_only_model_summarises_without_the_llm():
    be = OneAtATimeBackend(token_s=0.01, supports_images=False)
    c, events, results = run_session(be, 4, 3)           # summary_mode auto -> merge
    assert c.summary_mode == "merge"
    assert not be.of_kind("summary"), "the slow model was asked for a summary"
    assert all(len(r.frame_ids) <= 4 for r in results)
    assert max(be.reply_waits) == 0
    check_nothing_lost(c, events)
    summaries = [d for k, d in events if k == "summary"]
    assert summaries and all(d["method"] == "merge" for d in summaries)
    assert "seen: grey level" in summaries[0]["text"]


def test_a_one_frame_summary_leaves_a_text_models_prompt_as_it_was_read():
    """A summary of frames between lines changes nothing a text model has read.

    A question after each frame, as in a session: the prefix cache of a local model holds
    across their summaries (issue 32: before, each summary made the next turn read everything
    after it again).
    """
    from fake_chat_backend import FakeChatBackend
    be = FakeChatBackend(supports_images=False)
    events = []
    c = Conversation(be, load_persona(), ConversationConfig(n=4, m=3),
                     observer=lambda bgr: f"seen: grey level {int(bgr.mean())}; a cup.",
                     listeners=[lambda e: events.append(as_pair(e))])
    try:
        for i in range(8):
            c.add_frame(img(i * 20))
            c.turn(f"question {i}")
    finally:
        c.close(timeout=0.2)
    methods = [d["method"] for k, d in events if k == "summary"]
    assert len(methods) >= 4 and set(methods) == {"merge"}, methods    # one per frame from the 4th
    prompts = [msgs for _, msgs, _ in be.of_kind("reply")]
    assert len(prompts) == 8
    for before, after in zip(prompts, prompts[1:]):
        read = before[:-2]               # all but the note of what it sees now and the line
        assert after[:len(read)] == read
        assert after[len(read)] == before[-1]        # then the line it answered


def test_pending_summaries_are_written_at_exit():
    be = OneAtATimeBackend(token_s=0.05, summary_tokens=1000)   # never finishes by itself
    events = []
    c = Conversation(be, load_persona(), ConversationConfig(n=3, m=2, summary_mode="llm"),
                     listeners=[lambda e: events.append(as_pair(e))])
    for i in range(6):
        c.add_frame(img(i))
    t0 = time.monotonic()
    c.close(timeout=0.1)
    # the background call stopped at once, not after its 1000 tokens (50 s)
    assert time.monotonic() - t0 < 10.0
    summaries = [d for k, d in events if k == "summary"]
    assert summaries and {d["method"] for d in summaries} == {"merge"}
    check_frames = [fid for d in summaries for fid in d["frame_ids"]]
    raw = [it.id for it in c.timeline.snapshot() if isinstance(it, FrameItem)]
    assert sorted(check_frames + raw) == list(range(1, 7))


def test_bounded_turns_excess_frames_into_provisional_summaries():
    from vision_dialogue.common.images import Frame

    def frame(i, obs=""):
        f = Frame(bgr=img(i), stamp=float(i))
        f.id, f.observation = i, obs
        return FrameItem(f, pending=True)

    items = [frame(1, "a cat"), frame(2, "a cat"), LineItem("user", "hi"), frame(3, "a cup"),
             frame(4), frame(5), frame(6)]
    out = bounded(items, 3, "thinking")
    kinds = [it.kind for it in out]
    assert kinds == ["summary", "line", "summary", "frame", "frame", "frame"]
    assert out[0].text == "a cat" and out[0].frame_ids == (1, 2)
    assert out[2].text == "a cup" and out[2].method == "provisional"
    assert bounded(items[:3], 3, "x") == items[:3]
    only_images = [frame(i) for i in range(1, 6)]
    assert bounded(only_images, 2, "thinking")[0].text == "thinking"
    assert isinstance(bounded(only_images, 2, "thinking")[0], SummaryItem)


def test_merge_observations_keeps_changes_in_order():
    assert merge_observations(["a cat.", "a cat", "", "no one", "a cat"]) == \
        "a cat; then no one; then a cat"
    assert merge_observations(["", None]) == ""


def _text_prompt(builder, timeline) -> str:
    """The reply prompt without what the robot sees now (said again at the end each turn)."""
    msgs = builder.reply_messages(timeline.snapshot())
    now = builder.persona.frame_label
    return "\n".join(f"{m['role']}: {m['content']}" for m in msgs
                     if not m["content"].startswith(now))


def test_a_text_models_prompt_keeps_its_text_when_frames_are_summarised_or_come():
    """A local text model re-reads only the prompt's changed tail (llama.cpp's prefix cache).

    A merge summary of some frames between two dialogue lines, with the events among them,
    leaves every character of the prompt as it was; a new frame only extends the last line of
    what the robot saw. (The prompt used to change at the summarised frames: on 2 CPU cores
    the 1.5B read 150-250 tokens again for each reply, about 5 s.)
    """
    from vision_dialogue.common.images import Frame
    from vision_dialogue.core.prompt import PromptBuilder
    from vision_dialogue.common.images import ImagePolicy
    from vision_dialogue.core.summariser import SummaryRule, merged_text
    from vision_dialogue.core.timeline import Timeline
    builder = PromptBuilder(load_persona(), ImagePolicy(), supports_images=False)
    timeline, rule = Timeline(), SummaryRule(n=4, m=3)
    seen = iter(["a person in orange", "a person in orange", "no one there", "a cat",
                 "a person in blue", "no one there", "a cup", "a cup"])

    def frame():
        timeline.add_frame(Frame(bgr=img(0), observation=next(seen)))

    frame()
    timeline.add_line("user", "Hello!")
    frame()
    timeline.add_event("someone waved")
    frame()
    timeline.add_line("robot", "Hi there!")
    frame()
    before = _text_prompt(builder, timeline)
    frame()
    grown = _text_prompt(builder, timeline)
    assert grown.startswith(before) and grown.endswith("a cat; then a person in blue")
    for _ in range(3):
        frame()
        due = timeline.take(rule.due)
        assert due, [type(it).__name__ for it in timeline.snapshot()]
        before = _text_prompt(builder, timeline)
        timeline.splice_summary(due, merged_text(timeline.span(due), "?"), method="merge")
        assert _text_prompt(builder, timeline) == before
    assert sum(isinstance(it, SummaryItem) for it in timeline.snapshot()) == 3
    assert before.count("Earlier you saw:") == 3       # one line per run between lines
    assert "a person in orange; then someone waved; then no one there" in before
