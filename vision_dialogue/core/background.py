"""The background LLM work: in-flight summaries and folds, and warming a local model's cache."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Executor, Future
from typing import Callable

from vision_dialogue.llm.base import Preempted


class BackgroundJobs:
    """Submits jobs to a shared pool and keeps the futures still running."""

    def __init__(self, pool: Executor):
        self.pool = pool
        self._inflight: set[Future] = set()
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._inflight)

    def futures(self) -> list[Future]:
        with self._lock:
            return list(self._inflight)

    def submit(self, fn: Callable, *args, on_refused: Callable[[], None]) -> Future | None:
        """Run ``fn(*args)`` in the pool.

        If the pool is shut down (closing), call on_refused() (which must give the job's items
        back) and return None.
        """
        with self._lock:
            try:
                fut = self.pool.submit(fn, *args)
            except RuntimeError:
                on_refused()
                return None
            self._inflight.add(fut)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: Future) -> None:
        with self._lock:
            self._inflight.discard(fut)


class PromptWarmer:
    """The reply prompt changed: a local model reads it now, not when the person speaks.

    Without this a summary or a fold that changes the prompt's middle makes the next reply
    re-read everything after it (seconds on a busy CPU). One warm-up at a time, on the
    background pool, only while no turn runs (`idle` set); a reply stops it (Preempted).
    A backend without `warm` is never asked.
    """

    def __init__(self, backend, pool: Executor, messages: Callable[[], list],
                 idle: threading.Event, logger: logging.Logger, enabled: bool = True):
        self._warm = getattr(backend, "warm", None) if enabled else None
        self._side = bool(getattr(backend, "side_questions", False))
        self._pool, self._messages, self._idle, self.log = pool, messages, idle, logger
        self._lock = threading.Lock()
        self._pending = False
        self._next: Callable[[], list] | None = None
        self._future = None             # the warm-up submitted last (Conversation.wait_idle)
        self.closed = False

    def soon(self, messages: Callable[[], list] | None = None) -> None:
        """Warm the prompt on the pool, unless a warm-up is already waiting.

        `messages`: a prompt other than the next reply's as it stands (the person's words so
        far added); the newest such request decides what the warm-ups read until `heard`. A
        plain request (a frame, a fold while the person speaks) keeps their words so far: its
        warm-up reads the changed prompt with them, not without (which the reply then reads).
        """
        if not callable(self._warm):
            return
        with self._lock:
            if messages is not None:
                self._next = messages
            if self._pending or self.closed:
                return
            self._pending = True
        try:
            self._future = self._pool.submit(self._run)
        except RuntimeError:        # the pool is shut down (closing)
            self._pending = False

    def heard(self) -> None:
        """The person's line came: their words so far are no longer read ahead."""
        with self._lock:
            self._next = None

    def futures(self) -> list:
        """The warm-up in flight, if any (a test or a benchmark waits for a quiet engine)."""
        future = self._future
        return [future] if future is not None and not future.done() else []

    def _run(self) -> None:
        with self._lock:
            self._pending = False       # a change from now on asks for another warm-up
            messages = self._next or self._messages
        if not self._idle.is_set():
            return
        try:
            read = self._warm(messages())
            self.log.debug(f"warmed the reply prompt: {read} new tokens read")
        except Preempted:
            pass
        except Exception as e:  # noqa: BLE001 - only a speed-up: the reply reads it anyway
            self.log.warning(f"warming the reply prompt failed ({type(e).__name__}: {e})")

    def side_soon(self, messages: list) -> None:
        """Read a side question's fixed start (the intents' catalogue) into its own cache.

        Once, on the pool, where the backend keeps such a cache (`side_questions`): the
        first line that asks for an intent then waits for its own words only.
        """
        if not callable(self._warm) or not self._side:
            return
        try:
            self._pool.submit(self._run_side, messages)
        except RuntimeError:        # the pool is shut down (closing)
            pass

    def _run_side(self, messages: list) -> None:
        try:
            read = self._warm(messages, side=True)
            self.log.debug(f"warmed a side question: {read} tokens read")
        except Preempted:
            pass
        except Exception as e:  # noqa: BLE001 - only a speed-up
            self.log.warning(f"warming a side question failed ({type(e).__name__}: {e})")
