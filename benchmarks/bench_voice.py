#!/usr/bin/env python3
"""Benchmark: the local voice's reply latency, and the real-time factors of STT and TTS.

The latency runs from the end of the user's speech to the first sample of the robot's voice,
split into its parts.

Six questions, synthesised with Piper, play in real time through the local backend (WAV source
-> Silero VAD -> Whisper tiny.en -> utterance -> LLM -> Piper -> WAV sink in real time), each
after the robot's reply to the one before. Two setups, interleaved per question (ABBA):

- ours: recognition starts at the first silent chunk after speech (kept when no speech
  follows), and the reply's first sentence is spoken while the LLM writes the rest;
- sequential: what a voice pipeline does without those two: recognise once the end of speech
  is certain, wait for the whole reply, then speak it (the usual STT -> LLM -> TTS chain).

The LLM is a fake with a fixed time to its first sentence (`--llm-first`, default 0.5 s) and per
further sentence (`--llm-sentence`, 0.4 s), or the embedded default model (`--llm default`).

Parts: vad = end of speech -> end of speech detected (min_silence); stt = detected ->
recognised (what recognition adds after the VAD's wait); llm = recognised -> first sentence
ready; tts = synthesis of the first sentence; total = end of speech -> first audio sample.
The goal: total <= 0.8 s + the LLM's first-sentence time.

Prints a table and one JSON line. Usage: source env.sh && python benchmarks/bench_voice.py
[--reps 2] [--llm fake|default]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vision_dialogue.llm.sentences import split_sentences  # noqa: E402
from vision_dialogue.speech.turns import SpeechTurns  # noqa: E402
from vision_dialogue.voice.audio import SAMPLE_RATE, resample, write_wav  # noqa: E402
from vision_dialogue.voice.backend import LocalVoiceBackend  # noqa: E402
from vision_dialogue.voice.sinks import WavFolderSink  # noqa: E402
from vision_dialogue.voice.sources import WavSource, load_wav_items  # noqa: E402
from vision_dialogue.voice.stt import Recognizer  # noqa: E402
from vision_dialogue.voice.tts import EspeakTTS, PiperTTS  # noqa: E402
from vision_dialogue.voice.vad import SpeechSegmenter, load_vad_model  # noqa: E402

QUESTIONS = ["Hello robot, can you see me?", "What colour is my jacket?",
             "Is there a cup on the table?", "What did you see a minute ago?",
             "Do you like cats?", "Thank you, goodbye!"]
REPLY = "I can see you in front of me. You wear a blue jacket. It looks warm and cosy."
SETUPS = ("ours", "sequential")


class FakeLLM:
    """Answers after `first` s with the first sentence, then one sentence per `each` s."""

    name = "fake"

    def __init__(self, first: float, each: float):
        self.first, self.each = first, each

    def sentences(self, question: str):
        for i, s in enumerate(split_sentences(REPLY)):
            time.sleep(self.first if i == 0 else self.each)
            yield s


class DefaultLLM:
    """The embedded default model, streaming (what the demo runs)."""

    name = "default"

    def __init__(self):
        from vision_dialogue.llm.factory import make_backend
        self.backend = make_backend("transformers", model="default")
        self.system = ("You are a friendly robot talking with a visitor. Answer in one or two "
                       "short sentences.")
        list(self.sentences("Hello."))        # warm-up

    def sentences(self, question: str):
        msgs = [{"role": "system", "content": self.system}, {"role": "user", "content": question}]
        yield from self.backend.stream(msgs, max_tokens=40)


def run_setup(setup: str, wav: Path, parts: dict, llm, out: Path) -> dict:
    """One question through the backend; the turn's timings."""
    source = WavSource(load_wav_items(wav), realtime=True, reply_timeout=30.0)
    sink = WavFolderSink(out, realtime=True)
    backend = LocalVoiceBackend(source, sink, recognizer=parts["stt"], tts=parts["tts"],
                                segmenter=SpeechSegmenter(parts["vad"]), reply_timeout=30.0,
                                early_recognition=setup == "ours",
                                output_stream=open("/dev/null", "w"))
    source.turn_ready, source.robot_quiet = backend.turn_ready, backend.robot_quiet
    done = threading.Event()
    llm_first: list[float] = []

    def answer(tid: int, text: str) -> None:
        said = []
        for s in llm.sentences(text):
            if not llm_first:
                llm_first.append(time.monotonic())
            said.append(s)
            if setup == "ours":
                turns.on_reply(tid, s, False)
        if setup != "ours":
            llm_first[0] = time.monotonic()       # the reply is usable once it is whole
        turns.on_reply(tid, " ".join(said), True)

    turns = SpeechTurns(backend, publish=lambda h: threading.Thread(
        target=answer, args=(1, h.text), daemon=True).start(),
        on_input_finished=done.set, reply_timeout=30.0)
    backend.start(turns)
    done.wait(60.0)
    turns.wait_idle(30.0)
    turns.close()
    t = backend.timings[0]
    return {"vad": t["vad_end"] - t["speech_end"], "stt": t["recognised"] - t["vad_end"],
            "llm": llm_first[0] - t["recognised"], "tts": t["tts_s"],
            "total": t["first_audio"] - t["speech_end"], "stt_compute": t["stt_s"],
            "text": t["text"]}


