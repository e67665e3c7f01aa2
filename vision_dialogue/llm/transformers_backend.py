"""An in-process chat backend on Hugging Face `transformers`, offline only.

Two kinds of local checkpoints are handled behind the same `ChatBackend` interface:

* text-only chat models (`AutoModelForCausalLM` + the tokenizer's chat template); image parts
  of the messages are dropped (the manager already puts text observations in their place),
  `supports_images` is False;
* image-text-to-text models (`AutoModelForImageTextToText` + `AutoProcessor`); data-URL images
  are decoded to PIL and go to the processor, `supports_images` is True.

Nothing is ever downloaded (`local_files_only=True`); `model_path` is a checkpoint directory or
the id of a model already in the Hugging Face cache. The model is loaded at construction (so a
bad path or broken checkpoint fails at node startup, not at the first turn). One generation
runs at a time (a lock); `stream()` yields sentences as they complete, generating in a thread
with `TextIteratorStreamer`, and stops generating when the consumer closes the iterator.

Two things keep a reply quick on a slow CPU:

* prefix reuse: the key/value cache of the last reply (prompt and answer) is kept, and the next
  prompt, which starts with the same persona, timeline and dialogue, only computes its new
  tokens (text models; background calls keep a cache of their own);
* preemption: a background call (`complete(..., background=True)`, a summary or a fold) stops
  at its next token when a reply wants the model, raising `Preempted`.
"""
from __future__ import annotations

import base64
import binascii
import contextlib
import io
import logging
import os
import threading
from pathlib import Path
from typing import Iterator, Sequence

from vision_dialogue.llm.base import BackendError, Message, Preempted
from vision_dialogue.llm.chat_messages import check_message, text_conversation
from vision_dialogue.llm.cpu_threads import CpuShare
from vision_dialogue.llm.one_at_a_time import OneAtATime
from vision_dialogue.llm.avoid import AVOID_BIAS, token_triples
from vision_dialogue.llm.options import DTYPES, LOCAL_DTYPE, LOCAL_THREADS, BackendOptions, \
    default_variant
from vision_dialogue.llm.sentences import speech_splitter
from vision_dialogue.llm.llamacpp_backend import llamacpp_version
from vision_dialogue.llm.probe import Probe

_LOG = logging.getLogger(__name__)

WARM_CHUNK = 32
"""Prompt tokens computed per step while warming or in a background call (a reply waits at
most one step)."""

MIN_PREFIX_REUSE = 16
"""A kept cache is used only when at least this many leading tokens match."""


class _PrefixCache:
    """The key/value cache of one earlier generation and the tokens it covers."""

    def __init__(self):
        self.ids = None            # 1-D tensor: the tokens whose keys/values are in `cache`
        self.cache = None
        self.reused_tokens = 0     # of the last prompt (for benchmarks and logs)

    def take(self, ids):
        """The cache cropped to the longest usable prefix of `ids` (1-D), or None."""
        self.reused_tokens = 0
        if self.cache is None:
            return None
        cached = self.ids[: self.cache.get_seq_length()]
        n = min(len(cached), len(ids) - 1)       # at least one token left to compute
        same = (cached[:n] == ids[:n]).int()
        common = int(same.cumprod(0).sum()) if n > 0 else 0
        if common < MIN_PREFIX_REUSE:
            self.clear()
            return None
        self.cache.crop(common - self.cache.get_seq_length())   # a negative count removes
        self.reused_tokens = common
        return self.cache

    def keep(self, sequence, cache) -> None:
        self.ids, self.cache = sequence.detach(), cache

    def clear(self) -> None:
        self.ids = self.cache = None


