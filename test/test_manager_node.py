"""ManagerNode in-process with rclpy.

A real publisher node in the same context, the manager talking to the fake OpenAI-compatible server
on 127.0.0.1.
"""
import json
import threading
import time

import numpy as np
import rclpy
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import CompressedImage

from conftest import REPO, matched
from fake_openai import FakeOpenAI, Reply
from manager_rig import REPLY, Rig, photo, responder
from vision_dialogue.manager_node import ManagerNode
from vision_dialogue.ros.image_msgs import to_compressed_msg, to_image_msg
from vision_dialogue.ros.params import ParameterError


@pytest.fixture
def fake():
    with FakeOpenAI(responder=responder) as f:
        yield f


def test_frames_reply_chunks_final_prompt_state_and_transcript(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, n=4, m=3, newest_max_side=320, older_max_side=128)
    try:
        img = photo()
        for i in range(3):
            rig.img_pub.publish(to_image_msg(img, frame_id="cam"))
            assert rig.wait(lambda: rig.node.conversation.timeline.snapshot().__len__() > i)
        rig.jpg_pub.publish(to_compressed_msg(img, frame_id="cam"))   # 4th frame: summary
        assert rig.wait(lambda: any(s.frame_summaries == 1 for s in rig.states))
        rig.say("Hi robot!")
        assert rig.wait(lambda: rig.finals())
        chunks = [r for r in rig.replies if not r.final]
        final = rig.finals()[0]
        assert [c.text for c in chunks] == ["Hello there.", "It is nice to meet you!",
                                            "What is your name?"]
        assert [c.chunk_index for c in chunks] == [0, 1, 2]
        assert final.text == REPLY and final.chunk_index == 3 and final.turn_id == 1
        assert final.in_reply_to == "Hi robot!" and not final.fallback
        assert final.header.frame_id == "robot_head" and all(c.turn_id == 1 for c in chunks)
        assert rig.wait(lambda: rig.states and rig.states[-1].dialogue_lines == 2)
        st = rig.states[-1]
        assert (st.raw_frames, st.frame_summaries, st.pending_summaries) == (1, 1, 0)
        assert list(st.summaries) == ["The person waved at me."]
        assert list(st.timeline) == ["summary 1-3: The person waved at me.", "frame 4",
                                     "user: Hi robot!", f"robot: {REPLY}"]
        assert st.prompt_image_bytes > 1000
        # the reply request: the newest frame as an image at the configured size
        reply_req = [r for r in fake.requests if r.get("stream")][-1]
        assert reply_req["model"] == "fake-vlm"
        imgs = [p for m in reply_req["messages"] if isinstance(m["content"], list)
                for p in m["content"] if p["type"] == "image_url"]
        assert len(imgs) == 1 and imgs[0]["image_url"]["url"].startswith("data:image/jpeg")
        # transcript flushed: frames as files, user + reply + summary records
        rig.node.close()
        tr = rig.node.transcript.path
        recs = [json.loads(line) for line in tr.read_text().splitlines()]
        types = [r["type"] for r in recs]
        assert types.count("frame") == 4 and {"summary", "user", "reply"} <= set(types)
        files = [r["file"] for r in recs if r["type"] == "frame"]
        assert all((tr.parent / f).is_file() for f in files)
    finally:
        rig.close()


def test_llm_down_fallback_then_next_turn_answers_in_order(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, stream=False)
    fake.push(500)
    try:
        rig.say("First question")
        # the second once the first is being answered (lines that wait together are one turn)
        assert rig.wait(lambda: fake.request_count >= 1)
        rig.say("Second question")
        assert rig.wait(lambda: len(rig.finals()) == 2)
        f1, f2 = rig.finals()
        assert (f1.turn_id, f1.in_reply_to, f1.fallback) == (1, "First question", True)
        assert f1.text in rig.node.conversation.persona.fallback_lines
        assert (f2.turn_id, f2.in_reply_to, f2.fallback) == (2, "Second question", False)
        assert f2.text == REPLY
        assert not [r for r in rig.replies if not r.final]      # stream=false: no chunks
    finally:
        rig.close()


def test_bad_frames_are_dropped_and_node_keeps_working(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path)
    try:
        bad = to_image_msg(photo())
        bad.data = bytes(100)                 # inconsistent size
        rig.img_pub.publish(bad)
        junk = CompressedImage()
        junk.format, junk.data = "jpeg", b"not a jpeg"
        rig.jpg_pub.publish(junk)
        rig.img_pub.publish(to_image_msg(photo()))
        assert rig.wait(lambda: len(rig.node.conversation.timeline.snapshot()) == 1)
        time.sleep(0.1)
        rig.ex.spin_once(timeout_sec=0.05)
        assert rig.node.conversation.state()["raw_frames"] == 1
    finally:
        rig.close()


