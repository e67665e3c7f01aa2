"""Furhat-style gestures: the documented parameter ranges, clamping, and gestures per expression.

A gesture is Furhat's GestureDefinition as JSON: ``{"name", "class", "frames": [{"time":
[s, ...], "persist": bool, "params": {PARAM: value}}]}``. Blend shapes take 0..1; head and gaze
angles (NECK_PAN/TILT/ROLL, GAZE_PAN/TILT) are documented within -50..50 degrees and are
clamped further to the limits the speech node is given, so a generated gesture never turns the
head far. `checked_gesture` makes any gesture safe or says why it cannot be; `expression_gesture`
makes a new one for an affect each time (small random differences, so a face never repeats the
exact same movement), as a cache of gestures per expression would, at no model cost.
"""
from __future__ import annotations

import json
import math
import random

from vision_dialogue.face.affect import (ANGRY, CONFUSED, DISGUSTED, EXCITED, HAPPY, NEUTRAL,
                                         SAD, SCARED, SURPRISED, TIRED, Affect)

GESTURE_CLASS = "furhatos.gestures.Gesture"
#: blend shapes (0..1) a gesture may set
BLEND_SHAPES = frozenset((
    "EXPR_ANGER", "EXPR_DISGUST", "EXPR_FEAR", "EXPR_SAD", "SMILE_CLOSED", "SMILE_OPEN",
    "SURPRISE", "BLINK_LEFT", "BLINK_RIGHT", "BROW_DOWN_LEFT", "BROW_DOWN_RIGHT",
    "BROW_IN_LEFT", "BROW_IN_RIGHT", "BROW_UP_LEFT", "BROW_UP_RIGHT", "EYE_SQUINT_LEFT",
    "EYE_SQUINT_RIGHT", "LOOK_DOWN", "LOOK_LEFT", "LOOK_RIGHT", "LOOK_UP", "PHONE_AAH",
    "PHONE_BIGAAH", "PHONE_EE", "PHONE_OOH_Q"))
HEAD_ANGLES = frozenset(("NECK_PAN", "NECK_TILT", "NECK_ROLL"))
GAZE_ANGLES = frozenset(("GAZE_PAN", "GAZE_TILT"))
#: the documented range of the angles, degrees
ANGLE_LIMIT = 50.0
#: the longest gesture accepted, s (a longer one would hold the face)
MAX_GESTURE_S = 10.0
#: Furhat's built-in gesture for each expression (gesture_style: builtin)
BUILTIN = {HAPPY: "Smile", EXCITED: "BigSmile", SAD: "ExpressSad", SURPRISED: "Surprise",
           ANGRY: "ExpressAnger", SCARED: "ExpressFear", DISGUSTED: "ExpressDisgust",
           CONFUSED: "Thoughtful", TIRED: "CloseEyes"}
#: the blend shapes of each expression at full intensity, and the head's (tilt, roll) in degrees
SHAPES: dict[str, tuple[dict[str, float], tuple[float, float]]] = {
    HAPPY: ({"SMILE_CLOSED": 0.7, "BROW_UP_LEFT": 0.3, "BROW_UP_RIGHT": 0.3}, (-2.0, 3.0)),
    EXCITED: ({"SMILE_OPEN": 0.9, "BROW_UP_LEFT": 0.8, "BROW_UP_RIGHT": 0.8}, (-5.0, 4.0)),
    SAD: ({"EXPR_SAD": 0.6, "BROW_IN_LEFT": 0.8, "BROW_IN_RIGHT": 0.8, "SMILE_CLOSED": 0.0},
          (6.0, -8.0)),
    SURPRISED: ({"SURPRISE": 0.8, "BROW_UP_LEFT": 1.0, "BROW_UP_RIGHT": 1.0}, (-6.0, 0.0)),
    ANGRY: ({"EXPR_ANGER": 0.6, "BROW_DOWN_LEFT": 0.8, "BROW_DOWN_RIGHT": 0.8}, (4.0, 0.0)),
    SCARED: ({"EXPR_FEAR": 0.6, "BROW_UP_LEFT": 0.6, "BROW_UP_RIGHT": 0.6}, (3.0, -3.0)),
    DISGUSTED: ({"EXPR_DISGUST": 0.6, "EYE_SQUINT_LEFT": 0.4, "EYE_SQUINT_RIGHT": 0.4},
                (2.0, -4.0)),
    CONFUSED: ({"BROW_IN_LEFT": 0.6, "BROW_UP_RIGHT": 0.6, "EYE_SQUINT_LEFT": 0.3},
               (0.0, 10.0)),
    TIRED: ({"EYE_SQUINT_LEFT": 0.5, "EYE_SQUINT_RIGHT": 0.5}, (5.0, 0.0)),
}


class GestureError(ValueError):
    """A gesture that cannot be made safe (not JSON, no frames, bad times)."""


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GestureError(f"{where}: {value!r} is not a finite number")
    return float(value)


