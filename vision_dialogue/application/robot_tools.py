"""The robot's own ROS actions and services as LLM tools, declared in a YAML file (ROS-free).

A robot's integrator hands chosen abilities to the LLM without code (the manager's
`robot_tools_file`)::

    robot_tools:
      - name: wave_hand                   # the tool's name for the LLM
        description: Wave a hand at the person.
        service: /wave_hand               # or  action: /navigate_to
        type: std_srvs/srv/Trigger        # any installed service or action type
        arguments: {}                     # JSON-schema properties of request/goal fields
        required: []                      # default: every argument without a `default`
        timeout: 10                       # seconds (default 10 for a service, 120 an action)
        interruptible: true               # the person speaking stops it (actions; default)
        confirm: "Shall I go to the {place}?"   # ask first; true words it from the name
        confirm_within: 20                # seconds the person has to say yes (default 20)

This module reads and checks the file, gives each tool's OpenAI function spec, checks the LLM's
arguments before anything reaches the robot (`RobotTool.check`), and words what comes back.
Calling the robot is ros/manager/robot_tools.py; asking first is application/confirmation.py.
"""
from __future__ import annotations

import json
import math
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema

from vision_dialogue.common.resources import declared_list

SERVICE, ACTION = "service", "action"
DEFAULT_TIMEOUT = {SERVICE: 10.0, ACTION: 120.0}
"""Seconds a call may take when the file gives no `timeout`."""

CONFIRM_WITHIN = 20.0
"""Seconds the person has to say yes to a `confirm` tool's question, unless it says."""

RESULT_CHARS = 600
"""The longest result text the LLM reads (a big response is cut)."""

ROBOT_TOOLS_NOTE = (
    "You have a body, and tools that make it act: {names}. When the person asks you to do one "
    "of these things, call its tool; the robot does it, and you hear how it went. Never call "
    "one the person did not ask for, and never say you did something a tool did not report "
    "as done. If the person asks for something none of them can do, say so.")
"""The system note offered with the robot's tools ({names}: their names)."""

_KEYS = {"name", "description", "service", "action", "type", "arguments", "required",
         "timeout", "interruptible", "confirm", "confirm_within"}
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*/(srv|action)/[A-Z][A-Za-z0-9]*$")


class RobotToolsError(ValueError):
    """An unreadable or invalid robot tools file; the message names the entry and problem."""


class ArgumentError(ValueError):
    """The LLM's arguments do not pass the tool's declaration (nothing was sent)."""


@dataclass(frozen=True)
class RobotTool:
    """One declared tool: a service or action of the robot the LLM may call."""

    name: str
    description: str
    kind: str                      # SERVICE or ACTION
    address: str                   # the ROS name (/wave_hand)
    type: str                      # pkg/srv/Name or pkg/action/Name
    arguments: dict = field(default_factory=dict)
    required: tuple[str, ...] = ()
    timeout: float = 10.0
    interruptible: bool = True
    confirm: str = ""              # the question asked before a call ("" : none; see question)
    confirm_within: float = CONFIRM_WITHIN

    def question(self, given: dict, values: dict) -> str:
        """The question asked before calling with `values` (checked; `given`: as the LLM wrote).

        `confirm: true` words it from the name and the arguments the LLM gave ("Shall I go to
        kitchen?"); a text is the question, its {argument} fields filled from `values`.
        """
        if self.confirm == "true":
            said = " ".join(str(values[k]) for k in given if k in values)
            return f"Shall I {self.name.replace('_', ' ')}{' ' + said if said else ''}?"
        return self.confirm.format_map({k: values.get(k, "") for k in self.arguments})

    def schema(self) -> dict:
        """The OpenAI function spec the LLM is offered."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": dict(self.arguments),
                           "required": list(self.required)}}}

    def check(self, args: dict) -> dict:
        """The arguments to set on the request or goal; ArgumentError when they do not pass.

        A number a small model wrote as text ("0.5") is read as the number it names; the
        declared defaults fill what is left out. Only declared arguments pass.
        """
        if not isinstance(args, dict):
            raise ArgumentError("the arguments must be a JSON object")
        out = {}
        for key, value in args.items():
            prop = self.arguments.get(key)
            if prop is None:
                known = ", ".join(self.arguments) or "none"
                raise ArgumentError(f"{self.name} takes no argument {key!r} (it takes {known})")
            out[key] = _as_declared(prop, value)
        for key, prop in self.arguments.items():
            if key not in out and "default" in prop:
                out[key] = prop["default"]
        whole = {"type": "object", "properties": self.arguments,
                 "required": list(self.required), "additionalProperties": False}
        errors = sorted(jsonschema.Draft202012Validator(whole).iter_errors(out),
                        key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            where = ".".join(map(str, e.path)) or "arguments"
            raise ArgumentError(f"{self.name}: {where}: {e.message}")
        return out


def _as_declared(prop: dict, value):
    """`value` as the property's type, where a small model wrote it as text."""
    kind = prop.get("type")
    if isinstance(value, str) and kind in ("number", "integer"):
        try:
            number = float(value.strip())
        except ValueError:
            return value
        if math.isfinite(number):
            return int(number) if kind == "integer" and number.is_integer() else number
    if isinstance(value, str) and kind == "boolean" and value.strip().lower() in \
            ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and kind == "string":
        return str(value)
    return value


