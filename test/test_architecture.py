"""The layout is the architecture: which room may import which, read from the source (AST).

ROS-free rooms never import rclpy, ROS message packages or the generated interfaces, so they
are testable without ROS; each room imports only the rooms below it (docs/ARCHITECTURE.md).
Nodes and commands (top-level node modules, ros/, cli/) may import anything.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

PKG = REPO / "vision_dialogue"
#: room -> the rooms it may import (besides itself)
ALLOWED = {
    "llm": set(),
    "core": {"llm"},
    "perception": {"core"},
    "camera": {"core"},
    "speech": {"llm"},
    "vfm": {"core"},
    "furhat": {"core", "camera", "speech", "llm"},
    "monitor": {"core"},
    "voice": {"speech", "llm"},
}
ROS_MODULES = ("rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "sensor_msgs",
               "geometry_msgs", "action_msgs", "rosgraph_msgs", "launch", "launch_ros",
               "ament_index_python")
GENERATED = ("msg", "srv", "action")
NODE_MODULES = {"manager_node", "camera_node", "speech_node", "vfm_server", "monitor_node",
                "events_node", "detector_node"}


def imports(path: Path) -> set[str]:
    """Return the module names the file brings in (absolute; relative ones resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def room_of(module: str) -> str | None:
    """'vision_dialogue.core.prompt' -> 'core'; None outside the package."""
    parts = module.split(".")
    if parts[0] != "vision_dialogue" or len(parts) < 2:
        return None
    return parts[1]


def test_top_level_holds_only_the_nodes():
    top = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    assert top == NODE_MODULES, top ^ NODE_MODULES
    rooms = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert rooms == set(ALLOWED) | {"ros", "cli"}


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_ros_free_rooms_import_only_what_is_below_them(room):
    bad = []
    for path in sorted((PKG / room).rglob("*.py")):
        for mod in imports(path):
            top = mod.split(".")[0]
            other = room_of(mod)
            if top in ROS_MODULES:
                bad.append(f"{path.relative_to(REPO)} imports {mod} (ROS)")
            elif other in GENERATED or other in NODE_MODULES or other in ("ros", "cli"):
                bad.append(f"{path.relative_to(REPO)} imports {mod} (ROS side)")
            elif other and other != room and other not in ALLOWED[room]:
                bad.append(f"{path.relative_to(REPO)} imports {mod} ({other} is not below "
                           f"{room})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("room", sorted(ALLOWED) + ["ros", "cli"])
def test_every_room_says_what_lives_there(room):
    doc = ast.get_docstring(ast.parse((PKG / room / "__init__.py").read_text()))
    assert doc and len(doc) > 60, f"{room}/__init__.py needs a docstring"
    if room in ALLOWED:
        assert "ROS-free" in doc or "without ROS" in doc
