"""QoS that follows the publishers of a topic, as `ros2 bag record` does.

A RELIABLE subscription does not match a BEST_EFFORT publisher, and a BEST_EFFORT
subscription to a RELIABLE publisher gets best-effort delivery: large raw frames from a
stock driver (usb_cam, v4l2_camera publish RELIABLE) are then lost on Fast DDS' default
transport. `FollowingSubscription` looks at the publishers' offered QoS and subscribes with
the strongest QoS that matches all of them, re-subscribing when that changes.
"""
from __future__ import annotations

from typing import Any, Callable

from rclpy._rclpy_pybind11 import RCLError
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.exceptions import InvalidHandle
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)
from rclpy.qos_overriding_options import QoSOverridingOptions

#: choices of an image subscription's QoS parameter (e.g. the manager's `image_qos`)
IMAGE_QOS_CHOICES = ("auto", "sensor_data", "reliable")
#: frames an image subscription holds while the executor is busy (a driver keeps 5-10)
IMAGE_DEPTH = 10

#: the camera node's frame topics (camera/image_raw and /compressed, one frame every
#: frame_period): reliable, so a frame lost on the way (UDP fragments to another host, or
#: dropped by a full socket buffer) is sent again; at one frame in seconds that costs nothing.
#: Over a veth pair between two hosts: 48 of 48 frames reliable, 41 of 48 best effort.
#: The fast stream (camera/stream/*) stays best effort, as a driver's: late is useless there.
CAMERA_FRAME_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)

#: the manager keeps its last 200 records for a monitor that joins mid-session
RECORDS_QOS = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: the newest message kept for subscribers that join later (a state, an id list, LabelInfo)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: a latched topic that several nodes publish (label_info from two detectors): a subscription
#: that joins late gets each one's message (with depth 1 the second would replace the first)
LATCHED_FROM_MANY_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                                   durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: reliable and volatile: as a subscription it matches latched and plain publishers alike
RELIABLE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: the skills' action feedback: every stage counts to a behaviour tree, and a burst (a Say's
#: sentences, an Ask's follow-up) must not push a stage out before a busy client reads it
SKILL_FEEDBACK_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: dialogue/speech_state: the speech node's states, the last 10 kept for a late monitor
SPEECH_STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                              durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _tolerant(handler) -> None:
    """An event handler that another thread may destroy while an executor adds it to a wait set.

    rclpy's MultiThreadedExecutor counts its waitables, then adds each to the wait set; a
    subscription destroyed on another thread in between (a re-subscription) makes its handler
    raise InvalidHandle there and the whole spin fails. This one leaves that wait set instead
    (and claims no readiness), as rclpy does for a subscription destroyed the same way.
    """
    add = handler.add_to_wait_set

    def add_to_wait_set(wait_set) -> None:
        try:
            add(wait_set)
        except InvalidHandle:
            handler._event_index = None
    handler.add_to_wait_set = add_to_wait_set


def no_event_handlers(kind: str) -> dict:
    """`event_callbacks` without rclpy's default QoS-event handlers.

    For an endpoint destroyed while the node spins (a ROS4HRI person's topics, a face's
    publishers, a lifecycle clean-up). With the defaults, each endpoint adds an event handler
    to the node's waitables; destroying the endpoint destroys it while another executor thread
    may be adding it to a wait set, and the spin dies (InvalidHandle: "destruction was
    requested"; seen in `bringup demo` when the manager stopped following a voice).
    kind: "subscription" or "publisher".
    """
    callbacks = {"subscription": SubscriptionEventCallbacks,
                 "publisher": PublisherEventCallbacks}[kind]
    return {"event_callbacks": callbacks(use_default_callbacks=False)}


def lost_samples_handler(on_lost: Callable[[int], None]) -> dict:
    """A subscription's `event_callbacks` with the "message lost" handler alone.

    `on_lost(n)`: the middleware knows n more samples on the topic were lost (a best-effort
    sample whose fragments never all came), also when none arrives at all.
    """
    return {"event_callbacks": SubscriptionEventCallbacks(
        message_lost=lambda info: on_lost(int(info.total_count_change)),
        use_default_callbacks=False)}


def image_qos(choice: str) -> QoSProfile:
    """The fixed profile for an `image_qos` choice ('auto' starts from sensor data)."""
    if choice == "reliable":
        return RELIABLE_QOS
    return QoSProfile(history=qos_profile_sensor_data.history,
                      depth=IMAGE_DEPTH,
                      reliability=qos_profile_sensor_data.reliability,
                      durability=qos_profile_sensor_data.durability)


def matching_qos(offered: list[QoSProfile], base: QoSProfile) -> QoSProfile:
    """`base` with reliability and durability raised as far as every offer allows.

    RELIABLE only if all publishers are reliable, TRANSIENT_LOCAL only if all are (rosbag2's rule),
    and a depth no smaller than any publisher's. With no publisher, `base` unchanged.
    """
    q = QoSProfile(history=base.history, depth=base.depth, reliability=base.reliability,
                   durability=base.durability)
    if not offered:
        return q
    q.reliability = (ReliabilityPolicy.RELIABLE
                     if all(o.reliability == ReliabilityPolicy.RELIABLE for o in offered)
                     else ReliabilityPolicy.BEST_EFFORT)
    q.durability = (DurabilityPolicy.TRANSIENT_LOCAL
                    if all(o.durability == DurabilityPolicy.TRANSIENT_LOCAL for o in offered)
                    else DurabilityPolicy.VOLATILE)
    if q.history == HistoryPolicy.KEEP_LAST:   # hold at least what a publisher keeps
        q.depth = max([q.depth, 1] + [int(o.depth) for o in offered
                                      if o.history == HistoryPolicy.KEEP_LAST])
    return q


