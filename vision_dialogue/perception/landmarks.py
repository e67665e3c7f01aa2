"""What mediapipe's landmarks say about a person: where, how close, gestures, smile, gaze, posture.

Geometry on the landmarks of mediapipe's legacy solutions (face detection, face mesh, pose,
hands), used by perception/observer.py; no model of its own. Positions are relative (0..1,
y down), as seen in the image. ROS-free.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vision_dialogue.common.objects import horizontal_position

# mediapipe pose landmark indices
_NOSE, _L_SHOULDER, _R_SHOULDER, _L_WRIST, _R_WRIST = 0, 11, 12, 15, 16


@dataclass
class Person:
    """One person in the frame: horizontal position, rough distance, face box (relative)."""

    position: str            # "on the left" | "in the centre" | "on the right"
    distance: str            # "very close" | "close" | "a few metres away" | "far away"
    box: tuple[float, float, float, float] | None = None  # x, y, w, h in 0..1 (face)
    score: float = 0.0
    smiling: bool | None = None      # None: not measured (no face mesh for this person)
    facing: bool | None = None       # looking at the camera (the robot's eyes)

    def cues(self) -> list[str]:
        """The expression and engagement cues in words ("smiling", "looking at you")."""
        out = ["smiling"] if self.smiling else []
        if self.facing is not None:
            out.append("looking at you" if self.facing else "looking away")
        return out


@dataclass(frozen=True)
class HandSeen:
    """One hand: its gesture in words (None: no known gesture) and its wrist (0..1, y down)."""

    gesture: str | None
    x: float
    y: float
    box: tuple[float, float, float, float] | None = None   # x, y, w, h (relative) of the hand


THUMBS_UP, POINTING, OPEN_HAND = "giving a thumbs up", "pointing", "raising an open hand"
ARMS_RAISED = ("one arm raised", "both arms raised")    # the postures with a hand up

# mediapipe hand landmarks: wrist, thumb (cmc, mcp, ip, tip), then each finger's mcp..tip
HAND_WRIST, _THUMB_MCP, _THUMB_TIP = 0, 2, 4
_FINGERS = ((5, 6, 8), (9, 10, 12), (13, 14, 16), (17, 18, 20))   # (mcp, pip, tip)


def hand_gesture(lm) -> str | None:
    """A gesture from 21 hand landmarks (x, y in 0..1, y down), in words; None if none.

    thumbs up: thumb stretched upwards, the four fingers folded; pointing: only the index
    finger stretched; an open hand raised: all four fingers stretched upwards (a wave or a
    hello, which one frame cannot tell apart).
    """
    def dist(a, b):
        return float(np.hypot(lm[a].x - lm[b].x, lm[a].y - lm[b].y))

    size = dist(HAND_WRIST, 9) or 1e-6
    stretched = [dist(HAND_WRIST, tip) > 1.15 * dist(HAND_WRIST, pip)
                 for _, pip, tip in _FINGERS]
    thumb_up = (lm[_THUMB_TIP].y < lm[_THUMB_MCP].y - 0.6 * size
                and dist(_THUMB_TIP, 17) > 1.2 * dist(_THUMB_MCP, 17))
    if not any(stretched) and thumb_up:
        return THUMBS_UP
    if stretched == [True, False, False, False]:
        return POINTING
    if all(stretched) and all(lm[tip].y < lm[HAND_WRIST].y - 0.5 * size
                              for _, _, tip in _FINGERS):
        return OPEN_HAND
    return None


# face mesh landmarks: mouth corners, inner lips, cheek edges, eye outer corners, nose tip
_MOUTH_L, _MOUTH_R, _LIP_TOP, _LIP_BOTTOM = 61, 291, 13, 14
_CHEEK_R, _CHEEK_L, _EYE_R, _EYE_L, _NOSE_TIP = 234, 454, 33, 263, 1
SMILE_LEVEL = 1.5
"""Smile score (see face_cues) from which a face is "smiling": the astronaut photo scores 2.9,
scikit-image's cameraman (neutral, in profile) 0.4."""


