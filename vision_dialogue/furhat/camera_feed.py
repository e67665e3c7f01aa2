"""Furhat's external camera feed (ZeroMQ) and its user data, with no ROS in the feed client.

The robot publishes on ``tcp://<robot>:3000`` (ZeroMQ PUB) single-part messages that alternate
between a JPEG frame (bytes starting ``ff d8 ff``) and a JSON document describing the users
the robot sees, e.g.::

    {"timestamp": 1700000000.1, "users": [{"id": "user-1",
      "bbox": {"x": 100, "y": 80, "w": 60, "h": 60}, "landmarks": [...],
      "pos": {"x": 0.1, "y": 0.0, "z": 1.2}, "rot": {"x": 0, "y": 10, "z": 0},
      "emotion": {"hap": 0.8, "neu": 0.2}}]}

`FurhatCameraFeed` runs one background receive thread that keeps only the newest frame
(ZeroMQ's CONFLATE is not used: with two alternating message kinds it would drop whole kinds)
and hands each user-data message to a callback. `parse_user_data` is liberal about field names
and shapes (see its docstring); ros/furhat_msgs.py makes a DetectedUsers message
(vision_dialogue_interfaces) of it.
"""
from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import zmq

from vision_dialogue.common.images import JPEG_MAGIC


log = logging.getLogger(__name__)


@dataclass
class FurhatUser:
    """One user as reported by the robot (bbox in pixels x, y, w, h)."""

    id: str
    bbox: tuple[int, int, int, int] = (0, 0, 0, 0)
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    emotion: str = ""
    landmarks: list[float] = field(default_factory=list)


@dataclass
class FurhatUserData:
    """One user-data message: the robot's timestamp (if any), users, and the original JSON."""

    timestamp: float | None
    users: list[FurhatUser]
    raw_json: str


# ------------------------------------------------------------------------------- parsing
def _num(v: Any, default: float = 0.0) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


def _first(d: dict, *keys, default=None):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def _vec3(v: Any, names=(("x",), ("y",), ("z",))) -> tuple[float, float, float]:
    """{x,y,z} (or the alternative names given), or a 3-list; anything else -> zeros."""
    if isinstance(v, dict):
        return tuple(_num(_first(v, *alts)) for alts in names)  # type: ignore[return-value]
    if isinstance(v, (list, tuple)) and len(v) >= 3:
        return (_num(v[0]), _num(v[1]), _num(v[2]))
    return (0.0, 0.0, 0.0)


def _bbox(v: Any) -> tuple[int, int, int, int]:
    """{x,y,w,h} / {x,y,width,height} / {left,top,right,bottom} / [x,y,w,h] -> (x, y, w, h)."""
    if isinstance(v, dict):
        x = _num(_first(v, "x", "left", "xmin"))
        y = _num(_first(v, "y", "top", "ymin"))
        w = _first(v, "w", "width")
        h = _first(v, "h", "height")
        if w is None and _first(v, "right", "xmax") is not None:
            w = _num(_first(v, "right", "xmax")) - x
        if h is None and _first(v, "bottom", "ymax") is not None:
            h = _num(_first(v, "bottom", "ymax")) - y
        vals = (x, y, _num(w), _num(h))
    elif isinstance(v, (list, tuple)) and len(v) >= 4:
        vals = tuple(_num(a) for a in v[:4])
    else:
        return (0, 0, 0, 0)
    return tuple(max(0, int(round(a))) for a in vals)  # type: ignore[return-value]


def _emotion(v: Any) -> str:
    """A label, {label: score} (highest wins) or [{label|type|name, score|confidence}]."""
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and v:
        scored = [(k, _num(s, -math.inf)) for k, s in v.items()
                  if isinstance(s, (int, float)) and not isinstance(s, bool)]
        if scored:
            return max(scored, key=lambda kv: kv[1])[0]
        label = _first(v, "label", "type", "name", "emotion")
        return str(label) if label is not None else ""
    if isinstance(v, list) and v:
        best, best_score = "", -math.inf
        for item in v:
            if isinstance(item, dict):
                label = _first(item, "label", "type", "name", "emotion")
                score = _num(_first(item, "score", "confidence", "value"), 0.0)
                if label is not None and score > best_score:
                    best, best_score = str(label), score
        return best
    return ""


def _landmarks(v: Any) -> list[float]:
    """Flat [x0, y0, x1, y1, ...], [[x, y], ...] or [{x, y}, ...] -> flat floats."""
    out: list[float] = []
    if not isinstance(v, list):
        return out
    for item in v:
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            out.append(_num(item))
        elif isinstance(item, (list, tuple)) and len(item) >= 2:
            out += [_num(item[0]), _num(item[1])]
        elif isinstance(item, dict):
            out += [_num(item.get("x")), _num(item.get("y"))]
    return out


