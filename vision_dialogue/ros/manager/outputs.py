"""What the manager publishes: replies, the prompt's state and every transcript record.

* `dialogue/reply` (vision_dialogue_interfaces/Reply): one message per sentence, then the
  whole reply;
* `dialogue/prompt_state` (PromptState, latched): after every change and on a timer;
* `dialogue/events` (std_msgs/String, latched, depth 200): each conversation entry as its
  transcript record in JSON, a frame's with a small JPEG thumbnail (blurred when the
  transcript's frames are), for the monitor page and any other tool.
Stamps come from the node's clock.
"""
from __future__ import annotations

import base64
import json
import time
from typing import Callable

import rclpy
from rclpy.qos_overriding_options import QoSOverridingOptions
from std_msgs.msg import String

from vision_dialogue.core.entries import Entry, FrameEntry, ObjectsEntry
from vision_dialogue.core.transcript import describe_record
from vision_dialogue.core.turn_taking import ReplyChunk
from vision_dialogue_interfaces.msg import PromptState, Reply
from vision_dialogue.ros.qos import RECORDS_QOS, LATCHED_QOS
from vision_dialogue.ros.topics import PROMPT_STATE_TOPIC, RECORDS_TOPIC, REPLY_TOPIC

THUMBNAIL_SIDE = 192      # longest side of the frame thumbnails in dialogue/events
PROMPT_COUNTS = ("raw_frames", "frame_summaries", "dialogue_lines", "folded_lines",
                 "pending_summaries", "prompt_chars", "prompt_image_bytes")
"""Conversation.state() counts that PromptState carries as they are."""


def u32(n: int) -> int:
    """A count for a uint32 message field (a very long session saturates, never wraps)."""
    return int(min(n, 2 ** 32 - 1))


class ManagerOutputs:
    """The manager's publishers and what goes out on them (see the module docstring).

    open(): whether the node is built and not closed (nothing goes out otherwise).
    verbose: each record also as a log line (bringup --verbose).
    """

    def __init__(self, node, params, open: Callable[[], bool], verbose: bool = False):
        self.node, self.params, self._is_open, self.verbose = node, params, open, verbose
        self.redact = None                   # faces blurred in thumbnails (blur_faces)
        overridable = QoSOverridingOptions.with_default_policies()
        self.reply_pub = node.create_publisher(Reply, REPLY_TOPIC, 10,
                                               qos_overriding_options=overridable)
        self.state_pub = node.create_publisher(PromptState, PROMPT_STATE_TOPIC,
                                               LATCHED_QOS)
        self.records_pub = node.create_publisher(String, RECORDS_TOPIC, RECORDS_QOS)

    def _live(self) -> bool:
        return self._is_open() and rclpy.ok(context=self.node.context)

    def _header(self, msg):
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.params["frame_id"]
        return msg

    def reply(self, c: ReplyChunk) -> None:
        """Publish one sentence or the whole reply; nothing once the node is shutting down.

        A turn that is speaking when SIGTERM or Ctrl-C shuts the context down ends quietly
        (it used to fail on the dead publisher and log three errors and a fallback).
        """
        if not self._live():
            return
        r = self._header(Reply())
        r.turn_id, r.chunk_index, r.text = int(c.turn_id), int(c.index), c.text
        r.in_reply_to, r.final, r.fallback = c.in_reply_to, bool(c.final), bool(c.fallback)
        try:
            self.reply_pub.publish(r)
        except Exception:  # noqa: BLE001 - the context went down between the check and here
            if self._live():
                raise

    def entry(self, entry: Entry) -> None:
        """A conversation's entry out as its record (a frame's with a thumbnail)."""
        record = entry.to_record()
        thumb = None
        if isinstance(entry, (FrameEntry, ObjectsEntry)):
            frame = entry.frame
            try:
                thumb = frame.stored_jpeg(THUMBNAIL_SIDE, self.params["jpeg_quality"],
                                          self.redact)
            except Exception:  # noqa: BLE001 - no thumbnail (never an unblurred one)
                pass            # the record still goes out
        self.record(record, thumb)
        line = describe_record(record) if self.verbose and record is not None else ""
        if line:
            self.node.get_logger().info(line)        # bringup --verbose

    def record(self, record: dict | None, thumbnail: bytes | None = None) -> None:
        """Publish a record on dialogue/events (`thumbnail`: its JPEG, as base64)."""
        if record is None or not self._live():
            return
        record = {"t": round(time.time(), 3), **record}
        if thumbnail:
            record["thumbnail"] = base64.b64encode(thumbnail).decode("ascii")
        self.records_pub.publish(String(data=json.dumps(record, ensure_ascii=False)))

    def state(self, st: dict, intake, turns_dropped: int) -> None:
        """Publish a PromptState: the conversation's `st`, the frame intake's counts."""
        if not self._live():
            return
        msg = self._header(PromptState())
        msg.frames_received = u32(intake.received)
        msg.frames_rejected = u32(intake.rejected)
        causes = sorted(intake.rejected_by_cause.items())
        msg.rejected_causes = [c for c, _ in causes]
        msg.rejected_counts = [u32(n) for _, n in causes]
        msg.turns_dropped = u32(turns_dropped)
        for k in PROMPT_COUNTS:
            setattr(msg, k, u32(st[k]))
        msg.summaries, msg.history_summary = st["summaries"], st["history_summary"]
        msg.timeline = [t[:200] for t in st["timeline"]]
        try:
            self.state_pub.publish(msg)
        except Exception as e:  # noqa: BLE001 - shutting down
            self.node.get_logger().debug(f"prompt state not published: {e}")
