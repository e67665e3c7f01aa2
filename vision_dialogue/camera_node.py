"""camera_node: publishes camera frames (and Furhat user data) for the conversation manager.

Topics (relative, remappable):
- ``camera/image_raw`` (sensor_msgs/Image, bgr8) and ``camera/image_raw/compressed``
  (sensor_msgs/CompressedImage, jpeg): one frame every ``frame_period`` seconds, the stream
  the manager consumes.
- ``camera/stream/image_raw`` (+ ``/compressed``): only when ``publish_rate`` > 0, every frame
  at that rate, for other consumers (face tracking, visualisation).
- ``camera/users`` (vision_dialogue/DetectedUsers): user data of the Furhat camera feed.

Images use sensor-data QoS (best effort, depth 5; ``qos_overrides.<topic>.publisher.*``
parameters change it), carry the acquisition time on the node's clock (bag time under
``use_sim_time``) and ``frame_id``. The compressed topics follow the resolved image topics
(image_transport naming): remapping ``camera/image_raw`` moves ``/compressed`` with it. A failing source logs one error, is retried with exponential backoff and
publishes nothing meanwhile; the node keeps running. See docs/camera.md.
"""
from __future__ import annotations

import threading
import time

import cv2
import numpy as np
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from rclpy.qos_overriding_options import QoSOverridingOptions
from sensor_msgs.msg import CompressedImage, Image

from vision_dialogue.camera_sources import (CameraSource, EndOfStream, Frame, SourceError,
                                            make_source)
from vision_dialogue.image_msgs import stamp_from_ns, to_compressed_msg, to_image_msg
from vision_dialogue.msg import DetectedUsers
from vision_dialogue.node_runner import run_node
from vision_dialogue.ros_params import Param, ParameterError, declare_params

SOURCES = ("webcam", "video", "folder", "furhat", "furhat_realtime")


def _nonempty(v) -> str | None:
    return None if str(v).strip() else "must not be empty"


PARAMS = [
    Param("source", "webcam", "Where frames come from.", choices=SOURCES, read_only=True),
    Param("video_path", "", "Video file for source=video (a missing file is retried, not "
          "a startup error).", read_only=True),
    Param("video_mode", "realtime", "realtime: play the file at its fps and publish the "
          "current frame each tick; step: one file frame per tick.",
          choices=("realtime", "step"), read_only=True),
    Param("loop", True, "Restart the video/folder at its end (else stop publishing).",
          read_only=True),
    Param("folder_path", "", "Folder of .png/.jpg images for source=folder (natural name "
          "order).", read_only=True),
    Param("furhat_host", "127.0.0.1", "Furhat robot host for source=furhat/furhat_realtime.",
          read_only=True),
    Param("furhat_camera_port", 3000, "Port of the Furhat camera feed (ZeroMQ).",
          range=(1, 65535), read_only=True),
    Param("furhat_realtime_port", 9000, "Port of the Furhat Realtime API (websocket).",
          range=(1, 65535), read_only=True),
    Param("furhat_realtime_key", "", "Furhat Realtime API key (empty: none).", read_only=True),
    Param("frame_period", 5.0, "Seconds between frames on camera/image_raw (the paper's "
          "5 s).", range=(1e-3, 86400.0), read_only=True),
    Param("publish_rate", 0.0, "Hz of the extra camera/stream/* topics; 0 = no stream "
          "topics.", range=(0.0, 240.0), read_only=True),
    Param("frame_id", "camera", "frame_id of published headers.", check=_nonempty,
          read_only=True),
    Param("width", 0, "Resize to this width (0 = native; with height 0 keeps aspect).",
          range=(0, 16384), read_only=True),
    Param("height", 0, "Resize to this height (0 = native; with width 0 keeps aspect).",
          range=(0, 16384), read_only=True),
    Param("jpeg_quality", 85, "JPEG quality of compressed images.", range=(1, 100),
          read_only=True),
    Param("publish_compressed", True, "Also publish <topic>/compressed (JPEG).",
          read_only=True),
    Param("source_timeout", 5.0, "Seconds without data from a Furhat source before it "
          "counts as failed.", range=(0.1, 3600.0), read_only=True),
    Param("retry_initial", 1.0, "First retry delay (s) after a source failure.",
          range=(0.01, 3600.0), read_only=True),
    Param("retry_max", 30.0, "Maximum retry delay (s); the delay doubles up to it.",
          range=(0.01, 3600.0), read_only=True),
]


def _cross_check(v: dict) -> str | None:
    if v["source"] == "video" and not v["video_path"].strip():
        return "video_path: required when source=video"
    if v["source"] == "folder" and not v["folder_path"].strip():
        return "folder_path: required when source=folder"
    if v["source"].startswith("furhat") and not v["furhat_host"].strip():
        return "furhat_host: required when source=" + v["source"]
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


