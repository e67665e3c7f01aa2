"""The VFM server's tools as OpenAI function specs, for the LLM's tool-call loop (ROS-free).

`tool_schemas(infos)` turns the VFM server's ToolInfo list (anything with name, op,
action_type, description, status) into function specs named by the tool's op id (``vqa``,
``pix2pix``, ``text2image``, ...), keeping only usable tools (status "ready"/"not loaded").
Their arguments: image tools take an optional ``image_file`` (default: what the robot sees
now) and, when the tool needs it, a required ``text``; text-to-image tools a required
``text``. llm/tool_loop.py checks calls against these specs.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from vision_dialogue.vfm.registry import ACTION_TYPES, BY_OP, TEXT_TO_IMAGE

#: Tool statuses that mean the tool can be called (models load lazily on first use).
USABLE_STATUS = ("ready", "not loaded")

_INPUT_SENTENCE = re.compile(r"\s*The input to this tool should be[^.]*\.", re.IGNORECASE)
_RECEIVES = re.compile(r"\s*receives image_file as input\.", re.IGNORECASE)


def _get(info: Any, key: str, default: Any = "") -> Any:
    if isinstance(info, dict):
        return info.get(key, default)
    return getattr(info, key, default)


def usable(info: Any) -> bool:
    """Whether a ToolInfo-like entry can be offered (known action type, usable status)."""
    return (str(_get(info, "action_type")) in ACTION_TYPES and bool(_get(info, "op"))
            and str(_get(info, "status", "ready")).strip().lower() in USABLE_STATUS)


def _needs_text(op: str, description: str) -> bool:
    if op in BY_OP:     # the registry knows exactly
        return BY_OP[op].needs_text
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
