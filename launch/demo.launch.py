"""Demo setup: the demo video as camera + the scripted dialogue + the conversation manager.

    ros2 launch vision_dialogue demo.launch.py [log_level:=debug] [video_path:=/my/video.mp4]
        [script_file:=/my/script.yaml] [params_file:=/path/to/my_demo_setup.yaml]

Everything runs offline on the embedded local model (see config/demo_setup.yaml). When the
script is over, the speech node exits and the whole launch shuts down.
Mirrors `bringup demo` (vision_dialogue/bringup.py, SETUPS['demo']).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, EmitEvent, OpaqueFunction,
                            RegisterEventHandler, SetEnvironmentVariable,
                            SetLaunchConfiguration)
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node


def demo_video(context):
    """At launch time (not for --show-args): build the demo video if video_path is empty."""
    if context.launch_configurations.get('video_path'):
        return []
    try:
        from vision_dialogue.demo_assets import ensure_demo_video
        return [SetLaunchConfiguration('video_path', str(ensure_demo_video()))]
    except Exception as e:  # noqa: BLE001 - e.g. scikit-image not installed on this host
        return [EmitEvent(event=Shutdown(
            reason=f'cannot build the demo video ({e}); pass video_path:=...'))]


def generate_launch_description():
    share_dir = get_package_share_directory('vision_dialogue')

    namespace = LaunchConfiguration('namespace')
    params_file = LaunchConfiguration('params_file')
    use_sim_time = LaunchConfiguration('use_sim_time')
    log_level = LaunchConfiguration('log_level')
    video_path = LaunchConfiguration('video_path')
    script_file = LaunchConfiguration('script_file')
    use_camera = LaunchConfiguration('use_camera')
    use_speech = LaunchConfiguration('use_speech')
    use_manager = LaunchConfiguration('use_manager')

    remappings = []

    declare_namespace_cmd = DeclareLaunchArgument(
        'namespace', default_value='', description='Top-level namespace for all nodes')
    declare_params_file_cmd = DeclareLaunchArgument(
        'params_file',
        default_value=os.path.join(share_dir, 'config', 'demo_setup.yaml'),
        description='Full path to the ROS 2 parameters file to use for all launched nodes')
    declare_use_sim_time_cmd = DeclareLaunchArgument(
        'use_sim_time', default_value='false',
        description='Use simulation (/clock, e.g. from bag_play) time if true')
    declare_log_level_cmd = DeclareLaunchArgument(
        'log_level', default_value='info', description='Log level (debug, info, warn, error)')
    declare_video_path_cmd = DeclareLaunchArgument(
        'video_path', default_value='',
        description='Video the camera plays (empty: the demo video, built when the demo starts)')
    declare_script_file_cmd = DeclareLaunchArgument(
        'script_file', default_value=os.path.join(share_dir, 'config', 'demo_script.yaml'),
        description='Scripted dialogue the speech node plays')
    declare_use_camera_cmd = DeclareLaunchArgument(
        'use_camera', default_value='true', description='Start the camera_node (video)')
    declare_use_speech_cmd = DeclareLaunchArgument(
        'use_speech', default_value='true', description='Start the speech_node (script)')
    declare_use_manager_cmd = DeclareLaunchArgument(
        'use_manager', default_value='true', description='Start the conversation manager_node')

    camera_node = Node(
        condition=IfCondition(use_camera),
        package='vision_dialogue',
        executable='camera_node',
        name='camera_node',
        namespace=namespace,
        output='screen',
        parameters=[params_file, {'use_sim_time': use_sim_time, 'video_path': video_path}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=remappings)

    speech_node = Node(
        condition=IfCondition(use_speech),
        package='vision_dialogue',
        executable='speech_node',
        name='speech_node',
        namespace=namespace,
        output='screen',
        emulate_tty=True,
        parameters=[params_file, {'use_sim_time': use_sim_time, 'script_file': script_file}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=remappings)

    manager_node = Node(
        condition=IfCondition(use_manager),
        package='vision_dialogue',
        executable='manager_node',
        name='manager_node',
        namespace=namespace,
        output='screen',
        emulate_tty=True,
        parameters=[params_file, {'use_sim_time': use_sim_time}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=remappings)

    # The demo ends with its script: when the speech node exits, stop everything.
    end_with_script_cmd = RegisterEventHandler(OnProcessExit(
        target_action=speech_node,
        on_exit=[EmitEvent(event=Shutdown(reason='demo script finished'))]))

    ld = LaunchDescription()
    ld.add_action(SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'))
    # Fast DDS with large shared-memory segments, so raw frames cross processes (a profile
    # the user set already is kept)
    ld.add_action(SetEnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', EnvironmentVariable(
        'FASTDDS_DEFAULT_PROFILES_FILE',
        default_value=os.path.join(share_dir, 'config', 'fastdds.xml'))))
    ld.add_action(declare_namespace_cmd)
    ld.add_action(declare_params_file_cmd)
    ld.add_action(declare_use_sim_time_cmd)
    ld.add_action(declare_log_level_cmd)
    ld.add_action(declare_video_path_cmd)
    ld.add_action(declare_script_file_cmd)
    ld.add_action(declare_use_camera_cmd)
    ld.add_action(declare_use_speech_cmd)
    ld.add_action(declare_use_manager_cmd)
    ld.add_action(OpaqueFunction(function=demo_video))
    ld.add_action(camera_node)
    ld.add_action(speech_node)
    ld.add_action(manager_node)
    ld.add_action(end_with_script_cmd)
    return ld
