"""Frame perception for text-only LLMs: a camera frame (BGR) → a short text observation.

Real perception models that ship their weights in their wheels, no downloads:

* mediapipe 0.10.14 legacy solutions: face detection (full range) → how many people, where,
  how close; pose (model_complexity=1, the only pose model shipped) → arms raised; hands
  (landmarks) → gestures: thumbs up, pointing, an open hand raised (a wave or a hello);
  face mesh → expression and engagement cues: smiling (the mouth's width and its corners'
  lift), looking at the camera or away (the nose between the eyes); no facial-expression
  classifier ships its weights in an installable package, so this is geometry, not a model
  of emotions;
  selfie segmentation → the person's area, used to name the colour of their clothes;
* rapidocr-onnxruntime → visible text;
* OpenCV → brightness (dark frames), dominant colours named in words, and how much the view
  changed since the previous frame.

    observer = FrameObserver()
    observer.observe(frame_bgr)
    # "one person, close, in the middle, wearing orange, giving a thumbs up; written words:
    #  'EXIT' (a person just arrived)"

The text is written to be read as notes by a small language model: no tense (the prompt's
label says now or earlier), no inventory words it would read out, what changed at the end.
No object detector or image classifier ships its weights in an installable package (checked:
PyPI, mediapipe's legacy solutions, Debian), so things other than people, hands and text are
described by their colours only; a vision LLM (`supports_images`) sees the frames themselves.

Models load lazily on first use; one that fails to load is skipped with one warning. One frame
is processed at a time (a lock); the observer is safe to share between threads. Positions are
as seen in the image ("on the left" = the left of the frame). No ROS imports.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import cv2
import numpy as np

from vision_dialogue.common.images import as_bgr, change_thumbnail, downscale, \
    thumbnail_difference
from vision_dialogue.perception.colours import dominant_colour, top_colours
from vision_dialogue.perception.landmarks import HAND_WRIST, HandSeen, Person, attach_cues, \
    clothes_top, extent, faces_from, hand_gesture, pose_person, posture_from
from vision_dialogue.perception.landmarks import (  # noqa: F401 - also the observer's API
    ARMS_RAISED, OPEN_HAND, POINTING, SMILE_LEVEL, THUMBS_UP, face_cues)

_LOG = logging.getLogger(__name__)

DETECTORS = ("faces", "pose", "hands", "expressions", "segmentation", "ocr", "colours")
DARK_TEXT = "darkness, too dark to see anything"
VIEW_CHANGE_LEVEL = 30.0
"""Mean grey-level difference of 32x24 thumbnails above which the view "changed"."""
_COLOUR_SIDE = 160  # colours are counted on a thumbnail of this longest side
_NUMBERS = ("no one", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass
class Observation:
    """Everything FrameObserver found in one frame, plus the text it makes of it."""

    text: str
    dark: bool
    brightness: float                       # mean grey level 0..255
    people: list[Person] = field(default_factory=list)
    posture: str | None = None              # e.g. "arms down", "both arms raised"
    gestures: list[str] = field(default_factory=list)   # e.g. ["giving a thumbs up"]
    hands: list[HandSeen] = field(default_factory=list)
    thumbnail: np.ndarray | None = None     # common.images.change_thumbnail of the frame
    change: str | None = None               # since the previous frame, e.g. "the person left"
    person_area: float | None = None        # fraction of the frame covered by people
    clothes_colour: str | None = None
    background_colour: str | None = None
    scene_colours: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    #: each text with its box (x, y, w, h, relative) and score, for detectors that publish boxes
    text_boxes: list[tuple[str, tuple, float]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


class FrameObserver:
    """Turns BGR frames into short text observations (see the module docstring).

    detectors: which of DETECTORS to run (brightness is always measured). dark_threshold:
    mean grey level under which the frame is "too dark". max_side: frames are downscaled to
    this longest side before perception. ocr_max_side: longest side for the OCR detector.
    min_face_score / min_text_score: confidence cut-offs. max_texts: how many text snippets
    to report. ocr_reuse_threshold: the OCR result of the previous frame is reused while the
    scene is unchanged (mean absolute difference of 32x24 grey thumbnails below this, in grey
    levels); 0 runs OCR on every frame.
    """

    def __init__(self, detectors: Sequence[str] = DETECTORS, *, dark_threshold: float = 20.0,
                 max_side: int = 640, ocr_max_side: int = 480, min_face_score: float = 0.5,
                 min_text_score: float = 0.6, max_texts: int = 3,
                 ocr_reuse_threshold: float = 3.0):
        unknown = [d for d in detectors if d not in DETECTORS]
        if unknown:
            raise ValueError(f"unknown detectors {unknown}; known: {list(DETECTORS)}")
        if not 0 <= dark_threshold <= 255:
            raise ValueError(f"dark_threshold={dark_threshold!r} must be in [0, 255]")
        if max_side < 64 or ocr_max_side < 64:
            raise ValueError("max_side and ocr_max_side must be >= 64")
        self.detectors = tuple(detectors)
        self.dark_threshold = float(dark_threshold)
        self.max_side = int(max_side)
        self.ocr_max_side = int(ocr_max_side)
        self.min_face_score = float(min_face_score)
        self.min_text_score = float(min_text_score)
        self.max_texts = int(max_texts)
        self.ocr_reuse_threshold = float(ocr_reuse_threshold)
        self._ocr_cache: tuple[np.ndarray, list[str]] | None = None
        self._previous: tuple[np.ndarray, int] | None = None   # thumbnail, people count
        self._lock = threading.Lock()
        self._models: dict[str, object] = {}
        self._failed: set[str] = set()

    # -- public --------------------------------------------------------------------------------
    def observe(self, frame: np.ndarray) -> str:
        """Return a one-line text observation of `frame`.

        BGR uint8 HxWx3 (grey or BGRA accepted); ValueError on something that is not an image.
        """
        return self.analyse(frame).text

    def analyse(self, frame: np.ndarray) -> Observation:
        """The structured observation of `frame` (its .text is what observe() returns)."""
        bgr = _as_bgr(frame)
        with self._lock:
            return self._analyse(bgr)

    def warm_up(self) -> list[str]:
        """Load every enabled model now; returns the names of those that are available."""
        with self._lock:
            return [d for d in self.detectors if d == "colours" or self._model(d) is not None]

    def close(self, timeout: float = -1) -> bool:
        """Release the mediapipe graphs (the observer reloads them if used again).

        Waits for a frame being analysed, at most `timeout` s (-1: as long as it takes);
        False when it was still in the models, which are then left as they are.
        """
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            for model in self._models.values():
                close = getattr(model, "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:  # noqa: BLE001 - best effort on shutdown
                        pass
            self._models.clear()
        finally:
            self._lock.release()
        return True

    # -- models --------------------------------------------------------------------------------
    def _model(self, name: str):
        if name in self._models:
            return self._models[name]
        if name in self._failed or name not in self.detectors:
            return None
        try:
            model = _LOADERS[name](self)
        except Exception as exc:  # noqa: BLE001 - a missing detector is skipped, never fatal
            _LOG.warning("perception: %s detector unavailable, skipped: %s: %s", name,
                         exc.__class__.__name__, exc)
            self._failed.add(name)
            return None
        self._models[name] = model
        return model

    # -- perception ----------------------------------------------------------------------------
    def _analyse(self, bgr: np.ndarray) -> Observation:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        bgr = downscale(bgr, self.max_side)
        grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        brightness = float(grey.mean())
        timings["brightness"] = _ms(t0)
        thumb = change_thumbnail(grey)
        if brightness < self.dark_threshold:
            obs = Observation(text=DARK_TEXT, dark=True, brightness=brightness,
                              timings_ms=timings, thumbnail=thumb)
            obs.change = self._change(thumb, 0, dark=True)
            return obs
        obs = Observation(text="", dark=False, brightness=brightness, timings_ms=timings,
                          thumbnail=thumb)
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        pose = self._people(obs, rgb, timings)
        if obs.people:
            hands = self._run("hands", timings, lambda m: m.process(rgb).multi_hand_landmarks)
            obs.hands = [HandSeen(hand_gesture(h.landmark), float(h.landmark[HAND_WRIST].x),
                                  float(h.landmark[HAND_WRIST].y), extent(h.landmark))
                         for h in hands or []]
            obs.gestures = [h.gesture for h in obs.hands if h.gesture]
        mask = None
        if obs.people:
            seg = self._run("segmentation", timings,
                            lambda m: m.process(rgb).segmentation_mask)
            if seg is not None:
                mask = seg > 0.5
                obs.person_area = float(mask.mean())
        if "colours" in self.detectors:
            t = time.perf_counter()
            self._colours(obs, bgr, mask, pose)
            timings["colours"] = _ms(t)
        found = (self._texts(bgr, thumb, timings) or [])[: self.max_texts]
        obs.texts = [text for text, *_ in found]
        obs.text_boxes = found
        obs.change = self._change(thumb, len(obs.people))
        obs.text = _compose(obs)
        timings["total"] = _ms(t0)
        return obs

    def _change(self, thumb: np.ndarray, people: int, dark: bool = False) -> str | None:
        """What changed since the previous frame, in a few words (None: nothing notable)."""
        prev, self._previous = self._previous, (thumb, people)
        if prev is None or dark:
            return None
        before = prev[1]
        if people and not before:
            return "a person just arrived" if people == 1 else "people just arrived"
        if before and not people:
            return "the person just left" if before == 1 else "the people just left"
        if thumbnail_difference(thumb, prev[0]) > VIEW_CHANGE_LEVEL:
            return "the view just changed"
        return None

    def _people(self, obs: Observation, rgb: np.ndarray, timings: dict):
        """Faces (else the pose's person) into obs.people, the posture; the pose landmarks."""
        faces = self._run("faces", timings, lambda m: faces_from(m, rgb, self.min_face_score))
        pose = self._run("pose", timings, lambda m: m.process(rgb).pose_landmarks)
        people = faces or []
        body = pose_person(pose)
        if not people and body is not None:
            people = [body]
        obs.people = people
        if faces:
            meshes = self._run("expressions", timings,
                               lambda m: m.process(rgb).multi_face_landmarks)
            for mesh in meshes or []:
                attach_cues(faces, mesh.landmark)
        if pose is not None:
            obs.posture = posture_from(pose)
        return pose

    @staticmethod
    def _colours(obs: Observation, bgr: np.ndarray, mask, pose) -> None:
        """Clothes and background colours around people, else the scene's two main ones."""
        small = downscale(bgr, _COLOUR_SIDE)
        hsv = cv2.cvtColor(small, cv2.COLOR_BGR2HSV)
        if not (obs.people and mask is not None and mask.any()):
            obs.scene_colours = top_colours(hsv.reshape(-1, 3), 2)
            return
        sh = hsv.shape[0]
        small_mask = cv2.resize(mask.astype(np.uint8), (hsv.shape[1], sh),
                                interpolation=cv2.INTER_NEAREST).astype(bool)
        clothes = small_mask.copy()
        clothes[:clothes_top(obs.people, pose, sh)] = False
        obs.clothes_colour = dominant_colour(hsv[clothes]) if clothes.sum() > 20 else None
        background = ~small_mask
        obs.background_colour = dominant_colour(hsv[background]) if background.sum() > 20 else None

    def _texts(self, bgr: np.ndarray, thumb: np.ndarray, timings: dict) -> list[tuple] | None:
        """OCR, reused while the scene is unchanged (OCR is the slowest detector by far)."""
        last = self._ocr_cache
        if (last is not None and self.ocr_reuse_threshold > 0
                and thumbnail_difference(thumb, last[0]) < self.ocr_reuse_threshold):
            timings["ocr"] = 0.0
            return list(last[1])
        texts = self._run("ocr", timings,
                          lambda m: _ocr(m, bgr, self.ocr_max_side, self.min_text_score))
        self._ocr_cache = (thumb, texts or []) if texts is not None else None
        return texts

    def _run(self, name: str, timings: dict, fn: Callable):
        model = self._model(name)
        if model is None:
            return None
        t = time.perf_counter()
        try:
            return fn(model)
        except Exception as exc:  # noqa: BLE001 - one bad frame must not kill the observer
            _LOG.warning("perception: %s failed on a frame: %s: %s", name,
                         exc.__class__.__name__, exc)
            return None
        finally:
            timings[name] = _ms(t)


# -- model loaders (only the models shipped in the wheels; never a download) -----------------
def _load_faces(obs: FrameObserver):
    import mediapipe as mp
    return mp.solutions.face_detection.FaceDetection(
        model_selection=1, min_detection_confidence=obs.min_face_score)


def _load_pose(obs: FrameObserver):
    import mediapipe as mp
    # model_complexity=1 (pose_landmark_full) is the only pose model in the 0.10.14 wheel;
    # 0 and 2 would be downloaded at construction.
    return mp.solutions.pose.Pose(static_image_mode=True, model_complexity=1,
                                  enable_segmentation=False, min_detection_confidence=0.5)


def _load_hands(obs: FrameObserver):
    import mediapipe as mp
    return mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=2,
                                    model_complexity=1, min_detection_confidence=0.5)


