"""Shared test fixtures.

Source tree first on sys.path, an isolated ROS domain, and a fresh rclpy Context per test.
"""
from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Source modules first; vision_dialogue/__init__.py merges the colcon install tree's generated
# msg/srv/action packages into the package path.
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test"))

# Keep DDS traffic on this machine and away from other test runs.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
DOMAIN_ID = int(os.environ.get("VD_TEST_DOMAIN_ID", random.randint(30, 200)))
os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)


from fake_openai import fake_openai  # noqa: E402, F401 - a fixture for every test module


@pytest.fixture
def ros_context():
    """A fresh, initialised rclpy Context (shut down after the test)."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=DOMAIN_ID)
    try:
        yield ctx
    finally:
        ctx.try_shutdown()


@pytest.fixture
def ros_context_args():
    """Factory: a fresh Context initialised with command-line args (e.g.

    --ros-args --params-file F -r __ns:=/x), shut down after the test.
    """
    import rclpy

    made = []

    def make(args):
        ctx = rclpy.Context()
        rclpy.init(args=["test"] + list(args), context=ctx, domain_id=DOMAIN_ID)
        made.append(ctx)
        return ctx
    yield make
    for ctx in made:
        ctx.try_shutdown()


def spin_until(executor, predicate, timeout: float = 5.0, step: float = 0.02) -> bool:
    """Spin `executor` until predicate() is true or `timeout` passes; returns predicate()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        executor.spin_once(timeout_sec=step)
    return bool(predicate())


def start_bag_player(ctx, bag, topics: list[str], nodes: list, timeout: float = 5.0):
    """`bag_play` of `topics`, with `nodes`, on one single-threaded executor: (player, executor).

    Single-threaded keeps the GIL free for the player's timing. The player starts once each
    of its topics has a subscriber, so nothing is published to nobody.
    """
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from vision_dialogue.cli.bag_play import BagPlayer
    player = BagPlayer(context=ctx, autostart=False, parameter_overrides=[
        Parameter("bag", value=str(bag)), Parameter("start_delay", value=0.0),
        Parameter("topics", value=list(topics))])
    ex = SingleThreadedExecutor(context=ctx)
    for n in (*nodes, player):
        ex.add_node(n)
    assert spin_until(ex, lambda: all(p.get_subscription_count() >= 1
                                      for p in player._pubs.values()), timeout)
    player.start()
    return player, ex


@pytest.fixture
def spin():
    return spin_until


@pytest.fixture(autouse=True)
def _restore_ros_log_level():
    """`--ros-args --log-level X` (e.g.

    an in-process bringup) sets the process-wide default logger level; put it back so later tests
    see the usual INFO logs.
    """
    yield
    logging = sys.modules.get("rclpy.logging")      # ROS-free tests never import rclpy
    if logging is not None:
        logging.set_logger_level("", logging.LoggingSeverity.INFO)


# ------------------------------------------------------------------ the fault matrix
_FAULT_ROWS: dict = {}


def pytest_configure(config):
    config.addinivalue_line("markers", "fault(area, fault): a fault-injection probe, listed "
                            "in the fault matrix printed at the end of the run")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    mark = item.get_closest_marker("fault")
    if mark is None or report.when != "call" and not report.failed:
        return
    row = _FAULT_ROWS.setdefault((mark.args[0], mark.args[1]),
                                 {"ok": 0, "failed": 0, "tests": set()})
    row["tests"].add(item.name.split("[")[0])
    if report.when == "call" or report.failed:
        row["ok" if report.passed else "failed"] += 1


def pytest_terminal_summary(terminalreporter):
    if not _FAULT_ROWS:
        return
    tr = terminalreporter
    tr.section("fault matrix")
    tr.write_line(f"{'area':<12} {'fault':<58} {'result':<8} probes")
    for (area, fault), row in sorted(_FAULT_ROWS.items()):
        result = "FAILED" if row["failed"] else "held"
        n = row["ok"] + row["failed"]
        tr.write_line(f"{area:<12} {fault[:58]:<58} {result:<8} {n}")
