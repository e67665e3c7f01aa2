"""The robot's persona and instructions, loaded from a YAML file (config/persona.yaml)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Sequence

import yaml

from vision_dialogue.common.resources import config_file

PERSONA_FILE = "persona.yaml"


class PersonaError(ValueError):
    """The persona file is missing, unreadable or lacks a required key."""


@dataclass(frozen=True)
class Persona:
    """All texts the conversation core sends to the LLM or says itself."""

    system: str
    summary_instruction: str
    history_instruction: str
    no_frames_note: str
    dark_frames_note: str
    fallback_lines: tuple[str, ...]
    lost_frames_marker: str = "Something happened here that I did not catch."
    pending_frames_marker: str = "a few moments I am still thinking over"
    greet_instruction: str = ("Now say hello to the person in front of you, in one sentence, "
                              "and tell them what you like about what they wear.")
    greet_fallback_lines: tuple[str, ...] = ("Oh, hello there!", "Hi! It is nice to see you.")
    # the opening remark when people the robot knows are in view (a person manager named them:
    # people_node's enrolled people); {names}: how to call them. ("Now say hello to {names}
    # by name, in one sentence: you have met before." made the 0.5B default read out the
    # people note before it instead, every time: test_memory_process.py)
    greet_known_instruction: str = ("Greet {names} by name in one sentence, as someone "
                                    "you have met before.")
    # short: the 0.5B default read a longer note out ("Ben said the last line.") on 7 of 8
    # turns of the people battery; this one it never did
    addressee_note: str = "[Answer {speaker}.]"
    people_note: str = "[People your camera tracks now: {people}.]"
    arrival_instruction: str = ("Someone just came into view. Greet them in one short, "
                                "friendly sentence.")
    scene_instruction: str = ("What you see just changed. Say one short sentence about what "
                              "is new, as a curious friend would.")
    camera_lost_note: str = ("[Your eyes stopped working a while ago: you cannot see anything "
                             "right now. If it matters, say you cannot see at the moment.]")
    blind_lines: tuple[str, ...] = (
        "I cannot see anything right now, my eyes are not working.",)
    # said in place of a claim to see the person ("Yes, I can still see you") or someone
    # ("there are people here", then a line with "anyone") when the newest frame's observer
    # counted nobody (a small model says it whatever the notes say)
    nobody_lines: tuple[str, ...] = (
        "No, I do not see you right now.", "I cannot see you at the moment, where did you go?",
        "No, I do not see anyone here right now.")
    frame_label: str = "What you see now (your eyes):"
    summary_label: str = "Earlier you saw:"
    event_label: str = "You noticed:"
    objects_label: str = "An object detector named in it:"
    wave_instruction: str = ("Someone just waved at you. Say hello back to them in one "
                             "short, friendly sentence.")
    history_label: str = "What happened earlier in this conversation:"
    # the second try after a reply that only repeated an earlier one (avoid_repeats); the
    # repeated line is not quoted: a small model copies what it reads last
    repeat_note: str = ("[You already said that. Answer the person again, in other words, "
                        "with something new.]")
    # the second try after a reply that only read the prompt's notes out
    own_words_note: str = "[Do not read your notes out. Answer the person in your own words.]"
    # the second try after a reply that said the robot did something no tool ran ("I went to
    # the library yesterday." to the person's "I went to the library yesterday."). The second
    # try may speak of "the person", or claim it again ("I went there yesterday.": the
    # fallback line); a note asking for "you" did the same (bench_robot_tools --session)
    not_done_note: str = ("[You did not do that: the person told you about it. Reply to "
                          "them about it in your own words, without saying that you did it.]")
    # the second try after an answer that took the other side of the robot's earlier line on
    # what it likes, or of its earlier yes or no to what is asked again (core/opinions.py);
    # {side}: "that you like it", "that you do not like it", "yes to this" or "no to this".
    # The line is not quoted: a small model copies what it reads last (a repeat of the
    # greeting)
    consistent_note: str = "[Earlier you said {side}. Answer the same way now, in new words.]"
    # said when the second try took the other side too (was the fallback line): the side
    # the robot took, kept
    kept_yes_line: str = "Yes, as I said before."
    kept_no_line: str = "No, as I said before."
    # the second try after "I don't have a favourite colour." to "What is your favourite
    # colour?" (core/opinions.gives_no_favourite): said anyway if the second try has none
    favourite_note: str = "[You do have favourites, like any child. Pick one now and name it.]"
    # skills (application/skills.py): the purpose of a Chat, what the robot can be asked to do
    # (intents), the Chat's opening line when the role has none
    purpose_note: str = "[Your purpose in this conversation ({name}): {instruction}]"
    abilities_note: str = ("[If the person asks you to do one of these, say briefly that you "
                           "will: {abilities}.]")
    # a Chat's opening when the role has none: "Start the conversation now ... for your
    # purpose" was answered with the purpose read out ("I'm looking for the visitor's name
    # and which floor they need to go to."); the needs note says what to ask for first
    chat_opening_instruction: str = ("Greet the person and ask them your first question, in "
                                     "one short sentence.")
    # before the person's line while a Chat's results are missing (application/skills.run_chat);
    # {needs}: what is still missing, in the results' own descriptions
    needs_note: str = "[Still to find out from the person: {needs}. Ask for the first one.]"
    ask_wording_instruction: str = ("Ask the person, in one short friendly question, for: "
                                    "{keys}. Say only the question.")
    extra: dict = field(default_factory=dict)

    def greeting(self, names: Sequence[str] = ()) -> str:
        """The opening remark's instruction: by name for the people it knows in view."""
        if not names:
            return self.greet_instruction
        return self.greet_known_instruction.format(names=" and ".join(names))

    def fallback(self, rng: random.Random | None = None, greeting: bool = False) -> str:
        """One in-character line for when the LLM fails (`greeting`: for the opening remark)."""
        return (rng or random).choice(self.greet_fallback_lines if greeting
                                      else self.fallback_lines)


