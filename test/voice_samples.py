"""Helpers of the voice tests: synthesised speech, word error rate, and a backend rig.

Speech comes from the two engines that install offline (Piper's joe voice and espeak-ng), so
the recogniser hears voices it was not tuned on; it is cached per test session.
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np

from vision_dialogue.speech.acknowledgement import Acknowledger
from vision_dialogue.speech.turns import SpeechTurns
from vision_dialogue.voice.audio import SAMPLE_RATE, resample, write_wav
from vision_dialogue.voice.backend import LocalVoiceBackend
from vision_dialogue.voice.build import connect
from vision_dialogue.voice.sinks import WavFolderSink
from vision_dialogue.voice.sources import WavSource, load_wav_items
from vision_dialogue.voice.vad import MIN_SILENCE_S, SpeechSegmenter

SENTENCES = [
    "Hello robot, can you see me?",
    "What colour is the cup on the table?",
    "I am wearing a blue jacket today.",
    "Please tell me what you saw a minute ago.",
    "The cat is sleeping next to the window.",
    "Thank you, that was very helpful.",
]


def words(text: str) -> list[str]:
    text = text.lower().replace("color", "colour")
    return re.findall(r"[a-z0-9']+", text)


def word_error_rate(reference: list[str], hypothesis: list[str]) -> float:
    """Word-level Levenshtein distance over all references / their total word count."""
    errors = total = 0
    for ref, hyp in zip(reference, hypothesis):
        r, h = words(ref), words(hyp)
        d = list(range(len(h) + 1))
        for i in range(1, len(r) + 1):
            prev, d[0] = d[0], i
            for j in range(1, len(h) + 1):
                prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
        errors += d[len(h)]
        total += len(r)
    return errors / max(1, total)


def speech(tts, text: str) -> np.ndarray:
    audio, rate = tts.synthesize(text)
    return resample(audio, rate, SAMPLE_RATE)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


def wav(path: Path, *parts: np.ndarray) -> Path:
    return write_wav(path, np.concatenate(parts), SAMPLE_RATE)


class Rig:
    """A LocalVoiceBackend with SpeechTurns, answering each utterance with `reply(text)`."""

    def __init__(self, audio_in: Path, out_dir: Path, *, recognizer, tts, vad_model,
                 reply=lambda text: "I see a red cup on the table.", realtime=True,
                 reply_delay=0.2, source=None, acknowledge_after=0.0, **backend_kw):
        self.utterances, self.states, self.done = [], [], threading.Event()
        self.partials: list[tuple[float, str]] = []     # (monotonic time, words so far)
        self.source = source or WavSource(load_wav_items(audio_in), realtime=realtime,
                                          reply_timeout=20.0)
        self.sink = WavFolderSink(out_dir, realtime=realtime)
        self.backend = LocalVoiceBackend(
            self.source, self.sink, recognizer=recognizer, tts=tts,
            segmenter=SpeechSegmenter(vad_model,
                                      max_segment_s=backend_kw.pop("max_segment", 20.0),
                                      min_silence_s=backend_kw.pop("min_silence",
                                                                   MIN_SILENCE_S)),
            reply_timeout=20.0, output_stream=open("/dev/null", "w"), **backend_kw)
        connect(self.source, self.backend)       # WAV items wait for the backend's states
        self.turn = 0
        self.reply, self.reply_delay = reply, reply_delay
        self.turns = SpeechTurns(self.backend, publish=self._publish,
                                 on_state=self.states.append,
                                 on_input_finished=self.done.set, reply_timeout=20.0,
                                 on_partial=lambda h: self.partials.append(
                                     (time.monotonic(), h.text)),
                                 acknowledger=Acknowledger(acknowledge_after))

    def _publish(self, heard) -> None:
        self.utterances.append(heard)
        self.turn += 1
        tid = self.turn
        text = self.reply(heard.text)
        if text:
            threading.Timer(self.reply_delay,
                            lambda: self.turns.on_reply(tid, text, True)).start()

    def run(self, timeout: float = 90.0) -> "Rig":
        self.backend.start(self.turns)
        assert self.done.wait(timeout), "the audio input did not finish"
        assert self.turns.wait_idle(30.0)
        time.sleep(0.1)
        self.turns.close()
        return self

    def sentences(self) -> list[dict]:
        import json
        index = self.sink.folder / "sentences.jsonl"
        return [json.loads(x) for x in index.read_text().splitlines()] if index.is_file() \
            else []
