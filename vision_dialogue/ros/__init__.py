"""ROS 2 plumbing shared by the nodes (may import rclpy): QoS that follows publishers, the
DDS transport profile, clock stamps."""
