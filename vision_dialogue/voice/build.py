"""The local voice's parts, built from the speech node's parameters (a plain dict).

The node, the voice benchmark and the tests assemble them the same way. Errors name the
parameter.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from vision_dialogue.voice.audio import AudioFileError
from vision_dialogue.voice.sinks import AudioSink, SpeakerSink, WavFolderSink
from vision_dialogue.voice.sources import (MIC, TOPIC, AudioSource, MicSource, TopicSource,
                                           WavSource, load_wav_items)
from vision_dialogue.voice.turn_end import turn_end


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
                               reply_timeout=p["reply_timeout"], logger=log)
        except AudioFileError as e:
            raise VoicePartError(f"audio_in: {e}") from None
    try:
        sink = WavFolderSink(p["audio_out_dir"], realtime=p["audio_realtime"]) \
            if p["audio_out_dir"] else SpeakerSink(p["audio_output_device"])
    except OSError as e:
        raise VoicePartError(f"audio_out_dir: cannot write there ({e})") from None
    try:
        recognizer = Recognizer(p["stt_model"], language=p["stt_language"])
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
        source.has_spoken = backend.has_spoken
