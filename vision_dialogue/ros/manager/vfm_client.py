"""The manager's side of the VFM action server: blocking calls from a worker thread.

`VfmClient` wraps the action clients of `vfm/image_to_text`, `vfm/image_to_image`,
`vfm/text_to_image` and the `vfm/list_tools` service client. Its calls block the *calling*
thread on a `threading.Event` until the future is done or a timeout passes; they never spin
the node, so they must be made from a thread that is not an executor thread (the manager's
turn worker) while a (MultiThreadedExecutor) executor spins the node elsewhere.

`VfmTools` is the `ToolProvider` the conversation uses (core/conversation.py): it keeps the
ToolInfo list (fetched at startup, fetched again when it is empty or a call showed it stale),
turns it into OpenAI function specs (vfm/tool_schemas.py), and runs one tool call:
the image defaults to the newest camera frame (sent as a sensor_msgs/Image in the goal), or is
a file name in the shared image store the LLM got earlier. Errors come back as
`ToolOutcome(error=...)`, never as exceptions.
"""
from __future__ import annotations

import base64
import threading
import time
from typing import Any, Callable

import cv2
import numpy as np
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from sensor_msgs.msg import Image

from vision_dialogue.common.images import downscale
from vision_dialogue.llm.tool_loop import ToolOutcome
from vision_dialogue.ros.image_msgs import (ImageConversionError, from_image_msg, stamp_from_ns,
                                            to_image_msg)
from vision_dialogue.ros.vfm_actions import (ACTIONS, LIST_TOOLS_SERVICE, VFM_ACTION_QOS,
                                             action_name)
from vision_dialogue_interfaces.srv import ListTools
from vision_dialogue.vfm.registry import IMAGE_TO_TEXT, TEXT_TO_IMAGE
from vision_dialogue.vfm.tool_schemas import tool_schemas, usable

#: seconds (at most half the tool timeout) to wait for a goal's answer before sending it again
GOAL_RESEND_S = 3.0
#: seconds (at most the tool timeout) to wait for an action server that list_tools announced:
#: its five endpoints match one by one, and on a loaded 2-core machine that took over 2 s
ACTION_READY_S = 10.0


class VfmError(RuntimeError):
    """A VFM call that did not give a result: server absent, goal rejected, timeout."""

    def __init__(self, message: str, *, stale: bool = False):
        super().__init__(message)
        self.stale = stale      # the tool list should be fetched again


def wait_future(future, timeout: float, abort: threading.Event | None = None) -> bool:
    """Block this thread until `future` is done or `timeout` s pass (no spinning).

    `abort`: an event that, when set, ends the wait early (shutdown).
    """
    if future.done():
        return True
    ev = abort if abort is not None else threading.Event()
    future.add_done_callback(lambda _f: ev.set())
    ev.wait(max(0.0, timeout))
    return future.done()


