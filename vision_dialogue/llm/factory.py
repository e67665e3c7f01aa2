"""Choosing the LLM backend by name: one table, each backend builds itself.

A row names the class ("module:Class", variants/table.py). A backend class has
`from_options(BackendOptions)`, `in_process` (it runs the model in this process: text
observations, the embedded default model) and `PARAMS` (the manager's parameters it reads,
from `BackendOptions.params` when they are not common options); a server backend may add
`probe(options, timeout=, images=)`, which the manager runs at start. A backend module imports
its heavy libraries when it is built, not when the table is read. A new backend is one module
and one row (docs/llm_client.md).
"""
from __future__ import annotations

import logging

from vision_dialogue.llm.options import DTYPES, LOCAL_DTYPE, LOCAL_THREADS, BackendOptions, \
    default_variant
from vision_dialogue.variants import VariantTable

_LOG = logging.getLogger(__name__)


class LocalEngine:
    """`local`: the measured best local engine that is installed, llama.cpp, else transformers.

    On the dialogue battery (docs/results.md) llama.cpp gave the embedded 0.5B model better
    answers at less than half the latency; it has no wheel on PyPI, so a machine set up
    without it (README command 1 on a fresh machine) runs transformers.
    """

    in_process = True
    PARAMS = [LOCAL_DTYPE, LOCAL_THREADS]

    @staticmethod
    def check_engine():
        """doctor: which engine runs the model; transformers is slower, so a warning."""
        from vision_dialogue.llm.probe import Probe
        llamacpp = backend_class("llamacpp").check_engine()
        if llamacpp.ok:
            return llamacpp
        return Probe(None, "transformers (llama-cpp-python is not installed: replies about 2x "
                     "slower)", llamacpp.fix)

    @classmethod
    def from_options(cls, o: BackendOptions):
        from vision_dialogue.llm.llamacpp_backend import llamacpp_installed
        kind = "llamacpp" if llamacpp_installed() else "transformers"
        if kind == "transformers":
            _LOG.info("llm_backend local: llama-cpp-python is not installed, so the model runs "
                      "on transformers (VD_EXTRAS=llamacpp scripts/setup.sh for the faster "
                      "engine)")
        return backend_class(kind).from_options(o)


LLM_BACKENDS = VariantTable("llm_backend", "LLM backend", {
    # any OpenAI-compatible server (images when it takes them)
    "openai": "vision_dialogue.llm.openai_backend:OpenAIChatBackend",
    # a local checkpoint in this process (torch)
    "transformers": "vision_dialogue.llm.transformers_backend:TransformersChatBackend",
    # a local GGUF file in this process (llama.cpp)
    "llamacpp": "vision_dialogue.llm.llamacpp_backend:LlamaCppChatBackend",
    # llamacpp where installed, else transformers
    "local": "vision_dialogue.llm.factory:LocalEngine",
})
KINDS = LLM_BACKENDS.names
SERVER_KIND = "openai"
"""The kind `--base-url` alone means (bringup, doctor)."""

__all__ = ["DTYPES", "KINDS", "LLM_BACKENDS", "SERVER_KIND", "BackendOptions", "backend_class",
           "default_variant", "local_kinds", "make_backend", "measured_focus_note"]


def backend_class(kind: str) -> type:
    """The class of a backend kind; ValueError (naming llm_backend) for an unknown kind."""
    return LLM_BACKENDS.load(kind)


def local_kinds() -> tuple[str, ...]:
    """Kinds that run a model in this process (text observations, the embedded default model)."""
    return tuple(k for k, cls in LLM_BACKENDS.classes().items() if cls.in_process)


def measured_focus_note(kind: str, model: str) -> str:
    """Resolve `focus_note: auto`: the style measured for the embedded model's variant.

    core/focus.py STYLES; `soft` for any other text-only model.
    """
    variant = default_variant(model) if kind in local_kinds() else None
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
