#!/usr/bin/env python3
"""Benchmark of the conversation manager core against a naive baseline, same run, fake LLM.

  source env.sh && python benchmarks/bench_manager.py [--turns 200] [--quick]

Measures, with an in-process fake LLM of fixed latency (no network):
 1. manager overhead per turn (p50/p95): turn wall time minus the time spent inside the LLM,
    with 4 frames of 640x480 in the prompt (goal: <= 2 ms p50);
 2. extra wait of a turn that arrives while a frame summary is running: turn wall time minus
    its own LLM time (goal: <= 5 ms);
 3. prompt size (text chars + image data-URL bytes) after 1 and 30 simulated minutes with a
    frame every 5 s and a turn every 20 s (goal: growth <= 1.2x).
Baseline ("naive"): the same summarisation rule, but one lock around both LLM calls
(summaries run inline in the frame path), no dialogue bound, every frame re-encoded each turn.
Prints a table, then one JSON line.
"""
from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))  # the fake LLM's request classifier

from skimage import data  # noqa: E402

from fake_chat_backend import kind_of  # noqa: E402
from vision_dialogue.core.conversation import Conversation, ConversationConfig  # noqa: E402
from vision_dialogue.common.images import ImagePolicy, downscale  # noqa: E402
from vision_dialogue.core.persona import load_persona  # noqa: E402
from vision_dialogue.core.prompt import prompt_size  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPLY = "That is a lovely jacket, is it new? I like the colour very much!"
#: words for replies that differ turn to turn: the same line every turn would be a repeat,
#: asked for again (core/reply_filter.py), and count a second LLM call as overhead
_WORDS = ("apple river garden window music yellow morning quiet table paper bridge summer "
          "candle winter forest rabbit silver button pocket ladder violin marble cotton "
          "harbour meadow thunder pepper saddle lantern velvet").split()


def reply_text(n: int) -> str:
    """A reply of REPLY's length whose words are new at turn `n`."""
    words = random.Random(n).sample(_WORDS, 12)
    return f"{' '.join(words[:6]).capitalize()} and {' '.join(words[6:])}!"


SUMMARY = "The person smiled and waved at me from the door."


class TimedLLM:
    """Fake LLM: fixed latency per kind; records time spent inside calls per thread."""

    supports_images = True

    def __init__(self, reply_s=0.02, summary_s=0.02):
        self.latency = {"reply": reply_s, "summary": summary_s, "fold": summary_s}
        self.local = threading.local()
        self.summary_started = threading.Event()
        self.folds = self.replies = 0

    def spent(self) -> float:
        return getattr(self.local, "spent", 0.0)

    def reset(self):
        self.local.spent = 0.0

    def complete(self, messages, *, model=None, max_tokens=None, temperature=None):
        t0 = time.perf_counter()
        kind = kind_of(messages)
        if kind == "summary":
            self.summary_started.set()
        lat = self.latency[kind]
        if lat:
            time.sleep(lat)
        if kind == "fold":
            self.folds += 1
            out = ("Earlier the person said hello, told the robot about their day and showed "
                   "a red cup; the robot liked their jacket and asked about their plans.")
        else:
            out = SUMMARY if kind == "summary" else reply_text(self.replies)
            self.replies += kind == "reply"
        self.local.spent = self.spent() + time.perf_counter() - t0
        return out

    def stream(self, messages, **kw):
        yield self.complete(messages, **kw)


