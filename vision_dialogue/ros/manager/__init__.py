"""The manager's own ROS side: what only `manager_node.py` wires.

Its parameters and what the core is built from them, what it publishes, its LLM check, the
tools and skills it serves and calls (VFM, the robot's own actions, Say/Ask/Chat), and its
memory of people. Nothing else imports this room (test/unit/test_architecture.py holds it);
ROS helpers that other nodes share stay one level up in `ros/`.
"""
