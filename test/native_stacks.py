"""A test process's watchdog: the native stacks of every thread when a test is stuck in C.

faulthandler (test/backstop.py) shows Python frames only: a suite run hung in rclpy's
`destroy_node`, inside rcl and Fast DDS, and no frame said where. Started once per test
process; that process writes, at each test's start, the moment it counts as stuck (nothing
between tests). Past it, this writes each thread's name, share of a CPU, wait channel and
kernel stack from /proc to `out` at once, then gdb's backtrace of every thread where gdb is
installed (gdb can take long on a process with torch loaded), before the backstop ends the
process. It ends when the process does.

    python native_stacks.py PID DEADLINE_FILE OUT_FILE
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout's, as the tests
from vision_dialogue.common.native_stacks import native_stacks, proc_stacks  # noqa: E402

#: how often the deadline is looked at
POLL_S = 1.0


def _deadline(path: Path) -> float | None:
    try:
        text = path.read_text().strip()
        return float(text) if text else None
    except (OSError, ValueError):       # not written yet, or written as we read
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)
    except OSError:
        return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def watch(pid: int, deadline_file: Path, out: Path) -> None:
    """Until `pid` ends: past each deadline once, its native stacks appended to `out`.

    The deadline file goes when the process does.
    """
    dumped = None
    while _alive(pid):
        deadline = _deadline(deadline_file)
        if deadline is not None and time.time() > deadline and deadline != dumped:
            dumped = deadline
            try:                # at once what the kernel tells, then gdb's (it may be slow)
                first = proc_stacks(pid)
            except OSError as e:                    # the process ended meanwhile
                first = f"(no /proc stacks: {e})"
            with open(out, "a", encoding="utf-8") as f:
                f.write(f"native stacks of process {pid}, stuck past its test's limit:\n"
                        f"{first}\n")
            try:
                text = native_stacks(pid) if shutil.which("gdb") else ""
            except OSError:                         # gdb gave nothing and the process ended
                text = ""
            if text and text != first:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(f"gdb's backtraces of process {pid}:\n{text}\n")
        time.sleep(POLL_S)
    deadline_file.unlink(missing_ok=True)       # the process ended (the backstop's exit too)


if __name__ == "__main__":
    watch(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
