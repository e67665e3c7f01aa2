"""The monitor: a live web page of the session. ROS-free (monitor_node.py is its ROS side).

May import `core` (the transcript's record format).
"""
