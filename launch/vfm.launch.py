"""VFM setup: the Visual Foundation Model action servers, e.g. on a GPU host.

    ros2 launch vision_dialogue vfm.launch.py [namespace:=robot1] [log_level:=debug]
        [params_file:=/path/to/my_vfm_setup.yaml] [use_respawn:=true]

The manager (on the robot's computer) reaches the servers over DDS; use the same
ROS_DOMAIN_ID and namespace on both hosts. Mirrors `bringup vfm`
(vision_dialogue/bringup.py, SETUPS['vfm']).
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
    use_vfm = LaunchConfiguration('use_vfm')
    use_respawn = LaunchConfiguration('use_respawn')

    declare_namespace_cmd = DeclareLaunchArgument(
        'namespace', default_value='', description='Top-level namespace for all nodes')
    declare_params_file_cmd = DeclareLaunchArgument(
        'params_file',
        default_value=os.path.join(share_dir, 'config', 'vfm_setup.yaml'),
        description='Full path to the ROS 2 parameters file to use for all launched nodes')
    declare_use_sim_time_cmd = DeclareLaunchArgument(
        'use_sim_time', default_value='false',
        description='Use simulation (/clock, e.g. from bag_play) time if true')
    declare_log_level_cmd = DeclareLaunchArgument(
        'log_level', default_value='info', description='Log level (debug, info, warn, error)')
    declare_use_vfm_cmd = DeclareLaunchArgument(
        'use_vfm', default_value='true', description='Start the vfm_server action servers')
    declare_use_respawn_cmd = DeclareLaunchArgument(
        'use_respawn', default_value='false',
        description='Whether to respawn the server if it crashes (e.g. GPU out of memory)')

    vfm_server = Node(
        condition=IfCondition(use_vfm),
        package='vision_dialogue',
        executable='vfm_server',
        name='vfm_server',
        namespace=namespace,
        output='screen',
        respawn=use_respawn,
        respawn_delay=2.0,
        parameters=[params_file, {'use_sim_time': use_sim_time}],
        arguments=['--ros-args', '--log-level', log_level],
        remappings=[])

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
    ld.add_action(declare_use_vfm_cmd)
    ld.add_action(declare_use_respawn_cmd)
    ld.add_action(vfm_server)
    return ld
