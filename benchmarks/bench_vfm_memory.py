"""The VFM memory budget against Visual ChatGPT's way (load every model at start), on CPU.

One session of goals over many tools (captions, detection, Segment Anything, inpainting,
outpainting, ControlNet...) runs in a fresh process per setup, setups interleaved per repeat:

* `load_all`: Visual ChatGPT's way, every model loaded before the first goal;
* `lazy`: ours without a budget, each model on first use, none unloaded;
* `budget`: ours with `memory_budget_cpu_mib` at a third of what every model together holds.

Per setup: time before the first goal can run, model memory high water (measured from the
loaded tensors), peak RSS of the process, goal latency p50/max, time in goals that loaded a
model, time spent unloading, unloads, and loads that had to go past the budget. On tiny
random models (built offline), so sizes are small and the process RSS is mostly Python and
torch; the model memory column is the one a budget bounds.

    source env.sh && python benchmarks/bench_vfm_memory.py [--repeats 2]

Prints a table and one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "test")]

SESSION = ["caption", "detect", "segment", "segmentobject", "remove", "caption", "outpaint",
           "text2image", "canny2image", "depth", "segment", "vqa", "pix2pix", "seg2image",
           "caption", "replace", "segment", "outpaint"]
TEXT = {"vqa": "what is this?", "detect": "man", "replace": "man, robot", "remove": "man",
        "segmentobject": "man", "outpaint": "96x64"}
SETUPS = ("load_all", "lazy", "budget")


def child(setup: str, ckpts: dict, budget_mib: float, steps: int) -> dict:
    """Run the session in this process; what it measured."""
    import cv2
    import skimage.data
    import torch

    from vision_dialogue.vfm import memory
    from vision_dialogue.vfm.models.common import RunContext
    from vision_dialogue.vfm.toolbox import Toolbox

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    img = cv2.resize(skimage.data.astronaut(), (64, 64), interpolation=cv2.INTER_AREA)
    events: list[str] = []
    budget = memory.Budget.from_mib(cpu_mib=budget_mib if setup == "budget" else 0)
    box = Toolbox({op: "cpu" for op in dict.fromkeys(SESSION)}, ckpts, budget=budget,
                  log=events.append)
    unload_s = []
    unload = box._unload

    def timed_unload(*args):
        t = time.perf_counter()
        unload(*args)
        unload_s.append(time.perf_counter() - t)
    box._unload = timed_unload
    high = 0
    t0 = time.perf_counter()
    if setup == "load_all":
        for op in box.devices:
            box.preload(op)
            high = max(high, sum(box.memory_in_use().values()))
    start_s = time.perf_counter() - t0
    lat, load_s = [], 0.0
    for op in SESSION:
        loaded = box.is_loaded(op)
        ctx = RunContext(steps=steps, image_size=64, seed=0)
        t = time.perf_counter()
        box.run(op, None if op == "text2image" else img, TEXT.get(op, "a red robot"), ctx)
        dt = time.perf_counter() - t
        lat.append(dt)
        if not loaded:
            load_s += dt
        high = max(high, sum(box.memory_in_use().values()))
    return {"setup": setup, "start_s": start_s, "model_mib": high / memory.MIB,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "p50_s": statistics.median(lat), "max_s": max(lat),
            "first_use_s": load_s, "unload_s": sum(unload_s),
            "total_s": time.perf_counter() - t0,
            "unloads": sum(e.startswith("unloaded") for e in events),
            "over_budget": sum("going past the budget" in e for e in events)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--child", choices=SETUPS, help=argparse.SUPPRESS)
    ap.add_argument("--ckpts", help=argparse.SUPPRESS)
    ap.add_argument("--budget-mib", type=float, default=0.0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, json.loads(Path(a.ckpts).read_text()), a.budget_mib,
                               a.steps)))
        return 0

    import tiny_models
    runs: dict[str, list[dict]] = {s: [] for s in SETUPS}
    with tempfile.TemporaryDirectory() as tmp:
        ckpts = tiny_models.build_all(Path(tmp) / "tiny")
        ck_file = Path(tmp) / "ckpts.json"
        ck_file.write_text(json.dumps(ckpts))

        def run(setup: str, budget_mib: float = 0.0) -> dict:
            out = subprocess.run([sys.executable, __file__, "--child", setup, "--ckpts",
                                  str(ck_file), "--budget-mib", str(budget_mib), "--steps",
                                  str(a.steps)], capture_output=True, text=True, check=True)
            return json.loads(out.stdout.strip().splitlines()[-1])

        everything = run("load_all")["model_mib"]        # what every model together holds
        budget_mib = round(everything / 3, 2)
        for r in range(a.repeats):
            order = SETUPS if r % 2 == 0 else tuple(reversed(SETUPS))
            for setup in order:
                runs[setup].append(run(setup, budget_mib))

    def med(setup, key):
        return statistics.median(x[key] for x in runs[setup])
    cols = ("start_s", "model_mib", "rss_mib", "p50_s", "max_s", "first_use_s", "unload_s",
            "total_s", "unloads", "over_budget")
    print(f"{len(SESSION)} goals over {len(set(SESSION))} tools, {a.repeats} interleaved "
          f"repeats (medians); budget {budget_mib} MiB = a third of {everything:.2f} MiB\n")
    print("| setup | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for s in SETUPS:
        print(f"| {s} | " + " | ".join(f"{med(s, c):.2f}" for c in cols) + " |")
    line = {"bench": "vfm_memory", "budget_mib": budget_mib,
            "all_models_mib": everything,
            **{s: {c: med(s, c) for c in cols} for s in SETUPS}}
    print(json.dumps(line))
    record("bench_vfm_memory", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