class VfmClient:
    """Blocking clients for the VFM server's actions and list_tools service, on `node`.

    Names are relative (`vfm/...`), so the node's namespace and remappings apply.
    """

    def __init__(self, node, callback_group=None):
        self.node = node
        cb = callback_group or ReentrantCallbackGroup()
        self.actions = {kind: ActionClient(node, action, action_name(kind), callback_group=cb,
                                           **VFM_ACTION_QOS)
                        for kind, action in ACTIONS.items()}
        self.list_client = node.create_client(ListTools, LIST_TOOLS_SERVICE, callback_group=cb)
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._waits: set[threading.Event] = set()

    def close(self) -> None:
        """End every wait now (calls in progress raise VfmError); for shutdown."""
        self._closing.set()
        with self._lock:
            for ev in self._waits:
                ev.set()

    def _wait(self, future, timeout: float) -> bool:
        """wait_future that close() can end early (then VfmError)."""
        ev = threading.Event()
        with self._lock:
            self._waits.add(ev)
        try:
            if not self._closing.is_set():
                wait_future(future, timeout, ev)
        finally:
            with self._lock:
                self._waits.discard(ev)
        if self._closing.is_set() and not future.done():
            raise VfmError("the manager is shutting down")
        return future.done()

    def _cancel(self, handle) -> None:
        try:
            handle.cancel_goal_async()
        except Exception as e:  # noqa: BLE001 - shutting down: nothing left to cancel
            self.node.get_logger().debug(f"goal not cancelled: {e}")

    def _cancel_if_accepted(self, send_future) -> None:
        """A goal sent again was accepted the first time after all: cancel that copy."""
        handle = send_future.result() if not send_future.cancelled() else None
        if handle is not None and handle.accepted:
            self._cancel(handle)

    def _wait_ready(self, is_ready: Callable[[], bool], deadline: float) -> bool:
        """Poll is_ready() until it is true (True) or the deadline passes / we close (False).

        Discovery completes in steps, so a server seen a moment ago may not be ready yet.
        """
        while not is_ready():
            if (time.monotonic() >= deadline or self._closing.wait(0.05)
                    or not self.node.context.ok()):
                return False
        return True

    def available(self) -> bool:
        """Whether the list_tools service is up (instant graph check)."""
        return self.list_client.service_is_ready()

    def list_tools(self, timeout: float = 5.0) -> list:
        """The server's ToolInfo list.

        Waits up to `timeout` s for the service to appear and then for the answer; raises VfmError
        when either does not come.
        """
        deadline = time.monotonic() + timeout
        if not self._wait_ready(self.list_client.service_is_ready, deadline):
            raise VfmError("the VFM server's vfm/list_tools service is not available")
        fut = self.list_client.call_async(ListTools.Request())
        if not self._wait(fut, deadline - time.monotonic() + 0.5):
            self.list_client.remove_pending_request(fut)
            raise VfmError("vfm/list_tools did not answer in time")
        resp = fut.result()
        if resp is None:
            raise VfmError("vfm/list_tools failed")
        return list(resp.tools)

    def call(self, kind: str, goal, timeout: float,
             feedback: Callable[[Any], None] | None = None):
        """Send `goal` to vfm/`kind`, wait for the result (Result message) at most `timeout` s.

        On a timeout the goal is cancelled. Raises VfmError when there is no result.
        """
        client = self.actions.get(kind)
        if client is None:
            raise VfmError(f"unknown action type {kind!r}", stale=True)
        deadline = time.monotonic() + timeout
        ready_by = min(deadline, time.monotonic() + ACTION_READY_S)
        if not self._wait_ready(client.server_is_ready, ready_by):
            raise VfmError(f"the VFM server's vfm/{kind} action is not available", stale=True)
        fb = (lambda m: feedback(m.feedback)) if feedback is not None else None
        send = client.send_goal_async(goal, feedback_callback=fb)
        # A goal sent just after discovery can be lost (the server's request reader had not
        # matched ours yet: a DDS race of ROS 2 services); unanswered, it is sent once more,
        # and the first is cancelled should it be accepted after all.
        if not self._wait(send, min(GOAL_RESEND_S, timeout / 2)):
            self.node.get_logger().warning(
                f"vfm/{kind}: no answer to the goal yet; sending it again")
            send.add_done_callback(self._cancel_if_accepted)
            send = client.send_goal_async(goal, feedback_callback=fb)
            if not self._wait(send, deadline - time.monotonic()):
                raise VfmError(f"vfm/{kind} did not accept the goal within {timeout:g} s")
        handle = send.result()
        if handle is None or not handle.accepted:
            raise VfmError(f"the VFM server rejected tool {goal.tool!r} (not offered, or "
                           f"not a {kind} tool)", stale=True)
        res = handle.get_result_async()
        try:
            done = self._wait(res, deadline - time.monotonic())
        except VfmError:
            self._cancel(handle)
            raise
        if not done:
            self._cancel(handle)
            raise VfmError(f"tool {goal.tool!r} gave no result within {timeout:g} s "
                           "(cancelled)")
        wrapped = res.result()
        if wrapped is None:
            raise VfmError(f"tool {goal.tool!r}: no result")
        return wrapped.result


def image_data_url(msg: Image, max_side: int = 640, quality: int = 80) -> str | None:
    """A sensor_msgs/Image as a JPEG data URL (for showing a tool image to a vision LLM)."""
    try:
        bgr = downscale(from_image_msg(msg), max_side)
    except ImageConversionError:
        return None
    ok, enc = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(enc.tobytes()).decode("ascii")


