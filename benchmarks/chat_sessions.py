"""Chats with a purpose on the real conversation, for `bench_skills.py --parts chats`.

The Chat skill (application/skills.run_chat) runs on core/conversation.Conversation, as the manager
hosts it, without ROS: the purpose note goes into the prompt, the robot's opening and replies
come from the model under test, and a scripted person (benchmarks/chat_battery.yaml) answers
each robot line with their next line. The camera shows the visitor in front of the robot (a
frame before each of their lines, noted as the observer words it). Scored by the rules stored
with the battery.
"""
from __future__ import annotations

import json
import queue
import re
import statistics
import time

import numpy as np

from answer_scores import score_answers
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.persona import Persona
from vision_dialogue.application.skills import ChatRole, Control, run_chat
from vision_dialogue.core.conversation_types import SkillOutcome
from vision_dialogue.llm.base import short_question

#: the demo's manager settings (config/demo_setup.yaml), as bench_dialogue runs them
CHAT_MANAGER = dict(n=4, m=3, max_reply_tokens=60, stream=True, focus_note="soft")
VISITOR = "one person, close, in the middle"
"""What the camera shows during every chat, as the observer words it: the visitor in front."""
FRAME = np.full((120, 160, 3), 128, np.uint8)
CHAT_DEADLINE_S = 300.0
"""Longest a chat may run (the script ends it well before on 2 cores)."""


class ChatSessionHost:
    """The manager as a Chat's host, played in process; the person's lines from a script."""

    def __init__(self, conversation: Conversation, backend, script):
        self.conversation, self.backend = conversation, backend
        self.script = list(script)
        self.robot_lines: list[str] = []
        self.exchanges: "queue.Queue[tuple[str, str]]" = queue.Queue()
        self.heard: float | None = None
        self.llm_calls = 0

    @property
    def done_talking(self) -> bool:
        """The person has said every line and the robot answered the last."""
        return not self.script and self.exchanges.empty()

    def say(self, text, control, feedback):
        self.robot_lines.append(text)
        return SkillOutcome("spoken")

    def listen(self, control):
        return None

    def seen(self) -> str:
        return ""

    def ask_llm(self, messages, max_tokens, json_schema=None):
        self.llm_calls += 1
        return short_question(self.backend, messages, max_tokens, json_schema,
                              temperature=0.0)

    def begin_chat(self, role: ChatRole) -> None:
        c = self.conversation
        c.builder.notes["purpose"] = c.persona.purpose_note.format(
            name=role.name, instruction=role.instruction)

    def end_chat(self) -> None:
        self.conversation.builder.notes.pop("purpose", None)

    def start_turn(self, text, instruction=""):
        if text is None:
            reply = self.conversation.remark(instruction=instruction).text
        else:
            self.heard = time.monotonic()
            self.conversation.add_frame(FRAME)      # a frame every few seconds, as a camera
            reply = self.conversation.turn(text).text
        self.robot_lines.append(reply)
        self.exchanges.put((text or "", reply))

    def next_exchange(self, control, timeout):
        if self.exchanges.empty() and self.script:       # the robot spoke: the person answers
            self.start_turn(self.script.pop(0))
        try:
            return self.exchanges.get_nowait()
        except queue.Empty:
            return None

    def present(self):
        return True

    def heard_at(self):
        return self.heard

    def still_needed(self, needs: str) -> None:
        self.conversation.prompt.needs = needs


def recited(opening: str, instruction: str) -> bool:
    """Whether the opening reads the instruction out (over half its longer words in it)."""
    words = {w for w in re.findall(r"[a-z']+", instruction.lower()) if len(w) >= 4}
    said = set(re.findall(r"[a-z']+", opening.lower()))
    return bool(words) and len(words & said) / len(words) > 0.5


_GENERIC = set("visitor visitor's person person's guest guest's they their them what which "
               "whether many much come comes need needs want wants have with going from".split())
"""Words of a result's description that name no result ("whether they want sugar": sugar)."""


def asks_again(reply: str, keys: dict) -> bool:
    """Whether the robot's reply asks for a result the chat already had.

    One of its questions (a sentence that ends with "?") names the result by its key or a
    word of its description: "Tim, what's your first name?" after the name was given, not
    "Thank you for your name. Which floor?".
    """
    asked = set(re.findall(r"[a-z']+", " ".join(re.findall(r"[^.!?]*\?", reply.lower()))))

    def names(key: str, about: str) -> set[str]:
        words = re.findall(r"[a-z']+", str(about).lower())
        return {key.lower()} | {w for w in words if len(w) >= 4 and w not in _GENERIC}
    return any(asked & names(k, about) for k, about in keys.items())


