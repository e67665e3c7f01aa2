#!/usr/bin/env python3
"""Benchmark: how well the people node tells people apart, and what it costs.

Faces: every photo in test/data/people (public photos of 14 people; SOURCES.md there) through
people_node's own path (dlib finds the face, the crop a detector would publish, dlib's ResNet
print), every pair compared: true accepts (same person within the threshold) and false
accepts (two people within it) at each threshold, and the threshold `matching.RULES` uses.
The chosen threshold is the largest at which false accepts stay at or below 1 % of impostor
pairs. The baseline is dlib's own documented threshold (0.6), the one a user would pick.
Voices: the recorded clips in test/data/voices (two speakers) and synthetic speakers
(espeak-ng voices, where installed), each clip's Resemblyzer print against each speaker's
enrolment (the mean of their other clips, as people_node pools a session's utterances), the
same table.
Also: time per face and per utterance on this machine, and the memory the models take; with
`--parts cost`, the demo's first spoken sentence with the people node (enrol never: the same
conversation) and without it, runs alternating.
Prints tables and one JSON line; the record goes to benchmarks/results/bench_people.json.

    source env.sh && python benchmarks/bench_people.py [--parts faces,voices,cost --pairs 3]
"""
from __future__ import annotations

import argparse
from collections import Counter
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
from results import record  # noqa: E402 - benchmarks/ is on sys.path

from vision_dialogue.application.identity.matching import RULES  # noqa: E402
from vision_dialogue.application.identity.records import Modality  # noqa: E402

PHOTOS, VOICES = REPO / "test" / "data" / "people", REPO / "test" / "data" / "voices"
MAX_FALSE_ACCEPTS = 0.01
DLIB_THRESHOLD = 0.6            # dlib's documented face threshold: the baseline
#: espeak-ng voices that differ (en-us+m3 and +m1 print as one voice: left out)
ESPEAK_VOICES = ("en-us+m1", "en-us+f2", "en-us+f4", "en-gb+m2")
SENTENCES = ("Good morning, could you tell me where the meeting room is?",
             "I have an appointment with the manager at ten o'clock.",
             "Thank you very much, that was really helpful today.")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def face_prints() -> tuple[dict, list[float], float]:
    """{(person, photo): vector}, seconds per print, MB the model took."""
    from PIL import Image

    from vision_dialogue.application.identity.embedders import FaceEmbedder
    before = rss_mb()
    faces = FaceEmbedder()
    model_mb = rss_mb() - before
    prints, times = {}, []
    for path in sorted(PHOTOS.glob("*/*.jpg")):
        rgb = np.asarray(Image.open(path).convert("RGB"))
        boxes = faces.faces_in(rgb)
        if len(boxes) != 1:
            print(f"  {path.relative_to(REPO)}: {len(boxes)} faces, left out")
            continue
        x, y, w, h = boxes[0]
        m = w // 4
        crop = rgb[max(0, y - m):y + h + m, max(0, x - m):x + w + m]
        t0 = time.perf_counter()
        prints[(path.parent.name, path.stem)] = faces.embed(crop).vector
        times.append(time.perf_counter() - t0)
    return prints, times, model_mb


def synthetic_clips(folder: Path) -> list[Path]:
    """espeak-ng speakers saying the sentences (16 kHz WAV), where espeak-ng is installed."""
    if shutil.which("espeak-ng") is None:
        print("  espeak-ng not installed: recorded voices only")
        return []
    out = []
    for voice in ESPEAK_VOICES:
        for i, text in enumerate(SENTENCES, 1):
            path = folder / f"espeak_{voice.replace('+', '_')}" / f"{i}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True)
            out.append(path)
    return out


