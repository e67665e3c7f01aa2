"""`OpenAIChatBackend`: the `ChatBackend` over any OpenAI-compatible chat server.

Works with OpenAI itself and with local servers that speak the same HTTP API (vLLM, Ollama,
llama.cpp server, LM Studio, ...) through ``base_url``. The API key is read from an
environment variable (never from parameters or files), and is never logged or put into a
repr or an exception message.

Failure handling is done here, not by the ``openai`` package (its own retries are switched
off): each call is tried up to ``1 + max_retries`` times, retrying only on connection errors,
timeouts, HTTP 429 and HTTP 5xx, waiting ``backoff * 2**attempt`` seconds in between (or the
server's ``Retry-After``, when longer, capped at ``MAX_BACKOFF``). Each retry is logged with
the ``logging`` module (logger ``vision_dialogue.llm.openai_backend``). After the last failure,
or at once on any other error, ``LLMRequestError`` (a ``BackendError``) is raised.
"""
from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar
from urllib.parse import urlparse

from vision_dialogue.llm.base import BackendError, Message, given_up
from vision_dialogue.llm.options import BackendOptions
from vision_dialogue.variants import Param, nonempty
from vision_dialogue.llm.written_calls import HeldSpeech, ToolCall, calls_written_as_text, \
    tool_names

__all__ = ["OpenAIChatBackend", "ToolCall", "LLMRequestError", "DUMMY_API_KEY", "MAX_BACKOFF"]

log = logging.getLogger(__name__)

#: Key sent to local servers when the key variable is unset (they ignore it, but the
#: ``openai`` package insists on one).
DUMMY_API_KEY = "EMPTY"
#: Upper bound for one backoff wait, seconds.
MAX_BACKOFF = 30.0
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal"}
# Things that look like API keys in server error messages (OpenAI echoes a masked key).
_KEYLIKE = re.compile(r"\b(?:sk|key|api[_-]?key)[-_][A-Za-z0-9*._-]{4,}", re.IGNORECASE)
_MAX_DETAIL = 300

T = TypeVar("T")


class _Truncated(Exception):
    """A streamed reply that ended without a finish_reason (cut off in good order)."""


class LLMRequestError(BackendError):
    """An LLM request failed (after retries where the error was retryable).

    Attributes: ``kind`` ("http", "timeout", "connection", "invalid_response",
    "invalid_tool_arguments", "stream_interrupted", "error"), ``status`` (HTTP status or None),
    ``attempts`` (how many requests were made). The message never contains the API key.
    """

    def __init__(self, message: str, *, kind: str, status: int | None = None,
                 attempts: int = 1) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.attempts = attempts


@dataclass
class _Failure:
    kind: str
    status: int | None
    detail: str
    retryable: bool
    retry_after: float | None = None


JSON_FORMS = ("json_schema", "json_object", None)
"""The `response_format` forms tried for JSON replies, in order (None: no response_format)."""


def _refuses_format(e: "LLMRequestError") -> bool:
    """Whether the server refused the request's response_format, not the request itself.

    A 4xx other than a key, a rate limit or a missing model; llama.cpp's server answers 500
    naming the field.
    """
    if e.status is None or e.status in (401, 403, 404, 429):
        return False
    return 400 <= e.status < 500 or "response_format" in str(e)


def _response_format(form: str, schema: dict) -> dict:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    return {"type": "json_object", "schema": schema}


