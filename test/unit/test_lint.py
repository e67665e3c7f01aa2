"""flake8 and pep257 over the package, tests, launch files and scripts, as ROS 2 runs them.

These are ament_flake8 and ament_pep257, the linters of ROS 2 packages. flake8 runs with
ament's configuration (99 columns). pep257 runs with PEP 257's own convention (summary on the
first line, which PEP 257 allows and ament's convention does not), less the codes listed in
setup.cfg [pydocstyle].
"""
from __future__ import annotations

import configparser
import subprocess
import sys

import pytest

from conftest import REPO

PATHS = ["vision_dialogue", "launch", "test", "benchmarks", "scripts", "docs"]


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    """Run the linter's command line in a fresh process.

    flake8 forks workers, and forking this test process, which holds ROS threads, crashes.
    """
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.linter
def test_flake8():
    res = _run("ament_flake8.main", *PATHS)
    errors = [ln for ln in res.stdout.splitlines() if ": " in ln and ln.split(":")[0].endswith(
        ".py")]
    assert res.returncode == 0, f"{len(errors)} flake8 error(s):\n" + "\n".join(errors[:50])


@pytest.mark.linter
def test_pep257():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    ignore = [c.strip() for c in cfg["pydocstyle"]["add-ignore"].split(",")]
    res = _run("ament_pep257.main", *PATHS, "--convention", cfg["pydocstyle"]["convention"],
               "--add-ignore", *ignore)
    found = [ln for ln in (res.stdout + res.stderr).splitlines() if ": D" in ln]
    assert res.returncode == 0, f"{len(found)} pep257 error(s):\n" + "\n".join(found[:50])


#: pairs of files allowed to share code today (pylint's symilar: six or more like lines, not
#: counting comments and docstrings), "a ~ b" a line; a new pair fails (issue 50)
DUPLICATES_BASELINE = REPO / "test" / "unit" / "duplicate_code_baseline.txt"


def duplicate_pairs(output: str) -> set[str]:
    """The "a ~ b" file pairs of symilar's reports in `output`."""
    pairs, block = set(), []
    for line in output.splitlines() + [""]:
        if line.startswith("=="):
            block.append(line[2:].split(":[")[0])
        elif block:
            pairs.add(" ~ ".join(sorted(set(block))))
            block = []
    return pairs


def _symilar(*files) -> subprocess.CompletedProcess:
    """Run pylint's duplicate-code finder on the text alone.

    With --ignore-imports it parses every file with astroid, which then reads torch and
    numpy: minutes instead of a second.
    """
    return _run("pylint.checkers.symilar", "-d", "6", "--ignore-comments",
                "--ignore-docstrings", *map(str, files))


@pytest.mark.linter
def test_no_code_is_written_twice_beyond_the_baseline(tmp_path):
    pytest.importorskip("pylint", reason="pylint is not installed (requirements/core.txt)")
    twice = "\n".join(f"    x{i} = compute({i}) + other({i})" for i in range(8))
    for name in ("a", "b"):                                      # the check finds a real pair
        (tmp_path / f"{name}.py").write_text(f"def {name}():\n{twice}\n")
    found = _symilar(tmp_path / "a.py", tmp_path / "b.py").stdout
    assert duplicate_pairs(found) == {f"{tmp_path / 'a.py'} ~ {tmp_path / 'b.py'}"}, found
    res = _symilar(*sorted(p.relative_to(REPO) for p in (REPO / "vision_dialogue").rglob("*.py")))
    assert res.returncode == 0 and "TOTAL lines=" in res.stdout, res.stderr[-2000:]
    allowed = {ln.strip() for ln in DUPLICATES_BASELINE.read_text().splitlines()
               if ln.strip() and not ln.startswith("#")}
    new = duplicate_pairs(res.stdout) - allowed
    assert not new, "code written twice (make one piece serve both):\n" + res.stdout[-4000:]
