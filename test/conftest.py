"""Shared test fixtures.

Source tree first on sys.path, an isolated ROS domain, and a fresh rclpy Context per test.
"""
from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Source modules first (the generated interfaces, vision_dialogue_interfaces, come from the
# colcon install tree on PYTHONPATH).
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test"))

#: what the ROS-free tier may not import: rclpy, ROS packages, the generated interfaces
ROS_MODULES = ("rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "sensor_msgs",
               "geometry_msgs", "action_msgs", "rosgraph_msgs", "diagnostic_msgs",
               "lifecycle_msgs", "std_srvs", "vision_msgs", "hri_msgs", "launch", "launch_ros",
               "ament_index_python", "vision_dialogue_interfaces")
if os.environ.get("VD_BLOCK_ROS") == "1":       # scripts/test.sh's first tier (test/unit)
    for _m in ROS_MODULES:
        sys.modules[_m] = None                  # `import rclpy` raises ImportError

# Keep DDS traffic on this machine and away from other test runs.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def _domain_id() -> int:
    """This process's ROS domain: VD_TEST_DOMAIN_ID, else a random one (30..199).

    Under pytest-xdist the workers of one run share a random base (from the run's id) and
    each takes the next domain, so two workers never share one.
    """
    if os.environ.get("VD_TEST_DOMAIN_ID"):
        return int(os.environ["VD_TEST_DOMAIN_ID"])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    if worker.startswith("gw") and run:
        base = 30 + int(run[:8], 16) % 150
        return 30 + (base - 30 + int(worker[2:])) % 170
    return random.randint(30, 199)


DOMAIN_ID = _domain_id()
os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)


def side_domain(offset: int) -> int:
    """A second ROS domain of this process for a test file that needs one (201..230).

    Above the workers' domains (30..200); a file takes its own `offset`, and the workers'
    consecutive domains keep theirs apart.
    """
    return 201 + (DOMAIN_ID + offset) % 30


#: the demo videos every test shares (the user's cache, as `bringup demo` uses): each is named
#: by a hash of its recipe and written atomically, so tests and workers can share it, and the
#: two-person video (seconds of CPU to make) is made once, not once per test
DEMO_DIR = str(Path(os.environ.get("VD_DEMO_DIR") or
                    Path.home() / ".cache" / "vision_dialogue" / "demo"))

from fake_openai import fake_openai  # noqa: E402, F401 - a fixture for every test module
import file_order  # noqa: E402 - which test file starts first (HEAVY_FILES)


def close_context(ctx) -> None:
    """Shut `ctx` down and destroy it: its rcl context goes now, not at a later collection.

    What rcl and the middleware hold for a test must go at the test's end: finalised by the
    garbage collector, it goes in C with the interpreter lock held, in the middle of a later
    test (lifecycle nodes kept their DDS participants so until ros/teardown.py destroyed their
    state machines: eleven in one worker, and CI's worker stuck six minutes).
    """
    ctx.try_shutdown()
    ctx.destroy()


