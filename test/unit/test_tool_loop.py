"""llm/tool_loop.py and vfm/tool_schemas.py.

The tool-call loop with a scripted in-process backend, tool schemas from ToolInfo-like entries, and
the Conversation's tool turns (no ROS, no network).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.llm.base import BackendError
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.entries import ExchangeEntry
from vision_dialogue.core.lookback import LOOK_BACK, LOOK_BACK_NOTE, SCHEMA as LOOK_SCHEMA
from vision_dialogue.llm.openai_backend import ToolCall
from vision_dialogue.core.persona import load_persona
from vision_dialogue.llm.tool_loop import FINAL_NOTE, TOOLS_NOTE, ToolOutcome, ToolRecord, \
    outcome_note, round_note, run_tool_loop
from vision_dialogue.vfm.tool_schemas import tool_schemas, usable
from vision_dialogue.vfm import registry

PROMPT = [{"role": "system", "content": "You are a robot."},
          {"role": "user", "content": "What does the sign say?"}]


def infos(*ops, status="ready"):
    return [{"name": registry.BY_OP[o].name, "op": o, "action_type": registry.BY_OP[o].action_type,
             "description": registry.BY_OP[o].description, "status": status} for o in ops]


TOOLS = tool_schemas(infos("vqa", "pix2pix", "canny", "text2image"))


class ScriptedBackend:
    """complete_with_tools answers from `script(messages, tools, tool_choice)`; records calls."""

    supports_images = True

    def __init__(self, script):
        self.script = script
        self.calls = []

    def complete_with_tools(self, messages, tools, *, model=None, tool_choice="auto",
                            stream=False, max_tokens=None, temperature=None):
        self.calls.append({"messages": [dict(m) for m in messages], "tools": list(tools),
                           "tool_choice": tool_choice, "model": model, "max_tokens": max_tokens})
        return self.script(messages, tools, tool_choice)


class Executor:
    """run_tool stand-in: records calls and answers per tool."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, name, args):
        self.calls.append((name, dict(args)))
        a = self.answers[name]
        return a(args) if callable(a) else a


def tool_messages(messages):
    return [m for m in messages if m["role"] == "tool"]


# --- schemas ---------------------------------------------------------------------------------
def test_schemas_named_by_op_with_parameters_from_the_tool_kind():
    by = {t["function"]["name"]: t["function"] for t in TOOLS}
    assert list(by) == ["vqa", "pix2pix", "canny", "text2image"]
    vqa = by["vqa"]["parameters"]
    assert set(vqa["properties"]) == {"image_file", "text"} and vqa["required"] == ["text"]
    assert "question" in vqa["properties"]["text"]["description"]
    canny = by["canny"]["parameters"]
    assert set(canny["properties"]) == {"image_file"} and canny["required"] == []
    t2i = by["text2image"]["parameters"]
    assert set(t2i["properties"]) == {"text"} and t2i["required"] == ["text"]
    # Visual ChatGPT's "comma separated string" input sentence is replaced by the JSON params
    assert all("comma separated" not in f["description"] for f in by.values())
    assert by["vqa"]["description"].startswith("Answer Question About The Image: ")


def test_only_usable_tools_are_offered():
    entries = infos("canny") + infos("caption", status="not loaded") + infos(
        "vqa", status="model 'Salesforce/blip-vqa-base' not found: give a local path")
    entries.append({"name": "X", "op": "x", "action_type": "sound_to_text",
                    "description": "", "status": "ready"})
    assert [usable(e) for e in entries] == [True, True, False, False]
    assert [t["function"]["name"] for t in tool_schemas(entries)] == ["canny", "caption"]


