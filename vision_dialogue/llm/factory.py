"""Choosing the LLM backend by name.

The heavy modules are imported only when asked for.
"""
from __future__ import annotations

KINDS = ("openai", "transformers")
DTYPES = ("auto", "float32", "bfloat16", "float16", "int8")
"""Precisions of a local model's weights (transformers_backend checks the same list)."""


def make_backend(kind: str, *, base_url: str = "", model: str = "gpt-4o-mini",
                 api_key_env: str = "OPENAI_API_KEY", timeout: float = 30.0,
                 max_retries: int = 2, backoff: float = 0.5, supports_images: bool = True,
                 device: str = "cpu", max_new_tokens: int = 96, prefix_cache: bool = True,
                 dtype: str = "auto", temperature: float = 0.0):
    """Build a ChatBackend.

    "openai": OpenAIChatBackend for any OpenAI-compatible server (base_url empty = the openai
    default), `model` is the model name. "transformers": TransformersChatBackend on a local
    checkpoint; `model` is its path, or empty / "default" for the embedded default model
    (ensure_default_model()), "default:1.5b" for its larger variant; `prefix_cache` keeps the
    previous prompt's key/value cache; `dtype` is the weights' precision (DTYPES; "auto" is
    the variant's `cpu_dtype` for the embedded default model on a CPU, else the checkpoint's).
    `temperature` is the sampling temperature of both kinds (0.0: greedy, the same reply to
    the same prompt).
    Raises ValueError for an unknown kind, BackendError when the backend cannot start (no API
    key for a remote server, missing checkpoint).
    """
    if kind == "openai":
        from vision_dialogue.llm.openai_backend import OpenAIChatBackend
        return OpenAIChatBackend(base_url=base_url or None, model=model or "gpt-4o-mini",
                                 api_key_env=api_key_env, timeout=timeout,
                                 max_retries=max_retries, backoff=backoff,
                                 supports_images=supports_images, temperature=temperature)
    if kind == "transformers":
        from vision_dialogue.llm.transformers_backend import TransformersChatBackend
        path = model
        if not path or path in ("default", "gpt-4o-mini") or path.startswith("default:"):
            from vision_dialogue.llm.default_model import (DEFAULT_VARIANT, VARIANTS,
                                                           ensure_default_model)
            variant = path.partition(":")[2] or DEFAULT_VARIANT
            path = ensure_default_model(variant=variant)
            if dtype == "auto" and str(device).startswith("cpu"):
                dtype = VARIANTS[variant].cpu_dtype     # measured (bench_dialogue --dtype)
        return TransformersChatBackend(path, device=device, max_new_tokens=max_new_tokens,
                                       prefix_cache=prefix_cache, dtype=dtype,
                                       temperature=temperature)
    raise ValueError(f"llm_backend={kind!r} must be one of {list(KINDS)}")
