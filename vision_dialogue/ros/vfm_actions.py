"""The VFM action types and names, one place for the server and the manager's client.

Three general actions, one per kind of tool (vfm/registry.py ACTION_TYPES), plus the
`vfm/list_tools` service; names are relative so a namespace or remapping applies.
"""
from rclpy.qos import QoSProfile, qos_profile_services_default

from vision_dialogue_interfaces.action import ImageToImage, ImageToText, TextToImage
from vision_dialogue.vfm.registry import IMAGE_TO_IMAGE, IMAGE_TO_TEXT, TEXT_TO_IMAGE
from vision_dialogue.ros.topics import LIST_TOOLS_SERVICE  # noqa: F401 - with the actions

#: tool kind (ToolInfo.action_type) -> action type
ACTIONS = {IMAGE_TO_TEXT: ImageToText, IMAGE_TO_IMAGE: ImageToImage,
           TEXT_TO_IMAGE: TextToImage}
#: goal, result and cancel services keep 100 requests (ROS' default is 10): a burst of goals
#: is queued, not lost; the same profiles on the server and the client
_DEEP = QoSProfile(depth=100, reliability=qos_profile_services_default.reliability,
                   durability=qos_profile_services_default.durability)
VFM_ACTION_QOS = dict(goal_service_qos_profile=_DEEP, result_service_qos_profile=_DEEP,
                      cancel_service_qos_profile=_DEEP)


def action_name(kind: str) -> str:
    """The action server's (relative) name for a tool kind, e.g. vfm/image_to_text."""
    return f"vfm/{kind}"
