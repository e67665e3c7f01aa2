"""Camera frames into the manager, off the ROS executor (ROS-free).

The subscription callbacks only `offer()` a frame (O(1)) and return: rclpy's
MultiThreadedExecutor does not wait on a subscription while its callback runs, so a callback
that decoded a 1280x720 frame (10-20 ms) let the DDS reader's queue overflow at 30 fps and
half the frames were lost. One worker thread decodes and adds them, oldest first. A frame
that arrives on two transports (raw and JPEG, same frame_id and stamp) is added once: the
key is recorded only after a successful decode, so a raw frame in an encoding we cannot read
does not hide its JPEG copy.

`min_interval` is measured between the frames' stamps when they have them (what the camera
saw, evenly, even when a loaded machine delivers the frames in bursts and an interval by
arrival would keep one frame of each burst), by arrival for unstamped frames or when the
stamps go back (a looped bag, a restarted simulation clock).

A turn waits (`wait_through`) for the frames that arrived before its utterance, so the
prompt keeps arrival order even while the worker is still decoding one.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Callable, Hashable

import numpy as np

#: frames waiting for the worker; older ones are dropped when a burst outruns it
BACKLOG = 8
#: longest a turn waits for frames that arrived before its utterance to be added
SETTLE_S = 2.0
#: at shutdown, the longest wait for a frame still in a node's models (the detector's, the
#: manager's observer): well inside `ros2 launch`'s kill, 15 s after Ctrl-C
FRAME_AT_EXIT_S = 8.0


def wait_for_frame_in_hand(models: threading.Lock, warn: Callable[[str], None], going: str,
                           timeout: float = FRAME_AT_EXIT_S) -> bool:
    """Wait for the frame a node's models hold (at most `timeout` s); True when none is left.

    A node deactivated after this publishes and counts nothing more (its frame worker holds
    `models` from the check of `active` to the frame's last message). A frame still there
    after `timeout` is left, and `warn` says so ("... s; <going> without waiting for it").
    """
    if models.acquire(timeout=timeout):
        models.release()
        return True
    warn(f"a frame was still in the models after {timeout:g} s; {going} without waiting for it")
    return False


class FrameIntake:
    """Decode-and-add worker with de-duplication by key, a minimum interval and counters.

    add(bgr, stamp_ns) is called on the worker thread for every accepted frame.
    A frame whose decode raised one of `errors`, or that `add` refused (ValueError), is
    rejected: `rejected_by_cause` counts them by the error's `cause` attribute (else its type
    name), and `warn(text)` says so once per cause every WARN_PERIOD_S with the count so far
    (one kind of bad frame cannot hide another). `min_interval` may change at any time.
    """

    WARN_PERIOD_S = 5.0

    def __init__(self, add: Callable[[np.ndarray, int], None], *, min_interval: float = 0.0,
                 errors: tuple[type[BaseException], ...] = (ValueError,),
                 warn: Callable[[str], None] | None = None, what: str = "frame",
                 backlog: int = BACKLOG, clock: Callable[[], float] = time.monotonic):
        self._add, self._errors, self._warn, self._what = add, errors, warn, what
        self._warned_at: dict[str, float] = {}
        self.min_interval = min_interval
        self._clock = clock
        self._items: collections.deque = collections.deque()
        self._backlog = backlog
        self._cv = threading.Condition()
        self._seen: collections.deque = collections.deque(maxlen=64)
        self._last_accepted = -float("inf")          # arrival, by self._clock
        self._last_stamp_ns = 0                         # the last accepted frame's stamp
        self._closed = False
        self.received = self.finished = self.accepted = self.duplicates = 0
        self.skipped = self.dropped = self.rejected = 0
        self.rejected_by_cause: collections.Counter = collections.Counter()
        self._thread = threading.Thread(target=self._run, name="vd-frames", daemon=True)
        self._thread.start()

    def offer(self, key: Hashable | None, stamp_ns: int, decode: Callable[[], np.ndarray]) -> None:
        """Queue one frame message (any thread, returns at once). key None: never a duplicate."""
        with self._cv:
            if self._closed:
                return
            self.received += 1
            if len(self._items) >= self._backlog:
                self._items.popleft()
                self.dropped += 1
                self.finished += 1
            self._items.append((key, stamp_ns, decode, self._clock()))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._items and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                item = self._items.popleft()
            try:
                self._take(*item)
            except Exception as e:  # noqa: BLE001 - the worker outlives any one frame
                self._reject(e)
            with self._cv:
                self.finished += 1
                self._cv.notify_all()

    def wait_through(self, count: int, timeout: float = SETTLE_S) -> bool:
        """Wait until the first `count` frames offered are added or set aside; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: self.finished >= count or self._closed, timeout)

    def _take(self, key, stamp_ns: int, decode, arrived: float) -> None:
        if key is not None and key in self._seen:
            self.duplicates += 1
            return
        if self._since_last(stamp_ns, arrived) < self.min_interval:
            self.skipped += 1
            return
        try:
            bgr = decode()
        except self._errors as e:
            self._reject(e)
            return
        if key is not None:
            self._seen.append(key)
        self._last_accepted, self._last_stamp_ns = arrived, stamp_ns
        self.accepted += 1
        self._add(bgr, stamp_ns)

    def _since_last(self, stamp_ns: int, arrived: float) -> float:
        """Seconds since the last accepted frame: by stamps where both have one, else arrival."""
        if stamp_ns > 0 and self._last_stamp_ns > 0 and stamp_ns >= self._last_stamp_ns:
            return (stamp_ns - self._last_stamp_ns) / 1e9
        return arrived - self._last_accepted

    def _reject(self, error: BaseException) -> None:
        self.rejected += 1
        cause = getattr(error, "cause", None) or type(error).__name__
        self.rejected_by_cause[cause] += 1
        now = self._clock()
        if self._warn is None or now - self._warned_at.get(cause, -1e9) < self.WARN_PERIOD_S:
            return
        self._warned_at[cause] = now
        try:
            self._warn(f"dropping a bad {self._what} ({cause}; "
                       f"{self.rejected_by_cause[cause]} so far): {error}")
        except Exception:  # noqa: BLE001 - a logging failure must not stop the worker
            pass

    def close(self, timeout: float = 2.0) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
