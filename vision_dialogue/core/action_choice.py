"""Whether the person asks the robot to act, decided before the reply on a short prompt (ROS-free).

A small local model offered the robot's tools inside a session's prompt calls one on the first
request and, after that, copies its earlier replies ("I will go to the kitchen.") instead of
calling. So a backend with `simple_tool_use` decides on a prompt with no history: the
person's line and the declared actions, its answer JSON constrained to their names and
arguments (the reader of the application's intents, llm/intent_reader.IntentReader, with its cheap
word test first, so most small talk never reaches the model). The call it chooses runs as the
turn's tool call, and the reply is written with its result (llm/tool_loop.py `decided`);
"none" answers without a call. Arguments are kept only when the person said them.
"""
from __future__ import annotations

import itertools
import re
from typing import Callable, Sequence

from vision_dialogue.llm.answers import AnswerSchema, SchemaError
from vision_dialogue.llm.intent_reader import REQUEST_CUES, IntentReader, IntentSpec
from vision_dialogue.llm.written_calls import ToolCall

ACTION_SYSTEM = ('You decide whether a person asks a robot to do something now. The robot can '
                 'do only these things:\n{catalog}\n\nReply with one JSON object and nothing '
                 'else: {{"intent": "<one name above, or none>", "arguments": {{...}}}}. Say '
                 '"none" when the person does not ask the robot to do one of them now: a '
                 'question about where something is or what the robot likes, small talk, '
                 'something the person did, or something else. Put in an argument only when '
                 'the person said it.')

ACTION_CUES = tuple(c for c in REQUEST_CUES if not c.startswith("where"))
"""The word test's request phrases: "Where is the kitchen?" asks the way, not for a walk (an
application's guide intent may take it; the robot's go_to should not)."""

_ids = itertools.count(1)


def action_specs(schemas: Sequence[dict]) -> list[IntentSpec]:
    """The robot's tools (OpenAI function specs) as intents.

    SchemaError for an argument type the reader cannot fill (the reply then decides).
    """
    specs = []
    for s in schemas:
        f = s["function"]
        params = f.get("parameters") or {}
        props = params.get("properties") or {}
        args = AnswerSchema.parse({"properties": props, "required": params.get("required", [])}) \
            if props else None
        specs.append(IntentSpec(f["name"], f.get("description", ""), args))
    return specs


class ActionChooser:
    """The robot action a line asks for, from a history-free prompt (see the module docstring).

    `ask_llm(messages, max_tokens=, json_schema=)` is one completion.
    """

    def __init__(self, schemas: Sequence[dict], ask_llm: Callable[..., str], logger=None):
        self.reader = IntentReader(action_specs(schemas), ask_llm, logger, system=ACTION_SYSTEM,
                                   cues=ACTION_CUES, strict=False)

    def choose(self, line: str) -> list[ToolCall]:
        """The call `line` asks for ([] for none): BackendError from the LLM propagates."""
        found = self.reader.read(line)
        if found is None:
            return []
        return [ToolCall(f"choice_{next(_ids)}", found.intent, dict(found.data))]


def chooser_for(schemas: Sequence[dict], ask_llm: Callable[..., str],
                logger=None) -> ActionChooser | None:
    """An ActionChooser for these tools, or None when one of them cannot be chosen this way."""
    try:
        return ActionChooser(schemas, ask_llm, logger)
    except SchemaError as e:
        if logger is not None:
            logger.info(f"robot actions decided in the reply ({e})")
        return None


_CLAIM_LEAD = (r"\bI(?:'ll|'m going to|'m|'ve)?"
               r"(?:\s+(?:will|shall|am going to|am|have|just|already|now))*")
_PAST = {"go": "went|gone|going", "bring": "brought|bringing", "take": "took|taken|taking",
         "get": "got|getting", "show": "showed|shown|showing", "come": "came|coming",
         "run": "ran|running", "swing": "swung|swinging"}


def claims_action(text: str, verbs: Sequence[str]) -> bool:
    """Whether `text` says, as "I", that the robot did or will now do one of `verbs`.

    "I waved", "I'll go to the kitchen", "I am nodding": a reply that claims an action no tool
    ran is wrong (the benchmark counts it so).
    """
    forms = []
    for v in {v.lower() for v in verbs if len(v) > 1}:
        stem = v[:-1] if v.endswith("e") else v
        doubled = v + v[-1] if re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwy]", v) else v
        forms += [v, v + "s", stem + "ed", stem + "ing", doubled + "ed", doubled + "ing"]
        forms += _PAST.get(v, "").split("|")
    forms = sorted({f for f in forms if f}, key=len, reverse=True)
    if not forms:
        return False
    pattern = _CLAIM_LEAD + r"\s+(?:" + "|".join(map(re.escape, forms)) + r")\b"
    return re.search(pattern, text, re.I) is not None