def resize(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize to width x height; a 0 keeps the aspect ratio; both 0 = unchanged."""
    h, w = img.shape[:2]
    if not width and not height:
        return img
    if not height:
        height = max(1, round(h * width / w))
    if not width:
        width = max(1, round(w * height / h))
    if (width, height) == (w, h):
        return img
    interp = cv2.INTER_AREA if width * height < w * h else cv2.INTER_LINEAR
    return cv2.resize(img, (width, height), interpolation=interp)


class CameraNode(Node):
    """Publishes frames from one camera source; see the module docstring."""

    def __init__(self, node_name: str = "camera_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._source: CameraSource | None = None
        self._opened = False
        self.p = declare_params(self, PARAMS, _cross_check)
        try:
            dev = self.declare_parameter(
                "device", "0", ParameterDescriptor(
                    description="Webcam: OpenCV index (0) or device path (/dev/video0).",
                    dynamic_typing=True, read_only=True)).value
        except ParameterException as e:
            raise ParameterError(f"device: invalid value ({e})") from None
        self.device = _device(dev)
        self._log = self.get_logger()

        self.pub_image, self.pub_compressed = self._image_publishers("camera/image_raw")
        self.pub_stream = self.pub_stream_compressed = None
        if self.p["publish_rate"] > 0:
            self.pub_stream, self.pub_stream_compressed = self._image_publishers(
                "camera/stream/image_raw")
        self.pub_users = self.create_publisher(
            DetectedUsers, "camera/users", QoSProfile(depth=10))

        period = self.p["frame_period"]
        rate = self.p["publish_rate"]
        self.tick_period = min(period, 1.0 / rate) if rate > 0 else period
        # counters, for monitoring and tests
        self.frames_published = 0     # frames sent on camera/image_raw
        self.stream_published = 0     # frames sent on camera/stream/image_raw
        self.failures = 0             # failed open/read attempts
        self.errors_logged = 0        # error lines logged (once per failure episode)
        self.ended = False
        self._failing = False
        self._delay = 0.0
        self._retry_at = 0.0
        self._logged: set[str] = set()
        self._last_period_pub: float | None = None

        self._source = self._make_source()   # opened (and re-opened) by the acquisition thread
        self._log.info(f"camera source: {self._source.describe()}, frame every "
                       f"{period:g} s on {self.pub_image.topic_name}"
                       + (f", stream at {rate:g} Hz" if rate > 0 else ""))
        # Acquisition runs on its own thread paced by the wall clock (a camera is a real-time
        # device): it never blocks the executor, and costs less than a 30 Hz ROS timer.
        self._stop = threading.Event()
        self.context.on_shutdown(self.close)
        self._thread = threading.Thread(target=self._run, name="camera-acquisition",
                                        daemon=True)
        self._thread.start()

    def _image_publishers(self, topic: str):
        """(raw, compressed or None) publishers; the compressed one on <resolved topic>/compressed
        as image_transport names it, both with overridable sensor-data QoS."""
        resolved = self.resolve_topic_name(topic)
        overridable = QoSOverridingOptions.with_default_policies()
        raw = self.create_publisher(Image, resolved, qos_profile_sensor_data,
                                    qos_overriding_options=overridable)
        comp = None
        if self.p["publish_compressed"]:
            comp = self.create_publisher(CompressedImage, resolved + "/compressed",
                                         qos_profile_sensor_data,
                                         qos_overriding_options=overridable)
        return raw, comp

    def _clock_stamp(self, wall_ns: int):
        """A source's wall-clock acquisition time on the node's clock (sim time aware)."""
        age = max(0, time.time_ns() - int(wall_ns))
        return stamp_from_ns(max(0, self.get_clock().now().nanoseconds - age))

    def _run(self) -> None:
        """Tick every tick_period (the first one right away); late ticks are skipped, never
        bunched up."""
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as e:  # noqa: BLE001 - e.g. publishing during shutdown
                # Only _stop here, never context.ok(): a context shutdown holds the context's
                # lock while it destroys this node, and close() then joins this thread.
                if self._stop.is_set():
                    break
                self._log.error(f"camera tick failed: {e!r}", throttle_duration_sec=10.0)
            next_t += self.tick_period
            now = time.monotonic()
            if next_t < now:
                next_t = now + self.tick_period - ((now - next_t) % self.tick_period)
            self._stop.wait(next_t - now)

    # ------------------------------------------------------------------ source handling
    def _make_source(self) -> CameraSource:
        p = self.p
        kind = p["source"]
        if kind == "webcam":
            return make_source(kind, device=self.device)
        if kind == "video":
            return make_source(kind, path=p["video_path"], mode=p["video_mode"],
                               loop=p["loop"])
        if kind == "folder":
            return make_source(kind, path=p["folder_path"], loop=p["loop"])
        if kind == "furhat":
            return make_source(kind, host=p["furhat_host"], port=p["furhat_camera_port"],
                               timeout=p["source_timeout"], on_users=self._on_users,
                               logger=self._log)
        return make_source(kind, host=p["furhat_host"], port=p["furhat_realtime_port"],
                           key=p["furhat_realtime_key"], timeout=p["source_timeout"],
                           logger=self._log)

    def _fail(self, err: SourceError, now: float) -> None:
        self.failures += 1
        msg = str(err)
        if not self._failing:
            self._failing = True
            self._delay = self.p["retry_initial"]
        else:
            self._delay = min(self._delay * 2.0, self.p["retry_max"])
        if msg not in self._logged:   # one error per distinct failure, not one per tick
            self._logged.add(msg)
            self.errors_logged += 1
            self._log.error(f"camera source failed: {msg}; publishing nothing and retrying "
                            f"with backoff ({self.p['retry_initial']:g} s doubling up to "
                            f"{self.p['retry_max']:g} s)")
        else:
            self._log.debug(f"camera source still failing: {msg}; retry in {self._delay:g} s")
        if err.reopen and self._source is not None:
            self._source.close()
            self._opened = False
        self._retry_at = now + self._delay

    def _tick(self) -> None:
        with self._lock:
            if self._closed or self.ended:
                return
            now = time.monotonic()
            if now < self._retry_at:
                return
            try:
                if not self._opened:
                    if self._source is None:
                        self._source = self._make_source()
                    self._source.open()
                    self._opened = True
                frame = self._source.read()
            except EndOfStream:
                self.ended = True
                self._log.info(f"{self._source.describe()} finished (loop is off); no more "
                               "frames will be published")
                self._source.close()
                self._opened = False
                return
            except SourceError as e:
                self._fail(e, now)
                return
            except Exception as e:  # noqa: BLE001 - never let a source kill the node
                self._fail(SourceError(f"unexpected {type(e).__name__}: {e}"), now)
                return
            if self._failing:
                self._failing = False
                self._logged.clear()
                self._log.info(f"camera source recovered: {self._source.describe()}")
            if frame is not None:
                self._publish(frame, now)

    # ------------------------------------------------------------------ publishing
    def _due(self, now: float) -> bool:
        """Whether camera/image_raw is due: always at ticks of frame_period; with a faster
        stream tick, when frame_period has passed (minus half a tick of scheduling jitter)."""
        if self._last_period_pub is None or self.pub_stream is None:
            return True
        return now - self._last_period_pub >= self.p["frame_period"] - self.tick_period / 2

    def _publish(self, frame: Frame, now: float) -> None:
        img = resize(frame.image, self.p["width"], self.p["height"])
        jpeg = frame.jpeg if img is frame.image else None   # re-encode only when resized
        stamp = self._clock_stamp(frame.stamp_ns)
        fid = self.p["frame_id"]
        targets = []
        if self._due(now):
            targets.append((self.pub_image, self.pub_compressed, True))
            self._last_period_pub = now
        if self.pub_stream is not None:
            targets.append((self.pub_stream, self.pub_stream_compressed, False))
        raw_msg = comp_msg = None
        for pub_raw, pub_comp, is_period in targets:
            # the frame_period topic always publishes; the stream only when someone listens
            if is_period or pub_raw.get_subscription_count() > 0:
                if raw_msg is None:
                    raw_msg = to_image_msg(img, stamp=stamp, frame_id=fid)
                pub_raw.publish(raw_msg)
            if pub_comp is not None and (is_period or pub_comp.get_subscription_count() > 0):
                if comp_msg is None:
                    try:
                        comp_msg = to_compressed_msg(img, stamp=stamp, frame_id=fid,
                                                     quality=self.p["jpeg_quality"], jpeg=jpeg)
                    except ValueError as e:
                        self._log.warning(f"JPEG encoding failed, compressed frame skipped: {e}",
                                          throttle_duration_sec=60.0)
                        continue
                pub_comp.publish(comp_msg)
            if is_period:
                self.frames_published += 1
            else:
                self.stream_published += 1

    def _on_users(self, data, stamp_ns: int) -> None:
        """Furhat user data (receive thread) -> camera/users."""
        from vision_dialogue.furhat_camera import users_to_msg

        if self._closed:
            return
        try:
            self.pub_users.publish(users_to_msg(data, self._clock_stamp(stamp_ns),
                                                self.p["frame_id"]))
        except Exception as e:  # noqa: BLE001 - e.g. publishing after shutdown
            self._log.warning(f"cannot publish camera/users: {e}", throttle_duration_sec=60.0)

    def close(self) -> None:
        """Stop acquisition and the source (threads, devices); called on shutdown."""
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
            t = self._thread
            if t is not None and t is not threading.current_thread():
                t.join(timeout=5.0)
        with self._lock:
            self._closed = True
            if self._source is not None:
                self._source.close()
            self._opened = False

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(args=None):
    return run_node(lambda: CameraNode(), "camera_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
