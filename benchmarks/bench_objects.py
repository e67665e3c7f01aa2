#!/usr/bin/env python3
"""Benchmark: how far the offline object detector can be trusted, and what to say of it.

Runs perception/object_detector.py (CenterNet, COCO) on labelled real photos that installed
packages ship: scikit-image's sample photos and, where Debian's `darknet` package is installed, its
/usr/share/darknet/data photos. Each photo lists the COCO classes in it (`present`) and classes
that are not wrong to name (`fine`: the coffee's table). Variants, run interleaved photo by
photo:

- `stretch`: the photo resized to the model's 512x512 input as is (the baseline: what a user
  feeding the model would do, and what TF.js demos do);
- `letterbox`: the photo's shape kept, the rest grey (what the detector node does).

For each variant and score threshold: precision (named classes that are there), recall (classes
there that are named), the photos with a wrong class, and ms per photo. Also what the prompt
would say (common/objects.py wording: "maybe" under the sure threshold, "a dog or a cat" when
animal classes compete). Prints a table and one JSON line.

    source env.sh && python benchmarks/bench_objects.py
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vision_dialogue.common.objects import ObjectSighting, object_phrases  # noqa: E402
from vision_dialogue.perception.object_detector import ObjectDetector  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

DARKNET = Path("/usr/share/darknet/data")
#: photo -> (COCO classes in it, classes not wrong to name)
PHOTOS = {
    "skimage:astronaut": ({"person"}, set()),
    "skimage:coffee": ({"cup"}, {"dining table", "spoon", "bowl"}),
    "skimage:chelsea": ({"cat"}, set()),
    "skimage:rocket": (set(), set()),
    "skimage:camera": ({"person"}, set()),
    "darknet:dog": ({"dog", "bicycle", "truck"}, {"car"}),
    "darknet:eagle": ({"bird"}, set()),
    "darknet:giraffe": ({"giraffe", "zebra"}, set()),
    "darknet:horses": ({"horse"}, set()),
    "darknet:kite": ({"person", "kite"}, set()),
    "darknet:person": ({"person", "dog", "horse"}, set()),
    "darknet:scream": (set(), {"person"}),
}


def load(name: str):
    kind, stem = name.split(":")
    if kind == "skimage":
        import skimage.data
        img = getattr(skimage.data, stem)()
        if img.ndim == 2:
            img = cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        return cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    path = DARKNET / f"{stem}.jpg"
    return cv2.imread(str(path)) if path.is_file() else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--thresholds", default="0.25,0.3,0.35,0.4,0.45")
    ap.add_argument("--variants", default="stretch,letterbox")
    args = ap.parse_args(argv)
    thresholds = [float(t) for t in args.thresholds.split(",")]
    variants = args.variants.split(",")
    detectors = {v: ObjectDetector(min_score=min(thresholds), preprocess=v) for v in variants}
    photos = {n: load(n) for n in PHOTOS}
    photos = {n: img for n, img in photos.items() if img is not None}
    found = {v: {} for v in variants}
    ms = {v: [] for v in variants}
    for _ in range(2):                      # the first pass warms up; the second is timed
        for name, img in photos.items():
            for v in variants:              # interleaved, photo by photo
                t0 = time.perf_counter()
                found[v][name] = detectors[v].detect(img)
                ms[v].append((time.perf_counter() - t0) * 1000)
    rows = []
    for v in variants:
        for t in thresholds:
            named = correct = there = hit = 0
            wrong = []
            for name, dets in found[v].items():
                present, fine = PHOTOS[name]
                labels = {d.label for d in dets if d.score >= t}
                named += len(labels)
                correct += len(labels & (present | fine))
                there += len(present)
                hit += len(labels & present)
                bad = labels - present - fine
                if bad:
                    wrong.append(f"{name.split(':')[1]}:{'/'.join(sorted(bad))}")
            timed = sorted(ms[v][len(photos):])
            rows.append({"variant": v, "threshold": t,
                         "precision": round(correct / max(named, 1), 2),
                         "recall": round(hit / max(there, 1), 2), "wrong": wrong,
                         "ms_p50": round(timed[len(timed) // 2], 1)})
    print(f"{len(photos)} labelled photos ({'with' if DARKNET.is_dir() else 'without'} darknet's)")
    print(f"{'variant':<10} {'thr':>5} {'precision':>9} {'recall':>6} {'ms p50':>7}  wrong")
    for r in rows:
        print(f"{r['variant']:<10} {r['threshold']:>5.2f} {r['precision']:>9.2f} "
              f"{r['recall']:>6.2f} {r['ms_p50']:>7.0f}  {', '.join(r['wrong']) or '-'}")
    said, wrong_claims = {}, {}
    for v in variants:
        said[v], wrong_claims[v] = {}, []
        for name, dets in found[v].items():
            present, fine = PHOTOS[name]
            sightings = [ObjectSighting.from_box(d.label, d.score, d.box, photos[name].shape[1],
                                                 d.alternatives) for d in dets]
            phrases = object_phrases(sightings)
            said[v][name] = "; ".join(p.text for p in phrases)
            # a wrong claim: a class named plainly (not "maybe", not "a dog or a cat") not there
            wrong_claims[v] += [f"{name.split(':')[1]}:{p.claims}" for p in phrases
                                if p.claims and p.claims not in present | fine]
    print("\nwhat the prompt would say (common/objects.py wording, min_score 0.3, sure 0.45):")
    for v in variants:
        print(f"  {v}: wrong plain claims: {', '.join(wrong_claims[v]) or 'none'}")
    for name in photos:
        print(f"  {name:<18} " + " | ".join(said[v][name] or "(nothing)" for v in variants))
    line = {"photos": len(photos), "rows": rows, "said": said,
            "wrong_claims": wrong_claims}
    print(json.dumps(line))
    record("bench_objects", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
