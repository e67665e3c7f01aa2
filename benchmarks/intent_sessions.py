"""Intents inside conversations, for `bench_skills.py --parts intent_sessions`.

Each session of benchmarks/intent_battery.yaml runs on core/conversation.Conversation with the
turn worker of core/turn_taking.TurnTaker, as the manager runs them, without ROS: the person
says a line, the model under test replies, the person says the next line INTENT_PERSON_GAP_S
after the reply is complete. Two methods, interleaved session by session (the order swapped
each session):

- before_reply (ours, the product): TurnTaker's `on_person_line` reads each line before its
  reply (application/intents.LineIntents, the lines before it shown when it refers back), on the
  backend's side cache;
- after_reply (the baseline, the manager before this change): each line that got a reply is
  read afterwards, on a thread of its own, as a background call that gives way to replies,
  the line alone.

Scored by the rules stored with the battery: precision, recall, arguments right, intents late
(after the person's next line), delay from the line to the intent p50/p95, and the reply's
first sentence p50 (what reading first costs it); all lines and per half.
"""
from __future__ import annotations

import queue
import statistics
import time
from concurrent.futures import ThreadPoolExecutor


from answer_scores import score_answers
from chat_sessions import CHAT_MANAGER, FRAME, VISITOR
from vision_dialogue.llm.answers import AnswerSchema
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.application.intents import LineIntents, recent_lines
from vision_dialogue.llm.intent_reader import FoundIntent, IntentReader, IntentSpec
from vision_dialogue.core.persona import Persona
from vision_dialogue.core.proactive import ProactiveConfig, ProactivePolicy
from vision_dialogue.core.turn_taking import TurnHooks, TurnTaker
from vision_dialogue.llm.base import Preempted, short_question

METHODS = ("before_reply", "after_reply")
INTENT_PERSON_GAP_S = 1.0
"""The person's next line comes this long after the robot's reply is complete."""
REPLY_WAIT_S = 180.0
"""Longest wait for one reply on 2 cores before the session is given up."""
TURN_SETTINGS = {"reply_deadline": 120.0, "greet_first": False, "stream": True,
                 "proactive": "paper"}


def intent_specs(raw) -> list[IntentSpec]:
    """The battery's declared intents (as an intents_file declares them)."""
    out = []
    for i in raw:
        args = AnswerSchema.parse({"properties": i["arguments"]}) if i.get("arguments") \
            else None
        out.append(IntentSpec(i["name"], i["description"], args))
    return out


class SessionLLM:
    """The manager's short LLM questions on the model under test (skill_host.ask_llm)."""

    def __init__(self, backend, side: bool):
        self.backend, self.side = backend, side
        self.calls = 0

    def __call__(self, messages, max_tokens, json_schema=None) -> str:
        self.calls += 1
        if self.side or not getattr(self.backend, "preemptible", False):
            return short_question(self.backend, messages, max_tokens, json_schema,
                                  side=self.side, temperature=0.0)
        while True:                    # the old background call: replies go first
            try:
                return short_question(self.backend, messages, max_tokens, json_schema,
                                      temperature=0.0, background=True)
            except Preempted:
                time.sleep(0.2)


def run_session(backend, persona: Persona, specs, session: dict, method: str) -> list[dict]:
    """One session with one method: a row per line (what was published for it, when)."""
    conv = Conversation(backend, persona, ConversationConfig(**CHAT_MANAGER),
                        observer=lambda bgr: VISITOR)
    chunks: "queue.Queue" = queue.Queue()
    published: dict[str, tuple[FoundIntent, float]] = {}
    llm = SessionLLM(backend, side=method == "before_reply")
    reader = IntentReader(specs, llm)
    lines = LineIntents(reader, lambda: recent_lines(conv.timeline),
                        lambda found, line, speaker: published.setdefault(
                            line, (found, time.monotonic())),
                        warm=_warm_now(backend) if method == "before_reply" else None)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-intents")
    reads: dict[str, tuple[float, float]] = {}     # line -> (its reading began, ended)

    def read(text, speaker):
        began = time.monotonic()
        lines.read(text, speaker)
        reads[text] = (began, time.monotonic())
    hooks = TurnHooks(on_person_line=read) if method == "before_reply" else TurnHooks()
    turns = TurnTaker(conv, ProactivePolicy(ProactiveConfig("paper")), TURN_SETTINGS,
                      chunks.put, max_waiting=4, hooks=hooks)
    turns.start_worker()
    rows = []
    try:
        for item in session["lines"]:
            conv.add_frame(FRAME)
            said_at = time.monotonic()
            turns.utterance(item["said"], "visitor")
            first, final = _reply(chunks, item["said"])
            if method == "after_reply":            # the old way: after the reply, in the back
                pool.submit(_read_after, reader, item["said"], published, reads)
            rows.append({"said": item["said"], "expect": item["expect"],
                         "data": item.get("data") or {}, "half": session["half"],
                         "at": said_at, "first_s": first - said_at, "reply_s": final - said_at})
            time.sleep(INTENT_PERSON_GAP_S)
        pool.shutdown(wait=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        turns.close()
        conv.close()
    return _score_rows(rows, published, reads, llm.calls)


def _read_after(reader: IntentReader, text: str, published: dict, reads: dict) -> None:
    """The old way's reading of one line, after its reply."""
    began = time.monotonic()
    published.setdefault(text, (reader.read(text), time.monotonic()))
    reads[text] = (began, time.monotonic())


def _warm_now(backend):
    """The manager's warm-up of the intents' question, done before the session's first line.

    The manager reads it on its background pool when it starts, long before a person speaks;
    here the session starts at once, so the warm-up is waited for.
    """
    if not getattr(backend, "side_questions", False):
        return None
    return lambda messages: backend.warm(messages, side=True)


def _reply(chunks: "queue.Queue", line: str) -> tuple[float, float]:
    """When the reply to `line` began (its first sentence) and was complete."""
    first = None
    end = time.monotonic() + REPLY_WAIT_S
    while True:
        chunk = chunks.get(timeout=max(0.1, end - time.monotonic()))
        if chunk.in_reply_to != line:
            continue
        first = first or time.monotonic()
        if chunk.final:
            return first, time.monotonic()


def _score_rows(rows: list[dict], published: dict, reads: dict,
                llm_calls: int) -> list[dict]:
    """Each line's intent (read from it), scored; late = published after the next line.

    `reads`: when each line's reading began and ended: the delay's parts, the wait for the
    reading to start and the reading itself (the LLM's question, with its wait for the model).
    """
    for i, row in enumerate(rows):
        found, at = published.get(row["said"], (None, None))
        began, ended = reads.get(row["said"], (None, None))
        row["wait_s"] = round(began - row["at"], 2) if found and began else None
        row["read_s"] = round(ended - began, 2) if found and began else None
        row["got"] = found.intent if found else "none"
        row["got_data"] = found.data if found else {}
        row["delay_s"] = round(at - row["at"], 2) if found else None
        next_at = rows[i + 1]["at"] if i + 1 < len(rows) else float("inf")
        row["late"] = bool(found) and at > next_at
        right, wrong, missing = score_answers(row["data"], row["got_data"])
        row["args_ok"] = (wrong == missing == 0) if found and row["got"] == row["expect"] \
            else None
        row["llm_calls"] = llm_calls if i == 0 else 0
    return rows


def _pct(values, q) -> float | None:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 2) if values else None


