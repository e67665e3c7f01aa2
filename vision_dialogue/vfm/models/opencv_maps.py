"""Weight-free condition maps with OpenCV: canny edges, straight lines, scribbles.

All functions take and return HxWx3 uint8 RGB arrays (white strokes on black, as ControlNet
expects).
"""
from __future__ import annotations

import cv2
import numpy as np


def _gray(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY) if rgb.ndim == 3 else rgb


def _rgb(mono: np.ndarray) -> np.ndarray:
    return np.repeat(mono[:, :, None], 3, axis=2)


def canny(rgb: np.ndarray, low: int = 100, high: int = 200) -> np.ndarray:
    """Canny edges with Visual ChatGPT's thresholds (100, 200)."""
    return _rgb(cv2.Canny(rgb, low, high))


def lines(rgb: np.ndarray, min_length: int | None = None) -> np.ndarray:
    """Straight line segments (stand-in for M-LSD): FastLineDetector, else HoughLinesP."""
    gray = _gray(rgb)
    h, w = gray.shape
    min_length = min_length or max(4, min(h, w) // 20)
    out = np.zeros((h, w), np.uint8)
    segs = None
    if hasattr(cv2, "ximgproc"):
        fld = cv2.ximgproc.createFastLineDetector(length_threshold=min_length)
        segs = fld.detect(gray)
    else:  # pragma: no cover - opencv without contrib
        edges = cv2.Canny(gray, 50, 150)
        segs = cv2.HoughLinesP(edges, 1, np.pi / 180, 30, minLineLength=min_length, maxLineGap=3)
    if segs is not None:
        for x1, y1, x2, y2 in np.asarray(segs).reshape(-1, 4):
            cv2.line(out, (int(round(x1)), int(round(y1))), (int(round(x2)), int(round(y2))),
                     255, 1 if min(h, w) < 256 else 2, cv2.LINE_AA)
    return _rgb(out)


def scribble(rgb: np.ndarray) -> np.ndarray:
    """A scribble/sketch from smoothed edges: blur, low-threshold Canny, thick strokes."""
    gray = cv2.GaussianBlur(_gray(rgb), (0, 0), 1.5)
    edges = cv2.Canny(gray, 50, 120)
    k = max(1, min(gray.shape) // 128)
    edges = cv2.dilate(edges, np.ones((2 * k + 1, 2 * k + 1), np.uint8))
    return _rgb(edges)


class OpenCvMaps:
    """The weight-free maps as a tool model (the interface the tool runtime builds and runs)."""

    def __init__(self, checkpoint: str = "", device: str = "cpu", allow_download: bool = False):
        self.device = device

    def load(self) -> None:
        """Nothing to load."""

    canny = staticmethod(canny)
    lines = staticmethod(lines)
    scribble = staticmethod(scribble)
