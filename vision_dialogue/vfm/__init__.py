"""Visual Foundation Model tools (Visual ChatGPT): registry, image store, device spec, models.

ROS-free; vision_dialogue.vfm_server exposes them as ROS 2 actions."""
