"""camera_node: publishes camera frames (and Furhat user data) for the conversation manager.

Topics (relative, remappable):
- ``camera/image_raw`` (sensor_msgs/Image, bgr8) and ``camera/image_raw/compressed``
  (sensor_msgs/CompressedImage, jpeg): one frame every ``frame_period`` seconds, the stream
  the manager consumes.
- ``camera/stream/image_raw`` (+ ``/compressed``): only when ``publish_rate`` > 0, every frame
  at that rate, for other consumers (face tracking, visualisation).
- ``camera/users`` (vision_dialogue_interfaces/DetectedUsers): user data of the Furhat camera feed.

Frames use reliable QoS, depth 5 (ros/qos.py CAMERA_FRAME_QOS: at one frame in seconds, a
frame lost on the way to another host is sent again), the stream sensor-data QoS (best
effort, depth 5); ``qos_overrides.<topic>.publisher.*`` parameters change either. Images
carry the acquisition time on the node's clock (bag time under ``use_sim_time``) and
``frame_id``. The compressed topics follow the resolved image topics
(image_transport naming): remapping ``camera/image_raw`` moves ``/compressed`` with it.
Acquisition (camera/acquisition.py): a failing source logs one error, is retried with
exponential backoff and publishes nothing meanwhile; the node keeps running. With
``wait_for_listeners``, acquisition (a video's clock) starts once each named node subscribes
to one of the image topics: a demo's video and its script then start together. See
docs/camera.md.
"""
from __future__ import annotations

import time

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from rclpy.qos_overriding_options import QoSOverridingOptions
from sensor_msgs.msg import CompressedImage, Image

from vision_dialogue.camera.acquisition import Acquisition
from vision_dialogue.camera.sources import CAMERA_SOURCES, CameraSource, CapturedFrame, \
    SourceContext, SourceError
from vision_dialogue.common.health import OK, Health, by_age
from vision_dialogue.common.images import resize_to
from vision_dialogue.ros.dds import MAX_FRAME_BYTES
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue_interfaces.msg import DetectedUsers
from vision_dialogue.ros.image_msgs import stamp_from_ns, to_compressed_msg, to_image_msg
from vision_dialogue.ros.managed import MANAGED_PARAM, ConfigureError, ManagedNode
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.params import Param, ParameterError, declare_params, nonempty
from vision_dialogue.ros.qos import CAMERA_FRAME_QOS, no_event_handlers
from vision_dialogue.ros.topics import IMAGE_TOPIC, STREAM_TOPIC, USERS_TOPIC
from vision_dialogue.variants import AUTO

#: declared apart (ROS dynamic typing: an index or a path); listed for --help and the docs
EXTRA_PARAMS = (Param("device", "0", "Webcam: OpenCV index (0) or device path "
                      "(/dev/video0)."),)
#: longest the start waits, once every listener is in the graph, for the image publishers to
#: match their subscriptions (one that never matches must not hold the video)
LISTENER_MATCH_WAIT_S = 2.0
PARAMS = [
    Param("source", AUTO, "Where frames come from; auto: the video_path or folder_path given, "
          "else the webcam.", choices=CAMERA_SOURCES.choices()),
    Param("frame_period", 5.0, "Seconds between frames on camera/image_raw (the paper's "
          "5 s).", range=(1e-3, 86400.0)),
    Param("publish_rate", 0.0, "Hz of the extra camera/stream/* topics; 0 = no stream "
          "topics.", range=(0.0, 240.0)),
    Param("frame_id", "camera", "frame_id of published headers.", check=nonempty),
    Param("width", 0, "Resize to this width (0 = native; with height 0 keeps aspect).",
          range=(0, 16384)),
    Param("height", 0, "Resize to this height (0 = native; with width 0 keeps aspect).",
          range=(0, 16384)),
    Param("jpeg_quality", 85, "JPEG quality of compressed images.", range=(1, 100)),
    Param("publish_compressed", True, "Also publish <topic>/compressed (JPEG)."),
    Param("retry_initial", 1.0, "First retry delay (s) after a source failure.",
          range=(0.01, 3600.0)),
    Param("retry_max", 30.0, "Maximum retry delay (s); the delay doubles up to it.",
          range=(0.01, 3600.0)),
    Param("wait_for_listeners", [], "Nodes (by name) that must subscribe to one of the image "
          "topics before acquisition starts (a video then starts when they are ready: the "
          "demos' events node and scripted speech node); empty: at once.", array_of="string"),
    Param("wait_for_listeners_timeout", 600.0, "Seconds to wait for wait_for_listeners; "
          "then acquisition starts anyway, with a warning.", range=(0.0, 86400.0)),
]
PARAMS += CAMERA_SOURCES.params() + [MANAGED_PARAM]


