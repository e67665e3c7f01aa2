#!/usr/bin/env python3
"""Benchmark: the spoken loop, end of the person's speech to the robot's first sound.

Questions synthesised with Piper play in real time through the local voice backend (WAV
source -> Silero VAD -> Whisper tiny.en -> the conversation -> Piper -> WAV sink in real time)
while a camera thread gives the conversation a demo-video frame every 5 s (observed,
summarised), as in a session. Two setups take turns in that one conversation, on one LLM, so
both meet the same prompt and the same load: question i goes to one setup and question i+1 to
the other, in the order A B B A (each pass starts a new conversation and gives every question
to the other setup than the pass before):

- now: the end of a turn decided by its words, judged by the embedded 0.5B
  (voice/turn_model.py, as voice_demo ships; `--turn-judge rules`: turn_end.py's rules); the
  speech so far recognised every `--read-ahead` S seconds (the speech node's `partial_every`
  by default; 0: none) and read by the LLM while the person speaks (partial lines ->
  Conversation.hear_ahead);
  The reply's first clause is spoken while the model writes the rest (llm/sentences.py).
- before: the previous design: a fixed 0.5 s of silence ends a turn, recognition begun at the
  first silent chunk, the reply's first sentence spoken while the rest is written.

Parts, medians and p95 in seconds: vad = end of speech -> end of turn decided; stt = decided ->
recognised; llm = recognised -> first sentence; tts = its synthesis; total = end of speech ->
first audio sample. The goal (issue 32): total p50 <= 1.0 s, p95 <= 1.6 s.

Cut-offs: lines with a pause of 0.4-1.2 s in the middle; a line is cut off when a turn ends
at its pause (the robot would start answering half a question). Both end-pointers hear the same
audio. Barge-in: the person speaks over a long reply 1.0, 1.8 and 2.6 s into it; the time from
their first sound to the robot's voice stopping.

    source env.sh && python benchmarks/bench_voice.py     # voice_demo's model (default:auto)
    python benchmarks/bench_voice.py --model default:1.5b   # the 1.5B wherever it runs
    python benchmarks/bench_voice.py --model default --reps 2 --busy 1   # the 0.5B, loaded
    python benchmarks/bench_voice.py --against unread --no-pauses   # the line read at a pause
    python benchmarks/bench_voice.py --against silent   # partial lines while the person speaks
    python benchmarks/bench_voice.py --against unkept --no-pauses   # "Yes," made ahead
    python benchmarks/bench_voice.py --against full --no-pauses   # Whisper's 30 s window
    python benchmarks/bench_voice.py --no-pauses --first-clause 4   # the first clause as before

`--llm fake` replaces the LLM with fixed delays (a quick look at the voice side alone). Prints
a table and one JSON line.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from vision_dialogue.llm import sentences  # noqa: E402
from vision_dialogue.speech.acknowledgement import Acknowledger  # noqa: E402
from vision_dialogue.speech.turns import SpeechTurns  # noqa: E402
from vision_dialogue.voice.audio import SAMPLE_RATE, resample, write_wav  # noqa: E402
from vision_dialogue.voice.backend import LocalVoiceBackend  # noqa: E402
from vision_dialogue.voice.sinks import WavFolderSink  # noqa: E402
from vision_dialogue.voice.sources import WavSource, load_wav_items  # noqa: E402
from vision_dialogue.voice.stt import Recognizer  # noqa: E402
from vision_dialogue.voice.tts import KeptPhrases, PiperTTS  # noqa: E402
from vision_dialogue.voice.turn_end import (PARTIAL_AT_PAUSE, PARTIAL_EVERY_S,  # noqa: E402
                                            QUICK_SILENCE_S, TURN_JUDGES, turn_end)
from vision_dialogue.voice.vad import SpeechSegmenter, load_vad_model  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

QUESTIONS = ["Hello robot, can you see me?", "What colour is the cup on the table?",
             "Is there anyone else in the room?", "What did you see a minute ago?",
             "Do you like the pictures on the wall?", "Can you tell me what I am holding?",
             "What is the weather like where you come from?", "How many chairs can you see?",
             "What am I wearing today?", "Do you remember my name?",
             "Is the door open or closed?", "What would you like to do this afternoon?",
             "Can you describe the room for me?", "Did anything change since I came in?",
             "What is your favourite colour?", "Thank you, goodbye!"]
"""A session's questions, each asked once per conversation: the setups take them in turn
(ABBA), so that no setup meets a question the robot has just answered (a repeat the reply
filter asks again for)."""
#: (words before the pause, words after it, pause in seconds): a person thinking mid-line
PAUSE_LINES = [("I was wondering if", "you could see my cup.", 0.6),
               ("What colour is", "the jacket I am wearing?", 0.8),
               ("Yesterday I went to the", "park with my dog.", 1.0),
               ("Can you tell me,", "what is on the table?", 0.5),
               ("My name is Anna and", "I work here.", 0.7),
               ("So the thing is,", "I lost my keys.", 1.2),
               ("Do you see the", "red book?", 0.4),
               ("I think that", "you are a nice robot.", 0.9),
               ("Hello robot.", "Can you hear me?", 0.6),
               ("I like cats.", "Do you?", 0.8)]


@dataclass
class Setup:
    """One way the spoken loop may run: its end-pointer's settings and its reply's."""

    voice: dict                  # LocalVoiceBackend's settings (the end of a turn, partials)
    first_clause: int            # words from which the first clause is spoken alone (0: none)
    hold: bool                   # frame summaries wait while the person speaks
    acknowledger: Acknowledger   # a late reply's "Let me see." (one per setup: never twice)
    reads_ahead: bool = True     # the LLM reads the partial lines (Conversation.hear_ahead)
    keeps_phrases: bool = True   # the voice keeps short phrases, the openings made ahead
    recognizer: str = "stt"      # its recogniser in `parts`: "stt_full" reads Whisper's 30 s


SETUPS = {"now": Setup(dict(ends_by_meaning=True, partial_every=PARTIAL_EVERY_S,
                            partial_at_pause=PARTIAL_AT_PAUSE),
                       sentences.FIRST_CLAUSE_WORDS, True, Acknowledger(1.0)),
          "before": Setup(dict(ends_by_meaning=False, partial_every=0.0,
                               partial_at_pause=False), 0, False, Acknowledger(0.0),
                          reads_ahead=False),
          "unread": Setup(dict(ends_by_meaning=True, partial_every=PARTIAL_EVERY_S,
                               partial_at_pause=False),
                          sentences.FIRST_CLAUSE_WORDS, True, Acknowledger(1.0)),
          "silent": Setup(dict(ends_by_meaning=True, partial_every=0.0,
                               partial_at_pause=PARTIAL_AT_PAUSE),
                          sentences.FIRST_CLAUSE_WORDS, True, Acknowledger(1.0)),
          "unkept": Setup(dict(ends_by_meaning=True, partial_every=PARTIAL_EVERY_S,
                               partial_at_pause=PARTIAL_AT_PAUSE),
                          sentences.FIRST_CLAUSE_WORDS, True, Acknowledger(1.0),
                          keeps_phrases=False),
          "full": Setup(dict(ends_by_meaning=True, partial_every=PARTIAL_EVERY_S,
                             partial_at_pause=PARTIAL_AT_PAUSE),
                        sentences.FIRST_CLAUSE_WORDS, True, Acknowledger(1.0),
                        recognizer="stt_full")}
"""The setups a run may compare (`--against`): "unread" is "now" without the line read at
the pause (the design of the round before); "silent" is "now" without partial lines while
the person speaks, whatever `--read-ahead` gives "now"; "unkept" is "now" with every phrase
synthesised when said ("Yes," too: voice/tts.py KeptPhrases keeping nothing); "full" is
"now" with Whisper's encoder reading its whole 30 s window (voice/stt.py WINDOW_S). "now"
acknowledges a late reply 1.0 s after the line is heard, as the voice setup ships."""
FRAME_PERIOD_S = 5.0


def model_judge():
    """The embedded 0.5B judging the words at a pause (voice/turn_model.py), loaded once."""
    if not hasattr(model_judge, "judge"):
        from vision_dialogue.voice.turn_model import ModelTurnJudge
        model_judge.judge = ModelTurnJudge.embedded()
    return model_judge.judge


JUDGES = {"rules": lambda: turn_end, "model": model_judge}
"""What may judge the words at a pause, made when asked for."""


class FakeLLM:
    """Answers after `first` s with a first sentence, then the rest after `each` s."""

    def __init__(self, first: float, each: float):
        self.first, self.each = first, each

    def turn(self, text, on_sentence, **_):
        time.sleep(self.first)
        on_sentence("I can see you in front of me.", 0)
        time.sleep(self.each)
        on_sentence("You wear a blue jacket.", 1)

    def hear_ahead(self, *_):
        pass

    def add_frame(self, *_a, **_k):
        pass

    def close(self, **_):
        pass


def conversation(args, observer):
    """A conversation on its own LLM (the embedded default, as the manager makes it)."""
    if args.llm == "fake":
        return FakeLLM(args.llm_first, args.llm_sentence)
    from bench_dialogue import DEMO_MANAGER
    from vision_dialogue.core.conversation import Conversation, ConversationConfig
    from vision_dialogue.core.persona import load_persona
    from vision_dialogue.llm.factory import make_backend, measured_focus_note
    backend = make_backend("llamacpp", model=args.model,
                           max_new_tokens=DEMO_MANAGER["max_reply_tokens"])
    return Conversation(backend, load_persona(), ConversationConfig(
        **DEMO_MANAGER, focus_note=measured_focus_note("llamacpp", args.model)),
        observer=observer)


def voice(setup: str, wav: Path, parts: dict, out: Path, **kw) -> LocalVoiceBackend:
    source = WavSource(load_wav_items(wav), realtime=True, reply_timeout=kw.pop("wait", 30.0))
    kept = parts["kept"] if SETUPS[setup].keeps_phrases else parts["unkept"]
    backend = LocalVoiceBackend(source, WavFolderSink(out, realtime=True),
                                recognizer=parts[SETUPS[setup].recognizer], tts=kept,
                                segmenter=SpeechSegmenter(parts["vad"]), reply_timeout=30.0,
                                output_stream=open(os.devnull, "w"),
                                **{**SETUPS[setup].voice, **kw})
    source.turn_ready, source.robot_quiet = backend.turn_ready, backend.robot_quiet
    return backend


def ask(setup: str, wav: Path, parts: dict, conv, out: Path) -> dict:
    """One question through the voice loop and `conv`; the turn's timings."""
    sentences.FIRST_CLAUSE_WORDS = SETUPS[setup].first_clause
    backend = voice(setup, wav, parts, out)
    done, first = threading.Event(), []          # (when, text) of the reply's first piece

    def answer(text: str) -> None:
        def said(sentence, index, fallback=False):
            if not first:
                first.append((time.monotonic(), sentence))
            turns.on_reply(1, sentence, False)
        result = conv.turn(text, on_sentence=said, deadline=time.monotonic() + 15.0)
        turns.on_reply(1, getattr(result, "text", ""), True)

    answering: list[threading.Thread] = []

    partials: list[float] = []          # when each partial line came, before the line
    line_at: list[float] = []

    def publish(heard) -> None:
        line_at.append(time.monotonic())
        answering.append(threading.Thread(target=answer, args=(heard.text,), daemon=True))
        answering[-1].start()

    def read_ahead(heard) -> None:
        if not line_at:
            partials.append(time.monotonic())
        if SETUPS[setup].reads_ahead:
            conv.hear_ahead(heard.text)
    hearing = getattr(conv, "hearing", None) if SETUPS[setup].hold else None
    turns = SpeechTurns(backend, publish=publish, on_partial=read_ahead,
                        on_speaking=hearing or (lambda on: None),
                        on_input_finished=done.set, reply_timeout=30.0,
                        acknowledger=SETUPS[setup].acknowledger)
    backend.start(turns)
    done.wait(60.0)
    for thread in answering:       # the whole reply, as a person waits for it to be said
        thread.join(60.0)
    turns.wait_idle(30.0)
    turns.close()
    backend.close()
    t = backend.timings[0]
    llm = getattr(conv, "backend", None)
    first_at, first_piece = first[0]
    rt = getattr(llm, "reply_times", {})
    return {"prompt": rt.get("asked", 0) - t["recognised"],
            "wait": rt.get("free", 0) - rt.get("asked", 0),
            "read": rt.get("first_token", 0) - rt.get("free", 0),
            "decode": (first_at - rt["first_token"]) if "first_token" in rt else 0,
            "vad": t["vad_end"] - t["speech_end"], "stt": t["recognised"] - t["vad_end"],
            "llm": first_at - t["recognised"], "tts": t["tts_s"], "first_piece": first_piece,
            "total": t["first_audio"] - t["speech_end"], "text": t["text"],
            "heard": min(t["first_audio"], t.get("ack_audio", 1e18)) - t["speech_end"],
            # the read-ahead's time: from the last partial line to the line (None: no partial)
            "partial_to_line": line_at[0] - partials[-1] if partials and line_at else None,
            "acked": "ack_audio" in t,
            "rule": t["end_rule"],
            "reused": f"{getattr(llm, 'reused_tokens', 0)}/{getattr(llm, 'prompt_tokens', 0)}",
            "threads": getattr(getattr(llm, "cpu", None), "last", 0)}


