"""The ROS-free tool runtime.

Builds each tool's models lazily on first use, once (thread-safe), on the device the `load` spec
assigns, and runs a tool on an RGB array.

Everything about a tool comes from vfm/registry.py: the model it runs on (MODELS) and the
method it calls. Tools that name the same model on a device share it (depth and normal share
DPT; remove and replace share CLIPSeg + inpainting; the diffusion module shares one SD 1.5
UNet/VAE/text encoder between text2image and every ControlNet tool).

A tool whose checkpoint is missing raises ModelMissingError naming it; other tools are
unaffected and the load is retried on the next call (so a model downloaded later is picked
up).
"""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from vision_dialogue.vfm import registry
from vision_dialogue.vfm.errors import ModelMissingError, ToolError, UnknownToolError
from vision_dialogue.vfm.models.common import RunContext, resolve_dir, resolve_file


@dataclass
class _Entry:
    factory: Callable[[], Any]
    instance: Any = None
    error: str = ""
    load_lock: threading.Lock = field(default_factory=threading.Lock)
    run_lock: threading.Lock = field(default_factory=threading.Lock)


class Toolbox:
    """devices.

    {op: device} (from devices.parse_load); checkpoints: overrides of registry.DEFAULT_CHECKPOINTS.
    """

    def __init__(self, devices: dict[str, str], checkpoints: dict[str, str] | None = None,
                 allow_download: bool = False, safety_checker: bool = True):
        unknown = [op for op in devices if op not in registry.BY_OP]
        if unknown:
            raise UnknownToolError(f"unknown tools {unknown}")
        self.devices = dict(devices)
        self.checkpoints = {**registry.DEFAULT_CHECKPOINTS, **(checkpoints or {})}
        self.allow_download = allow_download
        self.safety_checker = bool(safety_checker)
        self._entries: dict[tuple, _Entry] = {}
        self._entries_lock = threading.Lock()
        for op in self.devices:
            if registry.MODELS[registry.BY_OP[op].model].eager:
                self.preload(op)

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
        entries = [self._entries.get(k) for k in self._keys(op)]
        return all(e is not None and e.instance is not None for e in entries)

    def status(self, op: str) -> str:
        """Return 'ready', 'not loaded', or why the tool cannot load.

        The error of the last load attempt or of a checkpoint lookup, naming the checkpoint to
        provide.
        """
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

    def readiness(self) -> tuple[list[str], dict[str, str]]:
        """(tools that can run now, {tool: why not}) from the checkpoints on disk, loading none.

        A tool can run when its checkpoints are found (or it needs none, or downloads are on).
        """
        ready, missing = [], {}
        for op in self.devices:
            why = None
            if not self.allow_download:
                for ck in self.spec(op).checkpoints:
                    try:
                        self._check_checkpoint(ck)
                    except ModelMissingError as err:
                        why = str(err)
                        break
            if why is None:
                ready.append(op)
            else:
                missing[op] = why
        return ready, missing

    def _check_checkpoint(self, key: str) -> str:
        ckpt = self.checkpoints[key]
        if key in registry.CHECKPOINT_FILES:
            return resolve_file(ckpt, registry.CHECKPOINT_FILES[key], False)
        return resolve_dir(ckpt, False)

    # ---- models --------------------------------------------------------------------------
    def _key(self, model: str, device: str) -> tuple:
        """One model instance per (model, its checkpoints, device)."""
        m = registry.MODELS[model]
        return (model, self.checkpoints.get(m.checkpoint, ""),
                self.checkpoints.get(m.base_checkpoint, ""), device)

    def _keys(self, op: str) -> list[tuple]:
        """The model instances `op` needs, the one it runs on last."""
        spec, dev = self.spec(op), self.devices[op]
        masker = registry.MODELS[spec.model].masker
        return ([self._key(masker, dev)] if masker else []) + [self._key(spec.model, dev)]

    def _factory(self, key: tuple) -> Callable[[], Any]:
        model, ckpt, base, dev = key
        m = registry.MODELS[model]

        def make():
            module, cls = m.cls.split(".")
            cls = getattr(importlib.import_module(f"vision_dialogue.vfm.models.{module}"), cls)
            extra = {}
            if m.base_checkpoint:
                extra["base_checkpoint"] = base
            if m.masker:
                extra["masker"] = self._model(self._key(m.masker, dev))
            if m.generates:
                extra["safety_checker"] = self.safety_checker
            return cls(ckpt, dev, self.allow_download, **extra)
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

    def _run_lock(self, op: str) -> threading.Lock:
        return self._entries[self._keys(op)[-1]].run_lock

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
        model = self._model(self._keys(op)[-1])
        if not registry.MODELS[spec.model].reports_steps:
            ctx.progress("running", 0, 1)
        inputs = {"rgb": rgb, "text": text, "ctx": ctx}
        with self._run_lock(op):
            return getattr(model, spec.call)(*(inputs[a] for a in spec.args))


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
