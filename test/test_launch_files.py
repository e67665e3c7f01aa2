"""The launch/ files, without `launch` (not installable here).

1. Static: parse each file's AST; every Node names package vision_dialogue and an executable
   that is a console script with a node module/class; the arguments nav2-style launch files
   declare are there, with descriptions; the setup YAML matches bringup's table.
2. Evaluated: run generate_launch_description() against small stand-ins for the launch API
   (same names and keyword signatures as launch/launch_ros, so a typo or a wrong keyword
   fails), resolve the LaunchConfigurations, and check the nodes that would start, their
   parameters files, use_sim_time, log level, namespace, remappings and conditions.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
import types
from pathlib import Path

import pytest

from conftest import REPO
from test_bringup import console_scripts
from vision_dialogue.bringup import NODES, SETUPS

LAUNCH = REPO / "launch"
REQUIRED_ARGS = {"namespace", "params_file", "use_sim_time", "log_level"}
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
def test_launch_file_static(setup):
    path = LAUNCH / SETUPS[setup].launch_file
    tree = ast.parse(path.read_text(), str(path))
    scripts = console_scripts()
    exes = []
    for call in _calls(tree, "Node"):
        pkg, exe = _kw(call, "package"), _kw(call, "executable")
        assert isinstance(pkg, ast.Constant) and pkg.value == "vision_dialogue"
        assert isinstance(exe, ast.Constant), "executable must be a literal"
        exes.append(exe.value)
        assert exe.value in scripts, f"{exe.value} is not a console script in setup.cfg"
        module = scripts[exe.value].split(":")[0]
        assert (REPO / (module.replace(".", "/") + ".py")).is_file(), module
        mod = importlib.import_module(module)
        assert inspect.isclass(getattr(mod, NODES[EXE_TO_KEY[exe.value]].class_name, None))
        for kw in ("parameters", "arguments", "namespace", "remappings", "condition", "name"):
            assert _kw(call, kw) is not None, f"{exe.value}: Node without {kw}="
    assert sorted(exes) == sorted(NODES[k].executable for k in SETUPS[setup].nodes)
    declared = {}
    for call in _calls(tree, "DeclareLaunchArgument"):
        name = call.args[0].value if call.args else _kw(call, "name").value
        desc = _kw(call, "description")
        assert isinstance(desc, ast.Constant) and desc.value.strip(), f"{name}: no description"
        declared[name] = call
    assert REQUIRED_ARGS <= set(declared), REQUIRED_ARGS - set(declared)
    for key in SETUPS[setup].nodes:
        assert f"use_{key}" in declared, f"no use_{key} argument"
    yamls = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
             and isinstance(n.value, str) and n.value.endswith("_setup.yaml")}
    assert yamls == {SETUPS[setup].params_file}


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
                                  SetEnvironmentVariable=SetEnvironmentVariable,
                                  EmitEvent=EmitEvent, RegisterEventHandler=RegisterEventHandler,
                                  OpaqueFunction=OpaqueFunction,
                                  SetLaunchConfiguration=SetLaunchConfiguration),
        "launch.conditions": _module("launch.conditions", IfCondition=IfCondition),
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


def load_description(setup):
    path = LAUNCH / SETUPS[setup].launch_file
    spec = importlib.util.spec_from_file_location(f"launch_{setup}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


class Evaluated:
    """A launch description with its arguments resolved (defaults, then `args`)."""

    def __init__(self, ld, **args):
        self.ld = ld
        self.declared = {e.name: e for e in ld.entities if isinstance(e, DeclareLaunchArgument)}
        unknown = set(args) - set(self.declared)
        assert not unknown, f"undeclared launch arguments {unknown}"
        self.config = {n: d.default_value for n, d in self.declared.items()}
        self.config.update(args)
        self.env: dict = {}
        context = types.SimpleNamespace(launch_configurations=self.config)
        for e in ld.entities:     # executed in order, as `ros2 launch` runs them
            if isinstance(e, OpaqueFunction):
                for action in e.function(context) or []:
                    if isinstance(action, SetLaunchConfiguration):
                        self.config[action.name] = action.value
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
        for e in self.ld.entities:
            if isinstance(e, Node):
                cond = e.kwargs.get("condition")
                if cond is None or self.value(cond.predicate_expression).lower() in ("true", "1"):
                    out.append(e)
        return out


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_defaults_match_bringup(launch_api, setup):
    ev = Evaluated(load_description(setup))
    started = ev.started()
    assert [n.executable for n in started] == [NODES[k].executable for k in SETUPS[setup].nodes]
    for node in started:
        assert node.package == "vision_dialogue" and node.name == node.executable
        params_file = ev.value(node.parameters[0])
        assert Path(params_file) == REPO / "config" / SETUPS[setup].params_file
        assert Path(params_file).is_file()
        extra = {k: ev.value(v) for k, v in node.parameters[1].items()}
        assert extra["use_sim_time"] == "false"
        assert [ev.value(a) for a in node.arguments] == ["--ros-args", "--log-level", "info"]
        assert ev.value(node.namespace) == ""
        # every parameter a launch file sets is one the node declares
        module = importlib.import_module(NODES[EXE_TO_KEY[node.executable]].module)
        names = {p.name for p in module.PARAMS} | {"use_sim_time"}
        assert set(extra) <= names, set(extra) - names


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_arguments_reach_every_node(launch_api, setup):
    ev = Evaluated(load_description(setup), namespace="robot7", use_sim_time="true",
                   log_level="debug", params_file="/tmp/my.yaml")
    for node in ev.started():
        assert ev.value(node.namespace) == "robot7"
        assert ev.value(node.parameters[0]) == "/tmp/my.yaml"
        assert ev.value(node.parameters[1]["use_sim_time"]) == "true"
        assert [ev.value(a) for a in node.arguments] == ["--ros-args", "--log-level", "debug"]
    for key in SETUPS[setup].nodes:
        ev = Evaluated(load_description(setup), **{f"use_{key}": "false"})
        exes = [n.executable for n in ev.started()]
        assert NODES[key].executable not in exes
        assert len(exes) == len(SETUPS[setup].nodes) - 1


@pytest.mark.parametrize("setup", ["standalone", "furhat"])
def test_camera_topics_remap_as_a_pair(launch_api, setup):
    ev = Evaluated(load_description(setup), image_topic="/usb_cam/image_raw")
    for node in ev.started():
        remaps = {ev.value(a): ev.value(b) for a, b in node.remappings}
        assert remaps == {"camera/image_raw": "/usb_cam/image_raw",
                          "camera/image_raw/compressed": "/usb_cam/image_raw/compressed"}


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_launch_sets_the_dds_profile_unless_set(launch_api, setup):
    ev = Evaluated(load_description(setup))
    assert Path(ev.env["FASTDDS_DEFAULT_PROFILES_FILE"]) == REPO / "config" / "fastdds.xml"
    ld = load_description(setup)
    entity = next(e for e in ld.entities if isinstance(e, SetEnvironmentVariable)
                  and e.name == "FASTDDS_DEFAULT_PROFILES_FILE")
    assert isinstance(entity.value, EnvironmentVariable)        # the user's value is kept
    assert entity.value.name == "FASTDDS_DEFAULT_PROFILES_FILE"


def test_demo_launch_paths_and_end_of_script(launch_api, tmp_path):
    ld = load_description("demo")
    assert not (tmp_path / "demo").exists(), "video built while describing the launch"
    ev = Evaluated(ld)
    nodes = {n.executable: n for n in ev.started()}
    video = Path(ev.value(nodes["camera_node"].parameters[1]["video_path"]))
    assert video.is_file() and video.parent == tmp_path / "demo"
    script = Path(ev.value(nodes["speech_node"].parameters[1]["script_file"]))
    assert script == REPO / "config" / "demo_script.yaml" and script.is_file()
    handlers = [e.event_handler for e in ld.entities if isinstance(e, RegisterEventHandler)]
    assert len(handlers) == 1 and isinstance(handlers[0], OnProcessExit)
    assert handlers[0].target_action is nodes["speech_node"]
    (emit,) = handlers[0].on_exit
    assert isinstance(emit, EmitEvent) and isinstance(emit.event, Shutdown)
    # the setup YAML makes the speech node exit at the end of the script
    from vision_dialogue.bringup import load_node_params
    assert load_node_params(REPO / "config" / "demo_setup.yaml",
                            "speech_node")["exit_when_done"] is True