def test_frames_keep_flowing_while_a_reply_is_in_progress(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, n=10, m=3)
    gate = threading.Event()
    fake.push(Reply(text="Oh, hello. Nice to see you.", gates={0: gate}))
    try:
        rig.say("Are you there?")
        assert rig.wait(lambda: fake.request_count >= 1)   # the reply is now held by the gate
        for i in range(3):
            rig.img_pub.publish(to_image_msg(photo()))
        assert rig.wait(lambda: rig.node.conversation.state()["raw_frames"] == 3)
        assert not rig.finals()                            # still answering meanwhile
        gate.set()
        assert rig.wait(lambda: rig.finals())
        assert rig.finals()[0].text == "Oh, hello. Nice to see you."
        assert rig.node.conversation.state()["timeline"] == [
            "user: Are you there?", "frame 1", "frame 2", "frame 3",
            "robot: Oh, hello. Nice to see you."]
    finally:
        gate.set()
        rig.close()


def test_prompt_state_timer_publishes_without_changes(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, prompt_state_period=0.05, transcript_dir="")
    try:
        assert rig.wait(lambda: len(rig.states) >= 3)
        st = rig.states[-1]
        assert (st.raw_frames, st.dialogue_lines, st.header.frame_id) == (0, 0, "robot_head")
        assert st.prompt_chars > 0 and st.prompt_image_bytes == 0
        assert rig.node.transcript is None
    finally:
        rig.close()


def test_min_frame_interval_skips_frames(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path, min_frame_interval=60.0)
    try:
        for _ in range(3):
            rig.img_pub.publish(to_image_msg(photo()))
        assert rig.wait(lambda: rig.node.frames_skipped == 2)
        assert rig.node.conversation.state()["raw_frames"] == 1
    finally:
        rig.close()


@pytest.mark.parametrize("over,name", [({"n": 3, "m": 3}, "m"), ({"n": 1}, "n"),
                                       ({"m": 0}, "m"), ({"image_detail": "huge"}, "image_detail"),
                                       ({"llm_backend": "magic"}, "llm_backend"),
                                       ({"persona_file": "/nonexistent.yaml"}, "persona_file")])
def test_invalid_parameters_raise_naming_the_parameter(ros_context, over, name):
    with pytest.raises(ParameterError) as e:
        ManagerNode(context=ros_context, parameter_overrides=[
            Parameter(k, value=v) for k, v in {"base_url": "http://127.0.0.1:9/v1",
                                               "transcript_dir": "", **over}.items()])
    assert str(e.value).startswith(name)


def test_same_frame_on_both_transports_is_added_once(ros_context, fake, tmp_path):
    """camera_node publishes every frame as Image and CompressedImage with one stamp."""
    rig = Rig(ros_context, fake, tmp_path, n=20, m=3)  # no summary folds the count
    try:
        img = photo()
        for i in range(2):
            stamp = rig.io.get_clock().now().to_msg()
            rig.img_pub.publish(to_image_msg(img, stamp=stamp, frame_id="cam"))
            rig.jpg_pub.publish(to_compressed_msg(img, stamp=stamp, frame_id="cam"))
            time.sleep(0.01)
        other = rig.io.get_clock().now().to_msg()
        rig.jpg_pub.publish(to_compressed_msg(img, stamp=other, frame_id="cam"))
        assert rig.wait(lambda: len(rig.node.conversation.timeline.snapshot()) >= 3)
        rig.wait(lambda: False, timeout=0.5)  # any duplicate would have arrived by now
        assert len(rig.node.conversation.timeline.snapshot()) == 3
    finally:
        rig.close()


def test_greet_first_speaks_once_when_a_person_appears(ros_context, tmp_path):
    with FakeOpenAI(responder=responder) as fake:
        rig = Rig(ros_context, fake, tmp_path, greet_first=True)
        try:
            rig.img_pub.publish(to_image_msg(photo()))
            assert rig.wait(lambda: len(rig.finals()) == 1)
            greeting = rig.finals()[0]
            assert greeting.in_reply_to == "" and greeting.text == REPLY
            prompt = fake.requests[-1]["messages"]
            from vision_dialogue.core.persona import load_persona
            assert prompt[-1] == {"role": "system", "content": load_persona().greet_instruction}
            rig.img_pub.publish(to_image_msg(photo()))    # a second frame: no second greeting
            rig.say("Hi robot")
            assert rig.wait(lambda: len(rig.finals()) == 2)
            assert rig.finals()[1].in_reply_to == "Hi robot"
            time.sleep(0.3)
            assert len(rig.finals()) == 2
        finally:
            rig.close()


def _event_sink(rig):
    from std_msgs.msg import String

    from vision_dialogue.ros.qos import RECORDS_QOS
    from vision_dialogue.ros.topics import RECORDS_TOPIC
    got = []
    rig.io.create_subscription(String, RECORDS_TOPIC, lambda m: got.append(json.loads(m.data)),
                               RECORDS_QOS)
    return got


