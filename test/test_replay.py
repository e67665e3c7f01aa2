"""A recorded session replays through a fresh manager to the same prompt timeline.

Recorded with a deterministic fake LLM; the replay gives the same frames, summary positions,
dialogue lines and replies.

The LLM is FakeOpenAI (a real OpenAI-compatible HTTP server on 127.0.0.1) whose answers are
derived from the request: how many images it holds and whether it is a summary request.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rclpy.serialization import deserialize_message

from conftest import matched, start_bag_player
from fake_openai import FakeOpenAI, Reply as FakeReply
from vision_dialogue.cli.bags import read_messages

NS = "/replay27"
GAP = 0.4  # seconds between session events; replay keeps these gaps


def responder(req: dict) -> str:
    """Deterministic: the answer depends only on the request's images and kind."""
    images, text = 0, ""
    for m in req["messages"]:
        content = m["content"]
        if isinstance(content, str):
            text = content
        else:
            images += sum(p.get("type") == "image_url" for p in content)
            text = " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    if "one short sentence" in text:
        return f"The robot saw {images} views."
    return f"I can see {images} things. Nice to meet you."


def slow_replies(req: dict):
    """The same answers, each reply 1.5 s late (a busy machine's), summaries on time.

    Later than the recording's GAP: a frame recorded after a reply would reach the replaying
    manager before that reply's line unless the player waits for the reply (sync_replies).
    """
    text = responder(req)
    return text if text.startswith("The robot saw") else FakeReply(text=text, delay=1.5)


def manager(ctx, base_url):
    from vision_dialogue.manager_node import ManagerNode
    return ManagerNode(context=ctx, namespace=NS, parameter_overrides=[
        Parameter("llm_backend", value="openai"), Parameter("base_url", value=base_url),
        Parameter("model", value="fake-vlm"), Parameter("n", value=4), Parameter("m", value=3),
        Parameter("transcript_dir", value=""), Parameter("prompt_state_period", value=0.0),
        Parameter("newest_max_side", value=64), Parameter("older_max_side", value=32),
        Parameter("max_retries", value=0)])


def max_frame_id(timeline) -> int:
    ids = [0]
    for line in timeline:
        m = re.match(r"(frame|summary) (\d+)(?:-(\d+))?", line)
        if m:
            ids.append(int(m.group(3) or m.group(2)))
    return max(ids)


class Watch:
    """Final replies and prompt states published by the manager under test."""

    def __init__(self, ctx):
        from vision_dialogue_interfaces.msg import PromptState, Reply
        self.node = Node("watch", context=ctx, namespace=NS)
        self.finals, self.states = [], []
        self.node.create_subscription(Reply, "dialogue/reply", lambda m: m.final and
                                      self.finals.append(m.text), 10)
        self.node.create_subscription(PromptState, "dialogue/prompt_state",
                                      lambda m: self.states.append(list(m.timeline)), 50)


