"""vision_dialogue: vision-enabled dialogue for social robots on ROS 2.

Its messages, services and actions are the package vision_dialogue_interfaces
(interfaces/vision_dialogue_interfaces).
"""
