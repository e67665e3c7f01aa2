"""Is the LLM there? One quick look at an OpenAI-compatible endpoint or the local default model.

Used by the manager at startup (one warning instead of a failure at the first turn) and by
`doctor`. Never raises: the answer is a Probe with what was found and how to fix it.
"""
from __future__ import annotations

import base64
import os
from dataclasses import dataclass


@dataclass
class Probe:
    """What a probe found. ok None: could not tell (e.g. the server lists no models)."""

    ok: bool | None
    detail: str
    fix: str = ""
    models: tuple[str, ...] = ()
    images: bool | None = None      # with images=True: whether the model took an image


def unreachable(base_url: str, timeout: float = 1.0) -> str:
    """Why the server of `base_url` does not take a TCP connection ("" when it does).

    Connecting sends no request: a server that serves one generation at a time (llama.cpp's
    Python server interrupts the running stream when another request comes) is not disturbed.
    """
    import socket
    from urllib.parse import urlsplit
    url = urlsplit(base_url or "https://api.openai.com/v1")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "127.0.0.1", port), timeout=timeout):
            return ""
    except OSError as e:
        return f"{url.scheme}://{url.hostname}:{port} unreachable ({e.strerror or e})"


def probe_openai(base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 5.0, images: bool = False) -> Probe:
    """GET /models: is the endpoint reachable, the key accepted, `model` served.

    With `images`, one tiny request with an 8x8 image (a few tokens) asks whether the model
    takes images.
    """
    import openai
    where = base_url or "https://api.openai.com/v1"
    key = os.environ.get(api_key_env, "")
    if not key and not base_url:
        return Probe(False, f"no API key in ${api_key_env}",
                     f"export {api_key_env}=... (or set base_url to a local server)")
    client = openai.OpenAI(base_url=base_url or None, api_key=key or "not-needed",
                           timeout=timeout, max_retries=0)
    try:
        served = tuple(sorted(m.id for m in client.models.list()))
    except openai.AuthenticationError as e:
        return Probe(False, f"{where}: the key in ${api_key_env} was refused ({e.status_code})",
                     f"check ${api_key_env}")
    except openai.NotFoundError:
        return Probe(None, f"{where} answers but lists no models (no /models route)",
                     "the model name cannot be checked; the first turn will tell")
    except openai.APIConnectionError as e:
        return Probe(False, f"{where} unreachable ({type(e).__name__}: "
                     f"{getattr(e, '__cause__', None) or e})",
                     "start the server, or set base_url (-p base_url:=http://HOST:PORT/v1)")
    except openai.APIError as e:
        return Probe(False, f"{where}: {type(e).__name__}: {e}", "check the server's log")
    if model not in served:
        shown = ", ".join(served[:8]) + (" ..." if len(served) > 8 else "")
        return Probe(False, f"{where} does not serve model {model!r} (it serves: "
                     f"{shown or 'none'})", f"set model to one it serves (-p model:="
                     f"{served[0] if served else 'NAME'})", served)
    if not images:
        return Probe(True, f"{where} serves {model!r}", models=served)
    url = "data:image/jpeg;base64," + base64.b64encode(_tiny_jpeg()).decode()
    try:
        client.chat.completions.create(model=model, max_tokens=1, messages=[
            {"role": "user", "content": [{"type": "text", "text": "Colour?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}])
    except openai.APIError as e:
        return Probe(False, f"{model!r} refused an image ({type(e).__name__}: {e})",
                     "use a vision model, or supports_images:=false (text observations)",
                     served, images=False)
    return Probe(True, f"{where} serves {model!r}, which takes images", models=served,
                 images=True)


def probe_default_model(variant: str = "") -> Probe:
    """The embedded default model: converted and cached, installed, or missing."""
    from vision_dialogue.llm.default_model import (DEFAULT_VARIANT, VARIANTS, ModelSetupError,
                                                   default_cache_root, is_ready)
    variant = variant or DEFAULT_VARIANT
    spec = VARIANTS.get(variant)
    if spec is None:
        return Probe(False, f"unknown default model variant {variant!r}",
                     f"one of {', '.join(VARIANTS)}")
    target = default_cache_root() / variant
    if is_ready(target, spec):
        return Probe(True, f"{spec.name} ready in {target}")
    try:
        spec.part_paths()
    except ModelSetupError as e:
        return Probe(False, f"{spec.name} not installed", str(e).split("Install them with: ")[-1]
                     if "Install them with" in str(e) else str(e))
    return Probe(True, f"{spec.name} installed; its first use joins its parts (llama.cpp, "
                 f"seconds) or converts them (transformers, about 2 minutes) into {target}")


def _tiny_jpeg() -> bytes:
    """An 8x8 white JPEG: asks whether a model takes images, for a few tokens."""
    import cv2
    import numpy as np
    return cv2.imencode(".jpg", np.full((8, 8, 3), 255, np.uint8))[1].tobytes()
