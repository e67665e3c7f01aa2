"""The camera node as a managed node, driven by plain lifecycle_msgs service calls.

The installed camera_node runs as its own process; this test is the lifecycle manager (as
nav2's lifecycle_manager or `ros2 lifecycle set` would be) and watches the frames.
"""
from __future__ import annotations

import threading
import time

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from installed.user_env import OwnParticipant, stop, wait_for_log

PERIOD = 0.3


class LifecycleClient(OwnParticipant):
    """change_state / get_state of one node, and the frames on camera/image_raw."""

    def __init__(self, node_name: str):
        super().__init__("lifecycle_test_manager")
        self.change = self.node.create_client(ChangeState, f"/{node_name}/change_state")
        self.get = self.node.create_client(GetState, f"/{node_name}/get_state")
        self.frames: list[float] = []
        self.node.create_subscription(Image, "camera/image_raw",
                                      lambda m: self.frames.append(time.monotonic()),
                                      QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
        self.spin()
        assert self.get.wait_for_service(timeout_sec=60), f"no /{node_name}/get_state"

    def _call(self, client, request):
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(30), "no answer"
        return future.result()

    def state(self) -> int:
        return self._call(self.get, GetState.Request()).current_state.id

    def transition(self, transition_id: int) -> bool:
        return self._call(self.change, ChangeState.Request(
            transition=Transition(id=transition_id))).success

    def frames_after(self, t: float) -> int:
        return sum(1 for f in list(self.frames) if f > t)

    def frames_come(self, timeout: float = 20.0) -> bool:
        t = time.monotonic()
        deadline = t + timeout
        while time.monotonic() < deadline:
            if self.frames_after(t) >= 2:
                return True
            time.sleep(0.05)
        return False

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
