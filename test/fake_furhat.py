"""A fake Furhat Remote API (REST) server on 127.0.0.1 for tests, on the stdlib.

Records every call as (method, path, params) in `calls`; answers {"success", "message"}.
GET /furhat/listen takes its result from `listen_results` (a queue of texts or the statuses
SILENCE/INTERRUPTED/FAILED), waiting up to `listen_wait` seconds, then SILENCE.
POST /furhat/say?blocking=true lasts `say_seconds` unless /furhat/say/stop comes first.
`stop()` takes the robot down; `start()` on the same port brings it back. Paths in
`fail_paths` answer HTTP 500 (the client raises ApiException); paths in `hang_paths` answer
only after that many seconds (a robot part that does not answer). A JSON body (a gesture
definition) is kept in the call's params as "body", with the time it came as "t".
"""
from __future__ import annotations

import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit


class FakeFurhat:
    def __init__(self, port: int = 0, say_seconds: float = 0.05, listen_wait: float = 0.3):
        self.port = port
        self.say_seconds = say_seconds
        self.listen_wait = listen_wait
        self.calls: list[tuple[str, str, dict]] = []
        self.listen_results: "queue.Queue[str]" = queue.Queue()
        self.fail_paths: set[str] = set()    # answer these with HTTP 500 (-> ApiException)
        self.hang_paths: dict[str, float] = {}  # path -> seconds before answering
        # GET /furhat/users: [{"id": "1", "location": {"x": .., "y": .., "z": ..}}, ...]
        self.users: list[dict] = []
        self._lock = threading.Lock()
        self._say_stop = threading.Event()
        self._listen_stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- control
    def start(self) -> "FakeFurhat":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._say_stop.set()
            self._listen_stop.set()
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None
            self._say_stop.clear()
            self._listen_stop.clear()

    def paths(self) -> list[str]:
        with self._lock:
            return [p for _, p, _ in self.calls]

    def sequence(self) -> list[str]:
        """Calls as short strings, e.g. "attend user=CLOSEST", "listen", "say Hello"."""
        out = []
        with self._lock:
            calls = list(self.calls)
        for _, path, q in calls:
            name = path.removeprefix("/furhat/").replace("/", "_") or "root"
            if name == "attend":
                arg = " ".join(f"{k}={v}" for k, v in q.items() if k not in ("t", "body"))
                out.append(f"attend {arg}")
            elif name == "say":
                out.append(f"say {q.get('text', '')}")
            elif name == "gesture":
                out.append(f"gesture {q.get('name', '') or q.get('body', {}).get('name', '')}")
            else:
                out.append(name)
        return out

    def wait_for(self, predicate, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.01)
        return bool(predicate(self))

    # ---------------------------------------------------------------- protocol
    def _handle(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(req.path)
        params = dict(parse_qsl(url.query))
        length = int(req.headers.get("Content-Length") or 0)
        params["t"] = time.monotonic()
        if length:
            body = req.rfile.read(length)
            try:
                params["body"] = json.loads(body)
            except ValueError:
                pass
        with self._lock:
            self.calls.append((method, url.path, params))
        path = url.path
        if path in self.hang_paths:
            time.sleep(self.hang_paths[path])
        if path in self.fail_paths:
            self._reply(req, 500, {"success": False, "message": "internal error"})
        elif path == "/furhat/listen" and method == "GET":
            self._listen_stop.clear()
            message = "SILENCE"
            deadline = time.monotonic() + self.listen_wait
            while time.monotonic() < deadline and not self._listen_stop.is_set():
                try:
                    message = self.listen_results.get(timeout=0.02)
                    break
                except queue.Empty:
                    pass
            else:
                if self._listen_stop.is_set():
                    message = "INTERRUPTED"
            self._reply(req, 200, {"success": True, "message": message})
        elif path == "/furhat/say" and method == "POST":
            if params.get("blocking", "").lower() == "true":
                self._say_stop.clear()
                self._say_stop.wait(self.say_seconds)
            self._reply(req, 200, {"success": True, "message": ""})
        elif path == "/furhat/say/stop":
            self._say_stop.set()
            self._reply(req, 200, {"success": True, "message": ""})
        elif path == "/furhat/listen/stop":
            self._listen_stop.set()
            self._reply(req, 200, {"success": True, "message": ""})
        elif path == "/furhat/users":
            with self._lock:
                users = list(self.users)
            self._reply(req, 200, users)
        elif path in ("/furhat/attend", "/furhat/gesture", "/furhat/voice", "/furhat/led"):
            self._reply(req, 200, {"success": True, "message": ""})
        else:
            self._reply(req, 404, {"success": False, "message": f"no such endpoint {path}"})

    @staticmethod
    def _reply(req: BaseHTTPRequestHandler, code: int, body) -> None:
        data = json.dumps(body).encode()
        try:
            req.send_response(code)
            req.send_header("Content-Type", "application/json")
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
        except OSError:
            pass
