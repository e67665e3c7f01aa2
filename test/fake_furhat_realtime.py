"""A fake Furhat Realtime API server (websocket on 127.0.0.1) for tests.

It speaks the event protocol of vision_dialogue.furhat.realtime.EVENTS: checks the auth key,
records every request, echoes `request_id`, answers speech with speak.start/speak.end after
`speak_seconds` (or at once with aborted=True on speak.stop / an abort), answers listens from
a script (`hear`: a list of texts; "" means silence -> listen.end only), and serves a real
JPEG for camera.once / camera.start.
"""
from __future__ import annotations

import base64
import json
import queue
import threading
import time

import cv2
import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import serve


def sample_jpeg(width: int = 320, height: int = 240) -> bytes:
    """A real JPEG photo (skimage's astronaut, resized)."""
    try:
        from skimage import data
        img = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR)
    except Exception:  # noqa: BLE001 - fall back to a gradient
        img = np.tile(np.arange(256, dtype=np.uint8), (256, 1))[:, :, None].repeat(3, 2)
    img = cv2.resize(img, (width, height))
    ok, enc = cv2.imencode(".jpg", img)
    assert ok
    return enc.tobytes()


class FakeFurhatRealtime:
    """Start with `.start()`, stop with `.stop()`; `.port`, `.received` (list of events)."""

    def __init__(self, key: str | None = None, speak_seconds: float = 0.05,
                 camera_fps: float = 20.0, port: int = 0):
        self.key = key
        self.speak_seconds = speak_seconds
        self.camera_fps = camera_fps
        self.jpeg = sample_jpeg()
        self.received: list[dict] = []
        self.hear: "queue.Queue[str]" = queue.Queue()
        self.listen_wait = 2.0        # how long a listen waits for a scripted result
        self._port = port
        self._server = None
        self._thread = None
        self._lock = threading.Lock()
        self.connections = 0

    # ---------------------------------------------------------------- control
    @property
    def port(self) -> int:
        return self._port

    def start(self) -> "FakeFurhatRealtime":
        self._server = serve(self._handle, "127.0.0.1", self._port, compression=None)
        self._port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._server = None

    def types(self) -> list[str]:
        with self._lock:
            return [e.get("type") for e in self.received]

    def wait_for(self, etype: str, count: int = 1, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.types().count(etype) >= count:
                return True
            time.sleep(0.01)
        return False

    # ---------------------------------------------------------------- protocol
    def _handle(self, ws) -> None:
        self.connections += 1
        state = {"speech": None, "camera": None, "listen": None}
        send_lock = threading.Lock()

        def send(event: dict) -> None:
            try:
                with send_lock:
                    ws.send(json.dumps(event))
            except (ConnectionClosed, OSError):
                pass

        try:
            first = json.loads(ws.recv())
            with self._lock:
                self.received.append(first)
            ok = first.get("type") == "request.auth" and (
                self.key is None or first.get("key") == self.key)
            send({"type": "response.auth", "access": ok, "scope": "all" if ok else "",
                  "request_id": first.get("request_id")})
            if not ok:
                return
            for raw in ws:
                event = json.loads(raw)
                with self._lock:
                    self.received.append(event)
                self._on_request(event, send, state)
        except (ConnectionClosed, OSError, ValueError):
            pass
        finally:
            for k in ("speech", "camera", "listen"):
                if state[k] is not None:
                    state[k].set()

    def _on_request(self, event: dict, send, state: dict) -> None:
        etype, rid = event.get("type"), event.get("request_id")
        if etype == "request.speak.text":
            if state["speech"] is not None:
                state["speech"].set()          # abort (or replace) current speech
            stop = threading.Event()
            state["speech"] = stop

            def speak():
                send({"type": "response.speak.start", "text": event.get("text"),
                      "request_id": rid})
                aborted = stop.wait(self.speak_seconds)
                send({"type": "response.speak.end", "text": event.get("text"),
                      "aborted": aborted, "request_id": rid})
            threading.Thread(target=speak, daemon=True).start()
        elif etype == "request.speak.stop":
            if state["speech"] is not None:
                state["speech"].set()
        elif etype == "request.listen.start":
            stop = threading.Event()
            state["listen"] = stop

            def listen():
                send({"type": "response.listen.start", "request_id": rid})
                text, deadline = "", time.monotonic() + self.listen_wait
                while not stop.is_set() and time.monotonic() < deadline:
                    try:
                        text = self.hear.get(timeout=0.02)
                        break
                    except queue.Empty:
                        pass
                if text:
                    send({"type": "response.hear.start", "request_id": rid})
                    send({"type": "response.hear.partial", "text": text.split()[0],
                          "request_id": rid})
                    send({"type": "response.hear.end", "text": text, "request_id": rid})
                send({"type": "response.listen.end", "request_id": rid})
            threading.Thread(target=listen, daemon=True).start()
        elif etype == "request.listen.stop":
            if state["listen"] is not None:
                state["listen"].set()
        elif etype == "request.camera.once":
            send({"type": "response.camera.data", "request_id": rid,
                  "image": base64.b64encode(self.jpeg).decode()})
        elif etype == "request.camera.start":
            if state["camera"] is not None:
                state["camera"].set()
            stop = threading.Event()
            state["camera"] = stop

            def stream():
                while not stop.wait(1.0 / self.camera_fps):
                    send({"type": "response.camera.data",
                          "image": base64.b64encode(self.jpeg).decode()})
            threading.Thread(target=stream, daemon=True).start()
        elif etype == "request.camera.stop":
            if state["camera"] is not None:
                state["camera"].set()
        elif etype == "request.gesture.start" and event.get("monitor"):
            send({"type": "response.gesture.end", "name": event.get("name"), "request_id": rid})