def endpoint_named(info) -> bool:
    """Whether the ROS graph knows the node behind an endpoint yet.

    DDS may know the writer first: its node then reads _NODE_NAME_UNKNOWN_ for a moment.
    """
    return bool(info.node_name) and "_UNKNOWN_" not in info.node_name


def endpoint_node(info) -> str:
    """The full name of the node behind a graph endpoint (TopicEndpointInfo): /ns/name."""
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


def describe(q: QoSProfile) -> str:
    return f"{q.reliability.name.lower()}/{q.durability.name.lower()}/depth {q.depth}"


class FollowingSubscription:
    """A subscription whose reliability/durability follow the topic's publishers.

    follow=False: one plain subscription with `base` (standard `qos_overrides.*` parameters
    apply). follow=True: subscribe with `base` now (or, with wait_for_publisher, once a
    publisher appears), then re-subscribe whenever the publishers' offers call for another
    QoS; checked every `poll_period` seconds. Explicit `qos_overrides.<topic>.subscription.
    reliability` pins the QoS (following stops).
    """

    def __init__(self, node, msg_type, topic: str, callback: Callable[..., Any], base: QoSProfile,
                 *, follow: bool = True, wait_for_publisher: bool = False,
                 callback_group=None, raw: bool = False, overridable: bool = True,
                 poll_period: float = 0.25,
                 on_change: Callable[["FollowingSubscription"], None] | None = None,
                 on_lost: Callable[[int], None] | None = None):
        self.node, self.msg_type, self.callback = node, msg_type, callback
        self.on_lost = on_lost
        self.topic = node.resolve_topic_name(topic)
        self.base, self.raw, self.group = base, raw, callback_group
        self.on_change = on_change
        self.sub = None
        self.qos: QoSProfile | None = None
        self.status = ""          # what the last (re-)subscription chose, for logs
        self.follow = follow
        self._overridable = overridable
        self._timer = None
        if not (follow and wait_for_publisher):
            self._subscribe(base, first=True)
        if self.follow:
            self._timer = node.create_timer(poll_period, self.poll, callback_group=callback_group)
            self.poll()

    def _param(self, policy: str):
        name = f"qos_overrides.{self.topic}.subscription.{policy}"
        return self.node.get_parameter(name).value if self.node.has_parameter(name) else None

    def _subscribe(self, qos: QoSProfile, first: bool = False) -> None:
        options = None
        if self._overridable and first:
            options = QoSOverridingOptions.with_default_policies()
        elif self._overridable:   # re-subscribing: keep the user's depth/history overrides
            depth, history = self._param("depth"), self._param("history")
            if depth is not None:
                qos.depth = int(depth)
            if history is not None:
                qos.history = HistoryPolicy[str(history).upper()]
        if self.sub is not None:
            self.node.destroy_subscription(self.sub)
            self.sub = None
        asked = qos.reliability   # rclpy applies qos_overrides to `qos` in place
        # No default QoS event handlers: a following subscription adapts to the offers itself,
        # and rclpy's default "incompatible QoS" handler is a waitable that a
        # MultiThreadedExecutor may still add to its wait set while the subscription is
        # destroyed here (re-subscribe, a switch to /compressed): InvalidHandle, "destruction
        # was requested". The "message lost" handler alone, where asked for (`on_lost`): the
        # one signal of frames that never arrive; it leaves the wait set quietly when that
        # race comes (`_tolerant`).
        events = no_event_handlers("subscription") if self.on_lost is None else \
            lost_samples_handler(self.on_lost)
        self.sub = self.node.create_subscription(
            self.msg_type, self.topic, self.callback, qos, callback_group=self.group,
            raw=self.raw, qos_overriding_options=options, **events)
        for handler in self.sub.event_handlers:
            _tolerant(handler)
        self.qos = qos
        if first and options is not None:
            rel = self._param("reliability")
            if rel is not None and ReliabilityPolicy[str(rel).upper()] != asked:
                self.qos.reliability = ReliabilityPolicy[str(rel).upper()]
                self.follow = False     # the user chose with qos_overrides: keep it
            depth = self._param("depth")
            if depth is not None:
                self.qos.depth = int(depth)

    def offered(self) -> list[QoSProfile]:
        """The QoS every current publisher of the topic offers."""
        return [i.qos_profile for i in self.node.get_publishers_info_by_topic(self.topic)]

    def poll(self) -> None:
        """Re-subscribe if the publishers now call for another reliability/durability."""
        if not self.follow or not self.node.context.ok():
            return
        try:
            offers = self.offered()
        except RCLError:        # the context went invalid between the check and the call
            return              # (Ctrl-C while the timer fired): nothing to follow any more
        if self.sub is None and not offers:
            return
        want = matching_qos(offers, self.base)
        have = self.qos
        if have is not None and (want.reliability, want.durability) == (
                have.reliability, have.durability):
            return
        self._subscribe(want, first=self.sub is None and have is None)
        self.status = (f"{self.topic}: subscribed {describe(self.qos)} "
                       f"({len(offers)} publisher(s))")
        if self.on_change is not None:
            self.on_change(self)

    def destroy(self) -> None:
        if self._timer is not None:
            self.node.destroy_timer(self._timer)
            self._timer = None
        if self.sub is not None:
            self.node.destroy_subscription(self.sub)
            self.sub = None
