"""Camera sources with one interface, no ROS: webcam, video file, image folder, Furhat feeds.

Every source has ``open()``, ``read() -> Frame | None`` and ``close()``:

- ``open()`` acquires the device/file/connection; raises `SourceError` if it cannot.
- ``read()`` returns the next `Frame` (BGR image + wall-clock acquisition stamp in ns, plus
  the original JPEG bytes when the source delivered JPEG), ``None`` when no new frame is
  available yet (not an error), raises `SourceError` on a failure and `EndOfStream` when a
  non-looping video or folder is finished.
- ``close()`` releases everything; it is safe to call twice, and ``open()`` may follow again.

`make_source(kind, **options)` builds one by name. The camera node retries a failing source
with backoff; the sources themselves never sleep or retry.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class SourceError(RuntimeError):
    """A source failure (no device, missing file, robot unreachable, corrupt data).

    reopen: whether the source must be closed and opened again to recover (False for a
    single bad frame from a live connection)."""

    def __init__(self, message: str, reopen: bool = True):
        super().__init__(message)
        self.reopen = reopen


class EndOfStream(Exception):
    """A non-looping video or folder has delivered its last frame."""


@dataclass
class Frame:
    """One acquired frame: BGR uint8 image, wall-clock stamp (ns), source JPEG, index."""
    image: np.ndarray
    stamp_ns: int
    jpeg: bytes | None = None
    index: int = -1


def decode_jpeg(jpeg: bytes) -> np.ndarray | None:
    """JPEG bytes -> BGR image, or None if they do not decode."""
    buf = np.frombuffer(jpeg, np.uint8)
    return cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None


class CameraSource:
    """Base class: the common interface (see module docstring)."""
    kind = "base"

    def describe(self) -> str:
        return self.kind

    def open(self) -> None:
        raise NotImplementedError

    def read(self) -> Frame | None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc):
        self.close()


class WebcamSource(CameraSource):
    """An OpenCV capture device (index like 0, or a path like /dev/video0).

    The driver buffer is set to one frame and each read grabs then retrieves, so a frame is
    at most one capture interval old even when read every few seconds."""
    kind = "webcam"

    def __init__(self, device: int | str = 0):
        self.device = device
        self._cap: cv2.VideoCapture | None = None
        self._index = 0

    def describe(self) -> str:
        return f"webcam {self.device}"

    def open(self) -> None:
        self.close()
        if isinstance(self.device, str) and not os.path.exists(self.device):
            raise SourceError(f"webcam device {self.device} does not exist")
        cap = cv2.VideoCapture(self.device)
        if not cap.isOpened():
            cap.release()
            raise SourceError(f"cannot open webcam {self.device}")
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)
        self._cap = cap

    def read(self) -> Frame | None:
        if self._cap is None:
            raise SourceError("webcam is not open")
        ok, img = self._cap.read()
        if not ok or img is None:
            raise SourceError(f"webcam {self.device} stopped delivering frames")
        self._index += 1
        return Frame(img, time.time_ns(), index=self._index - 1)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
        self._cap = None


class VideoFileSource(CameraSource):
    """A video file, in one of two modes.

    realtime: the file plays at its own fps from `open()`; each read returns the frame that
    is current now (skipping the ones in between), or None if that frame was already read.
    step: each read returns the next frame of the file.
    loop: start again at the end; otherwise `EndOfStream`. clock: monotonic seconds (tests).
    """
    kind = "video"

    def __init__(self, path: str, mode: str = "realtime", loop: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        if mode not in ("realtime", "step"):
            raise ValueError(f"video mode must be 'realtime' or 'step', not {mode!r}")
        self.path, self.mode, self.loop, self._clock = str(path), mode, bool(loop), clock
        self._cap: cv2.VideoCapture | None = None
        self.fps = 0.0
        self._pos = 0           # index of the next frame the decoder will deliver
        self._t0 = 0.0

    def describe(self) -> str:
        return f"video {self.path} ({self.mode}{', loop' if self.loop else ''})"

    def _open_cap(self) -> cv2.VideoCapture:
        if not os.path.isfile(self.path):
            raise SourceError(f"video file not found: {self.path}")
        cap = cv2.VideoCapture(self.path)
        if not cap.isOpened():
            cap.release()
            raise SourceError(f"cannot open video file {self.path} (unknown format or corrupt)")
        return cap

    def open(self) -> None:
        self.close()
        self._cap = self._open_cap()
        fps = self._cap.get(cv2.CAP_PROP_FPS)
        self.fps = float(fps) if fps and np.isfinite(fps) and 0 < fps <= 1000 else 30.0
        self._pos = 0
        self._t0 = self._clock()

    def _rewind(self) -> None:
        if self._cap is not None:
            self._cap.release()
        self._cap = self._open_cap()
        self._pos = 0

    def _end(self) -> None:
        """At the end of the file: raise, or rewind (and shift the realtime clock)."""
        length = self._pos
        if length == 0:
            raise SourceError(f"video file {self.path} has no readable frames")
        if not self.loop:
            raise EndOfStream(self.path)
        if self.mode == "realtime":
            played = (self._clock() - self._t0) * self.fps
            self._t0 += (int(played) // length) * length / self.fps
        self._rewind()

    def _decode_next(self) -> np.ndarray | None:
        ok, img = self._cap.read()
        return img if ok and img is not None else None

    def read(self) -> Frame | None:
        if self._cap is None:
            raise SourceError("video file is not open")
        for _ in range(2):  # a second try after rewinding at the end
            if self.mode == "step":
                img = self._decode_next()
                if img is None:
                    self._end()
                    continue
            else:
                target = int((self._clock() - self._t0) * self.fps)
                if target < self._pos:
                    return None     # the current frame was already delivered
                while self._pos < target and self._cap.grab():
                    self._pos += 1
                img = self._decode_next() if self._pos == target else None
                if img is None:
                    self._end()
                    continue
            self._pos += 1
            return Frame(img, time.time_ns(), index=self._pos - 1)
        raise SourceError(f"video file {self.path}: no frame after rewinding")

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
        self._cap = None


def natural_key(name: str):
    """Sort key that orders img2.png before img10.png."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


