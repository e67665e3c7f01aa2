"""The standard perception interfaces between processes: vision_msgs and ROS4HRI (REP-155).

The other side is a third-party-like process (hri_peer.py: rclpy + vision_msgs + hri_msgs, no
vision_dialogue, no project DDS profile). The manager and the speech node run in this process.
Needs the interface packages (scripts/setup.sh builds them); skips saying so without them.
"""
from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from conftest import context_in, matched, reading, side_domain, spin_until
from manager_rig import photo, running_manager
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.image_msgs import to_image_msg
from vision_dialogue.ros.topics import hri_topic

pytestmark = pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed: "
                                "scripts/setup.sh builds them from third_party/interfaces")
PEER = Path(__file__).with_name("hri_peer.py")
V7_SPEECH = hri_topic("voices", "v7", "speech")      # what `hri_peer.py voice` says


class Peer:
    """hri_peer.py in its own process; `expect(pred)` waits for one of its JSON lines."""

    def __init__(self, *args, domain: int | None = None):
        env = dict(os.environ)
        env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)      # a stock process
        if domain is not None:
            env["ROS_DOMAIN_ID"] = str(domain)
        self.proc = subprocess.Popen([sys.executable, str(PEER), *args], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        assert self.expect(lambda e: e.get("event") == "ready", 60), self.seen

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except json.JSONDecodeError:
                self.lines.put({"event": "output", "text": line.rstrip()})

    def expect(self, pred, timeout=30.0, spin=None) -> dict | None:
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if spin is not None:
                spin()
            try:
                event = self.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            self.seen.append(event)
            if pred(event):
                return event
        return None

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _frame_and_question(rig, fake, question):
    n = len(rig.node.conversation.timeline.snapshot())
    rig.img_pub.publish(to_image_msg(photo(), frame_id="cam", stamp=rig.node.get_clock().now()
                                     .to_msg()))
    assert rig.wait(lambda: len(rig.node.conversation.timeline.snapshot()) > n, timeout=30)
    # a detector's note may reach the frame just after it (a loaded machine): ask once it has
    frames = [it.frame for it in rig.node.conversation.timeline.snapshot() if it.kind == "frame"]
    assert rig.wait(lambda: frames[-1].objects, timeout=30), "no detection reached the frame"
    rig.say(question)
    assert rig.wait(lambda: rig.finals(), timeout=30)
    return json.dumps(fake.requests[-1]["messages"])


@pytest.mark.parametrize("how", ["ids", "names"])
def test_a_third_party_detectors_objects_reach_the_llm(ros_context, tmp_path, how):
    """By numeric id + latched LabelInfo (Isaac ROS, depthai) and by name (YOLO-like).

    On a remapped topic for the id case; the weak detection stays out; the arrival is an event.
    """
    topic = "/isaac/detections_output" if how == "ids" else "detections"
    args = ["--ros-args", "-r", f"detections:={topic}"] if how == "ids" else []
    peer = Peer("detector", f"--{how}", "--topic", topic)
    try:
        with running_manager(ros_context, tmp_path, cli_args=args) as (rig, fake):
            assert rig.wait(lambda: rig.node.detections.received >= 2, timeout=60)
            if how == "ids":
                assert rig.wait(lambda: rig.node.detections.labels.known > 0, timeout=30)
            # named detections flow (sets that came before the names have none): the arrival
            # event says so; a frame published before it could find only nameless sets near it
            assert rig.wait(lambda: "a cup came into view" in [
                it.text for it in rig.node.conversation.timeline.snapshot()
                if it.kind == "event"], timeout=60)
            prompt = _frame_and_question(rig, fake, "What is on the table?")
            assert "a cup in the middle" in prompt, prompt[-1500:]
            assert "traffic light" not in prompt and "class 41" not in prompt
            events = [it.text for it in rig.node.conversation.timeline.snapshot()
                      if it.kind == "event"]
            assert "a cup came into view" in events
    finally:
        peer.close()


def test_two_detectors_on_the_default_topics_each_name_their_own_ids(ros_context, tmp_path):
    """Two detectors on `detections` and `label_info` whose numbers clash: each its own names.

    A robot's detector (class 24: zebra) beside another (41: cup, 24: class24).
    """
    peers = [Peer("detector", "--ids", "--node", "coco_detector"),
             Peer("detector", "--ids", "--zebra", "--node", "robot_detector")]
    try:
        with running_manager(ros_context, tmp_path) as (rig, fake):
            labels = rig.node.detections.labels
            assert rig.wait(lambda: labels.known >= 72, timeout=60), \
                {k: len(v) for k, v in labels._from_topic.items()}
            assert labels.name("24", "/robot_detector") == "zebra"
            assert labels.name("24", "/coco_detector") == "class24"
            assert labels.name("41", "/coco_detector") == "cup"
            assert labels.name("41", "/robot_detector") is None

            def event_lines() -> list[str]:
                return [it.text for it in rig.node.conversation.timeline.snapshot()
                        if it.kind == "event"]
            # the event reaches the timeline after its detection set is counted (a run under
            # load found none right after four more sets): wait for the event itself
            arrivals = {"a cup came into view", "a zebra came into view"}
            assert rig.wait(lambda: arrivals & set(event_lines()), timeout=60), event_lines()
            assert not any("class24" in e or "mine" in e for e in event_lines()), event_lines()
            # a frame gets both detectors' objects, and keeps them as each sends newer sets
            img = to_image_msg(photo())
            img.header.stamp = rig.io.get_clock().now().to_msg()
            rig.img_pub.publish(img)

            def note():
                frames = [it.frame for it in rig.node.conversation.timeline.snapshot()
                          if it.kind == "frame"]
                return frames[-1].objects if frames else ""
            assert rig.wait(lambda: "a cup" in note() and "a zebra" in note(), timeout=30), note()
            notes, received = set(), rig.node.detections.received
            assert rig.wait(lambda: notes.add(note()) or
                            rig.node.detections.received >= received + 10, timeout=30)
            assert all("a cup" in n and "a zebra" in n for n in notes), notes
    finally:
        for peer in peers:
            peer.close()


def test_ros4hri_persons_speech_engagement_and_gestures_reach_the_conversation(ros_context,
                                                                               tmp_path):
    """A ROS4HRI stack in another process: the person, their turn, greeting and wave.

    asr_vosk-like voice v7 (incremental parts, then the final); hri_person_manager-like person
    p1 with that voice, face f3 on the left of the image and a name; the person becomes
    ENGAGING; body b2 waves. One turn, from Zebulon; Zebulon in the people note and arriving;
    the greeting; the wave as a visual event.
    """
    with running_manager(ros_context, tmp_path, greet_first=True) as (rig, fake):
        peer = Peer("voice", "--name", "Zebulon", "--say", "Is there a cup on the table?")
        try:
            # the line once the manager knows whose voice v7 is and where his face is (a line
            # said before the face's place came put Zebulon "in front of you"), and its
            # subscriptions to v7's speech see the peer's publisher
            assert rig.wait(lambda: rig.node.voices.speaker("v7") == "Zebulon" and
                            rig.node.conversation.prompt.people_now() == "Zebulon to your left"
                            and reading(rig.node, V7_SPEECH), timeout=60), peer.seen
            peer.proc.send_signal(signal.SIGUSR2)
            assert peer.expect(lambda e: e.get("event") == "said", 60,
                               spin=lambda: rig.wait(lambda: False, timeout=0.05)), events(peer)
            assert rig.wait(lambda: len(rig.finals()) >= 2, timeout=30)     # greeting + turn
        finally:
            peer.close()
        timeline = rig.node.conversation.timeline.snapshot()
        users = [it for it in timeline if it.kind == "line" and it.role == "user"]
        assert [(u.text, u.speaker) for u in users] == [
            ("Is there a cup on the table?", "Zebulon")]
        noticed = [it.text for it in timeline if it.kind == "event"]
        assert "Zebulon came into view" in noticed and "someone waved" in noticed, noticed
        assert rig.node.conversation.prompt.people_now() == "Zebulon to your left"
        assert "Zebulon to your left" in json.dumps(fake.requests[-1]["messages"])


HRI_SPEECH_DOMAIN = side_domain(3)


def events(peer) -> str:
    """Every event a peer printed, one a line (an assertion's message is cut otherwise)."""
    return "\n".join(map(str, peer.seen))


@pytest.fixture
def own_domain_context():
    """A context in HRI_SPEECH_DOMAIN, where no participant an earlier test left can match.

    Two suite runs lost the speech test's line while a reader that no node of the test had
    (a participant an earlier test of the worker left) was matched to its writer.
    """
    with context_in(HRI_SPEECH_DOMAIN) as ctx:
        yield ctx


def test_the_speech_node_speaks_ros4hri_robot_speaking_and_voices(own_domain_context, tmp_path):
    """/robot_speaking is true while the robot talks and false after; voices go out.

    What our recogniser hears is /humans/voices/<id>/speech, seen from a third-party process,
    in a ROS domain of their own (`own_domain_context`).
    """
    from vision_dialogue_interfaces.msg import Reply
    from vision_dialogue.speech_node import SpeechNode
    script = tmp_path / "s.yaml"
    script.write_text("items:\n  - say: Hello robot\n")
    listener = Peer("listen", domain=HRI_SPEECH_DOMAIN)
    node = SpeechNode(context=own_domain_context, parameter_overrides=[
        Parameter("backend", value="script"), Parameter("script_file", value=str(script)),
        Parameter("speaker", value="Ada"), Parameter("wait_for_subscriber", value=30.0)])
    manager = rclpy.create_node("fake_manager", context=own_domain_context)
    ex = SingleThreadedExecutor(context=own_domain_context)
    ex.add_node(node)
    ex.add_node(manager)

    def spin():
        ex.spin_once(timeout_sec=0.02)
    from vision_dialogue_interfaces.msg import Utterance
    try:
        # the voice is announced before anyone speaks; the script starts once a "manager"
        # listens, and that is after the third-party listener follows the voice
        assert listener.expect(lambda e: e.get("event") == "following"
                               and e["topic"] == "/humans/voices/Ada/speech", 60,
                               spin=spin), events(listener)
        speech_pub = node.hri._speech_pubs["Ada"]          # matched both ways, then speak
        assert spin_until(ex, lambda: matched(speech_pub, *ex.get_nodes())
                          and matched(node.hri.speaking_pub, *ex.get_nodes()), 30)
        # the listener's reader knows our writer too (a suite run lost the line: its reader
        # had not matched yet, and a volatile reader misses what came before)
        assert listener.expect(lambda e: e.get("event") == "matched"
                               and e["topic"] == "/humans/voices/Ada/speech"
                               and e["count"] > 0, 60, spin=spin), events(listener)
        # a reader of our own in this process too: when the listener misses the line, whether
        # it was sent at all (a busy run's listener never got it; docs/testing.md)
        heard_here = []
        manager.create_subscription(pm.LiveSpeech, "/humans/voices/Ada/speech",
                                    lambda m: heard_here.append(m.final), 10)
        assert spin_until(ex, lambda: matched(speech_pub, manager, count=2), 30)
        manager.create_subscription(Utterance, "dialogue/utterance", lambda m: None, 10)
        pub = manager.create_publisher(Reply, "dialogue/reply", 10)
        assert listener.expect(lambda e: e.get("event") == "speech"
                               and e["final"] == "Hello robot", 60, spin=spin), (
            f"sent and heard in this process: {heard_here}; our writer's readers: "
            f"{speech_pub.get_subscription_count()}\n{events(listener)}")
        reply = Reply(turn_id=1, text="Hello Ada.", final=True)
        pub.publish(reply)
        assert listener.expect(lambda e: e.get("event") == "robot_speaking" and e["value"],
                               30, spin=spin), events(listener)
        assert listener.expect(lambda e: e.get("event") == "robot_speaking"
                               and not e["value"], 30, spin=spin), events(listener)
        assert listener.expect(lambda e: e.get("event") == "voices" and e["ids"] == ["Ada"],
                               30, spin=spin) or any(e.get("event") == "voices" and e["ids"] ==
                                                     ["Ada"] for e in listener.seen)
        assert any(e.get("topic") == "/humans/voices/Ada/speech" for e in listener.seen)
    finally:
        listener.close()
        node.close()
        ex.shutdown()
        node.destroy_node()
        manager.destroy_node()


def test_a_set_that_comes_while_its_frame_is_placed_waits_for_it(ros_context, tmp_path):
    """The set for a frame the intake is still putting in the timeline is not lost.

    A bag replay once delivered a set between the frame's note lookup and the frame's place
    in the timeline: the set found no frame and the frame kept the older set's note. Here the
    set comes from another thread while the frame is held half placed.
    """
    from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

    def detections(label, stamp):
        msg = Detection2DArray()
        msg.header.stamp.sec, msg.header.frame_id = stamp, "camera"
        det = Detection2D()
        det.bbox.center.position.x, det.bbox.size_x = 100.0, 80.0
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = label, 0.8
        det.results.append(hyp)
        msg.detections = [det]
        return msg

    with running_manager(ros_context, tmp_path) as (rig, _fake):
        node = rig.node
        node.detections._on_detections(detections("cup", 100), None)      # the older set
        placing, go = threading.Event(), threading.Event()
        add_frame = node.conversation.add_frame

        def slow_add_frame(*args, **kwargs):
            placing.set()
            assert go.wait(30)
            return add_frame(*args, **kwargs)

        node.conversation.add_frame = slow_add_frame
        intake = threading.Thread(target=node.frames.take,
                                  args=(photo(), 101_000_000_000))
        intake.start()
        assert placing.wait(30)
        detector = threading.Thread(target=node.detections._on_detections,
                                    args=(detections("cat", 101), None))
        detector.start()
        detector.join(0.2)        # the set waits for the frame (without the wait: it is lost)
        go.set()
        intake.join(30)
        detector.join(30)
        frames = [it.frame for it in node.conversation.timeline.snapshot() if it.kind == "frame"]
        assert [f.objects for f in frames] == ["a cat on the left"]


def test_a_bag_with_detections_replays_into_the_same_prompt(ros_context, tmp_path):
    """A recorded session with a detector's output replays into the same prompt.

    Frames, detections (stamped as their frames) and utterances, recorded by bag_record with
    its default topics, replay through bag_play into a fresh manager: the same objects on the
    same frames, the same notes in the LLM's prompt.
    """
    import numpy as np
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

    from fake_openai import FakeOpenAI
    from vision_dialogue.cli.bag_play import BagPlayer
    from vision_dialogue.cli.bag_record import BagRecorder
    from vision_dialogue.manager_node import ManagerNode
    from vision_dialogue_interfaces.msg import Utterance

    ns, bag = "/bagged22", tmp_path / "session"
    scenes = [("cup", 100.0), ("cat", 540.0), ("", 0.0)]       # class, x centre; "" nothing

    def manager(fake):
        return ManagerNode(context=ros_context, namespace=ns, parameter_overrides=[
            Parameter("base_url", value=fake.base_url), Parameter("model", value="fake-vlm"),
            Parameter("transcript_dir", value=""), Parameter("prompt_state_period", value=0.0),
            Parameter("max_retries", value=0), Parameter("probe_images", value=False),
            Parameter("n", value=10), Parameter("m", value=3)])

    def objects_of(mgr):
        return [it.frame.objects for it in mgr.conversation.timeline.snapshot()
                if it.kind == "frame"]

    def prompts(fake):
        return [json.dumps(r["messages"]) for r in fake.requests]

    def answered(mgr):
        lines = [it for it in mgr.conversation.timeline.snapshot() if it.kind == "line"]
        said = " ".join(it.text for it in lines if it.role == "user")
        return bool(lines) and lines[-1].role == "robot" and all(
            f"({i})?" in said for i in range(len(scenes)))

    with FakeOpenAI(default_reply="Nice.") as fake:
        mgr = manager(fake)
        rec = BagRecorder(context=ros_context, namespace=ns, parameter_overrides=[
            Parameter("output", value=str(bag))])
        src = Node("session", context=ros_context, namespace=ns)
        pub_img = src.create_publisher(Image, "camera/image_raw", qos_profile_sensor_data)
        pub_det = src.create_publisher(Detection2DArray, "detections", 10)
        pub_utt = src.create_publisher(Utterance, "dialogue/utterance", 10)
        ex = MultiThreadedExecutor(num_threads=3, context=ros_context)
        for n in (mgr, rec, src):
            ex.add_node(n)
        try:
            assert spin_until(ex, lambda: all(matched(p, *ex.get_nodes(), count=2)
                                              for p in (pub_img, pub_det, pub_utt)), 10)
            for i, (label, x) in enumerate(scenes):
                stamp = mgr.get_clock().now().to_msg()
                img = np.full((480, 640, 3), 60 + 40 * i, np.uint8)
                pub_img.publish(to_image_msg(img, frame_id="camera", stamp=stamp))
                assert spin_until(ex, lambda: len(objects_of(mgr)) > i, 10)
                msg = Detection2DArray()
                msg.header.stamp, msg.header.frame_id = stamp, "camera"
                if label:
                    det = Detection2D()
                    det.bbox.center.position.x, det.bbox.size_x = x, 80.0
                    hyp = ObjectHypothesisWithPose()
                    hyp.hypothesis.class_id, hyp.hypothesis.score = label, 0.8
                    det.results.append(hyp)
                    edge = Detection2D()
                    edge.bbox.center.position.x, edge.bbox.size_x = 600.0, 80.0
                    msg.detections = [det, edge]
                pub_det.publish(msg)
                assert spin_until(ex, lambda: mgr.detections.received > i, 10)
                n = fake.request_count
                pub_utt.publish(Utterance(text=f"What do you see now ({i})?", source="test"))
                assert spin_until(ex, lambda: fake.request_count > n
                                  and mgr.conversation.wait_idle(0.01), 15)
            recorded = objects_of(mgr)
            recorded_prompts = prompts(fake)
        finally:
            rec.close()
            for n in (mgr, rec, src):
                ex.remove_node(n)
            mgr.close()
            for n in (mgr, rec, src):
                n.destroy_node()
            ex.shutdown()
    assert recorded == ["a cup on the left", "a cat on the right", ""], recorded
    assert "a cat on the right" in recorded_prompts[1]

    with FakeOpenAI(default_reply="Nice.") as fake:
        mgr = manager(fake)
        player = BagPlayer(context=ros_context, autostart=False, parameter_overrides=[
            Parameter("bag", value=str(bag)), Parameter("start_delay", value=0.0),
            Parameter("topics", value=[f"{ns}/camera/image_raw", f"{ns}/detections",
                                       f"{ns}/dialogue/utterance"])])
        ex = SingleThreadedExecutor(context=ros_context)
        for n in (mgr, player):
            ex.add_node(n)
        try:
            assert spin_until(ex, lambda: all(matched(p, *ex.get_nodes())
                                              for p in player._pubs.values()), 10)
            player.start()
            assert spin_until(ex, lambda: player.finished.done(), 30)
            # every line answered: the bag keeps the recorded times, so a line that comes
            # while a slower machine still answers the one before is answered with it (one
            # reply takes the lines that waited): the last prompt is the one compared
            assert spin_until(ex, lambda: answered(mgr) and mgr.conversation.wait_idle(0.01),
                              30), mgr.conversation.timeline.snapshot()
            assert objects_of(mgr) == recorded
            for note in ("a cup on the left", "a cat on the right"):
                assert prompts(fake)[-1].count(note) == recorded_prompts[-1].count(note) > 0
        finally:
            player.close()
            for n in (mgr, player):
                ex.remove_node(n)
            mgr.close()
            for n in (mgr, player):
                n.destroy_node()
            ex.shutdown()


def test_a_ros4hri_voice_talking_over_the_robot_stops_its_speech(ros_context, tmp_path):
    """Barge-in from a ROS4HRI recogniser in another process (is_speaking, incremental)."""
    from vision_dialogue_interfaces.msg import Reply, SpeechState, Utterance
    from vision_dialogue.speech_node import SpeechNode
    r, w = os.pipe()
    out = io.StringIO()
    node = SpeechNode(context=ros_context, input_stream=os.fdopen(r, "r"), output_stream=out,
                      parameter_overrides=[Parameter("backend", value="terminal")])
    manager = rclpy.create_node("fake_manager", context=ros_context)
    manager.create_subscription(Utterance, "dialogue/utterance", lambda m: None, 10)
    pub = manager.create_publisher(Reply, "dialogue/reply", 10)
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    ex.add_node(manager)
    stops = []
    orig = node.backend.stop_speaking
    node.backend.stop_speaking = lambda: (stops.append(1), orig())[1]
    peer = None
    try:
        assert spin_until(ex, lambda: matched(pub, *ex.get_nodes())
                          and matched(node.pub_utterance, *ex.get_nodes()), 30)
        os.write(w, b"tell me a long story\n")
        assert spin_until(ex, lambda: node.state == SpeechState.THINKING, 10)
        pub.publish(Reply(turn_id=1, text="Once upon a time there was a robot.",
                          chunk_index=0))
        assert spin_until(ex, lambda: node.state == SpeechState.SPEAKING, 10)
        assert not stops
        peer = Peer("talk")
        assert spin_until(ex, lambda: stops, 30), out.getvalue()
        assert "[interrupted]" in out.getvalue()
    finally:
        if peer is not None:
            peer.close()
        os.close(w)
        node.close()
        ex.shutdown()
        node.destroy_node()
        manager.destroy_node()


@pytest.mark.skipif(not __import__("vision_dialogue.perception.object_detector", fromlist=["x"])
                    .model_installed(), reason="object detector weights not installed "
                    "(scripts/setup.sh fetches them)")
def test_the_detector_node_publishes_objects_faces_hands_and_words(ros_context):
    """Our detector node's output, as any consumer of vision_msgs and REP-155 sees it."""
    import cv2
    import numpy as np
    import skimage.data
    from rclpy.executors import MultiThreadedExecutor
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from hri_msgs.msg import IdsList
    from vision_dialogue.detector_node import DetectorNode
    node = DetectorNode(context=ros_context,
                        parameter_overrides=[Parameter("max_rate", value=30.0)])
    io_node = rclpy.create_node("consumer", context=ros_context)
    pub = io_node.create_publisher(Image, "camera/image_raw", 10)
    got, faces = [], []
    io_node.create_subscription(Detection2DArray, "detections", got.append, 10)
    io_node.create_subscription(IdsList, "/humans/faces/tracked", faces.append, 10)
    ex = MultiThreadedExecutor(num_threads=2, context=ros_context)
    ex.add_node(node)
    ex.add_node(io_node)
    try:
        assert spin_until(ex, lambda: matched(pub, *ex.get_nodes()), 10)
        # names in class_id, no map by index that could rename a robot's own detector's ids
        assert io_node.get_publishers_info_by_topic("/label_info") == []
        person = cv2.cvtColor(cv2.resize(skimage.data.astronaut(), (640, 480)),
                              cv2.COLOR_RGB2BGR)
        sign = np.full((480, 640, 3), 235, np.uint8)
        cv2.putText(sign, "EXIT", (190, 270), cv2.FONT_HERSHEY_SIMPLEX, 3.0, (0, 0, 200), 8)
        answers = []
        for img in (person, person, sign):
            sent: set = set()

            def answer():            # the detections stamped as one of this image's copies
                return next((m for m in got if (m.header.stamp.sec, m.header.stamp.nanosec)
                             in sent), None)
            # sent again until answered, as a camera keeps sending: the node's subscription
            # follows the publisher's QoS and re-subscribes once it is discovered
            for _ in range(60):
                stamp = io_node.get_clock().now().to_msg()
                sent.add((stamp.sec, stamp.nanosec))
                pub.publish(to_image_msg(img, frame_id="cam", stamp=stamp))
                if spin_until(ex, lambda: answer() is not None, 1.0):
                    break
            assert answer() is not None
            answers.append(answer())
        first, second, third = [{(d.results[0].hypothesis.class_id, d.id) for d in m.detections}
                                for m in answers]
        face_ids = {i for c, i in first if c == "face"}
        assert face_ids and face_ids == {i for c, i in second if c == "face"}   # tracked
        assert "person" in {c for c, _ in first}
        assert any(list(f.ids) == list(face_ids) for f in faces)
        assert spin_until(ex, lambda: faces and list(faces[-1].ids) == [], 10)   # gone
        assert ("text", "EXIT") in third
        assert answers[0].header.frame_id == "cam"
    finally:
        ex.shutdown()
        node.destroy_node()
        io_node.destroy_node()


@pytest.mark.skipif(bool(pm.missing()), reason="vision_msgs/hri_msgs not built")
def test_an_input_built_while_its_node_spins_takes_a_message_at_once(ros_context):
    """A managed node builds its inputs in configure, while its executor spins.

    A latched message (a label map, a voices list) can then come before the input's
    constructor returns. Each message here is given as soon as its subscription exists; a CI
    run had the speech node die of it (the voices list came before `self.group` was set).
    """
    import inspect

    from vision_msgs.msg import VisionClass

    from vision_dialogue.common.objects import LabelMap, ObjectNotes
    from vision_dialogue.ros.standard_inputs import DetectionsInput, HriBargeIn
    node = rclpy.create_node("built_while_spinning", context=ros_context)
    at_once = {pm.LabelInfo: pm.LabelInfo(class_map=[VisionClass(class_id=24,
                                                                 class_name="zebra")]),
               pm.IdsList: pm.IdsList(ids=["v1"])}
    given = []
    create = node.create_subscription

    def delivering(msg_type, topic, callback, qos, **kw):
        sub = create(msg_type, topic, callback, qos, **kw)
        if msg_type in at_once:
            info = {"publisher_gid": {"data": b"\x01" * 16}}
            with_info = len(inspect.signature(callback).parameters) == 2
            callback(*((at_once[msg_type], info) if with_info else (at_once[msg_type],)))
            given.append(msg_type)
        return sub
    node.create_subscription = delivering
    try:
        labels = LabelMap()
        DetectionsInput(node, ObjectNotes(), labels, on_note=lambda *a: None,
                        on_event=lambda *a: None, frame_width=lambda: 0)
        ear = HriBargeIn(node, lambda voice: None)
        assert set(given) == {pm.LabelInfo, pm.IdsList}
        assert list(ear._subs) == ["v1"]          # the voice it heard of is followed
    finally:
        node.destroy_node()


def test_a_known_person_in_view_is_remembered_and_the_next_reply_is_told_it(ros_context,
                                                                            tmp_path):
    """Memory of people: a ROS4HRI person the people store knows (p1, Anna, who said yes).

    Her line about herself gives two facts (the model's JSON, one fact invented and dropped),
    kept in the store; her next line's reply prompt holds what is remembered of her; when
    she leaves, her session is summed up. The robot's own tools are declared too: both they
    (barge-in) and the memory hear every line (once, the tools' hook silenced the memory's).
    """
    from vision_dialogue.application.identity.memory import PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.store import PeopleStore
    url = f"sqlite:///{tmp_path / 'people.db'}"
    store = PeopleStore(url)
    store.enrol("Anna", [], Consent(ConsentWay.ASKED, answer="Yes."), person_id="p1")

    def answer(req):
        if "summary" in json.dumps(req.get("response_format")):    # she left: her session
            return json.dumps({"summary": "her sailing and her work"})
        if req.get("response_format"):                     # the extraction question
            return json.dumps({"facts": [
                {"topic": "hobby", "fact": "loves sailing"},
                {"topic": "workplace", "fact": "works in building B"},
                {"topic": "family", "fact": "has three daughters"}]})
        return "How nice."
    said = "I love sailing and I work in building B."
    tools = tmp_path / "robot_tools.yaml"
    tools.write_text("robot_tools:\n  - {name: wave_hand, description: Wave a hand., "
                     "service: /wave_hand, type: std_srvs/srv/Trigger}\n")
    with running_manager(ros_context, tmp_path, answer, people_store_url=url,
                         memory_queue_file=str(tmp_path / "queue.db"),
                         robot_tools_file=str(tools)) as (rig, fake):
        peer = Peer("voice", "--name", "Anna", "--say", said)
        try:
            # her line keeps facts only when its speaker is known to be Anna, in view: the
            # line waits until the manager knows whose voice v7 is and that she is here, and
            # its subscriptions to v7's speech see her publisher (in a CI run, before they
            # did, her line was lost: no line, no request)
            assert rig.wait(lambda: rig.node.voices.speaker("v7") == "Anna" and "Anna" in
                            rig.node.conversation.prompt.known_in_view
                            and reading(rig.node, V7_SPEECH), timeout=60), peer.seen
            peer.proc.send_signal(signal.SIGUSR2)
            assert peer.expect(lambda e: e.get("event") == "said", 60,
                               spin=lambda: rig.wait(lambda: False, timeout=0.05)), events(peer)
            memory = PersonMemory(store)
            assert rig.wait(lambda: len(memory.recall("p1", "test").facts) == 2, timeout=30), \
                heard_so_far(rig, fake)
            rig.say("What do I love doing?")
            assert rig.wait(lambda: any("What do I love doing?" in json.dumps(r["messages"])
                                        for r in fake.requests), timeout=30)
            peer.proc.send_signal(signal.SIGUSR1)           # Anna leaves: her session ends
            assert peer.expect(lambda e: e.get("event") == "left", 30), peer.seen
            assert rig.wait(lambda: memory.recall("p1", "test").last_session is not None,
                            timeout=30)
        finally:
            peer.close()
    assert memory.recall("p1", "test").last_session.summary == "her sailing and her work"
    facts = {f.text for f in memory.recall("p1", "test").facts}
    assert facts == {"loves sailing", "works in building B"}
    asked = next(json.dumps(r["messages"]) for r in fake.requests
                 if "What do I love doing?" in json.dumps(r["messages"]))
    assert "You have met Anna before. Anna told you: " in asked and "loves sailing" in asked, \
        asked[-1500:]
    why = [a.why for a in memory.audit()]
    assert "fact from line 1" in why and "recall for a reply" in why
    store.close()


def heard_so_far(rig, fake) -> str:
    """What the manager took in so far, for a failure's message: its lines and the LLM's asks.

    A suite run once stored none of Anna's facts in 30 s: was her line not heard, or not
    asked about?
    """
    lines = [(i.role, i.text, i.speaker) for i in
             rig.node.conversation.last_lines(10)]
    asks = ["extraction" if r.get("response_format") else "reply" for r in fake.requests]
    in_view = rig.node.conversation.prompt.known_in_view
    return f"lines: {lines}; LLM requests: {asks}; known in view: {in_view}"


@pytest.mark.skipif(bool(pm.missing()), reason="vision_msgs/hri_msgs not built")
def test_with_two_in_view_a_lines_facts_go_to_whom_its_voice_print_named(ros_context, tmp_path):
    """Anna and Ben (both said yes) in view: a line is the one its voice print named.

    people_node says who said each line on people/speakers a moment after it (it prints the
    voice first): a line its print named keeps its facts for that person; a line it could
    not name by voice keeps none (two in view: nobody for sure).
    """
    from std_msgs.msg import String

    from vision_dialogue.application.identity.memory import PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.store import PeopleStore
    from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS
    from vision_dialogue.ros.topics import PEOPLE_SPEAKERS_TOPIC
    from vision_dialogue_interfaces.msg import LineSpeaker
    url = f"sqlite:///{tmp_path / 'people.db'}"
    store = PeopleStore(url)
    for pid, name in (("p1", "Anna"), ("p2", "Ben")):
        store.enrol(name, [], Consent(ConsentWay.ASKED, answer="Yes."), person_id=pid)
    told = {"I love sailing.": "loves sailing", "I play the violin.": "plays the violin"}

    def answer(req):
        if "summary" in json.dumps(req.get("response_format")):
            return json.dumps({"summary": "sailing"})
        if req.get("response_format"):                     # the extraction question
            line = json.dumps(req["messages"])
            return json.dumps({"facts": [{"topic": "hobby", "fact": fact}
                                         for said, fact in told.items() if said in line]})
        return "How nice."
    memory = PersonMemory(store)
    with running_manager(ros_context, tmp_path, answer, people_store_url=url,
                         memory_queue_file=str(tmp_path / "queue.db")) as (rig, fake):
        peer = rclpy.create_node("people_node_like", context=ros_context)
        tracked = peer.create_publisher(pm.IdsList, "/humans/persons/tracked", LATCHED_QOS)
        names = {pid: peer.create_publisher(String, f"/humans/persons/{pid}/name", LATCHED_QOS)
                 for pid in ("p1", "p2")}
        speakers = peer.create_publisher(LineSpeaker, PEOPLE_SPEAKERS_TOPIC, RELIABLE_QOS)
        rig.ex.add_node(peer)
        try:
            tracked.publish(pm.IdsList(ids=["p1", "p2"]))
            names["p1"].publish(String(data="Anna"))
            names["p2"].publish(String(data="Ben"))
            assert rig.wait(lambda: sorted(rig.node._tracked_faces() or ()) == ["p1", "p2"]
                            and matched(speakers, rig.node), 30)
            rig.say("I love sailing.")
            assert rig.wait(lambda: any("I love sailing." in json.dumps(r["messages"])
                                        for r in fake.requests), 30)
            speakers.publish(LineSpeaker(text="I love sailing.", person_id="p2",
                                         confidence=0.8, by_voice=True))       # Ben's voice
            assert rig.wait(lambda: memory.recall("p2", "test").facts, 30)
            rig.say("I play the violin.")
            speakers.publish(LineSpeaker(text="I play the violin.", person_id="p1",
                                         by_voice=False))                      # no print
            assert rig.wait(lambda: rig.node.memory.keeper.lines == 2, 30)
            rig.node.memory._worker.submit(lambda: None).result(timeout=30)   # the line done
        finally:
            rig.ex.remove_node(peer)
            peer.destroy_node()
    assert [f.text for f in memory.recall("p2", "test").facts] == ["loves sailing"]
    assert memory.recall("p1", "test").facts == ()
    asked = [json.dumps(r["messages"]) for r in fake.requests if r.get("response_format")]
    assert len(asked) == 1 and "I love sailing." in asked[0], asked   # the violin: not asked
    store.close()


@pytest.mark.skipif(bool(pm.missing()), reason="vision_msgs/hri_msgs not built")
def test_two_people_arriving_together_are_greeted_once_both_are_named(ros_context):
    """A stranger's empty name comes first, the known one's later: the greeting waits for it.

    A suite run greeted the stranger alone ("hello to the person in front of you") while the
    known person's name was still on its way. The greeting is asked for only once nobody
    tracked waits for a name, after a report of everyone (by name where known).
    """
    from std_msgs.msg import String

    from vision_dialogue.ros.qos import LATCHED_QOS
    from vision_dialogue.ros.standard_inputs import Ros4hriInput
    node = rclpy.create_node("greets_together", context=ros_context)
    peer = rclpy.create_node("person_manager", context=ros_context)
    events = []
    Ros4hriInput(node, on_speech=lambda *a: None,
                 on_people=lambda seen: events.append(("people", sorted(p.label for p in seen))),
                 on_engaging=lambda label: events.append(("engaging", label)))
    tracked = peer.create_publisher(pm.IdsList, "/humans/persons/tracked", LATCHED_QOS)
    names = {pid: peer.create_publisher(String, f"/humans/persons/{pid}/name", LATCHED_QOS)
             for pid in ("known1", "anonymous_person_x")}
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    ex.add_node(peer)
    try:
        tracked.publish(pm.IdsList(ids=["anonymous_person_x", "known1"]))
        names["anonymous_person_x"].publish(String(data=""))
        # the stranger is reported (their empty name came), nobody is greeted yet
        assert spin_until(ex, lambda: ("people", ["someone"]) in events, 30), events
        assert not [e for e in events if e[0] == "engaging"]
        names["known1"].publish(String(data="Barack"))
        assert spin_until(ex, lambda: any(e[0] == "engaging" for e in events), 30), events
        first = next(i for i, e in enumerate(events) if e[0] == "engaging")
        assert events[first - 1] == ("people", ["Barack", "someone"]), events
    finally:
        ex.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_a_name_whose_topic_is_discovered_late_is_waited_for_from_its_discovery(ros_context):
    """The name wait counts from when the person's name topic was seen with a publisher.

    Under three loads at once a known person was greeted as "someone": their latched name
    came after NAME_WAIT_S from when they were first tracked, because a new person's topics
    are discovered late on a busy machine. The clock here is the test's (`_persons(now)`), so
    the windows are exact: a person whose name topic appears 4 s after they were tracked is
    still waited for at 8 s and given up on at 10.5 s; one without a name topic at 6.5 s, and
    a person given up on is not waited for again.
    """
    from std_msgs.msg import String

    from vision_dialogue.ros.qos import LATCHED_QOS
    from vision_dialogue.ros.standard_inputs import NAME_WAIT_S, Ros4hriInput
    node = rclpy.create_node("name_wait", context=ros_context)
    peer = rclpy.create_node("slow_person_manager", context=ros_context)
    inp = Ros4hriInput(node, on_speech=lambda *a: None)
    tracked = peer.create_publisher(pm.IdsList, "/humans/persons/tracked", LATCHED_QOS)
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    ex.add_node(peer)
    try:
        tracked.publish(pm.IdsList(ids=["late", "nameless"]))
        assert spin_until(ex, lambda: set(inp._first_seen) == {"late", "nameless"}, 30)
        t0 = max(inp._first_seen.values())

        def reported(now):
            return sorted(p.id for p in inp._persons(now)[0])
        assert reported(t0 + 1.0) == []                        # both may still be named
        peer.create_publisher(String, "/humans/persons/late/name", LATCHED_QOS)
        assert spin_until(ex, lambda: node.count_publishers("/humans/persons/late/name"), 30)
        assert reported(t0 + 4.0) == []                        # its topic is seen at 4 s
        assert reported(t0 + NAME_WAIT_S + 0.5) == ["nameless"]  # no name topic: given up
        assert reported(t0 + 4.0 + NAME_WAIT_S - 0.5) == ["nameless"]
        assert reported(t0 + 4.0 + NAME_WAIT_S + 0.5) == ["late", "nameless"]
        assert reported(t0 + 1.0) == ["late", "nameless"]      # given up: not waited for again
    finally:
        ex.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_with_a_people_node_beside_it_the_first_frame_is_no_greeting_its_report_is(
        ros_context, tmp_path):
    """With `people_store_url` set, the greeting waits for the people node's named report.

    Bringup sets it where people_node runs; the wait holds even before its topics are
    discovered. A fresh-clone run greeted on the first frame, right after the manager
    started: no detector had counted the frame's people yet and people_node's persons topic
    was not yet discovered, so the manager took it for a setup where nothing names people,
    and the known person was never greeted by name.
    """
    from std_msgs.msg import String

    from vision_dialogue.core.persona import load_persona
    from vision_dialogue.ros.qos import LATCHED_QOS
    store = f"sqlite:///{tmp_path / 'people.db'}"
    with running_manager(ros_context, tmp_path, greet_first=True,
                         people_store_url=store) as (rig, fake):
        for count in (1, 2):        # frame 2 is added once frame 1's listeners have run
            rig.img_pub.publish(to_image_msg(photo()))
            assert rig.wait(lambda: count == sum(
                it.kind == "frame" for it in rig.node.conversation.timeline.snapshot()))
        peer = rclpy.create_node("people_node_late", context=ros_context)   # discovered now
        tracked = peer.create_publisher(pm.IdsList, "/humans/persons/tracked", LATCHED_QOS)
        name = peer.create_publisher(String, "/humans/persons/ada1/name", LATCHED_QOS)
        try:
            tracked.publish(pm.IdsList(ids=["ada1"]))
            name.publish(String(data="Ada"))
            assert rig.wait(lambda: len(rig.finals()) == 1, timeout=30), rig.finals()
            persona = load_persona()
            known = persona.greet_known_instruction.format(names="Ada")
            greetings = [r for r in fake.requests if any(
                g in json.dumps(r["messages"]) for g in (persona.greet_instruction, known))]
            assert len(greetings) == 1 and known in json.dumps(greetings[0]["messages"]), \
                greetings
        finally:
            peer.destroy_node()
