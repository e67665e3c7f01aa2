"""Offline two-person demo: two people come and go, one waves, both talk to the robot.

    ros2 launch vision_dialogue people_demo.launch.py [log_level:=debug]
        [params_file:=/path/to/my_people_demo_setup.yaml]

The two-person video (vision_dialogue/cli/people_video.py) as camera, with its 8 fps stream
watched by the events node; the script of config/people_demo_script.yaml (speakers Anna and
Ben); the manager on the embedded local model (config/people_demo_setup.yaml).

Includes bringup.launch.py with setup:=people_demo; every argument of that file applies (see
`--show-args`). Mirrors `bringup people_demo` (both read vision_dialogue/cli/setups.py).
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
        launch_arguments={'setup': 'people_demo'}.items())])
