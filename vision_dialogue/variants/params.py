"""A parameter's declaration, ROS-free: what a node or a variant class lists as `PARAMS`.

A variant (a speech backend, a camera source, an LLM backend) declares the parameters it reads
beside the code that reads them; ros/params.py turns each into a ROS parameter with its
descriptor and checks it at startup and at `ros2 param set`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence


def nonempty(value) -> str | None:
    """A `Param.check` for text parameters that must not be empty or blank."""
    return None if str(value).strip() else "must not be empty"


@dataclass(frozen=True)
class Param:
    """One parameter: name, default, description and its constraints.

    range: (low, high) inclusive, for int/float. choices: allowed string values.
    check: callable(value) -> error message or None, for anything else.
    live: the node applies a change while it runs; otherwise the parameter is read-only.
    array_of: "string", "integer", "double" or "bool", needed only when the default is an
    empty list (ROS cannot tell the type from it).
    """

    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None
    choices: Sequence[str] | None = None
    check: Callable[[Any], str | None] | None = None
    live: bool = False
    array_of: str | None = None

    @property
    def read_only(self) -> bool:
        return not self.live

    def text(self) -> str:
        """The description with the choices, as `ros2 param describe` shows it."""
        if self.choices:
            return f"{self.description} One of: {', '.join(self.choices)}."
        return self.description

    def error(self, value: Any) -> str | None:
        """Why `value` is invalid for this parameter, or None."""
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.range is not None and numeric:
            lo, hi = self.range
            if isinstance(value, float) and math.isnan(value) or not (lo <= value <= hi):
                return f"{self.name}={value!r} is out of range [{lo}, {hi}]"
        if self.choices and value not in self.choices:
            return f"{self.name}={value!r} is not one of {list(self.choices)}"
        if self.check is not None:
            msg = self.check(value)
            if msg:
                return f"{self.name}={value!r}: {msg}"
        return None
