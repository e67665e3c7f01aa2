"""The robot's side of a reply: a question's pronouns echoed unswapped are turned round.

A small model answers by copying the question, pronouns and all: "Am I holding a cup?" ->
"No, I am not holding a cup.", "Is there a flag behind me?" -> "No, there is no flag behind
me." (a third of the perspective battery right on the 1.5B). A clause of the reply that
shares a word of substance with the question, or has no word but the question's and yes, no
or not ("No, you do not." to "Do you like cats?"), and uses the question's own person (only
that one: a clause with both "I" and "you" already took sides, one with "too" speaks of
the robot) is said from the robot's side: "No, you are not holding a cup." To a question
with both persons, a clause with both in the question's order and a word of its substance
is its echo ("Am I in front of you?" -> "I am in front of you") and is turned round whole;
"Can you see me?" -> "I can see you" already took sides. ROS-free.
"""
from __future__ import annotations

import re

from vision_dialogue.core.focus import Person, question_of


_FIRST = {"i", "me", "my", "mine", "myself", "i'm", "i've", "i'll", "i'd"}
_SECOND = {"you", "your", "yours", "yourself", "you're", "you've", "you'll", "you'd"}
_TO_SECOND = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself",
              "i'm": "you're", "i've": "you've", "i'll": "you'll", "i'd": "you'd"}
_TO_FIRST = {"your": "my", "yours": "mine", "yourself": "myself", "you're": "I'm",
             "you've": "I've", "you'll": "I'll", "you'd": "I'd"}
#: after "I" the verb changes with the subject ("I am" -> "you are"), and back
_VERB_TO_SECOND = {"am": "are", "was": "were"}
_VERB_TO_FIRST = {"are": "am", "were": "was"}
#: words after which "you" is a subject ("you are", "you can") rather than an object
_SUBJECT_NEXT = {"are", "were", "can", "could", "do", "did", "does", "will", "would", "have",
                 "had", "should", "must", "may", "might", "look", "see", "like", "want",
                 "need", "seem", "know", "think", "feel", "is", "am", "cannot", "can't",
                 "don't", "didn't", "won't", "aren't", "weren't", "not"}
_SMALL = {"the", "and", "but", "not", "are", "was", "were", "there", "here", "this", "that",
          "what", "who", "does", "did", "can", "could", "have", "has", "had", "will", "would",
          "with", "for", "any", "yes", "too", "now", "just", "still", "really"}
#: "I am late too": the robot speaks of itself in the question's words
_SELF_TOO = {"too", "also", "either"}
#: words a short answer adds to the question's own ("No, you do not." to "Do you like cats?")
_ANSWER_WORDS = {"yes", "no", "not", "don't", "doesn't", "can't", "cannot", "isn't", "aren't"}
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?|[^A-Za-z]+")
_CLAUSE = re.compile(r"[^,;:.!?]+[,;:.!?]*")


def words_of(text: str) -> list[str]:
    """A line's words in order, lower case, with their apostrophes ("i'm", "don't")."""
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower().replace("’", "'"))


def stem(word: str) -> str:
    """A crude stem, enough to match "loves" with "love" and "sailing" with "sail"."""
    for end in ("ing", "es", "s", "ed"):
        if word.endswith(end) and len(word) - len(end) >= 3:
            word = word[:-len(end)]
            break
    return word[:-1] if word.endswith("e") and len(word) >= 4 else word


def substance_words(text: str) -> set[str]:
    """The words of substance of a line: not pronouns, not small words ("cats", "wearing")."""
    return {w for w in words_of(text) if len(w) > 2 and w not in _SMALL | _FIRST | _SECOND}


def persons_in_order(text: str) -> tuple[Person, ...]:
    """The persons whose pronouns `text` uses, in order ("Am I in front of you?": I, you)."""
    order: list[Person] = []
    for w in words_of(text):
        p = Person.FIRST if w in _FIRST else Person.SECOND if w in _SECOND else None
        if p is not None and (not order or order[-1] is not p):
            order.append(p)
    return tuple(order)


def question_person(question: str) -> Person | None:
    """The one person whose pronouns the question uses, or None (both or neither)."""
    return _only_person(persons_in_order(question))


def _only_person(order: tuple[Person, ...]) -> Person | None:
    return order[0] if len(order) == 1 else None


def from_own_side(sentence: str, person_line: str, told: str = "") -> str:
    """`sentence` with each clause that echoes the question's pronouns turned round.

    `told`: the memory notes of what the person told the robot; a clause in the question's
    person that says one of their facts in their words is theirs too ("What sport do I do?"
    -> "I run marathons." with "I run marathons" in the note: the 1.5B, bench_memory).
    """
    question = question_of(person_line)
    # a question only: after a request ("Show me the edges") "I drew them" is the robot's own
    order = persons_in_order(question)
    if not question.endswith("?") or not sentence or not order:
        return sentence
    person = _only_person(order)
    own, other = (_FIRST, _SECOND) if person is Person.FIRST else (_SECOND, _FIRST)
    substance = substance_words(question)
    asked = set(words_of(question)) | _ANSWER_WORDS
    told_words = f" {' '.join(words_of(told))} "
    out = []
    for clause in _CLAUSE.findall(sentence):
        words = set(words_of(clause))
        first = not any(c.isalpha() for c in "".join(out))
        if person is not None:
            if words & own and not words & other and not words & _SELF_TOO and \
                    (words & substance or words <= asked or
                     _told_by_them(clause, told_words)):
                clause = _turn(clause, frozenset({person}), first)
        elif persons_in_order(clause) == order and words & substance:
            # both persons, in the question's order: "Am I in front of you?" -> "I am in
            # front of you" is the question's own words; said from the robot's side
            clause = _turn(clause, frozenset(order), first)
        out.append(clause)
    return "".join(out)


def _told_by_them(clause: str, told_words: str) -> bool:
    """Whether `clause` (two words or more) is in what the person told, word for word."""
    said = words_of(clause)
    return len(said) >= 2 and f" {' '.join(said)} " in told_words


def _turn(clause: str, persons: frozenset[Person], first: bool) -> str:
    """The clause's pronouns of each of `persons` swapped for the other side's.

    `first`: the clause starts the sentence, so its first word gets a capital.
    """
    tokens = _WORD.findall(clause)
    words = [t.lower().replace("’", "'") for t in tokens]
    out = list(tokens)
    verbs: dict[str, str] = {}  # a subject just swapped: its verb changes ("I am" -> "you are")
    for i, w in enumerate(words):
        nxt = next((x for x in words[i + 1:] if x.strip()), "")
        starts = first and not any(x.strip() for x in words[:i])
        if Person.FIRST in persons and w in _TO_SECOND:
            out[i] = _cased(_TO_SECOND[w], starts)
            verbs = _VERB_TO_SECOND if w == "i" else {}
            continue
        if Person.SECOND in persons and w == "you":
            subject = nxt in _SUBJECT_NEXT or not any(x.strip() for x in words[:i])
            out[i] = "I" if subject else _cased("me", starts)
            verbs = _VERB_TO_FIRST if subject else {}
            continue
        if Person.SECOND in persons and w in _TO_FIRST:
            out[i], verbs = _cased(_TO_FIRST[w], starts), {}
            continue
        if w in verbs:
            out[i] = _cased(verbs[w], tokens[i][:1].isupper())
        if w.strip():
            verbs = {}
    return "".join(out)


def _cased(word: str, capital: bool) -> str:
    """`word` with a capital when `capital` ("I" always has one)."""
    if word == "I" or word.startswith("I'"):
        return word
    return word[:1].upper() + word[1:] if capital else word
