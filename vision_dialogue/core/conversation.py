"""The conversation: frames and utterances in, replies out, with a bounded, summarised prompt.

`Conversation` ties the timeline, the image policy, frame summaries, history folding and the
persona together. It has no ROS imports; the manager node is a thin adapter around it.

Threading: `add_frame` and `turn` may be called from any threads at once. Turns are serialised
by a turn lock (the caller decides their order; the node feeds them from one FIFO queue).
Summaries and folds run on a small worker pool and never block a turn (a turn snapshots the
timeline under a short lock); they wait while the person speaks (`hearing`).
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Iterable

import numpy as np

from vision_dialogue.core.background import PromptWarmer
from vision_dialogue.core.conversation_types import ConversationConfig, SentenceCallback, \
    TurnResult
from vision_dialogue.core.directed import DirectedLines
from vision_dialogue.core.deadlines import DeadlineExceeded, FirstBy, TimedSentences, \
    YieldToTurns
from vision_dialogue.core.focus import asks_to_repeat, focus_note
from vision_dialogue.core.history import HistoryFolder
from vision_dialogue.core.images import Frame, as_bgr, downscale, is_dark
from vision_dialogue.core.lookback import FrameArchive, LookBack, about_the_past
from vision_dialogue.core.people import PEOPLE_FRESH_S, is_a_name
from vision_dialogue.core.persona import Persona, language_instruction
from vision_dialogue.core.prompt import PromptBuilder, now_index, prompt_size
from vision_dialogue.core.reply_filter import NoteFilter, clean_reply, turn_filter
from vision_dialogue.core.summariser import FrameSummariser, SummaryRule, bounded
from vision_dialogue.core.timeline import ROBOT, USER, EventItem, FrameItem, LineItem, \
    SummaryItem, Timeline, describe
from vision_dialogue.core.tool_turns import ToolProvider, TurnTools
from vision_dialogue.llm.sentences import split_sentences
from vision_dialogue.llm.tool_loop import AgentResult, ToolRecord

__all__ = ["Conversation", "ConversationConfig", "DeadlineExceeded", "SentenceCallback",
           "TurnResult", "clean_reply"]

_log = logging.getLogger("vision_dialogue.conversation")

Listener = Callable[[str, dict], None]

REPEAT_RETRY_TEMPERATURE = 0.7
"""Sampling for the second try after a repeated reply (greedy decoding would say it again)."""


class Conversation(DirectedLines):
    """A vision-enabled dialogue with one person.

    backend: a ChatBackend (complete/stream/supports_images). observer: callable(bgr) -> str,
    or an object with .text and .people (perception's Observation), used when the backend
    cannot take images; when it has `speak(notes, past)`, a reply that reads its notes out is
    said in the robot's words instead. summary_backend: for summaries and folds
    (default: backend). listeners: callables(event, data) for "frame", "user", "reply",
    "summarising", "summary", "summary_deferred", "summary_failed", "fold", "fold_failed",
    "tool", "exchange", "dropped" (called outside locks, except "tool", which is called during
    the turn).

    Tools (Visual ChatGPT): after `set_tools(provider)`, a turn offers the provider's tools
    to the LLM (llm/tool_loop.py) whenever it has any and the backend has
    `complete_with_tools`; otherwise turns are exactly as without tools.
    """

    def __init__(self, backend, persona: Persona, config: ConversationConfig | None = None, *,
                 observer: Callable[[np.ndarray], str] | None = None, summary_backend=None,
                 listeners: Iterable[Listener] = (), logger=None):
        self.config = cfg = config or ConversationConfig()
        rule = SummaryRule(cfg.n, cfg.m)             # the one check of n and m
        self.backend = backend
        self.persona = persona
        self.observer = observer
        self.log = logger or _log
        self.supports_images = bool(getattr(backend, "supports_images", True))
        self.timeline = Timeline()
        self.builder = PromptBuilder(persona, cfg.policy, self.supports_images)
        self._pool = ThreadPoolExecutor(max_workers=cfg.workers,
                                        thread_name_prefix="vd-summary")
        self._no_turn = threading.Event()   # set while no user turn is being answered
        self._no_turn.set()
        self._summary_backend = summary_backend or backend
        sb = YieldToTurns(self._summary_backend, self._no_turn)
        smodel = cfg.summary_model or cfg.model
        self.summary_mode = cfg.summary_mode
        if self.summary_mode == "auto":
            self.summary_mode = "llm" if self.supports_images or observer is None else "merge"
        self.summariser = FrameSummariser(
            self.timeline, self.builder, sb, self._pool, rule, mode=self.summary_mode,
            model=smodel,
            max_tokens=cfg.summary_max_tokens, max_failures=cfg.max_summary_failures,
            on_event=self._after_summary, logger=self.log)
        self.folder = HistoryFolder(
            self.timeline, self.builder, sb, self._pool, cfg.history_budget_chars,
            cfg.keep_recent_lines, model=smodel, on_event=self._after_fold, logger=self.log)
        self._listeners: list[Listener] = list(listeners)
        self._turn_lock = threading.Lock()
        self._turn_id = 0
        self._closed = False
        self.warmer = PromptWarmer(backend, self._pool, self.reply_messages, self._no_turn,
                                   self.log, enabled=cfg.warm_cache)
        self._newest: Frame | None = None
        self._newest_at = 0.0                 # time.monotonic() of the newest frame
        self._speakers: set[str] = set()
        self.repeats_avoided = 0          # replies asked for again because they repeated one
        self._people: tuple[float, str] = (0.0, "")   # (monotonic time, description)
        self.archive = FrameArchive(cfg.archive_frames)
        self.look_back = LookBack(self.archive, self._prompt_frame_ids,
                                  self._look_back_image if self.supports_images else None)
        self.turn_tools = TurnTools(backend, cfg, self.look_back, self._emit, self.log,
                                    show_images=self.supports_images)

    def set_tools(self, provider: ToolProvider | None, *, max_rounds: int = 3,
                  show_images: bool = True) -> None:
        """Offer `provider`'s tools in every turn (None: no tools).

        `max_rounds`: tool rounds per turn (>= 1). `show_images`: images the tools make are shown
        to the LLM (only when the backend takes images).
        """
        if max_rounds < 1:
            raise ValueError(f"max_rounds={max_rounds} must be >= 1")
        tools = self.turn_tools
        tools.providers[:] = [provider] if provider is not None else []
        tools.max_rounds = int(max_rounds)
        tools.show_images = bool(show_images) and self.supports_images

    def add_tools(self, provider: ToolProvider) -> None:
        """Offer `provider`'s tools too, beside those set (the robot's own actions).

        A `standing` note (offered on every turn) goes with the prompt's standing notes, so a
        local model reads it once, with the cached prompt, not on every turn.
        """
        self.turn_tools.providers.append(provider)
        if getattr(provider, "standing", False) and self.turn_tools.supported:
            self.builder.notes[f"tools {len(self.turn_tools.providers)}"] = provider.note
            self.warmer.soon()

    @property
    def tools(self) -> ToolProvider | None:
        """The first provider whose tools every turn offers (None: none)."""
        return self.turn_tools.provider

    @property
    def tools_supported(self) -> bool:
        """Whether the backend can call tools (has complete_with_tools)."""
        return self.turn_tools.supported

    # --- events ----------------------------------------------------------------------------
    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def _emit(self, kind: str, data: dict) -> None:
        for fn in list(self._listeners):
            try:
                fn(kind, data)
            except Exception as e:  # noqa: BLE001 - a listener must not break the dialogue
                self.log.error(f"listener failed on {kind!r}: {e}")

    def _after_summary(self, kind: str, data: dict) -> None:
        if kind == "summary":
            self.archive.summarised(data.get("frame_ids", ()), data.get("text", ""))
        self._emit(kind, data)
        if kind == "summary":
            self.folder.check()
            self.warmer.soon()

    def _after_fold(self, kind: str, data: dict) -> None:
        self._emit(kind, data)
        if kind == "fold":
            self.warmer.soon()

    # --- input -----------------------------------------------------------------------------
    def add_frame(self, image: np.ndarray, stamp: float | None = None,
                  objects: str = "") -> Frame:
        """Add a camera frame (HxWx3 BGR uint8, or grey).

        Encodes it (or observes it, for a text-only backend) before it enters the timeline, then
        applies the summary rule. `objects`: an object detector's note for it. Raises
        ValueError on a malformed image.
        """
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
        self._newest, self._newest_at = frame, time.monotonic()
        self._emit("frame", {"frame": frame})
        self.summariser.check()
        self.warmer.soon()
        return frame

    def turn(self, text: str, on_sentence: SentenceCallback | None = None,
             speaker: str = "", deadline: float | None = None,
             language: str = "") -> TurnResult:
        """Answer one user utterance.

        Streams sentences to on_sentence(sentence, index, fallback=False) when the config asks
        for streaming; on an LLM failure the fallback line is streamed too (fallback=True).
        `deadline` (time.monotonic()): when no sentence is ready by then, the fallback line is
        the reply and the late answer is only logged. Never raises for LLM failures. Raises
        ValueError for an empty utterance. `language` (BCP-47, from the recogniser): a reply in
        that language is asked for when it is not the persona's (English).
        """
        text = " ".join(str(text).split())
        if not text:
            raise ValueError("utterance text is empty")
        return self._serve(text, on_sentence, speaker, deadline, language)

    def hearing(self, speaking: bool) -> None:
        """The person began or stopped speaking: frame summaries wait meanwhile (summariser)."""
        self.summariser.hold(speaking)

    def hear_ahead(self, text: str, speaker: str = "", language: str = "") -> None:
        """The person still speaks: a local model reads the prompt with their words so far."""
        text = " ".join(str(text).split())
        if text and not self._closed:
            self.warmer.soon(lambda: self._turn_messages(
                text, speaker, language, "", about_the_past(text),
                self._prompt_items() + [LineItem(USER, text, speaker=speaker)])[1])

    def greet(self, on_sentence: SentenceCallback | None = None,
              deadline: float | None = None, instruction: str = "") -> TurnResult:
        """Speak first: an opening remark about the person in view (the paper's persona).

        Like `turn`, without a user line: the persona's greet instruction (or `instruction`,
        e.g. a remark on a changed scene) goes to the LLM for this reply only, and the remark
        enters the timeline as the robot's line.
        """
        return self._serve(None, on_sentence, "", deadline,
                           instruction=instruction or self.persona.greet_instruction)

    def _serve(self, text: str | None, on_sentence: SentenceCallback | None, speaker: str,
               deadline: float | None, language: str = "", instruction: str = "") -> TurnResult:
        """A turn with background LLM calls held back, then its "reply" event."""
        self._no_turn.clear()
        try:
            with self._turn_lock:
                result = self._turn(text, on_sentence, speaker, deadline, language,
                                    instruction)
        finally:
            self._no_turn.set()
        self._emit("reply", {"result": result})
        self.summariser.check()     # summaries that gave way to this reply go again
        self.warmer.soon()          # then what came meanwhile (frames, this turn's lines)
        return result

    def _turn(self, text: str | None, on_sentence: SentenceCallback | None, speaker: str,
              deadline: float | None, language: str = "", instruction: str = "") -> TurnResult:
        """One turn under the turn lock: the user line in, the prompt, the reply, its line.

        text None: the robot speaks first (no user line; `instruction` is asked).
        """
        t0 = time.perf_counter()
        self._turn_id += 1
        turn_id = self._turn_id
        if text is not None:
            self.timeline.add_line(USER, text, speaker)
            if speaker:       # labelled once two people speak, or one gives a name
                self._speakers.add(speaker)
                self.builder.label_speakers = self.builder.label_speakers or \
                    len(self._speakers) > 1 or is_a_name(speaker)
            self._emit("user", {"turn_id": turn_id, "text": text, "speaker": speaker})
        self.folder.check()
        past = about_the_past(text or "")
        items, msgs = self._turn_messages(text, speaker, language, instruction, past)
        overhead = time.perf_counter() - t0
        records: list[ToolRecord] = []
        sentences = TimedSentences()
        error = None
        try:
            self._reply(msgs, turn_id, on_sentence, sentences, records, deadline, past,
                        text or "")
        except Exception as e:  # noqa: BLE001 - any backend failure gives the fallback
            error = f"{type(e).__name__}: {e}"
            self.log.error(f"turn {turn_id}: {error}; answering with the fallback line")
            sentences.append(self._fallback(turn_id, len(sentences), on_sentence,
                                            greeting=text is None))
        t1 = time.perf_counter()
        reply = " ".join(sentences)
        note = AgentResult("", 0, records).memory_note()   # kept even after a fallback
        acting = self.turn_tools.acting_names()
        self.timeline.add_line(ROBOT, f"{reply} {note}" if note else reply, calls=tuple(
            (r.name, json.dumps(r.arguments), r.outcome.message()) for r in records
            if r.name in acting))
        self.folder.check()
        overhead += time.perf_counter() - t1
        return TurnResult(turn_id, text or "", reply, list(sentences), error is not None, error,
                          overhead, [i.id for i in items if i.kind == "frame"],
                          [i.frame_ids for i in items if i.kind == "summary"], records,
                          round(sentences.first_at - t0, 3), round(t1 - t0, 3),
                          prompt_size(msgs)[0])

    def _turn_messages(self, text: str | None, speaker: str, language: str, instruction: str,
                       past: bool, items: list | None = None) -> tuple[list, list]:
        """The timeline items a reply shows and its prompt, with this turn's notes."""
        items = self._prompt_items() if items is None else items
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
            newest = self._newest
            note = focus_note(text, past, self._memories() if past else (),
                              self.config.focus_note,
                              objects=newest.objects if newest is not None else "",
                              acts=self.turn_tools.verbs())
            if note:       # right before the person's line: their question stays last
                msgs.insert(now_index(msgs), {"role": "system", "content": note})
        return items, msgs

    def _memories(self) -> list[str]:
        """What the robot remembers seeing, oldest first, in its words (for a past question)."""
        first = self.archive.frames()[:1]
        texts = [f.observation for f in first if f.observation] + [
            it.text for it in self.timeline.snapshot() if it.kind == "summary"]
        speak = getattr(self.observer, "speak", None)
        return [(speak(t, True) if callable(speak) else "") or t for t in texts]

    def _reply(self, msgs: list, turn_id: int, on_sentence: SentenceCallback | None,
               sentences: list[str], records: list[ToolRecord],
               deadline: float | None, past: bool = False, question: str = "") -> None:
        """Ask the LLM (tools, streamed, or whole) and append the spoken sentences.

        A reply that only says again what the robot said before is asked for once more, with
        what not to say and some sampling (`avoid_repeats`). Raises on a failed, empty or late
        reply (the sentences already spoken stay).
        """
        cfg = self.config
        tools = self.turn_tools
        schemas = tools.schemas(past)
        made: list[ToolRecord] = []

        def ask() -> Iterable[str]:
            if schemas and tools.streamed:
                return tools.stream(msgs, schemas, turn_id, made)
            if schemas:
                text = self._note_filter().feed(tools.reply(msgs, schemas, turn_id, made))
                if not text:
                    raise ValueError("empty reply after tool calls")
                return split_sentences(text)
            if cfg.stream:
                return self.backend.stream(msgs, model=cfg.model,
                                           max_tokens=cfg.max_reply_tokens)
            return split_sentences(self.backend.complete(msgs, model=cfg.model,
                                                         max_tokens=cfg.max_reply_tokens))

        repeat_ok = asks_to_repeat(question)
        notes = self._note_filter(allow_repeats=repeat_ok)
        first: list[FirstBy] = []      # the robot acting for a tool pauses the deadline
        tools.pausing = lambda: first[0].pause() if first else contextlib.nullcontext()
        try:
            if deadline is not None:
                first.append(FirstBy(ask, deadline, self._late(turn_id)))
            self._say(first[0] if first else ask(), notes, sentences, on_sentence)
        finally:
            records.extend(made)
        if not sentences and cfg.avoid_repeats and (notes.said_before or notes.echoes):
            # nothing left to say: it repeated an earlier reply, or read its notes out
            notes = self._ask_again(msgs, notes, turn_id, deadline, sentences, on_sentence,
                                    repeat_ok)
        elif not sentences and not (notes.said_before or notes.echoes or notes.repeats):
            # nothing came at all (a small model may end its reply at once): once more
            notes = self._ask_again(msgs, notes, turn_id, deadline, sentences, on_sentence,
                                    repeat_ok)
        if not sentences and notes.repeats:   # the same question again, or a note: said anyway
            for s in notes.repeats:
                self._keep(s, sentences, on_sentence)
        if not sentences:
            raise ValueError("empty reply")

    def _say(self, parts: Iterable[str], notes: NoteFilter, sentences: list[str],
             on_sentence: SentenceCallback | None) -> None:
        """Speak (stream) and keep each part that survives the reply filter."""
        for s in parts:
            s = notes.feed(s)
            if not s:
                continue
            if isinstance(parts, FirstBy):
                parts.met = True
            self._keep(s, sentences, on_sentence)

    def _keep(self, sentence: str, sentences: list[str],
              on_sentence: SentenceCallback | None) -> None:
        """One sentence of the reply: streamed now (when streaming) and kept."""
        if self.config.stream and on_sentence is not None:
            on_sentence(sentence, len(sentences))
        sentences.append(sentence)

    def _ask_again(self, msgs: list, notes: NoteFilter, turn_id: int, deadline: float | None,
                   sentences: list[str], on_sentence: SentenceCallback | None,
                   repeat_ok: bool) -> NoteFilter:
        """One more try, sampled: the reply repeated, read its notes out or was empty.

        The first two get a note saying what to do instead. Returns the second try's filter
        (its `repeats` may still be said).
        """
        cfg = self.config
        repeated = list(notes.said_before)
        self.repeats_avoided += bool(repeated)
        if repeated:
            why, note = (f"repeated an earlier one ({' '.join(repeated)[:80]!r})",
                         self.persona.repeat_note)
        elif notes.echoes:
            why, note = "read its notes out", self.persona.own_words_note
        else:
            why, note = "was empty", ""
        self.log.info(f"turn {turn_id}: the reply {why}; asking for a new one")
        notes = self._note_filter(allow_repeats=repeat_ok)
        again = msgs + ([{"role": "system", "content": note}] if note else [])
        # a local model is also kept off the repeated lines' word runs (llm/avoid.py)
        avoid = {"avoid": repeated} if repeated and getattr(self.backend, "avoids",
                                                            False) else {}

        def ask_again() -> Iterable[str]:
            return self.backend.stream(again, model=cfg.model, max_tokens=cfg.max_reply_tokens,
                                       temperature=REPEAT_RETRY_TEMPERATURE, **avoid)
        self._say(ask_again() if deadline is None else
                  FirstBy(ask_again, max(deadline, time.monotonic() + 1.0), self._late(turn_id)),
                  notes, sentences, on_sentence)
        return notes

    def _late(self, turn_id: int) -> Callable[[str], None]:
        def log_late(text: str) -> None:
            self.log.warning(f"turn {turn_id}: the LLM answered after the reply deadline; "
                             f"not spoken: {text[:200]!r}")
        return log_late

    def _fallback(self, turn_id: int, index: int, on_sentence: SentenceCallback | None,
                  greeting: bool = False) -> str:
        """The persona's fallback line, streamed like a sentence when streaming is on."""
        line = self.persona.fallback(greeting=greeting)
        if self.config.stream and on_sentence is not None:
            try:
                on_sentence(line, index, fallback=True)
            except Exception as e:  # noqa: BLE001
                self.log.error(f"turn {turn_id}: sentence callback failed ({e})")
        return line

    def _note_filter(self, allow_repeats: bool = False) -> NoteFilter:
        return turn_filter(self.persona, self.timeline.snapshot(), self._newest,
                           self._newest is None or self.camera_lost(),
                           getattr(self.observer, "speak", None), allow_repeats)

    def _prompt_frame_ids(self) -> set[int]:
        return {i.frame.id for i in self._prompt_items() if i.kind == "frame"}

    def _look_back_image(self, frame: Frame) -> str:
        return frame.data_url(self.config.policy.newest_max_side, self.config.policy.jpeg_quality)

    def set_summary_rule(self, n: int, m: int) -> None:
        """Change the paper's n and m while running (ValueError if m >= n)."""
        self.summariser.rule = SummaryRule(n, m)

    # --- inspection ------------------------------------------------------------------------
    def newest_frame(self) -> Frame | None:
        """The newest camera frame added (None before the first)."""
        return self._newest

    @property
    def turn_count(self) -> int:
        """Turns answered or in progress (the last turn_id)."""
        return self._turn_id

    def _prompt_items(self) -> list:
        """The timeline as a reply prompt shows it: at most `n` raw frames."""
        return bounded(self.timeline.snapshot(), self.summariser.rule.n,
                       self.persona.pending_frames_marker)

    def set_people(self, description: str, arrived=(), left=()) -> None:
        """Who the camera tracks now, in words (Furhat's users; "" for nobody).

        `arrived`, `left`: ids that came into view or went; each is a "person" event (the
        transcript, the monitor).
        """
        self._people = (time.monotonic(), description)
        for event, ids in (("arrived", arrived), ("left", left)):
            for i in ids:
                self._emit("person", {"event": event, "id": str(i)})
                self.add_event(f"user {i} {'came into view' if event == 'arrived' else 'left'}",
                               event=event)

    def add_event(self, text: str, stamp: float | None = None, event: str = "") -> None:
        """Something seen between frames ("someone on the left waved") into the timeline.

        `event`: the detector's kind (wave, arrived, ...); emits "event" (transcript, monitor).
        """
        text = " ".join(str(text).split())
        if not text:
            return
        stamp = time.time() if stamp is None else stamp
        self.timeline.add_event(text, stamp, event)
        self._emit("event", {"text": text, "event": event, "stamp": stamp})

    def set_objects(self, frame_stamp: float, note: str) -> bool:
        """An object detector's note for the recent frame stamped `frame_stamp`.

        For detections that came after their frame; False if that frame is no longer raw in
        the timeline.
        """
        for item in reversed(self.timeline.snapshot()):
            if item.kind == "frame" and abs(item.frame.stamp - frame_stamp) < 1e-6:
                if not item.frame.dark:
                    item.frame.set_objects(note, text_only=not self.supports_images)
                    self._emit("objects", {"frame": item.frame, "text": note})
                return True
        return False

    def people_now(self) -> str:
        t, description = self._people
        return description if time.monotonic() - t <= PEOPLE_FRESH_S else ""

    def camera_lost(self) -> bool:
        """No frame came for camera_timeout_s (after at least one did)."""
        t = self.config.camera_timeout_s
        return bool(t and self._newest is not None and time.monotonic() - self._newest_at > t)

    def reply_messages(self, items: list | None = None) -> list:
        """The prompt up to the person's line, the people note last (the warm-up reads it)."""
        items = self._prompt_items() if items is None else items
        msgs = self.builder.reply_messages(items, self.timeline.history_summary,
                                           self.camera_lost())
        people = self.people_now()
        if people:
            msgs.insert(now_index(msgs), {"role": "system", "content":
                                          self.persona.people_note.format(people=people)})
        return msgs

    def state(self) -> dict:
        """Counts and texts for monitoring (the node's PromptState)."""
        items = self.timeline.snapshot()
        chars, image_bytes = prompt_size(self.reply_messages())
        return {
            "raw_frames": sum(isinstance(i, FrameItem) for i in items),
            "frame_summaries": sum(isinstance(i, SummaryItem) for i in items),
            "dialogue_lines": sum(isinstance(i, LineItem) for i in items),
            "events": sum(isinstance(i, EventItem) for i in items),
            "folded_lines": self.timeline.folded_lines,
            "pending_summaries": self.summariser.pending,
            "prompt_chars": chars,
            "prompt_image_bytes": image_bytes,
            "summaries": [i.text for i in items if isinstance(i, SummaryItem)],
            "history_summary": self.timeline.history_summary,
            "timeline": [describe(i) for i in items],
        }

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no summary or fold is in flight (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            futs = self.summariser.futures() + self.folder.futures()
            if not futs:
                return True
            wait(futs, timeout=max(0.0, deadline - time.monotonic()))
        return not (self.summariser.futures() or self.folder.futures())

    def close(self, timeout: float = 5.0) -> None:
        """Let in-flight summaries finish (bounded by `timeout`) and stop the pool.

        Frames whose summary is still not in get one without the LLM ("summary" events), so the
        transcript holds every frame's summary; a background generation still running is asked
        to stop, so exit is not held up by a slow local model.
        """
        if self._closed:
            return
        self._closed = self.warmer.closed = True
        self.wait_idle(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
        stop = getattr(self._summary_backend, "stop_background", None)
        if callable(stop):
            stop()
        self.summariser.flush()
