"""A fake Furhat camera feed.

A ZeroMQ PUB on 127.0.0.1 that sends JPEG frames and JSON user data alternately, like the robot's
external camera feed on port 3000.

Frames encode their index in the pixel values (`frame_value(i)`), so a test can tell which
frame it received after JPEG compression. Use either the explicit `send_*` calls from one
thread, or `start_stream(fps)` (a background thread; then do not call `send_*` yourself).
"""
from __future__ import annotations

import json
import threading

import cv2
import numpy as np
import zmq


def frame_value(i: int) -> int:
    """The grey value that frame i is filled with (distinguishable after JPEG)."""
    return (i * 10) % 250


def make_frame_jpeg(i: int, width: int = 160, height: int = 120) -> bytes:
    img = np.full((height, width, 3), frame_value(i), np.uint8)
    ok, enc = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return enc.tobytes()


def frame_index(img: np.ndarray) -> int:
    """Inverse of `frame_value` (modulo 25)."""
    return int(round(float(img.mean()) / 10.0))


def users_json(i: int) -> dict:
    return {"timestamp": 1700000000.0 + i,
            "users": [{"id": f"user-{i}",
                       "bbox": {"x": 10 + i, "y": 20, "w": 30, "h": 40},
                       "landmarks": [[1.0, 2.0], [3.0, 4.0]],
                       "pos": {"x": 0.1, "y": -0.2, "z": 1.5},
                       "rot": {"x": 1.0, "y": 2.0, "z": 3.0},
                       "emotion": {"hap": 0.7, "neu": 0.2, "sad": 0.1}}]}


class FakeFurhatCamera:
    """PUB socket bound to 127.0.0.1:`port` (a random free port unless given)."""

    def __init__(self, width: int = 160, height: int = 120, port: int | None = None):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        if port is None:
            self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        else:
            self.sock.bind(f"tcp://127.0.0.1:{port}")
            self.port = port
        self.width, self.height = width, height
        self.sent_frames = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def send_frame(self, i: int) -> None:
        self.sock.send(make_frame_jpeg(i, self.width, self.height))
        self.sent_frames += 1

    def send_users(self, i: int) -> None:
        self.sock.send(json.dumps(users_json(i)).encode())

    def send_raw(self, data: bytes) -> None:
        self.sock.send(data)

    def send_pair(self, i: int) -> None:
        """A JPEG frame then its user JSON, as the robot does."""
        self.send_frame(i)
        self.send_users(i)

    def start_stream(self, fps: float = 30.0) -> None:
        def run():
            i = 0
            while not self._stop.wait(1.0 / fps):
                self.send_pair(i)
                i += 1
        self._thread = threading.Thread(target=run, daemon=True, name="fake-furhat-camera")
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.sock.close(0)
        self.ctx.term()
