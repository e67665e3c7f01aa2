"""Offline demo: the demo video as camera + the scripted dialogue + the manager.

    ros2 launch vision_dialogue demo.launch.py [log_level:=debug] [video_path:=/my/video.mp4]
        [script_file:=/my/script.yaml] [params_file:=/path/to/my_demo_setup.yaml]

Everything runs offline on the embedded local model (config/demo_setup.yaml). When the
script is over, the speech node exits and the whole launch shuts down.

Includes bringup.launch.py with setup:=demo; every argument of that file applies (see
`--show-args`). Mirrors `bringup demo` (both read vision_dialogue/cli/setups.py).
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
        launch_arguments={'setup': 'demo'}.items())])
