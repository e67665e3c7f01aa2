"""The launch/ files, evaluated with the real upstream launch API in-process.

1. Static: every launch file returns vision_dialogue.ros.launch_description's description
   (its setup fixed, or `setup:=` for bringup.launch.py); every node it may start is a
   console script with a node class.
2. Evaluated with the real `launch`/`launch_ros` (../shared/tools/ros2-launch): a real
   LaunchContext visits the description as `ros2 launch` does (arguments, the group's
   namespace and global parameters, the OpaqueFunction at launch time, the Node's own
   substitutions), stopping short of starting processes; the nodes that would start, their
   parameter files, use_sim_time, log level, namespace, remappings and conditions are checked.
   Running them for real: test/installed/test_real_launch.py.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import real_launch
from conftest import DEMO_DIR, REPO
from test_bringup import console_scripts
from vision_dialogue.ros.setups import (NODES, SCRIPT_WAITS_FOR_MANAGER_S, SETUPS,
                                        load_node_params, start_order)

LAUNCH = REPO / "launch"
BASE = LAUNCH / "bringup.launch.py"
REQUIRED_ARGS = {"namespace", "params_file", "use_sim_time", "log_level", "use_respawn"}
pytestmark = pytest.mark.skipif(not real_launch.available(), reason=real_launch.MISSING)
EXE_TO_KEY = {spec.executable: key for key, spec in NODES.items()}


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == name]


def _kw(call, name):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


@pytest.mark.parametrize("setup", sorted(SETUPS) + [None])
def test_each_launch_file_returns_the_shared_description_of_its_setup(setup):
    path = LAUNCH / (SETUPS[setup].launch_file if setup else "bringup.launch.py")
    tree = ast.parse(path.read_text(), str(path))
    (call,) = _calls(tree, "setup_launch_description")
    assert [a.value for a in call.args] == ([setup] if setup else [])
    assert not _calls(tree, "Node"), "launch files start nodes only through the description"


def test_the_description_node_is_complete():
    path = REPO / "vision_dialogue" / "ros" / "launch_description.py"
    tree = ast.parse(path.read_text(), str(path))
    (call,) = _calls(tree, "Node")
    assert _kw(call, "package").value == "vision_dialogue"
    for kw in ("parameters", "arguments", "remappings", "condition", "name",
               "respawn", "executable", "on_exit"):
        assert _kw(call, kw) is not None, f"Node without {kw}="
    scripts = console_scripts()
    for spec in NODES.values():     # every executable the base file may start
        assert scripts[spec.executable] == f"{spec.module}:main"
        assert hasattr(importlib.import_module(spec.module), spec.class_name)


# ------------------------------------------------------------------ the real launch API
@pytest.fixture(scope="module")
def launch_api():
    """The upstream launch + launch_ros, importable here.

    Appended to sys.path, not prepended: the venv's own packages keep precedence.
    """
    site = str(real_launch.install() / "site")
    if site not in sys.path:
        sys.path.append(site)
    logger_class, root_level = logging.getLoggerClass(), logging.root.level
    import launch  # noqa: F401
    import launch_ros  # noqa: F401
    yield
    # importing launch makes every logger created afterwards a LaunchLogger that does not
    # propagate (and sets the root level): the tests after this module need logging back
    from launch.logging import LaunchLogger
    for logger in LaunchLogger.all_loggers:
        logger.propagate = True
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)
    logging.setLoggerClass(logger_class)
    logging.root.setLevel(root_level)


@dataclass
class Started:
    """A Node as `ros2 launch` would start it (substitutions performed)."""

    executable: str
    name: str
    namespace: str
    params: dict             # layered: files in order, then the global ones (SetParameter)
    files: list[str]         # parameter files as given (the setup's, the user's)
    global_params: dict
    remaps: dict
    arguments: list[str]
    respawn: str
    on_exit: list


@dataclass
class Evaluated:
    started: list[Started]
    environment: dict
    config: dict

    def node(self, executable: str) -> Started:
        return next(n for n in self.started if n.executable == executable)


def evaluate(launch_file: str, **args) -> Evaluated:
    """Visit `launch_file`'s description with a real LaunchContext.

    As `ros2 launch FILE arg:=value` does, up to (not including) starting the node processes.
    """
    from launch import LaunchContext
    from launch.utilities import normalize_to_list_of_substitutions, perform_substitutions
    from launch_ros.actions import Node as RosNode
    spec = importlib.util.spec_from_file_location(f"lf_{launch_file}", LAUNCH / launch_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ctx = LaunchContext()
    ctx.launch_configurations.update(args)
    started: list[Started] = []

    def visit(entities):
        for e in entities:
            if isinstance(e, RosNode):
                if e.condition is None or e.condition.evaluate(ctx):
                    started.append(_started(e, ctx, lambda c, x: perform_substitutions(
                        c, normalize_to_list_of_substitutions(x))))
                continue
            visit(e.visit(ctx) or [])

    visit(module.generate_launch_description().entities)
    return Evaluated(started, dict(ctx.environment), dict(ctx.launch_configurations))


def _started(node, ctx, subst) -> Started:
    from launch.utilities.type_utils import perform_typed_substitution
    node._perform_substitutions(ctx)          # what Node.execute does first
    expanded = node._Node__expanded_parameter_arguments or []
    files = [path for path, is_file in expanded if is_file]
    params: dict = {}
    for path in files:
        params.update(load_node_params(path, node.node_executable))
    global_params = dict(ctx.launch_configurations.get("global_params") or [])
    params.update(global_params)
    return Started(
        executable=node.node_executable, name=node.node_name.split("/")[-1],
        namespace=node.expanded_node_namespace, params=params,
        files=[p for p in files if not Path(p).name.startswith("launch_params_")],
        global_params=global_params,
        remaps=dict(node.expanded_remapping_rules or []),
        arguments=[subst(ctx, a) for a in node._Node__arguments],
        respawn=str(perform_typed_substitution(ctx, node._ExecuteLocal__respawn, bool)).lower(),
        on_exit=list(node._ExecuteLocal__on_exit or []))


def test_base_arguments_are_declared_with_descriptions(launch_api):
    from vision_dialogue.ros.launch_description import declared_arguments
    for setup in [None] + list(SETUPS.values()):
        declared = {d.name: d for d in declared_arguments(setup)}
        assert REQUIRED_ARGS <= set(declared)
        keys = NODES if setup is None else setup.nodes
        assert {f"use_{k}" for k in keys} <= set(declared)
        for name, d in declared.items():
            assert d.description and d.description.strip(), f"{name}: no description"


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_defaults_match_bringup(launch_api, setup, tmp_path, monkeypatch):
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    ev = evaluate(SETUPS[setup].launch_file)
    assert [n.executable for n in ev.started] == [NODES[k].executable for k in
                                                  start_order(SETUPS[setup].default_nodes)]
    for node in ev.started:
        assert node.name == node.executable and node.namespace == "/"
        assert [Path(f) for f in node.files] == [REPO / "config" / SETUPS[setup].params_file]
        assert node.global_params["use_sim_time"] in ("false", False)
        assert node.arguments == ["--ros-args", "--log-level", "info"]
        assert node.respawn == "false"
        # every parameter the launch sets is one the node declares
        module = importlib.import_module(NODES[EXE_TO_KEY[node.executable]].module)
        names = {p.name for p in (*module.PARAMS, *getattr(module, "EXTRA_PARAMS", ()))} \
            | {"use_sim_time"}
        assert set(node.params) <= names, set(node.params) - names


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_arguments_reach_every_node(launch_api, setup, tmp_path, monkeypatch):
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    mine = tmp_path / "my.yaml"
    mine.write_text("/**:\n  ros__parameters:\n    frame_id: mine\n")
    file = SETUPS[setup].launch_file
    ev = evaluate(file, namespace="robot7", use_sim_time="true", log_level="debug",
                  params_file=str(mine))
    for node in ev.started:
        assert node.namespace == "/robot7"
        assert [Path(f).name for f in node.files] == [SETUPS[setup].params_file, "my.yaml"]
        assert node.params["frame_id"] == "mine"         # the user's file wins ...
        assert node.global_params["use_sim_time"] in ("true", True)
        assert node.arguments == ["--ros-args", "--log-level", "debug"]
    for key in SETUPS[setup].default_nodes:
        exes = [n.executable for n in evaluate(file, **{f"use_{key}": "false"}).started]
        assert NODES[key].executable not in exes
        assert len(exes) == len(SETUPS[setup].default_nodes) - 1
    for key in SETUPS[setup].optional:          # off unless asked for (furhat's monitor)
        exes = [n.executable for n in evaluate(file, **{f"use_{key}": "true"}).started]
        assert NODES[key].executable in exes
        assert len(exes) == len(SETUPS[setup].default_nodes) + 1


def test_a_params_file_is_layered_over_the_setup_yaml(launch_api, tmp_path, monkeypatch):
    """One override in the user's file; every other setup default stays."""
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    mine = tmp_path / "my.yaml"
    mine.write_text("/**/manager_node:\n  ros__parameters:\n    n: 6\n")
    manager = evaluate("demo.launch.py", params_file=str(mine)).node("manager_node")
    setup_yaml = load_node_params(REPO / "config" / "demo_setup.yaml", "manager_node")
    assert manager.params == dict(setup_yaml, n=6, use_sim_time=manager.params["use_sim_time"])


