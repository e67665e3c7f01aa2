"""Which of some declared intents a person's line asks for, read by an LLM (ROS-free).

`IntentReader.read(line, earlier)`: a cheap word test first (most small talk never reaches
the LLM), then one constrained completion that names one intent or "none" and fills its
arguments, which must pass the declared schema and be grounded in the line
(answers.keep_valid). The application's intents file (application/intents.py) and the
conversation's choice of a robot action (core/action_choice.py) both read lines with it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from vision_dialogue.llm.answers import AnswerSchema, keep_valid, parse_json_object

REQUEST_CUES = ("can you", "could you", "would you", "will you", "please", "take me", "show me",
                "bring me", "let's", "let us", "go to", "help me", "give me", "get me",
                "you should", "where is", "where are", "where's",
                "i want", "i need", "i would like", "i'd like", "i wish", "i'm looking",
                "i am looking",
                "we want", "we need", "we would like", "we'd like", "we wish", "we're looking",
                "we are looking", "can i", "could i", "may i", "can we", "could we", "may we",
                "trying to")
"""Phrases of a request: a line with one of these is worth asking the LLM about. What a
person asks for themselves ("I need") a group asks for itself ("We need a meeting room"), and
one may ask for what they get ("Could we get a room?") or say what they try to do ("I'm trying
to find the cafeteria.")."""

_STOP = set("a an the my your his her its our their i you he she it we they is am are was "
            "were be been of in on at to for and or with this that these those me can could "
            "would will please do does did what how so just some any there here".split())

REFERS_BACK = ("there", "it", "that", "them", "those", "this one", "that one", "the same",
               "again", "one of them", "all of us", "us all", "all of them", "everyone",
               "everybody", "the group", "the team", "the family", "the others")
"""Words with which a line points at something said before ("take me there", "bring it", "a
room for all of us" or "for the group" after "our team of eight")."""

_NOT_A_VERB = _STOP | set("i'm i'll i've i'd it's that's there's we're we'll they're he she "
                          "which who when where why whose don't doesn't didn't isn't wasn't "
                          "can't won't not no yes thanks thank hello hi good great nice sorry "
                          "last next yesterday today tomorrow all every each".split())
"""Words a clause may start with that are no command: a clause that starts with another word
and names an intent's thing ("send the elevator down") may ask for it."""

ASKS_TO_SAY = re.compile(r"\b(?:can|could|do|did|would|will) you (?:\w+ )?(?:see|hear|know|"
                         r"tell|remember|think|notice|recogni[sz]e|read|describe|explain|guess|"
                         r"believe|spot)\b")
"""A question about what the robot perceives or knows ("Can you see the red cup on the
table?"): it asks the robot to say something, so a place or an object in it is no request."""

INTENT_SYSTEM = ('You decide what a person asks a robot to do now. The robot can do only '
                 'these things:\n{catalog}\n\nReply with one JSON object and nothing else: '
                 '{{"intent": "<one name above, or none>", "arguments": {{...}}}}. Say "none" '
                 'when the person does not ask the robot to do one of them now: a greeting, a '
                 'question, small talk, something the person did, or a request for something '
                 'else. Put in an argument only when the person said it.')

_LEAD = set(("please ok okay and now so then hey robot oh well actually also just yes no "
             "but").split())
"""Words a request may start with before its verb ("Please wave", "And bring me...")."""


def _content_words(text: str) -> set[str]:
    """The words of `text` that say something (not _STOP, 3 letters or more), with singulars."""
    words = {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2}
    return words | {w[:-1] for w in words if w.endswith("s")}


@dataclass(frozen=True)
class IntentSpec:
    """One declared intent."""

    name: str
    description: str
    arguments: AnswerSchema | None
    examples: tuple[str, ...] = ()
    priority: int = 128

    def words(self) -> set[str]:
        text = " ".join([self.name.replace("_", " "), self.description, *self.examples])
        if self.arguments is not None:
            text += " " + " ".join(self.arguments.what(k) for k in self.arguments.properties)
        return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2}

    def line(self) -> str:
        args = ", ".join(self.arguments.properties) if self.arguments else ""
        return f"- {self.name}({args}): {self.description}"


@dataclass(frozen=True)
class FoundIntent:
    """An intent read from a line: its name, its arguments (valid), how sure."""

    intent: str
    data: dict
    confidence: float
    priority: int = 128

    def json(self) -> str:
        return json.dumps(self.data, ensure_ascii=False)


