"""Audio as the voice room passes it around: mono float32 in [-1, 1] at one sample rate.

One definition of the rate and chunk size every part uses (Silero VAD reads 512-sample
windows at 16 kHz; Whisper reads 16 kHz), WAV reading that accepts what users have (any rate,
stereo, 8/16/24/32-bit, float) and says what it converted, and the PCM16 bytes of the
AudioChunk message.
"""
from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path

import numpy as np

#: the rate of everything between the microphone and the recogniser
SAMPLE_RATE = 16000
#: samples per chunk: Silero VAD's window at 16 kHz (32 ms)
CHUNK = 512
#: the encoding of AudioChunk.data
PCM16 = "S16LE"


class AudioFileError(ValueError):
    """A WAV file that cannot be read (the message names the file)."""


def resample(samples: np.ndarray, rate: int, to_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Polyphase resampling (scipy), so 44.1/48 kHz files and 22.05 kHz voices fit 16 kHz."""
    if rate == to_rate or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    from scipy.signal import resample_poly
    ratio = Fraction(to_rate, rate).limit_denominator(1000)
    return resample_poly(samples, ratio.numerator, ratio.denominator).astype(np.float32)


def read_wav(path: str | Path, rate: int = SAMPLE_RATE,
             log: logging.Logger | None = None) -> np.ndarray:
    """Samples of a sound file as mono float32 at `rate`; conversions are logged once."""
    import soundfile as sf
    p = Path(path)
    try:
        data, file_rate = sf.read(str(p), dtype="float32", always_2d=True)
    except (OSError, RuntimeError, sf.LibsndfileError) as e:
        raise AudioFileError(f"{p}: not a readable sound file ({e})") from None
    changes = []
    if data.shape[1] > 1:
        changes.append(f"{data.shape[1]} channels mixed to mono")
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if file_rate != rate:
        changes.append(f"resampled from {file_rate} Hz to {rate} Hz")
        mono = resample(mono, file_rate, rate)
    if changes and log is not None:
        log.info(f"{p.name}: " + ", ".join(changes))
    return np.clip(mono, -1.0, 1.0).astype(np.float32, copy=False)


def write_wav(path: str | Path, samples: np.ndarray, rate: int) -> Path:
    """Write mono float32 samples as 16-bit PCM WAV."""
    import soundfile as sf
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(p), np.clip(samples, -1.0, 1.0), rate, subtype="PCM_16")
    return p


def to_pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


def from_pcm16(data: bytes) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<i2").astype(np.float32) / 32768.0


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
