"""The real, upstream `ros2 launch` for tests.

It is ../shared/tools/ros2-launch: this repository's CI has it; elsewhere the tests that
need it skip, naming it.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO.parent / "shared" / "tools" / "ros2-launch"
MISSING = f"the real ros2 launch is not here ({TOOL}: this repository's CI has it)"
#: where install.sh puts it (idempotent: a second run with the same inputs does nothing)
TARGET = Path.home() / ".cache" / "vision_dialogue" / "ros2-launch"


def available() -> bool:
    return (TOOL / "install.sh").is_file()


def install(env: dict | None = None) -> Path:
    """Install the tool (once; cached by its stamp); the folder holding `ros2` and `site/`.

    One install at a time (test workers, two runs on one machine): install.sh replaces its
    folder while it works.
    """
    from filelock import FileLock
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(TARGET) + ".lock"):
        out = subprocess.run(["bash", str(TOOL / "install.sh"), str(TARGET)],
                             env=env or os.environ, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"ros2-launch install.sh failed:\n{out.stdout}\n{out.stderr}")
    return TARGET
