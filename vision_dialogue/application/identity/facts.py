"""Facts a person says about themselves, taken from their lines, and the note that recalls them.

Extraction is one short LLM question off the reply path, its answer constrained to
`FACTS_SCHEMA` (as an Ask's answer is). A fact is kept only when it is grounded in the
person's own words: every content word of it (bar the topic) is in the line, so a model that
invents ("works as a doctor" from "I like the weather") keeps nothing. What a fact is about
is one of `TOPICS`: a single-valued topic (where they work) holds one fact, and a new one
replaces it ("I moved to building C"); the others (hobbies, family) hold one per fact.

The recall notes go into the reply prompt when a known person is in view or speaking: a
standing note while they are in view (the newest facts, then the last session's summary, cut
at `cap` characters), and for each line the facts it asks about (by shared words and by
their topic's cue words), told again right before it.
"""
from __future__ import annotations

import json
import re
from typing import Callable

from vision_dialogue.application.identity.memory import Fact, Recall
from vision_dialogue.application.identity.words import content_stems, in_first_person, words
from vision_dialogue.core.conversation_types import LineNote
from vision_dialogue.core.perspective import stem

#: what a fact may be about; True: one fact at a time (a new one replaces it)
TOPICS: dict[str, bool] = {
    "work": True, "workplace": True, "home": True, "study": True, "origin": True,
    "hobby": False, "family": False, "pet": False, "likes": False, "dislikes": False,
    "plans": False, "other": False,
}

#: the words of a question that ask about a topic though none of its facts' words are in
#: it ("What do I do for a living?" of "is a nurse"); whole words or phrases of the line
TOPIC_CUES: dict[str, re.Pattern] = {topic: re.compile(rf"\b(?:{cues})\b", re.IGNORECASE)
                                     for topic, cues in {
    "work": r"job|for a living|profession|occupation|career",
    "workplace": r"workplace|office|company|employer|where do i work",
    "home": r"live|home|house|address",
    "study": r"study|studies|student|school|university|college|course|degree",
    "origin": r"come from|born|country|nationality|grew up|where am i from",
    "hobby": r"hobby|hobbies|free time|spare time|for fun|sports?|weekends?|enjoy",
    "family": r"family|daughter|son|wife|husband|child|children|kids?|mother|father"
              r"|brother|sister|parents?",
    "pet": r"pets?|dog|cat|animals?",
    "likes": r"like|favou?rite|drink|eat|food|enjoy",
    "dislikes": r"dislike|hate|can't stand|don't like|do not like",
    "plans": r"plans?|planning|trip|travel(?:l?ing)?|next week|next month|going to",
}.items()}

#: the most facts a line's note tells: each costs the reply its tokens, and "What sport do I
#: do?" matches every hobby
LINE_NOTE_FACTS = 2

FACTS_SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "maxItems": 3, "items": {
        "type": "object",
        # the fact first, then what it is about: a small model that picks the topic first
        # takes the first one offered ("work") for everything and then bends the fact to it
        "properties": {"fact": {"type": "string", "maxLength": 120},
                       "topic": {"type": "string", "enum": list(TOPICS)}},
        "required": ["fact", "topic"]}}},
    "required": ["facts"]}

EXTRACT_INSTRUCTION = (
    "You read one line a person said to a robot. List the facts the person states about "
    "themselves (their work, where they work, home, studies, hobbies, family, pets, likes, "
    "plans), each in a few of the person's own words written about them, such as \"loves "
    "sailing\" or \"works in building B\". Questions, greetings and facts about other things "
    "are not facts about the person. Answer with JSON: {\"facts\": [{\"fact\": ..., "
    "\"topic\": ...}]}, or {\"facts\": []} when there are none.")

SUMMARY_SCHEMA = {"type": "object",
                  "properties": {"summary": {"type": "string", "maxLength": 200}},
                  "required": ["summary"]}

SUMMARY_INSTRUCTION = (
    "You read what one person said to a robot in one conversation. In one short phrase, say "
    "what they talked about, such as \"her sailing trip and her new job\". Answer with "
    "JSON: {\"summary\": ...}.")

#: a person asking what the robot knows of them: their note then holds everything kept
ASKS_WHAT_IS_KNOWN = re.compile(
    r"\bwhat (?:do|did) you (?:know|remember) (?:about|of) me\b"
    r"|\bdo you (?:still )?remember (?:me|what i|what we|where i)\b"
    r"|\bwhat did we talk about\b", re.IGNORECASE)


def grounded(fact_text: str, line: str) -> bool:
    """Whether every content word of the fact is in the person's line (stems compared)."""
    said = {stem(w) for w in words(line)}
    content = content_stems(fact_text)
    return bool(content) and content <= said


def extraction_messages(line: str) -> list[dict]:
    """The question that extracts facts from one line of the person's."""
    return [{"role": "system", "content": EXTRACT_INSTRUCTION},
            {"role": "user", "content": line}]


