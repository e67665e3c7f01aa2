"""events_node: gestures, arrivals, departures and scene changes from the fast camera stream.

Subscribes to ``camera/stream/image_raw`` (and its image_transport ``/compressed`` companion;
the camera node publishes the stream when ``publish_rate`` > 0) and publishes
``camera/events`` (vision_dialogue_interfaces/VisualEvent): wave, raised_hand, point, thumbs_up,
arrived, left, scene_change, each with a short sentence. The manager puts them into the
prompt timeline between frames. Detection: perception/events.py (MediaPipe faces, pose and
hands, whose weights ship in the wheel). At most ``max_rate`` frames a second are looked at;
the newest frames win when the detector falls behind.

    events_node --ros-args -p max_rate:=8.0 -p kinds:="[wave, arrived, left]"
"""
from __future__ import annotations

from vision_dialogue.common.frame_intake import FrameIntake
from vision_dialogue.common.health import OK, WARN, Health
from vision_dialogue_interfaces.msg import VisualEvent
from vision_dialogue.perception.events import (EVENT_KINDS, WAVE_MIN_RATE, EventConfig,
                                               EventDetector)
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros.frame_node import FrameAnalysisNode
from vision_dialogue.ros.image_input import ImageTopicInput
from vision_dialogue.ros.image_msgs import DEFAULT_MAX_PIXELS, ImageConversionError
from vision_dialogue.ros.managed import MANAGED_PARAM
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.params import Param, ParameterError, declare_params
from vision_dialogue.ros.qos import IMAGE_QOS_CHOICES
from vision_dialogue.ros.topics import STREAM_TOPIC, VISUAL_EVENTS_TOPIC

STREAM_CHECK_S = 10.0


def _kinds(value) -> str | None:
    unknown = [k for k in value if k not in EVENT_KINDS]
    return f"unknown {unknown}; known: {list(EVENT_KINDS)}" if unknown else None


_D = EventConfig()      # the detector's defaults are the parameters' defaults

PARAMS = [
    Param("max_rate", 8.0, "Frames looked at per second, at most (the stream may be faster).",
          range=(0.5, 60.0)),
    Param("kinds", list(EVENT_KINDS), "Which events to publish.", check=_kinds),
    Param("confirm_frames", _D.confirm_frames,
          "Frames in a row a pointing or thumbs-up hand, or a changed "
          "view, must be seen.", range=(1, 100)),
    Param("presence_frames", _D.presence_frames,
          "Frames in a row a new number of people must hold before it "
          "is an arrival or a departure.", range=(1, 100)),
    Param("hold", _D.hold_s, "Seconds an open hand or an arm must stay up to be a raised hand.",
          range=(0.1, 30.0)),
    Param("still_glimpses", _D.still_glimpses,
          "Frames in which a raised hand must be seen still before it is a raised hand "
          "(fewer cannot tell it from a wave).", range=(1, 100)),
    Param("wave_window", _D.wave_window_s, "Seconds in which a hand must swing to be a wave.",
          range=(0.3, 10.0)),
    Param("wave_swings", _D.wave_swings, "Changes of direction of the hand that make a wave.",
          range=(1, 20)),
    Param("wave_amplitude", _D.wave_amplitude,
          "Smallest swing counted, as a fraction of the image width.",
          range=(0.005, 0.5)),
    Param("cooldown", _D.cooldown_s,
          "Seconds before an event of the same kind is published again.",
          range=(0.1, 3600.0)),
    Param("scene_change_level", _D.scene_change_level,
          "Mean grey-level difference of 32x24 thumbnails that "
          "is a changed view.", range=(1.0, 255.0)),
    Param("image_qos", "auto", "QoS of the stream subscriptions: auto = follow the camera's, "
          "sensor_data or reliable.", choices=IMAGE_QOS_CHOICES),
    Param("max_image_pixels", DEFAULT_MAX_PIXELS, "Largest image (width x height) decoded.",
          range=(64, 10 ** 9)),
    MANAGED_PARAM,
]


