"""Keeping a small model on the question asked: a last note that restates it for the robot.

A 0.5B text model reads a long prompt of notes and loses the question: to "Am I holding a cup
of coffee?" it said "No, I am not holding a cup of coffee." (the person's "I" taken as its own),
and to "What did you see at the very beginning?" it described the present. The fix is where
the model looks last: right before it answers, one short system note restates the question
from the robot's side ("is the person holding ..."), says how to answer it (yes or no first;
from memory, not from now) and, for a question about the past, gives the memories it needs.
The note is for this reply only; it never enters the timeline.
"""
from __future__ import annotations

import re
from typing import Sequence

YES_NO_START = ("am", "is", "are", "was", "were", "do", "does", "did", "can", "could", "will",
                "would", "have", "has", "had", "should", "shall", "may", "might", "must",
                "isn't", "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't", "can't",
                "couldn't", "won't", "wouldn't", "haven't", "hasn't")
"""First words of a question answered with yes or no ("Am I holding a cup?")."""

_REPEAT_ASKED = re.compile(r"\b(say (that|it) again|repeat (that|it|yourself)|come again|"
                           r"what did you (just )?say|pardon|one more time)\b", re.I)
_START = re.compile(r"\b(beginning|begin|began|start|started|first|at first)\b", re.I)
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
# the person's words about themselves, as the robot would put them (the person's "I" is not
# the robot); the robot's "you" becomes "you" (the robot) in a note addressed to it
_PERSON = [(re.compile(p, re.I), r) for p, r in (
    (r"\bam i\b", "is the person"), (r"\bi am\b", "the person is"), (r"\bi'm\b", "the person is"),
    (r"\bwas i\b", "was the person"), (r"\bi was\b", "the person was"),
    (r"\bi have\b", "the person has"), (r"\bi've\b", "the person has"),
    (r"\bdo i\b", "does the person"), (r"\bdid i\b", "did the person"),
    (r"\bcan i\b", "can the person"), (r"\bi\b", "the person"), (r"\bmyself\b", "themselves"),
    (r"\bmy\b", "the person's"), (r"\bmine\b", "the person's"), (r"\bme\b", "the person"))]


YES_NO_NOTE = 'Begin your answer with "Yes" or "No", then say it to them in a few words.'
OPEN_NOTE = "Answer exactly that, to them, in one or two short sentences."
SAID_NOTE = "Reply to that, to them, in one short sentence."
PAST_NOTE = "From your memory, not from what you see now:"
NOT_NOW_NOTE = "It is about earlier, not now."
FOCUS_INSTRUCTIONS = (YES_NO_NOTE, OPEN_NOTE, SAID_NOTE, PAST_NOTE, NOT_NOW_NOTE)
"""The note's fixed words (a reply that reads them out is not speech)."""


def question_of(text: str) -> str:
    """The question in an utterance: its last sentence ending with '?', else its last one."""
    sentences = [s.strip() for s in _SENTENCE.findall(text or "") if s.strip()]
    asked = [s for s in sentences if s.endswith("?")]
    return (asked or sentences or [""])[-1]


def is_yes_no(text: str) -> bool:
    """Whether the utterance's question is answered with yes or no."""
    words = re.findall(r"[a-z']+", question_of(text).lower().replace("’", "'"))
    return bool(words) and words[0] in YES_NO_START and question_of(text).endswith("?")


def asks_to_repeat(text: str) -> bool:
    """Whether the person asks the robot to say its last line again."""
    return bool(_REPEAT_ASKED.search(text or ""))


def from_the_robots_side(question: str) -> str:
    """The person's question with their "I", "my", "me" as "the person" (for the robot's note)."""
    out = question
    for pattern, repl in _PERSON:
        out = pattern.sub(repl, out)
    return out[:1].lower() + out[1:]


def focus_note(text: str, past: bool = False, memories: Sequence[str] = ()) -> str:
    """The note that goes last in a text model's prompt for the reply to `text`.

    past: the question is about earlier moments; `memories` (oldest first) are what the robot
    remembers seeing, the ones it needs are given in the note.
    """
    question = question_of(text)
    if not question:
        return ""
    if not question.endswith("?"):
        return f'[The person says: "{from_the_robots_side(text.strip())}" {SAID_NOTE}]'
    parts = [f'The person asks: "{from_the_robots_side(question)}"']
    if past:
        wanted = list(memories[:1]) if _START.search(question) else list(memories[-3:])
        if wanted:
            parts.append(f"{PAST_NOTE} " + " ".join(m.rstrip(".") + "." for m in wanted))
        else:
            parts.append(NOT_NOW_NOTE)
    parts.append(YES_NO_NOTE if is_yes_no(text) else OPEN_NOTE)
    return "[" + " ".join(parts) + "]"
