"""A flag a signal handler may set: a plain attribute, no lock.

`threading.Event.set` takes a lock. Python runs a signal's handler in the main thread between
two bytecodes, also in the middle of another handler: a second SIGTERM that arrives while the
first handler holds the Event's lock (notifying a waiter) runs the handler again, which then
waits for that lock, held by the same thread, forever. A fresh-clone run showed it: a camera
node three handlers deep after `ros2 launch` was stopped with SIGTERM, alive 30 s later.
"""
from __future__ import annotations


class SignalFlag:
    """Set from a signal handler, read anywhere; waiting is polling (no condition to notify)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True         # one store: atomic under the interpreter lock

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set
