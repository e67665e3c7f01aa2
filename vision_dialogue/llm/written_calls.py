"""Tool calls a model writes as text, and speech that holds such text back (ROS-free).

Small local models (and llama.cpp's server with `tool_choice="auto"`) write a call as text: a
JSON object `{"name": ..., "arguments": {...}}`, or Qwen/Hermes `<tool_call>` tags, instead of
`tool_calls`. Both the OpenAI-compatible backend and the in-process llama.cpp backend read them
here, and never speak them: `HeldSpeech` holds back a reply that starts like one.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Sequence

from vision_dialogue.llm.sentences import SentenceSplitter, speech_splitter


@dataclass(frozen=True)
class ToolCall:
    """One function call requested by the model: `arguments` is the parsed JSON object."""

    id: str
    name: str
    arguments: dict = field(default_factory=dict)


def tool_names(tools: Sequence[dict]) -> set[str]:
    return {t.get("function", {}).get("name", "") for t in tools} - {""}


_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def calls_written_as_text(text: str, names: set[str]) -> tuple[str, list[tuple[str, str, str]]]:
    """Tool calls a model wrote as text instead of `tool_calls`: (text left, raw calls).

    Recognised: the whole reply being a JSON object `{"name": N, "arguments": {...}}` (or
    "parameters"), or a list of them, optionally in a json code fence; and Qwen/Hermes
    `<tool_call>{...}</tool_call>` tags anywhere (the text around them is kept). Only names of
    offered tools count; anything else stays text. The object may sit in doubled braces
    (`{{"name": ...}}}}`): Qwen's template shows the form that way, and a small model copies it.
    Text after a leading call is dropped: it guesses how the call went, before it ran.
    """
    def parse(blob: str) -> list[tuple[str, str, str]] | None:
        try:
            data = json.loads(blob)
        except ValueError:
            data, rest = _leading(blob)
            if data is None or rest:
                return None
        items = data if isinstance(data, list) else [data]
        out = []
        for k, item in enumerate(items):
            if not isinstance(item, dict) or item.get("name") not in names:
                return None
            args = item.get("arguments", item.get("parameters", {}))
            out.append((f"call_text_{k}", item["name"],
                        args if isinstance(args, str) else json.dumps(args)))
        return out or None

    stripped = text.strip()
    if "<tool_call>" in stripped:
        found = [parse(m) for m in _TAGGED.findall(stripped)]
        if found and all(found):
            rest = _TAGGED.sub(" ", stripped)
            return " ".join(rest.split()), [c for group in found for c in group]
        return text, []
    fenced = _FENCED.match(stripped)
    whole = parse(fenced.group(1) if fenced else stripped) if stripped[:1] in "{[`" else None
    if whole:
        return "", whole
    first, rest = _leading(stripped)
    if first is not None and rest and parse(json.dumps(first)):
        return "", parse(json.dumps(first))      # what follows the call guesses its outcome
    return text, []


def _leading(blob: str) -> tuple[dict | None, str]:
    """A call object at the start of `blob`, in extra braces or not, and the text after it.

    As in `{{"name": "wave", "arguments": {}}}} I waved.` (None, "" when there is none).
    """
    start = blob.find('{"name"')
    if start < 0 or blob[:start].strip("{ \n") != "":
        return None, ""
    try:
        data, end = json.JSONDecoder().raw_decode(blob, start)
    except ValueError:
        return None, ""
    return (data, blob[end:].lstrip("} \n").strip()) if isinstance(data, dict) else (None, "")


class HeldSpeech:
    """Sentences of a streamed reply, holding back what may be a tool call written as text.

    Such text starts with `{`, `[`, a json code fence or `<tool_call>`; it is held until the end.
    """

    def __init__(self, names: set[str]):
        self.names, self.text, self.splitter = names, "", speech_splitter()
        self.held: bool | None = None if names else False     # None: not decided yet

    def feed(self, piece: str) -> list[str]:
        if not piece:
            return []
        self.text += piece
        if self.held is None:
            head = self.text.lstrip()
            if not head:
                return []
            if head[0] in "{[`<":
                if len(head) < 11 and "<tool_call>".startswith(head):
                    return []          # could still become a tag
                self.held = head[0] != "<" or head.startswith("<tool_call>")
            else:
                self.held = False
            if not self.held:
                return list(self.splitter.feed(self.text))
            return []
        if self.held:
            return []
        return list(self.splitter.feed(piece))

    def finish(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """(sentences still to say, calls written as text)."""
        if self.held is False:
            return list(self.splitter.flush()), []
        rest, calls = calls_written_as_text(self.text, self.names)
        if self.held is None or not calls:
            rest = self.text
        splitter = SentenceSplitter()
        return list(splitter.feed(rest)) + list(splitter.flush()), calls


def written_tool_calls(raw: list[tuple[str, str, str]]) -> list[ToolCall]:
    """The ToolCalls of `calls_written_as_text`'s raw calls (their JSON was checked there)."""
    calls = []
    for call_id, name, arguments in raw:
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            continue
        calls.append(ToolCall(call_id, name, parsed if isinstance(parsed, dict) else {}))
    return calls
