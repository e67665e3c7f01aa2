"""bag_play: publish a rosbag2 back with its original timing (optionally faster) and /clock.

Reads with `rosbags`, publishes the stored CDR bytes unchanged (rclpy `publish(bytes)`), on
the bag's topic names, with the QoS recorded in the bag (`offered_qos_profiles`, as
`ros2 bag play` does; our nodes' defaults for a bag that has none). While playing it publishes
`/clock` (rosgraph_msgs/Clock) with the bag time, so nodes started with
`use_sim_time:=true` follow the recording.

With `sync_replies` (`--sync-replies`) a session replays in its recorded order however long the
live manager's replies take: what was recorded after the manager's k-th final reply
(`dialogue/reply`, final) waits until the live manager has given k final replies, and the rest
keeps its recorded gaps from there. The recorded replies are not played.

    bag_play BAG [--rate 2] [--loop] [--topics t1 t2] [--no-clock] [--delay 1.0]
             [--wait-for-subscribers 10] [--sync-replies]
    bag_play --ros-args -p bag:=BAG -p rate:=2.0
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import rclpy
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message
from rclpy.task import Future
from builtin_interfaces.msg import Time
from rosgraph_msgs.msg import Clock

from vision_dialogue.cli.bags import CLOCK_TOPIC, BagError, rclpy_type, replay_qos
from vision_dialogue.ros.dds import apply_default_profile
from vision_dialogue.ros.params import Param, ParameterError, declare_params
from vision_dialogue.ros.teardown import DestroyedWhole
from vision_dialogue.ros.topics import REPLY_TOPIC
from vision_dialogue_interfaces.msg import Reply

#: sync_replies: how long a recorded reply waits for the live one before play goes on
REPLY_WAIT_S = 60.0


@dataclass(frozen=True)
class Sent:
    """A message the player published: when it was due, and when it went out.

    Monotonic seconds; `due` follows the bag's times at the rate, `at` is never before it.
    """

    topic: str
    due: float
    at: float


def _bag_exists(path: str) -> str | None:
    if not path:
        return "no bag given"
    if not (Path(path) / "metadata.yaml").is_file():
        return "not a rosbag2 directory (no metadata.yaml)"
    return None


PARAMS = [
    Param("bag", "", "rosbag2 directory to play.", check=_bag_exists),
    Param("rate", 1.0, "Playback speed factor (2.0 = twice as fast).", range=(0.01, 1000.0)),
    Param("loop", False, "Start again from the beginning when the bag ends."),
    Param("clock", True, "Publish /clock with the bag time (for use_sim_time)."),
    Param("clock_frequency", 50.0, "How often /clock is published between messages, Hz.",
          range=(1.0, 1000.0)),
    Param("start_delay", 0.5, "Seconds to wait after creating publishers before the first "
          "message, so subscribers can match.", range=(0.0, 60.0)),
    Param("topics", [], "Topics to play (absolute names as stored in the bag); empty: all.",
          array_of="string"),
    Param("wait_for_subscribers", 0.0, "After start_delay, wait up to this many seconds until "
          "every played topic has a subscriber (0 = don't wait).", range=(0.0, 3600.0)),
    Param("sync_replies", False, "Play what was recorded after the manager's k-th final reply "
          "only once the live manager has given k final replies (dialogue/reply; the "
          "recorded replies are not played): the session keeps its order however long the "
          "replies take."),
]


class ReplySync:
    """sync_replies: the recorded final replies are the points the live ones must reach.

    `topics`: the bag's reply topics (…/dialogue/reply); the live ones of the same names are
    counted. `wait` holds play until as many live final replies came as were recorded so far.
    """

    def __init__(self, node: Node, topics: set[str]):
        self.topics, self.log = topics, node.get_logger()
        self.recorded = self._live = self._base = 0
        self._cv = threading.Condition()
        for topic in sorted(topics):
            node.create_subscription(Reply, topic, self._on_reply, QoSProfile(depth=100))

    def _on_reply(self, msg) -> None:
        if msg.final:
            with self._cv:
                self._live += 1
                self._cv.notify_all()

    def start_pass(self) -> None:
        """A pass over the bag begins (a loop starts again): count from here."""
        with self._cv:
            self.recorded, self._base = 0, self._live

    def recorded_reply(self, data: bytes) -> None:
        if deserialize_message(bytes(data), Reply).final:
            self.recorded += 1

    def wait(self, stop: threading.Event) -> float:
        """Until the live replies caught up with the recorded ones; the seconds it held."""
        t0 = time.monotonic()
        with self._cv:
            caught_up = self._cv.wait_for(
                lambda: self._live - self._base >= self.recorded or stop.is_set(),
                timeout=REPLY_WAIT_S)
        if not caught_up:
            self.log.warning(f"sync_replies: final reply {self.recorded} did not come within "
                             f"{REPLY_WAIT_S:g} s; playing on")
            with self._cv:                  # the late ones count as come: no wait for each
                self._base = self._live - self.recorded
        return time.monotonic() - t0


class BagPlayer(DestroyedWhole, Node):
    """Plays one bag in a background thread; `finished` completes when playback ends."""

    def __init__(self, autostart: bool = True, **kwargs):
        super().__init__(kwargs.pop("node_name", "bag_play"), **kwargs)
        self.params = declare_params(self, PARAMS)
        from rosbags.rosbag2 import Reader
        try:
            self._reader = Reader(Path(self.params["bag"]))
            self._reader.open()
        except Exception as e:  # noqa: BLE001 - any reader error is a bad `bag` parameter
            raise ParameterError(f"bag={self.params['bag']!r}: cannot open ({e})") from None
        want = set(self.params["topics"])
        replies = {c.topic for c in self._reader.connections
                   if c.topic.rstrip("/").endswith("/" + REPLY_TOPIC)
                   and c.msgtype.endswith("/msg/Reply")}
        follow = replies if self.params["sync_replies"] else set()   # followed, not played
        self._conns = [c for c in self._reader.connections
                       if (not want or c.topic in want) and c.topic not in follow]
        missing = want - {c.topic for c in self._reader.connections}
        self._reader.close()  # reopened by the playback thread
        if missing:
            raise ParameterError(f"topics: not in the bag: {sorted(missing)}")
        self._pubs = {}
        for c in self._conns:
            if c.topic not in self._pubs:
                try:
                    cls = rclpy_type(c.msgtype)
                except BagError as e:
                    self.get_logger().warning(f"skipping {c.topic}: {e}")
                    continue
                offers = list(getattr(c.ext, "offered_qos_profiles", None) or [])
                self._pubs[c.topic] = self.create_publisher(cls, c.topic,
                                                            replay_qos(offers, c.topic))
        self._sync = None
        if self.params["sync_replies"]:
            if not replies:
                raise ParameterError(f"sync_replies: the bag has no {REPLY_TOPIC} to follow")
            self._sync = ReplySync(self, replies)
        self._clock_pub = None
        if self.params["clock"]:
            self._clock_pub = self.create_publisher(Clock, CLOCK_TOPIC, QoSProfile(depth=10))
        self.published = 0
        self.sent: list[Sent] = []          # every message published, in order
        self._stop = threading.Event()
        self.finished = Future()
        self._thread = threading.Thread(target=self._run, name="bag_play", daemon=True)
        if autostart:
            self._thread.start()

    def start(self) -> None:
        if not self._thread.is_alive() and not self.finished.done():
            self._thread.start()

    # ------------------------------------------------------------------ playback
    def _publish_clock(self, ns: int) -> None:
        if self._clock_pub is None:
            return
        self._clock_pub.publish(Clock(clock=Time(sec=ns // 1_000_000_000,
                                                 nanosec=ns % 1_000_000_000)))

    def _wait_until(self, wall_target: float, bag_t0: int, wall_t0: float) -> bool:
        """Sleep until monotonic `wall_target`, publishing /clock on the way; False if stopped."""
        period = 1.0 / self.params["clock_frequency"]
        rate = self.params["rate"]
        while True:
            now = time.monotonic()
            if now >= wall_target:
                return not self._stop.is_set()
            self._publish_clock(bag_t0 + int((now - wall_t0) * rate * 1e9))
            if self._stop.wait(min(period, wall_target - now)):
                return False

    def _run(self) -> None:
        try:
            if self._stop.wait(self.params["start_delay"]):
                return
            if not self._wait_for_subscribers(self.params["wait_for_subscribers"]):
                return
            while not self._stop.is_set():
                self._play_once()
                if not self.params["loop"]:
                    break
        except Exception as e:  # noqa: BLE001 - log, never kill the process silently
            self.get_logger().error(f"playback failed: {e}")
        finally:
            if not self.finished.done():
                self.finished.set_result(self.published)

    def _wait_for_subscribers(self, timeout: float) -> bool:
        """Wait (up to `timeout` s) until every publisher is matched; False if stopped."""
        deadline = time.monotonic() + timeout
        while timeout > 0:
            waiting = [t for t, p in self._pubs.items() if p.get_subscription_count() == 0]
            if not waiting:
                break
            if time.monotonic() >= deadline:
                self.get_logger().warning(f"no subscriber after {timeout:g} s on {waiting}; "
                                          "playing anyway")
                break
            if self._stop.wait(0.05):
                return False
        return not self._stop.is_set()

    def _play_once(self) -> None:
        rate = self.params["rate"]
        from rosbags.rosbag2 import Reader
        with Reader(Path(self.params["bag"])) as reader:  # opened in this thread (sqlite3)
            follow = self._sync.topics if self._sync is not None else set()
            conns = [c for c in reader.connections if c.topic in self._pubs or c.topic in follow]
            if self._sync is not None:
                self._sync.start_pass()
            self._play_messages(reader.messages(connections=conns), rate)

    def _play_messages(self, messages, rate: float) -> None:
        wall_t0 = bag_t0 = None
        for conn, t, data in messages:
            if self._sync is not None and conn.topic in self._sync.topics:
                self._sync.recorded_reply(data)         # a point to reach, not played
                continue
            pub = self._pubs.get(conn.topic)
            if pub is None:
                continue
            if bag_t0 is None:
                bag_t0, wall_t0 = t, time.monotonic()
            due = wall_t0 + (t - bag_t0) / 1e9 / rate
            if not self._wait_until(due, bag_t0, wall_t0):
                return
            if self._sync is not None:
                held = self._sync.wait(self._stop)      # the rest keeps its gaps after it
                wall_t0, due = wall_t0 + held, due + held
                if self._stop.is_set():
                    return
            self._publish_clock(t)
            try:
                pub.publish(bytes(data))
            except Exception as e:  # noqa: BLE001 - context shut down under us
                if self._stop.is_set() or not self.context.ok():
                    return
                self.get_logger().error(f"publish on {conn.topic} failed: {e}")
                continue
            self.published += 1
            self.sent.append(Sent(conn.topic, due, time.monotonic()))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until each matched reliable subscriber has confirmed what was played.

        False if one has not within `timeout`. A sample lost on the way is resent only while
        this process lives. A subscriber whose side matched after a sample was sent does not
        get it (volatile), and this wait cannot bring it back.
        """
        left = Duration(seconds=timeout)
        return all(pub.wait_for_all_acked(left) for pub in self._pubs.values())

    def close(self) -> None:
        """Stop playback and close the bag."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        if not self.finished.done():
            self.finished.set_result(self.published)


def parse_cli(argv: list[str]) -> list[Parameter]:
    ap = argparse.ArgumentParser(prog="bag_play", description=__doc__.split("\n")[0])
    ap.add_argument("bag", nargs="?", help="rosbag2 directory")
    ap.add_argument("-r", "--rate", type=float, help="playback speed factor")
    ap.add_argument("-l", "--loop", action="store_true", help="loop forever")
    ap.add_argument("--topics", nargs="+", help="only these topics")
    ap.add_argument("--no-clock", action="store_true", help="do not publish /clock")
    ap.add_argument("-d", "--delay", type=float, help="seconds to wait before playing")
    ap.add_argument("--sync-replies", action="store_true",
                    help="what came after the k-th reply waits for the live k-th reply")
    ap.add_argument("--wait-for-subscribers", type=float, metavar="SECONDS",
                    help="wait up to SECONDS until every played topic has a subscriber")
    ns = ap.parse_args(argv)
    over = []
    if ns.bag:
        over.append(Parameter("bag", Parameter.Type.STRING, ns.bag))
    if ns.rate is not None:
        over.append(Parameter("rate", Parameter.Type.DOUBLE, ns.rate))
    if ns.loop:
        over.append(Parameter("loop", Parameter.Type.BOOL, True))
    if ns.topics:
        over.append(Parameter("topics", Parameter.Type.STRING_ARRAY, ns.topics))
    if ns.no_clock:
        over.append(Parameter("clock", Parameter.Type.BOOL, False))
    if ns.delay is not None:
        over.append(Parameter("start_delay", Parameter.Type.DOUBLE, ns.delay))
    if ns.wait_for_subscribers is not None:
        over.append(Parameter("wait_for_subscribers", Parameter.Type.DOUBLE,
                              ns.wait_for_subscribers))
    if ns.sync_replies:
        over.append(Parameter("sync_replies", Parameter.Type.BOOL, True))
    return over


def main(args=None) -> int:
    """Play until the bag ends (or forever with --loop); Ctrl-C stops cleanly."""
    args = list(sys.argv if args is None else args)
    from rclpy.utilities import remove_ros_args
    overrides = parse_cli(remove_ros_args(args)[1:])
    apply_default_profile()
    with rclpy.init(args=args):
        try:
            node = BagPlayer(parameter_overrides=overrides)
        except ParameterError as e:
            print(f"[bag_play] invalid parameter: {e}", file=sys.stderr)
            return 2
        # no callback of this node blocks (playback has its own thread); a single-threaded
        # executor also keeps the GIL free for accurate playback timing
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            executor.spin_until_future_complete(node.finished)
            if not node.flush():
                node.get_logger().warning("a subscriber did not confirm every message played")
            node.get_logger().info(f"played {node.published} messages")
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            node.close()
            executor.remove_node(node)
            node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
