"""The conversation: frames and utterances in, replies out, with a bounded, summarised prompt.

`Conversation` takes a turn: the person's line into the prompt (`prompt`, a PromptAssembly:
the timeline, the people, the turn's notes), the reply out of the LLM (`replies`, a
ReplyMaker: filtered, on time, asked again, or the fallback), the reply's line back into the
prompt; around it, frame summaries, history folding, the warm-up and the listeners. It has no
ROS imports; the manager node is a thin adapter around it.

Threading: `add_frame` and `turn` may be called from any threads at once. Turns are serialised
by a turn lock (the caller decides their order; the node feeds them from one FIFO queue).
Summaries and folds run on a small worker pool and never block a turn (a turn snapshots the
timeline under a short lock); they wait while the person speaks (`hearing`).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Iterable

import numpy as np

from vision_dialogue.core.background import PromptWarmer
from vision_dialogue.core.conversation_types import ConversationConfig, LineNote, \
    SentenceCallback, TurnResult, TurnSequence
from vision_dialogue.core.directed import DirectedLines
from vision_dialogue.core.entries import Entry, FoldEntry, FrameEntry, Listener, ReplyEntry, \
    SummaryEntry, UserEntry
from vision_dialogue.core.deadlines import DeadlineExceeded, TimedSentences, YieldToTurns
from vision_dialogue.core.history import HistoryFolder
from vision_dialogue.common.images import Frame
from vision_dialogue.core.lookback import LookBack, about_the_past
from vision_dialogue.core.persona import Persona
from vision_dialogue.core.prompt import prompt_size
from vision_dialogue.core.prompt_assembly import PromptAssembly
from vision_dialogue.core.reply_filter import clean_reply
from vision_dialogue.core.reply_maker import ReplyMaker
from vision_dialogue.core.scene import SceneInput
from vision_dialogue.core.summariser import FrameSummariser, SummaryRule
from vision_dialogue.core.timeline import ROBOT
from vision_dialogue.core.turn_tools import ToolProvider, TurnTools
from vision_dialogue.llm.tool_loop import AgentResult, ToolRecord

__all__ = ["Conversation", "ConversationConfig", "DeadlineExceeded", "SentenceCallback",
           "TurnResult", "clean_reply"]

_log = logging.getLogger("vision_dialogue.conversation")


class Conversation(DirectedLines, SceneInput):
    """A vision-enabled dialogue with one person.

    backend: a ChatBackend (complete/stream/supports_images). observer: callable(bgr) -> str,
    or an object with .text and .people (perception's Observation), used when the backend
    cannot take images; when it has `speak(notes, past)`, a reply that reads its notes out is
    said in the robot's words instead. summary_backend: for summaries and folds
    (default: backend). listeners: callables(entry) for each Entry (core/entries.py: a frame,
    a line, a reply, a summary, a fold, a tool's call, ...), called outside locks, except a
    tool's (ToolEntry), called during the turn.

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
        self.prompt = PromptAssembly(persona, cfg, self.supports_images, rule, observer,
                                     self.log)
        self.timeline, self.builder = self.prompt.timeline, self.prompt.builder
        self.archive = self.prompt.archive
        self._pool = ThreadPoolExecutor(max_workers=cfg.workers,
                                        thread_name_prefix="vd-summary")
        self._no_turn = threading.Event()   # set while no user turn is being answered
        self._no_turn.set()
        self._summary_backend = summary_backend or backend
        for engine in {id(b): b for b in (backend, self._summary_backend)}.values():
            resume = getattr(engine, "resume_background", None)
            if callable(resume):     # an earlier conversation on it stopped its background
                resume()
        sb = YieldToTurns(self._summary_backend, self._no_turn)
        smodel = cfg.summary_model or cfg.model
        self.summary_mode = cfg.summary_mode
        if self.summary_mode == "auto":
            self.summary_mode = "llm" if self.supports_images or observer is None else "merge"
        self.summariser = FrameSummariser(
            self.timeline, self.builder, sb, self._pool, rule, mode=self.summary_mode,
            model=smodel,
            max_tokens=cfg.summary_max_tokens, max_failures=cfg.max_summary_failures,
            on_entry=self._after_background, logger=self.log)
        self.folder = HistoryFolder(
            self.timeline, self.builder, sb, self._pool, cfg.history_budget_chars,
            cfg.keep_recent_lines, model=smodel, on_entry=self._after_background, logger=self.log)
        self._listeners: list[Listener] = list(listeners)
        self.turns_taken = TurnSequence()
        self._closed = False
        self.warmer = PromptWarmer(backend, self._pool, self.prompt.reply_messages,
                                   self._no_turn, self.log, enabled=cfg.warm_cache)
        self.look_back = LookBack(self.archive, self.prompt.frame_ids,
                                  self.prompt.look_back_image if self.supports_images else None)
        self.turn_tools = TurnTools(backend, cfg, self.look_back, self._emit, self.log,
                                    show_images=self.supports_images)
        self.replies = ReplyMaker(backend, persona, cfg, self.turn_tools,
                                  lambda allow: self.prompt.note_filter(
                                      allow, self.turn_tools.instructions()), self.log)
        # the persona's text, read while the camera starts: the first frame's opening remark
        # then reads only the frame (the 1.5B reads the persona in about 8 s on 2 cores)
        self.warmer.soon()

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

    # --- listeners ---------------------------------------------------------------------------
    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def _emit(self, entry: Entry) -> None:
        for fn in list(self._listeners):
            try:
                fn(entry)
            except Exception as e:  # noqa: BLE001 - a listener must not break the dialogue
                self.log.error(f"listener failed on {entry.TYPE!r}: {e}")

    def _after_background(self, entry: Entry) -> None:
        """A summary's or a fold's news: listeners told; the prompt's cache read again."""
        summary = isinstance(entry, SummaryEntry)
        if summary:
            self.archive.summarised(entry.frame_ids, entry.text)
        self._emit(entry)
        if summary:
            self.folder.check()
        if summary or isinstance(entry, FoldEntry):
            self.warmer.soon()

    # --- input -----------------------------------------------------------------------------
    def add_frame(self, image: np.ndarray, stamp: float | None = None,
                  objects: str = "") -> Frame:
        """Add a camera frame (HxWx3 BGR uint8, or grey).

        Encodes it (or observes it, for a text-only backend) before it enters the timeline, then
        applies the summary rule. `objects`: an object detector's note for it. Raises
        ValueError on a malformed image.
        """
        frame = self.prompt.add_frame(image, stamp, objects)
        self._emit(FrameEntry(frame))
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
            self.warmer.soon(lambda: self.prompt.turn_messages(
                text, speaker, language, "", about_the_past(text),
                self.prompt.ahead(text, speaker), self.turn_tools.verbs(), ahead=True)[1])

    def remark(self, on_sentence: SentenceCallback | None = None,
               deadline: float | None = None, instruction: str = "") -> TurnResult:
        """Speak unasked: the opening remark about the person in view (the paper's persona).

        Like `turn`, without a user line: the persona's greet instruction (or `instruction`:
        a remark on an arrival, a changed scene, a wave, a Chat's opening) goes to the LLM for
        this reply only, and the remark enters the timeline as the robot's line.
        """
        names = () if instruction else tuple(self.prompt.known_in_view)
        greeting = instruction or self.persona.greeting(names)
        return self._serve(None, on_sentence, "", deadline, instruction=greeting, names=names)

    def _serve(self, text: str | None, on_sentence: SentenceCallback | None, speaker: str,
               deadline: float | None, language: str = "", instruction: str = "",
               names: tuple[str, ...] = ()) -> TurnResult:
        """A turn with background LLM calls held back, then its ReplyEntry."""
        self.warmer.heard()
        self._no_turn.clear()
        try:
            with self.turns_taken.lock:
                result = self._turn(text, on_sentence, speaker, deadline, language,
                                    instruction, names)
        finally:
            self._no_turn.set()
        self._emit(ReplyEntry(result))
        self.summariser.check()     # summaries that gave way to this reply go again
        self.warmer.soon()          # then what came meanwhile (frames, this turn's lines)
        return result

    def _turn(self, text: str | None, on_sentence: SentenceCallback | None, speaker: str,
              deadline: float | None, language: str = "", instruction: str = "",
              names: tuple[str, ...] = ()) -> TurnResult:
        """One turn under the turn lock: the user line in, the prompt, the reply, its line.

        text None: the robot speaks first (no user line; `instruction` is asked); `names`:
        the known people it greets, named in its first sentence whatever the LLM said.
        """
        t0 = time.perf_counter()
        turn_id = self.turns_taken.next()
        if text is not None:
            self.prompt.add_person_line(text, speaker)
            self._emit(UserEntry(turn_id, text, speaker))
        self.folder.check()
        past = about_the_past(text or "")
        items, msgs = self.prompt.turn_messages(text, speaker, language, instruction, past,
                                                acts=self.turn_tools.verbs())
        overhead = time.perf_counter() - t0
        records: list[ToolRecord] = []
        sentences = TimedSentences()
        error = None
        try:
            self.replies.make(msgs, turn_id, on_sentence, sentences, records, deadline, past,
                              text or "", instruction, names)
        except Exception as e:  # noqa: BLE001 - any backend failure gives the fallback
            error = f"{type(e).__name__}: {e}"
            self.log.error(f"turn {turn_id}: {error}; answering with the fallback line")
            sentences.append(self.replies.fallback(turn_id, len(sentences), on_sentence,
                                                   greeting=text is None, names=names))
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

    def set_summary_rule(self, n: int, m: int) -> None:
        """Change the paper's n and m while running (ValueError if m >= n)."""
        self.prompt.rule = self.summariser.rule = SummaryRule(n, m)

    # --- inspection ------------------------------------------------------------------------
    @property
    def turn_count(self) -> int:
        """Turns answered or in progress (the last turn_id)."""
        return self.turns_taken.last

    # --- what the ROS side sets and reads, by name (no node reaches into a helper object) ---
    def tune(self, *, history_budget_chars: int | None = None,
             keep_recent_lines: int | None = None, max_reply_tokens: int | None = None,
             stream: bool | None = None, max_tool_rounds: int | None = None) -> None:
        """Live settings (a parameter changed): each one given applies from the next turn."""
        folder, config = self.folder, self.config
        if history_budget_chars is not None:
            folder.budget_chars = history_budget_chars
        if keep_recent_lines is not None:
            folder.keep_recent_lines = keep_recent_lines
        if max_reply_tokens is not None:
            config.max_reply_tokens = max_reply_tokens
        if stream is not None:
            config.stream = stream
        if max_tool_rounds is not None:
            self.turn_tools.max_rounds = max_tool_rounds

    @property
    def calls_tools(self) -> bool:
        """Whether its backend can call tools (the VFM tools, the robot's own)."""
        return self.turn_tools.supported

    def set_note(self, key: str, text: str | None) -> None:
        """Set a standing note of the prompt ("purpose", "abilities"); None drops it.

        The next warm-up reads the prompt with it.
        """
        if text is None:
            self.builder.notes.pop(key, None)
        else:
            self.builder.notes[key] = text
        self.warmer.soon()

    def set_needs(self, needs: str) -> None:
        """What the running skill still needs from the person (a note next to the line)."""
        self.prompt.needs = needs
        self.warmer.soon()

    def remember_with(self, standing: Callable[[], str],
                      recall: Callable[[str, bool], LineNote]) -> None:
        """The memory of people: `standing()` and `recall(line, late)` notes in reply prompts.

        The next warm-up reads the standing note (the first reply then reads only its line).
        """
        self.prompt.standing, self.prompt.recall = standing, recall
        self.warmer.soon()

    def last_lines(self, count: int) -> list:
        """The last `count` dialogue lines (timeline items: role, text, speaker)."""
        return self.timeline.last_lines(count)

    def warm_side_soon(self, messages: list) -> None:
        """Read `messages` into the side questions' cache in idle time (an intent's question)."""
        self.warmer.side_soon(messages)

    def state(self) -> dict:
        """Counts and texts for monitoring (the node's PromptState)."""
        return self.prompt.counts() | {"pending_summaries": self.summariser.pending}

    def wait_idle(self, timeout: float = 10.0, warm_ups: bool = True) -> bool:
        """Wait until no summary or fold (nor warm-up) is in flight (tests, benchmarks).

        Closing waits for summaries and folds only: a warm-up is only a speed-up, stopped.
        """
        deadline = time.monotonic() + timeout

        def in_flight() -> list:
            return self.summariser.futures() + self.folder.futures() + (
                self.warmer.futures() if warm_ups else [])
        while time.monotonic() < deadline:
            futs = in_flight()
            if not futs:
                return True
            wait(futs, timeout=max(0.0, deadline - time.monotonic()))
        return not in_flight()

    def close(self, timeout: float = 5.0) -> None:
        """Let in-flight summaries finish (bounded by `timeout`) and stop the pool.

        Frames whose summary is still not in get one without the LLM (SummaryEntry), so the
        transcript holds every frame's summary; a background generation still running is asked
        to stop, so exit is not held up by a slow local model.
        """
        if self._closed:
            return
        self._closed = self.warmer.closed = True
        self.wait_idle(timeout, warm_ups=False)
        self._pool.shutdown(wait=False, cancel_futures=True)
        stop = getattr(self._summary_backend, "stop_background", None)
        if callable(stop):
            stop()
        self.summariser.flush()
