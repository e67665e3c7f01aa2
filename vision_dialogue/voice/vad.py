"""Voice activity detection: Silero VAD turns a chunk stream into spoken segments.

Events, in order, for each segment: `start` once it has `min_speech_s` of speech (barge-in
listens for this), `pause` at the first silent chunk after speech (the backend may start
recognising there, before the end is certain), `resume` if speech comes back, and `end` after
`min_silence_s` of silence, or at `max_segment_s` (a monologue is cut into pieces; `cut` is set).
Blips shorter than `min_speech_s` never start a segment. `wait_for(seconds)` changes the silence
that ends the segment in progress (the backend decides it from the words: voice/turn_end.py).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from vision_dialogue.voice.audio import CHUNK, SAMPLE_RATE

#: hysteresis: once in speech, a chunk counts as speech down to threshold - this
_HYSTERESIS = 0.15
#: silence that ends an utterance: longer than a pause at a comma (0.3 s splits "Hello robot,
#: can you see me?"); recognition starts at the first silent chunk, so this wait overlaps it
MIN_SILENCE_S = 0.5


def load_vad_model():
    """Silero VAD on onnxruntime (one thread); ImportError names the requirements file."""
    try:
        from silero_vad import load_silero_vad
    except ImportError as e:
        raise ImportError(f"silero-vad is not installed ({e}): pip install -r "
                          "requirements/voice.txt") from None
    return load_silero_vad(onnx=True)


@dataclass(frozen=True)
class VadEvent:
    kind: str                      # start | pause | resume | end
    audio: np.ndarray | None = None  # pause, end: the segment so far (with `pad_s` before it)
    cut: bool = False              # end: cut at max_segment_s, the speech goes on


class SpeechSegmenter:
    """Feeds CHUNK-sample chunks to Silero VAD and reports segment events (module docstring)."""

    def __init__(self, model=None, *, threshold: float = 0.5, min_silence_s: float = MIN_SILENCE_S,
                 min_speech_s: float = 0.25, max_segment_s: float = 20.0, pad_s: float = 0.4):
        self.model = model if model is not None else load_vad_model()
        self.threshold = threshold
        self.min_silence = self.chunks(min_silence_s)
        self.min_speech = max(1, round(min_speech_s * SAMPLE_RATE / CHUNK))
        self.max_chunks = max(2, round(max_segment_s * SAMPLE_RATE / CHUNK))
        self._pre: deque[np.ndarray] = deque(maxlen=max(1, round(pad_s * SAMPLE_RATE / CHUNK)))
        self.last_prob = 0.0
        self.reset()

    def reset(self) -> None:
        """Forget the segment in progress (the robot muted its microphone)."""
        self._buf: list[np.ndarray] = []
        self._voiced = self._silent = 0
        self._started = False
        self._need = self.min_silence       # silent chunks that end this segment
        self._pre.clear()
        self.model.reset_states()

    @staticmethod
    def chunks(seconds: float) -> int:
        """Whole chunks in `seconds` (at least one)."""
        return max(1, round(seconds * SAMPLE_RATE / CHUNK))

    def wait_for(self, seconds: float) -> None:
        """The segment in progress ends after `seconds` of silence (the next chunk, if past)."""
        if self._buf:
            self._need = self.chunks(seconds)

    @property
    def busy(self) -> bool:
        """Sound that may become a segment is being collected."""
        return bool(self._buf)

    def probability(self, chunk: np.ndarray) -> float:
        import torch
        return float(self.model(torch.from_numpy(np.ascontiguousarray(chunk, np.float32)),
                                SAMPLE_RATE).item())

    def feed(self, chunk: np.ndarray) -> list[VadEvent]:
        p = self.last_prob = self.probability(chunk)
        if not self._buf:
            self._pre.append(chunk)
            if p >= self.threshold:
                self._buf, self._voiced, self._silent = list(self._pre), 1, 0
                self._pre.clear()
                return self._maybe_start()
            return []
        self._buf.append(chunk)
        events: list[VadEvent] = []
        if p >= self.threshold - _HYSTERESIS:
            if self._silent and self._started:
                events.append(VadEvent("resume"))
                self._need = self.min_silence   # what was decided at the pause is stale
            self._voiced += 1
            self._silent = 0
            events += self._maybe_start()
        else:
            self._silent += 1
            if self._silent == 1 and self._started:
                events.append(VadEvent("pause", self._audio()))
            if self._silent >= self._need:
                events += self._finish(cut=False)
                return events
        if len(self._buf) >= self.max_chunks:
            events += self._finish(cut=True)
        return events

    def _maybe_start(self) -> list[VadEvent]:
        if not self._started and self._voiced >= self.min_speech:
            self._started = True
            return [VadEvent("start")]
        return []

    def audio_so_far(self) -> np.ndarray:
        """The segment in progress (empty when there is none)."""
        return self._audio() if self._buf else np.zeros(0, np.float32)

    def _audio(self) -> np.ndarray:
        return np.concatenate(self._buf)

    def _finish(self, cut: bool) -> list[VadEvent]:
        started, audio = self._started, self._audio()
        self._buf, self._voiced, self._silent = [], 0, 0
        self._need = self.min_silence
        self._started = False         # after a cut, the next speech chunk starts the next piece
        return [VadEvent("end", audio, cut=cut)] if started else []
