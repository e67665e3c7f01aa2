"""Frame acquisition.

Read a camera source on a steady tick, retry failures with backoff, and say which frames are due on
the `frame_period` topic. ROS-free; camera_node publishes.

One thread ticks every `tick_period` (the frame period, or the faster stream's period), paced
by the monotonic clock: a late tick is skipped, never bunched up. Each tick opens the source
if needed and reads one frame. A `SourceError` is logged once per distinct message, the
source is closed when the error says so, and the next attempt waits `retry_initial` seconds,
doubling up to `retry_max`; the first good frame logs the recovery. `EndOfStream` (a video or
folder without loop) ends acquisition. Any other exception from a source counts as a source
error, so a bad driver never ends the thread. `start(ready)` holds the first tick (and the
source's opening, so a video's clock) until `ready()`: camera_node's `wait_for_listeners`.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from vision_dialogue.camera.sources import CameraSource, CapturedFrame, EndOfStream, SourceError
from vision_dialogue.common.health import SinceFailing

_log = logging.getLogger("vision_dialogue.camera")

#: on_frame(frame, due): due = the frame goes out on the frame_period topic too
FrameSink = Callable[[CapturedFrame, bool], None]
#: seconds between two looks at `start(ready)`'s condition
READY_POLL_S = 0.05


class Acquisition:
    """Drives one source; `on_frame` gets every frame read (see the module docstring)."""

    def __init__(self, make_source: Callable[[], CameraSource], on_frame: FrameSink, *,
                 frame_period: float, publish_rate: float = 0.0, retry_initial: float = 1.0,
                 retry_max: float = 30.0, logger=None,
                 clock: Callable[[], float] = time.monotonic):
        if frame_period <= 0 or publish_rate < 0 or retry_initial <= 0 or retry_max <= 0:
            raise ValueError("frame_period, retry_initial and retry_max must be > 0, "
                             "publish_rate >= 0")
        self._make_source, self.on_frame = make_source, on_frame
        self.frame_period, self.publish_rate = float(frame_period), float(publish_rate)
        self.tick_period = (min(frame_period, 1.0 / publish_rate) if publish_rate > 0
                            else frame_period)
        self.retry_initial, self.retry_max = float(retry_initial), float(retry_max)
        self.log = logger or _log
        self.clock = clock
        self.source: CameraSource | None = None
        self._opened = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0             # failed open/read attempts
        self.errors_logged = 0        # error lines logged (once per distinct failure)
        self.ended = False
        self.fault = SinceFailing(clock)      # the source's failure now, for /diagnostics
        self.last_frame_at: float | None = None   # clock() of the last frame read
        self._failing = False
        self._delay = 0.0
        self._retry_at = 0.0
        self._logged: set[str] = set()
        self._last_due: float | None = None

    # ------------------------------------------------------------------ thread
    def start(self, ready: Callable[[], bool] | None = None) -> None:
        """Tick on a background thread until close(), the first tick once `ready()` is true.

        Without `ready`, at once; `ready` is polled every READY_POLL_S, and the source is
        opened at the first tick (a video's clock starts then).
        """
        self._thread = threading.Thread(target=self._run, args=(ready,),
                                        name="camera-acquisition", daemon=True)
        self._thread.start()

    def _run(self, ready: Callable[[], bool] | None) -> None:
        while ready is not None and not ready():
            if self._stop.wait(READY_POLL_S):
                return
        next_t = self.clock()
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as e:  # noqa: BLE001 - e.g. publishing during shutdown
                if self._stop.is_set():
                    break
                self.log.error(f"camera tick failed: {e!r}")
            next_t += self.tick_period
            now = self.clock()
            if next_t < now:
                next_t = now + self.tick_period - ((now - next_t) % self.tick_period)
            self._stop.wait(next_t - now)

    def close(self) -> None:
        """Stop the thread and release the source (idempotent)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)
        with self._lock:
            if self.source is not None:
                self.source.close()
            self._opened = False

    # ------------------------------------------------------------------ one tick
    def tick(self) -> CapturedFrame | None:
        """Open if needed, read one frame and hand it on; the frame (None if none)."""
        with self._lock:
            if self._stop.is_set() or self.ended:
                return None
            now = self.clock()
            if now < self._retry_at:
                return None
            frame = self._read(now)
            if frame is None:
                return None
            # after the read, as the frame's stamp: opening a video took 0.3 s on a loaded
            # machine, and the next due frame came stamped 0.2 s after the first
            now = self.clock()
            self.last_frame_at = now
            if self._failing:
                self._failing = False
                self.fault.succeeded()
                self._logged.clear()
                self.log.info(f"camera source recovered: {self.source.describe()}")
            due = self._due(now)
            if due:
                self._last_due = now
        self.on_frame(frame, due)
        return frame

    def _read(self, now: float) -> CapturedFrame | None:
        try:
            if not self._opened:
                if self.source is None:
                    self.source = self._make_source()
                self.source.open()
                self._opened = True
            return self.source.read()
        except EndOfStream:
            self.ended = True
            self.log.info(f"{self.source.describe()} finished (loop is off); no more frames "
                          "will be published")
            self.source.close()
            self._opened = False
        except SourceError as e:
            self._fail(e, now)
        except Exception as e:  # noqa: BLE001 - never let a source end acquisition
            self._fail(SourceError(f"unexpected {type(e).__name__}: {e}"), now)
        return None

    def _due(self, now: float) -> bool:
        """Whether the frame_period topic is due.

        At every tick without a faster stream; with one, when frame_period has passed (minus half a
        tick of scheduling jitter).
        """
        if self._last_due is None or self.publish_rate <= 0:
            return True
        return now - self._last_due >= self.frame_period - self.tick_period / 2

    def _fail(self, err: SourceError, now: float) -> None:
        self.failures += 1
        msg = str(err)
        self._delay = (min(self._delay * 2.0, self.retry_max) if self._failing
                       else self.retry_initial)
        self._failing = True
        self.fault.failed(msg)
        if msg not in self._logged:   # one error per distinct failure, not one per tick
            self._logged.add(msg)
            self.errors_logged += 1
            self.log.error(f"camera source failed: {msg}; publishing nothing and retrying "
                           f"with backoff ({self.retry_initial:g} s doubling up to "
                           f"{self.retry_max:g} s)")
        else:
            self.log.debug(f"camera source still failing: {msg}; retry in {self._delay:g} s")
        if err.reopen and self.source is not None:
            self.source.close()
            self._opened = False
        self._retry_at = now + self._delay
