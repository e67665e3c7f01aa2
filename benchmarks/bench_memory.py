#!/usr/bin/env python3
"""Benchmark: what the robot remembers of a person across a restart, and what it costs.

Session 1: a person who said yes tells the robot 20 facts, one line each
(memory_battery.yaml), and a second one the battery's 12 held-out facts (written before the
recall's topic cues and never used to tune them; reported apart); each line goes to the
manager's memory keeper (application/identity/remembering.py), which asks the model for the
facts as the manager does (a side question, constrained JSON, temperature 0). The store is
closed. Session 2, from a new store
object and keeper on the same file (a restart): the person asks about each fact, and the reply
comes from the real conversation (core/conversation.py) whose prompt holds the memory note
(`PromptAssembly.recall`), as the manager's does.

Scored per question: right (one of the expected words in the reply), missing (the reply says
it does not know), wrong (anything else: worse than missing). Invented: a second known person
who told the robot nothing asks five of the questions; a reply holding any of the battery's
facts is invented about them. The baseline, interleaved question by question on a
conversation and an engine of its own, is the same model with memory off (what a user has
without it):
its right answers are the floor, and the first spoken sentence with memory on vs off is the
cost of the note (the goal: within +5 %). The prompt's size: the note of a person with the
20 facts and 50 remembered sessions vs none (`memory_note_chars` caps it).

Engines (`--engines`): `local` = the embedded default (1.5B) on llama.cpp in this process,
`server` = the same GGUF behind llama.cpp's OpenAI-compatible server (bench_skills.make_engine),
warming the next prompt between turns (`warm_server_prompt`) as the local engine does.
Prints a table and one JSON line; the record goes to benchmarks/results/bench_memory.json.

`--partials`: each question is spoken, its partial line (all words but the last) read ahead
before the turn on both arms, as the manager reads the speech node's partial lines while the
person speaks (`partial_every`). `--pause GAP`: each question is spoken as the speech node
hears it at the pause (`partial_at_pause`): its whole words go out as a partial line when
they are recognised at the pause, and the line ends GAP seconds later (the end-of-turn
silence left after the recognition: the rules end a complete question `quick_silence`, 0.3 s,
into the silence; bench_voice.py measures this time on the local voice as "partial line ...
before the line came"); the reply is timed from the line, whatever of the reading ahead is
done. Both (`--partials --pause GAP`, the speech node's defaults): all words but the last are
read first, then the whole words at the pause.

    source env.sh && python benchmarks/bench_memory.py [--engines local,server] [--facts 20]
        [--partials] [--pause GAP]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from bench_skills import make_engine  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path
from vision_dialogue.core.conversation import Conversation, ConversationConfig  # noqa: E402
from vision_dialogue.core.conversation_types import TurnResult  # noqa: E402
from vision_dialogue.core.persona import load_persona  # noqa: E402
from vision_dialogue.application.identity.memory import PersonMemory, SessionSummary  # noqa: E402
from vision_dialogue.application.identity.records import Consent, ConsentWay  # noqa: E402
from vision_dialogue.application.identity.remembering import MemoryKeeper  # noqa: E402
from vision_dialogue.application.identity.store import PeopleStore  # noqa: E402
from vision_dialogue.llm.base import short_question  # noqa: E402

BATTERY = Path(__file__).with_name("memory_battery.yaml")
MANAGER = dict(n=4, m=3, max_reply_tokens=60, stream=True)      # the demos' manager
EXTRACT_MAX_TOKENS = 160                                         # ros/manager/memory.py
SESSIONS_FOR_SIZE = 50


def words(text: str) -> str:
    return " " + re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("\u2019", "'")) + " "


#: a word that, among the three before the expected one, says the opposite ("You do not run
#: marathons.": wrong, which the rule counted right until 2026-12-04)
NEGATIONS = frozenset("not never no don't doesn't didn't isn't aren't can't won't".split())


def score(reply: str, expect: list[str], not_known: list[str]) -> str:
    said = words(reply)
    hit = next((w for w in expect if f" {w} " in said), None)
    if hit is not None:
        before = said[:said.index(f" {hit} ")].split()[-3:]
        return "wrong" if NEGATIONS & set(before) else "right"
    return "missing" if any(p in reply.lower() for p in not_known) else "wrong"


def keeper_on(store_url: str, backend) -> MemoryKeeper:
    def ask(messages: list, schema: dict) -> str:
        return short_question(backend, messages, EXTRACT_MAX_TOKENS, json_schema=schema,
                              side=True, temperature=0.0)
    return MemoryKeeper(PersonMemory(PeopleStore(store_url)), ask)


def conversation(backend, keeper: MemoryKeeper | None, person: str) -> Conversation:
    conv = Conversation(backend, load_persona(), ConversationConfig(**MANAGER))
    if keeper is not None:             # as ros/manager/memory.py wires them (a warm-up reads
        conv.remember_with(lambda: keeper.standing([person]),   # the standing note)
                           lambda line, late: keeper.line_note([person], line, late))
    return conv


@dataclass(frozen=True)
class Spoken:
    """How a question is spoken: its partial line, and when the line ends after it.

    `gap_s` None: the partial line is read whole before the line ends (a long pause).
    """

    partial: Callable[[str], str]
    gap_s: float | None = None
    name: str = "partials"
    early: Callable[[str], str] | None = None   # a partial read whole before `partial`


def all_but_last(question: str) -> str:
    """What a recogniser's last partial line holds of a question: all its words but the last."""
    return " ".join(question.split()[:-1])


