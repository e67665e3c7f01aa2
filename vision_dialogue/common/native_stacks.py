"""The native stacks of a process's threads, for a process stuck in C (no ROS).

faulthandler shows Python frames only; a process stuck in rcl or the DDS library shows none
that says where. Used by `bringup --processes` on a node that ignored SIGINT and SIGTERM
(before SIGKILL) and by the test suite's watchdog (test/native_stacks.py).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

#: gdb's time to attach and print every thread (a process with torch loaded can take long)
GDB_TIMEOUT_S = 25.0
#: how long each thread's CPU use is sampled for its busy share
BUSY_SAMPLE_S = 1.0


def _cpu_ticks(pid: int) -> dict[str, int]:
    """Each thread's CPU time so far, in clock ticks (user + system, /proc's stat)."""
    ticks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            ticks[task.name] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):   # the thread ended as we read
            continue
    return ticks


def proc_stacks(pid: int) -> str:
    """Each thread's name, share of a CPU over BUSY_SAMPLE_S, wait channel and kernel stack.

    The busy share names the thread that holds the interpreter while the others wait for it
    (a thread spinning in C); the kernel stacks are readable as root.
    """
    before = _cpu_ticks(pid)
    time.sleep(BUSY_SAMPLE_S)
    after = _cpu_ticks(pid)
    per_s = os.sysconf("SC_CLK_TCK") * BUSY_SAMPLE_S
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda p: int(p.name)):
        def read(name: str) -> str:
            try:
                return (task / name).read_text().strip()
            except OSError as e:
                return f"({e.strerror})"
        busy = 100 * (after.get(task.name, 0) - before.get(task.name, 0)) / per_s
        lines.append(f"thread {task.name} {read('comm')!r} busy {busy:.0f}% "
                     f"waits in {read('wchan')}")
        lines += [f"    {frame}" for frame in read("stack").splitlines()]
    return "\n".join(lines)


def native_stacks(pid: int, timeout: float = GDB_TIMEOUT_S, frames: int | None = None) -> str:
    """gdb's backtrace of every thread of `pid` (the main thread last), else /proc's stacks.

    Without the frames' arguments; `frames`: the innermost ones only (where it waits).
    """
    gdb = shutil.which("gdb")
    if gdb:
        bt = f"thread apply all bt {frames}" if frames else "thread apply all bt"
        try:
            done = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx",
                                   "-ex", "set print frame-arguments none", "-ex", bt],
                                  capture_output=True, text=True, timeout=timeout)
            if "Thread" in done.stdout:
                return done.stdout
        except subprocess.TimeoutExpired:
            pass
    return proc_stacks(pid)
