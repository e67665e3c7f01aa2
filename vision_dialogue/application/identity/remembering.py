"""The conversation's side of memory: facts from known people's lines, their recall notes.

Whose line it is decides everything: a fact is kept only when the speaker is identified, by
a voice match (`LineSpeakers`: people_node names the person its print matched, also with
others in view) or as the one person in view, and only for a person who said yes (the store
knows them; `PersonMemory.remember` refuses anyone else). The model is asked through
`ask(messages, schema)`, which the manager gives (its backend's side questions), so this
module needs no LLM of its own and runs off the reply path. What the robot knows of one
person is not brought up while others are in view unless `in_company`.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from vision_dialogue.application.identity.facts import ASKS_WHAT_IS_KNOWN, FACTS_SCHEMA, \
    SUMMARY_SCHEMA, extraction_messages, line_note, parse_facts, parse_summary, recall_note, \
    standing_note, summary_messages
from vision_dialogue.application.identity.memory import Fact, PersonMemory, Recall, SessionSummary
from vision_dialogue.application.identity.pending import QueuedMemory
from vision_dialogue.application.identity.records import MEMORY_NOTE_CHARS
from vision_dialogue.application.identity.store import StoreError
from vision_dialogue.application.identity.words import FIRST_PERSON
from vision_dialogue.core.conversation_types import LineNote

#: how much longer the note may be when the person asks what the robot knows of them
ASKED_NOTE_TIMES = 4
#: the share of `note_chars` a line's own note (the facts it asks about) may take
LINE_NOTE_SHARE = 0.5
#: the note for a known person who asks what the robot knows and nothing is kept of them
NOTHING_KEPT = ("You have met {name} before, but they have told you nothing about "
                "themselves that you kept: say so.")

#: lines of a person not known yet that wait for their yes (newest kept), and for how long (s)
UNPLACED_LINES = 5
UNPLACED_S = 60.0

#: how long an answer of who said a line is kept for its line (s), and how many at most
SPEAKER_KEEP_S = 30.0
SPEAKER_ANSWERS = 32


def says_something_of_themselves(text: str) -> bool:
    """Whether a line may hold a fact about its speaker: it speaks of them and asks nothing.

    The cheap test before the model is asked: on two cores a side question costs seconds.
    """
    words = set(text.lower().replace("\u2019", "'").split())
    words = {w.strip(".,!?;:") for w in words}
    return bool(words & FIRST_PERSON) and not text.rstrip().endswith("?")


@dataclass(frozen=True)
class SaidBy:
    """A voice identifier's answer: who said the line `text` (people_node's people/speakers)."""

    text: str
    person_id: str
    by_voice: bool          # a voice print matched this enrolled person
    at: float               # monotonic time it came
    stamp: float | None = None      # the line's own stamp (s), None where it had none


class LineSpeakers:
    """Whose voice said each line, as a voice identifier tells it a moment after the line.

    The manager hears a line at once; people_node prints its voice and then names its person
    with the line's text and stamp. `wait(text, since, timeout, stamp)` gives the person a
    voice print named for that line (the answer with the same words and, where both have one,
    the same stamp, so two people saying the same words are told apart; else the oldest for
    the same words not taken yet; none older than `since` - SPEAKER_KEEP_S), else None: no
    print matched, or no answer in time.
    """

    def __init__(self):
        self._answers: deque[SaidBy] = deque(maxlen=SPEAKER_ANSWERS)
        self._changed = threading.Condition()
        self._closed = False

    def close(self) -> None:
        """A wait ends now (the node is closing)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def said(self, text: str, person_id: str, by_voice: bool,
             stamp: float | None = None) -> None:
        """An answer came (on the node's thread); `stamp`: the line's (s), None unknown."""
        with self._changed:
            self._answers.append(SaidBy(" ".join(text.split()), person_id, by_voice,
                                        time.monotonic(), stamp))
            self._changed.notify_all()

    def wait(self, text: str, since: float, timeout: float,
             stamp: float | None = None) -> str | None:
        """The person whose voice print said `text` (heard at `since`, monotonic), or None."""
        text, found = " ".join(text.split()), []

        def taken() -> bool:
            answer = self._take(text, since, stamp)
            if answer is not None:
                found.append(answer)
            return bool(found) or self._closed
        with self._changed:
            self._changed.wait_for(taken, timeout)
        return next((a.person_id for a in found if a.by_voice and a.person_id), None)

    def _take(self, text: str, since: float, stamp: float | None) -> SaidBy | None:
        for answer in self._answers:
            if answer.text == text and answer.at >= since - SPEAKER_KEEP_S \
                    and same_stamp(answer.stamp, stamp):
                self._answers.remove(answer)
                return answer
        return None


