"""Privacy in the nodes: the manager's retention parameter, bags written with faces blurred."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

from vision_dialogue.perception.privacy import FaceBlurrer


def astronaut() -> np.ndarray:
    return cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (640, 480))


@pytest.fixture(scope="module")
def blurrer():
    return FaceBlurrer()


def test_manager_rejects_a_bad_retention_naming_it(ros_context):
    from rclpy.parameter import Parameter

    from fake_chat_backend import FakeChatBackend
    from vision_dialogue.manager_node import ManagerNode
    from vision_dialogue.ros.params import ParameterError
    with pytest.raises(ParameterError, match="^frame_retention"):
        ManagerNode(context=ros_context, backend=FakeChatBackend(), parameter_overrides=[
            Parameter("frame_retention", value="forever")])


@pytest.mark.parametrize("kind", ["raw", "jpeg"])
def test_bag_images_are_blurred_before_they_are_written(kind, blurrer):
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import CompressedImage, Image

    from vision_dialogue.cli.bag_record import blur_image_cdr
    from vision_dialogue.ros.image_msgs import (from_compressed_msg, from_image_msg,
                                                to_compressed_msg, to_image_msg)
    img = astronaut()
    if kind == "raw":
        msg, cls, back, typ = to_image_msg(img, frame_id="cam"), Image, from_image_msg, \
            "sensor_msgs/msg/Image"
    else:
        msg, cls, back, typ = to_compressed_msg(img, frame_id="cam"), CompressedImage, \
            from_compressed_msg, "sensor_msgs/msg/CompressedImage"
    msg.header.stamp.sec = 42
    out = deserialize_message(blur_image_cdr(serialize_message(msg), typ, blurrer), cls)
    assert out.header.stamp.sec == 42 and out.header.frame_id == "cam"
    assert blurrer.boxes(back(out)) == []
