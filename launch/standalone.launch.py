"""Standalone setup: webcam camera + terminal chat + conversation manager, on one computer.

    ros2 launch vision_dialogue standalone.launch.py [namespace:=robot1] [log_level:=debug]
        [params_file:=/path/to/my_setup.yaml] [use_camera:=false] ...

Mirrors `bringup standalone` (vision_dialogue/bringup.py, SETUPS['standalone']).
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
    speech_prefix = LaunchConfiguration('speech_prefix')

    # Camera topics can be remapped as a pair (raw + compressed), e.g. to a driver's topics.
    remappings = [('camera/image_raw', image_topic),
                  ('camera/image_raw/compressed', [image_topic, '/compressed'])]

    declare_namespace_cmd = DeclareLaunchArgument(
        'namespace', default_value='', description='Top-level namespace for all nodes')
    declare_params_file_cmd = DeclareLaunchArgument(
        'params_file',
        default_value=os.path.join(share_dir, 'config', 'standalone_setup.yaml'),
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
        'use_camera', default_value='true', description='Start the webcam camera_node')
    declare_use_speech_cmd = DeclareLaunchArgument(
        'use_speech', default_value='true',
        description='Start the speech_node (terminal backend: type your lines)')
    declare_use_manager_cmd = DeclareLaunchArgument(
        'use_manager', default_value='true', description='Start the conversation manager_node')
    declare_speech_prefix_cmd = DeclareLaunchArgument(
        'speech_prefix', default_value='',
        description="Prefix for the speech_node command; ros2 launch gives nodes no stdin, so "
                    "use e.g. \"xterm -e\" to type in a window (or use_speech:=false and "
                    "`ros2 run vision_dialogue speech_node` in another terminal)")

    camera_node = Node(
        condition=IfCondition(use_camera),
        package='vision_dialogue',
        executable='camera_node',
        name='camera_node',
        namespace=namespace,
        output='screen',
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
        emulate_tty=True,
        prefix=speech_prefix,
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
    ld.add_action(declare_speech_prefix_cmd)
    ld.add_action(camera_node)
    ld.add_action(speech_node)
    ld.add_action(manager_node)
    return ld
