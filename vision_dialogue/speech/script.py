"""Scripted speech input: a YAML/JSON file of utterances with delays or "wait for reply".

File format (YAML or JSON)::

    language: en-US          # optional defaults for every item
    speaker: visitor
    items:                   # or the list alone at the top level
      - say: "Hello! What can you see?"
        wait_for_greeting: true  # first the robot's opening remark (at most reply_timeout)
      - say: "What colour is it?"
        wait_for_reply: true # wait for the final reply of the previous turn (reply_timeout)
      - say: "Thank you."
        delay: 2.0           # then wait 2 s before saying it
        language: en-GB      # per-item language / speaker override the defaults
      - say: "Who just came in?"
        at: 40.0             # not before 40 s after the script started (timed to a video:
                             # the speech node's script_clock_topic starts it with the video)
    answers:                 # optional: a robot line with `when` in it gets `say` at once
      - when: "may I remember you"   # words of the robot's line, any case
        say: "Yes, you may."
        speaker: Anna        # optional; else whoever said the script's last line

An answer goes out each time the robot's line has its words (a follow-up that asks again gets
it again), before the script's next item: a question the robot asks on its own (people_node's
consent question, an application's Ask) gets its reply however the conversation was timed.
An item is never said into a line the robot is saying (it waits for the line's end, at most
`reply_timeout`), as a person waits for the robot to finish.

Replies are printed as they stream. After the last item the backend waits for its reply and
reports `input_finished` (the node then shuts down if `exit_when_done`).
"""
from __future__ import annotations

import json
import math
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml

from vision_dialogue.speech.base import SpeechBackendError, SpeechIO
from vision_dialogue.speech.terminal import TerminalBackend
from vision_dialogue.variants import Param

_ITEM_KEYS = {"say", "delay", "at", "wait_for_reply", "wait_for_greeting", "language",
              "speaker"}


_ANSWER_KEYS = {"when", "say", "speaker"}


class ScriptError(SpeechBackendError):
    """An unreadable or invalid script file; the message names the file and the problem."""


@dataclass(frozen=True)
class ScriptItem:
    say: str
    delay: float = 0.0
    wait_for_reply: bool = False
    language: str = ""
    speaker: str = ""
    at: float | None = None      # seconds after the script's start, at the earliest
    wait_for_greeting: bool = False   # until the robot has said something (its opening)


@dataclass(frozen=True)
class ScriptAnswer:
    """What the scripted person answers to a robot line that has `when` in it."""

    when: str
    say: str
    speaker: str = ""

    def fits(self, robot_line: str) -> bool:
        return has_words(robot_line, self.when)


def has_words(robot_line: str, words: str) -> bool:
    """Whether a robot line asks what an answer answers: its words in it, any case."""
    return words.lower() in robot_line.lower()


def load_script(path: str | Path) -> list[ScriptItem]:
    """Read and validate a script file; raises ScriptError naming the file and the problem."""
    return load_script_and_answers(path)[0]


def load_answers(path: str | Path) -> list[ScriptAnswer]:
    """The script's `answers` (none when it has none); raises ScriptError like load_script."""
    return load_script_and_answers(path)[1]


def load_script_and_answers(path: str | Path) -> tuple[list[ScriptItem], list[ScriptAnswer]]:
    """The items and the answers of a script file, read once."""
    p = Path(path).expanduser()
    if not str(path).strip():
        raise ScriptError("no script file given")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"{p}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScriptError(f"{p}: cannot read: {e}") from None
    is_json = p.suffix.lower() == ".json"
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ScriptError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ScriptError(f"{p}: not valid YAML ({where}{problem})") from None
    defaults: dict = {}
    answers: list[ScriptAnswer] = []
    if isinstance(data, dict):
        unknown = set(data) - {"items", "script", "language", "speaker", "answers"}
        if unknown:
            raise ScriptError(f"{p}: unknown top-level keys {sorted(unknown)}")
        defaults = {k: data[k] for k in ("language", "speaker") if k in data}
        for k, v in defaults.items():
            if not isinstance(v, str):
                raise ScriptError(f"{p}: '{k}' must be a string")
        answers = _answers(p, data.get("answers", []))
        data = data.get("items", data.get("script"))
    if not isinstance(data, list) or not data:
        raise ScriptError(f"{p}: expected a non-empty list of items like "
                          "{say: text, delay: seconds} (top level or under 'items')")
    return [_item(p, i, raw, defaults) for i, raw in enumerate(data, start=1)], answers


