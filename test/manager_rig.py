"""A ManagerNode with a test node for its topics, on one executor.

Shared by the manager tests and the fault-injection suite.
"""
import contextlib
import json

import cv2
import numpy as np
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image
from skimage import data

from conftest import matched, spin_until
from fake_openai import FakeOpenAI
from vision_dialogue.manager_node import ManagerNode
from vision_dialogue_interfaces.msg import PromptState, Reply as ReplyMsg, Utterance

REPLY = "Hello there. It is nice to meet you! What is your name?"


def responder(req):
    last = json.dumps(req["messages"][-1])
    return "The person waved at me." if "one short sentence" in last else REPLY


def photo():
    return cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (640, 480))


class Rig:
    """Manager + a test node (publishers/subscribers) on one executor."""

    def __init__(self, ctx, fake, tmp_path, **params):
        base = {"base_url": fake.base_url, "model": "fake-vlm", "max_retries": 0,
                "request_timeout": 5.0, "transcript_dir": str(tmp_path / "tr"),
                "prompt_state_period": 0.0, "frame_id": "robot_head",
                # the start-up image check sends a request of its own: tested on its own
                # (test_manager_node.py), off here so queued replies meet the turns
                "probe_images": False}
        cli_args = params.pop("cli_args", None)        # e.g. remappings
        base.update(params)
        self.node = ManagerNode(context=ctx, cli_args=cli_args, parameter_overrides=[
            Parameter(k, value=v) for k, v in base.items()])
        self.io = rclpy.create_node("test_io", context=ctx)
        self.img_pub = self.io.create_publisher(Image, "camera/image_raw",
                                                qos_profile_sensor_data)
        self.jpg_pub = self.io.create_publisher(CompressedImage, "camera/image_raw/compressed",
                                                qos_profile_sensor_data)
        self.utt_pub = self.io.create_publisher(Utterance, "dialogue/utterance", 100)
        self.replies, self.states = [], []
        self.io.create_subscription(ReplyMsg, "dialogue/reply", self.replies.append, 50)
        self.io.create_subscription(PromptState, "dialogue/prompt_state", self.states.append, 50)
        self.ex = MultiThreadedExecutor(num_threads=2, context=ctx)
        self.ex.add_node(self.node)
        self.ex.add_node(self.io)
        assert self.wait(lambda: all(matched(p, self.node) for p in
                                     (self.img_pub, self.jpg_pub, self.utt_pub))
                         and matched(self.node.out.reply_pub, self.io)
                         and matched(self.node.out.state_pub, self.io))

    def wait(self, pred, timeout=10.0):
        return spin_until(self.ex, pred, timeout=timeout)

    def send_until(self, publish, pred, tries=10, each_s=3.0) -> bool:
        """`publish()` again until `pred()` holds; whether it came true in time.

        Best-effort frames in one process may be dropped under load: one that never came is
        sent again rather than waited for longer.
        """
        for _ in range(tries):
            publish()
            if self.wait(pred, timeout=each_s):
                return True
        return False

    def say(self, text, language=""):
        m = Utterance()
        m.text, m.source, m.confidence, m.language = text, "test", 1.0, language
        self.utt_pub.publish(m)

    def finals(self):
        return [r for r in self.replies if r.final]

    def close(self):
        self.node.close()
        self.ex.shutdown()
        self.node.destroy_node()
        self.io.destroy_node()


@contextlib.contextmanager
def running_manager(ctx, tmp_path, responder=None, **params):
    """A Rig on a fresh FakeOpenAI (`responder` as FakeOpenAI takes it): yields (rig, fake)."""
    with FakeOpenAI(responder=responder) as fake:
        rig = Rig(ctx, fake, tmp_path, **params)
        try:
            yield rig, fake
        finally:
            rig.close()
