"""Human pose maps in OpenPose style from MediaPipe Pose.

Its model ships inside the mediapipe wheel, so this tool needs no download. Visual ChatGPT
used the OpenPose annotator; ControlNet's openpose model reads the 18-keypoint COCO skeleton
drawn here.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

# OpenPose COCO-18 keypoint -> MediaPipe landmark index (neck = shoulders' midpoint: -1)
_MP = [0, -1, 12, 14, 16, 11, 13, 15, 24, 26, 28, 23, 25, 27, 5, 2, 8, 7]
_LIMBS = [(1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (1, 8), (8, 9), (9, 10), (1, 11),
          (11, 12), (12, 13), (1, 0), (0, 14), (14, 16), (0, 15), (15, 17)]
_COLORS = [(255, 0, 0), (255, 85, 0), (255, 170, 0), (255, 255, 0), (170, 255, 0), (85, 255, 0),
           (0, 255, 0), (0, 255, 85), (0, 255, 170), (0, 255, 255), (0, 170, 255), (0, 85, 255),
           (0, 0, 255), (85, 0, 255), (170, 0, 255), (255, 0, 255), (255, 0, 170), (255, 0, 85)]


class PoseDetector:
    """Image -> black image with the OpenPose-style skeleton of the most visible person."""

    min_visibility = 0.5

    def __init__(self, checkpoint: str = "", device: str = "cpu", allow_download: bool = False):
        self.device = device

    def load(self):
        import mediapipe as mp
        self.pose = mp.solutions.pose.Pose(static_image_mode=True, model_complexity=1)

    def keypoints(self, rgb: np.ndarray) -> list[tuple[float, float] | None]:
        """18 COCO keypoints in pixels (None where not visible)."""
        res = self.pose.process(np.ascontiguousarray(rgb))
        if res.pose_landmarks is None:
            return [None] * 18
        lm = res.pose_landmarks.landmark
        h, w = rgb.shape[:2]

        def pt(i):
            if i == -1:
                a, b = pt(11), pt(12)
                return None if a is None or b is None else ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
            p = lm[i]
            return (p.x * w, p.y * h) if p.visibility >= self.min_visibility else None
        return [pt(i) for i in _MP]

    def run(self, rgb: np.ndarray) -> np.ndarray:
        h, w = rgb.shape[:2]
        canvas = np.zeros((h, w, 3), np.uint8)
        kps = self.keypoints(rgb)
        stick = max(1, round(4 * min(h, w) / 512))
        for i, (a, b) in enumerate(_LIMBS):
            pa, pb = kps[a], kps[b]
            if pa is None or pb is None:
                continue
            cx, cy = (pa[0] + pb[0]) / 2, (pa[1] + pb[1]) / 2
            length = math.hypot(pa[0] - pb[0], pa[1] - pb[1])
            angle = math.degrees(math.atan2(pa[1] - pb[1], pa[0] - pb[0]))
            poly = cv2.ellipse2Poly((int(cx), int(cy)), (int(length / 2), stick), int(angle),
                                    0, 360, 1)
            cv2.fillConvexPoly(canvas, poly, [int(c * 0.6) for c in _COLORS[i]])
        for i, p in enumerate(kps):
            if p is not None:
                cv2.circle(canvas, (int(p[0]), int(p[1])), stick, _COLORS[i], -1)
        return canvas
