"""LlamaCppChatBackend on the embedded default GGUF with the real llama.cpp (llama-cpp-python).

Skipped where llama-cpp-python or the embedded model is not installed (README command 2
installs both: VD_EXTRAS "model llamacpp").
"""
from __future__ import annotations

import threading
import time

import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed "
                                "(pip install -r requirements/llamacpp.txt)")

from vision_dialogue.llm.base import BackendError, ChatBackend, Preempted  # noqa: E402
from vision_dialogue.llm.factory import make_backend  # noqa: E402

pytestmark = pytest.mark.timeout(300)

PERSONA = {"role": "system", "content": "You are a friendly robot. Answer in one short "
                                        "sentence."}


@pytest.fixture(scope="module")
def backend():
    from vision_dialogue.llm.default_model import ModelSetupError
    try:
        return make_backend("llamacpp", model="default", max_new_tokens=24)
    except ModelSetupError as e:
        pytest.skip(f"the embedded model is not installed: {e}")


def test_streams_sentences_greedily_and_reuses_the_prompt_it_saw(backend):
    assert isinstance(backend, ChatBackend) and backend.supports_images is False
    msgs = [PERSONA, {"role": "user", "content": "Hello! What colour is the sky?"}]
    first = list(backend.stream(msgs))
    assert first and all(s.strip() for s in first)
    assert " ".join(first) == backend.complete(msgs)          # greedy: the same reply
    longer = msgs + [{"role": "assistant", "content": " ".join(first)},
                     {"role": "user", "content": "And the grass?"}]
    list(backend.stream(longer))
    assert backend.reused_tokens >= 20       # the persona and first exchange were not re-read
    times = backend.reply_times              # the prompt read, then the first token
    assert times["asked"] <= times["free"] <= times["first_token"]


def test_a_background_call_gives_way_to_a_reply(backend):
    """Even while it reads a long prompt (llama.cpp would read it in one go)."""
    long_notes = " ".join(f"At {i} s you saw a red cup on a table." for i in range(60))
    msgs = [PERSONA, {"role": "system", "content": long_notes},
            {"role": "user", "content": "Count from one to one hundred in words."}]
    outcome = []

    def background():
        try:
            outcome.append(backend.complete(msgs, max_tokens=400, background=True))
        except Preempted as e:
            outcome.append(e)

    def reading() -> int:
        ctx = backend._contexts.get("background")
        return ctx.n_tokens if ctx is not None else 0

    list(backend.stream([PERSONA, {"role": "user", "content": "Hi!"}], max_tokens=2))
    if "background" in backend._contexts:
        backend._contexts["background"].n_tokens = 0      # nothing of this prompt cached
    t = threading.Thread(target=background)
    t.start()
    deadline = time.monotonic() + 60
    while reading() == 0:                  # the background call has begun to read
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.005)
    reply = backend.complete([PERSONA, {"role": "user", "content": "Hi!"}], max_tokens=8)
    t.join(30)
    assert reply and isinstance(outcome[0], Preempted)
    read = backend._contexts["background"].n_tokens
    assert 0 < read < 500, read            # it stopped within the ~700-token prompt


def test_closing_the_stream_stops_the_generation(backend):
    gen = backend.stream([PERSONA, {"role": "user", "content": "Tell me a long story."}],
                         max_tokens=200)
    next(gen)
    gen.close()
    assert not backend._turns.lock.locked()
    assert backend.complete([PERSONA, {"role": "user", "content": "Hi!"}], max_tokens=4)


def test_bad_input_is_a_clear_error(backend, tmp_path):
    with pytest.raises(BackendError, match="does not exist"):
        make_backend("llamacpp", model=str(tmp_path / "missing.gguf"))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF not really")
    with pytest.raises(BackendError, match="cannot load GGUF"):
        make_backend("llamacpp", model=str(broken))
    with pytest.raises(BackendError):
        backend.stream([{"content": "no role"}])
    with pytest.raises(BackendError, match="max_tokens"):
        backend.complete([PERSONA], max_tokens=0)