def test_every_transcript_record_goes_out_on_dialogue_events(ros_context, fake, tmp_path):
    """The monitor's source: frames (with a thumbnail), lines, replies with their latency."""
    import base64
    rig = Rig(ros_context, fake, tmp_path)
    events = _event_sink(rig)
    try:
        rig.img_pub.publish(to_image_msg(photo()))
        assert rig.wait(lambda: any(e["type"] == "frame" for e in events))
        rig.say("What do you see?")
        assert rig.wait(lambda: any(e["type"] == "reply" for e in events))
        frame = next(e for e in events if e["type"] == "frame")
        assert base64.b64decode(frame["thumbnail"])[:3] == b"\xff\xd8\xff"
        reply = next(e for e in events if e["type"] == "reply")
        assert reply["text"] == REPLY and reply["frames_in_prompt"] == [frame["frame_id"]]
        assert 0 <= reply["first_sentence_s"] <= reply["reply_s"] and reply["prompt_chars"] > 0
        user = next(e for e in events if e["type"] == "user")
        assert user["text"] == "What do you see?" and user["t"] <= reply["t"]
        # the manager checked its endpoint at startup: the model is served
        assert rig.wait(lambda: any(e["type"] == "health" for e in events))
        assert next(e for e in events if e["type"] == "health")["ok"] is True
    finally:
        rig.close()


def test_startup_check_warns_once_about_a_model_the_server_does_not_serve(ros_context, fake,
                                                                          tmp_path):
    rig = Rig(ros_context, fake, tmp_path, model="gpt-7")
    events = _event_sink(rig)
    try:
        assert rig.wait(lambda: any(e["type"] == "health" for e in events))
        health = next(e for e in events if e["type"] == "health")
        assert health["ok"] is False and "does not serve model 'gpt-7'" in health["detail"]
    finally:
        rig.close()


def test_verbose_logs_observations_summaries_and_latency(ros_context, fake, tmp_path,
                                                         monkeypatch):
    monkeypatch.setenv("VD_VERBOSE", "1")
    rig = Rig(ros_context, fake, tmp_path, n=2, m=1)
    logged = []
    monkeypatch.setattr(rig.node, "get_logger", lambda: type(
        "L", (), {"info": staticmethod(logged.append), "warning": staticmethod(logged.append)})())
    try:
        for _ in range(2):
            rig.img_pub.publish(to_image_msg(photo()))
            time.sleep(0.3)
        # best effort in one process: under load a frame may be dropped, so wait for two
        for _ in range(10):
            if rig.wait(lambda: rig.node.frames_received >= 2, timeout=2.0):
                break
            rig.img_pub.publish(to_image_msg(photo()))
        assert rig.node.frames_received >= 2
        assert rig.wait(lambda: any(line.startswith("frame 1: ") for line in logged))
        rig.say("Hi")
        assert rig.wait(lambda: any(line.startswith("turn 1: first sentence") for line in logged))
        assert rig.wait(lambda: any(line.startswith("summary of frames [1]") for line in logged))
    finally:
        rig.close()


def test_the_utterances_language_asks_for_a_reply_in_it(ros_context, fake, tmp_path):
    rig = Rig(ros_context, fake, tmp_path)
    try:
        rig.say("Bonjour robot, que vois-tu ?", language="fr")
        assert rig.wait(lambda: len(rig.finals()) == 1)
        rig.say("Hello robot.", language="en-GB")
        assert rig.wait(lambda: len(rig.finals()) == 2)
        streamed = [r["messages"] for r in fake.requests if r.get("stream")]
        assert streamed[0][-1] == {"role": "system", "content":
                                   "The person speaks French: answer in French, briefly."}
        assert "answer in" not in json.dumps(streamed[1][-1])
    finally:
        rig.close()


def test_blur_faces_hides_them_in_the_transcript_and_the_thumbnails(ros_context, fake,
                                                                    tmp_path):
    import base64

    import cv2
    import numpy as np

    from vision_dialogue.perception.privacy import FaceBlurrer
    rig = Rig(ros_context, fake, tmp_path, blur_faces=True, frame_retention="keep")
    events = _event_sink(rig)
    try:
        rig.img_pub.publish(to_image_msg(photo()))
        assert rig.wait(lambda: any(e["type"] == "frame" for e in events))
        rig.say("What do you see?")
        assert rig.wait(lambda: len(rig.finals()) == 1)
        # the LLM still got the frame as it is: only what is stored or displayed is blurred
        sent = [p for m in fake.requests[-1]["messages"] if isinstance(m["content"], list)
                for p in m["content"] if p.get("type") == "image_url"]
        assert sent
    finally:
        rig.close()
    finder = FaceBlurrer()
    assert finder.boxes(photo())                                   # there is a face to hide
    thumb = next(e for e in events if e["type"] == "frame")["thumbnail"]
    small = cv2.imdecode(np.frombuffer(base64.b64decode(thumb), np.uint8), cv2.IMREAD_COLOR)
    stored = cv2.imread(str(next((tmp_path / "tr").glob("*/frames/*.jpg"))))
    for img in (small, stored):
        assert finder.boxes(cv2.resize(img, (640, 480))) == []
    raw = base64.b64decode(sent[0]["image_url"]["url"].split(",", 1)[1])
    seen = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    assert finder.boxes(cv2.resize(seen, (640, 480)))              # the LLM saw the face