def face_cues(lm) -> tuple[bool, bool]:
    """(smiling, facing the camera) from 468 face mesh landmarks (x, y in 0..1, y down).

    Smile score: how much wider than a neutral mouth (0.38 of the face width) in steps of
    0.06, plus how far the corners are lifted above the lips' middle (beyond 0.02 of the face
    width) in steps of 0.03. Facing: the nose tip within the middle 40 % between the eyes.
    """
    face = abs(lm[_CHEEK_L].x - lm[_CHEEK_R].x) or 1e-6
    width = abs(lm[_MOUTH_R].x - lm[_MOUTH_L].x) / face
    lift = ((lm[_LIP_TOP].y + lm[_LIP_BOTTOM].y) / 2
            - (lm[_MOUTH_L].y + lm[_MOUTH_R].y) / 2) / face
    smile = (width - 0.38) / 0.06 + (lift - 0.02) / 0.03
    eyes = lm[_EYE_L].x - lm[_EYE_R].x
    nose = (lm[_NOSE_TIP].x - lm[_EYE_R].x) / eyes if abs(eyes) > 1e-6 else 0.0
    return smile >= SMILE_LEVEL, abs(nose - 0.5) < 0.2


def attach_cues(faces: list[Person], lm) -> None:
    """Give the face box that holds this mesh's nose its smile and gaze cues."""
    x, y = lm[_NOSE_TIP].x, lm[_NOSE_TIP].y
    for p in faces:
        bx, by, bw, bh = p.box or (0, 0, 0, 0)
        if bx <= x <= bx + bw and by <= y <= by + bh:
            p.smiling, p.facing = face_cues(lm)
            return


def distance_words(face_width: float) -> str:
    """Rough distance from the face width relative to the frame width."""
    if face_width >= 0.30:
        return "very close"
    if face_width >= 0.14:
        return "close"
    if face_width >= 0.06:
        return "a few metres away"
    return "far away"


def faces_from(model, rgb: np.ndarray, min_score: float) -> list[Person]:
    result = model.process(rgb)
    people = []
    for det in result.detections or []:
        score = float(det.score[0]) if det.score else 0.0
        if score < min_score:
            continue
        b = det.location_data.relative_bounding_box
        x, y, w, h = (float(b.xmin), float(b.ymin), float(b.width), float(b.height))
        people.append(Person(position=horizontal_position(x + w / 2), distance=distance_words(w),
                             box=(x, y, w, h), score=score))
    people.sort(key=lambda p: p.box[0] if p.box else 0.0)  # left to right
    return people


def visible(lm, i: int, thr: float = 0.5) -> bool:
    return lm.landmark[i].visibility >= thr


def pose_person(pose) -> Person | None:
    """A person from pose landmarks alone (e.g. seen from behind): needs visible shoulders."""
    if pose is None or not (visible(pose, _L_SHOULDER, 0.6) and visible(pose, _R_SHOULDER, 0.6)):
        return None
    ls, rs = pose.landmark[_L_SHOULDER], pose.landmark[_R_SHOULDER]
    width = abs(ls.x - rs.x)
    return Person(position=horizontal_position((ls.x + rs.x) / 2),
                  distance=distance_words(width * 0.6))


def posture_from(pose) -> str | None:
    """Arms raised / down from wrist vs shoulder height (only with visible wrists)."""
    raised, down = 0, 0
    for shoulder, wrist in ((_L_SHOULDER, _L_WRIST), (_R_SHOULDER, _R_WRIST)):
        if not (visible(pose, shoulder) and visible(pose, wrist)):
            continue
        if pose.landmark[wrist].y < pose.landmark[shoulder].y - 0.02:
            raised += 1
        else:
            down += 1
    if raised == 2:
        return ARMS_RAISED[1]
    if raised == 1:
        return ARMS_RAISED[0]
    if down == 2:
        return "arms down"
    return None


def clothes_top(people: list[Person], pose, h: int) -> int:
    """Row where clothes start: below the lowest face box, else the shoulders."""
    bottoms = [p.box[1] + p.box[3] for p in people if p.box]
    if bottoms:
        return int(min(max(bottoms), 1.0) * h)
    if pose is not None:
        return int(min(pose.landmark[_L_SHOULDER].y, pose.landmark[_R_SHOULDER].y) * h)
    return 0


def extent(lm) -> tuple[float, float, float, float]:
    """The box (x, y, w, h, relative) around landmarks."""
    xs = [min(max(p.x, 0.0), 1.0) for p in lm]
    ys = [min(max(p.y, 0.0), 1.0) for p in lm]
    return min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)
