"""The robot's own services and actions as LLM tools (`robot_tools_file`).

The declaration and its checks without ROS; then, as a robot runs it, separate processes with
default names: a third-party robot process (test/robot_peer.py: a std_srvs/Trigger service and
an action of its own package, vd_test_robot, built here with colcon), the manager, and the
speech node with a scripted person at its terminal. The LLM is the fake OpenAI server, calling
the tools as a capable model would (the real models' numbers: benchmarks/bench_robot_tools.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DOMAIN_ID
from ros_processes import Proc, manager_process, process_env, speech_process, \
    transcript_records
from vision_dialogue.application.robot_tools import ArgumentError, RobotToolsError, \
    load_robot_tools, reply_text
from vision_dialogue.monitor.session import note_item

REPO = Path(__file__).resolve().parents[1]
PEER = Path(__file__).with_name("robot_peer.py")
ROBOT_DOMAIN = 10 + DOMAIN_ID % 20          # conftest's domains are 30..200, the skills' 201+
TOOLS = """
robot_tools:
  - name: wave_hand
    description: Wave a hand at the person.
    service: /wave_hand
    type: std_srvs/srv/Trigger
    arguments: {}
  - name: go_to
    description: Walk to a place in the building; the person can follow.
    action: /go_to
    type: vd_test_robot/action/GoTo
    arguments:
      place: {type: string, description: the place to go to}
      speed: {type: number, minimum: 0.1, maximum: 1.5, default: 0.5}
