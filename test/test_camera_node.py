"""camera_node in-process with real rclpy.

A subscriber node in the same Context receives what it publishes. Sources are files the tests write
and a fake Furhat ZeroMQ feed on 127.0.0.1.
"""
from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image

from conftest import spin_until
from fake_furhat_camera import FakeFurhatCamera, frame_index, make_frame_jpeg
from vision_dialogue.camera_node import CameraNode
from vision_dialogue.ros.image_msgs import from_compressed_msg, from_image_msg, stamp_to_ns
from vision_dialogue_interfaces.msg import DetectedUsers
from vision_dialogue.ros.params import ParameterError


def value_index(img) -> int:
    return int(round(float(img.mean()) / 10.0))


def write_pngs(folder, n=6, size=(64, 48)):
    folder.mkdir(exist_ok=True)
    for i in range(n):
        cv2.imwrite(str(folder / f"f{i:02d}.png"), np.full((size[1], size[0], 3), i * 10,
                                                           np.uint8))
    return folder


def write_video(path, n=20, fps=20.0, size=(64, 48)):
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, size)
    for i in range(n):
        w.write(np.full((size[1], size[0], 3), (i % 25) * 10, np.uint8))
    w.release()
    return path


class Harness:
    """A CameraNode plus a listener node, on one executor in the test's Context."""

    def __init__(self, ctx, stream=False, **params):
        self.ctx = ctx
        self.cam = CameraNode(context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()])
        self.sub = Node("listener", context=ctx)
        self.images, self.compressed, self.users, self.stream = [], [], [], []
        self.sub.create_subscription(Image, "camera/image_raw",
                                     lambda m: self.images.append((time.monotonic(), m)),
                                     qos_profile_sensor_data)
        self.sub.create_subscription(CompressedImage, "camera/image_raw/compressed",
                                     self.compressed.append, qos_profile_sensor_data)
        self.sub.create_subscription(DetectedUsers, "camera/users", self.users.append,
                                     QoSProfile(depth=10))
        if stream:
            self.sub.create_subscription(Image, "camera/stream/image_raw", self.stream.append,
                                         qos_profile_sensor_data)
        self.ex = SingleThreadedExecutor(context=ctx)
        self.ex.add_node(self.cam)
        self.ex.add_node(self.sub)

    def spin_until(self, pred, timeout=5.0):
        return spin_until(self.ex, pred, timeout)

    def spin_for(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.ex.spin_once(timeout_sec=0.02)

    def close(self):
        self.ex.shutdown()
        self.cam.destroy_node()
        self.sub.destroy_node()


@pytest.fixture
def harness(ros_context):
    made = []

    def make(**kw):
        h = Harness(ros_context, **kw)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()


def test_folder_frames_arrive_raw_and_compressed_with_stamp_and_frame_id(harness, tmp_path):
    folder = write_pngs(tmp_path / "imgs", n=6)
    h = harness(source="folder", folder_path=str(folder), frame_period=0.05,
                frame_id="head_camera", jpeg_quality=95)
    assert h.spin_until(lambda: len(h.images) >= 8 and len(h.compressed) >= 8)
    now = time.time_ns()
    raws = [m for _, m in h.images]
    for m in raws:
        assert (m.encoding, m.width, m.height, m.step) == ("bgr8", 64, 48, 64 * 3)
        assert m.header.frame_id == "head_camera"
        assert 0 <= now - stamp_to_ns(m.header.stamp) < 10e9
    idx = [value_index(from_image_msg(m)) for m in raws]
    assert all(b == (a + 1) % 6 for a, b in zip(idx, idx[1:])), idx   # folder order, looped
    stamps = [stamp_to_ns(m.header.stamp) for m in raws]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    by_stamp = {stamp_to_ns(m.header.stamp): m for m in raws}
    matched = 0
    for c in h.compressed:
        assert c.format == "jpeg" and c.header.frame_id == "head_camera"
        assert bytes(c.data[:3]) == b"\xff\xd8\xff"
        raw = by_stamp.get(stamp_to_ns(c.header.stamp))
        if raw is not None:      # same acquisition stamp on both topics, same picture
            matched += 1
            assert value_index(from_compressed_msg(c)) == value_index(from_image_msg(raw))
    assert matched >= 5
    assert h.cam.errors_logged == 0


def test_resize_keeps_aspect(harness, tmp_path):
    folder = write_pngs(tmp_path / "imgs", n=2, size=(64, 48))
    h = harness(source="folder", folder_path=str(folder), frame_period=0.05, width=32)
    assert h.spin_until(lambda: h.images and h.compressed)
    m = h.images[-1][1]
    assert (m.width, m.height) == (32, 24)
    assert from_compressed_msg(h.compressed[-1]).shape == (24, 32, 3)


def test_frame_period_respected_video_step(harness, tmp_path):
    video = write_video(tmp_path / "v.avi", n=24)
    h = harness(source="video", video_path=str(video), video_mode="step", loop=False,
                frame_period=0.25)
    assert h.spin_until(lambda: len(h.images) >= 1)
    h.spin_for(1.3)
    times = [t for t, _ in h.images]
    gaps = np.diff(times)
    assert 4 <= len(gaps) <= 7, gaps
    assert 0.15 < float(np.median(gaps)) < 0.4, gaps
    idx = [value_index(from_image_msg(m)) for _, m in h.images]
    assert idx == list(range(idx[0], idx[0] + len(idx)))      # one file frame per period


def test_publish_rate_feeds_stream_topic_and_frame_period_the_main_topic(harness, tmp_path):
    video = write_video(tmp_path / "v.avi", n=40, fps=20.0)
    h = harness(stream=True, source="video", video_path=str(video), video_mode="realtime",
                frame_period=0.5, publish_rate=20.0)
    assert h.spin_until(lambda: len(h.images) >= 1)
    h.spin_for(1.6)
    assert 2 <= len(h.images) <= 5, len(h.images)
    # the node's stamps, not the arrival times: a loaded machine delivered two frames 0.02 s
    # apart that were stamped 0.5 s apart (the fresh-clone CI once)
    gaps = np.diff([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in h.images])
    assert all(0.35 < g < 0.7 for g in gaps), gaps
    assert len(h.stream) >= 4 * len(h.images)
    assert all(m.encoding == "bgr8" and m.header.frame_id == "camera" for m in h.stream)


def test_video_without_loop_stops_publishing(harness, tmp_path):
    video = write_video(tmp_path / "v.avi", n=3)
    h = harness(source="video", video_path=str(video), video_mode="step", loop=False,
                frame_period=0.05)
    assert h.spin_until(lambda: h.cam.ended)
    n = len(h.images)
    h.spin_for(0.3)
    assert len(h.images) == n and n <= 3 and h.cam.frames_published == 3


@pytest.mark.fault("camera", "video file missing, then back")
def test_missing_file_logged_once_nothing_published_then_recovers(harness, tmp_path, capfd):
    video = tmp_path / "later.avi"
    h = harness(source="video", video_path=str(video), video_mode="step",
                frame_period=0.05, retry_initial=0.05, retry_max=0.2)
    h.spin_for(1.2)
    assert h.images == [] and h.compressed == []
    assert h.cam.failures >= 4                   # kept retrying, with backoff (not per tick)
    assert h.cam.failures < 1.2 / 0.05
    assert h.cam.errors_logged == 1
    # written beside it, then moved into place: the camera's acquisition thread retries on its
    # own, and a half-written file is another failure with its own error line (a busy run)
    write_video(tmp_path / "writing.avi", n=5).replace(video)
    assert h.spin_until(lambda: len(h.images) >= 2, timeout=5.0)
    assert h.cam.errors_logged == 1
    err = capfd.readouterr().err
    assert err.count("video file not found") == 1, err
    assert "recovered" in err


def test_furhat_feed_frames_passthrough_jpeg_and_users(harness):
    fake = FakeFurhatCamera()
    fake.start_stream(fps=30)
    try:
        h = harness(source="furhat", furhat_host="127.0.0.1", furhat_camera_port=fake.port,
                    frame_period=0.1, frame_id="furhat_cam")
        assert h.spin_until(lambda: len(h.images) >= 3 and len(h.compressed) >= 3
                            and len(h.users) >= 3)
        m = h.images[-1][1]
        assert (m.width, m.height, m.encoding) == (160, 120, "bgr8")
        for c in h.compressed:   # the robot's JPEG is republished as is, not re-encoded
            assert bytes(c.data) == make_frame_jpeg(frame_index(from_compressed_msg(c)))
        u = h.users[-1]
        assert u.header.frame_id == "furhat_cam" and len(u.users) == 1
        assert u.users[0].id.startswith("user-") and u.users[0].emotion == "hap"
        assert (u.users[0].bbox.width, u.users[0].bbox.height) == (30, 40)
        assert u.users[0].position.z == pytest.approx(1.5)
        assert '"users"' in u.raw_json
    finally:
        fake.close()


def test_furhat_unreachable_then_robot_appears(harness, capfd):
    probe = FakeFurhatCamera()
    port = probe.port
    probe.close()
    h = harness(source="furhat", furhat_host="127.0.0.1", furhat_camera_port=port,
                frame_period=0.05, source_timeout=0.2, retry_initial=0.05, retry_max=0.1)
    h.spin_for(0.8)
    assert h.images == [] and h.cam.errors_logged == 1 and h.cam.failures >= 2
    fake = FakeFurhatCamera(port=port)
    fake.start_stream(fps=30)
    try:
        assert h.spin_until(lambda: len(h.images) >= 2, timeout=5.0)
        err = capfd.readouterr().err
        assert err.count("unreachable") == 1 and "recovered" in err
    finally:
        fake.close()


@pytest.mark.parametrize("params,name", [
    ({"source": "kinect"}, "source"),
    ({"frame_period": 0.0}, "frame_period"),
    ({"frame_period": -5.0}, "frame_period"),
    ({"publish_rate": -1.0}, "publish_rate"),
    ({"jpeg_quality": 0}, "jpeg_quality"),
    ({"width": "wide"}, "width"),
    ({"frame_id": " "}, "frame_id"),
    ({"source": "video"}, "video_path"),
    ({"source": "folder"}, "folder_path"),
    ({"furhat_camera_port": 70000}, "furhat_camera_port"),
    ({"device": -1}, "device"),
    ({"retry_initial": 5.0, "retry_max": 1.0}, "retry_max"),
    ({"source": "webcam", "video_path": "/v.mp4"}, "video_path"),
    ({"source": "furhat", "folder_path": "/imgs"}, "folder_path"),
    ({"video_path": "/v.mp4", "folder_path": "/imgs"}, "source"),
])
def test_invalid_parameter_raises_parameter_error_naming_it(ros_context, params, name):
    with pytest.raises(ParameterError) as e:
        CameraNode(context=ros_context, parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()])
    assert str(e.value).startswith(name), str(e.value)


