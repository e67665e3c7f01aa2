"""Shared pieces of the model families.

Checkpoint resolution (local path or local HF cache, never the network unless allowed), dtype per
device, and the per-call run context.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from vision_dialogue.vfm.errors import Cancelled, ModelMissingError


def torch_dtype(device: str):
    """fp16 on CUDA, fp32 elsewhere (as Visual ChatGPT)."""
    import torch
    return torch.float16 if device.startswith("cuda") else torch.float32


def _missing(checkpoint: str, detail: str) -> ModelMissingError:
    return ModelMissingError(
        f"model checkpoint '{checkpoint}' is not available locally ({detail}). Provide it as a "
        f"local directory/file path in the checkpoint parameter, put it in the Hugging Face "
        f"cache (huggingface-cli download {checkpoint}), or set allow_download:=true")


def resolve_dir(checkpoint: str, allow_download: bool) -> str:
    """A local directory for `checkpoint` (a path, or a repo id in the local HF cache)."""
    p = Path(os.path.expanduser(checkpoint))
    if p.is_dir():
        return str(p)
    if p.is_absolute() or checkpoint.startswith((".", "~")) or checkpoint.count("/") != 1:
        raise _missing(checkpoint, f"no directory {p}")
    from huggingface_hub import snapshot_download
    try:
        return snapshot_download(checkpoint, local_files_only=not allow_download)
    except Exception as e:  # LocalEntryNotFoundError, network errors, bad repo ids
        raise _missing(checkpoint, f"{type(e).__name__}") from None


def resolve_file(checkpoint: str, filename: str, allow_download: bool) -> str:
    """A local file: `checkpoint` itself, `checkpoint/filename`, or `filename` of a cached repo."""
    p = Path(os.path.expanduser(checkpoint))
    if p.is_file():
        return str(p)
    if p.is_dir():
        if (p / filename).is_file():
            return str(p / filename)
        raise _missing(checkpoint, f"no {filename} in {p}")
    if p.is_absolute() or checkpoint.count("/") != 1:
        raise _missing(checkpoint, f"no file {p}")
    from huggingface_hub import hf_hub_download
    try:
        return hf_hub_download(checkpoint, filename, local_files_only=not allow_download)
    except Exception as e:
        raise _missing(f"{checkpoint}/{filename}", type(e).__name__) from None


def pixel_box(box, rgb: np.ndarray) -> tuple[int, int, int, int]:
    """A detector's (x1, y1, x2, y2) as whole pixels inside the image."""
    h, w = rgb.shape[:2]
    return tuple(int(round(min(max(v, 0), lim))) for v, lim in zip(box, (w, h, w, h)))


@dataclass
class ToolImage:
    """An image tool's output with what it says about it ("5 segments").

    rgb None: nothing to show (segment_object found none of the objects), `text` says why.
    """

    rgb: np.ndarray | None
    text: str = ""


@dataclass
class RunContext:
    """What a tool call gets besides its inputs: progress reporting and cancel checks."""

    progress: Callable[[str, int, int], None] = lambda stage, step, total: None
    cancelled: Callable[[], bool] = lambda: False
    steps: int = 20
    guidance_scale: float = 9.0
    image_size: int = 512
    seed: int = -1
    extra: dict = field(default_factory=dict)

    def check(self) -> None:
        if self.cancelled():
            raise Cancelled()


class LoadedModel:
    """Base of every model wrapper: holds checkpoint/device, loads once in `load()`."""

    def __init__(self, checkpoint: str, device: str = "cpu", allow_download: bool = False):
        self.checkpoint = checkpoint
        self.device = device
        self.allow_download = allow_download
        self.dtype = torch_dtype(device)

    def load(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def dir(self) -> str:
        return resolve_dir(self.checkpoint, self.allow_download)

    def load_transformers(self, processor_name: str, model_name: str) -> None:
        """Load `transformers.<processor_name>` and `<model_name>` from the checkpoint.

        Local files only, into self.processor / self.model, on this device and dtype.
        """
        import transformers
        path = self.dir()
        self.processor = getattr(transformers, processor_name).from_pretrained(
            path, local_files_only=True)
        self.model = getattr(transformers, model_name).from_pretrained(
            path, dtype=self.dtype, local_files_only=True)
        self.model.to(self.device).eval()
