"""The conversation: frames and utterances in, replies out, with a bounded, summarised prompt.

`Conversation` ties the timeline, the image policy, frame summaries, history folding and the
persona together. It has no ROS imports; the manager node is a thin adapter around it.

Threading: `add_frame` and `turn` may be called from any threads at once. Turns are serialised
by a turn lock (the caller decides their order; the node feeds them from one FIFO queue).
Summaries and folds run on a small worker pool and never block a turn: a turn takes a snapshot
of the timeline under a short lock and calls the LLM with no lock held.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

import numpy as np

from vision_dialogue.core.focus import FOCUS_INSTRUCTIONS, asks_to_repeat, focus_note
from vision_dialogue.core.focus import STYLES as FOCUS_STYLES
from vision_dialogue.core.history import HistoryFolder
from vision_dialogue.core.lookback import LOOK_BACK, LOOK_BACK_NOTE, FrameArchive, LookBack, \
    ToolSet, about_the_past
from vision_dialogue.core.images import Frame, ImagePolicy, as_bgr, downscale, is_dark
from vision_dialogue.core.persona import Persona, language_instruction
from vision_dialogue.core.prompt import PromptBuilder, prompt_size
from vision_dialogue.core.reply_filter import NoteFilter, clean_reply  # noqa: F401 - API
from vision_dialogue.llm.base import Preempted
from vision_dialogue.llm.sentences import split_sentences
from vision_dialogue.core.summariser import SUMMARY_MODES, FrameSummariser, bounded, \
    validate_nm
from vision_dialogue.core.timeline import ROBOT, USER, EventItem, FrameItem, LineItem, \
    SummaryItem, Timeline, describe
from vision_dialogue.core.people import PEOPLE_FRESH_S, is_a_name
from vision_dialogue.llm.tool_loop import (TOOLS_NOTE, AgentResult, ToolRecord, run_tool_loop,
                                           stream_tool_loop)

_log = logging.getLogger("vision_dialogue.conversation")

Listener = Callable[[str, dict], None]

REPEAT_RETRY_TEMPERATURE = 0.7
"""Sampling for the second try after a repeated reply (greedy decoding would say it again)."""


class SentenceCallback(Protocol):
    """Called with each reply sentence as it is ready.

    fallback: the sentence is the persona's fallback line after an LLM failure.
    """

    def __call__(self, sentence: str, index: int, fallback: bool = False) -> None: ...


@dataclass
class ConversationConfig:
    """Settings of the conversation core (the node maps its parameters onto these)."""

    n: int = 4
    m: int = 3
    policy: ImagePolicy = field(default_factory=ImagePolicy)
    history_budget_chars: int = 3000
    keep_recent_lines: int = 6
    max_reply_tokens: int = 150
    summary_max_tokens: int = 60
    model: str | None = None             # None: the backend's default
    summary_model: str | None = None     # None: same as model
    stream: bool = True
    max_summary_failures: int = 3
    workers: int = 2                     # background summary / fold threads
    summary_mode: str = "auto"           # "llm", "merge", or "auto": merge for text-only
    camera_timeout_s: float = 0.0        # no frame for this long: the robot cannot see (0: off)
    look_back: bool = True               # offer look_back to backends that call tools
    archive_frames: int = 720            # frames kept for look_back (an hour at one per 5 s)
    focus_note: str = "strict"           # text-only: the note before the question (STYLES, none)
    avoid_repeats: bool = True           # a reply the robot said before is asked for again
    warm_cache: bool = True              # a local model reads a changed prompt between turns

    def __post_init__(self):
        validate_nm(self.n, self.m)
        if self.camera_timeout_s < 0:
            raise ValueError(f"camera_timeout={self.camera_timeout_s!r} must be >= 0")
        if self.focus_note not in FOCUS_STYLES + ("none",):
            raise ValueError(f"focus_note={self.focus_note!r} must be one of "
                             f"{[*FOCUS_STYLES, 'none']}")
        if self.summary_mode not in ("auto",) + SUMMARY_MODES:
            raise ValueError(f"summary_mode={self.summary_mode!r} must be one of "
                             f"{['auto', *SUMMARY_MODES]}")


@dataclass
class TurnResult:
    """The outcome of one user turn."""

    turn_id: int
    in_reply_to: str
    text: str
    sentences: list[str]
    fallback: bool = False
    error: str | None = None
    overhead_s: float = 0.0     # time in our code (prompt building etc.), excluding the LLM
    frame_ids: list[int] = field(default_factory=list)   # raw frames the reply prompt showed
    summary_ids: list[tuple] = field(default_factory=list)  # frame ids behind its summaries
    tools: list[ToolRecord] = field(default_factory=list)  # tool calls made for this reply
    first_sentence_s: float | None = None   # from the turn's start to its first spoken sentence
    reply_s: float = 0.0                    # from the turn's start to the whole reply
    prompt_chars: int = 0                   # text characters of the reply prompt


class _YieldToTurns:
    """The summary/fold backend.

    Waits (bounded) while a user turn is running, so background LLM calls never queue in front of a
    reply on a one-at-a-time backend (a local model); such a backend (`preemptible`) is asked to
    stop a background call when a reply comes (it raises Preempted).
    """

    def __init__(self, backend, idle: threading.Event, max_wait: float = 120.0):
        self._backend, self._idle, self._max_wait = backend, idle, max_wait
        self.supports_images = getattr(backend, "supports_images", True)
        self._preemptible = bool(getattr(backend, "preemptible", False))

    def complete(self, *args, **kwargs):
        self._idle.wait(self._max_wait)
        if self._preemptible:
            kwargs["background"] = True
        return self._backend.complete(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)


class _Timed(list):
    """The reply's sentences, noting when the first one came (time.perf_counter())."""

    first_at: float = 0.0

    def append(self, sentence: str) -> None:
        if not self:
            self.first_at = time.perf_counter()
        super().append(sentence)


