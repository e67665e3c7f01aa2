"""OpenAI-format chat messages as a local text model reads them (roles and plain text)."""
from __future__ import annotations

import json
from typing import Sequence

from vision_dialogue.llm.base import BackendError, Message


def check_message(i: int, m) -> tuple[str, object]:
    """Message `i`'s role and content (string or parts); BackendError when malformed."""
    if not isinstance(m, dict) or "role" not in m or "content" not in m:
        raise BackendError(f"message {i} must be a dict with 'role' and 'content'")
    content = m["content"]
    if content is None:
        content = ""
    if not isinstance(content, (str, list)):
        raise BackendError(f"message {i}: content must be a string or a list of parts")
    return str(m["role"]), content


def text_conversation(messages: Sequence[Message]) -> list[dict]:
    """OpenAI-style messages → plain {"role", "content": str}; image parts are dropped.

    An assistant message's `tool_calls` stay, with their arguments as objects (the chat
    template writes them as JSON); a `tool` message is kept as its text.
    """
    out = []
    for i, m in enumerate(messages):
        role, content = check_message(i, m)
        if isinstance(content, list):
            texts = [str(p.get("text", "")) for p in content
                     if isinstance(p, dict) and p.get("type") == "text"]
            content = "\n".join(t for t in texts if t)
            if not content:
                continue  # only images: nothing a text model can read
        line = {"role": role, "content": content}
        if m.get("tool_calls"):          # a tool round, as the chat template writes it
            line["tool_calls"] = [_call(c) for c in m["tool_calls"]]
        out.append(line)
    if not out:
        raise BackendError("messages contain no text for a text-only model")
    return out


def _call(call: dict) -> dict:
    """One OpenAI tool call with its arguments as an object (a JSON string is read)."""
    fn = call.get("function", call) if isinstance(call, dict) else {}
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {"text": args}
    return {"type": "function", "function": {"name": str(fn.get("name", "")), "arguments": args}}
