"""A stand-in for a third-party camera driver (rclpy + sensor_msgs only, no vision_dialogue).

Publishes raw frames with a driver's QoS, as usb_cam / v4l2_camera (RELIABLE, depth 10) or a
sensor-data publisher (best effort, depth 5) do.

    python frame_driver.py --qos reliable --rate 30 --size 1280x720 --encoding rgb8 --count 60

`--compressed` also publishes `<topic>/compressed` (JPEG, as image_transport does); `--name`
names the node (a driver's, such as usb_cam); `--big WxH --big-at I,J`: frames I and J are
that size (high-resolution stills among the stream's frames).

It waits for a subscriber, lets the subscriber settle (`--settle` s: a subscriber that
follows the publisher's QoS re-subscribes then), publishes `--count` frames at `--rate`
(saying {"publishing": N} as the first goes out), and prints one JSON line {"sent": N}.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image

QOS = {"sensor_data": qos_profile_sensor_data,
       "reliable": QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", default="camera/image_raw")
    ap.add_argument("--qos", choices=list(QOS), default="sensor_data")
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--encoding", choices=("bgr8", "rgb8"), default="bgr8")
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--settle", type=float, default=1.5)
    ap.add_argument("--wait", type=float, default=20.0)
    ap.add_argument("--compressed", action="store_true")
    ap.add_argument("--name", default="frame_driver")
    ap.add_argument("--big", default="")
    ap.add_argument("--big-at", default="")
    a = ap.parse_args(argv)
    w, h = (int(v) for v in a.size.split("x"))
    with rclpy.init():
        node = rclpy.create_node(a.name)
        pub = node.create_publisher(Image, a.topic, QOS[a.qos])
        comp = node.create_publisher(CompressedImage, a.topic + "/compressed",
                                     QOS[a.qos]) if a.compressed else None
        deadline = time.monotonic() + a.wait
        while pub.get_subscription_count() == 0:
            if time.monotonic() > deadline:
                print(json.dumps({"sent": 0, "error": "no subscriber"}))
                return 1
            time.sleep(0.05)
        time.sleep(a.settle)
        yy, xx = np.indices((h, w))          # a smooth scene: its JPEG is small, as a camera's
        img = np.dstack([xx * 255 // w, yy * 255 // h, (xx + yy) * 255 // (w + h)]).astype(
            np.uint8)
        pixels = img.tobytes()
        if comp is not None:
            import cv2
            jpeg = cv2.imencode(".jpg", img)[1].tobytes()
        print(json.dumps({"publishing": a.count}), flush=True)   # the first frame goes now
        period, t = 1.0 / a.rate, time.monotonic()
        for i in range(a.count):
            msg = Image(height=h, width=w, encoding=a.encoding, step=w * 3, data=pixels)
            if str(i) in a.big_at.split(","):
                bw, bh = (int(v) for v in a.big.split("x"))
                msg = Image(height=bh, width=bw, encoding=a.encoding, step=bw * 3,
                            data=bytes(bw * bh * 3))
            msg.header.frame_id = "driver_camera"
            msg.header.stamp = node.get_clock().now().to_msg()
            pub.publish(msg)
            if comp is not None:
                comp.publish(CompressedImage(header=msg.header, format="jpeg", data=jpeg))
            t += period
            time.sleep(max(0.0, t - time.monotonic()))
        time.sleep(1.0)      # let the last frames drain before the participant goes
        print(json.dumps({"sent": a.count}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
