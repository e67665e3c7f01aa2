"""A node stuck in its stop is ended by the kernel, and an orphan's stacks reach the ROS log dir.

`ros2 launch` killed with SIGTERM leaves its nodes (they get SIGTERM from the kernel as their
parent dies); one whose stop then hangs in native code would stay in the domain for good,
with nobody reading its stderr.
"""
import os
import shlex
import signal
import subprocess
import sys
import textwrap

import pytest

from pids import alive, wait_gone

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="PR_SET_PDEATHSIG and SIGALRM are Linux's")]

NODE = textwrap.dedent("""
    import signal, sys, threading, time
    from vision_dialogue.ros import node_runner as nr
    nr.STOP_LIMIT_S, nr.STACKS_IF_STOP_TAKES_S = 3, 0.5
    nr.end_with_parent()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    if sys.argv[1] == 'unnoticed':     # the context is up, and the main thread never returns
        class Up:
            def ok(self):
                return True
        nr.watch_for_stop(Up())
        print('ready', flush=True)
        time.sleep(600)
    print('ready', flush=True)
    stop.wait()
    nr.stacks_if_slow_to_stop(True)
    if sys.argv[1] == 'stuck':
        time.sleep(600)            # stands for a native deadlock in destroy_node
    nr.end_program(0, 'node')
""")

LAUNCHER = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                             stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    print(child.pid, flush=True)      # then this 'launcher' dies, as launch on SIGTERM
""")


def orphan(how: str, log_dir) -> int:
    """The pid of a node whose launcher died; it got SIGTERM and is stopping `how`."""
    out = subprocess.run([sys.executable, "-c", LAUNCHER, NODE, how], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, ROS_LOG_DIR=str(log_dir)))
    return int(out.stdout.split()[-1])


def gone_within(pid: int, timeout: float) -> bool:
    """Whether the process ended within `timeout` s; killed if not (none is left behind)."""
    gone = wait_gone(pid, timeout)
    if not gone:
        os.kill(pid, signal.SIGKILL)
    return gone


def test_an_orphan_stuck_in_its_stop_is_ended_with_its_stacks_in_the_ros_log_dir(tmp_path):
    pid = orphan("stuck", tmp_path)
    assert gone_within(pid, 30), "a stuck stop outlived STOP_LIMIT_S"
    stacks = (tmp_path / f"stop-stacks-{pid}.log").read_text()
    assert "most recent call first" in stacks and 'File "<string>"' in stacks, stacks


def test_a_stop_the_main_thread_never_sees_is_ended_too(tmp_path):
    """The watch arms the limit when the parent is gone, whatever the main thread does."""
    pid = orphan("unnoticed", tmp_path)
    assert gone_within(pid, 30), "a stop nobody noticed outlived STOP_LIMIT_S"
    stacks = (tmp_path / f"stop-stacks-{pid}.log").read_text()
    stuck_at = next(i for i, line in enumerate(NODE.splitlines(), 1) if "sleep(600)" in line)
    assert f'File "<string>", line {stuck_at} in <module>' in stacks, stacks    # where it was


def test_a_node_a_shell_started_runs_on_when_the_shell_is_gone(tmp_path):
    """`nohup node &`, then the shell closes: not a stop (the limit is not armed)."""
    shell = subprocess.run(
        ["bash", "-c", f"{sys.executable} -c {shlex.quote(NODE)} unnoticed > {tmp_path}/out "
                       f"2>&1 & echo $!; until grep -qx ready {tmp_path}/out; do sleep 0.05; "
                       "done"],
        capture_output=True, text=True, timeout=60, env=os.environ)
    pid = int(shell.stdout.split()[-1])
    try:
        assert not gone_within(pid, 5), "a node started from a shell ended with the shell"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        gone_within(pid, 10)


def test_an_orphan_that_stops_in_time_leaves_no_stacks_file(tmp_path):
    pid = orphan("clean", tmp_path)
    assert gone_within(pid, 30)
    assert not list(tmp_path.glob("stop-stacks-*")), list(tmp_path.iterdir())
