#!/usr/bin/env python3
"""Benchmark: how well the embedded models take facts from a person's lines.

The manager's memory asks the model for the facts of each line of a known person
(application/identity/facts.py, a side question constrained to `FACTS_SCHEMA`). Each of the memory
battery's 20 lines (memory_battery.yaml) goes to each model with the schema as shipped (the
fact first, then its topic) and with the baseline a user had before (the topic first), the two
interleaved line by line on one engine. Per model and schema: lines with a fact kept (one
grounded in the line), the topics chosen, seconds per line. A small model that is asked for the
topic first takes the first one offered ("work") for most lines and then bends the fact to it.

Prints a table and one JSON line; the record goes to benchmarks/results/bench_fact_extraction.json.

    source env.sh && python benchmarks/bench_fact_extraction.py [--models default,default:1.5b]
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from results import record  # noqa: E402 - benchmarks/ is on sys.path
from vision_dialogue.application.identity import facts  # noqa: E402
from vision_dialogue.llm.base import short_question  # noqa: E402
from vision_dialogue.llm.factory import BackendOptions, backend_class  # noqa: E402

BATTERY = Path(__file__).with_name("memory_battery.yaml")


def topic_first() -> tuple[dict, str]:
    """The baseline: the schema and instruction with the topic before the fact."""
    schema = copy.deepcopy(facts.FACTS_SCHEMA)
    item = schema["properties"]["facts"]["items"]
    item["properties"] = {"topic": item["properties"]["topic"],
                          "fact": item["properties"]["fact"]}
    item["required"] = ["topic", "fact"]
    instruction = facts.EXTRACT_INSTRUCTION.replace('{"fact": ..., "topic": ...}',
                                                    '{"topic": ..., "fact": ...}')
    assert instruction != facts.EXTRACT_INSTRUCTION
    return schema, instruction


def extract(backend, line: str, schema: dict, instruction: str) -> tuple[list, float]:
    messages = [{"role": "system", "content": instruction}, {"role": "user", "content": line}]
    t0 = time.monotonic()
    reply = short_question(backend, messages, 160, json_schema=schema, temperature=0.0)
    return facts.parse_facts(reply, line, 0.0), time.monotonic() - t0


def run_model(model: str, lines: list[str]) -> dict:
    backend = backend_class("llamacpp").from_options(BackendOptions(
        model=model, max_new_tokens=160, temperature=0.0))
    ways = {"fact_first": (facts.FACTS_SCHEMA, facts.EXTRACT_INSTRUCTION),
            "topic_first": topic_first()}
    out = {w: {"lines_with_a_fact": 0, "topics": {}, "seconds": [], "rows": []} for w in ways}
    for line in lines:                               # interleaved, line by line
        for way, (schema, instruction) in ways.items():
            got, seconds = extract(backend, line, schema, instruction)
            o = out[way]
            o["lines_with_a_fact"] += bool(got)
            o["seconds"].append(seconds)
            for f in got:
                topic = f.about.split(":")[0]
                o["topics"][topic] = o["topics"].get(topic, 0) + 1
            o["rows"].append({"line": line, "facts": [[f.about, f.text] for f in got]})
    for o in out.values():
        o["s_per_line"] = round(sum(o.pop("seconds")) / len(lines), 2)
    return {"model": model, "lines": len(lines), **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="default,default:1.5b")
    ns = ap.parse_args()
    lines = [f["tell"] for f in yaml.safe_load(BATTERY.read_text())["facts"]]
    result = {"benchmark": "bench_fact_extraction",
              "models": [run_model(m, lines) for m in ns.models.split(",")]}
    print(f"{'model':14s} {'schema':12s} {'lines with a fact':>18s} {'s/line':>7s}  topics")
    for m in result["models"]:
        for way in ("fact_first", "topic_first"):
            o = m[way]
            print(f"{m['model']:14s} {way:12s} {o['lines_with_a_fact']:>12d} of {m['lines']:<3d}"
                  f" {o['s_per_line']:>7.2f}  {o['topics']}")
    print(json.dumps({k: v for k, v in result.items()}, ensure_ascii=False)[:2000])
    record("bench_fact_extraction", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
