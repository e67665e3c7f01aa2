"""Segment Anything, segment the given object and outpainting through the installed vfm_server.

One server process (installed by colcon, started as `ros2 run` would) with tiny random
checkpoints and a memory budget that holds the inpainting model with the captioner but not SAM
beside them; goals over ROS from this process.
"""
from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest
import skimage.data
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor

import tiny_models
from spinning import SpinThread
from installed.user_env import ask, stop
from vision_dialogue_interfaces.action import ImageToImage
from vision_dialogue.ros.image_msgs import to_image_msg
from vision_dialogue.ros.vfm_actions import VFM_ACTION_QOS
from vision_dialogue_interfaces.srv import ListTools
from vision_dialogue.vfm.image_store import ImageStore

OPS = ("segment", "segmentobject", "outpaint")


def _measured_mib(ckpts) -> dict[str, float]:
    """What each model adds as the toolbox measures it (MiB), loaded one after another."""
    from vision_dialogue.vfm.toolbox import Toolbox
    box = Toolbox({op: "cpu" for op in ("segment", "segmentobject", "caption", "outpaint")},
                  ckpts)
    out, before = {}, 0
    for model, op in (("sam", "segment"), ("grounding", "segmentobject"),
                      ("caption", "caption"), ("inpaint", "outpaint")):
        box.preload(op)
        now = sum(box.memory_in_use().values())
        out[model], before = (now - before) / (1024 * 1024), now
    return out


class Server:
    """The installed vfm_server, its log, and a client node in this process."""

    def __init__(self, installed, ctx, tmp, ckpts, budget_mib):
        self.store, self.log_path = tmp / "store", tmp / "vfm_server.log"
        args = ["--ros-args", "-p", "load:=" + ",".join(f"{op}_cpu" for op in OPS),
                "-p", f"image_dir:={self.store}", "-p", "num_inference_steps:=2",
                "-p", "image_size:=64", "-p", "seed:=1",
                "-p", f"memory_budget_cpu_mib:={budget_mib}"]
        args += [a for k, v in ckpts.items() for a in ("-p", f"checkpoints.{k}:={v}")]
        self.proc = installed.popen(installed.exe("vfm_server") + args, log=self.log_path)
        from rclpy.node import Node
        self.node = Node("installed_vfm_client", context=ctx)
        self.action = ActionClient(self.node, ImageToImage, "vfm/image_to_image",
                                   **VFM_ACTION_QOS)
        self.tools = self.node.create_client(ListTools, "vfm/list_tools")
        self.spinning = SpinThread(MultiThreadedExecutor(num_threads=2, context=ctx),
                                   [self.node]).start()
        assert self.action.wait_for_server(timeout_sec=120), self.log()
        assert self.tools.wait_for_service(timeout_sec=60), self.log()
        # wait_for_server sees only this side: a server that has not matched the action's
        # feedback reader yet drops the first goal's early feedback ('loading'). The list_tools
        # client's reader was announced after it, in the same ordered discovery stream, so an
        # answered call means the server has matched the feedback reader too
        assert self.list_tools(), self.log()

    def log(self) -> str:
        return self.log_path.read_text()[-4000:]

    def goal(self, op, text="", image=None, image_file="", feedback=None, cancel_when=None):
        g = ImageToImage.Goal(tool=op, text=text, image_file=image_file)
        if image is not None:
            g.image = to_image_msg(np.ascontiguousarray(image[:, :, ::-1]), frame_id="cam")
        handle = ask(lambda: self.action.send_goal_async(
            g, feedback_callback=lambda m: feedback(m.feedback) if feedback else None), 60)
        assert handle.accepted
        if cancel_when is not None:
            assert cancel_when.wait(120), self.log()
            handle.cancel_goal_async()
        return ask(handle.get_result_async, 300).result

    def list_tools(self):
        return {t.op: t for t in ask(lambda: self.tools.call_async(ListTools.Request()),
                                     60).tools}

    def close(self):
        try:
            self.spinning.close()
        finally:
            return stop(self.proc)