class TransformersChatBackend:
    """A `ChatBackend` running a local transformers checkpoint (text or image-text-to-text).

    model_path: a local checkpoint directory (or a model id already in the HF cache).
    device: torch device ("cpu", "cuda", "cuda:0", ...). max_new_tokens: reply length cap
    (overridable per call with max_tokens). temperature: 0.0 = greedy (deterministic), > 0
    samples. dtype: "auto" (the checkpoint's dtype; float32 on CPU when the checkpoint is half
    precision), "float32", "bfloat16", "float16" or "int8" (CPU: the Linear layers' weights in
    int8 per output channel, activations quantised on the fly; about 4x faster decoding here).
    trust_remote_code: allow a checkpoint's own Python code (off by default). threads: CPU
    threads per generation (0: the cores other work left free since the last one, cpu_threads).
    """

    preemptible = True
    avoids = True              # complete/stream take `avoid` (texts not to say again)

    in_process = True
    PARAMS = [LOCAL_DTYPE, LOCAL_THREADS]

    @staticmethod
    def check_engine() -> Probe:
        """doctor: transformers runs the model (and llama.cpp, if installed, is not used)."""
        found = llamacpp_version()
        unused = "" if found is None else (f"; llama.cpp (llama-cpp-python {found}) is "
                                           "installed, not used: llm_backend transformers")
        return Probe(True, "transformers" + unused)

    @classmethod
    def from_options(cls, o: BackendOptions) -> "TransformersChatBackend":
        """A checkpoint folder, or the embedded default model ("default", "default:1.5b")."""
        path, dtype, variant = o.model, o.dtype, default_variant(o.model)
        if variant is not None:
            from vision_dialogue.llm.default_model import VARIANTS, ensure_default_model
            path = ensure_default_model(variant=variant)
            if dtype == "auto" and str(o.device).startswith("cpu"):
                dtype = VARIANTS[variant].cpu_dtype     # measured (bench_dialogue --dtype)
        return cls(path, device=o.device, max_new_tokens=o.max_new_tokens,
                   prefix_cache=o.prefix_cache, dtype=dtype, temperature=o.temperature,
                   threads=o.threads)

    def __init__(self, model_path: str, *, device: str = "cpu", max_new_tokens: int = 96,
                 temperature: float = 0.0, dtype: str = "auto",
                 trust_remote_code: bool = False, prefix_cache: bool = True, threads: int = 0):
        if not isinstance(model_path, (str, os.PathLike)) or not str(model_path).strip():
            raise BackendError(f"model_path must be a non-empty path, got {model_path!r}")
        if int(max_new_tokens) < 1:
            raise BackendError(f"max_new_tokens={max_new_tokens!r} must be >= 1")
        if float(temperature) < 0.0:
            raise BackendError(f"temperature={temperature!r} must be >= 0")
        if dtype not in DTYPES:
            raise BackendError(f"dtype={dtype!r} must be one of {list(DTYPES)}")
        self.model_path = str(model_path)
        self.model_name = Path(self.model_path).name or self.model_path
        self.device = device
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.dtype = dtype
        self.trust_remote_code = bool(trust_remote_code)
        self._turns = OneAtATime()            # one generation at a time, replies first
        self.cpu = CpuShare(threads)            # threads per generation: the free cores
        self.supports_images = False
        self._processor = None
        self._load()
        self.prefix_cache = bool(prefix_cache) and not self.supports_images
        self._caches = {"reply": _PrefixCache(), "background": _PrefixCache()}

    # -- loading -----------------------------------------------------------------------------
    def _load(self) -> None:
        import torch
        import transformers
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)

        path = self.model_path
        local = Path(path).expanduser()
        if local.exists():
            if not (local / "config.json").is_file():
                raise BackendError(f"local model path {path!r} has no config.json; "
                                   f"it is not a transformers checkpoint")
            path = str(local)
        elif path.startswith(("/", ".", "~")):
            raise BackendError(f"local model path {path!r} does not exist")
        common = dict(local_files_only=True, trust_remote_code=self.trust_remote_code)
        try:
            config = transformers.AutoConfig.from_pretrained(path, **common)
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"local model {path!r} not found or unreadable (nothing is "
                               f"downloaded; give a checkpoint directory or a model id already "
                               f"in the Hugging Face cache): {exc}") from exc
        self.supports_images = (config.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
                                and hasattr(config, "vision_config"))
        torch_dtype = self._torch_dtype(config, torch)
        try:
            if self.supports_images:
                self._processor = transformers.AutoProcessor.from_pretrained(path, **common)
                self._tokenizer = self._processor.tokenizer
                model = transformers.AutoModelForImageTextToText.from_pretrained(
                    path, dtype=torch_dtype, **common)
            else:
                self._tokenizer = transformers.AutoTokenizer.from_pretrained(path, **common)
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    path, dtype=torch_dtype, **common)
            self._model = model.to(self.device).eval()
            if self.dtype == "int8":
                self._model = _quantise_int8(self._model, torch)
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"cannot load local model {path!r}: "
                               f"{exc.__class__.__name__}: {exc}") from exc
        if getattr(self._tokenizer, "chat_template", None) is None and not (
                self._processor is not None and getattr(self._processor, "chat_template", None)):
            raise BackendError(f"local model {path!r} has no chat template; use an instruct/chat "
                               f"checkpoint")
        _LOG.info("loaded local model %s (%s, %s, images=%s)", path, config.model_type,
                  self._model.dtype, self.supports_images)

    def _torch_dtype(self, config, torch):
        if self.dtype == "int8":
            if not str(self.device).startswith("cpu"):
                raise BackendError(f"dtype=int8 runs on the CPU only, not {self.device!r}")
            return torch.float32      # quantised after loading
        if self.dtype != "auto":
            return getattr(torch, self.dtype)
        cfg_dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
        if isinstance(cfg_dtype, str):
            cfg_dtype = getattr(torch, cfg_dtype, None)
        if str(self.device).startswith("cpu") and cfg_dtype in (torch.float16, torch.bfloat16):
            return torch.float32  # half precision matmuls are slow or missing on many CPUs
        return cfg_dtype or torch.float32

    # -- ChatBackend -------------------------------------------------------------------------
    @property
    def reused_tokens(self) -> int:
        """Prompt tokens the last reply took from the kept cache instead of computing them."""
        return self._caches["reply"].reused_tokens

    def stop_background(self) -> None:
        """Stop a background generation now and refuse new ones (its conversation closes)."""
        self._turns.stopping.set()

    def resume_background(self) -> None:
        """Take background calls again (a new conversation on this engine)."""
        self._turns.stopping.clear()

    def complete(self, messages: Sequence[Message], *, model: str | None = None,
                 max_tokens: int | None = None, temperature: float | None = None,
                 background: bool = False, avoid: Sequence[str] = ()) -> str:
        """The whole reply text (stripped).

        background=True: a summary or fold, which gives way to replies (raises Preempted).
        avoid: texts not to say again (their word triples are penalised).
        """
        inputs = self._prepare(messages)
        kwargs = self._gen_kwargs(max_tokens, temperature, avoid)
        if background:
            with self._turns.lock:
                out = self._generate_background(inputs, kwargs)
        else:
            with self._turns.reply():
                out = self._generate(inputs, kwargs, "reply")
        new_tokens = out[inputs["input_ids"].shape[1]:]
        return self._tokenizer.decode(new_tokens, skip_special_tokens=True).strip()

    def _generate_background(self, inputs, kwargs):
        """Generate under the lock until done or until a reply wants the model (Preempted)."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        backend, stopped = self, []

        class _GiveWay(StoppingCriteria):
            def __call__(self, input_ids, scores, **kw):
                stop = backend._turns.give_way
                if stop:
                    stopped.append(True)
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool,
                                  device=input_ids.device)

        if self._turns.give_way:
            raise Preempted("a reply is waiting for the model")
        if self.prefix_cache:       # a long prompt computed in one go would hold a reply up
            self._prefill(inputs["input_ids"][0][:-1], "background")
        out = self._generate(inputs, kwargs, "background",
                             stopping_criteria=StoppingCriteriaList([_GiveWay()]))
        if stopped:
            raise Preempted("stopped for a reply")
        return out

    def _generate(self, inputs, kwargs, lane: str, **extra):
        """model.generate with the lane's kept prefix cache; the output token ids (1-D).

        Call with the lock held.
        """
        import torch
        slot = self._caches[lane]
        if self.prefix_cache:
            cache = slot.take(inputs["input_ids"][0])
            if cache is not None:
                extra["past_key_values"] = cache
        try:
            with self._on_free_cores(torch), torch.inference_mode():
                out = self._model.generate(**inputs, **kwargs, **extra,
                                           return_dict_in_generate=True)
        except Exception as exc:  # noqa: BLE001
            slot.clear()
            raise BackendError(f"local generation failed: {exc.__class__.__name__}: "
                               f"{exc}") from exc
        if self.prefix_cache and getattr(out, "past_key_values", None) is not None:
            slot.keep(out.sequences[0], out.past_key_values)
        return out.sequences[0]

    def warm(self, messages: Sequence[Message]) -> int:
        """Compute `messages` into the reply's kept cache now, while nobody waits for a reply.

        The next reply's prompt starts with them, so it computes only its new tokens. Stops for
        a reply (raises Preempted; what was computed stays). Returns the tokens computed.
        """
        if not self.prefix_cache:
            return 0
        ids = self._prepare(messages, generation=False)["input_ids"][0]
        with self._turns.lock:
            return self._prefill(ids, "reply")

    def _prefill(self, ids, lane: str) -> int:
        """Compute `ids` into the lane's kept cache, WARM_CHUNK at a time, stopping for a reply.

        Call with the lock held. What was computed stays when Preempted is raised. Returns the
        tokens computed.
        """
        import torch
        from transformers import DynamicCache
        slot = self._caches[lane]
        cache = slot.take(ids)
        start = slot.reused_tokens                 # 0 when nothing was kept
        if cache is None:
            cache = DynamicCache()
        try:
            with self._on_free_cores(torch), torch.inference_mode():
                for i in range(start, len(ids), WARM_CHUNK):
                    if self._turns.give_way:
                        raise Preempted("stopped reading a prompt for a reply")
                    chunk = ids[i:i + WARM_CHUNK]
                    cache = self._model(input_ids=chunk[None], past_key_values=cache,
                                        use_cache=True).past_key_values
                    slot.keep(ids[:i + len(chunk)], cache)
        except Preempted:
            raise
        except Exception as exc:  # noqa: BLE001
            slot.clear()
            raise BackendError(f"reading the prompt failed: {exc.__class__.__name__}: "
                               f"{exc}") from exc
        return len(ids) - start

    @contextlib.contextmanager
    def _on_free_cores(self, torch):
        """One generation on the cores other work leaves free (cpu_threads; CPU only)."""
        threads = self.cpu.threads()
        if str(self.device).startswith("cpu"):
            torch.set_num_threads(threads)
        yield

    def stream(self, messages: Sequence[Message], *, model: str | None = None,
               max_tokens: int | None = None, temperature: float | None = None,
               avoid: Sequence[str] = ()) -> Iterator[str]:
        """Yield the reply sentence by sentence as generation proceeds (`avoid`: as complete).

        The messages are checked at the call (bad ones raise BackendError at once); a failure
        during generation raises BackendError from the iterator; closing the iterator stops
        the generation.
        """
        inputs = self._prepare(messages)
        kwargs = self._gen_kwargs(max_tokens, temperature, avoid)
        return self._stream(inputs, kwargs)

    def _stream(self, inputs, kwargs) -> Iterator[str]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        stop = threading.Event()
        failure: list[BaseException] = []

        class _Stop(StoppingCriteria):
            def __call__(self, input_ids, scores, **kw):
                return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool,
                                  device=input_ids.device)

        streamer = TextIteratorStreamer(self._tokenizer, skip_prompt=True,
                                        skip_special_tokens=True)

        def run() -> None:
            try:
                self._generate(inputs, kwargs, "reply", streamer=streamer,
                               stopping_criteria=StoppingCriteriaList([_Stop()]))
            except BaseException as exc:  # noqa: BLE001 - reported to the consumer
                failure.append(exc.__cause__ or exc)
                streamer.end()  # unblock the consumer

        with self._turns.reply():
            thread = threading.Thread(target=run, name="local-llm-generate", daemon=True)
            thread.start()
            splitter = speech_splitter()
            try:
                for delta in streamer:
                    if failure:
                        break
                    yield from splitter.feed(delta)
                if failure:
                    exc = failure[0]
                    raise BackendError(f"local generation failed: {exc.__class__.__name__}: "
                                       f"{exc}") from exc
                yield from splitter.flush()
            finally:
                stop.set()
                thread.join()

    # -- prompt building ---------------------------------------------------------------------
    def _gen_kwargs(self, max_tokens: int | None, temperature: float | None,
                    avoid: Sequence[str] = ()) -> dict:
        n = self.max_new_tokens if max_tokens is None else int(max_tokens)
        if n < 1:
            raise BackendError(f"max_tokens={max_tokens!r} must be >= 1")
        t = self.temperature if temperature is None else float(temperature)
        gen = self._model.generation_config
        kw = dict(max_new_tokens=n, pad_token_id=(gen.pad_token_id if gen.pad_token_id is not None
                                                  else self._tokenizer.eos_token_id))
        if avoid:
            kw["sequence_bias"] = {g: -AVOID_BIAS for g in
                                   token_triples(self._encode, avoid)}
        if t > 0:
            kw.update(do_sample=True, temperature=t)
        else:  # greedy; neutralise sampling settings from the checkpoint's generation_config
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        return kw

    def _encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False)

    def _prepare(self, messages: Sequence[Message], generation: bool = True) -> dict:
        if not isinstance(messages, (list, tuple)) or not messages:
            raise BackendError("messages must be a non-empty list of chat messages")
        try:
            if self.supports_images:
                conversation, images = _vision_conversation(messages)
                text = self._processor.apply_chat_template(
                    conversation, add_generation_prompt=True, tokenize=False)
                inputs = self._processor(text=text, images=images or None, return_tensors="pt")
            else:
                conversation = text_conversation(messages)
                text = self._tokenizer.apply_chat_template(
                    conversation, add_generation_prompt=generation, tokenize=False)
                inputs = self._tokenizer(text, return_tensors="pt", add_special_tokens=False)
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"cannot build the prompt for the local model: "
                               f"{exc.__class__.__name__}: {exc}") from exc
        return {k: v.to(self.device) for k, v in dict(inputs).items()}


def _vision_conversation(messages: Sequence[Message]) -> tuple[list[dict], list]:
    """OpenAI-style messages → processor chat format (text/image parts) + PIL images in order."""
    conversation, images = [], []
    for i, m in enumerate(messages):
        role, content = check_message(i, m)
        if isinstance(content, str):
            parts = [{"type": "text", "text": content}]
        else:
            parts = []
            for p in content:
                kind = p.get("type") if isinstance(p, dict) else None
                if kind == "text":
                    parts.append({"type": "text", "text": str(p.get("text", ""))})
                elif kind == "image_url":
                    url = p.get("image_url")
                    url = url.get("url") if isinstance(url, dict) else url
                    images.append(decode_image_url(url))
                    parts.append({"type": "image"})
                else:
                    raise BackendError(f"message {i}: unsupported content part {kind!r}")
        conversation.append({"role": role, "content": parts})
    return conversation, images


def decode_image_url(url) -> "object":
    """A data URL (or local file path / file:// URL) → RGB PIL image; BackendError otherwise.

    Remote (http) URLs are refused: this backend never uses the network.
    """
    from PIL import Image, UnidentifiedImageError

    if not isinstance(url, str) or not url:
        raise BackendError("image part without a url")
    try:
        if url.startswith("data:"):
            header, _, payload = url.partition(",")
            if ";base64" not in header:
                raise BackendError("image data URL must be base64-encoded")
            raw = base64.b64decode(payload, validate=False)
            img = Image.open(io.BytesIO(raw))
        elif url.startswith(("http://", "https://")):
            raise BackendError(f"remote image URL refused (offline backend): {url[:60]}")
        else:
            img = Image.open(url[7:] if url.startswith("file://") else url)
        return img.convert("RGB")
    except BackendError:
        raise
    except (binascii.Error, UnidentifiedImageError, OSError, ValueError) as exc:
        raise BackendError(f"cannot decode image: {exc}") from exc


def _quantise_int8(model, torch):
    """`model` with its Linear layers in int8 (dynamic quantisation, one scale per channel)."""
    import warnings
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    with warnings.catch_warnings():     # torch.ao marks the eager API deprecated, not removed
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig},
                                dtype=torch.qint8, inplace=True)   # no float copy kept
