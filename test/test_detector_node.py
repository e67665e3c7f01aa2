"""The detector node's shutdown: a frame still in the models is not waited for past launch's limit.

`ros2 launch` escalates to SIGTERM 5 s after Ctrl-C; a slow first frame on a loaded machine
held the node's exit for longer (a CI run's detector was killed with SIGKILL).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from conftest import matched, spin_until
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.image_msgs import to_image_msg

pytestmark = pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed: "
                                "scripts/setup.sh builds them from third_party/interfaces")


class StuckDetector:
    """A detector whose first frame takes until `release` is set."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def detect(self, bgr) -> list:
        self.entered.set()
        self.release.wait(30)
        return []


def test_shutdown_does_not_wait_for_a_frame_stuck_in_the_detector(ros_context):
    import rclpy
    from sensor_msgs.msg import Image

    from vision_dialogue.common.frame_intake import FRAME_AT_EXIT_S
    from vision_dialogue.detector_node import DetectorNode
    stuck = StuckDetector()
    node = DetectorNode(detector=stuck, context=ros_context, parameter_overrides=[
        Parameter("faces", value=False), Parameter("text", value=False)])
    camera = rclpy.create_node("camera", context=ros_context)
    pub = camera.create_publisher(Image, "camera/image_raw", 10)
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    ex.add_node(camera)
    worker = node.intake._thread
    try:
        assert spin_until(ex, lambda: matched(pub, node), 10)
        frame, due = to_image_msg(np.zeros((48, 64, 3), np.uint8)), [0.0]

        def entered() -> bool:
            """The frame is in the detector; until then it is sent again every 0.5 s.

            One frame sent once the two sides matched never arrived in a fresh-clone run.
            """
            if stuck.entered.is_set():
                return True
            if time.monotonic() >= due[0]:
                pub.publish(frame)
                due[0] = time.monotonic() + 0.5
            return False
        assert spin_until(ex, entered, 30)
        ex.remove_node(node)
        t0 = time.monotonic()
        node.destroy_node()
        took = time.monotonic() - t0
        assert took < FRAME_AT_EXIT_S + 1.0, took
        assert not stuck.release.is_set() and worker.is_alive()   # it was still in there
    finally:
        stuck.release.set()
        worker.join(10)
        ex.shutdown()
        camera.destroy_node()
    assert not worker.is_alive()
