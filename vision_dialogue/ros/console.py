"""A quiet console: third-party start-up noise muted, and log lines that never break the dialogue.

MediaPipe, TensorFlow Lite, absl, protobuf and transformers print a dozen lines at start-up
("Created TensorFlow Lite XNNPACK delegate", "Feedback manager requires a model with a single
signature inference" four times, a protobuf deprecation warning, weight-loading progress
bars), and OpenCV prints an 8-line block at every failed webcam retry. None of it is for the
person talking to the robot; the nodes log what matters in one line of their own.

`quiet_console(verbose)` (called by every executable's main; `--verbose` or VD_VERBOSE=1 keeps
the noise):
- sets the libraries' own switches (environment variables they read at import, OpenCV's log
  level, Python warning filters, transformers' progress bars);
- routes the process's stderr through a pipe at the file descriptor, so lines written by C++
  code (which no Python setting reaches) are dropped when they match NOISE, while every other
  line passes through unchanged and in order;
- lets the terminal speech backend hold log lines back while the robot's line is open
  (`hold_logs`) and redraw its `you:` prompt after a log line (`show_prompt`).
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import time
import warnings
from typing import Callable

VERBOSE_ENV = "VD_VERBOSE"
"""VD_VERBOSE=1: show third-party output (as `--verbose` does)."""

NOISE = re.compile(
    r"^(?:INFO: Created TensorFlow Lite"
    r"|WARNING: All log messages before absl::InitializeLog"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ \S+\.(?:cc|h):\d+\] "      # absl / glog lines from C++
    r"|\[ ?(?:WARN|ERROR|INFO):\d+@[\d.]+\] "             # OpenCV's own log lines
    r"|.*symbol_database\.py:\d+: UserWarning: SymbolDatabase\.GetPrototype"
    r"|\s+warnings\.warn\('SymbolDatabase"
    r"|Loading weights:)")
"""Lines of third-party noise, matched at the start of a line (after carriage returns)."""

LIBRARY_SWITCHES = {
    "TF_CPP_MIN_LOG_LEVEL": "3",          # TensorFlow Lite (inside MediaPipe)
    "GLOG_minloglevel": "2",              # glog users
    "OPENCV_LOG_LEVEL": "OFF",            # OpenCV's camera back-end errors
    "OPENCV_VIDEOIO_DEBUG": "0",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",                  # tqdm bars (the GGUF conversion uses plain tqdm)
}

MAX_HOLD_S = 5.0
"""Log lines are held back at most this long while the robot's line is open."""


class _StderrPump:
    """fd 2 through a pipe, written out by a thread.

    Drops NOISE lines (unless verbose), holds lines back while the robot's terminal line is
    open, and redraws the input prompt after writing over it.
    """

    def __init__(self, verbose: bool):
        self.verbose = verbose
        sys.stderr.flush()
        self.real = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._src = os.fdopen(read_end, "rb", buffering=0)
        self._lock = threading.Lock()
        self._held: list[bytes] = []
        self._hold_since: float | None = None
        self.prompt = b""
        self.done = threading.Event()
        threading.Thread(target=self._run, name="vd-stderr", daemon=True).start()

    def _run(self) -> None:
        import select
        pending = b""
        with self._src:
            while True:
                ready, _, _ = select.select([self._src], [], [], 0.25)
                if not ready:
                    self._out([])          # a hold that has expired lets its lines out
                    continue
                chunk = self._src.read(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                self._out([ln + b"\n" for ln in lines])
            self._out([pending] if pending else [], force=True)
        self.done.set()

    def _out(self, lines: list[bytes], force: bool = False) -> None:
        with self._lock:
            if not self.verbose:
                lines = [ln for ln in lines if not NOISE.match(
                    ln.rsplit(b"\r", 1)[-1].decode("utf-8", "replace"))]
            self._held += lines
            holding = self._hold_since is not None and \
                time.monotonic() - self._hold_since <= MAX_HOLD_S
            if not self._held or (holding and not force):
                return
            out, self._held = b"".join(self._held), []
            if self.prompt:       # on the prompt's line: clear it, write, draw it again
                out = b"\r\x1b[K" + out + self.prompt
        _write_all(self.real, out)

    def hold(self, on: bool) -> None:
        with self._lock:
            self._hold_since = time.monotonic() if on else None
        if not on:
            self._out([])

    def set_prompt(self, prompt: str | None, write: Callable[[], None] | None = None) -> None:
        with self._lock:
            if write is not None:
                write()
            self.prompt = (prompt or "").encode()

    def restore(self) -> None:
        try:
            sys.stderr.flush()
            self.hold(False)
            os.dup2(self.real, 2)    # closes the pipe's last writer: the pump drains and ends
        except OSError:
            return
        self.done.wait(2.0)


_pump: _StderrPump | None = None


def wants_verbose(argv: list[str]) -> bool:
    """True when `--verbose` is in argv (it is removed) or VD_VERBOSE=1."""
    found = "--verbose" in argv
    while "--verbose" in argv:
        argv.remove("--verbose")
    return found or os.environ.get(VERBOSE_ENV) == "1"


def quiet_console(verbose: bool = False) -> None:
    """Set up this process's console (see the module docstring); once per process."""
    global _pump
    if _pump is not None:
        return
    if verbose:
        os.environ[VERBOSE_ENV] = "1"       # child processes (bringup --processes) too
    else:
        for key, value in LIBRARY_SWITCHES.items():
            os.environ.setdefault(key, value)
        warnings.filterwarnings("ignore", message=r"SymbolDatabase\.GetPrototype")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        if "cv2" in sys.modules:
            try:
                sys.modules["cv2"].setLogLevel(0)
            except Exception:  # noqa: BLE001 - an older OpenCV: the variable covers it
                pass
    try:
        _pump = _StderrPump(verbose)
    except OSError:
        return      # no usable stderr (a closed descriptor): nothing to route
    atexit.register(restore_console)


def hold_logs(on: bool) -> None:
    """Hold log lines back while the robot's terminal line is open (at most MAX_HOLD_S)."""
    if _pump is not None:
        _pump.hold(on)


def show_prompt(prompt: str | None, write: Callable[[], None] | None = None) -> None:
    """The input prompt now on the terminal's last line (None: none); redrawn after logs.

    `write` draws (or clears) it on the terminal, atomically with respect to log lines, so a
    log line never lands on the prompt's line.
    """
    if _pump is not None:
        _pump.set_prompt(prompt, write)
    elif write is not None:
        write()


_direct: int | None = None


def direct_stderr() -> int:
    """A descriptor of the process's own stderr with no pump thread in front of it.

    A thread holding the interpreter lock in C stops the pump, and with it what faulthandler
    writes: a node stuck there had an empty log where its stacks should have been. Kept open
    for the life of the process.
    """
    global _direct
    if _pump is None:
        return 2
    if _direct is None:
        _direct = os.dup(_pump.real)
    return _direct


def restore_console() -> None:
    """Put stderr back and write out what the pump still holds (before os._exit, at exit)."""
    global _pump
    pump, _pump = _pump, None
    if pump is not None:
        pump.restore()


def _write_all(fd: int, out: bytes) -> None:
    while out:
        try:
            out = out[os.write(fd, out):]
        except OSError:
            return