# --- the loop --------------------------------------------------------------------------------
def test_one_round_tool_result_goes_back_then_reply():
    def script(messages, tools, choice):
        tm = tool_messages(messages)
        if not tm:
            return "", [ToolCall("c1", "vqa", {"text": "what does the sign say?"})]
        return f"The sign says {tm[0]['content']}!", []

    be = ScriptedBackend(script)
    ex = Executor({"vqa": ToolOutcome(text="EXIT")})
    res = run_tool_loop(be, PROMPT, TOOLS, ex, max_rounds=3, model="m", max_tokens=50)
    assert res.text == "The sign says EXIT!"
    assert ex.calls == [("vqa", {"text": "what does the sign say?"})]   # no image_file: newest
    assert res.rounds == 2 and not res.hit_limit
    second = be.calls[1]["messages"]
    assert second[:2] == PROMPT
    assert second[2]["role"] == "assistant"
    assert second[2]["tool_calls"][0]["function"]["name"] == "vqa"
    assert second[3] == {"role": "tool", "tool_call_id": "c1", "content": "EXIT"}
    assert all(c["tools"] == TOOLS and c["model"] == "m" and c["max_tokens"] == 50
               for c in be.calls)


def test_two_rounds_chained_by_file_name():
    made = iter(["a1b2c3d4_pix2pix_f0f0f0f0_f0f0f0f0.png",
                 "e5e5e5e5_canny_a1b2c3d4_f0f0f0f0.png"])

    def script(messages, tools, choice):
        tm = tool_messages(messages)
        if not tm:
            return "Let me paint.", [ToolCall("p", "pix2pix", {"text": "make it a painting"})]
        if len(tm) == 1:
            name = re.search(r"The new image is (\S+)\.", tm[0]["content"]).group(1)
            return "", [ToolCall("c", "canny", {"image_file": name})]
        return "Here is your painting, and its edges.", []

    be = ScriptedBackend(script)
    ex = Executor({"pix2pix": lambda a: ToolOutcome(image_file=next(made)),
                   "canny": lambda a: ToolOutcome(image_file=next(made))})
    res = run_tool_loop(be, PROMPT, TOOLS, ex, max_rounds=3)
    assert ex.calls == [("pix2pix", {"text": "make it a painting"}),
                        ("canny", {"image_file": "a1b2c3d4_pix2pix_f0f0f0f0_f0f0f0f0.png"})]
    assert res.text == "Here is your painting, and its edges." and res.rounds == 3
    assert res.images() == ["a1b2c3d4_pix2pix_f0f0f0f0_f0f0f0f0.png",
                            "e5e5e5e5_canny_a1b2c3d4_f0f0f0f0.png"]
    assert "a1b2c3d4_pix2pix_f0f0f0f0_f0f0f0f0.png (pix2pix)" in res.memory_note()
    assert be.calls[1]["messages"][2]["content"] == "Let me paint."   # text kept with calls


def test_round_limit_asks_for_the_answer_without_tools():
    def script(messages, tools, choice):
        if choice == "none":
            return "I tried my best.", [ToolCall("z", "canny", {})]   # ignored
        return "", [ToolCall(f"c{len(messages)}", "canny",       # a new image each time
                             {"image_file": f"x{len(messages)}.png"})]

    be = ScriptedBackend(script)
    ex = Executor({"canny": ToolOutcome(image_file="x.png")})
    res = run_tool_loop(be, PROMPT, TOOLS, ex, max_rounds=2)
    assert len(ex.calls) == 2 and res.hit_limit and res.text == "I tried my best."
    assert [c["tool_choice"] for c in be.calls] == ["auto", "auto", "none"]
    assert be.calls[-1]["messages"][-1] == {"role": "system", "content": FINAL_NOTE}


def test_tool_error_goes_to_the_llm_which_answers_in_character():
    def script(messages, tools, choice):
        tm = tool_messages(messages)
        if not tm:
            return "", [ToolCall("a", "text2image", {"text": "a cat"}),
                        ToolCall("b", "vqa", {"text": "colour?"})]
        assert len(tm) == 2
        return "Oh no, my drawing hand is tired today.", []

    def broken(args):
        raise TimeoutError("no result within 1 s")

    be = ScriptedBackend(script)
    ex = Executor({"text2image": ToolOutcome(error="model 'sd' not found"), "vqa": broken})
    res = run_tool_loop(be, PROMPT, TOOLS, ex)
    tm = tool_messages(be.calls[1]["messages"])
    assert tm[0]["tool_call_id"] == "a" and tm[0]["content"].startswith("Error: model 'sd'")
    assert tm[1]["tool_call_id"] == "b" and "no result within 1 s" in tm[1]["content"]
    assert tm[1]["content"].startswith("Error:")
    assert res.text == "Oh no, my drawing hand is tired today."
    assert [r.outcome.ok for r in res.records] == [False, False]
    assert res.memory_note() == ""


