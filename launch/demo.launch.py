"""Offline demo: the demo video as camera + the scripted dialogue + the manager.

    ros2 launch vision_dialogue demo.launch.py [log_level:=debug] [video_path:=/my/video.mp4]
        [script_file:=/my/script.yaml] [params_file:=/path/to/my_demo_setup.yaml]

Everything runs offline on the embedded local model (config/demo_setup.yaml). When the
script is over, the speech node exits and the whole launch shuts down.

The arguments: `--show-args`. Mirrors `bringup demo` (both read vision_dialogue/ros/setups.py;
the description is vision_dialogue/ros/launch_description.py).
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description('demo')
