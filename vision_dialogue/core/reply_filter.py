"""Cleaning a reply for speaking: notes, labels, echoes and repeats out, in the robot's words.

A small local model reads its prompt's notes out, starts sentences with their labels, says
"I can see you" when it cannot, and comes back to the same line turn after turn. `NoteFilter`
sees each sentence before it is spoken and drops or rewrites what no person would say.
"""
from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Callable, Collection, Iterable, Sequence

from vision_dialogue.core.focus import FOCUS_INSTRUCTIONS
from vision_dialogue.core.opinions import Answered, Side, answered_before, contradicted, \
    exchanges, gives_no_favourite
from vision_dialogue.core.perspective import stem, substance_words
from vision_dialogue.core.timeline import ROBOT, Item
from vision_dialogue.llm.sentences import CLAUSE_DASHES, CLAUSE_ENDS, split_sentences

# Emoji and pictographs (the persona forbids them; speech engines read them out).
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D]")
# A label a small model copies from its notes at the start of a sentence ("You see: ...",
# "Robot: ..."): up to five words and a colon. Nobody speaks that way.
_LABEL = re.compile(r"^\s*(?:[\w'()]+\s+){0,4}[\w'()]+\s*:\s+")


def clean_reply(text: str) -> str:
    """Remove emoji, bracketed memory notes and collapse whitespace."""
    return NoteFilter().feed(text)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", (text or "").lower())


def _shingles(words: list[str], k: int = 6) -> list[tuple]:
    return [tuple(words[i:i + k]) for i in range(len(words) - k + 1)]


ECHO_WORDS = 6
"""A sentence repeating this many words in a row of an instruction or note is an echo, not speech;
so is one that starts with them from an observation (said later in a sentence, "you are in the
middle, wearing orange and black" is speech), or one that is nothing but a part of an observation
("orange and brown things", "do not talk about images")."""

REPEAT_MIN_WORDS = 4
"""A sentence of at least this many words that the robot already said is not said again (small
models loop on a closing question)."""

CLAUSE_MARKS = tuple(CLAUSE_ENDS + CLAUSE_DASHES)
"""How a streamed reply's first clause ends when it comes on its own (llm/sentences.py)."""
BARE_ANSWERS = frozenset({"yes", "no", "yeah", "yep", "nope", "oh", "well", "sure"})
"""A first clause of only these words waits for its sentence while a stand-in line may take
the sentence's place: "Yes," spoken on its own, then "No, I do not see you right now." for the
rest ("I can see you.", nobody in view) was "Yes, No, I do not see you right now."."""
YES_NO = frozenset({"yes", "no", "yeah", "yep", "nope"})
"""A first clause of only these words is an answer on its own: it does not wait for its
sentence for starting one said before (every "Yes," after the first "Yes, ..." did, and the
robot said nothing until the whole sentence was written). Its side is judged on its own
(`_against_earlier`); a rest that repeats an earlier sentence is dropped after it."""

RESTART_SIMILARITY = 0.6
"""Word-sequence similarity from which the rest of a sentence whose first clause was spoken on
its own starts that clause again ("I saw a person close," then "I saw someone close, in the
middle, ..." in README command 1's demo): the restart is not said."""

REPEAT_SIMILARITY = 0.8
"""Word-sequence similarity (difflib ratio) from which a sentence counts as said before: "I can
see you in the middle, wearing orange" repeats "I see you in the middle wearing orange"."""


def near_repeat(words: list[str], said: Iterable[tuple[str, ...]],
                asked: Collection[str] = ()) -> bool:
    """Whether a sentence's words say (nearly) the same as one of `said`.

    `asked`: the words of substance of the question it answers; a sentence bringing one that
    the earlier line lacks answers something new ("No, I do not like cats." to "Do you like
    cats?" after "No, I do not like coffee.").
    """
    for earlier in said:
        if any(w in asked and w not in earlier for w in words):
            continue
        longest = max(len(earlier), len(words))
        if abs(len(earlier) - len(words)) * 2 > longest:
            continue          # too different in length to reach the similarity
        if SequenceMatcher(None, words, earlier, autojunk=False).ratio() >= REPEAT_SIMILARITY:
            return True
    return False


