"""The camera node as a managed node, driven by plain lifecycle_msgs service calls.

The installed camera_node runs as its own process; this test is the lifecycle manager (as
nav2's lifecycle_manager or `ros2 lifecycle set` would be) and watches the frames.
"""
from __future__ import annotations

import json
import time

import pytest
from lifecycle_msgs.msg import State, Transition
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from installed.user_env import (LifecycleCalls, OwnParticipant, ask, stop, until,
                                wait_for_log)

PERIOD = 0.3


class LifecycleClient(OwnParticipant):
    """change_state / get_state of one node, and the frames on camera/image_raw."""

    def __init__(self, node_name: str):
        super().__init__("lifecycle_test_manager")
        self.calls = LifecycleCalls(self.node, node_name)
        self.frames: list[float] = []
        self.node.create_subscription(Image, "camera/image_raw",
                                      lambda m: self.frames.append(time.monotonic()),
                                      QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
        self.spin()
        self.calls.wait_for_services(60)
        self.state, self.transition = self.calls.state, self.calls.transition

    def frames_after(self, t: float) -> int:
        return sum(1 for f in list(self.frames) if f > t)

    def frames_come(self, timeout: float = 20.0) -> bool:
        t = time.monotonic()
        return until(lambda: self.frames_after(t) >= 2, timeout)

    def no_frames_for(self, seconds: float) -> bool:
        """After a frame in flight has landed: none for `seconds` (several periods)."""
        time.sleep(PERIOD)
        t = time.monotonic()
        time.sleep(seconds)
        return self.frames_after(t) == 0


def camera(installed, tmp_path, name: str, *params: str):
    args = ["--ros-args", "-r", f"__node:={name}", "-p", f"frame_period:={PERIOD}"]
    for p in params:
        args += ["-p", p]
    log = tmp_path / f"{name}.log"
    return installed.popen(installed.exe("camera_node") + args, log=log), log


def test_a_lifecycle_manager_configures_activates_deactivates_and_reactivates(
        installed, tmp_path, camera_images):
    proc, log = camera(installed, tmp_path, "camera_node", "managed:=true",
                       f"folder_path:={camera_images}")
    client = LifecycleClient("camera_node")
    try:
        assert client.state() == State.PRIMARY_STATE_UNCONFIGURED
        assert client.no_frames_for(4 * PERIOD)
        assert client.transition(Transition.TRANSITION_CONFIGURE)
        assert client.state() == State.PRIMARY_STATE_INACTIVE
        assert client.no_frames_for(4 * PERIOD)
        assert client.transition(Transition.TRANSITION_ACTIVATE)
        assert client.state() == State.PRIMARY_STATE_ACTIVE and client.frames_come()
        assert client.transition(Transition.TRANSITION_DEACTIVATE)
        assert client.no_frames_for(4 * PERIOD)
        wait_for_log(log, "the device released", proc, timeout=10)
        assert client.transition(Transition.TRANSITION_ACTIVATE) and client.frames_come()
        assert client.transition(Transition.TRANSITION_DEACTIVATE)
        assert client.transition(Transition.TRANSITION_CLEANUP)
        assert client.state() == State.PRIMARY_STATE_UNCONFIGURED
    finally:
        client.close()
        code = stop(proc)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text[-3000:]


def test_an_unconfigurable_camera_fails_its_configure_and_keeps_running(installed, tmp_path):
    proc, log = camera(installed, tmp_path, "camera_missing", "managed:=true",
                       f"video_path:={tmp_path / 'gone.mp4'}")
    client = LifecycleClient("camera_missing")
    try:
        assert not client.transition(Transition.TRANSITION_CONFIGURE)
        assert client.state() == State.PRIMARY_STATE_UNCONFIGURED and proc.poll() is None
        wait_for_log(log, r"cannot configure: video .*gone\.mp4", proc, timeout=10)
    finally:
        client.close()
        code = stop(proc)
    assert code == 0, log.read_text()[-3000:]


def test_unmanaged_it_starts_at_once_and_still_answers_the_lifecycle_services(
        installed, tmp_path, camera_images):
    proc, log = camera(installed, tmp_path, "camera_plain", f"folder_path:={camera_images}")
    client = LifecycleClient("camera_plain")
    try:
        assert client.state() == State.PRIMARY_STATE_ACTIVE and client.frames_come()
        assert client.transition(Transition.TRANSITION_DEACTIVATE)
        assert client.no_frames_for(4 * PERIOD)
        assert client.transition(Transition.TRANSITION_ACTIVATE) and client.frames_come()
    finally:
        client.close()
        code = stop(proc)
    assert code == 0 and "Traceback" not in log.read_text(), log.read_text()[-3000:]


# --- every node of a setup, managed ---------------------------------------------------------
MANAGED = ("detector_node", "events_node", "manager_node", "speech_node", "vfm_server")


class SetupManager(OwnParticipant):
    """The lifecycle manager of a whole setup, and what it watches of each node's work."""

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.action import ActionClient

        from vision_dialogue_interfaces.action import ImageToImage
        from vision_dialogue_interfaces.msg import Reply, Utterance
        from vision_dialogue.ros import perception_msgs as pm
        from vision_dialogue.ros.vfm_actions import VFM_ACTION_QOS
        super().__init__("setup_lifecycle_manager")
        node = self.node
        self.nodes = {n: LifecycleCalls(node, n) for n in MANAGED}
        self.detections, self.replies, self.lines = [], [], []
        self.done: dict[str, int] = {}           # the work counter each node reports
        self.messages: dict[str, str] = {}       # and its status message
        node.create_subscription(pm.Detection2DArray, "detections",
                                 lambda m: self.detections.append(time.monotonic()), 10)
        node.create_subscription(Reply, "dialogue/reply", self.replies.append, 50)
        node.create_subscription(Utterance, "dialogue/utterance",
                                 lambda m: self.lines.append(m.text), 10)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_status, 50)
        self.reply_pub = node.create_publisher(Reply, "dialogue/reply", 10)
        self.vfm = ActionClient(node, ImageToImage, "vfm/image_to_image", **VFM_ACTION_QOS)
        self.spin()
        for calls in self.nodes.values():
            calls.wait_for_services(90)

    def _on_status(self, msg) -> None:
        for s in msg.status:
            values = {kv.key: kv.value for kv in s.values}
            if "done" in values:
                self.done[s.name] = int(values["done"])
                self.messages[s.name] = s.message

    def state(self, name: str) -> int:
        return self.nodes[name].state()

    def transition(self, name: str, transition_id: int) -> bool:
        return self.nodes[name].transition(transition_id)

    def bring_up(self, name: str) -> None:
        assert self.transition(name, Transition.TRANSITION_CONFIGURE), name
        assert self.transition(name, Transition.TRANSITION_ACTIVATE), name
        assert self.state(name) == State.PRIMARY_STATE_ACTIVE, name

    def canny(self) -> bool:
        """Whether the VFM server accepts a canny goal on a stored image (and succeeds)."""
        from vision_dialogue_interfaces.action import ImageToImage
        assert self.vfm.wait_for_server(timeout_sec=60)
        goal = ImageToImage.Goal(tool="canny", image_file="in.png")
        handle = ask(lambda: self.vfm.send_goal_async(goal), 60)
        if not handle.accepted:
            return False
        result = ask(handle.get_result_async, 60).result
        assert result.success, result.error
        return True


