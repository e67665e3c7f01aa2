"""Where every benchmark's figures go: `benchmarks/results/<name>.json`, one record per run.

A figure is only as good as the run that made it, so each record says what made it: the date,
the commit (and whether the tree had uncommitted changes), the command, the CPU model and the
instruction-set flags that matter to the kernels (AVX2, AVX-512, AMX...), the cores, the load
(the 1-minute load average when it started, and the busy processes at its end that are not
its own: a benchmark's own threads are not the machine's load) and the result the
benchmark printed as its JSON line. The documentation's results page (docs/results.md) is
generated from these files only; a figure typed into a page by hand fails the docs test.

    from results import record
    record("bench_manager", out)        # at the end of main(), beside print(json.dumps(out))

`VD_BENCH_RESULTS=0` keeps a run out of the files (a trial run); `VD_BENCH_RESULTS=DIR` writes
elsewhere.
"""
from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
#: CPU flags that decide how fast the numeric kernels run (llama.cpp, onnxruntime, numpy)
KERNEL_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "sse4_2")
#: /proc/cpuinfo keys that tell two CPUs with one marketing name apart ("AMD EPYC" is several
#: generations: family 25 is Zen 3/4, 26 is Zen 5), recorded under the names on the right
CPU_IDENTITY = {"cpu family": "family", "model": "model_number", "stepping": "stepping"}


def cpu() -> dict:
    """The CPU model, its kernel-relevant flags and the cores this process may use."""
    model, flags, ident = platform.processor() or "unknown", set(), {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name" and model in ("unknown", "", "x86_64"):
                model = value
            elif key == "flags":
                flags = set(value.split())
            elif key in CPU_IDENTITY and key not in ident:
                ident[key] = value
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    return {"model": model, "flags": [f for f in KERNEL_FLAGS if f in flags], "cores": cores,
            "machine": platform.machine(),
            **{name: ident[key] for key, name in CPU_IDENTITY.items() if key in ident}}


def _own_tree() -> set[int]:
    """This process and its descendants (the benchmark's own work is not the machine's load)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    tree, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(children.get(pid, []))
    return tree


def load() -> dict:
    """The machine's load: load averages, and other busy processes (not this one's tree)."""
    out: dict = {}
    try:
        out["loadavg"] = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        pass
    try:
        ps = subprocess.run(["ps", "-eo", "pid=,pcpu=,comm=", "--sort=-pcpu"],
                            capture_output=True, text=True, timeout=5).stdout.splitlines()
        own = _own_tree()
        busy = []
        for line in ps[:12]:
            pid, pcpu, comm = line.split(None, 2)
            if float(pcpu) >= 20.0 and int(pid) not in own and comm.strip() != "ps":
                busy.append(f"{comm.strip()} {pcpu}%")
        out["busy"] = busy
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return out


#: the load when the benchmark started (it imports this module first): its own work not in it
LOAD_BEFORE = load()


def commit() -> dict:
    """The commit of the tree the benchmark ran from, and whether it had changes."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    try:
        return {"commit": git("rev-parse", "--short=10", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                                  ":!benchmarks/results"))}     # the records are not code
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}


#: the code a run ran, read when it started: a commit made while a long run goes on is not it
COMMIT_AT_START = commit()


def run_record(result: dict, argv: list[str] | None = None) -> dict:
    argv = list(sys.argv if argv is None else argv)
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **COMMIT_AT_START,
            "command": "python " + " ".join(shlex.quote(a) for a in
                                            [os.path.relpath(argv[0], REPO), *argv[1:]]),
            "cpu": cpu(), "load": {"loadavg": LOAD_BEFORE.get("loadavg"),
                                   "busy": load().get("busy", [])}, "result": result}


def record(name: str, result: dict, argv: list[str] | None = None) -> Path | None:
    """Append this run's record to benchmarks/results/<name>.json; the file's path."""
    where = os.environ.get("VD_BENCH_RESULTS", "")
    if where == "0":
        return None
    folder = Path(where) if where else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    data = json.loads(path.read_text()) if path.is_file() else {"benchmark": name, "runs": []}
    data["runs"].append(run_record(result, argv))
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"[results] {path.relative_to(REPO) if path.is_relative_to(REPO) else path}: "
          f"run {len(data['runs'])}", file=sys.stderr)
    return path
