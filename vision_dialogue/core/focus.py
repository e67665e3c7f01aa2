"""Keeping a small model on the question asked: a note right before it, for this reply only.

A 0.5B text model reads a long prompt of notes and loses the question: it says "yes" to
anything, and to "What did you see at the very beginning?" it described the present. Right
before the person's line, one short system note says how to answer (yes or no, as its eyes
tell; from memory, not from now) and, for a question about the past, gives the memories it
needs; the question itself stays the last thing the model reads. The note is for this reply
only; it never enters the timeline.
"""
from __future__ import annotations

import re
from enum import Enum
from typing import Collection, Sequence

YES_NO_START = ("am", "is", "are", "was", "were", "do", "does", "did", "can", "could", "will",
                "would", "have", "has", "had", "should", "shall", "may", "might", "must",
                "isn't", "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't", "can't",
                "couldn't", "won't", "wouldn't", "haven't", "hasn't")
"""First words of a question answered with yes or no ("Am I holding a cup?")."""

_REPEAT_ASKED = re.compile(r"\b(say (that|it) again|repeat (that|it|yourself)|come again|"
                           r"what did you (just )?say|pardon|one more time)\b", re.I)
_START = re.compile(r"\b(beginning|begin|began|start|started|first|at first)\b", re.I)
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
_ASKS_TO = re.compile(r"^(?:please\s+)?(?:can|could|would|will|won't)\s+(?:you|u)\s+"
                      r"(?:please\s+|just\s+|also\s+)?([a-z]+)")


YES_NO_NOTE = "Answer the next question with yes or no, as your eyes tell you."
SOFT_YES_NO_NOTE = ('If the next question can be answered with yes or no, start with "Yes" or '
                    '"No", then say a few words more, as your eyes tell you.')
STYLES = ("strict", "soft")
"""How the yes/no note is put: `strict` for the 0.5B (it otherwise says yes to anything);
`soft` for larger models, which the strict note made answer a bare "No." and lose the thread
(measured on the battery, docs/results.md)."""
PAST_NOTE = "From your memory, not from what you see now:"
NOT_NOW_NOTE = "The next question is about earlier, not now."
NOW_NOTE = "In front of you, your eyes see now:"
ABOUT_THE_PERSON_NOTE = 'They ask about themselves: answer about them with "you", not "I".'
NOT_YOURS_NOTE = "You are a robot: you wear no clothes, and what you see is not yours."
UNSURE_NOTE = ('Your eyes cannot tell these two apart: start with "Maybe", then say a few '
               'words more.')
FOCUS_INSTRUCTIONS = (YES_NO_NOTE, SOFT_YES_NO_NOTE, PAST_NOTE, NOT_NOW_NOTE, NOW_NOTE,
                      ABOUT_THE_PERSON_NOTE, NOT_YOURS_NOTE, UNSURE_NOTE)
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


def asks_to_act(text: str, verbs: Collection[str]) -> bool:
    """Whether a yes/no-looking question asks the robot to do one of its actions.

    "Could you wave at me?" is a request when the robot can wave (a tool's verb, see
    application/robot_tools.action_words), not a question to answer with yes: the yes/no note made
    the 1.5B model say "Yes." and not call the tool (benchmarks/bench_robot_tools.py).
    """
    m = _ASKS_TO.match(question_of(text).lower())
    return bool(m and verbs) and (m.group(1) in verbs or m.group(1).rstrip("s") in verbs)


_ABOUT_THE_PERSON = re.compile(r"^(?:(?:what|how|where|why)\s+)?(?:am|do|did|was|have|can|"
                               r"could|should)\s+i\b|\b(?:is|are|was|were)\s+my\b|"
                               r"\bbehind me\b|\bmy (?:clothes|suit|outfit|shirt|hair|face)\b")
_ABOUT_THE_ROBOT = re.compile(r"^(?:(?:what|how|where|why)\s+)?(?:are|were|do|did|have|can|"
                              r"could|will|would)\s+you\b")


class Person(Enum):
    """Whom a question is about, by its pronouns."""

    FIRST = "first"      # the person speaks of themselves: I, me, my
    SECOND = "second"    # of the robot: you, your


def asked_about(text: str) -> Person | None:
    """Whom the question is about: FIRST ("Am I smiling?"), SECOND ("Are you tired?"), None.

    The 1.5B model echoed the question's pronoun ("Am I wearing orange?" -> "Yes, I am wearing
    orange."): a third of the perspective battery right. A question that is about both ("Can
    you see me?") or neither gets None.
    """
    question = question_of(text).lower().replace("’", "'")
    person, robot = bool(_ABOUT_THE_PERSON.search(question)), bool(
        _ABOUT_THE_ROBOT.search(question))
    return Person.FIRST if person and not robot else Person.SECOND if robot and not person \
        else None


def asks_to_repeat(text: str) -> bool:
    """Whether the person asks the robot to say its last line again."""
    return bool(_REPEAT_ASKED.search(text or ""))


def _asked_words(question: str) -> set[str]:
    """The question's words of three letters or more, without a plural "s" ("cats" -> cat)."""
    return {w.rstrip("s") for w in re.findall(r"[a-z]+", question.lower()) if len(w) > 2}