class NaiveManager:
    """Baseline.

    One lock around everything, inline summaries, unbounded dialogue, every frame re-encoded on
    every turn.
    """

    def __init__(self, llm, persona, n=4, m=3, policy=ImagePolicy()):
        self.llm, self.persona, self.n, self.m, self.pol = llm, persona, n, m, policy
        self.items: list = []       # ("frame", bgr) | ("summary", text) | (role, text)
        self.lock = threading.Lock()

    def _encode(self, bgr, side):
        ok, enc = cv2.imencode(".jpg", downscale(bgr, side),
                               [cv2.IMWRITE_JPEG_QUALITY, self.pol.jpeg_quality])
        return "data:image/jpeg;base64," + base64.b64encode(enc.tobytes()).decode()

    def add_frame(self, bgr):
        with self.lock:
            self.items.append(("frame", bgr))
            raw = [i for i, it in enumerate(self.items) if it[0] == "frame"]
            if len(raw) >= self.n:
                run = []
                for i in range(raw[0], len(self.items)):
                    if self.items[i][0] != "frame" or len(run) >= self.m:
                        break
                    run.append(i)
                parts = [{"type": "image_url", "image_url": {
                    "url": self._encode(self.items[i][1], self.pol.older_max_side)}}
                    for i in run]
                parts.append({"type": "text", "text": self.persona.summary_instruction})
                text = self.llm.complete([{"role": "system", "content": self.persona.system},
                                          {"role": "user", "content": parts}])
                self.items[run[0]:run[-1] + 1] = [("summary", text)]

    def messages(self):
        msgs = [{"role": "system", "content": self.persona.system}]
        last = max((i for i, it in enumerate(self.items) if it[0] == "frame"), default=-1)
        for i, (kind, val) in enumerate(self.items):
            if kind == "frame":
                side = self.pol.newest_max_side if i == last else self.pol.older_max_side
                msgs.append({"role": "user", "content": [{"type": "image_url", "image_url": {
                    "url": self._encode(val, side), "detail": self.pol.detail}}]})
            elif kind == "summary":
                msgs.append({"role": "user", "content": f"[Earlier you saw: {val}]"})
            else:
                msgs.append({"role": "assistant" if kind == "robot" else "user",
                             "content": val})
        return msgs

    def turn(self, text):
        with self.lock:
            self.items.append(("user", text))
            reply = self.llm.complete(self.messages())
            self.items.append(("robot", reply))
            return reply


def photos():
    out = []
    for f in (data.astronaut, data.coffee, data.chelsea):
        out.append(cv2.resize(np.ascontiguousarray(f()[:, :, ::-1]), (640, 480)))
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def ours(llm, persona, **cfg):
    cfg.setdefault("stream", False)
    return Conversation(llm, persona, ConversationConfig(**cfg))


def bench_overhead(persona, imgs, turns):
    """(1) per-turn overhead with 4 raw 640x480 frames in the prompt (n=5 keeps them raw)."""
    res = {}
    for name in ("ours", "naive"):
        llm = TimedLLM(reply_s=0.005, summary_s=0.0)
        mgr = ours(llm, persona, n=5, m=3) if name == "ours" else NaiveManager(llm, persona, 5, 3)
        for i in range(4):
            mgr.add_frame(imgs[i % 3])
        over = []
        for t in range(turns):
            llm.reset()
            t0 = time.perf_counter()
            mgr.turn(f"Tell me something about turn {t}.")
            over.append((time.perf_counter() - t0 - llm.spent()) * 1000)
            if name == "ours":
                mgr.wait_idle(5)            # folds run between turns (the user is speaking)
        if name == "ours":
            mgr.close()
        res[name] = {"p50_ms": pct(over, 50), "p95_ms": pct(over, 95)}
    return res


def bench_wait_during_summary(persona, imgs, rounds):
    """(2) a turn arrives while a summary (200 ms) is in flight: its extra wait."""
    res = {}
    for name in ("ours", "naive"):
        llm = TimedLLM(reply_s=0.005, summary_s=0.2)
        mgr = ours(llm, persona, n=4, m=3) if name == "ours" else NaiveManager(llm, persona, 4, 3)
        waits = []
        for r in range(rounds):
            llm.summary_started.clear()
            cam = threading.Thread(target=lambda: [mgr.add_frame(imgs[k % 3]) for k in range(4)])
            cam.start()
            assert llm.summary_started.wait(5)
            llm.reset()
            t0 = time.perf_counter()
            mgr.turn(f"Question {r}?")
            waits.append((time.perf_counter() - t0 - llm.spent()) * 1000)
            cam.join()
            if name == "ours":
                mgr.wait_idle(5)
        if name == "ours":
            mgr.close()
        res[name] = {"p50_ms": pct(waits, 50), "max_ms": max(waits)}
    return res


