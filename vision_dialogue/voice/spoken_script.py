"""A spoken version of a speech script: one WAV per `say`, and a sequence file for WavSource.

The voice demo plays the demo script (config/demo_script.yaml) through the microphone path:
each line is synthesised once with the local TTS and cached, named by a hash of the script
and the voice, so a second run starts at once. The script's `delay`, `wait_for_reply` and
`wait_for_greeting` carry over to the sequence, and its `answers` (a reply to a question the
robot asks on its own, e.g. people_node's consent question) become spoken answers.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import yaml

from vision_dialogue.speech.script import load_script_and_answers
from vision_dialogue.voice.audio import SAMPLE_RATE, resample, write_wav


def spoken_script_key(script: Path, tts_name: str) -> str:
    text = Path(script).read_text(encoding="utf-8") + "\0" + tts_name
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _spoken(tts, text: str, path: Path) -> str:
    """`text` synthesised into `path` at the microphone path's rate; the file's name."""
    audio, rate = tts.synthesize(text)
    return write_wav(path, resample(audio, rate, SAMPLE_RATE), SAMPLE_RATE).name


def build_spoken_script(script: Path, directory: Path, tts) -> Path:
    """Synthesise every line of `script` into `directory`; the sequence file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    items = []
    script_items, script_answers = load_script_and_answers(script)
    for i, item in enumerate(script_items):
        name = _spoken(tts, item.say, directory / f"{i + 1:02d}.wav")
        items.append({"wav": name, "delay": item.delay, "wait_for_reply": item.wait_for_reply,
                      "wait_for_greeting": item.wait_for_greeting, "text": item.say})
    answers = []
    for i, answer in enumerate(script_answers):
        name = _spoken(tts, answer.say, directory / f"answer{i + 1:02d}.wav")
        answers.append({"when": answer.when, "wav": name})
    seq = directory / "sequence.yaml"
    tmp = seq.with_name(f".sequence.{os.getpid()}.tmp")
    tmp.write_text(yaml.safe_dump({"items": [{k: v for k, v in it.items() if k != "text"}
                                             for it in items], "answers": answers},
                                  sort_keys=False))
    (directory / "lines.yaml").write_text(yaml.safe_dump(
        [{"wav": it["wav"], "text": it["text"]} for it in items], sort_keys=False))
    os.replace(tmp, seq)
    return seq


def ensure_spoken_script(script: Path, cache: Path, tts_name: str = "piper") -> Path:
    """The cached sequence file for `script`, synthesised first if it is missing."""
    directory = Path(cache) / f"spoken_{spoken_script_key(script, tts_name)}"
    seq = directory / "sequence.yaml"
    if not seq.is_file():
        from vision_dialogue.voice.tts import make_tts
        build_spoken_script(Path(script), directory, make_tts(tts_name))
    return seq
