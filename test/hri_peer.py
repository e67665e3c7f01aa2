#!/usr/bin/env python3
"""A third-party-like perception process: rclpy, vision_msgs and hri_msgs only.

No vision_dialogue, started without the project's Fast DDS profile (as other stacks are).

    hri_peer.py detector --ids [--topic T] [--rate HZ] [--label-info]   # Isaac ROS / depthai
    hri_peer.py detector --names                                      # YOLO-like
    hri_peer.py voice --name NAME --say TEXT    # asr_vosk + a person manager + a body tracker
                                              # (says TEXT on SIGUSR2, leaves on SIGUSR1)
    hri_peer.py listen [--topic T]                                    # prints what it hears
    hri_peer.py talk                          # a recogniser: a voice starts talking, again
    hri_peer.py faces --photo F [--photo F2]  # hri_face_detect-like: faces and their crops

Prints one JSON line per event on stdout ("ready", "heard", ...); runs until SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time

import rclpy
from hri_msgs.msg import EngagementLevel, Expression, Gesture, IdsList, LiveSpeech, \
    NormalizedRegionOfInterest2D
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, String
from vision_msgs.msg import Detection2D, Detection2DArray, LabelInfo, ObjectHypothesisWithPose, \
    VisionClass

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
COCO_FIRST = ["person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck",
              "boat", "traffic light"] + [f"class{i}" for i in range(10, 41)] + ["cup"]


def say(**kw):
    print(json.dumps(kw), flush=True)


def detector(node, args):
    pub = node.create_publisher(Detection2DArray, args.topic, 10)
    names = ["zebra" if i == 24 else f"mine{i}" for i in range(30)] if args.zebra \
        else COCO_FIRST                 # --zebra: a robot's own numbering, class 24 a zebra
    main_id = "24" if args.zebra else "41"
    if args.ids:
        labels = node.create_publisher(LabelInfo, "label_info", LATCHED)
        info = LabelInfo(threshold=0.25)
        info.class_map = [VisionClass(class_id=i, class_name=n) for i, n in enumerate(names)]
        labels.publish(info)

    def tick():
        msg = Detection2DArray()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.header.frame_id = "camera"
        det = Detection2D()
        det.bbox.center.position.x, det.bbox.center.position.y = 320.0, 240.0
        det.bbox.size_x, det.bbox.size_y = 120.0, 100.0
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = main_id if args.ids else "cup"
        hyp.hypothesis.score = 0.83
        det.results.append(hyp)
        edge = Detection2D()          # something on the right edge, so the width is known
        edge.bbox.center.position.x, edge.bbox.size_x = 600.0, 80.0
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = "9" if args.ids else "traffic light"
        hyp.hypothesis.score = 0.2                    # under the manager's threshold
        edge.results.append(hyp)
        msg.detections = [det, edge]
        pub.publish(msg)
    node.create_timer(1.0 / args.rate, tick)
    say(event="ready")


def voice(node, args):
    tracked = node.create_publisher(IdsList, "/humans/voices/tracked", LATCHED)
    persons = node.create_publisher(IdsList, "/humans/persons/tracked", LATCHED)
    voice_id = node.create_publisher(String, "/humans/persons/p1/voice_id", LATCHED)
    face_id = node.create_publisher(String, "/humans/persons/p1/face_id", LATCHED)
    name = node.create_publisher(String, "/humans/persons/p1/name", LATCHED)
    roi = node.create_publisher(NormalizedRegionOfInterest2D, "/humans/faces/f3/roi", 10)
    engagement = node.create_publisher(EngagementLevel, "/humans/persons/p1/engagement_status",
                                       10)
    bodies = node.create_publisher(IdsList, "/humans/bodies/tracked", 10)
    gesture = node.create_publisher(Gesture, "/humans/bodies/b2/gesture", 10)
    speech = node.create_publisher(LiveSpeech, "/humans/voices/v7/speech", 10)
    tracked.publish(IdsList(ids=["v7"]))
    voice_id.publish(String(data="v7"))
    face_id.publish(String(data="f3"))
    name.publish(String(data=args.name))
    persons.publish(IdsList(ids=["p1"]))
    state = {"sent": False, "engaged": False, "leave": False, "told": False}
    # SIGUSR1: the person walks away (the tracked persons are empty from then on)
    signal.signal(signal.SIGUSR1, lambda *_: state.__setitem__("leave", True))
    # SIGUSR2: the test saw the listener know this voice's person and face: speak
    signal.signal(signal.SIGUSR2, lambda *_: state.__setitem__("told", True))

    def tick():
        # as a person manager does: the tracked lists and the face's place, again and again
        if state["leave"]:
            persons.publish(IdsList(ids=[]))
            if not state.setdefault("left", False):
                state["left"] = True
                say(event="left")
            return
        persons.publish(IdsList(ids=["p1"]))
        bodies.publish(IdsList(ids=["b2"]))
        roi.publish(NormalizedRegionOfInterest2D(xmin=0.1, xmax=0.3, ymin=0.2, ymax=0.5, c=0.9))
        if not state["engaged"] and engagement.get_subscription_count() >= 1 \
                and gesture.get_subscription_count() >= 1:
            time.sleep(0.5)
            engagement.publish(EngagementLevel(level=EngagementLevel.ENGAGING))
            gesture.publish(Gesture(gesture=Gesture.WAVING))
            state["engaged"] = True
            say(event="engaging")
        # once the manager listens to this voice, the person's name and the face's place,
        # speak (the face's place is what "to your left" comes from: a line said before the
        # manager had subscribed to the face's roi put Zebulon "in front of you")
        counts = {"speech": speech.get_subscription_count(),
                  "name": name.get_subscription_count(), "roi": roi.get_subscription_count()}
        if state["told"] and not state["sent"] and time.monotonic() >= state.get("next_hold", 0):
            state["next_hold"] = time.monotonic() + 2.0     # told, not said yet: why (a CI run
            say(event="holding", engaged=state["engaged"], **counts)   # never said; unknown)
        if state["sent"] or not state["engaged"] or min(counts.values()) < 1 \
                or not state["told"]:
            return
        if state.setdefault("roi_after_match", 0) < 3:     # the place sent since it matched
            state["roi_after_match"] += 1
            return
        for part in args.say.split()[:2]:
            speech.publish(LiveSpeech(incremental=part, confidence=0.5, locale="en-US"))
        speech.publish(LiveSpeech(final=args.say, confidence=0.9, locale="en-US"))
        state["sent"] = True
        say(event="said", text=args.say)
    node.create_timer(0.2, tick)
    say(event="ready")


def talk(node, args):
    """A recogniser hearing voice u1 start to talk, again and again, once someone listens.

    is_speaking true and an incremental result, every 0.2 s.
    """
    tracked = node.create_publisher(IdsList, "/humans/voices/tracked", LATCHED)
    speaking = node.create_publisher(Bool, "/humans/voices/u1/is_speaking", 10)
    speech = node.create_publisher(LiveSpeech, "/humans/voices/u1/speech", 10)
    tracked.publish(IdsList(ids=["u1"]))

    def tick():
        tracked.publish(IdsList(ids=["u1"]))
        if speaking.get_subscription_count() >= 1:
            speaking.publish(Bool(data=True))
            speech.publish(LiveSpeech(incremental="wait", confidence=0.3))
    node.create_timer(0.2, tick)
    say(event="ready")


def listen(node, args):
    node.create_subscription(Bool, "/robot_speaking",
                             lambda m: say(event="robot_speaking", value=m.data), 10)
    node.create_subscription(IdsList, "/humans/voices/tracked",
                             lambda m: say(event="voices", ids=list(m.ids)), 10)
    node.create_subscription(IdsList, "/humans/faces/tracked",
                             lambda m: say(event="faces", ids=list(m.ids)), 10)
    # a robot face: a plain reliable subscriber of the robot's expressions
    node.create_subscription(Expression, "/robot_face/expression",
                             lambda m: say(event="expression", expression=m.expression,
                                           valence=m.valence), 10)
    node.create_subscription(
        Detection2DArray, args.topic, lambda m: say(event="detections", classes=[
            d.results[0].hypothesis.class_id for d in m.detections if d.results]), 10)
    subs = {}

    def follow():
        for topic, _types in node.get_topic_names_and_types():
            if topic.startswith("/humans/voices/") and topic.endswith("/speech") \
                    and topic not in subs:
                # "matched": its writer is known to this reader (what is sent before is lost)
                matched = SubscriptionEventCallbacks(matched=lambda info, t=topic: say(
                    event="matched", topic=t, count=info.current_count))
                subs[topic] = node.create_subscription(
                    LiveSpeech, topic, lambda m, t=topic: say(event="speech", topic=t,
                                                              final=m.final), 10,
                    event_callbacks=matched)
                say(event="following", topic=topic)
    node.create_timer(0.2, follow)
    say(event="ready")


def faces(node, args):
    """Each photo a tracked face (ids face_a, face_b, ...) with its `cropped` image (bgr8)."""
    import cv2
    from sensor_msgs.msg import Image
    tracked = node.create_publisher(IdsList, "/humans/faces/tracked", 10)
    crops = {}
    for i, path in enumerate(args.photo):
        bgr = cv2.imread(path)
        bgr = cv2.resize(bgr, (round(bgr.shape[1] * 240 / bgr.shape[0]), 240))
        fid = f"face_{chr(ord('a') + i)}"
        crops[fid] = (node.create_publisher(Image, f"/humans/faces/{fid}/cropped", 10), bgr)

    def tick():
        stamp = node.get_clock().now().to_msg()
        ids = IdsList(ids=list(crops))
        ids.header.stamp = stamp
        tracked.publish(ids)
        for pub, bgr in crops.values():
            if pub.get_subscription_count():
                msg = Image(height=bgr.shape[0], width=bgr.shape[1], encoding="bgr8",
                            step=bgr.shape[1] * 3, data=bgr.tobytes())
                msg.header.stamp, msg.header.frame_id = stamp, "camera"
                pub.publish(msg)
    node.create_timer(1.0 / args.rate, tick)
    say(event="ready")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("detector", "voice", "listen", "talk", "faces"))
    ap.add_argument("--ids", action="store_true")
    ap.add_argument("--names", action="store_true")
    ap.add_argument("--zebra", action="store_true", help="ids numbered as a robot's own")
    ap.add_argument("--node", default="", help="node name (default third_party_<mode>)")
    ap.add_argument("--topic", default="detections")
    ap.add_argument("--rate", type=float, default=5.0)
    ap.add_argument("--name", default="Zebulon")
    ap.add_argument("--say", default="Is there a cup on the table?")
    ap.add_argument("--photo", action="append", default=[], help="faces: a face's photo")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: rclpy.try_shutdown())
    with rclpy.init():
        node = rclpy.create_node(args.node or f"third_party_{args.mode}")
        {"detector": detector, "voice": voice, "listen": listen,
         "talk": talk, "faces": faces}[args.mode](node, args)
        try:
            rclpy.spin(node)
        except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
