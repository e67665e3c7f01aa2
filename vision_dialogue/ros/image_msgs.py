"""numpy <-> sensor_msgs/Image and CompressedImage, without cv_bridge.

Images are HxWx3 uint8 arrays in BGR order (OpenCV's), or HxW mono8.
"""
from __future__ import annotations

import time

import cv2
import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CompressedImage, Image

from vision_dialogue.common.images import (DEFAULT_MAX_PIXELS, ImageDecodeError, check_pixels,
                                           decode_guarded)

_CHANNELS = {"bgr8": 3, "rgb8": 3, "mono8": 1, "bgra8": 4, "rgba8": 4}


class ImageConversionError(ImageDecodeError):
    """A message that cannot be turned into an image (bad encoding, size or data)."""

    def __init__(self, message: str, cause: str = "inconsistent"):
        super().__init__(message, cause)


def stamp_from_ns(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def stamp_to_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def stamp_seconds(stamp: Time) -> float | None:
    """A header stamp in seconds, None for an unset (zero) stamp.

    One way for every line's stamp: the manager pairs a speaker answer with its line by it.
    """
    ns = stamp_to_ns(stamp)
    return ns / 1e9 if ns else None


def wall_stamp() -> Time:
    """Wall-clock time.

    Only the default for callers without a node; nodes stamp headers with their clock
    (`node.get_clock().now().to_msg()`), which follows sim time.
    """
    return stamp_from_ns(time.time_ns())


def to_image_msg(img: np.ndarray, *, stamp: Time | None = None, frame_id: str = "camera",
                 encoding: str | None = None) -> Image:
    """numpy array -> sensor_msgs/Image (bgr8 for 3 channels, mono8 for 2-D)."""
    img = np.ascontiguousarray(img)
    if img.dtype != np.uint8:
        raise ImageConversionError(f"expected uint8 image, got {img.dtype}")
    if encoding is None:
        encoding = "mono8" if img.ndim == 2 else {3: "bgr8", 4: "bgra8"}.get(img.shape[2], "")
    if not encoding:
        raise ImageConversionError(f"unsupported image shape {img.shape}")
    msg = Image()
    msg.header.stamp = stamp if stamp is not None else wall_stamp()
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(img.shape[0]), int(img.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(img.strides[0])
    msg.data = img.tobytes()
    return msg


def from_image_msg(msg: Image, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """sensor_msgs/Image -> BGR (or mono) numpy array; raises ImageConversionError."""
    ch = _CHANNELS.get(msg.encoding)
    if ch is None:
        raise ImageConversionError(f"unsupported encoding {msg.encoding!r}", "encoding")
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    try:
        check_pixels(w, h, max_pixels)
    except ImageDecodeError as e:
        raise ImageConversionError(str(e), e.cause) from None
    if h <= 0 or w <= 0 or step < w * ch or len(msg.data) < step * h:
        raise ImageConversionError(
            f"inconsistent image: {w}x{h} step={step} data={len(msg.data)} bytes")
    buf = np.frombuffer(bytes(msg.data) if not isinstance(msg.data, (bytes, memoryview))
                        else msg.data, np.uint8)
    rows = buf[: step * h].reshape(h, step)[:, : w * ch]
    img = rows.reshape(h, w, ch) if ch > 1 else rows.reshape(h, w)
    if msg.encoding == "rgb8":
        img = img[:, :, ::-1]
    elif msg.encoding == "rgba8":
        img = img[:, :, [2, 1, 0]]
    elif msg.encoding == "bgra8":
        img = img[:, :, :3]
    return np.ascontiguousarray(img)


def to_compressed_msg(img: np.ndarray, *, stamp: Time | None = None, frame_id: str = "camera",
                      quality: int = 85, jpeg: bytes | None = None) -> CompressedImage:
    """numpy BGR array (or ready JPEG bytes) -> sensor_msgs/CompressedImage (format "jpeg")."""
    if jpeg is None:
        ok, enc = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
        if not ok:
            raise ImageConversionError("JPEG encoding failed")
        jpeg = enc.tobytes()
    msg = CompressedImage()
    msg.header.stamp = stamp if stamp is not None else wall_stamp()
    msg.header.frame_id = frame_id
    msg.format = "jpeg"
    msg.data = jpeg
    return msg


def from_compressed_msg(msg: CompressedImage,
                        max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """sensor_msgs/CompressedImage (jpeg/png, any "bgr8; jpeg compressed bgr8" form) -> BGR.

    The size the image declares is checked against `max_pixels` before it is decoded.
    """
    try:
        return decode_guarded(bytes(msg.data), max_pixels)
    except ImageDecodeError as e:
        raise ImageConversionError(f"{e} (format {msg.format!r})", e.cause) from None