VISUAL_CLAIM = re.compile(
    r"\b(i|we)\s+(can\s+|could\s+|do\s+)?(see|saw|notice|noticed|spot|spotted)\b"
    r"|\byou\s+(look|looks)\b|\bwearing\b|\bwear\b|\bholding\b|\bfingers?\b"
    r"|\b(shirt|t-shirt|hat|cap|glasses|scarf|jacket|coat|dress|suit|sweater|hoodie|tie)s?\b"
    r"|\b(red|orange|yellow|green|blue|purple|pink|brown|black|white|grey|gray)\b",
    re.IGNORECASE)
"""A sentence about what is visible: a claim to see ("I can see you", "you look happy"), or
clothes, things held, fingers or colours ("My shirt is white", "I am holding a hat": the small
model answers a question about the person in the first person). "I cannot see" does not match."""


SEES_THE_PERSON = re.compile(
    r"\b(i|we)\s+(can\s+|do\s+)?(still\s+|now\s+)?(see|spot|notice)\s+you\b"
    r"|\byou\s*('re|are)\s+(still\s+)?(here|there|in front of me|right there)\b", re.IGNORECASE)
"""A claim to see the person now ("Yes, I can still see you", "you are still here")."""
SEES_SOMEONE = re.compile(
    r"\bthere\s*('s|is|are)\s+(still\s+)?(someone|somebody|people|a person|a man|a woman|"
    r"(two|three|several|some|other|many)\s+(people|persons|men|women))\b"
    r"|\b(someone|somebody|people)\s+(is|are)\s+(still\s+)?(here|there|with)\b", re.IGNORECASE)
"""A claim that someone is in view ("Yes, there are people here with you")."""


