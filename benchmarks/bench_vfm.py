"""Per-tool latency of the VFM tools on CPU with tiny random models (built offline).

And the cost of the first call (lazy loading + inference) against later calls.

    source env.sh && python benchmarks/bench_vfm.py [--repeats 3] [--steps 2] [--size 64]

Prints a table and one JSON line. The baseline is each tool's own warm (later-call) median,
measured in the same run; `first_over_warm` is first-call time / warm median.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "test")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--tools", default="", help="comma separated op ids (default: all)")
    a = ap.parse_args(argv)

    import cv2
    import skimage.data
    import torch

    import tiny_models
    from vision_dialogue.vfm import registry
    from vision_dialogue.vfm.models import diffusion
    from vision_dialogue.vfm.models.common import RunContext
    from vision_dialogue.vfm.toolbox import Toolbox

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    img = cv2.resize(skimage.data.astronaut(), (a.size, a.size), interpolation=cv2.INTER_AREA)
    text = {"vqa": "what is this?", "detect": "man", "replace": "man, robot", "remove": "man",
            "outpaint": "2x"}
    ops = [o for o in a.tools.split(",") if o] or [t.op for t in registry.TOOLS]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ckpts = tiny_models.build_all(Path(tmp))
        build_s = time.perf_counter() - t0
        for op in ops:
            spec = registry.get(op)
            diffusion._BASES.clear()  # every tool pays its own SD load in this benchmark
            box = Toolbox({op: "cpu"}, ckpts)
            ctx = RunContext(steps=a.steps, image_size=a.size, seed=0)
            inp = None if spec.action_type == registry.TEXT_TO_IMAGE else img
            t = time.perf_counter()
            box.run(op, inp, text.get(op, "a red robot"), ctx)
            first = time.perf_counter() - t
            warm = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                box.run(op, inp, text.get(op, "a red robot"), ctx)
                warm.append(time.perf_counter() - t)
            med = statistics.median(warm)
            rows.append({"tool": op, "first_ms": first * 1e3, "warm_ms": med * 1e3,
                         "first_over_warm": first / med if med > 0 else float("inf")})
    print(f"tiny models built in {build_s:.1f} s; {a.steps} diffusion steps; {a.size}x{a.size}; "
          f"torch threads {torch.get_num_threads()}")
    print(f"{'tool':<16}{'first call ms':>15}{'warm ms':>12}{'first/warm':>12}")
    for r in rows:
        print(f"{r['tool']:<16}{r['first_ms']:>15.1f}{r['warm_ms']:>12.1f}"
              f"{r['first_over_warm']:>12.1f}")
    model_rows = [r for r in rows if registry.get(r["tool"]).checkpoints]
    summary = {
        "benchmark": "vfm_tools_cpu_tiny",
        "steps": a.steps, "size": a.size, "repeats": a.repeats,
        "baseline": "same tool's warm median (later calls)",
        "tools": {r["tool"]: {k: round(v, 2) for k, v in r.items() if k != "tool"} for r in rows},
        "median_first_over_warm_model_tools": round(statistics.median(
            [r["first_over_warm"] for r in model_rows]), 2) if model_rows else None,
    }
    print(json.dumps(summary))
    record("bench_vfm", summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
