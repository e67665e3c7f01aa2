"""A stand-in for a third-party camera driver (rclpy + sensor_msgs only, no vision_dialogue).

Publishes raw frames with a driver's QoS, as usb_cam / v4l2_camera (RELIABLE, depth 10) or a
sensor-data publisher (best effort, depth 5) do.

    python frame_driver.py --qos reliable --rate 30 --size 1280x720 --encoding rgb8 --count 60

It waits for a subscriber, lets the subscriber settle (`--settle` s: a subscriber that
follows the publisher's QoS re-subscribes then), publishes `--count` frames at `--rate`, and
prints one JSON line {"sent": N}.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image

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
    a = ap.parse_args(argv)
    w, h = (int(v) for v in a.size.split("x"))
    with rclpy.init():
        node = rclpy.create_node("frame_driver")
        pub = node.create_publisher(Image, a.topic, QOS[a.qos])
        deadline = time.monotonic() + a.wait
        while pub.get_subscription_count() == 0:
            if time.monotonic() > deadline:
                print(json.dumps({"sent": 0, "error": "no subscriber"}))
                return 1
            time.sleep(0.05)
        time.sleep(a.settle)
        rng = np.random.default_rng(0)
        pixels = rng.integers(0, 255, (h, w, 3), np.uint8).tobytes()
        period, t = 1.0 / a.rate, time.monotonic()
        for i in range(a.count):
            msg = Image(height=h, width=w, encoding=a.encoding, step=w * 3, data=pixels)
            msg.header.frame_id = "driver_camera"
            msg.header.stamp = node.get_clock().now().to_msg()
            pub.publish(msg)
            t += period
            time.sleep(max(0.0, t - time.monotonic()))
        time.sleep(1.0)      # let the last frames drain before the participant goes
        print(json.dumps({"sent": a.count}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
