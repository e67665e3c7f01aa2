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
import subprocess
import sys
import time
from pathlib import Path

#: how often the deadline is looked at
POLL_S = 1.0
#: gdb's time to attach and print every thread: within the half of the backstop's minute
#: left (a process with torch loaded can take gdb longer: /proc's stacks are written first)
GDB_TIMEOUT_S = 25.0
#: how long each thread's CPU use is sampled for its busy share
BUSY_SAMPLE_S = 1.0


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


def _proc_stacks(pid: int) -> str:
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


def dump(pid: int) -> str:
    """gdb's backtrace of every thread of `pid`, else what /proc tells of them."""
    gdb = shutil.which("gdb")
    if gdb:
        try:
            done = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex",
                                   "thread apply all bt"], capture_output=True, text=True,
                                  timeout=GDB_TIMEOUT_S)
            if "Thread" in done.stdout:
                return done.stdout
        except subprocess.TimeoutExpired:
            pass
    return _proc_stacks(pid)


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
                first = _proc_stacks(pid)
            except OSError as e:                    # the process ended meanwhile
                first = f"(no /proc stacks: {e})"
            with open(out, "a", encoding="utf-8") as f:
                f.write(f"native stacks of process {pid}, stuck past its test's limit:\n"
                        f"{first}\n")
            try:
                text = dump(pid) if shutil.which("gdb") else ""
            except OSError:                         # gdb gave nothing and the process ended
                text = ""
            if text and text != first:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(f"gdb's backtraces of process {pid}:\n{text}\n")
        time.sleep(POLL_S)
    deadline_file.unlink(missing_ok=True)       # the process ended (the backstop's exit too)


if __name__ == "__main__":
    watch(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
