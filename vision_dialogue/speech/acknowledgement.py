"""A short acknowledgement when a reply is late: what a person says while they think.

ROS-free. In a spoken conversation the silence after a question is what people notice most.
When the reply's first words have not come `after` seconds after the person's
line, the robot says "Let me see." or "Let me think." before the answer: only
then, and never on two turns in a row, so it is not a filler on every turn. The phrase fits
the line: a question about what the robot sees gets a looking phrase, another question a
thinking one, a statement a listener's "I see.".
"""
from __future__ import annotations

import re

#: short (0.3-0.7 s of speech): a reply that comes meanwhile waits for the phrase's end
LOOKING_PHRASES = ("Let me see.", "Let me look.", "Hmm, let me see.")
THINKING_PHRASES = ("Hmm.", "Let me think.", "Good question.")
LISTENING_PHRASES = ("I see.", "Mm-hm.", "Right.")
#: words that make a line a question without a question mark (a recogniser may omit it)
QUESTION_OPENERS = frozenset({
    "what", "who", "whom", "whose", "where", "when", "why", "how", "which", "can", "could",
    "do", "does", "did", "is", "are", "was", "were", "would", "will", "should", "may", "have",
    "has", "tell", "describe"})
#: words that make a question one about what the robot sees
LOOKING_WORDS = frozenset({
    "see", "seeing", "look", "looking", "looks", "colour", "color", "wearing", "holding",
    "hold", "room", "table", "wall", "camera", "show", "showing", "front", "behind", "count",
    "many", "visible", "picture", "pictures", "describe"})
_WORD = re.compile(r"[a-z']+")


def kind_of_line(line: str) -> str:
    """'looking', 'thinking' (a question) or 'listening' (a statement)."""
    words = _WORD.findall(line.lower())
    question = line.rstrip().endswith("?") or (bool(words) and words[0] in QUESTION_OPENERS)
    if not question:
        return "listening"
    return "looking" if LOOKING_WORDS.intersection(words) else "thinking"


PHRASES = {"looking": LOOKING_PHRASES, "thinking": THINKING_PHRASES,
           "listening": LISTENING_PHRASES}


class Acknowledger:
    """Decides whether and what to acknowledge while a turn's reply is awaited.

    `heard(line)` at each of the person's lines; `due(waited)` while the reply is awaited
    gives the phrase to say now (at most once per turn, never on two turns in a row) or None.
    `after` <= 0: never.
    """

    def __init__(self, after: float):
        self.after = float(after)
        self._turn = 0
        self._acked_turn = -2
        self._kind = "listening"
        self._said = {kind: 0 for kind in PHRASES}

    def heard(self, line: str) -> None:
        self._turn += 1
        self._kind = kind_of_line(line)

    def due(self, waited: float) -> str | None:
        """The phrase to say now for a reply awaited `waited` s, or None."""
        if self.after <= 0 or waited < self.after or self._turn - self._acked_turn < 2:
            return None
        self._acked_turn = self._turn
        phrases = PHRASES[self._kind]
        phrase = phrases[self._said[self._kind] % len(phrases)]
        self._said[self._kind] += 1
        return phrase

    @property
    def said(self) -> int:
        """Acknowledgements said so far."""
        return sum(self._said.values())
