"""Faces made unrecognisable in frames that are stored (transcripts, bags, monitor thumbnails).

MediaPipe's face detector (its weights ship in the wheel) finds the faces; each box, grown by
`MARGIN` on every side, is pixelated to `CELLS` blocks across and then blurred, which no
sharpening undoes. A frame is never stored unblurred because the detector failed: it raises,
and the caller stores nothing.
"""
from __future__ import annotations

import threading

import cv2
import numpy as np

#: growth of a detected face box on each side (a fraction of its size): hair, ears, chin
MARGIN = 0.25
#: pixel blocks across a blurred face
CELLS = 8


class FaceBlurrer:
    """Callable: a BGR frame -> a copy with every detected face pixelated (thread-safe)."""

    def __init__(self, min_score: float = 0.3):
        self.min_score = min_score
        self._model = None
        self._lock = threading.Lock()     # MediaPipe graphs are not reentrant
        self.faces_blurred = 0

    def _detector(self):
        if self._model is None:
            import mediapipe as mp
            self._model = mp.solutions.face_detection.FaceDetection(
                model_selection=1, min_detection_confidence=self.min_score)
        return self._model

    def boxes(self, bgr: np.ndarray) -> list[tuple[int, int, int, int]]:
        """Each face's box in pixels (x0, y0, x1, y1), grown by MARGIN, clipped to the frame."""
        h, w = bgr.shape[:2]
        rgb = np.ascontiguousarray(bgr[:, :, ::-1])
        with self._lock:
            result = self._detector().process(rgb)
        out = []
        for det in result.detections or []:
            b = det.location_data.relative_bounding_box
            x0, y0 = (b.xmin - MARGIN * b.width) * w, (b.ymin - MARGIN * b.height) * h
            x1 = (b.xmin + (1 + MARGIN) * b.width) * w
            y1 = (b.ymin + (1 + MARGIN) * b.height) * h
            box = (max(0, int(x0)), max(0, int(y0)), min(w, int(x1) + 1), min(h, int(y1) + 1))
            if box[2] > box[0] and box[3] > box[1]:
                out.append(box)
        return out

    def __call__(self, bgr: np.ndarray) -> np.ndarray:
        out = np.array(bgr, copy=True)
        for x0, y0, x1, y1 in self.boxes(bgr):
            face = out[y0:y1, x0:x1]
            cells = max(1, min(CELLS, face.shape[1]))
            rows = max(1, round(cells * face.shape[0] / face.shape[1]))
            small = cv2.resize(face, (cells, rows), interpolation=cv2.INTER_AREA)
            block = cv2.resize(small, (face.shape[1], face.shape[0]),
                               interpolation=cv2.INTER_NEAREST)
            k = max(3, (min(face.shape[:2]) // 4) | 1)
            out[y0:y1, x0:x1] = cv2.GaussianBlur(block, (k, k), 0)
            self.faces_blurred += 1
        return out
