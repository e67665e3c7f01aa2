"""Where the robot's voice goes: the speaker, or one WAV file per sentence in a folder.

`play()` blocks while a sentence is heard (a WAV sink in real time waits as long as the audio
lasts, so turn-taking and barge-in behave as with a speaker) and returns False when `stop()`
cut it short. The sink remembers what it is playing so the backend can predict the echo the
microphone hears (`level_at`).
"""
from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from vision_dialogue.voice.audio import rms, write_wav
from vision_dialogue.voice.sources import AudioSourceError, load_sounddevice, parse_device

#: the window the echo level is measured over, s (one VAD chunk)
ECHO_WINDOW_S = 0.032


class AudioSink(ABC):
    """Plays sentences one at a time; thread-safe `stop()`."""

    def __init__(self):
        self._stop = threading.Event()
        self._playing: tuple[np.ndarray, int, float] | None = None   # samples, rate, start

    @abstractmethod
    def _play(self, samples: np.ndarray, rate: int, text: str) -> bool:
        """Play and block; False when stopped."""

    def describe(self) -> str:
        return type(self).__name__

    def play(self, samples: np.ndarray, rate: int, text: str = "") -> bool:
        self._stop.clear()
        self._playing = (samples, rate, time.monotonic())
        try:
            return self._play(samples, rate, text)
        finally:
            self._playing = None

    def stop(self) -> None:
        self._stop.set()

    @property
    def playing(self) -> bool:
        return self._playing is not None

    def level_at(self, t: float) -> float:
        """RMS of what was being played in the ECHO_WINDOW_S before monotonic time `t`."""
        playing = self._playing
        if playing is None:
            return 0.0
        samples, rate, start = playing
        end = int((t - start) * rate)
        begin = max(0, end - int(ECHO_WINDOW_S * rate))
        return rms(samples[begin:max(begin, min(end, len(samples)))])

    def close(self) -> None:
        self.stop()


class WavFolderSink(AudioSink):
    """Each sentence as NNNN.wav in `folder`, listed with its text in `sentences.jsonl`.

    realtime: play() lasts as long as the audio, and a stop keeps only what was heard.
    """

    def __init__(self, folder: str | Path, realtime: bool = True):
        super().__init__()
        self.folder, self.realtime = Path(folder).expanduser(), realtime
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = len(list(self.folder.glob("[0-9][0-9][0-9][0-9].wav")))

    def describe(self) -> str:
        return f"WAV files in {self.folder}"

    def _play(self, samples: np.ndarray, rate: int, text: str) -> bool:
        duration = len(samples) / rate
        heard = samples
        completed = True
        if self.realtime and self._stop.wait(duration):
            completed = False
            heard = samples[:int((time.monotonic() - self._playing[2]) * rate)]
        self.count += 1
        name = f"{self.count:04d}.wav"
        write_wav(self.folder / name, heard, rate)
        record = {"file": name, "text": text, "seconds": round(len(heard) / rate, 3),
                  "completed": completed}
        with open(self.folder / "sentences.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        return completed


class SpeakerSink(AudioSink):
    """The system's speaker (or `device`) through PortAudio."""

    def __init__(self, device: str = ""):
        super().__init__()
        self.device = parse_device(device)

    def describe(self) -> str:
        return f"speaker {self.device if self.device is not None else '(default)'}"

    def _play(self, samples: np.ndarray, rate: int, text: str) -> bool:
        sd = load_sounddevice()      # AudioSourceError (PortAudio missing): logged by the backend
        try:
            sd.play(samples, rate, device=self.device)
        except (sd.PortAudioError, ValueError) as e:
            raise AudioSourceError(f"cannot play on {self.describe()}: {e}") from None
        end = time.monotonic() + len(samples) / rate + 0.5
        while time.monotonic() < end:
            if self._stop.wait(0.02):
                sd.stop()
                return False
            stream = sd.get_stream()
            if not stream.active:
                break
        return True
