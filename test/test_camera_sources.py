"""Camera sources on files the tests write with OpenCV, and the Furhat ZeroMQ feed.

The feed runs against a fake PUB on 127.0.0.1. Frame indices are encoded in pixel values
(10 * index).
"""
from __future__ import annotations

import json
import time

import cv2
import numpy as np
import pytest

from fake_furhat_camera import FakeFurhatCamera, frame_index
from vision_dialogue.camera.sources import (EndOfStream, ImageFolderSource, SourceError,
                                            VideoFileSource, WebcamSource, make_source)
from vision_dialogue.furhat.camera_sources import FurhatFeedSource
from vision_dialogue.furhat.camera_feed import FurhatCameraFeed, parse_user_data
from vision_dialogue.ros.furhat_msgs import users_to_msg


def value_index(img) -> int:
    return int(round(float(img.mean()) / 10.0))


def write_video(path, n=20, fps=10.0, codec="MJPG", size=(64, 48)):
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), fps, size)
    assert w.isOpened()
    for i in range(n):
        w.write(np.full((size[1], size[0], 3), i * 10, np.uint8))
    w.release()
    return path


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


@pytest.mark.parametrize("name,codec", [("v.avi", "MJPG"), ("v.mp4", "mp4v")])
def test_video_step_reads_every_frame_in_order_then_ends(tmp_path, name, codec):
    path = write_video(tmp_path / name, n=12, codec=codec)
    src = VideoFileSource(str(path), mode="step", loop=False)
    src.open()
    got = [value_index(src.read().image) for _ in range(12)]
    assert got == list(range(12))
    with pytest.raises(EndOfStream):
        src.read()
    src.close()


def test_video_step_loops(tmp_path):
    path = write_video(tmp_path / "v.avi", n=5)
    with VideoFileSource(str(path), mode="step", loop=True) as src:
        frames = [src.read() for _ in range(12)]
    assert [value_index(f.image) for f in frames] == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert [f.index for f in frames] == [0, 1, 2, 3, 4] * 2 + [0, 1]
    stamps = [f.stamp_ns for f in frames]
    assert stamps == sorted(stamps) and abs(stamps[-1] - time.time_ns()) < 5e9


def test_video_realtime_follows_the_clock_and_skips(tmp_path):
    clock = FakeClock()
    path = write_video(tmp_path / "v.avi", n=20, fps=10.0)
    src = VideoFileSource(str(path), mode="realtime", loop=True, clock=clock)
    src.open()
    assert src.fps == pytest.approx(10.0)
    assert value_index(src.read().image) == 0
    assert src.read() is None                 # same instant: no new frame
    clock.t += 0.55
    assert value_index(src.read().image) == 5  # skipped 1..4
    clock.t += 0.01
    assert src.read() is None
    clock.t += 1.0                             # 1.56 s -> frame 15
    assert value_index(src.read().image) == 15
    clock.t += 0.6                             # 2.16 s -> wraps to frame 1
    f = src.read()
    assert value_index(f.image) == 1 and f.index == 1
    clock.t += 0.3                             # 2.46 s -> frame 4
    assert value_index(src.read().image) == 4
    src.close()


def test_video_realtime_without_loop_ends(tmp_path):
    clock = FakeClock()
    path = write_video(tmp_path / "v.avi", n=10, fps=10.0)
    src = VideoFileSource(str(path), mode="realtime", loop=False, clock=clock)
    src.open()
    clock.t += 0.95
    assert value_index(src.read().image) == 9
    clock.t += 0.2
    with pytest.raises(EndOfStream):
        src.read()


def test_video_missing_and_corrupt_files_are_source_errors(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        VideoFileSource(str(tmp_path / "nope.mp4")).open()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"this is not a video" * 100)
    with pytest.raises(SourceError):
        src = VideoFileSource(str(bad), mode="step")
        src.open()
        src.read()


def test_folder_natural_order_loop_skip_corrupt(tmp_path):
    for i in (0, 1, 2, 10):
        cv2.imwrite(str(tmp_path / f"img{i}.png"), np.full((8, 8, 3), i * 10, np.uint8))
    (tmp_path / "img5.jpg").write_bytes(b"\xff\xd8\xffgarbage")   # corrupt, skipped
    (tmp_path / "notes.txt").write_text("not an image")
    src = make_source("folder", path=str(tmp_path), loop=True)
    src.open()
    got = [value_index(src.read().image) for _ in range(6)]
    assert got == [0, 1, 2, 10, 0, 1]
    assert src.skipped == ["img5.jpg"]
    src.close()