def _load_expressions(obs: FrameObserver):
    import mediapipe as mp
    return mp.solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=4,
                                           refine_landmarks=False,
                                           min_detection_confidence=obs.min_face_score)


def _load_segmentation(obs: FrameObserver):
    import mediapipe as mp
    return mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0)


def _load_ocr(obs: FrameObserver):
    from rapidocr_onnxruntime import RapidOCR
    # no angle classifier (upright camera), and detection on at most ocr_max_side pixels
    # (the default upscales the short side to 736, which is several times slower)
    return RapidOCR(use_cls=False, det_limit_side_len=obs.ocr_max_side, det_limit_type="max",
                    print_verbose=False)


_LOADERS: dict[str, Callable[[FrameObserver], object]] = {
    "faces": _load_faces, "pose": _load_pose, "hands": _load_hands,
    "expressions": _load_expressions,
    "segmentation": _load_segmentation,
    "ocr": _load_ocr,
}


# -- helpers -----------------------------------------------------------------------------------
def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 2)


def _as_bgr(frame) -> np.ndarray:
    """Check a frame as the conversation core does, plus the detectors' minimum size.

    uint8, HxW / HxWx1 / HxWx3 / HxWx4 -> BGR.
    """
    frame = as_bgr(frame)
    if frame.shape[0] < 8 or frame.shape[1] < 8:
        raise ValueError(f"frame too small: {frame.shape[1]}x{frame.shape[0]}")
    return frame


