"""Choosing the LLM backend by name: one table, one builder per kind.

The heavy modules are imported only when asked for. A new backend is one builder function and
one row in BACKENDS (docs/llm_client.md).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

_LOG = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16", "int8")
"""Precisions of a local model's weights (transformers_backend checks the same list)."""

DEFAULT_NAMES = ("", "default", "gpt-4o-mini")
"""Model names that mean the embedded default model for a local backend ("default:1.5b": its
larger variant); gpt-4o-mini is the manager's default name for a server."""


@dataclass
class BackendOptions:
    """Everything a builder may read (each kind reads its own)."""

    base_url: str = ""
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 30.0
    max_retries: int = 2
    backoff: float = 0.5
    supports_images: bool = True
    device: str = "cpu"
    max_new_tokens: int = 96
    prefix_cache: bool = True
    dtype: str = "auto"
    temperature: float = 0.0
    threads: int = 0


def default_variant(model: str) -> str | None:
    """The embedded default model's variant that `model` names, or None (a path)."""
    if model in DEFAULT_NAMES or model.startswith("default:"):
        from vision_dialogue.llm.default_model import DEFAULT_VARIANT
        return model.partition(":")[2] or DEFAULT_VARIANT
    return None


def measured_focus_note(kind: str, model: str) -> str:
    """Resolve `focus_note: auto`: the style measured for the embedded model's variant.

    core/focus.py STYLES; `soft` for any other text-only model.
    """
    variant = default_variant(model) if kind in LOCAL_KINDS else None
    if variant is None:
        return "soft"
    from vision_dialogue.llm.default_model import VARIANTS
    return VARIANTS[variant].focus_note if variant in VARIANTS else "soft"


def _openai(o: BackendOptions):
    from vision_dialogue.llm.openai_backend import OpenAIChatBackend
    return OpenAIChatBackend(base_url=o.base_url or None, model=o.model or "gpt-4o-mini",
                             api_key_env=o.api_key_env, timeout=o.timeout,
                             max_retries=o.max_retries, backoff=o.backoff,
                             supports_images=o.supports_images, temperature=o.temperature)


def _transformers(o: BackendOptions):
    from vision_dialogue.llm.transformers_backend import TransformersChatBackend
    path, dtype, variant = o.model, o.dtype, default_variant(o.model)
    if variant is not None:
        from vision_dialogue.llm.default_model import VARIANTS, ensure_default_model
        path = ensure_default_model(variant=variant)
        if dtype == "auto" and str(o.device).startswith("cpu"):
            dtype = VARIANTS[variant].cpu_dtype     # measured (bench_dialogue --dtype)
    return TransformersChatBackend(path, device=o.device, max_new_tokens=o.max_new_tokens,
                                   prefix_cache=o.prefix_cache, dtype=dtype,
                                   temperature=o.temperature, threads=o.threads)


def _llamacpp(o: BackendOptions):
    from vision_dialogue.llm.llamacpp_backend import LlamaCppChatBackend
    path, variant = o.model, default_variant(o.model)
    if variant is not None:
        from vision_dialogue.llm.default_model import ensure_default_gguf
        path = ensure_default_gguf(variant=variant)
    return LlamaCppChatBackend(path, max_new_tokens=o.max_new_tokens,
                               temperature=o.temperature, threads=o.threads)


def _local(o: BackendOptions):
    """The measured best local engine that is installed: llama.cpp, else transformers.

    On the dialogue battery (README, Benchmarks) llama.cpp gave the embedded 0.5B model better
    answers at less than half the latency; it has no wheel on PyPI, so a machine set up
    without it (README command 1 on a fresh machine) runs transformers.
    """
    import importlib.util
    kind = "llamacpp" if importlib.util.find_spec("llama_cpp") is not None else "transformers"
    if kind == "transformers":
        _LOG.info("llm_backend local: llama-cpp-python is not installed, so the model runs on "
                  "transformers (VD_EXTRAS=llamacpp scripts/setup.sh for the faster engine)")
    return BACKENDS[kind](o)


BACKENDS: dict[str, Callable[[BackendOptions], object]] = {
    "openai": _openai,              # any OpenAI-compatible server (images when it takes them)
    "transformers": _transformers,  # a local checkpoint in this process (torch)
    "llamacpp": _llamacpp,          # a local GGUF file in this process (llama.cpp)
    "local": _local,                # llamacpp where installed, else transformers
}
KINDS = tuple(BACKENDS)
LOCAL_KINDS = ("transformers", "llamacpp", "local")
"""Kinds that run a model in this process (text observations, the embedded default model)."""


def make_backend(kind: str, **options):
    """Build a ChatBackend of `kind` (KINDS) from BackendOptions fields.

    "openai": `model` is the server's model name. "transformers": `model` is a checkpoint
    directory, or empty / "default" for the embedded default model, "default:1.5b" for its
    larger variant; `prefix_cache` keeps the previous prompt's key/value cache; `dtype` is the
    weights' precision (DTYPES; "auto" is the variant's `cpu_dtype` for the embedded default
    model on a CPU, else the checkpoint's). "llamacpp": `model` is a GGUF file, or the embedded
    default as above. "local": llamacpp where llama-cpp-python is installed, else transformers.
    `temperature` (0.0: greedy) and, for local kinds, `threads` (0: the free cores) apply to
    all.
    Raises ValueError for an unknown kind, BackendError when the backend cannot start (no API
    key for a remote server, missing checkpoint).
    """
    if kind not in BACKENDS:
        raise ValueError(f"llm_backend={kind!r} must be one of {list(KINDS)}")
    return BACKENDS[kind](BackendOptions(**options))
