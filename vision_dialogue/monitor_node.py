"""monitor: a live web page of the conversation (node name `monitor`).

Serves http://127.0.0.1:8765/ (parameters `host`, `port`): the prompt timeline with frame
thumbnails (raw, being summarised, summarised), each summary beside the frames it replaced,
observations, the person's and the robot's lines with per-turn latency, tool calls, a plot of
the prompt size and latency per turn, the speech state, and the health of the LLM, the VFM
server and the camera. Updates are pushed to the page (server-sent events); the page needs no
internet.

Live, it reads the manager's `dialogue/events` (every transcript record as JSON, frames with a
thumbnail), `dialogue/speech_state`, people_node's `people/state` (who is in view, the match
and their consent) and whether `vfm/list_tools` answers. With
`transcript:=<run folder>` it shows a finished session from its transcript.jsonl and frames
instead (no topics needed).

    monitor                                        # then open http://127.0.0.1:8765/
    monitor --ros-args -p transcript:=runs/transcripts/20261122-101500-4242
    monitor --ros-args -p host:=0.0.0.0            # others on the network can watch: a choice
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String

from vision_dialogue.common.health import ERROR, OK, StatusBoard
from vision_dialogue.core.transcript import record_from_json
from vision_dialogue.monitor.session import HEALTH_PARTS, SessionView, load_run
from vision_dialogue_interfaces.msg import SpeechState
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.params import Param, ParameterError, declare_params
from vision_dialogue.ros.qos import LATCHED_QOS, RECORDS_QOS, SPEECH_STATE_QOS
from vision_dialogue.ros.teardown import DestroyedWhole
from vision_dialogue.ros.topics import DIAGNOSTICS_TOPIC, PEOPLE_STATE_TOPIC, RECORDS_TOPIC, \
    SPEECH_STATE_TOPIC
from vision_dialogue.ros.vfm_actions import LIST_TOOLS_SERVICE
from vision_dialogue_interfaces.srv import ListTools

SPEECH_STATES = {SpeechState.IDLE: "idle", SpeechState.LISTENING: "listening",
                 SpeechState.THINKING: "thinking", SpeechState.SPEAKING: "speaking"}


def _host(value) -> str | None:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return "must be an IP address such as 127.0.0.1 (this machine only) or 0.0.0.0 (all)"
    return None


PARAMS = [
    Param("host", "127.0.0.1", "Address the page is served on. 127.0.0.1: this machine only; "
          "0.0.0.0: anyone who can reach this machine (they see the camera frames).",
          check=_host),
    Param("port", 8765, "TCP port of the page (0: any free port, logged).", range=(0, 65535)),
    Param("port_tries", 20, "When the port is taken (another setup's monitor, say), try the "
          "next ones, up to this many; the log says which URL was served. 1: only `port`.",
          range=(1, 1000)),
    Param("transcript", "", "A finished run folder (runs/transcripts/...) to browse instead "
          "of the live session; empty: live."),
    Param("camera_timeout", 15.0, "No frame for this many seconds: the camera is shown as "
          "unhealthy.", range=(1.0, 3600.0)),
    Param("health_period", 2.0, "Seconds between health checks (camera age, VFM server).",
          range=(0.1, 60.0)),
    Param("max_items", 600, "Timeline entries kept by the page (the oldest go first).",
          range=(10, 100000)),
]


class MonitorNode(DestroyedWhole, Node):
    """The monitor's ROS side: topics in, SessionView + MonitorServer out."""

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop("node_name", "monitor"), **kwargs)
        self.params = p = declare_params(self, PARAMS)
        log = self.get_logger()
        if p["transcript"]:
            try:
                self.view = load_run(Path(p["transcript"]).expanduser(),
                                     max_items=p["max_items"])
            except (OSError, ValueError) as e:
                raise ParameterError(f"transcript: {e}") from None
        else:
            self.view = SessionView(max_items=p["max_items"])
            self._subscribe()
        self.server = self._serve(p["host"], p["port"], p["port_tries"])
        if self.server.port != p["port"] and p["port"]:
            log.warning(f"monitor: port {p['port']} is taken (another monitor?); serving on "
                        f"port {self.server.port} instead")
        if not ipaddress.ip_address(p["host"]).is_loopback:
            log.warning(f"monitor serves on {p['host']}: anyone who can reach this machine "
                        "can watch the conversation and the camera frames")
        log.info(f"monitor: {self.server.url}"
                 + (f" (session {p['transcript']})" if p["transcript"] else ""))

    def _serve(self, host: str, port: int, tries: int):
        """A started MonitorServer on `port` or, while it is taken, one of the next ports."""
        import errno

        from vision_dialogue.monitor.web import MonitorServer
        last = min(port + tries - 1, 65535) if port else 0
        candidate = port
        while True:
            server = MonitorServer(self.view, host, candidate)
            try:
                server.start()
                return server
            except OSError as e:
                if e.errno != errno.EADDRINUSE or candidate >= last:
                    raise ParameterError(f"port: cannot serve on {host}:{candidate} ({e})") \
                        from None
                candidate += 1

    def _subscribe(self) -> None:
        group = MutuallyExclusiveCallbackGroup()       # records are applied in order
        self.create_subscription(String, RECORDS_TOPIC, self._on_record, RECORDS_QOS,
                                 callback_group=group)
        self.create_subscription(SpeechState, SPEECH_STATE_TOPIC, self._on_speech,
                                 SPEECH_STATE_QOS, callback_group=group)
        self.vfm = self.create_client(ListTools, LIST_TOOLS_SERVICE)
        self.board = StatusBoard()
        self.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, self._on_diagnostics, 10,
                                 callback_group=group)
        self.create_timer(self.params["health_period"], self._check_health)
        self.create_subscription(String, PEOPLE_STATE_TOPIC, self._on_people, LATCHED_QOS,
                                 callback_group=group)

    def _on_record(self, msg: String) -> None:
        try:
            record = record_from_json(msg.data)
        except ValueError as e:
            self.get_logger().warning(f"{RECORDS_TOPIC}: unreadable record skipped ({e})",
                                      throttle_duration_sec=30.0)
            return
        self.view.ingest(record)

    def _on_people(self, msg: String) -> None:
        try:
            self.view.set_people(msg.data)
        except ValueError as e:
            self.get_logger().warning(f"{PEOPLE_STATE_TOPIC}: unreadable state skipped ({e})",
                                      throttle_duration_sec=30.0)

    def _on_speech(self, msg: SpeechState) -> None:
        self.view.set_speech_state(SPEECH_STATES.get(msg.state, str(msg.state)))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        """The nodes' own statuses decide the badges they name (the page says what they say)."""
        for s in msg.status:
            self.board.update(s.name, s.level[0], s.message)
        for part in HEALTH_PARTS:
            found = self.board.worst(part)
            if found is not None:
                self.view.set_health(part, {OK: True, ERROR: False}.get(found[0]), found[1])

    def _check_health(self) -> None:
        """For parts that publish no /diagnostics (older nodes, other stacks): look ourselves."""
        age = self.view.camera_age()
        if self.board.worst("camera") is None and age is not None and \
                age > self.params["camera_timeout"]:
            self.view.set_health("camera", False, f"no frame for {age:.0f} s")
        if self.board.worst("vfm") is not None:
            return
        if self.vfm.service_is_ready():
            self.view.set_health("vfm", True, "vfm_server answers")
        else:
            self.view.set_health("vfm", None, "no VFM server running (needed only for tools)")

    def close(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.stop()

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(args=None):
    return run_node(lambda: MonitorNode(), "monitor", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
