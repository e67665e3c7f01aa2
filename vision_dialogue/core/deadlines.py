"""Time limits of a turn: the first sentence by the reply deadline, background calls held back.

A reply's first sentence must come by the turn's deadline (`FirstBy`), whatever the LLM does;
summaries and folds wait while a turn runs (`YieldToTurns`), so on a one-at-a-time local model
they never queue in front of a reply. ROS-free.
"""
from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Callable, Iterable

from vision_dialogue.llm.base import give_up_with


class YieldToTurns:
    """The summary/fold backend.

    Waits (bounded) while a user turn is running, so background LLM calls never queue in front
    of a reply on a one-at-a-time backend (a local model); such a backend (`preemptible`) is
    asked to stop a background call when a reply comes (it raises Preempted).
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


class TimedSentences(list):
    """The reply's sentences, noting when the first one came (time.perf_counter())."""

    first_at: float = 0.0

    def append(self, sentence: str) -> None:
        if not self:
            self.first_at = time.perf_counter()
        super().append(sentence)


class DeadlineExceeded(RuntimeError):
    """No reply sentence was ready by the turn's deadline."""


PAUSED_POLL = 0.1
"""Seconds between looks at a paused deadline."""


class FirstBy:
    """The reply's parts, the first of which must come by `deadline` (time.monotonic()).

    The LLM call runs on its own thread, so a hung server or a slow model cannot hold the
    turn past its deadline: iterating raises DeadlineExceeded then. The abandoned call stops
    at its next part (closing the stream ends a local generation) and that late part is
    given to `on_late`; a backend stops reading it and retries nothing (llm.base.given_up).
    The consumer sets `met` once a part was actually spoken (a part
    that filtering empties does not count).
    """

    def __init__(self, make_parts: Callable[[], Iterable[str]], deadline: float,
                 on_late: Callable[[str], None]):
        self.deadline, self.on_late, self.met = deadline, on_late, False
        self._pauses = 0
        self._q: queue.Queue = queue.Queue()
        self._abandoned = threading.Event()
        # started by the first look at the parts, so a pause can find this object
        self._producer = threading.Thread(target=self._produce, args=(make_parts,),
                                          name="vd-reply", daemon=True)

    def _produce(self, make_parts) -> None:
        give_up_with(self._abandoned)
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

    @contextlib.contextmanager
    def pause(self):
        """Stop the clock inside: the robot acts for a tool call, not the LLM being slow.

        The tool's own timeout bounds that time.
        """
        self._pauses += 1
        start = time.monotonic()
        try:
            yield
        finally:
            self.deadline += time.monotonic() - start
            self._pauses -= 1

    def __iter__(self):
        if not self._producer.is_alive() and self._producer.ident is None:
            self._producer.start()
        try:
            while True:
                wait = None if self.met else PAUSED_POLL if self._pauses else \
                    max(0.0, self.deadline - time.monotonic())
                try:
                    kind, value = self._q.get(timeout=wait)
                except queue.Empty:
                    if self._pauses or time.monotonic() < self.deadline:
                        continue
                    raise DeadlineExceeded("no reply sentence by the reply deadline") from None
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                yield value
        finally:
            self._abandoned.set()
