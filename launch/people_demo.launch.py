"""Offline two-person demo: two people come and go, one waves, both talk to the robot.

    ros2 launch vision_dialogue people_demo.launch.py [log_level:=debug]
        [params_file:=/path/to/my_people_demo_setup.yaml]

The two-person video (vision_dialogue/cli/people_video.py) as camera, with its 8 fps stream
watched by the events node; the script of config/people_demo_script.yaml (speakers Anna and
Ben); the manager on the embedded local model (config/people_demo_setup.yaml).

The arguments: `--show-args`. Mirrors `bringup people_demo`
(both read vision_dialogue/ros/setups.py; the description is
vision_dialogue/ros/launch_description.py).
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description('people_demo')
