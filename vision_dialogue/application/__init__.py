"""The robot's application, above the conversation (ROS-free).

What an application declares and runs through the manager: the communication skills (Say,
Ask, Chat and their arbiter), the intents a YAML file declares and the robot's own tools
(robot_tools, confirmation); and the people the robot knows and what it remembers of them,
only with their consent (identity/). Each uses the conversation; the conversation never
names them (the manager wires them to it).

May import: core, llm, common. Never rclpy or generated messages: testable without ROS.
"""
