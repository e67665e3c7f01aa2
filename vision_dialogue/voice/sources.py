"""Where the robot hears from: a microphone, WAV files, or audio chunks from a topic (a bag).

Every source yields CHUNK-sample float32 chunks at SAMPLE_RATE from `chunks(stop)`. File sources
end; the microphone and the topic go on until `stop` is set. A microphone that is missing, busy
or stops delivering raises AudioSourceError, which the backend logs once and retries.

A WAV input is one file, a folder of them (played in name order, each after the robot's reply
to the one before, like a person taking turns) or a sequence file::

    items:                        # or the list alone
      - wav: hello.wav            # relative to the sequence file
        delay: 2.0                # seconds of silence before it
      - wav: question.wav
        wait_for_reply: true      # after the robot answered the one before (or the timeout)
      - wav: interruption.wav
        delay: 0.5
        interrupt: true           # plays over the robot's reply (barge-in)

A sequence file may also answer the robot's own questions (people_node's consent question):
`answers: [{when: "may I remember you", wav: yes.wav}]` plays `yes.wav` as soon as a robot
line that has those words (any case) has ended, before the next item.

Unless `interrupt` is set, an item also waits, after its delay, until the robot is not in the
middle of a reply (a person does not talk over the robot's opening remark); an `interrupt`
item waits, after its delay, until the robot is speaking (there is something to barge into,
however long a loaded machine took to start the reply).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import yaml

from vision_dialogue.speech.script import has_words
from vision_dialogue.voice.audio import CHUNK, SAMPLE_RATE, AudioFileError, read_wav

#: audio_in values that are not file paths
MIC, TOPIC = "mic", "topic"
_SEQUENCE_SUFFIXES = (".yaml", ".yml", ".json")
_ITEM_KEYS = {"wav", "delay", "wait_for_reply", "wait_for_greeting", "interrupt"}
_ANSWER_KEYS = {"when", "wav"}


class AudioSourceError(RuntimeError):
    """The audio input cannot be used now (the message says why and how to fix it)."""


@dataclass(frozen=True)
class WavItem:
    wav: Path
    delay: float = 0.0
    wait_for_reply: bool = False
    interrupt: bool = False
    wait_for_greeting: bool = False     # until the robot has said something (its opening)


@dataclass(frozen=True)
class WavAnswer:
    """What the recorded person answers to a robot line that has `when` in it."""

    when: str
    wav: Path

    def fits(self, robot_line: str) -> bool:
        return has_words(robot_line, self.when)


def load_wav_answers(spec: str | Path) -> list[WavAnswer]:
    """A sequence file's `answers` (none for a file, a folder or a sequence without them)."""
    p = Path(spec).expanduser()
    if not p.is_file() or p.suffix.lower() not in _SEQUENCE_SUFFIXES:
        return []
    data = _sequence(p)
    raw = data.get("answers", []) if isinstance(data, dict) else []
    if not isinstance(raw, list):
        raise AudioFileError(f"{p}: 'answers' must be a list of {{when: words, wav: file}}")
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or set(entry) != _ANSWER_KEYS \
                or not str(entry["when"]).strip():
            raise AudioFileError(f"{p}: answer {i}: expected keys {sorted(_ANSWER_KEYS)}, "
                                 f"got {entry!r}")
        wav = (p.parent / str(entry["wav"])).expanduser()
        if not wav.is_file():
            raise AudioFileError(f"{p}: answer {i}: {wav}: no such file")
        out.append(WavAnswer(str(entry["when"]).strip(), wav))
    return out


def _sequence(p: Path):
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise AudioFileError(f"{p}: cannot read the sequence: {e}") from None


def load_wav_items(spec: str | Path) -> list[WavItem]:
    """The items of a WAV input (file, folder or sequence file); AudioFileError says why not."""
    p = Path(spec).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in (".wav", ".flac", ".ogg"))
        if not files:
            raise AudioFileError(f"{p}: no .wav/.flac/.ogg files in this folder")
        return [WavItem(f, delay=0.0, wait_for_reply=i > 0) for i, f in enumerate(files)]
    if not p.is_file():
        raise AudioFileError(f"{p}: no such file or folder")
    if p.suffix.lower() not in _SEQUENCE_SUFFIXES:
        return [WavItem(p)]
    data = _sequence(p)
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise AudioFileError(f"{p}: expected a non-empty list of {{wav: file}} items")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "wav" not in item or set(item) - _ITEM_KEYS:
            raise AudioFileError(f"{p}: item {i}: expected keys {sorted(_ITEM_KEYS)} with "
                                 f"'wav', got {item!r}")
        wav = (p.parent / str(item["wav"])).expanduser()
        if not wav.is_file():
            raise AudioFileError(f"{p}: item {i}: {wav}: no such file")
        try:
            delay = float(item.get("delay", 0.0))
        except (TypeError, ValueError):
            delay = -1.0
        if not 0.0 <= delay < 3600.0:
            raise AudioFileError(f"{p}: item {i}: delay must be seconds in [0, 3600)")
        out.append(WavItem(wav, delay, bool(item.get("wait_for_reply", False)),
                           bool(item.get("interrupt", False)),
                           bool(item.get("wait_for_greeting", False))))
    return out


