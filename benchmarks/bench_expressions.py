#!/usr/bin/env python3
"""Benchmark: the expressive face (README "An expressive face").

The battery in expression_battery.yaml: 36 person lines with known emotional content (sad news,
good news, jokes, insults, surprise, worry, confusion, questions, neutral small talk), each with
the sign the robot's face should take and, where the line is clear, the expression.

For each line (the reactions interleaved line by line, then the replies):
- **reaction, ours**: the speech node's face (face/controller.py) hears the line; the expression
  it publishes, and the time from the line to it.
- **reaction, LLM (baseline)**: what Expressive Furhat does first, and what a user would
  otherwise pick: the engine is asked which face to show (one word from the expressions), a
  short call of its own; its answer and the time it takes.
- **reply**: one turn of the real Conversation (persona, streamed, the demo's 60 tokens) on
  the engine; each sentence goes to the face as the speech node gives it when it is said. The
  reply's first strong expression. (What the face costs the reply's first sentence is measured
  where it runs beside the whole demo: bench_face_cost.py, and bench_session.py's face=true.)

Counted: valence sign right (lines with a sign: the face took it; lines without: no strong
face), the named expression right (clear lines), false alarms (a strong face at a question or
small talk), time to the first expression (p50, p95).

Engines (`--engines`): `local` = the embedded default (1.5B) on llama.cpp in this process,
`server` = the same GGUF behind llama.cpp's OpenAI-compatible server. Prints a table and one
JSON line. Usage:
    source env.sh && python benchmarks/bench_expressions.py [--engines local,server] [-v]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from bench_skills import make_engine  # noqa: E402
from vision_dialogue.core.conversation import Conversation, ConversationConfig  # noqa: E402
from vision_dialogue.core.persona import default_persona_file, load_persona  # noqa: E402
from vision_dialogue.face.affect import EXPRESSIONS, NEUTRAL, Affect  # noqa: E402
from vision_dialogue.face.controller import FaceConfig, FaceController, FaceOutput  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

BATTERY = Path(__file__).with_name("expression_battery.yaml")
#: the baseline's question (Expressive Furhat asks a model whether and how the face changes)
ASK = ("A friendly robot hears a person say: \"{line}\"\nWhich one facial expression should "
       "the robot show? Answer with one word from: {names}.")
ASKED_NAMES = ("neutral", "happy", "sad", "surprised", "confused", "excited", "scared")


class Timed(FaceOutput):
    """Keeps each expression published, with its time."""

    def __init__(self):
        self.shown: list[tuple[float, Affect]] = []

    def expression(self, cue) -> None:
        self.shown.append((time.perf_counter(), cue.affect))


def sign(a: Affect) -> int:
    """The face's valence sign: 0 unless it is a strong expression."""
    if not a.strong or abs(a.valence) < 0.05:
        return 0
    return 1 if a.valence > 0 else -1


def ours(line: str) -> tuple[Affect, float]:
    out = Timed()
    face = FaceController(FaceConfig(idle=False, gaze_aversion=False), out)
    try:
        t0 = time.perf_counter()
        face.heard(line)
        t, affect = out.shown[0]
        return affect, t - t0
    finally:
        face.close()


def asked(backend, line: str) -> tuple[Affect, float]:
    """The baseline: the engine names the face (a valence from the name, as ours would)."""
    t0 = time.perf_counter()
    text = backend.complete([{"role": "user", "content": ASK.format(
        line=line, names=", ".join(ASKED_NAMES))}], max_tokens=4) or ""
    dt = time.perf_counter() - t0
    word = next((w for w in text.lower().replace(".", " ").split() if w in EXPRESSIONS),
                NEUTRAL)
    valence = {"happy": 0.6, "excited": 0.7, "sad": -0.6, "scared": -0.5}.get(word, 0.0)
    return Affect(word, valence, 0.0, 0.9 if word != NEUTRAL else 0.5), dt