def test_unknown_tool_and_bad_arguments_answered_with_an_error_not_run():
    def script(messages, tools, choice):
        if not tool_messages(messages):
            return "", [ToolCall("u", "teleport", {}), ToolCall("v", "vqa", {}),
                        ToolCall("w", "canny", {"colour": "red"})]
        return "Sorry, I cannot do that.", []

    be = ScriptedBackend(script)
    ex = Executor({})
    res = run_tool_loop(be, PROMPT, TOOLS, ex)
    assert ex.calls == []
    tm = tool_messages(be.calls[1]["messages"])
    assert "no tool named 'teleport'" in tm[0]["content"] and "vqa, pix2pix" in tm[0]["content"]
    assert "missing argument 'text'" in tm[1]["content"]
    assert "unknown argument 'colour'" in tm[2]["content"]
    assert res.text == "Sorry, I cannot do that."


def test_new_images_shown_to_a_vision_llm():
    def script(messages, tools, choice):
        if not tool_messages(messages):
            return "", [ToolCall("c", "canny", {})]
        return "Look at these lines!", []

    be = ScriptedBackend(script)
    url = "data:image/jpeg;base64,AAAA"
    ex = Executor({"canny": ToolOutcome(image_file="n.png", image_url=url)})
    run_tool_loop(be, PROMPT, TOOLS, ex, image_parts=True, image_detail="high")
    last = be.calls[1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0]["text"] == "[The image n.png:]"
    assert last["content"][1]["image_url"] == {"url": url, "detail": "high"}
    be2 = ScriptedBackend(script)
    run_tool_loop(be2, PROMPT, TOOLS, ex, image_parts=False)
    assert [m["role"] for m in be2.calls[1]["messages"][-2:]] == ["tool", "system"]
    assert be2.calls[1]["messages"][-1]["content"] == round_note(
        [ToolRecord("c", "canny", {}, ToolOutcome(image_file="n.png"))])


def test_llm_failure_raises_for_the_caller_to_fall_back():
    def script(messages, tools, choice):
        raise BackendError("HTTP 500")

    with pytest.raises(BackendError):
        run_tool_loop(ScriptedBackend(script), PROMPT, TOOLS, Executor({}))


def test_a_small_model_gets_one_round_and_is_told_how_it_went():
    """It would call the tool again and again; the robot must act once."""
    be = ScriptedBackend(lambda msgs, tools, choice:
                         ("", [ToolCall("c", "canny", {})]) if choice == "auto" else
                         ("I traced the edges for you.", []))
    ex = Executor({"canny": ToolOutcome(error="the VFM server is gone")})
    res = run_tool_loop(be, PROMPT, TOOLS, ex, max_rounds=3, one_round=True)
    assert ex.calls == [("canny", {})] and res.text == "I traced the edges for you."
    assert [c["tool_choice"] for c in be.calls] == ["auto", "none"] and not res.hit_limit
    assert be.calls[-1]["messages"][-1]["content"] == outcome_note(res.records)
    assert "canny did NOT work (the VFM server is gone)" in outcome_note(res.records)


def test_a_call_repeated_in_the_turn_is_not_run_twice():
    """A small model behind a server (several rounds) calls the same tool again."""
    be = ScriptedBackend(lambda msgs, tools, choice:
                         ("", [ToolCall("c", "canny", {})]) if choice == "auto" else
                         ("I traced the edges.", []))
    ex = Executor({"canny": ToolOutcome(text="edges traced")})
    res = run_tool_loop(be, PROMPT, TOOLS, ex, max_rounds=3)
    assert ex.calls == [("canny", {})] and res.text == "I traced the edges."
    assert [c["tool_choice"] for c in be.calls] == ["auto", "auto", "none"]
    assert "(Already done this turn.) edges traced" in [
        m["content"] for m in be.calls[-1]["messages"] if m["role"] == "tool"]
    assert be.calls[-1]["messages"][-1]["content"] == outcome_note(res.records)