def test_a_question_about_the_past_looks_back_at_a_summarised_frame(ros_context, tmp_path):
    """A question about the past looks back at a summarised frame.

    The OpenAI-compatible path: look_back offered on every (streamed) turn, called when the
    question is about the past, the old frame shown, answered.
    """
    def looks_back(req):
        last = json.dumps(req["messages"][-1])
        if "tools" not in req:
            return "I saw a person." if "one short sentence" in last else "Unexpected."
        if "started" not in json.dumps(req["messages"]):
            return "Just you, now."
        if not any(m["role"] == "tool" for m in req["messages"]):
            return Reply(tool_calls=[{"id": "lb", "name": "look_back",
                                      "arguments": {"seconds_ago": "600"}}])
        return "At the start I saw you in orange."

    with FakeOpenAI(responder=looks_back) as fake:
        rig = Rig(ros_context, fake, tmp_path, n=2, m=1)
        try:
            for i in range(3):
                rig.img_pub.publish(to_image_msg(photo()))
                assert rig.wait(lambda: len(rig.node.conversation.archive.frames()) > i)
            assert rig.wait(lambda: any(s.frame_summaries >= 1 for s in rig.states))
            rig.say("What do you see?")
            assert rig.wait(lambda: len(rig.finals()) == 1)
            rig.say("What did you see when we started talking?")
            assert rig.wait(lambda: len(rig.finals()) == 2)
        finally:
            rig.close()
        with_tools = [r for r in fake.requests if "tools" in r]
    assert [f.text for f in rig.finals()] == ["Just you, now.",
                                              "At the start I saw you in orange."]
    assert [t["function"]["name"] for t in with_tools[0]["tools"]] == ["look_back"]
    assert all(r.get("stream") for r in with_tools)     # tools and streaming together
    followup = with_tools[-1]["messages"]
    tool_msg = next(m for m in followup if m["role"] == "tool")
    assert tool_msg["content"].startswith("Frame 1,")
    assert any(p.get("type") == "image_url" for m in followup[followup.index(tool_msg):]
               if isinstance(m.get("content"), list) for p in m["content"])


def test_the_robot_remarks_on_a_changed_scene_but_not_while_it_speaks(ros_context, fake,
                                                                      tmp_path):
    import cv2
    from skimage import data
    from vision_dialogue_interfaces.msg import SpeechState
    rig = Rig(ros_context, fake, tmp_path, proactive="arrivals_and_scenes",
              proactive_interval=1.0, proactive_quiet=0.0)
    state_pub = rig.io.create_publisher(SpeechState, "dialogue/speech_state", 10)
    coffee = cv2.resize(np.ascontiguousarray(data.coffee()[:, :, ::-1]), (640, 480))
    try:
        time.sleep(1.1)
        rig.img_pub.publish(to_image_msg(photo()))
        rig.img_pub.publish(to_image_msg(coffee))                  # the view changed
        assert rig.wait(lambda: len(rig.finals()) == 1)
        assert rig.finals()[0].in_reply_to == ""
        asked = fake.requests[-1]["messages"][-1]
        assert asked["role"] == "system" and "just changed" in asked["content"]
        assert rig.wait(lambda: matched(state_pub, rig.node))
        state_pub.publish(SpeechState(state=SpeechState.SPEAKING))
        assert rig.wait(lambda: rig.node.proactive._busy)
        time.sleep(1.1)
        rig.img_pub.publish(to_image_msg(photo()))
        rig.img_pub.publish(to_image_msg(coffee))
        assert not rig.wait(lambda: len(rig.finals()) > 1, timeout=1.5)
    finally:
        rig.close()


def test_camera_users_reach_the_prompt_and_the_transcript(ros_context, fake, tmp_path):
    from vision_dialogue_interfaces.msg import DetectedUser, DetectedUsers
    rig = Rig(ros_context, fake, tmp_path)
    users_pub = rig.io.create_publisher(DetectedUsers, "camera/users", 10)
    events = _event_sink(rig)
    try:
        assert rig.wait(lambda: matched(users_pub, rig.node))
        u = DetectedUser(id="4", emotion="surprised")
        u.position.x, u.position.z = -0.6, 1.4
        users_pub.publish(DetectedUsers(users=[u]))
        assert rig.wait(lambda: any(e["type"] == "person" for e in events))
        rig.say("Who is here?")
        assert rig.wait(lambda: len(rig.finals()) == 1)
        prompt = json.dumps(fake.requests[-1]["messages"])
        assert "user 4 to your right, 1.4 m away, looking surprised" in prompt
        assert next(e for e in events if e["type"] == "person")["event"] == "arrived"
    finally:
        rig.close()


