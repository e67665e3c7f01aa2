"""OpenAIChatBackend against the fake OpenAI-compatible server on 127.0.0.1."""
from __future__ import annotations

import logging
import socket
import threading

import pytest

from fake_openai import Reply
from vision_dialogue.llm.base import BackendError, ChatBackend
from vision_dialogue.llm.openai_backend import LLMRequestError, OpenAIChatBackend, ToolCall

KEY_ENV = "VD_TEST_LLM_KEY"
SECRET = "sk-test-Zq8SECRETvalue123456"
MSGS = [{"role": "system", "content": "You are a curious child."},
        {"role": "user", "content": "Hi!"}]
TOOLS = [{"type": "function", "function": {
    "name": "detect_objects", "description": "Find objects in the current image.",
    "parameters": {"type": "object", "properties": {"label": {"type": "string"}},
                   "required": ["label"]}}}]


@pytest.fixture
def make_backend(fake_openai, monkeypatch):
    """Factory: a backend pointed at the fake, with the secret key and no real sleeping."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    made = []

    def make(sleeps=None, **kw):
        kw.setdefault("base_url", fake_openai.base_url)
        kw.setdefault("api_key_env", KEY_ENV)
        kw.setdefault("timeout", 5.0)
        b = OpenAIChatBackend(**kw)
        if sleeps is not None:
            b._sleep = sleeps.append  # record backoff waits instead of sleeping
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def test_implements_chat_backend_protocol(make_backend):
    b = make_backend(supports_images=False)
    assert isinstance(b, ChatBackend)
    assert b.supports_images is False


def test_complete_returns_text_and_sends_request(fake_openai, make_backend):
    fake_openai.push("  Hello, I like your hat!  ")
    b = make_backend(model="base-model", temperature=0.3, max_tokens=50)
    assert b.complete(MSGS) == "Hello, I like your hat!"
    req = fake_openai.requests[0]
    assert req["model"] == "base-model"
    assert req["messages"] == MSGS
    assert req["temperature"] == 0.3 and req["max_tokens"] == 50
    assert not req.get("stream")
    assert fake_openai.headers[0]["authorization"] == f"Bearer {SECRET}"


def test_per_call_overrides(fake_openai, make_backend):
    fake_openai.push("A.")
    b = make_backend(model="base-model")
    b.complete(MSGS, model="summary-model", max_tokens=7, temperature=0.0)
    req = fake_openai.requests[0]
    assert (req["model"], req["max_tokens"], req["temperature"]) == ("summary-model", 7, 0.0)


def test_image_parts_reach_server_intact(fake_openai, make_backend):
    url = "data:image/jpeg;base64," + "/9j/4AAQSkZJRgABAQAAAQABAAD" * 50
    msgs = [{"role": "system", "content": "You see through a camera."},
            {"role": "user", "content": [
                {"type": "text", "text": "What am I holding?"},
                {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                {"type": "image_url", "image_url": {"url": url[:200], "detail": "high"}}]}]
    b = make_backend()
    b.complete(msgs)
    list(b.stream(msgs))
    for req in fake_openai.requests:
        assert req["messages"] == msgs


def test_stream_yields_sentences_in_order(fake_openai, make_backend):
    text = "Oh, a red cup! Is it 3.5 litres? Mr. Bean would like it.\nBye"
    fake_openai.push(Reply(text=text))
    b = make_backend()
    # the first clause comes on its own (sentences.FIRST_CLAUSE_WORDS), the rest as sentences
    assert list(b.stream(MSGS)) == ["Oh,", "a red cup!", "Is it 3.5 litres?",
                                    "Mr. Bean would like it.", "Bye"]
    assert fake_openai.requests[0]["stream"] is True


def test_stream_yields_first_sentence_before_server_finishes(fake_openai, make_backend):
    gate = threading.Event()
    # events: 0 role, 1 "Hello there. ", 2 "How are" (held until gate), 3 " you?", 4 finish
    fake_openai.push(Reply(text="Hello there. How are you?",
                           chunks=["Hello there. ", "How are", " you?"],
                           gates={2: gate}, gate_timeout=3.0))
    fake_openai.stream_done.clear()
    gen = make_backend().stream(MSGS)
    assert next(gen) == "Hello there."
    # The server is still holding back the rest of the stream.
    assert not fake_openai.stream_done.is_set()
    assert fake_openai.streams_finished == 0
    gate.set()
    assert list(gen) == ["How are you?"]
    # the server marks the stream done just after writing its last chunk, which the client
    # may read first
    assert fake_openai.stream_done.wait(2.0)
    assert fake_openai.gate_timeouts == 0


def test_stream_closed_early_does_not_hang(fake_openai, make_backend):
    fake_openai.push(Reply(text="One. Two. Three. Four.", chunk_delay=0.05))
    b = make_backend()
    gen = b.stream(MSGS)
    assert next(gen) == "One."
    gen.close()
    fake_openai.push("Next.")
    assert b.complete(MSGS) == "Next."


def test_retries_on_500_and_429_then_success(fake_openai, make_backend, caplog):
    caplog.set_level(logging.WARNING, logger="vision_dialogue.llm.openai_backend")
    fake_openai.push(500, 429, "Finally.")
    sleeps = []
    b = make_backend(max_retries=2, backoff=0.5, sleeps=sleeps)
    assert b.complete(MSGS) == "Finally."
    assert fake_openai.request_count == 3
    assert sleeps == [0.5, 1.0]  # exponential backoff
    retry_logs = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retry_logs) == 2
    assert "HTTP 500" in retry_logs[0] and "HTTP 429" in retry_logs[1]


def test_retry_after_header_is_honoured(fake_openai, make_backend):
    fake_openai.push(Reply(status=429, headers={"Retry-After": "3"}), "Ok.")
    sleeps = []
    assert make_backend(backoff=0.1, sleeps=sleeps).complete(MSGS) == "Ok."
    assert sleeps == [3.0]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_no_retry_on_client_errors(fake_openai, make_backend, status):
    fake_openai.push(status, "never reached")
    sleeps = []
    with pytest.raises(BackendError) as info:
        make_backend(max_retries=3, sleeps=sleeps).complete(MSGS)
    assert fake_openai.request_count == 1
    assert sleeps == []
    assert info.value.status == status and info.value.attempts == 1
    assert f"HTTP {status}" in str(info.value)


def test_backend_error_after_exhausting_retries(fake_openai, make_backend, caplog):
    fake_openai.push(500, 502, 503, "too late")
    sleeps = []
    with caplog.at_level(logging.ERROR, logger="vision_dialogue.llm.openai_backend"):
        with pytest.raises(BackendError) as info:
            make_backend(max_retries=2, backoff=0.2, sleeps=sleeps).complete(MSGS)
    err = info.value
    assert isinstance(err, LLMRequestError)
    assert fake_openai.request_count == 3
    assert sleeps == [0.2, 0.4]
    assert (err.kind, err.status, err.attempts) == ("http", 503, 3)
    assert "HTTP 503" in str(err) and "3 attempts" in str(err)
    assert any("HTTP 503" in r.getMessage() for r in caplog.records)


@pytest.mark.fault("LLM", "timeout of one request")
def test_timeout_raises_backend_error(fake_openai, make_backend):
    fake_openai.push(Reply(text="late", delay=3.0), Reply(text="late", delay=3.0))
    sleeps = []
    with pytest.raises(BackendError) as info:
        make_backend(timeout=0.2, max_retries=1, sleeps=sleeps).complete(MSGS)
    assert info.value.kind == "timeout"
    assert "timeout" in str(info.value)
    assert fake_openai.wait_for_requests(2, timeout=2.0)  # timeouts are retried
    assert len(sleeps) == 1


def test_stream_timeout_between_chunks(fake_openai, make_backend):
    fake_openai.push(Reply(text="Slow. Very slow.", chunk_delay=2.0))
    with pytest.raises(BackendError) as info:
        list(make_backend(timeout=0.2, max_retries=0).stream(MSGS))
    assert info.value.kind == "timeout"


def test_connection_refused_is_retried_then_fails(make_backend):
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = []
    with pytest.raises(BackendError) as info:
        make_backend(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, backoff=0.01,
                     sleeps=sleeps).complete(MSGS)
    assert info.value.kind == "connection" and info.value.attempts == 3
    assert len(sleeps) == 2


@pytest.mark.fault("secrets", "API key in errors, repr and logs")
def test_key_never_in_errors_repr_or_logs(fake_openai, make_backend, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, including openai's and httpx2's
    fake_openai.push(Reply(status=500, error_message=f"boom, key was {SECRET}"),
                     Reply(status=401, error_message=f"Incorrect API key provided: {SECRET}"))
    b = make_backend(max_retries=2, sleeps=[])
    with pytest.raises(BackendError) as info:
        b.complete(MSGS)
    # The key was really used (so the checks below are meaningful) ...
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in fake_openai.headers)
    assert info.value.status == 401
    # ... but it is nowhere a user or a log reader would see it.
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert SECRET not in repr(b) and SECRET not in str(b)
    assert SECRET not in caplog.text
    assert "sk-test" not in caplog.text and "sk-test" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_missing_key_remote_is_rejected_local_uses_dummy(fake_openai, monkeypatch):
    monkeypatch.delenv("VD_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(BackendError, match="VD_TEST_NO_SUCH_KEY"):
        OpenAIChatBackend(base_url="https://api.example.com/v1", api_key_env="VD_TEST_NO_SUCH_KEY")
    b = OpenAIChatBackend(base_url=fake_openai.base_url, api_key_env="VD_TEST_NO_SUCH_KEY")
    fake_openai.push("Local.")
    assert b.complete(MSGS) == "Local."
    assert fake_openai.headers[0]["authorization"] == "Bearer EMPTY"
    b.close()


@pytest.mark.parametrize("kw", [{"timeout": 0}, {"max_retries": -1}, {"backoff": -1.0},
                                {"temperature": 3.0}, {"max_tokens": 0}, {"model": ""}])
def test_invalid_settings_rejected(make_backend, kw):
    with pytest.raises(ValueError):
        make_backend(**kw)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_parsed(fake_openai, make_backend, stream):
    fake_openai.push(Reply(text="Let me look.", tool_calls=[
        {"id": "call_a", "name": "detect_objects", "arguments": {"label": "red cup", "k": [1, 2]}},
        {"id": "call_b", "name": "read_text", "arguments": ""}]))
    b = make_backend()
    text, calls = b.complete_with_tools(MSGS, TOOLS, tool_choice="required", stream=stream)
    assert text == "Let me look."
    assert calls == [ToolCall("call_a", "detect_objects", {"label": "red cup", "k": [1, 2]}),
                     ToolCall("call_b", "read_text", {})]
    req = fake_openai.requests[0]
    assert req["tools"] == TOOLS and req["tool_choice"] == "required"
    assert bool(req.get("stream")) is stream


@pytest.mark.parametrize("stream", [False, True])
def test_reply_without_tool_calls(fake_openai, make_backend, stream):
    fake_openai.push("I can answer that myself.")
    assert make_backend().complete_with_tools(MSGS, TOOLS, stream=stream) == (
        "I can answer that myself.", [])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("bad", ['{"label": "cup"', "[1, 2]", "not json"])
def test_invalid_tool_json_raises(fake_openai, make_backend, stream, bad):
    fake_openai.push(Reply(tool_calls=[{"name": "detect_objects", "arguments": bad}]))
    with pytest.raises(BackendError) as info:
        make_backend().complete_with_tools(MSGS, TOOLS, stream=stream)
    assert info.value.kind == "invalid_tool_arguments"
    assert "detect_objects" in str(info.value)
    assert fake_openai.request_count == 1  # a model error, not retried


def test_stream_retries_before_first_sentence(fake_openai, make_backend):
    fake_openai.push(503, Reply(text="Half a sen", disconnect_after=2),
                     "Hello again. All good.")
    sleeps = []
    out = list(make_backend(max_retries=2, sleeps=sleeps).stream(MSGS))
    assert out == ["Hello again.", "All good."]
    assert fake_openai.request_count == 3 and len(sleeps) == 2


def test_stream_failure_after_first_sentence_is_not_retried(fake_openai, make_backend):
    # events: 0 role, 1 "One. ", 2 "Two. ", then the connection drops
    fake_openai.push(Reply(text="One. Two. Three.", disconnect_after=3), "One. Two. Three.")
    got = []
    with pytest.raises(BackendError) as info:
        for s in make_backend(max_retries=2).stream(MSGS):
            got.append(s)
    assert got == ["One.", "Two."]  # nothing repeated
    assert info.value.kind == "stream_interrupted"
    assert fake_openai.request_count == 1


@pytest.mark.parametrize("stream_tools", [False, True])
def test_stream_closed_in_good_order_without_finish_is_cut_off(fake_openai, make_backend,
                                                               stream_tools):
    """No finish_reason and no [DONE], but a clean end of the HTTP body: the reply is not complete.

    The half sentence is never spoken; the stream counts as interrupted.
    """
    # events: 0 role, 1 "First ", 2 "sentence. ", 3 "Second", then a clean end
    cut = Reply(text="First sentence. Second sentence.",
                chunks=["First ", "sentence. ", "Second", " sentence."], end_after=4)
    if stream_tools:
        fake_openai.push(cut, cut)
        with pytest.raises(BackendError) as info:
            make_backend(max_retries=1).complete_with_tools(MSGS, TOOLS, stream=True)
        assert info.value.kind == "stream_interrupted" and fake_openai.request_count == 2
        return
    fake_openai.push(cut)
    got = []
    with pytest.raises(BackendError) as info:
        for s in make_backend(max_retries=2).stream(MSGS):
            got.append(s)
    assert got == ["First sentence."]          # "Second" is never yielded
    assert info.value.kind == "stream_interrupted"
    assert fake_openai.request_count == 1


def test_stream_cut_before_any_sentence_is_retried(fake_openai, make_backend):
    fake_openai.push(Reply(text="Half", chunks=["Half"], end_after=2), "Whole. Reply.")
    assert list(make_backend(max_retries=1).stream(MSGS)) == ["Whole.", "Reply."]


def test_stream_error_status_raises_backend_error(fake_openai, make_backend):
    fake_openai.push(401)
    with pytest.raises(BackendError) as info:
        list(make_backend().stream(MSGS))
    assert info.value.status == 401


def test_empty_messages_rejected(make_backend):
    with pytest.raises(BackendError):
        make_backend().complete([])


def test_list_models(fake_openai, make_backend):
    fake_openai.models = ["a-model", "b-model"]
    assert make_backend().list_models() == ["a-model", "b-model"]


def test_concurrent_calls_get_their_own_replies(fake_openai, make_backend):
    fake_openai.responder = lambda req: "Echo " + req["messages"][-1]["content"] + "."
    b = make_backend()
    results = {}

    def worker(i):
        results[i] = b.complete([{"role": "user", "content": f"n{i}"}])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {i: f"Echo n{i}." for i in range(4)}


def test_in_stream_error_event_raises_backend_error(fake_openai, make_backend):
    fake_openai.push(Reply(text="Never finished", error_after=2, error_message="model crashed"),
                     "not used")
    with pytest.raises(BackendError) as info:
        list(make_backend(max_retries=2, sleeps=[]).stream(MSGS))
    assert "model crashed" in str(info.value)
    assert info.value.kind == "error"
    assert fake_openai.request_count == 1  # not a transient error: no retry


def test_broken_responder_answers_500(fake_openai, make_backend):
    def responder(req):
        raise KeyError("oops")

    fake_openai.responder = responder
    with pytest.raises(BackendError) as info:
        make_backend(max_retries=0).complete(MSGS)
    assert info.value.status == 500 and "responder raised" in str(info.value)


# ------------------------------------------------- llama.cpp's server (its fake, checked against
# the real one in test/installed/test_llama_server.py)
LOOK = [{"type": "function", "function": {
    "name": "look_back", "description": "See an earlier moment.",
    "parameters": {"type": "object", "properties": {"seconds_ago": {"type": "string"}},
                   "required": []}}}]


@pytest.fixture
def llama_cpp(make_backend):
    """(fake server as llama.cpp answers, a text-only backend pointed at it)."""
    from fake_openai import FakeOpenAI
    with FakeOpenAI(mimic="llama.cpp") as fake:
        yield fake, make_backend(base_url=fake.base_url, supports_images=False)


def test_text_only_parts_go_out_as_one_string(llama_cpp):
    """A content of text parts is sent as a string: llama.cpp's text template fails on lists."""
    fake, be = llama_cpp
    fake.push("Hello.", "Hi again.")
    msgs = [{"role": "system", "content": [{"type": "text", "text": "Be kind."},
                                           {"type": "text", "text": "[You see: a cup]"}]},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert be.complete(msgs) == "Hello."
    assert list(be.stream(msgs)) == ["Hi again."]
    assert fake.requests[0]["messages"][0]["content"] == "Be kind.\n[You see: a cup]"


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_written_as_text_is_a_call_not_a_reply(llama_cpp, stream):
    fake, be = llama_cpp
    fake.push(Reply(tool_calls=[{"name": "look_back", "arguments": {"seconds_ago": 30}}]))
    text, calls = be.complete_with_tools(MSGS, LOOK, stream=stream)
    assert fake.requests[0]["tool_choice"] == "auto"
    assert text == "" and calls == [ToolCall("call_text_0", "look_back", {"seconds_ago": 30})]


def test_streamed_tools_hold_back_a_call_written_as_text_and_speak_plain_text(llama_cpp):
    fake, be = llama_cpp
    fake.push(Reply(tool_calls=[{"name": "look_back", "arguments": {"seconds_ago": "9"}}]),
              "I saw a cup. It was red.")
    calls: list = []
    assert list(be.stream_with_tools(MSGS, LOOK, calls=calls)) == []     # nothing spoken
    assert [c.name for c in calls] == ["look_back"]
    calls.clear()
    said = list(be.stream_with_tools(MSGS, LOOK, calls=calls))
    assert said == ["I saw a cup.", "It was red."]
    assert calls == [] and fake.requests[-1]["stream"] is True


def test_streamed_tools_speak_the_first_sentence_before_the_reply_ends(fake_openai,
                                                                       make_backend):
    gate = threading.Event()
    fake_openai.push(Reply(text="Let me look. There it is.",
                           chunks=["Let me look. ", "There", " it is."], gates={2: gate}))
    gen = make_backend().stream_with_tools(MSGS, LOOK, calls=[])
    assert next(gen) == "Let me look."
    assert not fake_openai.stream_done.is_set()
    gate.set()
    assert list(gen) == ["There it is."]


def test_a_name_repeated_in_every_streamed_piece_is_taken_once(llama_cpp):
    """llama.cpp repeats the call's id and name beside each piece of its arguments."""
    fake, be = llama_cpp
    fake.push(Reply(tool_calls=[{"id": "c1", "name": "look_back",
                                 "arguments": {"seconds_ago": "60", "about": "a cup"}}]))
    named = {"type": "function", "function": {"name": "look_back"}}
    text, calls = be.complete_with_tools(MSGS, LOOK, stream=True, tool_choice=named)
    assert calls == [ToolCall("c1", "look_back", {"seconds_ago": "60", "about": "a cup"})]


@pytest.mark.parametrize("text, calls, left", [
    ('{"name": "look_back", "arguments": {"about": "cup"}}', [("look_back", {"about": "cup"})],
     ""),
    ('```json\n{"name": "look_back", "parameters": {}}\n```', [("look_back", {})], ""),
    ('Let me see. <tool_call>\n{"name": "look_back", "arguments": {"seconds_ago": 5}}\n'
     '</tool_call>', [("look_back", {"seconds_ago": 5})], "Let me see."),
    ('{"name": "draw", "arguments": {}}', [], '{"name": "draw", "arguments": {}}'),  # not offered
    ('{"mood": "happy"}', [], '{"mood": "happy"}'),
    ("I like {curly} things.", [], "I like {curly} things."),
    # Qwen's template shows the form in doubled braces, and the 1.5B model copies them
    ('{{"name": "look_back", "arguments": {"about": "cup"}}}}', [("look_back", {"about": "cup"})],
     ""),
    # text after a leading call guesses how it went: dropped (the next round says it)
    ('{{"name": "look_back", "arguments": {}}}} I saw a cup.', [("look_back", {})], ""),
    ('{"name": "look", "arguments": {}} I saw a cup.', [],
     '{"name": "look", "arguments": {}} I saw a cup.'),
])
def test_calls_written_as_text_in_the_common_formats(text, calls, left):
    import json as _json

    from vision_dialogue.llm.written_calls import calls_written_as_text
    rest, raw = calls_written_as_text(text, {"look_back"})
    assert rest == left
    assert [(name, _json.loads(args)) for _, name, args in raw] == calls


def test_temperature_is_sent_on_every_request(fake_openai, make_backend):
    be = make_backend(temperature=0.0)
    be.complete(MSGS)
    list(be.stream(MSGS))
    be.complete_with_tools(MSGS, LOOK)
    assert [r.get("temperature") for r in fake_openai.requests] == [0.0, 0.0, 0.0]


def test_a_json_reply_falls_back_to_the_form_the_server_takes():
    """OpenAI's `json_schema` response_format first, then the form the server takes.

    llama.cpp's server refuses it (HTTP 500 naming the field) and gets its own `json_object`
    with the schema, from then on.
    """
    from fake_openai import FakeOpenAI
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    with FakeOpenAI(mimic="llama.cpp", default_reply='{"name": "Zebulon"}') as fake:
        b = OpenAIChatBackend(base_url=fake.base_url, model="m", max_retries=0)
        msgs = [{"role": "user", "content": "Name?"}]
        assert b.complete(msgs, json_schema=schema) == '{"name": "Zebulon"}'
        assert b.complete(msgs, json_schema=schema) == '{"name": "Zebulon"}'
        forms = [(r.get("response_format") or {}).get("type") for r in fake.requests]
        assert forms == ["json_schema", "json_object", "json_object"]
        assert fake.requests[1]["response_format"]["schema"] == schema
        b.complete(msgs)                               # a plain request stays plain
        assert "response_format" not in fake.requests[-1]
    with FakeOpenAI(default_reply="x") as fake:        # a server error is not a refusal
        fake.push(500)
        b = OpenAIChatBackend(base_url=fake.base_url, model="m", max_retries=0)
        with pytest.raises(LLMRequestError, match="500"):
            b.complete([{"role": "user", "content": "Name?"}], json_schema=schema)


@pytest.mark.parametrize("tools", [False, True])
def test_a_reply_given_up_at_its_deadline_is_not_asked_again(fake_openai, make_backend, tools):
    """Past the turn's deadline a cut stream is not retried: a retry would take the server.

    llama-cpp-python's server stops a running request for a new one; a fresh-clone run's given
    up reply retried three times, each stopping the next turn's request (every turn a fallback).
    """
    from vision_dialogue.core.deadlines import DeadlineExceeded, FirstBy
    gate = threading.Event()
    cut = Reply(text="Late reply. Cut", chunks=["Late ", "reply. ", "Cut"], end_after=3,
                gates={1: gate})
    fake_openai.push(cut, cut, cut)
    backend = make_backend(max_retries=2)

    def parts():
        if tools:
            return [backend.complete_with_tools(MSGS, TOOLS, stream=True)[0]]
        return backend.stream(MSGS)
    late: list = []
    reply = FirstBy(parts, 0.0, late.append)           # the deadline has passed already
    with pytest.raises(DeadlineExceeded):
        list(reply)
    gate.set()                                         # the server goes on and cuts the stream
    reply._producer.join(10)
    assert not reply._producer.is_alive()
    assert fake_openai.request_count == 1, "a reply nobody waits for was asked again"
    assert late in ([], ["Late reply."])


def test_a_warm_up_asks_for_one_token_with_the_last_replys_tools_only_when_asked_to(
        fake_openai, make_backend):
    """With `warm_server_prompt` the server reads the next prompt between turns.

    llama.cpp's keeps its state; the tools the reply was offered come too, so the reply
    finds the same start.
    """
    cold = make_backend()
    assert cold.warm(MSGS) == 0 and fake_openai.requests == []      # off: nothing is sent
    b = make_backend(warm_prompts=True, model="m", temperature=0.7)
    list(b.stream_with_tools(MSGS, TOOLS, tool_choice="auto"))
    later = MSGS + [{"role": "assistant", "content": "OK."}]
    assert b.warm(later) == 0
    warm = fake_openai.requests[-1]
    assert warm["messages"] == later and warm["max_tokens"] == 1
    assert warm["temperature"] == 0.0 and not warm.get("stream")
    assert (warm["tools"], warm["tool_choice"]) == (TOOLS, "auto")
    list(b.stream(MSGS))                                            # a reply without tools
    b.warm(later)
    assert "tools" not in fake_openai.requests[-1]
    assert b.warm(later, side=True) == 0 and len(fake_openai.requests) == 4
