"""ROS 2 plumbing shared by the nodes.

Declared and validated parameters, the node runner, image and user messages, QoS that follows
publishers, the DDS transport profile, the VFM action names and the manager's VFM action client.

May import rclpy and every ROS-free room.
"""
