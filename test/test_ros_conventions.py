"""ROS conventions a user relies on.

Image_transport naming under remapping, a latched prompt_state, QoS that follows a stock driver,
qos_overrides, node-clock (sim time) stamps, and bags that keep each publisher's QoS.
"""
from __future__ import annotations

import time

import numpy as np
import yaml
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import (DurabilityPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

from conftest import matched
from fake_chat_backend import FakeChatBackend

RELIABLE10 = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def manager(ctx, **params):
    from vision_dialogue.manager_node import ManagerNode
    over = {"transcript_dir": "", "prompt_state_period": 0.0, **params}
    return ManagerNode(context=ctx, backend=FakeChatBackend(),
                       parameter_overrides=[Parameter(k, value=v) for k, v in over.items()])


def executor(ctx, *nodes):
    ex = MultiThreadedExecutor(context=ctx)
    for n in nodes:
        ex.add_node(n)
    return ex


def close(ex, *nodes):
    for n in nodes:
        getattr(n, "close", lambda: None)()
    ex.shutdown()
    for n in nodes:
        n.destroy_node()


def frame(stamp=None):
    from vision_dialogue.ros.image_msgs import to_image_msg
    return to_image_msg(np.full((48, 64, 3), 90, np.uint8), frame_id="cam", stamp=stamp)


def test_compressed_topic_follows_the_remapped_image_topic(ros_context_args, tmp_path):
    from PIL import Image as PILImage
    from vision_dialogue.camera_node import CameraNode
    PILImage.new("RGB", (32, 24)).save(tmp_path / "a.png")
    ctx = ros_context_args(["--ros-args", "-r", "camera/image_raw:=/driver/image"])
    m = manager(ctx)
    cam = CameraNode(context=ctx, parameter_overrides=[
        Parameter("source", value="folder"), Parameter("folder_path", value=str(tmp_path))])
    try:
        assert [s.topic for s in m.camera.subs] == ["/driver/image", "/driver/image/compressed"]
        assert cam.pub_image.topic_name == "/driver/image"
        assert cam.pub_compressed.topic_name == "/driver/image/compressed"
    finally:
        cam.close()
        cam.destroy_node()
        m.close()
        m.destroy_node()


def test_prompt_state_reaches_a_late_subscriber(ros_context, spin):
    from vision_dialogue_interfaces.msg import PromptState
    m = manager(ros_context)
    ex = executor(ros_context, m)
    try:
        m.publish_state()
        spin(ex, lambda: False, 0.3)
        late = Node("late_monitor", context=ros_context)
        got = []
        late.create_subscription(PromptState, "dialogue/prompt_state", got.append, LATCHED)
        ex.add_node(late)
        assert spin(ex, lambda: got, 5.0), "a late monitor got no prompt state"
    finally:
        close(ex, m)


def test_image_subscription_follows_a_reliable_driver(ros_context, spin):
    """A stock driver publishes RELIABLE.

    The manager re-subscribes RELIABLE (reliable delivery); a best-effort publisher joining makes
    it best effort again (matches both).
    """
    from sensor_msgs.msg import Image
    m = manager(ros_context)
    driver = Node("usb_cam", context=ros_context)
    ex = executor(ros_context, m, driver)
    sub = m.camera.subs[0]
    try:
        assert sub.qos.reliability == ReliabilityPolicy.BEST_EFFORT
        pub = driver.create_publisher(Image, "camera/image_raw", RELIABLE10)
        assert spin(ex, lambda: sub.qos.reliability == ReliabilityPolicy.RELIABLE, 5.0)
        assert spin(ex, lambda: matched(pub, *ex.get_nodes()), 5.0)
        for i in range(5):
            pub.publish(frame())
        assert spin(ex, lambda: m.frames_received == 5, 5.0)
        driver.create_publisher(Image, "camera/image_raw", qos_profile_sensor_data)
        assert spin(ex, lambda: sub.qos.reliability == ReliabilityPolicy.BEST_EFFORT, 5.0)
    finally:
        close(ex, m, driver)


def test_qos_overrides_pin_the_image_subscription(ros_context_args, tmp_path, spin):
    params = tmp_path / "qos.yaml"
    params.write_text(yaml.safe_dump({"/**/manager_node": {"ros__parameters": {
        "qos_overrides": {"/camera/image_raw": {"subscription": {"reliability": "reliable",
                                                                 "depth": 3}}}}}}))
    ctx = ros_context_args(["--ros-args", "--params-file", str(params)])
    m = manager(ctx)
    try:
        sub = m.camera.subs[0]
        assert sub.qos.reliability == ReliabilityPolicy.RELIABLE and sub.qos.depth == 3
        assert not sub.follow
        for name in ("qos_overrides./dialogue/reply.publisher.reliability",
                     "qos_overrides./dialogue/utterance.subscription.depth"):
            assert m.has_parameter(name), name
    finally:
        m.close()
        m.destroy_node()


def test_reply_and_state_stamps_follow_sim_time_from_a_bag(ros_context, spin, tmp_path):
    """A bag with /clock (year 2001) replayed into a use_sim_time manager.

    Replies and the prompt state carry bag time, not wall time.
    """
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosgraph_msgs.msg import Clock
    from vision_dialogue.cli.bag_play import BagPlayer
    from vision_dialogue.cli.bags import bag_qos, make_typestore
    from vision_dialogue.ros.image_msgs import stamp_from_ns
    from vision_dialogue_interfaces.msg import PromptState, Reply, Utterance
    t0 = 1_000_000_000 * 10**9 + 123            # 2001-09-09
    bag = tmp_path / "sim"
    store = make_typestore()
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        clock = w.add_connection("/clock", "rosgraph_msgs/msg/Clock", typestore=store)
        utt = w.add_connection("/dialogue/utterance", "vision_dialogue_interfaces/msg/Utterance",
                               typestore=store,
                               offered_qos_profiles=[bag_qos("dialogue/utterance")])
        for i in range(30):
            t = t0 + i * 100_000_000
            w.write(clock, t, serialize_message(Clock(clock=stamp_from_ns(t))))
            if i == 10:
                w.write(utt, t, serialize_message(Utterance(text="hello from the past")))
    m = manager(ros_context, use_sim_time=True)
    sink = Node("sink", context=ros_context)
    replies, states = [], []
    sink.create_subscription(Reply, "dialogue/reply", replies.append, 10)
    sink.create_subscription(PromptState, "dialogue/prompt_state", states.append, LATCHED)
    player = BagPlayer(context=ros_context, autostart=False, parameter_overrides=[
        Parameter("bag", value=str(bag)), Parameter("start_delay", value=0.0),
        Parameter("clock", value=False), Parameter("topics", value=["/dialogue/utterance",
                                                                    "/clock"])])
    ex = executor(ros_context, m, sink, player)
    try:
        assert spin(ex, lambda: all(matched(p, *ex.get_nodes())
                                    for p in player._pubs.values()), 5.0)
        player.start()
        assert spin(ex, lambda: any(r.final for r in replies), 10.0), "no reply"
        m.publish_state()
        spin(ex, lambda: False, 0.3)
        bag_end = t0 + 30 * 100_000_000
        for msg in [r for r in replies if r.final] + states[-1:]:
            ns = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            assert t0 <= ns <= bag_end, f"{type(msg).__name__} stamped {ns}, not bag time"
    finally:
        close(ex, player, m, sink)


def test_bags_keep_each_publishers_qos(ros_context, spin, tmp_path):
    """A latched speech_state published before recording starts is recorded.

    A RELIABLE camera is recorded as RELIABLE and replayed RELIABLE, so a default subscriber gets
    it.
    """
    from rosbags.interfaces import QosDurability, QosReliability
    from rosbags.rosbag2 import Reader
    from sensor_msgs.msg import Image
    from vision_dialogue.cli.bag_play import BagPlayer
    from vision_dialogue.cli.bag_record import BagRecorder
    from vision_dialogue_interfaces.msg import SpeechState
    # in a namespace of its own: another test's node left in this worker's ROS domain once
    # added its speech states to the count (a fresh-clone run)
    ns = "qos_bag_test"
    src = Node("robot", namespace=ns, context=ros_context)
    state_pub = src.create_publisher(SpeechState, "dialogue/speech_state", LATCHED)
    state_pub.publish(SpeechState(state=SpeechState.LISTENING))
    cam = src.create_publisher(Image, "camera/image_raw", RELIABLE10)
    bag = tmp_path / "qos_bag"
    rec = BagRecorder(context=ros_context, namespace=ns, parameter_overrides=[
        Parameter("output", value=str(bag)),
        Parameter("topics", value=["dialogue/speech_state", "camera/image_raw"])])
    ex = executor(ros_context, src, rec)
    try:
        assert spin(ex, lambda: matched(cam, *ex.get_nodes()), 5.0)
        sent = time.time_ns()
        for _ in range(3):
            cam.publish(frame())
        assert spin(ex, lambda: sum(rec.counts.values()) == 4, 5.0), rec.counts
    finally:
        rec.close()
        close(ex, src, rec)
    with Reader(bag) as reader:
        conns = {c.topic: c for c in reader.connections}
        cam_qos = conns[f"/{ns}/camera/image_raw"].ext.offered_qos_profiles[0]
        assert cam_qos.reliability == QosReliability.RELIABLE
        state_qos = conns[f"/{ns}/dialogue/speech_state"].ext.offered_qos_profiles[0]
        assert state_qos.durability == QosDurability.TRANSIENT_LOCAL
        stamps = [t for c, t, _ in reader.messages(connections=[conns[f"/{ns}/camera/image_raw"]])]
        assert all(abs(t - sent) < 2e9 for t in stamps), "not stamped at receipt"
    player = BagPlayer(context=ros_context, autostart=False, parameter_overrides=[
        Parameter("bag", value=str(bag)), Parameter("start_delay", value=0.0),
        Parameter("topics", value=[f"/{ns}/camera/image_raw"])])
    sink = Node("viewer", namespace=ns, context=ros_context)
    got = []
    sink.create_subscription(Image, "camera/image_raw", got.append, 10)   # default: RELIABLE
    ex = executor(ros_context, player, sink)
    try:
        assert spin(ex, lambda: matched(player._pubs[f"/{ns}/camera/image_raw"], *ex.get_nodes()),
                    5.0)
        player.start()
        assert spin(ex, lambda: len(got) == 3, 5.0), f"{len(got)} of 3 replayed frames"
    finally:
        close(ex, player, sink)
