"""The suite's backstop: a test process stuck past its time limit ends, its stacks in a file.

scripts/test.sh prints the file; the test's captured stderr would die with the process.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]       # test/, where the plugin module backstop.py is

STUCK = '''
import threading, time
import pytest

@pytest.mark.timeout(1)
def test_stuck_in_a_thread_join():
    worker = threading.Thread(target=time.sleep, args=(60,), name="sleeper")
    worker.start()
    worker.join()
'''


def _pytest_with_the_backstop(tmp_path, test_source: str, *args: str, **env: str):
    """pytest over `test_source` with backstop.py as its plugin; its stacks folder."""
    (tmp_path / "test_it.py").write_text(test_source)
    results = tmp_path / "results"
    env = {**os.environ, "VD_TEST_STACKS_DIR": str(results), **env,
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "backstop", *args, str(tmp_path / "test_it.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50)
    return run, results


@pytest.mark.timeout(60)
def test_a_test_past_its_limit_leaves_its_stacks_in_the_results_folder(tmp_path):
    # pytest-timeout off: the backstop is what is left when its signal cannot land
    run, results = _pytest_with_the_backstop(tmp_path, STUCK, "-p", "no:timeout", "-W", "ignore",
                                             VD_TEST_BACKSTOP_S="1")
    assert run.returncode != 0, run.stdout
    (stacks,) = results.glob("stacks-main-*.txt")
    text = stacks.read_text()
    assert "test_it.py::test_stuck_in_a_thread_join: past its time limit" in text
    assert "in join" in text and "Thread 0x" in text      # every thread, the main one in join()


def test_a_run_within_its_limits_leaves_no_file(tmp_path):
    run, results = _pytest_with_the_backstop(tmp_path, "def test_quick():\n    assert True\n")
    assert run.returncode == 0, run.stdout + run.stderr
    assert results.is_dir() and list(results.iterdir()) == []