def test_folder_without_loop_ends_and_missing_folder_fails(tmp_path):
    cv2.imwrite(str(tmp_path / "a.jpg"), np.full((8, 8, 3), 30, np.uint8))
    src = ImageFolderSource(str(tmp_path), loop=False)
    src.open()
    assert value_index(src.read().image) == 3
    with pytest.raises(EndOfStream):
        src.read()
    with pytest.raises(SourceError, match="not found"):
        ImageFolderSource(str(tmp_path / "missing")).open()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="no .png"):
        ImageFolderSource(str(empty)).open()


def test_webcam_missing_device_is_a_source_error():
    with pytest.raises(SourceError, match="does not exist"):
        WebcamSource("/dev/video_does_not_exist").open()
    # an index with no camera: what is there and how to go on, in one message
    with pytest.raises(SourceError, match=r"cannot open webcam 97 \((devices here|no /dev/vid)"
                       r".*source:=video \(bringup --video FILE\)"):
        WebcamSource(97).open()


def test_parse_user_data_liberal_shapes():
    d = parse_user_data(json.dumps({"timestamp": 12.5, "users": [
        {"id": 7, "bbox": {"x": 1, "y": 2, "w": 3, "h": 4}, "pos": {"x": 0.5, "y": 0, "z": 2},
         "rot": {"x": 1, "y": 2, "z": 3}, "emotion": {"hap": 0.1, "sur": 0.8},
         "landmarks": [[1, 2], [3, 4]]},
        {"id": "b", "bbox": [5, 6, 7, 8], "position": [1, 2, 3],
         "rotation": {"pitch": 4, "yaw": 5, "roll": 6}, "emotion": "neutral",
         "landmarks": [{"x": 9, "y": 10}]},
        "not a user",
        {"box": {"left": 10, "top": 10, "right": 30, "bottom": 50}, "pos": "bogus",
         "emotions": [{"type": "SAD", "score": 0.2}, {"type": "HAPPY", "score": 0.9}]},
    ]}).encode())
    assert d.timestamp == 12.5 and len(d.users) == 3
    a, b, c = d.users
    assert (a.id, a.bbox, a.position, a.rotation, a.emotion, a.landmarks) == (
        "7", (1, 2, 3, 4), (0.5, 0.0, 2.0), (1.0, 2.0, 3.0), "sur", [1.0, 2.0, 3.0, 4.0])
    assert (b.bbox, b.position, b.rotation, b.emotion, b.landmarks) == (
        (5, 6, 7, 8), (1.0, 2.0, 3.0), (4.0, 5.0, 6.0), "neutral", [9.0, 10.0])
    assert (c.id, c.bbox, c.position, c.emotion) == ("3", (10, 10, 20, 40), (0, 0, 0), "HAPPY")
    for bad in (b"\xff\xd8\xff\x00", b"\x00\x01garbage", b"[1, 2", b'"just a string"',
                b'{"users": 5}'):
        with pytest.raises(ValueError):
            parse_user_data(bad)
    assert parse_user_data(b'{"users": []}').users == []


def test_users_to_msg():
    d = parse_user_data(b'{"users": [{"id": "u", "bbox": {"x": 1, "y": 2, "w": 3, "h": 4}, '
                        b'"pos": {"x": 1, "y": 2, "z": 3}, "emotion": "joy", '
                        b'"landmarks": [1, 2]}]}')
    from builtin_interfaces.msg import Time
    msg = users_to_msg(d, Time(sec=5, nanosec=6), "furhat_camera")
    assert msg.header.frame_id == "furhat_camera" and msg.header.stamp.sec == 5
    u = msg.users[0]
    assert (u.id, u.bbox.x_offset, u.bbox.y_offset, u.bbox.width, u.bbox.height) == (
        "u", 1, 2, 3, 4)
    assert (u.position.z, u.emotion, list(u.landmarks)) == (3.0, "joy", [1.0, 2.0])
    assert json.loads(msg.raw_json)["users"][0]["id"] == "u"


def wait_for(pred, timeout=5.0, step=0.01):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


@pytest.fixture
def fake_cam():
    cam = FakeFurhatCamera()
    yield cam
    cam.close()


