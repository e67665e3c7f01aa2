"""A shipped parameter file applies to its node in any namespace (`/**/node_name:` keys)."""
from __future__ import annotations

from pathlib import Path

import yaml

CONFIG = Path(__file__).resolve().parents[1] / "config"


def test_manager_yaml_applies_in_a_namespace(ros_context_args, tmp_path):
    """config/manager.yaml with n: 7, the node in /robot1: n is 7 (a bare key gave 4)."""
    data = yaml.safe_load((CONFIG / "manager.yaml").read_text())
    node_key = next(iter(data))
    data[node_key]["ros__parameters"].update(n=7, m=2, transcript_dir="")
    params = tmp_path / "manager.yaml"
    params.write_text(yaml.safe_dump(data))
    ctx = ros_context_args(["--ros-args", "--params-file", str(params),
                            "-r", "__ns:=/robot1"])
    from fake_chat_backend import FakeChatBackend
    from vision_dialogue.manager_node import ManagerNode
    node = ManagerNode(context=ctx, backend=FakeChatBackend())
    try:
        assert node.get_namespace() == "/robot1"
        assert node.params["n"] == 7 and node.params["m"] == 2
        assert node.camera.topic == "/robot1/camera/image_raw"
    finally:
        node.close()
        node.destroy_node()