class IntentReader:
    """Finds the declared intent a person's line asks for (see the module docstring).

    `ask_llm(messages, max_tokens, json_schema)` is one LLM completion; `system`: the
    prompt's instructions ({catalog}: the intents, one per line); `cues`: the phrases of a
    request (the word test); `strict`: the word test's stricter form, and an intent is kept
    only when its line (or, when it refers back, the lines before) shares a word with its
    declaration ("Will you dance?" is not a wave).
    """

    def __init__(self, specs: list[IntentSpec],
                 ask_llm: Callable[..., str], logger=None, system: str = INTENT_SYSTEM,
                 cues: tuple[str, ...] = REQUEST_CUES, strict: bool = True):
        self.specs = {s.name: s for s in specs}
        self.system, self.cues = system, cues
        self.ask_llm = ask_llm
        self.log = logger
        self.strict = strict
        self._words = {s.name: s.words() for s in specs}
        self._catalog = "\n".join(s.line() for s in self.specs.values())  # built once
        self._schema = self._answer_schema()
        self.asked = 0          # lines that reached the LLM

    def abilities(self) -> str:
        """The intents in words, for the reply prompt (the robot may say it will do it)."""
        return "; ".join(f"{s.name.replace('_', ' ')} ({s.description.rstrip('.')})"
                         for s in self.specs.values())

    def worth_asking(self, line: str) -> bool:
        """The word test: a request phrase, or (strict) a clause that starts with an intent's word.

        Not strict: a word shared with a declared intent anywhere is enough (the robot's own
        actions). Strict (the application's intents): "The lift was slow yesterday." shares
        "lift" but asks for nothing; "Wave to my friend!" starts with "wave", and so does a
        clause after another ("My knee hurts, call the lift ...").
        """
        low = " ".join(re.findall(r"[a-z']+", line.lower()))
        if any(f" {cue} " in f" {low} " for cue in self.cues):    # whole words ("pleased": no)
            return True
        if self.strict:
            return any(self._commands(clause) for clause in re.split(r"[,;:!?.]", line.lower()))
        return any(_content_words(low) & ws for ws in self._words.values())

    def _commands(self, clause: str) -> bool:
        """Whether a clause may command an intent (strict word test).

        It starts with an intent's word ("wave to ..."), or starts with a word that may be a
        verb and names an intent's thing ("then send the elevator down").
        """
        words = [w for w in re.findall(r"[a-z']+", clause) if w not in _LEAD]
        if not words:
            return False
        first = _content_words(words[0])
        named = _content_words(" ".join(words)) if words[0] not in _NOT_A_VERB else set()
        return any((first | named) & ws for ws in self._words.values())

    def messages(self, line: str, earlier: Sequence[str] = ()) -> list[dict]:
        """The prompt: the catalogue, then the line (after `earlier`, the lines before it)."""
        before = "".join(f"{e}\n" for e in earlier)
        said = f'Before, in this conversation:\n{before}Now the person said: "{line}"' \
            if before else f'The person said: "{line}"'
        return [{"role": "system", "content": self.system.format(catalog=self._catalog)},
                {"role": "user", "content": f"{said}\nJSON:"}]

    def schema(self) -> dict:
        """The answer's JSON schema, built once from the specs."""
        return self._schema

    def _answer_schema(self) -> dict:
        """The answer's JSON schema: an intent's name (or none) and typed arguments.

        The arguments are one of the intents' own argument objects (a floor is an integer,
        never "2"), none required: an argument the person did not say is left out. (One
        alternative per intent with its name as a constant made llama.cpp's grammar answer
        "none" to every line.)
        """
        objects = [s.arguments.object_schema(s.arguments.properties)
                   for s in self.specs.values() if s.arguments is not None]
        objects.append({"type": "object", "additionalProperties": False})
        return {"type": "object", "properties": {
            "intent": {"type": "string", "enum": [*self.specs, "none"]},
            "arguments": {"anyOf": objects}}, "required": ["intent"]}

    def read(self, line: str, earlier: Sequence[str] = ()) -> FoundIntent | None:
        """The intent `line` asks for, or None.

        `earlier`: the conversation's last lines, oldest first, as "person: ..." / "robot:
        ..."; used only when the line refers back (REFERS_BACK).
        """
        line = " ".join(str(line).split())
        if not line or not self.worth_asking(line):
            return None
        earlier = list(earlier) if refers_back(line, earlier) else []
        self.asked += 1
        text = self.ask_llm(self.messages(line, earlier), max_tokens=60,
                            json_schema=self.schema())
        answer = parse_json_object(text)
        spec = self.specs.get(str(answer.get("intent", "")).strip())
        if spec is None:
            return None
        data: dict = {}
        if spec.arguments is not None:
            given = answer.get("arguments") if isinstance(answer.get("arguments"), dict) \
                else {k: v for k, v in answer.items() if k != "intent"}
            data = keep_valid(spec.arguments, list(spec.arguments.properties), given,
                              [line, *earlier])
            if spec.arguments.missing(data):
                if self.log is not None:
                    self.log.info(f"intent {spec.name} without its "
                                  f"{', '.join(spec.arguments.missing(data))}: not published")
                return None
        if self.strict and not self._about(spec, line, earlier, data):
            if self.log is not None:
                self.log.info(f"intent {spec.name}: nothing of it in {line!r}, not published")
            return None
        n_args = len(spec.arguments.properties) if spec.arguments else 0
        confidence = 0.6 + 0.4 * (len(data) / n_args if n_args else 1.0)
        return FoundIntent(spec.name, data, round(confidence, 2), spec.priority)

    def _about(self, spec: IntentSpec, line: str, earlier: Sequence[str], data: dict) -> bool:
        """Whether the line is about `spec` (the strict test).

        It says every argument of it (and does not only ask what the robot sees or knows:
        ASKS_TO_SAY), or it (or, referring back, a line before) shares a word with the
        declaration.

        "Could you show me the way to the rooftop garden?" shares no word with "Take the
        person to a place in the building", but its place is said; "Will you dance?" is no
        wave.
        """
        if data and spec.arguments is not None and not spec.arguments.missing(data) and \
                not ASKS_TO_SAY.search(line.lower()):
            return True
        return bool(_content_words(" ".join([line, _said(earlier)])) & self._words[spec.name])


def _said(earlier: Sequence[str]) -> str:
    """The words of earlier lines, without their "person: " and "robot: " (no word said)."""
    return " ".join(e.split(": ", 1)[-1] for e in earlier)


def refers_back(line: str, earlier: Sequence[str] = ()) -> bool:
    """Whether `line` points at something said before.

    One of REFERS_BACK as whole words ("take me there"), or a thing of the person's that an
    earlier line named ("to my floor" after "I work on the seventh floor").
    """
    low = " " + " ".join(re.findall(r"[a-z']+", line.lower())) + " "
    if any(f" {w} " in low for w in REFERS_BACK):
        return True
    owned = _content_words(" ".join(re.findall(r"\b(?:my|our) ([a-z]+)", low)))
    return bool(owned and owned & _content_words(_said(earlier)))