def reply(backend, persona, line: str) -> tuple[Affect, str]:
    """One real turn; each sentence is shown as the speech node shows it when it is said."""
    out = Timed()
    face = FaceController(FaceConfig(idle=False, gaze_aversion=False), out)
    conv = Conversation(backend, persona, ConversationConfig(
        stream=True, warm_cache=False, max_reply_tokens=60))
    try:
        r = conv.turn(line, on_sentence=lambda sentence, index, fallback=False: face.sentence(
            1, sentence, first=index == 0))
        return next((a for _, a in out.shown if a.strong), Affect()), r.text
    finally:
        conv.close(0)
        face.close()


def score(rows: list[dict], key: str) -> dict:
    named = [r for r in rows if r["expression"]]
    neutral = [r for r in rows if r["category"] in ("question", "small_talk")]
    times = sorted(r[f"{key}_s"] for r in rows if r.get(f"{key}_s") is not None)
    return {
        "valence_right": sum(sign(r[key]) == r["valence"] for r in rows), "n": len(rows),
        "named_right": sum(r[key].expression == r["expression"] for r in named),
        "named_n": len(named),
        "false_alarms": sum(r[key].strong for r in neutral), "neutral_n": len(neutral),
        "first_expression_ms_p50": round(1000 * statistics.median(times), 2) if times else None,
        "first_expression_ms_p95": round(1000 * times[int(0.95 * (len(times) - 1))], 2)
        if times else None}


def run_engine(backend, battery, persona, verbose) -> dict:
    """Score the reactions and the replies on one engine.

    The reactions line by line, ours and asked interleaved; then the replies, one after the
    other, so the engine keeps the persona's prompt read, as in a session.
    """
    rows = []
    for item in battery["lines"]:
        row = dict(item)
        row["ours"], row["ours_s"] = ours(item["say"])
        row["asked"], row["asked_s"] = asked(backend, item["say"])
        rows.append(row)
    for row in rows:
        line, a = row["say"], row["ours"]
        row["reply"], text = reply(backend, persona, line)
        if verbose:
            print(f"  {line!r}: ours {a.expression} ({a.valence:+.2f}); asked "
                  f"{row['asked'].expression}; reply {row['reply'].expression}: {text!r}",
                  flush=True)
    out = {"ours": score(rows, "ours"), "asked": score(rows, "asked")}
    out["reply"] = {k: v for k, v in score(rows, "reply").items()
                    if not k.startswith("first_expression")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="local,server")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    battery = yaml.safe_load(BATTERY.read_text())
    persona = load_persona(default_persona_file())
    result: dict = {"machine": f"{os.cpu_count()} cores", "lines": len(battery["lines"])}
    for engine in a.engines.split(","):
        backend, close = make_engine(engine)
        try:
            backend.complete([{"role": "user", "content": "Hi"}], max_tokens=1)   # loaded
            result[engine] = run_engine(backend, battery, persona, a.verbose)
            print(json.dumps({engine: result[engine]}), flush=True)
        finally:
            close()
    print("\n| engine | what | valence sign right | named right | false alarms (questions, "
          "small talk) | line to first expression p50 / p95 |")
    print("|---|---|---|---|---|---|")
    for engine in a.engines.split(","):
        for key, what in (("ours", "reaction: ours (local classifier)"),
                          ("asked", "reaction: the engine asked (baseline)"),
                          ("reply", "the reply's own expression")):
            r = result[engine][key]
            t = (f"{r['first_expression_ms_p50']} / {r['first_expression_ms_p95']} ms"
                 if "first_expression_ms_p50" in r else "with its sentence")
            print(f"| {engine} | {what} | {r['valence_right']}/{r['n']} | "
                  f"{r['named_right']}/{r['named_n']} | {r['false_alarms']}/{r['neutral_n']} "
                  f"| {t} |")
    print(json.dumps(result))
    record("bench_expressions", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
