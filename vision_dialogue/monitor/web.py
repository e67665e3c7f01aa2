"""The monitor's web server (aiohttp): the page, its data, updates pushed as server-sent events.

Its routes::

    GET /              the page (static/index.html; no CDN, works offline)
    GET /static/NAME   its script and style sheet
    GET /api/state     SessionView.snapshot() as JSON
    GET /events        server-sent events: one `state` event with the snapshot at once and after
                       every change (at most `max_rate` per second)
    GET /frames/ID.jpg a frame's thumbnail
    GET /images/N.jpg  the N-th image a tool made

The server runs its own asyncio loop on a thread, so a ROS node (or a plain script) keeps its
own threads. ROS-free.
"""
from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from aiohttp import web

from vision_dialogue.monitor.session import SessionView

STATIC_DIR = Path(__file__).with_name("static")
#: the page's files, by name -> content type. Served by name only, so a symlink install
#: (colcon --symlink-install links each file into the source tree) works like a copied one,
#: and no other name, path or planted link under static/ is reachable.
STATIC_FILES = {"index.html": "text/html", "app.js": "text/javascript",
                "style.css": "text/css"}


class MonitorServer:
    """Serves `view` on http://host:port/ from a background thread.

    `start()` raises OSError (the port is taken, the address is not this machine's) before it
    returns, so a node can fail at startup naming the parameter.
    """

    def __init__(self, view: SessionView, host: str = "127.0.0.1", port: int = 8765,
                 max_rate: float = 4.0):
        self.view, self.host, self.port, self.max_rate = view, host, int(port), max_rate
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/events", self._events)
        app.router.add_get("/frames/{frame_id:\\d+}.jpg", self._frame)
        app.router.add_get("/images/{index:\\d+}.jpg", self._image)
        app.router.add_get("/static/{name}", self._static)
        return app

    def start(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self._open())
            except BaseException as e:  # noqa: BLE001 - handed to start()
                failure.append(e)
                ready.set()
                return
            ready.set()
            self._loop.run_until_complete(self._serve())

        self._thread = threading.Thread(target=run, name="vd-monitor-web", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]

    async def _open(self) -> None:
        self._stopping = asyncio.Event()
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:      # an ephemeral port (tests): the one the OS gave
            self.port = site._server.sockets[0].getsockname()[1]

    async def _serve(self) -> None:
        await self._stopping.wait()
        await self._runner.cleanup()

    def stop(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(5)

    # --- handlers ------------------------------------------------------------------------
    async def _index(self, request: web.Request) -> web.Response:
        return web.FileResponse(STATIC_DIR / "index.html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound(text="no such file")
        return web.Response(body=(STATIC_DIR / name).read_bytes(),
                            content_type=STATIC_FILES[name], charset="utf-8",
                            headers={"Cache-Control": "no-cache"})

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(self.view.snapshot())

    async def _frame(self, request: web.Request) -> web.Response:
        return _jpeg(self.view.thumbnail(int(request.match_info["frame_id"])), "frame")

    async def _image(self, request: web.Request) -> web.Response:
        return _jpeg(self.view.tool_image(int(request.match_info["index"])), "image")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        seen = -1
        loop = asyncio.get_running_loop()
        try:
            while not self._stopping.is_set():
                if self.view.version != seen:
                    snap = self.view.snapshot()
                    seen = snap["version"]
                    await resp.write(f"event: state\ndata: {json.dumps(snap)}\n\n".encode())
                    await asyncio.sleep(1.0 / self.max_rate)
                    continue
                # wait for a change on a worker thread (the view's condition), at most 5 s,
                # then send a comment line so proxies and the browser keep the stream open
                changed = await loop.run_in_executor(None, self.view.wait_change, seen, 5.0)
                if changed == seen:
                    await resp.write(b": keep-alive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp


def _jpeg(data: bytes | None, what: str) -> web.Response:
    """A JPEG response (images do not change: cached an hour), or 404."""
    if data is None:
        raise web.HTTPNotFound(text=f"no such {what}")
    return web.Response(body=data, content_type="image/jpeg",
                        headers={"Cache-Control": "max-age=3600"})
