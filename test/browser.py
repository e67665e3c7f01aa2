"""Headless Chromium driven over the DevTools protocol, for tests of what a person sees.

Needs Debian's `chromium` (scripts/test.sh installs it when it can); `find_chromium()` is None
without it. Uses the `websockets` client the project already depends on.
"""
from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page. `with Browser() as b: b.open(url); b.eval(js)`."""

    def __init__(self, width: int = 1280, height: int = 860):
        exe = find_chromium()
        if exe is None:
            raise RuntimeError("chromium is not installed (apt-get install chromium)")
        self._profile = tempfile.mkdtemp(prefix="vd-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--window-size={width},{height}",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            m = re.search(r"DevTools listening on ws://[\d.]+:(\d+)/", line)
            port = int(m.group(1)) if m else None
        if port is None:
            self.close()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024))
        self._ids = itertools.count(1)
        self.console: list[str] = []
        self.call("Runtime.enable")
        self.call("Page.enable")

    def call(self, method: str, **params) -> dict:
        """One DevTools command; its result (events that come meanwhile are kept or dropped)."""
        i = next(self._ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("method") == "Runtime.exceptionThrown":
                self.console.append(json.dumps(msg["params"]["exceptionDetails"])[:500])
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> bool:
        """Poll until the expression is truthy in the page."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.eval(expression):
                    return True
            except RuntimeError:
                pass         # the page is still loading
            time.sleep(0.2)
        return False

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        stack = getattr(self, "_stack", None)
        if stack is not None:
            stack.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
