"""The demo video, built from real photos that installable packages ship (no downloads).

Scenes: scikit-image's astronaut (a person), coffee (a cup on a table), chelsea (a cat),
rocket (a launch pad), Debian darknet's photos (person, dog, horses...) when
/usr/share/darknet/data exists, and a few dark seconds ("lights off"). Each scene is held
several seconds with a slow pan/zoom, so consecutive frames differ like a real camera's.

    python -m vision_dialogue.cli.demo_assets [--out DIR] [--force]   # prints the video path
    python -m vision_dialogue.cli.demo_assets --people                # the two-person video

The video (MJPG .avi) and a JSON manifest of the scenes are cached in
$VD_DEMO_DIR or ~/.cache/vision_dialogue/demo/, named by a hash of the recipe, so a
changed recipe gives a new file and an unchanged one is reused. ROS-free.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

DARKNET_DIR = Path("/usr/share/darknet/data")
RECIPE_VERSION = 3
#: where a level pan runs, from the top (0) to the bottom (1) of the photo: a portrait's face
#: is in its upper part (at mid-height the astronaut's forehead was out of the frame, and
#: people_node could not print her face)
LEVEL_PAN_HEIGHT = 0.2


@dataclass(frozen=True)
class DemoSpec:
    width: int = 640
    height: int = 480
    fps: float = 2.0
    scene_seconds: float = 8.0
    person_seconds: float = 14.0   # the person stays for the demo script's first three turns
    dark_seconds: float = 4.0
    zoom: float = 1.25  # the pan moves a window 1/zoom of the photo across it


def _skimage_photos() -> list[tuple[str, str, np.ndarray]]:
    """(name, description, BGR image) of scikit-image's sample photos."""
    import skimage.data as d
    photos = [("astronaut", "a smiling person in an orange space suit", d.astronaut()),
              ("coffee", "a cup of coffee on a saucer", d.coffee()),
              ("chelsea", "an orange tabby cat", d.chelsea()),
              ("rocket", "a rocket on its launch pad", d.rocket())]
    return [(n, txt, cv2.cvtColor(img, cv2.COLOR_RGB2BGR)) for n, txt, img in photos]


def _darknet_photos(root: Path = DARKNET_DIR) -> list[tuple[str, str, np.ndarray]]:
    out = []
    for name in ("person", "dog", "horses", "kite"):
        path = root / f"{name}.jpg"
        img = cv2.imread(str(path)) if path.is_file() else None
        if img is not None:
            out.append((f"darknet_{name}", f"darknet sample photo '{name}'", img))
    return out


def scene_photos() -> list[tuple[str, str, np.ndarray]]:
    return _skimage_photos() + _darknet_photos()


def _cover(img: np.ndarray, w: int, h: int, zoom: float) -> np.ndarray:
    """Resize so that the photo covers (w*zoom, h*zoom), keeping its aspect ratio."""
    scale = max(w * zoom / img.shape[1], h * zoom / img.shape[0])
    size = (max(w, round(img.shape[1] * scale)), max(h, round(img.shape[0] * scale)))
    return cv2.resize(img, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)


def pan_frames(img: np.ndarray, n: int, spec: DemoSpec, direction: int = 0,
               level: bool = False) -> list[np.ndarray]:
    """n frames of a slow pan across `img` (direction selects one of four diagonals).

    level: a horizontal pan at `LEVEL_PAN_HEIGHT` (a person's whole face stays in view).
    """
    big = _cover(img, spec.width, spec.height, spec.zoom)
    dx, dy = big.shape[1] - spec.width, big.shape[0] - spec.height
    frames = []
    for i in range(n):
        t = i / max(1, n - 1)
        t = 0.5 - 0.5 * np.cos(np.pi * t)  # ease in/out
        fx = t if direction in (0, 2) else 1 - t
        fy = t if direction in (0, 3) else 1 - t
        x, y = round(dx * fx), round(dy * (LEVEL_PAN_HEIGHT if level else fy))
        frames.append(np.ascontiguousarray(big[y:y + spec.height, x:x + spec.width]))
    return frames


def dark_frames(n: int, spec: DemoSpec, seed: int = 0) -> list[np.ndarray]:
    """'Lights off': near-black frames with a little sensor noise."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 6, (spec.height, spec.width, 3), dtype=np.uint8) for _ in range(n)]


def recipe_key(spec: DemoSpec, names: list[str]) -> str:
    text = json.dumps({"v": RECIPE_VERSION, "spec": asdict(spec), "scenes": names})
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def default_dir() -> Path:
    return Path(os.environ.get("VD_DEMO_DIR") or Path.home() / ".cache" / PACKAGE / "demo")


PACKAGE = "vision_dialogue"


def build_demo_video(path: Path, spec: DemoSpec = DemoSpec()) -> dict:
    """Write the demo video to `path` (atomically) and return its manifest."""
    photos = scene_photos()
    scenes, frames = [], []
    plan = photos[:2] + [("dark", "darkness: the lights are off", None)] + photos[2:]
    for i, (name, text, img) in enumerate(plan):
        if img is None:
            new = dark_frames(max(1, round(spec.dark_seconds * spec.fps)), spec, seed=i)
        else:
            person = name == "astronaut"
            seconds = spec.person_seconds if person else spec.scene_seconds
            new = pan_frames(img, max(2, round(seconds * spec.fps)), spec, direction=i % 4,
                             level=person)
        scenes.append({"name": name, "description": text, "start_s": len(frames) / spec.fps,
                       "seconds": len(new) / spec.fps, "first_frame": len(frames),
                       "frames": len(new)})
        frames += new
    return write_video(path, frames, spec.fps, scenes)


def write_video(path: Path, frames: list[np.ndarray], fps: float, scenes: list[dict]) -> dict:
    """Write MJPG `frames` to `path` atomically, with a JSON manifest beside it; the manifest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write MJPG video to {tmp}")
    for f in frames:
        writer.write(f)
    writer.release()
    manifest = {"video": str(path), "fps": fps, "width": width, "height": height,
                "frames": len(frames), "seconds": len(frames) / fps, "scenes": scenes}
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, path)
    return manifest


def ensure_demo_video(directory: Path | None = None, spec: DemoSpec = DemoSpec(),
                      force: bool = False) -> Path:
    """Path of the cached demo video, building it first if it is missing."""
    directory = Path(directory) if directory else default_dir()
    names = [n for n, _, _ in scene_photos()]
    path = directory / f"demo_scenes_{recipe_key(spec, names)}.avi"
    if force or not path.is_file() or not path.with_suffix(".json").is_file():
        build_demo_video(path, spec)
    return path
