"""What the manager hears besides the camera: lines, people, events, the face, forget me.

* `dialogue/utterance` (Utterance), one callback at a time so lines reach the turn queue in
  the order they came; `dialogue/partial`, the words so far of a line still being said (a
  local LLM reads the prompt ahead); `dialogue/hearing` (std_msgs/Bool), the person speaks;
* `furhat/users` (DetectedUsers) and `vision/events` (VisualEvent, with `visual_events`);
* `speech/state` (SpeechState): no remark unasked while the robot talks or thinks;
* `face/records` (std_msgs/String): what the robot's face showed, into the transcript;
* `people/forgotten` (Forgotten): forget me in the prompt, the memory and every transcript;
* vision_msgs detections and ROS4HRI persons, where those packages are installed
  (ros/standard_inputs.py).
Lines and people count only while the node is active (`when_active`).
"""
from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos_overriding_options import QoSOverridingOptions
from std_msgs.msg import Bool, String

from vision_dialogue.core.entries import FaceEntry
from vision_dialogue.core.people import TrackedPerson
from vision_dialogue.common.redaction import ForgottenPeople
from vision_dialogue.core.transcript import record_from_json
from vision_dialogue_interfaces.msg import DetectedUsers, Forgotten, SpeechState, Utterance, \
    VisualEvent
from vision_dialogue.ros.image_msgs import stamp_seconds, stamp_to_ns
from vision_dialogue.ros.qos import RELIABLE_QOS
from vision_dialogue.ros.standard_inputs import connect_standard_inputs
from vision_dialogue.ros.topics import FACE_RECORDS_TOPIC, HEARING_TOPIC, PARTIAL_TOPIC, \
    PEOPLE_FORGOTTEN_TOPIC, SPEECH_STATE_TOPIC, USERS_TOPIC, UTTERANCE_TOPIC, \
    VISUAL_EVENTS_TOPIC

#: utterances the subscription holds while the callback is busy (a burst must not be lost)
UTTERANCE_DEPTH = 100


class ManagerInputs:
    """The manager node's subscriptions besides the camera's (see the module docstring).

    `node`: the managed ManagerNode (its parameters, `when_active`, logger, clock); the
    conversation's parts it feeds: `turns`, `people`, `proactive`; `transcript` (None: none
    kept) and `memory` (the memory of people, None when off) hear forget me; `frames`: the
    FrameInput (its width places detections). `detections` and `voices`: the standard inputs
    (None where their packages are missing).
    """

    def __init__(self, node, conversation, turns, people, proactive, transcript, notes,
                 memory, frames):
        self.node, self.conversation, self.turns = node, conversation, turns
        self.people, self.proactive, self.transcript = people, proactive, transcript
        self.memory, self.log = memory, node.get_logger()
        active = node.when_active
        node.create_subscription(DetectedUsers, USERS_TOPIC,
                                 active(self._on_users, USERS_TOPIC), 10)
        if node.params["visual_events"]:
            node.create_subscription(VisualEvent, VISUAL_EVENTS_TOPIC, active(
                self._on_visual_event, "a visual event"), 50)
        # volatile: matches a latched (transient local) speech node and a plain publisher alike
        node.create_subscription(SpeechState, SPEECH_STATE_TOPIC, self._on_speech_state,
                                 RELIABLE_QOS)
        node.create_subscription(Utterance, UTTERANCE_TOPIC, active(
                                 self._on_utterance, "a line (not answered)"), UTTERANCE_DEPTH,
                                 callback_group=MutuallyExclusiveCallbackGroup(),
                                 qos_overriding_options=QoSOverridingOptions
                                 .with_default_policies())
        node.create_subscription(Utterance, PARTIAL_TOPIC, active(
            lambda msg: conversation.hear_ahead(msg.text, msg.speaker, msg.language),
            "a partial line"), 10)
        node.create_subscription(Bool, HEARING_TOPIC,
                                 lambda msg: conversation.hearing(msg.data), RELIABLE_QOS)
        node.create_subscription(String, FACE_RECORDS_TOPIC, self._on_face_record, RELIABLE_QOS)
        node.create_subscription(Forgotten, PEOPLE_FORGOTTEN_TOPIC, self._on_forgotten,
                                 RELIABLE_QOS)
        self.detections, self.voices = connect_standard_inputs(
            node, node.params, conversation, turns, people, notes,
            frame_width=lambda: frames.width, on_engaging=self._on_engaging)

    def _on_utterance(self, msg: Utterance) -> None:
        self.turns.utterance(msg.text, msg.speaker, msg.language,
                             stamp_seconds(msg.header.stamp))

    def _on_users(self, msg: DetectedUsers) -> None:
        """The people the camera tracks (Furhat): a note in the prompt, arrivals, departures."""
        self.people.update([TrackedPerson(u.id, u.position.x, u.position.z, u.emotion)
                            for u in msg.users])

    def _on_visual_event(self, msg: VisualEvent) -> None:
        stamp_ns = stamp_to_ns(msg.header.stamp) or self.node.get_clock().now().nanoseconds
        self.turns.seen(msg.kind, msg.text or msg.kind, stamp_ns / 1e9)

    def _on_speech_state(self, msg: SpeechState) -> None:
        """The robot talks or thinks: no remark unasked now."""
        self.proactive.robot_busy(msg.state in (SpeechState.THINKING, SpeechState.SPEAKING))

    def _on_engaging(self, label: str) -> None:
        """A ROS4HRI person engages (or a person manager first reports them): the opening remark.

        Once a session; named for a person the manager knows (Persona.greeting).
        """
        if self.turns.greet_once(on_report=True):
            self.log.info(f"{label} is here: greeting")

    def _on_face_record(self, msg: String) -> None:
        """An expression the robot's face showed, for the transcript and the monitor."""
        try:
            record = record_from_json(msg.data)
        except ValueError as e:
            self.log.warning(f"{FACE_RECORDS_TOPIC}: ignoring a record ({e})",
                             throttle_duration_sec=10.0)
            return
        self.conversation.notify(FaceEntry(record))

    def _on_forgotten(self, msg: Forgotten) -> None:
        """Forget me: the prompt and every transcript under transcript_dir without them."""
        try:
            who = ForgottenPeople(tuple(msg.person_ids), tuple(msg.names))
        except ValueError as e:
            self.log.error(f"{PEOPLE_FORGOTTEN_TOPIC}: {e}")
            return
        self.people.forget(who)
        if self.memory is not None:
            self.memory.keeper.forget()     # no note of theirs read before stays
        lines = self.conversation.forget(who)
        self.log.info(f"forgotten: {lines} prompt items without them")
        if self.transcript is None:
            return
        try:
            runs = self.transcript.forget(who)
        except OSError as e:
            self.log.error(f"{PEOPLE_FORGOTTEN_TOPIC}: transcripts not redacted ({e})")
            return
        changed = [r for r in runs if r.lines]
        skipped = sum(r.skipped for r in runs)
        self.log.info(
            f"forgotten {len(msg.person_ids)} person(s): {sum(r.lines for r in changed)} lines "
            f"in {len(changed)} transcripts redacted, {sum(r.frames for r in changed)} frames "
            f"deleted" + (f"; {skipped} runs of other running managers left to them"
                          if skipped else ""))
