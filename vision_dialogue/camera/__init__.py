"""Camera frames without ROS.

Sources (webcam, video, image folder), the acquisition loop that paces, retries and backs off, and
the manager's frame intake (de-duplication, decode worker).

May import: core. Furhat's cameras are in furhat/.
"""
