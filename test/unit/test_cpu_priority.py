"""The suite's real-time tests run first on the cores: their process tree at a higher priority."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from cpu_priority import REAL_TIME_NICE, first_on_the_cores, nice_of, process_tree, threads_of

#: a child with a second thread, both asleep until killed
SLEEPER = ("import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); "
           "print('up', flush=True); time.sleep(60)")


@pytest.fixture
def child():
    """A process started by this one, with two threads, before the priority is raised."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"        # its second thread is running
    yield proc
    proc.kill()
    proc.wait(timeout=30)


def _nices(pid: int) -> set[int]:
    return {nice_of(t) for t in threads_of(process_tree(pid))}


def test_the_tree_runs_at_the_real_time_priority_inside_and_as_before_after(child):
    me, before = os.getpid(), nice_of(os.getpid())
    assert child.pid in process_tree(me) and len(threads_of([child.pid])) == 2
    started = {}
    with first_on_the_cores() as raised:
        if not raised:       # neither root nor an RLIMIT_NICE that allows it: nothing changed
            assert _nices(me) == {before}
            pytest.skip("this user may not raise a priority (the suite then runs without it)")
        assert _nices(child.pid) == {REAL_TIME_NICE}   # a child started before, each thread
        assert nice_of(threading.get_native_id()) == REAL_TIME_NICE
        # a thread started inside inherits the priority
        ready, done = threading.Event(), threading.Event()

        def note():
            started["nice"], started["tid"] = nice_of(threading.get_native_id()), \
                threading.get_native_id()
            ready.set()
            done.wait(30)
        thread = threading.Thread(target=note)
        thread.start()
        assert ready.wait(30)
        assert started["nice"] == REAL_TIME_NICE
    try:
        assert _nices(child.pid) == {before}
        assert nice_of(started["tid"]) == before and nice_of(me) == before
    finally:
        done.set()
        thread.join(timeout=30)
