"""Furhat: Furhat camera feed + Furhat speech + conversation manager.

    ros2 launch vision_dialogue furhat.launch.py [namespace:=furhat1] [log_level:=debug]
        [params_file:=/path/to/my_furhat_setup.yaml] [use_respawn:=true] ...

The robot's address is in the params file (camera_node furhat_host, speech_node host).

Includes bringup.launch.py with setup:=furhat; every argument of that file applies (see
`--show-args`). Mirrors `bringup furhat` (both read vision_dialogue/cli/setups.py).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_launch_description():
    launch_dir = os.path.join(get_package_share_directory('vision_dialogue'), 'launch')
    return LaunchDescription([IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(launch_dir, 'bringup.launch.py')),
        launch_arguments={'setup': 'furhat'}.items())])