def rtf(parts: dict, espeak) -> dict:
    """Real-time factors (compute time / audio time) of STT and of each TTS engine."""
    out = {"stt": [], "piper": [], "espeak-ng": []}
    for q in QUESTIONS:
        for name, tts in (("piper", parts["tts"]), ("espeak-ng", espeak)):
            t0 = time.perf_counter()
            audio, rate = tts.synthesize(q)
            out[name].append((time.perf_counter() - t0) / (len(audio) / rate))
        audio = resample(*parts["tts"].synthesize(q))
        r = parts["stt"].transcribe(audio)
        out["stt"].append(r.seconds / (len(audio) / SAMPLE_RATE))
    return {k: statistics.median(v) for k, v in out.items() if v}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2, help="passes over the questions")
    ap.add_argument("--llm", choices=("fake", "default"), default="fake")
    ap.add_argument("--llm-first", type=float, default=0.5)
    ap.add_argument("--llm-sentence", type=float, default=0.4)
    args = ap.parse_args()
    parts = {"stt": Recognizer(), "tts": PiperTTS(), "vad": load_vad_model()}
    llm = FakeLLM(args.llm_first, args.llm_sentence) if args.llm == "fake" else DefaultLLM()
    tmp = Path(tempfile.mkdtemp(prefix="bench_voice_"))
    wavs = []
    for i, q in enumerate(QUESTIONS):
        audio, rate = parts["tts"].synthesize(q)
        wavs.append(write_wav(tmp / f"q{i}.wav", np.concatenate(
            [np.zeros(SAMPLE_RATE // 2, np.float32), resample(audio, rate)]), SAMPLE_RATE))
    rows: dict[str, list[dict]] = {s: [] for s in SETUPS}
    for rep in range(args.reps):
        for i, wav in enumerate(wavs):
            order = SETUPS if (rep * len(wavs) + i) % 2 == 0 else SETUPS[::-1]   # ABBA
            for setup in order:
                rows[setup].append(run_setup(setup, wav, parts, llm, tmp / f"out_{setup}"))
    factors = rtf(parts, EspeakTTS())
    keys = ("vad", "stt", "llm", "tts", "total")
    summary = {s: {k: round(statistics.median(r[k] for r in rows[s]), 3) for k in keys}
               | {"p95_total": round(float(np.percentile([r["total"] for r in rows[s]], 95)),
                                     3), "n": len(rows[s])} for s in SETUPS}
    for s in SETUPS:
        summary[s]["total_minus_llm"] = round(summary[s]["total"] - summary[s]["llm"], 3)
    print(f"\nvoice latency, end of speech -> first robot audio (median of {args.reps} x "
          f"{len(QUESTIONS)} questions, LLM: {llm.name}; seconds)")
    print(f"{'setup':<11}" + "".join(f"{k:>8}" for k in keys) + f"{'p95':>8}{'-llm':>8}")
    for s in SETUPS:
        m = summary[s]
        print(f"{s:<11}" + "".join(f"{m[k]:8.2f}" for k in keys)
              + f"{m['p95_total']:8.2f}{m['total_minus_llm']:8.2f}")
    print("\nreal-time factor (compute / audio, median): "
          + ", ".join(f"{k} {v:.3f}" for k, v in factors.items()))
    goal = summary["ours"]["total_minus_llm"] <= 0.8
    print(f"goal (total - llm <= 0.8 s): {'met' if goal else 'NOT met'}")
    print(json.dumps({"benchmark": "voice", "llm": llm.name, "summary": summary,
                      "rtf": {k: round(v, 4) for k, v in factors.items()}, "goal_met": goal}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