class AudioSource(ABC):
    """A source of CHUNK-sample float32 chunks at SAMPLE_RATE."""

    #: the source ends by itself (files); the backend then reports input_finished
    finite = False

    @abstractmethod
    def chunks(self, stop: threading.Event) -> Iterator[np.ndarray]:
        """Yield chunks until the input ends or `stop` is set; AudioSourceError if it fails."""

    def describe(self) -> str:
        return type(self).__name__


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * SAMPLE_RATE)), np.float32)


class WavSource(AudioSource):
    """Plays WAV items as if a microphone heard them, in real time unless `realtime` is off.

    `turn_ready()` tells whether the robot listens again (its reply ended); an item with
    wait_for_reply plays silence until then or until `reply_timeout` seconds passed;
    wait_for_greeting until `has_spoken()` (the robot's opening remark), as long at most.
    `robot_quiet()` tells whether the robot is between replies; every item but an `interrupt`
    one waits for it after its delay; an `interrupt` one waits for `robot_speaking()`. `tail`
    s of silence follow the last item so the last utterance's end is detected. An answer whose
    words are in the robot's latest line (`robot_line()`: lines ended so far, the last one's
    text) plays once that line has ended and the robot's voice stopped, before anything else,
    and the next item waits for the robot's line after the answer (or `reply_timeout`).
    """

    finite = True

    def __init__(self, items: list[WavItem], *, realtime: bool = True,
                 turn_ready: Callable[[], bool] = lambda: True,
                 robot_quiet: Callable[[], bool] = lambda: True,
                 has_spoken: Callable[[], bool] = lambda: True,
                 robot_speaking: Callable[[], bool] = lambda: True, reply_timeout: float = 30.0,
                 tail: float = 1.5, logger: logging.Logger | None = None,
                 answers: list[WavAnswer] = (),
                 robot_line: Callable[[], tuple[int, str]] = lambda: (0, "")):
        self.items, self.realtime, self.turn_ready = items, realtime, turn_ready
        self.answers, self.robot_line, self._lines_seen = list(answers), robot_line, 0
        self.robot_quiet, self.has_spoken = robot_quiet, has_spoken
        self.robot_speaking = robot_speaking
        self.reply_timeout, self.tail = reply_timeout, tail
        self.log = logger or logging.getLogger("vision_dialogue.voice")

    def describe(self) -> str:
        n = len(self.items)
        return f"{n} WAV item{'s' * (n != 1)} ({self.items[0].wav.name}...)" if n > 1 \
            else f"WAV file {self.items[0].wav}"

    def chunks(self, stop: threading.Event) -> Iterator[np.ndarray]:
        clock = _Pacer(self.realtime)
        for item in self.items:
            if item.wait_for_greeting:
                yield from self._silence_until(self.has_spoken, clock, stop)
            if item.wait_for_reply:
                yield from self._silence_until(self.turn_ready, clock, stop)
            yield from clock.play(_silence(item.delay), stop)
            yield from self._silence_until(
                self.robot_speaking if item.interrupt else self.robot_quiet, clock, stop)
            yield from self._answer_due(clock, stop)
            yield from clock.play(read_wav(item.wav, log=self.log), stop)
            if stop.is_set():
                return
        yield from clock.play(_silence(self.tail), stop)

    def _silence_until(self, ready: Callable[[], bool], clock: "_Pacer",
                       stop: threading.Event) -> Iterator[np.ndarray]:
        """Silence until `ready()` or `reply_timeout` s; a live microphone hears silence too."""
        deadline = time.monotonic() + self.reply_timeout
        while not ready() and time.monotonic() < deadline and not stop.is_set():
            yield from self._answer_due(clock, stop)
            yield from clock.play(_silence(CHUNK / SAMPLE_RATE), stop)
            if not self.realtime:
                stop.wait(0.01)     # as fast as possible, but not a busy loop

    def _answer_due(self, clock: "_Pacer", stop: threading.Event) -> Iterator[np.ndarray]:
        """The answer to the robot's latest line, if it asked one of the answers' questions."""
        ended, text = self.robot_line() if self.answers else (0, "")
        if ended <= self._lines_seen:
            return
        self._lines_seen = ended
        answer = next((a for a in self.answers if a.fits(text)), None)
        if answer is not None:          # once its voice has stopped, as a person answers
            yield from self._silence_until(lambda: not self.robot_speaking(), clock, stop)
            self.log.info(f"answering the robot's question with {answer.wav.name}")
            yield from clock.play(read_wav(answer.wav, log=self.log), stop)
            # then the robot's word on the answer ("Thank you! ..."), as a person waits for
            # it: the next item right after would be heard as one utterance with the answer
            yield from self._silence_until(lambda: self.robot_line()[0] > ended, clock, stop)
            self._lines_seen = self.robot_line()[0]


