"""What each node says about its health on /diagnostics (ROS-free).

A `Health` is one named status as `diagnostic_msgs/DiagnosticStatus` carries it (the levels are
the message's: OK, WARN, ERROR, STALE), so `diagnostic_aggregator` and `rqt_robot_monitor` show
it without configuration. The rules here are shared by the nodes:

* `by_age`: something that should come every `period` s (a camera frame, a detection) is OK
  while it does, WARN after `warn_after(period)` without it, ERROR after `error_after(period)`;
* `SinceFailing`: a fault known at once (a source that fails to open) is WARN at once and
  ERROR once it lasted `FAULT_ERROR_S`; it clears at the first success;
* `LlmWatch`: a server backend's port is connected to every `LLM_CHECK_PERIOD_S` on a thread
  of its own (no request: llama.cpp's Python server cuts a running stream for any new
  request), so a stopped server is ERROR within a few seconds even when nobody talks; its
  model list is asked for once each time it becomes reachable;
* `ReplyStats`: the replies' first-sentence latency (p50 of the last `REPLY_WINDOW`) and the
  fallbacks.
"""
from __future__ import annotations

import collections
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

OK, WARN, ERROR, STALE = 0, 1, 2, 3
LEVEL_NAMES = ("OK", "WARN", "ERROR", "STALE")

#: seconds between diagnostics messages (diagnostic_updater's default period)
DIAGNOSTICS_PERIOD_S = 1.0
#: a fault known at once turns from WARN to ERROR after this long, s
FAULT_ERROR_S = 3.0
#: seconds between two looks at an LLM server (a stopped one is ERROR within about this + 1 s)
LLM_CHECK_PERIOD_S = 2.0
#: replies whose first-sentence latency makes the reported p50
REPLY_WINDOW = 10


@dataclass
class Health:
    """One status: `task` names it within its node ("llm", "camera", ...)."""

    task: str
    level: int
    message: str
    values: dict[str, Any] = field(default_factory=dict)


def warn_after(period: float) -> float:
    """Seconds without an expected item before WARN: two periods and a second of slack."""
    return 2.0 * period + 1.0


def error_after(period: float) -> float:
    """Seconds without an expected item before ERROR."""
    return 5.0 * period + 3.0


def by_age(age: float | None, period: float, what: str) -> tuple[int, str]:
    """(level, message) for something expected every `period` s, last seen `age` s ago."""
    if age is None:
        return WARN, f"no {what} yet"
    if age > error_after(period):
        return ERROR, f"no {what} for {age:.0f} s (expected every {period:g} s)"
    if age > warn_after(period):
        return WARN, f"no {what} for {age:.0f} s (expected every {period:g} s)"
    return OK, f"{what} {age:.1f} s ago"


class SinceFailing:
    """A fault known at once: WARN while young, ERROR after FAULT_ERROR_S, cleared by success."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.since: float | None = None
        self.reason = ""

    def failed(self, reason: str) -> None:
        if self.since is None:
            self.since = self.clock()
        self.reason = reason

    def succeeded(self) -> None:
        self.since, self.reason = None, ""

    def level(self) -> int:
        if self.since is None:
            return OK
        return ERROR if self.clock() - self.since >= FAULT_ERROR_S else WARN


class ReplyStats:
    """The recent replies: first-sentence latency p50, counts, the last fallback's error."""

    def __init__(self, window: int = REPLY_WINDOW):
        self.latencies: collections.deque[float] = collections.deque(maxlen=window)
        self.replies = self.fallbacks = 0
        self.last_fallback = False
        self.last_error = ""

    def add(self, first_sentence_s: float | None, fallback: bool, error: str = "") -> None:
        self.replies += 1
        self.fallbacks += bool(fallback)
        self.last_fallback, self.last_error = bool(fallback), str(error or "")
        if first_sentence_s is not None and not fallback:
            self.latencies.append(float(first_sentence_s))

    def values(self) -> dict[str, Any]:
        p50 = statistics.median(self.latencies) if self.latencies else None
        return {"replies": self.replies, "fallback replies": self.fallbacks,
                "first sentence p50 (s)": "" if p50 is None else f"{p50:.2f}"}


@dataclass
class _Found:
    """A look at the server that is not a model probe: ok, detail."""

    ok: bool | None
    detail: str


class LlmWatch:
    """The LLM's status: a server looked at on a thread of its own, and the last replies.

    `unreachable()` says why the server takes no connection ("" if it does); `probe()` returns
    an llm.probe.Probe (is the model served), asked once each time the server becomes
    reachable. Both None: an in-process model, never looked at.
    """

    def __init__(self, probe: Callable[[], Any] | None, stats: ReplyStats,
                 period: float = LLM_CHECK_PERIOD_S,
                 unreachable: Callable[[], str] = lambda: ""):
        self.probe, self.stats, self.period = probe, stats, float(period)
        self.unreachable = unreachable
        self.found: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.probe is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vd-llm-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                why = self.unreachable()
                if why:
                    self.found = _Found(False, why)
                elif self.found is None or self.found.ok is False:
                    self.found = self.probe()      # (back) up: is the model served?
            except Exception as e:  # noqa: BLE001 - a probe never raises; a bug must not either
                self.found = _Found(False, repr(e))
            self._stop.wait(self.period)

    def close(self) -> None:
        self._stop.set()

    def health(self, **values) -> Health:
        values = {**values, **self.stats.values()}
        found, stats = self.found, self.stats
        if found is not None and found.ok is False:
            return Health("llm", ERROR, found.detail, values)
        if stats.last_fallback:
            return Health("llm", WARN, f"the last reply was the fallback line "
                          f"({stats.last_error or 'no reason given'})", values)
        if found is not None and found.ok is None:
            return Health("llm", WARN, found.detail, values)
        if found is None and self.probe is not None:
            return Health("llm", WARN, "not checked yet", values)
        return Health("llm", OK, found.detail if found is not None else "in-process model",
                      values)


class Throughput:
    """Work done recently: items per second over the last `window` s, mean seconds per item."""

    def __init__(self, window: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.window, self.clock = float(window), clock
        self.done: collections.deque[tuple[float, float]] = collections.deque(maxlen=1000)
        self.total = 0

    def add(self, seconds: float) -> None:
        self.done.append((self.clock(), float(seconds)))
        self.total += 1

    def values(self) -> dict[str, Any]:
        now = self.clock()
        recent = [s for t, s in self.done if now - t <= self.window]
        mean = f"{1000 * statistics.fmean(recent):.0f}" if recent else ""
        return {"done": self.total, "rate (Hz)": f"{len(recent) / self.window:.2f}",
                "mean time (ms)": mean}


class StatusBoard:
    """The statuses a reader (the monitor) has heard, by name "<node>: <task>".

    `worst(task)`: the worst fresh status of that task across nodes (two cameras: the failing
    one shows), so the page says what /diagnostics says.
    """

    def __init__(self, max_age: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.max_age, self.clock = float(max_age), clock
        self._by_name: dict[str, tuple[float, int, str]] = {}

    def update(self, name: str, level: int, message: str) -> None:
        self._by_name[name] = (self.clock(), int(level), str(message))

    def worst(self, task: str) -> tuple[int, str] | None:
        now = self.clock()
        fresh = [(level, f"{name}: {message}") for name, (t, level, message)
                 in self._by_name.items()
                 if name.rsplit(": ", 1)[-1] == task and now - t <= self.max_age]
        return max(fresh, key=lambda s: s[0] if s[0] != STALE else WARN, default=None)