class Heard:
    """SpeechEvents that write down what was heard and end each turn at once (no reply)."""

    def __init__(self):
        self.lines, self.finished, self.backend = [], threading.Event(), None

    def utterance(self, text, *_a, **_k):
        self.lines.append(text)
        threading.Thread(target=self.backend.end_reply, args=("",), daemon=True).start()

    def listening(self):
        pass

    def unavailable(self):
        pass

    def input_finished(self):
        self.finished.set()


def cut_offs(setup: str, wavs: list[Path], parts: dict, out: Path, **kw) -> list[dict]:
    """Each pause line through the setup's end-pointer: cut off when heard as two turns."""
    rows = []
    for wav in wavs:
        backend, heard = voice(setup, wav, parts, out, wait=1.0, barge_in=True, **kw), Heard()
        heard.backend = backend
        backend.start(heard)
        heard.finished.wait(60.0)
        backend.close()
        rows.append({"cut": len(heard.lines) > 1, "heard": heard.lines})
    return rows


STORY = ("Once upon a time there was a small robot. It lived in a quiet house by the sea. "
         "Every morning it looked at the waves and counted the boats. Then it went inside.")
BARGE_DELAYS = (1.0, 1.8, 2.6)
"""Seconds into the robot's story at which the person speaks over it."""