class DeadlineExceeded(RuntimeError):
    """No reply sentence was ready by the turn's deadline."""


class FirstBy:
    """The reply's parts, the first of which must come by `deadline` (time.monotonic()).

    The LLM call runs on its own thread, so a hung server or a slow model cannot hold the
    turn past its deadline: iterating raises DeadlineExceeded then. The abandoned call stops
    at its next part (closing the stream ends a local generation) and that late part is
    given to `on_late`. The consumer sets `met` once a part was actually spoken (a part
    that filtering empties does not count).
    """

    def __init__(self, make_parts: Callable[[], Iterable[str]], deadline: float,
                 on_late: Callable[[str], None]):
        self.deadline, self.on_late, self.met = deadline, on_late, False
        self._q: queue.Queue = queue.Queue()
        self._abandoned = threading.Event()
        threading.Thread(target=self._produce, args=(make_parts,), name="vd-reply",
                         daemon=True).start()

    def _produce(self, make_parts) -> None:
        try:
            it = iter(make_parts())
            try:
                for part in it:
                    if self._abandoned.is_set():
                        self.on_late(part)
                        return
                    self._q.put(("part", part))
            finally:
                close = getattr(it, "close", None)
                if callable(close):
                    close()
            self._q.put(("end", None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self._q.put(("error", e))

    def __iter__(self):
        try:
            while True:
                wait = None if self.met else max(0.0, self.deadline - time.monotonic())
                try:
                    kind, value = self._q.get(timeout=wait)
                except queue.Empty:
                    raise DeadlineExceeded("no reply sentence by the reply deadline") from None
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                yield value
        finally:
            self._abandoned.set()


class ToolProvider:
    """What `Conversation.set_tools` needs (the manager's VFM bridge implements it).

    `schemas()` -> OpenAI function specs offered now (may be empty: no tools this turn); `run(name,
    args)` -> llm.tool_loop.ToolOutcome.
    """

    def schemas(self) -> list[dict]:  # pragma: no cover - interface
        raise NotImplementedError

    def run(self, name: str, args: dict):  # pragma: no cover - interface
        raise NotImplementedError


class Conversation:
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
        sb = _YieldToTurns(self._summary_backend, self._no_turn)
        smodel = cfg.summary_model or cfg.model
        self.summary_mode = cfg.summary_mode
        if self.summary_mode == "auto":
            self.summary_mode = "llm" if self.supports_images or observer is None else "merge"
        self.summariser = FrameSummariser(
            self.timeline, self.builder, sb, self._pool, cfg.n, cfg.m, mode=self.summary_mode,
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
        self._newest: Frame | None = None
        self._newest_at = 0.0                 # time.monotonic() of the newest frame
        self.tools: ToolProvider | None = None
        self.max_tool_rounds = 3
        self.tool_images = self.supports_images     # frames looked back at are shown
        self._speakers: set[str] = set()
        self.repeats_avoided = 0          # replies asked for again because they repeated one
        self._warm_lock = threading.Lock()
        self._warm_pending = False
        self._people: tuple[float, str] = (0.0, "")   # (monotonic time, description)
        self.archive = FrameArchive(cfg.archive_frames)
        self._turn_tools = ToolSet()
        self.look_back = LookBack(self.archive, self._prompt_frame_ids,
                                  self._look_back_image if self.supports_images else None)

    def set_tools(self, provider: ToolProvider | None, *, max_rounds: int = 3,
                  show_images: bool = True) -> None:
        """Offer `provider`'s tools in every turn (None: no tools).

        `max_rounds`: tool rounds per turn (>= 1). `show_images`: images the tools make are shown
        to the LLM (only when the backend takes images).
        """
        if max_rounds < 1:
            raise ValueError(f"max_rounds={max_rounds} must be >= 1")
        self.tools = provider
        self.max_tool_rounds = int(max_rounds)
        self.tool_images = bool(show_images) and self.supports_images

    @property
    def tools_supported(self) -> bool:
        """Whether the backend can call tools (has complete_with_tools)."""
        return callable(getattr(self.backend, "complete_with_tools", None))

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
            self._warm_soon()

    def _after_fold(self, kind: str, data: dict) -> None:
        self._emit(kind, data)
        if kind == "fold":
            self._warm_soon()

    def _warm_soon(self) -> None:
        """The reply prompt changed: a local model reads it now, not when the person speaks.

        Without this a summary or a fold that changes the prompt's middle makes the next reply
        re-read everything after it (seconds on a busy CPU). One warm-up at a time, on the
        background pool, only while no turn runs; a reply stops it (Preempted).
        """
        if not (self.config.warm_cache and callable(getattr(self.backend, "warm", None))):
            return
        with self._warm_lock:
            if self._warm_pending or self._closed:
                return
            self._warm_pending = True
        try:
            self._pool.submit(self._warm)
        except RuntimeError:        # the pool is shut down (closing)
            self._warm_pending = False

    def _warm(self) -> None:
        self._warm_pending = False       # a change from now on asks for another warm-up
        if not self._no_turn.is_set():
            return
        try:
            read = self.backend.warm(self.reply_messages())
            self.log.debug(f"warmed the reply prompt: {read} new tokens read")
        except Preempted:
            pass
        except Exception as e:  # noqa: BLE001 - only a speed-up: the reply reads it anyway
            self.log.warning(f"warming the reply prompt failed ({type(e).__name__}: {e})")

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
        self._warm_soon()
        return frame

    def turn(self, text: str, on_sentence: SentenceCallback | None = None,
             speaker: str = "", deadline: float | None = None,
             language: str = "") -> TurnResult:
        """Answer one user utterance.

        Streams sentences to on_sentence(sentence, index, fallback=False) when the config
        asks for streaming; on an LLM failure the fallback line is streamed too
        (fallback=True). `deadline` (time.monotonic()): when no sentence is ready by then,
        the fallback line is the reply and the late answer is only logged. Never raises for
        LLM failures: returns the persona's fallback line with fallback=True. Raises
        ValueError for an empty utterance. `language` (BCP-47, from the recogniser): a reply
        in that language is asked for when it is not the persona's (English).
        """
        text = " ".join(str(text).split())
        if not text:
            raise ValueError("utterance text is empty")
        return self._serve(text, on_sentence, speaker, deadline, language)

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
        items = self._prompt_items()
        msgs = self.builder.reply_messages(items, self.timeline.history_summary,
                                           self.camera_lost())
        if text is None:   # last, as the model's instruction (as a user line it is echoed)
            msgs.append({"role": "system", "content": instruction})
        if text is not None and speaker and self.builder.label_speakers and \
                self.persona.addressee_note:
            msgs.append({"role": "system",
                         "content": self.persona.addressee_note.format(speaker=speaker)})
        people = self.people_now()
        if people:
            msgs.insert(1, {"role": "system",
                            "content": self.persona.people_note.format(people=people)})
        answer_in = language_instruction(language)
        if answer_in:
            msgs.append({"role": "system", "content": answer_in})
        past = about_the_past(text or "")
        if text is not None and self.config.focus_note != "none" and not self.supports_images:
            newest = self._newest
            note = focus_note(text, past, self._memories() if past else (),
                              self.config.focus_note,
                              objects=newest.objects if newest is not None else "")
            if note:       # right before the person's line: their question stays last
                last = max(i for i, m in enumerate(msgs) if m["role"] == "user")
                msgs.insert(last, {"role": "system", "content": note})
        overhead = time.perf_counter() - t0
        records: list[ToolRecord] = []
        sentences = _Timed()
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
        self.timeline.add_line(ROBOT, f"{reply} {note}" if note else reply)
        self.folder.check()
        overhead += time.perf_counter() - t1
        return TurnResult(turn_id, text or "", reply, list(sentences), error is not None, error,
                          overhead, [i.id for i in items if i.kind == "frame"],
                          [i.frame_ids for i in items if i.kind == "summary"], records,
                          round(sentences.first_at - t0, 3), round(t1 - t0, 3),
                          prompt_size(msgs)[0])

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
        schemas = self._tool_schemas(past)
        made: list[ToolRecord] = []

        def ask() -> Iterable[str]:
            if schemas and self._streams_tools:
                return self._tool_stream(msgs, schemas, turn_id, made)
            if schemas:
                return split_sentences(self._tool_reply(msgs, schemas, turn_id, made))
            if cfg.stream:
                return self.backend.stream(msgs, model=cfg.model,
                                           max_tokens=cfg.max_reply_tokens)
            return split_sentences(self.backend.complete(msgs, model=cfg.model,
                                                         max_tokens=cfg.max_reply_tokens))

        def say(parts: Iterable[str], notes: NoteFilter) -> None:
            for s in parts:
                s = notes.feed(s)
                if not s:
                    continue
                if isinstance(parts, FirstBy):
                    parts.met = True
                if cfg.stream and on_sentence is not None:
                    on_sentence(s, len(sentences))
                sentences.append(s)

        repeat_ok = asks_to_repeat(question)
        notes = self._note_filter(allow_repeats=repeat_ok)
        try:
            say(ask() if deadline is None else FirstBy(ask, deadline, self._late(turn_id)), notes)
        finally:
            records.extend(made)
        if not sentences and cfg.avoid_repeats and (notes.said_before or notes.echoes):
            # nothing left to say: it repeated an earlier reply, or read its notes out
            repeated = list(notes.said_before)
            self.repeats_avoided += bool(repeated)
            self.log.info(f"turn {turn_id}: the reply " + (
                f"repeated an earlier one ({' '.join(repeated)[:80]!r})" if repeated
                else "read its notes out") + "; asking for a new one")
            notes = self._note_filter(allow_repeats=repeat_ok)
            again = msgs + [{"role": "system", "content": self.persona.repeat_note
                             if repeated else self.persona.own_words_note}]
            # a local model is also kept off the repeated lines' word runs (llm/avoid.py)
            avoid = {"avoid": repeated} if repeated and getattr(self.backend, "avoids",
                                                                False) else {}

            def ask_again() -> Iterable[str]:
                return self.backend.stream(again, model=cfg.model,
                                           max_tokens=cfg.max_reply_tokens,
                                           temperature=REPEAT_RETRY_TEMPERATURE, **avoid)
            say(ask_again() if deadline is None else
                FirstBy(ask_again, max(deadline, time.monotonic() + 1.0), self._late(turn_id)),
                notes)
        if not sentences and notes.repeats:   # the same question again, or a note: said anyway
            for s in notes.repeats:
                if cfg.stream and on_sentence is not None:
                    on_sentence(s, len(sentences))
                sentences.append(s)
        if not sentences:
            raise ValueError("empty reply")

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
        p = self.persona
        notes = [p.system, p.greet_instruction, p.no_frames_note, p.dark_frames_note,
                 p.camera_lost_note]
        items = self.timeline.snapshot()
        seen = [it.frame.observation or "" for it in items if it.kind == "frame"]
        memories = [it.text for it in items if it.kind == "summary"]
        lines = [it.text for it in items if it.kind == "line" and it.role == ROBOT]
        if allow_repeats:      # "say that again": the last line may come again
            lines = lines[:-1]
        said = [s for line in lines for s in split_sentences(line)]

        def unsaid(options: tuple[str, ...]) -> str:       # the first not said yet
            return next((ln for ln in options if ln not in said), options[0])
        blind_line = nobody_line = anyone_line = ""
        if self._newest is None or self.camera_lost():
            blind_line = unsaid(p.blind_lines)
        elif self._newest.people == 0:
            nobody_line = unsaid(p.nobody_lines)
            anyone_line = unsaid(tuple(ln for ln in p.nobody_lines if "anyone" in ln)
                                 or p.nobody_lines)
        notes += [p.repeat_note, p.own_words_note, *FOCUS_INSTRUCTIONS]
        return NoteFilter((p.frame_label, p.summary_label, p.history_label, "You saw:"), notes,
                          seen, said, memories, getattr(self.observer, "speak", None),
                          blind_line=blind_line, nobody_line=nobody_line,
                          anyone_line=anyone_line)

    def _tool_schemas(self, past: bool = False) -> list[dict]:
        """The tools of this turn: the provider's (VFM) tools, and look_back.

        look_back comes on every turn of a backend that streams with tools; otherwise (a turn
        with tools is then not streamed) when the person asks about the past or other tools are
        offered anyway, so look-back alone does not cost every turn that.
        """
        if not self.tools_supported:
            return []
        offer = self.config.look_back and (past or self.tools is not None
                                           or self._streams_tools)
        self._turn_tools = ToolSet(self.look_back if offer else None, self.tools,
                                   on_error=lambda e: self.log.warning(
                                       f"tools unavailable this turn ({type(e).__name__}: {e})"))
        schemas = self._turn_tools.schemas()
        if [s["function"]["name"] for s in schemas] == [LOOK_BACK] and not past \
                and not self._streams_tools:
            return []          # the VFM tools are gone this turn: stream as usual
        return schemas

    @property
    def _streams_tools(self) -> bool:
        """Replies stream, and the backend streams them with tools offered."""
        return self.config.stream and callable(getattr(self.backend, "stream_with_tools", None))

    def _prompt_frame_ids(self) -> set[int]:
        return {i.frame.id for i in self._prompt_items() if i.kind == "frame"}

    def _look_back_image(self, frame: Frame) -> str:
        return frame.data_url(self.config.policy.newest_max_side, self.config.policy.jpeg_quality)

    def _tool_turn(self, msgs: list, schemas: list, turn_id: int,
                   records: list[ToolRecord]) -> tuple[list, dict]:
        """The prompt with the tools' notes, and the loop's keyword arguments for one turn."""
        cfg = self.config
        names = {s["function"]["name"] for s in schemas}
        notes = ([TOOLS_NOTE] if names - {LOOK_BACK} else []) + \
            ([LOOK_BACK_NOTE] if LOOK_BACK in names else [])
        msgs = msgs[:1] + [{"role": "system", "content": n} for n in notes] + msgs[1:]

        def on_tool(rec: ToolRecord) -> None:
            records.append(rec)
            o = rec.outcome
            self.log.info(f"turn {turn_id}: tool {rec.name}({rec.arguments}) -> "
                          + (f"error: {o.error}" if o.error else o.image_file or
                             (o.text or "")[:80]))
            self._emit("tool", {"turn_id": turn_id, "record": rec})

        return msgs, dict(max_rounds=self.max_tool_rounds, model=cfg.model,
                          max_tokens=cfg.max_reply_tokens, image_parts=self.tool_images,
                          image_detail=cfg.policy.detail, on_tool=on_tool, logger=self.log)

    def _tool_stream(self, msgs: list, schemas: list, turn_id: int,
                     records: list[ToolRecord]) -> Iterable[str]:
        """The tool-call loop for one turn, streamed: sentences as they come."""
        msgs, kwargs = self._tool_turn(msgs, schemas, turn_id, records)
        return stream_tool_loop(self.backend, msgs, schemas, self._turn_tools.run,
                                AgentResult("", 0), **kwargs)

    def _tool_reply(self, msgs: list, schemas: list, turn_id: int,
                    records: list[ToolRecord]) -> str:
        """The tool-call loop for one turn.

        The clean reply text; every tool call is appended to `records` as it completes. Raises on
        an LLM failure or an empty reply (the caller answers with the fallback; the records stay).
        """
        msgs, kwargs = self._tool_turn(msgs, schemas, turn_id, records)
        res = run_tool_loop(self.backend, msgs, schemas, self._turn_tools.run, **kwargs)
        text = self._note_filter().feed(res.text)
        if not text:
            raise ValueError("empty reply after tool calls")
        return text

    def add_exchange(self, user_text: str, robot_text: str, **info) -> None:
        """Add a user line and the robot's line without asking the LLM.

        For Visual ChatGPT's "Received." turn for a shared image, say. Emits "exchange" with both
        texts and `info`.
        """
        user_text, robot_text = " ".join(str(user_text).split()), " ".join(
            str(robot_text).split())
        if not user_text or not robot_text:
            raise ValueError("both lines of an exchange must be non-empty")
        with self._turn_lock:
            self.timeline.add_line(USER, user_text)
            self.timeline.add_line(ROBOT, robot_text)
        self._emit("exchange", {"user": user_text, "robot": robot_text, **info})
        self.folder.check()

    def note_dropped(self, text: str, reason: str, speaker: str = "") -> None:
        """Report an utterance that was never answered (emits "dropped" for the transcript)."""
        self.log.warning(f"utterance dropped unanswered ({reason}): {text[:120]!r}")
        self._emit("dropped", {"text": text, "reason": reason, "speaker": speaker})

    def set_summary_rule(self, n: int, m: int) -> None:
        """Change the paper's n and m while running (ValueError if m >= n)."""
        validate_nm(n, m)
        self.config.n, self.config.m = n, m
        self.summariser.n, self.summariser.m = n, m

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
        return bounded(self.timeline.snapshot(), self.config.n,
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

    def reply_messages(self) -> list:
        """The prompt a reply would get now (without a new user line)."""
        return self.builder.reply_messages(self._prompt_items(), self.timeline.history_summary,
                                           self.camera_lost())

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
        self._closed = True
        self.wait_idle(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
        stop = getattr(self._summary_backend, "stop_background", None)
        if callable(stop):
            stop()
        self.summariser.flush()
