"""Is the person done? The end of a turn decided by what was said, not only by silence.

A silence-only end-pointer waits the same `min_silence` after "Can you see me?" as after
"and then I...". Here the words recognised at the first silent chunk decide how long to wait:

* `COMPLETE` (a question, an exclamation, or a statement of a few words whose last word can
  end a sentence): the turn ends after `quick_silence`, as soon as the words are known;
* `INCOMPLETE` (the last word cannot end a line: "and", "the", "my", "um"...; a statement
  ending in "to", "is", "I"...; the recogniser wrote a trailing comma, dash or ellipsis; or
  the line only greets or calls the robot, "Hello robot.", after which people go on): the
  wait grows to `hold_silence`, so a pause to think does not cut the person off;
* `UNSURE` (anything else: a short line, a statement without a clear end): `min_silence`, as
  before.

Rules, not a model: they cost nothing on the cores the reply needs, and their cut-offs and
waits are measured on a set of lines with real mid-sentence pauses (benchmarks/bench_voice.py).
"""
from __future__ import annotations

import re
from typing import Sequence

COMPLETE, UNSURE, INCOMPLETE = "complete", "unsure", "incomplete"

#: words no line ends with, not even a question: articles, conjunctions, possessives, fillers
NEVER_LAST = frozenset("""
a an the and or but because if than my your his her our their every um uh er erm
""".split())
#: words after which a statement usually goes on (a question may end with them: "Where are
#: you from?", "Can you?"): prepositions, auxiliaries, pronouns, hedges
GOES_ON = NEVER_LAST | frozenset("""
so when while then that which who whose where as to of in on at by for with from about into
onto over under like between through after before its this these those some any no i you he
she we they it's i'm you're we're they're is are was were am be been being do does did have
has had can could will would should may might must shall hmm well also just really very maybe
""".split())

#: what a line that only greets or calls the robot is made of ("Hello robot.", "Hi there!",
#: "Excuse me."): the person usually goes on after it ("Hello robot. Can you hear me?"), so
#: it waits as a line that goes on does
OPENING_WORDS = frozenset("""
hello hi hey hiya robot there excuse me good morning afternoon evening
""".split())

#: silence that ends a complete line (a question...) once its words are known, s
QUICK_SILENCE_S = 0.3
#: silence a line that goes on ("and then I...") may keep before the turn ends, s
HOLD_SILENCE_S = 1.5
#: seconds of speech between two recognitions of the growing segment (partial lines); 0: none.
#: The LLM reads the words so far while the person speaks, so at the pause only the line's
#: last words are left to read: on 2 cores (AMD EPYC) this saves more than the extra
#: recognitions cost (benchmarks/bench_voice.py --against silent); an older round on another
#: machine, before partials were recognised in step, measured the opposite
PARTIAL_EVERY_S = 0.6
#: whether the words recognised at a pause go out as a partial line too (no extra
#: recognition), so the LLM reads the line while the silence that ends it runs
PARTIAL_AT_PAUSE = True

#: what may judge the words (speech node parameter turn_judge): these rules, or the model of
#: voice/turn_model.py
TURN_JUDGES = ("rules", "model")

#: a statement with at least this many words whose last word can end it counts as complete
MIN_STATEMENT_WORDS = 4

_TRAILING_OPEN = re.compile(r"(,|;|:|-|—|–|\.\.\.|…)\s*$")
_WORD = re.compile(r"[A-Za-z']+")


def turn_end(text: str) -> str:
    """COMPLETE, UNSURE or INCOMPLETE for the words heard so far (see the module docstring)."""
    text = (text or "").strip()
    words = _WORD.findall(text.lower())
    if not words:
        return UNSURE
    if open_for_sure(text, words):
        return INCOMPLETE
    if text.endswith(("?", "!")):
        return COMPLETE
    if words[-1] in GOES_ON:
        return INCOMPLETE
    if text.endswith(".") and len(words) >= MIN_STATEMENT_WORDS:
        return COMPLETE
    return UNSURE


def open_for_sure(text: str, words: Sequence[str]) -> bool:
    """Whether the line goes on whatever follows.

    A trailing comma, dash or ellipsis, a last word no line ends with ("and", "the", "um"),
    or words that only greet or call the robot (OPENING_WORDS: "Hello robot.").
    """
    return bool(_TRAILING_OPEN.search(text)) or bool(words) and (
        words[-1] in NEVER_LAST or all(w in OPENING_WORDS for w in words))


def silence_needed(rule: str, quick: float, usual: float, hold: float) -> float:
    """Seconds of silence that end a turn whose words so far are judged `rule` (turn_end)."""
    return {COMPLETE: quick, UNSURE: usual, INCOMPLETE: hold}[rule]