def source_kind(v) -> str:
    """The source to start: a video_path or folder_path given means that file (variants)."""
    return CAMERA_SOURCES.choose(v)


def _cross_check(v: dict) -> str | None:
    """The chosen source's own checks, then the retry delays."""
    err = CAMERA_SOURCES.check(v)
    if err:
        return err
    if v["retry_max"] < v["retry_initial"]:
        return f"retry_max={v['retry_max']} is less than retry_initial={v['retry_initial']}"
    return None


def _device(value) -> int | str:
    """The device parameter: an int index, a digit string, or a device path."""
    if isinstance(value, bool) or value is None:
        raise ParameterError(f"device={value!r}: expected a camera index (int >= 0) or a path")
    if isinstance(value, int):
        if value < 0:
            raise ParameterError(f"device={value}: a camera index must be >= 0")
        return value
    if isinstance(value, str) and value.strip():
        s = value.strip()
        return int(s) if s.isdigit() else s
    raise ParameterError(f"device={value!r}: expected a camera index (int >= 0) or a path")


class CameraNode(ManagedNode):
    """Publishes frames from one camera source; see the module docstring.

    A managed node (ros/managed.py): configure makes the publishers and the source (managed,
    it also opens the source once: a missing file or device refuses the transition), activate
    starts acquisition, deactivate stops it and releases the device, cleanup removes the
    publishers.
    """

    def __init__(self, node_name: str = "camera_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._closed = False
        self.acquisition: Acquisition | None = None
        self.pub_image = self.pub_compressed = None
        self.pub_stream = self.pub_stream_compressed = self.pub_users = None
        self.params = declare_params(self, PARAMS, _cross_check)
        try:
            device = EXTRA_PARAMS[0]
            dev = self.declare_parameter(
                device.name, device.default, ParameterDescriptor(
                    description=device.description, dynamic_typing=True)).value
        except ParameterException as e:
            raise ParameterError(f"device: invalid value ({e})") from None
        self.device = _device(dev)
        self._log = self.get_logger()
        self._warned_fit = False
        self._listen_deadline = 0.0   # monotonic end of the wait for wait_for_listeners
        self._listed_at = 0.0         # when every listener was first in the graph
        self.frames_published = 0     # frames sent on camera/image_raw
        self.stream_published = 0     # frames sent on camera/stream/image_raw
        self.context.on_shutdown(self.close)
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(self.params["managed"])

    # --- lifecycle (ros/managed.py) ------------------------------------------------------
    def configure(self) -> None:
        if self.params["managed"]:          # a lifecycle manager wants to know now, not retries
            source = self._make_source()
            try:
                source.open()
            except SourceError as e:
                raise ConfigureError(f"{source.describe()}: {e}") from None
            finally:
                source.close()
        self.pub_image, self.pub_compressed = self._image_publishers(IMAGE_TOPIC,
                                                                     CAMERA_FRAME_QOS)
        if self.params["publish_rate"] > 0:
            self.pub_stream, self.pub_stream_compressed = self._image_publishers(
                STREAM_TOPIC, qos_profile_sensor_data)
        self.pub_users = self.create_publisher(
            DetectedUsers, USERS_TOPIC, QoSProfile(depth=10), **no_event_handlers("publisher"))

    def activate(self) -> None:
        """Start acquisition on its own thread, paced by the wall clock.

        A camera is a real-time device: the thread never blocks the executor, and costs less
        than a 30 Hz ROS timer.
        """
        self.acquisition = Acquisition(
            self._make_source, self._publish, frame_period=self.params["frame_period"],
            publish_rate=self.params["publish_rate"], retry_initial=self.params["retry_initial"],
            retry_max=self.params["retry_max"], logger=self._log)
        self.acquisition.source = self._make_source()   # opened by the acquisition thread
        rate, waits = self.params["publish_rate"], self._listeners_named()
        self._listen_deadline = self._listed_at = 0.0
        self._log.info(f"camera source: {self.acquisition.source.describe()}, frame every "
                       f"{self.params['frame_period']:g} s on {self.pub_image.topic_name}"
                       + (f", stream at {rate:g} Hz" if rate > 0 else "")
                       + (f"; starts once {', '.join(waits)} listen" if waits else ""))
        self.acquisition.start(self._listeners_ready if waits else None)

    def _listeners_ready(self) -> bool:
        """Whether each node of `wait_for_listeners` subscribes to an image topic.

        Or the wait is over (`wait_for_listeners_timeout`): then a warning, and true.
        """
        missing = self._listeners_missing()
        if not missing:
            return self._listeners_matched()
        if not self._listen_deadline:
            self._listen_deadline = time.monotonic() + self.params["wait_for_listeners_timeout"]
        if time.monotonic() < self._listen_deadline:
            return False
        self._log.warning(f"no subscription to the camera's images from {', '.join(missing)} "
                          f"after {self.params['wait_for_listeners_timeout']:g} s; "
                          "starting anyway")
        return True

    def _publishers_now(self) -> list:
        return [pub for pub in (self.pub_image, self.pub_compressed, self.pub_stream,
                                self.pub_stream_compressed) if pub is not None]

    def _listeners_missing(self) -> list[str]:
        there = {i.node_name for pub in self._publishers_now()
                 for i in self.get_subscriptions_info_by_topic(pub.topic_name)}
        return [n for n in self._listeners_named() if n not in there]

    def _listeners_named(self) -> list[str]:
        """wait_for_listeners without "" (bringup's none-left: an empty list has no type)."""
        return [n for n in self.params["wait_for_listeners"] if n]

    def _listeners_matched(self) -> bool:
        """Each image publisher has matched its subscriptions, the named ones settled, or late.

        The graph lists a subscription a moment before the publisher has matched it, and our
        nodes' image subscriptions start best effort and follow a reliable publisher a moment
        later with a new one: a frame sent before either went to no one, or to the one then
        destroyed (the demo's manager lost its first frame: 5 s). A subscription that never
        matches or settles holds the start `LISTENER_MATCH_WAIT_S` at most.
        """
        named = set(self._listeners_named())
        for pub in self._publishers_now():
            infos = self.get_subscriptions_info_by_topic(pub.topic_name)
            settled = all(i.qos_profile.reliability == pub.qos_profile.reliability
                          for i in infos if i.node_name in named)
            if pub.get_subscription_count() < len(infos) or not settled:
                break
        else:
            return True
        if not self._listed_at:
            self._listed_at = time.monotonic()
        return time.monotonic() - self._listed_at >= LISTENER_MATCH_WAIT_S

    def deactivate(self) -> None:
        """Stop capturing and release the device (publishers stay)."""
        if self.acquisition is not None:
            self.acquisition.close()
        self._log.info("camera inactive: capturing nothing, the device released")

    def cleanup(self) -> None:
        for pub in (self.pub_image, self.pub_compressed, self.pub_stream,
                    self.pub_stream_compressed, self.pub_users):
            if pub is not None:
                self.destroy_publisher(pub)
        self.pub_image = self.pub_compressed = None
        self.pub_stream = self.pub_stream_compressed = self.pub_users = None

    # counters of the acquisition, for monitoring and tests
    failures = property(lambda self: self.acquisition.failures)
    errors_logged = property(lambda self: self.acquisition.errors_logged)
    ended = property(lambda self: self.acquisition.ended)
    tick_period = property(lambda self: self.acquisition.tick_period)

    def _health(self) -> list[Health]:
        """The source: open and delivering every frame_period, failing, or finished."""
        a, period = self.acquisition, self.params["frame_period"]
        inactive = self.lifecycle_health("camera")
        if inactive is not None:
            return inactive
        values = {"source": a.source.describe() if a.source else "none",
                  "frames published": self.frames_published, "frame period (s)": period,
                  "failed attempts": a.failures}
        if a.ended:
            return [Health("camera", OK, "the source finished (loop is off)", values)]
        age = None if a.last_frame_at is None else a.clock() - a.last_frame_at
        level, message = by_age(age, period, "frame")
        if a.fault.since is not None:
            level, message = max(level, a.fault.level()), f"source failing: {a.fault.reason}"
        return [Health("camera", level, message, values)]

    def _image_publishers(self, topic: str, qos: QoSProfile):
        """Return the (raw, compressed or None) publishers of `topic`.

        The compressed one on <resolved topic>/compressed as image_transport names it, both with
        `qos`, overridable (qos_overrides.<topic>.publisher.*).
        """
        resolved = self.resolve_topic_name(topic)
        overridable = QoSOverridingOptions.with_default_policies()
        quiet = no_event_handlers("publisher")         # destroyed by a lifecycle clean-up
        raw = self.create_publisher(Image, resolved, qos, qos_overriding_options=overridable,
                                    **quiet)
        comp = None
        if self.params["publish_compressed"]:
            comp = self.create_publisher(CompressedImage, resolved + "/compressed", qos,
                                         qos_overriding_options=overridable, **quiet)
        return raw, comp

    def _clock_stamp(self, wall_ns: int):
        """A source's wall-clock acquisition time on the node's clock (sim time aware).

        Without sim time the node's clock is the wall clock: the stamp is the acquisition time
        itself (reading both clocks to convert put a loaded machine's pause between the two
        reads into the stamp: two frames 0.5 s apart were stamped 0.2 s apart).
        """
        clock = self.get_clock()
        if not clock.ros_time_is_active:
            return stamp_from_ns(int(wall_ns))
        age = max(0, time.time_ns() - int(wall_ns))
        return stamp_from_ns(max(0, clock.now().nanoseconds - age))

    def _make_source(self) -> CameraSource:
        ctx = SourceContext(device=self.device, on_users=self._on_users, logger=self._log)
        return CAMERA_SOURCES.load(source_kind(self.params)).from_params(self.params, ctx)

    # ------------------------------------------------------------------ publishing
    def _publish(self, frame: CapturedFrame, due: bool) -> None:
        """One acquired frame: on camera/image_raw when `due`, on the stream when it is on."""
        if self._closed or self.pub_image is None:
            return
        img = self._fit(resize_to(frame.image, self.params["width"], self.params["height"]))
        jpeg = frame.jpeg if img is frame.image else None   # re-encode only when resized
        out = _Outgoing(img, self._clock_stamp(frame.stamp_ns), self.params["frame_id"],
                        self.params["jpeg_quality"], jpeg, self._log)
        if due:
            out.send(self.pub_image, self.pub_compressed, always=True)
            self.frames_published += 1
        if self.pub_stream is not None:
            # the stream only when someone listens
            if out.send(self.pub_stream, self.pub_stream_compressed, always=False):
                self.stream_published += 1

    def _fit(self, img):
        """A raw frame larger than what crosses processes (config/fastdds.xml) would never arrive.

        Publish it downscaled to fit, and say so once.
        """
        if img.nbytes <= MAX_FRAME_BYTES:
            return img
        h, w = img.shape[:2]
        scale = (MAX_FRAME_BYTES / img.nbytes) ** 0.5
        out = resize_to(img, max(1, int(w * scale)), max(1, int(h * scale)))
        if not self._warned_fit:
            self._warned_fit = True
            self._log.warning(
                f"frames of {w}x{h} ({img.nbytes / 1e6:.1f} MB) are larger than a raw frame "
                f"that crosses processes ({MAX_FRAME_BYTES / 1e6:.1f} MB, 1920x1080 bgr8); "
                f"publishing them at {out.shape[1]}x{out.shape[0]} (set width/height to "
                "choose the size)")
        return out

    def _on_users(self, data, stamp_ns: int) -> None:
        """Furhat user data (receive thread) -> camera/users."""
        from vision_dialogue.ros.furhat_msgs import users_to_msg

        if self._closed:
            return
        try:
            self.pub_users.publish(users_to_msg(data, self._clock_stamp(stamp_ns),
                                                self.params["frame_id"]))
        except Exception as e:  # noqa: BLE001 - e.g. publishing after shutdown
            self._log.warning(f"cannot publish camera/users: {e}", throttle_duration_sec=60.0)

    def close(self) -> None:
        """Stop acquisition and the source (threads, devices); called on shutdown."""
        was_open, self._closed = not self._closed, True
        if self.acquisition is not None:
            self.acquisition.close()
        if was_open and self.pub_image is not None:
            # what was sent, for whoever checks what arrived (the log outlives the node)
            self._log.info(f"camera: {self.frames_published} frames published on "
                           f"{self.pub_image.topic_name}")

    def destroy_node(self):
        self.close()
        return super().destroy_node()


class _Outgoing:
    """One frame's messages, each built at most once for all the topics it goes to."""

    def __init__(self, img, stamp, frame_id: str, quality: int, jpeg: bytes | None, log):
        self.img, self.stamp, self.frame_id = img, stamp, frame_id
        self.quality, self.jpeg, self.log = quality, jpeg, log
        self._raw = self._comp = None

    def send(self, pub_raw, pub_comp, always: bool) -> bool:
        """Publish on the compressed, then the raw publisher.

        Unless `always`, only where someone subscribes. Whether anything went out. The small
        JPEG goes first: sent right after a raw frame's burst of UDP fragments, a best-effort
        reader on another host lost it with the burst (no repair); first, 96-99 % arrive
        (docs/robots.md, two hosts).
        """
        sent = False
        if pub_comp is not None and (always or pub_comp.get_subscription_count() > 0):
            if self._comp is None:
                try:
                    self._comp = to_compressed_msg(self.img, stamp=self.stamp,
                                                   frame_id=self.frame_id,
                                                   quality=self.quality, jpeg=self.jpeg)
                except ValueError as e:
                    self.log.warning(f"JPEG encoding failed, compressed frame skipped: {e}",
                                     throttle_duration_sec=60.0)
            if self._comp is not None:
                pub_comp.publish(self._comp)
                sent = True
        if always or pub_raw.get_subscription_count() > 0:
            if self._raw is None:
                self._raw = to_image_msg(self.img, stamp=self.stamp, frame_id=self.frame_id)
            pub_raw.publish(self._raw)
            sent = True
        return sent


def main(args=None):
    return run_node(lambda: CameraNode(), "camera_node", args, params=[*PARAMS, *EXTRA_PARAMS],
                    doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
