"""flake8 and pep257 over the package, tests, launch files and scripts, as ROS 2 runs them.

These are ament_flake8 and ament_pep257, the linters of ROS 2 packages. flake8 runs with
ament's configuration (99 columns). pep257 runs with PEP 257's own convention (summary on the
first line, which PEP 257 allows and ament's convention does not), less the codes listed in
setup.cfg [pydocstyle].
"""
from __future__ import annotations

import configparser
import os

import pytest

from conftest import REPO

PATHS = ["vision_dialogue", "launch", "test", "benchmarks", "scripts"]


@pytest.mark.linter
def test_flake8():
    from ament_flake8.main import main_with_errors
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        rc, errors = main_with_errors(argv=PATHS)
    finally:
        os.chdir(cwd)
    assert rc == 0, f"{len(errors)} flake8 error(s):\n" + "\n".join(errors[:50])


@pytest.mark.linter
def test_pep257(capsys):
    from ament_pep257.main import main
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    ignore = [c.strip() for c in cfg["pydocstyle"]["add-ignore"].split(",")]
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        rc = main(argv=PATHS + ["--convention", cfg["pydocstyle"]["convention"],
                                "--add-ignore"] + ignore)
    finally:
        os.chdir(cwd)
    captured = capsys.readouterr()
    found = [ln for ln in (captured.out + captured.err).splitlines() if ": D" in ln]
    assert rc == 0, f"{len(found)} pep257 error(s):\n" + "\n".join(found[:50])
