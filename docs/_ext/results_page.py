"""docs/results.md from benchmarks/results/*.json: every figure the documentation shows.

For each benchmark: its runs (date, commit, CPU, load, command), then each numeric figure of
the result with the value of every run and the spread, so no figure stands for more than
the runs that made it; runs of different variants (VARIANT_KEYS) get a table each. Nested
results are flattened to dotted names; lists of numbers are shown whole; long tables of
per-item rows are left in the file (its path is given).
"""
from __future__ import annotations

import json
from pathlib import Path

#: the most runs shown per benchmark (the newest)
MAX_RUNS = 6
#: the most figures shown per benchmark (the rest stay in the file)
MAX_FIGURES = 60


def flatten(value, prefix: str = "") -> dict[str, float]:
    """Numbers in a nested result, by dotted name (booleans and strings left out)."""
    out: dict[str, float] = {}
    if isinstance(value, bool):
        return out
    if isinstance(value, (int, float)):
        out[prefix or "value"] = value
    elif isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and len(value) <= 8 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        for i, v in enumerate(value):
            out[f"{prefix}[{i}]"] = v
    return out


def _num(v: float) -> str:
    if isinstance(v, int) or float(v).is_integer():
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def table(heads: tuple, rows: list) -> list[str]:
    """A Markdown table's lines (and the blank line after it); every generated page's tables."""
    return ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads),
            *("| " + " | ".join(row) + " |" for row in rows), ""]


def _cpu(run: dict) -> str:
    c = run.get("cpu", {})
    flags = ", ".join(f for f in c.get("flags", []) if f.startswith(("avx512", "amx", "avx2")))
    family = f"family {c['family']}, " if "family" in c else ""
    return f"{c.get('model', '?')} ({family}{c.get('cores', '?')} cores; {flags or 'no AVX2'})"


def _load(run: dict) -> str:
    ld = run.get("load", {})
    avg = ld.get("loadavg")
    busy = ld.get("busy") or []
    text = f"load {avg[0]:.2f}" if avg else "load ?"
    return text + (f"; busy: {', '.join(busy)}" if busy else "")


#: result fields that name what a run measured (a battery, a setup, a model): runs that differ
#: in them are different measurements, each with its own table and spread
VARIANT_KEYS = ("label", "setup", "llm", "model", "battery", "busy", "busy_processes")


def variant(run: dict) -> tuple[tuple[str, str], ...]:
    """What a run measured, as (field, value) pairs of VARIANT_KEYS present in its result."""
    result = run.get("result", {})
    return tuple((k, str(result[k])) for k in VARIANT_KEYS
                 if isinstance(result.get(k), (str, int)) and not isinstance(result[k], bool))


def figures_table(runs: list[dict], numbers: list[int]) -> list[str]:
    """Every numeric figure of `runs`, one column per run (headed by `numbers`), the spread."""
    flats = [flatten(r.get("result", {})) for r in runs]
    names = sorted({k for f in flats for k in f})
    if not names:
        return ["No numeric figure in these runs.", ""]
    shown = names[:MAX_FIGURES]
    rows = []
    for k in shown:
        vals = [f.get(k) for f in flats]
        have = [v for v in vals if v is not None]
        spread = f"{_num(min(have))}–{_num(max(have))}" if len(have) > 1 else "one run"
        rows.append((f"`{k}`", *("" if v is None else _num(v) for v in vals), spread))
    lines = table(("figure", *(f"run {i}" for i in numbers), "spread"), rows)
    if len(names) > len(shown):
        lines += [f"{len(names) - len(shown)} more figures are in the file.", ""]
    return lines


def benchmark_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    runs = data.get("runs", [])[-MAX_RUNS:]
    name = data.get("benchmark", path.stem)
    lines = [f"## {name}", "", f"`benchmarks/results/{path.name}`: {len(data.get('runs', []))} "
             f"run(s){'; the newest ' + str(len(runs)) + ' here' if len(runs) < len(data.get('runs', [])) else ''}.", ""]
    if not runs:
        return lines + ["No run recorded yet.", ""]
    lines += table(("run", "date", "commit", "CPU", "load", "command"), [
        (str(i), r.get("date", "?")[:16],
         f"`{r.get('commit', '?')}`" + (" (changes)" if r.get("dirty") else ""),
         _cpu(r), _load(r), f"`{r.get('command', '?')}`") for i, r in enumerate(runs, 1)])
    groups: dict[tuple, list[tuple[int, dict]]] = {}
    for i, r in enumerate(runs, 1):
        groups.setdefault(variant(r), []).append((i, r))
    if len(groups) == 1:
        return lines + figures_table(runs, list(range(1, len(runs) + 1)))
    for key, numbered in groups.items():
        # runs of one variant are numbered as in the runs table above
        title = ", ".join(f"{k} {v}" for k, v in key) or "other runs"
        lines += [f"### {title}", ""]
        lines += figures_table([r for _, r in numbered], [i for i, _ in numbered])
    return lines


def page(folder: Path) -> str:
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    lines = ["# Results", "",
             "Generated at every documentation build from `benchmarks/results/*.json`, the "
             "only place figures come from ([how they are made](benchmarks.md)). Each "
             "benchmark shows its newest runs with the machine and load of each, then every "
             "figure per run and its spread; runs that measured different things (a battery, a "
             "setup, a model, a load) get a table each. A benchmark with one run has no "
             "spread yet: "
             "treat its figures as one sample.", ""]
    if not files:
        lines.append("No benchmark has recorded a run yet.")
    for f in files:
        lines += benchmark_section(f)
    return "\n".join(lines) + "\n"
