"""Each test's start and end, per worker: where a tier's time goes (scripts/test.sh).

A tier's wall time is its busiest worker's; with whole files scheduled on workers
(`--dist loadfile`), a file's total decides where the run can be cut. Each test appends one
line, `worker<TAB>start<TAB>end<TAB>nodeid`, to `timeline-<tier>.tsv` in the results folder
(VD_TEST_RESULTS_DIR and VD_TEST_TIER, set by scripts/test.sh; without them nothing is
written); `test/tier_summary.py` sums it. A plugin module (test/conftest.py registers it).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from backstop import RESULTS_DIR_VAR


def timeline_file() -> Path | None:
    folder, tier = os.environ.get(RESULTS_DIR_VAR), os.environ.get("VD_TEST_TIER")
    return Path(folder) / f"timeline-{tier}.tsv" if folder and tier else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Runs where the test runs (a worker, or the one process), not in xdist's controller."""
    start = time.time()
    yield
    path = timeline_file()
    if path is not None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:      # one short appended line per test: whole lines
            f.write(f"{worker}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}\n")
