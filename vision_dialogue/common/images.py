"""Camera frames and the image policy: downscaling, JPEG data URLs, encoded once per size.

The newest frame goes into the prompt at `newest_max_side`, older frames at `older_max_side`.
Each frame caches its encodings (one per max side), so a turn only looks strings up instead of
re-encoding every frame. `ImagePolicy.prepare(frame)` warms both sizes at arrival time.
"""
from __future__ import annotations

import base64
import io
import threading
import time
from dataclasses import dataclass, field

import cv2
import numpy as np

DETAILS = ("low", "high", "auto")
#: the first bytes of every JPEG file
JPEG_MAGIC = b"\xff\xd8\xff"
#: default cap on an image's pixels before it is decoded (`max_image_pixels` parameters):
#: a 600-byte JPEG can declare 20000x20000 and take gigabytes to decode
DEFAULT_MAX_PIXELS = 4096 * 4096


class ImageDecodeError(ValueError):
    """An image that cannot or must not be decoded.

    `cause` is a short key for counting rejections ("empty", "corrupt", "too_large", "encoding",
    "inconsistent").
    """

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


def encoded_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) that a JPEG/PNG/...

    declares in its header, read without decoding.

    None if it is no image; ImageDecodeError("too_large") if it declares more pixels than
    the image library will even look at.
    """
    from PIL import Image, UnidentifiedImageError
    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.size
    except Image.DecompressionBombError as e:
        raise ImageDecodeError(f"image rejected before decoding: {e}", "too_large") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None


def check_pixels(width: int, height: int, max_pixels: int) -> None:
    """ImageDecodeError("too_large") when width x height is over `max_pixels`."""
    if int(width) * int(height) > max_pixels:
        raise ImageDecodeError(f"image of {width}x{height} is over the {max_pixels}-pixel limit "
                               "(max_image_pixels)", "too_large")


def decode_guarded(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Compressed image bytes -> BGR array, after checking the size its header declares."""
    if not data:
        raise ImageDecodeError("empty compressed image", "empty")
    size = encoded_size(data)
    if size is None:
        raise ImageDecodeError("not a readable JPEG/PNG image", "corrupt")
    check_pixels(size[0], size[1], max_pixels)
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ImageDecodeError(f"corrupt {size[0]}x{size[1]} compressed image", "corrupt")
    return img


