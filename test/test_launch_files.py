"""The launch/ files, without `launch` (not installable here).

1. Static: every setup launch file includes bringup.launch.py with its own `setup`; the
   base file's Node is built for executables that are console scripts with a node class.
2. Evaluated: run generate_launch_description() against small stand-ins for the launch API
   (same names and keyword signatures as launch/launch_ros, so a typo or a wrong keyword
   fails), follow the include, resolve the LaunchConfigurations, run the OpaqueFunction as
   `ros2 launch` does at launch time, and check the nodes that would start, their
   parameters files, use_sim_time, log level, namespace, remappings and conditions.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from test_bringup import console_scripts
from vision_dialogue.cli.setups import NODES, SETUPS, load_node_params, start_order

LAUNCH = REPO / "launch"
BASE = LAUNCH / "bringup.launch.py"
REQUIRED_ARGS = {"namespace", "params_file", "use_sim_time", "log_level", "use_respawn"}
EXE_TO_KEY = {spec.executable: key for key, spec in NODES.items()}


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == name]


def _kw(call, name):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_setup_launch_file_includes_the_base_with_its_setup(setup):
    path = LAUNCH / SETUPS[setup].launch_file
    tree = ast.parse(path.read_text(), str(path))
    (include,) = _calls(tree, "IncludeLaunchDescription")
    texts = {n.value for n in ast.walk(include) if isinstance(n, ast.Constant)}
    assert "bringup.launch.py" in texts and setup in texts and "setup" in texts
    assert not _calls(tree, "Node"), "setup files start nodes only through the base file"


def test_base_launch_file_node_is_complete():
    tree = ast.parse(BASE.read_text(), str(BASE))
    (call,) = _calls(tree, "Node")
    assert _kw(call, "package").value == "vision_dialogue"
    for kw in ("parameters", "arguments", "namespace", "remappings", "condition", "name",
               "respawn", "executable"):
        assert _kw(call, kw) is not None, f"Node without {kw}="
    scripts = console_scripts()
    for spec in NODES.values():     # every executable the base file may start
        assert scripts[spec.executable] == f"{spec.module}:main"
        assert hasattr(importlib.import_module(spec.module), spec.class_name)


# ------------------------------------------------------------------------ launch stand-ins
class LaunchConfiguration:
    def __init__(self, variable_name, *, default=None):
        self.variable_name, self.default = variable_name, default


class EnvironmentVariable:
    def __init__(self, name, *, default_value=""):
        self.name, self.default_value = name, default_value


class SetLaunchConfiguration:
    def __init__(self, name, value, **kwargs):
        self.name, self.value = name, value


class IfCondition:
    def __init__(self, predicate_expression):
        self.predicate_expression = predicate_expression


class LaunchDescription:
    def __init__(self, initial_entities=None):
        self.entities = list(initial_entities or [])

    def add_action(self, action):
        self.entities.append(action)


class DeclareLaunchArgument:
    def __init__(self, name, *, default_value=None, description=None, choices=None, **kwargs):
        self.name, self.default_value, self.description = name, default_value, description


class SetEnvironmentVariable:
    def __init__(self, name, value, **kwargs):
        self.name, self.value = name, value


class EmitEvent:
    def __init__(self, *, event, **kwargs):
        self.event = event


class PythonLaunchDescriptionSource:
    def __init__(self, launch_file_path):
        self.launch_file_path = launch_file_path


class IncludeLaunchDescription:
    def __init__(self, launch_description_source, *, launch_arguments=None, **kwargs):
        self.launch_description_source = launch_description_source
        self.launch_arguments = list(launch_arguments or [])


class RegisterEventHandler:
    def __init__(self, event_handler, **kwargs):
        self.event_handler = event_handler


class OpaqueFunction:
    def __init__(self, *, function, args=None, kwargs=None, **left_over_kwargs):
        self.function = function


class OnProcessExit:
    def __init__(self, *, target_action=None, on_exit=None, **kwargs):
        self.target_action, self.on_exit = target_action, on_exit


class Shutdown:
    def __init__(self, *, reason="reason not given"):
        self.reason = reason


# keyword arguments launch_ros' Node passes on to launch.actions.ExecuteProcess
EXECUTE_PROCESS_KWARGS = {"condition", "output", "emulate_tty", "respawn", "respawn_delay",
                          "prefix", "additional_env", "cwd", "env", "shell", "sigterm_timeout",
                          "sigkill_timeout", "log_cmd", "on_exit", "cached_output"}


class Node:
    def __init__(self, *, executable, package=None, name=None, namespace=None, exec_name=None,
                 parameters=None, remappings=None, ros_arguments=None, arguments=None,
                 **kwargs):
        unknown = set(kwargs) - EXECUTE_PROCESS_KWARGS
        assert not unknown, f"Node got unknown keyword(s) {unknown}"
        self.executable, self.package, self.name = executable, package, name
        self.namespace, self.parameters = namespace, parameters or []
        self.remappings, self.arguments = remappings or [], arguments or []
        self.kwargs = kwargs


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    return m


@pytest.fixture
def launch_api(monkeypatch, tmp_path):
    """Stand-ins for launch, launch_ros and ament_index_python in sys.modules."""
    monkeypatch.setenv("VD_DEMO_DIR", str(tmp_path / "demo"))

    def share(pkg):
        if pkg != "vision_dialogue":
            raise LookupError(pkg)
        return str(REPO)  # the source tree has the same config/ and launch/ as share/

    mods = {
        "launch": _module("launch", LaunchDescription=LaunchDescription),
        "launch.actions": _module("launch.actions", DeclareLaunchArgument=DeclareLaunchArgument,
                                  IncludeLaunchDescription=IncludeLaunchDescription,
                                  SetEnvironmentVariable=SetEnvironmentVariable,
                                  EmitEvent=EmitEvent, RegisterEventHandler=RegisterEventHandler,
                                  OpaqueFunction=OpaqueFunction,
                                  SetLaunchConfiguration=SetLaunchConfiguration),
        "launch.conditions": _module("launch.conditions", IfCondition=IfCondition),
        "launch.launch_description_sources": _module(
            "launch.launch_description_sources",
            PythonLaunchDescriptionSource=PythonLaunchDescriptionSource),
        "launch.substitutions": _module("launch.substitutions",
                                        LaunchConfiguration=LaunchConfiguration,
                                        EnvironmentVariable=EnvironmentVariable),
        "launch.event_handlers": _module("launch.event_handlers", OnProcessExit=OnProcessExit),
        "launch.events": _module("launch.events", Shutdown=Shutdown),
        "launch_ros": _module("launch_ros"),
        "launch_ros.actions": _module("launch_ros.actions", Node=Node),
        "ament_index_python": _module("ament_index_python"),
        "ament_index_python.packages": _module("ament_index_python.packages",
                                               get_package_share_directory=share),
    }
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return mods


def load_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def load_description(setup):
    """The setup file's description, with its include followed.

    (base description, the include's launch arguments).
    """
    ld = load_file(LAUNCH / SETUPS[setup].launch_file, f"launch_{setup}")
    (include,) = ld.entities
    assert isinstance(include, IncludeLaunchDescription)
    base = Path(include.launch_description_source.launch_file_path)
    assert base == BASE
    return load_file(base, "launch_base"), dict(include.launch_arguments)


class Evaluated:
    """A setup's launch, evaluated.

    Arguments resolved (defaults, the include's, `args`), environment set and the OpaqueFunction
    run, in order, as `ros2 launch` does.
    """

    def __init__(self, setup, **args):
        self.ld, included = load_description(setup)
        self.declared = {e.name: e for e in self.ld.entities
                         if isinstance(e, DeclareLaunchArgument)}
        unknown = (set(args) | set(included)) - set(self.declared)
        assert not unknown, f"undeclared launch arguments {unknown}"
        self.config = {n: d.default_value for n, d in self.declared.items()}
        self.config.update(included)
        self.config.update(args)
        self.env: dict = {}
        self.actions: list = []
        context = types.SimpleNamespace(launch_configurations=self.config)
        for e in self.ld.entities:
            if isinstance(e, OpaqueFunction):
                self.actions += list(e.function(context) or [])
            elif isinstance(e, SetEnvironmentVariable):
                self.env[e.name] = self.value(e.value)

    def value(self, sub):
        if isinstance(sub, EnvironmentVariable):
            return self.env.get(sub.name, sub.default_value)
        if isinstance(sub, LaunchConfiguration):
            assert sub.variable_name in self.config, f"{sub.variable_name} is not declared"
            return self.config[sub.variable_name]
        if isinstance(sub, (list, tuple)):
            return "".join(self.value(s) for s in sub)
        return sub

    def started(self) -> list[Node]:
        out = []
        for e in self.actions:
            if isinstance(e, Node):
                cond = e.kwargs.get("condition")
                if cond is None or self.value(cond.predicate_expression).lower() in ("true", "1"):
                    out.append(e)
        return out


def test_base_arguments_are_declared_with_descriptions(launch_api):
    ld = load_file(BASE, "launch_base")
    declared = {e.name: e for e in ld.entities if isinstance(e, DeclareLaunchArgument)}
    assert REQUIRED_ARGS <= set(declared)
    assert {f"use_{k}" for k in NODES} <= set(declared)
    for name, d in declared.items():
        assert d.description and d.description.strip(), f"{name}: no description"


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_defaults_match_bringup(launch_api, setup):
    ev = Evaluated(setup)
    started = ev.started()
    assert [n.executable for n in started] == [NODES[k].executable for k in
                                               start_order(SETUPS[setup].default_nodes)]
    for node in started:
        assert node.package == "vision_dialogue" and node.name == node.executable
        params_file = ev.value(node.parameters[0])
        assert Path(params_file) == REPO / "config" / SETUPS[setup].params_file
        assert Path(params_file).is_file()
        extra = {k: ev.value(v) for k, v in node.parameters[1].items()}
        assert extra["use_sim_time"] == "false"
        assert [ev.value(a) for a in node.arguments] == ["--ros-args", "--log-level", "info"]
        assert ev.value(node.namespace) == ""
        assert ev.value(node.kwargs["respawn"]) == "false"
        # every parameter a launch file sets is one the node declares
        module = importlib.import_module(NODES[EXE_TO_KEY[node.executable]].module)
        names = {p.name for p in module.PARAMS} | {"use_sim_time"}
        assert set(extra) <= names, set(extra) - names


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_arguments_reach_every_node(launch_api, setup):
    ev = Evaluated(setup, namespace="robot7", use_sim_time="true",
                   log_level="debug", params_file="/tmp/my.yaml")
    for node in ev.started():
        assert ev.value(node.namespace) == "robot7"
        assert ev.value(node.parameters[0]) == "/tmp/my.yaml"
        assert ev.value(node.parameters[1]["use_sim_time"]) == "true"
        assert [ev.value(a) for a in node.arguments] == ["--ros-args", "--log-level", "debug"]
    for key in SETUPS[setup].default_nodes:
        ev = Evaluated(setup, **{f"use_{key}": "false"})
        exes = [n.executable for n in ev.started()]
        assert NODES[key].executable not in exes
        assert len(exes) == len(SETUPS[setup].default_nodes) - 1
    for key in SETUPS[setup].optional:          # off unless asked for (furhat's monitor)
        exes = [n.executable for n in Evaluated(setup, **{f"use_{key}": "true"}).started()]
        assert NODES[key].executable in exes
        assert len(exes) == len(SETUPS[setup].default_nodes) + 1


def test_monitor_is_on_in_the_demo_and_off_on_the_robot(launch_api):
    assert "monitor" in [n.executable for n in Evaluated("demo").started()]
    assert "monitor" not in [n.executable for n in Evaluated("furhat").started()]


@pytest.mark.parametrize("setup", ["standalone", "furhat"])
def test_camera_topics_remap_as_a_pair(launch_api, setup):
    ev = Evaluated(setup, image_topic="/usb_cam/image_raw", stream_topic="/usb_cam/fast")
    for node in ev.started():
        remaps = {ev.value(a): ev.value(b) for a, b in node.remappings}
        assert remaps == {"camera/image_raw": "/usb_cam/image_raw",
                          "camera/image_raw/compressed": "/usb_cam/image_raw/compressed",
                          "camera/stream/image_raw": "/usb_cam/fast",
                          "camera/stream/image_raw/compressed": "/usb_cam/fast/compressed"}


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_sets_the_dds_profile_unless_set(launch_api, setup):
    ev = Evaluated(setup)
    assert Path(ev.env["FASTDDS_DEFAULT_PROFILES_FILE"]) == REPO / "config" / "fastdds.xml"
    entity = next(e for e in ev.ld.entities if isinstance(e, SetEnvironmentVariable)
                  and e.name == "FASTDDS_DEFAULT_PROFILES_FILE")
    assert isinstance(entity.value, EnvironmentVariable)        # the user's value is kept
    assert entity.value.name == "FASTDDS_DEFAULT_PROFILES_FILE"


def test_demo_launch_paths_and_end_of_script(launch_api, tmp_path):
    load_description("demo")
    assert not (tmp_path / "demo").exists(), "video built while describing the launch"
    ev = Evaluated("demo")
    nodes = {n.executable: n for n in ev.started()}
    video = Path(ev.value(nodes["camera_node"].parameters[1]["video_path"]))
    assert video.is_file() and video.parent == tmp_path / "demo"
    script = Path(ev.value(nodes["speech_node"].parameters[1]["script_file"]))
    assert script == REPO / "config" / "demo_script.yaml" and script.is_file()
    handlers = [e.event_handler for e in ev.actions if isinstance(e, RegisterEventHandler)]
    assert len(handlers) == 1 and isinstance(handlers[0], OnProcessExit)
    assert handlers[0].target_action is nodes["speech_node"]
    (emit,) = handlers[0].on_exit
    assert isinstance(emit, EmitEvent) and isinstance(emit.event, Shutdown)
    # the setup YAML makes the speech node exit at the end of the script
    assert load_node_params(REPO / "config" / "demo_setup.yaml",
                            "speech_node")["exit_when_done"] is True
    # launch arguments win over the setup's fill-ins; other setups end with nobody
    mine = Evaluated("demo", video_path="/data/clip.mp4", script_file="/data/s.yaml")
    nodes = {n.executable: n for n in mine.started()}
    assert nodes["camera_node"].parameters[1]["video_path"] == "/data/clip.mp4"
    assert nodes["speech_node"].parameters[1]["script_file"] == "/data/s.yaml"
    assert not [e for e in Evaluated("standalone").actions
                if isinstance(e, RegisterEventHandler)]


def test_unknown_setup_shuts_the_launch_down(launch_api):
    ld = load_file(BASE, "launch_base")
    config = {e.name: e.default_value for e in ld.entities
              if isinstance(e, DeclareLaunchArgument)}
    config["setup"] = "nope"
    (fn,) = [e for e in ld.entities if isinstance(e, OpaqueFunction)]
    (emit,) = fn.function(types.SimpleNamespace(launch_configurations=config))
    assert isinstance(emit.event, Shutdown) and "unknown setup 'nope'" in emit.event.reason


def test_voice_demo_launch_hears_the_demo_script_spoken(launch_api, tmp_path):
    pytest.importorskip("piper")
    from vision_dialogue.voice.sources import load_wav_items
    ev = Evaluated("voice_demo")
    nodes = {n.executable: n for n in ev.started()}
    seq = Path(ev.value(nodes["speech_node"].parameters[1]["audio_in"]))
    assert seq.name == "sequence.yaml" and seq.parent.parent == tmp_path / "demo"
    items = load_wav_items(seq)
    script = yaml.safe_load((REPO / "config" / "demo_script.yaml").read_text())["items"]
    assert len(items) == len(script)
    assert [i.wait_for_reply for i in items] == [bool(s.get("wait_for_reply")) for s in script]
    assert load_node_params(REPO / "config" / "voice_demo_setup.yaml",
                            "speech_node")["backend"] == "local"
