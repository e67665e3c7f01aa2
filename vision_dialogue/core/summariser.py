"""Frame summarisation as in Abbo & Belpaeme (2023), run in the background.

Rule: when a frame arrives and at least `n` raw frames are in the timeline, the first `m`
consecutive raw frames (m < n) are replaced by one short sentence; the run stops early at a
dialogue line (or summary) so the order of events is kept. Frames already being summarised do
not count and are not selected again. The LLM call runs on a worker pool; the result is spliced
in place of its frames even if more items arrived meanwhile.

On failure the frames stay in the timeline as images and are retried at the next trigger;
after `max_failures` failed attempts they are replaced by the persona's neutral marker (the
frames themselves stay in the transcript on disk), so a dead summary model cannot make the
prompt grow without bound.
"""
from __future__ import annotations

import logging
from concurrent.futures import Executor, Future
from typing import Callable

from vision_dialogue.core.background import BackgroundJobs
from vision_dialogue.core.prompt import PromptBuilder
from vision_dialogue.core.timeline import FrameItem, Timeline

_log = logging.getLogger("vision_dialogue.summariser")


def check_nm(n: int, m: int) -> str | None:
    """Why (n, m) is invalid, message starting with the parameter's name; None if valid."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        return f"n={n!r} must be an integer >= 2 (frames in the prompt before summarising)"
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        return f"m={m!r} must be an integer >= 1 (frames summarised at once)"
    if m >= n:
        return f"m={m} must be smaller than n={n}"
    return None


def validate_nm(n: int, m: int) -> None:
    """Raise ValueError (naming the parameter) for invalid n/m."""
    err = check_nm(n, m)
    if err:
        raise ValueError(err)


def clean_sentence(text: str) -> str:
    """First non-empty line of an LLM answer, stripped of quotes and whitespace."""
    for line in (text or "").splitlines():
        line = line.strip().strip('"').strip()
        if line:
            return line
    return ""


class FrameSummariser:
    """Applies the summarisation rule after each frame and runs the requests on `pool`."""

    def __init__(self, timeline: Timeline, builder: PromptBuilder, backend, pool: Executor,
                 n: int = 4, m: int = 3, *, model: str | None = None, max_tokens: int = 60,
                 max_failures: int = 3, on_event: Callable[[str, dict], None] | None = None,
                 logger=None):
        validate_nm(n, m)
        if max_failures < 1:
            raise ValueError(f"max_summary_failures={max_failures!r} must be >= 1")
        self.timeline, self.builder, self.backend, self.pool = timeline, builder, backend, pool
        self.n, self.m, self.model, self.max_tokens = n, m, model, max_tokens
        self.max_failures = max_failures
        self.on_event = on_event or (lambda kind, data: None)
        self.log = logger or _log
        self._jobs = BackgroundJobs(pool)
        self.completed = 0
        self.failed = 0

    @property
    def pending(self) -> int:
        return self._jobs.pending

    def futures(self) -> list[Future]:
        return self._jobs.futures()

    def on_frame(self) -> Future | None:
        """Call after a frame was added; starts a background summary if the rule fires."""
        frames = self.timeline.select_for_summary(self.n, self.m)
        if not frames:
            return None

        def leave_raw():  # pool shut down (closing): the frames stay raw
            for f in frames:
                f.pending = False

        return self._jobs.submit(self._run, frames, on_refused=leave_raw)

    def _run(self, frames: list[FrameItem]) -> None:
        ids = [f.id for f in frames]
        try:
            items = self.timeline.snapshot()
            msgs = self.builder.summary_messages(items, frames, self.timeline.history_summary)
            text = clean_sentence(self.backend.complete(msgs, model=self.model,
                                                        max_tokens=self.max_tokens))
            if not text:
                raise ValueError("empty summary")
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
            self.on_event("summary_failed", {"frame_ids": ids, "error": str(e),
                                             "attempts": attempts, "marker": marker})
            return
        item = self.timeline.splice_summary(frames, text)
        self.completed += 1
        self.on_event("summary", {"frame_ids": ids, "text": text, "item": item})
