"""The robot's likes said earlier, against which a later answer is checked (ROS-free).

The embedded model opened the demo with "I like how the person in front of me is wearing
orange." and, two lines later, to "Do you like what I am wearing today?", said "No, I don't
like what you are wearing today.": greedy decoding reads its own earlier line and still
answers the other way. To a question about what the robot likes, a sentence that takes the
other side from an earlier line of the robot's on the same thing (a word of the question's
substance in both) is a contradiction; the reply filter drops it and the reply is asked for
again, told which side the robot took then (core/reply_maker.py; quoting the line made the
model say it again word for word).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from vision_dialogue.core.focus import asked_about, is_yes_no, question_of
from vision_dialogue.core.perspective import substance_words, words_of
from vision_dialogue.core.timeline import ROBOT, USER, Item
from vision_dialogue.llm.answers import yes_or_no
from vision_dialogue.llm.sentences import split_sentences

_LIKES = r"(?:like|love|enjoy|adore)"
_FAN = r"\bI(?:\s+am|'m)\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\b"
""""I'm a big fan of ...": a like ("I am not a fan" is a dislike)."""
_DISLIKE = re.compile(rf"\bI\s+(?:(?:really\s+)?(?:do\s+not|don't|never)\s+(?:really\s+)?"
                      rf"{_LIKES}|hate|dislike)\b|"
                      rf"\bI(?:\s+am|'m)\s+not\s+(?:a\s+)?(?:big\s+)?fan\b", re.I)
_LIKE = re.compile(rf"\bI\s+(?:really\s+|do\s+|also\s+|just\s+)?{_LIKES}s?\b|\bI'm\s+loving\b|"
                   rf"{_FAN}", re.I)
_ASKS_LIKING = re.compile(rf"^\s*(?:and\s+|so\s+)?do\s+you\s+(?:really\s+|also\s+)?{_LIKES}\b",
                          re.I)
_OPINION_WORDS = {"like", "love", "enjoy", "adore", "really", "also", "today", "what"}
SAME_THING = (frozenset({"wearing", "wear", "wears", "look", "looks", "outfit", "clothes",
                         "shirt", "dress", "suit", "jacket", "sweater", "top", "hat", "style"}),)
"""Words that name one thing in a question about the robot's likes and in its earlier line:
the README demo opened with "I like how you look." and, to "Do you like what I am wearing
today?", answered "No, I don't like it." (no word of the question was in the opening)."""


def _things(words: set) -> set:
    """`words` and every word of a SAME_THING group one of them is in."""
    return set(words).union(*(group for group in SAME_THING if words & group))


def stance(sentence: str) -> bool | None:
    """True: the robot says it likes something; False: that it does not; None: neither."""
    if _DISLIKE.search(sentence):
        return False
    return True if _LIKE.search(sentence) else None


def asks_liking(question: str) -> bool:
    """Whether the person asks what the robot likes ("Do you like cats?")."""
    return bool(_ASKS_LIKING.search(question))


_FAVOURITE = re.compile(r"\byour (?:very )?(?:favou?rite|preferred)\b", re.I)
_NO_FAVOURITE = re.compile(r"\b(?:don't|do not|doesn't|does not)\s+(?:really\s+)?have\s+"
                           r"(?:a\s+|any\s+)?(?:favou?rite|preference|personal)|"
                           r"\bI\s+(?:can't|cannot)\s+(?:really\s+)?(?:choose|pick)\b", re.I)


def gives_no_favourite(question: str, sentence: str) -> bool:
    """Whether `sentence` says the robot has no favourite, to a question asking for it.

    The 1.5B said "I don't have a favourite colour." to "What is your favourite colour?" (the
    consistency battery), and a note before the question asking it to name one did not
    change that; a robot with a child's persona has favourites.
    """
    return bool(_FAVOURITE.search(question.replace("’", "'"))) and bool(
        _NO_FAVOURITE.search(sentence.replace("’", "'")))


def contradicted(question: str, sentence: str, said: Iterable[str]) -> str:
    """The robot's earlier sentence that `sentence`, said to `question`, contradicts ("" none).

    `said`: the robot's earlier sentences, oldest first. Only answers to a question about
    the robot's likes are judged: the answer's side is its opening yes or no, else its own
    like or dislike.
    """
    if not asks_liking(question):
        return ""
    side = yes_or_no(sentence)
    side = stance(sentence) if side is None else side
    about = _things(substance_words(question) - _OPINION_WORDS)
    if side is None or not about:
        return ""
    for earlier in reversed(list(said)):
        held = stance(earlier)
        if held is not None and held != side and about & _things(substance_words(earlier)):
            return earlier
    return ""


_PAST_OR_OWN_VIEW = re.compile(r"^\s*(?:and\s+|so\s+)?(?:did|was|were)\b|\byou\b", re.I)
_ASKED = _OPINION_WORDS | {"seem", "seemed", "look", "looked", "find", "think", "say", "said",
                           "something", "anything", "thing", "things"}
"""Words of a question that say how it asks, not what: "Is music something you enjoy?" ends
on "music", not "something" (it matched "Is chatting with people something you like?")."""
_WHAT_IS_THERE = re.compile(r"^\s*(?:and\s+|so\s+)?(?:is|are|was|were)\s+there\b|"
                            r"\b(?:see|saw|seen|still)\b", re.I)
