"""How many threads a local model should use now: the cores other work leaves free.

A robot's computer is never quiet: perception, ROS, speech and other programs share the cores
with the LLM. A model that starts one thread per core while another process keeps a core busy
waits for its descheduled thread at every layer (`benchmarks/bench_cpu_threads.py` measures 2
threads against 1, quiet, beside a busy process and beside a niced one). So before each
generation `CpuShare.threads()` looks at how busy the machine was since its last look, less
this process's own work (the model's threads), and leaves out the cores that other work used,
unless that work has ended: what still runs right now (`procs_running`) bounds it. A reply
comes right after the recogniser and the voice of the previous reply were busy, and they are
done by then. Niced work (the people node's prints, `nice` > 0) does not count: the kernel
gives the model's threads most of the cores (unless this process is niced itself). Beside a
niced process that never stops the two thread counts come close (bench_cpu_threads); the
people node's niced work comes in bursts and at start-up, where all the cores are faster.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
MIN_WINDOW_S = 0.3
"""A shorter look than this tells nothing reliable; the last answer stands."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
"""Ticks per second of /proc/stat's counters."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def read_busy(stat: Path = PROC_STAT, count_niced: bool = False) -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine so far; None where unreadable.

    Niced processes' ticks count as busy only with `count_niced` (for a caller that is niced
    itself: they are its peers, not work that gives way to it).
    """
    try:
        with open(stat, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 5:
        return None
    ticks = [int(x) for x in fields[1:9]]          # user nice system idle iowait irq ...
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    if not count_niced:
        idle += ticks[1]
    return sum(ticks) - idle, sum(ticks)


def own_ticks() -> float:
    """CPU ticks this process (all its threads) used so far."""
    t = os.times()
    return (t.user + t.system) * CLOCK_TICKS


def is_niced() -> bool:
    """Whether this process runs niced (then niced work is its peer)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0) > 0
    except (AttributeError, OSError):
        return False


def read_runnable(stat: Path = PROC_STAT) -> int | None:
    """Threads of the whole machine runnable right now (`procs_running`); None if unknown."""
    try:
        with open(stat, encoding="ascii") as f:
            for line in f:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def others_running_now(stat: Path = PROC_STAT, looks: int = 3) -> int | None:
    """Threads other than the caller that keep running now: the fewest of a few looks.

    A burst (a ROS callback) shows in one look, not in all of them.
    """
    seen = []
    for i in range(looks):
        if i:
            time.sleep(LOOK_APART_S)
        n = read_runnable(stat)
        if n is None:
            return None
        seen.append(max(0, n - 1))         # the caller itself is running
    return min(seen)


LOOK_APART_S = 0.005
"""Seconds between the looks at what runs now."""


class CpuShare:
    """The thread count for the next generation, from the machine's load since the last look.

    `threads()` before each generation. The window is the time since the last look that
    measured (at least MIN_WINDOW_S; a shorter one keeps the last answer and goes on
    growing), less what this process used in it, so generations back to back (a warm-up
    right before a reply) still see the load of now, not of the last idle moment. `fixed` > 0
    disables the measuring (always that many).
    `own` gives this process's ticks so far (tests pass their own).
    """

    def __init__(self, fixed: int = 0, cores: int | None = None, stat: Path = PROC_STAT,
                 own=own_ticks):
        self.cores = cores or usable_cores()
        self.fixed = int(fixed)
        if self.fixed < 0:
            raise ValueError(f"threads={fixed!r} must be >= 0 (0: as many as are free)")
        self._stat, self._own, self._count_niced = stat, own, is_niced()
        self._lock = threading.Lock()
        self._since: tuple[float, tuple[int, int], float] | None = None
        self.last = self.fixed or self.cores
        self.others_busy = 0.0          # cores other work kept busy in the last window

    def threads(self) -> int:
        """Threads for the generation about to start."""
        if self.fixed:
            return self.fixed
        with self._lock:
            now, busy = time.monotonic(), read_busy(self._stat, self._count_niced)
            if busy is None:
                return self.last
            if self._since is None:
                self._since = (now, busy, self._own())
                return self.last
            t0, b0, own0 = self._since
            if now - t0 < MIN_WINDOW_S:
                return self.last
            own = self._own()
            self._since = (now, busy, own)
            # others' busy core-seconds over the window, as a share of all the machine's cores
            others = max(0.0, busy[0] - b0[0] - (own - own0))
            machine_cores = os.cpu_count() or self.cores
            self.others_busy = others / max(busy[1] - b0[1], 1e-9) * machine_cores
            now_running = others_running_now(self._stat)
            if now_running is not None:     # work that has ended (the recogniser) frees its core
                self.others_busy = min(self.others_busy, now_running)
            self.last = max(1, min(self.cores, round(machine_cores - self.others_busy)))
            return self.last
