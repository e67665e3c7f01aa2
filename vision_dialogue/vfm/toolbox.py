"""The ROS-free tool runtime: loads each tool's models lazily on first use, once
(thread-safe), on the device the `load` spec assigns, shares models between tools (depth and
normal share DPT; remove and replace share CLIPSeg + inpainting; text2image and every ControlNet
tool on a device share one SD 1.5 UNet/VAE/text encoder), and runs a tool on an RGB array.

A tool whose checkpoint is missing raises ModelMissingError naming it; other tools are unaffected
and the load is retried on the next call (so a model downloaded later is picked up)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from vision_dialogue.vfm import registry
from vision_dialogue.vfm.errors import ModelMissingError, ToolError, UnknownToolError
from vision_dialogue.vfm.models import opencv_maps
from vision_dialogue.vfm.models.common import RunContext, resolve_dir, resolve_file

_FILE_CHECKPOINTS = {"hed_annotator": "ControlNetHED.pth"}


@dataclass
class _Entry:
    factory: Callable[[], Any]
    instance: Any = None
    error: str = ""
    load_lock: threading.Lock = field(default_factory=threading.Lock)
    run_lock: threading.Lock = field(default_factory=threading.Lock)


class Toolbox:
    """devices: {op: device} (from devices.parse_load); checkpoints: overrides of
    registry.DEFAULT_CHECKPOINTS."""

    def __init__(self, devices: dict[str, str], checkpoints: dict[str, str] | None = None,
                 allow_download: bool = False):
        unknown = [op for op in devices if op not in registry.BY_OP]
        if unknown:
            raise UnknownToolError(f"unknown tools {unknown}")
        self.devices = dict(devices)
        self.checkpoints = {**registry.DEFAULT_CHECKPOINTS, **(checkpoints or {})}
        self.allow_download = allow_download
        self._entries: dict[tuple, _Entry] = {}
        self._entries_lock = threading.Lock()

    # ---- what is offered -----------------------------------------------------------------
    @property
    def specs(self) -> list[registry.ToolSpec]:
        return [registry.BY_OP[op] for op in self.devices]

    def spec(self, op: str) -> registry.ToolSpec:
        if op not in self.devices:
            known = ", ".join(self.devices) or "none"
            raise UnknownToolError(f"unknown tool {op!r}: this server offers {known}")
        return registry.BY_OP[op]

    def is_loaded(self, op: str) -> bool:
        spec = self.spec(op)
        if spec.op in ("canny", "line", "scribble"):
            return True
        entries = [self._entries.get(k) for k in self._keys(op)]
        return bool(entries) and all(e is not None and e.instance is not None for e in entries)

    def status(self, op: str) -> str:
        """'ready', 'not loaded', or the error that the last load attempt / a checkpoint
        lookup gave (naming the checkpoint to provide)."""
        if self.is_loaded(op):
            return "ready"
        for k in self._keys(op):
            e = self._entries.get(k)
            if e is not None and e.error:
                return e.error
        if not self.allow_download:
            for ck in self.spec(op).checkpoints:
                try:
                    self._check_checkpoint(ck)
                except ModelMissingError as err:
                    return str(err)
        return "not loaded"

    def _check_checkpoint(self, key: str) -> str:
        ckpt = self.checkpoints[key]
        if key in _FILE_CHECKPOINTS:
            return resolve_file(ckpt, _FILE_CHECKPOINTS[key], False)
        return resolve_dir(ckpt, False)

    # ---- models --------------------------------------------------------------------------
    def _keys(self, op: str) -> list[tuple]:
        dev = self.devices[op]
        ck = self.checkpoints
        if op in ("canny", "line", "scribble"):
            return []
        if op in ("remove", "replace"):
            return [("clipseg", ck["clipseg"], dev), ("inpaint", ck["inpaint"], dev)]
        if op.endswith("2image") and op != "text2image":
            m = op[: -len("2image")]
            return [("controlnet", ck[f"controlnet_{m}"], ck["sd"], dev)]
        family = {"caption": "caption", "vqa": "vqa", "detect": "detect", "text2image": "sd",
                  "pix2pix": "pix2pix", "hed": "hed_annotator", "pose": "pose", "seg": "seg",
                  "depth": "depth", "normal": "depth"}[op]
        return [(family, ck.get(family, ""), dev)]

    def _factory(self, key: tuple) -> Callable[[], Any]:
        family, ckpt, dev = key[0], key[1], key[-1]
        dl = self.allow_download

        def make():
            from vision_dialogue.vfm.models import (blip, clipseg, diffusion, dpt, hed, owlvit,
                                                    pose, upernet)
            cls = {"caption": blip.Captioner, "vqa": blip.QuestionAnswerer,
                   "detect": owlvit.Detector, "sd": diffusion.TextToImage,
                   "pix2pix": diffusion.InstructPix2Pix, "hed_annotator": hed.HedDetector,
                   "pose": pose.PoseDetector, "seg": upernet.Segmenter,
                   "depth": dpt.DepthEstimator, "clipseg": clipseg.TextMasker}.get(family)
            if family == "inpaint":
                return diffusion.Inpainter(ckpt, dev, dl,
                                           masker=self._model(("clipseg", self.checkpoints["clipseg"], dev)))
            if family == "controlnet":
                return diffusion.ControlNetGenerator(ckpt, dev, dl, base_checkpoint=key[2])
            return cls(ckpt, dev, dl)
        return make

    def _model(self, key: tuple):
        with self._entries_lock:
            entry = self._entries.setdefault(key, _Entry(self._factory(key)))
        if entry.instance is not None:
            return entry.instance
        with entry.load_lock:
            if entry.instance is None:
                _check_device(key[-1])
                try:
                    inst = entry.factory()
                    inst.load()
                except ModelMissingError as e:
                    entry.error = str(e)
                    raise
                except ToolError:
                    raise
                except Exception as e:  # corrupt files, wrong model type, out of memory
                    entry.error = (f"loading {key[0]} from '{key[1]}' failed: "
                                   f"{type(e).__name__}: {e}")
                    raise ToolError(entry.error) from e
                entry.instance, entry.error = inst, ""
        return entry.instance

    def _run_lock(self, op: str) -> threading.Lock | None:
        keys = self._keys(op)
        return self._entries[keys[-1]].run_lock if keys else None

    def preload(self, op: str) -> None:
        for k in self._keys(op):
            self._model(k)

    # ---- running -------------------------------------------------------------------------
    def run(self, op: str, rgb: np.ndarray | None, text: str, ctx: RunContext | None = None):
        """Run tool `op`: returns a str (image_to_text) or an RGB uint8 array."""
        ctx = ctx or RunContext()
        spec = self.spec(op)
        text = (text or "").strip()
        if spec.needs_text and not text:
            raise ToolError(f"tool {op!r} needs a text argument: {spec.description}")
        if spec.action_type != registry.TEXT_TO_IMAGE:
            if rgb is None or np.asarray(rgb).ndim != 3 or min(np.asarray(rgb).shape[:2]) < 8:
                raise ToolError(f"tool {op!r} needs an RGB input image of at least 8x8 pixels")
        if not self.is_loaded(op):
            ctx.progress("loading", 0, 1)
            self.preload(op)
        ctx.check()
        lock = self._run_lock(op)
        if lock is None:
            return self._call(op, rgb, text, ctx)
        with lock:
            return self._call(op, rgb, text, ctx)

    def _call(self, op: str, rgb, text: str, ctx: RunContext):
        keys = self._keys(op)
        m = self._entries[keys[-1]].instance if keys else None
        if op not in ("text2image", "pix2pix", "remove", "replace") and not op.endswith("2image"):
            ctx.progress("running", 0, 1)
        if op == "canny":
            return opencv_maps.canny(rgb)
        if op == "line":
            return opencv_maps.lines(rgb)
        if op == "scribble":
            return opencv_maps.scribble(rgb)
        if op == "caption":
            return m.run(rgb)
        if op in ("vqa", "detect"):
            return m.run(rgb, text)
        if op == "text2image":
            return m.run(text, ctx)
        if op == "pix2pix":
            return m.run(rgb, text, ctx)
        if op == "remove":
            return m.replace(rgb, text, "background", ctx)
        if op == "replace":
            target, sep, repl = text.partition(",")
            if not sep or not target.strip() or not repl.strip():
                raise ToolError("replace needs text 'object to replace, what to replace it with'")
            return m.replace(rgb, target.strip(), repl.strip(), ctx)
        if op in ("hed", "pose", "seg"):
            return m.run(rgb)
        if op == "depth":
            return m.depth(rgb)
        if op == "normal":
            return m.normal(rgb)
        if op.endswith("2image"):
            return m.run(rgb, text, ctx)
        raise UnknownToolError(op)  # pragma: no cover - registry and dispatch out of sync


def _check_device(device: str) -> None:
    if device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            raise ToolError(f"device {device!r} is not available on this host (no CUDA); "
                            "assign the tool to cpu in the load parameter")
        idx = int(device.split(":")[1]) if ":" in device else 0
        if idx >= torch.cuda.device_count():
            raise ToolError(f"device {device!r} does not exist ({torch.cuda.device_count()} GPUs)")
    elif device == "mps":
        import torch
        if not torch.backends.mps.is_available():
            raise ToolError("device 'mps' is not available on this host")