"""


def write(tmp_path, text, name="tools.yaml"):
    f = tmp_path / name
    f.write_text(text)
    return f


# --- the declaration, without ROS -------------------------------------------------------------
def test_the_example_file_and_the_guides_example_load():
    tools = load_robot_tools(REPO / "config" / "robot_tools.yaml")
    assert {t.kind for t in tools} == {"service", "action"}
    guide = (REPO / "docs" / "robot_tools.md").read_text()
    block = guide.split("```yaml\n")[1].split("```")[0]
    assert [t.name for t in load_robot_tools(write(Path(os.environ.get("TMPDIR", "/tmp")),
                                                   block, f"readme{os.getpid()}.yaml"))]


@pytest.mark.parametrize("entry, says", [
    ("- {name: 'wave hand', description: d, service: /w, type: std_srvs/srv/Trigger}",
     "must be an identifier"),
    ("- {name: wave, service: /w, type: std_srvs/srv/Trigger}", "needs a description"),
    ("- {name: wave, description: d, type: std_srvs/srv/Trigger}", "exactly one of"),
    ("- {name: wave, description: d, service: /w, action: /a, type: std_srvs/srv/Trigger}",
     "exactly one of"),
    ("- {name: go, description: d, action: /go, type: std_srvs/srv/Trigger}",
     "must read pkg/action/Name for a action"),
    ("- {name: wave, description: d, service: 'not a name!', type: std_srvs/srv/Trigger}",
     "is not a ROS name"),
    ("- {name: wave, description: d, service: /w, type: std_srvs/srv/Trigger, colour: red}",
     "unknown keys ['colour']"),
    ("- {name: go, description: d, action: /go, type: a/action/B, arguments: {p: string}}",
     "must be a JSON-schema property"),
    ("- {name: go, description: d, action: /go, type: a/action/B, "
     "arguments: {p: {type: strin}}}", "argument 'p'"),
    ("- {name: go, description: d, action: /go, type: a/action/B, "
     "arguments: {p: {type: string}}, required: [q]}", "required must list declared"),
    ("- {name: go, description: d, action: /go, type: a/action/B, timeout: 0}", "timeout"),
    ("- {name: w, description: d, service: /w, type: s/srv/T}\n"
     "- {name: w, description: e, service: /v, type: s/srv/T}", "declared twice"),
])
def test_a_bad_declaration_is_a_clear_error(tmp_path, entry, says):
    with pytest.raises(RobotToolsError) as e:
        load_robot_tools(write(tmp_path, f"robot_tools:\n{entry}\n"))
    assert says in str(e.value) and "tools.yaml" in str(e.value)


def test_a_missing_or_empty_file_is_a_clear_error(tmp_path):
    with pytest.raises(RobotToolsError, match="cannot read"):
        load_robot_tools(tmp_path / "nope.yaml")
    with pytest.raises(RobotToolsError, match="expected a list under 'robot_tools:'"):
        load_robot_tools(write(tmp_path, "intents: []\n"))


def test_arguments_are_checked_before_anything_is_sent(tmp_path):
    wave, go = load_robot_tools(write(tmp_path, TOOLS))
    assert go.schema()["function"]["parameters"]["required"] == ["place"]
    assert wave.schema()["function"]["parameters"]["properties"] == {}
    # a small model writes numbers as text; the default fills what is left out
    assert go.check({"place": "kitchen", "speed": "0.8"}) == {"place": "kitchen", "speed": 0.8}
    assert go.check({"place": "kitchen"}) == {"place": "kitchen", "speed": 0.5}
    for bad, says in [({"speed": 1.0}, "'place' is a required property"),
                      ({"place": "lab", "speed": "very fast"}, "speed"),
                      ({"place": "lab", "speed": 9}, "maximum of 1.5"),
                      ({"place": "lab", "colour": "red"}, "takes no argument 'colour'"),
                      ({"place": ["lab"]}, "place")]:
        with pytest.raises(ArgumentError, match=says):
            go.check(bad)
    with pytest.raises(ArgumentError, match="takes no argument 'type'"):
        wave.check({"type": "object"})         # what the 0.5B model writes for {}


def test_what_comes_back_is_short_text_for_the_llm(tmp_path):
    wave, go = load_robot_tools(write(tmp_path, TOOLS))
    assert reply_text(wave, {"success": True, "message": "ok"}) == \
        'The robot\'s wave_hand answered: {"success": true, "message": "ok"}'
    assert reply_text(go, {}) == "The robot's go_to done."
    assert reply_text(go, {"x": "y" * 2000}).endswith("...(cut)")
    note = note_item("robot_action", {"tool": "go_to", "kind": "action", "stage": "feedback",
                                      "text": '{"remaining": 3.0}'}, 0.0)
    assert note["text"] == 'robot action go_to feedback: {"remaining": 3.0}'
    failed = note_item("robot_action", {"tool": "go_to", "kind": "action", "stage": "failed",
                                        "text": "gone"}, 0.0)
    assert failed["level"] == "warning"


# --- types resolved at run time ---------------------------------------------------------------
def test_types_resolve_at_run_time_and_fields_are_set_and_read(ros_context):
    from geometry_msgs.msg import Pose
    from vision_dialogue.ros.manager.robot_tools import fill_message, interface_type, \
        message_fields
    std_srvs = pytest.importorskip("std_srvs.srv", reason="std_srvs is not installed "
                                   "(pip install ros-kilted-std-srvs)")
    assert interface_type("std_srvs/srv/Trigger") is std_srvs.Trigger
    with pytest.raises(LookupError, match="not installed here"):
        interface_type("no_such_pkg/srv/Thing")
    with pytest.raises(LookupError, match="has no Thing"):
        interface_type("std_srvs/srv/Thing")
    pose = Pose()
    fill_message(pose, {"position": {"x": 1, "y": 2.5}, "orientation": {"w": 1.0}})
    assert message_fields(pose)["position"] == {"x": 1.0, "y": 2.5, "z": 0.0}
    for bad, says in [({"position": {"q": 1}}, "position.q: Point has no such field"),
                      ({"position": {"x": "far"}}, "position.x: 'far' does not fit double"),
                      ({"orientation": 3}, "give an object of its fields")]:
        with pytest.raises(ArgumentError, match=says):
            fill_message(Pose(), bad)


def test_a_type_or_field_that_is_not_there_stops_the_manager_at_start(ros_context, tmp_path):
    import rclpy
    from vision_dialogue.ros.params import ParameterError
    from vision_dialogue.ros.manager.robot_tools import RobotTools
    pytest.importorskip("std_srvs.srv", reason="std_srvs is not installed")
    node = rclpy.create_node("robot_tools_check", context=ros_context)
    try:
        with pytest.raises(ParameterError, match="vd_nothing/srv/Wave is not installed here"):
            RobotTools.from_file(node, write(tmp_path, "robot_tools:\n- {name: w, description: "
                                                       "d, service: /w, type: vd_nothing/srv/"
                                                       "Wave}\n"))
        with pytest.raises(ParameterError, match=r"\['hand'\] not fields of std_srvs/srv/"
                                                 r"SetBool's request \(its fields: data\)"):
            RobotTools.from_file(node, write(tmp_path, "robot_tools:\n- {name: w, description: "
                                                       "d, service: /w, type: std_srvs/srv/"
                                                       "SetBool, arguments: {hand: {type: "
                                                       "string}}}\n"))
        with pytest.raises(ParameterError, match="robot_tools_file: .*declared twice"):
            RobotTools.from_file(node, write(tmp_path, TOOLS + TOOLS.split("robot_tools:")[1]))
    finally:
        node.destroy_node()


# --- as a robot runs it -----------------------------------------------------------------------
@pytest.fixture(scope="session")
def robot_workspace(tmp_path_factory):
    """The robot's own interface package (vd_test_robot), built once with colcon."""
    if shutil.which("colcon") is None:
        pytest.skip("colcon is not installed (README command 1 installs it)")
    ws = tmp_path_factory.mktemp("robot_ws")
    shutil.copytree(REPO / "test" / "robot_interfaces" / "vd_test_robot",
                    ws / "src" / "vd_test_robot")
    t0 = time.monotonic()
    build = subprocess.run(
        ["colcon", "--log-base", str(ws / "log"), "build", "--base-paths", str(ws / "src"),
         "--build-base", str(ws / "build"), "--install-base", str(ws / "install"),
         "--cmake-args", "-DBUILD_TESTING=OFF", f"-DPython3_EXECUTABLE={sys.executable}",
         "--event-handlers", "console_cohesion+", "status-"],
        cwd=ws, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, f"{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    print(f"vd_test_robot built in {time.monotonic() - t0:.0f} s")
    pkg = ws / "install" / "vd_test_robot"
    site = next(pkg.glob("lib/python3*/site-packages"))

    def add(var, path):
        return os.pathsep.join([str(path), os.environ.get(var, "")])
    return {"PYTHONPATH": add("PYTHONPATH", site), "LD_LIBRARY_PATH": add("LD_LIBRARY_PATH",
                                                                          pkg / "lib"),
            "AMENT_PREFIX_PATH": add("AMENT_PREFIX_PATH", pkg)}


def tool_messages(req):
    """This turn's tool messages (earlier turns' calls are in the history too)."""
    msgs = req["messages"]
    line = max((i for i, m in enumerate(msgs) if m["role"] == "user"), default=0)
    return [m["content"] for m in msgs[line:] if m["role"] == "tool"]


def robot_llm(req):
    """The fake model: calls the robot's tools as a capable model would, then answers."""
    from fake_openai import Reply
    users = [m["content"] for m in req["messages"] if m["role"] == "user"
             and isinstance(m["content"], str)]
    line = users[-1].lower() if users else ""
    done = tool_messages(req)
    if "tools" not in req:
        return "Hello."
    if done:                 # says what the tool message says, in words of its own each time
        last = done[-1]
        if last.startswith("Error"):
            return "Oh dear, " + last.split(". The tool did not work")[0]
        if "wave_hand" in last:
            return "There, I waved at you with my right hand!"
        return f"Here we are, {json.loads(last.split(': ', 1)[1])['place']} reached."
    calls = {"wave": ("wave_hand", {}), "kitchen": ("go_to", {"place": "kitchen", "speed": 1}),
             "moon": ("go_to", {"place": "the moon"}),
             "garden": ("go_to", {"place": "the garden"}),
             "very fast": ("go_to", {"place": "lab", "speed": "very fast"})}
    for cue, (name, args) in calls.items():
        if cue in line:
            return Reply(tool_calls=[{"name": name, "arguments": args}])
    return "Fine, thanks."


@contextlib.contextmanager
def robot_session(fake_openai, tmp_path, robot_workspace, tools_text, *params):
    """The robot's process, the manager with `tools_text` and the speech node, all started.

    Yields (robot, manager, speech, turn): `turn(line, reply_has)` says a line and waits for
    the reply that holds `reply_has`. Every process is closed after.
    """
    fake_openai.responder = robot_llm
    env = process_env(ROBOT_DOMAIN, **robot_workspace)
    robot = Proc([sys.executable, str(PEER)], tmp_path, env=env)
    tools = write(tmp_path, tools_text)
    manager = manager_process(fake_openai, tmp_path, f"robot_tools_file:={tools}", *params,
                              env=env)
    speech = None
    try:
        assert robot.expect("READY"), robot.err[-10:]
        assert manager.wait_err("robot tools for the LLM: wave_hand, go_to"), manager.err[-20:]
        speech = speech_process(tmp_path, env=env)

        def turn(line, reply_has, timeout=60.0):
            mark = len(speech.seen)
            speech.say(line)
            said = speech.expect(reply_has, timeout, after=mark)
            assert said, (speech.seen[-5:], "".join(manager.err[-12:]))
            return said
        yield robot, manager, speech, turn
    finally:
        for p in (speech, manager, robot):
            if p is not None:
                p.close()


def test_the_llm_calls_the_robots_service_and_action(fake_openai, tmp_path, robot_workspace):
    with robot_session(fake_openai, tmp_path, robot_workspace, TOOLS,
                       "reply_deadline:=2.0") as (robot, manager, speech, turn):
        # a service: called, its response back to the LLM, which says so
        turn("Could you wave at me?", "I waved at you")
        assert robot.expect("WAVED", 1)
        assert tool_messages(fake_openai.requests[-1]) == [
            'The robot\'s wave_hand answered: {"success": true, "message": "waved with the '
            'right hand"}']
        # an action: the goal's fields set from the arguments, feedback shown, result back
        turn("Please take me to the kitchen.", "kitchen reached")
        assert robot.expect("GOAL kitchen 1", 1) and robot.expect("ARRIVED kitchen", 1)
        assert tool_messages(fake_openai.requests[-1]) == [
            'The robot\'s go_to done: {"arrived": true, "place": "kitchen"}']
        # a walk longer than the reply deadline: the robot acting does not count against it
        turn("Walk me to the garden.", "the garden reached")
        assert robot.expect("ARRIVED the garden", 1)
        # arguments that fail the declaration never reach the robot
        said = turn("Go very fast to the lab!", "Error: go_to")
        assert "speed" in said and "nothing was sent" in said
        assert not any("GOAL lab" in line for line in robot.seen)
        # barge-in: the person speaks while the robot walks; the goal is cancelled
        speech.say("Let's go to the moon.")
        assert robot.expect("GOAL the moon", 30)
        assert robot.expect("FEEDBACK", 5)
        t0 = time.monotonic()
        mark = len(speech.seen)
        speech.say("No wait, stop!")
        assert robot.expect("CANCELLED the moon", 10), manager.err[-10:]
        cancelled_in = time.monotonic() - t0
        said = speech.expect("because the person spoke", 30, after=mark)
        assert said and "stopped before it finished" in said, speech.seen[-5:]
        assert speech.expect("Fine, thanks.", 30, after=mark)   # then the line that stopped it
        # the robot's node is gone: a clear error at once, not a hang
        robot.close()
        t0 = time.monotonic()
        said = turn("Wave again, please.", "Error:", timeout=30)
        assert "not available right now" in said
        assert "no service server on /wave_hand" in tool_messages(fake_openai.requests[-1])[0]
        gone_in = time.monotonic() - t0
    assert cancelled_in < 5 and gone_in < 10, (cancelled_in, gone_in)
    records = transcript_records(tmp_path)
    actions = [r for r in records if r["type"] == "robot_action"]
    stages = [(r["tool"], r["stage"]) for r in actions]
    assert stages[:2] == [("wave_hand", "sent"), ("wave_hand", "done")]
    assert ("go_to", "feedback") in stages and ("go_to", "cancelled") in stages
    fb = next(r for r in actions if r["stage"] == "feedback")
    assert json.loads(fb["text"])["stage"] == "walking"
    assert stages[-1] == ("wave_hand", "failed")
    replies = [r for r in records if r["type"] == "reply" and r.get("tools")]
    assert [t["name"] for r in replies for t in r["tools"]] == \
        ["wave_hand", "go_to", "go_to", "go_to", "go_to", "wave_hand"]
    assert not any(r["fallback"] for r in records if r["type"] == "reply")
    # the earlier turns' calls stay in the history as the calls they were
    history = fake_openai.requests[-1]["messages"]
    assert [m["tool_calls"][0]["function"]["name"] for m in history if m.get("tool_calls")][
        :2] == ["wave_hand", "go_to"]
    # what the LLM was offered: the declared tools and their note, nothing else
    offered = next(r for r in fake_openai.requests if "tools" in r)
    assert [t["function"]["name"] for t in offered["tools"]] == ["wave_hand", "go_to"]
    assert any("tools that make it act: wave_hand, go_to" in str(m["content"])
               for m in offered["messages"])


def test_a_tool_that_matters_is_called_only_after_a_yes(fake_openai, tmp_path, robot_workspace):
    """`confirm:` as a robot runs it: the robot asks, and only a yes in time makes the call.

    The LLM calls the tool each time it is asked (a capable model); the robot's question is
    the reply; the person's next line decides (application/confirmation.py), and the LLM reads why
    a call was not made. go_to has 30 s for the answer, wave_hand 1 s (the manager logs when it
    passes: the step waits for that line, then answers too late).
    """
    wave_asks = "    arguments: {}\n    confirm: true\n    confirm_within: 1\n"
    tools = TOOLS.replace("    arguments: {}\n", wave_asks).replace(
        "      speed: {type: number, minimum: 0.1, maximum: 1.5, default: 0.5}\n",
        "      speed: {type: number, minimum: 0.1, maximum: 1.5, default: 0.5}\n"
        "    confirm: \"Shall I take you to {place}?\"\n    confirm_within: 30\n")
    with robot_session(fake_openai, tmp_path, robot_workspace, tools) as (
            robot, manager, speech, turn):
        turn("Please take me to the kitchen.", "Shall I take you to kitchen?")
        turn("Yes, please.", "kitchen reached")
        assert robot.expect("GOAL kitchen 1", 1) and robot.expect("ARRIVED kitchen", 1)
        turn("Walk me to the garden.", "Shall I take you to the garden?")
        said = turn("No, thank you.", "Oh dear")
        assert "not called, because the person said no" in said
        turn("Could you wave at me?", "Shall I wave hand?")
        assert manager.wait_err("wave_hand: not_confirmed: the person gave no answer within 1 s")
        said = turn("Yes, wave!", "Oh dear")
        assert "gave no answer within 1 s" in said
        turn("How are you?", "Fine, thanks.")     # nothing waits any more
    assert "WAVED" not in robot.seen and \
        [line for line in robot.seen if line.startswith("GOAL")] == ["GOAL kitchen 1"], robot.seen
    stages = [(r["tool"], r["stage"]) for r in transcript_records(tmp_path)
              if r["type"] == "robot_action" and r["stage"] != "feedback"]
    assert stages == [("go_to", "asked"), ("go_to", "sent"), ("go_to", "done"),
                      ("go_to", "asked"), ("go_to", "not_confirmed"), ("wave_hand", "asked"),
                      ("wave_hand", "not_confirmed")], stages