class ImageFolderSource(CameraSource):
    """The .png/.jpg/.jpeg files of a folder in natural name order, one per read.

    Unreadable files are skipped (their names are kept in `skipped`). The folder is listed
    again at every wrap-around, so files added meanwhile are picked up."""
    kind = "folder"

    def __init__(self, path: str, loop: bool = True):
        self.path, self.loop = str(path), bool(loop)
        self.files: list[Path] = []
        self.skipped: list[str] = []
        self._next = 0
        self._opened = False

    def describe(self) -> str:
        return f"image folder {self.path}{' (loop)' if self.loop else ''}"

    def _list(self) -> list[Path]:
        folder = Path(self.path)
        if not folder.is_dir():
            raise SourceError(f"image folder not found: {self.path}")
        files = sorted((p for p in folder.iterdir()
                        if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()),
                       key=lambda p: natural_key(p.name))
        if not files:
            raise SourceError(f"no .png/.jpg images in folder {self.path}")
        return files

    def open(self) -> None:
        self.files = self._list()
        self._next = 0
        self._opened = True

    def read(self) -> Frame | None:
        if not self._opened:
            raise SourceError("image folder is not open")
        bad = 0
        while True:
            if self._next >= len(self.files):
                if not self.loop:
                    raise EndOfStream(self.path)
                self.files = self._list()
                self._next = 0
            idx = self._next
            path = self.files[idx]
            self._next += 1
            img = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if img is not None:
                return Frame(img, time.time_ns(), index=idx)
            if path.name not in self.skipped:
                self.skipped.append(path.name)
            bad += 1
            if bad >= len(self.files):
                raise SourceError(f"no readable image in folder {self.path} "
                                  f"(corrupt: {', '.join(self.skipped[:5])})")

    def close(self) -> None:
        self._opened = False


