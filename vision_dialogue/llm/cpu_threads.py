"""How many threads a local model should use now: the cores other work leaves free.

A robot's computer is never quiet: perception, ROS, speech and other programs share the cores
with the LLM. A model that starts one thread per core while another process keeps a core busy
waits for its descheduled thread at every layer. Measured here (2 cores, the 0.5B default,
40 tokens from a 500-token prompt): quiet, 2 threads 2.5 s and 1 thread 3.5 s; with one busy
process, 2 threads 5.7 s and 1 thread 3.5 s. So before each generation `CpuShare.threads()`
looks at how busy the machine was since the previous generation ended (the model itself idle)
and leaves out the cores that other work used, unless that work has ended: what still runs
right now (`procs_running`) bounds it. A reply comes right after the recogniser and the voice
of the previous reply were busy, and they are done by then (bench_voice measured replies on one
thread for that reason).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
MIN_WINDOW_S = 0.3
"""A shorter look than this tells nothing reliable; the last answer stands."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def read_busy(stat: Path = PROC_STAT) -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine so far; None where unreadable."""
    try:
        with open(stat, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 5:
        return None
    ticks = [int(x) for x in fields[1:9]]          # user nice system idle iowait irq ...
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return sum(ticks) - idle, sum(ticks)


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
    """The thread count for the next generation, from the machine's load since the last one.

    `with share.generation() as threads:` around each generation (or `threads()` before it and
    `done()` after it): the window between two generations (the model idle) is what other
    work used. `fixed` > 0 disables the measuring (always that many).
    """

    def __init__(self, fixed: int = 0, cores: int | None = None, stat: Path = PROC_STAT):
        self.cores = cores or usable_cores()
        self.fixed = int(fixed)
        if self.fixed < 0:
            raise ValueError(f"threads={fixed!r} must be >= 0 (0: as many as are free)")
        self._stat = stat
        self._lock = threading.Lock()
        self._since: tuple[float, tuple[float, float] | None] | None = None
        self.last = self.fixed or self.cores
        self.others_busy = 0.0          # cores other work kept busy in the last window

    @contextlib.contextmanager
    def generation(self):
        """The threads for one generation; the next window starts when it ends."""
        try:
            yield self.threads()
        finally:
            self.done()

    def done(self) -> None:
        """A generation ended: the next window starts now."""
        with self._lock:
            self._since = (time.monotonic(), read_busy(self._stat))

    def threads(self) -> int:
        """Threads for the generation about to start."""
        if self.fixed:
            return self.fixed
        with self._lock:
            now, busy = time.monotonic(), read_busy(self._stat)
            if self._since is None or busy is None or self._since[1] is None:
                self._since = (now, busy)
                return self.last
            t0, b0 = self._since
            wall = now - t0
            if wall < MIN_WINDOW_S:
                return self.last
            # the machine's busy core-seconds over the window, as a share of all its cores
            share = (busy[0] - b0[0]) / max(busy[1] - b0[1], 1e-9)
            machine_cores = os.cpu_count() or self.cores
            self.others_busy = share * machine_cores
            now_running = others_running_now(self._stat)
            if now_running is not None:     # work that has ended (the recogniser) frees its core
                self.others_busy = min(self.others_busy, now_running)
            self.last = max(1, min(self.cores, round(machine_cores - self.others_busy)))
            return self.last
