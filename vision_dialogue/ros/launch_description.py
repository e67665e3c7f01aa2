"""The one launch description every `launch/*.launch.py` file returns (nav2_bringup's shape).

    setup_launch_description("demo")   # demo.launch.py: the arguments the demo uses
    setup_launch_description()         # bringup.launch.py: `setup:=NAME`, every argument

One `GroupAction` holds the setup's nodes under `PushROSNamespace(namespace)` and
`SetParameter(use_sim_time)`. Which nodes start, their YAML and what is filled in at start
come from ros/setups.py, the description `bringup` reads too. A per-setup file declares only
the arguments that setup uses, with descriptions true for it (`--show-args`). The user's
`params_file` is layered over the setup's YAML (its values win), a `video_path` or
`script_file` argument means that file is played, any node's exit ends the launch as it ends
`bringup` (the demo script's end, say), and a bad argument ends it with exit code 1 and one
line naming it. Needs `launch` and `launch_ros` (a ROS 2 install); imported by launch files only.
"""
from __future__ import annotations

import os
from pathlib import Path

try:   # ROS 2's launch (a ROS 2 install; elsewhere ../shared/tools/ros2-launch in tests)
    from launch import LaunchDescription
    from launch.actions import (DeclareLaunchArgument, EmitEvent, GroupAction, OpaqueFunction,
                                SetEnvironmentVariable)
    from launch.conditions import IfCondition, UnlessCondition
    from launch.events import Shutdown
    from launch.substitutions import EnvironmentVariable, LaunchConfiguration
    from launch_ros.actions import Node, PushROSNamespace, SetParameter
except ModuleNotFoundError as e:     # said plainly; `bringup` needs none of it
    e.msg = (f"{e.msg}: the launch files need ROS 2's launch and launch_ros (source a ROS 2 "
             "install); without them, use `bringup <setup>`")
    raise

from vision_dialogue.ros.setups import (NODES, SETUPS, Setup, camera_listeners,
                                        default_params_file, node_overrides, people_memory,
                                        script_wait, start_order, utterance_listeners)
from vision_dialogue.ros.topics import DETECTIONS_TOPIC, IMAGE_TOPIC, LABEL_INFO_TOPIC, \
    STREAM_TOPIC
from vision_dialogue.common.resources import config_file

#: (name, default, description, node keys that use it; empty: every setup)
COMMON_ARGUMENTS = [
    ('namespace', '', 'Top-level namespace for all nodes (two setups at once: one each)', ()),
    ('params_file', '', 'A ROS 2 parameters file layered over the setup\'s own YAML '
     '(config/<setup>_setup.yaml): its values win, the rest stay the setup\'s', ()),
    ('use_sim_time', 'false', 'Use simulation (/clock, e.g. from bag_play) time if true', ()),
    ('log_level', 'info', 'Log level (debug, info, warn, error)', ()),
    ('use_respawn', 'false', 'Restart a node that exits (else any node\'s exit ends the '
     'launch)', ()),
    ('image_topic', IMAGE_TOPIC, 'Camera image topic (its /compressed companion is '
     'remapped with it)', ('camera', 'manager', 'events', 'detector')),
    ('stream_topic', STREAM_TOPIC, 'Fast camera stream the events_node watches '
     '(its /compressed companion with it)', ('events',)),
    ('detections_topic', DETECTIONS_TOPIC, 'Object detections (vision_msgs/Detection2DArray) '
     'the manager reads and the detector_node publishes: remap a robot\'s detector here, '
     'e.g. /yolo/detections', ('manager', 'detector')),
    ('label_info_topic', LABEL_INFO_TOPIC, 'Class names by id (vision_msgs/LabelInfo, latched) '
     'for detectors that put numbers in class_id', ('manager', 'detector')),
    ('managed', 'false', 'Start the nodes unconfigured, for a lifecycle manager (nav2\'s '
     'lifecycle_manager, `ros2 lifecycle set`) to configure and activate them; false: each '
     'configures and activates itself (docs/lifecycle.md)',
     tuple(k for k, spec in NODES.items() if spec.managed)),
    ('speech_prefix', '', 'Prefix for the speech_node command; ros2 launch gives nodes no '
     'stdin, so with the terminal backend use e.g. "xterm -e" (or use_speech:=false and `ros2 '
     'run vision_dialogue speech_node` in another terminal)', ('speech',)),
]
NODE_WORDS = {'camera': 'the camera_node', 'speech': 'the speech_node',
              'manager': 'the conversation manager_node', 'vfm': 'the vfm_server',
              'monitor': 'the monitor page (http://127.0.0.1:8765/, or the next free port)',
              'events': 'the events_node (waves, pointing, arrivals between frames)',
              'detector': 'the detector_node (objects as vision_msgs detections)',
              'people': 'the people_node (who it talks to across sessions, with consent)'}
