"""Standalone: webcam camera + terminal chat + conversation manager, on one computer.

    ros2 launch vision_dialogue standalone.launch.py [namespace:=robot1] [log_level:=debug]
        [params_file:=/path/to/my_setup.yaml] [use_camera:=false] [speech_prefix:="xterm -e"]

ros2 launch gives nodes no stdin: type in an xterm (speech_prefix) or run
`ros2 run vision_dialogue speech_node` in another terminal with use_speech:=false.

The arguments: `--show-args`. Mirrors `bringup standalone`
(both read vision_dialogue/ros/setups.py; the description is
vision_dialogue/ros/launch_description.py).
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description('standalone')