#: words a bare greeting starts with ("Hello!", "Hi there.")
SALUTATIONS = ("hello", "hi", "hey", "good morning", "good afternoon", "good evening",
               "welcome back", "welcome", "greetings")


def addressed(sentence: str, names: Sequence[str]) -> str:
    """A known person's greeting, first sentence: as it is if it names them, else with names.

    The small default sometimes greeted a known person without their name (a suite run:
    "Hello! I'm a robot, not a real person."); a robot that knows someone says their name.
    A bare salutation gets the names ("Hello!" -> "Hello, Barack!"); any other sentence
    comes after one ("Hello, Barack! I'm here to help.").
    """
    if not names or any(name.lower() in sentence.lower() for name in names):
        return sentence
    who = " and ".join(names)
    bare = sentence.strip().rstrip("!.?,").strip()
    hello = next((h for h in SALUTATIONS if bare.lower() == h or
                  bare.lower().startswith(h + " ") and len(bare.split()) <= len(h.split()) + 1),
                 None)
    if hello is not None:
        return f"{bare[:len(hello)]}, {who}!"
    return f"Hello, {who}! {sentence}"


LINE_LISTS = ("fallback_lines", "greet_fallback_lines", "blind_lines",
              "nobody_lines")   # keys holding lists
REQUIRED = ("system", "summary_instruction", "history_instruction", "no_frames_note",
            "dark_frames_note", "fallback_lines")


def default_persona_file() -> Path:
    """The packaged config/persona.yaml (source checkout, else the install's share/)."""
    return config_file(PERSONA_FILE)


def load_persona(path: str | Path | None = None) -> Persona:
    """Read a persona YAML file (default: the packaged config/persona.yaml)."""
    p = Path(path) if path else default_persona_file()
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise PersonaError(f"persona_file {str(p)!r}: cannot read ({e})") from None
    except yaml.YAMLError as e:
        raise PersonaError(f"persona_file {str(p)!r}: invalid YAML ({e})") from None
    if not isinstance(data, dict):
        raise PersonaError(f"persona_file {str(p)!r}: expected a mapping at the top level")
    missing = [k for k in REQUIRED if not data.get(k)]
    if missing:
        raise PersonaError(f"persona_file {str(p)!r}: missing keys {missing}")
    lists = {k: _lines(p, k, data[k]) for k in LINE_LISTS if k in data}
    known = {f.name for f in fields(Persona)} - {"extra", *LINE_LISTS}
    kw = {k: str(v).strip() for k, v in data.items() if k in known}
    extra = {k: v for k, v in data.items() if k not in known and k not in LINE_LISTS}
    return Persona(extra=extra, **lists, **kw)


def _lines(path: Path, key: str, lines) -> tuple[str, ...]:
    """A persona key holding one or more lines, as a tuple (PersonaError if malformed)."""
    if isinstance(lines, str):
        lines = [lines]
    if not lines or not isinstance(lines, list) or \
            not all(isinstance(x, str) and x.strip() for x in lines):
        raise PersonaError(f"persona_file {str(path)!r}: {key} must be a list of texts")
    return tuple(x.strip() for x in lines)


#: the language of the persona's own lines and instructions
PERSONA_LANGUAGE = "en"
#: ISO 639-1 code -> English name, to ask for a reply in the language the user spoke
LANGUAGE_NAMES = {
    "ar": "Arabic", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "es": "Spanish", "fi": "Finnish", "fr": "French", "he": "Hebrew",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}


def language_instruction(language: str) -> str:
    """A system note asking for the reply in the user's language; "" for the persona's own."""
    code = language.split("-")[0].strip().lower()
    if not code or code == PERSONA_LANGUAGE:
        return ""
    name = LANGUAGE_NAMES.get(code, f"the language with code {code!r}")
    return f"The person speaks {name}: answer in {name}, briefly."
