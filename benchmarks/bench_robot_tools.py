#!/usr/bin/env python3
"""Benchmark: the robot's own actions as LLM tools (README "Let the LLM use your robot").

The battery in robot_tools_battery.yaml: five declared tools (two Trigger services, three
actions with a place, an object or a target) and 26 requests: 13 that need a tool (some with an
argument) and 13 that must not call one (small talk, questions about abilities or places, lines
that only mention waving, going or bringing). Each request is one turn of the real Conversation
(persona, prompt, streamed tool loop) with the robot tools offered; the robot is played (every
call succeeds at once and is recorded), so the seconds are ours and the LLM's.

Counted per request: right (the expected tool with the expected words in its arguments, or no
call where none is wanted), wrong (a call where none is wanted, another tool, arguments
that miss, or a reply that claims an action no tool ran, "I waved" with no call: worse than
none, the robot acts or speaks wrongly), missed (no call where one is wanted); and replies
that say the robot could not ("sorry", "cannot") after a call that ran.

Methods, interleaved request by request: `first` (the robot's actions decided on a short
prompt before the reply, core/action_choice.py: the default for the embedded model),
`in_reply` (the baseline: the LLM calls them in its reply, as before), and `none` (no tools:
the robot can only talk). Also the time to the first spoken sentence, p50, for the turns that
call nothing and for those that do.

`--session`: all 26 requests in one conversation per method, in order (a session's history:
its earlier calls and replies), instead of a fresh conversation each. `--methods first`: only
those methods (a quicker check of one).

Engines (`--engines`): `local` = the embedded default (1.5B) on llama.cpp in this process,
`server` = the same GGUF behind llama.cpp's OpenAI-compatible server (the openai backend).

Prints a table and one JSON line. Usage:
    source env.sh && python benchmarks/bench_robot_tools.py [--engines local,server] [-v]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from bench_skills import make_engine  # noqa: E402
from vision_dialogue.core.action_choice import claims_action  # noqa: E402
from vision_dialogue.core.conversation import Conversation, ConversationConfig  # noqa: E402
from vision_dialogue.core.persona import default_persona_file, load_persona  # noqa: E402
from vision_dialogue.application.robot_tools import ArgumentError, action_words, \
    load_robot_tools, reply_text, tools_note  # noqa: E402
from vision_dialogue.llm.tool_loop import ToolOutcome  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

BATTERY = Path(__file__).with_name("robot_tools_battery.yaml")


class PlayedRobot:
    """The ToolProvider of the declared tools, with a robot that does everything at once."""

    def __init__(self, tools):
        self.tools = {t.name: t for t in tools}
        self.note = tools_note(tools)
        self.standing = self.acts = True     # as the manager's RobotTools
        self.verbs = action_words(tools)
        self.calls: list[tuple[str, dict]] = []

    def schemas(self):
        return [t.schema() for t in self.tools.values()]

    def run(self, name, args):
        tool = self.tools[name]
        try:
            values = tool.check(args)
        except ArgumentError as e:
            self.calls.append((name, dict(args)))
            return ToolOutcome(error=f"{e}; nothing was sent to the robot")
        self.calls.append((name, values))
        return ToolOutcome(text=reply_text(tool, {"success": True}))


_DENIES = re.compile(r"\b(sorry|cannot|can't|can not|unable|could not|couldn't)\b", re.I)


def denies(row: dict) -> bool:
    """A reply that says the robot could not, after a call that worked (it did act)."""
    return bool(row["calls"]) and bool(_DENIES.search(row["reply"]))


def score(item: dict, calls: list, reply: str = "", verbs=()) -> str:
    """right, wrong or missed (see the module docstring)."""
    want = item.get("call")
    if not calls:
        if verbs and claims_action(reply, verbs):
            return "wrong"          # "I waved" and nothing moved
        return "missed" if want else "right"
    if not want or len(calls) != 1 or calls[0][0] != want:
        return "wrong"
    args = calls[0][1]
    for key, words in (item.get("args") or {}).items():
        if str(words).lower() not in str(args.get(key, "")).lower():
            return "wrong"
    return "right"


METHODS = {"first": "first", "in_reply": "in_reply", "none": None}
"""Method -> ConversationConfig.decide_actions (None: no tools offered)."""


def session(backend, persona, tools, decide="auto") -> tuple[Conversation, PlayedRobot | None]:
    """A conversation on the shared engine, with the robot's tools or without."""
    conv = Conversation(backend, persona,
                        ConversationConfig(stream=True, warm_cache=False,
                                           decide_actions=decide or "auto"))
    robot = None
    if tools is not None:
        robot = PlayedRobot(tools)
        conv.add_tools(robot)
    return conv, robot