def test_the_base_file_runs_any_setup(launch_api, tmp_path, monkeypatch):
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    for setup in SETUPS:
        exes = [n.executable for n in evaluate("bringup.launch.py", setup=setup).started]
        assert exes == [NODES[k].executable for k in start_order(SETUPS[setup].default_nodes)]
    from vision_dialogue.ros.launch_description import LaunchArgumentError
    with pytest.raises(LaunchArgumentError, match="setup:=nope"):
        evaluate("bringup.launch.py", setup="nope")


def test_monitor_is_on_in_the_demo_and_off_on_the_robot(launch_api):
    assert "monitor" in [n.executable for n in evaluate("demo.launch.py").started]
    assert "monitor" not in [n.executable for n in evaluate("furhat.launch.py").started]


@pytest.mark.parametrize("setup", ["standalone", "furhat"])
def test_camera_topics_remap_as_a_pair(launch_api, setup):
    ev = evaluate(SETUPS[setup].launch_file, image_topic="/usb_cam/image_raw",
                  stream_topic="/usb_cam/fast")
    for node in ev.started:
        assert node.remaps == {"camera/image_raw": "/usb_cam/image_raw",
                               "camera/image_raw/compressed": "/usb_cam/image_raw/compressed",
                               "camera/stream/image_raw": "/usb_cam/fast",
                               "camera/stream/image_raw/compressed": "/usb_cam/fast/compressed",
                               "detections": "detections", "label_info": "label_info"}