def load_robot_tools(path: str | Path) -> list[RobotTool]:
    """Read and check a robot tools file (see the module docstring); raises RobotToolsError."""
    p, items = declared_list(path, "robot_tools", RobotToolsError)
    tools: list[RobotTool] = []
    for i, item in enumerate(items):
        tool = _tool(item, f"{p}: tool {i + 1}")
        if tool.name in {t.name for t in tools}:
            raise RobotToolsError(f"{p}: tool {i + 1}: {tool.name!r} is declared twice")
        tools.append(tool)
    return tools


def _tool(item, where: str) -> RobotTool:
    """One entry of the file, checked."""
    if not isinstance(item, dict):
        raise RobotToolsError(f"{where}: must be a mapping with name, description, service "
                              "or action, and type")
    unknown = set(item) - _KEYS
    if unknown:
        raise RobotToolsError(f"{where}: unknown keys {sorted(unknown)}; the keys are "
                              f"{', '.join(sorted(_KEYS))}")
    name = str(item.get("name", "")).strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        raise RobotToolsError(f"{where}: name {name!r} must be an identifier (letters, digits, "
                              "underscores)")
    where = f"{where} ({name})"
    desc = str(item.get("description", "")).strip()
    if not desc:
        raise RobotToolsError(f"{where}: needs a description (what the LLM reads)")
    kinds = [k for k in (SERVICE, ACTION) if item.get(k)]
    if len(kinds) != 1:
        raise RobotToolsError(f"{where}: give exactly one of 'service:' or 'action:'")
    kind = kinds[0]
    address = str(item[kind]).strip()
    if not re.fullmatch(r"~?/?[A-Za-z_][A-Za-z0-9_/]*", address) or address.endswith("/"):
        raise RobotToolsError(f"{where}: {kind} {address!r} is not a ROS name")
    type_ = str(item.get("type", "")).strip()
    m = _TYPE.match(type_)
    if not m or m.group(1) != ("srv" if kind == SERVICE else "action"):
        want = "pkg/srv/Name" if kind == SERVICE else "pkg/action/Name"
        raise RobotToolsError(f"{where}: type {type_!r} must read {want} for a {kind}")
    arguments = item.get("arguments") or {}
    required = _check_arguments(arguments, item.get("required"), where)
    timeout = item.get("timeout", DEFAULT_TIMEOUT[kind])
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not 0 < timeout <= 3600:
        raise RobotToolsError(f"{where}: timeout must be seconds, 0 < timeout <= 3600")
    interruptible = item.get("interruptible", True)
    if not isinstance(interruptible, bool):
        raise RobotToolsError(f"{where}: interruptible must be true or false")
    confirm, within = _check_confirm(item, arguments, where)
    return RobotTool(name, desc, kind, address, type_, dict(arguments), required,
                     float(timeout), interruptible, confirm, within)