def objects_asked_about(question: str, objects: str) -> str:
    """The parts of an objects note that name a word of the question; "" if none.

    "Is there a cat with us?" and "a dog or a cat in the middle; a cup" -> "a dog or a cat in
    the middle".
    """
    asked = _asked_words(question)
    return "; ".join(part for part in objects.split("; ")
                     if asked & {w.rstrip("s") for w in re.findall(r"[a-z]+", part.lower())
                                 if w not in _PLACE_WORDS})


_PLACE_WORDS = {"maybe", "the", "left", "right", "middle", "two", "three", "four"}
_WORN = re.compile(r"\b(?:wear|wears|wearing|wore|clothes|clothing|suit|outfit|shirt|t-shirt|"
                   r"jacket|coat|dress|sweater|jumper|hoodie|uniform)\b")
_OWNED = re.compile(r"^(?:do|did|does)\s+you\s+(?:have|own)\b|\byours\b")
_WEARING = re.compile(r"\bwearing ([a-z][a-z -]*?)\s*(?:[,;(]|$)")


def worn_asked_about(question: str, observation: str) -> str:
    """What the observation says the person wears, when the question asks about clothes.

    "Is my suit orange?" with "one person, close, in the middle, wearing orange and black"
    -> "the person's clothes are orange, with some black" (the 1.5B said "No, your suit is
    not orange." with only the frame's note, further up, saying it). "" when either says
    nothing of clothes.
    """
    worn = _WEARING.search(observation or "")
    if not worn or not _WORN.search(question.lower()):
        return ""
    most, _, some = worn.group(1).partition(" and ")     # the observer's "X and Y": X first
    return f"the person's clothes are {most}" + (f", with some {some}" if some else "")


def seen_now(question: str, objects: str, observation: str) -> str:
    """What the eyes see that the question asks about: its objects, the person's clothes."""
    return "; ".join(p for p in (objects_asked_about(question, objects),
                                 worn_asked_about(question, observation)) if p)


_PAIR = re.compile(r"\b([a-z]+?)s? or (?:an? )?([a-z]+?)s?\b")


def names_one_of_a_pair(question: str, seen: str) -> bool:
    """Whether the question names one side of a hedged pair the eyes see ("a dog or a cat").

    "Is it a dog?" with "a dog or a cat in the middle": the detector could not tell them
    apart (common/objects.py), and the 1.5B answered "Yes, it is a dog." after "Yes, there
    is a cat with us." under the yes/no note; told to start with "Maybe" it said "Maybe it is
    a dog." (the dialogue battery).
    """
    asked = _asked_words(question)
    return any(len(asked & set(pair)) == 1 for pair in _PAIR.findall(seen.lower()))


def asks_what_is_its_own(question: str) -> bool:
    """Whether a question about the robot asks what it wears or has ("Do you have a cat?").

    The 1.5B took what it saw for its own: "Yes, I am wearing orange." with the person in an
    orange suit, "Yes, I have a cat." with a cat in view (the perspective battery).
    """
    q = question.lower().replace("’", "'")
    return asked_about(q) is Person.SECOND and bool(_WORN.search(q) or _OWNED.search(q))


def focus_note(text: str, past: bool = False, memories: Sequence[str] = (),
               style: str = "strict", objects: str = "", acts: Collection[str] = (),
               observation: str = "", answered: str = "") -> str:
    """The note that goes right before the person's line in a text model's prompt ("" if none).

    The question stays the last thing the model reads (measured on the battery: a note after
    it, restating it, was echoed and lowered grounding; this one before it raised the yes/no
    answers from 0.45 to 0.64 and memory from 0.5 to 0.75). past: the question is about
    earlier moments; `memories` (oldest first) are what the robot remembers seeing. style:
    STYLES. `objects`: the newest frame's objects note; the part naming what the question asks
    about is repeated here, next to the question (the 1.5B model otherwise answered "Is there a
    cat with us?" with no, about one time in three, with "a dog or a cat" in the newest note).
    `acts`: the verbs of the robot's actions offered as tools (a request gets no yes/no note).
    `observation`: the newest frame's observation; what it says the person wears is repeated
    for a question about clothes, and a question about what the robot wears or has is told
    that what it sees is not its own. `answered`: the robot's earlier yes or no on what the
    question asks again (core/opinions.answered_before), said before the yes/no note.
    """
    question = question_of(text)
    parts = []
    seen = seen_now(question, objects, observation) if not past else ""
    if seen:
        parts.append(f"{NOW_NOTE} {seen}.")
    if not past and asks_what_is_its_own(question):
        parts.append(NOT_YOURS_NOTE)
    if past:
        wanted = list(memories[:1]) if _START.search(question) else list(memories[-3:])
        parts.append(f"{PAST_NOTE} " + " ".join(m.rstrip(".") + "." for m in wanted)
                     if wanted else NOT_NOW_NOTE)
    if answered:
        parts.append(answered)
    if is_yes_no(text):
        if names_one_of_a_pair(question, seen):
            parts.append(UNSURE_NOTE)       # not a yes or a no: the eyes cannot tell
        elif not asks_to_act(text, acts):
            parts.append(SOFT_YES_NO_NOTE if style == "soft" else YES_NO_NOTE)
    if asked_about(text) is Person.FIRST:
        # only this side: a note on questions about the robot ("answer with I") changed its
        # opinions and lowered the consistency battery (0.95 to 0.85); its echoes are turned
        # round by core/perspective.py instead
        parts.append(ABOUT_THE_PERSON_NOTE)
    return "[" + " ".join(parts) + "]" if parts else ""