def same_stamp(a: float | None, b: float | None) -> bool:
    """Whether two stamps name one line: equal to the microsecond, or one is unknown."""
    return a is None or b is None or abs(a - b) < 1e-6


class MemoryKeeper:
    """Facts from the lines of the one known person in view; the note for a reply."""

    def __init__(self, memory: PersonMemory | QueuedMemory, ask: Callable[[list, dict], str],
                 note_chars: int = MEMORY_NOTE_CHARS, in_company: bool = False,
                 logger=None):
        self.memory, self.ask = memory, ask
        self.note_chars, self.in_company = note_chars, in_company
        self.log = logger or logging.getLogger("vision_dialogue.memory")
        self.lines = 0
        #: person id -> (when their session began, their lines in it): summed up when they go
        self._sessions: dict[str, tuple[float, list[str]]] = {}
        #: (face id, line, line number, monotonic time) of someone not known yet, in memory
        self._unplaced: list[tuple[str, str, int, float]] = []
        #: the standing notes: ((people in view, writes so far), [(recall, note)])
        self._standing: tuple[tuple, list[tuple[Recall, str]]] | None = None
        self._writes = 0                # writes to the store this keeper ended: a new note
        self._writes_open = 0           # writes under way: a note read meanwhile is not kept
        self._read_failed = False       # said once until a read works (each prompt reads)
        self._lock = threading.Lock()   # the warm-ups' thread, the reply's, the memory worker

    @staticmethod
    def speaker(in_view: list[str]) -> str | None:
        """The id of whoever said a line: the one person in view, else nobody for sure."""
        return in_view[0] if len(in_view) == 1 else None

    def heard(self, in_view: list[str], text: str, faces: dict[str, str] | None = None,
              voice: str | None = None) -> list[Fact]:
        """A person's line: the facts kept of it (none when its speaker is not known).

        `voice`: the person a voice print named as the speaker (`LineSpeakers`), theirs also
        with others in view; else the one person in view. `faces`: person id -> face id of
        those in view. The line of one person in view whom the store does not know (yet)
        waits, with their face, for `place`: a person who says yes and at once what they love
        is enrolled under a new id a moment later.
        """
        self.lines += 1
        line, person = self.lines, voice or self.speaker(in_view)
        if person is None:
            return []
        if not self._guarded(f"line {line}", self.memory.knows, person):
            face = (faces or {}).get(person, "")
            if face and says_something_of_themselves(text):
                self._unplaced = [u for u in self._unplaced[-(UNPLACED_LINES - 1):]
                                  if time.monotonic() - u[3] < UNPLACED_S]
                self._unplaced.append((face, text, line, time.monotonic()))
            return []
        return self._keep_line(person, text, line)

    def _keep_line(self, person: str, text: str, line: int) -> list[Fact]:
        self._sessions.setdefault(person, (time.time(), []))[1].append(text)
        if not says_something_of_themselves(text):
            return []
        kept = self._guarded(f"facts of line {line}", self._facts, person, text, line) or []
        if kept:
            self.log.info(f"memory: {len(kept)} fact(s) of {person} kept from line {line}")
        return kept

    def place(self, faces: dict[str, str]) -> list[Fact]:
        """The waiting lines whose face is now a known person's (who just said yes) are theirs.

        Only by the face: a line is never given to someone else who came into view. A line
        waits at most UNPLACED_S; nothing of it is kept otherwise.
        """
        kept: list[Fact] = []
        waiting, self._unplaced = self._unplaced, []
        for face, text, line, at in waiting:
            owner = next((p for p, f in faces.items() if f == face), None)
            if owner is not None and self._guarded(f"line {line}", self.memory.knows, owner):
                kept += self._keep_line(owner, text, line)
            elif time.monotonic() - at < UNPLACED_S:
                self._unplaced.append((face, text, line, at))
        return kept

    def in_session(self) -> bool:
        """Whether someone's session is open (a summary is due when they go)."""
        return bool(self._sessions)

    def waiting_lines(self) -> int:
        """Lines of someone not known yet that wait for their yes (`place`)."""
        return len(self._unplaced)

    def left(self, in_view: list[str]) -> list[str]:
        """End the sessions of those no longer in view: each one's summary is kept."""
        gone = [p for p in self._sessions if p not in in_view]
        for person in gone:
            started, lines = self._sessions.pop(person)
            self._guarded(f"the session of {person}", self._summarise, person, started, lines)
        return gone

    def _facts(self, person: str, text: str, line: int) -> list[Fact]:
        facts = parse_facts(self.ask(extraction_messages(text), FACTS_SCHEMA), text, time.time())
        with self._writing():
            return [f for f in facts if self.memory.remember(person, f, f"fact from line {line}")]

    def _summarise(self, person: str, started: float, lines: list[str]) -> None:
        summary = parse_summary(self.ask(summary_messages(lines), SUMMARY_SCHEMA))
        if summary:
            with self._writing():
                self.memory.session_ended(person, SessionSummary(started, time.time(), summary),
                                          "session ended")

    def flush(self) -> int:
        """Write what waits for the store (a queued memory); how many writes still wait."""
        with self._writing():
            return self.memory.flush()

    @contextlib.contextmanager
    def _writing(self):
        """A write to the store under way: the notes read before it or while it runs go.

        Counted when it ends only, a note read before it would be used again in the moment
        between its commit and the count (a suite run's reply missed the facts just kept: the
        queue's own commit came between); while one runs, a note is read and not kept.
        """
        with self._lock:
            self._writes_open += 1
        try:
            yield
        finally:
            with self._lock:
                self._writes_open -= 1
                self._writes += 1

    def _guarded(self, what: str, job, *args):
        """job(*args), or None: a failing model or store costs this, never a reply."""
        try:
            return job(*args)
        except StoreError as e:
            self.log.warning(f"memory: {what} not kept: {e}")
        except Exception as e:  # noqa: BLE001 - the model's failure costs a fact, never a reply
            self.log.warning(f"memory: {what} not taken: {type(e).__name__}: {e}")
        return None

    def standing(self, in_view: list[str]) -> str:
        """The note of the known people in view, the same while they are and nothing is kept.

        Read from the store (audited) when the people in view change or this keeper wrote a
        fact or a summary; a fact another robot wrote comes with the next arrival.
        """
        return " ".join(note for _, note in self._recalls(in_view) if note)

    def for_line(self, in_view: list[str], line: str, late: bool = False) -> str:
        """The facts a line asks about, told again right before it ("" for none: `line_note`).

        A person asking what the robot knows of them gets all of it (or "nothing kept").
        late: the note is read after the line's last word is heard, so it tells only what the
        standing note does not (each token then delays the reply's first word).
        """
        return self.line_note(in_view, line, late).text

    def line_note(self, in_view: list[str], line: str, late: bool = False) -> LineNote:
        """`for_line`'s note with the facts it tells (the prompt compares notes by them)."""
        if ASKS_WHAT_IS_KNOWN.search(line):
            return LineNote(self._asked(in_view, line))
        cap = int(self.note_chars * LINE_NOTE_SHARE)
        notes = [line_note(r, line, cap, standing if late else "")
                 for r, standing in self._recalls(in_view)]
        return LineNote(" ".join(n.text for n in notes if n.text),
                        frozenset().union(*(n.facts for n in notes)))

    def note(self, in_view: list[str], line: str) -> str:
        """Everything the reply prompt is told of the known people in view for this line."""
        if ASKS_WHAT_IS_KNOWN.search(line):
            return self._asked(in_view, line)       # all of it already
        return " ".join(n for n in (self.standing(in_view), self.for_line(in_view, line)) if n)

    def forget(self) -> None:
        """Someone was forgotten: no note read before stays (the next one is read anew)."""
        with self._lock:
            self._standing = None

    def _recalls(self, in_view: list[str]) -> list[tuple[Recall, str]]:
        if len(in_view) > 1 and not self.in_company:
            return []
        with self._lock:
            key = (tuple(in_view), self._writes)
            if self._standing is None or self._standing[0] != key or self._writes_open:
                recalls = self._read(in_view)
                if recalls is None:
                    return []               # the store is away: tried again next time
                notes = [(r, standing_note(r, self.note_chars)) for r in recalls]
                if self._writes_open:
                    return notes            # it may miss what is being written
                self._standing = (key, notes)
            return self._standing[1]

    def _read(self, in_view: list[str]) -> list[Recall] | None:
        try:
            found = [self.memory.recall(person, "recall for a reply") for person in in_view]
        except StoreError as e:         # a queued memory answers at once while it is away
            if not self._read_failed:
                self.log.warning(f"memory: no recall for a reply: {e}")
            self._read_failed = True
            return None
        self._read_failed = False
        return [r for r in found if r is not None]

    def _asked(self, in_view: list[str], line: str) -> str:
        """The whole note of each known person in view, or that nothing is kept of them."""
        if len(in_view) > 1 and not self.in_company:
            return ""
        notes = []
        for recall in self._read(in_view) or ():
            note = recall_note(recall, line, self.note_chars * ASKED_NOTE_TIMES)
            notes.append(note or NOTHING_KEPT.format(name=recall.name or "this person"))
        return " ".join(notes)