def test_a_lifecycle_manager_drives_every_node_of_a_setup(installed, tmp_path, camera_images):
    """Detector, events, manager, speech and VFM server, managed, as separate processes.

    Inactive, each stops its work (detections, stream frames analysed, answers, lines heard
    and replies spoken, goals) and resumes it when activated again; the manager keeps its
    prompt through it.
    """
    import subprocess

    import cv2
    import numpy as np

    from fake_openai import FakeOpenAI
    from vision_dialogue_interfaces.msg import Reply
    store = tmp_path / "store"
    store.mkdir()
    cv2.imwrite(str(store / "in.png"), np.full((64, 64, 3), 200, np.uint8))
    fake = FakeOpenAI(default_reply="Hello there.").start()
    ros = ["--ros-args", "--log-level", "info", "-p", "managed:=true"]
    exe, logs = installed.exe, {n: tmp_path / f"{n}.log" for n in MANAGED + ("camera",)}
    procs = {
        "camera": installed.popen(exe("camera_node") + [
            "--ros-args", "-p", f"folder_path:={camera_images}", "-p", "frame_period:=0.3",
            "-p", "publish_rate:=3.0"], log=logs["camera"]),
        "detector_node": installed.popen(exe("detector_node") + ros + [
            "-p", "faces:=false", "-p", "text:=false"], log=logs["detector_node"]),
        "events_node": installed.popen(exe("events_node") + ros, log=logs["events_node"]),
        "manager_node": installed.popen(exe("manager_node") + ros + [
            "-p", "llm_backend:=openai", "-p", f"base_url:={fake.base_url}",
            "-p", "model:=fake-vlm", "-p", "max_retries:=0", "-p", "probe_images:=false",
            "-p", f"transcript_dir:={tmp_path / 'transcripts'}"],
            env=dict(installed.env, OPENAI_API_KEY="sk-test"), log=logs["manager_node"]),
        "speech_node": installed.popen(exe("speech_node") + ros + ["-p", "backend:=terminal"],
                                       log=logs["speech_node"], stdin=subprocess.PIPE),
        "vfm_server": installed.popen(exe("vfm_server") + ros + [
            "-p", "load:=canny_cpu", "-p", f"image_dir:={store}"], log=logs["vfm_server"])}
    speech = procs["speech_node"]

    def say(line: str) -> None:
        speech.stdin.write(line + "\n")
        speech.stdin.flush()

    def finals():
        """The manager's final replies (not the one this test publishes as turn 999)."""
        return [r for r in list(lm.replies) if r.final and r.turn_id != 999]

    lm = SetupManager()
    try:
        # unconfigured: nothing works, and a goal is refused
        assert all(lm.state(n) == State.PRIMARY_STATE_UNCONFIGURED for n in MANAGED)
        assert not lm.canny()
        for name in MANAGED:
            lm.bring_up(name)
        assert lm.canny()
        # active: detections, stream frames analysed, a line heard and answered
        assert until(lambda: len(lm.detections) >= 2 and lm.done.get(
            "events_node: events", 0) >= 2, 60), (len(lm.detections), lm.done)
        say("My name is Ada.")
        assert until(lambda: finals()), lm.lines
        assert fake.request_count >= 1

        # the manager inactive: the line is heard (the speech node is active), not answered
        assert lm.transition("manager_node", Transition.TRANSITION_DEACTIVATE)
        asked = fake.request_count
        say("Are you there?")
        assert until(lambda: "Are you there?" in lm.lines)
        wait_for_log(logs["manager_node"], r"inactive \(lifecycle\): a line \(not answered\)",
                     procs["manager_node"], timeout=20)
        # not asked of the LLM (a summary of frames it had before may still end meanwhile)
        late = [json.dumps(r["messages"]) for r in fake.requests[asked:]]
        assert not [p for p in late if "Are you there?" in p], late
        assert len(finals()) == 1
        # active again: answers, with the prompt it kept
        assert lm.transition("manager_node", Transition.TRANSITION_ACTIVATE)
        say("What is my name?")
        assert until(lambda: len(finals()) == 2)
        # the reply's request (the newest request may be a summary's: frames come every 0.3 s)
        prompts = [json.dumps(r["messages"]) for r in fake.requests]
        prompt = next((p for p in reversed(prompts) if "What is my name?" in p), "")
        assert "My name is Ada." in prompt, prompts[-3:]

        # the speech node inactive: neither publishes what it hears nor speaks
        assert lm.transition("speech_node", Transition.TRANSITION_DEACTIVATE)
        say("Nobody hears this.")
        lm.reply_pub.publish(Reply(turn_id=999, text="Nobody says this.", final=True))
        wait_for_log(logs["speech_node"], r"a line heard \(not published\) ignored",
                     speech, timeout=20)
        assert "Nobody hears this." not in lm.lines
        assert lm.transition("speech_node", Transition.TRANSITION_ACTIVATE)
        say("I am back.")
        assert until(lambda: "I am back." in lm.lines)
        assert until(lambda: len(finals()) == 3)

        # detector, events and VFM server inactive: no detections, no frames analysed, no goal
        for name in ("detector_node", "events_node", "vfm_server"):
            assert lm.transition(name, Transition.TRANSITION_DEACTIVATE), name
        events = "events_node: events"
        assert until(lambda: lm.messages[events].startswith("inactive"), 10)
        time.sleep(PERIOD)                   # a frame in flight lands
        counts = len(lm.detections), lm.done[events]
        assert not lm.canny()
        time.sleep(10 * PERIOD)
        assert lm.messages[events].startswith("inactive"), lm.messages
        assert (len(lm.detections), lm.done[events]) == counts
        for name in ("detector_node", "events_node", "vfm_server"):
            assert lm.transition(name, Transition.TRANSITION_ACTIVATE), name
        assert until(lambda: len(lm.detections) >= counts[0] + 2
                     and lm.done[events] >= counts[1] + 2, 60)
        assert lm.canny()
    finally:
        lm.close()
        fake.close()
        codes = {name: stop(p) for name, p in procs.items()}
    text = {n: log.read_text() for n, log in logs.items()}
    assert "Nobody says this." not in text["speech_node"]
    assert all(c == 0 for c in codes.values()), (codes, {n: t[-1500:] for n, t in text.items()})
    for name, t in text.items():
        assert "Traceback" not in t, f"{name}:\n{t[-3000:]}"


