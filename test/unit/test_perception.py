"""FrameObserver on real sample photos (scikit-image) with the real shipped models."""
from __future__ import annotations

import logging
import sys
import threading

import cv2
import numpy as np
import pytest
import skimage.data

from vision_dialogue.perception.observer import DARK_TEXT, FrameObserver, make_observer, \
    speak_notes

pytestmark = pytest.mark.timeout(120)


def _bgr(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)


@pytest.fixture(scope="module")
def observer():
    obs = FrameObserver()
    yield obs
    obs.close()


@pytest.fixture(scope="module")
def astronaut():
    return _bgr(skimage.data.astronaut())


@pytest.fixture(scope="module")
def coffee():
    return _bgr(skimage.data.coffee())


def _exit_sign() -> np.ndarray:
    img = np.full((480, 640, 3), 235, np.uint8)
    cv2.putText(img, "EXIT", (190, 270), cv2.FONT_HERSHEY_SIMPLEX, 3.0, (0, 0, 200), 8)
    return img


def _notes(text: str) -> str:
    """The observation without its note on what changed (which depends on the frame before)."""
    return text.split(" (")[0]


def test_person_found_in_person_photo(observer, astronaut):
    obs = observer.analyse(astronaut)
    assert not obs.dark
    assert len(obs.people) == 1
    person = obs.people[0]
    assert person.position == "in the middle"
    assert person.distance in ("close", "very close")
    assert obs.person_area is not None and 0.1 < obs.person_area < 0.95
    assert obs.clothes_colour and "orange" in obs.clothes_colour  # her orange flight suit
    assert obs.background_colour
    assert obs.text.startswith("one person, ")
    assert "wearing " + obs.clothes_colour.replace("mostly ", "") in obs.text
    assert "background" not in obs.text and "arms down" not in obs.text


def test_no_person_in_coffee_photo(observer, coffee):
    obs = observer.analyse(coffee)
    assert obs.people == [] and obs.person_area is None
    assert obs.scene_colours, "the scene's colours are named when no one is there"
    assert obs.text.startswith("no one there; ") and _notes(obs.text).endswith(" things")
    assert "person" not in _notes(obs.text)
    # the text API (observe / describe, what the backend factory calls) gives the same line
    assert _notes(observer.observe(coffee)) == _notes(obs.text)


def test_two_people_left_and_right(observer, astronaut):
    pair = np.hstack([astronaut, cv2.flip(astronaut, 1)])
    obs = observer.analyse(pair)
    assert [p.position for p in obs.people] == ["on the left", "on the right"]
    assert obs.text.startswith("two people: ")


@pytest.mark.parametrize("level", [0, 6])
def test_black_and_very_dark_frames_are_reported_as_dark(observer, level):
    rng = np.random.default_rng(1)
    frame = np.clip(rng.normal(level, 2, (480, 640, 3)), 0, 255).astype(np.uint8)
    obs = observer.analyse(frame)
    assert obs.dark and obs.text == DARK_TEXT
    assert obs.people == [] and obs.texts == []


def test_dim_but_visible_frame_is_not_dark(observer, coffee):
    dim = (coffee.astype(np.float32) * 0.3).astype(np.uint8)
    obs = observer.analyse(dim)
    assert not obs.dark and obs.text.startswith("dim light; ")


def test_rendered_text_is_read(observer):
    obs = observer.analyse(_exit_sign())
    assert "EXIT" in obs.texts
    assert "written words: 'EXIT'" in obs.text
    assert obs.people == []


def test_ocr_reused_for_unchanged_scene_and_rerun_after_change(coffee):
    obs = FrameObserver(detectors=("ocr",))
    sign = _exit_sign()
    first = obs.analyse(sign)
    assert first.texts == ["EXIT"] and first.timings_ms["ocr"] > 0
    again = obs.analyse(sign.copy())
    assert again.texts == ["EXIT"] and again.timings_ms["ocr"] == 0.0
    other = obs.analyse(cv2.resize(coffee, (640, 480)))
    assert "EXIT" not in other.texts and other.timings_ms["ocr"] > 0
    never = FrameObserver(detectors=("ocr",), ocr_reuse_threshold=0)
    never.analyse(sign)
    assert never.analyse(sign).timings_ms["ocr"] > 0


def test_grey_and_bgra_frames_are_accepted(observer, coffee):
    grey = cv2.cvtColor(coffee, cv2.COLOR_BGR2GRAY)
    assert observer.observe(grey).startswith("no one there")
    bgra = cv2.cvtColor(coffee, cv2.COLOR_BGR2BGRA)
    assert _notes(observer.observe(bgra)) == _notes(observer.observe(coffee))


@pytest.mark.parametrize("bad,match", [
    (None, "numpy array"),
    (np.zeros((48, 64, 3), np.float32), "uint8"),
    (np.zeros((48, 64, 2), np.uint8), "HxWx3"),
    (np.zeros((4, 4, 3), np.uint8), "too small"),
])
def test_bad_frames_raise_clear_errors(observer, bad, match):
    with pytest.raises(ValueError, match=match):
        observer.analyse(bad)