"""A question about what is (or was) in view: its answer is the scene's, not a view."""
_LEAD = re.compile(r"^\s*(?:so|and|well|okay|ok|then)\b[,\s]*", re.I)
_CHOICE = re.compile(r"\b[a-z]+ or [a-z]+\b", re.I)
"""A choice between two things ("dogs or cats"): the side taken is the thing said."""


@dataclass(frozen=True)
class Side:
    """A side the robot took earlier, which an answer now keeps (or is dropped and asked again).

    `told`: how the second try's note says it (persona consistent_note's {side}).
    """

    line: str           # the earlier line: the robot's sentence, or the earlier question
    yes: bool           # it liked it / said yes
    told: str

    @classmethod
    def of_liking(cls, earlier: str) -> "Side":
        """The side of an earlier sentence on what the robot likes (`stance`)."""
        liked = bool(stance(earlier))
        return cls(earlier, liked, "that you like it" if liked else "that you do not like it")


@dataclass(frozen=True)
class Answered:
    """What the robot answered earlier to a question asked again in other words."""

    asked: str               # the earlier question
    said: str                # its answer: "yes", "no", or the first sentence, quoted
    same_ask: bool = False   # both questions end on the same word of substance (what is asked)

    @property
    def side(self) -> bool | None:
        """True: it said yes; False: no; None: a choice's pick, quoted."""
        return {"yes": True, "no": False}.get(self.said)

    @property
    def note(self) -> str:
        """The focus note's part (core/focus.py): said before the yes/no note."""
        return f'Earlier, to "{self.asked.strip()}", you said {self.said}.'

    def against(self, sentence: str) -> Side | None:
        """The side this answer took, when `sentence` takes the other one (None: it does not).

        Its opening yes or no, else its like or dislike (`stance`). Only where both questions
        ask about the same thing (`same_ask`): "Would you want to pet that cat?" after "Is
        this cat cute?" shares only "cat" and hears that answer, but its "No" is not wrong.
        The 1.5B answered "Did the person in the orange suit seem happy to you?" with no,
        after yes to "Do I look happy to you?", with this answer in its focus note.
        """
        now = yes_or_no(sentence)
        now = stance(sentence) if now is None else now
        if not self.same_ask or self.side is None or now is None or now == self.side:
            return None
        return Side(self.asked, self.side, f"{self.said} to this")


def answered_before(question: str, exchanges: Iterable[tuple[str, str]]) -> Answered | None:
    """The robot's earlier yes or no on what a yes/no question asks again (None: none).

    `exchanges`: (the person's line, the robot's reply), oldest first. The earlier question
    that shares the most words of substance with this one, its last such word counting
    twice (what is asked: "happy" in "Did the person in the orange suit seem happy to you?"
    after "Do I look happy to you?") and three times when the earlier one ends on it too
    ("Are you a fan of coffee?": "Do you like coffee?", not "Does that coffee look hot to
    you?"), newest first on ties, whose reply opened with a clear
    yes or no (or, to a choice asked again, named its pick: `_said`). Only a question about
    earlier or about the robot's own view is matched, and neither may ask what is in view
    ("Is there a cat?", "Is the cat still here?"): that answer is the scene's at the time,
    nor may one be about the person and the other about the robot ("Am I wearing orange?",
    "Are you wearing orange?": core/focus.asked_about).
    The 1.5B answered the later question the other way (the consistency battery).
    """
    question = _LEAD.sub("", question_of(question))         # "So, do you like ...?"
    if not (is_yes_no(question) or _CHOICE.search(question)) or \
            not _PAST_OR_OWN_VIEW.search(question) or _WHAT_IS_THERE.search(question):
        return None
    asked_now = _stems(question)
    if not asked_now:
        return None
    last, whom = asked_now[-1], asked_about(question)
    best, found = 0, None
    for asked, reply in reversed(list(exchanges)):
        other = asked_about(asked)      # "Are you wearing orange?" is not "Am I ...?"
        said = "" if _WHAT_IS_THERE.search(asked) or whom and other and other != whom \
            else _said(reply, asked_now)
        stems = _stems(asked)
        same_ask = bool(stems) and stems[-1] == last
        score = len(set(asked_now) & set(stems)) + (last in stems) + same_ask
        if said and score > best:
            best, found = score, Answered(asked, said, same_ask=same_ask)
    return found


def _said(reply: str, asked_now: list[str]) -> str:
    """The side an earlier reply took: yes, no, or its first sentence, quoted.

    The first sentence when it is the robot's own ("I ...") and names a thing asked about now
    ("I prefer dogs." to "Do you like dogs or cats better?"); "" when it took no side.
    """
    side = yes_or_no(reply)
    if side is not None:
        return "yes" if side else "no"
    first = (split_sentences(reply) or [""])[0]
    return f'"{first}"' if re.match(r"I\b", first) and set(_stems(first)) & set(
        asked_now) else ""


def _stems(text: str) -> list[str]:
    """A line's words of substance in order, less opinion words, a plural's "s" cut."""
    kept = substance_words(text) - _ASKED
    return [w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words_of(text)
            if w in kept]


def exchanges(items: Sequence[Item]) -> list[tuple[str, str]]:
    """(the person's line, the robot's reply to it) in the timeline, oldest first."""
    lines = [it for it in items if it.kind == "line"]
    return [(a.text, b.text) for a, b in zip(lines, lines[1:])
            if a.role == USER and b.role == ROBOT]
