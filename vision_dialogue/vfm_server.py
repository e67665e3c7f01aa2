"""VfmServer: Visual ChatGPT's visual foundation models as ROS 2 actions.

Three general actions, the tool (op id) in the goal:
  vfm/image_to_text  (ImageToText)   caption, vqa, detect
  vfm/image_to_image (ImageToImage)  pix2pix, remove, replace, segment, segmentobject,
                                     outpaint, the condition maps and the ControlNet generations
  vfm/text_to_image  (TextToImage)   text2image
and the service vfm/list_tools (ListTools) with every offered tool's usage text and load status.

Inputs come from the sandboxed image store (`image_dir`) by name, or as a sensor_msgs/Image that
is saved into the store first; outputs are saved there with chained names. Models load lazily
on first use on the device the `load` parameter assigns (see vision_dialogue/vfm/devices.py);
with a memory budget the least recently used idle ones make room (vision_dialogue/vfm/memory.py).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future

from vision_dialogue_interfaces.msg import ToolInfo
from vision_dialogue.ros.image_msgs import ImageConversionError, from_image_msg, to_image_msg
from vision_dialogue.ros.params import Param, ParameterError, declare_params, nonempty
from vision_dialogue.common.health import OK, WARN, Health
from vision_dialogue.common.images import DEFAULT_MAX_PIXELS
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros.managed import MANAGED_PARAM, ConfigureError, ManagedNode
from vision_dialogue.ros.vfm_actions import (ACTIONS, LIST_TOOLS_SERVICE, VFM_ACTION_QOS,
                                             action_name)
from vision_dialogue_interfaces.srv import ListTools
from vision_dialogue.vfm import registry
from vision_dialogue.vfm.devices import LoadSpecError, parse_load
from vision_dialogue.vfm.errors import Cancelled, ToolError
from vision_dialogue.vfm.image_store import DEFAULT_MAX_BYTES, ImageStore, StoreError
from vision_dialogue.vfm.memory import Budget
from vision_dialogue.vfm.models.common import RunContext, ToolImage
from vision_dialogue.vfm.toolbox import Toolbox


def _load_error(value: str) -> str | None:
    try:
        parse_load(value)
    except LoadSpecError as e:
        return str(e)
    return None


PARAMS = [
    Param("image_dir", "~/.ros/vision_dialogue/vfm_images",
          "Image store directory: inputs must resolve inside it, outputs are written there.",
          check=nonempty),
    Param("load", "all_cpu",
          "Tools to offer and their devices: comma separated <op id|VCG class|all>_<cpu|cuda|"
          "cuda:N|mps>, later entries override earlier, e.g. 'all_cpu,Text2Image_cuda:0'.",
          check=_load_error),
    Param("allow_download", False,
          "Let from_pretrained fetch missing checkpoints from the Hugging Face Hub "
          "(default: local paths and the local HF cache only)."),
    Param("num_inference_steps", 20, "Denoising steps of every diffusion tool.", range=(1, 500),
          live=True),
    Param("guidance_scale", 9.0, "Classifier-free guidance scale (text2image, ControlNet).",
          range=(0.0, 50.0), live=True),
    Param("image_size", 512, "Longer side of generated images in pixels (multiple of 64).",
          range=(64, 2048), check=lambda v: None if v % 64 == 0 else "must be a multiple of 64",
          live=True),
    Param("seed", -1, "Random seed of the diffusion tools; -1 draws a new one per call.",
          range=(-1, 2**31 - 1), live=True),
    Param("frame_id", "vfm", "frame_id of output images whose input carried none."),
    Param("max_parallel_goals", 2, "Goals that run at once; more wait their turn (accepted "
          "at once, feedback stage 'queued').", range=(1, 64)),
    Param("store_max_mb", DEFAULT_MAX_BYTES // (1024 * 1024), "Size cap of the image store "
          "(MB); past it the least recently used images are deleted.", range=(1, 10**7)),
    Param("max_image_pixels", DEFAULT_MAX_PIXELS, "Largest input image (width x height) a "
          "tool takes, checked before decoding.", range=(1, 2**31 - 1)),
    Param("memory_budget_gpu_mib", 0.0, "Most memory (MiB) the loaded models may hold on each "
          "GPU; loading past it first unloads the least recently used idle models. 0: no "
          "bound.", range=(0.0, 1e9)),
    Param("memory_budget_cpu_mib", 0.0, "The same bound for models on the CPU (and models "
          "offloaded there). 0: no bound.", range=(0.0, 1e9)),
    Param("offload_to_cpu", False, "A GPU model that must make room moves to the CPU (within "
          "its budget) instead of being dropped, and moves back when asked for."),
    Param("safety_checker", True, "Run Stable Diffusion's safety checker on every generated "
          "image and withhold flagged ones (as Visual ChatGPT does). Its weights come from "
          "the checkpoint's safety_checker/ folder; without them the diffusion tools refuse "
          "to run. false: generate without it (an explicit choice; the default persona is a "
          "child)."),
    MANAGED_PARAM,
] + [Param(f"checkpoints.{key}", default,
           f"Checkpoint for '{key}': a local directory/file or a Hugging Face repo id "
           f"(looked up in the local cache).",
           check=nonempty)
     for key, default in registry.DEFAULT_CHECKPOINTS.items()]


class VfmServer(ManagedNode):
    """The VFM action server node (default name `vfm_server`).

    A managed node (ros/managed.py): the tools are set up at construction; configure (managed)
    refuses when none of the offered tools has its checkpoints; active, goals are accepted,
    inactive they are rejected (running ones finish); cleanup unloads the idle models.
    """

    def __init__(self, name: str = "vfm_server", **kwargs):
        super().__init__(name, **kwargs)
        self._workers = None                  # until built (destroy_node after a refusal)
        self.params = declare_params(self, PARAMS)
        self._in_flight = 0
        self._count_lock = threading.Lock()
        try:
            devices = parse_load(self.params["load"])
            self.store = ImageStore(self.params["image_dir"],
                                    max_bytes=self.params["store_max_mb"] * 1024 * 1024,
                                    max_pixels=self.params["max_image_pixels"])
        except LoadSpecError as e:  # pragma: no cover - caught by the Param check already
            raise ParameterError(f"load: {e}") from None
        except OSError as e:
            raise ParameterError(f"image_dir: cannot create {self.params['image_dir']!r}: "
                                 f"{e}") from None
        ckpts = {k: self.params[f"checkpoints.{k}"] for k in registry.DEFAULT_CHECKPOINTS}
        budget = Budget.from_mib(self.params["memory_budget_cpu_mib"],
                                 self.params["memory_budget_gpu_mib"],
                                 self.params["offload_to_cpu"])
        self.toolbox = Toolbox(devices, ckpts, allow_download=self.params["allow_download"],
                               safety_checker=self.params["safety_checker"], budget=budget,
                               log=lambda line: self.get_logger().info(line))
        if not self.params["safety_checker"]:
            self.get_logger().warning("safety_checker is off: generated images are not checked")
        self._cb = ReentrantCallbackGroup()
        # Tools run on this pool, never on the executor's threads, so goal requests, cancels
        # and list_tools are answered while long generations run; a burst of goals waits here.
        self._workers = ThreadPoolExecutor(self.params["max_parallel_goals"],
                                           thread_name_prefix="vfm-goal")
        self._servers = [
            ActionServer(self, action, action_name(kind),
                         execute_callback=self._make_execute(kind),
                         goal_callback=self._make_goal_check(kind),
                         cancel_callback=lambda _g: CancelResponse.ACCEPT, callback_group=self._cb,
                         **VFM_ACTION_QOS)
            for kind, action in ACTIONS.items()]
        self._list_srv = self.create_service(ListTools, LIST_TOOLS_SERVICE, self._list_tools,
                                             callback_group=self._cb)
        ready, missing = self.toolbox.readiness()
        self._missing, self._budget = missing, budget
        DiagnosticsPublisher(self, self._health)
        self.get_logger().info(
            f"{len(ready)} of {len(devices)} tools ready "
            f"({', '.join(f'{o}@{devices[o]}' for o in ready) or 'none'}); "
            f"image store {self.store.root}; memory budget {budget.describe()}")
        if missing:
            self.get_logger().warning(
                f"{len(missing)} tools lack checkpoints and will fail until they are provided "
                f"(checkpoints.<key> parameters, or allow_download): {', '.join(missing)}; "
                f"first: {next(iter(missing.values()))}")
        self.start_lifecycle(self.params["managed"])

    # --- lifecycle (ros/managed.py) ------------------------------------------------------
    def configure(self) -> None:
        ready, missing = self.toolbox.readiness()
        self._missing = missing
        if self.params["managed"] and missing and not ready:
            raise ConfigureError(f"none of the {len(missing)} tools has its checkpoints; "
                                 f"first: {next(iter(missing.values()))}")

    def deactivate(self) -> None:
        self.get_logger().info("vfm inactive: new goals rejected, the models kept")

    def cleanup(self) -> None:
        self.toolbox.unload_idle("(lifecycle cleanup)")

    # ---- goals ---------------------------------------------------------------------------
    def _goal_error(self, kind: str, tool: str) -> str | None:
        if tool not in self.toolbox.devices:
            offered = [t.op for t in self.toolbox.specs if t.action_type == kind]
            return f"unknown tool {tool!r} for vfm/{kind}; offered: {', '.join(offered) or 'none'}"
        spec = registry.BY_OP[tool]
        if spec.action_type != kind:
            return (f"tool {tool!r} is an {spec.action_type} tool; send it to "
                    f"vfm/{spec.action_type}")
        return None

    def _make_goal_check(self, kind: str):
        def check(goal) -> GoalResponse:
            err = self._goal_error(kind, goal.tool) if self.active else \
                "the server is inactive (lifecycle): activate it first"
            if err:
                self.get_logger().error(f"rejected goal: {err}")
                return GoalResponse.REJECT
            return GoalResponse.ACCEPT
        return check

    def _input(self, goal) -> tuple[np.ndarray, str, str]:
        """(RGB image, its store name, frame_id) of a goal's image_file or image."""
        if goal.image_file.strip():
            return self.store.load(goal.image_file), self.store.relative(
                self.store.resolve(goal.image_file)), ""
        if goal.image.width and goal.image.height:
            try:
                bgr = from_image_msg(goal.image, self.params["max_image_pixels"])
            except ImageConversionError as e:
                raise ToolError(f"bad input image: {e}") from None
            rgb = cv2.cvtColor(bgr, cv2.COLOR_GRAY2RGB) if bgr.ndim == 2 else bgr[:, :, ::-1]
            rgb = np.ascontiguousarray(rgb)
            return rgb, self.store.add(rgb), goal.image.header.frame_id
        raise ToolError("goal has neither image_file nor image")

    def _make_execute(self, kind: str):
        async def execute(goal_handle):
            """Hand the goal to the worker pool and wait without holding an executor thread."""
            done = Future(executor=self.executor)
            done.add_done_callback(lambda _f: None)   # wakes the executor when the goal ends
            with self._count_lock:
                queued = self._in_flight >= self.params["max_parallel_goals"]
                self._in_flight += 1
            if queued:
                self._progress(kind, goal_handle)("queued", 0, 1)
            self._workers.submit(self._run_on_worker, kind, goal_handle, done)
            return await done
        return execute

    def _run_on_worker(self, kind: str, goal_handle, done: Future) -> None:
        try:
            done.set_result(self._execute(kind, goal_handle))
        finally:
            with self._count_lock:
                self._in_flight -= 1

    def close(self) -> None:
        """Stop taking work; goals still waiting are not started."""
        if self._workers is not None:
            self._workers.shutdown(wait=False, cancel_futures=True)

    def destroy_node(self):
        self.close()
        return super().destroy_node()

    def _execute(self, kind: str, goal_handle):
        """Run one goal: feedback as it goes, cancel between steps, errors as results."""
        goal, result = goal_handle.request, ACTIONS[kind].Result()
        ctx = RunContext(progress=self._progress(kind, goal_handle),
                         cancelled=lambda: goal_handle.is_cancel_requested,
                         steps=self.params_now("num_inference_steps"),
                         guidance_scale=self.params_now("guidance_scale"),
                         image_size=self.params_now("image_size"), seed=self.params_now("seed"))
        log = self.get_logger()
        try:
            self._run_goal(kind, goal, ctx, result)
            result.success = True
            goal_handle.succeed()
            said = (getattr(result, "image_file", ""), getattr(result, "text", "")[:80])
            out = " ".join(x for x in said if x)
            log.info(f"{goal.tool}: done -> {out}")
        except Cancelled:
            result.error = "cancelled"
            goal_handle.canceled()
            log.info(f"{goal.tool}: cancelled")
        except (ToolError, StoreError) as e:
            result.error = str(e)
            goal_handle.abort()
            log.error(f"{goal.tool}: {e}")
        except Exception as e:  # noqa: BLE001 - a model bug must not take the server down
            result.error = f"{goal.tool} failed: {type(e).__name__}: {e}"
            goal_handle.abort()
            log.error(result.error)
        return result

    def _run_goal(self, kind: str, goal, ctx: RunContext, result) -> None:
        """Fill `result` with the tool's text, or its image (stored, and as a message)."""
        err = self._goal_error(kind, goal.tool)
        if err:
            raise ToolError(err)
        rgb, prev, frame = (None, None, "") if kind == registry.TEXT_TO_IMAGE \
            else self._input(goal)
        out = self.toolbox.run(goal.tool, rgb, goal.text, ctx)
        if kind == registry.IMAGE_TO_TEXT:
            result.text = str(out)
            ctx.progress("done", 1, 1)
            return
        if isinstance(out, ToolImage):
            result.text, out = out.text, out.rgb
            if out is None:             # nothing to show: the text says why
                return
        result.image_file = self.store.save(out, goal.tool, prev)
        result.image = to_image_msg(np.ascontiguousarray(out[:, :, ::-1]),
                                    stamp=self.get_clock().now().to_msg(),
                                    frame_id=frame or self.params["frame_id"])

    @staticmethod
    def _progress(kind: str, goal_handle):
        """A RunContext progress callback publishing the action's feedback."""
        lock = threading.Lock()
        action = ACTIONS[kind]

        def progress(stage: str, step: int, total: int):
            fb = action.Feedback()
            fb.stage = stage
            if kind == registry.IMAGE_TO_TEXT:
                fb.progress = float(step) / float(total) if total else 0.0
            else:
                fb.step, fb.total_steps = int(step), int(total)
            with lock:
                goal_handle.publish_feedback(fb)
        return progress

    def params_now(self, name: str):
        """Current value of a (dynamically settable) parameter."""
        return self.get_parameter(name).value

    def _health(self) -> list[Health]:
        """Tools offered, loaded and lacking checkpoints; the memory the loaded ones hold."""
        inactive = self.lifecycle_health("vfm")
        if inactive:
            return inactive
        ops = [t.op for t in self.toolbox.specs]
        loaded = [op for op in ops if self.toolbox.is_loaded(op)]
        held = sum(self.toolbox.placement(op)[1] for op in loaded)
        values = {"tools offered": len(ops), "tools loaded": len(loaded),
                  "memory held (MiB)": f"{held:.0f}", "memory budget": self._budget.describe(),
                  "goals running": self._in_flight}
        if self._missing:
            return [Health("vfm", WARN, f"{len(self._missing)} of {len(ops)} tools lack "
                           f"checkpoints: {', '.join(sorted(self._missing)[:5])}", values)]
        return [Health("vfm", OK, f"{len(ops)} tools, {len(loaded)} loaded", values)]

    # ---- list_tools ----------------------------------------------------------------------
    def _list_tools(self, _req, resp):
        resp.tools = []
        for t in self.toolbox.specs:
            where, mib = self.toolbox.placement(t.op)
            resp.tools.append(ToolInfo(
                name=t.name, op=t.op, action_type=t.action_type, description=t.description,
                loaded=self.toolbox.is_loaded(t.op), device=self.toolbox.devices[t.op],
                status=self.toolbox.status(t.op), loaded_on=where, memory_mib=mib))
        return resp


def main(args=None):
    from vision_dialogue.ros.node_runner import run_node
    return run_node(lambda: VfmServer(), "vfm_server", args, threads=max(4, os.cpu_count() or 1),
                    params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
