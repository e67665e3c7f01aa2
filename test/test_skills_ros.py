"""The skills and intents between processes, as a robot runs them.

Separate processes, default names: the manager (`python -m vision_dialogue.manager_node`), a
speech node with the terminal backend whose stdin is a scripted person (they read the robot's
line and type an answer), and the application: test/skill_client.py, a behaviour-tree-like
client with rclpy and the package's action types only. The LLM is the fake OpenAI server,
answering as a capable model would (the real model's numbers: benchmarks/bench_skills.py).
The processes get a ROS domain of their own: default names, and no node another test left in
this process (an action server of the same name) can take their goals.
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from conftest import close_context, side_domain, spin_until
from ros_processes import Proc, manager_process, process_env, speech_process, \
    transcript_records
from vision_dialogue.llm.answers import EXTRACT_SYSTEM
from vision_dialogue.llm.intent_reader import INTENT_SYSTEM
from vision_dialogue.ros import perception_msgs
from vision_dialogue_interfaces.msg import Intent, Reply

REPO = Path(__file__).resolve().parents[1]
CLIENT = Path(__file__).with_name("skill_client.py")
INTENTS = """
intents:
  - name: guide
    description: Take the person to a place in the building.
    arguments: {place: {type: string, description: the place to go to}}
"""


SKILLS_DOMAIN = side_domain(0)


def _env():
    return process_env(SKILLS_DOMAIN)


def _texts(req) -> tuple[str, str]:
    """A request's system prompt and its last message's text."""
    msgs = req["messages"]
    system = msgs[0]["content"] if isinstance(msgs[0]["content"], str) else ""
    return system, msgs[-1]["content"] if isinstance(msgs[-1]["content"], str) else ""


def _form(text: str, readers: dict) -> str:
    """The fake model's filled form: each key the prompt lists, read from what was said."""
    said = text.split("The person said:")[1].split("\n\n")[0]
    out = {}
    for key, read in readers.items():
        if f"- {key}" in text and (value := read(said)) is not None:
            out[key] = value
    return json.dumps(out)


def _name(said: str) -> str | None:
    m = re.search(r"name is (\w+)", said)
    return m.group(1) if m else None


def llm(req):
    """The fake model: fills forms, finds intents, and converses with a purpose when given."""
    msgs = req["messages"]
    system, text = _texts(req)
    if system == EXTRACT_SYSTEM:
        return _form(text, {"name": _name, "colour": lambda said: (
            m.group(1) if (m := re.search(r"I like (\w+)", said)) else None)})
    if system.startswith(INTENT_SYSTEM[:40]):
        if m := re.search(r"take me to the (\w+)", text):
            return json.dumps({"intent": "guide", "arguments": {"place": m.group(1)}})
        return '{"intent": "none"}'
    if "blue" in text:
        return "Blue is a lovely colour."
    if any("Your purpose" in str(m["content"]) for m in msgs):
        return "What colour do you like best?"
    return "Nice to meet you."


def person(speech: Proc):
    """Answers what the robot asks, as a person at the terminal would."""
    def hear(line):
        if not line.startswith("robot:"):
            return
        answer = ("My name is Zebulon." if "your name" in line else
                  "Yes." if "ready" in line else
                  "I like blue the most." if "colour do you like" in line else None)
        if answer:
            speech.say(answer)
    return hear


def start_manager(fake, tmp_path, *params):
    return manager_process(fake, tmp_path, *params, env=_env())


def start_speech(tmp_path):
    speech = speech_process(tmp_path, env=_env())
    speech.on_line = person(speech)
    return speech


def run_client(tmp_path, steps, manager, timeout=90.0):
    f = tmp_path / f"steps{time.monotonic_ns()}.json"
    f.write_text(json.dumps(steps))
    client = Proc([sys.executable, str(CLIENT), str(f)], tmp_path, env=_env())
    try:
        events = client.events(timeout)
    finally:
        client.close()
    assert events and events[-1]["event"] == "done", (events, client.err[-20:],
                                                      manager.err[-20:])
    return {e["step"]: e for e in events if e["event"] == "result"}, events


