#!/usr/bin/env python3
"""Benchmark: a local model's reply on 2 threads against 1, and what `CpuShare` picks.

For each load beside the model (none; a busy process niced to 10, like the people node's
prints; a busy process of normal priority, like the recogniser) it times the first tokens of
a reply from a warm 500-token prompt on 2 threads and on 1 (interleaved, `--reps` times), and
asks `CpuShare` (llm/cpu_threads.py, on the real /proc/stat) how many threads it would use,
after a generation and a second of that load. The pick is right when it is the faster one.
Prints a table and one JSON line.

    source env.sh && python benchmarks/bench_cpu_threads.py [--variant 1.5b] [--reps 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from results import record  # noqa: E402 - benchmarks/ is on sys.path

from vision_dialogue.llm.cpu_threads import CpuShare
from vision_dialogue.llm.default_model import ensure_default_gguf

LOADS = {"quiet": None, "busy, niced 10": 10, "busy": 0}
BURNER = "import os, sys\nos.nice(int(sys.argv[1]))\nwhile True:\n    pass\n"
PROMPT = ("<|im_start|>system\nYou are a friendly robot. " + "You see a person in orange, "
          "smiling, near a table with a cup. " * 30 + "<|im_end|>\n<|im_start|>user\n"
          "Tell me what you see.<|im_end|>\n<|im_start|>assistant\n")
TOKENS = 12


def timed_reply(llm, tokens: list, threads: int) -> float:
    """Seconds for TOKENS tokens of a reply whose prompt, less its last line, is cached."""
    llm.reset()
    llm.eval(tokens[:-20])
    llm._ctx.set_n_threads(threads, threads)
    t = time.monotonic()
    for n, _ in enumerate(llm.create_completion(tokens, max_tokens=TOKENS, temperature=0,
                                                stream=True), 1):
        if n == TOKENS:
            break
    return time.monotonic() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", default="1.5b", help="the embedded model (the demo's: 1.5b)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    import llama_cpp
    llm = llama_cpp.Llama(model_path=ensure_default_gguf(variant=a.variant), n_ctx=2048,
                          n_threads=2, n_threads_batch=2, verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), special=True)
    times: dict[str, dict[int, list]] = {load: {2: [], 1: []} for load in LOADS}
    picks: dict[str, list] = {load: [] for load in LOADS}
    for rep in range(a.reps):
        for load, nice in LOADS.items():
            burner = None if nice is None else subprocess.Popen(
                [sys.executable, "-c", BURNER, str(nice)])
            try:
                share = CpuShare(cores=2)
                share.threads()
                timed_reply(llm, tokens, 2)             # a generation in the window, as live
                time.sleep(1.0)
                picks[load].append(share.threads())
                for threads in ((2, 1) if rep % 2 == 0 else (1, 2)):
                    times[load][threads].append(timed_reply(llm, tokens, threads))
            finally:
                if burner:
                    burner.kill()
                    burner.wait()
    out = {"benchmark": "cpu_threads", "variant": a.variant, "reps": a.reps,
           "tokens": TOKENS, "loads": {}}
    print("| load | 2 threads p50 (s) | 1 thread p50 (s) | CpuShare picks | right |")
    print("|---|---|---|---|---|")
    for load in LOADS:
        p50 = {t: round(statistics.median(xs), 3) for t, xs in times[load].items()}
        faster = min(p50, key=p50.get)
        right = sum(p == faster for p in picks[load])
        out["loads"][load] = {"p50_s": {f"{t} threads": v for t, v in p50.items()},
                              "spread_s": {f"{t} threads": [round(min(xs), 3),
                                                            round(max(xs), 3)]
                                           for t, xs in times[load].items()},
                              "picks": picks[load], "right_picks": right}
        print(f"| {load} | {p50[2]} | {p50[1]} | {picks[load]} | {right}/{len(picks[load])} |")
    print(json.dumps(out))
    record("bench_cpu_threads", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