@dataclass(frozen=True)
class ImagePolicy:
    """How frames become image parts of the prompt."""

    newest_max_side: int = 640
    older_max_side: int = 256
    jpeg_quality: int = 80
    detail: str = "low"
    dark_threshold: float = 20.0   # mean grey level (0..255) under which a frame counts as dark

    def __post_init__(self):
        for name in ("newest_max_side", "older_max_side"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 16:
                raise ValueError(f"{name}={v!r} must be an integer >= 16")
        if not 1 <= int(self.jpeg_quality) <= 100:
            raise ValueError(f"jpeg_quality={self.jpeg_quality!r} must be in [1, 100]")
        if self.detail not in DETAILS:
            raise ValueError(f"image_detail={self.detail!r} must be one of {list(DETAILS)}")

    def part(self, frame: "Frame", newest: bool) -> dict:
        """The OpenAI image part for `frame` (cached data URL)."""
        side = self.newest_max_side if newest else self.older_max_side
        return {"type": "image_url",
                "image_url": {"url": frame.data_url(side, self.jpeg_quality),
                              "detail": self.detail}}

    def prepare(self, frame: "Frame") -> None:
        """Encode both sizes now (at arrival) so turns never wait for JPEG encoding."""
        frame.data_url(self.newest_max_side, self.jpeg_quality)
        frame.data_url(self.older_max_side, self.jpeg_quality)


def downscale(bgr: np.ndarray, max_side: int) -> np.ndarray:
    """Shrink so the longer side is at most `max_side` (never enlarges)."""
    h, w = bgr.shape[:2]
    s = max(h, w)
    if s <= max_side:
        return bgr
    scale = max_side / s
    return cv2.resize(bgr, (max(1, round(w * scale)), max(1, round(h * scale))),
                      interpolation=cv2.INTER_AREA)


def jpeg_bytes(bgr: np.ndarray, max_side: int, quality: int) -> bytes:
    """JPEG bytes of `bgr` downscaled to `max_side` (ValueError if OpenCV cannot encode it)."""
    ok, enc = cv2.imencode(".jpg", downscale(bgr, max_side), [cv2.IMWRITE_JPEG_QUALITY,
                                                              int(quality)])
    if not ok:
        raise ValueError(f"JPEG encoding failed for an image of shape {bgr.shape}")
    return enc.tobytes()


def resize_to(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize to width x height; a 0 keeps the aspect ratio; both 0 = unchanged."""
    h, w = img.shape[:2]
    if not width and not height:
        return img
    if not height:
        height = max(1, round(h * width / w))
    if not width:
        width = max(1, round(w * height / h))
    if (width, height) == (w, h):
        return img
    interp = cv2.INTER_AREA if width * height < w * h else cv2.INTER_LINEAR
    return cv2.resize(img, (width, height), interpolation=interp)


def as_bgr(img: np.ndarray) -> np.ndarray:
    """Validate and normalise an image to HxWx3 uint8 BGR; raises ValueError on bad input."""
    if not isinstance(img, np.ndarray):
        raise ValueError(f"frame must be a numpy array, got {type(img).__name__}")
    if img.dtype != np.uint8:
        raise ValueError(f"frame must be uint8, got {img.dtype}")
    if img.ndim == 2 or img.ndim == 3 and img.shape[2] == 1:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    elif img.ndim == 3 and img.shape[2] == 4:
        img = img[:, :, :3]
    if img.ndim != 3 or img.shape[2] != 3 or img.shape[0] < 1 or img.shape[1] < 1:
        raise ValueError(f"frame must be HxWx3 (or HxW), got shape {img.shape}")
    return np.ascontiguousarray(img)


@dataclass(eq=False)
class Frame:
    """One camera frame as seen by the conversation: pixels, time, and cached encodings."""

    bgr: np.ndarray
    id: int = 0                     # set by the timeline on arrival
    stamp: float = field(default_factory=time.time)   # seconds since the epoch
    observation: str | None = None   # text observation, for text-only backends
    people: int | None = None        # people the observer counted (None: not counted)
    dark: bool = False
    objects: str = ""                # what an object detector named in it (common/objects.py)
    _cache: dict = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def set_objects(self, note: str, text_only: bool) -> None:
        """An object detector's note for this frame (a newer one replaces it).

        For a text-only backend it is also the end of the observation, so the summaries, the
        look-back and the reply filter read it as part of what was seen.
        """
        old, self.objects = self.objects, " ".join(note.split())
        if not text_only:
            return
        base = self.observation or ""
        if old and base.endswith(old):
            base = base[:-len(old)].rstrip("; ")
        self.observation = "; ".join(t for t in (base, self.objects) if t) or None

    def _cached(self, key, make):
        """`make()` once per key (thread-safe; a maker may use other cached values)."""
        got = self._cache.get(key)
        if got is None:
            with self._lock:
                got = self._cache.get(key)
                if got is None:
                    got = self._cache[key] = make()
        return got

    def jpeg(self, max_side: int, quality: int) -> bytes:
        """JPEG bytes at `max_side` (encoded once, then cached)."""
        return self._cached(("jpg", max_side, quality),
                            lambda: jpeg_bytes(self.bgr, max_side, quality))

    def stored_jpeg(self, max_side: int, quality: int, redact=None) -> bytes:
        """JPEG bytes for storage: `redact(bgr) -> bgr` (face blurring) applied once, cached.

        A failing `redact` raises: an unredacted frame is never returned in its place.
        """
        if redact is None:
            return self.jpeg(max_side, quality)
        return self._cached(("stored", max_side, quality), lambda: jpeg_bytes(
            self._cached("redacted", lambda: redact(self.bgr)), max_side, quality))

    def data_url(self, max_side: int, quality: int) -> str:
        """`data:image/jpeg;base64,...` at `max_side` (cached)."""
        return self._cached(("url", max_side, quality), lambda: "data:image/jpeg;base64," +
                            base64.b64encode(self.jpeg(max_side, quality)).decode("ascii"))


#: size of the grey thumbnails two frames are compared on (a changed view, OCR reuse)
CHANGE_THUMB = (32, 24)


def change_thumbnail(img: np.ndarray) -> np.ndarray:
    """A 32x24 grey thumbnail (int16) of a BGR or grey frame, for `thumbnail_difference`."""
    grey = img if img.ndim == 2 else cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    return cv2.resize(grey, CHANGE_THUMB, interpolation=cv2.INTER_AREA).astype(np.int16)


def thumbnail_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute grey-level difference (0..255) of two change thumbnails."""
    return float(np.abs(a - b).mean())


def is_dark(bgr: np.ndarray, threshold: float) -> bool:
    """True when the frame's mean grey level (on a small copy) is under `threshold`."""
    small = downscale(bgr, 64)
    return float(small.mean()) < threshold
