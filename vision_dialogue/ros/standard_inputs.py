"""What other perception stacks tell the conversation, over the standard interfaces.

* ``detections`` (vision_msgs/Detection2DArray, any publisher QoS) with ``label_info``
  (vision_msgs/LabelInfo, latched) or the ``labels`` parameter for numeric class ids: objects
  noted on the frame nearest in time, classes coming and going as visual events
  (core/objects.py).
* ROS4HRI voices (REP-155): ``/humans/voices/tracked`` and each voice's ``speech``
  (hri_msgs/LiveSpeech, final results) become user turns, spoken by the person whose
  ``voice_id`` is that voice (their ``name``, else ``alias``, else the voice id).

Each part is on when its interface package is installed; nothing changes when nobody publishes.
"""
from __future__ import annotations

import threading
from typing import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import String

from vision_dialogue.core.objects import DetectionSet, LabelMap, ObjectNotes
from vision_dialogue.ros import perception_msgs as pm

#: REP-155's latched id lists (reliable, transient local)
TRACKED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: a volatile reliable subscription matches latched and plain publishers alike
PLAIN_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class DetectionsInput:
    """``detections`` (+ ``label_info``) into ObjectNotes; the manager asks `attach(stamp)`.

    on_note(frame_stamp, note): a set arrived after its frame; on_event(text, stamp): a class
    came or went. `frame_width()`: the newest frame's width, for positions.
    """

    def __init__(self, node, notes: ObjectNotes, labels: LabelMap,
                 on_note: Callable[[float, str], None], on_event: Callable[[str, float], None],
                 frame_width: Callable[[], int]):
        self.notes, self.labels = notes, labels
        self.on_note, self.on_event, self.frame_width = on_note, on_event, frame_width
        self.received = 0
        group = MutuallyExclusiveCallbackGroup()
        # best effort matches both reliable and best-effort detectors
        self.sub = node.create_subscription(pm.Detection2DArray, pm.DETECTIONS_TOPIC,
                                            self._on_detections, qos_profile_sensor_data,
                                            callback_group=group)
        self.labels_sub = node.create_subscription(
            pm.LabelInfo, pm.LABEL_INFO_TOPIC, self._on_label_info,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL), callback_group=group)
        self.topic = node.resolve_topic_name(pm.DETECTIONS_TOPIC)
        self.labels_topic = node.resolve_topic_name(pm.LABEL_INFO_TOPIC)
        self.log = node.get_logger()
        self._warned_unnamed = False

    def attach(self, frame_stamp: float) -> str:
        return self.notes.attach(frame_stamp)

    def _on_label_info(self, msg) -> None:
        self.labels.update((c.class_id, c.class_name) for c in msg.class_map)

    def _on_detections(self, msg) -> None:
        self.received += 1
        det: DetectionSet = pm.from_detection_array(msg, self.labels, self.frame_width())
        if det.unnamed and not self._warned_unnamed:
            self._warned_unnamed = True
            self.log.warning(
                f"{self.topic}: class ids without names (no {self.labels_topic} yet, and no "
                "labels parameter): those detections are left out until names come")
        frame_stamp, note, events = self.notes.add(det)
        if frame_stamp is not None:
            self.on_note(frame_stamp, note)
        for text in events:
            self.on_event(text, det.stamp)


