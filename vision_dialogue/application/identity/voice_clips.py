"""The last seconds of microphone audio, so that an utterance's voice can be printed.

The local voice says when the person's voice began and ended (Utterance's `speech_start`,
`speech_end`): the clip is that span. Other backends say only when the line was published:
the clip is then the `seconds_for(text)` before it (which misses the start of a line
recognised late), and the voice print's own silence trimming (Resemblyzer's VAD) keeps only
the speech. Nothing is written anywhere: the ring
forgets audio older than `keep_s`.
"""
from __future__ import annotations

import collections
import threading

import numpy as np

#: seconds of speech per word, and the least and most a clip is taken for
SECONDS_PER_WORD, MIN_CLIP_S, MAX_CLIP_S = 0.45, 1.5, 12.0


def seconds_for(text: str) -> float:
    """How long a line of this many words takes to say (with a margin)."""
    return min(MAX_CLIP_S, max(MIN_CLIP_S, 0.6 + SECONDS_PER_WORD * len(text.split())))


class AudioRing:
    """Chunks of 16-bit mono audio by capture time (ns); `clip` cuts a span out."""

    def __init__(self, keep_s: float = 30.0):
        self.keep_ns = int(keep_s * 1e9)
        self._chunks: collections.deque = collections.deque()
        self._lock = threading.Condition()
        self.sample_rate = 0
        self._heard_to_ns = 0          # the end of the newest chunk

    def add(self, start_ns: int, samples: np.ndarray, sample_rate: int) -> None:
        with self._lock:
            if sample_rate != self.sample_rate:
                self._chunks.clear()            # one rate in the ring
                self.sample_rate = sample_rate
            self._chunks.append((start_ns, np.asarray(samples, np.int16)))
            while self._chunks and self._chunks[0][0] < start_ns - self.keep_ns:
                self._chunks.popleft()
            self._heard_to_ns = max(self._heard_to_ns,
                                    start_ns + int(len(samples) * 1e9 / sample_rate))
            self._lock.notify_all()

    def wait_for(self, end_ns: int, timeout: float) -> bool:
        """Until audio up to `end_ns` is in (a line's message may overtake its last chunks)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._heard_to_ns >= end_ns - 50_000_000,
                                       timeout)

    def clip(self, end_ns: int, seconds: float) -> np.ndarray:
        """The samples from `seconds` before `end_ns` to `end_ns` (empty when none)."""
        start_ns = end_ns - int(seconds * 1e9)
        out = []
        with self._lock:
            rate = self.sample_rate
            for t0, samples in self._chunks:
                t1 = t0 + int(len(samples) * 1e9 / rate)
                if t1 <= start_ns or t0 >= end_ns:
                    continue
                a = max(0, int((start_ns - t0) * rate / 1e9))
                b = min(len(samples), int((end_ns - t0) * rate / 1e9))
                out.append(samples[a:b])
        return np.concatenate(out) if out else np.zeros(0, np.int16)
