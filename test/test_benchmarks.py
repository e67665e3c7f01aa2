"""Every benchmark still starts: its arguments parse and every name it imports from us exists.

Benchmarks run rarely (minutes to an hour each), so a renamed class in a function they import
lazily goes unnoticed until someone wants a figure; two had rotted that way. These checks cost
seconds; the figures themselves come from running the benchmarks (docs/benchmarks.md).
"""
from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((REPO / "benchmarks").glob("bench_*.py"))
PACKAGE = "vision_dialogue"


def _imports_from_package(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for each `from vision_dialogue... import name`, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
            found.extend((node.lineno, node.module, alias.name) for alias in node.names)
    return found


def test_there_are_benchmarks_to_check():
    assert len(BENCHMARKS) >= 10, BENCHMARKS


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_a_benchmark_parses_its_arguments(path, tmp_path):
    env = dict(os.environ, VD_BENCH_RESULTS=str(tmp_path))
    run = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True,
                         timeout=60, env=env, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage:" in run.stdout
    assert not list(tmp_path.iterdir()), "--help wrote a results record"


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_every_name_a_benchmark_imports_from_the_package_exists(path):
    missing = []
    for line, module, name in _imports_from_package(path):
        mod = importlib.import_module(module)
        if name != "*" and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")    # a submodule
            except ImportError:
                missing.append(f"{path.name}:{line}: {module}.{name}")
    assert not missing, missing


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_a_benchmark_records_its_figures(path):
    calls = [n for n in ast.walk(ast.parse(path.read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "record"]
    assert calls, f"{path.name} never calls results.record (its figures would go nowhere)"


def test_the_import_check_finds_a_renamed_name(tmp_path):
    bad = tmp_path / "bench_bad.py"
    bad.write_text("def main():\n    from vision_dialogue.core.focus import NoSuchName\n")
    found = _imports_from_package(bad)
    assert found == [(2, "vision_dialogue.core.focus", "NoSuchName")]
    assert not hasattr(importlib.import_module(found[0][1]), found[0][2])
