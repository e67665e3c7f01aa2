"""Every Furhat protocol client (ROS-free).

The Remote API and Realtime API speech backends, the Realtime API websocket client, and the ZeroMQ
camera feed with its user data.

May import: core, camera, speech, llm.
"""
