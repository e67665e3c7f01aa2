"""VFM: the Visual Foundation Model action servers, for example on a GPU host.

    ros2 launch vision_dialogue vfm.launch.py [namespace:=robot1] [log_level:=debug]
        [params_file:=/path/to/my_vfm_setup.yaml] [use_respawn:=true]

The manager (on the robot's computer) reaches the servers over DDS; use the same
ROS_DOMAIN_ID and namespace on both hosts.

Includes bringup.launch.py with setup:=vfm; every argument of that file applies (see
`--show-args`). Mirrors `bringup vfm` (both read vision_dialogue/cli/setups.py).
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
        launch_arguments={'setup': 'vfm'}.items())])