def test_a_robots_detector_is_remapped_onto_detections(launch_api):
    ev = evaluate("standalone.launch.py", detections_topic="/yolo/detections",
                  label_info_topic="/yolo/label_info")
    started = {n.executable: n for n in ev.started}
    for exe in ("manager_node", "detector_node"):
        assert started[exe].remaps["detections"] == "/yolo/detections"
        assert started[exe].remaps["label_info"] == "/yolo/label_info"


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_sets_the_dds_profile_unless_set(launch_api, setup, monkeypatch, tmp_path):
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE", raising=False)
    ev = evaluate(SETUPS[setup].launch_file)
    assert Path(ev.environment["FASTDDS_DEFAULT_PROFILES_FILE"]) == \
        REPO / "config" / "fastdds.xml"
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "/etc/mine.xml")   # the user's: kept
    ev = evaluate(SETUPS[setup].launch_file)
    assert ev.environment["FASTDDS_DEFAULT_PROFILES_FILE"] == "/etc/mine.xml"


def test_demo_launch_paths_and_the_end_of_any_node(launch_api, tmp_path, monkeypatch):
    # describing the launch builds nothing (an empty folder here); evaluating it does (the
    # shared one, where the video is usually built already)
    monkeypatch.setenv("VD_DEMO_DIR", str(tmp_path / "demo"))
    from launch.actions import EmitEvent
    from launch.events import Shutdown
    spec = importlib.util.spec_from_file_location("lf_demo", LAUNCH / "demo.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate_launch_description()
    assert not (tmp_path / "demo").exists(), "video built while describing the launch"
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    ev = evaluate("demo.launch.py")
    video = Path(ev.node("camera_node").params["video_path"])
    assert video.is_file() and video.parent == Path(DEMO_DIR)
    script = Path(ev.node("speech_node").params["script_file"])
    assert script == REPO / "config" / "demo_script.yaml" and script.is_file()
    for node in ev.started:      # any node's end ends the launch, as with bringup
        (emit,) = node.on_exit
        assert isinstance(emit, EmitEvent) and isinstance(emit.event, Shutdown)
    # the setup YAML makes the speech node exit at the end of the script
    assert ev.node("speech_node").params["exit_when_done"] is True
    # launch arguments win over the setup's fill-ins, and choose what plays them
    clip, lines = tmp_path / "clip.mp4", tmp_path / "s.yaml"
    clip.write_bytes(b"x")
    lines.write_text("items: []\n")
    mine = evaluate("standalone.launch.py", video_path=str(clip), script_file=str(lines))
    assert (mine.node("camera_node").params["video_path"],
            mine.node("camera_node").params["source"]) == (str(clip), "video")
    assert (mine.node("speech_node").params["script_file"],
            mine.node("speech_node").params["backend"]) == (str(lines), "script")
    # the script's first line waits for the manager (said before it listens, it is lost),
    # unless the user's params file sets the wait
    assert mine.node("speech_node").params["wait_for_subscriber"] == SCRIPT_WAITS_FOR_MANAGER_S
    params = tmp_path / "mine.yaml"
    params.write_text("/**/speech_node:\n  ros__parameters:\n    wait_for_subscriber: 5.0\n")
    theirs = evaluate("standalone.launch.py", script_file=str(lines), params_file=str(params))
    assert theirs.node("speech_node").params["wait_for_subscriber"] == 5.0


def test_voice_demo_launch_hears_the_demo_script_spoken(launch_api, tmp_path, monkeypatch):
    pytest.importorskip("piper")
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    from vision_dialogue.voice.sources import load_wav_items
    speech = evaluate("voice_demo.launch.py").node("speech_node")
    seq = Path(speech.params["audio_in"])
    assert seq.name == "sequence.yaml" and seq.parent.parent == Path(DEMO_DIR)
    items = load_wav_items(seq)
    script = yaml.safe_load((REPO / "config" / "demo_script.yaml").read_text())["items"]
    assert len(items) == len(script)
    assert [i.wait_for_reply for i in items] == [bool(s.get("wait_for_reply")) for s in script]
    assert speech.params["backend"] == "local"


def test_managed_true_starts_every_lifecycle_node_unconfigured(launch_api, tmp_path,
                                                               monkeypatch):
    """managed:=true reaches each managed node (not the monitor); by default none gets it."""
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    managed = evaluate("demo.launch.py", managed="true").started
    assert {n.executable: n.params.get("managed") for n in managed} == {
        NODES[k].executable: (True if NODES[k].managed else None)
        for k in SETUPS["demo"].default_nodes}
    assert all("managed" not in n.params for n in evaluate("demo.launch.py").started)
    with pytest.raises(Exception, match="managed:=maybe: true or false"):
        evaluate("demo.launch.py", managed="maybe")
