"""Every test's backstop: a process stuck past its test's time limit ends, stacks in a file.

A stuck test must not stall CI for its 90 minutes.

pytest-timeout fails a test at its limit with its stack, from a signal; a thread holding the
interpreter lock in C never lets that signal land. Then this ends the process `BACKSTOP_S` later.
The stacks go to a file because the test's captured stderr dies with the process; scripts/test.sh
prints the files after each tier. A pytest plugin module (test/conftest.py imports its hook).
"""
from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: a test's time limit when it names none (pytest-timeout; setup.cfg sets the same)
DEFAULT_TIMEOUT_S = 300.0
#: after a test's limit, this long for pytest-timeout to fail it with its stack; then the
#: backstop ends the test's process with every thread's stack (a thread holding the
#: interpreter lock in C, where pytest-timeout's signal cannot land, must not stall CI)
BACKSTOP_S = float(os.environ.get("VD_TEST_BACKSTOP_S") or 60.0)


def time_limit(item) -> float:
    """The test's time limit in seconds: its `timeout` mark, else the ini's, else the default."""
    mark = item.get_closest_marker("timeout")
    if mark is not None and mark.args:
        return float(mark.args[0])
    if mark is not None and "timeout" in mark.kwargs:
        return float(mark.kwargs["timeout"])
    try:
        return float(item.config.getini("timeout") or DEFAULT_TIMEOUT_S)
    except ValueError:          # pytest-timeout is not installed: its ini is unknown
        return DEFAULT_TIMEOUT_S


#: the folder of the suite's results (scripts/test.sh sets it; the timeline writes there too)
RESULTS_DIR_VAR = "VD_TEST_RESULTS_DIR"
#: where the backstop writes every thread's stacks before it ends a stuck test process: a file,
#: because the test's own stderr is captured and lost with the process (scripts/test.sh prints
#: these files after a tier; VD_TEST_RESULTS_DIR is its results folder)
STACKS_NAME = "stacks-{worker}-{pid}.txt"


def backstop_file():
    """The open file this process's backstop writes stacks to (made on first use)."""
    if getattr(backstop_file, "opened", None) is None:
        folder = Path(os.environ.get(RESULTS_DIR_VAR) or REPO / "build" / "test-results")
        folder.mkdir(parents=True, exist_ok=True)
        name = STACKS_NAME.format(worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
                                  pid=os.getpid())
        backstop_file.opened = open(folder / name, "w", encoding="utf-8")  # noqa: SIM115
    return backstop_file.opened


def native_watchdog() -> Path:
    """The file this process writes each test's deadline to, for its native-stacks watchdog.

    test/native_stacks.py, started on first use (stopped and waited for at the end): past a
    deadline it writes every thread's native stacks next to the backstop's Python ones.
    """
    if getattr(native_watchdog, "deadline", None) is None:
        stacks = Path(backstop_file().name)
        deadline = stacks.with_name(stacks.stem + "-deadline")
        deadline.write_text("")
        env = {k: v for k, v in os.environ.items() if k != "ROS_DOMAIN_ID"}   # no ROS here
        native_watchdog.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("native_stacks.py")), str(os.getpid()),
             str(deadline), str(stacks.with_name(stacks.stem + "-native.txt"))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        native_watchdog.deadline = deadline
    return native_watchdog.deadline


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    stacks = backstop_file()
    stacks.write(f"\n{item.nodeid}: past its time limit and the backstop's {BACKSTOP_S:.0f} s "
                 "more; every thread's stacks, then the process ends:\n")
    stacks.flush()
    limit = time_limit(item)
    deadline = native_watchdog()
    deadline.write_text(f"{time.time() + limit + BACKSTOP_S / 2:.3f}")   # native stacks first
    faulthandler.dump_traceback_later(limit + BACKSTOP_S, exit=True, file=stacks)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        deadline.write_text("")
        stacks.seek(0)
        stacks.truncate()           # the file holds only a test that ran out of time


def pytest_unconfigure(config):
    """Close this process's stacks file; an empty one (no test ran out of time) goes."""
    proc = getattr(native_watchdog, "proc", None)
    if proc is not None:
        proc.terminate()
        proc.wait(30)
        native_watchdog.deadline.unlink(missing_ok=True)
        native_watchdog.proc = native_watchdog.deadline = None
    opened = getattr(backstop_file, "opened", None)
    if opened is not None:
        opened.close()
        backstop_file.opened = None
        path = Path(opened.name)
        if path.stat().st_size == 0:
            path.unlink()
