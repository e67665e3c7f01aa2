"""A turn's reply from its prompt: asked, filtered, on time, asked again, or the fallback.

`ReplyMaker` is the reply half of a conversation (core/conversation.py holds the turn and
core/prompt_assembly.py the prompt): it asks the LLM (with the turn's tools, streamed or
whole), passes every sentence through the reply filter (notes read out, labels, echoes,
repeats), speaks each as it comes, meets the first sentence's deadline, asks once more for a
reply that only repeated an earlier one or came empty, and gives the persona's fallback line
when nothing usable came. ROS-free.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from vision_dialogue.core.conversation_types import ConversationConfig, SentenceCallback
from vision_dialogue.core.deadlines import FirstBy
from vision_dialogue.core.focus import asks_to_repeat
from vision_dialogue.core.persona import Persona, addressed
from vision_dialogue.core.perspective import from_own_side
from vision_dialogue.core.reply_filter import NoteFilter
from vision_dialogue.core.turn_tools import TurnTools
from vision_dialogue.llm.sentences import split_sentences
from vision_dialogue.llm.tool_loop import ToolRecord, questions

REPEAT_RETRY_TEMPERATURE = 0.7
"""Sampling for the second try after a repeated reply (greedy decoding would say it again)."""


@dataclass
class _Turn:
    """One reply in the making: what each try asks with and where its sentences go."""

    msgs: list
    turn_id: int
    deadline: float | None
    sentences: list[str]
    on_sentence: SentenceCallback | None
    question: str                           # the person's line
    schemas: list                           # the turn's tools ([]: none)
    repeat_ok: bool                         # "say that again": the last line may come again
    instruction: str = ""                   # a remark's (the greeting's) instruction
    names: tuple[str, ...] = ()             # the known people a greeting names
    made: list[ToolRecord] = field(default_factory=list)    # this turn's calls


class ReplyMaker:
    """Produces the sentences of one reply (see the module docstring).

    note_filter(allow_repeats) -> NoteFilter: the reply filter for the prompt as it is now.
    """

    def __init__(self, backend, persona: Persona, config: ConversationConfig,
                 tools: TurnTools, note_filter: Callable[[bool], NoteFilter],
                 logger: logging.Logger):
        self.backend, self.persona, self.config = backend, persona, config
        self.tools, self.note_filter, self.log = tools, note_filter, logger
        self.repeats_avoided = 0          # replies asked for again because they repeated one

    def make(self, msgs: list, turn_id: int, on_sentence: SentenceCallback | None,
             sentences: list[str], records: list[ToolRecord],
             deadline: float | None, past: bool = False, question: str = "",
             instruction: str = "", names: tuple[str, ...] = ()) -> None:
        """Ask the LLM (tools, streamed, or whole) and append the spoken sentences.

        A reply that only says again what the robot said before is asked for once more, with
        what not to say and some sampling (`avoid_repeats`). Raises on a failed, empty or late
        reply (the sentences already spoken stay).
        """
        cfg, tools = self.config, self.tools
        turn = _Turn(msgs, turn_id, deadline, sentences, on_sentence, question,
                     tools.schemas(past), asks_to_repeat(question), instruction, names)

        def ask() -> Iterable[str]:
            if turn.schemas and tools.streamed:
                return tools.stream(msgs, turn.schemas, turn_id, turn.made, question)
            if turn.schemas:
                text = tools.reply(msgs, turn.schemas, turn_id, turn.made, question)
                asked = questions(turn.made)
                if asked:                   # the robot asks before it acts: said as it is
                    return asked
                text = self.note_filter(False).feed(text)
                if not text:
                    raise ValueError("empty reply after tool calls")
                return split_sentences(text)
            if cfg.stream:
                return self.backend.stream(msgs, model=cfg.model,
                                           max_tokens=cfg.max_reply_tokens)
            return split_sentences(self.backend.complete(msgs, model=cfg.model,
                                                         max_tokens=cfg.max_reply_tokens))

        notes = self.note_filter(turn.repeat_ok)
        first: list[FirstBy] = []      # the robot acting for a tool pauses the deadline
        tools.pausing = lambda: first[0].pause() if first else contextlib.nullcontext()
        try:
            if deadline is not None:
                first.append(FirstBy(ask, deadline, self._late(turn_id)))
            self._say(first[0] if first else ask(), notes, turn)
        finally:
            records.extend(turn.made)
        tries = [notes]
        filtered = bool(notes.said_before or notes.echoes or notes.claims or notes.contradicted
                        or notes.no_favourite)
        if not sentences and ((cfg.avoid_repeats and filtered) or
                              not (filtered or notes.repeats)):
            # nothing left to say (it repeated an earlier reply, read its notes out or claimed
            # an action), or nothing came at all (a small model may end its reply at once)
            tries.append(self._ask_again(notes, turn))
        self._last_resort(tries, sentences, on_sentence)

    def _last_resort(self, tries: list[NoteFilter], sentences: list[str],
                     on_sentence: SentenceCallback | None) -> None:
        """Nothing said yet: a repeat the filter dropped is said anyway, the last try's first.

        A repeat (the same question again, an earlier reply, a note that could not be put in
        other words) is better than a fallback; so is the side the robot took earlier, said
        plainly, when each try took the other one (persona kept_yes_line / kept_no_line).
        Raises ValueError, naming what the filter dropped, when there is neither.
        """
        for tried in reversed(tries):
            if not sentences and tried.repeats:
                for s in tried.repeats:
                    self._keep(s, sentences, on_sentence)
        kept = next((t.contradicted[0] for t in reversed(tries) if t.contradicted), None)
        if not sentences and kept is not None:
            self.log.info(f"the reply took the other side again; keeping the earlier one "
                          f"({kept.line[:80]!r})")
            self._keep(self.persona.kept_yes_line if kept.yes else self.persona.kept_no_line,
                       sentences, on_sentence)
        if not sentences:
            dropped = [s for tried in tries for s in tried.dropped]
            raise ValueError("empty reply" + (f" (dropped: {' | '.join(dropped)[:300]!r})"
                                              if dropped else ""))

    def fallback(self, turn_id: int, index: int, on_sentence: SentenceCallback | None,
                 greeting: bool = False, names: tuple[str, ...] = ()) -> str:
        """The persona's fallback line, streamed like a sentence when streaming is on.

        `names`: a greeting's known people, named when it is the reply's first sentence.
        """
        line = self.persona.fallback(greeting=greeting)
        if names and not index:
            line = addressed(line, names)
        if self.config.stream and on_sentence is not None:
            try:
                on_sentence(line, index, fallback=True)
            except Exception as e:  # noqa: BLE001
                self.log.error(f"turn {turn_id}: sentence callback failed ({e})")
        return line

    def _say(self, parts: Iterable[str], notes: NoteFilter, turn: _Turn) -> None:
        """Speak (stream) and keep each part that survives the reply filter.

        The person's line (`turn.question`): an echo of its pronouns is turned round
        (core/perspective.py) before the filter judges it ("I am still in front of you" to
        "Am I still in front of you?" is a claim to see the person). The robot's questions
        before it acts are said as they are (asked twice in a session, the filter would drop
        the second as a repeat); a sentence that claims an action no tool ran
        (TurnTools.claims_undone) is never said.
        """
        for s in parts:
            if s in questions(turn.made):
                pass
            elif self.tools.claims_undone(s, turn.made, turn.question):
                s = notes.drop_claim(s)
            else:
                s = notes.feed(from_own_side(s, turn.question, notes.told_text))
            if not s:
                continue
            if isinstance(parts, FirstBy):
                parts.met = True
            if turn.names and not turn.sentences:
                s = addressed(s, turn.names)
            self._keep(s, turn.sentences, turn.on_sentence)

    def _keep(self, sentence: str, sentences: list[str],
              on_sentence: SentenceCallback | None) -> None:
        """One sentence of the reply: streamed now (when streaming) and kept."""
        if self.config.stream and on_sentence is not None:
            on_sentence(sentence, len(sentences))
        sentences.append(sentence)

    def _ask_again(self, notes: NoteFilter, turn: _Turn) -> NoteFilter:
        """One more try, sampled: the reply repeated, read out, claimed or left nothing.

        It repeated an earlier line, claimed an action no tool ran, took the other side of
        an earlier line, said it has no favourite where one was asked, read its notes out, or
        was empty; each but an empty reply to a line
        gets a note saying what to do instead (an empty remark: its instruction again). A
        turn with tools asks with them again (no call now): a local model's prompt starts
        with them, so its cache holds all but the last lines. Returns
        the second try's filter (its `repeats` may still be said).
        """
        cfg = self.config
        repeated = list(notes.said_before)
        self.repeats_avoided += bool(repeated)
        if repeated:
            why, note = (f"repeated an earlier one ({' '.join(repeated)[:80]!r})",
                         self.persona.repeat_note)
        elif notes.claims:
            why, note = (f"claimed an action no tool ran ({notes.claims[0][:80]!r})",
                         self.persona.not_done_note)
        elif notes.contradicted:
            earlier = notes.contradicted[0]
            why, note = (f"took the other side of an earlier line ({earlier.line[:80]!r})",
                         self.persona.consistent_note.format(side=earlier.told))
        elif notes.no_favourite:
            why, note = "gave no favourite where one was asked", self.persona.favourite_note
        elif notes.echoes:
            why, note = "read its notes out", self.persona.own_words_note
        else:
            # a remark's instruction comes again, last: a sampled retry of a greeting that
            # came empty left the known person's name out (a suite run)
            why, note = "was empty", turn.instruction
        self.log.info(f"turn {turn.turn_id}: the reply {why}; asking for a new one")
        again = turn.msgs + ([{"role": "system", "content": note}] if note else [])
        # a local model is also kept off the repeated or claimed lines' words (llm/avoid.py)
        kept_off = repeated or list(notes.claims)
        kwargs = dict(model=cfg.model, max_tokens=cfg.max_reply_tokens,
                      temperature=REPEAT_RETRY_TEMPERATURE,
                      **({"avoid": kept_off} if kept_off and getattr(self.backend, "avoids",
                                                                     False) else {}))

        def ask_again() -> Iterable[str]:
            if turn.schemas and self.tools.streamed:
                return self.backend.stream_with_tools(again, turn.schemas, tool_choice="none",
                                                      calls=[], **kwargs)
            return self.backend.stream(again, **kwargs)
        notes = self.note_filter(turn.repeat_ok)
        self._say(ask_again() if turn.deadline is None else
                  FirstBy(ask_again, max(turn.deadline, time.monotonic() + 1.0),
                          self._late(turn.turn_id)), notes, turn)
        return notes

    def _late(self, turn_id: int) -> Callable[[str], None]:
        def log_late(text: str) -> None:
            self.log.warning(f"turn {turn_id}: the LLM answered after the reply deadline; "
                             f"not spoken: {text[:200]!r}")
        return log_late