def _ocr(model, bgr: np.ndarray, max_side: int, min_score: float) -> list[tuple]:
    """(text, (x, y, w, h) relative box, score) of the words read, each text once."""
    small = downscale(bgr, max_side)
    h, w = small.shape[:2]
    result, _ = model(small)
    texts: list[tuple] = []
    for quad, text, score in result or []:
        text = " ".join(str(text).split())
        if float(score) >= min_score and len(text) >= 2 and text not in [t for t, _ in texts]:
            xs, ys = [float(p[0]) / w for p in quad], [float(p[1]) / h for p in quad]
            texts.append((text, (min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)),
                          float(score)))
    return texts


def _compose(obs: Observation) -> str:
    """The observation as notes: who is there, wearing and doing what; words; what changed."""
    parts = []
    n = len(obs.people)
    if n == 0:
        things = " and ".join(obs.scene_colours)
        parts.append(f"no one there; {things} things" if things else "no one there")
    elif n == 1:
        p = obs.people[0]
        first = ", ".join([f"one person, {p.distance}, {p.position}"] + p.cues())
        if obs.clothes_colour:
            first += ", wearing " + obs.clothes_colour.replace("mostly ", "")
        if obs.posture and obs.posture != "arms down":
            first += f", {obs.posture}"
        parts.append(", ".join([first] + obs.gestures))
    else:
        count = _NUMBERS[n] if n < len(_NUMBERS) else str(n)
        where = ", ".join(f"one {p.distance} {p.position}"
                          + (f" ({', '.join(p.cues())})" if p.cues() else "")
                          for p in obs.people[:4])
        parts.append(", ".join([f"{count} people: {where}"] + obs.gestures))
    if obs.texts:
        parts.append("written words: " + ", ".join(f"'{t}'" for t in obs.texts))
    text = "; ".join(parts)
    if obs.brightness < 60:
        text = "dim light; " + text
    if obs.change:
        text += f" ({obs.change})"
    return text