@pytest.fixture
def fake_llm(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeOpenAI(responder=responder) as fake:
        yield fake


def test_replay_reproduces_prompt_timeline(ros_context, spin, tmp_path, fake_llm):
    pytest.importorskip("vision_dialogue.manager_node")
    from sensor_msgs.msg import Image
    from vision_dialogue.cli.bag_record import BagRecorder
    from vision_dialogue.ros.image_msgs import to_image_msg
    from vision_dialogue_interfaces.msg import PromptState, Utterance

    bag = tmp_path / "session"
    # ------------------------------------------------------------------ record
    mgr = manager(ros_context, fake_llm.base_url)
    rec = BagRecorder(context=ros_context, namespace=NS, parameter_overrides=[
        Parameter("output", value=str(bag))])
    src = Node("session", context=ros_context, namespace=NS)
    pub_img = src.create_publisher(Image, "camera/image_raw", qos_profile_sensor_data)
    pub_utt = src.create_publisher(Utterance, "dialogue/utterance", 10)
    watch = Watch(ros_context)
    ex = MultiThreadedExecutor(num_threads=3, context=ros_context)
    for n in (mgr, rec, src, watch.node):
        ex.add_node(n)
    rng = np.random.default_rng(27)
    frames = 0
    try:
        assert spin(ex, lambda: matched(pub_img, *ex.get_nodes(), count=2)
                    and matched(pub_utt, *ex.get_nodes(), count=2), 5.0)

        def frame():
            nonlocal frames
            frames += 1
            pub_img.publish(to_image_msg(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8),
                                         frame_id="camera"))
            assert spin(ex, lambda: max_frame_id(mgr.conversation.state()["timeline"])
                        >= frames, 5.0), f"frame {frames} never reached the manager"
            assert mgr.conversation.wait_idle(5.0)
            spin(ex, lambda: False, GAP)

        def say(text):
            n = len(watch.finals)
            pub_utt.publish(Utterance(text=text, source="test"))
            assert spin(ex, lambda: len(watch.finals) > n, 10.0), f"no reply to {text!r}"
            spin(ex, lambda: False, GAP)

        # the paper's Figure 2 kind of sequence: frames, a turn, more frames, summaries
        for _ in range(3):
            frame()
        say("Hello robot!")
        for _ in range(4):
            frame()
        say("What do you see?")
        for _ in range(3):
            frame()
        say("Goodbye.")
        spin(ex, lambda: False, 0.3)
        recorded_state = mgr.conversation.state()["timeline"]
    finally:
        rec.close()
        for n in (mgr, rec, src, watch.node):
            ex.remove_node(n)
        mgr.close()
        mgr.destroy_node()
        rec.destroy_node()
        src.destroy_node()
        watch.node.destroy_node()
        ex.shutdown()

    assert any(t.startswith("summary") for t in recorded_state), recorded_state
    assert sum(t.startswith("user:") for t in recorded_state) == 3, recorded_state
    msgs = read_messages(bag)
    bag_states = [list(deserialize_message(d, PromptState).timeline)
                  for topic, _, _, d in msgs if topic == f"{NS}/dialogue/prompt_state"]
    assert bag_states and bag_states[-1] == recorded_state
    from vision_dialogue_interfaces.msg import Reply
    bag_finals = [deserialize_message(d, Reply).text for topic, _, _, d in msgs
                  if topic == f"{NS}/dialogue/reply" and deserialize_message(d, Reply).final]
    assert len(bag_finals) == 3
    assert sum(topic == f"{NS}/camera/image_raw" for topic, *_ in msgs) == frames

    # ------------------------------------------------------------------ replay
    mgr2 = manager(ros_context, fake_llm.base_url)
    watch2 = Watch(ros_context)
    # the manager's callbacks only enqueue; its turns and summaries run in its own threads.
    # The replay's replies come later than the recording's (slow_replies), as on a busy
    # machine: with sync_replies a frame recorded after a reply waits for the replayed reply
    fake_llm.responder = slow_replies
    player, ex = start_bag_player(ros_context, bag, [f"{NS}/camera/image_raw",
                                                     f"{NS}/dialogue/utterance"],
                                  [mgr2, watch2.node], sync_replies=True)
    try:
        assert spin(ex, lambda: player.finished.done(), 30.0)
        assert spin(ex, lambda: len(watch2.finals) == 3, 10.0), watch2.finals
        assert mgr2.conversation.wait_idle(5.0)
        spin(ex, lambda: bool(watch2.states) and watch2.states[-1] ==
             mgr2.conversation.state()["timeline"], 3.0)
        replayed_state = mgr2.conversation.state()["timeline"]
    finally:
        player.close()
        for n in (mgr2, watch2.node, player):
            ex.remove_node(n)
        mgr2.close()
        mgr2.destroy_node()
        watch2.node.destroy_node()
        player.destroy_node()
        ex.shutdown()

    assert replayed_state == recorded_state
    assert watch2.states[-1] == bag_states[-1]
    assert watch2.finals == bag_finals