def spoken_as(partials: bool, pause: float | None) -> Spoken | None:
    """How `--partials` and `--pause` have each question spoken (None: typed)."""
    if pause is None:
        return Spoken(all_but_last) if partials else None
    return Spoken(lambda question: question, pause,
                  "while speaking and at the pause" if partials else "at the pause",
                  early=all_but_last if partials else None)


def ask(conv: Conversation, question: str, *quiet: Conversation,
        spoken: Spoken | None = None) -> tuple[TurnResult, float | None]:
    """A turn and its time to the first token, once the background work of `quiet` is done.

    The first token (the local model's; None on a server) is the cost of reading the prompt
    alone: the first sentence also holds the answer's own words, and a fact told back ("You
    are planning to go to Japan.") may be longer than a guess.

    The two engines share the process's cores: a fold or a warm-up of the other one's would
    otherwise run beside this reply and slow it (the second run's figures measured that).
    `spoken`: the line is spoken, its partial line read ahead first (Conversation.hear_ahead,
    as the manager does with the speech node's partial lines).
    """
    for other in quiet:
        other.wait_idle(120.0)
    if spoken is not None and spoken.early is not None:   # while the person speaks
        conv.hear_ahead(spoken.early(question))
        for other in (conv, *quiet):
            other.wait_idle(120.0)
    partial = spoken.partial(question) if spoken is not None else ""
    if partial:                                 # the person speaks after the robot's reply
        conv.hear_ahead(partial)
        if spoken.gap_s is None:
            for other in quiet:
                other.wait_idle(120.0)
        else:
            time.sleep(spoken.gap_s)            # the silence that ends the line
    t0 = time.monotonic()
    result = conv.turn(question)
    first = getattr(conv.backend, "reply_times", {}).get("first_token")
    return result, round(first - t0, 3) if first is not None and first >= t0 else None


def tokens_read(backend) -> int | None:
    """The reply prompt's tokens the local model read anew (not in its cache); None: a server."""
    if getattr(backend, "prompt_tokens", None) is None:
        return None
    return backend.prompt_tokens - backend.reused_tokens