_CHANGE = re.compile(r"\s*\((?:a person|people|the person|the people|the view) just [a-z ]+\)")


def speak_notes(notes: str, past: bool = False) -> str:
    """Our observation notes (or a merged summary of them) as the robot would say them.

    For when a small model reads its notes out instead of talking: "no one there; orange and
    brown things" -> "I do not see anyone, just something orange and brown." `past`: a memory.
    """
    said = []
    for note in _CHANGE.sub("", notes or "").split("; then "):
        line = _speak_one(note.strip(), past)
        if line and line not in said:
            said.append(line)
    if not said:
        return ""
    said = said[:1] + said[-1:] if len(said) > 2 else said    # the start and the end
    text = ", and then ".join(said)
    return text[0].upper() + text[1:] + "."


def _speak_one(note: str, past: bool) -> str:
    see, can = ("saw", "could") if past else ("see", "can")
    out = []
    for clause in (c.strip() for c in note.split("; ") if c.strip()):
        if clause == "dim light":
            out.append(f"the light {'was' if past else 'is'} dim")
        elif clause == DARK_TEXT:
            out.append(f"it {'was' if past else 'is'} too dark to see anything")
        elif clause == "no one there":
            out.append(f"I {'did not' if past else 'do not'} see anyone")
        elif clause.endswith(" things"):
            colours = clause[:-len(" things")]
            out.append(f"just something {colours}" if out else f"I {see} something {colours}")
        elif clause.startswith("one person, "):
            out.append(f"I {see} someone {clause[len('one person, '):]}")
        elif " people: " in clause:
            out.append(f"I {see} {clause}")
        elif clause.startswith("written words: "):
            out.append(f"I {can} read {clause[len('written words: '):]}")
        else:
            out.append(clause)
    # the notes speak to the robot ("looking at you"); the robot speaks to the person
    return ", ".join(out).replace("looking at you", "looking at me")


class NotesObserver:
    """The `observer` a Conversation takes for a text-only backend.

    Called with a BGR frame it gives the Observation (its notes and the people counted);
    `speak(notes, past)` says notes in the robot's words (speak_notes).
    """

    def __init__(self, frames: FrameObserver | None = None):
        self.frames = frames or FrameObserver()

    def __call__(self, bgr: np.ndarray) -> Observation:
        return self.frames.analyse(bgr)

    def close(self, timeout: float = -1) -> bool:
        """Release the models (after a frame being analysed, FrameObserver.close)."""
        return self.frames.close(timeout)

    speak = staticmethod(speak_notes)


def make_observer() -> NotesObserver:
    """The frame observer used when the backend takes no images."""
    return NotesObserver()
