"""bag_record: write a dialogue session's topics to a rosbag2 (mcap or sqlite3) with `rosbags`.

Subscribes with rclpy `raw=True` (the callback gets the CDR bytes, byte-identical to what
rosbags writes) with the QoS each topic's publishers offer, stamps each message with its
receive time, as `ros2 bag record` does, and writes a version-9 bag whose type hashes,
definitions and offered QoS profiles `ros2 bag` accepts.

    bag_record -o runs/session1 [-s mcap|sqlite3] [topic | topic:pkg/msg/Type ...]
    bag_record --ros-args -p output:=runs/session1 -p storage:=sqlite3
"""
from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from pathlib import Path

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy

from vision_dialogue.cli.bags import (STORAGE_IDS, BagError, default_topics, make_typestore,
                                      offered_qos, parse_topic_spec, rclpy_type, storage_plugin)
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.qos import FollowingSubscription
from vision_dialogue.ros.params import Param, ParameterError, declare_params
from vision_dialogue.ros.teardown import DestroyedWhole


def _check_topics(specs) -> str | None:
    for s in specs:
        try:
            rclpy_type(parse_topic_spec(s)[1])
        except BagError as e:
            return str(e)
    return None


PARAMS = [
    Param("output", "", "Bag directory to create (must not exist). Empty: "
          "rosbag2_YYYY_MM_DD-HH_MM_SS in the working directory."),
    Param("storage", "mcap", "Storage plugin.", choices=STORAGE_IDS),
    Param("topics", default_topics(), "Topics to record: a session topic name, or "
          "'topic:pkg/msg/Type' for any other topic. Relative names resolve in the node's "
          "namespace.", check=_check_topics),
    Param("blur_faces", False, "Pixelate faces in every sensor_msgs/Image and CompressedImage "
          "before it is written (a frame that cannot be blurred is not written)."),
]

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")


