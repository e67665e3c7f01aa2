"""A test process the backstop ended, in a few lines at the end of the suite's output.

CI shows only the tail of a run's output, and a stuck process's stacks run to hundreds of
lines: a run ended by the backstop showed the last threads of its dump and neither the test's
name nor which thread held the interpreter. This names the test, then each thread that was
using a CPU when the watchdog looked (test/native_stacks.py: the thread spinning while the
others wait for the interpreter) and the main thread, with their first native frames and their
Python frames, then where each other Python thread was, identical ones counted once.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: a thread at least this busy when the watchdog looked is named as running
BUSY_PERCENT = 20
#: native frames shown of a running thread
NATIVE_FRAMES = 5
#: native frames of the interpreter itself, skipped (they say nothing of where it is)
_INTERPRETER = re.compile(r"^(_?Py|cfunction_|method_vectorcall|do_call_core|slot_tp_|"
                          r"vectorcall_|builtin_|thread_run|pythread_wrapper|start_thread|clone)")
_PY_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):")
_PY_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (\S+)')
_TEST = re.compile(r"^(\S+::\S+): past its time limit")
_PROC_THREAD = re.compile(r"^thread (\d+) '(.*)' busy (\d+)% waits in (\S*)")
_GDB_THREAD = re.compile(r"^Thread \d+ \(Thread (0x[0-9a-f]+) \(LWP (\d+)\)")
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?([^\s(]+)")


@dataclass
class PythonThread:
    """One thread of faulthandler's dump: its id and frames, innermost first."""

    ident: str
    frames: list[tuple[str, int, str]] = field(default_factory=list)

    def where(self) -> str:
        """Its innermost frame, and its innermost one of this repository if that is another."""
        if not self.frames:
            return "(no Python frames)"
        inner = _frame(self.frames[0])
        ours = next((f for f in self.frames if _is_ours(f[0])), None)
        return inner if ours in (None, self.frames[0]) else f"{inner} < {_frame(ours)}"


def _is_ours(path: str) -> bool:
    return "site-packages" not in path and "/lib/python3" not in path


def _frame(frame: tuple[str, int, str]) -> str:
    path, line, func = frame
    parts = Path(path).parts
    return f"{'/'.join(parts[-2:])}:{line} {func}"


def python_threads(text: str) -> tuple[str, list[PythonThread]]:
    """The stuck test's id and each Python thread of a backstop's stacks file."""
    test, threads = "", []
    for line in text.splitlines():
        if (m := _TEST.match(line)) and not test:
            test = m[1]
        elif m := _PY_THREAD.match(line):
            threads.append(PythonThread(m[1]))
        elif (m := _PY_FRAME.match(line)) and threads:
            threads[-1].frames.append((m[1], int(m[2]), m[3]))
    return test, threads


def proc_threads(native: str) -> list[tuple[str, str, int, str]]:
    """(tid, name, busy %, wait channel) of each thread /proc told of."""
    return [(m[1], m[2], int(m[3]), m[4]) for line in native.splitlines()
            if (m := _PROC_THREAD.match(line))]


def gdb_threads(native: str) -> dict[str, tuple[str, list[str]]]:
    """By thread id (LWP): its pthread id (faulthandler's) and native function names."""
    threads: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in native.splitlines():
        if m := _GDB_THREAD.match(line):
            current = threads.setdefault(m[2], (m[1], []))
        elif (m := _GDB_FRAME.match(line)) and current is not None:
            current[1].append(m[1])
    return threads


def digest(stacks: str, native: str = "", pid: str = "") -> list[str]:
    """The lines that tell where process `pid`, which the backstop ended, was stuck."""
    test, threads = python_threads(stacks)
    by_ident = {t.ident: t for t in threads}
    native_of = gdb_threads(native)
    lines = [f"stuck: {test or '(the test is not named)'}"]
    shown = set()
    procs = proc_threads(native)
    rows = [(f"running: thread {tid} {name!r} {busy}% busy", tid, wchan)
            for tid, name, busy, wchan in sorted(procs, key=lambda r: -r[2])
            if busy >= BUSY_PERCENT]
    if pid and pid not in {tid for _, tid, _ in rows}:
        # its top Python frame may be far from where it is: a C destructor that the cyclic
        # garbage collector ran, stuck in Fast DDS, shows the frame that allocated
        waits = {tid: wchan for tid, _, _, wchan in procs}
        rows.append(("main thread", pid, waits.get(pid, "")))
    for label, tid, wchan in rows:
        pthread, funcs = native_of.get(tid, ("", []))
        ours = [f for f in funcs if not _INTERPRETER.match(f)][:NATIVE_FRAMES]
        python = by_ident.get(f"0x{int(pthread, 16):016x}") if pthread else None
        lines.append(f"  {label}"
                     + (f", native {' < '.join(ours)}" if ours else f", in {wchan or '?'}")
                     + (f", Python {python.where()}" if python else ""))
        if python:
            shown.add(python.ident)
    others = Counter(t.where() for t in threads if t.ident not in shown)
    lines += [f"  {n} thread{'s' if n > 1 else ''} at {where}"
              for where, n in others.most_common()]
    return lines


def digests(folder: Path) -> list[str]:
    """A digest of each stacks file the backstop left in a results folder."""
    lines = []
    for stacks in sorted(folder.glob("stacks-*.txt")):
        if stacks.name.endswith("-native.txt") or not stacks.stat().st_size:
            continue
        native = stacks.with_name(f"{stacks.stem}-native.txt")
        lines += digest(stacks.read_text(errors="replace"),
                        native.read_text(errors="replace") if native.is_file() else "",
                        pid=stacks.stem.rsplit("-", 1)[-1])
    return lines