def voice_prints(folder: Path) -> tuple[dict, list[float], float, set]:
    """{(speaker, clip): vector}, seconds per print, model MB, the recorded speakers."""
    import soundfile

    from vision_dialogue.application.identity.embedders import VoiceEmbedder
    before = rss_mb()
    voices = VoiceEmbedder()
    model_mb = rss_mb() - before
    recorded = sorted(VOICES.glob("*/*.flac"))
    prints, times = {}, []
    for path in recorded + synthetic_clips(folder):
        samples, rate = soundfile.read(path, dtype="int16")
        t0 = time.perf_counter()
        prints[(path.parent.name, path.stem)] = voices.embed(samples, rate).vector
        times.append(time.perf_counter() - t0)
    return prints, times, model_mb, {p.parent.name for p in recorded}


def roc(prints: dict, modality: Modality, thresholds, pairs=None) -> dict:
    """Distances of every pair, and true/false accepts at each threshold."""
    rule = RULES[modality]
    same, other = (pairs or _pairs)(prints, modality)
    points = [{k: v for k, v in roc_point(same, other, round(float(t), 3)).items()
               if k != "false_rejects"} for t in thresholds]
    allowed = [p for p in points if p["false_accepts"] <= MAX_FALSE_ACCEPTS]
    chosen = max(allowed, key=lambda p: p["threshold"]) if allowed else None
    in_use = roc_point(same, other, rule.threshold)
    return {"people": len({k[0] for k in prints}), "prints": len(prints),
            "genuine_pairs": len(same), "impostor_pairs": len(other),
            "same_person_distance": _spread(same), "other_person_distance": _spread(other),
            "roc": points, "chosen": chosen, "in_use": in_use}


def roc_point(same: list, other: list, t: float) -> dict:
    return {"threshold": t,
            "true_accepts": round(sum(d <= t for d in same) / max(1, len(same)), 3),
            "false_accepts": round(sum(d <= t for d in other) / max(1, len(other)), 4),
            "false_rejects": round(sum(d > t for d in same) / max(1, len(same)), 3)}


def _spread(xs: list) -> dict:
    if not xs:
        return {}
    return {"min": round(min(xs), 3), "p50": round(statistics.median(xs), 3),
            "max": round(max(xs), 3)}


def table(title: str, result: dict) -> None:
    print(f"\n{title}: {result['people']} people, {result['prints']} prints, "
          f"{result['genuine_pairs']} same-person and {result['impostor_pairs']} "
          "other-person pairs")
    print("| threshold | true accepts | false accepts |\n|---|---|---|")
    for p in result["roc"]:
        mark = " (chosen)" if p == result["chosen"] else ""
        print(f"| {p['threshold']}{mark} | {p['true_accepts']} | {p['false_accepts']} |")
    print(f"in use: {result['in_use']}")


def demo_run(people: bool) -> dict:
    """One demo (README command 1's, `bench_demo.py`) in a process of its own."""
    cmd = [sys.executable, str(HERE / "bench_demo.py")]
    if people:      # enrol never: the cost of printing and matching, the same conversation
        cmd += ["--people", "-p", "people.enrol:=never"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env=dict(os.environ, VD_BENCH_RESULTS="0")).stdout
    return json.loads(next(ln for ln in reversed(out.splitlines())
                           if ln.startswith('{"benchmark"')))


