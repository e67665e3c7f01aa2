"""The robot's face on ROS topics, for any robot face, head or eye controller (a FaceOutput).

* ``robot_face/expression`` (hri_msgs/Expression, latched: a late face gets the current one):
  the expression name (ROS4HRI's), valence, arousal and confidence, on every change;
* ``robot_face/gesture`` (std_msgs/String): the Furhat-style GestureDefinition as JSON, or
  ``{"name": "Smile"}`` for a built-in one, for robots that can play it;
* ``robot_face/gaze_target`` (geometry_msgs/PointStamped): where the eyes should look, a point
  `GAZE_DISTANCE` m away in `frame_id` (x forward, y left, z up, REP-103): straight ahead is
  eye contact, pan/tilt degrees away while the robot averts its gaze;
* ``dialogue/face`` (std_msgs/String): each expression shown, with the line it belongs to, as
  a JSON record the manager puts in the transcript and the monitor.

All names are relative: remap them to a robot's own face topics.
"""
from __future__ import annotations

import json
import math

from geometry_msgs.msg import PointStamped
from std_msgs.msg import String

from vision_dialogue.face.controller import BUILTIN, GENERATED, FaceConfig, FaceController, \
    FaceCue, FaceOutput
from vision_dialogue.face.gaze import GazeMove, GazeTiming
from vision_dialogue.ros.params import Param, nonempty
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS
from vision_dialogue.ros.topics import (FACE_EXPRESSION_TOPIC, FACE_GAZE_TOPIC,
                                        FACE_GESTURE_TOPIC, FACE_RECORDS_TOPIC)

#: metres from the eyes to the gaze target published
GAZE_DISTANCE = 1.0


def _span(v) -> str | None:
    if len(v) != 2 or not 0.0 < float(v[0]) <= float(v[1]) <= 60.0:
        return "must be [shortest, longest] seconds, 0 < shortest <= longest <= 60"
    return None


#: the speech node's parameters of the face (docs/face.md)
FACE_PARAMS = [
    Param("expressions", True, "Show expressions that follow the conversation: a reaction to "
          "each line the person says, and each reply sentence's own expression as it is said "
          "(robot_face/expression, robot_face/gesture; gestures on a Furhat)."),
    Param("gaze_aversion", True, "While the robot speaks, its eyes look away now and then and "
          "come back (Furhat: GAZE_PAN/GAZE_TILT; others: robot_face/gaze_target); never while "
          "it listens."),
    Param("idle_movements", True, "Subtle movements while the robot listens between turns "
          "(a blink, the head settling by 1-2 degrees)."),
    Param("gaze_contact", [2.0, 5.0], "Eye contact while speaking lasts this long, s "
          "[shortest, longest].", check=_span),
    Param("gaze_away", [0.5, 4.0], "Looking away while speaking lasts this long, s "
          "[shortest, longest].", check=_span),
    Param("gaze_pan", 20.0, "Looking away: up to this many degrees left or right.",
          range=(0.0, 50.0)),
    Param("gaze_tilt", 15.0, "Looking away: up to this many degrees up or down.",
          range=(0.0, 50.0)),
    Param("gaze_move", 0.2, "Seconds the eyes take to move away or back.", range=(0.01, 2.0)),
    Param("max_head_angle", 15.0, "Gestures turn, tilt or roll the head at most this many "
          "degrees (values beyond are clamped).", range=(0.0, 50.0)),
    Param("expression_hold", 4.0, "An expression fades back to neutral after this many "
          "seconds without a new one.", range=(0.5, 120.0)),
    Param("idle_every", [4.0, 8.0], "Seconds between idle movements [shortest, longest].",
          check=_span),
    Param("gesture_style", GENERATED, "generated: a new gesture of blend shapes and head "
          "angles for each expression; builtin: Furhat's built-in gestures (Smile, "
          "ExpressSad...).", choices=(GENERATED, BUILTIN)),
    Param("face_frame", "head", "frame_id of robot_face/gaze_target and the expressions.",
          check=nonempty),
]


def face_config(p) -> FaceConfig:
    """The FaceConfig of the speech node's parameters `p`."""
    return FaceConfig(
        expressions=p["expressions"], gaze_aversion=p["gaze_aversion"],
        idle=p["idle_movements"], max_head=p["max_head_angle"], hold_s=p["expression_hold"],
        idle_every_s=tuple(p["idle_every"]), gesture_style=p["gesture_style"],
        gaze=GazeTiming(tuple(p["gaze_contact"]), tuple(p["gaze_away"]), p["gaze_pan"],
                        p["gaze_tilt"], p["gaze_move"]))


def make_face(node, p, backend, logger) -> FaceController | None:
    """The speech node's face (None with every part off): its topics and the backend's robot."""
    if not (p["expressions"] or p["gaze_aversion"] or p["idle_movements"]):
        return None
    topics = FaceTopics(node, p["face_frame"])
    return FaceController(face_config(p), topics, backend.face(max(p["gaze_pan"], p["gaze_tilt"])),
                          on_record=topics.record, logger=logger)


def gaze_point(move: GazeMove) -> tuple[float, float, float]:
    """The point GAZE_DISTANCE m away in the direction pan (left +), tilt (up +) degrees."""
    pan, tilt = math.radians(move.pan), math.radians(move.tilt)
    return (GAZE_DISTANCE * math.cos(tilt) * math.cos(pan),
            GAZE_DISTANCE * math.cos(tilt) * math.sin(pan), GAZE_DISTANCE * math.sin(tilt))


class FaceTopics(FaceOutput):
    """Publishers of the topics in the module docstring, on `node`."""

    def __init__(self, node, frame_id: str = "head"):
        self.node, self.frame_id = node, frame_id
        self.expression_pub = None
        if pm.Expression is not None:
            self.expression_pub = node.create_publisher(pm.Expression, FACE_EXPRESSION_TOPIC,
                                                        LATCHED_QOS)
        else:
            node.get_logger().warning(f"hri_msgs is not installed: no {FACE_EXPRESSION_TOPIC}; "
                                      f"gestures and gaze are still published")
        self.gesture_pub = node.create_publisher(String, FACE_GESTURE_TOPIC, RELIABLE_QOS)
        self.gaze_pub = node.create_publisher(PointStamped, FACE_GAZE_TOPIC, RELIABLE_QOS)
        self.records_pub = node.create_publisher(String, FACE_RECORDS_TOPIC, RELIABLE_QOS)

    def _stamp(self, msg):
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.frame_id
        return msg

    def expression(self, cue: FaceCue) -> None:
        if self.expression_pub is not None:
            a = cue.affect
            self.expression_pub.publish(self._stamp(pm.Expression(
                expression=a.expression, valence=float(a.valence), arousal=float(a.arousal),
                confidence=float(a.confidence))))

    def gesture(self, gesture) -> None:
        body = {"name": gesture} if isinstance(gesture, str) else gesture
        self.gesture_pub.publish(String(data=json.dumps(body)))

    def gaze(self, move: GazeMove) -> None:
        msg = self._stamp(PointStamped())
        msg.point.x, msg.point.y, msg.point.z = gaze_point(move)
        self.gaze_pub.publish(msg)

    def record(self, record: dict) -> None:
        self.records_pub.publish(String(data=json.dumps(record, ensure_ascii=False)))