def test_furhat_realtime_source_publishes_robot_jpeg(harness):
    from fake_furhat_realtime import FakeFurhatRealtime

    fake = FakeFurhatRealtime().start()
    try:
        h = harness(source="furhat_realtime", furhat_host="127.0.0.1",
                    furhat_realtime_port=fake.port, frame_period=0.1)
        assert h.spin_until(lambda: len(h.images) >= 2 and len(h.compressed) >= 2)
        assert bytes(h.compressed[-1].data) == fake.jpeg
        assert (h.images[-1][1].width, h.images[-1][1].height) == (320, 240)
    finally:
        fake.stop()


@pytest.mark.fault("camera", "no webcam device")
def test_webcam_device_parameter_and_missing_device(harness, ros_context):
    h = harness(source="webcam", device="/dev/video_missing_23", frame_period=0.05,
                retry_initial=0.05, retry_max=0.1)
    h.spin_for(0.5)
    assert h.images == [] and h.cam.errors_logged == 1 and h.cam.failures >= 2
    for value, expected in (("2", 2), (1, 1), ("/dev/video3", "/dev/video3")):
        n = CameraNode(f"cam_{expected}".replace("/", "_"), context=ros_context,
                       parameter_overrides=[Parameter("device", value=value),
                                            Parameter("frame_period", value=100.0),
                                            Parameter("source", value="folder"),
                                            Parameter("folder_path", value="/nonexistent")])
        assert n.device == expected
        n.destroy_node()


