"""bag_record / bag_play.

Round trips through mcap and sqlite3 bags, type hashes, timing, /clock and rate scaling, with real
rclpy nodes in-process.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from vision_dialogue.cli.bags import (CLOCK_TYPE, SESSION_TOPICS, BagError, bag_qos,
                                      make_typestore, parse_topic_spec, rclpy_qos, rclpy_type,
                                      read_messages)
from vision_dialogue.ros.params import ParameterError

TYPES = sorted(set(SESSION_TOPICS.values()) | {CLOCK_TYPE})


def _executor(ctx, *nodes):
    # single-threaded: rclpy's MultiThreadedExecutor dispatching the 50 Hz /clock callbacks
    # holds the GIL long enough (up to ~0.5 s here) to delay the player's thread
    ex = SingleThreadedExecutor(context=ctx)
    for n in nodes:
        ex.add_node(n)
    return ex


def _wait_matched(ex, pubs, spin, timeout=5.0):
    assert spin(ex, lambda: all(p.get_subscription_count() > 0 for p in pubs), timeout), \
        "publisher never matched the recorder"


def test_typestore_hashes_equal_rclpy(ros_context):
    """RIHS01 hashes rosbags computes (our msgs parsed from their .msg files) == rclpy's."""
    store = make_typestore()
    node = Node("hash_probe", context=ros_context)
    try:
        for i, msgtype in enumerate(TYPES):
            topic = f"hash_probe_{i}"
            node.create_publisher(rclpy_type(msgtype), topic, 1)
            info = node.get_publishers_info_by_topic(topic)
            assert info, msgtype
            assert str(info[0].topic_type_hash) == store.hash_rihs01(msgtype), msgtype
    finally:
        node.destroy_node()


def test_topic_specs():
    assert parse_topic_spec("dialogue/reply") == ("dialogue/reply",
                                                  "vision_dialogue_interfaces/msg/Reply")
    # a bag recorded before the interfaces had a package of their own plays with the new types
    from vision_dialogue_interfaces.msg import Utterance
    assert rclpy_type("vision_dialogue/msg/Utterance") is Utterance
    with pytest.raises(BagError, match="not available"):
        rclpy_type("vision_dialogue/msg/NoSuchType")
    assert parse_topic_spec("/foo:std_msgs/msg/String") == ("/foo", "std_msgs/msg/String")
    assert parse_topic_spec("/r1/camera/image_raw/compressed") == (
        "/r1/camera/image_raw/compressed", "sensor_msgs/msg/CompressedImage")
    with pytest.raises(BagError):
        parse_topic_spec("/r1/xdialogue/reply")
    with pytest.raises(BagError, match="unknown topic 'nope'"):
        parse_topic_spec("nope")
    with pytest.raises(BagError, match="bad type"):
        parse_topic_spec("x:String")
    assert bag_qos("camera/image_raw").depth == 5
    assert rclpy_qos("dialogue/reply").reliability == rclpy.qos.ReliabilityPolicy.RELIABLE
    assert rclpy_qos("camera/image_raw/compressed").reliability == \
        rclpy.qos.ReliabilityPolicy.BEST_EFFORT