class NoteFilter:
    """Cleans reply text for speaking.

    Drops emoji and anything inside square brackets or parentheses (the prompt's memory notes and
    stage directions, which small models sometimes read out), also when a note spans several
    streamed sentences; drops a sentence that echoes an instruction, note or observation, or
    repeats one the robot said (`said`); collapses whitespace.
    """

    def __init__(self, labels: Iterable[str] = (), notes: Iterable[str] = (),
                 observations: Iterable[str] = (), said: Iterable[str] = (),
                 memories: Iterable[str] = (), speak: Callable[[str, bool], str] | None = None,
                 blind_line: str = "", nobody_line: str = "", anyone_line: str = "",
                 question: str = "", told: str = "", answered: Answered | None = None):
        self.depth = 0
        # what the person told the robot (the memory notes): "You like green tea" is their
        # word, not a sight, also while the robot cannot see
        self.told = " " + " ".join(_words(told)) + " "
        self.told_text = told or ""         # as written (core/perspective.py reads it)
        self._told_stems = {stem(w) for w in _words(told)}
        self.question = question            # the person's line this reply answers
        self.answered = answered            # the robot's earlier answer to what it asks again
        self._opened = False                # whether the reply's first words were said
        self._drop_rest = False             # a first clause was dropped: so is its sentence
        self.asked = frozenset(substance_words(question))   # its words of substance (repeats)
        # claim -> the line said in its place, once (later claims are dropped): nobody in view,
        # a claim to see the person; the robot cannot see at all, anything about what is
        # visible (small models say "I can see you" whatever the notes say)
        self.stand_ins = [(claim, line) for claim, line in
                          ((SEES_THE_PERSON, nobody_line), (SEES_SOMEONE, anyone_line or
                                                            nobody_line),
                           (VISUAL_CLAIM, blind_line)) if line]
        self._stood_in: set[str] = set()
        notes = [n for n in notes if n]
        self.note_grams = {g for n in notes for g in _shingles(_words(n), ECHO_WORDS)}
        self.note_runs = [" " + " ".join(_words(n)) + " " for n in notes]
        # observation (now) or memory (past) -> its word runs; an echo of one is said in the
        # robot's words by `speak(text, past)` when given, else dropped
        self.seen = [(text, past, set(_shingles(_words(text), ECHO_WORDS)),
                      " " + " ".join(_words(text)) + " ")
                     for past, texts in ((False, observations), (True, memories))
                     for text in texts if text]
        self.speak = speak
        said = list(said)
        self.said_lines = said               # the robot's earlier sentences (core/opinions.py)
        self.said = [tuple(w) for w in map(_words, said) if len(w) >= REPEAT_MIN_WORDS]
        # sentences dropped as repeats, or as echoes of an observation or memory that could not be
        # put in the robot's words: said anyway when nothing else is left (better than a fallback)
        self.repeats: list[str] = []
        self.said_before: list[str] = []     # of those, the ones the robot said in earlier turns
        self.echoes = 0                      # sentences dropped as a note read out
        self.dropped: list[str] = []         # every sentence dropped (an empty reply's error)
        self.claims: list[str] = []          # of those, claims of an action no tool ran
        self.contradicted: list[Side] = []   # earlier sides an answer took the other side of
        self.no_favourite: list[str] = []    # "I don't have a favourite colour." when asked
        self._earlier = len(self.said)
        # a reply's first clause, spoken on its own (llm/sentences.py): its words, and one held
        # back because it starts a sentence said before
        self._clause: list[str] = []
        self._held = ""
        # prompt labels a small model may echo at the start of a sentence ("You saw: ...")
        self.labels = tuple(sorted({lb.strip() for lb in labels if lb.strip()}, key=len,
                                   reverse=True))

    def _echoed(self, words: list[str], grams: list, whole: str) -> tuple | None:
        """(observation or memory, past) that a sentence starts with, or is a part of.

        A rest after its spoken first clause starts no sentence ("I saw a person close," +
        "in the middle, smiling" is speech).
        """
        start = _shingles(self._clause + words, ECHO_WORDS)[:2] if self._clause else grams[:2]
        whole_echo = len(words) >= 3 and not self._clause
        return next(((t, past) for t, past, g, run in reversed(self.seen)
                     if not g.isdisjoint(start) or (whole_echo and whole in run)), None)

    def _without_restart(self, rest: str) -> str:
        """`rest` less its own first clause where that says the spoken first clause again."""
        head, comma, tail = rest.partition(",")
        words = _words(head)
        if comma and tail.strip() and words[:2] == self._clause[:2] and SequenceMatcher(
                None, words, self._clause, autojunk=False).ratio() >= RESTART_SIMILARITY:
            return tail.strip()
        return rest

    def _unlabelled(self, text: str) -> str:
        """`text` without a prompt label a small model echoed at its start ("You saw: ...")."""
        for lb in self.labels:
            if text.lower().startswith(lb.lower()):
                text = text[len(lb):]
                break
        return _LABEL.sub("", text, count=1)

    def _drop(self, spoken: str, *kept_in: list[str]) -> str:
        """Nothing said for `spoken`; it is kept in `dropped` and in each of `kept_in`."""
        for where in (self.dropped, *kept_in):
            where.append(spoken)
        return ""

    def drop_claim(self, spoken: str) -> str:
        """Nothing said for a sentence that claims an action no tool ran (never said later)."""
        return self._drop(spoken, self.claims)

    def _tells_what_they_told(self, spoken: str) -> bool:
        """Whether `spoken` tells back what the person told (each word of substance is theirs).

        Asked again about a fact ("Where is my workplace?" after "What is my job?"), the same
        answer is right: dropped as a repeat, the 1.5B's second try read the note out
        ('loves baking bread; "you love baking in the sun".', bench_memory).
        """
        said = {stem(w) for w in substance_words(spoken)}
        return bool(said) and said <= self._told_stems

    def _told_of(self, spoken: str) -> bool:
        """Whether each word that makes `spoken` look like a sight is in what the person told."""
        return self.told.strip() != "" and all(f" {' '.join(_words(m.group(0)))} " in self.told
                                               for m in VISUAL_CLAIM.finditer(spoken))

    def _stand_in(self, spoken: str) -> str | None:
        """The line said in place of a claim `spoken` makes; "" drops it (said once); None."""
        for claim, line in self.stand_ins:
            if claim.search(spoken) and not (claim is VISUAL_CLAIM and self._told_of(spoken)):
                self._held = ""          # the sentence's first clause goes with it
                if line in self._stood_in:
                    return ""
                self._stood_in.add(line)
                return line
        return None

    def _waits(self, words: list[str]) -> bool:
        """Whether a first clause waits for the rest of its sentence.

        A bare yes or no while a stand-in line may take the sentence's place ("Yes," before
        "I can see you.", nobody in view), or the start of a sentence said before, unless it
        is a yes or no alone (`YES_NO`).
        """
        if self.stand_ins and words and not self._clause and set(words) <= BARE_ANSWERS:
            return True
        if words and set(words) <= YES_NO:
            return False
        return bool(near_repeat(words, [e[:len(words)] for e in self.said
                                        if len(e) > len(words)], self.asked))

    def feed(self, text: str) -> str:
        text = (text or "").lstrip()
        if not (self._clause or self._held):   # the rest of a sentence: no label starts it
            text = self._unlabelled(text)
        out = []
        for ch in _EMOJI.sub("", text or ""):
            if ch in "[(":
                self.depth += 1
            elif ch in "])" and self.depth:
                self.depth -= 1
            elif not self.depth and ch not in "])":
                out.append(ch)
        spoken = " ".join("".join(out).split())
        spoken = re.sub(r"\s+([.,!?;:])", r"\1", spoken)   # "things ." after a dropped note
        if self._drop_rest:              # "No," was against the robot's word: "... did not"
            self._drop_rest = spoken.endswith(CLAUSE_MARKS)
            return self._drop(spoken)
        if self._clause:                 # the rest of a sentence whose first clause was said
            spoken = self._without_restart(spoken)
        words = _words(spoken)
        grams = _shingles(words, ECHO_WORDS)
        whole = " " + " ".join(words) + " "       # a short sentence that is part of a note
        if not self.note_grams.isdisjoint(grams) or \
                (len(words) >= 3 and any(whole in run for run in self.note_runs)):
            self.echoes += 1
            return self._drop(spoken)
        if self._against_earlier(spoken):   # "No, I don't like it." after "I like your suit."
            return self._drop(spoken)
        if gives_no_favourite(self.question, spoken):     # said only if nothing else comes
            return self._drop(spoken, self.repeats, self.no_favourite)
        echoed = self._echoed(words, grams, whole)
        if echoed:
            said = self.speak(*echoed) if self.speak else ""
            if not said:
                return self._drop(spoken, self.repeats)
            spoken, words = said, _words(said)
        stand_in = self._stand_in(spoken)
        if stand_in is not None:
            if not stand_in:
                return self._drop(spoken)
            spoken, words = stand_in, _words(stand_in)
        if self._held:                   # a first clause held back: judged with its rest
            spoken, self._held = f"{self._held} {spoken}", ""
            words = _words(spoken)
        clause = spoken.endswith(CLAUSE_MARKS)
        if clause and self._waits(words):
            self._held = spoken              # judged with the rest of its sentence
            return ""
        if len(words) >= REPEAT_MIN_WORDS and not self._tells_what_they_told(spoken):
            if near_repeat(words, self.said, self.asked):
                earlier = near_repeat(words, self.said[:self._earlier], self.asked)
                return self._drop(spoken, self.repeats, *([self.said_before] if earlier else []))
        if clause:
            self._clause = words             # said now; kept as said with the sentence's rest
        else:
            if len(self._clause + words) >= REPEAT_MIN_WORDS:
                self.said.append(tuple(self._clause + words))
            self._clause = []
        self._opened = True
        return spoken

    def _against_earlier(self, spoken: str) -> bool:
        """Whether `spoken` takes the other side from the robot's earlier one (kept, if so).

        A first clause that does ("No,") takes the rest of its sentence with it.
        """
        side = self._side_against(spoken)
        if side is not None:
            self.contradicted.append(side)
            self._drop_rest = spoken.endswith(CLAUSE_MARKS)
        return side is not None

    def _side_against(self, spoken: str) -> Side | None:
        """The robot's earlier side that `spoken` takes the other way from (None: none).

        Its earlier line on what it likes (core/opinions.contradicted), or, for the reply's
        first words, its earlier yes or no to what the question asks again (`answered`).
        """
        earlier = contradicted(self.question, spoken, self.said_lines)
        if earlier:
            return Side.of_liking(earlier)
        if self.answered is None or self._opened or self._clause or self._held:
            return None
        return self.answered.against(spoken)


