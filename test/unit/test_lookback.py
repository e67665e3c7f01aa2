"""Look-back memory: frames that left the prompt, seen again through the look_back tool."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.common.images import Frame
from vision_dialogue.core.lookback import (LOOK_BACK, LOOK_BACK_NOTE, FrameArchive, LookBack,
                                           ToolSet, about_the_past)
from vision_dialogue.core.persona import load_persona
from vision_dialogue.llm.openai_backend import ToolCall
from vision_dialogue.llm.tool_loop import ToolOutcome


def frame(i: int, stamp: float, observation: str = "") -> Frame:
    return Frame(np.full((48, 64, 3), i * 20 % 255, np.uint8), id=i, stamp=stamp,
                 observation=observation)


def archive_of(now: float) -> FrameArchive:
    a = FrameArchive(max_frames=10)
    a.add(frame(1, now - 300, "one person, close, wearing orange"))
    a.add(frame(2, now - 120, "no one there; a red cup on a brown table"))
    a.add(frame(3, now - 60, "no one there; a cat on a sofa"))
    a.add(frame(4, now - 5, "no one there; a rocket"))
    return a


def test_frames_are_found_by_time_by_what_they_show_or_the_first():
    now = time.time()
    a = archive_of(now)
    a.summarised([2, 3], "I saw a cup and then a cat.")
    assert a.find(seconds_ago=110, now=now).id == 2
    assert a.find(about="the cups", now=now).id == 2               # plural and stop words
    assert a.find(about="a cat", exclude={3}, now=now).id == 2     # via the summary
    assert a.find(now=now).id == 1                                 # the first thing seen
    assert a.find(about="giraffe", now=now) is None
    assert a.find(exclude={1, 2, 3, 4}) is None


def test_the_archive_is_bounded_and_forgets_summaries_with_frames():
    a = FrameArchive(max_frames=3)
    for i in range(1, 6):
        a.add(frame(i, float(i)))
    a.summarised([1], "gone")
    assert [f.id for f in a.frames()] == [3, 4, 5]


def test_the_tool_answers_with_words_and_for_vision_models_the_frame():
    now = time.time()
    a = archive_of(now)
    a.summarised([2], "I saw a red cup.")
    text_only = LookBack(a, in_prompt=lambda: {4})
    out = text_only.run(LOOK_BACK, {"about": "cup"})
    assert out.ok and out.image_url is None
    assert "Frame 2, 2 minutes ago." in out.text and "I saw a red cup." in out.text
    assert "a red cup on a brown table" in out.text
    vision = LookBack(a, in_prompt=lambda: {4}, image_url=lambda f: f"data:image/jpeg;x{f.id}")
    assert vision.run(LOOK_BACK, {"seconds_ago": "300"}).image_url == "data:image/jpeg;x1"
    assert "nothing earlier" in vision.run(LOOK_BACK, {"about": "giraffe"}).text
    assert "seconds_ago" in vision.run(LOOK_BACK, {"seconds_ago": "a while"}).error
    assert LookBack(a, in_prompt=lambda: {1, 2, 3, 4}).schemas() == []   # all in view


@pytest.mark.parametrize("text, past", [
    ("What did you see when we started talking?", True), ("Was there a cup before?", True),
    ("What did you see a minute ago?", True), ("Do you remember my hat?", True),
    ("What do you see now?", False), ("Hello robot!", False)])
def test_turns_about_the_past(text, past):
    assert about_the_past(text) is past


class ToolsBackend(FakeChatBackend):
    """Replies plainly, or (with tools offered) calls look_back once, then answers."""

    supports_images = True

    def __init__(self):
        super().__init__()
        self.tool_requests = []

    def complete_with_tools(self, messages, tools, *, model=None, tool_choice="auto",
                            max_tokens=None):
        self.tool_requests.append({"messages": list(messages), "tools": tools})
        if not any(m.get("role") == "tool" for m in messages):
            return "", [ToolCall("lb", LOOK_BACK, {"about": "cup"})]
        return "Earlier I saw a red cup on the table.", []


def test_a_turn_about_the_past_looks_back_and_the_llm_sees_the_frame():
    be = ToolsBackend()
    conv = Conversation(be, load_persona(), ConversationConfig(n=4, m=3, summary_mode="merge"),
                        observer=None)
    try:
        scenes = ["one person, close", "no one there; a red cup on a table", "no one there",
                  "no one there; a cat", "a rocket", "a rocket", "a rocket"]
        for i, obs in enumerate(scenes):
            conv.add_frame(np.full((60, 80, 3), 40 * i, np.uint8)).observation = obs
        assert conv.wait_idle(5.0)
        assert conv.turn("What do you see?").text == "Hello there. Lovely day!"
        assert be.tool_requests == []                       # not about the past: streamed
        res = conv.turn("Was there a cup before?")
        assert res.text == "Earlier I saw a red cup on the table."
        [rec] = res.tools
        assert rec.name == LOOK_BACK and "a red cup" in rec.outcome.text
        req = be.tool_requests[-1]["messages"]
        assert {"role": "system", "content": LOOK_BACK_NOTE} in req
        shown = [p for m in req if m["role"] == "user" and isinstance(m["content"], list)
                 for p in m["content"]]
        assert any(p.get("text") == "[What look_back shows:]" for p in shown)
        assert any(p.get("type") == "image_url" for p in shown[-1:])
    finally:
        conv.close()


def test_a_tool_set_offers_all_and_leaves_out_a_failing_provider():
    class Broken:
        def schemas(self):
            raise ConnectionError("VFM server gone")
    errors = []
    look = LookBack(archive_of(time.time()), in_prompt=set)
    tools = ToolSet(look, Broken(), on_error=errors.append)
    assert [s["function"]["name"] for s in tools.schemas()] == [LOOK_BACK]
    assert isinstance(errors[0], ConnectionError)
    assert tools.run(LOOK_BACK, {}).ok
    assert tools.run("canny", {}).error == "unknown tool 'canny'"
    assert json.dumps(tools.schemas())         # plain JSON for the request
    assert isinstance(tools.run(LOOK_BACK, {"about": "cat"}), ToolOutcome)