def parse_facts(reply: str, line: str, said_when: float) -> list[Fact]:
    """The grounded facts of the model's `reply` to `extraction_messages(line)`.

    A reply that is not the schema's JSON gives none (extraction is best effort: the
    conversation never waits for it); a fact not grounded in the line is dropped.
    """
    try:
        items = json.loads(reply)["facts"]
    except (ValueError, TypeError, KeyError):
        return []
    facts = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        topic, text = item.get("topic"), " ".join(str(item.get("fact", "")).split())
        if topic not in TOPICS or not text or not grounded(text, line):
            continue
        about = topic if TOPICS[topic] else f"{topic}: {text.lower()}"
        facts.append(Fact(about, text, said_when))
    return facts


def summary_messages(lines: list[str]) -> list[dict]:
    """The question that sums up a session from the person's own lines (newest 20)."""
    said = "\n".join(f"- {line}" for line in lines[-20:])
    return [{"role": "system", "content": SUMMARY_INSTRUCTION},
            {"role": "user", "content": said}]


def parse_summary(reply: str) -> str:
    """The summary of the model's JSON answer, one line; "" for anything else."""
    try:
        summary = json.loads(reply)["summary"]
    except (ValueError, TypeError, KeyError):
        return ""
    return " ".join(summary.split())[:200] if isinstance(summary, str) else ""


def asked_about(line: str) -> Callable[[Fact], int]:
    """How much `line` asks about a fact: the words they share, and two for its topic's cue.

    A cue names the topic, so it outweighs one crudely shared stem ("for a living" shares
    "liv" with "lives in Ghent" but asks about work); it counts only in a line about the
    person themselves ("What do I like to drink?", not "Do you like cats?"). The line is
    read once; the function scores each fact.
    """
    heard, about_them = content_stems(line), in_first_person(line)
    cued = {topic for topic, cue in TOPIC_CUES.items() if about_them and cue.search(line)}

    def score(fact: Fact) -> int:
        shared = len(heard & content_stems(fact.text))
        return shared + (2 if fact.about.split(":", 1)[0] in cued else 0)
    return score


def recall_note(recall: Recall, line: str, cap: int) -> str:
    """The reply prompt's note of what is remembered of one person, at most `cap` characters.

    The facts `line` asks about first (`asked_about`, the most first), then the newest; the
    last session's summary if there is room. Empty when nothing is remembered.
    """
    facts = sorted(recall.facts, key=asked_about(line),
                   reverse=True)                        # stable: newest first on ties
    return _note(recall, facts, cap)


def standing_note(recall: Recall, cap: int) -> str:
    """The note of one person for as long as they are in view.

    The newest facts and the last session's summary, at most `cap` characters: the same
    whatever is said, so a local model reads it once (llama.cpp's prefix cache); `line_note`
    adds what a line asks about.
    """
    return _note(recall, list(recall.facts), cap)


def line_note(recall: Recall, line: str, cap: int, told: str = "") -> LineNote:
    """The facts `line` asks about most (`asked_about`), told again right before it.

    Only the best matches (ties kept, newest first, `LINE_NOTE_FACTS` at most), whether or
    not the standing note told them: a small model picks the fact asked about out of a long
    note badly ("What do I love baking?" with "loves baking bread" the 5th of 15 facts: "You
    love cooking."). `told`: the standing note, where only what it lacks is to be told (a
    note read after the line's last word costs the reply's first word its time). An empty
    note when none matches.
    """
    score = asked_about(line)
    scored = [(score(f), spoken(f.text)) for f in recall.facts]
    best = max((n for n, _ in scored), default=0)
    asked = [text for n, text in scored
             if best and n == best and text not in told][:LINE_NOTE_FACTS]
    head = f"{recall.name or 'this person'} told you: "
    kept = _fitting(head, asked, cap)
    return LineNote(f"{head}{'; '.join(kept)}.", frozenset(
        f"{recall.person_id}: {text}" for text in kept)) if kept else LineNote()


def spoken(fact_text: str) -> str:
    """A fact as a note tells it: without a last full stop, quoted where it says "I".

    A model read "Dana told you: I run marathons" as the robot's own words.
    """
    text = fact_text.strip().rstrip(".").strip()
    return f'"{text}"' if in_first_person(text) else text


def _fitting(head: str, texts: list[str], cap: int) -> list[str]:
    """The first `texts` that, as `head` + "a; b; c.", keep within `cap` characters."""
    kept: list[str] = []
    for text in texts:
        if len(f"{head}{'; '.join(kept + [text])}.") > cap:
            break
        kept.append(text)
    return kept


def _note(recall: Recall, facts: list[Fact], cap: int) -> str:
    """The note telling `facts` in their order while they fit `cap` ("" when none fits)."""
    if not facts and recall.last_session is None:
        return ""
    name = recall.name or "this person"
    note = f"You have met {name} before."
    head = f"{note} {name} told you: "
    told = _fitting(head, [spoken(f.text) for f in facts], cap)
    if told:
        note = f"{head}{'; '.join(told)}."
    if recall.last_session is not None:
        last = f"{note} Last time you talked about: {recall.last_session.summary}"
        if len(last) <= cap:
            note = last
    return note if len(note) <= cap else ""
