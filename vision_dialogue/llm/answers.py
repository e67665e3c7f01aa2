"""Structured answers from what a person said and what the robot sees (the Ask skill; ROS-free).

An application asks with a JSON-schema object (`{"name": {"type": "string"}, "holding":
{"type": "string"}}`) and wants back only keys it can trust, each valid against its schema. A
wrong value is worse than a missing key, so:

* plain readers go first where the words decide alone: yes/no for the one boolean key, a
  number for the one integer or number key, an enum value named in the line;
* the LLM fills the rest as one JSON object (`extraction_messages`; a backend that can constrain
  its output to the schema does so);
* every value is checked with `jsonschema`, and a free string must be grounded: one of its
  words was said by the person or is in what the robot sees (so the model cannot invent a name).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable

import jsonschema

TYPES = ("string", "boolean", "integer", "number")
"""The value types an answer may have (JSON schema `type`)."""


class SchemaError(ValueError):
    """A bad answers_schema (the goal's error: invalid JSON, not an object, unknown types)."""


_YES = ("yes", "yeah", "yep", "yup", "sure", "of course", "certainly", "absolutely", "correct",
        "right", "indeed", "definitely", "ok", "okay", "affirmative", "please do", "go ahead")
_YES_ALONE = ("i do", "i am", "i have", "i would", "i will", "i can", "i did")
"""A yes only as the whole line ("I am." yes; "I am 34" is no yes)."""
_NO = ("no", "nope", "nah", "not", "never", "i don't", "i do not", "i am not", "i'm not",
       "i haven't", "i have not", "i wouldn't", "i won't", "negative", "not really")
_UNSURE = ("not sure", "don't know", "do not know", "no idea", "maybe", "perhaps")
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SMALL_TALK = set("hello hi hey there thanks thank sorry okay ok yes no yeah nope please well hmm "
                  "good morning evening afternoon fine sure maybe rather say know why want "
                  "tell".split())
"""Words of greetings and evasions: a "value" made of these alone is no answer."""
_INDEFINITE = set("something anything someone somebody anyone anybody somewhere anywhere "
                  "nothing nobody stuff".split())
"""Words that stand for a thing not named: "I left something behind." names no lost item."""
_STOP = set("a an the my your his her its our their i you he she it we they is am are was were "
            "be been of in on at to for and or with this that these those it's i'm me i'd i'll "
            "i've that's there's you're we're don't can't won't not".split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def yes_or_no(text: str) -> bool | None:
    """True / False when the line opens with a clear yes or no; None otherwise."""
    t = " ".join(_words(text))
    if not t or any(u in t for u in _UNSURE):
        return None
    for words, value in ((_NO, False), (_YES, True)):   # "i am not" before "i am"
        if any(t == w or t.startswith(w + " ") for w in words):
            return value
    return True if t in _YES_ALONE else None


def numbers_in(text: str) -> list[float]:
    """The numbers a line says, in digits or in words ("thirty four" -> 34).

    "four hundred and twelve" is 412 (the chat battery's room number); "two three" is two.
    """
    found: list[float] = []
    words = re.findall(r"-?\d+(?:\.\d+)?|[a-z]+", text.lower().replace("-", " "))
    i = 0
    while i < len(words):
        if re.fullmatch(r"-?\d+(?:\.\d+)?", words[i]):
            found.append(float(words[i]))
        elif words[i] in _NUMBER_WORDS or words[i] in _TENS:
            value, i = _number_said(words, i)
            found.append(value)
            continue
        i += 1
    return found


def _number_said(words: list[str], i: int) -> tuple[float, int]:
    """The number said in words from words[i] on, and the index after its last word."""
    total = current = 0
    last = ""                       # what the previous word was: unit, tens or scale
    while i < len(words):
        w, after = words[i], words[i + 1] if i + 1 < len(words) else ""
        if w in _NUMBER_WORDS and (last in ("", "scale") or
                                   (last == "tens" and 0 < _NUMBER_WORDS[w] < 10)):
            current, last = current + _NUMBER_WORDS[w], "unit"
        elif w in _TENS and last in ("", "scale"):
            current, last = current + _TENS[w], "tens"
        elif w == "hundred" and last == "unit":
            current, last = current * 100, "scale"
        elif w == "thousand" and last in ("unit", "tens", "scale"):
            total, current, last = total + current * 1000, 0, "scale"
        elif not (w == "and" and last == "scale" and (after in _NUMBER_WORDS or after in _TENS)):
            break
        i += 1
    return float(total + current), i


@dataclass
class AnswerSchema:
    """The keys an Ask wants (JSON-schema properties) and the checks their values pass."""

    properties: dict
    required: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str | dict) -> "AnswerSchema":
        """From the goal's JSON: properties alone, or {"type": "object", "properties": ...}.

        Raises SchemaError saying what is wrong.
        """
        try:
            data = json.loads(text) if isinstance(text, str) else text
        except json.JSONDecodeError as e:
            raise SchemaError(f"answers_schema is not valid JSON ({e.msg} at character "
                              f"{e.pos})") from None
        if not isinstance(data, dict) or not data:
            raise SchemaError("answers_schema must be a non-empty JSON object of properties")
        required = ()
        if isinstance(data.get("properties"), dict):
            required = tuple(data.get("required", ()))
            data = data["properties"]
        for key, prop in data.items():
            if not isinstance(prop, dict):
                raise SchemaError(f"answers_schema: {key!r} must be an object like "
                                  '{"type": "string"}')
            kind = prop.get("type", "string" if "enum" in prop else None)
            if kind not in TYPES:
                raise SchemaError(f"answers_schema: {key!r} has type {kind!r}; the types are "
                                  f"{', '.join(TYPES)}")
            try:
                jsonschema.Draft202012Validator.check_schema(prop)
            except jsonschema.SchemaError as e:
                raise SchemaError(f"answers_schema: {key!r}: {e.message}") from None
        missing = [k for k in required if k not in data]
        if missing:
            raise SchemaError(f"answers_schema: required keys {missing} are not properties")
        return cls(dict(data), required or tuple(data))

    def kind(self, key: str) -> str:
        prop = self.properties[key]
        return prop.get("type", "string")

    def valid(self, key: str, value) -> bool:
        """Whether `value` passes `key`'s schema (types, enums, minimum/maximum, pattern)."""
        if key not in self.properties or value is None:
            return False
        if self.kind(key) == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        return jsonschema.Draft202012Validator(self.properties[key]).is_valid(value)

    def missing(self, answers: dict) -> list[str]:
        """The required keys not yet answered, in schema order."""
        return [k for k in self.required if k not in answers]

    def object_schema(self, keys: Iterable[str]) -> dict:
        """A JSON schema of an object holding some of `keys` (for constrained generation)."""
        return {"type": "object", "properties": {k: self.properties[k] for k in keys},
                "additionalProperties": False}

    def describe(self, keys: Iterable[str]) -> str:
        """The keys as the LLM reads them: `name (string): the person's first name`."""
        lines = []
        for k in keys:
            p = self.properties[k]
            extra = [f"one of {p['enum']}"] if "enum" in p else []
            extra += [f"{b} {p[b]}" for b in ("minimum", "maximum") if b in p]
            desc = p.get("description", "")
            lines.append(f"- {k} ({self.kind(k)}{', ' + ', '.join(extra) if extra else ''})"
                         f"{': ' + desc if desc else ''}")
        return "\n".join(lines)

    def what(self, key: str) -> str:
        """The key in words, for a follow-up question ("your name")."""
        desc = self.properties[key].get("description", "")
        return desc.rstrip(".") if desc else key.replace("_", " ")


def read_plainly(schema: AnswerSchema, keys: list[str], line: str) -> dict:
    """What the words of `line` decide alone (see the module docstring)."""
    out: dict = {}
    booleans = [k for k in keys if schema.kind(k) == "boolean"]
    if len(booleans) == 1:
        v = yes_or_no(line)
        if v is not None:
            out[booleans[0]] = v
    numeric = [k for k in keys if schema.kind(k) in ("integer", "number")
               and "enum" not in schema.properties[k]]
    nums = numbers_in(line)
    if len(numeric) == 1 and len(nums) == 1:
        k = numeric[0]
        v = int(nums[0]) if schema.kind(k) == "integer" and nums[0].is_integer() else nums[0]
        if schema.valid(k, v):
            out[k] = v
    low = f" {' '.join(_words(line))} "
    for k in keys:
        named = [e for e in schema.properties[k].get("enum", ())
                 if isinstance(e, str) and f" {e.lower()} " in low]
        if len(named) == 1:
            out[k] = named[0]
    return out


EXTRACT_SYSTEM = ("You fill in a form from what a person told a robot. Reply with one JSON object "
                  "and nothing else. Put in a key only when the person's words (or, for what "
                  "the person shows or holds, what the robot sees) give its value; leave out "
                  "every other key. Never guess.")


def extraction_messages(schema: AnswerSchema, keys: list[str], question: str,
                        lines: list[str], seen: str = "") -> list[dict]:
    """The LLM prompt that fills `keys` from the person's `lines` (and what the robot sees)."""
    said = "\n".join(f'- "{t}"' for t in lines)
    parts = [f"The robot asked: \"{question}\"", f"The person said:\n{said}"]
    if seen:
        parts.append(f"The robot sees: {seen}")
    parts.append(f"Keys:\n{schema.describe(keys)}")
    parts.append("JSON:")
    return [{"role": "system", "content": EXTRACT_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


def parse_json_object(text: str) -> dict:
    """The first JSON object in a model's text ({} if there is none)."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
        start = text.find("{", start + 1)
    return {}


def grounded(value: str, sources: Iterable[str]) -> bool:
    """Whether a free string's content words were said or seen (not made up by the model).

    A value of greetings and evasions alone ("Hello there", "I'd rather not say") is no answer,
    nor one that names nothing ("something behind").
    """
    words = [w for w in _words(value) if w not in _STOP]
    if not words or all(w in _SMALL_TALK for w in words) or words[0] in _INDEFINITE:
        return False
    heard = set()
    for s in sources:
        heard.update(_words(s))
    stems = {w.rstrip("s") for w in heard}
    return any(w in heard or w.rstrip("s") in stems for w in words)


def keep_valid(schema: AnswerSchema, keys: list[str], candidate: dict,
               sources: Iterable[str], yes_no_said: bool = False) -> dict:
    """The candidate's values for `keys` that pass their schema (and grounding, for strings).

    `yes_no_said`: a boolean only where a line answered it (`answered_yes_or_no`): a chat's
    lines may be about anything, an Ask's answer is to its question ("I have been here twice
    before." answers "Is this your first visit?").
    """
    sources = list(sources)
    out = {}
    for k in keys:
        if k not in candidate:
            continue
        v = candidate[k]
        if isinstance(v, str):
            v = " ".join(v.split()).strip(" .")
            if not v or v.lower() in ("unknown", "none", "null", "n/a"):
                continue
        if schema.kind(k) == "integer" and isinstance(v, float) and v.is_integer():
            v = int(v)
        if not schema.valid(k, v):
            continue
        if schema.kind(k) == "string" and not (
                named(v, sources) if "enum" in schema.properties[k] else grounded(v, sources)):
            continue
        if schema.kind(k) in ("integer", "number") and "enum" not in schema.properties[k] \
                and float(v) not in said_numbers(sources):
            continue
        if yes_no_said and schema.kind(k) == "boolean" and not answered_yes_or_no(k, sources):
            continue
        out[k] = v
    return out


CORRECTION_CUES = ("actually", "sorry", "i mean", "i meant", "wait", "mistake", "correction",
                   "rather", "instead", "make that")
"""Words with which a person corrects what they said before ("Oh wait, it's the sixth")."""


def corrects(line: str) -> bool:
    """Whether `line` has one of CORRECTION_CUES, as whole words."""
    said = f" {' '.join(_words(line))} "
    return any(f" {c} " in said for c in CORRECTION_CUES)


_YES_NO_WORDS = set("yes yeah yep yup sure no nope nah not never without fine gladly "
                    "ok okay alright".split())
"""Words that say yes or no to something (one of them in a line answers a yes/no result)."""


def answered_yes_or_no(key: str, sources: Iterable[str]) -> bool:
    """Whether a line says yes or no, or names what the result `key` is about, and asks nothing.

    A boolean nobody answered is a guess: "A table for four, under the name Omar." gave
    `window: false`, and "Hello, is there a tour today?" `tour: false` (the chat battery).
    """
    about = {w.rstrip("s") for w in _words(key.replace("_", " ")) if w not in _STOP}
    for line in sources:
        words = _words(line)
        if line.rstrip().endswith("?"):
            continue
        if about & {w.rstrip("s") for w in words}:
            return True
        if corrects(line):
            continue        # "Oh wait, no, it's the sixth floor.": its "no" corrects the floor
        if yes_or_no(line) is not None or _YES_NO_WORDS & set(words) or \
                any(w.endswith("n't") for w in words):
            return True
    return False


_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}


def said_numbers(sources: Iterable[str]) -> set[float]:
    """The numbers the lines say, in digits, in words or as ordinals ("the fourth floor").

    A number from the model that nobody said is a guess: behind llama.cpp's server the 1.5B
    filled `floor: 0` from "Hello! I am Zebulon." (benchmarks/chat_battery.yaml).
    """
    found: set[float] = set()
    for s in sources:
        found.update(numbers_in(s))
        found.update(float(_ORDINALS[w]) for w in _words(s) if w in _ORDINALS)
    return found


def named(choice: str, sources: Iterable[str]) -> bool:
    """Whether an enum's value was said, or a word it starts with ("physio": physiotherapist).

    The model must fill an enum from its list: to "Hmm, let me think." it chose "okay" from
    bad/okay/great (benchmarks/chat_battery.yaml). A value nobody named is a guess.
    """
    heard = {w.rstrip("s") for s in sources for w in _words(s)}
    return any(w.rstrip("s") in heard or any(len(h) >= 4 and w.startswith(h) for h in heard)
               for w in _words(choice))


def question_for(schema: AnswerSchema, keys: list[str]) -> str:
    """A plain question for `keys` when nobody wrote one (the LLM may word it better)."""
    whats = [schema.what(k) for k in keys]
    joined = whats[0] if len(whats) == 1 else ", ".join(whats[:-1]) + " and " + whats[-1]
    return f"Could you tell me {joined}?"


def follow_up(schema: AnswerSchema, keys: list[str], question: str = "") -> str:
    """The follow-up line when answers are still missing or were invalid.

    With nothing answered yet, the question itself again (`question`), as a person repeats
    what they asked: a yes/no question's description reads badly aloud ("whether the person
    agrees"), and a listener waiting for the question hears it.
    """
    return "Sorry, I did not get that. " + (question or question_for(schema, keys))