def test_an_application_says_asks_and_chats_through_the_skills(fake_openai, tmp_path):
    fake_openai.responder = llm
    manager = start_manager(fake_openai, tmp_path)
    speech = start_speech(tmp_path)
    try:
        colour = {"name": "colour quiz", "configuration": json.dumps({
            "instruction": "Find out the person's favourite colour.",
            "results": {"colour": {"type": "string"}}, "closing": "Thank you, that helps!"})}
        results, events = run_client(tmp_path, manager=manager, steps=[
            {"skill": "say", "goal": {"input": "Hello! I am the robot at the front desk."},
             "expect": "spoken"},
            {"skill": "ask", "expect": "answered",
             "await_stages": ["asked", "heard", "extracting", "follow_up"], "goal": {
                "question": "What is your name?", "answers_schema": json.dumps({
                    "name": {"type": "string"},
                    "ready": {"type": "boolean",
                              "description": "whether you are ready to start"}})}},
            {"skill": "chat", "goal": {"role": colour, "initiate": True}, "expect": "done"},
            {"skill": "chat", "goal": {"role": {"name": "small talk"}}, "cancel_on": "started",
             "expect": "cancelled"},
        ])
        assert results[0]["success"] and results[0]["turn_id"] >= 1
        assert json.loads(results[1]["answers"]) == {"name": "Zebulon", "ready": True}
        assert json.loads(results[2]["role_results"]) == {"colour": "blue"}
        assert results[3]["status"] == "cancelled" and not results[3]["success"]
        # every stage published for the goal (the client's own feedback callback can miss the
        # last ones: rclpy drops feedback that arrives after the result)
        stages = next(e["stages"] for e in events if e["event"] == "stages" and e["step"] == 1)
        assert stages[:2] == ["queued", "queued"] or stages[0] == "queued"
        assert {"asked", "heard", "extracting", "follow_up"} <= set(stages)
        robot = [line for line in speech.seen if line.startswith("robot:")]
        assert robot[0] == "robot: Hello! I am the robot at the front desk."
        assert robot[1] == "robot: What is your name?"
        assert robot[2].startswith("robot: Sorry, I did not get that.") and "ready" in robot[2]
        assert "robot: What colour do you like best?" in robot
        assert robot[-1] == "robot: Thank you, that helps!"
        # the purpose reached the chat's replies and left with it; the Ask's answers did not
        # get replies of their own
        replies = [r for r in fake_openai.requests
                   if r["messages"][0]["content"] not in (EXTRACT_SYSTEM,)]
        assert any("colour quiz" in json.dumps(r) for r in replies)
        assert "robot: Nice to meet you." not in robot
        records = transcript_records(tmp_path)
        ends = [r for r in records if r["type"] == "skill" and r["stage"] == "end"]
        assert [r["status"] for r in ends] == ["spoken", "answered", "done", "cancelled"]
        said = [r for r in records if r["type"] == "reply" and r.get("skill") == "say"]
        assert said and said[0]["text"] == "Hello! I am the robot at the front desk."
        # the README's ten-line client, as a user copies it
        readme = (REPO / "README.md").read_text()
        code = readme.split("### Your application")[1].split("```python\n")[1]
        (tmp_path / "readme_client.py").write_text(code.split("```")[0])
        client = Proc([sys.executable, str(tmp_path / "readme_client.py")], tmp_path,
                      env=_env())
        assert client.proc.wait(60) == 0, client.err[-10:]
        assert client.seen[-1] == "answered {'name': 'Zebulon'}", client.seen
        assert "robot: Welcome to the lab!" in speech.seen
    finally:
        speech.close()
        manager.close()