def session_scores(rows: list[dict]) -> dict:
    """Precision, recall, arguments, lateness and delays over `rows`."""
    predicted = [r for r in rows if r["got"] != "none"]
    positives = [r for r in rows if r["expect"] != "none"]
    correct = [r for r in predicted if r["got"] == r["expect"]]
    args = [r["args_ok"] for r in correct if r["args_ok"] is not None]
    delays = [r["delay_s"] for r in predicted]
    return {"lines": len(rows), "requests": len(positives),
            "precision": round(len(correct) / len(predicted), 2) if predicted else 1.0,
            "recall": round(len(correct) / len(positives), 2) if positives else 1.0,
            "false_alarms": len(predicted) - len(correct),
            "args_right": f"{sum(args)}/{len(args)}",
            "late": sum(r["late"] for r in rows),
            "delay_p50": _pct(delays, 0.5), "delay_p95": _pct(delays, 0.95),
            "wait_p50": _pct([r["wait_s"] for r in predicted if r["wait_s"] is not None], 0.5),
            "read_p50": _pct([r["read_s"] for r in predicted if r["read_s"] is not None], 0.5),
            "read_p95": _pct([r["read_s"] for r in predicted if r["read_s"] is not None], 0.95),
            "first_sentence_p50": round(statistics.median(r["first_s"] for r in rows), 2),
            "llm_calls": sum(r["llm_calls"] for r in rows)}


def intent_sessions_part(backend, battery: dict, persona: Persona, verbose: bool) -> dict:
    """Every session with both methods, interleaved; scores per method, all and per half."""
    specs = intent_specs(battery["intents_declared"])
    rows: dict[str, list[dict]] = {m: [] for m in METHODS}
    for k, session in enumerate(battery["sessions"]):
        for method in (METHODS if k % 2 == 0 else METHODS[::-1]):
            got = run_session(backend, persona, specs, session, method)
            rows[method] += got
            if verbose:
                for r in got:
                    print(f"[{method}] {r['said'][:50]:50} {r['expect']:13} -> {r['got']:13}"
                          f" {r['got_data']} {r['delay_s']} s (wait {r['wait_s']}, read "
                          f"{r['read_s']}){' LATE' if r['late'] else ''}", flush=True)
    out = {}
    for method, rs in rows.items():
        out[method] = session_scores(rs)
        for half in sorted({r["half"] for r in rs}):
            out[method][f"half_{half}"] = session_scores([r for r in rs if r["half"] == half])
    return out


def print_intent_sessions(result: dict) -> None:
    """The intent sessions' table: each method, all lines and each half."""
    rows = [(key, m, part, r) for key, val in result.items()
            if key.startswith("intent_sessions/") for m, scores in val.items()
            for part, r in [("all", scores)] + [(k.replace("_", " "), v) for k, v in
                                                sorted(scores.items()) if k.startswith("half_")]]
    if not rows:
        return
    print("\n| engine | method | lines | precision | recall | false alarms | arguments right "
          "| late | delay p50 / p95 (s) | reply's first sentence p50 (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, m, part, r in rows:
        print(f"| {key.split('/')[1]} {part} | {m} | {r['lines']} | {r['precision']} | "
              f"{r['recall']} | {r['false_alarms']} | {r['args_right']} | {r['late']} | "
              f"{r['delay_p50']} / {r['delay_p95']} | {r['first_sentence_p50']} |")
