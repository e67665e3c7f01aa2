"""What every LLM backend is built from (`BackendOptions`), and the names they share.

Below the backends and the table (llm/factory.py), so a backend module reads them without
importing the table that imports it. ROS-free.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("auto", "float32", "bfloat16", "float16", "int8")
"""Precisions of a local model's weights (int8: quantised Linear layers)."""

DEFAULT_NAMES = ("", "default", "gpt-4o-mini")
"""Model names that mean the embedded default model for a local backend ("default:1.5b": its
larger variant); gpt-4o-mini is the manager's default name for a server."""


@dataclass
class BackendOptions:
    """Everything a backend's `from_options` may read (each reads its own)."""

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
