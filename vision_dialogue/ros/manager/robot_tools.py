"""The robot's declared services and actions, called when the LLM asks (`robot_tools_file`).

The declaration and the argument checks are ROS-free (application/robot_tools.py); this side
resolves the interface types at run time (any installed `pkg/srv/Name` or `pkg/action/Name`, no
code per robot), sets the checked arguments on the request or goal, calls the robot, and words the
response or result for the LLM. A call never hangs the turn: a server that is not there is an
error after SERVER_WAIT seconds, one that goes away while it works is an error at once, and
every call has the tool's timeout. An action's feedback goes to `on_entry` (the monitor and the
transcript); `interrupt(reason)` cancels the running interruptible goals (barge-in, a cancelled
skill).
"""
from __future__ import annotations

import importlib
import threading
import time
from typing import Callable

from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup

from vision_dialogue.core.entries import RobotActionEntry
from vision_dialogue.application.confirmation import Confirmations
from vision_dialogue.application.robot_tools import ACTION, SERVICE, ArgumentError, RobotTool, \
    RobotToolsError, action_words, feedback_text, load_robot_tools, reply_text, \
    tools_note
from vision_dialogue.llm.tool_loop import ToolOutcome
from vision_dialogue.ros.params import ParameterError

SERVER_WAIT = 2.0
"""Seconds a call waits for a server that is not matched (yet)."""
FEEDBACK_PERIOD = 1.0
"""At most one feedback record per goal in this many seconds (the newest is kept)."""
CANCEL_WAIT = 5.0
"""Seconds a cancelled goal gets to end before the turn goes on without its result."""
POLL = 0.1
CONFIRM_POLL = 0.25
"""Seconds between checks for a `confirm` question whose answer did not come in time."""


def interface_type(type_name: str):
    """The Python class of an installed `pkg/srv/Name` or `pkg/action/Name` (LookupError)."""
    pkg, kind, name = type_name.split("/")
    try:
        module = importlib.import_module(f"{pkg}.{kind}")
    except ImportError as e:
        raise LookupError(f"{type_name} is not installed here ({e}); source the workspace "
                          "that builds it before starting the manager") from None
    found = getattr(module, name, None)
    if found is None:
        raise LookupError(f"{type_name}: {pkg}.{kind} has no {name}")
    return found


def message_fields(msg) -> dict:
    """A ROS message as plain JSON-ready values (nested messages as dicts)."""
    out = {}
    for key in msg.get_fields_and_field_types():
        out[key] = _plain(getattr(msg, key))
    return out


def _plain(value):
    if hasattr(value, "get_fields_and_field_types"):
        return message_fields(value)
    if hasattr(value, "tolist"):                 # numpy arrays of fixed-size fields
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    return value


def fill_message(msg, values: dict, where: str = "") -> None:
    """Set `values` on `msg` (nested dicts on nested messages); ArgumentError if one misfits.

    The types are checked here: generated messages check them only with
    ROS_PYTHON_CHECK_FIELDS set, and a wrong one would fail later, in serialisation.
    """
    fields = msg.get_fields_and_field_types()
    for key, value in values.items():
        if key not in fields:
            raise ArgumentError(f"{where}{key}: {type(msg).__name__} has no such field")
        current = getattr(msg, key)
        if hasattr(current, "get_fields_and_field_types"):
            if not isinstance(value, dict):
                raise ArgumentError(f"{where}{key}: {value!r} does not fit {fields[key]} "
                                    "(give an object of its fields)")
            fill_message(current, value, f"{where}{key}.")
            continue
        try:
            setattr(msg, key, _fit(fields[key], value))
        except (AssertionError, TypeError, ValueError) as e:
            raise ArgumentError(f"{where}{key}: {value!r} does not fit {fields[key]} "
                                f"({str(e).splitlines()[0][:120]})") from None


_INTS = {"int8": (-2 ** 7, 2 ** 7), "uint8": (0, 2 ** 8), "int16": (-2 ** 15, 2 ** 15),
         "uint16": (0, 2 ** 16), "int32": (-2 ** 31, 2 ** 31), "uint32": (0, 2 ** 32),
         "int64": (-2 ** 63, 2 ** 63), "uint64": (0, 2 ** 64), "octet": (0, 2 ** 8),
         "byte": (0, 2 ** 8), "char": (0, 2 ** 8)}


def _fit(kind: str, value):
    """`value` as a field of ROS type `kind` takes it; ValueError when it cannot."""
    inner = kind[len("sequence<"):-1] if kind.startswith("sequence<") else \
        kind.split("[")[0] if kind.endswith("]") else None
    if inner is not None:
        inner = inner.split(",")[0]
        if not isinstance(value, (list, tuple)):
            raise ValueError("a list is needed")
        return [_fit(inner, v) for v in value]
    base = kind.split("<=")[0]
    if base == "boolean":
        if not isinstance(value, bool):
            raise ValueError("true or false is needed")
        return value
    if base in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("a number is needed")
        return float(value)
    if base in _INTS:
        if isinstance(value, bool) or not isinstance(value, int) and not (
                isinstance(value, float) and value.is_integer()):
            raise ValueError("a whole number is needed")
        low, high = _INTS[base]
        if not low <= int(value) < high:
            raise ValueError(f"out of the range {low}..{high - 1}")
        return int(value)
    if base in ("string", "wstring"):
        if not isinstance(value, str):
            raise ValueError("text is needed")
        return value
    raise ValueError(f"a {kind} field cannot be set from the LLM's arguments")


