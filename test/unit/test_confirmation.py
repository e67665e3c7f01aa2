"""application/confirmation.py: a robot tool declared `confirm:` is called only after a yes."""
from __future__ import annotations

import pytest

from test_action_choice import SmallLocalModel
from test_tool_loop import ToolBackend, make_conv, tool_messages
from vision_dialogue.application.confirmation import Confirmations
from vision_dialogue.application.robot_tools import RobotToolsError, load_robot_tools
from vision_dialogue.llm.openai_backend import ToolCall
from vision_dialogue.llm.tool_loop import ToolOutcome, run_tool_loop, stream_tool_loop, \
    AgentResult

TOOLS_YAML = """
robot_tools:
  - {name: wave_hand, description: Wave a hand at the person., service: /wave_hand,
     type: std_srvs/srv/Trigger}
  - name: go_to
    description: Walk to a place in the building.
    action: /go_to
    type: my_robot_msgs/action/GoTo
    arguments:
      place: {type: string, description: the place to go to}
      speed: {type: number, default: 0.5}
    confirm: "Shall I take you to the {place}?"
    confirm_within: 15
  - {name: open_door, description: Open the front door., service: /open_door,
     type: std_srvs/srv/Trigger, confirm: true}
"""


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def tools(tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text(TOOLS_YAML)
    return {t.name: t for t in load_robot_tools(path)}


class RobotProvider:
    """The robot's tools as ros/manager/robot_tools.RobotTools serves them, minus ROS."""

    acts = True

    def __init__(self, tools, clock=None):
        self.tools = tools
        self.confirmations = Confirmations(clock or Clock())
        self.called, self.stages = [], []

    def schemas(self):
        return [t.schema() for t in self.tools.values()]

    def answered(self, line):
        return self.confirmations.resolve(line)

    def run(self, name, args):
        tool = self.tools[name]
        values = tool.check(args)
        held = self.confirmations.hold(tool, args, values)
        if held is not None:
            self.stages.append((name, held.stage))
            return held.outcome
        self.called.append((name, values))
        return ToolOutcome(text=f"The robot's {name} done.")


def test_the_declaration_and_the_question(tools, tmp_path):
    go, door, wave = tools["go_to"], tools["open_door"], tools["wave_hand"]
    assert (go.confirm_within, door.confirm_within, wave.confirm) == (15.0, 20.0, "")
    assert go.question({"place": "kitchen"}, go.check({"place": "kitchen"})) == \
        "Shall I take you to the kitchen?"
    assert door.question({}, {}) == "Shall I open door?"
    for entry, says in [("confirm: 3", "confirm must be true, false or the question"),
                        ("confirm: 'Go to the {room}?'", "confirm names ['room']"),
                        ("confirm: true, confirm_within: 0", "confirm_within must be seconds")]:
        path = tmp_path / "bad.yaml"
        path.write_text("robot_tools:\n- {name: go, description: d, action: /go, type: "
                        "a/action/B, arguments: {place: {type: string}}, " + entry + "}\n")
        with pytest.raises(RobotToolsError, match=says.replace("[", r"\[").replace("]", r"\]")):
            load_robot_tools(path)


@pytest.mark.parametrize("line, made, why", [
    ("Yes, please.", True, ""),
    ("No, thanks.", False, 'the person said no to "Shall I open door?"'),
    ("What colour is the sky?", False,
     'the person did not say yes to "Shall I open door?" (they said "What colour is the sky?")'),
])
def test_the_next_line_answers_the_question(tools, line, made, why):
    robot = RobotProvider(tools)
    door = tools["open_door"]
    held = robot.confirmations.hold(door, {}, {})
    assert held.outcome.ask == "Shall I open door?" and not held.outcome.ok
    assert "wait for their yes" in held.outcome.message()
    assert [(c.name, c.arguments) for c in robot.answered(line)] == [("open_door", {})]
    held = robot.confirmations.hold(door, {}, {})
    assert (held is None) is made
    if not made:
        assert held.outcome.error == f"not called, because {why}"
    assert robot.answered("Yes.") == []                      # nothing waits any more


def test_no_answer_in_time_is_no(tools):
    clock = Clock()
    robot = RobotProvider(tools, clock)
    go = tools["go_to"]
    robot.confirmations.hold(go, {"place": "lab"}, go.check({"place": "lab"}))
    clock.now += 14.0
    assert robot.confirmations.expire() == []
    clock.now += 1.5
    [expired] = robot.confirmations.expire()          # the manager's timer: said at once
    assert expired.name == "go_to"
    [call] = robot.answered("Yes!")                    # and told at the next line
    held = robot.confirmations.hold(go, call.arguments, go.check(call.arguments))
    assert "gave no answer within 15 s" in held.outcome.error and held.stage == ""
    assert robot.answered("Yes!") == []


def ask_script(name, args):
    def script(messages, tools, choice):
        if choice == "auto" and not tool_messages(messages):
            return "", [ToolCall("c1", name, args)]
        return "Off we go, I took you there.", []
    return script


class Streamed:
    """stream_with_tools over a scripted backend: the text as one sentence, the calls after."""

    def __init__(self, scripted):
        self.scripted = scripted

    def stream_with_tools(self, messages, tools, *, model=None, tool_choice="auto",
                          max_tokens=None, calls=None):
        text, made = self.scripted.complete_with_tools(messages, tools, tool_choice=tool_choice)
        calls.extend(made)
        if text:
            yield text


@pytest.mark.parametrize("stream", [True, False])
def test_a_question_is_the_whole_reply_and_no_more_is_asked(tools, stream):
    be = ToolBackend(ask_script("go_to", {"place": "kitchen"}))
    robot = RobotProvider(tools)
    msgs = [{"role": "user", "content": "Take me to the kitchen."}]
    if stream:
        said = list(stream_tool_loop(Streamed(be.scripted), msgs, robot.schemas(), robot.run,
                                     AgentResult("", 0)))
    else:
        said = [run_tool_loop(be.scripted, msgs, robot.schemas(), robot.run).text]
    assert said == ["Shall I take you to the kitchen?"]
    assert len(be.scripted.calls) == 1 and robot.called == []


@pytest.mark.parametrize("stream", [True, False])
def test_in_a_conversation_yes_makes_the_call_and_no_does_not(tools, stream):
    """The reply calls (a capable model); the answer to the question decides, every time."""
    def script(messages, tools_, choice):
        at = max(i for i, m in enumerate(messages) if m["role"] == "user")
        line, done = messages[at]["content"], tool_messages(messages[at:])
        if done:
            said = done[-1]["content"]
            return ("There we are, in the kitchen." if "go_to done" in said else
                    "We stay, then. That painting is old." if "did not say yes" in said else
                    "Alright, I stay here." if "not called" in said else "Hmm?"), []
        if choice == "auto" and "kitchen" in line:
            return "", [ToolCall("c", "go_to", {"place": "kitchen"})]
        return "Alright.", []
    be = ToolBackend(script)
    robot = RobotProvider(tools)
    conv = make_conv(be, stream=stream)
    conv.add_tools(robot)
    lines = ["Take me to the kitchen.", "Yes, please.", "Take me to the kitchen.", "No.",
             "Take me to the kitchen.", "What is that painting?"]
    replies = [conv.turn(line).text for line in lines]
    conv.close()
    assert replies[0] == replies[2] == replies[4] == "Shall I take you to the kitchen?"
    assert replies[1] == "There we are, in the kitchen."
    assert replies[3] == "Alright, I stay here."
    assert replies[5] == "We stay, then. That painting is old."
    assert robot.called == [("go_to", {"place": "kitchen", "speed": 0.5})]
    # a line that is neither yes nor no is not a yes
    assert [s for _, s in robot.stages] == ["asked", "asked", "not_confirmed", "asked",
                                            "not_confirmed"]
    assert "did not say yes" in tool_messages(be.scripted.calls[-1]["messages"])[-1]["content"]


def test_decided_first_a_yes_is_the_action_and_the_chooser_is_not_asked(tools):
    """The embedded default decides actions first; the yes needs no decision of its own."""
    be = SmallLocalModel()
    robot = RobotProvider({"go_to": tools["go_to"], "wave_hand": tools["wave_hand"]})
    conv = make_conv(be)
    conv.add_tools(robot)
    first = conv.turn("Please take me to the library.")
    second = conv.turn("Yes, please.")
    conv.close()
    assert first.text == "Shall I take you to the library?"
    assert robot.called == [("go_to", {"place": "library", "speed": 0.5})]
    assert be.decided_on == ["Please take me to the library."]
    assert [r.name for r in second.tools] == ["go_to"] and second.tools[0].outcome.ok
