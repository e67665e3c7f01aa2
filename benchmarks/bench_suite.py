#!/usr/bin/env python3
"""README command 2 as CI runs it: a fresh clone, `bash .ci/run`, timed (optionally busy).

    python benchmarks/bench_suite.py [--busy N] [--workers N] [--keep] [--venv PATH]

Clones this checkout's HEAD into a temporary folder with `../shared` beside it (a symlink to
this repository's), runs `.ci/run` there in a clean environment (PATH and HOME only, as CI),
and records: the setup's time, the tests' time (scripts/test.sh's own line), the whole run,
passed, failed and skipped, and each tier's counts. `--busy N` keeps N processes spinning on
a core each for the whole run (the load a robot's other programs put beside it). The
baseline is the suite's own budget: 15 minutes of tests on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 15 * 60


def _spin() -> None:
    while True:
        pass


def run(busy: int, keep: bool, venv: str = "", workers: int = 0) -> dict:
    top = Path(tempfile.mkdtemp(prefix="vd-suite-"))
    clone = top / "vision_dialogue"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    shared = REPO.parent / "shared"
    if shared.exists():
        (top / "shared").symlink_to(shared)
    commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=clone,
                            capture_output=True, text=True).stdout.strip()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"]}
    if venv:            # set up into this venv (the tests' time is the same; setup is shorter)
        env["VD_VENV"] = venv
    if workers:         # test workers per tier (scripts/test.sh's VD_TEST_WORKERS; default 3)
        env["VD_TEST_WORKERS"] = str(workers)
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
    for b in burners:
        b.start()
    log = top / "ci.log"
    t0 = time.monotonic()
    try:
        with open(log, "w") as out:
            code = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, stdout=out,
                                  stderr=subprocess.STDOUT).returncode
    finally:
        for b in burners:
            b.terminate()
    whole = time.monotonic() - t0
    text = log.read_text()
    took = re.search(r"\[test\] tests took (\d+) min (\d+) s", text)
    tests_s = int(took.group(1)) * 60 + int(took.group(2)) if took else None
    counts = re.findall(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", text, re.M)
    tiers = dict(re.findall(r"^\[test\] tier (\w+): (.*)$", text, re.M))
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    result = {"exit_code": code, "commit": commit, "busy_processes": busy,
              "venv": "given" if venv else "fresh", "workers": workers or 3,
              "whole_s": round(whole), "tests_s": tests_s,
              "setup_s": round(whole - tests_s) if tests_s is not None else None,
              "budget_s": BUDGET_S,
              "passed": int(counts[-1][0]) if counts else None,
              "failed": int(counts[-1][1]) if counts else None,
              "skipped": int(counts[-1][2]) if counts else None,
              "tiers": tiers, "failures": failed[:20], "log": str(log)}
    if not keep and code == 0:
        subprocess.run(["rm", "-rf", str(clone)])
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=0, help="processes spinning beside the run")
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    ap.add_argument("--venv", default="", help="set up into this existing venv (VD_VENV) "
                    "instead of a fresh one: the same tests, a shorter setup")
    ap.add_argument("--workers", type=int, default=0,
                    help="test workers per tier (VD_TEST_WORKERS; default: scripts/test.sh's 3)")
    a = ap.parse_args(argv)
    # the run's processes get SIGINT and SIGQUIT as CI's terminal gives them: started as a
    # background job of a script (`... &`), every process of a run had them ignored (a fake
    # server then outlived a test's Ctrl-C); a handler set here is the default after exec
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    result = run(a.busy, a.keep, a.venv, a.workers)
    tests = result["tests_s"]
    print(f"{'busy':>5} {'exit':>5} {'setup s':>8} {'tests s':>8} {'budget s':>9} passed failed")
    print(f"{a.busy:>5} {result['exit_code']:>5} {result['setup_s']!s:>8} {tests!s:>8} "
          f"{BUDGET_S:>9} {result['passed']!s:>6} {result['failed']!s:>6}")
    print(json.dumps(result))
    record("bench_suite", result)
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