def _check_confirm(item: dict, arguments: dict, where: str) -> tuple[str, float]:
    """`confirm` (false, true, or the question with {argument} fields) and `confirm_within`."""
    confirm = item.get("confirm", False)
    if confirm is True:
        confirm = "true"
    elif confirm is False or confirm is None:
        confirm = ""
    elif isinstance(confirm, str) and confirm.strip():
        confirm = confirm.strip()
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(confirm) if f is not None}
        except ValueError as e:
            raise RobotToolsError(f"{where}: confirm: {e}") from None
        unknown = sorted(f for f in fields if f not in arguments)
        if unknown:
            raise RobotToolsError(f"{where}: confirm names {unknown}, not arguments of the tool "
                                  f"({', '.join(arguments) or 'none'})")
    else:
        raise RobotToolsError(f"{where}: confirm must be true, false or the question to ask "
                              "(with {argument} fields)")
    within = item.get("confirm_within", CONFIRM_WITHIN)
    if isinstance(within, bool) or not isinstance(within, (int, float)) or \
            not 0 < within <= 600:
        raise RobotToolsError(f"{where}: confirm_within must be seconds, 0 < it <= 600")
    return confirm, float(within)


def _check_arguments(arguments, required, where: str) -> tuple[str, ...]:
    """The arguments' JSON schema checked; the required ones (default: those without default)."""
    if not isinstance(arguments, dict):
        raise RobotToolsError(f"{where}: arguments must map field names to JSON-schema "
                              "properties, e.g. {place: {type: string}}")
    for key, prop in arguments.items():
        if not isinstance(prop, dict) or "type" not in prop and "enum" not in prop:
            raise RobotToolsError(f"{where}: argument {key!r} must be a JSON-schema property "
                                  "with a type, e.g. {type: string, description: ...}")
        try:
            jsonschema.Draft202012Validator.check_schema(prop)
        except jsonschema.SchemaError as e:
            raise RobotToolsError(f"{where}: argument {key!r}: {e.message}") from None
    if required is None:
        return tuple(k for k, prop in arguments.items() if "default" not in prop)
    if not isinstance(required, list) or any(k not in arguments for k in required):
        raise RobotToolsError(f"{where}: required must list declared arguments "
                              f"({', '.join(arguments) or 'none'})")
    return tuple(required)


def reply_text(tool: RobotTool, fields: dict) -> str:
    """What the LLM reads of a finished call: the response or result, in short JSON."""
    shown = json.dumps(fields, ensure_ascii=False, default=str)
    if len(shown) > RESULT_CHARS:
        shown = shown[:RESULT_CHARS] + "...(cut)"
    what = "done" if tool.kind == ACTION else "answered"
    return f"The robot's {tool.name} {what}: {shown}" if fields != {} else \
        f"The robot's {tool.name} {what}."


def feedback_text(fields: dict) -> str:
    """An action's feedback in one short line, for the monitor and the transcript."""
    shown = json.dumps(fields, ensure_ascii=False, default=str)
    return shown if len(shown) <= 200 else shown[:200] + "..."


def action_words(tools: list[RobotTool]) -> set[str]:
    """The verbs of the tools (their names' words, their descriptions' first words).

    A question such as "Could you wave at me?" with one of them is a request
    (core/focus.asks_to_act).
    """
    words = set()
    for t in tools:
        words.update(w for w in t.name.lower().split("_") if len(w) > 1)
        first = re.findall(r"[a-z]+", t.description.lower())[:1]
        words.update(first)
    return words


def tools_note(tools: list[RobotTool]) -> str:
    """The system note for these tools."""
    return ROBOT_TOOLS_NOTE.format(names=", ".join(t.name for t in tools))