@pytest.fixture(scope="module")
def server(installed, tmp_path_factory):
    import rclpy
    from conftest import DOMAIN_ID, close_context
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=DOMAIN_ID)
    tmp = tmp_path_factory.mktemp("vfm_installed")
    ckpts = tiny_models.cached(tmp_path_factory.getbasetemp() / "tiny_vfm")
    size = _measured_mib(ckpts)
    # inpainting with the captioner fits, with SAM beside them it does not
    budget = size["inpaint"] + size["caption"] + 0.05
    assert size["sam"] > 0.05 and size["sam"] + size["grounding"] < budget
    s = Server(installed, ctx, tmp, ckpts, budget)
    try:
        yield s
    finally:
        code = s.close()
        close_context(ctx)
    assert code == 0, s.log()


@pytest.fixture
def photo():
    return cv2.resize(skimage.data.astronaut(), (64, 64), interpolation=cv2.INTER_AREA)


def test_segment_over_ros_stores_the_overlay_and_counts_the_masks(server, photo):
    stages = []
    r = server.goal("segment", image=photo, feedback=lambda f: stages.append(f.stage))
    assert r.success, r.error
    n = int(r.text.split()[0])
    assert n >= 1 and "segment" in r.text
    stored = ImageStore(server.store).load(r.image_file)
    assert stored.shape == (64, 64, 3) and np.any(stored != photo)
    assert "_segment_" in r.image_file
    assert {"loading", "embedding", "segmenting"} <= set(stages), stages
    blank = server.goal("segment", image=np.full((64, 64, 3), 90, np.uint8))
    assert blank.success and "blank" in blank.text and blank.image_file == ""
    chained = server.goal("segment", image_file=r.image_file)      # a chained file name
    assert chained.success and chained.image_file.split("_")[2] == r.image_file.split("_")[0]


def test_segment_object_that_is_not_there_is_an_answer_not_an_error(server, photo):
    r = server.goal("segmentobject", "unicorn", image=photo)
    assert r.success and r.error == "" and r.image_file == ""
    assert r.text == "found no unicorn in the image"
    empty = server.goal("segmentobject", "", image=photo)
    assert not empty.success and "needs a text" in empty.error


def test_outpaint_over_ros_reports_each_step_and_cancels_between_steps(server, photo):
    stages = []
    r = server.goal("outpaint", "2.5x", image=photo, feedback=lambda f: stages.append(f.stage))
    assert r.success, r.error
    out = ImageStore(server.store).load(r.image_file)
    assert out.shape == (160, 160, 3)
    np.testing.assert_array_equal(out[48:112, 48:112], photo)
    assert [s for s in dict.fromkeys(stages) if ":" not in s and s.startswith("extending")] \
        == ["extending 1/2", "extending 2/2"], stages
    second = threading.Event()
    seen = []

    def fb(f):
        seen.append(f.stage)
        if f.stage.startswith("extending 2/"):
            second.set()
    c = server.goal("outpaint", "16x", image=photo, feedback=fb, cancel_when=second)
    assert not c.success and c.error == "cancelled"
    assert not any(s.startswith("extending 3/") for s in seen), seen
    big = server.goal("outpaint", "9000x9000", image=photo)
    assert not big.success and "too large" in big.error


def test_the_budget_unloads_the_least_recently_used_and_list_tools_says_where(server, photo):
    assert server.goal("segment", image=photo).success
    assert server.goal("outpaint", "96x64", image=photo).success      # SAM must make room
    tools = server.list_tools()
    assert tools["outpaint"].loaded and tools["outpaint"].loaded_on == "cpu"
    assert tools["outpaint"].memory_mib > 0
    assert not tools["segment"].loaded and tools["segment"].loaded_on == ""
    deadline = time.monotonic() + 30
    while "unloaded sam@cpu" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "unloaded sam@cpu" in server.log() and "to make room for" in server.log()
    again = server.goal("segment", image=photo)                       # nothing lost
    assert again.success and again.text
