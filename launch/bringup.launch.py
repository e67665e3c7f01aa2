"""The base launch file: starts one setup of vision_dialogue (nodes + its parameters file).

    ros2 launch vision_dialogue bringup.launch.py setup:=demo [namespace:=robot1]
        [params_file:=/path/to/my_setup.yaml] [use_sim_time:=true] [log_level:=debug]
        [image_topic:=/usb_cam/image_raw] [use_camera:=false] ...

The setup launch files (demo, standalone, furhat, vfm) include this one with their
`setup`, as nav2_bringup's launch files include one another. Which nodes a setup starts,
its parameters file and what is filled in at start (the demo video, the demo script) come
from vision_dialogue/cli/setups.py, the same description the `bringup` command reads.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, EmitEvent, OpaqueFunction,
                            RegisterEventHandler, SetEnvironmentVariable)
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node

ARGUMENTS = [  # (name, default, description)
    ('setup', 'demo', 'Which setup to start: demo, standalone, furhat, vfm, voice_demo or '
     'people_demo'),
    ('namespace', '', 'Top-level namespace for all nodes'),
    ('params_file', '', 'Full path to the ROS 2 parameters file for all launched nodes '
     '(empty: config/<setup>_setup.yaml)'),
    ('use_sim_time', 'false', 'Use simulation (/clock, e.g. from bag_play) time if true'),
    ('log_level', 'info', 'Log level (debug, info, warn, error)'),
    ('use_respawn', 'false', 'Restart a node that crashes'),
    ('image_topic', 'camera/image_raw',
     'Camera image topic (its /compressed companion is remapped with it)'),
    ('stream_topic', 'camera/stream/image_raw',
     'Fast camera stream the events_node watches (its /compressed companion with it)'),
    ('use_camera', 'true', 'Start the camera_node (if the setup has one)'),
    ('use_speech', 'true', 'Start the speech_node (if the setup has one)'),
    ('use_manager', 'true', 'Start the conversation manager_node (if the setup has one)'),
    ('use_vfm', 'true', 'Start the vfm_server (if the setup has one)'),
    ('use_monitor', '', 'Start the monitor page (http://127.0.0.1:8765/): true or false; '
     'empty: the setup\'s default (on in demo and standalone, off in furhat)'),
    ('use_events', '', 'Start the events_node (waves, pointing, arrivals between frames): '
     'true or false; empty: the setup\'s default (on in people_demo)'),
    ('speech_prefix', '',
     'Prefix for the speech_node command; ros2 launch gives nodes no stdin, so with the '
     'terminal backend use e.g. "xterm -e" (or use_speech:=false and `ros2 run '
     'vision_dialogue speech_node` in another terminal)'),
    ('video_path', '', 'Video the camera plays (demo; empty: the demo video, built at start)'),
    ('script_file', '', 'Scripted dialogue the speech node plays (demo; empty: the setup\'s)'),
]


def launch_setup(context):
    """At launch time.

    The nodes of the chosen setup (the demo video is built here, never while the description is
    generated or for --show-args).
    """
    from vision_dialogue.cli.setups import (NODES, SETUPS, default_params_file,
                                            node_overrides, start_order)
    arg = context.launch_configurations
    setup = SETUPS.get(arg['setup'])
    if setup is None:
        return [EmitEvent(event=Shutdown(
            reason=f"unknown setup {arg['setup']!r}; one of {', '.join(SETUPS)}"))]
    params_file = arg['params_file'] or str(default_params_file(setup))
    try:
        filled = node_overrides(setup, params_file)
    except Exception as e:  # noqa: BLE001 - e.g. no scikit-image on this host for the video
        return [EmitEvent(event=Shutdown(reason=f'cannot start {setup.name}: {e}'))]
    for key, name in (('camera', 'video_path'), ('speech', 'script_file')):
        if arg[name] and key in setup.nodes:
            filled.setdefault(key, {})[name] = arg[name]
    image_topic = LaunchConfiguration('image_topic')
    stream_topic = LaunchConfiguration('stream_topic')
    actions = []
    for key in start_order(setup.nodes):
        exe = NODES[key].executable
        use = LaunchConfiguration(f'use_{key}')
        if not arg.get(f'use_{key}', 'true'):     # empty: the setup's default
            use = 'false' if key in setup.optional else 'true'
        node = Node(
            condition=IfCondition(use),
            package='vision_dialogue',
            executable=exe,
            name=exe,
            namespace=LaunchConfiguration('namespace'),
            output='screen',
            emulate_tty=True,
            respawn=LaunchConfiguration('use_respawn'),
            respawn_delay=2.0,
            prefix=LaunchConfiguration('speech_prefix') if key == 'speech' else None,
            parameters=[params_file, {'use_sim_time': LaunchConfiguration('use_sim_time'),
                                      **filled.get(key, {})}],
            arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
            # raw + compressed camera topics move as a pair (image_transport naming)
            remappings=[('camera/image_raw', image_topic),
                        ('camera/image_raw/compressed', [image_topic, '/compressed']),
                        ('camera/stream/image_raw', stream_topic),
                        ('camera/stream/image_raw/compressed', [stream_topic, '/compressed'])])
        actions.append(node)
        if key == setup.ends_with:   # the demo ends with its script
            actions.append(RegisterEventHandler(OnProcessExit(
                target_action=node,
                on_exit=[EmitEvent(event=Shutdown(reason=f'{exe} finished'))])))
    return actions


def generate_launch_description():
    share_dir = get_package_share_directory('vision_dialogue')
    ld = LaunchDescription()
    ld.add_action(SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'))
    # Fast DDS with large shared-memory segments, so raw frames cross processes (a profile
    # the user set already is kept)
    ld.add_action(SetEnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', EnvironmentVariable(
        'FASTDDS_DEFAULT_PROFILES_FILE',
        default_value=os.path.join(share_dir, 'config', 'fastdds.xml'))))
    for name, default, description in ARGUMENTS:
        ld.add_action(DeclareLaunchArgument(name, default_value=default,
                                            description=description))
    ld.add_action(OpaqueFunction(function=launch_setup))
    return ld
