"""doctor --health against a running node's /diagnostics."""
import time

import pytest
from conftest import context_in, side_domain

from vision_dialogue.cli import doctor
from vision_dialogue.cli.doctor import FAIL, OK, WARN, Config


#: a ROS domain of this file's own: /diagnostics is one global topic, and a node another test
#: left in the worker's domain (a process killed moments ago stays in the graph) was waited for
DOCTOR_DOMAIN = side_domain(15)


@pytest.fixture
def own_domain(monkeypatch):
    """A Context in DOCTOR_DOMAIN, where the doctor (ROS_DOMAIN_ID) looks too."""
    monkeypatch.setenv("ROS_DOMAIN_ID", str(DOCTOR_DOMAIN))
    with context_in(DOCTOR_DOMAIN) as ctx:
        yield ctx


def _status_node(name: str, context):
    import rclpy

    from vision_dialogue.common import health
    from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
    node = rclpy.create_node(name, context=context)
    DiagnosticsPublisher(node, lambda: [
        health.Health("camera", health.OK, "frame 0.2 s ago"),
        health.Health("vfm", health.ERROR, "no tool loads"),
        health.Health("speech", health.WARN, "robot away")],
        period=0.2)
    return node


def test_health_reports_each_running_nodes_statuses(own_domain):
    """doctor --health: the statuses a node publishes on /diagnostics, one row each."""
    from rclpy.executors import SingleThreadedExecutor

    from spinning import SpinThread
    assert doctor.health_rows(Config(health=True, listen_s=1.0))[0].result == WARN  # nobody
    node = _status_node("camera_node", own_domain)
    with SpinThread(SingleThreadedExecutor(context=own_domain), [node]):
        t0 = time.monotonic()
        rows = doctor.health_rows(Config(health=True, listen_s=60.0))
        took = time.monotonic() - t0
    assert [(r.name, r.result, r.detail) for r in rows] == [
        ("camera_node: camera", OK, "frame 0.2 s ago"),
        ("camera_node: speech", WARN, "robot away"),
        ("camera_node: vfm", FAIL, "no tool loads")]
    assert took < 50        # it ends once each publishing node was heard


def test_a_node_that_publishes_nothing_there_is_named(own_domain):
    """A node with a /diagnostics publisher that says nothing (hung) gets a warning row."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor

    from spinning import SpinThread
    from vision_dialogue.ros.topics import DIAGNOSTICS_TOPIC
    node = _status_node("camera_node", own_domain)
    hung = rclpy.create_node("speech_node", context=own_domain)
    hung.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
    with SpinThread(SingleThreadedExecutor(context=own_domain), [node, hung]):
        rows = doctor.health_rows(Config(health=True, listen_s=4.0))
    assert ("/speech_node", WARN) in [(r.name, r.result) for r in rows], rows
    assert "said nothing in 4 s" in next(r.detail for r in rows if r.name == "/speech_node")
    assert len([r for r in rows if r.name.startswith("camera_node: ")]) == 3, rows