def test_intents_priorities_and_a_robot_without_a_speech_node(fake_openai, tmp_path):
    fake_openai.responder = llm
    (tmp_path / "intents.yaml").write_text(INTENTS)
    manager = start_manager(fake_openai, tmp_path, f"intents_file:={tmp_path / 'intents.yaml'}",
                            "free_conversation:=false")
    speech = None
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=SKILLS_DOMAIN)
    node = rclpy.create_node("robot_app", context=ctx)
    intents = []
    node.create_subscription(Intent, "intents", intents.append, 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    try:
        results, _ = run_client(tmp_path, [{"skill": "say", "goal": {"input": "Hello."}}],
                                manager)
        assert results[0]["status"] == "no_speech" and "no speech node" in results[0]["error"]
        # a third-party speech node: it takes dialogue/reply but does not report on
        # dialogue/spoken; the Say goes out and says so ("sent")
        heard = []
        other = node.create_subscription(Reply, "dialogue/reply", heard.append, 10)
        results, _ = run_client(tmp_path, [{"skill": "say", "goal": {"input": "Hello."}}],
                                manager)
        assert results[0]["status"] == "sent" and results[0]["success"]
        assert spin_until(ex, lambda: any(m.final and m.text == "Hello." for m in heard), 10)
        node.destroy_subscription(other)
        speech = start_speech(tmp_path)
        assert spin_until(ex, lambda: node.count_publishers("intents") >= 1, 30)
        # free_conversation:=false: heard, not answered; the request is an intent
        time.sleep(0.5)
        speech.say("What a lovely morning it is.")
        speech.say("Could you take me to the kitchen?")
        assert spin_until(ex, lambda: intents, 30)
        msg = intents[0]
        assert (msg.intent, json.loads(msg.data)) == ("guide", {"place": "kitchen"})
        assert msg.source == "visitor" and msg.modality == Intent.MODALITY_SPEECH
        assert msg.utterance == "Could you take me to the kitchen?" and msg.confidence == 1.0
        asked = [r for r in fake_openai.requests
                 if r["messages"][0]["content"].startswith(INTENT_SYSTEM[:40])]
        assert len(asked) == 1                    # small talk never reached the LLM
        assert not [line for line in speech.seen if line.startswith("robot:")]
        # a higher priority pre-empts the Ask that waits for an answer
        results, _ = run_client(tmp_path, manager=manager, steps=[
            {"skill": "ask", "wait": False, "goal": {
                "question": "What is your favourite number?", "priority": 100,
                "answers_schema": '{"number": {"type": "integer"}}'}},
            {"skill": "say", "after": [0, "asked"], "goal": {
                "input": "Attention please, we close in ten minutes.", "priority": 200}},
        ])
        assert results[0]["status"] == "preempted" and results[0]["answers"] == "{}"
        assert results[1]["status"] == "spoken"
        # a lower priority waits for the running Ask, which still hears its answer
        results, _ = run_client(tmp_path, manager=manager, steps=[
            {"skill": "ask", "wait": False, "goal": {
                "question": "And what is your name?",
                "answers_schema": '{"name": {"type": "string"}}'}},
            {"skill": "say", "after": [0, "queued"], "wait": False,
             "goal": {"input": "Thank you.", "priority": 10}},
            {"skill": "say", "after": [0, "queued"], "wait": False,
             "goal": {"input": "Bye.", "priority": 10}},
            {"skill": "say", "after": [0, "queued"], "wait": False,
             "goal": {"input": "See you.", "priority": 10}},
        ])
        assert json.loads(results[0]["answers"]) == {"name": "Zebulon"}
        assert results[1]["status"] == results[2]["status"] == results[3]["status"] == "spoken"
        # sent back to back at one priority: said in the order they were sent
        robot = [line for line in speech.seen if line.startswith("robot:")]
        assert robot[-4:] == ["robot: And what is your name?", "robot: Thank you.",
                              "robot: Bye.", "robot: See you."]
        assert spin_until(ex, lambda: len(intents) == 1, 1.0)
    finally:
        if speech is not None:
            speech.close()
        manager.close()
        node.destroy_node()
        close_context(ctx)


FRONT_DESK_INTENTS = """
intents:
  - name: call_elevator
    description: Call the lift to a floor.
    arguments: {floor: {type: integer, minimum: 0, maximum: 40, description: the floor}}
"""
FRONT_DESK = {"name": "front desk", "configuration": json.dumps({
    "instruction": "Find out the visitor's name and which floor they are going to.",
    "results": {"name": {"type": "string", "description": "the visitor's name"},
                "floor": {"type": "integer", "description": "the floor they go to"}}})}
SLOW_REPLY_S = 1.5
"""Each chat reply of the fake model takes this long: more than the chat's person_lost clock."""


def front_desk_llm(req):
    """A slow model at a front desk: asks for what is missing, reads names, floors, intents."""
    msgs = req["messages"]
    system, text = _texts(req)
    if system == EXTRACT_SYSTEM:
        return _form(text, {"name": _name,
                            "floor": lambda said: 4 if "fourth floor" in said else None})
    if system.startswith(INTENT_SYSTEM[:40]):
        if "second floor" in text:
            return json.dumps({"intent": "call_elevator", "arguments": {"floor": 2}})
        return '{"intent": "none"}'
    prompt = json.dumps(msgs)
    time.sleep(SLOW_REPLY_S)
    if "Still to find out from the person" in prompt and "Zebulon" not in prompt:
        return "Welcome! What is your name?"
    if "Still to find out from the person" in prompt and "fourth floor" not in prompt:
        return "Thank you, Zebulon. Which floor are you going to?"
    return "Of course."


def front_desk_person(speech: Proc):
    def hear(line):
        if line.startswith("robot:"):
            answer = ("My name is Zebulon." if "your name" in line else
                      "I need to go to the fourth floor." if "Which floor" in line else None)
            if answer:
                speech.say(answer)
    return hear


@pytest.mark.skipif(bool(perception_msgs.missing()),
                    reason="hri_msgs not built (the tracked persons say nobody is in view)")
def test_front_desk_chat_with_nobody_in_view_then_the_request_as_an_intent(fake_openai,
                                                                           tmp_path):
    """A front desk's session: nobody in view while the visitor answers a slow robot.

    ROS4HRI's tracked persons saw the visitor, then nobody for the whole chat; each reply takes
    longer than the chat's person_lost clock: the chat still ends done with both results; the
    request that follows is published as its own intent before the robot's reply to it.
    """
    from hri_msgs.msg import IdsList
    fake_openai.responder = front_desk_llm
    (tmp_path / "intents.yaml").write_text(FRONT_DESK_INTENTS)
    manager = start_manager(fake_openai, tmp_path, f"intents_file:={tmp_path / 'intents.yaml'}",
                            "chat_person_lost:=1.0")
    speech = start_speech(tmp_path)
    speech.on_line = front_desk_person(speech)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=SKILLS_DOMAIN)
    node = rclpy.create_node("front_desk_app", context=ctx)
    intents = []
    node.create_subscription(Intent, "intents", lambda m: intents.append((m, time.monotonic())),
                             10)
    tracked = node.create_publisher(IdsList, "/humans/persons/tracked", 10)
    in_view = ["visitor"]
    node.create_timer(0.2, lambda: tracked.publish(IdsList(ids=in_view)))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)

    def seen(event):
        return any(r["type"] == "event" and r.get("event") == event
                   for r in transcript_records(tmp_path))
    try:
        # the tracker saw the visitor, then lost them: nobody in view from then on
        assert spin_until(ex, lambda: seen("arrived"), 30), manager.err[-20:]
        in_view.clear()
        assert spin_until(ex, lambda: seen("left"), 30), manager.err[-20:]
        results, _ = run_client(tmp_path, manager=manager, steps=[
            {"skill": "chat", "goal": {"role": FRONT_DESK, "initiate": True}}])
        assert results[0]["status"] == "done", results
        assert json.loads(results[0]["role_results"]) == {"name": "Zebulon", "floor": 4}
        said_at = time.monotonic()
        speech.say("Could you call the elevator to the second floor for me?")
        assert spin_until(ex, lambda: intents, 30), manager.err[-20:]
        msg, at = intents[0]
        assert (msg.intent, json.loads(msg.data)) == ("call_elevator", {"floor": 2})
        assert msg.utterance == "Could you call the elevator to the second floor for me?"
        assert at - said_at < 3.0, at - said_at
        request = msg.utterance

        def order():
            return [(r["type"], r.get("in_reply_to", r.get("utterance", "")))
                    for r in transcript_records(tmp_path) if r["type"] in ("intent", "reply")]
        assert spin_until(ex, lambda: ("reply", request) in order(), 30)
        kinds = order()
        assert kinds.index(("intent", request)) < kinds.index(("reply", request)), kinds
    finally:
        speech.close()
        manager.close()
        node.destroy_node()
        close_context(ctx)