def _session_msgs():
    from sensor_msgs.msg import CompressedImage, Image  # noqa: F401
    from vision_dialogue.ros.image_msgs import stamp_from_ns, to_compressed_msg, to_image_msg
    from vision_dialogue_interfaces.msg import Reply, Utterance
    rng = np.random.default_rng(5)
    img = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    stamp = stamp_from_ns(1_700_000_000_123_456_789)
    return [
        ("camera/image_raw", to_image_msg(img, stamp=stamp, frame_id="cam")),
        ("camera/image_raw/compressed", to_compressed_msg(img, stamp=stamp, frame_id="cam")),
        ("dialogue/utterance", Utterance(text="what do you see?", speaker="u1", source="script",
                                         language="en-US", confidence=0.75)),
        ("dialogue/reply", Reply(turn_id=3, chunk_index=1, text="A cat. It is orange.",
                                 in_reply_to="what do you see?", final=True, fallback=False)),
    ]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_record_round_trip(ros_context, spin, tmp_path, storage):
    from vision_dialogue.cli.bag_record import BagRecorder
    out = tmp_path / f"bag_{storage}"
    msgs = _session_msgs()
    # only the topics sent here: the default list has global ones (/robot_speaking,
    # /humans/voices/tracked) that another node of this worker's domain may publish meanwhile
    # (a fifth message once made the count wrong)
    rec = BagRecorder(context=ros_context, namespace="/robot1", parameter_overrides=[
        Parameter("output", Parameter.Type.STRING, str(out)),
        Parameter("storage", Parameter.Type.STRING, storage),
        Parameter("topics", Parameter.Type.STRING_ARRAY, [t for t, _ in msgs])])
    src = Node("source", context=ros_context, namespace="/robot1")
    pubs = [src.create_publisher(type(m), t, rclpy_qos(t)) for t, m in msgs]
    ex = _executor(ros_context, rec, src)
    try:
        _wait_matched(ex, pubs, spin)
        sent = []
        for pub, (topic, m) in zip(pubs, msgs):
            pub.publish(m)
            sent.append(time.time_ns())
            spin(ex, lambda: False, 0.25)  # spread the messages out in time
        assert spin(ex, lambda: sum(rec.counts.values()) == len(msgs), 5.0), rec.counts
    finally:
        rec.close()
        ex.shutdown()
        src.destroy_node()
        rec.destroy_node()

    meta = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 9
    assert meta["storage_identifier"] == storage
    assert meta["message_count"] == len(msgs)
    store = make_typestore()
    for tm in meta["topics_with_message_count"]:
        md = tm["topic_metadata"]
        assert md["type_description_hash"] == store.hash_rihs01(md["type"])
        assert md["serialization_format"] == "cdr"
        assert md["name"].startswith("/robot1/")

    got = read_messages(out)
    assert [t for t, *_ in got] == [f"/robot1/{t}" for t, _ in msgs]
    stamps = [t for *_, t, _ in got]
    # receive-time stamps, in order, each close to when it was published
    assert stamps == sorted(stamps)
    for s, ref in zip(stamps, sent):
        assert abs(s - ref) < 1.0e9  # (the header stamps are from 2023)
    for (topic, msgtype, _, data), (_, m) in zip(got, msgs):
        back = store.deserialize_cdr(data, msgtype)
        from rclpy.serialization import deserialize_message
        orig = deserialize_message(data, type(m))
        assert orig == m  # rclpy reads exactly what was published
        if msgtype.endswith("Image"):
            assert bytes(back.data) == bytes(m.data)
            assert back.header.frame_id == "cam"
            assert back.header.stamp.sec == m.header.stamp.sec
            assert back.header.stamp.nanosec == m.header.stamp.nanosec
        else:
            assert back.text == m.text


