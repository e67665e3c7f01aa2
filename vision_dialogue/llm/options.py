"""What every LLM backend is built from (`BackendOptions`), and the names they share.

Below the backends and the table (llm/factory.py), so a backend module reads them without
importing the table that imports it. ROS-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vision_dialogue.variants import Param

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
    params: dict[str, Any] = field(default_factory=dict)
    """The node's parameter values: a backend reads its own `PARAMS` from here."""


def default_variant(model: str) -> str | None:
    """The embedded default model's variant that `model` names, or None (a path)."""
    if model in DEFAULT_NAMES or model.startswith("default:"):
        from vision_dialogue.llm.default_model import DEFAULT_VARIANT
        return model.partition(":")[2] or DEFAULT_VARIANT
    return None


LOCAL_DTYPE = Param("local_dtype", "auto", "Precision of a local (transformers) model's weights: "
                    "int8 = quantised Linear layers (CPU, several times faster); auto = the "
                    "embedded default model's measured best on a CPU (0.5b: float32, 1.5b: "
                    "bfloat16), else the checkpoint's.", choices=DTYPES)
LOCAL_THREADS = Param("local_threads", 0, "CPU threads of a local model (0: before each reply, "
                      "the cores other work left free; a busy core makes every thread wait).",
                      range=(0, 256))
"""Parameters of the backends that run a model in this process (their PARAMS)."""