def run_engine(name: str, battery: dict, n_facts: int, spoken: Spoken | None = None) -> dict:
    """One engine's results: memory on and off, each on an engine of its own.

    (Each keeps its prompt cache: one llama.cpp context serving both conversations in turn
    would read each prompt anew; the first run shared one and measured that, not memory.)
    The battery's two halves are two people, each asked on conversations of their own.
    """
    backend, close = make_engine(name, warm_server=True)
    baseline, close_baseline = make_engine(name, warm_server=True)
    halves = {"tuned": battery["facts"][:n_facts], "held_out": battery.get("held_out", [])}
    folder = Path(tempfile.mkdtemp(prefix="vd-bench-memory-"))
    url = f"sqlite:///{folder / 'people.db'}"
    store = PeopleStore(url)
    people = {half: store.enrol(who, [], Consent(ConsentWay.ASKED, answer="Yes."))
              for half, who in (("tuned", "Dana"), ("held_out", "Fay"))}
    quiet = store.enrol("Eli", [], Consent(ConsentWay.ASKED, answer="Yes."))
    store.close()
    try:
        keeper = keeper_on(url, backend)                    # session 1
        t0 = time.monotonic()
        kept = {half: sum(len(keeper.heard([people[half]], f["tell"])) for f in facts)
                for half, facts in halves.items()}
        extract_s = (time.monotonic() - t0) / sum(map(len, halves.values()))
        keeper.memory.store.close()
        keeper = keeper_on(url, backend)                    # session 2: a restart
        rows = {half: asked_half(backend, baseline, keeper, people[half], facts,
                                 battery["not_known"], spoken)
                for half, facts in halves.items() if facts}
        everything = [w for facts in halves.values() for f in facts for w in f["expect"]]
        invented = []
        stranger = conversation(backend, keeper, quiet)
        for q in battery["nothing_told"]:
            reply = ask(stranger, q, spoken=spoken)[0].text
            invented.append({"ask": q, "reply": reply,
                             "invented": score(reply, everything, battery["not_known"])
                             == "right"})
        stranger.close()
        size = prompt_size(keeper, people["tuned"], halves["tuned"])
    finally:
        close()
        close_baseline()
    return {**summarise(name, rows, invented, kept, extract_s, size),
            "partials": spoken is not None and spoken.gap_s is None,
            "spoken": None if spoken is None else {"partial": spoken.name, "gap_s": spoken.gap_s}}


def asked_half(backend, baseline, keeper: MemoryKeeper, person: str, facts: list[dict],
               not_known: list[str], spoken: Spoken | None = None) -> list[dict]:
    """Session 2 for one person: each fact asked with memory on and off, interleaved.

    A reply not scored right keeps the note its prompt held, to see why.
    """
    on, off = conversation(backend, keeper, person), conversation(baseline, None, person)
    rows = []
    for i, f in enumerate(facts):                       # interleaved, alternating first
        order = [("on", on), ("off", off)] if i % 2 == 0 else [("off", off), ("on", on)]
        row = {"ask": f["ask"]}
        for method, conv in order:
            result, token_s = ask(conv, f["ask"], on, off, spoken=spoken)
            reply = result.text
            row[method] = {"reply": reply, "first_s": result.first_sentence_s,
                           "first_token_s": token_s, "overhead_s": round(result.overhead_s, 4),
                           "tokens_read": tokens_read(conv.backend),
                           "chars": result.prompt_chars,
                           "score": score(reply, f["expect"], not_known)}
        if row["on"]["score"] != "right":
            row["on"]["note"] = keeper.note([person], f["ask"])
        rows.append(row)
    for conv in (on, off):
        conv.close()
    return rows


def prompt_size(keeper: MemoryKeeper, person: str, facts: list[dict]) -> dict:
    """The note for a question, with the facts only, then with 50 remembered sessions too."""
    memory, question = keeper.memory, facts[0]["ask"]
    facts_only = len(keeper.note([person], question))
    for i in range(SESSIONS_FOR_SIZE):
        told = facts[i % len(facts)]["tell"]
        memory.session_ended(person, SessionSummary(1000.0 + i, 1001.0 + i,
                                                    f"session {i}: {told}"), "benchmark")
    return {"note_chars_facts_only": facts_only,
            "note_chars_50_sessions": len(keeper.note([person], question)),
            "note_cap": keeper.note_chars}