@contextlib.contextmanager
def context_in(domain: int):
    """A fresh rclpy Context initialised in ROS domain `domain`, closed at the end."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    try:
        yield ctx
    finally:
        close_context(ctx)


@pytest.fixture
def ros_context():
    """A fresh, initialised rclpy Context (shut down after the test)."""
    with context_in(DOMAIN_ID) as ctx:
        yield ctx


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


def until(predicate, timeout: float = 5.0, step: float = 0.005) -> bool:
    """Whether predicate() holds within `timeout` s (a thread's or a process's event; no ROS)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def spin_until(executor, predicate, timeout: float = 5.0, step: float = 0.02) -> bool:
    """Spin `executor` until predicate() is true or `timeout` passes; returns predicate()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        executor.spin_once(timeout_sec=step)
    return bool(predicate())


def matched(publisher, *readers, count: int = 1) -> bool:
    """Both sides of a match: the publisher's and the readers' subscriptions on its topic.

    `publisher` sees `count` subscribers, and each subscription of the `readers` nodes on its
    topic sees a publisher. A publisher sees a subscriber before that subscriber sees it, and
    what it sends meanwhile is lost to that subscriber (volatile): waiting on the publisher's
    side alone is a race.
    """
    if publisher.get_subscription_count() < count:
        return False
    return all(reading(node, publisher.topic_name, at_least=0) for node in readers)


def reading(node, topic: str, at_least: int = 1) -> bool:
    """`node` has `at_least` subscriptions on `topic`, and each of them sees a publisher.

    The subscriber's side of a match, for a publisher in another process (whose side that
    process checks): until it holds, what is published is lost to that subscription.
    """
    subs = [sub for sub in node.subscriptions if sub.topic_name == topic]
    return len(subs) >= at_least and all(sub.get_publisher_count() >= 1 for sub in subs)


def start_bag_player(ctx, bag, topics: list[str], nodes: list, timeout: float = 30.0,
                     ready=lambda: True, sync_replies: bool = False):
    """`bag_play` of `topics`, with `nodes`, on one single-threaded executor: (player, executor).

    Single-threaded keeps the GIL free for the player's timing. The player starts once each
    of its topics has a subscriber, so nothing is published to nobody, and `ready()` holds
    (the nodes' own start: what they hear before it is lost to them).
    """
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from vision_dialogue.cli.bag_play import BagPlayer
    player = BagPlayer(context=ctx, autostart=False, parameter_overrides=[
        Parameter("bag", value=str(bag)), Parameter("start_delay", value=0.0),
        Parameter("topics", value=list(topics)),
        Parameter("sync_replies", value=sync_replies)])
    ex = SingleThreadedExecutor(context=ctx)
    for n in (*nodes, player):
        ex.add_node(n)
    assert spin_until(ex, lambda: all(matched(p, *nodes) for p in player._pubs.values())
                      and ready(), timeout)
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


# ------------------------------------------------------------------ time limits
# every test's backstop past its time limit (a plugin module of its own, so a test can load it
# into a pytest run of its own)
from backstop import pytest_runtest_protocol, pytest_unconfigure  # noqa: E402, F401


def domain_processes(domain: int = DOMAIN_ID) -> dict[int, str]:
    """{pid: command line} of the other processes on this machine in ROS domain `domain`."""
    found, key = {}, f"ROS_DOMAIN_ID={domain}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if key in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace").strip()
        except OSError:             # gone, or not ours to read
            continue
    return found


#: multiprocessing's helper (a print process's spawn starts it): one per process, it ends with
#: the process that started it
RESOURCE_TRACKER = "multiprocessing.resource_tracker"


@pytest.fixture(autouse=True)
def _no_process_left_in_the_domain():
    """Warn, naming the test, of a process it started in the worker's ROS domain and left running.

    Such a process answered for nodes of later tests in that domain (a subscriber that started
    a speech node's input early, a /diagnostics publisher the doctor waited for).
    """
    if not sys.platform.startswith("linux"):
        yield
        return
    before = set(domain_processes())
    yield
    left = {pid: cmd for pid, cmd in domain_processes().items()
            if pid not in before and cmd and RESOURCE_TRACKER not in cmd}
    if left:
        import warnings
        warnings.warn(f"processes left running in ROS domain {DOMAIN_ID}: " + "; ".join(
            f"{pid} {cmd[:160]}" for pid, cmd in sorted(left.items())), stacklevel=1)


# ------------------------------------------------------------------ the fault matrix
_FAULT_ROWS: dict = {}


#: the tiers in the order they run: ROS-free, nodes in this process, processes and the install
TIERS = ("unit", "", "installed")


def tier_of(item) -> int:
    """0 for test/unit, 2 for test/installed, 1 for the rest (nodes in this process)."""
    parts = Path(str(item.fspath)).relative_to(REPO / "test").parts
    return TIERS.index(parts[0]) if len(parts) > 1 and parts[0] in TIERS else 1


def pytest_collection_modifyitems(session, config, items):
    """The tiers in order; under pytest-xdist, longest test file first.

    scripts/test.sh runs the workers with `--dist loadfile`: each test file whole on one worker,
    as its tests share module fixtures (a model, a server, a network namespace); split over two
    workers, each would make its own. (pytest-xdist's `loadgroup` marks do not reach
    pytest 9's node ids.) The schedule follows the workers' collection order, sorted here.
    """
    items.sort(key=tier_of)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        def weight(item):
            stem = Path(str(item.fspath)).stem
            return -file_order.HEAVY_FILES.get(stem, 0)
        items.sort(key=weight)                 # stable: each file's tests keep their order


try:
    import xdist  # noqa: F401 - only whether it is there
except ImportError:         # without pytest-xdist: one process, the "master"
    @pytest.fixture(scope="session")
    def worker_id():
        return "master"


def pytest_configure(config):
    import timeline     # each test's start and end per worker, for tier_summary.py
    config.pluginmanager.register(timeline, "vd-timeline")
    import cores        # a conversation on a real model runs with no other test beside it
    config.pluginmanager.register(cores, "vd-cores")
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


def shared_root(tmp_path_factory, worker_id: str) -> Path:
    """The temporary folder every test worker of this run sees (pytest-xdist: above each's)."""
    root = tmp_path_factory.getbasetemp()
    return root if worker_id == "master" else root.parent


@pytest.fixture
def cores_for_real_time(tmp_path_factory, worker_id):
    """Hold the cores for real-time work: one such test at a time across test workers.

    For perception of a video played in real time (a conversation on llama.cpp takes
    `cores_alone`, which also keeps these away). llama.cpp
    runs a thread per core; two conversations at once on 2 cores spin against each other (a
    fresh-clone run's first reply took 67 s while the llama.cpp server's demo ran beside the
    embedded one), and the events node beside them looked at too few frames to see a wave.
    The second test waits here for the first to end; its time limit counts the wait.
    """
    from filelock import FileLock
    with FileLock(str(shared_root(tmp_path_factory, worker_id) / "real-model.lock")):
        yield


@pytest.fixture
def cores_alone(request):
    """Hold the cores alone: no other test runs meanwhile (test/cores.py).

    For a conversation on llama.cpp, whose threads (one per core) wait for each other at every
    layer: beside other tests the embedded 1.5B demo took 240-415 s, alone 71 s. Its time limit
    counts its wait for the tests running when it asks.
    """
    import cores
    with cores.cores(request.config, alone=True):
        yield
