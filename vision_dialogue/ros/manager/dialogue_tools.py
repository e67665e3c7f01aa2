"""The manager's Visual ChatGPT side (`use_tools`): tools, their images, shared pictures.

* the VFM server's tools (ros/manager/vfm_client.py) offered to the conversation's turns;
* each image a tool makes is published on `dialogue/tool_image` and, as a thumbnail, on
  `dialogue/events`;
* a picture on `dialogue/shared_image` is queued as a turn (`on_shared`), then stored in the
  image store and announced with Visual ChatGPT's "Received." exchange (`shared_image`).
"""
from __future__ import annotations

from typing import Callable

from rclpy.callback_groups import ReentrantCallbackGroup
from sensor_msgs.msg import Image

from vision_dialogue.common.images import jpeg_bytes
from vision_dialogue.ros.image_msgs import ImageConversionError, from_image_msg
from vision_dialogue.ros.params import ParameterError
from vision_dialogue.ros.manager.vfm_client import VfmClient, VfmTools, describe_shared, \
    frame_to_rgb
from vision_dialogue.vfm import registry
from vision_dialogue.vfm.image_store import ImageStore
from vision_dialogue.ros.topics import SHARED_IMAGE_TOPIC, TOOL_IMAGE_TOPIC

SHARED_IMAGE_DEFAULT = "a picture the person shared with me"


class DialogueTools:
    """Tools, tool images and shared pictures for one manager node.

    `p`: the node's parameters; `conversation`: its Conversation (tools are set on it);
    `camera_frame_id()`: the camera's frame_id; `publish_event(record, thumbnail)`: the node's
    dialogue/events; `on_shared(bgr)`: queue a shared picture in turn order. Raises
    ParameterError when the image store cannot be made.
    """

    def __init__(self, node, conversation, p, *, camera_frame_id: Callable[[], str],
                 publish_event: Callable[[dict, bytes | None], None],
                 on_shared: Callable, thumbnail_side: int):
        self.node, self.conversation, self.params = node, conversation, p
        self._publish_event, self._on_shared = publish_event, on_shared
        self._thumbnail_side = thumbnail_side
        self.log = node.get_logger()
        try:
            self.store = ImageStore(p["image_dir"])
        except OSError as e:
            raise ParameterError(f"image_dir: cannot create {p['image_dir']!r} ({e})") from None
        self.image_pub = node.create_publisher(Image, TOOL_IMAGE_TOPIC, 10)
        node.create_subscription(Image, SHARED_IMAGE_TOPIC, self._on_shared_msg, 10,
                                 callback_group=ReentrantCallbackGroup())
        self.tools: VfmTools | None = None
        if not conversation.calls_tools:
            self.log.warning(f"use_tools: the {p['llm_backend']!r} backend cannot call tools; "
                             "answering without tools")
            return
        self.tools = VfmTools(
            VfmClient(node), conversation.newest_frame, timeout=p["tool_timeout"],
            list_timeout=min(2.0, p["tool_timeout"]),
            show_images=p["tool_images_to_llm"] and conversation.supports_images,
            image_max_side=p["newest_max_side"], camera_frame_id=camera_frame_id,
            on_image=self._publish_tool_image, logger=self.log)
        conversation.set_tools(self.tools, max_rounds=p["max_tool_rounds"],
                               show_images=p["tool_images_to_llm"])

    def discover(self) -> None:
        """At startup (on the turn worker): wait for vfm/list_tools a little, once."""
        if self.tools is not None and \
                not self.tools.refresh(timeout=self.params["tool_discovery_timeout"]):
            self.log.warning("use_tools: no VFM server (vfm/list_tools); answering without "
                             "tools until one appears")

    def _publish_tool_image(self, image_file: str, img: Image) -> None:
        img.header.stamp = self.node.get_clock().now().to_msg()
        img.header.frame_id = self.params["frame_id"]
        self.image_pub.publish(img)
        self.log.info(f"tool image {image_file} published on {TOOL_IMAGE_TOPIC}")
        try:
            thumb = jpeg_bytes(from_image_msg(img), self._thumbnail_side,
                               self.params["jpeg_quality"])
        except (ImageConversionError, ValueError):
            thumb = None
        self._publish_event({"type": "tool_image", "image_file": image_file}, thumb)

    def _on_shared_msg(self, msg: Image) -> None:
        try:
            bgr = from_image_msg(msg, self.params["max_image_pixels"])
        except ImageConversionError as e:
            self.log.warning(f"ignoring a bad shared image: {e}")
            return
        self._on_shared(bgr)

    def shared_image(self, bgr) -> None:
        """Store a shared picture and add Visual ChatGPT's "Received." exchange."""
        try:
            name = self.store.add(frame_to_rgb(bgr))
        except (OSError, ValueError) as e:
            self.log.error(f"shared image not stored: {e}")
            return
        desc = SHARED_IMAGE_DEFAULT
        if self.tools is not None:
            desc = describe_shared(self.tools, name, SHARED_IMAGE_DEFAULT)
        human, ai = registry.image_received_turn(name, desc)
        self.conversation.add_exchange(human, ai, image_file=name, description=desc)
        self.log.info(f"shared image stored as {name} ({desc})")

    def close(self) -> None:
        """End a tool call in progress now."""
        if self.tools is not None:
            self.tools.client.close()
