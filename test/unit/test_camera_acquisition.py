"""Frame acquisition (camera/acquisition.py) without ROS, tick by tick on a fake clock.

Due frames, retry with backoff and one log line per distinct failure, recovery, end of
stream, reopen rules.
"""
from __future__ import annotations

import numpy as np

from vision_dialogue.camera.acquisition import Acquisition
from vision_dialogue.camera.sources import (CameraSource, CapturedFrame, EndOfStream,
                                            SourceError)


class ScriptedSource(CameraSource):
    """Plays a script: a frame index, or an exception to raise, per read."""

    kind = "scripted"

    def __init__(self, script):
        self.script = list(script)
        self.opened = self.closed = 0

    def open(self):
        self.opened += 1

    def read(self):
        step = self.script.pop(0) if self.script else None
        if isinstance(step, BaseException):
            raise step
        if step is None:
            return None
        return CapturedFrame(np.full((4, 4, 3), step, np.uint8), 0, index=step)

    def close(self):
        self.closed += 1


class Log:
    def __init__(self):
        self.lines = []

    def error(self, m):
        self.lines.append(("error", m))

    def info(self, m):
        self.lines.append(("info", m))

    def debug(self, m):
        self.lines.append(("debug", m))


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def make(script, **kw):
    src, got, log, clock = ScriptedSource(script), [], Log(), Clock()
    acq = Acquisition(lambda: src, lambda f, due: got.append((f.index, due)), logger=log,
                      clock=clock, **{"frame_period": 1.0, **kw})
    return acq, src, got, log, clock


def test_every_tick_is_due_without_a_stream():
    acq, src, got, _, clock = make([1, 2, None, 3])
    for _ in range(4):
        acq.tick()
        clock.t += 1.0
    assert got == [(1, True), (2, True), (3, True)] and src.opened == 1


def test_with_a_stream_only_every_frame_period_is_due():
    acq, _, got, _, clock = make(list(range(12)), frame_period=1.0, publish_rate=4.0)
    assert acq.tick_period == 0.25
    for _ in range(12):
        acq.tick()
        clock.t += 0.25
    assert [due for _, due in got] == [True, False, False, False] * 3


def test_failures_back_off_log_once_and_recover():
    err = SourceError("no device /dev/video0")
    acq, src, got, log, clock = make([err, err, err, 5], retry_initial=1.0, retry_max=2.5)
    waits = []
    for _ in range(3):
        acq.tick()
        retry_at = acq._retry_at
        waits.append(retry_at - clock.t)
        assert acq.tick() is None                # too early: no attempt
        clock.t = retry_at
    assert waits == [1.0, 2.0, 2.5]              # doubling, capped at retry_max
    assert acq.failures == 3 and acq.errors_logged == 1
    assert [m for lvl, m in log.lines if lvl == "error"][0].startswith(
        "camera source failed: no device /dev/video0")
    assert src.closed == 3 and src.opened == 3  # reopen=True: closed, opened again next time
    acq.tick()
    assert src.opened == 4 and got == [(5, True)] and any("recovered" in m for _, m in log.lines)


def test_a_bad_frame_keeps_the_connection_and_odd_errors_count_as_failures():
    acq, src, got, _, clock = make([SourceError("corrupt JPEG", reopen=False),
                                    ValueError("driver bug"), 7])
    acq.tick()
    assert src.closed == 0                       # reopen=False: the source stays open
    clock.t = acq._retry_at
    acq.tick()
    assert acq.failures == 2 and acq.errors_logged == 2
    clock.t = acq._retry_at
    acq.tick()
    assert got == [(7, True)]


def test_end_of_stream_ends_acquisition():
    acq, src, got, log, clock = make([1, EndOfStream("clip.mp4"), 2])
    for _ in range(3):
        acq.tick()
        clock.t += 1.0
    assert got == [(1, True)] and acq.ended and src.closed == 1
    assert any("finished" in m for _, m in log.lines)


def test_thread_ticks_and_close_releases_the_source():
    src = ScriptedSource(list(range(1000)))
    got = []
    acq = Acquisition(lambda: src, lambda f, due: got.append(f.index), frame_period=0.01)
    acq.start()
    import time
    deadline = time.monotonic() + 3.0
    while len(got) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    acq.close()
    assert len(got) >= 5 and got == sorted(got) and src.closed == 1
    n = len(got)
    time.sleep(0.05)
    assert len(got) == n                          # no tick after close


def test_the_source_opens_only_once_ready_and_close_ends_the_wait():
    import threading
    src = ScriptedSource(list(range(1000)))
    got, ready, asked = [], threading.Event(), threading.Event()

    def is_ready():
        asked.set()
        return ready.is_set()
    acq = Acquisition(lambda: src, lambda f, due: got.append(f.index), frame_period=0.01)
    acq.source = src
    acq.start(is_ready)
    assert asked.wait(5.0)                       # it is waiting on the condition
    assert src.opened == 0 and got == []
    ready.set()
    acq._thread.join(0)                          # (still running)
    import time
    deadline = time.monotonic() + 5.0
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    acq.close()
    assert got and src.opened == 1
    waiting = Acquisition(lambda: src, lambda f, due: None, frame_period=0.01)
    waiting.start(lambda: False)
    waiting.close()                              # never ready: close ends the wait
    assert not waiting._thread.is_alive()