def summarise(name, halves, invented, kept, extract_s, size) -> dict:
    """The tuned half's figures as before (older records hold only it), the held-out apart."""
    rows = halves["tuned"]

    def counts(method, of=rows):
        scores = [r[method]["score"] for r in of]
        return {k: scores.count(k) for k in ("right", "wrong", "missing")}

    def p50(method, key="first_s"):
        xs = [r[method][key] for r in rows if r[method].get(key) is not None]
        return round(statistics.median(xs), 3) if xs else None
    on_s, off_s = p50("on"), p50("off")
    on_token, off_token = p50("on", "first_token_s"), p50("off", "first_token_s")
    read = {m: p50(m, "tokens_read") for m in ("on", "off")}
    held = halves.get("held_out", [])
    return {"engine": name, "facts": len(rows), "facts_kept_in_session_1": kept["tuned"],
            "extract_s_per_line": round(extract_s, 2),
            "memory_on": counts("on"), "memory_off": counts("off"),
            "held_out": {"facts": len(held), "facts_kept_in_session_1": kept["held_out"],
                         "memory_on": counts("on", held), "memory_off": counts("off", held),
                         "rows": held},
            "invented": sum(i["invented"] for i in invented), "asked_of_a_quiet_person":
            len(invented), "first_sentence_p50_s": {"on": on_s, "off": off_s},
            "first_sentence_cost": round(on_s / off_s - 1, 3) if on_s and off_s else None,
            "first_token_p50_s": {"on": on_token, "off": off_token}, "tokens_read_p50": read,
            "first_token_cost": round(on_token / off_token - 1, 3)
            if on_token and off_token else None,
            "prompt_chars_p50": {m: statistics.median(r[m]["chars"] for r in rows)
                                 for m in ("on", "off")},
            **size, "rows": rows, "invented_rows": invented}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="local,server")
    ap.add_argument("--facts", type=int, default=20)
    ap.add_argument("--partials", action="store_true",
                    help="each question spoken: its partial line (all words but the last) "
                         "read ahead first, as the manager does with the speech node's")
    ap.add_argument("--pause", type=float, metavar="GAP",
                    help="each question spoken as the speech node's defaults hear it: its "
                         "whole words as the pause's partial line, the line GAP s later "
                         "(with --partials: after all words but the last, read whole)")
    args = ap.parse_args()
    if args.pause is not None and not 0 <= args.pause <= 5:
        ap.error(f"--pause: a gap of 0 to 5 s, not {args.pause}")
    spoken = spoken_as(args.partials, args.pause)
    battery = yaml.safe_load(BATTERY.read_text())
    out = {"benchmark": "bench_memory", "engines": []}
    for name in args.engines.split(","):
        res = run_engine(name.strip(), battery, args.facts, spoken)
        out["engines"].append(res)
        on, off = res["memory_on"], res["memory_off"]
        held_on, held_off = res["held_out"]["memory_on"], res["held_out"]["memory_off"]
        cost = "n/a" if res["first_sentence_cost"] is None else \
            f"{res['first_sentence_cost']:+.1%}"
        mode = "" if spoken is None else f" ({spoken.name}" + \
            ("" if spoken.gap_s is None else f", line {spoken.gap_s} s later") + ")"
        print(f"{name}{mode}: memory on right/wrong/missing {on['right']}/{on['wrong']}/"
              f"{on['missing']}, off {off['right']}/{off['wrong']}/{off['missing']}; "
              f"held out: on {held_on['right']}/{held_on['wrong']}/{held_on['missing']}, "
              f"off {held_off['right']}/{held_off['wrong']}/{held_off['missing']}; "
              f"invented {res['invented']}/{res['asked_of_a_quiet_person']}; first sentence "
              f"p50 on {res['first_sentence_p50_s']['on']} s, off "
              f"{res['first_sentence_p50_s']['off']} s ({cost}); first token p50 on "
              f"{res['first_token_p50_s']['on']} s, off {res['first_token_p50_s']['off']} s; "
              f"note {res['note_chars_50_sessions']} chars with 50 sessions "
              f"(cap {res['note_cap']}); extraction {res['extract_s_per_line']} s a line",
              flush=True)
    print(json.dumps(out))
    record("bench_memory", out)


if __name__ == "__main__":
    main()