def test_warming_reads_the_prompt_before_the_person_speaks(backend):
    """After warm(), the next reply (the same prompt plus a user line) reads only its line."""
    history = [PERSONA, {"role": "system", "content": "What you see now: one person, close, "
                         "in the middle, wearing orange; a flag behind them."},
               {"role": "user", "content": "Hello there!"},
               {"role": "assistant", "content": "Hi! I like your orange suit."},
               {"role": "system", "content": "What you see now: a cup of coffee on a saucer."}]
    read = backend.warm(history)
    assert read > 30
    assert backend.warm(history) == 0                   # nothing new to read
    backend.complete(history + [{"role": "user", "content": "What now?"}], max_tokens=4)
    assert backend.reused_tokens >= read


def test_avoided_lines_are_not_said_again(backend):
    msgs = [PERSONA, {"role": "user", "content": "Can you see me?"}]
    first = backend.complete(msgs, max_tokens=16)
    other = backend.complete(msgs, max_tokens=16, avoid=[first])
    assert other and other != first


def test_a_json_schema_constrains_the_reply_and_an_ask_reads_a_name(backend):
    import json

    from vision_dialogue.application.skills import Control, Heard, run_ask
    from vision_dialogue.core.conversation_types import SkillOutcome
    schema = {"type": "object", "properties": {"name": {"type": "string"}},
              "required": ["name"], "additionalProperties": False}
    text = backend.complete([PERSONA, {"role": "user", "content": "Tell me about the sea."}],
                            max_tokens=24, json_schema=schema)
    assert set(json.loads(text)) == {"name"}          # JSON of the schema, whatever was asked

    class Host:              # the manager, played: the person answers once
        said = ["Hello robot. My name is Zebulon."]

        def say(self, text, control, feedback):
            return SkillOutcome("spoken")

        def listen(self, control):
            return Heard(self.said.pop(0)) if self.said else None

        def seen(self):
            return ""

        def ask_llm(self, messages, max_tokens, json_schema=None):
            return backend.complete(messages, max_tokens=max_tokens, json_schema=json_schema)
    out = run_ask(Host(), Control(), lambda *a: None, "What is your name?",
                  '{"name": {"type": "string"}}', 0, "")
    assert (out.status, out.data) == ("answered", {"name": "Zebulon"})


def test_tools_go_through_the_chat_template_and_a_call_is_never_spoken(backend):
    """The robot's tools (docs/robot_tools.md) on the local model."""
    from vision_dialogue.application.robot_tools import RobotTool, tools_note
    from vision_dialogue.llm.tool_loop import ToolOutcome, ToolRecord, outcome_note
    go = RobotTool("go_to", "Walk to a place in the building, with the person following.",
                   "action", "/go_to", "my_robot_msgs/action/GoTo",
                   {"place": {"type": "string", "description": "the place"}}, ("place",))
    tools = [go.schema()]
    prompt = [PERSONA, {"role": "system", "content": tools_note([go])}]
    calls: list = []
    said = list(backend.stream_with_tools(
        prompt + [{"role": "user", "content": "Take me to the kitchen please."}], tools,
        calls=calls, max_tokens=60))
    assert said == [] and [(c.name, c.arguments) for c in calls] == \
        [("go_to", {"place": "kitchen"})]
    text, calls = backend.complete_with_tools(
        prompt + [{"role": "user", "content": "What is your name?"}], tools, max_tokens=40)
    assert text and not calls and "{" not in text
    # the round trip: the call and its result as the template writes them, and how it went
    # (a small model gets one round: tool_loop.outcome_note), then an answer in its words
    went = outcome_note([ToolRecord("c1", "go_to", {"place": "kitchen"},
                                    ToolOutcome(text="arrived"))])
    done = prompt + [
        {"role": "user", "content": "Take me to the kitchen please."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "go_to", "arguments": '{"place": "kitchen"}'}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": 'The robot\'s go_to done: {"arrived": true, "place": "kitchen"}'},
        {"role": "system", "content": went}]
    text, calls = backend.complete_with_tools(done, tools, tool_choice="none", max_tokens=40)
    assert "kitchen" in text and not calls and "{" not in text
    # the next warm-up reads the prompt with the tools the last reply had
    assert backend.warm(done) >= 0 and backend.warm(done) == 0


