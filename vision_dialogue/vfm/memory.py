"""What loaded models hold in memory, measured from their tensors, and the budget rule (ROS-free).

Visual ChatGPT loads every model at start and keeps it; its users' most common trouble is running
out of GPU memory. Here a budget per device kind bounds the loaded models: the toolbox measures
each model from its parameters and buffers once loaded (never from a table), and before a load
that would go past the budget it unloads the least recently used idle models.

Tensors shared between models (one Stable Diffusion UNet under text2image and every ControlNet)
count once: memory is the union of the tensors the loaded models reach, by storage address.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
#: weight files a checkpoint folder may hold, best first (a folder with safetensors may also
#: carry the same weights as .bin: only the first kind found counts)
WEIGHT_SUFFIXES = ((".safetensors",), (".bin", ".pth", ".pt", ".ckpt"))


def device_kind(device: str) -> str:
    """'cpu' or 'gpu': the budget a device's models count against (cuda:N and mps are GPUs)."""
    return "cpu" if str(device).split(":")[0] == "cpu" else "gpu"


def canonical(device: str) -> str:
    """The device as torch names a tensor's: 'cuda' is 'cuda:0', 'mps' is 'mps:0'."""
    device = str(device)
    return device if device == "cpu" or ":" in device else f"{device}:0"


def _modules(obj, seen: set[int], depth: int = 0):
    """The torch modules `obj` holds: itself, its attributes, a pipeline's components."""
    import torch
    if obj is None or id(obj) in seen or depth > 4:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        yield obj
        return
    components = getattr(obj, "components", None)
    if isinstance(components, dict):          # a diffusers pipeline
        for value in components.values():
            yield from _modules(value, seen, depth + 1)
        return
    if type(obj).__module__.startswith("vision_dialogue."):
        for value in vars(obj).values():
            yield from _modules(value, seen, depth + 1)


def modules_of(obj) -> list:
    """Every torch module reachable from a model wrapper (outermost ones)."""
    return list(_modules(obj, set()))


def tensors_of(obj) -> dict[tuple[str, int], int]:
    """{(device, storage address): bytes} of every parameter and buffer `obj` holds."""
    out: dict[tuple[str, int], int] = {}
    for module in modules_of(obj):
        for t in list(module.parameters()) + list(module.buffers()):
            if t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            out[(str(t.device), storage.data_ptr())] = storage.nbytes()
    return out


def bytes_on(tensors: dict[tuple[str, int], int], device: str) -> int:
    """Bytes of a tensor map that lie on `device` (canonical name)."""
    return sum(n for (dev, _ptr), n in tensors.items() if dev == device)


def weights_on_disk(folder: str) -> int:
    """Bytes of the weight files under a checkpoint folder (or file): a first-load estimate."""
    p = Path(folder)
    if p.is_file():
        return p.stat().st_size
    if not p.is_dir():
        return 0
    total = 0
    for root, _dirs, files in os.walk(p):
        for suffixes in WEIGHT_SUFFIXES:
            found = [f for f in files if f.endswith(suffixes)]
            if found:
                total += sum((Path(root) / f).stat().st_size for f in found)
                break
    return total


@dataclass(frozen=True)
class Budget:
    """Bytes the loaded models may hold per device kind; 0 = unbounded.

    `offload`: a GPU model that must make room moves to the CPU (within the CPU budget)
    instead of being dropped.
    """

    cpu: int = 0
    gpu: int = 0
    offload: bool = False

    @classmethod
    def from_mib(cls, cpu_mib: float = 0.0, gpu_mib: float = 0.0,
                 offload: bool = False) -> "Budget":
        if cpu_mib < 0 or gpu_mib < 0:
            raise ValueError("a memory budget is a size in MiB, or 0 for none")
        return cls(int(cpu_mib * MIB), int(gpu_mib * MIB), bool(offload))

    def limit(self, kind: str) -> int:
        return self.cpu if kind == "cpu" else self.gpu

    def fits(self, kind: str, used: int) -> bool:
        limit = self.limit(kind)
        return limit == 0 or used <= limit

    def describe(self) -> str:
        def one(n):
            return f"{n / MIB:.0f} MiB" if n else "unbounded"
        return (f"gpu {one(self.gpu)}, cpu {one(self.cpu)}"
                + (", offload to cpu" if self.offload else ""))


def mib(n: int) -> str:
    return f"{n / MIB:.1f} MiB"
