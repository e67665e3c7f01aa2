"""The two-person demo video: two people come and go in front of a wall, and one waves.

Built from scikit-image's astronaut photo (Anna), a CC0 photo of another person shipped in
`camera/data/` (Ben; its source is in `camera/data/SOURCES.md`) and a drawn open hand that
MediaPipe's hand model takes for one; no downloads. Two different faces, so a face print tells
them apart (people_node). At 8 frames a second, so the events node sees the wave between the
manager's frames:

    0-5 s   nobody            5-50 s  Anna on the left (orange suit)
    28 s    Ben arrives on the right (blue shirt)   33-39 s  Ben waves
    50 s    Anna leaves       70 s  Ben leaves, nobody until the end (80 s)

    python -m vision_dialogue.cli.demo_assets --people [--out DIR] [--force]   # prints the path

Cached like the main demo video (vision_dialogue/camera/demo_video.py), by a hash of the recipe.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from vision_dialogue.camera.demo_video import default_dir, write_video

RECIPE_VERSION = 4
BEN_PHOTO = Path(__file__).resolve().parent / "data" / "ben.jpg"
WALL_BGR = (188, 196, 204)
SKIN_BGR = (120, 160, 215)


@dataclass(frozen=True)
class PeopleSpec:
    width: int = 640
    height: int = 480
    fps: float = 8.0
    seconds: float = 80.0
    anna: tuple[float, float] = (5.0, 50.0)      # in view from, until (s)
    ben: tuple[float, float] = (28.0, 70.0)
    wave: tuple[float, float] = (33.0, 39.0)   # 6 s: a slow machine sees enough of it
    wave_hz: float = 1.0


def person_crop(height: int) -> np.ndarray:
    """The astronaut's head and shoulders, `height` pixels tall (BGR)."""
    import skimage.data
    rgb = skimage.data.astronaut()[0:440, 90:390]
    crop = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    width = round(crop.shape[1] * height / crop.shape[0])
    return cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)


#: the photo's left part (most of the hand that holds a phone to her ear) is left out, and the
#: rest mirrored, so the drawn waving hand is the one open hand beside her head: with the whole
#: photo MediaPipe found the wave in 0-3 of 9 ways of sampling the video at 2-4 frames a
#: second, this way in 8 of 9 (the astronaut's mirror image before it: 8 of 9)
BEN_LEFT_OUT = 60
BEN_MARGIN = 120       # pixels between Ben and the right edge of the picture


def ben_crop(height: int) -> np.ndarray:
    """Ben's head and shoulders, `height` pixels tall (BGR), from the photo in camera/data/."""
    photo = cv2.imread(str(BEN_PHOTO))
    if photo is None:
        raise FileNotFoundError(f"the people demo's photo is missing: {BEN_PHOTO}")
    width = round(photo.shape[1] * height / photo.shape[0])
    scaled = cv2.resize(photo, (width, height), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(scaled[:, BEN_LEFT_OUT:][:, ::-1])


def open_hand(size: int) -> np.ndarray:
    """A drawn open hand, palm to the camera, fingers up, on the wall's colour (BGR)."""
    img = np.full((size, size, 3), WALL_BGR, np.uint8)
    cx, cy = size // 2, int(size * 0.62)
    cv2.ellipse(img, (cx, cy), (int(size * 0.16), int(size * 0.19)), 0, 0, 360, SKIN_BGR, -1)
    cv2.rectangle(img, (cx - int(size * 0.1), cy), (cx + int(size * 0.1), size), SKIN_BGR, -1)
    for dx, length in ((-0.11, 0.26), (-0.035, 0.29), (0.04, 0.27), (0.11, 0.21)):
        x0, y0 = cx + int(dx * size), cy - int(size * 0.12)
        x1, y1 = x0 + int(dx * size * 0.4), y0 - int(length * size)
        cv2.line(img, (x0, y0), (x1, y1), SKIN_BGR, int(size * 0.06))
        cv2.circle(img, (x1, y1), int(size * 0.03), SKIN_BGR, -1)
    thumb = (cx - int(size * 0.30), cy - int(size * 0.12))
    cv2.line(img, (cx - int(size * 0.13), cy + int(size * 0.02)), thumb, SKIN_BGR,
             int(size * 0.065))
    cv2.circle(img, thumb, int(size * 0.032), SKIN_BGR, -1)
    return cv2.GaussianBlur(img, (5, 5), 0)


def _paste(canvas: np.ndarray, img: np.ndarray, x: int, y: int, key=None) -> None:
    """Put `img` on `canvas` at (x, y), clipped; pixels equal to `key` stay transparent."""
    h, w = img.shape[:2]
    x0, y0, x1, y1 = max(0, x), max(0, y), min(canvas.shape[1], x + w), min(canvas.shape[0],
                                                                            y + h)
    if x0 >= x1 or y0 >= y1:
        return
    part = img[y0 - y:y1 - y, x0 - x:x1 - x]
    if key is None:
        canvas[y0:y1, x0:x1] = part
        return
    keep = np.abs(part.astype(int) - np.array(key)).sum(axis=2) > 30
    canvas[y0:y1, x0:x1][keep] = part[keep]


def build_people_video(path: Path, spec: PeopleSpec = PeopleSpec()) -> dict:
    """Write the two-person video to `path` and return its manifest (scenes and events)."""
    anna = person_crop(int(spec.height * 0.8))
    ben = ben_crop(anna.shape[0])
    hand = open_hand(int(spec.height * 0.32))
    top = spec.height - anna.shape[0]
    rng = np.random.default_rng(0)
    frames = []
    for i in range(round(spec.seconds * spec.fps)):
        t = i / spec.fps
        canvas = np.empty((spec.height, spec.width, 3), np.uint8)
        canvas[:] = WALL_BGR
        canvas[int(spec.height * 0.8):] = (90, 110, 130)          # a table edge
        if spec.anna[0] <= t < spec.anna[1]:
            _paste(canvas, anna, 20, top)
        if spec.ben[0] <= t < spec.ben[1]:
            _paste(canvas, ben, spec.width - ben.shape[1] - BEN_MARGIN, top)
            if spec.wave[0] <= t < spec.wave[1]:
                swing = np.sin(2 * np.pi * spec.wave_hz * (t - spec.wave[0]))
                x = spec.width - hand.shape[1] - 10 + int(25 * swing)   # by the head
                _paste(canvas, hand, x, 0, key=WALL_BGR)
        noise = rng.integers(-3, 4, canvas.shape)                  # a camera's sensor noise
        frames.append(np.clip(canvas.astype(int) + noise, 0, 255).astype(np.uint8))
    scenes = [{"name": "anna", "description": "Anna, orange suit, on the left",
               "start_s": spec.anna[0], "end_s": spec.anna[1]},
              {"name": "ben", "description": "Ben, blue shirt, on the right",
               "start_s": spec.ben[0], "end_s": spec.ben[1]},
              {"name": "wave", "description": "Ben waves", "start_s": spec.wave[0],
               "end_s": spec.wave[1]}]
    return write_video(path, frames, spec.fps, scenes)


def ensure_people_video(directory: Path | None = None, spec: PeopleSpec = PeopleSpec(),
                        force: bool = False) -> Path:
    """Path of the cached two-person video, building it first if it is missing."""
    directory = Path(directory) if directory else default_dir()
    key = hashlib.sha256(json.dumps({"v": RECIPE_VERSION, "spec": asdict(spec)}).encode())
    path = directory / f"people_{key.hexdigest()[:10]}.avi"
    if force or not path.is_file() or not path.with_suffix(".json").is_file():
        build_people_video(path, spec)
    return path