# --- Conversation with tools -----------------------------------------------------------------
class ToolBackend(FakeChatBackend):
    """FakeChatBackend (summaries, folds, plain replies) + a scripted complete_with_tools."""

    def __init__(self, script, **kw):
        super().__init__(**kw)
        self.scripted = ScriptedBackend(script)
        self.complete_with_tools = self.scripted.complete_with_tools


class Provider:
    def __init__(self, schemas, executor):
        self._schemas = schemas
        self.run = executor

    def schemas(self):
        if isinstance(self._schemas, Exception):
            raise self._schemas
        return self._schemas


def frame():
    rng = np.random.default_rng(0)
    return rng.integers(60, 200, (120, 160, 3), dtype=np.uint8)


def make_conv(backend, stream=True):
    return Conversation(backend, load_persona(), ConversationConfig(n=4, m=3, stream=stream))


def test_conversation_tool_turn_streams_sentences_and_remembers_the_file():
    def script(messages, tools, choice):
        if not tool_messages(messages):
            return "", [ToolCall("c", "canny", {})]
        return "I drew the edges. Do you like them?", []

    be = ToolBackend(script)
    ex = Executor({"canny": ToolOutcome(image_file="e1_canny_f1_f1.png")})
    conv = make_conv(be)
    conv.set_tools(Provider(TOOLS, ex), max_rounds=2)
    conv.add_frame(frame())
    events, chunks = [], []
    conv.add_listener(lambda entry: events.append(entry.TYPE))
    res = conv.turn("Show me the edges", on_sentence=lambda s, i, fallback=False:
                    chunks.append((i, s)))
    conv.close()
    assert chunks == [(0, "I drew the edges."), (1, "Do you like them?")]
    assert res.text == "I drew the edges. Do you like them?" and not res.fallback
    assert [r.name for r in res.tools] == ["canny"] and "tool" in events
    first = be.scripted.calls[0]["messages"]
    line = max(i for i, m in enumerate(first) if m["role"] == "user")   # the person's line
    assert first[line - 1] == {"role": "system", "content": TOOLS_NOTE}
    assert conv.state()["timeline"][-1] == \
        "robot: I drew the edges. Do you like them? [Images I made: e1_canny_f1_f1.png (canny)]"
    assert be.calls == []   # no plain reply call


def test_conversation_without_tools_or_tool_support_answers_as_before():
    for provider in (Provider([], Executor({})), Provider(RuntimeError("gone"), Executor({}))):
        be = ToolBackend(lambda *a: pytest.fail("tools must not be offered"))
        conv = make_conv(be)
        conv.set_tools(provider)
        res = conv.turn("Hello")
        conv.close()
        assert res.text == "Hello there. Lovely day!" and not res.fallback
    plain = FakeChatBackend()
    conv = make_conv(plain)
    conv.set_tools(Provider(TOOLS, Executor({})))
    assert not conv.turn_tools.supported
    assert conv.turn("Hi").text == "Hello there. Lovely day!"
    conv.close()


def test_two_providers_bring_their_notes_and_a_local_model_gets_no_look_back():
    """The robot's tools beside the VFM tools; a small local model is offered only those."""
    class RobotActs(Provider):
        note = "You have a body, and tools that make it act: wave_hand."

    wave = [{"type": "function", "function": {"name": "wave_hand", "description": "Wave.",
                                              "parameters": {"type": "object",
                                                             "properties": {}}}}]

    def script(messages, tools, choice):
        if not tool_messages(messages):
            return "", [ToolCall("c", "wave_hand", {})]
        return "There, I waved.", []

    for simple in (False, True):
        be = ToolBackend(script)
        be.simple_tool_use = simple
        conv = make_conv(be)
        conv.set_tools(Provider(TOOLS, Executor({})))
        conv.add_tools(RobotActs(wave, Executor({"wave_hand": ToolOutcome(text="waved")})))
        conv.add_frame(frame())
        # as if an older frame were out of the prompt: look_back has something to offer
        conv.turn_tools.look_back = Provider([LOOK_SCHEMA], Executor({}))
        conv.turn_tools.look_back.note = LOOK_BACK_NOTE
        res = conv.turn("Could you wave at me?")
        conv.close()
        assert res.text == "There, I waved." and [r.name for r in res.tools] == ["wave_hand"]
        first = be.scripted.calls[0]
        names = [t["function"]["name"] for t in first["tools"]]
        msgs = first["messages"]
        line = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        notes = [m["content"] for m in msgs[line - 3 + simple:line]]
        assert names[:len(TOOLS) + 1] == [t["function"]["name"] for t in TOOLS + wave]
        assert (LOOK_BACK in names) is not simple
        assert notes == [TOOLS_NOTE, RobotActs.note] + ([] if simple else [LOOK_BACK_NOTE])


