"""The sandboxed image store: one directory holding every input and output image.

Names follow Visual ChatGPT's chain: a shared image is `{id}.png`; a tool output is
`{id}_{op}_{prev}_{org}.png` where `id` is a new short uuid, `prev` the id of the input image
and `org` the name of the original image the chain started from (get_new_image_name).
Every name a goal gives must resolve inside the store: `..`, absolute paths elsewhere and
symlinks pointing out are rejected.
"""
from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import cv2
import numpy as np


class StoreError(ValueError):
    """A bad image name (outside the store, missing, not an image); the message says which."""


class ImageStore:
    def __init__(self, root: str | os.PathLike, id_len: int = 8):
        self.root = Path(os.path.expanduser(str(root))).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.id_len = id_len
        self._lock = threading.Lock()

    # ---- names ---------------------------------------------------------------------------
    @staticmethod
    def chain(prev_name: str) -> tuple[str, str]:
        """(prev id, original name) of an existing store name."""
        stem = Path(prev_name).name.rsplit(".", 1)[0]
        parts = stem.split("_")
        if len(parts) == 4:
            return parts[0], parts[3]
        return parts[0], parts[-1]

    def _new_id(self) -> str:
        return uuid.uuid4().hex[: self.id_len]

    def new_name(self, op: str, prev_name: str | None = None) -> str:
        """A fresh name for `op`'s output; `{id}.png` when there is no input image."""
        if "_" in op or "/" in op:
            raise ValueError(f"op id {op!r} must not contain '_' or '/'")
        with self._lock:
            while True:
                nid = self._new_id()
                if prev_name:
                    prev, org = self.chain(prev_name)
                    name = f"{nid}_{op}_{prev}_{org}.png"
                else:
                    name = f"{nid}.png"
                if not (self.root / name).exists():
                    (self.root / name).touch()  # reserve it against a concurrent writer
                    return name

    # ---- resolving -----------------------------------------------------------------------
    def resolve(self, name: str) -> Path:
        """The real path of an existing image `name` inside the store; StoreError otherwise."""
        if not name or not name.strip():
            raise StoreError("empty image file name")
        if "\x00" in name:
            raise StoreError("image file name contains a NUL byte")
        p = Path(os.path.expanduser(name.strip()))
        if ".." in p.parts:
            raise StoreError(f"image file {name!r} contains '..'; give a name inside the image "
                             "store")
        cand = p if p.is_absolute() else self.root / p
        real = Path(os.path.realpath(cand))
        if not real.is_relative_to(self.root):
            why = "is a symlink pointing" if cand.is_symlink() or real != cand.absolute() else "is"
            raise StoreError(f"image file {name!r} {why} outside the image store {self.root}")
        if not real.is_file():
            raise StoreError(f"image file {name!r} does not exist in the image store {self.root}")
        return real

    def relative(self, path: Path) -> str:
        return str(Path(path).relative_to(self.root))

    # ---- reading / writing ---------------------------------------------------------------
    def load(self, name: str) -> np.ndarray:
        """RGB uint8 HxWx3 image of store file `name`."""
        path = self.resolve(name)
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise StoreError(f"image file {name!r} is not a readable image")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def _write(self, name: str, rgb: np.ndarray) -> None:
        rgb = np.asarray(rgb)
        if rgb.dtype != np.uint8 or rgb.ndim not in (2, 3):
            raise ValueError(f"expected a uint8 HxW or HxWx3 image, got {rgb.dtype} {rgb.shape}")
        img = rgb if rgb.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(rgb[:, :, :3]),
                                                     cv2.COLOR_RGB2BGR)
        tmp = self.root / f".{name}.tmp.png"
        if not cv2.imwrite(str(tmp), img):
            raise OSError(f"could not write {tmp}")
        os.replace(tmp, self.root / name)

    def add(self, rgb: np.ndarray) -> str:
        """Store a new (shared/uploaded) image as `{id}.png`; returns its name."""
        name = self.new_name("input")
        self._write(name, rgb)
        return name

    def save(self, rgb: np.ndarray, op: str, prev_name: str | None) -> str:
        """Store `op`'s output chained to `prev_name` (None: text-to-image); return its name."""
        name = self.new_name(op, prev_name)
        try:
            self._write(name, rgb)
        except Exception:
            (self.root / name).unlink(missing_ok=True)
            raise
        return name
