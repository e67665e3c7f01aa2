"""The manager against llama.cpp's real OpenAI-compatible server, serving the embedded model.

One server for the module (llama-cpp-python[server], built from its sdist by
`VD_EXTRAS=llamacpp scripts/setup.sh`; pip keeps the built wheel). Checked here:
- the fake server's `mimic="llama.cpp"` answers these requests exactly as the real one does,
  so the fast tests that use it stay honest;
- `bringup demo --llm openai` as a user runs it: the text-only model is noticed at start (one
  log line), frames go in as text, every reply is the model's (no fallback), nothing a model
  writes as a tool call is spoken, exit 0.
"""
from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
import urllib.request

import openai
import pytest

from fake_openai import FakeOpenAI, Reply
from installed.user_env import what_failed

llama_server = pytest.importorskip(
    "llama_cpp.server", reason="llama-cpp-python[server] is not installed "
    "(VD_EXTRAS=llamacpp scripts/setup.sh compiles it once, about 2.5 min on 2 cores)")

LOOK_BACK = {"type": "function", "function": {
    "name": "look_back", "description": "Look at an earlier camera frame.",
    "parameters": {"type": "object", "properties": {"seconds_ago": {"type": "number"}},
                   "required": ["seconds_ago"]}}}
ASK_PAST = [{"role": "system", "content": "You are a robot with tools."},
            {"role": "user", "content": "What did you see 30 seconds ago? Use look_back."}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama(installed, tmp_path_factory):
    """(base_url, model name) of a llama.cpp server on the embedded default GGUF."""
    from vision_dialogue.llm.cpu_threads import usable_cores
    from vision_dialogue.llm.default_model import ModelSetupError, ensure_default_gguf, \
        server_argv
    try:
        gguf = ensure_default_gguf()
    except ModelSetupError as e:
        pytest.skip(f"the embedded model is not installed: {e}")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    # a thread per core, as the docs' command line (server_argv, with `--cache true`): the
    # demo's conversation runs with no other test beside it (cores_alone); the short requests
    # of the other tests here run beside them
    proc = subprocess.Popen(server_argv(gguf, port, threads=usable_cores(),
                                        python=sys.executable),
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(url + "/models", timeout=5) as r:
                model = json.load(r)["data"][0]["id"]
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
    yield url, model
    proc.terminate()
    proc.wait(30)


def _tiny_image_url() -> str:
    from vision_dialogue.llm.probe import _tiny_jpeg
    return "data:image/jpeg;base64," + base64.b64encode(_tiny_jpeg()).decode()


def _shape(base_url: str, model: str, kind: str) -> tuple:
    """What a client sees for one kind of request: the facts the project relies on."""
    client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=120)
    image = [{"type": "text", "text": "Colour?"},
             {"type": "image_url", "image_url": {"url": _tiny_image_url()}}]
    try:
        if kind == "image":
            client.chat.completions.create(model=model, max_tokens=1,
                                           messages=[{"role": "user", "content": image}])
            return ("answered",)
        if kind == "image stream":
            chunks = list(client.chat.completions.create(
                model=model, max_tokens=1, stream=True,
                messages=[{"role": "user", "content": image}]))
            return ("stream", len(chunks))
        if kind == "text parts":
            client.chat.completions.create(model=model, max_tokens=1, messages=[
                {"role": "user", "content": [{"type": "text", "text": "Hi."}]}])
            return ("answered",)
        if kind == "tools auto":
            r = client.chat.completions.create(model=model, messages=ASK_PAST, tools=[LOOK_BACK],
                                               tool_choice="auto", max_tokens=60, temperature=0)
            call = json.loads(r.choices[0].message.content)
            return (r.choices[0].finish_reason, bool(r.choices[0].message.tool_calls),
                    call["name"], sorted(call["arguments"]))
        if kind == "tools named stream":
            chunks = list(client.chat.completions.create(
                model=model, messages=ASK_PAST, tools=[LOOK_BACK], stream=True,
                tool_choice={"type": "function", "function": {"name": "look_back"}},
                max_tokens=60, temperature=0))
            deltas = [tc for c in chunks if c.choices
                      for tc in c.choices[0].delta.tool_calls or ()]
            return ("calls", all(d.function.name == "look_back" for d in deltas),
                    len({d.id for d in deltas}), len(deltas) > 1,
                    json.loads("".join(d.function.arguments for d in deltas)).keys() >= {
                        "seconds_ago"}, chunks[-1].choices[0].finish_reason)
        if kind.startswith("tool round"):         # the call's turn, its assistant content
            call = [{"id": "c1", "type": "function",
                     "function": {"name": "look_back", "arguments": "{}"}}]
            client.chat.completions.create(model=model, tools=[LOOK_BACK], max_tokens=1,
                                           messages=ASK_PAST + [
                {"role": "assistant", "content": None if "null" in kind else "",
                 "tool_calls": call},
                {"role": "tool", "tool_call_id": "c1", "content": "You saw a cup."}])
            return ("answered",)
    except openai.APIStatusError as e:
        if kind.startswith("tool round"):
            return ("http", e.status_code)
        return ("http", e.status_code, str(e.message)[-40:])
    except openai.APIConnectionError:
        return ("connection dropped",)
    raise AssertionError(kind)


SHORT_SCRIPT = """
language: en-US
speaker: visitor
items:
  - say: "What can you see right now?"
    wait_for_greeting: true
    delay: 1.0
  - say: "Thank you, that was fun. Goodbye!"
    wait_for_reply: true
"""

KINDS = ["image", "image stream", "text parts", "tools auto", "tools named stream",
         "tool round, null content", "tool round, empty content"]


def test_the_fake_answers_as_llama_cpp_does(llama):
    url, model = llama
    real = {kind: _shape(url, model, kind) for kind in KINDS}
    with FakeOpenAI(mimic="llama.cpp", models=[model], default_reply=Reply(
            tool_calls=[{"name": "look_back", "arguments": {"seconds_ago": 30}}])) as fake:
        faked = {kind: _shape(fake.base_url, model, kind) for kind in KINDS}
    assert faked == real
    assert real["image"][:2] == ("http", 500) and real["text parts"][:2] == ("http", 500)
    assert real["tools auto"][:2] == ("stop", False)       # the call written as text
    assert real["tool round, null content"] == ("http", 500)   # hence content "" in the loop


#: seconds a reply may take here (the product's default is 15): a fresh-clone run on a 2-core
#: AVX2 CPU, beside two busy test workers, took over 60 s for a reply on one thread. The
#: request timeout (30 s between two streamed pieces) is as long: the server reads the whole
#: prompt before its first piece. What is checked here is what the manager
#: does on the server; its speed is benchmarks/bench_demo.py's.
REPLY_DEADLINE_S = 240.0


# the limit counts its wait for the tests running when it asks (cores_alone)
@pytest.mark.timeout(1200)
def test_bringup_demo_on_llama_cpp_converses_without_fallbacks(installed, llama, tmp_path,
                                                               cores_alone):
    url, model = llama
    env = dict(installed.env, OPENAI_API_KEY="none")
    # two of the demo script's lines (the whole script on a busy machine took over 5 min; three
    # took 262 s on a 2-core AVX2 CPU): a question its tools may answer, a goodbye
    script = tmp_path / "script.yaml"
    script.write_text(SHORT_SCRIPT)
    # without the detector and the monitor (the embedded demo's test runs them): what is
    # checked here is the manager on the server, and their CPU slowed its replies
    run = installed.run(installed.exe("bringup") + [
        "demo", "--llm", "openai", "--base-url", url, "--model", model, "--script", str(script),
        "--no-detector", "--no-monitor", "-p", f"manager.reply_deadline:={REPLY_DEADLINE_S}",
        "-p", f"manager.request_timeout:={REPLY_DEADLINE_S}"],
        env=env, timeout=4 * REPLY_DEADLINE_S)
    out = run.stdout + run.stderr
    assert run.returncode == 0, what_failed(out, 4000)
    robot = [ln[len("robot: "):] for ln in run.stdout.splitlines() if ln.startswith("robot: ")]
    assert len(robot) >= 3, out[-4000:]                  # the greeting and the script's lines
    assert out.count("refused an image") == 1 and "text observations instead" in out
    assert "fallback" not in out and "failed" not in out, out[-4000:]
    assert not [r for r in robot if "{" in r or "look_back" in r or "<tool_call>" in r]


def test_json_replies_find_the_form_the_server_takes(llama):
    """An Ask's JSON request reaches llama.cpp's server in the form it takes.

    It refuses OpenAI's `json_schema` form (HTTP 500 naming the field) and takes its own
    `json_object` with a schema; the backend learns that once.
    """
    from vision_dialogue.llm.openai_backend import OpenAIChatBackend
    url, model = llama
    backend = OpenAIChatBackend(base_url=url, model=model, max_retries=0, timeout=120,
                                temperature=0.0)
    schema = {"type": "object", "properties": {"name": {"type": "string"}},
              "required": ["name"], "additionalProperties": False}
    msgs = [{"role": "user", "content": "I am Zebulon. What is my name? Reply in JSON."}]
    first = json.loads(backend.complete(msgs, max_tokens=20, json_schema=schema))
    assert set(first) == {"name"} and "Zebulon" in first["name"]
    assert backend._json_forms == ["json_object", None]
    again = json.loads(backend.complete(msgs, max_tokens=20, json_schema=schema))
    assert again == first and backend._json_forms == ["json_object", None]