def blur_image_cdr(data: bytes, msgtype: str, blur) -> bytes:
    """The CDR bytes of an image message with `blur` applied (raw frames come out as bgr8)."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import CompressedImage, Image
    from vision_dialogue.ros.image_msgs import (from_compressed_msg, from_image_msg,
                                                to_compressed_msg, to_image_msg)
    if msgtype.endswith("CompressedImage"):
        msg = deserialize_message(data, CompressedImage)
        out = to_compressed_msg(blur(from_compressed_msg(msg)), stamp=msg.header.stamp,
                                frame_id=msg.header.frame_id)
    else:
        msg = deserialize_message(data, Image)
        out = to_image_msg(blur(from_image_msg(msg)), stamp=msg.header.stamp,
                           frame_id=msg.header.frame_id)
    return serialize_message(out)


class BagRecorder(DestroyedWhole, Node):
    """Records `topics` into a rosbag2 until closed.

    Like `ros2 bag record`: each topic is subscribed once it has a publisher, with the QoS
    its publishers offer (reliable/transient local only if all are; a latched speech_state is
    recorded), and re-subscribed if the offers change; the offers go into metadata.yaml.
    Messages are stamped with their receive time (the DDS reception time, or the node clock
    under use_sim_time), not the time the callback ran.
    """

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop("node_name", "bag_record"), **kwargs)
        self.params = declare_params(self, PARAMS)
        out = self.params["output"] or time.strftime("rosbag2_%Y_%m_%d-%H_%M_%S")
        self.path = Path(out)
        if self.path.exists():
            raise ParameterError(f"output={out!r} already exists; choose a new bag directory")
        self.specs = [parse_topic_spec(s) for s in self.params["topics"]]
        self._names = [self.resolve_topic_name(topic) for topic, _ in self.specs]
        self.counts: dict[str, int] = {name: 0 for name in self._names}
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._received = 0
        # One thread owns the rosbags Writer (sqlite3 objects must stay in their thread);
        # callbacks only enqueue, so a slow disk never blocks the executor and nothing is lost.
        self._ready = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._write_loop, name="bag_record_writer",
                                        daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise ParameterError(f"output={out!r}: cannot create bag ({self._error})")
        # Subscribe only now that the writer is open: nothing waits in a queue meanwhile.
        group = MutuallyExclusiveCallbackGroup()
        base = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._subs = []
        for i, (topic, msgtype) in enumerate(self.specs):
            sub = FollowingSubscription(
                self, rclpy_type(msgtype), topic, self._make_callback(i), base,
                wait_for_publisher=True, raw=True, overridable=False, callback_group=group,
                on_change=lambda sub, i=i: self._on_subscribed(i, sub))
            self._subs.append(sub)
        self.get_logger().info(f"recording {len(self._subs)} topics to {self.path} "
                               f"({self.params['storage']}); each is subscribed when it has "
                               "a publisher")

    def _on_subscribed(self, index: int, sub: FollowingSubscription) -> None:
        offers = [offered_qos(q) for q in sub.offered()]
        self._queue.put(("connection", index, offers))
        self.get_logger().info(sub.status)

    def _make_callback(self, index: int):
        def cb(data: bytes, info):
            clock = self.get_clock()
            t = clock.now().nanoseconds if clock.ros_time_is_active \
                else int(info["received_timestamp"])
            self._queue.put(("message", index, (t, data)))
            self._received += 1
        return cb

    def drain(self, executor, quiet: float = 0.3, limit: float = 3.0) -> None:
        """After Ctrl-C: take what DDS already holds for us, until `quiet` s pass with nothing."""
        end = time.monotonic() + limit
        seen, since = self._received, time.monotonic()
        while time.monotonic() < end and time.monotonic() - since < quiet:
            executor.spin_once(timeout_sec=0.05)
            if self._received != seen:
                seen, since = self._received, time.monotonic()

    def _write_loop(self) -> None:
        from rosbags.rosbag2 import Writer
        try:
            store = make_typestore()
            writer = Writer(self.path, version=9,
                            storage_plugin=storage_plugin(self.params["storage"]))
            writer.open()
        except Exception as e:  # noqa: BLE001 - reported to __init__ as a parameter error
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        conns: dict[int, object] = {}
        blur = None
        if self.params["blur_faces"]:
            from vision_dialogue.perception.privacy import FaceBlurrer
            blur = FaceBlurrer()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    break
                kind, index, payload = item
                name = self._names[index]
                try:
                    if kind == "connection":
                        if index not in conns:   # a re-subscription keeps its connection
                            conns[index] = writer.add_connection(
                                name, self.specs[index][1], typestore=store,
                                offered_qos_profiles=payload)
                        continue
                    t, data = payload
                    if blur is not None and self.specs[index][1] in IMAGE_TYPES:
                        data = blur_image_cdr(data, self.specs[index][1], blur)
                    writer.write(conns[index], t, data)
                    self.counts[name] += 1
                except Exception as e:  # noqa: BLE001 - log and keep recording
                    self.get_logger().error(f"write to {name} failed: {e}")
        finally:
            writer.close()

    def close(self) -> None:
        """Write what is queued, finish the bag (metadata.yaml); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for sub in self._subs:
            try:
                sub.destroy()
            except Exception:  # noqa: BLE001 - context already shut down: nothing more arrives
                pass
        self._queue.put(None)
        self._thread.join()
        self.get_logger().info(f"bag closed: {self.path} "
                               f"({sum(self.counts.values())} messages)")


def parse_cli(argv: list[str]) -> list[Parameter]:
    """`ros2 bag record`-like arguments -> parameter overrides."""
    ap = argparse.ArgumentParser(prog="bag_record", description=__doc__.split("\n")[0])
    ap.add_argument("topics", nargs="*", help="topics (default: all session topics)")
    ap.add_argument("-o", "--output", help="bag directory to create")
    ap.add_argument("-s", "--storage", choices=STORAGE_IDS, help="storage plugin (default mcap)")
    ns = ap.parse_args(argv)
    over = []
    if ns.topics:
        over.append(Parameter("topics", Parameter.Type.STRING_ARRAY, ns.topics))
    if ns.output:
        over.append(Parameter("output", Parameter.Type.STRING, ns.output))
    if ns.storage:
        over.append(Parameter("storage", Parameter.Type.STRING, ns.storage))
    return over


def main(args=None) -> int:
    args = list(sys.argv if args is None else args)
    from rclpy.utilities import remove_ros_args
    overrides = parse_cli(remove_ros_args(args)[1:])
    return run_node(lambda: BagRecorder(parameter_overrides=overrides), "bag_record", args,
                    drain=True)


if __name__ == "__main__":
    sys.exit(main())
