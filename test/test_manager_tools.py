"""The manager with use_tools=true, in-process with rclpy.

The REAL VfmServer (weight-free `canny` only), the fake OpenAI-compatible server on 127.0.0.1
programmed to call tools, and a test node publishing frames / utterances / shared images and
listening to replies and tool images.
"""
from __future__ import annotations

import base64
import json
import re
import threading

import cv2
import numpy as np
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image
from std_msgs.msg import String
from skimage import data

from conftest import matched, spin_until
from fake_openai import FakeOpenAI, Reply
from vision_dialogue.ros.image_msgs import from_image_msg, to_image_msg
from vision_dialogue.manager_node import ManagerNode
from vision_dialogue_interfaces.msg import Reply as ReplyMsg, Utterance
from vision_dialogue.ros.params import ParameterError
from vision_dialogue.ros.qos import RECORDS_QOS
from vision_dialogue.ros.topics import RECORDS_TOPIC
from vision_dialogue.vfm_server import VfmServer

FINAL = "I traced all the edges for you. They look like a drawing!"


def photo():
    return cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (320, 240))


def tool_msgs(req):
    return [m for m in req["messages"] if m["role"] == "tool"]


def canny_then_answer(req):
    """Reply requests with tools: call canny on the newest frame, then answer."""
    if "tools" not in req:
        last = json.dumps(req["messages"][-1])
        return "The person waved." if "one short sentence" in last else "Plain answer."
    if not tool_msgs(req):
        return Reply(tool_calls=[{"id": "call_canny", "name": "canny", "arguments": {}}])
    return FINAL


def wait_for_tools(rig, ops):
    """Wait until the manager offers `ops`.

    A startup discovery that lost a DDS service-matching race leaves the list stale until a
    turn refreshes it; here a refresh does (on a thread, while this one spins the executor).
    """
    from vision_dialogue.vfm.registry import BY_OP
    tools = rig.node.conversation.turn_tools.provider
    tries = 0
    while not rig.wait(lambda: tools.ops == ops) and tries < 8:
        # refresh until the list service matched (one refresh of 8 s was not enough on a
        # loaded machine: no `canny` in 30 s); each refresh joined before the next
        refresh = threading.Thread(target=tools.refresh, kwargs={"timeout": 8.0}, daemon=True)
        refresh.start()
        rig.wait(lambda: not refresh.is_alive(), timeout=20.0)
        refresh.join(20.0)
        tries += 1
    assert tools.ops == ops, tools.ops
    # and their actions: DDS matches a service and an action one by one (a loaded CI machine
    # once matched the list service, not the action, within the tool call's 10 s)
    actions = [tools.client.actions[BY_OP[op].action_type] for op in ops]
    assert rig.wait(lambda: all(a.server_is_ready() for a in actions), timeout=30)


class Rig:
    def __init__(self, ctx, fake, tmp_path, server=True, load="canny_cpu", checkpoints=None,
                 **params):
        self.store = tmp_path / "store"
        base = {"base_url": fake.base_url, "model": "fake-vlm", "max_retries": 0,
                "request_timeout": 5.0, "transcript_dir": str(tmp_path / "tr"),
                "prompt_state_period": 0.0, "frame_id": "robot_head", "use_tools": True,
                "image_dir": str(self.store), "tool_timeout": 20.0,
                "tool_discovery_timeout": 5.0 if server else 0.3, "stream": True}
        base.update(params)
        self.nodes = []
        self.ex = MultiThreadedExecutor(num_threads=4, context=ctx)
        if server:
            self.server = VfmServer(context=ctx, parameter_overrides=[
                Parameter("image_dir", value=str(self.store)),
                Parameter("load", value=load)] + [
                Parameter(f"checkpoints.{k}", value=v) for k, v in (checkpoints or {}).items()])
            self.nodes.append(self.server)
        self.node = ManagerNode(context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in base.items()])
        self.io = rclpy.create_node("test_io", context=ctx)
        self.nodes += [self.node, self.io]
        self.img_pub = self.io.create_publisher(Image, "camera/image_raw",
                                                qos_profile_sensor_data)
        self.shared_pub = self.io.create_publisher(Image, "dialogue/shared_image", 10)
        self.utt_pub = self.io.create_publisher(Utterance, "dialogue/utterance", 10)
        self.replies, self.tool_images = [], []
        self.io.create_subscription(ReplyMsg, "dialogue/reply", self.replies.append, 50)
        self.io.create_subscription(Image, "dialogue/tool_image", self.tool_images.append, 10)
        self.events = []
        self.io.create_subscription(String, RECORDS_TOPIC,
                                    lambda m: self.events.append(json.loads(m.data)), RECORDS_QOS)
        for n in self.nodes:
            self.ex.add_node(n)
        assert self.wait(lambda: all(matched(p, *self.nodes) for p in (
            self.img_pub, self.utt_pub, self.shared_pub, self.node.out.reply_pub,
            self.node.vcg.image_pub)))

    def wait(self, pred, timeout=15.0):
        return spin_until(self.ex, pred, timeout=timeout)

    def say(self, text):
        m = Utterance()
        m.text, m.source, m.confidence = text, "test", 1.0
        self.utt_pub.publish(m)

    def frame(self, img):
        n = len(self.node.conversation.timeline.snapshot())
        self.img_pub.publish(to_image_msg(img, frame_id="cam"))
        assert self.wait(lambda: len(self.node.conversation.timeline.snapshot()) > n)

    def finals(self):
        return [r for r in self.replies if r.final]

    def close(self):
        self.node.close()
        self.ex.shutdown()
        for n in self.nodes:
            n.destroy_node()


