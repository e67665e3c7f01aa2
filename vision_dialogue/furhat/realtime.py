"""A synchronous client for the Furhat Realtime API (websocket JSON events), with no ROS.

The Realtime API runs on the robot at ``ws://HOST:9000/v1/events``. The client sends
``request.*`` events and receives ``response.*`` events; a ``request_id`` sent with a request is
echoed in the responses to it, so concurrent requests are matched to their answers. The first
message on a connection must be ``request.auth`` (answered by ``response.auth``).

Usage::

    client = FurhatRealtimeClient("192.168.1.10", key="secret")
    client.connect()
    client.attend_user("closest")
    text = client.listen(language="en-US", timeout=10.0)   # "" on silence
    client.speak(f"You said {text}")                      # blocks until speech ends
    jpeg = client.camera_once()                             # JPEG bytes
    client.start_camera(lambda jpeg, stamp_ns: ...)         # stream, latest frame wins
    client.close()

Threads: one receive thread reads the socket and completes pending requests; one dispatch
thread runs user callbacks (``on_event``, camera), so a slow callback never blocks replies and
camera frames that arrive while a callback runs are coalesced to the newest one. Callbacks may
call ``speak``/``listen`` (they run outside the receive thread). When an established connection
drops, the client reconnects in the background with exponential backoff (logged once per
outage), re-authenticates and restarts the camera stream if it was on. Calls made while
disconnected raise ``FurhatRealtimeError`` immediately.

All event names and fields live in ``EVENTS`` below (taken from the ``furhat-realtime-api``
package's event table); change them there if a robot version differs.
"""
from __future__ import annotations

import base64
import binascii
import itertools
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from websockets.exceptions import ConnectionClosed, InvalidHandshake, WebSocketException
from websockets.sync.client import connect as ws_connect

from vision_dialogue.common.images import JPEG_MAGIC

# Event names of the Furhat Realtime API, in one place.
EVENTS = {
    "auth": "request.auth",                      # {key}
    "auth_ok": "response.auth",                  # {access: bool, scope}
    "speak": "request.speak.text",               # {text, abort}
    "speak_stop": "request.speak.stop",
    "speak_start": "response.speak.start",
    "speak_end": "response.speak.end",           # {aborted?}
    "listen_config": "request.listen.config",    # {languages: [..]}
    "listen_start": "request.listen.start",      # {partial, concat, stop_no_speech, ...}
    "listen_stop": "request.listen.stop",
    "listen_started": "response.listen.start",
    "listen_end": "response.listen.end",
    "hear_start": "response.hear.start",
    "hear_partial": "response.hear.partial",     # {text}
    "hear_end": "response.hear.end",             # {text}
    "attend_user": "request.attend.user",        # {user_id: "closest" | id}
    "attend_location": "request.attend.location",  # {x, y, z} metres, robot frame
    "gesture": "request.gesture.start",          # {name, intensity, duration, monitor}
    "gesture_end": "response.gesture.end",
    "face_params": "request.face.params",        # {params: {GAZE_PAN: deg, SMILE_OPEN: 0..1}}
    "voice_config": "request.voice.config",      # {name, language, input_language}
    "voice_status": "response.voice.status",
    "camera_once": "request.camera.once",
    "camera_start": "request.camera.start",
    "camera_stop": "request.camera.stop",
    "camera_data": "response.camera.data",       # {image: base64 JPEG}
}


log = logging.getLogger("vision_dialogue.furhat.realtime")


class FurhatRealtimeError(RuntimeError):
    """The robot could not be reached, refused us, or sent something unusable."""


class FurhatAuthError(FurhatRealtimeError):
    """``response.auth`` said access was denied (wrong or missing key)."""


class FurhatRealtimeTimeout(FurhatRealtimeError, TimeoutError):
    """No answer to a request within its timeout."""


@dataclass
class _Waiter:
    types: frozenset
    request_id: str | None
    done: threading.Event = field(default_factory=threading.Event)
    event: dict | None = None
    error: Exception | None = None


def decode_camera_image(event: dict) -> bytes:
    """The JPEG bytes in a ``response.camera.data`` event; raises FurhatRealtimeError."""
    data = event.get("image") or event.get("data")
    if not isinstance(data, str) or not data:
        raise FurhatRealtimeError("camera event without an 'image' field")
    if data.startswith("data:"):
        data = data.partition(",")[2]
    try:
        jpeg = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError) as e:
        raise FurhatRealtimeError(f"camera image is not valid base64: {e}") from None
    if not jpeg.startswith(JPEG_MAGIC):
        raise FurhatRealtimeError(f"camera image is not a JPEG (starts {jpeg[:4].hex()})")
    return jpeg


def _close_quietly(ws) -> None:
    try:
        ws.close()
    except Exception:  # noqa: BLE001 - closing a broken socket
        pass