class VfmTools:
    """The conversation's ToolProvider over a VfmClient.

    newest_frame(): the conversation's newest Frame (or None); camera_frame_id(): the frame_id
    of the camera frames; on_image(image_file, Image msg): called for each image a tool made
    (the node publishes it); show_images: put a JPEG data URL of new images into the outcome
    (at `image_max_side`). list_timeout / timeout: seconds for list_tools / one tool call.
    """

    def __init__(self, client: VfmClient, newest_frame: Callable[[], Any], *,
                 timeout: float = 120.0, list_timeout: float = 2.0, show_images: bool = True,
                 image_max_side: int = 640, camera_frame_id: Callable[[], str] = lambda: "camera",
                 on_image: Callable[[str, Image], None] | None = None, logger=None):
        self.client = client
        self.newest_frame = newest_frame
        self.timeout = float(timeout)
        self.list_timeout = float(list_timeout)
        self.show_images = show_images
        self.image_max_side = image_max_side
        self.camera_frame_id = camera_frame_id
        self.on_image = on_image
        self.log = logger
        self._lock = threading.Lock()
        self._infos: dict[str, Any] = {}
        self._schemas: list[dict] = []
        self._stale = True

    # --- the tool list ---------------------------------------------------------------------
    def refresh(self, timeout: float | None = None) -> bool:
        """Fetch the tool list now; True when the server answered."""
        try:
            tools = self.client.list_tools(self.list_timeout if timeout is None else timeout)
        except VfmError as e:
            with self._lock:
                self._infos, self._schemas, self._stale = {}, [], True
            self._warn(f"no VFM tools: {e}")
            return False
        infos = {t.op: t for t in tools if usable(t)}
        schemas = tool_schemas(infos.values())
        with self._lock:
            self._infos, self._schemas, self._stale = infos, schemas, not schemas
        skipped = [f"{t.op} ({t.status})" for t in tools if not usable(t)]
        self._info(f"VFM tools offered to the LLM: {', '.join(infos) or 'none'}"
                   + (f"; not usable: {', '.join(skipped)}" if skipped else ""))
        return True

    def schemas(self) -> list[dict]:
        """The function specs to offer now.

        Fetched again first when the list is empty or stale (without waiting when the service is
        not up).
        """
        with self._lock:
            stale = self._stale
        if stale and self.client.available():
            self.refresh()
        with self._lock:
            return list(self._schemas)

    @property
    def ops(self) -> list[str]:
        with self._lock:
            return list(self._infos)

    def mark_stale(self) -> None:
        with self._lock:
            self._stale = True

    # --- running a tool --------------------------------------------------------------------
    def run(self, name: str, args: dict) -> ToolOutcome:
        """Run tool `name` (op id) with the LLM's `args` ({image_file?, text?})."""
        with self._lock:
            info = self._infos.get(name)
        if info is None:
            return ToolOutcome(error=f"the tool {name!r} is not available now")
        kind = info.action_type
        goal = self._goal(kind, name, args)
        if isinstance(goal, ToolOutcome):
            return goal
        self._info(f"tool {name}: running on "
                   + (goal.image_file or ("the newest frame" if kind != TEXT_TO_IMAGE
                                          else repr(goal.text[:60]))))
        try:
            result = self.client.call(kind, goal, self.timeout, feedback=self._feedback(name))
        except VfmError as e:
            if e.stale:
                self.mark_stale()
            return ToolOutcome(error=str(e))
        if not result.success:
            err = result.error or "the tool failed"
            if "unknown tool" in err:
                self.mark_stale()
            return ToolOutcome(error=err)
        if kind == IMAGE_TO_TEXT:
            return ToolOutcome(text=result.text.strip() or "(no answer)")
        return self._image_outcome(result)

    def _goal(self, kind: str, name: str, args: dict):
        """The action goal for a call, or a ToolOutcome error (no frame to work on)."""
        goal = ACTIONS[kind].Goal()
        goal.tool = name
        goal.text = str(args.get("text", ""))
        if kind == TEXT_TO_IMAGE:
            return goal
        image_file = str(args.get("image_file", "")).strip()
        if image_file:
            goal.image_file = image_file
            return goal
        frame = self.newest_frame()
        if frame is None:
            return ToolOutcome(error="I have not seen anything yet: no camera frame has arrived")
        goal.image = to_image_msg(frame.bgr, stamp=stamp_from_ns(int(frame.stamp * 1e9)),
                                  frame_id=self.camera_frame_id() or "camera")
        return goal

    def _image_outcome(self, result) -> ToolOutcome:
        """An image result: published on dialogue/tool_image, shown to a vision LLM.

        With the tool's words on it ("5 segments"); no image when the tool made none (the
        words say why).
        """
        out = ToolOutcome(image_file=result.image_file or None,
                          text=getattr(result, "text", "").strip() or None)
        if result.image.width and result.image.height:
            if self.on_image is not None:
                try:
                    self.on_image(result.image_file, result.image)
                except Exception as e:  # noqa: BLE001 - publishing must not lose the result
                    self._warn(f"tool image not published: {e}")
            if self.show_images:
                out.image_url = image_data_url(result.image, self.image_max_side)
        return out

    def _feedback(self, name: str):
        last = {"stage": None}

        def fb(msg) -> None:
            stage = getattr(msg, "stage", "")
            if hasattr(msg, "total_steps") and msg.total_steps:
                where = f"{msg.step}/{msg.total_steps}"
            elif hasattr(msg, "progress"):
                where = f"{msg.progress * 100:.0f}%"
            else:
                where = ""
            if stage != last["stage"] or self.log is None:
                self._info(f"tool {name}: {stage} {where}".rstrip())
            else:
                self.log.info(f"tool {name}: {stage} {where}".rstrip(),
                              throttle_duration_sec=2.0)
            last["stage"] = stage
        return fb

    def _info(self, text: str) -> None:
        if self.log is not None:
            self.log.info(text)

    def _warn(self, text: str) -> None:
        if self.log is not None:
            self.log.warning(text)


def describe_shared(tools: VfmTools, image_file: str, default: str) -> str:
    """Describe a shared image in one sentence with the `caption` tool, else `default`.

    Visual ChatGPT does the same when a picture is shared.
    """
    if "caption" not in tools.ops:
        return default
    out = tools.run("caption", {"image_file": image_file})
    return out.text if out.ok and out.text else default


def frame_to_rgb(bgr: np.ndarray) -> np.ndarray:
    """BGR/grey frame -> RGB HxWx3 (the image store's order)."""
    if bgr.ndim == 2:
        return cv2.cvtColor(bgr, cv2.COLOR_GRAY2RGB)
    return np.ascontiguousarray(bgr[:, :, ::-1])