class Storyteller(Heard):
    """Answers the first line with a long story said in real time, the next one briefly."""

    def utterance(self, text, *_a, **_k):
        self.lines.append(text)
        reply = STORY if len(self.lines) == 1 else "Yes?"
        threading.Thread(target=self._say, args=(reply,), daemon=True).start()

    def _say(self, reply: str) -> None:
        self.backend.begin_reply()
        for sentence in sentences.split_sentences(reply):
            if not self.backend.speak(sentence):
                break
        self.backend.end_reply(reply)


class Onset:
    """The first chunk with the person's voice while the robot speaks (monotonic time)."""

    def __init__(self, inner, in_reply: threading.Event):
        self.inner, self.in_reply, self.at = inner, in_reply, None

    def chunks(self, stop):
        for chunk in self.inner.chunks(stop):
            if self.at is None and self.in_reply.is_set() and \
                    float(np.sqrt(np.mean(chunk * chunk))) > 0.01:
                self.at = time.monotonic()
            yield chunk

    def __getattr__(self, name):
        return getattr(self.inner, name)


def barge_in_stops(parts: dict, tmp: Path) -> list[float]:
    """Seconds from the person's first sound over the robot's story to its voice stopping."""
    silence = np.zeros(SAMPLE_RATE // 2, np.float32)
    ask = write_wav(tmp / "story.wav", np.concatenate(
        [silence, resample(*parts["tts"].synthesize("Tell me a long story please."))]),
        SAMPLE_RATE)
    stop_wav = write_wav(tmp / "stop.wav", resample(*parts["tts"].synthesize(
        "Stop, what colour is the cup?")), SAMPLE_RATE)
    out = []
    for delay in BARGE_DELAYS:
        seq = tmp / f"barge_{delay}.yaml"
        seq.write_text(f"- wav: {ask.name}\n- wav: {stop_wav.name}\n  delay: {delay}\n"
                       "  interrupt: true\n")
        backend, heard = voice("now", seq, parts, tmp / "barge", barge_in=True), Storyteller()
        source = backend.source = Onset(backend.source, backend._in_reply)
        stopped = []
        sink_stop = backend.sink.stop
        backend.sink.stop = lambda: (stopped.append(time.monotonic()), sink_stop())
        heard.backend = backend
        backend.start(heard)
        heard.finished.wait(60.0)
        backend.close()
        if stopped and source.at is not None:
            out.append(stopped[0] - source.at)
        else:
            print(f"  barge-in at {delay} s: not heard ({heard.lines})", flush=True)
    return out


def synthesise(parts: dict, tmp: Path) -> tuple[list[Path], list[Path]]:
    silence = np.zeros(SAMPLE_RATE // 2, np.float32)

    def say(text):
        return resample(*parts["tts"].synthesize(text))
    questions = [write_wav(tmp / f"q{i}.wav", np.concatenate([silence, say(q)]), SAMPLE_RATE)
                 for i, q in enumerate(QUESTIONS)]
    paused = [write_wav(tmp / f"p{i}.wav", np.concatenate(
        [silence, say(a), np.zeros(int(pause * SAMPLE_RATE), np.float32), say(b), silence]),
        SAMPLE_RATE) for i, (a, b, pause) in enumerate(PAUSE_LINES)]
    return questions, paused


def camera(conv, stop: threading.Event, wait_for_turns: bool = False) -> None:
    """A demo-video frame every FRAME_PERIOD_S to the conversation.

    wait_for_turns: a frame that comes during a turn waits for its end (an experiment: what a
    budget of the cores while a turn is answered would give).
    """
    from bench_dialogue import demo_video
    frames, manifest = demo_video()
    t0 = time.monotonic()
    while not stop.is_set():
        frame = frames[int((time.monotonic() - t0) * manifest["fps"]) % len(frames)]
        if wait_for_turns:
            conv._no_turn.wait(30.0)
        conv.add_frame(frame)
        stop.wait(FRAME_PERIOD_S)


def session(args, observer, rep: int, questions: list[Path], parts: dict, tmp: Path,
            rows: dict[str, list[dict]]) -> None:
    """One pass: a new conversation with the camera on, the questions shared ABBA."""
    conv = conversation(args, observer)
    stop = threading.Event()
    cam = threading.Thread(target=camera, args=(conv, stop, args.frames_wait_for_turns),
                           daemon=True)
    cam.start()
    names = list(rows)
    warm = getattr(getattr(conv, "backend", None), "warm", None)
    if warm is not None:          # on for a while before the person speaks: the prompt is read
        while not len(conv.timeline):
            stop.wait(0.1)
        warm(conv.prompt.reply_messages())
    try:
        for i, wav in enumerate(questions):
            s = names[((i + 1) // 2 + rep) % 2]           # A B B A A B B A ..., swapped per pass
            rows[s].append(ask(s, wav, parts, conv, tmp / f"out_{s}"))
            r = rows[s][-1]
            r["turn"] = (i + 2) // 2          # the setup's own turns in this session: 1..8
            acked = f" (acknowledged at {r['heard']:.2f})" if r["acked"] else ""
            print(f"  {s:<7} {r['total']:5.2f} s{acked} (vad {r['vad']:.2f} stt "
                  f"{r['stt']:.2f} llm {r['llm']:.2f} tts {r['tts']:.2f} for "
                  f"{r['first_piece']!r}) [{r['rule']}] {r['reused']} reused, "
                  f"{r['threads']} threads "
                  + " ".join(f"{k} {r[k]:.2f}" for k in ("prompt", "wait", "read", "decode"))
                  + f" {r['text']!r}", flush=True)
    finally:
        stop.set()
        cam.join(10.0)
        conv.close(timeout=1.0)


def pct(xs, q: float) -> float:
    return round(float(np.percentile(xs, q)), 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1, help="passes over the questions")
    ap.add_argument("--llm", choices=("local", "fake"), default="local")
    ap.add_argument("--model", default="default:auto",
                    help="the embedded model on llama.cpp (default:auto, what voice_demo ships: "
                    "the 1.5B where a start-up measurement finds it fast enough, else the 0.5B; "
                    "default:1.5b, what the text demo ships; default: the 0.5B)")
    ap.add_argument("--llm-first", type=float, default=0.5)
    ap.add_argument("--llm-sentence", type=float, default=0.4)
    ap.add_argument("--busy", type=int, default=0, help="other busy processes meanwhile")
    ap.add_argument("--no-pauses", action="store_true", help="skip the cut-off lines")
    ap.add_argument("--pauses-only", action="store_true", help="only the cut-off lines")
    ap.add_argument("--frames-wait-for-turns", action="store_true",
                    help="a frame that comes during a turn waits for its end (experiment)")
    ap.add_argument("--acknowledge-after", type=float, default=1.0,
                    help="'now' acknowledges a reply S s after the line is heard (0: never; "
                    "1.0 ships)")
    ap.add_argument("--read-ahead", type=float, default=PARTIAL_EVERY_S,
                    help="'now' publishes partial lines every S s of speech and reads them "
                    f"ahead (0: none; {PARTIAL_EVERY_S} ships)")
    ap.add_argument("--turn-judge", choices=TURN_JUDGES, default="model",
                    help="what judges the words at a pause in 'now' (model: as voice_demo "
                    "ships; the cut-offs are also counted with the other judge)")
    ap.add_argument("--against", choices=("before", "unread", "silent", "unkept", "full"),
                    default="before",
                    help="the setup 'now' is compared with: the previous design, 'now' "
                    "without the line read at the pause, 'now' without partial lines "
                    "while the person speaks, 'now' with no phrase kept, or 'now' with "
                    "Whisper reading its whole 30 s window")
    ap.add_argument("--quick-silence", type=float, default=QUICK_SILENCE_S,
                    help="'now': silence that ends a line judged complete, s")
    ap.add_argument("--first-clause", type=int, default=sentences.FIRST_CLAUSE_WORDS,
                    metavar="WORDS", help="'now': words from which the reply's first clause "
                    "is spoken on its own (0: whole sentences; "
                    f"{sentences.FIRST_CLAUSE_WORDS} ships)")
    args = ap.parse_args()
    asked = args.model
    if args.llm == "local":         # default:auto: chosen as the manager chooses it, and said
        from vision_dialogue.llm import model_choice
        said = logging.getLogger("bench_voice")
        said.addHandler(logging.StreamHandler(sys.stdout))
        said.setLevel(logging.INFO)
        args.model = model_choice.resolve(args.model, log=said)
    for name in ("now", "unread", "silent", "unkept", "full"):
        SETUPS[name].first_clause = args.first_clause
        SETUPS[name].voice.update(partial_every=0.0 if name == "silent" else args.read_ahead,
                                  quick_silence=args.quick_silence,
                                  turn_judge=JUDGES[args.turn_judge]())
        SETUPS[name].acknowledger.after = args.acknowledge_after
    for name in set(SETUPS) - {"now", args.against}:
        del SETUPS[name]
    parts = {"stt": Recognizer(), "tts": PiperTTS(vary=False), "vad": load_vad_model()}
    if "full" in SETUPS:
        parts["stt_full"] = Recognizer(window_s=0)
    # one voice for the whole run, as a robot's (a backend per question would make the
    # openings again each time): its openings made before the first question
    parts["kept"], parts["unkept"] = KeptPhrases(parts["tts"]), \
        KeptPhrases(parts["tts"], keep_max=0)
    parts["kept"].warm(wait=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench_voice_"))
    questions, paused = synthesise(parts, tmp)
    observer = None
    if args.llm != "fake":
        from vision_dialogue.perception.observer import make_observer
        observer = make_observer()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    rows: dict[str, list[dict]] = {s: [] for s in SETUPS}
    cuts: dict[str, list[dict]] = {s: [] for s in SETUPS}
    try:
        for rep in range(0 if args.pauses_only else args.reps):
            session(args, observer, rep, questions, parts, tmp, rows)
        barge: list[float] = []
        if not args.no_pauses:
            for s in SETUPS:
                cuts[s] = cut_offs(s, paused, parts, tmp / f"cut_{s}")
            other = "rules" if args.turn_judge == "model" else "model"    # for comparison
            cuts[f"now, {other}"] = cut_offs("now", paused, parts, tmp / f"cut_{other}",
                                             turn_judge=JUDGES[other]())
            barge = barge_in_stops(parts, tmp)
    finally:
        for p in busy:
            p.kill()
    keys = ("vad", "stt", "llm", "tts", "total")
    summary = {s: {k: pct([r[k] for r in rows[s]] or [0], 50) for k in keys}
               | {"p95_total": pct([r["total"] for r in rows[s]] or [0], 95), "n": len(rows[s]),
                  "first_half": pct([r["total"] for r in rows[s][:len(rows[s]) // 2]] or [0],
                                    50),
                  "second_half": pct([r["total"] for r in rows[s][len(rows[s]) // 2:]] or [0],
                                     50),
                  "cut_offs": sum(c["cut"] for c in cuts[s]), "pause_lines": len(cuts[s]),
                  "heard": pct([r["heard"] for r in rows[s]] or [0], 50),
                  "p95_heard": pct([r["heard"] for r in rows[s]] or [0], 95),
                  "acknowledged": sum(r["acked"] for r in rows[s]),
                  "partial_to_line": pct([r["partial_to_line"] for r in rows[s]
                                          if r["partial_to_line"] is not None] or [0], 50),
                  "lines_read_ahead": sum(r["partial_to_line"] is not None for r in rows[s]),
                  "turn_2": pct([r["total"] for r in rows[s] if r["turn"] == 2] or [0], 50),
                  "turn_8": pct([r["total"] for r in rows[s] if r["turn"] == 8] or [0], 50)}
               for s in SETUPS}
    print(f"\nspoken loop, end of speech -> first robot audio ({args.reps} x {len(QUESTIONS)} "
          f"questions, LLM {args.llm} {args.model if args.llm != 'fake' else ''}, "
          f"{args.busy} busy processes, read ahead every {args.read_ahead or '-'} s; "
          "seconds, p50)")
    print(f"{'setup':<8}" + "".join(f"{k:>7}" for k in keys) + f"{'p95':>7}{'cut-offs':>10}"
          "  first half -> second half   first sound (an acknowledgement or the reply)")
    for s in SETUPS:
        m = summary[s]
        print(f"{s:<8}" + "".join(f"{m[k]:7.2f}" for k in keys)
              + f"{m['p95_total']:7.2f}{m['cut_offs']:>6} / {m['pause_lines']}"
              f"    {m['first_half']:.2f} -> {m['second_half']:.2f} (turn 2 {m['turn_2']:.2f}, "
              f"turn 8 {m['turn_8']:.2f})"
              f"          {m['heard']:.2f} ({m['p95_heard']:.2f}), {m['acknowledged']} of "
              f"{m['n']} turns acknowledged")
    for s in SETUPS:
        if summary[s]["lines_read_ahead"]:
            print(f"{s}: {summary[s]['lines_read_ahead']} of {summary[s]['n']} lines read ahead "
                  f"from a partial line, {summary[s]['partial_to_line']:.2f} s (p50) before "
                  "the line came (the time bench_memory.py --pause GAP gives)")
    for s in cuts:
        print(f"cut-offs, {s}: {sum(c['cut'] for c in cuts[s])} of {len(cuts[s])}")
        for line, c in zip(PAUSE_LINES, cuts[s]):
            if c["cut"]:
                print(f"  {s}: cut off {line[0]!r} | {line[1]!r} ({line[2]} s): {c['heard']}")
    if barge:
        print(f"barge-in: the robot's voice stopped {pct(barge, 50):.2f} s (p50; longest "
              f"{max(barge):.2f} s) after the person began speaking over it "
              f"({len(barge)} of {len(BARGE_DELAYS)} heard)")
    now = summary["now"]
    goal = now["n"] > 0 and now["total"] <= 1.0 and now["p95_total"] <= 1.6
    print(f"goal (p50 <= 1.0 s, p95 <= 1.6 s) by the reply's first words: "
          f"{'met' if goal else 'NOT met'}; by the first sound: "
          f"{'met' if now['n'] and now['heard'] <= 1.0 and now['p95_heard'] <= 1.6 else 'NOT'}"
          " met")
    line = {"benchmark": "voice", "llm": args.llm, "model": args.model, "model_asked": asked,
            "acknowledge_after": args.acknowledge_after,
            "quick_silence": args.quick_silence,
            "busy": args.busy, "read_ahead": args.read_ahead,
            "first_clause_words": args.first_clause, "summary": summary,
            "turn_judge": args.turn_judge,
            "cut_offs": {s: sum(c["cut"] for c in cuts[s]) for s in cuts},
            "barge_in_stop_s": {"p50": pct(barge, 50) if barge else None,
                                "max": max(barge, default=None), "n": len(barge)},
            "goal_met": goal}
    print(json.dumps(line))
    # each turn in the results file, not on the JSON line: what each setup answered, how soon
    record("bench_voice", {**line, "turns": [
        {"setup": s, "turn": r["turn"], "heard": r["text"], "first_piece": r["first_piece"],
         **{k: round(r[k], 3) for k in ("total", "llm", "tts")}} for s in rows for r in rows[s]]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