def test_a_given_file_is_played_without_naming_the_source(harness, tmp_path):
    """A given file is played without naming the source.

    `camera_node -p video_path:=X` plays X (source auto); folder_path likewise; nothing given:
    the webcam.
    """
    video = write_video(tmp_path / "clip.avi", n=30)
    h = harness(video_path=str(video), frame_period=0.05)
    assert h.cam.acquisition.source.describe().startswith(f"video {video}")
    assert h.spin_until(lambda: len(h.images) >= 2)
    folder = write_pngs(tmp_path / "imgs", n=3)
    h = harness(folder_path=str(folder), frame_period=0.05)
    assert h.cam.acquisition.source.describe().startswith("image folder")
    assert h.spin_until(lambda: len(h.images) >= 2)


def test_acquisition_waits_for_the_named_listeners(harness, tmp_path, ros_context):
    """wait_for_listeners: nothing is read until each named node subscribes to an image topic.

    (A video's clock does not start before.)
    """
    h = harness(source="video", video_path=str(write_video(tmp_path / "v.avi")),
                frame_period=0.05, publish_rate=10.0, loop=True,
                wait_for_listeners=["events_node", "speech_node"])
    assert h.cam._listeners_missing() == ["events_node", "speech_node"]
    events = Node("events_node", context=ros_context)
    events.create_subscription(Image, "camera/stream/image_raw", lambda m: None,
                               qos_profile_sensor_data)
    h.ex.add_node(events)
    try:
        assert h.spin_until(lambda: h.cam._listeners_missing() == ["speech_node"], 10)
        assert h.images == [] and h.cam.frames_published == 0      # the "listener" is no one
        speech = Node("speech_node", context=ros_context)
        speech.create_subscription(Image, "camera/image_raw", lambda m: None,
                                   qos_profile_sensor_data)
        h.ex.add_node(speech)
        assert h.spin_until(lambda: h.images, 10)
    finally:
        for n in list(h.ex.get_nodes())[2:]:
            h.ex.remove_node(n)
            n.destroy_node()


def test_a_listener_the_publisher_never_matches_holds_the_start_a_moment_only(
        harness, tmp_path, ros_context):
    """The start waits for the publisher to match the named node's subscription, not for ever.

    A subscription the graph lists before the publisher matched it lost the first frame (the
    demo's manager); one that can never match (here: it asks for latched frames) holds the
    video `LISTENER_MATCH_WAIT_S` at most.
    """
    from vision_dialogue.camera_node import LISTENER_MATCH_WAIT_S
    from vision_dialogue.ros.qos import LATCHED_QOS
    h = harness(source="video", video_path=str(write_video(tmp_path / "v.avi")),
                frame_period=0.05, loop=True, wait_for_listeners=["manager_node"])
    manager = Node("manager_node", context=ros_context)
    manager.create_subscription(Image, "camera/image_raw", lambda m: None, LATCHED_QOS)
    h.ex.add_node(manager)
    try:
        assert h.spin_until(lambda: not h.cam._listeners_missing(), 10)
        assert not h.cam._listeners_matched() and h.cam.frames_published == 0   # listed only
        assert h.spin_until(lambda: h.cam.frames_published, 10 + LISTENER_MATCH_WAIT_S)
    finally:
        h.ex.remove_node(manager)
        manager.destroy_node()
