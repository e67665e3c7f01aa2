"""The chat-backend interface every LLM backend implements (OpenAI client, local transformers).

Messages use the OpenAI chat format: a list of {"role": ..., "content": ...} where content is
a string or a list of parts {"type": "text", "text": ...} and
{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,...", "detail": "low"}}.
"""
from __future__ import annotations

import threading
from typing import Iterator, Protocol, Sequence, runtime_checkable

Message = dict

_CALLER = threading.local()


class BackendError(RuntimeError):
    """An LLM call failed after retries (network, HTTP status, timeout, model error)."""


class Preempted(BackendError):
    """A background call (a summary, a fold) stopped to let a reply use the model first.

    Not a failure: the caller gives its items back and tries again later. Raised by backends
    that run one generation at a time (`preemptible = True`) when called with background=True.
    """


def give_up_with(event: threading.Event | None) -> None:
    """The LLM calls this thread makes from now on are given up once `event` is set.

    Set by the thread that makes a reply for a turn (core/deadlines.FirstBy): past the turn's
    deadline nobody waits for the call, so a backend stops reading it and retries nothing. A
    retry of a call given up would take the model (one at a time, or a server that stops a
    running request for a new one: llama-cpp-python's) from the next turn's call.
    """
    _CALLER.given_up = event


def given_up() -> bool:
    """Whether the call this thread makes was given up (`give_up_with`): stop, retry nothing."""
    event = getattr(_CALLER, "given_up", None)
    return event is not None and event.is_set()


def short_question(backend, messages: Sequence[Message], max_tokens: int,
                   json_schema: dict | None = None, side: bool = False, **options) -> str:
    """One short completion with what the backend offers for it.

    `json_schema`: the answer constrained to it where the backend can (`json_schema`);
    `side`: on the backend's own cache for such questions (`side_questions`), so a reply's
    cached prompt stays. `options`: more complete() arguments (model, temperature).
    """
    kwargs = dict(options, max_tokens=max_tokens)
    if json_schema is not None and getattr(backend, "json_schema", False):
        kwargs["json_schema"] = json_schema
    if side and getattr(backend, "side_questions", False):
        kwargs["side"] = True
    return backend.complete(messages, **kwargs)


@runtime_checkable
class ChatBackend(Protocol):
    """A chat completion backend.

    complete() returns the whole reply text; stream() yields the reply in sentences as they
    complete (each a non-empty string; joined with spaces they give the reply). Both raise
    BackendError on failure. `model` overrides the backend's default model name.
    `supports_images` tells the prompt builder whether frames may go in as images; when it is
    False, frames go in as text observations.
    """

    supports_images: bool

    def complete(self, messages: Sequence[Message], *, model: str | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> str: ...

    def stream(self, messages: Sequence[Message], *, model: str | None = None,
               max_tokens: int | None = None,
               temperature: float | None = None) -> Iterator[str]: ...
