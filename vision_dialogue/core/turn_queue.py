"""The utterances waiting for their turn: first in, first out, bounded, and with an expiry.

The manager answers one utterance at a time. While it does, new ones wait here. A person who
talks over a slow robot should not get answers to stale lines minutes later, so:

- at most `max_waiting` wait; one more pushes the oldest waiting one out;
- each has a deadline (its arrival + the reply deadline); one still waiting at its deadline
  is dropped when its turn would come;
- `get_run(joins)` takes the next item with the ones right behind it that join it (a person's
  lines said while the robot was busy: one reply takes them all); a run goes only when its
  newest item's deadline has passed, so an older line is not lost while a newer one is served.

Every drop is reported to `on_drop(item, reason)` (the node logs it and writes it to the
transcript). ROS-free.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class PendingTurn:
    """One utterance (or shared picture) waiting: `deadline` is on the monotonic clock."""

    kind: str                   # "turn", "remark" (the robot speaks unasked), "say" (a line as
    #                             given, the Say skill), "shared", or "heard" (a line only
    #                             heard, read for an intent)
    payload: Any                # the utterance text, or the shared image
    speaker: str = ""
    deadline: float = float("inf")
    language: str = ""          # the utterance's language tag (BCP-47), "" if unknown
    frames_before: int = 0      # camera frames received before it (they go first in the prompt)
    done: Callable[[Any], None] | None = None   # told the TurnResult (None: dropped unserved)
    started: Callable[[], None] | None = None   # told just before it is served (said)


class TurnQueue:
    """Bounded FIFO with expiry (see the module docstring)."""

    def __init__(self, max_waiting: int,
                 on_drop: Callable[[PendingTurn, str], None] = lambda item, reason: None,
                 clock: Callable[[], float] = time.monotonic):
        self.max_waiting, self.on_drop, self.clock = int(max_waiting), on_drop, clock
        self._items: collections.deque[PendingTurn] = collections.deque()
        self._cv = threading.Condition()
        self._closed = False
        self.dropped = 0

    def __len__(self) -> int:
        with self._cv:
            return len(self._items)

    @property
    def closed(self) -> bool:
        """close() was called (the manager is shutting down)."""
        return self._closed

    def put(self, item: PendingTurn) -> None:
        """Queue `item`; the oldest waiting one goes if the queue is full."""
        pushed_out = []
        with self._cv:
            if self._closed:
                return
            self._items.append(item)
            while len(self._items) > max(1, self.max_waiting):
                pushed_out.append(self._items.popleft())
            self._cv.notify()
        for old in pushed_out:
            self._drop(old, "queue full: newer utterances arrived while the robot was busy")

    def get(self, timeout: float | None = None) -> PendingTurn | None:
        """The next item whose deadline has not passed (expired ones are dropped on the way).

        None after close() or on timeout.
        """
        run = self.get_run(lambda item: False, timeout)
        return None if run is None else run[0]

    def get_run(self, joins: Callable[[PendingTurn], bool],
                timeout: float | None = None) -> list[PendingTurn] | None:
        """The next item and, if `joins(item)`, the joining ones right behind it, in order.

        Dropped when the newest in the run has expired. None after close() or on timeout.
        """
        end = None if timeout is None else time.monotonic() + timeout   # a wait, not a deadline
        while True:
            with self._cv:
                while not self._items and not self._closed:
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        return None
                    self._cv.wait(left)
                if self._closed:
                    return None
                run = [self._items.popleft()]
                while joins(run[0]) and self._items and joins(self._items[0]):
                    run.append(self._items.popleft())
            if run[-1].deadline > self.clock():
                return run
            for item in run:
                self._drop(item, "expired: its reply deadline passed while it waited")

    def remove(self, item: PendingTurn) -> bool:
        """Take a waiting item out unserved and unreported (a cancelled skill).

        Returns whether it was still waiting.
        """
        with self._cv:
            try:
                self._items.remove(item)
            except ValueError:
                return False
            return True

    def drop_waiting(self, reason: str) -> int:
        """Drop (and report) every item still waiting; the queue stays open. How many."""
        with self._cv:
            left = list(self._items)
            self._items.clear()
        for item in left:
            self._drop(item, reason)
        return len(left)

    def close(self) -> None:
        """Wake the consumer; items still waiting are dropped (reported)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self.drop_waiting("the manager is shutting down")

    def _drop(self, item: PendingTurn, reason: str) -> None:
        self.dropped += 1
        try:
            self.on_drop(item, reason)
        except Exception:  # noqa: BLE001 - reporting must not break the queue
            pass
