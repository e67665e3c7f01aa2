"""What the local voice knows of the segment it is hearing, and its partial lines (ROS-free).

A segment runs from the VAD's start to its end. `Segment` is its state, typed: when it
started and paused, the recognition begun at the pause and the turn judge's verdict on those
words (both dropped when the person goes on), whether it overlapped the robot's voice (then it
may be echo). `PartialLines` reports the words so far of the segment still being heard, as a
head start for the LLM: every `every` seconds of speech, and at each pause (the words already
recognised there for the end of the turn).
"""
from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Callable, Iterable

import numpy as np

from vision_dialogue.voice.audio import CHUNK, SAMPLE_RATE

CHUNK_S = CHUNK / SAMPLE_RATE
#: a segment overlapping the robot's speech that matches a sentence it said this closely is echo
ECHO_TEXT_MATCH = 0.6


@dataclass
class Segment:
    """The segment being heard (see the module docstring)."""

    started_at: float
    echo: bool = False                     # it began while the robot's voice played
    paused_at: float | None = None         # the last pause, while no speech followed it
    speculative: Future | None = None      # its words recognised at that pause
    judged: Future | None = None           # the turn judge on those words (a model: a worker)
    end_rule: str | None = None            # the judge's verdict: the silence that ends it
    heard: float = 0.0                     # s of its audio (a source faster than real time)
    partial_heard: float = 0.0             # `heard` at the last partial line
    partial_at: float | None = None        # when the last partial line was asked for

    def resume(self) -> None:
        """The person went on after a pause: what was read at the pause no longer holds."""
        self.paused_at = self.speculative = self.judged = self.end_rule = None


def is_echo(text: str, spoken: Iterable[str]) -> bool:
    """`text` reads like one of the sentences the robot said lately (its own voice heard)."""
    words = text.lower().split()
    return any(SequenceMatcher(None, words, s.lower().split()).ratio() >= ECHO_TEXT_MATCH
               for s in spoken)


def tell(events, hook: str, *args) -> bool:
    """Call the speech node's optional `hook` (partial, speaking) where it has one."""
    fn = getattr(events, hook, None)
    if not callable(fn):
        return False
    fn(*args)
    return True


class PartialLines:
    """The words so far of the segment still being heard, reported as partial lines.

    `transcribe(audio)` recognises; `audio_so_far()` is the segment's audio until now;
    `current()` the segment being heard (None between segments); `report(text)` hands a
    partial line to the speech node (only while its segment is still the current one and is
    not echo). One recognition at a time, on a worker of its own.
    """

    def __init__(self, transcribe: Callable[[np.ndarray], object],
                 audio_so_far: Callable[[], np.ndarray], current: Callable[[], Segment | None],
                 report: Callable[[str], None], every: float, at_pause: bool,
                 realtime: bool, logger: logging.Logger):
        self.transcribe, self.audio_so_far = transcribe, audio_so_far
        self.current, self.report = current, report
        self.every, self.at_pause, self.realtime = float(every), bool(at_pause), realtime
        self.log = logger
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="voice-partial")
        self._busy = False

    def tick(self, seg: Segment | None, now: float) -> None:
        """Every `every` s of a segment's speech: recognise it so far, as a partial.

        Audio faster than real time (a WAV file) counts its own seconds and is recognised in
        step, as a live microphone would be on a machine fast enough.
        """
        if not self.every or seg is None or seg.paused_at is not None or seg.echo or self._busy:
            return
        if not self.realtime:
            seg.heard += CHUNK_S
            if seg.heard - seg.partial_heard >= self.every:
                seg.partial_heard = seg.heard
                self._recognise(self.audio_so_far(), seg)
            return
        if now - (seg.partial_at or seg.started_at) < self.every:
            return
        seg.partial_at = now
        self._busy = True
        try:
            self._worker.submit(self._recognise, self.audio_so_far(), seg)
        except RuntimeError:        # closing
            self._busy = False

    def at_a_pause(self, future: Future, seg: Segment) -> None:
        """The words recognised at a pause are a partial too, while the turn may go on."""
        if self.every or self.at_pause:
            future.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() is not None
                else self._send(f.result().text, seg))

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)

    def _recognise(self, audio: np.ndarray, seg: Segment) -> None:
        try:
            self._send(self.transcribe(audio).text, seg)
        except Exception as e:  # noqa: BLE001 - a partial is only a head start
            self.log.debug(f"partial recognition failed: {e!r}")
        finally:
            self._busy = False

    def _send(self, text: str, seg: Segment) -> None:
        text = text.strip()
        if text and seg is self.current() and not seg.echo:
            self.report(text)
