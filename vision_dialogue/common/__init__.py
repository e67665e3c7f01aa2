"""What every room shares, at the bottom of the house (ROS-free).

Frames and the image policy (images), the health rules every node reports on /diagnostics
(health), a consumer node's frame intake (frame_intake), any detector's objects (objects),
"forget me" in transcripts and the prompt (redaction) and where the package's data files are
(resources). The camera, the perception, the VFMs and the conversation use them, so none of
those depends on another for them.

May import: nothing else of vision_dialogue. Never rclpy or generated messages: testable
without ROS.
"""
