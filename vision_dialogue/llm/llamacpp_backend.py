"""An in-process chat backend on llama.cpp (`llama-cpp-python`), reading a GGUF file directly.

Why beside the transformers backend: on 2 CPU cores llama.cpp decodes the embedded 0.5B model
about 2.4x faster (28 vs 11.5 tokens/s) and re-reads nothing of a prompt it has seen (it keeps
the key/value cache of the longest common token prefix by itself), but reads new prompt text
about 2.8x slower. Which wins over a whole session is measured in benchmarks/bench_dialogue.py.

Text only (`supports_images` False: frames come in as the observer's text). Tools (the robot's
actions, VFM tools) go through the GGUF's own chat template, and the model's calls, written as
text, are read back (llm/written_calls.py). Like the
transformers backend: one generation at a time; `stream()` yields sentences and stops the
generation when closed; a background call (a fold) runs on its own llama.cpp context, so it
never evicts the reply's cached prefix, and stops at its next token when a reply wants the CPU
(raises Preempted); threads per generation follow the free cores (cpu_threads.CpuShare).
"""
from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Iterator, Sequence

from vision_dialogue.llm.avoid import token_triples, triple_penalty
from vision_dialogue.llm.base import BackendError, Message, Preempted, given_up
from vision_dialogue.llm.chat_messages import text_conversation
from vision_dialogue.llm.cpu_threads import CpuShare
from vision_dialogue.llm.one_at_a_time import OneAtATime
from vision_dialogue.llm.options import LOCAL_THREADS, BackendOptions, default_variant
from vision_dialogue.llm.probe import Probe
from vision_dialogue.llm.written_calls import HeldSpeech, ToolCall, tool_names, \
    written_tool_calls

_LOG = logging.getLogger(__name__)

CONTEXT_TOKENS = 4096
"""The context window each llama.cpp context is made with (the prompt is bounded well below)."""
WARM_CHUNK = 32
"""Prompt tokens read per step while warming or in a background call (a reply waits at most
one step for the CPU: about 0.7 s for the 1.5B on one core)."""
LLAMACPP_FIX = 'VD_EXTRAS="model llamacpp" scripts/setup.sh (compiles llama.cpp once, ~2.5 min)'
"""How a machine gets llama.cpp (doctor's advice)."""


def llamacpp_installed() -> bool:
    """Whether llama-cpp-python is installed (found, not imported)."""
    import importlib.util
    return importlib.util.find_spec("llama_cpp") is not None


def llamacpp_version() -> str | None:
    """The installed llama-cpp-python's version, or None (not installed); imports nothing."""
    if not llamacpp_installed():
        return None
    from importlib.metadata import version
    return version("llama_cpp_python")


