"""Shared rosbag2 helpers for bag_record / bag_play (pure Python, `rosbags`).

- `make_typestore()`: the ROS 2 Kilted typestore plus our own messages
  (vision_dialogue_interfaces) and the standard ones no store has, parsed from their installed
  `msg/*.msg` with `get_types_from_msg`, so that the type hashes (RIHS01) and message
  definitions written into a bag are the ones `ros2 bag` and rclpy expect.
- `SESSION_TOPICS`: the topics of a dialogue session and their types (relative names, as in
  docs/CONVENTIONS.md).
- QoS: what each connection's publishers offered, as rosbags `Qos` records in
  `metadata.yaml` (`offered_qos`), and back to an rclpy profile for replay (`replay_qos`);
  our own nodes' defaults (`rclpy_qos`) when a bag recorded none.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness,
                                QosReliability, QosTime)
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from vision_dialogue.ros.topics import CLOCK_TOPIC  # noqa: F401 - the players' name for it
from vision_dialogue.ros.topics import AUDIO_INPUT_TOPIC, AUDIO_OUTPUT_TOPIC, DETECTIONS_TOPIC, \
    IMAGE_TOPIC, INTERFACES, LABEL_INFO_TOPIC, PROMPT_STATE_TOPIC, REPLY_TOPIC, \
    ROBOT_SPEAKING_TOPIC, SPEECH_STATE_TOPIC, USERS_TOPIC, UTTERANCE_TOPIC, VISUAL_EVENTS_TOPIC, \
    VOICES_TRACKED_TOPIC


#: topic (relative) -> ROS type name, the default set `bag_record` writes.
SESSION_TOPICS: dict[str, str] = {
    IMAGE_TOPIC: "sensor_msgs/msg/Image",
    f"{IMAGE_TOPIC}/compressed": "sensor_msgs/msg/CompressedImage",
    USERS_TOPIC: f"{INTERFACES}/msg/DetectedUsers",
    VISUAL_EVENTS_TOPIC: f"{INTERFACES}/msg/VisualEvent",
    UTTERANCE_TOPIC: f"{INTERFACES}/msg/Utterance",
    REPLY_TOPIC: f"{INTERFACES}/msg/Reply",
    PROMPT_STATE_TOPIC: f"{INTERFACES}/msg/PromptState",
    SPEECH_STATE_TOPIC: f"{INTERFACES}/msg/SpeechState",
    AUDIO_INPUT_TOPIC: f"{INTERFACES}/msg/AudioChunk",
    AUDIO_OUTPUT_TOPIC: f"{INTERFACES}/msg/AudioChunk",
}

#: the standard perception topics, recorded by default where their packages are installed
STANDARD_TOPICS: dict[str, str] = {
    DETECTIONS_TOPIC: "vision_msgs/msg/Detection2DArray",
    LABEL_INFO_TOPIC: "vision_msgs/msg/LabelInfo",
    ROBOT_SPEAKING_TOPIC: "std_msgs/msg/Bool",
    VOICES_TRACKED_TOPIC: "hri_msgs/msg/IdsList",
}
#: interface packages whose .msg files are registered when installed (no rosbags store has them)
INTERFACE_PACKAGES = (INTERFACES, "vision_msgs", "hri_msgs")

CLOCK_TYPE = "rosgraph_msgs/msg/Clock"
STORAGE_IDS = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag or topic specification that cannot be used (clear message, no traceback)."""


def _installed_msg_dirs() -> dict[str, Path]:
    """{package: its share/<package>/msg} for the installed INTERFACE_PACKAGES."""
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    out = {}
    for pkg in INTERFACE_PACKAGES:
        try:
            out[pkg] = Path(get_package_share_directory(pkg)) / "msg"
        except PackageNotFoundError:
            continue
    return out


def make_typestore():
    """Kilted typestore with our messages and the installed standard ones registered.

    Each from its installed .msg files (vision_dialogue_interfaces, vision_msgs, hri_msgs).
    """
    store = get_typestore(Stores.ROS2_KILTED)
    dirs = _installed_msg_dirs()
    if INTERFACES not in dirs:
        raise BagError(f"{INTERFACES} is not installed: run scripts/setup.sh, then "
                       "source env.sh")
    types: dict = {}
    for pkg, folder in dirs.items():
        for path in sorted(folder.glob("*.msg")):
            types.update(get_types_from_msg(path.read_text(), f"{pkg}/msg/{path.stem}"))
    store.register(types)
    return store