def test_a_wave_between_frames_reaches_the_prompt_and_is_answered(ros_context, fake,
                                                                  tmp_path):
    from vision_dialogue_interfaces.msg import VisualEvent
    rig = Rig(ros_context, fake, tmp_path, proactive="arrivals", proactive_interval=1.0,
              proactive_quiet=0.0)
    events_pub = rig.io.create_publisher(VisualEvent, "camera/events", 10)
    try:
        assert rig.wait(lambda: matched(events_pub, rig.node))
        time.sleep(1.1)                     # no remark in the first proactive_interval
        events_pub.publish(VisualEvent(kind="wave", text="someone on the left waved",
                                       where="on the left", confidence=1.0))
        assert rig.wait(lambda: len(rig.finals()) == 1)        # a remark unasked
        prompt = json.dumps(fake.requests[-1]["messages"])
        assert "You noticed: someone on the left waved" in prompt
        assert "Someone just waved at you" in prompt
    finally:
        rig.close()


# ------------------------------------------------------ llama.cpp's server (as its fake answers)
def test_a_text_only_server_model_is_noticed_at_start_and_talked_to_in_text(ros_context,
                                                                            tmp_path):
    """A text only server model is noticed at start and talked to in text.

    llama.cpp with a text model refuses image parts (HTTP 500): one line at start, frames as
    text observations, and the turns are the model's replies, not fallbacks.
    """
    def model(req):
        body = json.dumps(req["messages"])
        assert "image_url" not in body or req.get("max_tokens") == 1   # only the probe
        return "I see a person in orange." if "You see" in body or "[" in body else "Hello."

    with FakeOpenAI(mimic="llama.cpp", responder=model) as fake:
        rig = Rig(ros_context, fake, tmp_path, probe_images=True, supports_images=True)
        try:
            assert rig.node.backend.supports_images is False
            assert rig.node.conversation.supports_images is False
            rig.img_pub.publish(to_image_msg(photo()))
            assert rig.wait(lambda: rig.node.conversation.prompt.newest is not None)
            rig.say("What do you see?")
            assert rig.wait(lambda: len(rig.finals()) == 1, timeout=30)
        finally:
            rig.close()
    assert not rig.finals()[0].fallback and rig.finals()[0].text
    refused = [m for m in fake.requests if "image_url" in json.dumps(m["messages"])]
    assert len(refused) == 1                               # the start-up check alone
    assert rig.node.exit_code == 0


def test_a_look_back_the_model_writes_as_text_runs_and_is_never_spoken(ros_context, tmp_path):
    """A look back the model writes as text runs and is never spoken.

    The 0.5B model on llama.cpp writes {"name": "look_back", ...} as text (tool_choice auto):
    the call runs and the robot says the answer, never the JSON.
    """
    def model(req):
        if "tools" not in req:
            return "A person in orange."
        if not any(m["role"] == "tool" for m in req["messages"]):
            return Reply(tool_calls=[{"name": "look_back", "arguments": {"seconds_ago": 600}}])
        return "At the start I saw you in orange."

    with FakeOpenAI(mimic="llama.cpp", responder=model) as fake:
        rig = Rig(ros_context, fake, tmp_path, supports_images=False, n=2, m=1)
        try:
            for i in range(3):
                rig.img_pub.publish(to_image_msg(photo()))
                assert rig.wait(lambda: len(rig.node.conversation.archive.frames()) > i)
            rig.say("What did you see when we started talking?")
            assert rig.wait(lambda: len(rig.finals()) == 1, timeout=30)
        finally:
            rig.close()
    spoken = [r.text for r in rig.replies]
    assert rig.finals()[0].text == "At the start I saw you in orange.", spoken
    assert not [t for t in spoken if "{" in t or "look_back" in t]
    tool_msgs = [m for r in fake.requests for m in r["messages"] if m["role"] == "tool"]
    assert tool_msgs and tool_msgs[0]["content"].startswith("Frame 1,")


def test_a_session_where_every_reply_is_the_fallback_ends_in_failure(ros_context, tmp_path,
                                                                     capfd):
    """Every reply a fallback: exit code 1 and an error; one real reply: not a failure."""
    for real_replies, code in (((), 1), (("Hello there.",), 0)):
        with FakeOpenAI(default_reply=500) as fake:
            fake.push(*real_replies)
            rig = Rig(ros_context, fake, tmp_path)
            try:
                rig.say("Hello?")      # two turns: the second is said after the first reply
                assert rig.wait(lambda: len(rig.finals()) == 1, timeout=30)
                rig.say("Are you there?")
                assert rig.wait(lambda: len(rig.finals()) == 2, timeout=30)
            finally:
                rig.close()
        assert [f.fallback for f in rig.finals()] == [not real_replies, True]
        assert rig.node.exit_code == code
        err = capfd.readouterr().err
        assert ("every reply of this session (2) was the fallback line" in err) is (code == 1)


