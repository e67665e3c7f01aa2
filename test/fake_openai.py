"""A fake OpenAI-compatible chat server for tests and benchmarks (stdlib only, 127.0.0.1).

It speaks enough of the OpenAI HTTP API for ``openai.OpenAI`` (and any other client):

* ``POST /v1/chat/completions`` — JSON replies, and SSE streaming (``"stream": true``:
  ``data: {chunk}`` events, then ``data: [DONE]``) with text deltas and tool-call argument
  deltas, like the real API.
* ``GET /v1/models`` — the list in ``FakeOpenAI.models``.

Usage::

    from fake_openai import FakeOpenAI, Reply

    with FakeOpenAI() as fake:                       # starts on a free port
        fake.push("Hello there. How are you?")       # queued replies, FIFO
        fake.push(500)                               # an HTTP error status
        fake.push(Reply(text="Slow.", delay=0.2))    # fixed latency before the reply
        fake.push(Reply(tool_calls=[{"name": "detect", "arguments": {"label": "cup"}}]))
        client = OpenAI(base_url=fake.base_url, api_key="k")
        ...
        fake.requests[0]["messages"]                 # every request body, parsed

    # or compute each reply from the request:
    fake.responder = lambda req: "Summary." if "summar" in str(req["messages"]) else "Hi!"

As a pytest fixture: test/conftest.py makes ``fake_openai`` available to every test (a
started ``FakeOpenAI``, closed after the test).

Reply resolution for each chat request: the next queued reply if the queue is not empty,
else ``responder(request_json)`` if set, else ``default_reply`` ("OK."). A reply may be

* ``str`` — the assistant text;
* ``int`` — an HTTP error status (e.g. 400, 401, 429, 500), with an OpenAI-style error body;
* ``Reply`` — full control (text, tool calls, status, delays, stream gates, disconnects);
* ``dict`` — sent verbatim as the JSON body (non-streaming only).

API (all thread-safe):

* ``base_url`` — ``"http://127.0.0.1:PORT/v1"``; ``port``.
* ``requests`` — copy of the list of parsed JSON request bodies (chat requests only), in
  arrival order; ``headers`` — the matching request headers (lower-case names);
  ``request_count``; ``wait_for_requests(n, timeout)``.
* ``push(*replies)``, ``responder``, ``default_reply``, ``models``.
* ``streams_finished`` — number of streamed replies sent to the end; ``stream_done`` — a
  ``threading.Event`` set whenever a streamed reply has been sent completely (clear it
  yourself before a test step if needed).
* ``close()`` — stops the server (also on context-manager exit); blocked delays/gates end.

``FakeOpenAI(mimic="llama.cpp")`` answers as llama.cpp's server (llama-cpp-python 0.3.36)
serving a text-only model does, checked against the real one by test/test_llama_server.py:

* a message whose content is a list (image parts, or text parts only): HTTP 500 "can only
  concatenate str (not "list") to str"; streamed, a 200 stream that ends at once (no chunk,
  no finish_reason);
* tools with ``tool_choice="auto"``: a programmed tool call comes back as the JSON text
  ``{"name": ..., "arguments": {...}}`` with finish_reason "stop" (no ``tool_calls``);
* a named ``tool_choice``: real tool calls; streamed, every delta repeats the call's ``id``
  and ``name`` beside its piece of the arguments;
* ``response_format`` of type ``json_schema`` (OpenAI's form): HTTP 500 naming the field
  (its own form, ``json_object`` with a ``schema``, is taken);
* an assistant message whose ``content`` is null (one that only calls tools): HTTP 500, a
  validation error (``""`` is taken).
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

__all__ = ["FakeOpenAI", "Reply", "fake_openai"]

_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 429: "rate_limit_error", 500: "server_error", 502: "server_error",
    503: "server_error",
}


@dataclass
class Reply:
    """One programmed reply.

    text: assistant text (``None`` means no content, e.g. with tool calls).
    tool_calls: list of ``{"name": str, "arguments": dict | str, "id": str (optional)}``;
        a ``str`` argument is sent as is (so tests can send invalid JSON).
    status: HTTP status; not 200 sends an OpenAI-style error body with ``error_message``.
    delay: seconds to wait before sending the response headers (latency / timeouts).
    chunks: explicit streamed text deltas (default: the text split after each word).
    chunk_delay: seconds to wait between streamed chunks.
    gates: ``{chunk_index: threading.Event}`` — before sending that chunk, wait until the
        event is set (at most ``gate_timeout`` s; a timeout is recorded in
        ``FakeOpenAI.gate_timeouts``). Lets tests order events without wall-clock asserts.
    disconnect_after: when streaming, drop the connection after this many chunks.
    error_after: when streaming, send an in-stream error event (``data: {"error": ...}``,
        as vLLM and OpenAI do) with ``error_message`` after this many chunks, then end.
    end_after: when streaming, end the response in good order after this many chunks:
        no finish_reason and no ``[DONE]`` (a server that gave up, or a proxy that cut it).
    headers: extra response headers (e.g. ``{"Retry-After": "0"}``).
    finish_reason: overrides "stop"/"tool_calls".
    """

    text: str | None = None
    tool_calls: list[dict] | None = None
    status: int = 200
    error_message: str | None = None
    delay: float = 0.0
    chunks: list[str] | None = None
    chunk_delay: float = 0.0
    gates: dict[int, threading.Event] = field(default_factory=dict)
    gate_timeout: float = 5.0
    disconnect_after: int | None = None
    error_after: int | None = None
    end_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None
    body: dict | None = None


def _as_reply(value: Any) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, bool):
        raise TypeError("a reply cannot be a bool")
    if isinstance(value, int):
        return Reply(status=value)
    if isinstance(value, str):
        return Reply(text=value)
    if isinstance(value, dict):
        return Reply(body=value)
    raise TypeError(f"unsupported fake reply type {type(value).__name__}")


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up (timeouts, closed streams) are normal here: no tracebacks."""

    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return
        super().handle_error(request, client_address)


