"""The test workers' machine lock: a real-time test runs alone, and before later tests."""
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

HOLD = """
import sys, time
sys.path.insert(0, {test!r})
from pathlib import Path
from conftest import MachineLock
lock, mode, log = MachineLock(Path({root!r})), sys.argv[1], Path(sys.argv[2])
if mode == "exclusive":
    with lock.exclusive():
        log.write_text(f"{{time.monotonic()}}\\n")
        time.sleep(1.0)
        log.write_text(log.read_text() + f"{{time.monotonic()}}\\n")
else:
    held = lock.shared()
    log.write_text(f"{{time.monotonic()}}\\n")
    time.sleep(float(sys.argv[3]))
    log.write_text(log.read_text() + f"{{time.monotonic()}}\\n")
    held.close()
"""


def _start(tmp_path, name, *args):
    program = tmp_path / "hold.py"
    program.write_text(HOLD.format(test=str(REPO / "test"), root=str(tmp_path)))
    return subprocess.Popen([sys.executable, str(program), args[0], str(tmp_path / name),
                             *args[1:]])


def _times(tmp_path, name):
    return [float(x) for x in (tmp_path / name).read_text().split()]


def _until(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def _written(path: Path) -> bool:
    return path.exists() and bool(path.read_text())


def _write_locked(path: Path) -> bool:
    """Whether a process holds an exclusive flock on `path` (Linux's /proc/locks)."""
    if not path.exists():
        return False
    inode = f":{path.stat().st_ino} "
    return any("FLOCK" in ln and "WRITE" in ln and inode in ln
               for ln in Path("/proc/locks").read_text().splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/locks")
def test_a_real_time_test_waits_for_running_tests_and_goes_before_later_ones(tmp_path):
    first = _start(tmp_path, "first", "shared", "1.5")
    assert _until(lambda: _written(tmp_path / "first"))     # a test is running
    real_time = _start(tmp_path, "real_time", "exclusive")
    assert _until(lambda: _write_locked(tmp_path / "machine.gate"))    # it waits at the gate
    later = _start(tmp_path, "later", "shared", "0.1")
    for p in (first, real_time, later):
        assert p.wait(30) == 0
    first_t, real_t, later_t = (_times(tmp_path, n) for n in ("first", "real_time", "later"))
    assert real_t[0] >= first_t[1]         # it waited for the running test to end
    assert later_t[0] >= real_t[1]         # the later test waited for it to end
