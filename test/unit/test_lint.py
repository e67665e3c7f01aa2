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
