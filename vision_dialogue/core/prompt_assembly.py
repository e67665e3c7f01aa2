"""What a reply's prompt is made of, and the prompt itself.

`PromptAssembly` is the prompt half of a conversation (core/conversation.py holds the turn,
core/reply_maker.py the reply): the timeline of frames, summaries, lines and events (each
frame encoded, or observed for a text-only model, on its way in), the frame archive look_back
reads, who is in view and who speaks, and the messages a reply or a warm-up reads: the
bounded timeline, the people note, the turn's notes (addressee, language, focus). ROS-free.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

import numpy as np

from vision_dialogue.core.conversation_types import ConversationConfig, LineNote
from vision_dialogue.core.focus import focus_note
from vision_dialogue.common.images import Frame, as_bgr, downscale, is_dark
from vision_dialogue.core.lookback import FrameArchive
from vision_dialogue.core.opinions import answered_before, exchanges
from vision_dialogue.core.people import PEOPLE_FRESH_S, is_a_name
from vision_dialogue.core.persona import Persona, language_instruction
from vision_dialogue.core.prompt import PromptBuilder, now_index, prompt_size
from vision_dialogue.core.reply_filter import NoteFilter, turn_filter
from vision_dialogue.core.summariser import SummaryRule, bounded
from vision_dialogue.core.timeline import USER, EventItem, FrameItem, LineItem, SummaryItem, \
    Timeline, describe


class PromptAssembly:
    """The prompt's contents and messages (see the module docstring).

    rule: the paper's n and m (a reply's prompt shows at most n raw frames; the conversation
    sets a new one here and in its summariser). observer: callable(bgr) -> str or an
    Observation, for a backend without images.
    """

    def __init__(self, persona: Persona, config: ConversationConfig, supports_images: bool,
                 rule: SummaryRule, observer=None, logger: logging.Logger | None = None):
        self.persona, self.config, self.supports_images = persona, config, supports_images
        self.rule, self.observer = rule, observer
        self.log = logger or logging.getLogger("vision_dialogue.conversation")
        self.timeline = Timeline()
        self.builder = PromptBuilder(persona, config.policy, supports_images)
        self.archive = FrameArchive(config.archive_frames)
        self.newest: Frame | None = None      # the newest camera frame (None before the first)
        self._newest_at = 0.0                 # time.monotonic() of the newest frame
        self._people: tuple[float, str] = (0.0, "")   # (monotonic time, description)
        self._speakers: set[str] = set()
        #: the names a person manager gave the people in view (the opening remark greets them)
        self.known_in_view: tuple[str, ...] = ()
        #: what a Chat still has to find out (application/skills.run_chat), or ""
        self.needs = ""
        #: what the robot remembers of the known people in view (set where a people store is
        #: given: application/identity/remembering.py through the manager): standing() the same
        #: while they are, recall(line, late) a LineNote of what a line asks about (late: only
        #: what standing() does not tell)
        self.standing: Callable[[], str] | None = None
        self.recall: Callable[[str, bool], LineNote] | None = None
        self._pinned = ("", 0)   # the standing note and the message index where it first went
        self._remembered = ""    # the newest turn's line note (the reply filter reads both)
        #: the line notes the words heard so far of the line being spoken were read with, and
        #: whether each went after the line (`_line_note`); emptied by each turn
        self._read_ahead: dict[LineNote, bool] = {}

    # --- what comes in ---------------------------------------------------------------------
    def add_frame(self, image: np.ndarray, stamp: float | None = None,
                  objects: str = "") -> Frame:
        """A camera frame encoded (or observed) into the timeline; ValueError if malformed."""
        bgr = as_bgr(image)
        pol = self.config.policy
        bgr = downscale(bgr, max(pol.newest_max_side, pol.older_max_side))
        frame = Frame(bgr=bgr, stamp=time.time() if stamp is None else float(stamp))
        frame.dark = is_dark(bgr, pol.dark_threshold)
        if self.supports_images:
            pol.prepare(frame)
        elif self.observer is not None:
            try:
                seen = self.observer(bgr)
                if not isinstance(seen, str):          # perception's Observation
                    frame.people = len(seen.people)
                    seen = seen.text
                frame.observation = str(seen).strip()
            except Exception as e:  # noqa: BLE001
                self.log.warning(f"frame observer failed ({e}); frame goes in unobserved")
        if frame.dark and not frame.observation and not self.supports_images:
            frame.observation = "darkness"
        if objects and not frame.dark:
            frame.set_objects(objects, text_only=not self.supports_images)
        self.timeline.add_frame(frame)
        self.archive.add(frame)
        self.newest, self._newest_at = frame, time.monotonic()
        return frame

    def add_person_line(self, text: str, speaker: str) -> None:
        """The person's line; speakers are labelled once two speak, or one gives a name."""
        self.timeline.add_line(USER, text, speaker)
        if speaker:
            self._speakers.add(speaker)
            self.builder.label_speakers = self.builder.label_speakers or \
                len(self._speakers) > 1 or is_a_name(speaker)

    def raw_frame(self, stamp: float) -> Frame | None:
        """The frame stamped `stamp` while it is still raw in the timeline (None after)."""
        for item in reversed(self.timeline.snapshot()):
            if item.kind == "frame" and abs(item.frame.stamp - stamp) < 1e-6:
                return item.frame
        return None

    def set_people(self, description: str) -> None:
        """Who the camera tracks now, in words ("" for nobody)."""
        self._people = (time.monotonic(), description)

    # --- what is known now -----------------------------------------------------------------
    def people_now(self) -> str:
        t, description = self._people
        return description if time.monotonic() - t <= PEOPLE_FRESH_S else ""

    def camera_lost(self) -> bool:
        """No frame came for camera_timeout_s (after at least one did)."""
        t = self.config.camera_timeout_s
        return bool(t and self.newest is not None and time.monotonic() - self._newest_at > t)

    def items(self) -> list:
        """The timeline as a reply prompt shows it: at most `n` raw frames."""
        return bounded(self.timeline.snapshot(), self.rule.n,
                       self.persona.pending_frames_marker)

    def frame_ids(self) -> set[int]:
        """Ids of the raw frames a reply's prompt shows now (look_back skips them)."""
        return {i.frame.id for i in self.items() if i.kind == "frame"}

    def memories(self) -> list[str]:
        """What the robot remembers seeing, oldest first, in its words (for a past question)."""
        first = self.archive.frames()[:1]
        texts = [f.observation for f in first if f.observation] + [
            it.text for it in self.timeline.snapshot() if it.kind == "summary"]
        speak = getattr(self.observer, "speak", None)
        return [(speak(t, True) if callable(speak) else "") or t for t in texts]

    # --- the messages ----------------------------------------------------------------------
    def reply_messages(self, items: list | None = None) -> list:
        """The prompt up to the person's line, the people note last (the warm-up reads it)."""
        items = self.items() if items is None else items
        msgs = self.builder.reply_messages(items, self.timeline.history_summary,
                                           self.camera_lost())
        self._insert_standing(msgs)
        people = self.people_now()
        if people:
            msgs.insert(now_index(msgs), {"role": "system", "content":
                                          self.persona.people_note.format(people=people)})
        if self.needs:
            msgs.insert(now_index(msgs), {"role": "system", "content":
                                          self.persona.needs_note.format(needs=self.needs)})
        return msgs

    def _insert_standing(self, msgs: list) -> None:
        """The standing memory note where it first went: read once, then from the cache.

        Inserted at now_index each turn, a note is read again at every reply (a 1.5B on two
        cores: seconds); kept where it first appeared, the prompt before and with it stays
        the one the model read. A new note (someone came, a fact was kept) goes at the end.
        """
        note = self.standing() if self.standing else ""
        if not note:
            self._pinned = ("", 0)
            return
        if note != self._pinned[0]:
            self._pinned = (note, now_index(msgs))
        msgs.insert(min(self._pinned[1], now_index(msgs)), {"role": "system", "content": note})

    def turn_messages(self, text: str | None, speaker: str, language: str, instruction: str,
                      past: bool, items: list | None = None, acts: tuple[str, ...] = (),
                      ahead: bool = False) -> tuple[list, list]:
        """The timeline items a reply shows and its prompt, with this turn's notes.

        acts: the verbs of the robot's own actions on offer (for the focus note). ahead: the
        person still speaks (`items` from `ahead`): a warm-up reads these messages.
        """
        items = self.items() if items is None else items
        msgs = self.reply_messages(items)
        if text is None:   # last, as the model's instruction (as a user line it is echoed)
            msgs.append({"role": "system", "content": instruction})
        if text is not None and speaker and self.builder.label_speakers and \
                self.persona.addressee_note:
            msgs.append({"role": "system",
                         "content": self.persona.addressee_note.format(speaker=speaker)})
        answer_in = language_instruction(language)
        if answer_in:
            msgs.append({"role": "system", "content": answer_in})
        if text is not None and self.config.focus_note != "none" and not self.supports_images:
            newest = self.newest
            # the robot's earlier answer to what the line asks again (the reply filter holds
            # the reply to it: core/reply_filter.turn_filter)
            answered = answered_before(text, exchanges(items))
            note = focus_note(text, past, self.memories() if past else (),
                              self.config.focus_note,
                              objects=newest.objects if newest is not None else "", acts=acts,
                              observation=newest.observation if newest is not None else "",
                              answered=answered.note if answered else "")
            if note:       # before the person's line (and the memory's note): it stays last
                msgs.insert(now_index(msgs), {"role": "system", "content": note})
        note, after = self._line_note(text) if text is not None and self.recall else \
            (LineNote(), False)
        if ahead:
            self._read_ahead[note] = after
        else:
            self._read_ahead = {}
        self._remembered = note.text
        if note.text:
            msgs.insert(len(msgs) if after else now_index(msgs),
                        {"role": "system", "content": note.text})
        return items, msgs

    def _line_note(self, text: str) -> tuple[LineNote, bool]:
        """What is remembered that the line asks about, and whether it goes after the line.

        Before it (after the focus note, which a line's first words already give) where the
        line was not read yet, or was read ahead with a note that tells all this one would:
        the model reads the facts right before the question. Where the words heard so far were
        read without it (a question whose last word says what it asks: "Where do I work?"),
        the note is read after that word, each of its tokens before the reply's first word:
        then it tells only what the standing note lacks, after the line (before it, the whole
        line would be read again). A note keeps the place it was first read in until the turn.
        """
        note, read = self.recall(text, False), dict(self._read_ahead)  # a warm-up may add
        if note in read or not read:
            return note, read.get(note, False)
        for earlier, after in read.items():
            if earlier.tells_all_of(note):
                return earlier, after
        return self.recall(text, True), True

    def ahead(self, text: str, speaker: str) -> list:
        """The items with the person's words so far as their line (a warm-up reads them)."""
        return self.items() + [LineItem(USER, text, speaker=speaker)]

    def note_filter(self, allow_repeats: bool = False,
                    instructions: Iterable[str] = ()) -> NoteFilter:
        """The reply filter for the prompt as it is now (core/reply_filter.py).

        `instructions`: notes besides the persona's that the prompt may hold (the tools'); the
        standing notes (a Chat's purpose, the robot's abilities) are added here.
        """
        return turn_filter(self.persona, self.timeline.snapshot(), self.newest,
                           self.newest is None or self.camera_lost(),
                           getattr(self.observer, "speak", None), allow_repeats,
                           instructions=[*self.builder.notes.values(), *instructions],
                           told=f"{self._pinned[0]} {self._remembered}")

    def look_back_image(self, frame: Frame) -> str:
        return frame.data_url(self.config.policy.newest_max_side, self.config.policy.jpeg_quality)

    def counts(self) -> dict:
        """The prompt's contents counted and in words (the node's PromptState)."""
        items = self.timeline.snapshot()
        chars, image_bytes = prompt_size(self.reply_messages())
        return {
            "raw_frames": sum(isinstance(i, FrameItem) for i in items),
            "frame_summaries": sum(isinstance(i, SummaryItem) for i in items),
            "dialogue_lines": sum(isinstance(i, LineItem) for i in items),
            "events": sum(isinstance(i, EventItem) for i in items),
            "folded_lines": self.timeline.folded_lines,
            "prompt_chars": chars,
            "prompt_image_bytes": image_bytes,
            "summaries": [i.text for i in items if isinstance(i, SummaryItem)],
            "history_summary": self.timeline.history_summary,
            "timeline": [describe(i) for i in items],
        }