# the limit counts its wait for the tests running when it asks (cores_alone)
@pytest.mark.timeout(600)
def test_a_session_acts_on_each_request_decided_on_the_side(backend, cores_alone):
    """The robot's actions decided first (core/action_choice.py), on the real model.

    Every request of one conversation calls, small talk does not, and the side question
    leaves the reply's cached prompt in place.
    """
    from vision_dialogue.core.conversation import Conversation, ConversationConfig
    from vision_dialogue.core.persona import load_persona
    from vision_dialogue.application.robot_tools import RobotTool
    from vision_dialogue.llm.tool_loop import ToolOutcome

    go = RobotTool("go_to", "Walk to a place in the building; the person can follow.",
                   "action", "/go_to", "my_robot_msgs/action/GoTo",
                   {"place": {"type": "string", "description": "the place to go to"}},
                   ("place",))
    wave = RobotTool("wave_hand", "Wave a hand at the person.", "service", "/wave_hand",
                     "std_srvs/srv/Trigger")
    ran: list = []

    class Robot:
        acts = True
        verbs = {"go", "walk", "wave"}

        def schemas(self):
            return [go.schema(), wave.schema()]

        def run(self, name, args):
            ran.append((name, dict(args)))
            return ToolOutcome(text=f"The robot's {name} done.")

    conv = Conversation(backend, load_persona(), ConversationConfig(warm_cache=False))
    conv.add_tools(Robot())
    try:
        conv.turn("Please take me to the kitchen.")
        conv.turn("Thank you, that was nice.")
        reused_before = backend.reused_tokens
        conv.turn("Please take me to the library now.")
    finally:
        conv.close(0)
    assert [n for n, _ in ran] == ["go_to", "go_to"], ran
    assert "kitchen" in ran[0][1]["place"] and "library" in ran[1][1]["place"]
    assert reused_before > 0 and backend.reused_tokens > 0.5 * backend.prompt_tokens


def test_the_manager_runs_the_variant_default_auto_chose_and_says_why():
    """The manager's LLM (LlmCheck) resolves default:auto before anything reads the model.

    The backend and the focus note read the chosen variant; the choice is logged.
    """
    from vision_dialogue.llm.default_model import VARIANTS, ModelSetupError
    from vision_dialogue.ros.manager.llm_check import LlmCheck
    from vision_dialogue.ros.manager.params import PARAMS, focus_note_style
    try:
        for variant in ("0.5b", "1.5b"):
            VARIANTS[variant].part_paths()
    except ModelSetupError as e:
        pytest.skip(f"an embedded model is not installed: {e}")
    params = {p.name: p.default for p in PARAMS}
    # one thread: what is measured is the wiring, not this machine (3 workers on 2 cores)
    params.update(llm_backend="local", model="default:auto", local_threads=1)
    said = []

    class Log:
        def info(self, text):
            said.append(text)
        warning = error = info

    check = LlmCheck(params, Log(), lambda record: None)
    chosen = params["model"]
    assert chosen in ("default:0.5b", "default:1.5b")
    assert len(said) == 1 and said[0].startswith(
        f"model default:auto runs the {chosen.partition(':')[2].upper()}: the 1.5B's first "
        "clause takes ")
    variant = chosen.partition(":")[2]
    assert check.backend.model_path.endswith(f"{variant}.gguf")
    assert focus_note_style(params) == VARIANTS[variant].focus_note
