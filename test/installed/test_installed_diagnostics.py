"""/diagnostics from every node, as separate processes of the install tree.

A listener (this test's own participant, as rqt_robot_monitor or diagnostic_aggregator would
be) sees each node's named statuses; the LLM server stops and comes back; the camera's images
go away and come back.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request

from diagnostic_msgs.msg import DiagnosticArray

from fake_openai import FakeOpenAI
from installed.user_env import OwnParticipant, stop, until

OK, WARN, ERROR = 0, 1, 2
#: the statuses a full setup reports: "<node>: <task>"
EXPECTED = ("manager_node: llm", "manager_node: conversation", "camera_node: camera",
            "speech_node: speech", "detector_node: detector", "events_node: events",
            "vfm_server: vfm")


class Listener(OwnParticipant):
    """Keeps every status seen on /diagnostics: (stamp s, level, message) by name."""

    def __init__(self):
        super().__init__("diagnostics_listener")
        self.seen: dict[str, list[tuple[float, int, str]]] = {}
        self._lock = threading.Lock()
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on, 50)
        self.spin()

    def _on(self, msg: DiagnosticArray) -> None:
        t = msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9
        with self._lock:
            for s in msg.status:
                self.seen.setdefault(s.name, []).append((t, s.level[0], s.message))

    def last(self, name: str):
        with self._lock:
            return (self.seen.get(name) or [None])[-1]

    def first_after(self, name: str, since: float, level: int):
        """The first status of `name` stamped after `since` with `level` (None: not yet)."""
        with self._lock:
            return next((s for s in self.seen.get(name, []) if s[0] > since and s[1] == level),
                        None)


def test_every_node_reports_and_faults_show_within_seconds(installed, tmp_path, camera_images):
    images = camera_images
    fake = FakeOpenAI().start()
    port = fake.port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monitor_port = s.getsockname()[1]

    def page(part):
        """The monitor page's badge for `part`: (ok, detail)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/api/state",
                                        timeout=2) as r:
                h = json.load(r)["health"][part]
        except OSError:
            return None
        return h["ok"], h["detail"]
    env = dict(installed.env, OPENAI_API_KEY="sk-test")
    ros = ["--ros-args", "--log-level", "info"]
    exe = installed.exe
    procs = {
        "manager": installed.popen(exe("manager_node") + ros + [
            "-p", "llm_backend:=openai", "-p", f"base_url:={fake.base_url}",
            "-p", "model:=fake-vlm", "-p", "max_retries:=0", "-p", "probe_images:=false",
            "-p", f"transcript_dir:={tmp_path / 'transcripts'}"], env=env,
            log=tmp_path / "manager.log"),
        "camera": installed.popen(exe("camera_node") + ros + [
            "-p", "source:=folder", "-p", f"folder_path:={images}", "-p", "frame_period:=0.5",
            "-p", "publish_rate:=2.0", "-p", "retry_max:=1.0"], log=tmp_path / "camera.log"),
        "speech": installed.popen(exe("speech_node") + ros + ["-p", "backend:=terminal"],
                                  log=tmp_path / "speech.log", stdin=subprocess.PIPE),
        "detector": installed.popen(exe("detector_node") + ros, log=tmp_path / "detector.log"),
        "events": installed.popen(exe("events_node") + ros, log=tmp_path / "events.log"),
        "vfm": installed.popen(exe("vfm_server") + ros + [
            "-p", "load:=canny_cpu", "-p", f"image_dir:={tmp_path / 'store'}"],
            log=tmp_path / "vfm.log"),
        "monitor": installed.popen(exe("monitor") + ros + ["-p", f"port:={monitor_port}"],
                                   log=tmp_path / "monitor.log")}
    listener = Listener()
    try:
        # every node's statuses, with the healthy parts OK
        assert until(lambda: all(listener.last(n) for n in EXPECTED), 90), (
            sorted(listener.seen), {k: p.poll() for k, p in procs.items()})
        assert until(lambda: all(listener.last(n)[1] == OK for n in (
            "manager_node: llm", "camera_node: camera", "speech_node: speech",
            "events_node: events", "vfm_server: vfm")), 30), {
                n: listener.last(n) for n in EXPECTED}

        # the LLM server stops: ERROR within 5 s; it comes back on its port: OK again
        fake.close()
        stopped = time.time()
        assert until(lambda: listener.first_after(
            "manager_node: llm", stopped, ERROR), 20), listener.last("manager_node: llm")
        error = listener.first_after("manager_node: llm", stopped, ERROR)
        assert error[0] - stopped <= 5.0 and "unreachable" in error[2], error
        print(f"LLM server stopped: ERROR on /diagnostics after {error[0] - stopped:.1f} s")
        # the monitor page says what /diagnostics says
        assert until(lambda: (page("llm") or (None, ""))[0] is False, 10), page("llm")
        assert "manager_node: llm" in page("llm")[1] and "unreachable" in page("llm")[1]
        fake = FakeOpenAI(port=port).start()
        back = time.time()
        assert until(lambda: listener.first_after("manager_node: llm", back, OK), 20)
        assert listener.first_after("manager_node: llm", back, OK)[0] - back <= 5.0
        assert until(lambda: (page("llm") or (None, ""))[0] is True, 10), page("llm")

        # the camera's images go away: WARN, then ERROR; back: OK
        moved = shutil.move(str(images), str(tmp_path / "away"))
        gone = time.time()
        for level in (WARN, ERROR):
            assert until(lambda: listener.first_after(
                "camera_node: camera", gone, level), 20), listener.last("camera_node: camera")
        warn = listener.first_after("camera_node: camera", gone, WARN)
        error = listener.first_after("camera_node: camera", gone, ERROR)
        assert warn[0] < error[0] and error[0] - gone <= 10.0, (warn, error)
        print(f"camera images gone: WARN after {warn[0] - gone:.1f} s, ERROR after "
              f"{error[0] - gone:.1f} s")
        assert until(lambda: (page("camera") or (None, ""))[0] is False, 10)
        shutil.move(moved, str(images))
        returned = time.time()
        assert until(lambda: listener.first_after(
            "camera_node: camera", returned, OK), 20), listener.last("camera_node: camera")
    finally:
        listener.close()
        fake.close()
        codes = {name: stop(p) for name, p in procs.items()}
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in procs}
    assert all(c == 0 for c in codes.values()), (codes, {n: t[-1500:] for n, t in logs.items()})
    for name, text in logs.items():
        assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"
