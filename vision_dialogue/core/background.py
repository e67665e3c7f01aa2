"""In-flight tracking of the background LLM jobs (frame summaries, history folds)."""
from __future__ import annotations

import threading
from concurrent.futures import Executor, Future
from typing import Callable


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
        """Run fn(*args) in the pool.

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