def _is_local(base_url: str | None) -> bool:
    if not base_url:
        return False
    host = (urlparse(base_url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.startswith("127.") or host.endswith(".local")


SERVER_PARAMS = [
    Param("base_url", "", "OpenAI-compatible server root incl. /v1; empty = openai default."),
    Param("api_key_env", "OPENAI_API_KEY", "Environment variable holding the API key "
          "(the key itself is never logged).", check=nonempty),
    Param("supports_images", True, "Whether the model takes images; false: frames go in as "
          "text observations (always false for text-only local models)."),
    Param("probe_images", True, "With an OpenAI-compatible server and supports_images: send "
          "one tiny image at start; a model that refuses it gets frames as text observations "
          "(one log line) instead of failing every turn."),
    Param("max_retries", 2, "Retries of a failed LLM request (with backoff).", range=(0, 20)),
    Param("warm_server_prompt", False, "Between turns, send the next reply's prompt as it "
          "stands for one token, so a server that keeps its prompt's state (llama.cpp's) has "
          "read it before the person speaks (as warm_cache does for a local model). Off by "
          "default: a paid API charges each such request."),
]
"""The manager's parameters for a server (the backend's PARAMS)."""


class OpenAIChatBackend:
    """Chat backend for any OpenAI-compatible server (implements `ChatBackend`).

    Args:
        base_url: server root including ``/v1`` (e.g. ``http://localhost:8000/v1``); None
            means the ``openai`` default (``OPENAI_BASE_URL`` or api.openai.com).
        model: default model name; each call may override it with ``model=``.
        api_key_env: name of the environment variable holding the key. If it is unset and
            ``base_url`` is local, the dummy key ``"EMPTY"`` is used; otherwise construction
            raises ``BackendError``.
        timeout: seconds per request (connect, read between stream chunks, ...), > 0.
        max_retries: extra attempts on retryable errors, >= 0.
        backoff: first retry wait in seconds (doubles each retry), >= 0.
        supports_images: whether the model accepts image parts (see `ChatBackend`).
        temperature, max_tokens: defaults for every call (None: server default).
        http_client: an ``httpx2.Client`` to use (tests, proxies); None for the default.
        warm_prompts: `warm` sends the prompt for one token (`warm_server_prompt`); else it
            does nothing.
    """

    in_process = False          # a server: the manager probes it and names the model per call
    PARAMS = SERVER_PARAMS
    json_schema = True          # complete takes `json_schema` (response_format)

    @classmethod
    def from_options(cls, o: BackendOptions) -> "OpenAIChatBackend":
        """Any OpenAI-compatible server (images when it takes them)."""
        return cls(base_url=o.base_url or None, model=o.model or "gpt-4o-mini",
                   api_key_env=o.api_key_env, timeout=o.timeout, max_retries=o.max_retries,
                   backoff=o.backoff, supports_images=o.supports_images,
                   temperature=o.temperature,
                   warm_prompts=bool(o.params.get("warm_server_prompt", False)))

    @staticmethod
    def probe(o: BackendOptions, *, timeout: float, images: bool = False):
        """Is the server there, does it serve the model (and take images)? llm/probe.Probe."""
        from vision_dialogue.llm.probe import probe_openai
        return probe_openai(o.base_url, o.model, o.api_key_env, timeout=timeout, images=images)

    def __init__(self, base_url: str | None = None, model: str = "gpt-4o-mini",
                 api_key_env: str = "OPENAI_API_KEY", timeout: float = 30.0,
                 max_retries: int = 2, backoff: float = 0.5, supports_images: bool = True,
                 temperature: float | None = None, max_tokens: int | None = None,
                 http_client: Any = None, warm_prompts: bool = False) -> None:
        if not model or not isinstance(model, str):
            raise ValueError("model must be a non-empty string")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if not (isinstance(max_retries, int) and max_retries >= 0):
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not (isinstance(backoff, (int, float)) and backoff >= 0):
            raise ValueError(f"backoff must be >= 0 seconds, got {backoff!r}")
        if temperature is not None and not 0.0 <= temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {temperature!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        self.base_url = base_url or None
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.supports_images = bool(supports_images)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._json_forms = list(JSON_FORMS)     # what this server accepts, learnt on refusal
        self.warm_prompts = bool(warm_prompts)
        self._reply_tools: tuple[list, Any] = ([], "none")  # the last reply's (and choice)
        self._sleep: Callable[[float], None] = time.sleep

        key = os.environ.get(api_key_env, "").strip()
        if not key:
            if not _is_local(self.base_url):
                raise BackendError(
                    f"no API key: environment variable {api_key_env} is not set "
                    f"(needed for {self.base_url or 'the default OpenAI endpoint'})")
            key = DUMMY_API_KEY
        self._secrets = tuple(s for s in {key} if s != DUMMY_API_KEY and len(s) >= 4)
        kwargs: dict[str, Any] = {"api_key": key, "timeout": self.timeout, "max_retries": 0}
        if self.base_url:
            kwargs["base_url"] = self.base_url
        if http_client is not None:
            kwargs["http_client"] = http_client
        import openai    # here, not at import: the table's other rows do not pay for it
        self._client = openai.OpenAI(**kwargs)

    def __repr__(self) -> str:
        return (f"OpenAIChatBackend(base_url={self.base_url!r}, model={self.model!r}, "
                f"api_key_env={self.api_key_env!r}, timeout={self.timeout}, "
                f"max_retries={self.max_retries}, supports_images={self.supports_images})")

    def close(self) -> None:
        """Release the HTTP connections."""
        self._client.close()

    # -- ChatBackend ---------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], *, model: str | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 json_schema: dict | None = None) -> str:
        """Return the whole reply text (stripped).

        json_schema: ask for JSON of this schema (`response_format`): OpenAI's and vLLM's
        `json_schema` form, else llama.cpp's `json_object` with a schema; a server that refuses
        both (HTTP 4xx) gets the plain request, once and from then on.
        """
        params = self._params(messages, model, max_tokens, temperature)
        for form in self._json_forms if json_schema is not None else (None,):
            if form is not None:
                params["response_format"] = _response_format(form, json_schema)
            try:
                response = self._with_retries(
                    lambda: self._client.chat.completions.create(**params), "chat completion")
            except LLMRequestError as e:
                if form is None or not _refuses_format(e):
                    raise
                self._json_forms = [f for f in self._json_forms if f != form]
                params.pop("response_format", None)
                continue
            message = self._first_message(response)
            return (message.content or "").strip()
        raise LLMRequestError("no reply", kind="error")

    def stream(self, messages: Sequence[Message], *, model: str | None = None,
               max_tokens: int | None = None, temperature: float | None = None) -> Iterator[str]:
        """Yield the reply sentence by sentence as they complete (``stream=True``).

        Retryable errors are retried only until the first sentence has been yielded; a
        failure after that raises ``LLMRequestError`` (kind ``stream_interrupted``) so the
        caller never hears a sentence twice. A stream that ends without a ``finish_reason``
        (every OpenAI-compatible server sends one) is cut off, not complete: its unfinished
        last sentence is never yielded and it counts as interrupted too. Closing the
        generator early closes the connection.
        """
        yield from self._stream(messages, (), "none", model, max_tokens, temperature, None,
                                "streaming chat completion")

    # -- tools ---------------------------------------------------------------------------------
    def complete_with_tools(self, messages: Sequence[Message], tools: Sequence[dict], *,
                            model: str | None = None, tool_choice: Any = "auto",
                            stream: bool = False, max_tokens: int | None = None,
                            temperature: float | None = None) -> tuple[str, list[ToolCall]]:
        """Ask for a reply that may call tools; return ``(text, tool_calls)``.

        `tools` are OpenAI function-tool specs (``{"type": "function", "function": {...}}``),
        passed through unchanged. With ``stream=True`` the reply is streamed and the
        tool-call argument deltas are assembled (same result). Arguments that are not a JSON
        object raise ``LLMRequestError`` (kind ``invalid_tool_arguments``).
        """
        params = self._params(messages, model, max_tokens, temperature)
        params["tools"] = list(tools)
        if tools:
            params["tool_choice"] = tool_choice
        if not stream:
            response = self._with_retries(
                lambda: self._client.chat.completions.create(**params), "tool completion")
            message = self._first_message(response)
            raw_calls = [(tc.id, tc.function.name, tc.function.arguments)
                         for tc in (message.tool_calls or []) if getattr(tc, "function", None)]
            text = (message.content or "").strip()
        else:
            params["stream"] = True
            text, raw_calls = self._with_retries(lambda: self._collect_stream(params),
                                                 "streaming tool completion")
            text = text.strip()
        if not raw_calls and tools and tool_choice != "none":
            text, raw_calls = calls_written_as_text(text, tool_names(tools))
        return text, _parse_tool_calls(raw_calls)

    def stream_with_tools(self, messages: Sequence[Message], tools: Sequence[dict], *,
                          model: str | None = None, tool_choice: Any = "auto",
                          max_tokens: int | None = None, temperature: float | None = None,
                          calls: list | None = None) -> Iterator[str]:
        """Yield the reply's sentences as they stream in, with `tools` offered.

        Tool calls the reply makes (streamed deltas, or written as text: a JSON object or
        `<tool_call>` tags, as small local models do) are appended to `calls` as ToolCalls
        when the stream ends; text that may be such a call is held back, never yielded.
        Retries as `stream` does (only before the first sentence).
        """
        yield from self._stream(messages, tools, tool_choice, model, max_tokens, temperature,
                                calls, "streaming tool completion")

    def _stream(self, messages, tools, tool_choice, model, max_tokens, temperature,
                calls: list | None, what: str) -> Iterator[str]:
        """The one streamed request loop of `stream` and `stream_with_tools`."""
        params = self._params(messages, model, max_tokens, temperature)
        if tools:
            params["tools"], params["tool_choice"] = list(tools), tool_choice
        self._reply_tools = (list(tools), tool_choice)
        params["stream"] = True
        names = tool_names(tools) if tool_choice != "none" else set()
        attempts = self.max_retries + 1
        yielded = False
        for attempt in range(1, attempts + 1):
            speaker = HeldSpeech(names)
            raw: dict[int, list[str]] = {}
            stream = None
            try:
                stream = self._client.chat.completions.create(**params)
                finished = False
                for chunk in stream:
                    _stop_if_given_up()
                    for choice in chunk.choices or ():
                        finished = finished or bool(choice.finish_reason)
                        if choice.index != 0 or choice.delta is None:
                            continue
                        text: list[str] = []
                        _add_delta(choice.delta, text, raw)
                        for sentence in speaker.feed("".join(text)):
                            yielded = True
                            yield sentence
                if not finished:
                    raise _Truncated()
                rest, written = speaker.finish()
                found = _parse_tool_calls([tuple(raw[k]) for k in sorted(raw)] or written)
                for sentence in rest:
                    yielded = True
                    yield sentence
                if calls is not None:
                    calls.extend(found)
                return
            except GeneratorExit:
                raise
            except LLMRequestError:
                raise
            except Exception as exc:  # classified below; never leaks the key
                failure = self._classify(exc)
                if yielded:
                    raise self._error("streamed reply interrupted", failure, attempt,
                                      kind="stream_interrupted") from None
                self._retry_or_raise(what, failure, attempt, attempts)
            finally:
                if stream is not None:
                    try:
                        stream.close()
                    except Exception:  # closing a broken connection may fail; nothing to do
                        pass

    def warm(self, messages: Sequence[Message], tools: Sequence[dict] | None = None,
             side: bool = False) -> int:
        """Have the server read `messages` now, while nobody waits (core/background.py).

        One token is asked for; a server that keeps the prompt's state (llama.cpp's) then
        reads only the person's line at the reply. Not stopped by a reply (an HTTP request
        is not): the reply waits for it, and reads the same start from its state. `tools`:
        those the next reply is offered (default: the last reply's). Returns 0: the server
        does not say how much it read.
        """
        if not self.warm_prompts or side:
            return 0
        params = self._params(messages, None, 1, 0.0)
        tools, choice = self._reply_tools if tools is None else (list(tools), "auto")
        if tools:                       # they come first in the prompt, as at the reply
            params["tools"], params["tool_choice"] = tools, choice
        self._with_retries(lambda: self._client.chat.completions.create(**params), "warm-up")
        return 0

    def list_models(self) -> list[str]:
        """Model ids the server offers (``GET /models``); a cheap health check."""
        page = self._with_retries(lambda: self._client.models.list(), "model list")
        return [m.id for m in page.data]

    # -- internals -----------------------------------------------------------------------------
    def _params(self, messages: Sequence[Message], model: str | None, max_tokens: int | None,
                temperature: float | None) -> dict[str, Any]:
        if not messages:
            raise LLMRequestError("no messages to send", kind="error", attempts=0)
        params: dict[str, Any] = {"model": model or self.model,
                                  "messages": [_on_the_wire(m) for m in messages]}
        max_tokens = max_tokens if max_tokens is not None else self.max_tokens
        temperature = temperature if temperature is not None else self.temperature
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if temperature is not None:
            params["temperature"] = temperature
        return params

    def _collect_stream(self, params: dict[str, Any]) -> tuple[str, list[tuple[str, str, str]]]:
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        finished = False
        with self._client.chat.completions.create(**params) as stream:
            for chunk in stream:
                _stop_if_given_up()
                for choice in chunk.choices or ():
                    if choice.index != 0:
                        continue
                    finished = finished or bool(choice.finish_reason)
                    if choice.delta is not None:
                        _add_delta(choice.delta, text, calls)
        if not finished:
            raise _Truncated()
        return "".join(text), [tuple(calls[k]) for k in sorted(calls)]

    def _first_message(self, response: Any) -> Any:
        choices = getattr(response, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise LLMRequestError("the server returned no choices", kind="invalid_response")
        return choices[0].message

    def _with_retries(self, call: Callable[[], T], what: str) -> T:
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except LLMRequestError:
                raise
            except Exception as exc:
                self._retry_or_raise(what, self._classify(exc), attempt, attempts)
        raise AssertionError("unreachable")

    def _retry_or_raise(self, what: str, failure: _Failure, attempt: int, attempts: int) -> None:
        """Sleep before the next attempt, or raise LLMRequestError if there is none.

        A call its caller gave up (llm.base.given_up) has none.
        """
        if not failure.retryable or attempt >= attempts or given_up():
            err = self._error(f"{what} failed", failure, attempt)
            log.error("%s", err)
            raise err from None
        wait = min(self.backoff * (2 ** (attempt - 1)), MAX_BACKOFF)
        if failure.retry_after is not None:
            wait = max(wait, min(failure.retry_after, MAX_BACKOFF))
        log.warning("%s failed (%s), attempt %d/%d; retrying in %.2f s", what,
                    self._describe(failure), attempt, attempts, wait)
        if wait > 0:
            self._sleep(wait)

    def _error(self, what: str, failure: _Failure, attempt: int,
               kind: str | None = None) -> LLMRequestError:
        where = self.base_url or "default OpenAI endpoint"
        msg = (f"{what} after {attempt} attempt{'s' if attempt != 1 else ''}: "
               f"{self._describe(failure)} (server {where}, model {self.model})")
        return LLMRequestError(self._scrub(msg), kind=kind or failure.kind,
                               status=failure.status, attempts=attempt)

    def _describe(self, failure: _Failure) -> str:
        head = f"HTTP {failure.status}" if failure.status is not None else failure.kind
        return self._scrub(f"{head}: {failure.detail}" if failure.detail else head)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return _KEYLIKE.sub("[redacted]", text)

    def _classify(self, exc: BaseException) -> _Failure:
        import openai
        detail = self._scrub(str(exc))[:_MAX_DETAIL]
        if isinstance(exc, _Truncated):
            return _Failure("stream_interrupted", None,
                            "the streamed reply ended without a finish_reason (cut off)", True)
        if isinstance(exc, openai.APITimeoutError):
            return _Failure("timeout", None, f"no answer within {self.timeout:g} s", True)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            if cause is not None and "timeout" in type(cause).__name__.lower():
                return _Failure("timeout", None, f"no answer within {self.timeout:g} s", True)
            reason = type(cause).__name__ if cause is not None else "connection failed"
            return _Failure("connection", None, reason, True)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retry_after = None
            try:
                value = exc.response.headers.get("retry-after")
                retry_after = float(value) if value is not None else None
            except (TypeError, ValueError):
                retry_after = None
            message = exc.message if isinstance(exc.message, str) else ""
            body = exc.body
            if isinstance(body, dict) and isinstance(body.get("message"), str):
                message = body["message"]
            return _Failure("http", status, self._scrub(message)[:_MAX_DETAIL],
                            status == 429 or status >= 500, retry_after)
        if isinstance(exc, openai.APIResponseValidationError):
            return _Failure("invalid_response", None, detail, False)
        if isinstance(exc, openai.APIError):  # e.g. an error event inside a stream
            return _Failure("error", None, detail, False)
        name = type(exc).__name__
        if "Timeout" in name:  # raw httpx2 timeouts while reading a stream
            return _Failure("timeout", None, f"no answer within {self.timeout:g} s", True)
        if any(n in name for n in ("Connect", "Network", "Protocol", "ReadError", "Remote")):
            return _Failure("connection", None, name, True)
        if isinstance(exc, (ValueError, KeyError, TypeError, AttributeError)):
            return _Failure("invalid_response", None, f"{name}: {detail}", False)
        return _Failure("error", None, f"{name}: {detail}", False)


def _stop_if_given_up() -> None:
    """Stop reading a reply nobody waits for: closing the stream ends it on the server."""
    if given_up():
        raise LLMRequestError("given up: the turn passed its reply deadline", kind="error")


def _add_delta(delta: Any, text: list[str], calls: dict[int, list[str]]) -> None:
    """Add one streamed delta's text and tool-call pieces."""
    if delta.content:
        text.append(delta.content)
    for tc in delta.tool_calls or ():
        entry = calls.setdefault(tc.index, ["", "", ""])
        if tc.id:
            entry[0] = tc.id
        if tc.function is not None:
            if tc.function.name and not entry[1]:   # once: llama.cpp repeats it in every piece
                entry[1] = tc.function.name
            entry[2] += tc.function.arguments or ""


def _parse_tool_calls(raw: Sequence[tuple[str, str, str]]) -> list[ToolCall]:
    calls = []
    for call_id, name, arguments in raw:
        if not name:
            raise LLMRequestError("the model returned a tool call without a name",
                                  kind="invalid_tool_arguments")
        text = (arguments or "").strip()
        try:
            parsed = json.loads(text) if text else {}
        except ValueError as exc:
            snippet = text[:80] + ("..." if len(text) > 80 else "")
            raise LLMRequestError(
                f"tool call {name!r}: arguments are not valid JSON ({exc.msg} at char "
                f"{exc.pos}): {snippet!r}", kind="invalid_tool_arguments") from None
        if not isinstance(parsed, dict):
            raise LLMRequestError(
                f"tool call {name!r}: arguments must be a JSON object, got "
                f"{type(parsed).__name__}", kind="invalid_tool_arguments")
        calls.append(ToolCall(id=call_id or "", name=name, arguments=parsed))
    return calls


def _on_the_wire(message: Message) -> Message:
    """`message` as sent: a content of text parts only becomes one string.

    Both forms are valid OpenAI input, but text-only chat templates (llama.cpp's server with a
    text model, say) fail on a list: HTTP 500, or a stream that ends with nothing.
    """
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and content and all(
            isinstance(p, dict) and p.get("type") == "text" for p in content):
        return {**message, "content": "\n".join(str(p.get("text", "")) for p in content)}
    return message