class FurhatFeedSource(CameraSource):
    """The Furhat camera feed over ZeroMQ (`furhat_camera.FurhatCameraFeed`).

    read() returns the newest JPEG frame if it is newer than the last one read, else None;
    with no message from the robot for `timeout` seconds it raises SourceError (robot
    unreachable or feed disabled). on_users receives the user data (see FurhatCameraFeed)."""
    kind = "furhat"

    def __init__(self, host: str, port: int = 3000, timeout: float = 5.0,
                 on_users=None, logger=None):
        self.host, self.port, self.timeout = host, int(port), float(timeout)
        self.on_users, self.logger = on_users, logger
        self.feed = None
        self._last_seq = 0

    def describe(self) -> str:
        return f"Furhat camera feed tcp://{self.host}:{self.port}"

    def open(self) -> None:
        from vision_dialogue.furhat_camera import FurhatCameraFeed

        self.close()
        self.feed = FurhatCameraFeed(self.host, self.port, on_users=self.on_users,
                                     logger=self.logger)
        self.feed.start()
        self._last_seq = 0

    def read(self) -> Frame | None:
        if self.feed is None:
            raise SourceError("Furhat camera feed is not open")
        latest = self.feed.latest()
        now = time.monotonic_ns()
        last = self.feed.last_message_ns or self.feed.started_ns or now
        if now - last > self.timeout * 1e9:
            what = "no message" if self.feed.last_message_ns is None else "nothing new"
            raise SourceError(f"{what} from the Furhat camera feed {self.feed.endpoint} for "
                              f"{self.timeout:g} s (robot unreachable, or camera feed not "
                              "enabled under Settings > External feeds)", reopen=False)
        if latest is None or latest[2] == self._last_seq:
            return None
        jpeg, stamp_ns, seq = latest
        self._last_seq = seq
        img = decode_jpeg(jpeg)
        if img is None:
            raise SourceError(f"corrupt JPEG frame from {self.feed.endpoint}", reopen=False)
        return Frame(img, stamp_ns, jpeg=jpeg, index=seq)

    def close(self) -> None:
        if self.feed is not None:
            self.feed.stop()
        self.feed = None


class FurhatRealtimeSource(CameraSource):
    """Frames from the Furhat Realtime API (``request.camera.once`` per read), via
    `vision_dialogue.furhat_realtime.FurhatRealtimeClient`."""
    kind = "furhat_realtime"

    def __init__(self, host: str, port: int = 9000, key: str = "", timeout: float = 5.0,
                 logger=None):
        self.host, self.port, self.key = host, int(port), key or None
        self.timeout, self.logger = float(timeout), logger
        self.client = None
        self._index = 0

    def describe(self) -> str:
        return f"Furhat Realtime API camera ws://{self.host}:{self.port}"

    def open(self) -> None:
        from vision_dialogue.furhat_realtime import FurhatRealtimeClient, FurhatRealtimeError

        self.close()
        client = FurhatRealtimeClient(self.host, self.port, self.key, timeout=self.timeout,
                                      reconnect=False)
        try:
            client.connect()
        except FurhatRealtimeError as e:
            client.close()
            raise SourceError(str(e)) from None
        self.client = client

    def read(self) -> Frame | None:
        from vision_dialogue.furhat_realtime import FurhatRealtimeError

        if self.client is None:
            raise SourceError("Furhat Realtime API camera is not open")
        try:
            jpeg = self.client.camera_once()
        except FurhatRealtimeError as e:
            raise SourceError(f"Furhat Realtime API camera: {e}",
                              reopen=not self.client.connected) from None
        stamp = time.time_ns()
        img = decode_jpeg(jpeg)
        if img is None:
            raise SourceError(f"corrupt JPEG frame from {self.describe()}", reopen=False)
        self._index += 1
        return Frame(img, stamp, jpeg=jpeg, index=self._index - 1)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None


SOURCES = {c.kind: c for c in (WebcamSource, VideoFileSource, ImageFolderSource,
                               FurhatFeedSource, FurhatRealtimeSource)}


def make_source(kind: str, **options) -> CameraSource:
    """Build a source by kind ("webcam", "video", "folder", "furhat", "furhat_realtime")."""
    try:
        cls = SOURCES[kind]
    except KeyError:
        raise ValueError(f"unknown camera source {kind!r}; one of {sorted(SOURCES)}") from None
    return cls(**options)