def one_turn(backend, item, conv, robot) -> dict:
    """One request in `conv`: its calls, reply and first-sentence time."""
    before = len(robot.calls) if robot else 0
    as_before(backend, conv.prompt.reply_messages(), robot.schemas() if robot else [])
    r = conv.turn(item["say"], on_sentence=lambda *a, **k: None)
    return {"say": item["say"], "calls": robot.calls[before:] if robot else [],
            "reply": r.text, "fallback": r.fallback, "first_s": r.first_sentence_s}


def as_before(backend, messages, schemas) -> None:
    """Leave the cache as a session's previous turn would: the prompt so far, same tools.

    The manager warms a local model between turns; a server keeps its last prompt. Without
    this, interleaving would measure a whole prompt re-read on every turn.
    """
    if callable(getattr(backend, "warm", None)):
        backend.warm(messages, tools=schemas)
    elif schemas:
        backend.complete_with_tools(messages, schemas, max_tokens=1)
    else:
        backend.complete(messages, max_tokens=1)


def run_engine(backend, battery, persona, verbose, in_session=False,
               methods=tuple(METHODS)) -> dict:
    """Every request in a fresh conversation, or (`in_session`) all in one per method."""
    tools = load_robot_tools(BATTERY)
    verbs = sorted(action_words(tools))
    rows: dict[str, list] = {m: [] for m in methods}

    def start(method):
        return session(backend, persona, tools if METHODS[method] else None, METHODS[method])
    kept = {m: start(m) for m in methods} if in_session else {}
    for item in battery["requests"]:                     # interleaved, request by request
        for method in methods:
            decide = METHODS[method]
            conv, robot = kept[method] if in_session else start(method)
            row = one_turn(backend, item, conv, robot)
            if not in_session:
                conv.close(0)
            row["claims"] = not row["calls"] and claims_action(row["reply"], verbs)
            row["score"] = score(item, row["calls"], row["reply"], verbs) if decide else \
                ("missed" if item.get("call") else "right")
            row["needs_tool"] = bool(item.get("call"))
            rows[method].append(row)
            if verbose:
                print(f"  [{method}] {item['say']!r} -> {row['calls']} {row['score']} "
                      f"{row['first_s']} s: {row['reply']!r}", flush=True)
    out = {}
    for method, rs in rows.items():
        def p50(sel):
            xs = [r["first_s"] for r in rs if sel(r) and r["first_s"] is not None]
            return round(statistics.median(xs), 2) if xs else None
        out[method] = {k: sum(r["score"] == k for r in rs) for k in ("right", "wrong", "missed")}
        out[method].update(
            wrong_when_none_wanted=sum(r["score"] == "wrong" and not r["needs_tool"]
                                       for r in rs),
            claimed_without_call=sum(r["claims"] for r in rs),
            fallbacks=sum(r["fallback"] for r in rs),
            denied_after_acting=sum(denies(r) for r in rs),
            first_s_p50_plain=p50(lambda r: not r["needs_tool"]),
            first_s_p50_tool=p50(lambda r: r["needs_tool"]), n=len(rs))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="local,server")
    ap.add_argument("--session", action="store_true",
                    help="all requests in one conversation per method (a session's history)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="which of first,in_reply,none to run (default: all, interleaved)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if not set(a.methods.split(",")) <= set(METHODS):
        ap.error(f"--methods: choose from {', '.join(METHODS)}")
    battery = yaml.safe_load(BATTERY.read_text())
    persona = load_persona(default_persona_file())
    result: dict = {"machine": f"{os.cpu_count()} cores", "requests": len(battery["requests"]),
                    "session": a.session}
    for engine in a.engines.split(","):
        backend, close = make_engine(engine)
        try:
            backend.complete([{"role": "user", "content": "Hi"}], max_tokens=1)   # loaded
            result[engine] = run_engine(backend, battery, persona, a.verbose, a.session,
                                        a.methods.split(","))
            print(json.dumps({engine: result[engine]}), flush=True)
        finally:
            close()
    print(f"\n{'in one session' if a.session else 'each request fresh'}:")
    print("| engine | method | right | wrong (of them: none wanted) | claimed, no call | "
          "missed | said it could not, after acting | fallbacks | first sentence p50, no call "
          "wanted (s) | same, a call wanted (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for engine in a.engines.split(","):
        for method, r in result[engine].items():
            print(f"| {engine} | {method} | "
                  f"{r['right']} | {r['wrong']} ({r['wrong_when_none_wanted']}) | "
                  f"{r['claimed_without_call']} | "
                  f"{r['missed']} | {r['denied_after_acting']} | {r['fallbacks']} | "
                  f"{r['first_s_p50_plain']} | "
                  f"{r['first_s_p50_tool']} |")
    print(json.dumps(result))
    record("bench_robot_tools", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