#: launch argument -> (node key, parameter it sets, the variant that plays it)
FILE_ARGUMENTS = {'video_path': ('camera', 'source', 'video'),
                  'script_file': ('speech', 'backend', 'script')}


def _file_argument_text(name: str, setup: Setup | None) -> str:
    what = 'Video the camera plays' if name == 'video_path' else \
        'Scripted dialogue the speech node plays'
    if setup is None:
        return f'{what} (empty: the setup\'s own)'
    if setup.demo_video and name == 'video_path':
        return f'{what} (empty: the {"two-person " if setup.demo_video == "people" else ""}' \
            'demo video)'
    if name == 'script_file' and setup.config_paths.get('speech', {}).get('script_file'):
        return f'{what} (empty: config/{setup.config_paths["speech"]["script_file"]})'
    return f'{what} instead of this setup\'s ' \
        f'{"camera" if name == "video_path" else "speech backend"} (empty: the setup\'s own)'


def declared_arguments(setup: Setup | None) -> list[DeclareLaunchArgument]:
    """The launch arguments of one setup's file (None: the base file, any setup)."""
    keys = set(NODES) if setup is None else set(setup.nodes)
    out = []
    if setup is None:
        out.append(DeclareLaunchArgument('setup', default_value='demo',
                                         description='Which setup to start: '
                                         + ', '.join(SETUPS)))
    for name, default, text, users in COMMON_ARGUMENTS:
        if not users or keys & set(users):
            out.append(DeclareLaunchArgument(name, default_value=default, description=text))
    for key in start_order(keys):
        if setup is None:
            default, when = '', ' (empty: the setup\'s default)'
        else:
            default, when = ('false' if key in setup.optional else 'true'), ''
        out.append(DeclareLaunchArgument(f'use_{key}', default_value=default,
                                         description=f'Start {NODE_WORDS[key]}{when}'))
    for name, (key, _, _) in FILE_ARGUMENTS.items():
        if key in keys:
            out.append(DeclareLaunchArgument(name, default_value='',
                                             description=_file_argument_text(name, setup)))
    return out


def setup_launch_description(setup_name: str | None = None) -> LaunchDescription:
    """The launch description of setup `setup_name` (None: chosen by the `setup` argument)."""
    setup = None if setup_name is None else SETUPS[setup_name]
    ld = LaunchDescription(declared_arguments(setup))
    ld.add_action(SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'))
    # Fast DDS with large shared-memory segments, so raw frames cross processes (a profile
    # the user set already is kept)
    ld.add_action(SetEnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', EnvironmentVariable(
        'FASTDDS_DEFAULT_PROFILES_FILE', default_value=str(config_file('fastdds.xml')))))
    ld.add_action(OpaqueFunction(function=_launch_setup, args=[setup_name]))
    return ld


class LaunchArgumentError(ValueError):
    """A bad launch argument: `ros2 launch` prints the message and exits 1."""


def _existing_file(name: str, value: str) -> str:
    path = Path(os.path.expanduser(value))
    if not path.is_file():
        raise LaunchArgumentError(f'{name}:={value}: no such file')
    return str(path.resolve())