class EventsNode(FrameAnalysisNode):
    """The event detector's ROS side: stream frames in, VisualEvent messages out.

    A managed node (ros/managed.py): configure builds the detector (its MediaPipe models),
    activate takes stream frames, deactivate ignores them (the models stay), cleanup frees them.
    """

    WHAT = "events"

    def __init__(self, detector: EventDetector | None = None, **kwargs):
        super().__init__(kwargs.pop("node_name", "events_node"), **kwargs)
        self.params = p = declare_params(self, PARAMS)
        try:
            self.config = EventConfig(
                confirm_frames=p["confirm_frames"], presence_frames=p["presence_frames"],
                hold_s=p["hold"], still_glimpses=p["still_glimpses"],
                wave_window_s=p["wave_window"], wave_swings=p["wave_swings"],
                wave_amplitude=p["wave_amplitude"], cooldown_s=p["cooldown"],
                scene_change_level=p["scene_change_level"], kinds=tuple(p["kinds"]))
        except ValueError as e:
            raise ParameterError(str(e)) from None
        self._given = detector
        self._dropped_before = 0         # frames dropped while busy, at the last health check
        self.pub = self.create_publisher(VisualEvent, VISUAL_EVENTS_TOPIC, 10)
        self.intake = FrameIntake(self.look, min_interval=1.0 / p["max_rate"], backlog=2,
                                  errors=(ImageConversionError, ValueError),
                                  warn=self.get_logger().warning, what="stream frame")
        self.stream = ImageTopicInput(self, STREAM_TOPIC, self.intake, p["image_qos"],
                                      p["max_image_pixels"], taking=lambda: self.active)
        topic = self.stream.topic
        self._stream_check = self.create_timer(STREAM_CHECK_S, lambda: self._check_stream(topic))
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(p["managed"])

    # --- lifecycle (ros/managed.py) ------------------------------------------------------
    def configure(self) -> None:
        self.detector = self._given or EventDetector(self.config)
        loaded = self.detector.warm_up()
        self.get_logger().info(f"event models loaded: {', '.join(loaded) or 'none'}")

    def activate(self) -> None:
        self.get_logger().info(
            f"events from {self.stream.topic} at up to {self.params['max_rate']:g} Hz: "
            f"{', '.join(self.params['kinds'])} -> {self.resolve_topic_name(VISUAL_EVENTS_TOPIC)}")

    def free_models(self) -> None:
        if self.detector is not None:
            self.detector.close()
        self.detector = None

    def exit_summary(self) -> str:
        return (f"events: {self.work.total} frames analysed of {self.intake.received} "
                f"received ({self.intake.dropped} dropped while busy), {self.published} events")

    def _health(self) -> list[Health]:
        """Analysing the stream (rate, time per frame), or nothing publishes it."""
        inactive = self.lifecycle_health("events", self.work.values())
        if inactive:
            return inactive
        topic, values = self.stream.topic, {**self.work.values(), "events": self.published}
        if not (self.count_publishers(topic) or self.count_publishers(topic + "/compressed")):
            return [Health("events", WARN, f"nothing publishes {topic} (the camera's "
                           "publish_rate is 0?)", values)]
        dropped, self._dropped_before = self.intake.dropped - self._dropped_before, \
            self.intake.dropped
        if dropped and float(values["rate (Hz)"]) < WAVE_MIN_RATE:
            return [Health("events", WARN, f"{values['rate (Hz)']} frames/s analysed, "
                           f"{dropped} dropped while busy: too few to see a wave (at least "
                           f"{WAVE_MIN_RATE:g}); the CPU is busy", values)]
        return [Health("events", OK, f"{values['rate (Hz)']} frames/s analysed", values)]

    def _check_stream(self, topic: str) -> None:
        """Once: say so when nothing publishes the stream (a camera with publish_rate 0)."""
        self._stream_check.cancel()
        if not (self.count_publishers(topic) or self.count_publishers(topic + "/compressed")):
            self.get_logger().warning(
                f"nothing publishes {topic} after {STREAM_CHECK_S:g} s: set the camera's "
                "publish_rate (e.g. -p publish_rate:=8.0), or remap camera/stream/image_raw "
                "to a camera topic")

    def look_at(self, bgr, stamp_ns: int) -> None:
        """One frame through the detector, its events published."""
        for event in self.detector.observe(bgr, stamp_ns / 1e9):
            msg = VisualEvent(kind=event.kind, text=event.text, where=event.where,
                              confidence=float(event.confidence))
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 10 ** 9)
            msg.header.frame_id = self.stream.frame_id
            self.pub.publish(msg)
            self.published += 1
            self.get_logger().info(f"seen: {event.text}")


def main(args=None):
    return run_node(lambda: EventsNode(), "events_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
