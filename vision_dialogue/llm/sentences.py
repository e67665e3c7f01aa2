"""Incremental sentence splitting for streamed LLM output (no ROS, no dependencies).

A streaming backend feeds text deltas as they arrive and gets complete sentences out as soon
as they end, so the robot can start speaking the first sentence while the model is still
generating the rest::

    splitter = SentenceSplitter()
    for delta in token_stream:
        for sentence in splitter.feed(delta):
            speak(sentence)
    for sentence in splitter.flush():
        speak(sentence)

Rules (deliberately small and predictable):

* A sentence ends at ``.``, ``!``, ``?`` (or a run of them, e.g. ``?!``), optionally followed
  by closing quotes/brackets, **once whitespace follows**. Until the whitespace arrives the
  text is held back, so a delta that stops at ``3.`` does not split ``3.5``.
* A newline always ends a line/sentence (bullet lists, poems).
* Not a sentence end: a decimal point (``3.5``), a single ``.`` after a common abbreviation
  (``Mr.``, ``Dr.``, ``e.g.``, ``i.e.``, ``vs.`` ... see ``ABBREVIATIONS``), and an ellipsis
  (``...`` or ``…``), which only ends a sentence at a newline or the end of the text.
* With ``first_clause_words`` N > 0, the reply's first piece may end sooner: at a ``,``,
  ``;`` or a spaced dash (once whitespace follows) after at least N words, so the robot
  starts saying "Yes," while the rest of the sentence is written
  (`speech_splitter`). Only the first piece: the others are whole sentences.
* Sentences are stripped of surrounding whitespace; empty sentences are never produced.
  Joining the output with single spaces gives the input with whitespace normalised at the
  boundaries.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator

__all__ = ["ABBREVIATIONS", "CLAUSE_ENDS", "FIRST_CLAUSE_WORDS", "SentenceSplitter",
           "speech_splitter", "split_sentences", "iter_sentences"]

FIRST_CLAUSE_WORDS = 1
"""A streamed reply's first clause is spoken on its own from this many words (0: whole
sentences only): the robot starts on the clause ("Yes,") while the model writes the rest of
the sentence. 1 rather than 4 since the spoken loop on the 1.5B was measured both ways
(benchmarks/bench_voice.py; docs/speech.md)."""
CLAUSE_ENDS = ",;"
"""Marks that end a first clause (a dash between spaces too). Not a colon: what follows one
("Error: go_to: speed ...") reads as a label on its own."""
CLAUSE_DASHES = "-–—"
"""Dashes that end a first clause when spaced ("I see two people - one is waving")."""

#: Words (lower case, without the final dot) after which a single "." does not end a sentence.
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "mx", "dr", "prof", "sr", "jr", "st", "mt", "rev", "capt", "lt",
    "sgt", "vs", "e.g", "i.e", "cf", "approx", "fig", "a.k.a", "incl", "dept",
})

_TERMINATORS = ".!?…"
_CLOSERS = "\"'”’)]}»"
_LAST_WORD = re.compile(r"(\S+)$")
_LEADING_PUNCT = "\"'“‘([{«"


class SentenceSplitter:
    """Turns a stream of text deltas into complete sentences.

    ``feed(delta)`` returns the sentences completed by this delta (possibly none);
    ``flush()`` returns what is left at the end of the stream (at most one sentence) and
    resets the splitter. Not thread-safe: use one splitter per stream.
    """

    def __init__(self, first_clause_words: int = 0) -> None:
        self._buf = ""
        self._pos = 0  # index in _buf where scanning resumes
        self.first_clause_words = int(first_clause_words)
        self._clause = self.first_clause_words > 0    # the first piece may still be a clause

    @property
    def pending(self) -> str:
        """The text received but not yet returned as a sentence."""
        return self._buf

    def feed(self, delta: str) -> list[str]:
        """Add a text delta; return the sentences it completes, in order."""
        if not delta:
            return []
        if not isinstance(delta, str):
            raise TypeError(f"SentenceSplitter.feed expects str, got {type(delta).__name__}")
        self._buf += delta
        return self._scan()

    def flush(self) -> list[str]:
        """Return the remaining text as a final sentence (if not blank) and reset."""
        out = self._scan()
        rest = self._buf.strip()
        self.reset()
        if rest:
            out.append(rest)
        return out

    def reset(self) -> None:
        """Drop any pending text (the next piece may be a first clause again)."""
        self._buf = ""
        self._pos = 0
        self._clause = self.first_clause_words > 0

    # -- internals ---------------------------------------------------------------------------
    def _scan(self) -> list[str]:
        out: list[str] = []
        buf = self._buf
        n = len(buf)
        start = 0
        i = self._pos
        while i < n:
            c = buf[i]
            if c == "\n":
                _emit(buf[start:i], out)
                start = i = i + 1
                continue
            if self._clause and not out and (c in CLAUSE_ENDS or c in CLAUSE_DASHES):
                if i + 1 == n:          # cannot decide yet
                    break
                if buf[i + 1].isspace() and _ends_clause(buf[start:i], c,
                                                         self.first_clause_words):
                    _emit(buf[start:i + 1], out)
                    start = i + 1
                i += 1
                continue
            if c in _TERMINATORS:
                j = i
                while j < n and buf[j] in _TERMINATORS:
                    j += 1
                while j < n and buf[j] in _CLOSERS:
                    j += 1
                if j == n:  # cannot decide yet: wait for the next delta (or flush)
                    break
                if buf[j].isspace() and _is_boundary(buf[start:i], buf[i:j]):
                    _emit(buf[start:j], out)
                    start = j
                i = j
                continue
            i += 1
        self._buf = buf[start:]
        self._pos = i - start
        if out:
            self._clause = False
        return out


def _emit(text: str, out: list[str]) -> None:
    text = text.strip()
    if text:
        out.append(text)


def _ends_clause(before: str, mark: str, words: int) -> bool:
    """Whether `mark` after `before` ends a first clause of at least `words` words."""
    if mark not in CLAUSE_ENDS and not before.endswith(" "):
        return False                   # a dash inside a word ("well-known") is no break
    return len(before.split()) >= words


def speech_splitter() -> SentenceSplitter:
    """The splitter for a reply the robot speaks as it is written (first clause on its own)."""
    return SentenceSplitter(first_clause_words=FIRST_CLAUSE_WORDS)


def _is_boundary(before: str, run: str) -> bool:
    """Whether terminator `run` (followed by whitespace) after text `before` ends a sentence."""
    marks = run.rstrip(_CLOSERS)
    if "…" in marks or ".." in marks:
        return False  # ellipsis: only a newline or the end of the text ends it
    if marks != ".":
        return True  # contains ! or ?
    m = _LAST_WORD.search(before)
    if m is None:
        return True
    word = m.group(1).lstrip(_LEADING_PUNCT).lower()
    if not word:
        return True
    if word in ABBREVIATIONS:
        return False
    return True


def split_sentences(text: str) -> list[str]:
    """Split a whole text into sentences with the same rules as `SentenceSplitter`."""
    splitter = SentenceSplitter()
    return splitter.feed(text) + splitter.flush()


def iter_sentences(deltas: Iterable[str]) -> Iterator[str]:
    """Yield sentences from an iterable of text deltas as soon as each one completes."""
    splitter = SentenceSplitter()
    for delta in deltas:
        yield from splitter.feed(delta)
    yield from splitter.flush()
