"""Commands beside the nodes.

Bringup (one description of the setups, shared with the launch files), bag_record / bag_play, and
the demo assets.

May import anything, ROS included.
"""
