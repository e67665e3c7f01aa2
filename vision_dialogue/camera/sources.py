"""Camera sources with one interface, no ROS: webcam, video file, image folder, Furhat feeds.

Every source has ``open()``, ``read() -> CapturedFrame | None`` and ``close()``:

- ``open()`` acquires the device/file/connection; raises `SourceError` if it cannot.
- ``read()`` returns the next `CapturedFrame` (BGR image + wall-clock acquisition stamp in ns, plus
  the original JPEG bytes when the source delivered JPEG), ``None`` when no new frame is
  available yet (not an error), raises `SourceError` on a failure and `EndOfStream` when a
  non-looping video or folder is finished.
- ``close()`` releases everything; it is safe to call twice, and ``open()`` may follow again.

`CAMERA_SOURCES` is the one table of sources; each lists the parameters it reads (`PARAMS`,
declared by the camera node) and builds itself from them (`from_params(p, ctx)`), and
`make_source(kind, **options)` builds one by name with explicit options. The camera node
retries a failing source with backoff; the sources themselves never sleep or retry. A new
source is one module and one row (docs/camera.md).
"""
from __future__ import annotations

import glob
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from vision_dialogue.common.images import DEFAULT_MAX_PIXELS, ImageDecodeError, decode_guarded
from vision_dialogue.variants import Param, VariantTable

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class SourceError(RuntimeError):
    """A source failure (no device, missing file, robot unreachable, corrupt data).

    reopen: whether the source must be closed and opened again to recover (False for a
    single bad frame from a live connection).
    """

    def __init__(self, message: str, reopen: bool = True):
        super().__init__(message)
        self.reopen = reopen


class EndOfStream(Exception):
    """A non-looping video or folder has delivered its last frame."""


@dataclass
class CapturedFrame:
    """One acquired frame: BGR uint8 image, wall-clock stamp (ns), source JPEG, index."""

    image: np.ndarray
    stamp_ns: int
    jpeg: bytes | None = None
    index: int = -1