#: node: (its parameters, what its configure says): each valid as a parameter, failing only
#: when configure builds (a checkpoint, a folder, a model that is not there)
UNCONFIGURABLE = {
    "vfm_server": (["load:=caption_cpu", "checkpoints.caption:={tmp}/no_blip",
                    "image_dir:={tmp}/store"],
                   r"cannot configure: none of the 1 tools has its checkpoints"),
    "manager_node": (["llm_backend:=openai", "base_url:=http://127.0.0.1:9/v1",
                      "transcript_dir:={tmp}/a_file/transcripts"],
                     r"cannot configure: transcript_dir: cannot write there"),
    "speech_node": (["backend:=local", "stt_model:={tmp}/no_whisper"],
                    r"cannot configure: stt_model: .*no_whisper: not a CTranslate2 Whisper"),
}


@pytest.mark.parametrize("exe", sorted(UNCONFIGURABLE))
def test_an_unconfigurable_node_fails_its_configure_and_keeps_running(installed, tmp_path, exe):
    """A missing file or checkpoint: a FAILURE of configure with the reason, the node up."""
    params, said = UNCONFIGURABLE[exe]
    name = f"{exe}_unconfigurable"
    args = ["--ros-args", "-r", f"__node:={name}", "-p", "managed:=true"]
    for p in params:
        args += ["-p", p.format(tmp=tmp_path)]
    (tmp_path / "a_file").write_text("a file, not a folder")
    log = tmp_path / "node.log"
    proc = installed.popen(installed.exe(exe) + args, log=log,
                           env=dict(installed.env, OPENAI_API_KEY="sk-test"))
    client = LifecycleClient(name)
    try:
        try:
            first = client.state()
        except AssertionError as e:     # unanswered (a suite run): the node's side, for next time
            alive = "running" if proc.poll() is None else f"ended with {proc.returncode}"
            raise AssertionError(f"{e}; the node is {alive}; its log: "
                                 f"{log.read_text()[-3000:]}") from None
        assert first == State.PRIMARY_STATE_UNCONFIGURED
        assert not client.transition(Transition.TRANSITION_CONFIGURE)
        assert client.state() == State.PRIMARY_STATE_UNCONFIGURED and proc.poll() is None
        wait_for_log(log, said, proc, timeout=10)
    finally:
        client.close()
        code = stop(proc)
    assert code == 0 and "Traceback" not in log.read_text(), log.read_text()[-3000:]