@pytest.fixture
def fake():
    with FakeOpenAI(responder=canny_then_answer) as f:
        yield f


def test_llm_calls_canny_on_the_newest_frame_through_the_real_vfm_server(
        ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path)
    try:
        assert rig.wait(lambda: rig.node.conversation.turn_tools.provider.ops == ["canny"])
        old, img = np.zeros((240, 320, 3), np.uint8) + 90, photo()
        rig.frame(old)
        rig.frame(img)                                      # the newest frame
        rig.say("Can you show me the edges of what you see?")
        assert rig.wait(lambda: rig.finals(), timeout=30)
        final = rig.finals()[0]
        assert final.text == FINAL and not final.fallback and final.turn_id == 1
        chunks = [r.text for r in rig.replies if not r.final]
        assert chunks == ["I traced all the edges for you.", "They look like a drawing!"]

        # the goal reached the server with the newest frame: stored as {id}.png, pixel-exact
        inputs = [p for p in rig.store.glob("*.png") if "_" not in p.stem]
        assert len(inputs) == 1
        stored = cv2.imread(str(inputs[0]))
        assert np.array_equal(stored, img)
        in_id = inputs[0].stem
        # the output is in the store with a chained name {id}_canny_{prev}_{org}.png
        outs = [p.name for p in rig.store.glob("*_canny_*.png")]
        assert len(outs) == 1 and re.fullmatch(rf"[0-9a-f]{{8}}_canny_{in_id}_{in_id}\.png",
                                               outs[0])
        edges = cv2.imread(str(rig.store / outs[0]), cv2.IMREAD_GRAYSCALE)
        assert edges.shape == (240, 320) and 0 < (edges > 0).mean() < 0.5

        reqs = [r for r in fake.requests if "tools" in r]
        assert len(reqs) == 2
        names = [t["function"]["name"] for t in reqs[0]["tools"]]
        assert names == ["canny"]
        # the tool message went back to the LLM, and the new image as an image part
        assert tool_msgs(reqs[1]) == [{"role": "tool", "tool_call_id": "call_canny",
                                       "content": f"The new image is {outs[0]}."}]
        shown = reqs[1]["messages"][-1]
        assert shown["role"] == "user" and shown["content"][0]["text"] == \
            f"[The image {outs[0]}:]"
        assert shown["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
        # the tool image was announced on dialogue/tool_image
        assert rig.wait(lambda: rig.tool_images)
        ti = rig.tool_images[0]
        assert (ti.width, ti.height, ti.header.frame_id) == (320, 240, "robot_head")
        assert np.array_equal(from_image_msg(ti)[:, :, 0], edges)
        # ... and on dialogue/events with a thumbnail, for the monitor page
        assert rig.wait(lambda: any(e["type"] == "tool_image" for e in rig.events))
        shown = next(e for e in rig.events if e["type"] == "tool_image")
        assert shown["image_file"] == outs[0]
        assert base64.b64decode(shown["thumbnail"])[:3] == b"\xff\xd8\xff"
        # the dialogue memory keeps the file name for later turns; the spoken text does not
        tl = rig.node.conversation.state()["timeline"]
        assert tl[-1] == f"robot: {FINAL} [Images I made: {outs[0]} (canny)]"
        rig.node.close()
        recs = [json.loads(x) for x in rig.node.transcript.path.read_text().splitlines()]
        rep = [r for r in recs if r["type"] == "reply"][0]
        assert rep["tools"] == [{"name": "canny", "arguments": {}, "text": None,
                                 "image_file": outs[0], "error": None}]
    finally:
        rig.close()


def test_tool_error_and_chained_file_reach_the_llm_and_the_node_keeps_going(
        ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, stream=False)
    state = {}

    def script(req):
        tm = tool_msgs(req)
        if "tools" not in req:
            return "Plain answer."
        if not tm:
            return Reply(tool_calls=[{"id": "a", "name": "canny",
                                      "arguments": {"image_file": "../../etc/passwd"}},
                                     {"id": "b", "name": "vqa", "arguments": {"text": "?"}},
                                     {"id": "c", "name": "canny", "arguments": {}}])
        if len(tm) == 3:
            name = re.search(r"The new image is (\S+)\.", tm[2]["content"]).group(1)
            state["first"] = name
            return Reply(tool_calls=[{"id": "d", "name": "canny",
                                      "arguments": {"image_file": name}}])
        return "Oops, one of my tools did not work, but I drew edges twice."

    fake.responder = script
    try:
        wait_for_tools(rig, ["canny"])
        rig.frame(photo())
        rig.say("Edges please")
        assert rig.wait(lambda: rig.finals(), timeout=30)
        assert rig.finals()[0].text == \
            "Oops, one of my tools did not work, but I drew edges twice."
        last = [r for r in fake.requests if "tools" in r][-1]
        tm = {m["tool_call_id"]: m["content"] for m in tool_msgs(last)}
        assert tm["a"].startswith("Error:") and "contains '..'" in tm["a"]
        assert tm["b"].startswith("Error:") and "no tool named 'vqa'" in tm["b"]
        first = state["first"]
        first_id, _, _, org = first[: -len(".png")].split("_")
        assert re.fullmatch(rf"The new image is [0-9a-f]{{8}}_canny_{first_id}_{org}\.png\.",
                            tm["d"])
        assert len(rig.tool_images) >= 1 and rig.wait(lambda: len(rig.tool_images) == 2)
        # the node keeps answering
        fake.responder = canny_then_answer
        fake.push("Fine, thanks.")
        rig.say("How are you?")
        assert rig.wait(lambda: len(rig.finals()) == 2)
        assert rig.finals()[1].text == "Fine, thanks." and rig.finals()[1].turn_id == 2
    finally:
        rig.close()


def test_shared_image_is_stored_and_received_exchange_added(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path)
    try:
        assert rig.wait(lambda: rig.node.conversation.turn_tools.provider.ops == ["canny"])
        pic = cv2.resize(np.ascontiguousarray(data.chelsea()[:, :, ::-1]), (200, 150))
        rig.shared_pub.publish(to_image_msg(pic, frame_id="phone"))
        assert rig.wait(lambda: "robot: Received." in rig.node.conversation.state()["timeline"])
        files = [p for p in rig.store.glob("*.png") if "_" not in p.stem]
        assert len(files) == 1 and np.array_equal(cv2.imread(str(files[0])), pic)
        tl = rig.node.conversation.state()["timeline"]
        assert tl[-2].startswith(f"user: provide a figure named {files[0].name}. "
                                 "The description is: a picture the person shared")
        # the next turn's prompt carries the file name, so the LLM can use it
        fake.push(Reply(tool_calls=[{"name": "canny",
                                     "arguments": {"image_file": files[0].name}}]), "Done!")
        rig.say("Draw the edges of my cat picture")
        assert rig.wait(lambda: rig.finals(), timeout=30)
        req = [r for r in fake.requests if "tools" in r][0]
        assert files[0].name in json.dumps(req["messages"])
        assert len(list(rig.store.glob(f"*_canny_{files[0].stem}_{files[0].stem}.png"))) == 1
    finally:
        rig.close()


def test_without_vfm_server_the_manager_starts_and_answers_without_tools(
        ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, server=False)
    try:
        rig.frame(photo())
        rig.say("Hello robot")
        assert rig.wait(lambda: rig.finals())
        assert rig.finals()[0].text == "Plain answer." and not rig.finals()[0].fallback
        assert fake.requests and all("tools" not in r for r in fake.requests)
        assert rig.node.conversation.turn_tools.provider.ops == []
    finally:
        rig.close()


def test_use_tools_off_is_the_papers_setup(ros_context, fake, tmp_path):
    node = ManagerNode(context=ros_context, parameter_overrides=[
        Parameter("base_url", value=fake.base_url), Parameter("transcript_dir", value=""),
        Parameter("image_dir", value=str(tmp_path / "never"))])
    try:
        assert node.vcg is None and node.conversation.turn_tools.provider is None
        assert not (tmp_path / "never").exists()
        topics = [n for n, _ in node.get_topic_names_and_types()]
        assert "/dialogue/tool_image" not in topics
    finally:
        node.close()
        node.destroy_node()


@pytest.mark.parametrize("name,value", [("max_tool_rounds", 0), ("tool_timeout", 0.0),
                                        ("image_dir", " ")])
def test_invalid_tool_parameters_name_the_parameter(ros_context, fake, name, value):
    with pytest.raises(ParameterError, match=f"^{name}"):
        ManagerNode(context=ros_context, parameter_overrides=[
            Parameter("base_url", value=fake.base_url), Parameter("transcript_dir", value=""),
            Parameter("use_tools", value=True), Parameter(name, value=value)])


def test_server_that_appears_later_is_picked_up_at_the_next_turn(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, server=False)
    try:
        rig.frame(photo())
        rig.say("Hello")
        assert rig.wait(lambda: rig.finals())
        assert all("tools" not in r for r in fake.requests)
        server = VfmServer(context=ros_context, parameter_overrides=[
            Parameter("image_dir", value=str(rig.store)), Parameter("load", value="canny_cpu")])
        rig.nodes.insert(0, server)
        rig.ex.add_node(server)
        client = rig.node.conversation.turn_tools.provider.client
        # appeared: its list service and its action (DDS discovers them one by one; on a
        # loaded CI machine the action once took over the client's 10 s wait)
        assert rig.wait(lambda: client.available()
                        and client.actions["image_to_image"].server_is_ready(), timeout=30)
        rig.say("Now show me the edges")
        assert rig.wait(lambda: len(rig.finals()) == 2, timeout=30)
        assert rig.finals()[1].text == FINAL
        assert rig.node.conversation.turn_tools.provider.ops == ["canny"]
        assert len(list(rig.store.glob("*_canny_*.png"))) == 1
    finally:
        rig.close()


class SlowImageServer:
    """A stand-in vfm/image_to_image that never finishes on its own.

    A real rclpy ActionServer in the same context; it waits until the goal is cancelled.
    """

    def __init__(self, ctx):
        from rclpy.action import ActionServer, CancelResponse
        from rclpy.callback_groups import ReentrantCallbackGroup

        from vision_dialogue_interfaces.action import ImageToImage
        from vision_dialogue_interfaces.msg import ToolInfo
        from vision_dialogue_interfaces.srv import ListTools
        self.node = rclpy.create_node("slow_vfm", context=ctx)
        self.cancelled = threading.Event()
        self.goals = []
        cb = ReentrantCallbackGroup()

        def execute(gh):
            self.goals.append(gh.request)
            while not gh.is_cancel_requested and not self.cancelled.wait(0.05):
                pass
            self.cancelled.set()
            gh.canceled()
            return ImageToImage.Result(success=False, error="cancelled")

        def list_tools(_req, resp):
            resp.tools = [ToolInfo(name="Edge Detection On Image", op="canny",
                                   action_type="image_to_image", description="edges",
                                   loaded=True, device="cpu", status="ready")]
            return resp

        self.server = ActionServer(self.node, ImageToImage, "vfm/image_to_image", execute,
                                   cancel_callback=lambda _g: CancelResponse.ACCEPT,
                                   callback_group=cb)
        self.node.create_service(ListTools, "vfm/list_tools", list_tools, callback_group=cb)


def test_tool_timeout_cancels_the_goal_and_frames_keep_flowing(ros_context, fake, tmp_path):
    slow = SlowImageServer(ros_context)
    rig = Rig(ros_context, fake, tmp_path, server=False, tool_discovery_timeout=5.0,
              tool_timeout=1.5, stream=False)
    rig.nodes.insert(0, slow.node)
    rig.ex.add_node(slow.node)
    seen = {}

    def script(req):
        if "tools" not in req:
            return "Plain answer."
        tm = tool_msgs(req)
        if not tm:
            return Reply(tool_calls=[{"id": "t", "name": "canny", "arguments": {}}])
        seen["tool"] = tm[0]["content"]
        return "Sorry, my eyes got tired. Let us try again later."

    fake.responder = script
    try:
        wait_for_tools(rig, ["canny"])
        rig.frame(photo())
        rig.say("Edges please")
        assert rig.wait(lambda: slow.goals)
        assert slow.goals[0].tool == "canny" and slow.goals[0].image.width == 320
        n = len(rig.node.conversation.timeline.snapshot())
        rig.img_pub.publish(to_image_msg(photo(), frame_id="cam"))   # during the tool run
        assert rig.wait(lambda: len(rig.node.conversation.timeline.snapshot()) > n)
        assert not rig.finals()
        assert rig.wait(lambda: rig.finals(), timeout=15)
        assert slow.cancelled.wait(5)
        assert seen["tool"].startswith("Error: tool 'canny' gave no result within 1.5 s")
        assert rig.finals()[0].text == "Sorry, my eyes got tired. Let us try again later."
        assert not rig.finals()[0].fallback
    finally:
        slow.cancelled.set()
        rig.close()


def test_close_during_a_tool_call_ends_the_wait(ros_context, fake, tmp_path):
    import time
    slow = SlowImageServer(ros_context)
    rig = Rig(ros_context, fake, tmp_path, server=False, tool_timeout=60.0, stream=False)
    rig.nodes.insert(0, slow.node)
    rig.ex.add_node(slow.node)
    try:
        wait_for_tools(rig, ["canny"])
        rig.frame(photo())
        rig.say("Edges please")
        assert rig.wait(lambda: slow.goals)
        spinner = threading.Thread(target=lambda: rig.wait(lambda: False, timeout=3.0))
        spinner.start()
        t0 = time.monotonic()
        rig.node.close()                  # must not wait for the 60 s tool timeout
        assert time.monotonic() - t0 < 10.0
        assert not rig.node.turns._worker.is_alive()
        spinner.join()
    finally:
        slow.cancelled.set()
        rig.close()


def test_an_unanswered_goal_is_sent_again_and_a_late_first_copy_cancelled(ros_context,
                                                                          monkeypatch):
    """A goal lost to the DDS service-matching race is sent once more."""
    from types import SimpleNamespace

    from rclpy.task import Future

    from vision_dialogue_interfaces.action import ImageToImage
    from vision_dialogue.ros.manager import vfm_client
    monkeypatch.setattr(vfm_client, "GOAL_RESEND_S", 0.2)
    node = rclpy.create_node("resend_test", context=ros_context)

    class Handle:
        def __init__(self, name):
            self.accepted, self.name, self.cancelled = True, name, False

        def cancel_goal_async(self):
            self.cancelled = True

        def get_result_async(self):
            f = Future()
            f.set_result(SimpleNamespace(result=f"done by {self.name}"))
            return f

    sends = []

    class LossyActionClient:
        def server_is_ready(self):
            return True

        def send_goal_async(self, goal, feedback_callback=None):
            f = Future()
            sends.append(f)
            if len(sends) == 2:           # the first request was lost; this one is answered
                f.set_result(Handle("second"))
            return f
    try:
        client = vfm_client.VfmClient(node)
        client.actions["image_to_image"] = LossyActionClient()
        result = client.call("image_to_image", ImageToImage.Goal(tool="canny"), timeout=5.0)
        assert result == "done by second" and len(sends) == 2
        late = Handle("first")
        sends[0].set_result(late)        # the first copy turns up and is accepted after all
        assert late.cancelled
    finally:
        node.destroy_node()


def test_the_llm_reads_what_segment_tools_say(ros_context, tmp_path_factory, tmp_path):
    """segment's mask count comes with its new file; segmentobject's "found no" comes alone."""
    import tiny_models
    ckpts = tiny_models.cached(tmp_path_factory.getbasetemp() / "tiny_vfm")

    def segment_then_object(req):
        if "tools" not in req:
            return "Plain answer."
        done = tool_msgs(req)
        if not done:
            return Reply(tool_calls=[{"id": "call_seg", "name": "segment", "arguments": {}}])
        if len(done) == 1:
            return Reply(tool_calls=[{"id": "call_obj", "name": "segmentobject",
                                      "arguments": {"text": "unicorn"}}])
        return "I split the picture into parts, but I see no unicorn."

    with FakeOpenAI(responder=segment_then_object) as fake:
        rig = Rig(ros_context, fake, tmp_path, load="segment_cpu,segmentobject_cpu",
                  checkpoints={k: ckpts[k] for k in ("sam", "grounding")})
        try:
            wait_for_tools(rig, ["segment", "segmentobject"])
            rig.frame(cv2.resize(photo(), (64, 64)))     # the tiny SAM's size
            rig.say("Can you segment this, and is there a unicorn?")
            assert rig.wait(lambda: rig.finals(), timeout=60)
            assert not rig.finals()[0].fallback
            last = [r for r in fake.requests if "tools" in r][-1]
            seg, obj = tool_msgs(last)
            made = [p.name for p in rig.store.glob("*_segment_*.png")]
            assert len(made) == 1
            assert re.fullmatch(rf"The new image is {made[0]}\. \d+ segments?",
                                seg["content"]), seg
            assert obj["content"] == "found no unicorn in the image"
            assert not list(rig.store.glob("*_segmentobject_*.png"))
        finally:
            rig.close()