def parse_user_data(payload: bytes | str) -> FurhatUserData:
    """Parse one user-data message; raises ValueError if it is not a JSON user document.

    Accepted: ``{"timestamp"?, "users"|"faces": [...]}`` or a bare list of users. Per user:
    id (any type), bbox, pos|position|location, rot|rotation|head_rotation ({x,y,z} or
    {pitch,yaw,roll}), emotion (see `_emotion`), landmarks. Missing fields become defaults;
    a user that is not an object is skipped.
    """
    if isinstance(payload, (bytes, bytearray, memoryview)):
        try:
            text = bytes(payload).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"user data is not UTF-8: {e}") from None
    else:
        text = str(payload)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"user data is not JSON: {e}") from None
    if isinstance(doc, list):
        doc = {"users": doc}
    if not isinstance(doc, dict):
        raise ValueError(f"user data is a JSON {type(doc).__name__}, not an object")
    raw_users = _first(doc, "users", "faces", default=[])
    if not isinstance(raw_users, list):
        raise ValueError("user data 'users' is not a list")
    ts = doc.get("timestamp")
    users = []
    for i, u in enumerate(raw_users):
        if not isinstance(u, dict):
            continue
        uid = _first(u, "id", "user_id", "userId", default=i)
        rot = _first(u, "rot", "rotation", "head_rotation", "headRotation")
        users.append(FurhatUser(
            id=str(uid),
            bbox=_bbox(_first(u, "bbox", "box", "rect", "face")),
            position=_vec3(_first(u, "pos", "position", "location")),
            rotation=_vec3(rot, (("x", "pitch"), ("y", "yaw"), ("z", "roll"))),
            emotion=_emotion(_first(u, "emotion", "emotions", "expression")),
            landmarks=_landmarks(_first(u, "landmarks", "landmark", default=[]))))
    return FurhatUserData(timestamp=_num(ts) if ts is not None else None, users=users,
                          raw_json=text)


# ------------------------------------------------------------------------------- feed client
class FurhatCameraFeed:
    """Background SUB client of the Furhat camera feed; keeps only the newest JPEG frame.

    on_users(FurhatUserData, stamp_ns) is called from the receive thread for each user-data
    message. Messages that are neither a JPEG nor user JSON are counted in `garbage` and
    logged once (with `logger`, a logging.Logger-like object).
    """

    def __init__(self, host: str, port: int = 3000, *,
                 on_users: Callable[[FurhatUserData, int], None] | None = None,
                 logger=None, poll_ms: int = 100):
        self.endpoint = f"tcp://{host}:{int(port)}"
        self.on_users = on_users
        self.log = logger or log
        self.poll_ms = int(poll_ms)
        self.frames = 0            # JPEG frames received
        self.user_messages = 0     # user-data messages parsed
        self.garbage = 0           # messages that were neither
        self.last_message_ns: int | None = None   # monotonic ns of the last message
        self._latest: tuple[bytes, int, int] | None = None   # (jpeg, stamp_ns, seq)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx = zmq.Context.instance()
        self.started_ns: int | None = None

    def start(self) -> None:
        """Connect and start the receive thread (connecting never fails: ZeroMQ retries)."""
        if self._thread is not None:
            return
        self._stop.clear()
        ready = threading.Event()
        self.started_ns = time.monotonic_ns()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name="furhat-camera-feed")
        self._thread.start()
        ready.wait(2.0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._thread = None

    def latest(self) -> tuple[bytes, int, int] | None:
        """(jpeg bytes, wall-clock receipt stamp ns, sequence number) of the newest frame."""
        with self._lock:
            return self._latest

    def _run(self, ready: threading.Event) -> None:
        sock = self._ctx.socket(zmq.SUB)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVHWM, 4)       # a short queue; we drain it anyway
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.connect(self.endpoint)
            ready.set()
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLIN)
            while not self._stop.is_set():
                if not poller.poll(self.poll_ms):
                    continue
                # drain everything queued; only the newest frame survives
                while True:
                    try:
                        parts = sock.recv_multipart(zmq.NOBLOCK, copy=True)
                    except zmq.Again:
                        break
                    for part in parts:
                        self._handle(part)
        except zmq.ZMQError as e:  # e.g. context terminated
            if not self._stop.is_set():
                self.log.error(f"Furhat camera feed {self.endpoint}: {e}")
        finally:
            ready.set()
            sock.close(0)

    def _handle(self, data: bytes) -> None:
        now = time.time_ns()
        self.last_message_ns = time.monotonic_ns()
        if data[:3] == JPEG_MAGIC:
            with self._lock:
                self.frames += 1
                self._latest = (data, now, self.frames)
            return
        try:
            parsed = parse_user_data(data)
        except ValueError as e:
            self.garbage += 1
            if self.garbage == 1:
                self.log.warning(f"Furhat camera feed {self.endpoint}: ignoring a message that "
                                 f"is neither a JPEG frame nor user data ({e}); further ones "
                                 "are only counted")
            return
        self.user_messages += 1
        if self.on_users is not None:
            try:
                self.on_users(parsed, now)
            except Exception as e:  # noqa: BLE001 - a callback must not kill the thread
                self.log.error(f"Furhat user-data callback failed: {e!r}")
