"""doctor --health against a running node's /diagnostics."""
import time

from vision_dialogue.cli import doctor
from vision_dialogue.cli.doctor import FAIL, OK, WARN, Config


def test_health_reports_each_running_nodes_statuses(ros_context):
    """doctor --health: the statuses a node publishes on /diagnostics, one row each."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from spinning import SpinThread
    from vision_dialogue.core import health
    from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
    assert doctor.health_rows(Config(health=True, listen_s=1.0))[0].result == WARN  # nobody
    node = rclpy.create_node("camera_node", context=ros_context)
    DiagnosticsPublisher(node, lambda: [
        health.Health("camera", health.OK, "frame 0.2 s ago"),
        health.Health("vfm", health.ERROR, "no tool loads"),
        health.Health("speech", health.WARN, "robot away")],
        period=0.2)
    with SpinThread(SingleThreadedExecutor(context=ros_context), [node]):
        t0 = time.monotonic()
        rows = doctor.health_rows(Config(health=True, listen_s=60.0))
        assert time.monotonic() - t0 < 50        # it ends once each publishing node was heard
    assert [(r.name, r.result, r.detail) for r in rows] == [
        ("camera_node: camera", OK, "frame 0.2 s ago"),
        ("camera_node: speech", WARN, "robot away"),
        ("camera_node: vfm", FAIL, "no tool loads")]