def test_unknown_detector_is_rejected():
    with pytest.raises(ValueError, match="unknown detectors"):
        FrameObserver(detectors=("faces", "xray"))


def test_detector_that_cannot_load_is_skipped_with_one_warning(monkeypatch, caplog, astronaut):
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # import fails for real
    obs = FrameObserver(detectors=("faces", "ocr", "colours"))
    with caplog.at_level(logging.WARNING, logger="vision_dialogue.perception.observer"):
        first = obs.analyse(astronaut)
        second = obs.analyse(_exit_sign())
    warnings = [r for r in caplog.records if "ocr detector unavailable" in r.getMessage()]
    assert len(warnings) == 1
    assert len(first.people) == 1 and second.texts == []
    assert obs.warm_up() == ["faces", "colours"]


def test_brightness_only_baseline(astronaut):
    obs = FrameObserver(detectors=())
    result = obs.analyse(astronaut)
    assert result.people == [] and result.text == "no one there"
    assert set(result.timings_ms) == {"brightness", "total"}


def test_shared_between_threads(observer, astronaut, coffee):
    frames = [astronaut, coffee, astronaut, coffee]
    expected = [_notes(observer.observe(f)) for f in frames]
    out: dict[int, str] = {}
    threads = [threading.Thread(
        target=lambda i=i: out.__setitem__(i, _notes(observer.observe(frames[i]))))
               for i in range(len(frames))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [out[i] for i in range(len(frames))] == expected


def _landmarks(points: dict[int, tuple[float, float]], visibility: float = 0.95):
    """A pose result shaped like mediapipe's (33 landmarks; unspecified ones invisible)."""
    from types import SimpleNamespace
    lms = [SimpleNamespace(x=0.5, y=0.5, visibility=0.0) for _ in range(33)]
    for i, (x, y) in points.items():
        lms[i] = SimpleNamespace(x=x, y=y, visibility=visibility)
    return SimpleNamespace(landmark=lms)


@pytest.mark.parametrize("wrists,expected", [
    ({15: (0.6, 0.8), 16: (0.4, 0.8)}, "arms down"),
    ({15: (0.6, 0.2), 16: (0.4, 0.8)}, "one arm raised"),
    ({15: (0.6, 0.2), 16: (0.4, 0.1)}, "both arms raised"),
    ({15: (0.6, 0.8)}, None),  # one wrist out of view: no claim about the arms
])
def test_posture_from_pose_landmarks(wrists, expected):
    from vision_dialogue.perception.landmarks import pose_person, posture_from
    pose = _landmarks({11: (0.6, 0.4), 12: (0.4, 0.4), **wrists})
    assert posture_from(pose) == expected
    person = pose_person(pose)
    assert person is not None and person.position == "in the middle"
    assert pose_person(_landmarks({11: (0.6, 0.4)})) is None  # one shoulder is not a person


@pytest.mark.parametrize("bgr,name", [((0, 0, 255), "red"), ((0, 128, 255), "orange"),
                                      ((0, 230, 255), "yellow"), ((0, 180, 0), "green"),
                                      ((255, 0, 0), "blue"), ((160, 0, 128), "purple"),
                                      ((255, 255, 255), "white"), ((128, 128, 128), "grey"),
                                      ((30, 70, 120), "brown"), ((90, 20, 0), "dark blue")])
def test_colours_are_named(bgr, name):
    obs = FrameObserver(detectors=("colours",))
    frame = np.zeros((120, 160, 3), np.uint8)
    frame[:] = bgr
    frame[:, 120:] = (0, 180, 0) if name != "green" else (255, 0, 0)  # a quarter of another
    result = obs.analyse(frame)
    assert result.scene_colours[0] == name
    other = "blue" if name == "green" else "green"
    expected = f"no one there; {name} and {other} things"
    if result.brightness < 60:
        expected = "dim light; " + expected
    assert _notes(result.text) == expected


def _hand(fingers: str, thumb_up: bool = False):
    """21 hand landmarks (wrist at the bottom): fingers "1111" = index..pinky stretched up."""
    from types import SimpleNamespace as P
    lm = [P(x=0.5, y=0.5) for _ in range(21)]
    lm[0] = P(x=0.5, y=0.9)
    for k, (mcp, pip, tip) in enumerate(((5, 6, 8), (9, 10, 12), (13, 14, 16), (17, 18, 20))):
        x = 0.44 + 0.04 * k
        lm[mcp], lm[pip] = P(x=x, y=0.7), P(x=x, y=0.6)
        lm[tip - 1] = P(x=x, y=0.52 if fingers[k] == "1" else 0.66)
        lm[tip] = P(x=x, y=0.45 if fingers[k] == "1" else 0.72)   # folded: back near the palm
    lm[2], lm[3] = P(x=0.38, y=0.75), P(x=0.36, y=0.68)
    lm[4] = P(x=0.36, y=0.5) if thumb_up else P(x=0.45, y=0.72)
    return lm


@pytest.mark.parametrize("fingers,thumb,expected", [
    ("0000", True, "giving a thumbs up"), ("1000", False, "pointing"),
    ("1111", False, "raising an open hand"), ("0000", False, None), ("1100", False, None)])
def test_hand_gestures_from_landmarks(fingers, thumb, expected):
    from vision_dialogue.perception.observer import hand_gesture
    assert hand_gesture(_hand(fingers, thumb)) == expected


def test_what_changed_since_the_previous_frame(astronaut, coffee):
    obs = FrameObserver(detectors=("faces", "pose", "colours"))
    assert obs.analyse(coffee).change is None                # nothing before it
    arrived = obs.analyse(astronaut)
    assert arrived.change == "a person just arrived" and arrived.text.endswith(
        "(a person just arrived)")
    assert obs.analyse(astronaut).change is None             # the same view
    assert obs.analyse(coffee).change == "the person just left"
    assert obs.analyse(cv2.flip(coffee, -1)).change == "the view just changed"


@pytest.mark.parametrize("notes, past, spoken", [
    ("no one there; orange and brown things (the person just left)", False,
     "I do not see anyone, just something orange and brown."),
    ("one person, close, on the left, wearing orange, giving a thumbs up", False,
     "I see someone close, on the left, wearing orange, giving a thumbs up."),
    (DARK_TEXT, True, "It was too dark to see anything."),
    ("dim light; no one there; written words: 'EXIT'", False,
     "The light is dim, I do not see anyone, I can read 'EXIT'."),
    # a merged summary: its start and its end, in the past
    ("one person, close, in the middle; then one person, close, in the middle (the view just "
     "changed); then no one there; blue things; then " + DARK_TEXT, True,
     "I saw someone close, in the middle, and then it was too dark to see anything."),
])
def test_notes_said_in_the_robots_words(notes, past, spoken):
    """When a small model reads its notes out, the robot says them in its own words."""
    assert speak_notes(notes, past) == spoken
    assert make_observer().speak(notes, past) == spoken


def test_smile_and_gaze_are_read_from_the_face_mesh(observer, astronaut):
    import cv2
    import skimage.data
    obs = observer.analyse(astronaut)
    assert [(p.smiling, p.facing) for p in obs.people] == [(True, True)]
    assert "smiling, looking at you" in obs.text
    cameraman = cv2.cvtColor(skimage.data.camera(), cv2.COLOR_GRAY2BGR)   # neutral, profile
    seen = observer.analyse(cameraman)
    assert [(p.smiling, p.facing) for p in seen.people] == [(False, False)]
    assert "looking away" in seen.text and "smiling" not in seen.text


def test_face_cues_from_mesh_geometry():
    from types import SimpleNamespace as P

    from vision_dialogue.perception.observer import face_cues

    def mesh(mouth_width, lift, nose):
        lm = [P(x=0.5, y=0.5) for _ in range(468)]
        lm[234], lm[454] = P(x=0.3, y=0.5), P(x=0.7, y=0.5)          # cheeks: face 0.4 wide
        lm[33], lm[263] = P(x=0.4, y=0.4), P(x=0.6, y=0.4)           # eyes
        lm[1] = P(x=0.4 + 0.2 * nose, y=0.5)
        lm[13], lm[14] = P(x=0.5, y=0.6), P(x=0.5, y=0.62)
        half = mouth_width * 0.4 / 2
        lm[61], lm[291] = (P(x=0.5 - half, y=0.61 - lift * 0.4),
                           P(x=0.5 + half, y=0.61 - lift * 0.4))
        return lm
    assert face_cues(mesh(0.48, 0.06, 0.5)) == (True, True)       # wide, lifted: a smile
    assert face_cues(mesh(0.37, 0.0, 0.5)) == (False, True)       # neutral, frontal
    assert face_cues(mesh(0.37, 0.0, 0.95)) == (False, False)     # turned away


def test_the_notes_observer_releases_its_frame_observer():
    """The manager closes what it made; NotesObserver passes it on to the models' owner."""
    from vision_dialogue.perception.observer import NotesObserver
    closed = []

    class Frames:
        def close(self, timeout):
            closed.append(timeout)
            return True

    assert NotesObserver(Frames()).close(timeout=3.0) is True
    assert closed == [3.0]


def test_closing_waits_for_the_frame_in_the_models_only_as_long_as_it_is_told():
    """A frame still being analysed holds the close at most `timeout` s (the node's exit)."""
    import threading
    import time

    from vision_dialogue.perception.observer import FrameObserver
    observer = FrameObserver(detectors=("colours",))
    inside, leave = threading.Event(), threading.Event()

    def analysing():             # a frame's analysis holds the models' lock as this does
        with observer._lock:
            inside.set()
            leave.wait(30)
    worker = threading.Thread(target=analysing)
    worker.start()
    try:
        assert inside.wait(30)
        t0 = time.monotonic()
        assert observer.close(timeout=0.2) is False
        assert time.monotonic() - t0 < 5.0
    finally:
        leave.set()
        worker.join(30)
    assert observer.close(timeout=0.2) is True
