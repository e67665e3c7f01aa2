"""The setups: which nodes each one starts, with which YAML, and what is filled in at start.

The single description that `launch/bringup.launch.py` (included by every
`launch/<setup>.launch.py`) and the `bringup` command both read, so a `ros2 launch` on a robot
and a `bringup` here start the same nodes with the same parameters. ROS-free: the launch file
imports it at launch time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vision_dialogue.common.resources import config_file
from vision_dialogue.application.identity.records import DEFAULT_STORE_URL


@dataclass(frozen=True)
class NodeSpec:
    """One node of a setup: short key, executable (= default node name), module and class.

    managed: a lifecycle node (ros/managed.py) that takes the `managed` parameter.
    """

    key: str
    executable: str
    module: str
    class_name: str
    managed: bool = True


NODES: dict[str, NodeSpec] = {
    "camera": NodeSpec("camera", "camera_node", "vision_dialogue.camera_node", "CameraNode"),
    "speech": NodeSpec("speech", "speech_node", "vision_dialogue.speech_node", "SpeechNode"),
    "manager": NodeSpec("manager", "manager_node", "vision_dialogue.manager_node",
                        "ManagerNode"),
    "vfm": NodeSpec("vfm", "vfm_server", "vision_dialogue.vfm_server", "VfmServer"),
    "monitor": NodeSpec("monitor", "monitor", "vision_dialogue.monitor_node", "MonitorNode",
                        managed=False),
    "events": NodeSpec("events", "events_node", "vision_dialogue.events_node", "EventsNode"),
    "detector": NodeSpec("detector", "detector_node", "vision_dialogue.detector_node",
                         "DetectorNode"),
    "people": NodeSpec("people", "people_node", "vision_dialogue.people_node", "PeopleNode"),
}

#: construction/start order: consumers first, the speech node (which drives a script) last
START_ORDER = ("monitor", "manager", "people", "events", "detector", "vfm", "camera",
               "speech")


@dataclass(frozen=True)
class Setup:
    """A named set of nodes with its parameters file (in config/) and launch file.

    config_paths: {node key: {parameter: file in config/}} filled in with the file's path
    when the YAML leaves the parameter empty. demo_video: the camera plays the demo video
    when its video_path is empty. spoken_script: a script in config/ the speech node hears as
    synthesised WAV files when its audio_in is empty (the voice demo). optional: nodes of the setup
    started only when asked (`use_monitor:=true`, `bringup --monitor`; the same for events).
    """

    name: str
    nodes: tuple[str, ...]
    params_file: str
    description: str
    config_paths: dict = field(default_factory=dict)
    demo_video: bool | str = False     # True: the demo video; "people": the two-person one
    spoken_script: str = ""
    optional: tuple[str, ...] = ()

    @property
    def launch_file(self) -> str:
        return f"{self.name}.launch.py"

    @property
    def default_nodes(self) -> tuple[str, ...]:
        """The nodes started when nothing else is asked for."""
        return tuple(k for k in self.nodes if k not in self.optional)


SETUPS: dict[str, Setup] = {
    "furhat": Setup("furhat", ("camera", "speech", "manager", "monitor", "events", "detector",
                               "people"),
                    "furhat_setup.yaml",
                    "Furhat robot: Furhat camera + Furhat speech + manager + object detector "
                    "and people node (faces it knows; + monitor page, gesture events when "
                    "asked)",
                    optional=("monitor", "events")),
    "standalone": Setup("standalone", ("camera", "speech", "manager", "monitor", "events",
                                       "detector", "people"),
                        "standalone_setup.yaml",
                        "Laptop: webcam + terminal chat + manager + monitor page + object "
                        "detector (+ gesture events and people node when asked)",
                        optional=("events", "people")),
    "vfm": Setup("vfm", ("vfm",), "vfm_setup.yaml",
                 "Visual foundation model action servers (GPU host)"),
    "demo": Setup("demo", ("camera", "speech", "manager", "monitor", "detector", "people"),
                  "demo_setup.yaml",
                  "Offline demo: demo video + scripted dialogue + manager + object detector + "
                  "monitor page",
                  config_paths={"speech": {"script_file": "demo_script.yaml"}},
                  demo_video=True, optional=("people",)),
    "voice_demo": Setup("voice_demo", ("camera", "speech", "manager", "monitor", "detector",
                                       "people"),
                        "voice_demo_setup.yaml",
                        "Offline voice demo: demo video + the demo script spoken into the "
                        "local voice (VAD, Whisper, Piper to WAV files) + manager + monitor "
                        "(+ people node when asked)",
                        spoken_script="demo_script.yaml", demo_video=True,
                        optional=("people",)),
    "people_demo": Setup("people_demo", ("camera", "speech", "manager", "monitor", "events",
                                         "detector", "people"),
                         "people_demo_setup.yaml",
                         "Offline two-person demo: two people come and go, one waves; two "
                         "speakers in the script; events node + people node + manager + "
                         "monitor",
                         config_paths={"speech": {"script_file": "people_demo_script.yaml"}},
                         demo_video="people"),
}


def start_order(keys) -> list[str]:
    """`keys` in the order nodes are started (consumers before producers)."""
    return sorted(keys, key=START_ORDER.index)


def default_params_file(setup: Setup) -> Path:
    """config/<setup>_setup.yaml of the checkout or the install."""
    return config_file(setup.params_file)


SCRIPT_WAITS_FOR_MANAGER_S = 600.0
"""How long a script given at start (`--script`, `script_file:=`) waits for the manager to
listen before its first line: a line said before is lost. Every node starts at once, and a
manager loading its models on a busy CPU has taken longer than the speech node's own 10 s (the
demo setups' files say the same)."""