class _PendingRequests:
    """Requests waiting for their answer: matched by type and request id (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self._ids = itertools.count(1)

    def add(self, reply_types: Iterable[str]) -> _Waiter:
        waiter = _Waiter(frozenset(reply_types), f"vd-{next(self._ids)}")
        with self._lock:
            self._waiters.append(waiter)
        return waiter

    def remove(self, waiter: _Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def complete(self, event: dict) -> None:
        """The waiter this event answers: with an id, its own; without, the oldest of its type."""
        etype, rid = event.get("type"), event.get("request_id")
        with self._lock:
            match = next((w for w in self._waiters if etype in w.types
                          and (rid is None or rid == w.request_id)), None)
            if match is not None:
                self._waiters.remove(match)
        if match is not None:
            match.event = event
            match.done.set()

    def fail_all(self, error: Exception) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.error = error
            w.done.set()


class _EventDispatch:
    """User callbacks on a thread of their own, never on the receive thread.

    `listeners` hear every event in order (a bounded queue); `camera` gets the newest camera
    frame (frames that came while it ran are coalesced). `closing`: the client's stop flag.
    """

    def __init__(self, closing: threading.Event, logger: logging.Logger):
        self.closing, self.log = closing, logger
        self.listeners: list[Callable[[dict], None]] = []
        self.camera: Callable[[bytes, int], None] | None = None
        self._cv = threading.Condition()
        self._queue: deque = deque(maxlen=1000)
        self._frame: tuple[bytes, int] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="furhat-rt-dispatch",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Wake the thread (the client set `closing`) and join it."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            with self._cv:
                self._cv.notify_all()
            thread.join(timeout=2.0)
        self._thread = None

    def put(self, event: dict) -> None:
        frame = None
        if event.get("type") == EVENTS["camera_data"] and self.camera is not None:
            try:
                frame = (decode_camera_image(event), time.time_ns())
            except FurhatRealtimeError as e:
                self.log.warning(f"furhat realtime: dropping a camera frame: {e}")
        if not self.listeners and frame is None:
            return
        with self._cv:
            if frame is not None:
                self._frame = frame
            if self.listeners:
                self._queue.append(event)
            self._cv.notify()

    def _loop(self) -> None:
        while not self.closing.is_set():
            with self._cv:
                while not self._queue and self._frame is None:
                    if self.closing.is_set():
                        return
                    self._cv.wait(0.5)
                event = self._queue.popleft() if self._queue else None
                frame, self._frame = (
                    (self._frame, None) if event is None else (None, self._frame))
            if event is not None:
                for cb in list(self.listeners):
                    try:
                        cb(event)
                    except Exception as e:  # noqa: BLE001 - a callback must not kill the thread
                        self.log.error(f"furhat realtime: event callback failed: {e!r}")
            camera = self.camera
            if frame is not None and camera is not None:
                try:
                    camera(*frame)
                except Exception as e:  # noqa: BLE001
                    self.log.error(f"furhat realtime: camera callback failed: {e!r}")


class FurhatRealtimeClient:
    """Blocking client for the Furhat Realtime API; safe to call from several threads.

    host, port: the robot (port 9000 on a real robot). key: the Realtime API key, if the robot
    requires one. timeout: seconds to wait for connecting and for a request's answer.
    speak_timeout: seconds a blocking ``speak`` may take. reconnect: reconnect in the
    background when an established connection drops, with backoff from ``backoff_initial``
    doubling up to ``backoff_max`` seconds.
    """

    def __init__(self, host: str, port: int = 9000, key: str | None = None,
                 timeout: float = 5.0, *, path: str = "/v1/events", speak_timeout: float = 60.0,
                 reconnect: bool = True, backoff_initial: float = 0.5, backoff_max: float = 10.0,
                 logger: logging.Logger | None = None):
        if timeout <= 0 or speak_timeout <= 0:
            raise ValueError("timeout and speak_timeout must be > 0")
        self.host, self.port, self.key = host, int(port), key
        self.url = f"ws://{host}:{int(port)}{path}"
        self.timeout, self.speak_timeout = float(timeout), float(speak_timeout)
        self.reconnect, self.backoff_initial, self.backoff_max = (
            reconnect, float(backoff_initial), float(backoff_max))
        self.log = logger or log
        self._ws = None
        self._send_lock = threading.Lock()
        self._pending = _PendingRequests()
        self._closing = threading.Event()
        self._connected = threading.Event()
        self._recv_thread: threading.Thread | None = None
        self._dispatch = _EventDispatch(self._closing, self.log)

    # ---------------------------------------------------------------- connection
    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until connected (e.g. after a reconnect); returns whether it is."""
        return self._connected.wait(timeout)

    def connect(self) -> None:
        """Open the websocket and authenticate; raises FurhatRealtimeError (or FurhatAuthError)."""
        if self.connected:
            return
        self._closing.clear()
        self._dispatch.start()
        self._open()

    def _open(self) -> None:
        try:
            ws = ws_connect(self.url, open_timeout=self.timeout, close_timeout=1.0,
                            proxy=None, max_size=16 * 2**20, compression=None,
                            legacy=True)  # a plain connection that this client closes
        except (OSError, InvalidHandshake, WebSocketException, TimeoutError) as e:
            raise FurhatRealtimeError(f"cannot connect to {self.url}: {e}") from None
        if self._closing.is_set():         # close() ran while we were connecting
            ws.close()
            raise FurhatRealtimeError("client closed")
        self._ws = ws
        self._recv_thread = threading.Thread(target=self._receive_loop, args=(ws,),
                                             name="furhat-rt-recv", daemon=True)
        self._recv_thread.start()
        auth = {"type": EVENTS["auth"]}
        if self.key:
            auth["key"] = self.key
        try:
            reply = self._request(auth, [EVENTS["auth_ok"]], self.timeout, require_connected=False)
        except FurhatRealtimeError:
            _close_quietly(ws)       # not connected yet: the flag is set after the answer
            raise
        if reply.get("access") is False:
            _close_quietly(ws)
            raise FurhatAuthError(f"{self.url}: authentication refused "
                                  f"({'wrong key' if self.key else 'a key is required'})")
        self._connected.set()
        if self._dispatch.camera is not None:  # resume a stream after a reconnect
            self._send({"type": EVENTS["camera_start"]})

    def close(self) -> None:
        """Close the connection and stop all threads (no reconnect afterwards)."""
        self._closing.set()
        ws = self._ws
        if ws is not None:
            if self.connected and self._dispatch.camera is not None:
                try:
                    self._send({"type": EVENTS["camera_stop"]})
                except FurhatRealtimeError:
                    pass
            self._connected.clear()
            _close_quietly(ws)
        self._pending.fail_all(FurhatRealtimeError("client closed"))
        recv = self._recv_thread
        if recv is not None and recv is not threading.current_thread():
            recv.join(timeout=2.0)
        self._dispatch.stop()

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------- requests
    def speak(self, text: str, abort: bool = False, wait: bool = True) -> dict | None:
        """Say `text`.

        abort=True interrupts current speech. wait=True blocks until the ``response.speak.end``
        event (returned; ``aborted`` tells if it was stopped).
        """
        event = {"type": EVENTS["speak"], "text": str(text), "abort": bool(abort)}
        if not wait:
            self._send(event)
            return None
        return self._request(event, [EVENTS["speak_end"]], self.speak_timeout)

    def stop_speaking(self) -> None:
        """Stop current speech and drop queued speech (``request.speak.stop``)."""
        self._send({"type": EVENTS["speak_stop"]})

    def listen(self, language: str | None = None, timeout: float | None = None,
               **options: Any) -> str:
        """Listen for one user utterance and return its text ("" on silence or no result).

        language: e.g. "en-US" (sent as ``request.listen.config`` first). timeout: seconds to
        wait for the end of the utterance (default: the listen's own no-speech timeout plus
        30 s); on timeout listening is stopped and FurhatRealtimeTimeout is raised.
        options: extra ``request.listen.start`` fields, e.g. ``stop_robot_start=False`` to keep
        listening while the robot speaks (for barge-in), ``no_speech_timeout=8.0``.
        """
        if language:
            self._send({"type": EVENTS["listen_config"], "languages": [language]})
        event = {"type": EVENTS["listen_start"], "partial": False, "concat": True,
                 "stop_no_speech": True, "stop_user_end": True}
        event.update(options)
        wait = timeout if timeout is not None else float(event.get("no_speech_timeout", 8.0)) + 30
        try:
            reply = self._request(event, [EVENTS["hear_end"], EVENTS["listen_end"]], wait)
        except FurhatRealtimeTimeout:
            self.stop_listening()
            raise
        if reply.get("type") == EVENTS["hear_end"]:
            return str(reply.get("text") or "").strip()
        return ""

    def stop_listening(self) -> None:
        """Stop listening (``request.listen.stop``); a pending ``listen`` returns ""."""
        try:
            self._send({"type": EVENTS["listen_stop"]})
        except FurhatRealtimeError:
            pass

    def attend_user(self, user_id: str = "closest") -> None:
        """Look at a user: "closest", "random" or a user id."""
        self._send({"type": EVENTS["attend_user"], "user_id": str(user_id)})

    def attend_location(self, x: float, y: float, z: float) -> None:
        """Look at a point (metres, robot frame: x left, y up, z forward)."""
        self._send({"type": EVENTS["attend_location"], "x": float(x), "y": float(y),
                    "z": float(z)})

    def gesture(self, name: str, intensity: float = 1.0, duration: float = 1.0,
                wait: bool = False) -> None:
        """Perform a named gesture such as "Nod" or "GazeAway"; wait=True blocks until done."""
        event = {"type": EVENTS["gesture"], "name": str(name), "intensity": float(intensity),
                 "duration": float(duration), "monitor": bool(wait)}
        if wait:
            self._request(event, [EVENTS["gesture_end"]], self.timeout + duration)
        else:
            self._send(event)

    def face_params(self, params: dict) -> None:
        """Set face parameters directly (blend shapes, GAZE_PAN/TILT, NECK_*) at once."""
        self._send({"type": EVENTS["face_params"], "params": dict(params)})

    def set_voice(self, name: str | None = None, language: str | None = None) -> None:
        """Change the voice and/or language (``request.voice.config``)."""
        event: dict[str, Any] = {"type": EVENTS["voice_config"], "input_language": True}
        if name:
            event["name"] = name
        if language:
            event["language"] = language
        self._send(event)

    def camera_once(self) -> bytes:
        """One camera frame as JPEG bytes (``request.camera.once``)."""
        reply = self._request({"type": EVENTS["camera_once"]}, [EVENTS["camera_data"]],
                              self.timeout)
        return decode_camera_image(reply)

    def start_camera(self, callback: Callable[[bytes, int], None]) -> None:
        """Stream camera frames.

        Callback(jpeg_bytes, stamp_ns) on the dispatch thread, with stamp_ns the wall-clock receipt
        time. Frames arriving while the callback runs are coalesced (the newest wins). The stream
        resumes by itself after a reconnect.
        """
        self._dispatch.camera = callback
        self._dispatch.start()
        self._send({"type": EVENTS["camera_start"]})

    def stop_camera(self) -> None:
        """Stop the camera stream."""
        self._dispatch.camera = None
        if self.connected:
            self._send({"type": EVENTS["camera_stop"]})

    def on_event(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        """Call callback(event_dict) for every event received (on the dispatch thread).

        Returns a function that removes the callback.
        """
        listeners = self._dispatch.listeners
        listeners.append(callback)
        self._dispatch.start()
        return lambda: callback in listeners and listeners.remove(callback)

    # ---------------------------------------------------------------- internals
    def _send(self, event: dict) -> None:
        ws = self._ws
        if ws is None or (not self.connected and event.get("type") != EVENTS["auth"]):
            raise FurhatRealtimeError(f"not connected to {self.url}")
        try:
            with self._send_lock:
                ws.send(json.dumps(event))
        except (ConnectionClosed, OSError) as e:
            raise FurhatRealtimeError(f"connection to {self.url} lost: {e}") from None

    def _request(self, event: dict, reply_types: Iterable[str], timeout: float,
                 require_connected: bool = True) -> dict:
        if require_connected and not self.connected:
            raise FurhatRealtimeError(f"not connected to {self.url}")
        waiter = self._pending.add(reply_types)
        event = dict(event, request_id=waiter.request_id)
        try:
            self._send(event)
            if not waiter.done.wait(timeout):
                awaited = "/".join(sorted(waiter.types))
                raise FurhatRealtimeTimeout(
                    f"no {awaited} for {event['type']} within {timeout:g} s")
        finally:
            self._pending.remove(waiter)
        if waiter.error is not None:
            raise waiter.error
        return waiter.event  # type: ignore[return-value]

    def _receive_loop(self, ws) -> None:
        while True:
            try:
                raw = ws.recv()
            except (ConnectionClosed, OSError, WebSocketException):
                break
            if isinstance(raw, bytes):
                continue  # binary frames (audio) are not used here
            try:
                event = json.loads(raw)
            except ValueError:
                self.log.warning("furhat realtime: ignoring a non-JSON message")
                continue
            if not isinstance(event, dict):
                continue
            self._pending.complete(event)
            self._dispatch.put(event)
        if ws is not self._ws:
            return
        was_connected = self.connected
        self._connected.clear()
        self._pending.fail_all(FurhatRealtimeError(f"connection to {self.url} lost"))
        if was_connected and self.reconnect and not self._closing.is_set():
            self._reconnect_loop()

    def _reconnect_loop(self) -> None:
        self.log.warning(f"furhat realtime: connection to {self.url} lost; reconnecting")
        delay = self.backoff_initial
        while not self._closing.wait(delay):
            try:
                self._open()  # starts a new receive thread; this one ends
                self.log.info(f"furhat realtime: reconnected to {self.url}")
                return
            except FurhatRealtimeError as e:
                self.log.debug(f"furhat realtime: reconnect failed: {e}")
                delay = min(delay * 2, self.backoff_max)
