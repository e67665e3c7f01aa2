"""The tool-call loop: Visual ChatGPT's tools offered to the LLM as OpenAI function tools.

ROS-free. Given a backend with ``complete_with_tools`` (see core/llm_client.py), the reply
prompt, the tool schemas and an executor ``run_tool(name, args) -> ToolOutcome``,
`run_tool_loop` lets the LLM call tools for up to ``max_rounds`` rounds and returns its final
reply text:

    round k: ask the LLM (tools offered) -> no tool calls: its text is the reply
             -> tool calls: append the assistant message with its calls, run each tool,
                append one `tool` message per call (the result text, "The new image is
                <file>." or "Error: ..."), optionally followed by one `user` message that
                shows the new images to a vision LLM; next round.
    after max_rounds rounds of calls: one last request with tool_choice="none" and a note
    asking for the answer now.

Failures never raise out of a tool: an unknown tool name, missing/invalid arguments, a tool
error or timeout all go back to the LLM as a tool message starting with "Error:", so it can
say so in character. An LLM failure (BackendError) does raise; the caller falls back.

`tool_schemas(infos)` turns the VFM server's ToolInfo list (anything with name, op,
action_type, description, status) into function specs named by the tool's op id (``vqa``,
``pix2pix``, ``text2image``, ...), keeping only usable tools (status "ready"/"not loaded").
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

__all__ = ["ToolOutcome", "ToolRecord", "AgentResult", "run_tool_loop", "tool_schemas",
           "usable", "TOOLS_NOTE", "FINAL_NOTE", "IMAGE_TO_TEXT", "IMAGE_TO_IMAGE",
           "TEXT_TO_IMAGE"]

_log = logging.getLogger("vision_dialogue.tool_agent")

IMAGE_TO_TEXT = "image_to_text"
IMAGE_TO_IMAGE = "image_to_image"
TEXT_TO_IMAGE = "text_to_image"
_ACTION_TYPES = (IMAGE_TO_TEXT, IMAGE_TO_IMAGE, TEXT_TO_IMAGE)

#: Tool statuses that mean the tool can be called (models load lazily on first use).
USABLE_STATUS = ("ready", "not loaded")

#: System note added to the reply prompt when tools are offered.
TOOLS_NOTE = (
    "You have tools that look closer at what you see or make pictures (function calls). "
    "Use one only when the person asks for something you cannot do by just looking, e.g. "
    "reading small text, editing or drawing a picture. Without image_file a tool works on "
    "what you see now (your eyes). Every image a tool makes gets a file name such as "
    "\"3f2a_pix2pix_1b2c_1b2c.png\"; give that name as image_file to work on it again, and "
    "never invent a file name. Do not read file names out loud: talk about the picture. "
    "If a tool reports an error, tell the person in your own words, in character.")

#: Note added before the last request once the round limit is reached.
FINAL_NOTE = ("[No more tools this turn. Answer the person now, in character, with what you "
              "have.]")

_INPUT_SENTENCE = re.compile(r"\s*The input to this tool should be[^.]*\.", re.IGNORECASE)
_RECEIVES = re.compile(r"\s*receives image_file as input\.", re.IGNORECASE)


@dataclass
class ToolOutcome:
    """What a tool gave back: `text` (image-to-text), `image_file` (a new image in the store),
    or `error` (anything that went wrong). `image_url`: optional data URL of the new image,
    shown to a vision LLM after the tool message."""
    text: str | None = None
    image_file: str | None = None
    error: str | None = None
    image_url: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def message(self) -> str:
        """The tool message content the LLM reads."""
        if self.error is not None:
            return (f"Error: {self.error}. The tool did not work; tell the person in your own "
                    "words.")
        if self.image_file:
            extra = f" {self.text}" if self.text else ""
            return f"The new image is {self.image_file}.{extra}"
        return self.text if self.text else "(the tool returned nothing)"


@dataclass
class ToolRecord:
    """One tool call of a turn, for logs, transcripts and the dialogue memory."""
    call_id: str
    name: str
    arguments: dict
    outcome: ToolOutcome


@dataclass
class AgentResult:
    """Final reply text, rounds used, every tool call made, the messages of the exchange
    (prompt + assistant/tool messages + the final answer's request), and whether the round
    limit was hit."""
    text: str
    rounds: int
    records: list[ToolRecord] = field(default_factory=list)
    messages: list = field(default_factory=list)
    hit_limit: bool = False

    def images(self) -> list[str]:
        """File names of the images the tools made this turn, in order."""
        return [r.outcome.image_file for r in self.records
                if r.outcome.ok and r.outcome.image_file]

    def memory_note(self) -> str:
        """A short bracketed note for the dialogue memory naming the images made, so later
        turns can refer to them ("" when none)."""
        made = [f"{r.outcome.image_file} ({r.name})" for r in self.records
                if r.outcome.ok and r.outcome.image_file]
        return f"[Images I made: {', '.join(made)}]" if made else ""


# --- schemas ---------------------------------------------------------------------------------
def _get(info: Any, key: str, default: Any = "") -> Any:
    if isinstance(info, dict):
        return info.get(key, default)
    return getattr(info, key, default)


def usable(info: Any) -> bool:
    """Whether a ToolInfo-like entry can be offered (known action type, usable status)."""
    return (str(_get(info, "action_type")) in _ACTION_TYPES and bool(_get(info, "op"))
            and str(_get(info, "status", "ready")).strip().lower() in USABLE_STATUS)


def _needs_text(op: str, description: str) -> bool:
    try:  # the registry knows exactly; it is ROS-free
        from vision_dialogue.vfm.registry import BY_OP
        if op in BY_OP:
            return BY_OP[op].needs_text
    except ImportError:  # pragma: no cover - registry always ships with the package
        pass
    return "comma separated string of two" in description


def _text_meaning(description: str) -> str:
    m = re.search(r"representing the image_file and (.+?)(?: \(in English\))?\.", description)
    return m.group(1) if m else "the text the tool needs"


def tool_schemas(infos: Iterable[Any]) -> list[dict]:
    """OpenAI function specs for the usable tools in `infos` (ToolInfo messages or dicts).

    Function name: the op id. Description: the tool's name and usage text with Visual
    ChatGPT's "input should be a comma separated string" sentence replaced by the JSON
    parameters: image tools take an optional ``image_file`` (default: what the robot sees now)
    and, when the tool needs it, a required ``text``; text-to-image tools a required ``text``.
    """
    specs = []
    seen = set()
    for info in infos:
        if not usable(info):
            continue
        op = str(_get(info, "op"))
        if op in seen or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", op):
            continue
        seen.add(op)
        kind = str(_get(info, "action_type"))
        raw = str(_get(info, "description"))
        desc = _RECEIVES.sub("", _INPUT_SENTENCE.sub("", raw)).strip()
        name = str(_get(info, "name")) or op
        props: dict = {}
        required: list[str] = []
        if kind == TEXT_TO_IMAGE:
            props["text"] = {"type": "string",
                             "description": "What to draw, in English."}
            required.append("text")
        else:
            props["image_file"] = {
                "type": "string",
                "description": "File name of an image from an earlier tool result or one the "
                               "person shared; leave it out to use what you see now."}
            if _needs_text(op, raw):
                props["text"] = {"type": "string",
                                 "description": f"{_text_meaning(raw).capitalize()}, in English."}
                required.append("text")
        specs.append({"type": "function", "function": {
            "name": op, "description": f"{name}: {desc}"[:1024],
            "parameters": {"type": "object", "properties": props, "required": required,
                           "additionalProperties": False}}})
    return specs


def _check_args(schema: dict, args: dict) -> str | None:
    params = schema["function"].get("parameters", {})
    props = params.get("properties", {})
    for key in params.get("required", []):
        v = args.get(key)
        if not isinstance(v, str) or not v.strip():
            return f"missing argument {key!r} ({props.get(key, {}).get('description', '')})"
    for key, v in args.items():
        if key not in props:
            return f"unknown argument {key!r}; this tool takes {', '.join(props) or 'none'}"
        if v is not None and not isinstance(v, str):
            return f"argument {key!r} must be a string"
    return None


# --- the loop --------------------------------------------------------------------------------
def run_tool_loop(backend: Any, messages: Sequence[dict], tools: Sequence[dict],
                  run_tool: Callable[[str, dict], ToolOutcome], *, max_rounds: int = 3,
                  model: str | None = None, max_tokens: int | None = None,
                  image_parts: bool = False, image_detail: str = "low",
                  on_tool: Callable[[ToolRecord], None] | None = None,
                  logger: Any = None) -> AgentResult:
    """Let the LLM call `tools` for at most `max_rounds` rounds, then return its reply.

    backend.complete_with_tools(messages, tools, model=, tool_choice=, max_tokens=) ->
    (text, [ToolCall(id, name, arguments)]). `run_tool(name, args)` runs one tool and returns
    a ToolOutcome; it may raise, which counts as a tool error. `image_parts`: after the tool
    messages of a round, add one user message with the new images (their `image_url`) so a
    vision LLM sees them. `on_tool(record)` is called after every tool call.
    Raises BackendError (from the backend) when an LLM request fails, ValueError for
    max_rounds < 0.
    """
    if max_rounds < 0:
        raise ValueError(f"max_rounds={max_rounds} must be >= 0")
    log = logger or _log
    by_name = {t["function"]["name"]: t for t in tools}
    msgs = list(messages)
    result = AgentResult("", 0, messages=msgs)
    for round_no in range(1, max_rounds + 1):
        text, calls = backend.complete_with_tools(msgs, tools, model=model, tool_choice="auto",
                                                  max_tokens=max_tokens)
        result.rounds = round_no
        if not calls:
            result.text = text
            return result
        msgs.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": c.id or f"call_{round_no}_{k}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for k, c in enumerate(calls)]})
        shown: list = []
        for k, c in enumerate(calls):
            call_id = c.id or f"call_{round_no}_{k}"
            outcome = _run_one(by_name, run_tool, c.name, dict(c.arguments), log)
            rec = ToolRecord(call_id, c.name, dict(c.arguments), outcome)
            result.records.append(rec)
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": outcome.message()})
            if on_tool is not None:
                try:
                    on_tool(rec)
                except Exception as e:  # noqa: BLE001 - a listener must not break the turn
                    log.error(f"tool listener failed: {e}")
            if image_parts and outcome.ok and outcome.image_file and outcome.image_url:
                shown.append({"type": "text", "text": f"[The image {outcome.image_file}:]"})
                shown.append({"type": "image_url", "image_url": {"url": outcome.image_url,
                                                                 "detail": image_detail}})
        if shown:
            msgs.append({"role": "user", "content": shown})
    # round limit reached (or no rounds allowed): one last answer without tools
    result.hit_limit = max_rounds > 0
    if result.hit_limit:
        log.warning(f"tool round limit ({max_rounds}) reached; asking for the answer now")
    msgs.append({"role": "system", "content": FINAL_NOTE})
    text, calls = backend.complete_with_tools(msgs, tools, model=model, tool_choice="none",
                                              max_tokens=max_tokens)
    if calls:
        log.warning(f"ignoring {len(calls)} tool call(s) after the round limit")
    result.rounds += 1
    result.text = text
    return result


def _run_one(by_name: dict, run_tool: Callable[[str, dict], ToolOutcome], name: str,
             args: dict, log: Any) -> ToolOutcome:
    schema = by_name.get(name)
    if schema is None:
        known = ", ".join(by_name) or "none"
        log.warning(f"the LLM called an unknown tool {name!r}")
        return ToolOutcome(error=f"there is no tool named {name!r}; the tools are: {known}")
    err = _check_args(schema, args)
    if err:
        log.warning(f"tool {name}: {err}")
        return ToolOutcome(error=f"{name}: {err}")
    args = {k: v.strip() for k, v in args.items() if isinstance(v, str) and v.strip()}
    try:
        out = run_tool(name, args)
    except Exception as e:  # noqa: BLE001 - a tool failure goes back to the LLM
        log.error(f"tool {name} raised {type(e).__name__}: {e}")
        return ToolOutcome(error=f"{name} failed: {e}")
    if not isinstance(out, ToolOutcome):
        return ToolOutcome(error=f"{name} returned no result")
    return out
