"""One table per kind of variant: a parameter value -> "module:Class", imported when needed.

A variant class (a speech backend, a camera source, an LLM backend) carries what a node needs
to offer it: `PARAMS` (the parameters it reads, `variants.params.Param`), `FILE_PARAM` (a file
parameter that, given, chooses it: `video_path` plays the video) and `check(values)` (its
checks of the parameters together, when chosen). The node declares its own parameters plus
`table.params()`, and chooses, checks and loads through the table, so a new variant is one
module and one row. ROS-free.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Mapping

from vision_dialogue.variants.choice import AUTO, choose_variant
from vision_dialogue.variants.params import Param


def load_class(path: str) -> type:
    """The class a "package.module:Class" path names (the module imported now)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class VariantTable:
    """The variants of one kind, chosen by the node parameter `param`."""

    param: str                   # the parameter that chooses: "backend", "source", ...
    what: str                    # for messages: "speech backend"
    rows: Mapping[str, str]      # name -> "module:Class"
    fallback: str = ""           # what AUTO starts when no variant's file is given

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.rows)

    def load(self, name: str) -> type:
        """The class of variant `name`; ValueError naming the parameter for an unknown one."""
        if name not in self.rows:
            raise ValueError(f"{self.param}: unknown {self.what} {name!r}; one of "
                             f"{list(self.rows)}")
        return load_class(self.rows[name])

    def classes(self) -> dict[str, type]:
        return {name: self.load(name) for name in self.rows}

    def params(self) -> list[Param]:
        """Every variant's PARAMS, in row order, each name once.

        Variants may share a parameter (the same Param); two different ones of one name are
        a table error (ValueError).
        """
        out: dict[str, Param] = {}
        for name, cls in self.classes().items():
            for p in getattr(cls, "PARAMS", ()):
                if out.setdefault(p.name, p) != p:
                    raise ValueError(f"{self.what} {name}: parameter {p.name!r} is declared "
                                     "differently by another variant")
        return list(out.values())

    def choose(self, values: Mapping[str, Any]) -> str:
        """The variant to start: `param`'s value, or with AUTO the one whose file is given.

        ValueError (naming a parameter) for a contradiction (variants/choice.py).
        """
        files = {name: (cls.FILE_PARAM, values.get(cls.FILE_PARAM, ""))
                 for name, cls in self.classes().items() if getattr(cls, "FILE_PARAM", "")}
        return choose_variant(self.param, values[self.param], files, self.fallback)

    def check(self, values: Mapping[str, Any]) -> str | None:
        """The chosen variant's own checks of the values together; an error or None."""
        try:
            cls = self.load(self.choose(values))
        except ValueError as e:
            return str(e)
        check = getattr(cls, "check", None)
        return check(values) if check is not None else None

    def choices(self) -> tuple[str, ...]:
        """What `param` may be set to: AUTO (a given file, else the fallback) and the names."""
        return (AUTO,) + self.names
