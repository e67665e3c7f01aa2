"""The `load` parameter: which tools a server offers and on which device.

Syntax (Visual ChatGPT's --load, extended): comma separated `<what>_<device>` entries, where
<what> is an op id (`caption`), a Visual ChatGPT class name (`ImageCaptioning`, `ImageEditing`
= remove + replace) or `all`; <device> is `cpu`, `cuda`, `cuda:N` or `mps`. Later entries
override earlier ones, so `all_cpu,Text2Image_cuda:0` offers every tool on the CPU except
text-to-image on GPU 0. Tools not named are not offered.
"""
from __future__ import annotations

import re

from vision_dialogue.vfm import registry

_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


class LoadSpecError(ValueError):
    """A malformed `load` string; the message says which entry and why."""


def parse_load(spec: str) -> dict[str, str]:
    """`load` string -> {op id: device}, in registry order."""
    chosen: dict[str, str] = {}
    entries = [e.strip() for e in spec.split(",") if e.strip()]
    if not entries:
        raise LoadSpecError("empty: name at least one tool, e.g. 'all_cpu' or 'caption_cuda:0'")
    for entry in entries:
        what, sep, device = entry.rpartition("_")
        if not sep or not what:
            raise LoadSpecError(f"entry {entry!r} is not <tool>_<device>, e.g. caption_cuda:0")
        if not _DEVICE.match(device):
            raise LoadSpecError(f"entry {entry!r}: device {device!r} is not cpu, cuda, cuda:N "
                                "or mps")
        if what == "all":
            ops = [t.op for t in registry.TOOLS]
        elif what in registry.BY_OP:
            ops = [what]
        elif what in registry.BY_CLASS:
            ops = [t.op for t in registry.BY_CLASS[what]]
        else:
            raise LoadSpecError(f"entry {entry!r}: unknown tool {what!r}; use an op id "
                                f"({', '.join(registry.BY_OP)}), a Visual ChatGPT class name "
                                "or 'all'")
        for op in ops:
            chosen[op] = device
    return {t.op: chosen[t.op] for t in registry.TOOLS if t.op in chosen}


def format_load(devices: dict[str, str]) -> str:
    """Inverse of parse_load (op ids only)."""
    return ",".join(f"{op}_{dev}" for op, dev in devices.items())