class LlamaCppChatBackend:
    """A `ChatBackend` running a GGUF chat model in this process with llama.cpp.

    gguf_path: the model file (its own chat template is used). max_new_tokens: reply length cap
    (per call: max_tokens). temperature: 0.0 = greedy. threads: CPU threads (0: the free cores
    before each generation). context: tokens per context.
    """

    preemptible = True
    supports_images = False
    avoids = True              # complete/stream take `avoid` (texts not to say again)
    json_schema = True         # complete takes `json_schema` (output constrained by a grammar)

    in_process = True
    PARAMS = [LOCAL_THREADS]

    @staticmethod
    def check_engine() -> Probe:
        """doctor: whether llama.cpp is installed."""
        found = llamacpp_version()
        if found is None:
            return Probe(False, "llm_backend llamacpp, but llama-cpp-python is not installed",
                         LLAMACPP_FIX)
        return Probe(True, f"llama.cpp (llama-cpp-python {found})")
    simple_tool_use = True     # only the turn's tools, one round (core/turn_tools.py)
    side_questions = True      # complete(side=True): its own cache (core/action_choice.py)

    @classmethod
    def from_options(cls, o: BackendOptions) -> "LlamaCppChatBackend":
        """A GGUF file, or the embedded default model ("default", "default:1.5b")."""
        path, variant = o.model, default_variant(o.model)
        if variant is not None:
            from vision_dialogue.llm.default_model import ensure_default_gguf
            path = ensure_default_gguf(variant=variant)
        return cls(path, max_new_tokens=o.max_new_tokens, temperature=o.temperature,
                   threads=o.threads)

    def __init__(self, gguf_path: str, *, max_new_tokens: int = 96, temperature: float = 0.0,
                 threads: int = 0, context: int = CONTEXT_TOKENS):
        try:
            import llama_cpp
        except ImportError as exc:
            raise BackendError("llm_backend 'llamacpp' needs llama-cpp-python: pip install "
                               "-r requirements/llamacpp.txt (builds from source, about 9 "
                               "minutes on 2 cores the first time)") from exc
        path = Path(str(gguf_path)).expanduser()
        if not path.is_file():
            raise BackendError(f"GGUF model file {str(path)!r} does not exist")
        if int(max_new_tokens) < 1:
            raise BackendError(f"max_new_tokens={max_new_tokens!r} must be >= 1")
        if float(temperature) < 0.0:
            raise BackendError(f"temperature={temperature!r} must be >= 0")
        self.model_path = str(path)
        self.model_name = path.stem
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.cpu = CpuShare(threads)
        self._new = lambda: llama_cpp.Llama(
            model_path=str(path), n_ctx=int(context), n_threads=self.cpu.cores,
            n_threads_batch=self.cpu.cores, verbose=False)
        try:
            self._contexts = {"reply": self._new()}
            self._formats = {g: _chat_formatter(self._contexts["reply"], g)
                             for g in (True, False)}
        except Exception as exc:  # noqa: BLE001 - a bad file fails at startup, clearly
            raise BackendError(f"cannot load GGUF model {str(path)!r}: "
                               f"{exc.__class__.__name__}: {exc}") from exc
        self._turns = OneAtATime()            # one generation at a time, replies first
        self._reply_tools = None              # the tools the last reply was offered
        self.reused_tokens = self.prompt_tokens = 0    # of the last reply's prompt
        # the last reply's times (monotonic): asked, the model free for it, its first token
        self.reply_times: dict[str, float] = {}
        _LOG.info("loaded GGUF model %s with llama.cpp", path)

    # -- ChatBackend -------------------------------------------------------------------------
    def stop_background(self) -> None:
        """Stop a background generation now and refuse new ones (its conversation closes)."""
        self._turns.stopping.set()

    def resume_background(self) -> None:
        """Take background calls again (a new conversation on this engine)."""
        self._turns.stopping.clear()

    def complete(self, messages: Sequence[Message], *, model: str | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 background: bool = False, avoid: Sequence[str] = (),
                 json_schema: dict | None = None, side: bool = False) -> str:
        """The whole reply text (stripped); background=True may raise Preempted.

        avoid: texts not to say again (their token triples are penalised, llm/avoid.py).
        json_schema: the reply is one JSON value of this schema (llama.cpp's grammar).
        side: a short question asked as part of a reply (core/action_choice.py), on its own
        cache, so the reply's cached prompt stays and the question's fixed start is read once.
        """
        conversation = text_conversation(messages)
        grammar = self._grammar(json_schema)
        if background:
            with self._turns.lock:
                if self._turns.give_way:
                    raise Preempted("a reply is waiting for the model")
                return "".join(self._pieces(conversation, max_tokens, temperature,
                                            "background", avoid, grammar)).strip()
        with self._turns.reply():
            return "".join(self._pieces(conversation, max_tokens, temperature,
                                        "side" if side else "reply", avoid, grammar)).strip()

    def _grammar(self, schema: dict | None):
        """llama.cpp's grammar for JSON of `schema` (kept per schema; None: free text)."""
        if schema is None:
            return None
        import json

        from llama_cpp import LlamaGrammar
        key = json.dumps(schema, sort_keys=True)
        cache = self.__dict__.setdefault("_grammars", {})
        if key not in cache:
            try:
                cache[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:  # noqa: BLE001 - a schema llama.cpp cannot compile
                raise BackendError(f"cannot constrain the reply to {key[:80]}: {exc}") from exc
        return cache[key]

    def stream(self, messages: Sequence[Message], *, model: str | None = None,
               max_tokens: int | None = None, temperature: float | None = None,
               avoid: Sequence[str] = ()) -> Iterator[str]:
        """Yield the reply sentence by sentence; closing the iterator stops the generation."""
        conversation = text_conversation(messages)      # bad messages raise here, at the call
        return self._stream(conversation, max_tokens, temperature, avoid)

    def complete_with_tools(self, messages: Sequence[Message], tools: Sequence[dict], *,
                            model: str | None = None, tool_choice="auto", stream: bool = False,
                            max_tokens: int | None = None,
                            temperature: float | None = None) -> tuple[str, list[ToolCall]]:
        """The reply with `tools` offered: ``(text, tool_calls)`` (see stream_with_tools)."""
        calls: list[ToolCall] = []
        text = " ".join(self.stream_with_tools(messages, tools, tool_choice=tool_choice,
                                               max_tokens=max_tokens, temperature=temperature,
                                               calls=calls))
        return text.strip(), calls

    def stream_with_tools(self, messages: Sequence[Message], tools: Sequence[dict], *,
                          model: str | None = None, tool_choice="auto",
                          max_tokens: int | None = None, temperature: float | None = None,
                          calls: list | None = None,
                          avoid: Sequence[str] = ()) -> Iterator[str]:
        """Yield the reply's sentences with `tools` offered through the GGUF's chat template.

        The model writes a call as text (`<tool_call>{...}</tool_call>` for Qwen): it is held
        back, never spoken, and appended to `calls` as a ToolCall when the reply ends. With
        tool_choice "none" the tools stay in the prompt (its cached prefix with them) and a
        call is still held back; the caller ignores it. `avoid`: as in `stream`.
        """
        conversation = text_conversation(messages)
        return self._stream(conversation, max_tokens, temperature, avoid, list(tools), calls)

    def _stream(self, conversation, max_tokens, temperature, avoid, tools=None,
                calls: list | None = None) -> Iterator[str]:
        self.reply_times = {"asked": time.monotonic()}
        with self._turns.reply():
            self.reply_times["free"] = time.monotonic()
            speech = HeldSpeech(tool_names(tools) if tools else set())
            pieces = self._pieces(conversation, max_tokens, temperature, "reply", avoid,
                                  tools=tools)
            try:
                for piece in pieces:
                    self.reply_times.setdefault("first_token", time.monotonic())
                    yield from speech.feed(piece)
                rest, written = speech.finish()
                yield from rest
                if calls is not None:
                    calls.extend(written_tool_calls(written))
            finally:
                pieces.close()

    def warm(self, messages: Sequence[Message], tools: Sequence[dict] | None = None,
             side: bool = False) -> int:
        """Read `messages` into the reply's cache now, while nobody waits for a reply.

        The next reply's prompt starts with them, so it reads only its new tokens. `tools`:
        those the next reply is offered (they come first in the prompt; default: the last
        reply's, () for none). `side`: into the side questions' cache instead (an intent's
        catalogue, read once before the first line). Stops for a reply (raises Preempted;
        what was read stays). Returns the tokens read.
        """
        conversation = text_conversation(messages)
        tools = [] if side else self._reply_tools if tools is None else list(tools)
        with self._turns.lock:
            llm = self._context("side") if side else self._contexts["reply"]
            tokens, _ = self._tokens(llm, conversation, generation=False, tools=tools)
            with self._on_free_cores(llm):
                return self._read(llm, tokens)

    # -- generation --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _on_free_cores(self, llm):
        """One generation on the cores other work leaves free (cpu_threads)."""
        threads = self.cpu.threads()
        llm._ctx.set_n_threads(threads, threads)   # the public n_threads is read at load
        yield

    def _read(self, llm, tokens: list) -> int:
        """Read `tokens` into `llm`'s cache, WARM_CHUNK at a time, stopping for a reply.

        Only what the cache does not hold yet is read (what was read stays when Preempted is
        raised). Returns the tokens read.
        """
        common = common_prefix(llm._input_ids.tolist(), tokens)
        if common >= len(tokens):
            return 0
        for i in range(common, len(tokens), WARM_CHUNK):
            if self._turns.give_way:     # before the cache is cut: a reply may still use it
                raise Preempted("stopped reading a prompt for a reply")
            llm.n_tokens = i                 # eval() drops the cache from here on
            llm.eval(tokens[i:i + WARM_CHUNK])
        return len(tokens) - common

    def _tokens(self, llm, conversation: list, generation: bool = True,
                tools=None) -> tuple[list, list]:
        """The prompt's tokens as the GGUF's chat template makes them, and its stop strings."""
        result = self._formats[generation](messages=conversation, tools=tools or None)
        tokens = llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special,
                              special=True)
        stop = result.stop if isinstance(result.stop, list) else [result.stop] \
            if result.stop else []
        return tokens, stop

    def _context(self, lane: str):
        if lane not in self._contexts:
            self._contexts[lane] = self._new()      # shares the mapped weights; own cache
        return self._contexts[lane]

    def _pieces(self, conversation: list, max_tokens, temperature, lane: str,
                avoid: Sequence[str] = (), grammar=None, tools=None) -> Iterator[str]:
        """The reply's text pieces as llama.cpp makes them (call with the lock held).

        A reply's `tools` are kept: the next warm-up reads the prompt with them (the cached
        prefix starts with the tools).
        """
        n = self.max_new_tokens if max_tokens is None else int(max_tokens)
        if n < 1:
            raise BackendError(f"max_tokens={max_tokens!r} must be >= 1")
        t = self.temperature if temperature is None else float(temperature)
        llm = self._context(lane)
        with self._on_free_cores(llm):
            try:
                tokens, stop = self._tokens(llm, conversation, tools=tools)
                if lane == "reply":
                    self._reply_tools = tools
                    self.reused_tokens = common_prefix(llm._input_ids.tolist(), tokens)
                    self.prompt_tokens = len(tokens)
                elif lane == "background":   # read in one go, it would hold a reply up
                    self._read(llm, tokens[:-1])
                chunks = llm.create_completion(tokens, max_tokens=n, temperature=t, stop=stop,
                                               stream=True, grammar=grammar,
                                               **self._avoiding(llm, avoid))
                for chunk in chunks:
                    if lane == "background" and self._turns.give_way:
                        raise Preempted("stopped for a reply")
                    if given_up():          # the lock goes to the next turn's reply
                        raise BackendError("given up: the turn passed its reply deadline")
                    text = chunk["choices"][0].get("text")
                    if lane == "reply":
                        self.reply_times.setdefault("first_token", time.monotonic())
                    if text:
                        yield text
            except (BackendError, GeneratorExit):
                raise
            except Exception as exc:  # noqa: BLE001
                raise BackendError(f"local generation failed: {exc.__class__.__name__}: "
                                   f"{exc}") from exc

    @staticmethod
    def _avoiding(llm, avoid: Sequence[str]) -> dict:
        """create_completion's logits processor that keeps off `avoid` (llm/avoid.py)."""
        if not avoid:
            return {}
        from llama_cpp import LogitsProcessorList

        def encode(text: str) -> list[int]:
            return llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return {"logits_processor": LogitsProcessorList(
            [triple_penalty(token_triples(encode, avoid))])}


def _chat_formatter(llm, generation: bool):
    """The GGUF's own chat template, as llama-cpp-python's chat completion applies it."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise BackendError("the GGUF file has no chat template; use an instruct/chat model")
    eos, bos = llm.token_eos(), llm.token_bos()
    return Jinja2ChatFormatter(
        template=template, eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        add_generation_prompt=generation, stop_token_ids=[eos])


def common_prefix(a, b) -> int:
    """How many leading tokens two token lists share (what a llama.cpp cache still holds)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