def decode_jpeg(jpeg: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray | None:
    """JPEG bytes -> BGR image; None if they do not decode or declare too many pixels."""
    try:
        return decode_guarded(jpeg, max_pixels)
    except ImageDecodeError:
        return None


@dataclass
class SourceContext:
    """What the camera node gives a source it builds besides its parameters."""

    device: int | str = 0                         # the `device` parameter, parsed
    on_users: Callable | None = None              # people a robot camera tracks
    logger: object = None


LOOP = Param("loop", True, "Restart the video/folder at its end (else stop publishing).")
MAX_IMAGE_PIXELS = Param("max_image_pixels", DEFAULT_MAX_PIXELS, "Largest image (width x "
                         "height) decoded from the Furhat feeds and image folders, checked "
                         "before decoding; larger ones are skipped.", range=(1, 2**31 - 1))
"""Parameters more than one source reads (the same Param in each one's PARAMS)."""


class CameraSource:
    """Base class: the common interface (see module docstring)."""

    kind = "base"
    PARAMS: list[Param] = []      # the node parameters this source reads besides the node's
    FILE_PARAM = ""               # a file parameter that, given, means this source
    ROBOT_HOST_PARAM = ""         # the parameter naming the robot whose camera it reads (doctor)

    @classmethod
    def check(cls, p) -> str | None:
        """This source's checks of the node's parameters together (an error or None)."""
        return None

    @classmethod
    def from_params(cls, p, ctx: SourceContext) -> "CameraSource":
        """Build the source from the camera node's parameters `p` (a mapping)."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind

    def open(self) -> None:
        raise NotImplementedError

    def read(self) -> CapturedFrame | None:
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
    at most one capture interval old even when read every few seconds.
    """

    kind = "webcam"

    @classmethod
    def from_params(cls, p, ctx: SourceContext) -> "WebcamSource":
        return cls(ctx.device)

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
            devices = sorted(glob.glob("/dev/video*"))
            raise SourceError(
                f"cannot open webcam {self.device} ("
                + (f"devices here: {', '.join(devices)}" if devices else "no /dev/video* device")
                + "); the robot cannot see. Fix: connect one, pick another with device:=N "
                  "(bringup --camera N), or play a file with source:=video (bringup --video FILE)")
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)
        self._cap = cap

    def read(self) -> CapturedFrame | None:
        if self._cap is None:
            raise SourceError("webcam is not open")
        ok, img = self._cap.read()
        if not ok or img is None:
            raise SourceError(f"webcam {self.device} stopped delivering frames")
        self._index += 1
        return CapturedFrame(img, time.time_ns(), index=self._index - 1)

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
    FILE_PARAM = "video_path"
    PARAMS = [
        Param("video_path", "", "Video file to play (source=video or auto; a missing file is "
              "retried, not a startup error)."),
        Param("video_mode", "realtime", "realtime: play the file at its fps and publish the "
              "current frame each tick; step: one file frame per tick.",
              choices=("realtime", "step")),
        LOOP]

    @classmethod
    def check(cls, p) -> str | None:
        return None if p["video_path"].strip() else "video_path: required when source=video"

    @classmethod
    def from_params(cls, p, ctx: SourceContext) -> "VideoFileSource":
        return cls(p["video_path"], mode=p["video_mode"], loop=p["loop"])

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

    def read(self) -> CapturedFrame | None:
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
            return CapturedFrame(img, time.time_ns(), index=self._pos - 1)
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
    again at every wrap-around, so files added meanwhile are picked up.
    """

    kind = "folder"
    FILE_PARAM = "folder_path"
    PARAMS = [Param("folder_path", "", "Folder of .png/.jpg images to play (source=folder or "
                    "auto; natural name order)."), LOOP, MAX_IMAGE_PIXELS]

    @classmethod
    def check(cls, p) -> str | None:
        return None if p["folder_path"].strip() else "folder_path: required when source=folder"

    @classmethod
    def from_params(cls, p, ctx: SourceContext) -> "ImageFolderSource":
        return cls(p["folder_path"], loop=p["loop"], max_pixels=p["max_image_pixels"])

    def __init__(self, path: str, loop: bool = True, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.path, self.loop, self.max_pixels = str(path), bool(loop), int(max_pixels)
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

    def read(self) -> CapturedFrame | None:
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
            img = self._load(path)
            if img is not None:
                return CapturedFrame(img, time.time_ns(), index=idx)
            if path.name not in self.skipped:
                self.skipped.append(path.name)
            bad += 1
            if bad >= len(self.files):
                raise SourceError(f"no readable image in folder {self.path} "
                                  f"(corrupt: {', '.join(self.skipped[:5])})")

    def _load(self, path: Path) -> np.ndarray | None:
        """The image, or None if unreadable or over max_pixels (it is then skipped)."""
        try:
            return decode_guarded(path.read_bytes(), self.max_pixels)
        except (OSError, ImageDecodeError):
            return None

    def close(self) -> None:
        self._opened = False


CAMERA_SOURCES = VariantTable("source", "camera source", {
    "webcam": "vision_dialogue.camera.sources:WebcamSource",
    "video": "vision_dialogue.camera.sources:VideoFileSource",
    "folder": "vision_dialogue.camera.sources:ImageFolderSource",
    "furhat": "vision_dialogue.furhat.camera_sources:FurhatFeedSource",
    "furhat_realtime": "vision_dialogue.furhat.camera_sources:FurhatRealtimeSource",
}, fallback="webcam")
"""The camera node's `source` parameter value -> "module:Class" (variants/table.py); auto: the
video_path or folder_path given, else the webcam."""


def make_source(kind: str, **options) -> CameraSource:
    """Build a source by kind ("webcam", "video", "folder", "furhat", "furhat_realtime")."""
    return CAMERA_SOURCES.load(kind)(**options)