class _Replies:
    """The chat's feedback, kept: each reply to a person's line and the results after it."""

    def __init__(self, described: dict):
        self.described = described          # result -> its description
        self.heard = False                   # the next reply answers a person's line
        self.reply = ""                      # that reply, until its results come
        self.asked_again: list[str] = []

    def __call__(self, stage: str, text: str, results: dict) -> None:
        if stage == "heard":
            self.heard = True
        elif stage == "replied":
            self.reply, self.heard = (text if self.heard else ""), False
        elif stage == "results" and self.reply:
            had = {k: v for k, v in self.described.items() if k in results}
            if asks_again(self.reply, had):
                self.asked_again.append(self.reply)
            self.reply = ""


def run_chat_item(backend, persona: Persona, item: dict) -> dict:
    """One chat of the battery in a new conversation; its scored row."""
    role = ChatRole.parse(item["name"], json.dumps({
        "instruction": item["instruction"], "results": item["results"]}))
    conv = Conversation(backend, persona, ConversationConfig(**CHAT_MANAGER),
                        observer=lambda bgr: VISITOR)
    conv.add_frame(FRAME)
    host = ChatSessionHost(conv, backend, item["person"])
    first = item.get("first", "")
    replies = _Replies({k: v.get("description", "") for k, v in item["results"].items()})
    t0 = time.perf_counter()
    try:
        out = run_chat(host, Control(cancelled=lambda: host.done_talking,
                                     deadline=time.monotonic() + CHAT_DEADLINE_S),
                       replies, role, True, first, 10.0, persona.chat_opening_instruction)
    finally:
        conv.close()
    s = time.perf_counter() - t0
    expect = item["expect"]
    right, wrong, missing = score_answers(expect, out.data)
    status = "unfinished" if out.status == "cancelled" else out.status
    opening = host.robot_lines[0] if host.robot_lines and not first else ""
    return {"name": item["name"], "half": item["half"], "status": status, "results": out.data,
            "right": right, "wrong": wrong, "missing": missing,
            "all_right": right == len(expect) and status == "done",
            "robot_lines": len(host.robot_lines), "lines": host.robot_lines,
            "asked_again": len(replies.asked_again), "asked_again_lines": replies.asked_again,
            "opening_asks": "?" in opening if opening else None,
            "opening_recited": recited(opening, item["instruction"]) if opening else None,
            "s": round(s, 2), "llm_calls": host.llm_calls}


def chat_scores(rows: list[dict]) -> dict:
    """The battery's figures, all chats and per half."""
    def of(rs):
        if not rs:
            return {"chats": 0}
        openings = [r for r in rs if r["opening_asks"] is not None]
        return {"chats": len(rs), "done_all_right": sum(r["all_right"] for r in rs),
                "right": sum(r["right"] for r in rs), "wrong": sum(r["wrong"] for r in rs),
                "missing": sum(r["missing"] for r in rs),
                "ended_wrongly": sum(r["status"] not in ("done", "unfinished") for r in rs),
                "unfinished": sum(r["status"] == "unfinished" for r in rs),
                "robot_lines_p50": statistics.median(r["robot_lines"] for r in rs),
                "asked_again": sum(r["asked_again"] for r in rs),
                "openings_asking": sum(bool(r["opening_asks"]) for r in openings),
                "openings_recited": sum(bool(r["opening_recited"]) for r in openings),
                "openings": len(openings),
                "s_p50": round(statistics.median(r["s"] for r in rs), 1)}
    out = of(rows)
    for half in sorted({r["half"] for r in rows}):
        out[f"half_{half}"] = of([r for r in rows if r["half"] == half])
    return out


def chats_part(backend, chats: list[dict], persona: Persona, verbose: bool) -> dict:
    """Every chat of the battery, each in its own conversation."""
    rows = []
    for item in chats:
        row = run_chat_item(backend, persona, item)
        rows.append(row)
        if verbose:
            print(f"[chat] {item['name']} ({item['half']}): {row['status']} {row['results']} "
                  f"right {row['right']} wrong {row['wrong']} in {row['robot_lines']} robot "
                  f"lines, {row['s']} s; robot: {row['lines']}; asked again: "
                  f"{row['asked_again_lines']}", flush=True)
    return {"ours": chat_scores(rows)}