def _clamped(name: str, value, max_head: float, max_gaze: float) -> float:
    v = _number(value, name)
    if name in BLEND_SHAPES:
        return min(1.0, max(0.0, v))
    limit = min(ANGLE_LIMIT, max_head if name in HEAD_ANGLES else max_gaze)
    return min(limit, max(-limit, v))


def checked_gesture(gesture, *, max_head: float = 15.0, max_gaze: float = 30.0) -> dict:
    """A gesture (dict or JSON text) with every value in range; GestureError if it is malformed.

    Unknown parameters go (a robot would refuse the whole gesture); times must be numbers,
    non-negative, not decreasing, and end within MAX_GESTURE_S.
    """
    if isinstance(gesture, (str, bytes)):
        try:
            gesture = json.loads(gesture)
        except json.JSONDecodeError as e:
            raise GestureError(f"not JSON: {e}") from None
    if not isinstance(gesture, dict) or not isinstance(gesture.get("frames"), list) \
            or not gesture["frames"]:
        raise GestureError("a gesture needs a non-empty list of frames")
    frames, last = [], 0.0
    for i, frame in enumerate(gesture["frames"]):
        if not isinstance(frame, dict) or not isinstance(frame.get("params"), dict):
            raise GestureError(f"frame {i}: needs params")
        times = frame.get("time")
        times = times if isinstance(times, list) else [times]
        times = [_number(t, f"frame {i} time") for t in times]
        if not times or any(t < last for t in times) or times[-1] > MAX_GESTURE_S:
            raise GestureError(f"frame {i}: times {times} must rise from {last:g} and end "
                               f"by {MAX_GESTURE_S:g} s")
        last = times[-1]
        params = {}
        for name, value in frame["params"].items():
            if name == "reset":
                params["reset"] = bool(value)
            elif name in BLEND_SHAPES or name in HEAD_ANGLES or name in GAZE_ANGLES:
                params[name] = round(_clamped(name, value, max_head, max_gaze), 3)
        out = {"time": times, "params": params}
        if "persist" in frame:
            out["persist"] = bool(frame["persist"])
        frames.append(out)
    return {"name": str(gesture.get("name") or "generated")[:64], "class": GESTURE_CLASS,
            "frames": frames}


def expression_gesture(affect: Affect, rng: random.Random | None = None, *,
                       hold: float = 2.0, max_head: float = 15.0) -> dict | None:
    """A new gesture showing `affect` (None for a neutral face): ease in, hold, let go."""
    shape = SHAPES.get(affect.expression)
    if shape is None or affect.expression == NEUTRAL:
        return None
    rng = rng or random.Random()
    params, (tilt, roll) = shape
    strength = max(0.3, min(1.0, 0.4 + 0.6 * max(abs(affect.valence), affect.confidence
                                                 * 0.8)))
    vary = lambda v: v * strength * rng.uniform(0.85, 1.15)    # noqa: E731
    peak = {k: vary(v) for k, v in params.items()}
    peak["NECK_TILT"], peak["NECK_ROLL"] = vary(tilt), vary(roll) * rng.choice((1, 1, -1))
    ease = 0.3 + 0.2 * (1.0 - max(0.0, affect.arousal))        # calm: slower
    gesture = {"name": f"vd_{affect.expression}", "frames": [
        {"time": [round(ease, 2)], "persist": False, "params": peak},
        {"time": [round(ease + hold * rng.uniform(0.8, 1.2), 2)], "persist": False,
         "params": dict(peak)},
        {"time": [round(ease * 2 + hold * 1.2 + 0.2, 2)], "params": {"reset": True}}]}
    return checked_gesture(gesture, max_head=max_head)


def builtin_gesture(affect: Affect) -> str:
    """The Furhat built-in gesture for `affect` ("" for none)."""
    return BUILTIN.get(affect.expression, "")


def idle_gesture(rng: random.Random, max_head: float = 15.0) -> dict:
    """A subtle movement between turns: a blink, or the head settling by a degree or two."""
    if rng.random() < 0.5:
        return checked_gesture({"name": "vd_idle_blink", "frames": [
            {"time": [0.1], "params": {"BLINK_LEFT": 1.0, "BLINK_RIGHT": 1.0}},
            {"time": [0.25], "params": {"reset": True}}]})
    drift = {"NECK_TILT": rng.uniform(-2, 2), "NECK_ROLL": rng.uniform(-2, 2)}
    return checked_gesture({"name": "vd_idle_drift", "frames": [
        {"time": [1.2], "params": drift}, {"time": [3.0], "params": {"reset": True}}]},
        max_head=max_head)


def gaze_gesture(pan: float, tilt: float, move_s: float, max_gaze: float = 30.0) -> dict:
    """The eyes alone (not the head) to pan/tilt degrees in `move_s`, and they stay there."""
    return checked_gesture({"name": "vd_gaze", "frames": [
        {"time": [0.0, max(0.01, move_s)], "persist": True,
         "params": {"GAZE_PAN": pan, "GAZE_TILT": tilt}}]}, max_gaze=max_gaze)