def test_a_silent_raw_publisher_is_reported_and_compressed_frames_taken(ros_context, fake,
                                                                        tmp_path, capfd):
    """A silent raw publisher is reported and compressed frames are taken.

    A driver matched on camera/image_raw whose frames never arrive while its /compressed ones
    do: one warning naming it, the raw subscription dropped, frames from /compressed used;
    silent on both (not started yet), it is not reported.
    """
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from vision_dialogue.ros import image_input
    rig = Rig(ros_context, fake, tmp_path)
    driver = rclpy.create_node("usb_cam", context=ros_context)
    driver.create_publisher(Image, "camera/image_raw", qos_profile_sensor_data)   # silent
    jpg = driver.create_publisher(CompressedImage, "camera/image_raw/compressed",
                                  qos_profile_sensor_data)
    camera = rig.node.camera
    try:
        assert rig.wait(lambda: len(rig.node.get_publishers_info_by_topic(
            "/camera/image_raw")) >= 2)             # the rig's and the driver's
        camera.check_loss()
        assert not camera.reported                  # matched only now: not judged yet
        # a frame from the rig, heard before the clock moves on (with a frame still on its
        # way then, the node's own check judged the rig's publisher silent too)
        assert rig.send_until(lambda: rig.img_pub.publish(to_image_msg(photo())),
                              lambda: rig.node.conversation.prompt.newest is not None)
        shift = image_input.SILENT_S                # ... as if SILENT_S had passed
        camera.loss.clock = lambda: time.monotonic() + shift
        camera.check_loss()
        raw_sub, _ = camera.subs
        # silent on both topics: a camera that has not started (waiting for its listeners,
        # an inactive lifecycle node) loses nothing
        assert not camera.reported and raw_sub.sub is not None
        before = len(rig.node.conversation.archive.frames())
        assert rig.send_until(lambda: jpg.publish(to_compressed_msg(photo())),
                              lambda: len(rig.node.conversation.archive.frames()) > before)
        camera.check_loss()                         # its JPEGs come, its raw frames do not
        assert raw_sub.sub is None                  # dropped: frames come from /compressed
        before = len(rig.node.conversation.archive.frames())
        assert rig.send_until(lambda: jpg.publish(to_compressed_msg(photo())),
                              lambda: len(rig.node.conversation.archive.frames()) > before)
    finally:
        driver.destroy_node()
        rig.close()
    err = capfd.readouterr().err
    assert err.count("are lost between processes") == 1
    assert "frames from /usb_cam (best effort) are lost between processes" in err
    assert "/camera/image_raw/compressed is published: using it instead" in err


@pytest.mark.parametrize("named_later", [True, False])
def test_a_losing_publisher_the_graph_has_not_named_is_reported_once_named_or_late(
        ros_context, fake, tmp_path, capfd, named_later):
    """A losing publisher is named once the graph knows its node, or reported unnamed later.

    DDS may know a writer before the ROS graph knows its node: the warning waits for the name
    (NAME_WAIT_S at most) rather than naming _NODE_NAME_UNKNOWN_.
    """
    from types import SimpleNamespace

    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from vision_dialogue.ros import image_input
    rig = Rig(ros_context, fake, tmp_path)
    driver = rclpy.create_node("usb_cam", context=ros_context)
    driver.create_publisher(Image, "camera/image_raw", qos_profile_sensor_data)   # silent
    camera, node = rig.node.camera, rig.node
    graph = node.get_publishers_info_by_topic
    named = [False]

    def as_the_graph_knows_it(topic):
        return [i if named[0] or i.node_name != "usb_cam" else
                SimpleNamespace(endpoint_gid=i.endpoint_gid, qos_profile=i.qos_profile,
                                node_name="_NODE_NAME_UNKNOWN_",
                                node_namespace="_NODE_NAMESPACE_UNKNOWN_")
                for i in graph(topic)]
    try:
        assert rig.wait(lambda: len(graph("/camera/image_raw")) >= 2)
        assert rig.send_until(lambda: rig.img_pub.publish(to_image_msg(photo())),
                              lambda: rig.node.conversation.prompt.newest is not None)
        node.get_publishers_info_by_topic = as_the_graph_knows_it
        camera.check_loss()                         # matched from now on
        shift = image_input.SILENT_S
        camera.loss.clock = lambda: time.monotonic() + shift
        camera.check_loss()
        assert not camera.reported                  # silent, but not named yet: waits
        if named_later:
            named[0] = True
        else:
            shift += image_input.NAME_WAIT_S
        camera.check_loss()
        assert len(camera.reported) == 1            # named now, or too late to wait more
    finally:
        del node.get_publishers_info_by_topic
        driver.destroy_node()
        rig.close()
    err = capfd.readouterr().err
    who = "/usb_cam" if named_later else "a publisher (node not named)"
    assert f"frames from {who} (best effort) are lost between processes" in err
    assert "UNKNOWN" not in err


def test_the_faces_records_reach_the_transcript_and_the_monitor(ros_context, fake, tmp_path):
    """What the speech node's face showed (dialogue/face) is recorded beside the lines."""
    from std_msgs.msg import String

    from vision_dialogue.monitor.session import SessionView
    rig = Rig(ros_context, fake, tmp_path)
    face_pub = rig.io.create_publisher(String, "dialogue/face", 10)
    events = _event_sink(rig)
    try:
        assert rig.wait(lambda: matched(face_pub, rig.node))
        rig.say("My dog died yesterday.")
        record = {"moment": "heard", "line": "My dog died yesterday.", "turn_id": 0,
                  "expression": "sad", "valence": -0.56, "arousal": -0.3, "confidence": 0.8,
                  "gesture": "vd_sad"}
        face_pub.publish(String(data=json.dumps(record)))
        face_pub.publish(String(data="not json"))          # dropped with a warning
        assert rig.wait(lambda: any(e["type"] == "face" for e in events))
        assert rig.wait(lambda: len(rig.finals()) == 1)
        face = next(e for e in events if e["type"] == "face")
        assert {k: face[k] for k in record} == record
        view = SessionView()
        for e in events:
            view.ingest(e)
        notes = [i["text"] for i in view.snapshot()["items"] if i.get("level") == "face"]
        assert notes and "sad" in notes[0] and "My dog died yesterday." in notes[0]
    finally:
        rig.close()