def _launch_setup(context, setup_name: str | None):
    """At launch time: the setup's nodes, in one namespaced group.

    The demo video is built here, never while the description is generated or for
    --show-args.
    """
    arg = context.launch_configurations
    name = setup_name or arg.get('setup', 'demo')
    setup = SETUPS.get(name)
    if setup is None:
        raise LaunchArgumentError(f'setup:={name} is not a setup; one of {", ".join(SETUPS)}')
    files = [str(default_params_file(setup))]
    if arg.get('params_file'):
        files.append(_existing_file('params_file', arg['params_file']))
    filled = node_overrides(setup, files)
    for arg_name, (key, kind_param, variant) in FILE_ARGUMENTS.items():
        if arg.get(arg_name) and key in setup.nodes:
            filled.setdefault(key, {}).update({
                arg_name: _existing_file(arg_name, arg[arg_name]), kind_param: variant})
    if arg.get('script_file') and 'speech' in setup.nodes:     # as the loop above sets it
        filled['speech'].update(script_wait(files))      # its first line waits for the manager
    started = [k for k in setup.nodes
               if (arg.get(f'use_{k}', '') or ('false' if k in setup.optional else 'true'))
               .strip().lower() == 'true']
    if 'speech' in started:             # its first line waits for each node that hears it
        filled.setdefault('speech', {}).update(utterance_listeners(started))
    camera = camera_listeners(files, started)   # a video waits only for nodes that run
    if camera:
        filled.setdefault('camera', {}).update(camera)
    memory = people_memory(files, started)      # the manager remembers in people_node's store
    if memory:
        filled.setdefault('manager', {}).update(memory)
    managed = arg.get('managed', 'false').strip().lower()
    if managed not in ('true', 'false'):
        raise LaunchArgumentError(f'managed:={managed}: true or false')
    nodes = []
    for key in start_order(setup.nodes):
        wanted = arg.get(f'use_{key}', '') or ('false' if key in setup.optional else 'true')
        own = filled.get(key, {})
        if managed == 'true' and NODES[key].managed:
            own = {**own, 'managed': True}
        nodes.append(_node(key, wanted, files, own))
    return [GroupAction([PushROSNamespace(LaunchConfiguration('namespace')),
                         SetParameter('use_sim_time', LaunchConfiguration('use_sim_time')),
                         *nodes])]


def _node(key: str, wanted: str, files: list[str], filled: dict) -> Node:
    exe = NODES[key].executable
    image, stream = LaunchConfiguration('image_topic', default=IMAGE_TOPIC), \
        LaunchConfiguration('stream_topic', default=STREAM_TOPIC)
    return Node(
        condition=IfCondition(wanted),
        package='vision_dialogue', executable=exe, name=exe,
        output='screen', emulate_tty=True,
        respawn=LaunchConfiguration('use_respawn'), respawn_delay=2.0,
        prefix=LaunchConfiguration('speech_prefix') if key == 'speech' else None,
        parameters=[*files, filled] if filled else files,
        arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
        # raw + compressed camera topics move as a pair (image_transport naming)
        remappings=[(IMAGE_TOPIC, image),
                    (f'{IMAGE_TOPIC}/compressed', [image, '/compressed']),
                    (STREAM_TOPIC, stream),
                    (f'{STREAM_TOPIC}/compressed', [stream, '/compressed']),
                    (DETECTIONS_TOPIC, LaunchConfiguration('detections_topic',
                                                           default=DETECTIONS_TOPIC)),
                    (LABEL_INFO_TOPIC, LaunchConfiguration('label_info_topic',
                                                           default=LABEL_INFO_TOPIC))],
        # like `bringup`: a node that ends (the demo script is over) ends the whole setup
        on_exit=[EmitEvent(event=Shutdown(reason=f'{exe} finished'),
                           condition=UnlessCondition(LaunchConfiguration('use_respawn')))])
