"""Furhat's cameras as camera sources (the camera/sources.py interface).

The ZeroMQ feed and the Realtime API's camera. ROS-free.
"""
from __future__ import annotations

import time

from vision_dialogue.camera.sources import MAX_IMAGE_PIXELS, CameraSource, CapturedFrame, \
    SourceContext, SourceError, decode_jpeg
from vision_dialogue.common.images import DEFAULT_MAX_PIXELS
from vision_dialogue.variants import Param, nonempty


FURHAT_HOST = Param("furhat_host", "127.0.0.1", "Furhat robot host for "
                    "source=furhat/furhat_realtime.", check=nonempty)
SOURCE_TIMEOUT = Param("source_timeout", 5.0, "Seconds without data from a Furhat source "
                       "before it counts as failed.", range=(0.1, 3600.0))


class FurhatFeedSource(CameraSource):
    """The Furhat camera feed over ZeroMQ (`furhat.camera_feed.FurhatCameraFeed`).

    read() returns the newest JPEG frame if it is newer than the last one read, else None;
    with no message from the robot for `timeout` seconds it raises SourceError (robot
    unreachable or feed disabled). on_users receives the user data (see FurhatCameraFeed).
    """

    kind = "furhat"
    ROBOT_HOST_PARAM = FURHAT_HOST.name
    PARAMS = [FURHAT_HOST,
              Param("furhat_camera_port", 3000, "Port of the Furhat camera feed (ZeroMQ).",
                    range=(1, 65535)),
              SOURCE_TIMEOUT, MAX_IMAGE_PIXELS]

    @classmethod
    def from_params(cls, p, ctx: SourceContext) -> "FurhatFeedSource":
        return cls(p["furhat_host"], p["furhat_camera_port"], timeout=p["source_timeout"],
                   on_users=ctx.on_users, logger=ctx.logger, max_pixels=p["max_image_pixels"])

    def __init__(self, host: str, port: int = 3000, timeout: float = 5.0,
                 on_users=None, logger=None, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.host, self.port, self.timeout = host, int(port), float(timeout)
        self.max_pixels = int(max_pixels)
        self.on_users, self.logger = on_users, logger
        self.feed = None
        self._last_seq = 0

    def describe(self) -> str:
        return f"Furhat camera feed tcp://{self.host}:{self.port}"

    def open(self) -> None:
        from vision_dialogue.furhat.camera_feed import FurhatCameraFeed

        self.close()
        self.feed = FurhatCameraFeed(self.host, self.port, on_users=self.on_users,
                                     logger=self.logger)
        self.feed.start()
        self._last_seq = 0

    def read(self) -> CapturedFrame | None:
        if self.feed is None:
            raise SourceError("Furhat camera feed is not open")
        latest = self.feed.latest()
        now = time.monotonic_ns()
        last = self.feed.last_message_ns or self.feed.started_ns or now
        if now - last > self.timeout * 1e9:
            what = "no message" if self.feed.last_message_ns is None else "nothing new"
            raise SourceError(f"{what} from the Furhat camera feed {self.feed.endpoint} for "
                              f"{self.timeout:g} s (robot unreachable, or camera feed not "
                              "enabled under Settings > External feeds)", reopen=False)
        if latest is None or latest[2] == self._last_seq:
            return None
        jpeg, stamp_ns, seq = latest
        self._last_seq = seq
        img = decode_jpeg(jpeg, self.max_pixels)
        if img is None:
            raise SourceError(f"corrupt or oversized JPEG frame from {self.feed.endpoint}",
                              reopen=False)
        return CapturedFrame(img, stamp_ns, jpeg=jpeg, index=seq)

    def close(self) -> None:
        if self.feed is not None:
            self.feed.stop()
        self.feed = None


class FurhatRealtimeSource(CameraSource):
    """Frames from the Furhat Realtime API, one ``request.camera.once`` per read.

    Through `vision_dialogue.furhat.realtime.FurhatRealtimeClient`.
    """

    kind = "furhat_realtime"
    ROBOT_HOST_PARAM = FURHAT_HOST.name
    PARAMS = [FURHAT_HOST,
              Param("furhat_realtime_port", 9000, "Port of the Furhat Realtime API (websocket).",
                    range=(1, 65535)),
              Param("furhat_realtime_key", "", "Furhat Realtime API key (empty: none)."),
              SOURCE_TIMEOUT, MAX_IMAGE_PIXELS]

    @classmethod
    def from_params(cls, p, ctx: SourceContext) -> "FurhatRealtimeSource":
        return cls(p["furhat_host"], p["furhat_realtime_port"], key=p["furhat_realtime_key"],
                   timeout=p["source_timeout"], logger=ctx.logger,
                   max_pixels=p["max_image_pixels"])

    def __init__(self, host: str, port: int = 9000, key: str = "", timeout: float = 5.0,
                 logger=None, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.host, self.port, self.key = host, int(port), key or None
        self.max_pixels = int(max_pixels)
        self.timeout, self.logger = float(timeout), logger
        self.client = None
        self._index = 0

    def describe(self) -> str:
        return f"Furhat Realtime API camera ws://{self.host}:{self.port}"

    def open(self) -> None:
        from vision_dialogue.furhat.realtime import FurhatRealtimeClient, FurhatRealtimeError

        self.close()
        client = FurhatRealtimeClient(self.host, self.port, self.key, timeout=self.timeout,
                                      reconnect=False)
        try:
            client.connect()
        except FurhatRealtimeError as e:
            client.close()
            raise SourceError(str(e)) from None
        self.client = client

    def read(self) -> CapturedFrame | None:
        from vision_dialogue.furhat.realtime import FurhatRealtimeError

        if self.client is None:
            raise SourceError("Furhat Realtime API camera is not open")
        try:
            jpeg = self.client.camera_once()
        except FurhatRealtimeError as e:
            raise SourceError(f"Furhat Realtime API camera: {e}",
                              reopen=not self.client.connected) from None
        stamp = time.time_ns()
        img = decode_jpeg(jpeg, self.max_pixels)
        if img is None:
            raise SourceError(f"corrupt or oversized JPEG frame from {self.describe()}",
                              reopen=False)
        self._index += 1
        return CapturedFrame(img, stamp, jpeg=jpeg, index=self._index - 1)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None