def connect_feed(cam, feed):
    """Send pairs until the SUB is connected (ZeroMQ drops messages before that)."""
    i = 0
    while feed.frames == 0 and i < 500:
        cam.send_pair(0)
        time.sleep(0.01)
        i += 1
    assert feed.frames > 0


def test_feed_keeps_latest_frame_parses_users_ignores_garbage(fake_cam):
    users = []
    feed = FurhatCameraFeed("127.0.0.1", fake_cam.port,
                            on_users=lambda d, ns: users.append((d, ns)))
    feed.start()
    try:
        connect_feed(fake_cam, feed)
        frames_before, users_before = feed.frames, feed.user_messages
        fake_cam.send_raw(b"\x00garbage\xff")          # neither JPEG nor JSON
        for i in range(1, 8):
            fake_cam.send_pair(i)
        assert wait_for(lambda: feed.user_messages >= users_before + 7)
        jpeg, stamp, seq = feed.latest()
        assert jpeg[:3] == b"\xff\xd8\xff"
        assert frame_index(cv2.imdecode(np.frombuffer(jpeg, np.uint8), 1)) == 7
        assert feed.frames == frames_before + 7 and seq == feed.frames
        assert feed.garbage == 1
        last, ns = users[-1]
        assert last.users[0].id == "user-7" and last.users[0].bbox == (17, 20, 30, 40)
        assert last.users[0].emotion == "hap" and last.users[0].landmarks == [1, 2, 3, 4]
        assert abs(ns - time.time_ns()) < 5e9
    finally:
        feed.stop()


def test_feed_source_returns_only_new_latest_frames(fake_cam):
    src = FurhatFeedSource("127.0.0.1", fake_cam.port, timeout=2.0)
    src.open()
    try:
        connect_feed(fake_cam, src.feed)
        f = src.read()
        assert f is not None and f.jpeg[:3] == b"\xff\xd8\xff"
        assert src.read() is None                   # nothing new since
        n = src.feed.frames
        for i in range(3, 6):
            fake_cam.send_pair(i)
        assert wait_for(lambda: src.feed.frames == n + 3)
        f = src.read()
        assert frame_index(f.image) == 5 and f.image.shape == (120, 160, 3)
        assert src.read() is None
        fake_cam.send_raw(b"\xff\xd8\xff\xe0 truncated jpeg")   # corrupt frame
        assert wait_for(lambda: src.feed.frames == n + 4)
        with pytest.raises(SourceError, match="corrupt") as e:
            src.read()
        assert e.value.reopen is False
    finally:
        src.close()


def test_feed_source_unreachable_robot_times_out():
    src = FurhatFeedSource("127.0.0.1", 1, timeout=0.2)   # nothing listens on port 1
    src.open()
    try:
        assert src.read() is None
        time.sleep(0.3)
        with pytest.raises(SourceError, match="unreachable"):
            src.read()
    finally:
        src.close()


def test_furhat_realtime_source_against_fake_websocket_server():
    from fake_furhat_realtime import FakeFurhatRealtime
    from vision_dialogue.furhat.camera_sources import FurhatRealtimeSource

    fake = FakeFurhatRealtime(key="k").start()
    try:
        src = FurhatRealtimeSource("127.0.0.1", fake.port, key="k", timeout=2.0)
        src.open()
        f1, f2 = src.read(), src.read()
        assert f1.jpeg == fake.jpeg and f1.image.shape == (240, 320, 3)
        assert f2.stamp_ns > f1.stamp_ns and (f1.index, f2.index) == (0, 1)
        assert fake.types().count("request.camera.once") == 2
        src.close()
        with pytest.raises(SourceError, match="refused"):
            FurhatRealtimeSource("127.0.0.1", fake.port, key="wrong", timeout=2.0).open()
    finally:
        fake.stop()
    with pytest.raises(SourceError, match="cannot connect"):
        FurhatRealtimeSource("127.0.0.1", fake.port, timeout=0.5).open()


def test_webcam_source_reads_a_capture_path_in_order(tmp_path):
    # OpenCV opens a video file like a capture device: the webcam code path without hardware
    path = write_video(tmp_path / "cam.avi", n=4)
    with WebcamSource(str(path)) as cam:
        assert [value_index(cam.read().image) for _ in range(4)] == [0, 1, 2, 3]
        with pytest.raises(SourceError, match="stopped delivering"):
            cam.read()
