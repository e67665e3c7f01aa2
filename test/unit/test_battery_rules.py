"""The perspective and consistency batteries: well formed, halves fixed, rules that score right."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from bench_dialogue import Exchange, score, step_kind, summarise, taken_side  # noqa: E402


def items(name: str) -> list[dict]:
    return [s for s in yaml.safe_load((BENCH / name).read_text())["steps"] if "say" in s]


def test_the_perspective_battery_has_two_fixed_halves_of_scored_items():
    steps = items("perspective_battery.yaml")
    assert len(steps) >= 20 and all(step_kind(s) == "perspective" for s in steps)
    halves = [s["half"] for s in steps]
    assert halves.count("a") == halves.count("b") >= 10
    assert all("answer" in s or s.get("expect") for s in steps)       # a rule of its own
    assert all(s.get("forbid") for s in steps)                         # the other side's words
    assert all(isinstance(p, str) for s in steps for key in ("expect", "forbid")
               for p in s.get(key, []))                                # phrases, not lists


def test_the_consistency_battery_pairs_each_claim_with_a_later_check():
    steps = items("consistency_battery.yaml")
    claims = [s["claim"] for s in steps if "claim" in s]
    checks = [(i, s) for i, s in enumerate(steps) if "check" in s]
    assert len(checks) >= 20 and sorted(claims) == sorted(s["check"] for _, s in checks)
    first = {s["claim"]: i for i, s in enumerate(steps) if "claim" in s}
    assert all(first[s["check"]] < i for i, s in checks)             # asked about later
    halves = [s["half"] for _, s in checks]
    assert halves.count("a") == halves.count("b")
    claim_options = {s["claim"]: s.get("options") for s in steps if "claim" in s}
    assert all(s.get("options") == claim_options[s["check"]] for _, s in checks)


@pytest.mark.parametrize("reply, options, side", [
    ("Yes, I love it.", None, "yes"), ("No, not really.", None, "no"),
    ("I'm not sure if I do.", None, ""),
    ("Blue is my favourite, though orange is nice.", {"orange": ["orange"], "blue": ["blue"]},
     "blue"),
    ("I like dogs more than cats.", {"cats": ["cat", "cats"], "dogs": ["dog", "dogs"]}, "dogs"),
    ("Hard to say!", {"tea": ["tea"], "coffee": ["coffee"]}, "")])
def test_the_side_a_reply_takes(reply, options, side):
    assert taken_side(reply, options) == side


def run(pairs):
    claims, out = {}, []
    for step, reply in pairs:
        ex = Exchange("astronaut", step_kind(step), step["say"], reply)
        score(ex, step, {}, [], claims)
        out.append(ex)
    return out


def test_a_check_is_right_only_when_it_takes_the_claims_side():
    colour = {"orange": ["orange"], "blue": ["blue"]}
    out = run([({"say": "Do you like orange?", "claim": "o"}, "Yes, it is cheerful."),
               ({"say": "Favourite colour?", "claim": "c", "options": colour}, "Blue, I think."),
               ({"say": "Is orange nice?", "check": "o", "half": "a"}, "No, I dislike it."),
               ({"say": "Which colour again?", "check": "c", "options": colour, "half": "b"},
                "I said blue.")])
    assert [e.right for e in out] == [None, None, False, True]
    scores = summarise(out)
    assert (scores["consistency"], scores["consistency_a"], scores["consistency_b"]) == \
        (0.5, 0.0, 1.0)


def test_a_perspective_item_fails_on_the_other_sides_words():
    step = {"say": "Am I holding a cup of coffee?", "kind": "perspective", "half": "a",
            "answer": "no", "forbid": ["i am not holding", "i'm not holding"]}
    right, wrong = run([(step, "No, your hands are empty."),
                        (step, "No, I am not holding a cup of coffee.")])
    assert right.right is True and wrong.right is False


def test_the_demo_rules_speak_to_lines_the_demo_script_says():
    """A rule on a line the script no longer says would never find a contradiction."""
    import bench_demo
    script = yaml.safe_load((BENCH.parent / "config" / "demo_script.yaml").read_text())
    said = {" ".join(item["say"].split()) for item in script["items"]} | {"greeting"}
    rules = yaml.safe_load(bench_demo.CONSISTENCY.read_text())["rules"]
    assert rules and all(line in said for r in rules for line in r["lines"])


GREETING = "Hello! I like how the person in front of me is wearing orange, bright and cheerful."
DEMO = {"Hello! Can you see me?": "Yes, I can see you.",
        "Do you like what I am wearing today?": "Yes, I like your orange suit.",
        "And what did you see when we started talking?":
            "When we started talking, I saw you in an orange suit, but now no one is there."}


@pytest.mark.parametrize("greeting, line, reply, broken", [
    (GREETING, None, None, None),                                       # agrees throughout
    (GREETING, "Do you like what I am wearing today?",                  # the README's demo
     "No, I don't like what you are wearing today.", "likes what the person wears"),
    ("Hello! I see you are wearing an orange suit.",                    # no opinion given
     "Do you like what I am wearing today?", "No, not really.", None),
    ("Hello there! Nice to meet you.", "Hello! Can you see me?", "No, I cannot see you.",
     "sees the person at the start"),
    (GREETING, "And what did you see when we started talking?", "I did not see anyone.",
     "remembers the person at the start"),
    (GREETING, "And what did you see when we started talking?", "I am not sure.", None),
])
def test_the_demo_contradictions_are_found_by_the_stored_rules(greeting, line, reply, broken):
    import bench_demo
    rules = yaml.safe_load(bench_demo.CONSISTENCY.read_text())["rules"]
    said = dict(DEMO, **({line: reply} if line else {}))
    turns = [{"text": k, "reply": v, "fallback": False} for k, v in said.items()]
    found = bench_demo.contradictions(turns, [greeting], rules)
    assert [f.split(":")[0] for f in found] == ([broken] if broken else [])