def identity_cost(pairs: int) -> dict:
    """The demo's first spoken sentence with the people node and without, runs alternating."""
    runs: dict[str, list] = {"people": [], "no people": []}     # each run's turns, in order
    for i in range(pairs):
        for arm in (("people", "no people") if i % 2 == 0 else ("no people", "people")):
            r = demo_run(arm == "people")
            runs[arm].append([t["first_sentence_s"] for t in r["per_turn"]])
            print(f"pair {i + 1}/{pairs} {arm}: first sentence p50 "
                  f"{r['first_sentence_p50_s']} s over {r['turns']} turns", flush=True)
    p50 = {arm: round(statistics.median([s for run in arm_runs for s in run]), 3)
           for arm, arm_runs in runs.items() if any(arm_runs)}
    # each turn against the same turn of the other arm in its pair, and each run's turns
    # summed: the pooled median of 6 turns a run jumps between the demo's slow and fast turns
    paired = [p / n for pr, nr in zip(runs["people"], runs["no people"])
              for p, n in zip(pr, nr) if n]
    totals = [sum(pr) / sum(nr) for pr, nr in zip(runs["people"], runs["no people"]) if sum(nr)]
    return {"pairs": pairs, "first_sentence_p50_s": p50,
            "ratio": round(p50["people"] / p50["no people"], 3), "goal_ratio": 1.05,
            "turn_by_turn_ratio": round(statistics.median(paired), 3) if paired else None,
            "run_total_ratios": [round(t, 3) for t in totals],
            "first_sentence_s_per_run": runs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="faces,voices",
                    help="faces, voices, cost (the demo with and without the people node)")
    ap.add_argument("--pairs", type=int, default=3, help="cost: demo runs per arm")
    a = ap.parse_args(argv)
    parts = a.parts.split(",")
    out: dict = {"benchmark": "bench_people"}
    if "faces" in parts:
        prints, times, mb = face_prints()
        res = roc(prints, Modality.FACE, np.arange(0.40, 0.66, 0.025))
        res["baseline_dlib_0.6"] = roc_point(*_pairs(prints, Modality.FACE), DLIB_THRESHOLD)
        photos = Counter(person for person, _ in prints)
        res |= {"seconds_per_face": _spread(times), "model_mb": round(mb, 1),
                "people_with_3_photos": sum(1 for n in photos.values() if n >= 3)}
        table("Faces (dlib ResNet, Euclidean distance)", res)
        out["faces"] = res
    if "voices" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            prints, times, mb, recorded = voice_prints(Path(tmp))
        res = roc(prints, Modality.VOICE, np.arange(0.05, 0.31, 0.025), _enrolled_pairs)
        real = {k: v for k, v in prints.items() if k[0] in recorded}
        res["recorded_only"] = roc_point(*_enrolled_pairs(real, Modality.VOICE),
                                         RULES[Modality.VOICE].threshold)
        res |= {"recorded_speakers": sorted(recorded), "seconds_per_utterance": _spread(times),
                "model_mb": round(mb, 1)}
        table("Voices (Resemblyzer, cosine distance)", res)
        out["voices"] = res
    if "cost" in parts:
        out["cost"] = identity_cost(a.pairs)
        c = out["cost"]
        print(f"first sentence p50: {c['first_sentence_p50_s']}, ratio {c['ratio']}; turn by "
              f"turn {c['turn_by_turn_ratio']}; run totals {c['run_total_ratios']} "
              "(goal at most 1.05)")
    out["peak_rss_mb"] = round(rss_mb(), 1)
    print(json.dumps(out))
    record("bench_people", out)
    return 0


def _pairs(prints: dict, modality: Modality) -> tuple[list, list]:
    rule, same, other = RULES[modality], [], []
    for (a, va), (b, vb) in itertools.combinations(prints.items(), 2):
        (same if a[0] == b[0] else other).append(rule.distance(va, vb))
    return same, other


def _enrolled_pairs(prints: dict, modality: Modality) -> tuple[list, list]:
    """As people_node compares: one print against a person's pooled enrolment (the mean).

    Same person: each print against the mean of that person's other prints; other person:
    each print against the mean of every other person's first two prints.
    """
    rule, same, other = RULES[modality], [], []
    people = sorted({k[0] for k in prints})
    clips = {p: sorted(k for k in prints if k[0] == p) for p in people}
    for p in people:
        for probe in clips[p]:
            rest = [prints[c] for c in clips[p] if c != probe]
            same.append(rule.distance(prints[probe], np.mean(rest, axis=0)))
            other += [rule.distance(prints[probe], np.mean([prints[c] for c in clips[q][:2]],
                                                           axis=0))
                      for q in people if q != p]
    return same, other


if __name__ == "__main__":
    raise SystemExit(main())
