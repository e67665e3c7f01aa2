"""VFM: the Visual Foundation Model action servers, for example on a GPU host.

    ros2 launch vision_dialogue vfm.launch.py [namespace:=robot1] [log_level:=debug]
        [params_file:=/path/to/my_vfm_setup.yaml] [use_respawn:=true]

The manager (on the robot's computer) reaches the servers over DDS; use the same
ROS_DOMAIN_ID and namespace on both hosts.

The arguments: `--show-args`. Mirrors `bringup vfm` (both read vision_dialogue/ros/setups.py;
the description is vision_dialogue/ros/launch_description.py).
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description('vfm')
