"""Furhat: Furhat camera feed + Furhat speech + conversation manager + detector + people node.

    ros2 launch vision_dialogue furhat.launch.py [namespace:=furhat1] [log_level:=debug]
        [params_file:=/path/to/my_furhat_setup.yaml] [use_respawn:=true] ...

The robot's address is in the params file (camera_node furhat_host, speech_node host).

The arguments: `--show-args`. Mirrors `bringup furhat` (both read vision_dialogue/ros/setups.py;
the description is vision_dialogue/ros/launch_description.py).
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description('furhat')