def bench_prompt_growth(persona, imgs, minutes=30):
    """(3) prompt size after 1 and `minutes` simulated minutes (frame / 5 s, turn / 20 s)."""
    res = {}
    for name in ("ours", "naive"):
        llm = TimedLLM(reply_s=0.0, summary_s=0.0)
        mgr = ours(llm, persona, n=4, m=3) if name == "ours" else NaiveManager(llm, persona, 4, 3)
        sizes = {}
        for sec in range(5, minutes * 60 + 1, 5):
            mgr.add_frame(imgs[(sec // 5) % 3])
            if sec % 20 == 0:
                mgr.turn(f"At second {sec} I want to tell you a bit about my day, robot.")
            if name == "ours":
                mgr.wait_idle(5)
            if sec in (60, minutes * 60):
                msgs = mgr.prompt.reply_messages() if name == "ours" else mgr.messages()
                chars, img_bytes = prompt_size(msgs)
                sizes[sec // 60] = chars + img_bytes
                sizes[f"chars{sec // 60}"] = chars
        if name == "ours":
            mgr.close()
        res[name] = {"min1": sizes[1], f"min{minutes}": sizes[minutes],
                     "growth": sizes[minutes] / sizes[1],
                     "chars1": sizes["chars1"], f"chars{minutes}": sizes[f"chars{minutes}"]}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="fewer turns/rounds (smoke test)")
    a = ap.parse_args(argv)
    if a.quick:
        a.turns, a.rounds = 30, 3
    persona = load_persona()
    imgs = photos()
    o = bench_overhead(persona, imgs, a.turns)
    w = bench_wait_during_summary(persona, imgs, a.rounds)
    g = bench_prompt_growth(persona, imgs, a.minutes)
    M = a.minutes
    rows = [
        ("overhead/turn p50 (ms)", o["ours"]["p50_ms"], o["naive"]["p50_ms"], "<= 2"),
        ("overhead/turn p95 (ms)", o["ours"]["p95_ms"], o["naive"]["p95_ms"], ""),
        ("wait during summary p50 (ms)", w["ours"]["p50_ms"], w["naive"]["p50_ms"], "<= 5"),
        ("wait during summary max (ms)", w["ours"]["max_ms"], w["naive"]["max_ms"], ""),
        ("prompt size 1 min (chars+bytes)", g["ours"]["min1"], g["naive"]["min1"], ""),
        (f"prompt size {M} min (chars+bytes)", g["ours"][f"min{M}"], g["naive"][f"min{M}"], ""),
        (f"prompt growth {M}/1 min (x)", g["ours"]["growth"], g["naive"]["growth"], "<= 1.2"),
        ("  of which text chars, 1 min", g["ours"]["chars1"], g["naive"]["chars1"], ""),
        (f"  of which text chars, {M} min", g["ours"][f"chars{M}"], g["naive"][f"chars{M}"], ""),
    ]
    print(f"{'metric':36} {'ours':>12} {'naive':>12} {'naive/ours':>11} {'goal':>7}")
    for name, x, y, goal in rows:
        ratio = y / x if x else float("inf")
        print(f"{name:36} {x:12.3f} {y:12.3f} {ratio:11.1f} {goal:>7}")
    out = {
        "benchmark": "manager",
        "turns": a.turns, "rounds": a.rounds, "minutes": M,
        "overhead_p50_ms": round(o["ours"]["p50_ms"], 3),
        "overhead_p95_ms": round(o["ours"]["p95_ms"], 3),
        "baseline_overhead_p50_ms": round(o["naive"]["p50_ms"], 3),
        "overhead_ratio": round(o["naive"]["p50_ms"] / max(o["ours"]["p50_ms"], 1e-9), 2),
        "wait_during_summary_p50_ms": round(w["ours"]["p50_ms"], 3),
        "baseline_wait_during_summary_p50_ms": round(w["naive"]["p50_ms"], 3),
        "wait_ratio": round(w["naive"]["p50_ms"] / max(w["ours"]["p50_ms"], 1e-9), 2),
        "prompt_min1": g["ours"]["min1"], f"prompt_min{M}": g["ours"][f"min{M}"],
        "prompt_growth": round(g["ours"]["growth"], 3),
        "prompt_text_chars_min1": g["ours"]["chars1"],
        f"prompt_text_chars_min{M}": g["ours"][f"chars{M}"],
        f"baseline_prompt_text_chars_min{M}": g["naive"][f"chars{M}"],
        "baseline_prompt_growth": round(g["naive"]["growth"], 3),
        "goals_met": {"overhead": o["ours"]["p50_ms"] <= 2.0,
                      "wait": w["ours"]["p50_ms"] <= 5.0,
                      "growth": g["ours"]["growth"] <= 1.2},
    }
    print(json.dumps(out))
    record("bench_manager", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