def test_summaries_wait_while_dialogue_hearing_says_the_person_speaks(
        ros_context, fake, tmp_path):
    """The speech node's dialogue/hearing: the 4th frame's summary comes after the turn."""
    from std_msgs.msg import Bool
    from vision_dialogue.ros.qos import RELIABLE_QOS
    rig = Rig(ros_context, fake, tmp_path, n=4, m=3, newest_max_side=320, older_max_side=128)
    try:
        hearing = rig.io.create_publisher(Bool, "dialogue/hearing", RELIABLE_QOS)
        assert rig.wait(lambda: matched(hearing, rig.node))
        hearing.publish(Bool(data=True))
        held = rig.node.conversation.summariser
        assert rig.wait(lambda: held._held_since is not None)
        img = photo()
        for i in range(4):
            rig.img_pub.publish(to_image_msg(img, frame_id="cam"))
            assert rig.wait(lambda: len(rig.node.conversation.timeline) > i)
        assert rig.node.conversation.state()["frame_summaries"] == 0     # held
        hearing.publish(Bool(data=False))
        assert rig.wait(lambda: held._held_since is None)
        rig.say("Hi robot!")
        assert rig.wait(lambda: rig.finals())
        assert rig.wait(lambda: any(s.frame_summaries == 1 for s in rig.states))
    finally:
        rig.close()


def test_the_observer_the_manager_made_is_released_after_the_frame_in_hand(
        ros_context, fake, tmp_path, monkeypatch):
    """Its native models are released after the frame in hand, waited for a bounded time.

    A manager stopped mid-frame died of std::terminate (exit -6) in a launch test; one whose
    first frame loaded MediaPipe on a loaded machine held its stop past launch's SIGTERM.
    """
    events, observing = [], threading.Event()

    class Observer:
        def __init__(self):
            self.lock = threading.Lock()

        def __call__(self, bgr):
            with self.lock:
                observing.set()
                time.sleep(0.3)
                events.append("observed")
                return "a room"

        def close(self, timeout=-1):
            # as FrameObserver: waits for the frame in hand, at most `timeout` s
            if not self.lock.acquire(timeout=timeout):
                return False
            events.append(("released", timeout))
            self.lock.release()
            return True

    monkeypatch.setattr(ManagerNode, "_make_observer", lambda self: Observer())
    rig = Rig(ros_context, fake, tmp_path, supports_images=False)
    try:
        adding = threading.Thread(target=rig.node.conversation.add_frame,
                                  args=(np.full((60, 80, 3), 90, np.uint8),))
        adding.start()
        assert observing.wait(5)
        rig.node.close()
        adding.join(5)
        from vision_dialogue.common.frame_intake import FRAME_AT_EXIT_S
        assert events == ["observed", ("released", FRAME_AT_EXIT_S)]
    finally:
        rig.close()


@pytest.mark.parametrize("setting, backend, model, on", [
    ("auto", "local", "default", "strict"), ("auto", "llamacpp", "default:1.5b", "soft"),
    ("auto", "transformers", "/models/mine", "soft"), ("auto", "openai", "default", "soft"),
    ("strict", "local", "default:1.5b", "strict"), ("none", "local", "default", "none")])
def test_focus_note_auto_follows_the_measurement_per_model(setting, backend, model, on):
    """focus_note auto: strict for the 0.5B, soft for the 1.5B and others (measured)."""
    from vision_dialogue.ros.manager.params import focus_note_style
    assert focus_note_style({"focus_note": setting, "llm_backend": backend,
                             "model": model}) == on


def test_a_reply_said_while_the_context_shuts_down_ends_quietly(ros_context):
    """SIGTERM mid-turn: the sentence after the shutdown goes nowhere, with no error."""
    import rclpy
    from vision_dialogue.core.turn_taking import ReplyChunk
    from vision_dialogue.ros.manager.outputs import ManagerOutputs
    node = rclpy.create_node("outputs_probe", context=ros_context)
    try:
        out = ManagerOutputs(node, {"frame_id": "base_link"}, lambda: True)
        sent, publish = [], out.reply_pub.publish
        out.reply_pub.publish = lambda msg: (sent.append(msg.text), publish(msg))
        chunk = ReplyChunk(1, 0, "Hello there.", "Hi!", False, False)
        out.reply(chunk)                                  # live: it goes out
        assert sent == ["Hello there."]
        ros_context.shutdown()
        out.reply(chunk)                                  # shut down: nothing, no RCLError
        assert sent == ["Hello there."]
    finally:
        node.destroy_node()