class RobotTools:
    """The declared tools as a ToolProvider for the conversation (core/turn_tools.py).

    `on_entry(entry)`: a RobotActionEntry per stage of a call ("asked", "not_confirmed", "sent",
    "feedback", "done", "failed", "cancelled") for the monitor and the transcript. Raises
    ParameterError at construction when a type is not installed or an argument is not a field
    of its request or goal.
    """

    def __init__(self, node, tools: list[RobotTool], *,
                 on_entry: Callable[[RobotActionEntry], None] = lambda entry: None,
                 logger=None):
        self.node, self.on_entry = node, on_entry
        self.log = logger or node.get_logger()
        self.tools = {t.name: t for t in tools}
        self.note = tools_note(tools)
        self.standing = True          # offered every turn: the note stays in the cached prompt
        self.acts = True              # the robot acting does not count against reply_deadline
        self.verbs = action_words(tools)            # "could you wave?" asks for an action
        self._types, self._clients = {}, {}
        group = ReentrantCallbackGroup()
        for t in tools:
            try:
                iface = interface_type(t.type)
            except LookupError as e:
                raise ParameterError(f"robot_tools_file: tool {t.name!r}: {e}") from None
            filled = iface.Request if t.kind == SERVICE else iface.Goal
            missing = [k for k in t.arguments if k not in filled.get_fields_and_field_types()]
            if missing:
                raise ParameterError(
                    f"robot_tools_file: tool {t.name!r}: {missing} not fields of {t.type}'s "
                    f"{'request' if t.kind == SERVICE else 'goal'} (its fields: "
                    f"{', '.join(filled.get_fields_and_field_types()) or 'none'})")
            self._types[t.name] = iface
            self._clients[t.name] = (
                node.create_client(iface, t.address, callback_group=group)
                if t.kind == SERVICE
                else ActionClient(node, iface, t.address, callback_group=group))
        self.confirmations = Confirmations()      # `confirm` tools wait here for a yes
        self._expiry = node.create_timer(CONFIRM_POLL, self._expire, callback_group=group) \
            if any(t.confirm for t in tools) else None
        self._lock = threading.Lock()
        self._running: dict[int, tuple[RobotTool, threading.Event]] = {}
        self._reasons: dict[int, str] = {}

    @classmethod
    def from_file(cls, node, path: str, **kwargs) -> "RobotTools":
        try:
            tools = load_robot_tools(path)
        except RobotToolsError as e:
            raise ParameterError(f"robot_tools_file: {e}") from None
        return cls(node, tools, **kwargs)

    # -- ToolProvider ----------------------------------------------------------------------------
    def schemas(self) -> list[dict]:
        return [t.schema() for t in self.tools.values()]

    def run(self, name: str, args: dict) -> ToolOutcome:
        """Call the robot: the response or result as text, or an error the LLM can say."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(error=f"{name!r} is not one of the robot's tools")
        try:
            values = tool.check(args)
            request = (self._types[name].Request() if tool.kind == SERVICE
                       else self._types[name].Goal())
            fill_message(request, values)
        except ArgumentError as e:
            self.log.warning(f"robot tool {name}: {e}; nothing was sent")
            return ToolOutcome(error=f"{e}; nothing was sent to the robot")
        held = self.confirmations.hold(tool, args, values)     # `confirm` asks first
        if held is not None:
            if held.stage:
                self.log.info(f"robot tool {name}: {held.stage}: {held.detail}")
                self._stage(tool, held.stage, held.detail)
            return held.outcome
        self._stage(tool, "sent", values)
        outcome = self._call(tool, request) if tool.kind == SERVICE else \
            self._action(tool, request)
        if outcome.ok:
            self._stage(tool, "done", outcome.text)
        else:
            self._stage(tool, "cancelled" if outcome.error.startswith("stopped") else "failed",
                        outcome.error)
        return outcome

    def answered(self, line: str) -> list:
        """The calls that waited for a yes, with their verdicts on `line` (confirmation)."""
        return self.confirmations.resolve(line)

    def _expire(self) -> None:
        """A question not answered in time: no call (logged now, told at the next turn)."""
        for p in self.confirmations.expire():
            self.log.info(f"robot tool {p.name}: not_confirmed: {p.unanswered()}")
            self._stage(self.tools[p.name], "not_confirmed", p.unanswered())

    def interrupt(self, reason: str) -> int:
        """Cancel every running interruptible goal; how many were running."""
        with self._lock:
            stops = [(k, stop) for k, (tool, stop) in self._running.items()
                     if tool.interruptible and not stop.is_set()]
            for k, stop in stops:
                self._reasons[k] = reason
                stop.set()
        if stops:
            self.log.info(f"robot tools: cancelling {len(stops)} running action(s): {reason}")
        return len(stops)

    def close(self) -> None:
        """Cancel what runs (shutting down)."""
        self.interrupt("the manager is shutting down")

    # -- calls -------------------------------------------------------------------------------
    def _call(self, tool: RobotTool, request) -> ToolOutcome:
        client = self._clients[tool.name]
        if not client.wait_for_service(timeout_sec=SERVER_WAIT):
            return self._absent(tool)
        future = client.call_async(request)
        why = _wait(future, tool.timeout, client.service_is_ready)
        if why:
            future.cancel()
            return ToolOutcome(error=self._why(tool, why))
        return ToolOutcome(text=reply_text(tool, message_fields(future.result())))

    def _action(self, tool: RobotTool, goal) -> ToolOutcome:
        client = self._clients[tool.name]
        if not client.wait_for_server(timeout_sec=SERVER_WAIT):
            return self._absent(tool)
        stop = threading.Event()
        key = id(stop)
        with self._lock:
            self._running[key] = (tool, stop)
        try:
            return self._follow(tool, client, goal, stop, key)
        finally:
            with self._lock:
                self._running.pop(key, None)
                self._reasons.pop(key, None)

    def _follow(self, tool, client, goal, stop, key) -> ToolOutcome:
        """Send the goal, pass on its feedback, and wait for its result (or cancel it)."""
        last = [0.0]

        def on_feedback(msg) -> None:
            now = time.monotonic()
            if now - last[0] >= FEEDBACK_PERIOD:
                last[0] = now
                self._stage(tool, "feedback", feedback_text(message_fields(msg.feedback)))
        end = time.monotonic() + tool.timeout
        sent = client.send_goal_async(goal, feedback_callback=on_feedback)
        why = _wait(sent, tool.timeout, client.server_is_ready, stop)
        handle = sent.result() if sent.done() else None
        if why or handle is None:
            return ToolOutcome(error=self._why(tool, why or "gone", key))
        if not handle.accepted:
            return ToolOutcome(error=f"the robot refused {tool.name} (goal rejected)")
        result = handle.get_result_async()
        why = _wait(result, max(0.0, end - time.monotonic()), client.server_is_ready, stop)
        if why in ("stopped", "timeout"):
            handle.cancel_goal_async()
            _wait(result, CANCEL_WAIT, client.server_is_ready)
            return ToolOutcome(error=self._why(tool, why, key))
        if why:
            return ToolOutcome(error=self._why(tool, why))
        done = result.result()
        status = _STATUS.get(done.status, str(done.status))
        fields = message_fields(done.result)
        if status != "succeeded":
            return ToolOutcome(error=f"{tool.name} {status}: {feedback_text(fields)}")
        return ToolOutcome(text=reply_text(tool, fields))

    def _absent(self, tool: RobotTool) -> ToolOutcome:
        self.log.warning(f"robot tool {tool.name}: no {tool.kind} server on {tool.address}")
        return ToolOutcome(error=f"the robot's {tool.name} is not available right now (no "
                                 f"{tool.kind} server on {tool.address}); nothing was done")

    def _why(self, tool: RobotTool, why: str, key: int | None = None) -> str:
        if why == "stopped":
            return f"stopped before it finished, because {self._reasons.get(key, 'asked to')}"
        if why == "timeout":
            return f"{tool.name} did not finish within {tool.timeout:g} s and was stopped"
        return f"the robot's {tool.name} server went away before it answered"

    def _stage(self, tool: RobotTool, stage: str, detail) -> None:
        try:
            self.on_entry(RobotActionEntry(tool.name, tool.kind, tool.address, stage, detail))
        except Exception as e:  # noqa: BLE001 - a listener must not break the call
            self.log.error(f"a listener of robot tool stages failed: {e}")


_STATUS = {4: "succeeded", 5: "was cancelled by the robot", 6: "was aborted by the robot"}
"""action_msgs/GoalStatus values a finished goal has."""


def _wait(future, timeout: float, server_ready: Callable[[], bool],
          stop: threading.Event | None = None) -> str:
    """Wait for `future`: "" when done, else "stopped", "gone" or "timeout"."""
    done = threading.Event()
    future.add_done_callback(lambda f: done.set())
    end = time.monotonic() + timeout
    while not done.wait(POLL):
        if stop is not None and stop.is_set():
            return "stopped"
        if not server_ready():
            return "gone"
        if time.monotonic() >= end:
            return "timeout"
    return ""


__all__ = ["RobotTools", "interface_type", "message_fields", "fill_message", "ACTION",
           "SERVICE"]
