"""Visual Foundation Model tools (Visual ChatGPT), ROS-free.

The registry (the single table of tools, action kinds and checkpoints), the tool runtime, image
store, device spec, models, and the tools' function specs for the LLM.

May import: core. vfm_server exposes the tools as ROS 2 actions.
"""
