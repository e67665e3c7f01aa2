"""A stand-in for a third-party image viewer (rclpy + sensor_msgs only, no vision_dialogue).

Subscribes to `camera/image_raw` and `camera/image_raw/compressed` with the sensor-data
profile (best effort, as rqt_image_view and many tools do) or reliable QoS, and counts the
frames for `--seconds` after the first one; prints one JSON line: each topic's header stamps.

    python frame_viewer.py --qos sensor_data --seconds 40
"""
from __future__ import annotations

import argparse
import json
import time

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image

QOS = {"sensor_data": qos_profile_sensor_data,
       "reliable": QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qos", choices=list(QOS), default="sensor_data")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--wait", type=float, default=60.0, help="longest wait for a first frame")
    a = ap.parse_args(argv)
    stamps: dict[str, list[float]] = {"raw": [], "compressed": []}

    def keep(kind):
        return lambda m: stamps[kind].append(m.header.stamp.sec + m.header.stamp.nanosec / 1e9)
    with rclpy.init():
        node = rclpy.create_node(f"frame_viewer_{a.qos}")
        node.create_subscription(Image, "camera/image_raw", keep("raw"), QOS[a.qos])
        node.create_subscription(CompressedImage, "camera/image_raw/compressed",
                                 keep("compressed"), QOS[a.qos])
        end = time.monotonic() + a.wait
        first = None
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
            if first is None and (stamps["raw"] or stamps["compressed"]):
                first = time.monotonic()
                end = first + a.seconds
        node.destroy_node()
    print(json.dumps(stamps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
