"""The suite's own plugins, in a pytest run of their own.

The backstop: a test process stuck past its time limit ends, its stacks in a file
(scripts/test.sh prints the file; the test's captured stderr would die with the process).
The timeline: each test's start, end and CPU seconds, summed per worker and per file by
tier_summary.py.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]       # test/, where the plugin modules are

STUCK = '''
import threading, time
import pytest

@pytest.mark.timeout(1)
def test_stuck_in_a_thread_join():
    worker = threading.Thread(target=time.sleep, args=(60,), name="sleeper")
    worker.start()
    worker.join()
'''

SPINNER = """    spinner = threading.Thread(target=spin, name="spinner", daemon=True)
    spinner.start()
"""
SPINNING = STUCK.replace("    worker.start()", SPINNER + "    worker.start()") + """

def spin():
    while True:
        pass
"""


def _pytest_with(plugin: str, tmp_path, test_source: str, *args: str, **env: str):
    """pytest over `test_source` with `plugin` (a module in test/); its results folder."""
    (tmp_path / "test_it.py").write_text(test_source)
    results = tmp_path / "results"
    env = {**os.environ, "VD_TEST_RESULTS_DIR": str(results), **env,
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", plugin, *args, str(tmp_path / "test_it.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=80)
    return run, results


@pytest.mark.timeout(60)
def test_a_test_past_its_limit_leaves_its_stacks_in_the_results_folder(tmp_path):
    # pytest-timeout off: the backstop is what is left when its signal cannot land
    run, results = _pytest_with("backstop", tmp_path, STUCK, "-p", "no:timeout", "-W", "ignore",
                                VD_TEST_BACKSTOP_S="1")
    assert run.returncode != 0, run.stdout
    (stacks,) = results.glob("stacks-main-[0-9]*[0-9].txt")
    text = stacks.read_text()
    assert "test_it.py::test_stuck_in_a_thread_join: past its time limit" in text
    assert "in join" in text and "Thread 0x" in text      # every thread, the main one in join()


@pytest.mark.timeout(90)
def test_a_test_stuck_in_c_leaves_its_native_stacks_too(tmp_path):
    """Python frames end at the C call (a hang in rclpy's destroy_node showed none below it).

    Halfway through the backstop's time, the watchdog writes every thread's native stacks:
    gdb's backtraces where gdb is installed, else each thread's kernel wait. The summary's
    digest, in the few lines CI shows, names the test and the thread that was running.
    """
    run, results = _pytest_with("backstop", tmp_path, SPINNING, "-p", "no:timeout",
                                "-W", "ignore", VD_TEST_BACKSTOP_S="20")
    assert run.returncode != 0, run.stdout
    (native,) = results.glob("stacks-main-*-native.txt")
    text = native.read_text()
    assert text.startswith("native stacks of process"), text[:500]
    assert re.search(r"futex|pthread_join|sem_clockwait|do_wait", text), text[:3000]
    busy = [int(b) for b in re.findall(r"(?m)^thread \d+ '.*' busy (\d+)%", text)]
    top, second = sorted(busy)[-1], sorted(busy)[-2]
    assert top >= 10 and second * 3 < top, busy     # the spinner alone (less on a loaded CPU)
    assert not list(results.glob("*-deadline"))            # the watchdog's file went with it
    summary = subprocess.run([sys.executable, str(HERE / "tier_summary.py"), str(results), "7"],
                             capture_output=True, text=True, timeout=30).stdout.splitlines()
    digest = [line for line in summary if line.startswith("[test]   ") or "stuck:" in line]
    assert digest[0] == "[test] stuck: test_it.py::test_stuck_in_a_thread_join", summary
    running = [line for line in digest if "running: thread" in line]
    assert len(running) == 1, digest
    if shutil.which("gdb"):        # gdb maps the thread to its Python frames
        assert re.search(r"Python \S*test_it.py:\d+ spin$", running[0]), running
    (main,) = [line for line in digest if line.startswith("[test]   main thread")]
    assert "test_it.py:" in main or not shutil.which("gdb"), main    # waiting in its join
    print("\n".join(digest))


def test_a_run_within_its_limits_leaves_no_file(tmp_path):
    run, results = _pytest_with("backstop", tmp_path, "def test_quick():\n    assert True\n")
    assert run.returncode == 0, run.stdout + run.stderr
    assert results.is_dir() and list(results.iterdir()) == []


TWO = """
import subprocess, sys, time

BURN = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass"

def test_quick():
    pass

def test_slow():
    time.sleep(0.3)

def test_a_child_burns_cpu():
    subprocess.run([sys.executable, "-c", BURN], check=True)
"""


def test_the_timeline_has_each_test_and_the_summary_sums_it(tmp_path):
    run, results = _pytest_with("timeline", tmp_path, TWO,
                                f"--junitxml={tmp_path}/results/unit.xml", VD_TEST_TIER="unit")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line.split("\t") for line in (results / "timeline-unit.tsv").read_text().splitlines()]
    assert [(r[0], r[4]) for r in rows] == [("main", "test_it.py::test_quick"),
                                            ("main", "test_it.py::test_slow"),
                                            ("main", "test_it.py::test_a_child_burns_cpu")]
    slow = float(rows[1][2]) - float(rows[1][1])
    assert 0.29 <= slow < 5 and float(rows[0][2]) <= float(rows[1][1])
    # CPU seconds: a sleep uses next to none; a child's burnt 0.5 s counts for its test
    sleep_cpu, child_cpu = float(rows[1][3]), float(rows[2][3])
    assert sleep_cpu < 0.25 and child_cpu >= 0.5, rows
    summary = subprocess.run([sys.executable, str(HERE / "tier_summary.py"), str(results), "7"],
                             capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert summary[0] == "[test] tier unit: 3 passed, 0 failed, 0 skipped"
    times = re.fullmatch(r"\[test\] tier unit: workers busy (\d+) s of (\d+) s; longest files: "
                         r"test_it.py (\d+) s; most CPU: test_it.py (\d+) s", summary[1])
    assert times and int(times[1]) == int(times[3]) >= 1 and int(times[4]) >= 1, summary
    assert summary[-2:] == ["[test] tests took 0 min 7 s", "3 passed, 0 failed, 0 skipped"]


def test_the_summary_names_a_long_file_that_weighs_too_little_to_start_early(tmp_path):
    """A file missing from HEAVY_FILES starts last: test_memory_process ran 96 s after the rest."""
    (tmp_path / "system.xml").write_text('<testsuite tests="3" failures="0" skipped="0"/>')
    (tmp_path / "timeline-system.tsv").write_text(
        "gw0\t0\t40\t1\ttest/test_new_and_long.py::test_a\n"
        "gw1\t0\t187\t1\ttest/test_voice.py::test_b\n"       # weighed in HEAVY_FILES
        "gw2\t0\t20\t1\ttest/test_short.py::test_c\n")
    summary = subprocess.run([sys.executable, str(HERE / "tier_summary.py"), str(tmp_path), "9"],
                             capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert summary[1].endswith("; long files that may start late (weigh them in "
                               "test/file_order.py HEAVY_FILES): test_new_and_long.py 40 s"), \
        summary


JUNIT = """<testsuites><testsuite tests="3" failures="1" errors="1" skipped="0">
<testcase classname="test.test_a" name="test_ok"/>
<testcase classname="test.test_a" name="test_bad[x]"><failure message="assert 1 == 2&#10;more">
</failure></testcase>
<testcase classname="test.sub.test_b" name="test_crash"><error message="worker 'gw1' crashed"/>
</testcase></testsuite></testsuites>"""


def test_the_summary_names_the_failed_tests_last(tmp_path):
    """CI shows the tail of a run: which tests failed must be in it, not hundreds of lines up."""
    (tmp_path / "system.xml").write_text(JUNIT)
    summary = subprocess.run([sys.executable, str(HERE / "tier_summary.py"), str(tmp_path), "65"],
                             capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert summary == ["[test] tier system: 1 passed, 2 failed, 0 skipped",
                       "[test] failed: test/test_a.py::test_bad[x]: assert 1 == 2",
                       "[test] failed: test/sub/test_b.py::test_crash: worker 'gw1' crashed",
                       "[test] tests took 1 min 5 s", "1 passed, 2 failed, 0 skipped"]


ALONE = """
import os, time
from pathlib import Path

import pytest

OUT = Path(os.environ["VD_TEST_OUT"])


@pytest.fixture
def cores_alone(request):
    import cores
    with cores.cores(request.config, alone=True):
        yield


def _ran(name, start):
    OUT.joinpath(name).write_text(f"{start} {time.time()}")


def test_real_time(cores_alone):
    start = time.time()
    time.sleep(3)
    _ran("real_time", start)


@pytest.mark.timeout(1)
@pytest.mark.parametrize("i", range(24))
def test_short(i):
    start = time.time()
    time.sleep(0.3)
    _ran(f"short{i}", start)
"""


@pytest.mark.timeout(120)
def test_a_real_time_test_runs_alone_and_the_others_wait_outside_their_limit(tmp_path):
    out = tmp_path / "ran"
    out.mkdir()
    run, _ = _pytest_with("cores", tmp_path, ALONE, "-n", "3", "--dist", "load",
                          VD_TEST_OUT=str(out))
    assert run.returncode == 0, run.stdout + run.stderr      # a 3 s wait past a 1 s limit
    ran = {p.name: tuple(map(float, p.read_text().split())) for p in out.iterdir()}
    assert len(ran) == 25, sorted(ran)
    start, end = ran.pop("real_time")
    assert all(e <= start or s >= end for s, e in ran.values()), (start, end, ran)
    # the workers that waited went on after it: the wait did not fail them
    assert any(s >= end for s, _ in ran.values())
