"""Furhat's user data (furhat/camera_feed.py) as ROS messages."""
from __future__ import annotations

from geometry_msgs.msg import Point, Vector3
from sensor_msgs.msg import RegionOfInterest

from vision_dialogue.furhat.camera_feed import FurhatUserData
from vision_dialogue_interfaces.msg import DetectedUser, DetectedUsers


def users_to_msg(data: FurhatUserData, stamp, frame_id: str):
    """FurhatUserData -> a DetectedUsers message (stamp: builtin_interfaces/Time)."""
    msg = DetectedUsers()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.raw_json = data.raw_json
    for u in data.users:
        m = DetectedUser()
        m.id = u.id
        x, y, w, h = u.bbox
        m.bbox = RegionOfInterest(x_offset=x, y_offset=y, width=w, height=h)
        m.position = Point(x=u.position[0], y=u.position[1], z=u.position[2])
        m.rotation = Vector3(x=u.rotation[0], y=u.rotation[1], z=u.rotation[2])
        m.emotion = u.emotion
        m.landmarks = [float(v) for v in u.landmarks]
        msg.users.append(m)
    return msg
