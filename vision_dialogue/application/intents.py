"""What the person asks the robot to do, as intents a YAML file declares (ROS-free).

The robot's application declares its intents (the manager's `intents_file`)::

    intents:
      - name: guide                              # what is published as Intent.intent
        description: Take the person to a place in the building.
        arguments:                               # JSON-schema properties (may be {})
          place: {type: string, description: the place to go to}
        required: [place]                        # default: every argument
        examples: ["Can you take me to the kitchen?"]
        priority: 128                            # the Intent's priority (default 128)

Each of the person's lines is read before the robot answers it (`LineIntents`, on the turn
worker: the intent comes from its own line, published before the reply and before the next
line), and `IntentReader.read(line, earlier)` finds at most one declared intent:

1. a cheap word test drops lines that neither ask for something nor share a word with any
   intent (most small talk never reaches the LLM);
2. the LLM picks one intent name or "none" and fills its arguments as JSON (constrained to the
   schema where the backend can); a line that refers back ("take me there") is shown with the
   lines before it, and only then may an argument come from them;
3. the arguments pass the declared schema and are grounded in the line (answers.keep_valid);
   an intent whose required arguments are missing is not published.

No intent is invented: a name that is not declared, or "none", gives nothing.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Sequence

from vision_dialogue.common.resources import declared_list
from vision_dialogue.core.timeline import USER, Timeline
from vision_dialogue.llm.answers import AnswerSchema, SchemaError
from vision_dialogue.llm.intent_reader import FoundIntent, IntentReader, IntentSpec

RECENT_LINES = 4
"""How many lines before a line that refers back the reader is shown."""


class IntentsError(ValueError):
    """An unreadable or invalid intents file; the message names the file and the problem."""


def load_intents(path: str | Path) -> list[IntentSpec]:
    """Read and check an intents file (see the module docstring); raises IntentsError."""
    p, items = declared_list(path, "intents", IntentsError, bare=True)
    specs, names = [], set()
    for i, item in enumerate(items):
        where = f"{p}: intent {i + 1}"
        if not isinstance(item, dict):
            raise IntentsError(f"{where}: must be a mapping with name and description")
        unknown = set(item) - {"name", "description", "arguments", "required", "examples",
                               "priority"}
        if unknown:
            raise IntentsError(f"{where}: unknown keys {sorted(unknown)}")
        name, desc = str(item.get("name", "")).strip(), str(item.get("description", "")).strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name == "none":
            raise IntentsError(f"{where}: name {name!r} must be an identifier (not 'none')")
        if name in names:
            raise IntentsError(f"{where}: {name!r} is declared twice")
        if not desc:
            raise IntentsError(f"{where} ({name}): needs a description")
        args = None
        if item.get("arguments"):
            try:
                args = AnswerSchema.parse({"properties": item["arguments"],
                                           "required": item.get("required",
                                                                list(item["arguments"]))})
            except SchemaError as e:
                raise IntentsError(f"{where} ({name}): {e}") from None
        priority = item.get("priority", 128)
        if not isinstance(priority, int) or not 0 <= priority <= 255:
            raise IntentsError(f"{where} ({name}): priority must be an integer 0..255")
        names.add(name)
        specs.append(IntentSpec(name, desc, args, tuple(map(str, item.get("examples", ()))),
                                priority))
    return specs


def recent_lines(timeline: Timeline, count: int = RECENT_LINES) -> list[str]:
    """The last dialogue lines as IntentReader.read's `earlier`.

    `timeline`: a Timeline, or anything with its `last_lines(count)` (a Conversation).
    """
    return [f"{'person' if it.role == USER else 'robot'}: {it.text}"
            for it in timeline.last_lines(count)]


class LineIntents:
    """Each person's line read for an intent before its reply, and what is found handed on.

    `recent()`: the conversation's last lines before this one (IntentReader.read's
    `earlier`); `publish(found, line, speaker)`: the intent out (the manager's `intents`
    topic); `warm(messages)`: read the question's fixed start now, before the first line
    (PromptWarmer.side_soon). An LLM failure is logged and gives no intent: the conversation
    goes on.
    """

    def __init__(self, reader: IntentReader, recent: Callable[[], Sequence[str]],
                 publish: Callable[[FoundIntent, str, str], None], logger=None,
                 warm: Callable[[list], None] | None = None):
        self.reader, self.recent, self.publish, self.log = reader, recent, publish, logger
        if warm is not None:
            warm(reader.messages(""))

    def read(self, line: str, speaker: str = "") -> FoundIntent | None:
        """The intent `line` asks for, published; None when it asks for none (or failed)."""
        try:
            found = self.reader.read(line, self.recent())
        except Exception as e:  # noqa: BLE001 - no intent, the conversation goes on
            if self.log is not None:
                self.log.warning(f"intent not read ({type(e).__name__}: {e})")
            return None
        if found is not None:
            self.publish(found, line, speaker)
        return found
