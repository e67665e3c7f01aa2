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

With a memory budget (vfm/memory.py), a load that would go past it first unloads (or, with
offload, moves to the CPU) the least recently used models that no goal is using; a model
running or loading for a goal is never touched, and an unloaded one loads again when asked.
"""
from __future__ import annotations

import gc
import importlib
import itertools
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from vision_dialogue.vfm import memory, registry
from vision_dialogue.vfm.errors import ModelMissingError, ToolError, UnknownToolError
from vision_dialogue.vfm.models.common import RunContext, resolve_dir, resolve_file


@dataclass
class _Entry:
    """One model instance on one device, and what the budget needs to know of it."""

    key: tuple
    factory: Callable[[], Any]
    instance: Any = None
    error: str = ""
    load_lock: threading.Lock = field(default_factory=threading.Lock)
    run_lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0            # goals running or loading it: never unloaded while > 0
    last_used: int = 0        # tick of the newest use: the least recent goes first
    place: str = ""           # device its tensors are on now ("" = not loaded)
    size: int = 0             # bytes it added when it loaded (shared tensors count once)

    @property
    def device(self) -> str:
        return memory.canonical(self.key[-1])

    @property
    def name(self) -> str:
        return f"{self.key[0]}@{self.key[-1]}"


class Toolbox:
    """devices.

    {op: device} (from devices.parse_load); checkpoints: overrides of registry.DEFAULT_CHECKPOINTS.
    """

    def __init__(self, devices: dict[str, str], checkpoints: dict[str, str] | None = None,
                 allow_download: bool = False, safety_checker: bool = True,
                 budget: memory.Budget | None = None,
                 log: Callable[[str], None] = lambda line: None):
        unknown = [op for op in devices if op not in registry.BY_OP]
        if unknown:
            raise UnknownToolError(f"unknown tools {unknown}")
        self.devices = dict(devices)
        self.checkpoints = {**registry.DEFAULT_CHECKPOINTS, **(checkpoints or {})}
        self.allow_download = allow_download
        self.safety_checker = bool(safety_checker)
        self.budget = budget or memory.Budget()
        self.log = log
        self._entries: dict[tuple, _Entry] = {}
        self._entries_lock = threading.Lock()
        self._budget_lock = threading.RLock()   # one load or unload decision at a time
        self._ticks = itertools.count(1)
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

    def placement(self, op: str) -> tuple[str, float]:
        """Where its own model is now, and the MiB it holds there.

        ("cuda:0", 1203.4), ("cpu (offloaded)", ...), or ("", 0.0) when not loaded.
        """
        e = self._entries.get(self._keys(op)[-1])
        if e is None or e.instance is None:
            return "", 0.0
        where = e.place if e.place == e.device else f"{e.place} (offloaded)"
        return where, e.size / memory.MIB

    def memory_in_use(self) -> dict[str, int]:
        """{device: bytes} the loaded models hold, each shared tensor once."""
        out: dict[str, int] = {}
        for (dev, _ptr), n in self._loaded_tensors().items():
            out[dev] = out.get(dev, 0) + n
        return out

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
        dev = self.devices[op]
        return [self._key(model, dev) for model in self.spec(op).models]

    def _factory(self, key: tuple) -> Callable[[], Any]:
        model, ckpt, base, dev = key
        m = registry.MODELS[model]

        def make():
            module, cls = m.cls.split(".")
            cls = getattr(importlib.import_module(f"vision_dialogue.vfm.models.{module}"), cls)
            extra = {}
            if m.base_checkpoint:
                extra["base_checkpoint"] = base
            if m.generates:
                extra["safety_checker"] = self.safety_checker
            return cls(ckpt, dev, self.allow_download, **extra)
        return make

    def _entry(self, key: tuple) -> _Entry:
        with self._entries_lock:
            return self._entries.setdefault(key, _Entry(key, self._factory(key)))

    def _model(self, key: tuple):
        entry = self._entry(key)
        inst = entry.instance
        if inst is not None and entry.place == entry.device:
            return inst
        with entry.load_lock:
            if entry.instance is not None:
                self._bring_back(entry)
            else:
                self._load(entry)
        return entry.instance

    def _load(self, entry: _Entry) -> None:
        key = entry.key
        _check_device(key[-1])
        with self._budget_lock:
            self._make_room(entry, _load_estimate(entry, self._check_checkpoint))
            before = memory.bytes_on(self._loaded_tensors(), entry.device)
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
            entry.instance, entry.error, entry.place = inst, "", entry.device
            entry.size = max(0, memory.bytes_on(self._loaded_tensors(), entry.device) - before)
            self._make_room(entry, 0)       # measured now: past the budget, others go

    def _run_lock(self, op: str) -> threading.Lock:
        return self._entries[self._keys(op)[-1]].run_lock

    def preload(self, op: str) -> None:
        with self._using(op):
            for k in self._keys(op):
                self._model(k)

    # ---- the memory budget ---------------------------------------------------------------
    @contextmanager
    def _using(self, op: str):
        """Mark `op`'s models in use (never unloaded meanwhile) and most recently used."""
        entries = [self._entry(k) for k in self._keys(op)]
        with self._entries_lock:
            tick = next(self._ticks)
            for e in entries:
                e.users += 1
                e.last_used = tick
        try:
            yield
        finally:
            with self._entries_lock:
                for e in entries:
                    e.users -= 1

    def _loaded_tensors(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for e in list(self._entries.values()):
            if e.instance is not None:
                out.update(memory.tensors_of(e.instance))
        return out

    def _make_room(self, entry: _Entry, need: int) -> None:
        """Unload idle models, least recently used first, until `need` more fits the budget."""
        kind = memory.device_kind(entry.device)
        limit = self.budget.limit(kind)
        if not limit:
            return
        while True:
            used = memory.bytes_on(self._loaded_tensors(), entry.device)
            if used + need <= limit:
                return
            with self._entries_lock:
                idle = [e for e in self._entries.values()
                        if e is not entry and e.instance is not None and e.users == 0
                        and e.place == entry.device and not registry.MODELS[e.key[0]].eager]
            if not idle:
                busy = [e.name for e in self._entries.values()
                        if e.instance is not None and e.place == entry.device and e is not entry]
                self.log(f"memory budget: {entry.name} needs {memory.mib(need)} more on "
                         f"{entry.device}, {memory.mib(used)} of {memory.mib(limit)} in use; "
                         f"nothing idle to unload ({', '.join(busy) or 'no other model'} "
                         "loaded, in use): going past the budget")
                return
            victim = min(idle, key=lambda e: e.last_used)
            self._unload(victim, f"to make room for {entry.name} "
                         f"({memory.mib(used)} + {memory.mib(need)} > {kind} budget "
                         f"{memory.mib(limit)})")

    def unload_idle(self, why: str) -> int:
        """Drop every loaded model no goal uses (a lifecycle cleanup); how many went."""
        with self._entries_lock:
            idle = [e for e in self._entries.values() if e.instance is not None and not e.users]
            for e in idle:
                e.instance, e.place = None, ""
        for e in idle:
            self.log(f"unloaded {e.name} ({memory.mib(e.size)}) {why}")
        return len(idle)

    def _unload(self, victim: _Entry, why: str) -> None:
        """Drop a model, or move it to the CPU when offloading and the CPU budget allows."""
        with self._entries_lock:
            if victim.users:            # a goal took it up meanwhile: it stays
                return
        if self.budget.offload and victim.place != "cpu":
            cpu_used = memory.bytes_on(self._loaded_tensors(), "cpu")
            if self.budget.fits("cpu", cpu_used + victim.size):
                self._move(victim, "cpu")
                self.log(f"offloaded {victim.name} ({memory.mib(victim.size)}) to cpu {why}")
                return
        with self._entries_lock:
            victim.instance, victim.place = None, ""
        # the models hold no reference cycles: dropping the instance frees them at once
        # (measured: a full gc.collect would cost 0.24 s an unload); CUDA also gets its
        # cached blocks back
        if victim.device.startswith("cuda"):
            import torch
            gc.collect()
            torch.cuda.empty_cache()
        self.log(f"unloaded {victim.name} ({memory.mib(victim.size)}) {why}")

    def _move(self, entry: _Entry, device: str) -> None:
        """Move the modules only this model holds (shared ones stay for their other users)."""
        others = {id(m) for e in list(self._entries.values())
                  if e is not entry and e.instance is not None
                  for m in memory.modules_of(e.instance)}
        if device != entry.device:
            entry.place = device      # before moving: a goal starting now brings it back
        for module in memory.modules_of(entry.instance):
            if id(module) not in others:
                module.to(device)
        entry.place = device

    def _bring_back(self, entry: _Entry) -> None:
        """An offloaded model back on its device, making room there first."""
        with self._budget_lock:
            self._make_room(entry, entry.size)
            self._move(entry, entry.device)
            self.log(f"moved {entry.name} back to {entry.device}")

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
        with self._using(op):
            if not self.is_loaded(op):
                ctx.progress("loading", 0, 1)
            models = [self._model(k) for k in self._keys(op)]
            ctx.check()
            if not registry.MODELS[spec.model].reports_steps:
                ctx.progress("running", 0, 1)
            inputs = {"rgb": rgb, "text": text, "ctx": ctx,
                      "helper": models[0] if spec.helper else None}
            with self._run_lock(op):
                return getattr(models[-1], spec.call)(*(inputs[a] for a in spec.args))


def _load_estimate(entry: _Entry, checkpoint_path: Callable[[str], str]) -> int:
    """Bytes a load will add: as measured last time, else the weight files on disk."""
    if entry.size:
        return entry.size
    m = registry.MODELS[entry.key[0]]
    total = 0
    for ck in (m.checkpoint, m.base_checkpoint):
        if ck:
            try:
                total += memory.weights_on_disk(checkpoint_path(ck))
            except ModelMissingError:
                pass
    return total


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
