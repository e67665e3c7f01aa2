"""SpeechNode in-process with rclpy.

A peer node in the same context publishes replies and records utterances and speech states. Robots
are fakes on 127.0.0.1.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time

import pytest
import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from fake_furhat import FakeFurhat
from fake_furhat_realtime import FakeFurhatRealtime
from conftest import DOMAIN_ID, REPO
from vision_dialogue_interfaces.msg import Reply, SpeechState, Utterance
from vision_dialogue.ros.params import ParameterError
from vision_dialogue.speech_node import SpeechNode

pytestmark = pytest.mark.timeout(60)

IDLE, LISTENING, THINKING, SPEAKING = (SpeechState.IDLE, SpeechState.LISTENING,
                                       SpeechState.THINKING, SpeechState.SPEAKING)


class Peer:
    """Stands in for the manager: publishes replies, records utterances and states."""

    def __init__(self, ctx, namespace: str | None = None):
        self.node = rclpy.create_node("peer", context=ctx, namespace=namespace)
        self.utterances: list[Utterance] = []
        self.states: list[int] = []
        self.sub = self.node.create_subscription(Utterance, "dialogue/utterance",
                                                 self.utterances.append, 10)
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(SpeechState, "dialogue/speech_state",
                                      lambda m: self.states.append(m.state), qos)
        self.pub = self.node.create_publisher(Reply, "dialogue/reply", 10)

    def reply(self, turn: int, text: str, final: bool = False, index: int = 0,
              fallback: bool = False) -> None:
        m = Reply()
        m.turn_id, m.chunk_index, m.text, m.final, m.fallback = turn, index, text, final, fallback
        self.pub.publish(m)

    def texts(self) -> list[str]:
        return [u.text for u in self.utterances]


@pytest.fixture
def rig(ros_context, spin):
    """make(params, **kw) -> (node, peer, executor); everything is torn down afterwards."""
    made = []

    def make(params: dict, **kw):
        # started by the test once both sides of both topics have matched: a publisher sees a
        # subscriber before that subscriber sees it, and what it sends meanwhile is lost (the
        # script's first line was, in a fresh-clone run)
        overrides = [Parameter(k, value=v) for k, v in {"managed": True, **params}.items()]
        node = SpeechNode(context=ros_context, parameter_overrides=overrides, **kw)
        peer = Peer(ros_context)
        ex = SingleThreadedExecutor(context=ros_context)
        ex.add_node(node)
        ex.add_node(peer.node)
        made.append((node, peer, ex))
        replies = [sub for sub in node.subscriptions if sub.topic_name.endswith("dialogue/reply")]
        assert spin(ex, lambda: peer.pub.get_subscription_count() >= 1
                    and replies[0].get_publisher_count() >= 1
                    and node.pub_utterance.get_subscription_count() >= 1
                    and peer.sub.get_publisher_count() >= 1, timeout=10)
        if not params.get("managed"):
            node.start_lifecycle(False)       # configure and activate, as a node does at start
        return node, peer, ex

    yield make
    for node, peer, ex in made:
        node.close()
        ex.shutdown()
        node.destroy_node()
        peer.node.destroy_node()


def contains_in_order(seq, sub) -> bool:
    it = iter(seq)
    return all(any(x == y for y in it) for x in sub)


def terminal(rig, **params):
    r, w = os.pipe()
    stdin = os.fdopen(r, "r")
    out = io.StringIO()
    node, peer, ex = rig({"backend": "terminal", "frame_id": "mic", **params},
                         input_stream=stdin, output_stream=out)
    return node, peer, ex, w, out


# ------------------------------------------------------------------ parameters
@pytest.mark.parametrize("params,name", [
    ({"backend": "telepathy"}, "backend"),
    ({"backend": "script", "script_file": "/no/such/script.yaml"}, "script_file"),
    ({"reply_timeout": 0.0}, "reply_timeout"),
    ({"gaze_away_location": [1.0, 2.0]}, "gaze_away_location"),
    ({"backend": "furhat", "backoff_initial": 5.0, "backoff_max": 1.0}, "backoff_initial"),
    ({"furhat_port": 70000}, "furhat_port"),
    ({"backend": "terminal", "script_file": "/s.yaml"}, "script_file"),
    ({"gaze_contact": [5.0, 2.0]}, "gaze_contact"),
    ({"gesture_style": "wild"}, "gesture_style"),
    ({"max_head_angle": 90.0}, "max_head_angle"),
])
def test_invalid_parameters_fail_at_startup(ros_context, params, name):
    overrides = [Parameter(k, value=v) for k, v in params.items()]
    with pytest.raises(ParameterError) as e:
        SpeechNode(context=ros_context, parameter_overrides=overrides)
    assert str(e.value).startswith(name)
    if "backend" in params and params["backend"] == "script":
        assert "/no/such/script.yaml" in str(e.value) and "not found" in str(e.value)


def test_a_script_file_given_is_played_without_naming_the_backend(ros_context, tmp_path):
    f = tmp_path / "lines.yaml"
    f.write_text("- {say: hello}\n")
    node = SpeechNode(context=ros_context, parameter_overrides=[
        Parameter("script_file", value=str(f)), Parameter("wait_for_subscriber", value=0.0)])
    try:
        assert node.backend_kind == "script" and type(node.backend).__name__ == "ScriptBackend"
    finally:
        node.close()
        node.destroy_node()


def test_invalid_script_content_names_file_and_item(ros_context, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("- {say: hello}\n- {say: again, delay: soon}\n")
    with pytest.raises(ParameterError) as e:
        SpeechNode(context=ros_context, parameter_overrides=[
            Parameter("backend", value="script"), Parameter("script_file", value=str(f))])
    msg = str(e.value)
    assert msg.startswith("script_file") and str(f) in msg and "item 2: 'delay'" in msg


# ------------------------------------------------------------------ terminal + replies
def test_the_face_follows_the_conversation_on_its_topics(rig, spin):
    """Default names: hri_msgs/Expression, the gesture JSON, the gaze target and the records."""
    import json
    from geometry_msgs.msg import PointStamped
    from std_msgs.msg import String
    from vision_dialogue.ros import perception_msgs as pm
    from vision_dialogue.ros.qos import LATCHED_QOS
    node, peer, ex, w, out = terminal(rig, gaze_contact=[0.1, 0.15], gaze_away=[0.1, 0.15],
                                      face_frame="head_link")
    seen = {"expression": [], "gesture": [], "gaze": [], "record": []}
    n = peer.node
    n.create_subscription(pm.Expression, "robot_face/expression", seen["expression"].append,
                          LATCHED_QOS)
    n.create_subscription(String, "robot_face/gesture",
                          lambda m: seen["gesture"].append(json.loads(m.data)), 10)
    n.create_subscription(PointStamped, "robot_face/gaze_target", seen["gaze"].append, 10)
    n.create_subscription(String, "dialogue/face",
                          lambda m: seen["record"].append(json.loads(m.data)), 10)
    assert spin(ex, lambda: node.face.publish.records_pub.get_subscription_count() >= 1)
    os.write(w, "My dog died yesterday.\n".encode())
    assert spin(ex, lambda: seen["record"], timeout=5)
    assert [m.expression for m in seen["expression"]][-1:] == ["sad"]
    assert seen["expression"][-1].valence < 0 and seen["expression"][-1].header.frame_id == \
        "head_link"
    assert seen["record"][0]["moment"] == "heard" and seen["record"][0]["line"] == \
        "My dog died yesterday." and seen["record"][0]["gesture"] == "vd_sad"
    assert seen["gesture"][0]["name"] == "vd_sad" and seen["gesture"][0]["frames"]
    peer.reply(1, "I'm so sorry to hear that.", final=True)
    assert spin(ex, lambda: len(seen["record"]) >= 2, timeout=5)
    assert seen["record"][1]["moment"] == "sentence" and seen["record"][1]["turn_id"] == 1
    assert spin(ex, lambda: node.state == LISTENING, timeout=5)
    os.close(w)


def test_terminal_utterance_message_and_state_transitions(rig, spin):
    node, peer, ex, w, out = terminal(rig, language="en-GB", speaker="tester")
    os.write(w, "what do you see?\n".encode())
    assert spin(ex, lambda: peer.utterances, timeout=5)
    u = peer.utterances[0]
    assert (u.text, u.source, u.language, u.speaker, u.header.frame_id) == (
        "what do you see?", "terminal", "en-GB", "tester", "mic")
    assert abs(u.header.stamp.sec - time.time()) < 5 and u.confidence < 0
    assert spin(ex, lambda: THINKING in peer.states, timeout=5)
    peer.reply(1, "I see a cat.", index=0)
    peer.reply(1, "It is orange.", index=1)
    peer.reply(1, "I see a cat. It is orange.", final=True, index=2)
    assert spin(ex, lambda: peer.states[-1:] == [LISTENING] and SPEAKING in peer.states,
                timeout=5)
    assert contains_in_order(peer.states, [IDLE, LISTENING, THINKING, SPEAKING, LISTENING])
    assert node.state == LISTENING
    result = node.set_parameters([Parameter("backend", value="script")])[0]
    assert not result.successful and "read-only" in result.reason
    os.close(w)


def test_streamed_chunks_spoken_as_they_arrive_and_not_repeated(rig, spin):
    node, peer, ex, w, out = terminal(rig)
    os.write(w, b"tell me about the room\n")
    assert spin(ex, lambda: peer.utterances, timeout=5)
    peer.reply(4, "There is a window.", index=0)
    assert spin(ex, lambda: "There is a window." in out.getvalue(), timeout=5)
    assert "a plant" not in out.getvalue()             # spoken before the next chunk exists
    peer.reply(4, "And a plant.", index=1)
    peer.reply(4, "There is a window. And a plant.", final=True, index=2)
    assert spin(ex, lambda: node.state == LISTENING and out.getvalue().endswith("\n"),
                timeout=5)
    assert out.getvalue() == "robot: There is a window. And a plant.\n"
    os.close(w)


def test_final_without_chunks_is_spoken_sentence_by_sentence(rig, spin):
    node, peer, ex, w, out = terminal(rig)
    spoken = []
    orig = node.backend.speak
    node.backend.speak = lambda text: (spoken.append(text), orig(text))[1]
    os.write(w, b"hi\n")
    assert spin(ex, lambda: peer.utterances, timeout=5)
    peer.reply(1, "Hello there! Nice hat.", final=True, index=0, fallback=True)
    assert spin(ex, lambda: node.state == LISTENING and spoken, timeout=5)
    assert spoken == ["Hello there!", "Nice hat."]
    os.close(w)


def test_barge_in_stops_speech_drops_rest_of_turn_and_publishes(rig, spin):
    node, peer, ex, w, out = terminal(rig)
    stops = []
    orig = node.backend.stop_speaking
    node.backend.stop_speaking = lambda: (stops.append(time.monotonic()), orig())[1]
    os.write(w, b"describe the picture\n")
    assert spin(ex, lambda: peer.utterances, timeout=5)
    peer.reply(3, "It shows a long beach.", index=0)
    assert spin(ex, lambda: node.state == SPEAKING and "long beach" in out.getvalue(),
                timeout=5)
    os.write(w, b"wait, stop\n")                         # the user barges in
    assert spin(ex, lambda: len(peer.utterances) == 2, timeout=5)
    assert peer.texts() == ["describe the picture", "wait, stop"]
    assert len(stops) == 1 and "[interrupted]" in out.getvalue()
    assert spin(ex, lambda: node.state == THINKING, timeout=2)
    peer.reply(3, "The sand is white.", index=1)          # rest of the interrupted turn
    peer.reply(3, "It shows a long beach. The sand is white.", final=True, index=2)
    peer.reply(4, "Sure, I stopped.", final=True, index=0)
    assert spin(ex, lambda: "Sure, I stopped." in out.getvalue() and node.state == LISTENING,
                timeout=5)
    assert "sand" not in out.getvalue()
    os.close(w)


def test_no_reply_times_out_back_to_listening(rig, spin):
    node, peer, ex, w, out = terminal(rig, reply_timeout=0.3)
    t0 = time.monotonic()
    os.write(w, b"anyone there?\n")
    assert spin(ex, lambda: THINKING in peer.states, timeout=5)
    assert spin(ex, lambda: node.state == LISTENING, timeout=5)
    assert time.monotonic() - t0 >= 0.3
    assert "(no reply)" in out.getvalue()
    os.close(w)


def test_terminal_eof_with_exit_when_done_calls_on_done(rig, spin):
    done = threading.Event()
    r, w = os.pipe()
    node, peer, ex = rig({"backend": "terminal", "exit_when_done": True},
                         input_stream=os.fdopen(r, "r"), output_stream=io.StringIO(),
                         on_done=done.set)
    os.write(w, b"bye\n")
    os.close(w)
    assert spin(ex, lambda: peer.utterances, timeout=5)
    assert not done.wait(0.2)                 # waits for the reply to the last utterance
    peer.reply(1, "Goodbye!", final=True)
    assert spin(ex, done.is_set, timeout=5)
    assert spin(ex, lambda: peer.states[-1:] == [IDLE], timeout=5), peer.states


# ------------------------------------------------------------------ script backend
def test_script_backend_end_to_end_with_shutdown(rig, spin, tmp_path, ros_context):
    f = tmp_path / "talk.yaml"
    f.write_text("language: nl-NL\nitems:\n  - say: Hallo robot\n"
                 "  - {say: 'Wat zie je?', wait_for_reply: true}\n")
    out = io.StringIO()
    node, peer, ex = rig({"backend": "script", "script_file": str(f), "exit_when_done": True,
                          "reply_timeout": 5.0}, output_stream=out)
    assert spin(ex, lambda: peer.utterances, timeout=5)
    spin(ex, lambda: False, timeout=0.3)
    assert peer.texts() == ["Hallo robot"]          # the second waits for the reply
    peer.reply(1, "Hallo!", index=0)
    peer.reply(1, "Hallo!", final=True, index=1)
    assert spin(ex, lambda: len(peer.utterances) == 2, timeout=5)
    assert peer.utterances[1].language == "nl-NL" and peer.utterances[1].source == "script"
    peer.reply(2, "Ik zie een kat.", final=True)
    try:                                                          # exit_when_done:
        spin(ex, lambda: not ros_context.ok(), timeout=5)         # the context shuts down
    except ExternalShutdownException:
        pass
    assert not ros_context.ok()
    assert "robot: Hallo!\n" in out.getvalue() and "robot: Ik zie een kat." in out.getvalue()
    assert out.getvalue().count("Hallo!") == 1


def test_a_script_with_a_clock_topic_starts_at_the_first_frame(rig, spin, tmp_path):
    """script_clock_topic: the script's clock starts with the video's first frame."""
    from sensor_msgs.msg import Image
    f = tmp_path / "talk.yaml"
    f.write_text("items:\n  - {say: First line., at: 0.0}\n")
    node, peer, ex = rig({"backend": "script", "script_file": str(f),
                          "script_clock_topic": "camera/image_raw"})
    camera = peer.node.create_publisher(Image, "camera/image_raw", 5)
    # the speech node subscribes once its listener (the peer) is there: the camera's cue
    assert spin(ex, lambda: camera.get_subscription_count() >= 1, timeout=10)
    assert peer.utterances == [] and not node.started.is_set()    # no frame: no script yet
    camera.publish(Image(height=1, width=1, encoding="mono8", step=1, data=[0]))
    assert spin(ex, lambda: peer.texts() == ["First line."], timeout=10)
    assert spin(ex, lambda: camera.get_subscription_count() == 0, timeout=10)  # let go


# ------------------------------------------------------------------ Furhat Remote API
# the exact call sequences below leave the face's own calls out (test_face.py has them)
FURHAT = {"backend": "furhat", "furhat_host": "127.0.0.1", "backoff_initial": 0.05,
          "backoff_max": 0.2, "request_timeout": 2.0, "voice": "Matthew",
          "gaze_away_gesture": "GazeAway", "gaze_away_location": [0.5, 0.4, 1.0],
          "idle_movements": False, "expressions": False, "gaze_aversion": False}


@pytest.fixture
def fake_remote():
    srv = FakeFurhat(listen_wait=0.3, say_seconds=0.1).start()
    yield srv
    srv.stop()


@pytest.fixture
def fake_rt():
    srv = FakeFurhatRealtime(key="k", speak_seconds=5.0).start()
    yield srv
    srv.stop()


def test_furhat_turn_taking_exact_sequence(fake_remote, rig, spin):
    srv = fake_remote
    srv.listen_results.put("what am I holding")
    node, peer, ex = rig({**FURHAT, "furhat_port": srv.port, "barge_in": False})
    assert spin(ex, lambda: peer.utterances, timeout=5)
    assert peer.utterances[0].text == "what am I holding" and \
        peer.utterances[0].source == "furhat"
    assert spin(ex, lambda: "attend location=0.5,0.4,1" in srv.sequence(), timeout=5)
    assert node.state == THINKING
    peer.reply(1, "A red cup.", index=0)
    peer.reply(1, "A red cup.", final=True, index=1)
    assert spin(ex, lambda: srv.sequence().count("listen") >= 2, timeout=5)
    seq = srv.sequence()
    assert seq[:11] == ["users", "voice", "attend user=CLOSEST", "listen", "users",
                        "gesture GazeAway", "attend location=0.5,0.4,1",
                        "attend user=CLOSEST", "say A red cup.", "attend user=CLOSEST",
                        "listen"]
    say = [q for _, p, q in srv.calls if p == "/furhat/say"][0]
    assert say["blocking"].lower() == "true"
    assert spin(ex, lambda: contains_in_order(peer.states,
                                              [LISTENING, THINKING, SPEAKING, LISTENING]),
                timeout=5), peer.states


def test_furhat_gaze_target_moves_away_and_back_while_the_robot_speaks(fake_remote, rig, spin):
    from geometry_msgs.msg import PointStamped
    srv = fake_remote
    srv.say_seconds = 1.5
    node, peer, ex = rig({**FURHAT, "furhat_port": srv.port, "gaze_aversion": True,
                          "gaze_contact": [0.2, 0.3], "gaze_away": [0.2, 0.3]})
    gaze = []
    peer.node.create_subscription(PointStamped, "robot_face/gaze_target", gaze.append, 10)
    peer.reply(1, "Let me tell you about the red cup on the table.", final=True)
    assert spin(ex, lambda: len(gaze) >= 3 and node.state == LISTENING
                and (gaze[-1].point.x, gaze[-1].point.y, gaze[-1].point.z) == (1.0, 0.0, 0.0),
                timeout=10)
    away = [g.point for g in gaze if g.point.x < 1.0]
    assert away and all(0.5 < p.x < 1.0 for p in away)     # within +-20 pan, +-15 tilt

    def bodies():
        return [q["body"] for _, p, q in list(srv.calls) if p == "/furhat/gesture"
                and "body" in q]

    contact = {"GAZE_PAN": 0.0, "GAZE_TILT": 0.0}
    assert spin(ex, lambda: bodies()[-1:] and bodies()[-1]["frames"][0]["params"] == contact,
                timeout=3)
    assert len(bodies()) >= 3 and all(b["name"] == "vd_gaze" for b in bodies())


def test_furhat_answers_looking_at_the_user_who_spoke(fake_remote, rig, spin):
    srv = fake_remote
    srv.users = [{"id": "3", "location": {"x": 0.9, "y": 0.0, "z": 2.0}},
                 {"id": "7", "location": {"x": -0.2, "y": 0.0, "z": 1.0}}]
    srv.listen_results.put("it is me speaking")
    node, peer, ex = rig({**FURHAT, "furhat_port": srv.port, "barge_in": False})
    assert spin(ex, lambda: peer.utterances, timeout=5)
    assert peer.utterances[0].speaker == "7"              # the closest user when it ended
    assert spin(ex, lambda: "attend location=0.5,0.4,1" in srv.sequence(), timeout=5)
    srv.users = [{"id": "3", "location": {"x": 0.1, "y": 0.0, "z": 0.6}},   # 3 steps closer
                 {"id": "7", "location": {"x": -0.2, "y": 0.0, "z": 1.0}}]
    peer.reply(1, "Hello you.", final=True, index=0)
    assert spin(ex, lambda: "say Hello you." in srv.sequence(), timeout=5)
    seq = srv.sequence()
    assert seq[seq.index("say Hello you.") - 1] == "attend userid=7", seq


def test_furhat_barge_in_calls_say_stop(fake_remote, rig, spin):
    srv = fake_remote
    srv.say_seconds = 5.0
    srv.listen_results.put("tell me a story")
    node, peer, ex = rig({**FURHAT, "furhat_port": srv.port, "barge_in": True})
    assert spin(ex, lambda: peer.utterances, timeout=5)
    peer.reply(1, "Once upon a time there was a very long story.", index=0)
    assert spin(ex, lambda: any(s.startswith("say Once") for s in srv.sequence()),
                timeout=5)
    srv.listen_results.put("stop, that is enough")
    assert spin(ex, lambda: len(peer.utterances) == 2, timeout=5)
    assert peer.texts()[1] == "stop, that is enough"
    assert spin(ex, lambda: "say_stop" in srv.sequence(), timeout=5)
    seq = srv.sequence()
    assert seq.index("say_stop") > seq.index("say Once upon a time there was a very long "
                                             "story.")
    assert node.state == THINKING


@pytest.mark.fault("robot", "Furhat down: speech_node keeps running")
def test_furhat_robot_down_node_keeps_running_and_recovers(rig, spin):
    srv = FakeFurhat(listen_wait=0.3).start()
    port = srv.port
    node, peer, ex = rig({**FURHAT, "furhat_port": port})
    assert spin(ex, lambda: peer.states[-1:] == [LISTENING], timeout=5)
    srv.stop()                                              # the robot goes away
    assert spin(ex, lambda: node.backend.outages >= 1, timeout=5)
    spin(ex, lambda: False, timeout=0.4)                   # several retries
    assert node.backend.outages == 1 and node.backend._thread.is_alive()
    assert spin(ex, lambda: peer.states[-1:] == [IDLE], timeout=2)   # nobody listens
    srv2 = FakeFurhat(port=port, listen_wait=0.3).start()
    try:
        srv2.listen_results.put("hello again")
        assert spin(ex, lambda: peer.utterances, timeout=5)
        assert peer.texts() == ["hello again"]
        assert spin(ex, lambda: contains_in_order(
            peer.states, [LISTENING, IDLE, LISTENING, THINKING]), timeout=5), peer.states
    finally:
        node.close()
        srv2.stop()


# ------------------------------------------------------------------ Furhat Realtime API
def test_furhat_realtime_node_turn_and_barge_in(fake_rt, rig, spin):
    srv = fake_rt
    srv.hear.put("hello furhat")
    node, peer, ex = rig({"backend": "furhat_realtime", "furhat_host": "127.0.0.1",
                          "furhat_port": srv.port, "furhat_key": "k",
                          "backoff_initial": 0.05, "barge_in": True})
    assert spin(ex, lambda: peer.utterances, timeout=5)
    assert peer.utterances[0].source == "furhat_realtime"
    peer.reply(1, "Hello! I can see you very well today.", index=0)
    assert spin(ex, lambda: "request.speak.text" in srv.types(), timeout=5)
    speak = [e for e in srv.received if e["type"] == "request.speak.text"][0]
    assert speak["text"] == "Hello! I can see you very well today."
    assert spin(ex, lambda: node.state == SPEAKING, timeout=5)
    listen = [e for e in srv.received if e["type"] == "request.listen.start"][-1]
    assert listen["stop_robot_start"] is False            # listening through speech
    srv.hear.put("what colour is my shirt")
    assert spin(ex, lambda: len(peer.utterances) == 2, timeout=5)
    assert spin(ex, lambda: "request.speak.stop" in srv.types(), timeout=5)
    # the node publishes the line, then turns to THINKING: the peer may have the line first
    assert spin(ex, lambda: node.state == THINKING, timeout=5), node.state


def test_furhat_realtime_takes_the_speaker_from_camera_users(fake_rt, rig, spin):
    """The Realtime API does not say whom the robot hears: the closest user on camera/users."""
    from vision_dialogue_interfaces.msg import DetectedUser, DetectedUsers
    srv = fake_rt
    node, peer, ex = rig({"backend": "furhat_realtime", "furhat_host": "127.0.0.1",
                          "furhat_port": srv.port, "furhat_key": "k",
                          "backoff_initial": 0.05, "barge_in": False})
    users_pub = peer.node.create_publisher(DetectedUsers, "camera/users", 10)
    assert spin(ex, lambda: users_pub.get_subscription_count() >= 1, timeout=5)

    def user(uid, x, z):
        u = DetectedUser(id=uid)
        u.position.x, u.position.z = x, z
        return u
    users_pub.publish(DetectedUsers(users=[user("4", 0.8, 2.0), user("9", 0.1, 0.9)]))
    assert spin(ex, lambda: node._tracked_user() == "9", timeout=5)
    srv.hear.put("it is me, nine")
    assert spin(ex, lambda: peer.utterances, timeout=5)
    assert peer.utterances[0].speaker == "9"
    assert spin(ex, lambda: "request.attend.location" in srv.types(), timeout=5)   # thinking
    peer.reply(1, "Hello nine.", final=True, index=0)
    assert spin(ex, lambda: "request.speak.text" in srv.types(), timeout=5)
    kinds = [(e["type"], e.get("user_id")) for e in srv.received]
    speak = kinds.index(("request.speak.text", None))
    assert kinds[speak - 1] == ("request.attend.user", "9")


def test_furhat_realtime_speaks_chunks_in_order_without_repeat(fake_rt, rig, spin):
    srv = fake_rt
    srv.speak_seconds = 0.05
    srv.hear.put("what is behind me")
    node, peer, ex = rig({"backend": "furhat_realtime", "furhat_host": "127.0.0.1",
                          "furhat_port": srv.port, "furhat_key": "k",
                          "backoff_initial": 0.05, "barge_in": False})
    assert spin(ex, lambda: peer.utterances, timeout=5)
    peer.reply(7, "A door.", index=0)
    peer.reply(7, "And a lamp.", index=1)
    peer.reply(7, "A door. And a lamp.", final=True, index=2)
    assert spin(ex, lambda: node.state == LISTENING
                and srv.types().count("request.listen.start") >= 2, timeout=5)
    said = [e["text"] for e in srv.received if e["type"] == "request.speak.text"]
    assert said == ["A door.", "And a lamp."]


def test_main_exit_codes_bad_script_and_demo_script(tmp_path):
    """The executable.

    Exit 2 with one line naming script_file; the demo script runs to the end with exit_when_done
    and exits 0.
    """
    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN_ID),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    base = [sys.executable, "-m", "vision_dialogue.speech_node", "--ros-args",
            "-p", "backend:=script"]
    bad = subprocess.run(base + ["-p", f"script_file:={tmp_path}/missing.yaml"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert f"invalid parameter: script_file: {tmp_path}/missing.yaml: file not found" in \
        bad.stderr
    script = tmp_path / "short.yaml"
    script.write_text("- say: Hello there\n- {say: Bye now, wait_for_reply: true}\n")
    ok = subprocess.run(base + ["-p", f"script_file:={script}", "-p", "exit_when_done:=true",
                                "-p", "reply_timeout:=0.2", "-p", "wait_for_subscriber:=0.0"],
                        env=env, capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.index("you: Hello there") < ok.stdout.index("you: Bye now")
    assert "exit_when_done: shutting down" in ok.stderr
