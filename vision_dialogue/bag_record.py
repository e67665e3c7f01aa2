"""bag_record: write a dialogue session's topics to a rosbag2 (mcap or sqlite3) with `rosbags`.

Subscribes with rclpy `raw=True` (the callback gets the CDR bytes, byte-identical to what
rosbags writes), stamps each message with its receive time, as `ros2 bag record` does, and
writes a version-9 bag whose type hashes and definitions `ros2 bag` accepts.

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

from vision_dialogue.bags import (SESSION_TOPICS, STORAGE_IDS, BagError, bag_qos, make_typestore,
                                  parse_topic_spec, rclpy_qos, rclpy_type, storage_plugin)
from vision_dialogue.node_runner import run_node
from vision_dialogue.ros_params import Param, ParameterError, declare_params


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
    Param("topics", list(SESSION_TOPICS), "Topics to record: a session topic name, or "
          "'topic:pkg/msg/Type' for any other topic. Relative names resolve in the node's "
          "namespace.", check=_check_topics),
]


class BagRecorder(Node):
    """Records `topics` into a rosbag2 until closed."""

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop("node_name", "bag_record"), **kwargs)
        self.params = declare_params(self, PARAMS)
        out = self.params["output"] or time.strftime("rosbag2_%Y_%m_%d-%H_%M_%S")
        self.path = Path(out)
        if self.path.exists():
            raise ParameterError(f"output={out!r} already exists; choose a new bag directory")
        specs = [parse_topic_spec(s) for s in self.params["topics"]]
        self.counts: dict[str, int] = {}
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        group = MutuallyExclusiveCallbackGroup()
        self._subs = []
        table = []
        for i, (topic, msgtype) in enumerate(specs):
            sub = self.create_subscription(rclpy_type(msgtype), topic, self._make_callback(i),
                                           rclpy_qos(topic), raw=True, callback_group=group)
            # fully resolved name, e.g. /robot1/camera/image_raw
            table.append((sub.topic_name, msgtype, bag_qos(topic)))
            self.counts[sub.topic_name] = 0
            self._subs.append(sub)
        self._names = [name for name, _, _ in table]
        # One thread owns the rosbags Writer (sqlite3 objects must stay in their thread);
        # callbacks only enqueue, so a slow disk never blocks the executor and nothing is lost.
        self._ready = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._write_loop, args=(table,),
                                        name="bag_record_writer", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise ParameterError(f"output={out!r}: cannot create bag ({self._error})")
        self.get_logger().info(f"recording {len(self._subs)} topics to {self.path} "
                               f"({self.params['storage']})")

    def _make_callback(self, index: int):
        def cb(data: bytes):
            self._queue.put((index, self.get_clock().now().nanoseconds, data))
        return cb

    def _write_loop(self, table) -> None:
        from rosbags.rosbag2 import Writer
        try:
            store = make_typestore()
            writer = Writer(self.path, version=9,
                            storage_plugin=storage_plugin(self.params["storage"]))
            writer.open()
            conns = [writer.add_connection(name, msgtype, typestore=store,
                                           offered_qos_profiles=[qos])
                     for name, msgtype, qos in table]
        except Exception as e:  # noqa: BLE001 - reported to __init__ as a parameter error
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    break
                index, t, data = item
                try:
                    writer.write(conns[index], t, data)
                    self.counts[self._names[index]] += 1
                except Exception as e:  # noqa: BLE001 - log and keep recording
                    self.get_logger().error(f"write to {self._names[index]} failed: {e}")
        finally:
            writer.close()

    def close(self) -> None:
        """Write what is queued, finish the bag (metadata.yaml); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for sub in self._subs:
            try:
                self.destroy_subscription(sub)
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
    return run_node(lambda: BagRecorder(parameter_overrides=overrides), "bag_record", args)


if __name__ == "__main__":
    sys.exit(main())
