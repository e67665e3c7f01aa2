"""Every test's share of the cores: a real-model test runs with the machine to itself.

llama.cpp runs a thread per core and its threads wait for each other at every layer; beside
two other test workers on 2 cores they wait for a thread the kernel gave away. In a fresh-clone
run on a 2-core AVX2 CPU the embedded 1.5B demo test took 240-415 s with other tests beside
it and 71 s alone, and the other tests were slowed as much. So the cores are a read-write
lock across the test workers of one run (fcntl locks on two files): every test holds them
shared while it runs; a test that uses `cores_alone` holds them alone. A gate taken before
either keeps that test from waiting forever behind a stream of short tests. A test's wait here
is outside its time limit (this hook wraps pytest-timeout's and the backstop's); the lone
test's own wait (for the tests running when it asks, at most one per worker) counts in its.

Only the conversations on llama.cpp run alone: the video demos (`cores_for_real_time`, one at a
time) are paced by their video and leave the cores half idle, so giving them the machine alone
made a whole run slower (commit 1e6cd37's run, docs/testing.md).

One pytest process alone needs no lock: then this does nothing. A pytest plugin module
(test/conftest.py registers it).
"""
from __future__ import annotations

import contextlib
import fcntl
import tempfile
from pathlib import Path

import pytest

#: the fixture that marks a test that runs with no other beside it (test/conftest.py has it)
ALONE_FIXTURE = "cores_alone"


def lock_folder(config) -> Path | None:
    """Where this run's lock files are: one folder per pytest-xdist run; None without xdist.

    From the worker's own input, not the environment: a pytest that a test starts inherits the
    environment, and its tests must not queue behind the test that started it.
    """
    run = getattr(config, "workerinput", {}).get("testrunuid")
    if not run:
        return None
    folder = Path(tempfile.gettempdir()) / f"vd-cores-{run}"
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def _flocked(path: Path, how: int):
    with open(path, "a+b") as f:
        fcntl.flock(f, how)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def cores(config, alone: bool):
    """Hold the cores: shared with other tests, or `alone` (no other test runs meanwhile)."""
    folder = lock_folder(config)
    if folder is None:
        yield
        return
    gate, held = folder / "gate.lock", folder / "cores.lock"
    if alone:
        with _flocked(gate, fcntl.LOCK_EX), _flocked(held, fcntl.LOCK_EX):
            yield
        return
    with contextlib.ExitStack() as stack:
        with _flocked(gate, fcntl.LOCK_EX):
            stack.enter_context(_flocked(held, fcntl.LOCK_SH))
        yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Every other test shares the cores; the one that runs alone takes them in its fixture."""
    if ALONE_FIXTURE in getattr(item, "fixturenames", ()):
        yield
        return
    with cores(item.config, alone=False):
        yield
