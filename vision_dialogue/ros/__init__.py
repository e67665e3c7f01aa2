"""ROS 2 plumbing shared by the nodes.

Declared and validated parameters, the node runner, image and user messages, QoS that follows
publishers, the DDS transport profile, the VFM action names; the manager's own part (its
parameters, outputs, tools, skills and memory) in `ros/manager/`.

May import rclpy and every ROS-free room.
"""
