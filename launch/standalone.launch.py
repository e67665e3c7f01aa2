"""Standalone: webcam camera + terminal chat + conversation manager, on one computer.

    ros2 launch vision_dialogue standalone.launch.py [namespace:=robot1] [log_level:=debug]
        [params_file:=/path/to/my_setup.yaml] [use_camera:=false] [speech_prefix:="xterm -e"]

ros2 launch gives nodes no stdin: type in an xterm (speech_prefix) or run
`ros2 run vision_dialogue speech_node` in another terminal with use_speech:=false.

Includes bringup.launch.py with setup:=standalone; every argument of that file applies (see
`--show-args`). Mirrors `bringup standalone` (both read vision_dialogue/cli/setups.py).
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
        launch_arguments={'setup': 'standalone'}.items())])