def test_record_rejects_bad_params(ros_context, tmp_path):
    from vision_dialogue.cli.bag_record import BagRecorder
    (tmp_path / "exists").mkdir()
    with pytest.raises(ParameterError, match="^output="):
        BagRecorder(context=ros_context, parameter_overrides=[
            Parameter("output", Parameter.Type.STRING, str(tmp_path / "exists"))])
    with pytest.raises(ParameterError, match="^topics="):
        BagRecorder(context=ros_context, parameter_overrides=[
            Parameter("output", Parameter.Type.STRING, str(tmp_path / "b")),
            Parameter("topics", Parameter.Type.STRING_ARRAY, ["no/such/topic"])])
    with pytest.raises(ParameterError, match="^storage="):
        BagRecorder(context=ros_context, parameter_overrides=[
            Parameter("output", Parameter.Type.STRING, str(tmp_path / "c")),
            Parameter("storage", Parameter.Type.STRING, "rosbag1")])
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def _write_bag(path: Path, storage: str, spacing_s: float, count: int,
               topic: str = "/dialogue/utterance"):
    """A bag with `count` utterances `spacing_s` apart on `topic` plus one image (rosbags)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rclpy.serialization import serialize_message
    from vision_dialogue.ros.image_msgs import to_image_msg
    from vision_dialogue_interfaces.msg import Utterance
    store = make_typestore()
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    t0 = 1_000_000_000_000
    with Writer(path, version=9, storage_plugin=plugin) as w:
        cu = w.add_connection(topic, "vision_dialogue_interfaces/msg/Utterance",
                              typestore=store,
                              offered_qos_profiles=[bag_qos("dialogue/utterance")])
        ci = w.add_connection("/camera/image_raw", "sensor_msgs/msg/Image", typestore=store,
                              offered_qos_profiles=[bag_qos("camera/image_raw")])
        img = to_image_msg(np.full((8, 8, 3), 7, np.uint8), frame_id="cam")
        w.write(ci, t0, serialize_message(img))
        for i in range(count):
            w.write(cu, t0 + int(i * spacing_s * 1e9),
                    serialize_message(Utterance(text=f"line {i}")))
    return t0


def _play(ros_context, spin, bag: Path, rate: float, **extra):
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image
    from vision_dialogue.cli.bag_play import BagPlayer
    from vision_dialogue_interfaces.msg import Utterance
    sink = Node("sink", context=ros_context)
    got, clocks, images = [], [], []
    sink.create_subscription(Utterance, "/dialogue/utterance",
                             lambda m: got.append((time.monotonic(), m.text)), 10)
    sink.create_subscription(Image, "/camera/image_raw", images.append,
                             rclpy.qos.qos_profile_sensor_data)
    sink.create_subscription(Clock, "/clock", lambda m: clocks.append(
        m.clock.sec * 10**9 + m.clock.nanosec), 100)
    over = [Parameter("bag", Parameter.Type.STRING, str(bag)),
            Parameter("rate", Parameter.Type.DOUBLE, rate),
            Parameter("start_delay", Parameter.Type.DOUBLE, 0.0)]
    over += [Parameter(k, value=v) for k, v in extra.items()]
    player = BagPlayer(context=ros_context, autostart=False, parameter_overrides=over)
    ex = _executor(ros_context, player, sink)
    try:
        assert spin(ex, lambda: all(p.get_subscription_count() > 0
                                    for p in player._pubs.values()), 5.0)
        player.start()
        assert spin(ex, lambda: player.finished.done(), 10.0)
        spin(ex, lambda: len(got) >= 4 and len(images) >= 1, 5.0)  # delivery may lag
        spin(ex, lambda: False, 0.3)  # the last /clock too
    finally:
        player.close()
        ex.shutdown()
        player.destroy_node()
        sink.destroy_node()
    return got, clocks, images, player


#: how late a message may go out on a loaded machine; a player that ignored the rate (3) would
#: send the fourth message 0.6 s late, one that did not wait at all would send it early
LATE_S = 0.5


def _assert_paced(sent: list, spacing_s: float) -> None:
    """Due every `spacing_s` (the bag's 0.3 s at the rate), each sent then or a little later.

    Each message is compared with the player's schedule, not with the message before it: the
    first message of a fresh publisher may go out late and the next ones catch up (a run's
    span at rate 3 was 0.27 s for 0.3 s of schedule).
    """
    due, at = np.array([m.due for m in sent]), np.array([m.at for m in sent])
    assert len(sent) == 4 and np.allclose(np.diff(due), spacing_s, atol=1e-6), np.diff(due)
    assert np.all(at >= due) and np.all(at - due < LATE_S), at - due


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_play_timing_clock_and_rate(ros_context, spin, tmp_path, storage):
    bag = tmp_path / "bag"
    t0 = _write_bag(bag, storage, spacing_s=0.3, count=4)  # spans 0.9 s of bag time

    got1, clocks, images, player = _play(ros_context, spin, bag, rate=1.0)
    assert [t for _, t in got1] == [f"line {i}" for i in range(4)]
    assert player.published == 5 and len(images) == 1
    # timing checked where the player publishes (delivery delays on a loaded machine are
    # not the player's); the image shares the first utterance's bag time
    _assert_paced([m for m in player.sent if m.topic == "/dialogue/utterance"], 0.3)
    # /clock follows bag time: starts at the first stamp, rises, ends at the last one
    assert clocks and clocks[0] >= t0 and clocks == sorted(clocks)
    assert max(clocks) == t0 + int(3 * 0.3 * 1e9)  # same arithmetic as _write_bag
    assert len(clocks) > 10  # published between messages too, not only with them

    got3, _, _, player3 = _play(ros_context, spin, bag, rate=3.0)
    assert [t for _, t in got3] == [f"line {i}" for i in range(4)]
    _assert_paced([m for m in player3.sent if m.topic == "/dialogue/utterance"], 0.1)


def test_play_loop_topics_and_no_clock(ros_context, spin, tmp_path):
    from vision_dialogue.cli.bag_play import BagPlayer
    bag = tmp_path / "bag"
    _write_bag(bag, "mcap", spacing_s=0.02, count=3)
    from vision_dialogue_interfaces.msg import Utterance
    sink = Node("sink", context=ros_context)
    got, clocks = [], []
    sink.create_subscription(Utterance, "/dialogue/utterance", lambda m: got.append(m.text), 50)
    from rosgraph_msgs.msg import Clock
    sink.create_subscription(Clock, "/clock", clocks.append, 10)
    player = BagPlayer(context=ros_context, autostart=False, parameter_overrides=[
        Parameter("bag", value=str(bag)), Parameter("loop", value=True),
        Parameter("clock", value=False), Parameter("start_delay", value=0.0),
        Parameter("topics", value=["/dialogue/utterance"])])
    ex = _executor(ros_context, player, sink)
    try:
        assert list(player._pubs) == ["/dialogue/utterance"]
        assert spin(ex, lambda: player._pubs["/dialogue/utterance"].get_subscription_count() > 0)
        player.start()
        assert spin(ex, lambda: len(got) >= 9, 5.0)  # three passes
        assert not player.finished.done()  # still looping
    finally:
        player.close()
        ex.shutdown()
        player.destroy_node()
        sink.destroy_node()
    assert player.finished.done()
    assert got[:6] == ["line 0", "line 1", "line 2"] * 2
    assert clocks == []


def test_play_rejects_bad_params(ros_context, tmp_path):
    from vision_dialogue.cli.bag_play import BagPlayer
    with pytest.raises(ParameterError, match="^bag="):
        BagPlayer(context=ros_context, parameter_overrides=[
            Parameter("bag", value=str(tmp_path / "missing"))])
    bag = tmp_path / "bag"
    _write_bag(bag, "mcap", 0.01, 1)
    with pytest.raises(ParameterError, match="^rate"):
        BagPlayer(context=ros_context, parameter_overrides=[
            Parameter("bag", value=str(bag)), Parameter("rate", value=0.0)])
    with pytest.raises(ParameterError, match="^topics"):
        BagPlayer(context=ros_context, parameter_overrides=[
            Parameter("bag", value=str(bag)), Parameter("topics", value=["/nope"])])


def test_play_waits_for_subscribers(ros_context, spin, tmp_path):
    """With wait_for_subscribers, nothing is published (or lost) before a subscriber exists.

    The first message goes out once one has matched.
    """
    from vision_dialogue.cli.bag_play import BagPlayer
    from vision_dialogue_interfaces.msg import Utterance
    # a topic of its own: another test's process in this worker's ROS domain subscribed to
    # the global dialogue/utterance, and the player (rightly) played to it
    topic = "/wait27/dialogue/utterance"
    bag = tmp_path / "bag"
    _write_bag(bag, "sqlite3", spacing_s=0.01, count=3, topic=topic)
    player = BagPlayer(context=ros_context, parameter_overrides=[
        Parameter("bag", value=str(bag)), Parameter("clock", value=False),
        Parameter("start_delay", value=0.0), Parameter("wait_for_subscribers", value=10.0),
        Parameter("topics", value=[topic])])
    ex = _executor(ros_context, player)
    sink = None
    try:
        spin(ex, lambda: False, 0.5)
        assert player.published == 0 and not player.finished.done()   # still waiting
        sink = Node("late_sink", context=ros_context)
        got = []
        sink.create_subscription(Utterance, topic, lambda m: got.append(m.text),
                                 10)
        ex.add_node(sink)
        assert spin(ex, lambda: len(got) == 3, 10.0), got
        assert got == ["line 0", "line 1", "line 2"]
        assert player.flush(5.0)         # all confirmed: the player process may end now
    finally:
        player.close()
        ex.shutdown()
        player.destroy_node()
        if sink is not None:
            sink.destroy_node()


def test_cli_arguments():
    from vision_dialogue.cli import bag_play, bag_record
    rec = {p.name: p.value for p in bag_record.parse_cli(
        ["-o", "out", "-s", "sqlite3", "dialogue/reply", "/x:std_msgs/msg/String"])}
    assert rec == {"output": "out", "storage": "sqlite3",
                   "topics": ["dialogue/reply", "/x:std_msgs/msg/String"]}
    play = {p.name: p.value for p in bag_play.parse_cli(["B", "--rate", "2", "--loop",
                                                         "--no-clock",
                                                         "--wait-for-subscribers", "3"])}
    assert play == {"bag": "B", "rate": 2.0, "loop": True, "clock": False,
                    "wait_for_subscribers": 3.0}


def _exe(name):
    """The installed executable (scripts/setup.sh), else the module."""
    import sys
    from conftest import REPO
    exe = REPO / "install" / "vision_dialogue" / "lib" / "vision_dialogue" / name
    return [sys.executable, str(exe)] if exe.is_file() else [sys.executable, "-m",
                                                             f"vision_dialogue.{name}"]


def test_cli_record_then_play(ros_context, spin, tmp_path):
    """bag_record / bag_play as processes: Ctrl-C finishes the bag; play ends by itself."""
    import signal
    import subprocess
    from rclpy.executors import SingleThreadedExecutor
    from test_bringup import child_env
    from vision_dialogue_interfaces.msg import Utterance
    bag = tmp_path / "cli_bag"
    env = child_env()
    rec = subprocess.Popen(_exe("bag_record") + ["-o", str(bag), "-s", "sqlite3",
                                                 "/cli27/dialogue/utterance"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    node = Node("cli_src", context=ros_context)
    # transient local: the recorder follows it and gets the lines even if its side matched
    # this publisher after they were sent (a publisher sees a subscriber first)
    from rclpy.qos import DurabilityPolicy, QoSProfile
    pub = node.create_publisher(Utterance, "/cli27/dialogue/utterance", QoSProfile(
        depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    got = []
    node.create_subscription(Utterance, "/cli27/dialogue/utterance", lambda m: got.append(m.text),
                             10)
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    play = None
    try:
        assert spin(ex, lambda: pub.get_subscription_count() >= 2, 20.0), "recorder never matched"
        for i in range(3):
            pub.publish(Utterance(text=f"cli {i}"))
            spin(ex, lambda: False, 0.1)
        spin(ex, lambda: False, 0.5)
        rec.send_signal(signal.SIGINT)
        out, _ = rec.communicate(timeout=20)
        assert rec.returncode == 0, out
        texts = [deserialize(d) for *_, d in read_messages(bag)]
        assert texts == ["cli 0", "cli 1", "cli 2"]
        # play ends by itself once it has played (the event to wait for: a loaded machine
        # took longer than a fixed 20 s to start it)
        play = subprocess.Popen(_exe("bag_play") + [str(bag), "--rate", "5", "--delay", "0.2",
                                                    "--wait-for-subscribers", "15"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        assert spin(ex, lambda: play.poll() is not None, 120.0)
        out, _ = play.communicate(timeout=60)
        assert play.returncode == 0 and "played 3 messages" in out, out
        # what it plays arrives: played in a loop until this side has the three in order (the
        # player saw this subscriber before this subscriber saw it, and what it sent meanwhile
        # was lost to it: one run received none of a single pass)
        got.clear()
        play = subprocess.Popen(_exe("bag_play") + [str(bag), "--rate", "5", "--loop"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        whole = ["cli 0", "cli 1", "cli 2"]
        assert spin(ex, lambda: any(got[i:i + 3] == whole for i in range(len(got))),
                    120.0), got
        play.send_signal(signal.SIGINT)
        out, _ = play.communicate(timeout=30)
        assert play.returncode == 0, out
        assert set(got) == set(whole), got
    finally:
        for p in (rec, play):
            if p is not None and p.poll() is None:
                p.kill()
        ex.remove_node(node)
        node.destroy_node()


def deserialize(data):
    from rclpy.serialization import deserialize_message
    from vision_dialogue_interfaces.msg import Utterance
    return deserialize_message(data, Utterance).text
