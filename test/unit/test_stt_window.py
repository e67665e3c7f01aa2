"""Whisper's encoder reads a window that fits the line, not 30 s of padding (voice/stt.py)."""
from __future__ import annotations

import sys
import threading
import time
import types

import numpy as np
import pytest

from vision_dialogue.voice import stt
from vision_dialogue.voice.audio import SAMPLE_RATE


class FakeWhisper:
    """faster-whisper's WhisperModel as Recognizer uses it: transcribe pads to 30 s, encodes."""

    def __init__(self, *_args, **_kwargs):
        self.model = types.SimpleNamespace(is_multilingual=False)
        self.encoded: list[int] = []

    def encode(self, features):
        self.encoded.append(features.shape[-1])
        return features

    def transcribe(self, samples, **_kwargs):
        padded = np.zeros((80, 3000), np.float32)         # faster-whisper's pad_or_trim
        time.sleep(0.001)                # the features take a while: another line may start
        encoded = self.encode(padded)

        def segments():                                    # decoded lazily, as the real one
            yield types.SimpleNamespace(text=f"{len(samples)} {encoded.shape[-1]}",
                                        no_speech_prob=0.0, avg_logprob=-0.1)
        return segments(), types.SimpleNamespace(language="en")


@pytest.fixture
def recognizer_with(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "faster_whisper",
                        types.SimpleNamespace(WhisperModel=FakeWhisper))
    (tmp_path / "model.bin").write_bytes(b"")

    def make(**kwargs) -> stt.Recognizer:
        return stt.Recognizer(str(tmp_path), **kwargs)
    return make


def seconds(s: float) -> np.ndarray:
    return np.zeros(int(s * SAMPLE_RATE), np.float32)


def test_a_short_line_is_encoded_in_the_window_and_a_long_one_in_30_s(recognizer_with):
    r = recognizer_with()
    assert r.transcribe(seconds(2.0)).text.split()[1] == str(int(stt.WINDOW_S * 100))
    long = stt.WINDOW_S - stt.WINDOW_MARGIN_S + 0.5      # no room left after it
    assert r.transcribe(seconds(long)).text.split()[1] == "3000"
    assert recognizer_with(window_s=0).transcribe(seconds(2.0)).text.split()[1] == "3000"


def test_two_threads_at_once_each_encode_their_own_lines_window(recognizer_with):
    r = recognizer_with(window_s=10)
    both = threading.Barrier(2)
    heard: dict[str, set] = {"short": set(), "long": set()}

    def hear(name: str, s: float) -> None:
        both.wait(timeout=10)
        for _ in range(50):
            heard[name].add(r.transcribe(seconds(s)).text.split()[1])
    threads = [threading.Thread(target=hear, args=("short", 2.0)),
               threading.Thread(target=hear, args=("long", 12.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert heard == {"short": {"1000"}, "long": {"3000"}}


def test_a_window_past_whispers_own_is_a_clear_error(recognizer_with):
    with pytest.raises(ValueError, match="stt window 31"):
        recognizer_with(window_s=31)