class VoicesInput:
    """ROS4HRI voices' final speech as utterances: on_speech(text, speaker, confidence, locale).

    Subscribes to each tracked voice's ``speech`` as it appears (and drops it when the voice is
    no longer tracked); persons are followed for the name that goes with a voice.
    """

    def __init__(self, node, on_speech: Callable[[str, str, float, str], None]):
        self.node, self.on_speech = node, on_speech
        self._voices: dict[str, object] = {}
        self._persons: dict[str, list] = {}
        self._voice_of: dict[str, str] = {}          # person id -> voice id
        self._name_of: dict[str, str] = {}           # person id -> name or alias
        self._lock = threading.Lock()
        self._skipped: set[str] = set()
        self.group = MutuallyExclusiveCallbackGroup()  # turns in the order they were said
        # id lists: latched by some publishers (hri_person_manager), plain by others; a latched
        # subscription misses plain publishers and a plain one the latched list sent before
        # it matched, so both (updates are idempotent)
        # (one of the two never matches a given publisher: that is expected, not warned)
        quiet = SubscriptionEventCallbacks(use_default_callbacks=False)
        for qos in (TRACKED_QOS, PLAIN_QOS):
            node.create_subscription(pm.IdsList, pm.VOICES_TRACKED_TOPIC, self._on_voices,
                                     qos, callback_group=self.group, event_callbacks=quiet)
            node.create_subscription(pm.IdsList, pm.PERSONS_TRACKED_TOPIC, self._on_persons,
                                     qos, callback_group=self.group, event_callbacks=quiet)

    def speaker(self, voice_id: str) -> str:
        """The name of the person with this voice, else the voice id."""
        with self._lock:
            person = next((p for p, v in self._voice_of.items() if v == voice_id), None)
            return self._name_of.get(person, "") or voice_id

    def _on_voices(self, msg) -> None:
        ids = set(msg.ids)
        for vid in ids - set(self._voices):
            self._voices[vid] = self.node.create_subscription(
                pm.LiveSpeech, f"/humans/voices/{vid}/speech",
                lambda m, vid=vid: self._on_speech(vid, m), PLAIN_QOS, callback_group=self.group)
        for vid in set(self._voices) - ids:
            self.node.destroy_subscription(self._voices.pop(vid))

    def _on_persons(self, msg) -> None:
        ids = set(msg.ids)
        for pid in ids - set(self._persons):
            base = f"/humans/persons/{pid}"
            self._persons[pid] = [
                self.node.create_subscription(String, f"{base}/voice_id",
                                              lambda m, p=pid: self._set(self._voice_of, p, m),
                                              TRACKED_QOS, callback_group=self.group),
                self.node.create_subscription(String, f"{base}/name",
                                              lambda m, p=pid: self._set(self._name_of, p, m),
                                              TRACKED_QOS, callback_group=self.group),
                self.node.create_subscription(String, f"{base}/alias",
                                              lambda m, p=pid: self._alias(p, m),
                                              TRACKED_QOS, callback_group=self.group)]
        for pid in set(self._persons) - ids:
            for sub in self._persons.pop(pid):
                self.node.destroy_subscription(sub)

    def _set(self, table: dict, pid: str, msg) -> None:
        with self._lock:
            table[pid] = msg.data.strip()

    def _alias(self, pid: str, msg) -> None:
        with self._lock:
            self._name_of.setdefault(pid, msg.data.strip())

    def _on_speech(self, voice_id: str, msg) -> None:
        text = " ".join(msg.final.split())
        if not text or self._ours(voice_id):         # incremental results are not turns
            return
        self.on_speech(text, self.speaker(voice_id), float(msg.confidence), msg.locale)

    def _ours(self, voice_id: str) -> bool:
        """Whether this voice's speech comes only from nodes that also publish
        dialogue/utterance (our speech node speaks ROS4HRI too): those turns already came.
        """
        node = self.node
        speech = {(i.node_namespace, i.node_name) for i in node.get_publishers_info_by_topic(
            f"/humans/voices/{voice_id}/speech")}
        ours = {(i.node_namespace, i.node_name) for i in node.get_publishers_info_by_topic(
            node.resolve_topic_name("dialogue/utterance"))}
        skip = bool(speech) and speech <= ours
        if skip and voice_id not in self._skipped:
            self._skipped.add(voice_id)
            node.get_logger().info(f"ROS4HRI voice {voice_id!r} is our speech node's: its "
                                   "turns come on dialogue/utterance")
        return skip
