#!/usr/bin/env python3
"""Benchmark: reply latency over a long scripted session in real time (the local default).

A camera thread plays the demo video in real time and gives the conversation one frame every
`--frame-period` seconds (the demo's 5 s); a scripted user asks the dialogue battery's questions
in a loop, each `--pause` seconds after the previous reply ended, for `--minutes` minutes. This
is the demo's load over a whole session: frames are perceived and summarised while the user
talks, and the prompt would grow without the paper's bound.

Per turn it records the time to the first spoken sentence and to the whole reply, the raw
frames in the reply prompt and the prompt's size. Setups (`--setup NAME:key=value,...`,
ConversationConfig fields plus the backend options `prefix_cache` and `dtype`) run one after
the other, `--reps` times, interleaved. The default pair:

- `now`: this project's defaults for a text-only local model (merged summaries, prefix cache,
  threads on the free cores, the changed prompt read between turns);
- `before`: the same without the last two (a fixed 2 threads, nothing read between turns), as
  before issue 21. `--setup paper:summary_mode=llm,prefix_cache=false,warm_cache=false` is what
  a user following the paper would run on the same model.

`--busy N` keeps N other processes busy during each session. The default is what ships: the
embedded 1.5B on llama.cpp (`--model default` for the 0.5B, `--engine transformers` or
`engine=transformers` in a setup for PyTorch). `face=true` in a setup runs the
expressive face beside the conversation in this process (face/controller.py: a reaction to each
question, each sentence's expression as it comes, gaze aversion and idle movements on their
clock), as the speech node runs it, to measure what it costs the reply (issue 31).

Goals (issues 11, 21): first sentence <= 2 s p50 and <= 4 s p95; turn 8 and turn 10 no slower
than turn 2 (1.3x), on a quiet machine and with one busy process. Prints a table and one JSON line.
The same session spoken (the local voice, Whisper and Piper, about 5 minutes, turn 2 against
turn 8): benchmarks/bench_voice.py.

    source env.sh && python benchmarks/bench_session.py --minutes 10
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if os.environ.get("VD_BENCH_FROM_PATH") != "1":   # 1: import vision_dialogue from PYTHONPATH
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from bench_dialogue import BATTERY, DEMO_MANAGER, demo_video, parse_setup  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

DEFAULT_SETUPS = ["now:", "before:threads=2,warm_cache=false"]


def video_frames():
    """All frames of the demo video and its frame rate."""
    frames, manifest = demo_video()
    return frames, manifest["fps"]


def pct(xs, q):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None


def run_session(backend, observer, setup: dict, questions: list[str], video, args) -> list[dict]:
    """One real-time session; a record per turn."""
    from vision_dialogue.core.conversation import Conversation, ConversationConfig
    from vision_dialogue.core.persona import load_persona
    frames, fps = video
    setup = dict(setup)
    face = None
    if str(setup.pop("face", "false")).lower() in ("1", "true", "yes"):
        from vision_dialogue.face.controller import FaceConfig, FaceController, FaceOutput
        face = FaceController(FaceConfig(), FaceOutput())
    conv = Conversation(backend, load_persona(), ConversationConfig(**{**DEMO_MANAGER, **setup}),
                        observer=observer)
    stop = threading.Event()
    t0 = time.monotonic()
    most_frames = [0]

    def camera():
        while not stop.is_set():
            i = int((time.monotonic() - t0) * fps) % len(frames)
            conv.add_frame(frames[i])
            stop.wait(args.frame_period)

    cam = threading.Thread(target=camera, name="bench-camera", daemon=True)
    cam.start()
    turns: list[dict] = []
    try:
        stop.wait(args.pause)
        end = t0 + args.minutes * 60
        while time.monotonic() < end:
            q = questions[len(turns) % len(questions)]
            rec = {"turn": len(turns) + 1, "question": q}
            start = time.monotonic()

            def first(sentence, index, fallback=False, rec=rec, start=start):
                rec.setdefault("first_s", time.monotonic() - start)
                if face is not None:
                    face.sentence(len(turns) + 1, sentence, first=index == 0)

            if face is not None:
                face.heard(q)
            res = conv.turn(q, on_sentence=first, deadline=start + args.deadline)
            rec.update(total_s=time.monotonic() - start, reply=res.text, fallback=res.fallback,
                       frames_in_prompt=len(res.frame_ids),
                       prompt_chars=conv.state()["prompt_chars"])
            most_frames[0] = max(most_frames[0], len(res.frame_ids))
            turns.append(rec)
            if face is not None:
                face.reply_done(len(turns))
                face.state("listening")
            if args.verbose:
                print(f"  {rec['turn']:3} {rec.get('first_s', 0):5.1f}/{rec['total_s']:5.1f} s "
                      f"frames={rec['frames_in_prompt']} you: {q!r} robot: {res.text!r}",
                      flush=True)
            stop.wait(args.pause)
    finally:
        stop.set()
        cam.join(args.frame_period + 30)
        conv.close(timeout=1.0)
        if face is not None:
            face.close()
    return turns


def summarise(turns: list[dict], n: int) -> dict:
    firsts = [t["first_s"] for t in turns if "first_s" in t]
    totals = [t["total_s"] for t in turns]

    def at(i, key="first_s"):
        return round(turns[i - 1][key], 2) if len(turns) >= i and key in turns[i - 1] else None

    t2, t8, t10 = at(2), at(8), at(10)
    late = firsts[len(firsts) // 2:]
    return {
        "turns": len(turns), "fallbacks": sum(t["fallback"] for t in turns),
        "first_sentence_p50_s": pct(firsts, 0.5), "first_sentence_p95_s": pct(firsts, 0.95),
        "reply_p50_s": pct(totals, 0.5), "reply_p95_s": pct(totals, 0.95),
        "turn2_first_s": t2, "turn8_first_s": t8, "turn10_first_s": t10,
        "turn8_over_turn2": round(t8 / t2, 2) if t2 and t8 else None,
        "turn10_over_turn2": round(t10 / t2, 2) if t2 and t10 else None,
        "second_half_first_p50_s": pct(late, 0.5),
        "most_frames_in_a_prompt": max((t["frames_in_prompt"] for t in turns), default=0),
        "bound_n": n,
        "last_prompt_chars": turns[-1]["prompt_chars"] if turns else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="length of each session")
    ap.add_argument("--frame-period", type=float, default=5.0)
    ap.add_argument("--pause", type=float, default=6.0,
                    help="seconds between a reply's end and the next question")
    ap.add_argument("--deadline", type=float, default=30.0, help="reply deadline (the demo's)")
    ap.add_argument("--model", default="default:1.5b",
                    help="local checkpoint or GGUF, or default[:1.5b] (default: what ships)")
    ap.add_argument("--engine", default="llamacpp", choices=("llamacpp", "transformers"),
                    help="the engine of setups that name none (default: what ships)")
    ap.add_argument("--dtype", default="auto", help="local model precision (auto, float32, "
                    "bfloat16, int8); a setup may set its own dtype=")
    ap.add_argument("--setup", action="append", default=[],
                    help="NAME:key=value,... (repeatable); default: " + " ".join(DEFAULT_SETUPS))
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--busy", type=int, default=0,
                    help="other processes keeping a core busy each during the sessions (a "
                    "robot's computer is never quiet)")
    ap.add_argument("--label", default="")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    from vision_dialogue.llm.factory import make_backend, measured_focus_note
    from vision_dialogue.perception.observer import make_observer
    questions = [s["say"] for s in yaml.safe_load(BATTERY.read_text())["steps"] if "say" in s]
    setups = [parse_setup(s) for s in (args.setup or DEFAULT_SETUPS)]
    backends = {}

    def backend_for(cache: bool, dtype: str, engine: str, threads: int):
        key = (cache, dtype, engine, threads)
        if key not in backends:
            extra = dict(prefix_cache=cache, dtype=dtype) if engine == "transformers" else {}
            backends[key] = make_backend(
                engine, model=args.model, max_new_tokens=DEMO_MANAGER["max_reply_tokens"],
                threads=threads, **extra)
        return backends[key]

    observer, video = make_observer(), video_frames()
    results: dict[str, list[dict]] = {name: [] for name, _ in setups}
    for rep in range(args.reps):
        for name, setup in setups:
            setup = dict(setup)
            cache = bool(setup.pop("prefix_cache", True))
            dtype = str(setup.pop("dtype", args.dtype))
            engine = str(setup.pop("engine", args.engine))
            setup.setdefault("focus_note", measured_focus_note(engine, args.model))
            threads = int(setup.pop("threads", 0))
            print(f"session {rep + 1}/{args.reps}, setup {name} {setup} prefix_cache={cache} "
                  f"dtype={dtype} engine={engine} threads={threads or 'free cores'}, "
                  f"{args.minutes:g} min, {args.busy} busy process(es)", flush=True)
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(args.busy)]
            try:
                results[name] += run_session(backend_for(cache, dtype, engine, threads),
                                             observer, setup, questions, video, args)
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
    n = DEMO_MANAGER["n"]
    scores = {name: summarise(turns, n) for name, turns in results.items()}
    cols = ["turns", "first_sentence_p50_s", "first_sentence_p95_s", "turn2_first_s",
            "turn8_first_s", "turn10_first_s", "turn10_over_turn2", "second_half_first_p50_s",
            "most_frames_in_a_prompt", "fallbacks"]
    print("\n| setup | " + " | ".join(cols) + " |")
    print("|" + "---|" * (len(cols) + 1))
    for name, sc in scores.items():
        print(f"| {name} | " + " | ".join(str(sc[c]) for c in cols) + " |")
    line = {"benchmark": "session", "label": args.label, "model": args.model,
            "minutes": args.minutes, "reps": args.reps, "busy": args.busy,
            "scores": scores}
    print(json.dumps(line))
    record("bench_session", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
