#!/usr/bin/env python3
"""Benchmark: what the expressive face costs the demo's replies (issue 31).

Runs README command 1's demo (`bench_demo.py`: camera on the demo video, the scripted
dialogue, the manager on the embedded default, the speech node) `--pairs` times with the face
and without it (`speech.expressions`, `gaze_aversion` and `idle_movements` false: the demo
as it was before), alternating, each run in a process of its own, and compares the time from
each utterance to the first streamed sentence, pooled per arm. Goal: p50 with the face within
5 % of p50 without it. The demo's turns are the same lines in every run, so each turn is also
compared with itself: the median over turns of (with / without), run pair by run pair, which
the demo's own variation (a summary in flight, a frame just arrived) disturbs less. Prints a
table and one JSON line.

    source env.sh && python benchmarks/bench_face_cost.py [--pairs 3] [--turns 0]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from results import record  # noqa: E402 - benchmarks/ is on sys.path

HERE = Path(__file__).resolve().parent
FACE_OFF = ["-p", "speech.expressions:=false", "-p", "speech.gaze_aversion:=false",
            "-p", "speech.idle_movements:=false"]


def one_run(face: bool, turns: int) -> dict:
    cmd = [sys.executable, str(HERE / "bench_demo.py")] + ([] if face else FACE_OFF)
    if turns:
        cmd += ["--turns", str(turns)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in reversed(out.splitlines()) if ln.startswith('{"benchmark"'))
    return json.loads(line)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--turns", type=int, default=0, help="stop each demo after N replies")
    a = ap.parse_args(argv)
    firsts: dict[str, list[float]] = {"face": [], "no face": []}
    fallbacks = {"face": 0, "no face": 0}
    paired: list[float] = []
    for i in range(a.pairs):
        order = ("face", "no face") if i % 2 == 0 else ("no face", "face")
        runs = {}
        for arm in order:
            r = runs[arm] = one_run(arm == "face", a.turns)
            firsts[arm] += [t["first_sentence_s"] for t in r["per_turn"]]
            fallbacks[arm] += r["fallbacks"]
            print(f"run {i + 1}/{a.pairs} {arm}: first sentence p50 "
                  f"{r['first_sentence_p50_s']} s over {r['turns']} turns", flush=True)
        paired += [f["first_sentence_s"] / n["first_sentence_s"] for f, n in zip(
            runs["face"]["per_turn"], runs["no face"]["per_turn"]) if n["first_sentence_s"]]
    p50 = {arm: round(statistics.median(xs), 3) for arm, xs in firsts.items() if xs}
    ratio = round(p50["face"] / p50["no face"], 3)
    print("\n| arm | turns | first sentence p50 (s) | mean (s) | fallbacks |")
    print("|---|---|---|---|---|")
    for arm, xs in firsts.items():
        print(f"| {arm} | {len(xs)} | {p50[arm]} | {statistics.mean(xs):.3f} | "
              f"{fallbacks[arm]} |")
    turn_ratio = round(statistics.median(paired), 3)
    print(f"\nwith the face / without: {ratio} pooled, {turn_ratio} turn by turn (median) "
          "(goal: within 5 %)")
    line = {"benchmark": "face_cost", "pairs": a.pairs, "p50_s": p50,
            "ratio": ratio, "turn_by_turn_ratio": turn_ratio,
            "within_5_percent": abs(ratio - 1.0) <= 0.05,
            "turns": {k: len(v) for k, v in firsts.items()},
            "fallbacks": fallbacks}
    print(json.dumps(line))
    record("bench_face_cost", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
