"""Furhat setup: Furhat camera feed + Furhat speech + conversation manager.

    ros2 launch vision_dialogue furhat.launch.py [namespace:=furhat1] [log_level:=debug]
        [params_file:=/path/to/my_furhat_setup.yaml] [use_respawn:=true] ...

The robot's address is in the params file (camera_node furhat_host, speech_node host).
Mirrors `bringup furhat` (vision_dialogue/bringup.py, SETUPS['furhat']).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.conditions import IfCondition
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    share_dir = get_package_share_directory('vision_dialogue')

    namespace = LaunchConfiguration('namespace')
    params_file = LaunchConfiguration('params_file')
    use_sim_time = LaunchConfiguration('use_sim_time')
    log_level = LaunchConfiguration('log_level')
    image_topic = LaunchConfiguration('image_topic')
    use_camera = LaunchConfiguration('use_camera')
    use_speech = LaunchConfiguration('use_speech')
    use_manager = LaunchConfiguration('use_manager')
    use_respawn = LaunchConfiguration('use_respawn')

    # Camera topics can be remapped as a pair (raw + compressed), e.g. to a driver's topics.
    remappings = [('camera/image_raw', image_topic),
                  ('camera/image_raw/compressed', [image_topic, '/compressed'])]

    declare_namespace_cmd = DeclareLaunchArgument(
        'namespace', default_value='', description='Top-level namespace for all nodes')
    declare_params_file_cmd = DeclareLaunchArgument(
        'params_file',
        default_value=os.path.join(share_dir, 'config', 'furhat_setup.yaml'),
        description='Full path to the ROS 2 parameters file to use for all launched nodes')
    declare_use_sim_time_cmd = DeclareLaunchArgument(
        'use_sim_time', default_value='false',
        description='Use simulation (/clock, e.g. from bag_play) time if true')
    declare_log_level_cmd = DeclareLaunchArgument(
        'log_level', default_value='info', description='Log level (debug, info, warn, error)')
    declare_image_topic_cmd = DeclareLaunchArgument(
        'image_topic', default_value='camera/image_raw',
        description='Camera image topic (its /compressed companion is remapped with it)')
    declare_use_camera_cmd = DeclareLaunchArgument(
        'use_camera', default_value='true', description='Start the camera_node (Furhat camera feed)')
    declare_use_speech_cmd = DeclareLaunchArgument(
        'use_speech', default_value='true',
        description='Start the speech_node (Furhat speech and listening)')
    declare_use_manager_cmd = DeclareLaunchArgument(
        'use_manager', default_value='true', description='Start the conversation manager_node')
    declare_use_respawn_cmd = DeclareLaunchArgument(
        'use_respawn', default_value='false',
        description='Whether to respawn a node if it crashes (e.g. the robot connection)')

    camera_node = Node(
        condition=IfCondition(use_camera),
        package='vision_dialogue',
        executable='camera_node',
        name='camera_node',
        namespace=namespace,
        output='screen',
        respawn=use_respawn,
        respawn_delay=2.0,
        parameters=[params_file, {'use_sim_time': use_sim_time}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=remappings)

    speech_node = Node(
        condition=IfCondition(use_speech),
        package='vision_dialogue',
        executable='speech_node',
        name='speech_node',
        namespace=namespace,
        output='screen',
        respawn=use_respawn,
        respawn_delay=2.0,
        emulate_tty=True,
        parameters=[params_file, {'use_sim_time': use_sim_time}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=remappings)

    manager_node = Node(
        condition=IfCondition(use_manager),
        package='vision_dialogue',
        executable='manager_node',
        name='manager_node',
        namespace=namespace,
        output='screen',
        respawn=use_respawn,
        respawn_delay=2.0,
        emulate_tty=True,
        parameters=[params_file, {'use_sim_time': use_sim_time}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=remappings)

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
    ld.add_action(declare_image_topic_cmd)
    ld.add_action(declare_use_camera_cmd)
    ld.add_action(declare_use_speech_cmd)
    ld.add_action(declare_use_manager_cmd)
    ld.add_action(declare_use_respawn_cmd)
    ld.add_action(camera_node)
    ld.add_action(speech_node)
    ld.add_action(manager_node)
    return ld
