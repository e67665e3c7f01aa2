"""Bounding the dialogue: old lines (and frame summaries) fold into a running text summary.

When the text items of the timeline (dialogue lines + frame summaries) exceed
`budget_chars`, the oldest of them, up to the first raw frame and never reaching the newest
`keep_recent_lines` dialogue lines, are sent with the current running summary to the LLM, which
writes a new running summary. It runs in the background like frame summaries; the folded items
stay in the prompt until the new summary is in. On failure they stay and the fold is retried
at the next trigger (a new line or summary).
"""
from __future__ import annotations

import logging
from concurrent.futures import Executor, Future
from typing import Callable

from vision_dialogue.core.background import BackgroundJobs
from vision_dialogue.core.entries import Entry, FoldEntry, FoldFailedEntry
from vision_dialogue.core.prompt import PromptBuilder
from vision_dialogue.core.timeline import Timeline
from vision_dialogue.llm.base import Preempted

_log = logging.getLogger("vision_dialogue.history")


class HistoryFolder:
    """Folds the oldest dialogue into `timeline.history_summary` past a character budget."""

    def __init__(self, timeline: Timeline, builder: PromptBuilder, backend, pool: Executor,
                 budget_chars: int = 3000, keep_recent_lines: int = 6, *,
                 model: str | None = None, max_tokens: int = 200,
                 on_entry: Callable[[Entry], None] | None = None, logger=None):
        if budget_chars < 1:
            raise ValueError(f"history_budget_chars={budget_chars!r} must be >= 1")
        if keep_recent_lines < 0:
            raise ValueError(f"keep_recent_lines={keep_recent_lines!r} must be >= 0")
        self.timeline, self.builder, self.backend, self.pool = timeline, builder, backend, pool
        self.budget_chars, self.keep_recent_lines = budget_chars, keep_recent_lines
        self.model, self.max_tokens = model, max_tokens
        self.on_entry = on_entry or (lambda entry: None)
        self.log = logger or _log
        self._jobs = BackgroundJobs(pool)

    @property
    def pending(self) -> int:
        return self._jobs.pending

    def futures(self) -> list[Future]:
        return self._jobs.futures()

    def check(self) -> Future | None:
        """Start a background fold if the budget is exceeded (at most one at a time)."""
        items = self.timeline.select_for_fold(self.budget_chars, self.keep_recent_lines)
        if not items:
            return None
        return self._jobs.submit(self._run, items,
                                 on_refused=lambda: self.timeline.release_fold(items))

    def _run(self, items) -> None:
        try:
            msgs = self.builder.fold_messages(items, self.timeline.history_summary)
            text = (self.backend.complete(msgs, model=self.model,
                                          max_tokens=self.max_tokens) or "").strip()
            if not text:
                raise ValueError("empty history summary")
        except Preempted:
            self.timeline.release_fold(items)   # gave way to a reply; retried at the next line
            return
        except Exception as e:  # noqa: BLE001
            self.timeline.release_fold(items)
            self.log.warning(f"folding {len(items)} old dialogue items failed ({e}); "
                             "kept verbatim, retry at the next line")
            self.on_entry(FoldFailedEntry(len(items), str(e)))
            return
        self.timeline.apply_fold(items, text)
        self.on_entry(FoldEntry(len(items), text))