class _Pacer:
    """Cuts audio into chunks, sleeping so they come no faster than real time."""

    def __init__(self, realtime: bool):
        self.realtime, self.t0, self.sent = realtime, time.monotonic(), 0
        self.rest = np.zeros(0, np.float32)

    def play(self, samples: np.ndarray, stop: threading.Event) -> Iterator[np.ndarray]:
        buf = np.concatenate([self.rest, samples])
        n = len(buf) // CHUNK
        for i in range(n):
            if stop.is_set():
                return
            if self.realtime:
                wait = self.t0 + self.sent / SAMPLE_RATE - time.monotonic()
                if wait > 0 and stop.wait(wait):
                    return
            self.sent += CHUNK
            yield buf[i * CHUNK:(i + 1) * CHUNK]
        self.rest = buf[n * CHUNK:]


def load_sounddevice():
    """sounddevice, or AudioSourceError saying what to install."""
    try:
        import sounddevice
    except OSError as e:        # the module imports, PortAudio (a system library) is missing
        raise AudioSourceError(f"PortAudio is missing ({e}); install it: "
                               "sudo apt install libportaudio2") from None
    except ImportError:
        raise AudioSourceError("sounddevice is not installed: pip install -r "
                               "requirements/voice.txt") from None
    return sounddevice


def parse_device(device: str) -> int | str | None:
    """'' -> the system default; '3' -> device index 3; else a name (substring) for PortAudio."""
    device = device.strip()
    if not device:
        return None
    return int(device) if device.isdigit() else device


def list_devices() -> str:
    """The audio devices PortAudio sees (for `speech_node --list-devices`)."""
    sd = load_sounddevice()
    devices = sd.query_devices()
    if len(devices) == 0:
        return "no audio devices found (is a microphone connected? is PulseAudio running?)"
    lines = []
    for i, d in enumerate(devices):
        channels = (("in", d["max_input_channels"]), ("out", d["max_output_channels"]))
        kinds = [k for k, n in channels if n > 0]
        lines.append(f"{i:3d}  {d['name']}  ({'/'.join(kinds)}, "
                     f"{d['default_samplerate']:.0f} Hz)")
    return "\n".join(lines)


class MicSource(AudioSource):
    """A microphone through PortAudio (sounddevice), captured at SAMPLE_RATE, mono."""

    #: no audio for this long from an open stream counts as a failed device
    STALL_S = 2.0

    def __init__(self, device: str = ""):
        self.device = parse_device(device)

    def describe(self) -> str:
        return f"microphone {self.device if self.device is not None else '(default)'}"

    def chunks(self, stop: threading.Event) -> Iterator[np.ndarray]:
        sd = load_sounddevice()
        q: "queue.Queue[np.ndarray]" = queue.Queue(maxsize=200)

        def callback(indata, frames, time_info, status):
            try:
                q.put_nowait(indata[:, 0].copy())
            except queue.Full:      # the reader fell behind by 6 s: drop the oldest
                pass

        try:
            stream = sd.InputStream(samplerate=SAMPLE_RATE, channels=1, dtype="float32",
                                    blocksize=CHUNK, device=self.device, callback=callback)
            stream.start()
        except (sd.PortAudioError, ValueError) as e:
            raise AudioSourceError(f"cannot open {self.describe()}: {e} "
                                   "(speech_node --list-devices lists them)") from None
        try:
            while not stop.is_set():
                try:
                    yield q.get(timeout=self.STALL_S)
                except queue.Empty:
                    raise AudioSourceError(f"{self.describe()} delivered no audio for "
                                           f"{self.STALL_S:g} s") from None
        finally:
            stream.close()


class TopicSource(AudioSource):
    """Audio pushed in by the node from the audio/input topic (a bag being replayed)."""

    def __init__(self):
        self._q: "queue.Queue[np.ndarray]" = queue.Queue()
        self._rest = np.zeros(0, np.float32)

    def describe(self) -> str:
        return "audio chunks from a topic"

    def push(self, samples: np.ndarray) -> None:
        self._q.put(np.asarray(samples, np.float32))

    def chunks(self, stop: threading.Event) -> Iterator[np.ndarray]:
        while not stop.is_set():
            try:
                self._rest = np.concatenate([self._rest, self._q.get(timeout=0.1)])
            except queue.Empty:
                continue
            while len(self._rest) >= CHUNK:
                chunk, self._rest = self._rest[:CHUNK], self._rest[CHUNK:]
                yield chunk
