"""A real-time test's processes first on the cores: a higher CPU priority while it runs.

The suite's real-time tests (a conversation on a real model, a video perceived as it plays)
share two cores with the other workers' tests. Beside them a conversation took three times as
long as alone, and its perception worked through every extra second. Holding the machine
alone for it (tried: the other workers waited) left the cores half idle. A priority gives the
real-time test the cores when it wants them and the other tests the rest.

Linux keeps a nice value per thread, and new threads and processes inherit their creator's:
raising the test's process, its threads and its children (a model server a fixture started)
covers what it starts later too. Raising a priority needs root (or RLIMIT_NICE); elsewhere
`first_on_the_cores` changes nothing and says so.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

#: the nice value of a real-time test's processes while it runs (0 is everyone's default; at
#: -10 the scheduler weighs a thread about nine times one at 0)
REAL_TIME_NICE = -10

PROC = Path("/proc")


def _stat(pid: int | str, tid: int | str | None = None) -> list[str]:
    """The fields of a task's stat after its name: [state, ppid, ...]."""
    path = PROC / str(pid) / ("stat" if tid is None else f"task/{tid}/stat")
    return path.read_text().rsplit(")", 1)[1].split()


def nice_of(tid: int) -> int:
    """The nice value of thread `tid` (any process's)."""
    return int(_stat(tid)[16])


def process_tree(root: int) -> list[int]:
    """`root` and its descendant processes, alive now."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat(entry.name)[1]), []).append(int(entry.name))
            except (OSError, IndexError):       # gone meanwhile
                continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def threads_of(pids: list[int]) -> list[int]:
    """Every thread of the processes `pids`."""
    tids = []
    for pid in pids:
        try:
            tids += [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
        except OSError:
            continue
    return tids


def set_nice(tids: list[int], nice: int) -> bool:
    """Give each thread `tids` the nice value `nice`; False where this user may not."""
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except ProcessLookupError:      # ended meanwhile
            continue
        except PermissionError:
            return False
    return True


@contextlib.contextmanager
def first_on_the_cores(pid: int | None = None, nice: int = REAL_TIME_NICE):
    """While inside, process `pid` (default: this one), its threads and children run at `nice`.

    Yields whether the priority was raised. On the way out every thread of the tree, those
    started inside too, returns to the nice value the process had before.
    """
    pid = pid or os.getpid()
    before = nice_of(pid)
    raised = set_nice(threads_of(process_tree(pid)), nice)
    try:
        yield raised
    finally:
        if raised:
            set_nice(threads_of(process_tree(pid)), before)
