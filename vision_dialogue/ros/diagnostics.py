"""Each node's health on `/diagnostics`, as diagnostic_updater publishes it.

One `diagnostic_msgs/DiagnosticArray` every DIAGNOSTICS_PERIOD_S with one status per task, named
"<node name>: <task>" and with the node's full name as hardware_id, so `diagnostic_aggregator`
and `rqt_robot_monitor` group and show them without configuration. (No diagnostic_updater
wheel installs from PyPI; this is the part of it the nodes need.) A task that raises is
reported as an ERROR status of its own, never a crash.
"""
from __future__ import annotations

from typing import Callable, Iterable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from vision_dialogue.common.health import DIAGNOSTICS_PERIOD_S, ERROR, Health
from vision_dialogue.ros.topics import DIAGNOSTICS_TOPIC


class DiagnosticsPublisher:
    """Publishes `tasks()` on /diagnostics every `period` s from `node`'s timer."""

    def __init__(self, node, tasks: Callable[[], Iterable[Health]],
                 period: float = DIAGNOSTICS_PERIOD_S):
        self.node, self.tasks = node, tasks
        self.pub = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        self.timer = node.create_timer(period, self.publish)

    def publish(self) -> None:
        try:
            statuses = list(self.tasks())
        except Exception as e:  # noqa: BLE001 - health reporting must not take the node down
            statuses = [Health("diagnostics", ERROR, f"health check failed: {e!r}")]
        msg = DiagnosticArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.status = [self._status(h) for h in statuses]
        try:
            self.pub.publish(msg)
        except Exception as e:  # noqa: BLE001 - shutting down
            self.node.get_logger().debug(f"diagnostics not published: {e}")

    def _status(self, h: Health) -> DiagnosticStatus:
        s = DiagnosticStatus()
        s.level = bytes([h.level])
        s.name = f"{self.node.get_name()}: {h.task}"
        s.message = str(h.message)[:400]
        s.hardware_id = self.node.get_fully_qualified_name()
        s.values = [KeyValue(key=str(k), value=str(v)) for k, v in h.values.items()]
        return s