def test_the_camera_is_subscribed_to_once_a_local_model_has_read_the_persona(
        ros_context, monkeypatch):
    """A demo camera waits for the manager's subscription: by then the persona is read.

    Its first frame came before the 1.5B had read the persona, and the opening remark read it
    first (about 2 s), which shifted every turn of the demo after it.
    """
    import vision_dialogue.manager_node as mn
    from fake_chat_backend import FakeChatBackend
    order = []

    class Reading(FakeChatBackend):
        def warm(self, messages, tools=None, side=False):
            time.sleep(0.5)                      # a model reading the persona
            order.append("persona read")
            return 1

    made = mn.ImageTopicInput
    monkeypatch.setattr(mn, "ImageTopicInput",
                        lambda *a, **k: (order.append("camera subscribed"), made(*a, **k))[1])
    node = ManagerNode(context=ros_context, backend=Reading(supports_images=True),
                       parameter_overrides=[Parameter("transcript_dir", value="")])
    try:
        assert order == ["persona read", "camera subscribed"]
    finally:
        node.close()
        node.destroy_node()


#: the camera frame's way through the manager, as docs/ARCHITECTURE.md draws it: (what the
#: docs name, the code that runs); the first two on the executor, the rest on the intake's
#: worker, the listeners after add_frame in any order
FRAME_WALK = [("ros/image_input.py", "ImageTopicInput._on_image"),
              ("common/frame_intake.py", "FrameIntake.offer"),
              ("ros/image_msgs.py", "from_image_msg"),
              ("core/frame_input.FrameInput", "FrameInput.take"),
              ("Conversation.add_frame", "Conversation.add_frame")]
FRAME_LISTENERS = [("core/turn_taking.TurnTaker", "TurnTaker.frame_added"),
                   ("ros/manager/outputs.py", "ManagerOutputs.entry"),
                   ("core/transcript.py", "TranscriptWriter.__call__")]


def test_a_frame_travels_as_the_architecture_draws_it(ros_context, fake, tmp_path,
                                                      monkeypatch):
    """One raw frame, each step on the thread the docs say, in their order; nothing else."""
    import functools
    import importlib
    from vision_dialogue.core.conversation import Conversation
    from vision_dialogue.core.frame_input import FrameInput
    from vision_dialogue.common.frame_intake import FrameIntake
    from vision_dialogue.core.transcript import TranscriptWriter
    from vision_dialogue.core.turn_taking import TurnTaker
    from vision_dialogue.ros.image_input import ImageTopicInput
    from vision_dialogue.ros.manager.outputs import ManagerOutputs
    image_input = importlib.import_module("vision_dialogue.ros.image_input")
    steps = []

    def walked(name, fn):
        @functools.wraps(fn)            # rclpy reads a callback's signature (MessageInfo)
        def step(*args, **kwargs):
            steps.append((name, threading.current_thread().name))
            return fn(*args, **kwargs)
        return step
    for owner, name in ((ImageTopicInput, "_on_image"), (FrameIntake, "offer"),
                        (FrameInput, "take"), (Conversation, "add_frame"),
                        (TurnTaker, "frame_added"), (ManagerOutputs, "entry"),
                        (TranscriptWriter, "__call__")):
        monkeypatch.setattr(owner, name, walked(f"{owner.__name__}.{name}",
                                                getattr(owner, name)))
    monkeypatch.setattr(image_input, "from_image_msg",
                        walked("from_image_msg", image_input.from_image_msg))
    rig = Rig(ros_context, fake, tmp_path)
    try:
        assert rig.send_until(lambda: rig.img_pub.publish(to_image_msg(photo())),
                              lambda: {"TranscriptWriter.__call__", "TurnTaker.frame_added",
                                       "ManagerOutputs.entry"} <= {s for s, _ in steps})
    finally:
        rig.close()
    first = steps.index(("Conversation.add_frame", "vd-frames"))      # the frame taken
    on_executor = [s for s, t in steps[:first + 1] if t != "vd-frames"]
    on_worker = [s for s, t in steps[:first + 1] if t == "vd-frames"]
    assert on_executor[-2:] + on_worker == [code for _, code in FRAME_WALK], steps
    assert set(on_executor) == {code for _, code in FRAME_WALK[:2]}, steps   # only queued
    heard = {s: t for s, t in steps[first + 1:]}
    assert {code for _, code in FRAME_LISTENERS} <= set(heard) and \
        {heard[code] for _, code in FRAME_LISTENERS} == {"vd-frames"}, steps
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    section = text[text.index("## How a camera frame travels"):
                   text.index("## How an event between frames travels")]
    places = [section.index(f"`{doc}") for doc, _ in FRAME_WALK + FRAME_LISTENERS]
    assert places[:len(FRAME_WALK)] == sorted(places[:len(FRAME_WALK)]), places
    assert min(places[len(FRAME_WALK):]) > max(places[:len(FRAME_WALK)]), places