def _answers(p: Path, raw) -> list[ScriptAnswer]:
    if not isinstance(raw, list):
        raise ScriptError(f"{p}: 'answers' must be a list of {{when: words, say: text}}")
    found = []
    for i, entry in enumerate(raw, start=1):
        where = f"{p}: answer {i}"
        if not isinstance(entry, dict) or set(entry) - _ANSWER_KEYS:
            raise ScriptError(f"{where}: expected a mapping with keys {sorted(_ANSWER_KEYS)}, "
                              f"got {entry!r}")
        for key in ("when", "say"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise ScriptError(f"{where}: '{key}' must be a non-empty string")
        if not isinstance(entry.get("speaker", ""), str):
            raise ScriptError(f"{where}: 'speaker' must be a string")
        found.append(ScriptAnswer(entry["when"].strip(), entry["say"].strip(),
                                  entry.get("speaker", "")))
    return found


def _item(p: Path, i: int, raw, defaults: dict) -> ScriptItem:
    where = f"{p}: item {i}"
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected a mapping like {{say: text}}, got {raw!r}")
    unknown = set(raw) - _ITEM_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)} "
                          f"(allowed: {sorted(_ITEM_KEYS)})")
    say = raw.get("say")
    if not isinstance(say, str) or not say.strip():
        raise ScriptError(f"{where}: 'say' must be a non-empty string")
    delay = raw.get("delay", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not (
            math.isfinite(delay) and delay >= 0):
        raise ScriptError(f"{where}: 'delay' must be a number of seconds >= 0, got {delay!r}")
    at = raw.get("at")
    if at is not None and (isinstance(at, bool) or not isinstance(at, (int, float))
                           or not (math.isfinite(at) and at >= 0)):
        raise ScriptError(f"{where}: 'at' must be a number of seconds >= 0, got {at!r}")
    for key in ("wait_for_reply", "wait_for_greeting"):
        if not isinstance(raw.get(key, False), bool):
            raise ScriptError(f"{where}: '{key}' must be true or false, got {raw[key]!r}")
    wait = raw.get("wait_for_reply", False)
    fields = {}
    for k in ("language", "speaker"):
        v = raw.get(k, defaults.get(k, ""))
        if not isinstance(v, str):
            raise ScriptError(f"{where}: '{k}' must be a string")
        fields[k] = v
    return ScriptItem(say=say.strip(), delay=float(delay), wait_for_reply=wait,
                      at=None if at is None else float(at),
                      wait_for_greeting=raw.get("wait_for_greeting", False), **fields)


class ScriptBackend(TerminalBackend):
    """Says the script's items in order (on a thread) and prints replies like the terminal."""

    name = "script"
    FILE_PARAM = "script_file"
    PARAMS = [Param("script_file", "", "YAML/JSON script to play (backend=script or auto): a "
                    "list of {say: text, delay: s} or {say: text, wait_for_reply: true}.")]

    @classmethod
    def check(cls, p) -> str | None:
        """The script is read at startup: a missing or malformed file is a parameter error."""
        try:
            load_script_and_answers(p["script_file"])
        except ScriptError as e:
            return f"script_file: {e}"
        return None

    @classmethod
    def from_params(cls, p, io: SpeechIO) -> "ScriptBackend":
        return cls(p["script_file"], reply_timeout=p["reply_timeout"],
                   output_stream=io.output_stream, language=p["language"],
                   speaker=p["speaker"], logger=io.logger)

    def __init__(self, script: str | Path | list[ScriptItem], *, reply_timeout: float = 30.0,
                 output_stream: TextIO | None = None, language: str = "", speaker: str = "",
                 logger=None, answers: list[ScriptAnswer] | None = None):
        super().__init__(input_stream=None, output_stream=output_stream or sys.stdout,
                         language=language, speaker=speaker, logger=logger)
        if isinstance(script, list):
            self.items, self.answers = script, list(answers or [])
        else:
            self.items, self.answers = load_script_and_answers(script)
        self._last_speaker = speaker
        self._robot_talking = False     # a robot line has begun and not ended
        self.reply_timeout = reply_timeout
        self._cv = threading.Condition()
        self._replies = 0        # replies completed so far
        self._stop = threading.Event()
        self.said: list[str] = []
        # with several speakers each line is printed with its speaker's name, else "you:"
        self._named = len({i.speaker or speaker for i in self.items}
                          | {a.speaker for a in self.answers if a.speaker}) > 1

    def interactive(self) -> bool:
        return False         # nobody types: no `you:` prompt

    def start(self, events) -> None:
        self.events = events
        self._thread = threading.Thread(target=self._run, name="script", daemon=True)
        self._thread.start()

    def _wait_reply(self, after: int) -> None:
        """Wait until a reply completes after the utterance said when `after` replies were done."""
        with self._cv:
            # The node ends a turn without reply after reply_timeout (end_reply(timed_out));
            # the extra second only guards against a missing end_reply.
            ok = self._cv.wait_for(lambda: self._replies > after or self._stop.is_set(),
                                   timeout=self.reply_timeout + 1.0)
        if not ok:
            self.log.warning(f"script: no reply within {self.reply_timeout:g} s; going on")

    def _run(self) -> None:
        last = None          # reply count when the previous item was said
        start = time.monotonic()
        for item in self.items:
            if item.wait_for_greeting:       # the robot's opening remark, however long it takes
                self._wait_reply(0)
            if item.wait_for_reply and last is not None:
                self._wait_reply(last)
            if item.delay and self._stop.wait(item.delay):
                return
            if item.at is not None and self._stop.wait(
                    max(0.0, start + item.at - time.monotonic())):
                return
            if self._stop.is_set():
                return
            with self._cv:      # not into a line the robot is saying (a question of its own)
                self._cv.wait_for(lambda: not self._robot_talking or self._stop.is_set(),
                                  timeout=self.reply_timeout + 1.0)
                last = self._replies
                self._say(item.say, item.speaker or self.speaker, item.language)
        if last is not None:
            self._wait_reply(last)
        if not self._stop.is_set():
            self.events.input_finished()

    def _say(self, text: str, speaker: str, language: str = "") -> None:
        """One line of the scripted person (with `_cv` held: items and answers in order)."""
        self._last_speaker = speaker
        self.said.append(text)
        self._newline()
        self._write(f"{speaker if self._named else 'you'}: {text}\n")
        self.events.utterance(text, speaker=speaker, language=language or self.language)

    def speak(self, text: str) -> bool:
        with self._cv:
            self._robot_talking = True
        return super().speak(text)

    def end_reply(self, text: str, timed_out: bool = False) -> None:
        super().end_reply(text, timed_out)
        with self._cv:
            self._robot_talking = False
            for answer in self.answers:
                if not self._stop.is_set() and answer.fits(text):
                    self._say(answer.say, answer.speaker or self._last_speaker)
                    break
            self._replies += 1
            self._cv.notify_all()

    def close(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
