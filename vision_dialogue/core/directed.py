"""Lines that enter the dialogue without asking the LLM (ROS-free).

A line the application has the robot say (the Say skill), a person's line heard for a skill (an
Ask's answer), Visual ChatGPT's "Received." exchange for a shared picture, and an utterance
dropped unanswered. A mixin of `Conversation`: each keeps the timeline in order under the turn
lock and tells the listeners (transcript, monitor), as a reply does.
"""
from __future__ import annotations

from vision_dialogue.core.conversation_types import SentenceCallback, TurnResult
from vision_dialogue.core.entries import DroppedEntry, Entry, ExchangeEntry, ReplyEntry, \
    UserEntry
from vision_dialogue.core.timeline import ROBOT, USER
from vision_dialogue.llm.sentences import split_sentences


class DirectedLines:
    """Conversation's lines without an LLM call (see the module docstring)."""

    def say(self, text: str, on_sentence: SentenceCallback | None = None,
            skill: str = "say") -> TurnResult:
        """The robot says `text` as given: streamed sentence by sentence, then its line.

        A turn of its own (turn id), so the speech node speaks it in order with the replies and
        the next reply knows it was said. Tells a ReplyEntry with `skill` set. ValueError if empty.
        """
        text = " ".join(str(text).split())
        if not text:
            raise ValueError("the line to say is empty")
        sentences = split_sentences(text) or [text]
        with self.turns_taken.lock:
            turn_id = self.turns_taken.next()
            for i, sentence in enumerate(sentences):
                if self.config.stream and on_sentence is not None:
                    on_sentence(sentence, i)
            self.timeline.add_line(ROBOT, text)
        result = TurnResult(turn_id, "", text, sentences, skill=skill)
        self._emit(ReplyEntry(result))
        self.folder.check()
        return result

    def hear(self, text: str, speaker: str = "", skill: str = "",
             next_reply: bool = False) -> None:
        """A person's line that gets no reply of its own (an Ask's answer): into the timeline.

        `next_reply`: the next turn's reply answers it with the lines after it (lines said
        while the robot was busy): its record names that turn, not the one before.
        """
        text = " ".join(str(text).split())
        if not text:
            return
        with self.turns_taken.lock:
            self.timeline.add_line(USER, text, speaker)
            turn_id = self.turns_taken.last + (1 if next_reply else 0)
        self._emit(UserEntry(turn_id, text, speaker, skill))
        self.folder.check()

    def notify(self, entry: Entry) -> None:
        """Tell the listeners of something beside the lines (a skill's stage, an intent)."""
        self._emit(entry)

    def add_exchange(self, user_text: str, robot_text: str, **info) -> None:
        """Add a user line and the robot's line without asking the LLM.

        For Visual ChatGPT's "Received." turn for a shared image, say. Tells an ExchangeEntry
        with both texts and `info`.
        """
        user_text, robot_text = " ".join(str(user_text).split()), " ".join(
            str(robot_text).split())
        if not user_text or not robot_text:
            raise ValueError("both lines of an exchange must be non-empty")
        with self.turns_taken.lock:
            self.timeline.add_line(USER, user_text)
            self.timeline.add_line(ROBOT, robot_text)
        self._emit(ExchangeEntry(user_text, robot_text, info))
        self.folder.check()

    def note_dropped(self, text: str, reason: str, speaker: str = "") -> None:
        """Report an utterance that was never answered (a DroppedEntry, for the transcript)."""
        self.log.warning(f"utterance dropped unanswered ({reason}): {text[:120]!r}")
        self._emit(DroppedEntry(text, reason, speaker))
