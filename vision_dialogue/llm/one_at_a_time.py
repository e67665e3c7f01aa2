"""One generation at a time on a local model, replies first.

A local model runs one generation at a time on the robot's CPU. A reply announces itself before
it waits for the model, so that a background call (a summary, a fold, a warm-up) stops at its
next step and gives way (`give_way`), instead of holding the person's answer up.
"""
from __future__ import annotations

import contextlib
import threading


class OneAtATime:
    """The model lock, with replies counted while they wait for it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stopping = threading.Event()       # shutting down: background calls stop
        self._waiting = 0
        self._waiting_lock = threading.Lock()

    @property
    def give_way(self) -> bool:
        """A background call should stop now: a reply waits, or the backend is closing."""
        return self._waiting > 0 or self.stopping.is_set()

    @contextlib.contextmanager
    def reply(self):
        """Hold the model for a reply, announced first so a background call stops for it."""
        with self._waiting_lock:
            self._waiting += 1
        try:
            self.lock.acquire()
        finally:
            with self._waiting_lock:
                self._waiting -= 1
        try:
            yield
        finally:
            self.lock.release()
