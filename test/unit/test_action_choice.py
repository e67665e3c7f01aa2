"""core/action_choice.py: the robot's actions decided before the reply, on a short prompt."""
from __future__ import annotations

import json

import pytest

from test_tool_loop import Executor, Provider, ToolBackend, make_conv, tool_messages
from vision_dialogue.core.action_choice import ACTION_SYSTEM, ActionChooser, claims_action
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.persona import load_persona
from vision_dialogue.application.robot_tools import action_words, load_robot_tools
from vision_dialogue.llm.base import BackendError
from vision_dialogue.llm.openai_backend import ToolCall
from vision_dialogue.llm.tool_loop import ToolOutcome, outcome_note

TOOLS_YAML = """
robot_tools:
  - {name: wave_hand, description: Wave a hand at the person., service: /wave_hand,
     type: std_srvs/srv/Trigger}
  - name: go_to
    description: Walk to a place in the building.
    action: /go_to
    type: my_robot_msgs/action/GoTo
    arguments: {place: {type: string, description: the place to go to}}
"""


@pytest.fixture
def tools(tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text(TOOLS_YAML)
    return load_robot_tools(path)


def decisions(answers: dict):
    """ask_llm that answers the chooser's prompt by the person's line; records the lines."""
    asked = []

    def ask(messages, max_tokens, json_schema=None):
        assert messages[0]["content"].startswith(ACTION_SYSTEM.split("{")[0])
        assert json_schema["properties"]["intent"]["enum"][-1] == "none"
        line = messages[-1]["content"].split('"')[1]
        asked.append(line)
        return json.dumps(answers.get(line, {"intent": "none"}))
    return ask, asked


def test_the_chooser_asks_only_about_possible_requests_and_keeps_said_arguments(tools):
    ask, asked = decisions({
        "Please take me to the kitchen.": {"intent": "go_to", "arguments": {"place": "kitchen"}},
        "Walk me somewhere nice.": {"intent": "go_to", "arguments": {"place": "the garden"}},
        "Could you wave at me?": {"intent": "wave_hand"}})
    chooser = ActionChooser([t.schema() for t in tools], ask)
    assert [(c.name, c.arguments) for c in chooser.choose("Please take me to the kitchen.")] \
        == [("go_to", {"place": "kitchen"})]
    assert [c.name for c in chooser.choose("Could you wave at me?")] == ["wave_hand"]
    assert chooser.choose("Walk me somewhere nice.") == []       # "the garden" was not said
    assert chooser.choose("Lovely weather today.") == []
    assert chooser.choose("Where is the kitchen?") == []       # the way, not a walk
    assert asked == ["Please take me to the kitchen.", "Could you wave at me?",
                     "Walk me somewhere nice."]            # small talk never reached the LLM


class ActingProvider(Provider):
    acts = True


class SmallLocalModel(ToolBackend):
    """A small model's habits in a session.

    In a reply it calls a tool only on the session's first request (then copies its earlier
    reply); asked on the chooser's short prompt it decides each time.
    """

    simple_tool_use = True
    json_schema = True

    def __init__(self):
        super().__init__(self.reply)
        self.decided_on = []

    def reply(self, messages, tools, choice):
        if choice == "auto" and not any(m.get("tool_calls") for m in messages):
            return "", [ToolCall("c", "go_to", {"place": "kitchen"})]
        if tool_messages(messages[-3:]):
            return "I went to the kitchen.", []
        said = [m["content"] for m in messages if m["role"] == "user"][-1]
        return f"I will go there, as you said: {said}", []

    def complete(self, messages, *, model=None, max_tokens=None, temperature=None,
                 json_schema=None):
        if json_schema is None:
            return super().complete(messages, model=model, max_tokens=max_tokens)
        line = messages[-1]["content"].split('"')[1]
        self.decided_on.append(line)
        if "library" in line:
            return json.dumps({"intent": "go_to", "arguments": {"place": "library"}})
        if "wave" in line:
            return json.dumps({"intent": "wave_hand"})
        return json.dumps({"intent": "none"})


def session(backend, tools, decide="auto", stream=True):
    ex = Executor({"go_to": ToolOutcome(text="arrived"), "wave_hand": ToolOutcome(text="ok")})
    conv = Conversation(backend, load_persona(),
                        ConversationConfig(n=4, m=3, decide_actions=decide, stream=stream))
    conv.add_tools(ActingProvider([t.schema() for t in tools], ex))
    return conv, ex


LINES = ["Please take me to the kitchen, I mean the library.", "Thank you!",
         "Could you wave at me?", "Now take me to the library again."]


@pytest.mark.parametrize("stream", [True, False])
def test_a_small_model_acts_on_every_request_of_a_session_when_decided_first(tools, stream):
    be = SmallLocalModel()
    conv, ex = session(be, tools, stream=stream)
    results = [conv.turn(line) for line in LINES]
    conv.close()
    assert ex.calls == [("go_to", {"place": "library"}), ("wave_hand", {}),
                        ("go_to", {"place": "library"})]
    assert [len(r.tools) for r in results] == [1, 0, 1, 1]
    assert be.decided_on == [LINES[0], LINES[2], LINES[3]]     # "Thank you!" was not asked
    asked = be.scripted.calls
    assert [c["tool_choice"] for c in asked] == ["none"] * 4   # the reply never calls itself
    assert asked[2]["messages"][-1]["content"] == outcome_note(results[2].tools)
    assert not any(m["role"] == "system" and m["content"].startswith("[")
                   for m in asked[1]["messages"][-2:])          # no action: no outcome note


def test_decided_in_the_reply_the_same_session_acts_once(tools):
    """The baseline the chooser fixes (decide_actions=in_reply): one call, then copies."""
    be = SmallLocalModel()
    conv, ex = session(be, tools, decide="in_reply")
    results = [conv.turn(line) for line in LINES]
    conv.close()
    assert ex.calls == [("go_to", {"place": "kitchen"})] and be.decided_on == []
    assert results[3].text.startswith("I will go there")
    assert claims_action(results[3].text, action_words(tools))


class Copier(SmallLocalModel):
    """Copies the person's statement as its own ("I went to the library yesterday.")."""

    def __init__(self, second="That sounds nice! What did you read?"):
        super().__init__()
        self.second = second

    def reply(self, messages, tools, choice):
        if messages[-1]["role"] == "system" and "did not do" in messages[-1]["content"]:
            return self.second, []
        said = [m["content"] for m in messages if m["role"] == "user"][-1]
        if said.endswith("?"):
            return "Yes, I went to the kitchen this morning.", []
        return said.replace("My friend", "I"), []

    def stream(self, messages, **kw):
        yield self.reply(messages, [], "none")[0]


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_that_claims_an_action_no_tool_ran_is_asked_for_again(tools, stream):
    """Decided first and no call made: "I went to the library" is the person's, not the robot's."""
    be = Copier()
    conv, ex = session(be, tools, stream=stream)
    conv.turn_tools.providers[0].verbs = action_words(tools)
    told = conv.turn("I went to the kitchen yesterday.")
    asked = conv.turn("Did you go to the kitchen?")        # a question: an earlier act may be told
    conv.close()
    assert ex.calls == []
    assert told.text == "That sounds nice! What did you read?" and not told.fallback
    assert asked.text == "Yes, I went to the kitchen this morning."     # said as it came


class StreamingCopier(Copier):
    """A Copier that streams with tools offered, as the embedded model does."""

    def __init__(self):
        super().__init__()
        self.streamed = []

    def stream_with_tools(self, messages, tools, *, model=None, tool_choice="auto",
                          max_tokens=None, temperature=None, calls=None):
        self.streamed.append({"messages": list(messages), "tools": [t["function"]["name"]
                                                                    for t in tools],
                              "tool_choice": tool_choice, "temperature": temperature})
        yield self.reply(messages, tools, tool_choice)[0]


def test_the_second_try_keeps_the_tools_so_a_local_models_cache_holds(tools):
    """A local model's prompt starts with its tools: asked without them, it reads it all again."""
    be = StreamingCopier()
    conv, ex = session(be, tools)
    conv.turn_tools.providers[0].verbs = action_words(tools)
    told = conv.turn("I went to the kitchen yesterday.")
    conv.close()
    first, again = be.streamed
    assert told.text == "That sounds nice! What did you read?" and ex.calls == []
    assert again["tools"] == first["tools"] == ["wave_hand", "go_to"]
    assert again["tool_choice"] == "none" and again["temperature"] > 0
    assert again["messages"][-1]["content"] == load_persona().not_done_note


def test_a_claim_asked_for_again_is_never_said(tools):
    be = Copier(second="I went there too.")
    conv, ex = session(be, tools)
    conv.turn_tools.providers[0].verbs = action_words(tools)
    result = conv.turn("My friend went to the kitchen.")
    conv.close()
    assert result.fallback and "I went" not in result.text and ex.calls == []


def test_a_failed_decision_leaves_the_call_to_the_reply(tools):
    be = SmallLocalModel()

    def broken(*a, json_schema=None, **kw):
        if json_schema is not None:
            raise BackendError("grammar failed")
        return "A summary."
    be.complete = broken
    conv, ex = session(be, tools, decide="first")
    result = conv.turn("Could you wave at me?")
    conv.close()
    assert not result.fallback and ex.calls == [("go_to", {"place": "kitchen"})]
    assert be.scripted.calls[0]["tool_choice"] == "auto"


def test_other_tools_offered_keep_the_decision_in_the_reply(tools):
    """VFM tools beside the robot's: the reply decides (decide_actions=first or not)."""
    be = SmallLocalModel()
    conv = make_conv(be)
    conv.config.decide_actions = "first"
    canny = [{"type": "function", "function": {"name": "canny", "description": "Edges.",
                                               "parameters": {"type": "object",
                                                              "properties": {}}}}]
    conv.add_tools(Provider(canny, Executor({"canny": ToolOutcome(text="edges")})))
    conv.add_tools(ActingProvider([t.schema() for t in tools],
                                  Executor({"go_to": ToolOutcome(text="arrived")})))
    conv.turn("Take me to the library, please.")
    conv.close()
    assert be.decided_on == [] and be.scripted.calls[0]["tool_choice"] == "auto"


def test_decide_actions_is_checked():
    with pytest.raises(ValueError, match="decide_actions"):
        ConversationConfig(decide_actions="sometimes")


@pytest.mark.parametrize("text,claims", [
    ("I waved at you.", True), ("I'll go to the kitchen.", True), ("I am nodding.", True),
    ("I'm going to the library now.", True), ("Sure, I just brought it.", True),
    ("I can't wave, sorry.", False), ("I can wave if you like.", False),
    ("Do you want me to go?", False), ("I like waving at people.", False),
    ("You waved at me.", False)])
def test_a_reply_that_claims_an_action(text, claims):
    verbs = ["wave", "hand", "nod", "go", "to", "bring", "look", "at"]
    assert claims_action(text, verbs) is claims
