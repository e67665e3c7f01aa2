"""The speech node's audio topics for a backend that asks for them (speech/base.AudioTopics).

audio/input and audio/output carry vision_dialogue_interfaces/AudioChunk (16-bit PCM, mono;
the robot's sentence's text with its audio). A publisher or subscription is created when the
backend asks, at its build; stamps come from the node's clock.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup

from vision_dialogue_interfaces.msg import AudioChunk
from vision_dialogue.ros.topics import AUDIO_INPUT_TOPIC, AUDIO_OUTPUT_TOPIC
from vision_dialogue.voice.audio import PCM16, SAMPLE_RATE, from_pcm16, resample, to_pcm16


class NodeAudioTopics:
    """AudioTopics on `node` (its `frame_id` parameter names the microphone's frame).

    `pub_in`, `pub_out`: the publishers asked for (None until then).
    """

    def __init__(self, node):
        self.node, self.log = node, node.get_logger()
        self.pub_in = self.pub_out = None

    def publisher_in(self) -> Callable[[np.ndarray], None]:
        pub = self.pub_in = self.node.create_publisher(AudioChunk, AUDIO_INPUT_TOPIC, 50)
        return lambda chunk: pub.publish(self._msg(chunk, SAMPLE_RATE))

    def publisher_out(self) -> Callable[[np.ndarray, int, str], None]:
        pub = self.pub_out = self.node.create_publisher(AudioChunk, AUDIO_OUTPUT_TOPIC, 10)
        return lambda samples, rate, text: pub.publish(self._msg(samples, rate, text))

    def subscribe_in(self, push: Callable[[np.ndarray], None]) -> None:
        def take(msg: AudioChunk) -> None:
            if msg.encoding != PCM16 or msg.channels != 1 or msg.sample_rate <= 0:
                self.log.warning(f"{AUDIO_INPUT_TOPIC}: ignoring a {msg.encoding} "
                                 f"x{msg.channels} chunk at {msg.sample_rate} Hz (want mono "
                                 f"{PCM16})", throttle_duration_sec=10.0)
                return
            push(resample(from_pcm16(msg.data), msg.sample_rate))
        self.node.create_subscription(AudioChunk, AUDIO_INPUT_TOPIC, take, 200,
                                      callback_group=ReentrantCallbackGroup())

    def _msg(self, samples, rate: int, text: str = "") -> AudioChunk:
        msg = AudioChunk()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.node.params["frame_id"]
        msg.sample_rate, msg.channels, msg.encoding = int(rate), 1, PCM16
        msg.data = to_pcm16(samples)
        msg.text = text
        return msg
