"""Frame summarisation as in Abbo & Belpaeme (2023).

Rule: when a frame arrives and at least `n` raw frames are in the timeline, the first `m`
consecutive raw frames (m < n) are replaced by one short sentence; the run stops early at a
dialogue line (or summary) so the order of events is kept. Frames already being summarised do
not count and are not selected again.

Two ways to write the sentence (`mode`):

* "llm", the paper's: the LLM writes it from the conversation and the frames, on a worker
  pool; the result is spliced in place of its frames even if more items arrived meanwhile. On
  a one-at-a-time backend the call gives way to a reply (`Preempted`) and is tried again later.
  On failure the frames stay and are retried at the next trigger; after `max_failures` failed
  attempts they are replaced by the persona's neutral marker (the frames stay on disk).
* "merge", for text-only backends: the frames' observations are joined, repeats collapsed,
  at once and without the LLM, so a slow local model spends its time on replies only.

Either way a reply prompt never shows more than `n` raw frames (`bounded`): frames beyond
that, still waiting for their summary, go in as a provisional summary.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Callable, Sequence

from vision_dialogue.core.background import BackgroundJobs
from vision_dialogue.core.entries import Entry, SummarisingEntry, SummaryDeferredEntry, \
    SummaryEntry, SummaryFailedEntry
from vision_dialogue.core.prompt import PromptBuilder
from vision_dialogue.core.timeline import EventItem, FrameItem, Item, SummaryItem, Timeline, \
    merge_observations
from vision_dialogue.core.conversation_types import SUMMARY_MODES
from vision_dialogue.llm.base import Preempted

_log = logging.getLogger("vision_dialogue.summariser")


@dataclass(frozen=True)
class SummaryRule:
    """The paper's rule (the module docstring), with `n` and `m` checked once, here."""

    n: int = 4          # raw frames in the prompt that start a summary
    m: int = 3          # frames summarised at once (m < n)

    def __post_init__(self):
        err = self.problem(self.n, self.m)
        if err:
            raise ValueError(err)

    @staticmethod
    def problem(n, m) -> str | None:
        """Why (n, m) is invalid, message starting with the parameter's name; None if valid."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            return f"n={n!r} must be an integer >= 2 (frames in the prompt before summarising)"
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            return f"m={m!r} must be an integer >= 1 (frames summarised at once)"
        if m >= n:
            return f"m={m} must be smaller than n={n}"
        return None

    def due(self, items: Sequence[Item]) -> list[FrameItem]:
        """The frames to summarise now; [] while fewer than `n` raw frames wait.

        The first raw frame not already being summarised and the raw frames directly after
        it, up to `m`, stopping early at a dialogue line or a summary so order is kept
        (events between frames go with them).
        """
        raw = [i for i, it in enumerate(items) if isinstance(it, FrameItem) and not it.pending]
        if len(raw) < self.n:
            return []
        chosen: list[FrameItem] = []
        for it in items[raw[0]:]:
            if isinstance(it, EventItem) and len(chosen) < self.m:
                continue
            if not isinstance(it, FrameItem) or it.pending or len(chosen) >= self.m:
                break
            chosen.append(it)
        return chosen

    def oldest_run(self, items: Sequence[Item]) -> list[FrameItem]:
        """The oldest run of up to `m` consecutive frames, pending or not (a backlog's relief)."""
        chosen: list[FrameItem] = []
        for it in items:
            if isinstance(it, FrameItem) and len(chosen) < self.m:
                chosen.append(it)
            elif chosen and not (isinstance(it, EventItem) and len(chosen) < self.m):
                break
        return chosen


def merged_text(span: Sequence[Item], fallback: str) -> str:
    """The LLM-free summary of a run: its frames' observations and events merged in order.

    `fallback` when no frame has an observation (events then follow it in brackets).
    """
    if not any(isinstance(it, FrameItem) and it.frame.observation for it in span):
        events = merge_observations([it.text for it in span if isinstance(it, EventItem)])
        return f"{fallback} ({events})" if events else fallback
    return merge_observations([it.text if isinstance(it, EventItem) else it.frame.observation
                               for it in span])


def bounded(items: Sequence[Item], n: int, placeholder: str) -> list[Item]:
    """`items` with at most `n` raw frames, for a reply prompt.

    Raw frames before the newest `n` (summaries not in yet) become provisional summaries, one
    per run of consecutive frames (with the events between them): their merged observations,
    else `placeholder`.
    """
    frames = [it for it in items if isinstance(it, FrameItem)]
    excess = {id(f) for f in frames[:max(0, len(frames) - n)]}
    if not excess:
        return list(items)
    out: list[Item] = []
    run: list[Item] = []
    for it in list(items) + [None]:
        if it is not None and (id(it) in excess or (run and isinstance(it, EventItem))):
            run.append(it)
            continue
        if run:
            trailing: list[Item] = []
            while isinstance(run[-1], EventItem):
                trailing.insert(0, run.pop())
            out.append(SummaryItem(merged_text(run, placeholder),
                                   tuple(f.id for f in run if isinstance(f, FrameItem)),
                                   method="provisional"))
            out.extend(trailing)
            run = []
        if it is not None:
            out.append(it)
    return out


def clean_sentence(text: str) -> str:
    """First non-empty line of an LLM answer, stripped of quotes and whitespace."""
    for line in (text or "").splitlines():
        line = line.strip().strip('"').strip()
        if line:
            return line
    return ""


HOLD_MAX_S = 20.0
"""Longest a person's speaking holds summaries back (a lost "stopped speaking" must not stop
them for good)."""


class FrameSummariser:
    """Applies the summarisation rule after each frame and runs the requests on `pool`."""

    def __init__(self, timeline: Timeline, builder: PromptBuilder, backend, pool: Executor,
                 rule: SummaryRule = SummaryRule(), *, mode: str = "llm",
                 model: str | None = None, max_tokens: int = 60, max_failures: int = 3,
                 on_entry: Callable[[Entry], None] | None = None, logger=None):
        if mode not in SUMMARY_MODES:
            raise ValueError(f"summary_mode={mode!r} must be one of {list(SUMMARY_MODES)}")
        if max_failures < 1:
            raise ValueError(f"max_summary_failures={max_failures!r} must be >= 1")
        self.mode = mode
        self.timeline, self.builder, self.backend, self.pool = timeline, builder, backend, pool
        self.rule, self.model, self.max_tokens = rule, model, max_tokens
        self.max_failures = max_failures
        self.on_entry = on_entry or (lambda entry: None)
        self.log = logger or _log
        self._jobs = BackgroundJobs(pool)
        self.completed = 0
        self.failed = 0
        self._held_since: float | None = None

    @property
    def pending(self) -> int:
        return self._jobs.pending

    def futures(self) -> list[Future]:
        return self._jobs.futures()

    def hold(self, on: bool) -> None:
        """Hold summaries back while the person speaks (on) until the next check (off).

        A summary rewrites the prompt's middle: the reply would read everything after it again
        (seconds for a local model, measured by bench_voice) instead of the last words only.
        So the end of their speech does not summarise: the turn's end does, or the next frame.
        """
        self._held_since = time.monotonic() if on else None

    def check(self) -> None:
        """Apply the rule (after a frame, after a turn), unless held (`hold`).

        Merge mode summarises every run the rule selects, at once; LLM mode starts one
        background summary per trigger (a failed one is retried at the next trigger).
        """
        if self._held_since is not None and time.monotonic() - self._held_since < HOLD_MAX_S:
            return
        self._limit_backlog()
        while True:
            frames = self.timeline.take(self.rule.due)
            if not frames:
                return
            if self.mode == "llm":
                self._jobs.submit(self._run, frames,
                                  on_refused=lambda: self.timeline.release(frames, False))
                return
            self._splice(frames, self._merged(frames, self.builder.persona.lost_frames_marker),
                         "merge")

    def _limit_backlog(self) -> None:
        """LLM summaries far behind (a model too busy with replies): merge the oldest at once.

        Keeps the frames held in memory bounded (3n) when summaries only get idle time.
        """
        if self.mode != "llm":
            return
        limit = 3 * self.rule.n
        while True:
            frames = [it for it in self.timeline.snapshot() if isinstance(it, FrameItem)]
            if len(frames) <= limit:
                return
            run = self.timeline.take(self.rule.oldest_run)
            if not run:
                return
            self.log.warning(f"frame summaries fall behind ({len(frames)} frames waiting); "
                             f"frames {run[0].id}-{run[-1].id} summarised without the LLM")
            self._splice(run, self._merged(run, self.builder.persona.pending_frames_marker),
                         "merge")

    def flush(self) -> int:
        """Summarise, without the LLM, the frames whose summary is still in flight (at exit).

        Returns how many summaries were written; nothing waits in the timeline unrecorded.
        """
        runs = self.timeline.pending_frames()
        for frames in runs:
            self._splice(frames, self._merged(frames, self.builder.persona.lost_frames_marker),
                         "merge")
        return len(runs)

    def _merged(self, frames: list[FrameItem], fallback: str) -> str:
        """The LLM-free text of `frames` with the events that go with them."""
        return merged_text(self.timeline.span(frames) or frames, fallback)

    def _splice(self, frames: list[FrameItem], text: str, method: str) -> None:
        item = self.timeline.splice_summary(frames, text, method=method)
        if item is not None:
            self.completed += 1
            self.on_entry(SummaryEntry([f.id for f in frames], text, method, item))

    def _run(self, frames: list[FrameItem]) -> None:
        ids = [f.id for f in frames]
        self.on_entry(SummarisingEntry(ids))
        try:
            items = self.timeline.snapshot()
            msgs = self.builder.summary_messages(items, frames, self.timeline.history_summary)
            text = clean_sentence(self.backend.complete(msgs, model=self.model,
                                                        max_tokens=self.max_tokens))
            if not text:
                raise ValueError("empty summary")
        except Preempted:
            self.timeline.release(frames, failed=False)
            self.on_entry(SummaryDeferredEntry(ids))
            self.log.debug(f"summary of frames {ids} gave way to a reply; tried again later")
            return
        except Exception as e:  # noqa: BLE001 - any backend failure is handled the same way
            self.failed += 1
            self.timeline.release(frames)
            attempts = max(f.failures for f in frames)
            marker = None
            if attempts >= self.max_failures:
                marker = self.timeline.splice_summary(
                    frames, self.builder.persona.lost_frames_marker, failed=True)
                self.log.error(f"summary of frames {ids} failed {attempts} times ({e}); "
                               "replaced by a neutral marker (frames kept on disk)")
            else:
                self.log.warning(f"summary of frames {ids} failed ({e}); frames kept, "
                                 f"retry at the next frame ({attempts}/{self.max_failures})")
            self.on_entry(SummaryFailedEntry(ids, str(e), attempts, marker))
            return
        self._splice(frames, text, "llm")
