"""The `local` speech backend: microphone in, speaker out, all on this computer.

The microphone may be WAV files or a topic, the speaker a folder of WAV files.

    audio chunks -> Silero VAD segments -> faster-whisper text -> events.utterance(...)
    reply sentences -> Piper (or espeak-ng) audio -> the sink, sentence by sentence

Turn-taking is the Furhat backends' (speech/turns.py drives it): listening, then thinking once
an utterance is out, speaking while a reply plays, listening again. Without barge-in the
microphone is muted from the utterance until the reply ends, as a Furhat does. With barge-in
it keeps listening: speech that starts while the robot talks stops the robot at once when it
is clearly louder than the echo the speaker would cause (`echo_gain` x what is being played);
a segment that overlapped the robot's speech and reads like the sentence it was saying is
dropped as echo.

Recognition starts at the first silent chunk after speech (VAD `pause`) and is kept if no
speech follows, so most of the end-of-speech wait overlaps recognition. Its words decide how
long the silence must last (voice/turn_end.py, `ends_by_meaning`): a complete question ends
the turn as soon as it is recognised, "and then I..." waits longer. While the person speaks,
the growing segment may be recognised every `partial_every` seconds and reported as a
partial line (`events.partial`), so the LLM can read the prompt and most of the line before
the end (off by default: measured slower on 2 cores). With `partial_at_pause` the words
recognised at each pause (already there for the end of the turn, so no extra recognition)
are reported as a partial line: the LLM reads the line while the silence that ends it runs.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TextIO

import numpy as np

from vision_dialogue.speech.base import BACKOFF, BARGE_IN, SpeechBackend, SpeechEvents, \
    SpeechIO, check_backoff
from vision_dialogue.voice import build
from vision_dialogue.voice.audio import SAMPLE_RATE, rms
from vision_dialogue.voice.hearing import CHUNK_S, PartialLines, Segment, is_echo, tell
from vision_dialogue.voice.sinks import AudioSink
from vision_dialogue.voice.sources import AudioSource, AudioSourceError
from vision_dialogue.voice.stt import Recognition, Recognizer
from vision_dialogue.voice.tts import KeptPhrases, TTSError
from vision_dialogue.voice.turn_end import HOLD_SILENCE_S, PARTIAL_AT_PAUSE, PARTIAL_EVERY_S, \
    QUICK_SILENCE_S, UNSURE, silence_needed, turn_end
from vision_dialogue.voice.vad import SpeechSegmenter, VadEvent

#: barge-in needs the microphone this many times louder than the predicted echo
ECHO_MARGIN = 2.0


class LocalVoiceBackend(SpeechBackend):
    """See the module docstring. `timings` holds one dict per utterance, for the benchmark."""

    name = "local"
    AUDIO_IN_PARAM = "audio_in"
    PARAMS = build.VOICE_PARAMS + [BARGE_IN] + BACKOFF

    @classmethod
    def check(cls, p) -> str | None:
        return check_backoff(p) or build.check_audio_in(p)

    @classmethod
    def from_params(cls, p, io: SpeechIO) -> "LocalVoiceBackend":
        """Microphone/WAV/topic in, speaker/WAV out, Silero VAD, faster-whisper, Piper.

        Raises VoicePartError (a ValueError naming the parameter) for a part that cannot load.
        """
        parts = build.voice_parts(p, logger=io.logger)
        on_audio_in, on_audio_out = build.audio_topics(p, io.audio, parts.source)
        backend = cls(parts.source, parts.sink, recognizer=parts.recognizer, tts=parts.tts,
                      segmenter=parts.segmenter, language=p["language"],
                      speaker=p["speaker"], barge_in=p["barge_in"], echo_gain=p["echo_gain"],
                      reply_timeout=p["reply_timeout"], backoff_initial=p["backoff_initial"],
                      ends_by_meaning=p["ends_by_meaning"], quick_silence=p["quick_silence"],
                      hold_silence=p["hold_silence"], partial_every=p["partial_every"],
                      partial_at_pause=p["partial_at_pause"], turn_judge=parts.turn_judge,
                      backoff_max=p["backoff_max"], on_audio_in=on_audio_in,
                      on_audio_out=on_audio_out, logger=io.logger)
        build.connect(parts.source, backend)
        backend.log.info(f"local voice: {parts.source.describe()} -> VAD -> Whisper "
                         f"({parts.recognizer.path.name}) ... {parts.tts.name} -> "
                         f"{parts.sink.describe()}")
        return backend

    def __init__(self, source: AudioSource, sink: AudioSink, *, recognizer: Recognizer,
                 tts, segmenter: SpeechSegmenter, language: str = "en-US", speaker: str = "",
                 barge_in: bool = True, echo_gain: float = 0.25, reply_timeout: float = 30.0,
                 backoff_initial: float = 0.5, backoff_max: float = 10.0,
                 on_audio_in: Callable[[np.ndarray], None] | None = None,
                 on_audio_out: Callable[[np.ndarray, int, str], None] | None = None,
                 output_stream: TextIO | None = None, early_recognition: bool = True,
                 ends_by_meaning: bool = True, quick_silence: float = QUICK_SILENCE_S,
                 hold_silence: float = HOLD_SILENCE_S, partial_every: float = PARTIAL_EVERY_S,
                 partial_at_pause: bool = PARTIAL_AT_PAUSE,
                 turn_judge: Callable[[str], str] = turn_end,
                 logger: logging.Logger | None = None):
        super().__init__(logger)
        self.output = output_stream or sys.stdout   # the dialogue as text: you: / robot:
        self.early_recognition = early_recognition  # recognise from the first silent chunk
        # the words at the first silent chunk set the silence that ends the turn (turn_end.py)
        self.ends_by_meaning = ends_by_meaning and early_recognition
        self.quick_silence, self.hold_silence = float(quick_silence), float(hold_silence)
        self.turn_judge = turn_judge     # words -> COMPLETE / UNSURE / INCOMPLETE (turn_end)
        self._out_lock = threading.Lock()
        self.source, self.sink, self.recognizer = source, sink, recognizer
        # short phrases ("Yes,", acknowledgements) kept once said, the openings from start()
        self.tts = tts if tts is None or isinstance(tts, KeptPhrases) else \
            KeptPhrases(tts, log=self.log)
        self.segmenter = segmenter
        self.language, self.speaker, self.barge_in = language, speaker, barge_in
        self.echo_gain, self.reply_timeout = echo_gain, reply_timeout
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self.on_audio_in, self.on_audio_out = on_audio_in, on_audio_out
        self._stop = threading.Event()
        self._replying = threading.Event()     # from our utterance until the reply ended
        self._in_reply = threading.Event()     # from a reply's first sentence to its end
        self._barged = threading.Event()       # the user spoke over the robot: stay quiet
        self._stt = ThreadPoolExecutor(1, thread_name_prefix="voice-stt")
        self._thread: threading.Thread | None = None
        self._levels: deque[tuple[float, float]] = deque(maxlen=64)  # (mic, predicted echo)
        self._spoken: deque[str] = deque(maxlen=4)      # sentences said lately (echo check)
        self._segment: Segment | None = None            # the segment being heard
        # partial lines: every `partial_every` s of speech (0: none), and (partial_at_pause)
        # the words recognised at a pause for the end of the turn
        self.partials = PartialLines(
            lambda audio: self.recognizer.transcribe(audio),
            lambda: self.segmenter.audio_so_far(), lambda: self._segment,
            lambda text: tell(self.events, "partial", text, self.speaker), partial_every,
            partial_at_pause and early_recognition, getattr(source, "realtime", True), self.log)
        self._person_speaking = False                   # as last told to the owner
        self._pending: dict | None = None               # the turn waiting for its first audio
        self._recognising = 0                            # segments sent to the recogniser
        self._count_lock = threading.Lock()
        self._output_down = False
        self.timings: list[dict] = []
        self.barge_ins = self.echoes = 0
        self.replies_ended = 0            # replies said to their end (the opening remark too)
        self._last_line = ""              # the last of them

    # ---------------------------------------------------------------- backend hooks
    def start(self, events: SpeechEvents) -> None:
        super().start(events)
        if self.tts is not None:
            self.tts.warm()
        self._thread = threading.Thread(target=self._loop, name="voice-capture", daemon=True)
        self._thread.start()

    def turn_ready(self) -> bool:
        """Nothing heard is still being recognised or answered (WAV sources wait for this)."""
        return not (self._replying.is_set() or self._recognising or self.segmenter.busy
                    or self._in_reply.is_set())

    def has_spoken(self) -> bool:
        """The robot has said something (a script's first item may wait for its opening)."""
        return self.replies_ended > 0

    def robot_line(self) -> tuple[int, str]:
        """(robot lines ended so far, the last one's text): a WAV input answers questions."""
        return self.replies_ended, self._last_line

    def robot_speaking(self) -> bool:
        """The robot's voice is playing now (a WAV item that barges in waits for this)."""
        return self.sink.playing

    def robot_quiet(self) -> bool:
        """The robot is not in the middle of a reply (a polite WAV item waits for this)."""
        return not self._in_reply.is_set()

    def _say_line(self, line: str) -> None:
        with self._out_lock:
            try:
                self.output.write(line + "\n")
                self.output.flush()
            except (OSError, ValueError):
                pass

    def begin_reply(self) -> None:
        self._in_reply.set()

    def speak(self, text: str) -> bool:
        return self._speak(text, acknowledgement=False)

    def acknowledge(self, text: str) -> bool:
        """As `speak`, but the reply's first audio is still to come.

        The turn's timing notes when the acknowledgement was heard (`ack_audio`).
        """
        return self._speak(text, acknowledgement=True)

    def _speak(self, text: str, acknowledgement: bool) -> bool:
        if self._barged.is_set():
            return False
        t0 = time.monotonic()
        try:
            audio, rate = self.tts.synthesize(text, keep=acknowledgement)
        except (TTSError, RuntimeError, OSError) as e:
            self.log.error(f"text-to-speech failed for {text!r}: {e}")
            return False
        if acknowledgement:
            if self._pending is not None:
                self._pending.setdefault("ack_audio", time.monotonic())
        elif self._pending is not None:
            pending, self._pending = self._pending, None
            pending.update(tts_s=time.monotonic() - t0, first_audio=time.monotonic())
            self.timings.append(pending)
        if self.on_audio_out is not None:
            self.on_audio_out(audio, rate, text)
        self._spoken.append(text)
        if self._barged.is_set():
            return False
        self._say_line(f"robot: {text}")
        try:
            played = self.sink.play(audio, rate, text)
            if not played:
                self._say_line("robot: [interrupted]")
        except AudioSourceError as e:
            if not self._output_down:
                self.log.error(f"cannot speak: {e}; will try again at every sentence")
            self._output_down = True
            return False
        if self._output_down:
            self.log.info(f"{self.sink.describe()} works again")
            self._output_down = False
        return played

    def stop_speaking(self) -> None:
        self.sink.stop()

    def end_reply(self, text: str, timed_out: bool = False) -> None:
        if timed_out:
            self._say_line("robot: (no reply)")
        self._pending = None
        if not timed_out:
            self._last_line = text          # before the count: robot_line() reads both
        self.replies_ended += not timed_out
        self._in_reply.clear()
        self._replying.clear()
        self._barged.clear()
        if not self._stop.is_set() and self.events is not None:
            self.events.listening()

    def close(self) -> None:
        self._stop.set()
        self.sink.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._stt.shutdown(wait=False, cancel_futures=True)
        self.partials.close()
        if self.tts is not None:
            self.tts.close()

    # ---------------------------------------------------------------- capture loop
    def _loop(self) -> None:
        delay, down = self.backoff_initial, False
        while not self._stop.is_set():
            try:
                self.events.listening()
                for chunk in self.source.chunks(self._stop):
                    if down:
                        self.log.info(f"{self.source.describe()} works again")
                        down, delay = False, self.backoff_initial
                    self._on_chunk(chunk, time.monotonic())
            except AudioSourceError as e:
                if not down:
                    self.log.error(f"audio input unavailable: {e}; retrying with backoff")
                    self.events.unavailable()
                    down = True
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, self.backoff_max)
                continue
            except Exception as e:  # noqa: BLE001 - a bug must not end the capture loop
                self.log.error(f"voice capture failed: {e!r}")
                if self._stop.wait(delay):
                    return
                continue
            if self.source.finite:
                self._finish_input()
                return

    def _finish_input(self) -> None:
        """The file input is over: wait for recognition and the last reply, then report."""
        self._stt.submit(lambda: None).result()
        deadline = time.monotonic() + self.reply_timeout
        while self._replying.is_set() and time.monotonic() < deadline:
            if self._stop.wait(0.05):
                return
        self.events.input_finished()

    def _on_chunk(self, chunk: np.ndarray, now: float) -> None:
        if self.on_audio_in is not None:
            self.on_audio_in(chunk)
        if self._replying.is_set() and not self.barge_in:
            self.segmenter.reset()          # half duplex: deaf until the reply ends
            self._segment = None
            self._speaking(False)
            return
        self._levels.append((rms(chunk), self.echo_gain * self.sink.level_at(now)))
        self._decide_end()
        for event in self.segmenter.feed(chunk):
            self._on_vad(event, now)
        self.partials.tick(self._segment, now)

    def _decide_end(self) -> None:
        """Once the words at the pause are known, they set the silence that ends the turn."""
        seg = self._segment
        if not self.ends_by_meaning or seg is None or seg.speculative is None or \
                seg.end_rule is not None:
            return
        future = seg.speculative
        realtime = getattr(self.source, "realtime", True)
        if not getattr(self.turn_judge, "instant", True):   # a model: off the audio thread
            if seg.judged is None:
                seg.judged = self._stt.submit(
                    lambda heard=future: self.turn_judge(heard.result().text))
            future = seg.judged
        if not future.done() and realtime:
            return
        try:   # audio faster than real time (a WAV test): the words come at the pause
            result = future.result(timeout=30.0)
        except Exception as e:  # noqa: BLE001 - a failed recognition is reported at the end
            if seg.judged is None:
                return
            self.log.warning(f"the turn judge failed ({e!r}); min_silence ends the turn")
            result = UNSURE
        rule = seg.end_rule = result if isinstance(result, str) else \
            self.turn_judge(result.text)
        self.segmenter.wait_for(silence_needed(
            rule, self.quick_silence, self.segmenter.min_silence * CHUNK_S, self.hold_silence))

    def _on_vad(self, event: VadEvent, now: float) -> None:
        seg = self._segment
        if event.kind == "start":
            voiced = list(self._levels)[-self.segmenter.min_speech:]
            over_robot = any(echo > 0 for _, echo in voiced) or self.sink.playing
            mic_level = float(np.sqrt(np.mean([m * m for m, _ in voiced])))
            echo_level = float(np.sqrt(np.mean([e * e for _, e in voiced])))
            loud = mic_level > ECHO_MARGIN * echo_level
            self._segment = seg = Segment(started_at=now)
            if not over_robot or (self.barge_in and loud):
                self._speaking(True)
            if over_robot and self.barge_in and loud:
                self.log.info("barge-in: the user speaks over the robot; stopping speech")
                self._barged.set()
                self.barge_ins += 1
                self.sink.stop()
            elif over_robot:
                seg.echo = True
        elif seg is None and event.kind != "end":   # a pause or resume of no segment
            return
        elif event.kind == "pause":
            seg.paused_at = now
            if self.ends_by_meaning:      # no end before the words are known (or the longest)
                self.segmenter.wait_for(self.hold_silence)
            if self.early_recognition:
                seg.speculative = self._stt.submit(self.recognizer.transcribe, event.audio)
                self.partials.at_a_pause(seg.speculative, seg)
        elif event.kind == "resume":
            seg.resume()
        elif event.kind == "end":
            seg = seg or Segment(started_at=now)        # its audio is heard all the same
            self._segment = None
            self._speaking(False)
            speech_end = (seg.paused_at or now) - CHUNK_S
            if event.cut:
                speech_end = now
                self.log.info(f"a long utterance: cut after {len(event.audio) / SAMPLE_RATE:.0f}"
                              " s (max_segment); the rest follows as the next utterance")
            future = seg.speculative if not event.cut else None
            if future is None:
                future = self._stt.submit(self.recognizer.transcribe, event.audio)
            timing = {"speech_end": speech_end, "vad_end": now,
                      "speech_s": len(event.audio) / SAMPLE_RATE,
                      "end_rule": seg.end_rule or "",
                      "speculative": seg.speculative is not None and not event.cut}
            with self._count_lock:
                self._recognising += 1
            future.add_done_callback(lambda f: self._recognised(f, seg, timing))

    def _speaking(self, on: bool) -> None:
        """Tell the owner the person began or stopped speaking (once per change)."""
        if on != self._person_speaking and callable(getattr(self.events, "speaking", None)):
            self._person_speaking = on
            self.events.speaking(on)

    def _recognised(self, future: Future, seg: Segment, timing: dict) -> None:
        try:
            self._deliver(future, seg, timing)
        finally:
            with self._count_lock:
                self._recognising -= 1

    def _deliver(self, future: Future, seg: Segment, timing: dict) -> None:
        try:
            result: Recognition = future.result()
        except Exception as e:  # noqa: BLE001 - a failing recogniser must not stop listening
            self.log.error(f"speech recognition failed: {e!r}")
            self._barged.clear()
            return
        text = result.text.strip()
        if not text:
            self.log.info(f"heard {timing['speech_s']:.1f} s of sound but no words; ignored")
            self._barged.clear()
            return
        if seg.echo and is_echo(text, self._spoken):
            self.echoes += 1
            self.log.info(f"ignored the robot's own voice: {text!r}")
            return
        timing.update(stt_s=result.seconds, recognised=time.monotonic(), text=text)
        self._pending = timing
        self._replying.set()
        language = self.language if self.language.split("-")[0].lower() == result.language \
            else result.language
        self.log.debug(f"heard {text!r} ({result.language}, confidence "
                       f"{result.confidence:.2f}, {timing['speech_s']:.1f} s)")
        self._say_line(f"you: {text}")
        self.events.utterance(text, self.speaker, language, result.confidence,
                              (timing["vad_end"] - timing["speech_s"], timing["vad_end"]))
        self._barged.clear()
