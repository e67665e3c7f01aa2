"""Choosing the LLM backend by name: one table, each backend builds itself.

A row names the class ("module:Class", imported only when chosen) and whether it runs the
model in this process. A backend class has `from_options(BackendOptions)` and `in_process`;
a server backend may add `probe(options, timeout=, images=)`, which the manager runs at
start. A new backend is one module and one row (docs/llm_client.md).
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass

from vision_dialogue.llm.options import DTYPES, BackendOptions, default_variant

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendRow:
    """One row of BACKENDS (the table can be read without importing any backend)."""

    path: str           # "module:Class"
    in_process: bool    # runs a model here: text observations, the embedded default model


class LocalEngine:
    """`local`: the measured best local engine that is installed, llama.cpp, else transformers.

    On the dialogue battery (README, Benchmarks) llama.cpp gave the embedded 0.5B model better
    answers at less than half the latency; it has no wheel on PyPI, so a machine set up
    without it (README command 1 on a fresh machine) runs transformers.
    """

    in_process = True

    @classmethod
    def from_options(cls, o: BackendOptions):
        kind = "llamacpp" if importlib.util.find_spec("llama_cpp") is not None \
            else "transformers"
        if kind == "transformers":
            _LOG.info("llm_backend local: llama-cpp-python is not installed, so the model runs "
                      "on transformers (VD_EXTRAS=llamacpp scripts/setup.sh for the faster "
                      "engine)")
        return backend_class(kind).from_options(o)


BACKENDS: dict[str, BackendRow] = {
    # any OpenAI-compatible server (images when it takes them)
    "openai": BackendRow("vision_dialogue.llm.openai_backend:OpenAIChatBackend", False),
    # a local checkpoint in this process (torch)
    "transformers": BackendRow(
        "vision_dialogue.llm.transformers_backend:TransformersChatBackend", True),
    # a local GGUF file in this process (llama.cpp)
    "llamacpp": BackendRow("vision_dialogue.llm.llamacpp_backend:LlamaCppChatBackend", True),
    # llamacpp where installed, else transformers
    "local": BackendRow("vision_dialogue.llm.factory:LocalEngine", True),
}
KINDS = tuple(BACKENDS)
LOCAL_KINDS = tuple(k for k, row in BACKENDS.items() if row.in_process)
"""Kinds that run a model in this process (text observations, the embedded default model)."""
SERVER_KIND = "openai"
"""The kind `--base-url` alone means (bringup, doctor)."""

__all__ = ["BACKENDS", "DTYPES", "KINDS", "LOCAL_KINDS", "SERVER_KIND", "BackendOptions",
           "backend_class", "default_variant", "make_backend", "measured_focus_note"]


def backend_class(kind: str) -> type:
    """The class of a backend kind; ValueError for an unknown kind."""
    if kind not in BACKENDS:
        raise ValueError(f"llm_backend={kind!r} must be one of {list(KINDS)}")
    module, name = BACKENDS[kind].path.split(":")
    return getattr(importlib.import_module(module), name)


def measured_focus_note(kind: str, model: str) -> str:
    """Resolve `focus_note: auto`: the style measured for the embedded model's variant.

    core/focus.py STYLES; `soft` for any other text-only model.
    """
    variant = default_variant(model) if kind in LOCAL_KINDS else None
    if variant is None:
        return "soft"
    from vision_dialogue.llm.default_model import VARIANTS
    return VARIANTS[variant].focus_note if variant in VARIANTS else "soft"


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
    return backend_class(kind).from_options(BackendOptions(**options))
