"""Declaring and validating node parameters with ParameterDescriptors.

Each node lists its parameters as `Param`s; `declare_params` declares them with descriptions
and ranges, checks overrides (from --ros-args, YAML --params-file or launch) and raises
ParameterError naming the parameter, so a node fails at startup instead of misbehaving.

At run time (`ros2 param set`) a parameter either takes effect or is refused with the reason:
only `live` parameters can change, after the same checks as at startup; the node reads them
from the returned `ParamValues` at every use, or applies a change in an `on_change` hook.
Every other parameter is declared read-only.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.exceptions import (InvalidParameterTypeException, InvalidParameterValueException,
                              ParameterException, ParameterUninitializedException)
from rclpy.parameter import Parameter

from vision_dialogue.variants.params import Param, nonempty

__all__ = ["Param", "ParamValues", "ParameterError", "declare_params", "descriptor",
           "nonempty"]


class ParameterError(ValueError):
    """An invalid parameter value; the message starts with the parameter's name."""


ARRAY_TYPES = {"string": Parameter.Type.STRING_ARRAY, "integer": Parameter.Type.INTEGER_ARRAY,
               "double": Parameter.Type.DOUBLE_ARRAY, "bool": Parameter.Type.BOOL_ARRAY}
"""Param.array_of -> the ROS type an empty list default is declared with."""


def descriptor(p: Param) -> ParameterDescriptor:
    """The ParameterDescriptor of `p`: its text, read-only unless live, its range."""
    d = ParameterDescriptor(description=p.text(), read_only=p.read_only)
    if p.range is not None:
        lo, hi = p.range
        if isinstance(p.default, bool):
            pass
        elif isinstance(p.default, int):
            d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
        elif isinstance(p.default, float):
            d.floating_point_range = [FloatingPointRange(
                from_value=float(lo), to_value=float(hi), step=0.0)]
    if p.choices:
        d.additional_constraints = "one of: " + ", ".join(p.choices)
    return d


class ParamValues(dict):
    """The validated values of a node's parameters, kept current when live ones change."""

    def __init__(self, values: dict):
        super().__init__(values)
        self._hooks: dict[str, list[Callable[[Any], None]]] = {}

    def on_change(self, name: str, fn: Callable[[Any], None]) -> None:
        """Call fn(new value) after `name` changed at run time (it must be a live Param)."""
        self._hooks.setdefault(name, []).append(fn)

    def _changed(self, params: list[Parameter]) -> None:
        changed = [c.name for c in params if c.name in self]
        for c in params:     # every value first: a hook may read another changed one
            if c.name in self:
                self[c.name] = list(c.value) if isinstance(c.value, (list, tuple)) else c.value
        for name in changed:
            for fn in self._hooks.get(name, ()):
                fn(self[name])


def declare_params(node, params: Sequence[Param],
                   cross_check: Callable[[dict], str | None] | None = None) -> ParamValues:
    """Declare `params` on `node`, validate them, and return their values.

    cross_check(values) validates combinations (e.g. m < n) and returns an error or None.
    Raises ParameterError (message starts with the parameter name) on any invalid value.
    Installs an on-set callback that applies the same checks to later changes of live
    parameters, and keeps the returned values current after a change.
    """
    values: dict[str, Any] = {}
    for p in params:
        v = _declare(node, p)
        err = p.error(v)
        if err:
            raise ParameterError(err)
        values[p.name] = v
    if cross_check is not None:
        err = cross_check(dict(values))
        if err:
            raise ParameterError(err)
    current = ParamValues(values)
    node.add_on_set_parameters_callback(_set_check({p.name: p for p in params}, current,
                                                   cross_check))
    node.add_post_set_parameters_callback(current._changed)
    return current


def _declare(node, p: Param) -> Any:
    """Declare one parameter; its value (lists as lists), ParameterError on a wrong type."""
    try:
        if p.array_of is not None and p.default in ([], None):
            node.declare_parameter(p.name, ARRAY_TYPES[p.array_of], descriptor(p))
            try:
                v = node.get_parameter(p.name).value
            except ParameterUninitializedException:
                v = None
            v = list(v) if v is not None else []
        else:
            v = node.declare_parameter(p.name, p.default, descriptor(p)).value
    except InvalidParameterTypeException as e:
        raise ParameterError(
            f"{p.name}: wrong type, expected {type(p.default).__name__} ({e})") from None
    except (InvalidParameterValueException, ParameterException) as e:
        raise ParameterError(f"{p.name}: invalid value ({e})") from None
    if isinstance(v, (list, tuple)) or type(v).__name__ == "array":
        v = list(v)
    return v


def _set_check(by_name: dict[str, Param], values: dict, cross_check):
    """The on-set callback: the startup checks, applied to `ros2 param set`."""
    def on_set(changes: list[Parameter]) -> SetParametersResult:
        trial = dict(values)
        for c in changes:
            p = by_name.get(c.name)
            if p is None:
                continue
            if p.read_only:
                return SetParametersResult(
                    successful=False, reason=f"{c.name} is read-only: it takes effect only "
                    "when the node starts (restart the node with the new value)")
            err = p.error(c.value)
            if err:
                return SetParametersResult(successful=False, reason=err)
            trial[c.name] = c.value
        if cross_check is not None:
            err = cross_check(trial)
            if err:
                return SetParametersResult(successful=False, reason=err)
        return SetParametersResult(successful=True)
    return on_set
