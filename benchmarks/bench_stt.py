#!/usr/bin/env python3
"""Benchmark: Whisper's encoder window, its words against its time.

faster-whisper pads every line to 30 s before the encoder reads it, so a 2 s question costs
what 30 s of speech would; voice/stt.py reads a line that fits in `WINDOW_S` with that window
instead (a shorter one makes Whisper repeat itself). This times the recogniser on each clip
with each window (`--windows`, seconds; 0 is Whisper's own 30 s, the baseline), interleaved
clip by clip, and scores the words: the word error rate against what was said.

Clips: the spoken loop's questions and its mid-line pauses (benchmarks/bench_voice.py: the
words before the pause alone, as the recogniser meets them at the pause, and the whole line)
in Piper's voice and, where espeak-ng is installed, two of its voices; and real speech: the
13 lines of the recording test/data/voices' clips were cut from (two speakers on a telephone
line, each line as its transcript times it, with 0.2 s either side). The word error rate is
over every pass (`--reps`): Whisper decodes a hard clip again with sampling, so a clip may be
heard differently from pass to pass.

    source env.sh && python benchmarks/bench_stt.py [--windows 0,15] [--reps 2]

Prints a table, the clips whose words differ, and one JSON line (results file bench_stt.json).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO / "test"))       # the voice tests' word error rate and speech

from bench_voice import PAUSE_LINES, QUESTIONS  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path
from vision_dialogue.voice.audio import SAMPLE_RATE, resample  # noqa: E402
from vision_dialogue.voice.stt import Recognizer  # noqa: E402
from voice_samples import silence, speech, word_error_rate, words  # noqa: E402

VOICES = REPO / "test" / "data" / "voices"

ESPEAK_VOICES = ("en-us+m3", "en-gb+f2")
#: the recording the clips of test/data/voices were cut from, and its transcript: each line a
#: clip of real speech (test/data/voices/SOURCES.md)
RECORDING, TRANSCRIPT = VOICES / "sample.flac", VOICES / "sample.stm"
#: seconds of the recording kept before and after each line of its transcript
EDGE_S = 0.2


def spoken(tts, text: str) -> np.ndarray:
    """`tts` saying `text`, with the 0.4 s before it and 0.1 s after that the VAD keeps."""
    return np.concatenate([silence(0.4), speech(tts, text), silence(0.1)])


def clips() -> list[tuple[str, str, np.ndarray]]:
    """(source, what was said, 16 kHz audio) for every clip."""
    import soundfile

    from vision_dialogue.voice.tts import EspeakTTS, PiperTTS, TTSError
    tts = PiperTTS(vary=False)
    out = [("piper", q, spoken(tts, q)) for q in QUESTIONS]
    out += [("piper, at a pause", a, spoken(tts, a)) for a, _, _ in PAUSE_LINES]
    out += [("piper, with a pause", f"{a} {b}",
             np.concatenate([spoken(tts, a), silence(p), spoken(tts, b)]))
            for a, b, p in PAUSE_LINES]
    try:
        out += [(f"espeak-ng {v}", q, spoken(EspeakTTS(v), q))
                for v in ESPEAK_VOICES for q in QUESTIONS]
    except TTSError as e:
        print(f"{e}: Piper and the recordings only")
    audio, rate = soundfile.read(str(RECORDING), dtype="float32")
    audio = resample(audio, rate)
    for line in TRANSCRIPT.read_text().splitlines():    # file channel speaker start end words
        _, _, _, start, end, said = line.split(maxsplit=5)
        first = round((float(start) - EDGE_S) * SAMPLE_RATE)
        last = round((float(end) + EDGE_S) * SAMPLE_RATE)
        out.append(("recorded", said, audio[max(0, first):last]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", default="0,15",
                    help="encoder windows in seconds, comma-separated (0: Whisper's 30 s)")
    ap.add_argument("--reps", type=int, default=2, help="timed passes over the clips")
    a = ap.parse_args(argv)
    windows = [float(w) for w in a.windows.split(",")]
    recognisers = {w: Recognizer(window_s=w) for w in windows}
    data = clips()
    for r in recognisers.values():
        r.transcribe(data[0][2])                       # loaded and warm
    times = {w: [] for w in windows}
    # every pass's words: Whisper decodes a hard clip again with sampling (faster-whisper's
    # temperature fallback), so a clip may be heard differently from pass to pass
    heard: dict[float, list[list[str]]] = {w: [[] for _ in data] for w in windows}
    for rep in range(a.reps):
        for i, (_, _, audio) in enumerate(data):
            order = windows if (i + rep) % 2 == 0 else windows[::-1]
            for w in order:
                result = recognisers[w].transcribe(audio)
                times[w].append(result.seconds)
                heard[w][i].append(result.text)
    sources = sorted({s for s, _, _ in data}, key=[s for s, _, _ in data].index)
    out = {"benchmark": "stt_window", "clips": len(data), "reps": a.reps, "windows": {}}
    print("| window | word error rate | " + " | ".join(sources) + " | time p50 (s) | p95 |")
    print("|---" * (len(sources) + 4) + "|")
    for w in windows:
        def wer(source: str | None = None) -> float:
            said = [(text, h) for i, (s, text, _) in enumerate(data) if source in (None, s)
                    for h in heard[w][i]]
            return round(word_error_rate(*zip(*said)), 3)
        per = {source: wer(source) for source in sources}
        wer_all = wer()
        ts = sorted(times[w])
        p50, p95 = statistics.median(ts), ts[int(0.95 * (len(ts) - 1))]
        name = "30 s (Whisper's)" if w == 0 else f"{w:g} s"
        out["windows"][name] = {"wer": wer_all, "wer_by_source": per, "p50_s": round(p50, 3),
                                "p95_s": round(p95, 3)}
        print(f"| {name} | {wer_all} | " + " | ".join(str(per[s]) for s in sources)
              + f" | {p50:.3f} | {p95:.3f} |")
    differ = [{"said": said, **{f"{w:g}": heard[w][i] for w in windows}}
              for i, (_, said, _) in enumerate(data)
              if len({tuple(words(h)) for w in windows for h in heard[w][i]}) > 1]
    print(f"\n{len(differ)} of {len(data)} clips heard differently (by a window or a pass):")
    for d in differ:
        print("  " + " | ".join(f"{k}: {v!r}" for k, v in d.items()))
    out["heard_differently"] = differ
    print(json.dumps(out))
    record("bench_stt", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