def default_topics() -> list[str]:
    """The session topics, and the standard ones whose message package is installed."""
    have = set(_installed_msg_dirs()) | {"std_msgs"}
    return list(SESSION_TOPICS) + [t for t, msgtype in STANDARD_TOPICS.items()
                                   if msgtype.split("/")[0] in have]


def parse_topic_spec(spec: str) -> tuple[str, str]:
    """Parse a topic spec into (topic, type).

    'topic' (a session topic, also namespaced: /robot1/dialogue/reply) or 'topic:pkg/msg/Type'.
    """
    if ":" in spec:
        topic, msgtype = spec.split(":", 1)
    else:
        topic = spec
        name = spec.lstrip("/")
        known = {**SESSION_TOPICS, **{k.lstrip("/"): v for k, v in STANDARD_TOPICS.items()}}
        msgtype = next((t for rel, t in known.items()
                        if name == rel or name.endswith("/" + rel)), "")
        if not msgtype:
            raise BagError(f"unknown topic {spec!r}: give its type as {spec}:pkg/msg/Type "
                           f"(known: {', '.join(SESSION_TOPICS)})")
    if msgtype.count("/") != 2:
        raise BagError(f"bad type {msgtype!r} for {topic!r}: expected pkg/msg/Type")
    return topic, msgtype


#: interface packages renamed since a bag may have been recorded: old name -> new name
RENAMED_PACKAGES = {"vision_dialogue": INTERFACES}


def rclpy_type(msgtype: str):
    """'pkg/msg/Type' -> the generated rclpy message class (an old bag's name, its new one)."""
    pkg, kind, name = msgtype.split("/")
    pkg = RENAMED_PACKAGES.get(pkg, pkg)
    try:
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ImportError, AttributeError) as e:
        raise BagError(f"message type {msgtype} is not available ({e})") from None


def is_sensor_topic(topic: str) -> bool:
    """Camera streams use sensor-data QoS (best effort, keep last 5)."""
    return "camera/image" in topic


def rclpy_qos(topic: str):
    """The rclpy QoS profile our nodes use on `topic`."""
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    return qos_profile_sensor_data if is_sensor_topic(topic) else QoSProfile(depth=10)


def bag_qos(topic: str) -> Qos:
    """The offer our own nodes make on `topic`, as a metadata.yaml record."""
    return offered_qos(rclpy_qos(topic))


def _qos_time(d) -> QosTime:
    ns = int(getattr(d, "nanoseconds", 0) or 0)
    return QosTime(sec=ns // 1_000_000_000, nsec=ns % 1_000_000_000)


def offered_qos(profile) -> Qos:
    """An rclpy QoSProfile (a publisher's offer) -> the rosbags record for metadata.yaml."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, ReliabilityPolicy
    return Qos(
        history=QosHistory.KEEP_ALL if profile.history == HistoryPolicy.KEEP_ALL
        else QosHistory.KEEP_LAST,
        depth=int(profile.depth),
        reliability=QosReliability.RELIABLE if profile.reliability == ReliabilityPolicy.RELIABLE
        else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL
        if profile.durability == DurabilityPolicy.TRANSIENT_LOCAL else QosDurability.VOLATILE,
        deadline=_qos_time(profile.deadline), lifespan=_qos_time(profile.lifespan),
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=_qos_time(profile.liveliness_lease_duration),
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions))


def replay_qos(offers, topic: str):
    """The QoS to republish a connection with.

    Its recorded offer (reliable and transient local only if every recorded publisher was), else
    our nodes' default for the topic.
    """
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    if not offers:
        return rclpy_qos(topic)
    reliable = all(o.reliability == QosReliability.RELIABLE for o in offers)
    latched = all(o.durability == QosDurability.TRANSIENT_LOCAL for o in offers)
    return QoSProfile(
        depth=max(1, max(int(o.depth) for o in offers)),
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


def storage_plugin(storage_id: str):
    from rosbags.rosbag2 import StoragePlugin
    if storage_id not in STORAGE_IDS:
        raise BagError(f"storage={storage_id!r} is not one of {list(STORAGE_IDS)}")
    return StoragePlugin.MCAP if storage_id == "mcap" else StoragePlugin.SQLITE3


def read_messages(path: str | Path, topics: list[str] | None = None):
    """[(topic, msgtype, timestamp_ns, cdr_bytes)] of a bag, in time order (for tests/tools)."""
    from rosbags.rosbag2 import Reader
    out = []
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if not topics or c.topic in topics]
        for conn, t, data in reader.messages(connections=conns):
            out.append((conn.topic, conn.msgtype, t, bytes(data)))
    return out
