"""ROS-free core of vision_dialogue: prompt timeline, summariser, LLM clients, tool registry.

Nothing under vision_dialogue.core imports rclpy or generated messages, so it is testable
in milliseconds; the nodes are thin adapters around it.
"""