def test_conversation_tool_turn_llm_failure_gives_the_fallback():
    def script(messages, tools, choice):
        if not tool_messages(messages):
            return "", [ToolCall("c", "canny", {})]
        raise BackendError("HTTP 500")

    be = ToolBackend(script)
    conv = make_conv(be, stream=False)
    conv.set_tools(Provider(TOOLS, Executor({"canny": ToolOutcome(image_file="x.png")})))
    res = conv.turn("edges please")
    conv.close()
    assert res.fallback and res.text in conv.persona.fallback_lines and "HTTP 500" in res.error
    # the image the tool made before the failure is not forgotten
    assert [r.outcome.image_file for r in res.tools] == ["x.png"]
    assert conv.state()["timeline"][-1] == f"robot: {res.text} [Images I made: x.png (canny)]"


def test_add_exchange_and_newest_frame():
    conv = make_conv(FakeChatBackend())
    assert conv.prompt.newest is None
    f = conv.add_frame(frame())
    assert conv.prompt.newest is f
    got = []
    conv.add_listener(got.append)
    human, ai = registry.image_received_turn("abcd1234.png", "a cat on a sofa")
    conv.add_exchange(human, ai, image_file="abcd1234.png")
    with pytest.raises(ValueError):
        conv.add_exchange("  ", "Received.")
    conv.close()
    tl = conv.state()["timeline"]
    assert tl[-2].startswith("user: provide a figure named abcd1234.png")
    assert tl[-1] == "robot: Received."
    assert got == [ExchangeEntry(human, "Received.", {"image_file": "abcd1234.png"})]


def test_set_tools_rejects_zero_rounds():
    conv = make_conv(FakeChatBackend())
    with pytest.raises(ValueError):
        conv.set_tools(Provider(TOOLS, Executor({})), max_rounds=0)
    conv.close()


def test_the_robots_calls_stay_in_the_history_as_the_calls_they_were():
    """A later turn shows the model its own call and result, not the reply text alone."""
    class RobotActs(Provider):
        acts = True

    wave = [{"type": "function", "function": {"name": "wave_hand", "description": "Wave.",
                                              "parameters": {"type": "object",
                                                             "properties": {}}}}]

    def script(messages, tools, choice):
        if messages[-1]["content"] == "Could you wave at me?":
            return "", [ToolCall("c", "wave_hand", {})]
        return "There, I waved." if tool_messages(messages[-3:]) else "Hello again.", []

    be = ToolBackend(script)
    conv = make_conv(be)
    conv.add_tools(RobotActs(wave, Executor({"wave_hand": ToolOutcome(text="waved")})))
    conv.turn("Could you wave at me?")
    conv.turn("Thank you!")
    conv.close()
    later = be.scripted.calls[-1]["messages"]
    i = next(k for k, m in enumerate(later) if m.get("tool_calls"))
    assert later[i - 1]["content"] == "Could you wave at me?"
    assert later[i]["tool_calls"][0]["function"] == {"name": "wave_hand", "arguments": "{}"}
    assert later[i + 1] == {"role": "tool", "tool_call_id": later[i]["tool_calls"][0]["id"],
                            "content": "waved"}
    assert later[i + 2] == {"role": "assistant", "content": "There, I waved."}
