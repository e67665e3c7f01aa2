"""The base launch file: starts any setup of vision_dialogue (nodes + its parameters file).

    ros2 launch vision_dialogue bringup.launch.py setup:=demo [namespace:=robot1]
        [params_file:=/path/to/my_overrides.yaml] [use_sim_time:=true] [log_level:=debug]
        [image_topic:=/usb_cam/image_raw] [use_camera:=false] ...

Every setup's own file (demo, standalone, furhat, vfm, voice_demo, people_demo) returns the
same description with its setup fixed and only the arguments it uses. Which nodes a setup
starts, its parameters file and what is filled in at start (the demo video, the demo script)
come from vision_dialogue/ros/setups.py, the description the `bringup` command reads too.
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description()