def _split_words(text: str) -> list[str]:
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


class FakeOpenAI:
    """The fake server. See the module docstring for the API."""

    def __init__(self, default_reply: Any = "OK.", models: list[str] | None = None,
                 responder: Callable[[dict], Any] | None = None, mimic: str = "",
                 port: int = 0) -> None:
        if mimic not in ("", "llama.cpp"):
            raise ValueError(f"mimic={mimic!r}: '' (OpenAI) or 'llama.cpp'")
        self.mimic, self._port = mimic, port
        self.default_reply = default_reply
        self.models = list(models or ["gpt-4o-mini", "fake-vlm"])
        self.responder = responder
        self.stream_done = threading.Event()
        self._lock = threading.Lock()
        self._queue: list[Any] = []
        self._requests: list[dict] = []
        self._headers: list[dict[str, str]] = []
        self._cond = threading.Condition(self._lock)
        self._closing = threading.Event()
        self.streams_finished = 0
        self.gate_timeouts = 0
        self._counter = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "FakeOpenAI":
        if self._server is not None:
            return self
        handler = _make_handler(self)
        self._server = _QuietServer(("127.0.0.1", self._port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- configuration and inspection ----------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "FakeOpenAI not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Any) -> None:
        """Queue replies (str, int status, Reply or dict), served in FIFO order."""
        for r in replies:
            _as_reply(r)  # validate early
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[dict]:
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self._headers)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until at least `n` chat requests have arrived (or `timeout`)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._requests) >= n, timeout=timeout)

    # -- used by the handler -------------------------------------------------------------------
    def _record(self, body: dict, headers: dict[str, str]) -> Reply:
        with self._cond:
            self._requests.append(body)
            self._headers.append(headers)
            self._counter += 1
            self._cond.notify_all()
            if self._queue:
                value = self._queue.pop(0)
                responder = None
            else:
                value = None
                responder = self.responder
        if value is None:
            if responder is None:
                value = self.default_reply
            else:
                try:
                    value = responder(body)
                except Exception as exc:  # a broken responder answers 500, visibly
                    value = Reply(status=500, error_message=f"responder raised {exc!r}")
        return _as_reply(value)

    def _next_id(self) -> str:
        with self._lock:
            return f"chatcmpl-fake{self._counter}"

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless closing; returns False when the server is closing."""
        if seconds > 0:
            return not self._closing.wait(seconds)
        return not self._closing.is_set()

    def _stream_finished(self) -> None:
        with self._lock:
            self.streams_finished += 1
        self.stream_done.set()

    def _gate_timed_out(self) -> None:
        with self._lock:
            self.gate_timeouts += 1


def _make_handler(fake: FakeOpenAI):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        # -- helpers ---------------------------------------------------------------------------
        def _send_json(self, status: int, body: dict, extra: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _send_chunk(self, payload: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()

        def _error(self, status: int, message: str | None, extra: dict[str, str]) -> None:
            kind = _ERROR_TYPES.get(status, "error")
            self._send_json(status, {"error": {
                "message": message or f"fake error {status}", "type": kind, "code": str(status),
                "param": None}}, extra)

        # -- routes ----------------------------------------------------------------------------
        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                    for m in fake.models]})
            else:
                self._error(404, f"no route {self.path}", {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}", {})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._error(400, "request body is not JSON", {})
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = fake._record(body, headers)
            if fake.mimic == "llama.cpp" and self._llama_cpp_refuses(body):
                return
            if not fake._sleep(reply.delay):
                self.close_connection = True
                return
            if reply.status != 200:
                self._error(reply.status, reply.error_message, reply.headers)
                return
            model = body.get("model", "fake")
            reply = self._as_llama_cpp(reply, body)
            if body.get("stream") and reply.body is None:
                self._stream(reply, model)
            else:
                self._send_json(200, reply.body or self._completion(reply, model), reply.headers)

        def _llama_cpp_refuses(self, body: dict) -> bool:
            """What llama.cpp refuses: a list content, OpenAI's json_schema response_format.

            See the module docstring.
            """
            kind = (body.get("response_format") or {}).get("type")
            if kind not in (None, "text", "json_object"):
                self._error(500, "1 validation error: {'type': 'literal_error', 'loc': ('body', "
                            "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                            "'json_object'\"}", {})
                return True
            nulls = [i for i, m in enumerate(body.get("messages", []))
                     if m.get("role") == "assistant" and m.get("content") is None]
            if nulls:
                self._error(500, f"7 validation errors: {{'type': 'literal_error', 'loc': "
                            f"('body', 'messages', {nulls[0]}, "
                            "'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input "
                            "should be 'system'\", 'input': 'assistant'}", {})
                return True
            lists = [m.get("content") for m in body.get("messages", [])
                     if isinstance(m.get("content"), list)]
            if not lists:
                return False
            if not body.get("stream"):
                self._error(500, 'can only concatenate str (not "list") to str', {})
                return True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._send_chunk(b"")
            return True

        def _as_llama_cpp(self, reply: Reply, body: dict) -> Reply:
            """A programmed tool call as llama.cpp gives it for this request's tool_choice."""
            if fake.mimic != "llama.cpp" or not reply.tool_calls or not body.get("tools") \
                    or isinstance(body.get("tool_choice"), dict):
                return reply
            call = reply.tool_calls[0]
            args = call.get("arguments", {})
            text = json.dumps({"name": call["name"], "arguments":
                               json.loads(args) if isinstance(args, str) else args})
            return Reply(text=text, chunks=[text[k:k + 8] for k in range(0, len(text), 8)],
                         finish_reason="stop", delay=reply.delay, chunk_delay=reply.chunk_delay)

        # -- bodies ----------------------------------------------------------------------------
        def _tool_calls(self, reply: Reply) -> list[dict]:
            calls = []
            for k, tc in enumerate(reply.tool_calls or []):
                args = tc.get("arguments", {})
                calls.append({"id": tc.get("id", f"call_{k}"), "type": "function",
                              "function": {"name": tc["name"], "arguments":
                                           args if isinstance(args, str) else json.dumps(args)}})
            return calls

        def _completion(self, reply: Reply, model: str) -> dict:
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            calls = self._tool_calls(reply)
            if calls:
                message["tool_calls"] = calls
            finish = reply.finish_reason or ("tool_calls" if calls else "stop")
            return {"id": fake._next_id(), "object": "chat.completion",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

        def _stream(self, reply: Reply, model: str) -> None:
            cid, created = fake._next_id(), int(time.time())

            def chunk(delta: dict, finish: str | None = None) -> dict:
                return {"id": cid, "object": "chat.completion.chunk", "created": created,
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            events: list[dict] = [chunk({"role": "assistant", "content": ""})]
            if reply.text:
                pieces = reply.chunks if reply.chunks is not None else _split_words(reply.text)
                for piece in pieces:
                    events.append(chunk({"content": piece}))
            for k, tc in enumerate(self._tool_calls(reply)):
                args = tc["function"]["arguments"]
                step = max(1, len(args) // 3)
                pieces = [args[a:a + step] for a in range(0, len(args), step)]
                if fake.mimic == "llama.cpp":      # id and name again in every piece
                    events += [chunk({"tool_calls": [{
                        "index": k, "id": tc["id"], "type": "function",
                        "function": {"name": tc["function"]["name"], "arguments": piece}}]})
                        for piece in pieces]
                    continue
                events.append(chunk({"tool_calls": [{
                    "index": k, "id": tc["id"], "type": "function",
                    "function": {"name": tc["function"]["name"], "arguments": ""}}]}))
                events += [chunk({"tool_calls": [{"index": k, "function": {
                    "arguments": piece}}]}) for piece in pieces]
            finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
            events.append(chunk({}, finish))

            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.flush()
            try:
                for index, event in enumerate(events):
                    if reply.disconnect_after is not None and index >= reply.disconnect_after:
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if reply.end_after is not None and index >= reply.end_after:
                        self._send_chunk(b"")
                        return
                    if reply.error_after is not None and index >= reply.error_after:
                        error = {"error": {"message": reply.error_message or "stream failed",
                                           "type": "server_error", "code": None}}
                        self._send_chunk(b"data: " + json.dumps(error).encode() + b"\n\n")
                        self._send_chunk(b"")
                        return
                    gate = reply.gates.get(index)
                    if gate is not None and not gate.wait(reply.gate_timeout):
                        fake._gate_timed_out()
                    if index and not fake._sleep(reply.chunk_delay):
                        self.close_connection = True
                        return
                    self._send_chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
                self._send_chunk(b"data: [DONE]\n\n")
                self._send_chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            fake._stream_finished()

    return Handler


def main(argv=None) -> None:
    """`python fake_openai.py PORT [REPLY]`: serve until Ctrl-C (a process for another host).

    Ctrl-C is Python's again even when this process was started with SIGINT ignored: in a
    fresh-clone run one inherited SIGINT and SIGQUIT ignored from its test process (as a fork
    during C's `system()` in another thread would) and outlived the test's Ctrl-C.
    """
    import signal
    import sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = sys.argv[1:] if argv is None else argv
    with FakeOpenAI(port=int(args[0]), default_reply=args[1] if len(args) > 1 else "OK."):
        print("ready", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


@pytest.fixture
def fake_openai():
    """A started FakeOpenAI server, closed after the test."""
    with FakeOpenAI() as fake:
        yield fake


if __name__ == "__main__":
    main()
