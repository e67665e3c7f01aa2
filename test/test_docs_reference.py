"""The reference pages say what the running nodes do: every parameter each node declares.

docs/_ext/vd_reference.py generates the parameters page from each executable's PARAMS table;
here each node is made (unconfigured: `managed:=true`) and the parameters it really declares
are compared with the page's table, so a parameter declared outside the table fails.
"""
from __future__ import annotations

import re
import sys

import pytest
from rclpy.parameter import Parameter

from conftest import REPO

sys.path.insert(0, str(REPO / "docs" / "_ext"))
import vd_reference  # noqa: E402 - docs/_ext is not a package

#: parameters rclpy declares on every node, not ours
ROS_OWN = {"use_sim_time", "start_type_description_service"}
NODES = {
    "manager_node": ("vision_dialogue.manager_node", "ManagerNode"),
    "camera_node": ("vision_dialogue.camera_node", "CameraNode"),
    "speech_node": ("vision_dialogue.speech_node", "SpeechNode"),
    "detector_node": ("vision_dialogue.detector_node", "DetectorNode"),
    "events_node": ("vision_dialogue.events_node", "EventsNode"),
    "vfm_server": ("vision_dialogue.vfm_server", "VfmServer"),
    "monitor": ("vision_dialogue.monitor_node", "MonitorNode"),
}


def page_rows() -> dict[str, set[str]]:
    """executable -> the parameter names in its table on the generated page."""
    rows, exe = {}, None
    for line in vd_reference.parameters_page().splitlines():
        if line.startswith("## "):
            exe = line[3:].strip()
            rows[exe] = set()
        elif exe and (m := re.match(r"^\| `([^`]+)` \|", line)):
            rows[exe].add(m.group(1))
    return rows


def test_the_page_lists_every_executable_with_parameters():
    rows = page_rows()
    assert set(rows) == set(vd_reference.EXECUTABLES)
    assert all(rows.values())


@pytest.mark.parametrize("exe", sorted(NODES))
def test_each_node_declares_exactly_the_parameters_on_the_page(ros_context, exe, tmp_path):
    import importlib
    module, cls = NODES[exe]
    node_class = getattr(importlib.import_module(module), cls)
    overrides = [Parameter("managed", value=True)] if exe != "monitor" else \
        [Parameter("port", value=0)]
    node = node_class(context=ros_context, parameter_overrides=overrides)
    try:
        declared = {name for name in node._parameters
                    if name not in ROS_OWN and not name.startswith("qos_overrides.")}
    finally:
        close = getattr(node, "close", None)
        if callable(close):
            close()
        node.destroy_node()
    on_page = page_rows()[exe]
    assert declared == on_page, {"declared, not on the page": sorted(declared - on_page),
                                 "on the page, not declared": sorted(on_page - declared)}
