"""The sandboxed image store: one directory holding every input and output image.

Names follow Visual ChatGPT's chain: a shared image is `{id}.png`; a tool output is
`{id}_{op}_{prev}_{org}.png` where `id` is a new short uuid, `prev` the id of the input image
and `org` the name of the original image the chain started from (get_new_image_name).
Every name a goal gives must resolve inside the store: `..`, absolute paths elsewhere and
symlinks pointing out are rejected. A file is opened first and then verified (no symlink
followed at the last step, the opened file's real path inside the store), so swapping a file
for a link between the check and the read cannot escape; its declared size is checked
against `max_pixels` before it is decoded.

Retention: the store keeps at most `max_bytes`; past that the least recently used images
(by modification time, which every read refreshes) are deleted, never the one just written.
"""
from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import cv2
import numpy as np

from vision_dialogue.common.images import DEFAULT_MAX_PIXELS, ImageDecodeError, decode_guarded

#: default size cap of an image store
DEFAULT_MAX_BYTES = 512 * 1024 * 1024


class StoreError(ValueError):
    """A bad image name (outside the store, missing, not an image); the message says which."""


class ImageStore:
    """The store in `root`; see the module docstring for names, safety and retention."""

    def __init__(self, root: str | os.PathLike, id_len: int = 8,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.root = Path(os.path.expanduser(str(root))).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.id_len = id_len
        self.max_bytes, self.max_pixels = int(max_bytes), int(max_pixels)
        self.evicted = 0
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
        data = self._read_inside(self.resolve(name), name)
        try:
            bgr = decode_guarded(data, self.max_pixels)
        except ImageDecodeError as e:
            raise StoreError(f"image file {name!r}: {e}") from None
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def _read_inside(self, path: Path, name: str) -> bytes:
        """Open without following a symlink, verify the opened file is in the store, read."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as e:
            raise StoreError(f"image file {name!r} cannot be opened safely ({e.strerror})") \
                from None
        try:
            real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if not real.is_relative_to(self.root):
                raise StoreError(f"image file {name!r} is outside the image store {self.root}")
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read()
            os.utime(fd)     # recently used: evicted last
            return data
        finally:
            os.close(fd)

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
        self._evict(keep=name)

    def _evict(self, keep: str) -> None:
        """Delete the least recently used images until the store is under max_bytes."""
        with self._lock:
            files = []
            for e in os.scandir(self.root):
                if e.is_file(follow_symlinks=False) and not e.name.startswith("."):
                    st = e.stat(follow_symlinks=False)
                    files.append((st.st_mtime, e.name, st.st_size))
            total = sum(size for _, _, size in files)
            for _, fname, size in sorted(files):
                if total <= self.max_bytes:
                    break
                if fname == keep:
                    continue
                try:
                    os.unlink(self.root / fname)
                except OSError:
                    continue
                total -= size
                self.evicted += 1

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
