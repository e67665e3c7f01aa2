"""Shipped parameter files follow ROS conventions.

`/**/node_name:` keys, so they apply in any namespace (`-r __ns:=/robot1`, a launch file's
namespace argument).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

CONFIG = Path(__file__).resolve().parents[2] / "config"
PARAM_FILES = sorted(p for p in CONFIG.glob("*.yaml")
                     if "ros__parameters" in p.read_text())


@pytest.mark.parametrize("path", PARAM_FILES, ids=lambda p: p.name)
def test_every_node_key_is_a_wildcard(path):
    data = yaml.safe_load(path.read_text())
    for key, value in data.items():
        assert "ros__parameters" in value, f"{path.name}: {key} has no ros__parameters"
        assert key.startswith("/**/"), f"{path.name}: key {key!r} is not /**/<node>"