def turn_filter(persona, items: Sequence[Item], newest, blind: bool,
                speak: Callable[[str, bool], str] | None = None,
                allow_repeats: bool = False, instructions: Iterable[str] = (),
                told: str = "") -> NoteFilter:
    """The filter for one reply: the prompt's notes, what the prompt shows, what was said.

    `newest`: the newest frame (None before one came); `blind`: no camera (lost or none yet).
    `allow_repeats`: "say that again", the last line may come again. `instructions`: the
    prompt's notes besides the persona's (the tools', a Chat's purpose): read out, they are
    dropped as the persona's are. `told`: the memory notes of what the person told the robot.
    The person's line, when the robot has not answered it yet, is held to the robot's earlier
    answer to what it asks again (core/opinions.answered_before), read from `items` here: a
    read-ahead of the person's next words meanwhile does not change it.
    """
    p = persona
    notes = [p.system, p.greet_instruction, p.no_frames_note, p.dark_frames_note,
             p.camera_lost_note, p.repeat_note, p.own_words_note, p.not_done_note,
             p.consistent_note, p.favourite_note,
             *FOCUS_INSTRUCTIONS,
             *instructions]
    seen = [it.frame.observation or "" for it in items if it.kind == "frame"]
    memories = [it.text for it in items if it.kind == "summary"]
    lines = [it.text for it in items if it.kind == "line" and it.role == ROBOT]
    question = next((it.text for it in reversed(items) if it.kind == "line" and it.role != ROBOT),
                    "")
    newest_line = next((it for it in reversed(items) if it.kind == "line"), None)
    answered = answered_before(question, exchanges(items)) \
        if newest_line is not None and newest_line.role != ROBOT else None
    if allow_repeats:
        lines = lines[:-1]
    said = [s for line in lines for s in split_sentences(line)]

    def unsaid(options: tuple[str, ...]) -> str:       # the first not said yet
        return next((ln for ln in options if ln not in said), options[0])
    blind_line = nobody_line = anyone_line = ""
    if blind:
        blind_line = unsaid(p.blind_lines)
    elif newest.people == 0:
        nobody_line = unsaid(p.nobody_lines)
        anyone_line = unsaid(tuple(ln for ln in p.nobody_lines if "anyone" in ln)
                             or p.nobody_lines)
    return NoteFilter((p.frame_label, p.summary_label, p.history_label, "You saw:"), notes,
                      seen, said, memories, speak, blind_line=blind_line,
                      nobody_line=nobody_line, anyone_line=anyone_line, question=question,
                      told=told, answered=answered)
