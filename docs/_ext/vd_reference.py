"""Sphinx extension: the reference pages, generated from the code at every build.

* `reference/parameters.md`: every parameter each executable declares (its PARAMS table, the
  variants' own included), with default, whether it can change at run time, and description;
* `reference/topics.md`: the topics, services and actions of ros/topics.py's table;
* `reference/interfaces.md`: the msg/srv/action definitions of this package;
* `reference/api/<room>.md`: the Python API of each ROS-free room, from its docstrings;
* `results.md`: the benchmarks' figures, from benchmarks/results/*.json (results_page.py);
* `readme.md` and `changelog.md`: the repository's README and changelog, as pages of the site.

Generated pages go under docs/reference/ and docs/results.md (ignored by git); a page that is
the same as before is not rewritten, so Sphinx rebuilds only what changed.
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from results_page import table

DOCS = Path(__file__).resolve().parents[1]
REPO = DOCS.parent
PKG = REPO / "vision_dialogue"
OUT = DOCS / "reference"

#: executable -> module whose PARAMS it declares (setup.cfg's entry points that are nodes)
EXECUTABLES = {
    "manager_node": "vision_dialogue.manager_node",
    "camera_node": "vision_dialogue.camera_node",
    "speech_node": "vision_dialogue.speech_node",
    "detector_node": "vision_dialogue.detector_node",
    "events_node": "vision_dialogue.events_node",
    "people_node": "vision_dialogue.people_node",
    "vfm_server": "vision_dialogue.vfm_server",
    "monitor": "vision_dialogue.monitor_node",
    "bag_record": "vision_dialogue.cli.bag_record",
    "bag_play": "vision_dialogue.cli.bag_play",
}
#: the ROS-free rooms whose Python API is documented (docs/ARCHITECTURE.md)
ROOMS = ("common", "variants", "llm", "core", "application", "perception", "camera", "speech",
         "voice", "face", "furhat", "vfm", "monitor")


def generated_pages() -> list[Path]:
    """The pages `generate` writes (ROS-free: the paths alone, for checks before a build)."""
    return [OUT / "parameters.md", OUT / "topics.md", OUT / "interfaces.md",
            OUT / "api" / "index.md", *(OUT / "api" / f"{room}.md" for room in ROOMS),
            DOCS / "results.md", DOCS / "readme.md", DOCS / "changelog.md"]


def _cell(text) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(value) -> str:
    if isinstance(value, str):
        return f"`{value!r}`" if value else "`''`"
    return f"`{value!r}`"


def parameters_page() -> str:
    lines = ["# Parameters", "",
             "Every parameter each executable declares, generated from its `PARAMS` table "
             "(the variants' own included: a backend's parameters are declared whichever "
             "backend is chosen). *live*: `ros2 param set` changes it while the node runs; "
             "every other one is read-only after start. Set them with `-p name:=value`, a "
             "params file (`/**: ros__parameters:`) or a setup's YAML.", ""]
    for exe, module in EXECUTABLES.items():
        mod = importlib.import_module(module)
        params = [*mod.PARAMS, *getattr(mod, "EXTRA_PARAMS", ())]
        lines += [f"## {exe}", "", f"`ros2 run vision_dialogue {exe}` ({len(params)} "
                  "parameters; also `--help`).", ""]
        lines += table(("parameter", "default", "live", "description"), [
            (f"`{p.name}`", _cell(_default(p.default)), "live" if p.live else "",
             _cell(p.text())) for p in params])
    return "\n".join(lines)


def topics_page() -> str:
    from vision_dialogue.ros.topics import ENDPOINTS
    lines = ["# Topics, services and actions", "",
             "Generated from `vision_dialogue/ros/topics.py`, the one place where each name is "
             "defined. Names without a leading `/` are relative: they follow the node's "
             "namespace and remappings.", ""]
    for kind in ("topic", "service", "action"):
        lines += [f"## {kind.capitalize()}s", ""]
        lines += table(("name", "type", "from → to", "QoS", "what"), [
            (f"`{e.name}`", f"`{e.type}`", _cell(e.flow), _cell(e.qos), _cell(e.what))
            for e in ENDPOINTS if e.kind == kind])
    return "\n".join(lines)


def interfaces_page() -> str:
    lines = ["# Message, service and action definitions", "",
             "Our own interfaces (the package vision_dialogue_interfaces, in "
             "`interfaces/vision_dialogue_interfaces/`), as built. Standard "
             "interfaces it reads and writes are sensor_msgs, vision_msgs and hri_msgs "
             "(ROS4HRI); see [topics](topics.md).", ""]
    for folder, title in (("msg", "Messages"), ("srv", "Services"), ("action", "Actions")):
        lines += [f"## {title}", ""]
        for f in sorted((REPO / "interfaces" / "vision_dialogue_interfaces" / folder).glob("*")):
            lines += [f"### {f.stem}", "", f"`vision_dialogue_interfaces/{folder}/{f.stem}`", "",
                      "```text", f.read_text().rstrip(), "```", ""]
    return "\n".join(lines)


def room_modules(room: str) -> list[str]:
    """The room's modules, sorted (its package first)."""
    base = f"vision_dialogue.{room}"
    found = [base]
    for info in pkgutil.iter_modules([str(PKG / room)]):
        if not info.name.startswith("_"):
            found.append(f"{base}.{info.name}")
    return sorted(found, key=lambda m: (m != base, m))


def api_page(room: str) -> str:
    pkg = importlib.import_module(f"vision_dialogue.{room}")
    summary = (pkg.__doc__ or "").strip().split("\n\n")[0]
    lines = [f"# {room}/", "", " ".join(summary.split()), ""]
    for module in room_modules(room)[1:]:
        lines += [f"## {module.rsplit('.', 1)[1]}", "", "```{eval-rst}",
                  f".. automodule:: {module}", "```", ""]
    return "\n".join(lines)


def api_index() -> str:
    lines = ["# Python API of the ROS-free rooms", "",
             "Each room below imports no ROS: its modules run and are tested without rclpy "
             "(the test suite's first tier). What each room may import: "
             "[architecture](../../ARCHITECTURE.md).", "", "```{toctree}", ":maxdepth: 1", ""]
    lines += list(ROOMS)
    lines += ["```", ""]
    return "\n".join(lines)


def from_repository(name: str) -> str:
    """A page of the repository's root (README.md, CHANGELOG.md) as a page of the site.

    Its links into docs/ become links within the site; its link to the other root page
    follows that page's copy.
    """
    text = (REPO / name).read_text()
    for prefix in ("](docs/", "](./docs/"):
        text = text.replace(prefix, "](")
    return text.replace("](CHANGELOG.md)", "](changelog.md)").replace(
        "](README.md)", "](readme.md)")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def generate(app=None) -> None:
    """Write every generated page (called at builder-inited, or by hand)."""
    _write(OUT / "parameters.md", parameters_page())
    _write(OUT / "topics.md", topics_page())
    _write(OUT / "interfaces.md", interfaces_page())
    _write(OUT / "api" / "index.md", api_index())
    for room in ROOMS:
        _write(OUT / "api" / f"{room}.md", api_page(room))
    import results_page
    _write(DOCS / "results.md", results_page.page(REPO / "benchmarks" / "results"))
    _write(DOCS / "readme.md", from_repository("README.md"))
    _write(DOCS / "changelog.md", from_repository("CHANGELOG.md"))


def setup(app):
    app.connect("builder-inited", generate)
    return {"version": "1", "parallel_read_safe": True}