def script_wait(params_files) -> dict:
    """The speech node's wait for a script given at start, unless a params file sets one."""
    given = load_node_params(params_files, NODES["speech"].executable)
    return {} if "wait_for_subscriber" in given else \
        {"wait_for_subscriber": SCRIPT_WAITS_FOR_MANAGER_S}


#: the nodes that hear the person's lines (dialogue/utterance): a script waits for each
UTTERANCE_LISTENERS = ("manager", "people")


def utterance_listeners(keys) -> dict:
    """The speech node's `wait_for_listeners`: the started nodes among UTTERANCE_LISTENERS.

    Filled in at start from the nodes that run, so `--no-people` never leaves the speech node
    waiting for a node that is not there.
    """
    names = [NODES[k].executable for k in UTTERANCE_LISTENERS if k in keys]
    return {"wait_for_listeners": names} if names else {}       # none: anybody (the default)


def camera_listeners(params_files, keys) -> dict:
    """The camera's `wait_for_listeners` of the params files, less the nodes not started.

    A video that waits for the events node and a scripted speech node (the people demo)
    must not wait for one left out (`--no-events`): it would wait out its timeout.
    """
    named = load_node_params(params_files, NODES["camera"].executable).get(
        "wait_for_listeners")
    if not named or "camera" not in keys:
        return {}
    started = {NODES[k].executable for k in keys}
    # none left: [""] (an empty list has no type on the command line; the camera skips "")
    return {"wait_for_listeners": [n for n in named if n in started] or [""]}


def people_memory(params_files, keys) -> dict:
    """The manager's `people_store_url`: people_node's store, where both run.

    The manager keeps what known people said of themselves in the store people_node knows
    them by (docs/memory.md); a params file that sets the manager's own keeps it.
    """
    if not {"manager", "people"} <= set(keys):
        return {}
    if "people_store_url" in load_node_params(params_files, NODES["manager"].executable):
        return {}
    people = load_node_params(params_files, NODES["people"].executable)
    return {"people_store_url": people.get("store_url", DEFAULT_STORE_URL)}


class _ParamsLoader(yaml.SafeLoader):
    """safe_load, and a list as launch_ros writes it (`!!python/tuple`, as rcl reads it)."""


_ParamsLoader.add_constructor("tag:yaml.org,2002:python/tuple",
                              lambda loader, node: loader.construct_sequence(node))


def load_node_params(params_files, executable: str) -> dict:
    """Parameters YAML files give node `executable` (keys '/**', 'name', '/name', '/**/name').

    params_files: one path, or several layered in order (a later file's values win, as with
    several `--params-file` arguments or launch's `parameters=[...]`).
    """
    files = [params_files] if isinstance(params_files, (str, Path)) else list(params_files)
    out: dict = {}
    for path in files:
        data = yaml.load(Path(path).read_text(), Loader=_ParamsLoader) or {}
        for key in ("/**", executable, f"/{executable}", f"/**/{executable}"):
            out.update((data.get(key) or {}).get("ros__parameters", {}) or {})
    return out


def node_overrides(setup: Setup, params_files, keys=None) -> dict[str, dict]:
    """{node key: {param: value}} filled in at start for parameters the YAML leaves empty.

    - config_paths entries -> the absolute path of the file in config/;
    - demo_video: the camera's video_path -> the demo video (built now if missing);
    - spoken_script: the speech node's audio_in -> the script spoken (synthesised now if
      missing).
    """
    out: dict[str, dict] = {}
    for key in setup.nodes if keys is None else keys:
        given = load_node_params(params_files, NODES[key].executable)
        extra = {name: str(config_file(fname))
                 for name, fname in setup.config_paths.get(key, {}).items()
                 if not given.get(name)}
        if setup.demo_video and key == "camera" and not given.get("video_path"):
            from vision_dialogue.camera.demo_video import ensure_demo_video
            from vision_dialogue.camera.people_video import ensure_people_video
            extra["video_path"] = str(ensure_people_video() if setup.demo_video == "people"
                                      else ensure_demo_video())
        if setup.spoken_script and key == "speech" and not given.get("audio_in"):
            from vision_dialogue.camera.demo_video import default_dir
            from vision_dialogue.voice.spoken_script import ensure_spoken_script
            extra["audio_in"] = str(ensure_spoken_script(config_file(setup.spoken_script),
                                                         default_dir()))
        if extra:
            out[key] = extra
    return out
