"""Processes by pid (Linux /proc): whether one still runs, and waiting for it to end.

ROS-free: the unit tier uses it too.
"""
from __future__ import annotations

import time


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout: float) -> bool:
    """Whether the process ended within `timeout` s."""
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)
