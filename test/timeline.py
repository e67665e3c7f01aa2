"""Each test's start, end and CPU seconds, per worker: where a tier's time goes (scripts/test.sh).

A tier's wall time is its busiest worker's; with whole files scheduled on workers
(`--dist loadfile`), a file's total decides where the run can be cut. On a machine whose cores
are all busy, only less CPU work shortens a tier, so each test also counts its CPU seconds:
its process's and those of the processes it started and waited for (a node, a launch and its
nodes; a server a module fixture keeps counts in the module's last test). Each test appends one
line, `worker<TAB>start<TAB>end<TAB>cpu<TAB>nodeid`, to `timeline-<tier>.tsv` in the results folder
(VD_TEST_RESULTS_DIR and VD_TEST_TIER, set by scripts/test.sh; without them nothing is
written); `test/tier_summary.py` sums it. A plugin module (test/conftest.py registers it).
"""
from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest

from backstop import RESULTS_DIR_VAR


def timeline_file() -> Path | None:
    folder, tier = os.environ.get(RESULTS_DIR_VAR), os.environ.get("VD_TEST_TIER")
    return Path(folder) / f"timeline-{tier}.tsv" if folder and tier else None


def cpu_seconds() -> float:
    """CPU time of this process and of every process it has waited for, so far."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    theirs = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Runs where the test runs (a worker, or the one process), not in xdist's controller."""
    start, cpu = time.time(), cpu_seconds()
    yield
    path = timeline_file()
    if path is not None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:      # one short appended line per test: whole lines
            f.write(f"{worker}\t{start:.3f}\t{time.time():.3f}\t{cpu_seconds() - cpu:.2f}\t"
                    f"{item.nodeid}\n")
