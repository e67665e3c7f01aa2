"""The speech I/O node.

Utterances in (terminal, script, Furhat Remote API, Furhat Realtime API, local voice), replies
out, with sentence-by-sentence speech of streamed replies, barge-in and a turn state.

Topics (relative, remappable; a type without a package is vision_dialogue_interfaces'):
  publishes  dialogue/utterance    Utterance   what the user said
  publishes  dialogue/partial      Utterance   the words so far of a line still
                                                               being said (a backend that
                                                               hears audio itself)
  publishes  dialogue/hearing      std_msgs/Bool               true when the person begins
                                                               speaking, false when the line
                                                               ends (the same backends)
  subscribes dialogue/reply        Reply       chunks (final=false), then final
  publishes  dialogue/speech_state SpeechState IDLE/LISTENING/THINKING/SPEAKING
                                                               (transient local: late joiners
                                                               get the current state)
  publishes  dialogue/spoken       Spoken      a reply turn began, a sentence was
                                                               said, the turn is done/interrupted
  subscribes dialogue/cancel_reply std_msgs/UInt32             stop saying reply turn N (a
                                                               cancelled Say)
  publishes  audio/input           AudioChunk  what a backend that hears audio
                                                               itself heard, when it asks
                                                               (speech/base.AudioTopics)
  publishes  audio/output          AudioChunk  each sentence said, when it asks
  subscribes audio/input           AudioChunk  instead of a microphone, when it
                                                               asks (a bag replayed)
  publishes  robot_face/expression hri_msgs/Expression         the robot's face (expressions)
  publishes  robot_face/gesture    std_msgs/String             Furhat-style gestures, JSON
  publishes  robot_face/gaze_target geometry_msgs/PointStamped where the eyes look
  publishes  dialogue/face         std_msgs/String             face records for the transcript

`speech_node --list-devices` prints the audio devices and exits.

A thin adapter: the turn logic (reply queue, barge-in, reply timeout, states) is
speech/turns.py, the backends are speech/ and furhat/.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, TextIO

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import qos_profile_sensor_data
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.time import Time
from sensor_msgs.msg import Image
from std_msgs.msg import Bool, UInt32

from vision_dialogue.common.health import ERROR, FAULT_ERROR_S, OK, WARN, Health
from vision_dialogue.core.people import PEOPLE_FRESH_S, TrackedPerson, closest
from vision_dialogue_interfaces.msg import DetectedUsers, Reply, SpeechState, Spoken, Utterance
from vision_dialogue.ros.audio_topics import NodeAudioTopics
from vision_dialogue.ros.console import hold_logs, show_prompt
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.face_output import FACE_PARAMS, make_face
from vision_dialogue.ros.hri_output import HriSpeechOutput
from vision_dialogue.ros.standard_inputs import HriBargeIn
from vision_dialogue.ros.managed import MANAGED_PARAM, ManagedNode
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.params import Param, ParameterError, declare_params, nonempty
from vision_dialogue.ros.qos import RELIABLE_QOS, SPEECH_STATE_QOS, no_event_handlers
from vision_dialogue.ros.topics import CANCEL_REPLY_TOPIC, HEARING_TOPIC, PARTIAL_TOPIC, \
    REPLY_TOPIC, SPEECH_STATE_TOPIC, SPOKEN_TOPIC, USERS_TOPIC, UTTERANCE_TOPIC
from vision_dialogue.speech import SPEECH_BACKENDS, SpeechBackend
from vision_dialogue.speech.acknowledgement import Acknowledger
from vision_dialogue.speech.base import RobotTurnTaking, SpeechIO
from vision_dialogue.speech.turns import STATE_NAMES, HeardUtterance, SpeechTurns
from vision_dialogue.variants import AUTO


PARAMS = [
    Param("backend", AUTO, "Where utterances come from and replies go; auto: the script_file "
          "given, else the terminal.", choices=SPEECH_BACKENDS.choices()),
    Param("ros4hri", True, "Speak ROS4HRI (REP-155) too, where hri_msgs is installed: "
          "/robot_speaking (std_msgs/Bool) while the robot talks, so a ROS4HRI recogniser stops "
          "hearing it, and what is heard as /humans/voices/<speaker>/speech (LiveSpeech); with "
          "barge_in, a ROS4HRI voice speaking (is_speaking, incremental speech) stops the "
          "robot."),
    Param("frame_id", "microphone", "frame_id of the utterance and state headers.",
          check=nonempty),
    Param("language", "en-US", "BCP-47 language: recognition language on Furhat, and the "
          "language tag of utterances (script items may override it).", check=nonempty),
    Param("speaker", "", "Speaker label put on terminal/script utterances (script items may "
          "override it)."),
    Param("reply_timeout", 30.0, "Seconds to wait for a reply before listening again.",
          range=(0.1, 3600.0)),
    Param("acknowledge_after", 0.0, "A reply whose first words have not come this many "
          "seconds after the person's line was heard gets a short acknowledgement first "
          "(\"Let me see.\", \"Let me think.\"), never on two turns in a row; "
          "0: never.",
          range=(0.0, 60.0)),
    Param("wait_for_subscriber", 10.0, "Start the backend once dialogue/utterance has a "
          "subscriber (so the first utterances are not lost), or after this many seconds; "
          "0: start at once.", range=(0.0, 3600.0)),
    Param("wait_for_listeners", [], "Nodes (by name) that must subscribe to "
          "dialogue/utterance before the backend starts, e.g. [manager_node, people_node]: a "
          "script's first lines then reach each of them (within wait_for_subscriber).",
          array_of="string"),
    Param("script_clock_topic", "", "An image topic (e.g. camera/image_raw) whose first "
          "frame starts the backend, once wait_for_listeners listen: a script's `at` times "
          "then count from a video's start (the camera waits for this subscription with its "
          "own wait_for_listeners); empty: no wait."),
    Param("exit_when_done", False, "Shut the node down when input ends (end of script, or EOF "
          "on the terminal), after the last reply."),
]

PARAMS += SPEECH_BACKENDS.params() + FACE_PARAMS + [MANAGED_PARAM]
# The backend is built from these at startup: none is live (ros/params.py), so
# `ros2 param set` refuses instead of pretending.


def backend_name(v) -> str:
    """The backend to start: a script_file given means the script (variants/choice.py)."""
    return SPEECH_BACKENDS.choose(v)


def _cross_check(v: dict) -> str | None:
    """The chosen backend's own checks (a script that cannot be read, a WAV input...)."""
    return SPEECH_BACKENDS.check(v)


class SpeechNode(ManagedNode):
    """Speech I/O node.

    A managed node (ros/managed.py): configure builds the backend (a missing script or model
    refuses the transition), the first activation starts it (the microphone, the robot's
    connection, the input read); inactive, the node neither publishes what it hears nor
    speaks (what is said is stopped at once).

    kwargs go to Node.__init__ (context=, parameter_overrides=, ...).

    input_stream/output_stream replace stdin/stdout for the terminal and script backends;
    on_done is called when input ended and exit_when_done is set (default: shut down the
    node's context, which ends `run_node`'s spin).
    """

    def __init__(self, name: str = "speech_node", *, input_stream: TextIO | None = None,
                 output_stream: TextIO | None = None,
                 on_done: Callable[[], None] | None = None, **kwargs):
        self.turns: SpeechTurns | None = None
        self.face = None
        self._closed = threading.Event()
        super().__init__(name, **kwargs)
        self.params = declare_params(self, PARAMS, _cross_check)
        self.backend_kind = backend_name(self.params)   # auto resolved: what runs
        self.log = self.get_logger()
        self._on_done = on_done or (lambda: self.context.try_shutdown())
        self.started = threading.Event()     # the backend is running
        overridable = QoSOverridingOptions.with_default_policies()
        self.pub_utterance = self.create_publisher(Utterance, UTTERANCE_TOPIC, 10,
                                                   qos_overriding_options=overridable)
        self.pub_partial = self.create_publisher(Utterance, PARTIAL_TOPIC, 10)
        self.pub_hearing = self.create_publisher(Bool, HEARING_TOPIC, RELIABLE_QOS)
        self.pub_state = self.create_publisher(SpeechState, SPEECH_STATE_TOPIC,
                                               SPEECH_STATE_QOS)
        self.hri = HriSpeechOutput(self, self.params["speaker"]) if self.params["ros4hri"] \
            else None
        self.hri_ear = None
        self.create_subscription(Reply, REPLY_TOPIC,
                                 self.when_active(lambda msg: self.turns.on_reply(
                                     msg.turn_id, msg.text, msg.final, msg.fallback),
                                     "a reply (not spoken)"), 50,
                                 callback_group=ReentrantCallbackGroup(),
                                 qos_overriding_options=overridable)
        # what became of each reply turn (the manager's Say skill waits for it), and the
        # manager's request to stop one (a cancelled Say)
        self.pub_spoken = self.create_publisher(Spoken, SPOKEN_TOPIC, RELIABLE_QOS)
        self.audio = NodeAudioTopics(self)     # audio/input and audio/output, when asked
        self.create_subscription(UInt32, CANCEL_REPLY_TOPIC, self._on_cancel_reply, 10,
                                 callback_group=ReentrantCallbackGroup())
        self._streams = (input_stream, output_stream)
        self.backend = self._starter = None
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(self.params["managed"])

    # --- lifecycle (ros/managed.py) ------------------------------------------------------
    def configure(self) -> None:
        """Build the backend once (a voice backend loads its models; a script is read)."""
        if self.backend is None:
            self._build(*self._streams)

    def _build(self, input_stream, output_stream) -> None:
        self.backend = self._make_backend(input_stream, output_stream)
        if isinstance(self.backend, RobotTurnTaking):
            self._users: tuple[float, str] = (-1e9, "")
            self.backend.tracked_user = self._tracked_user
            self.create_subscription(DetectedUsers, USERS_TOPIC, self._on_users, 10)
        if self.backend.reads_text_input:   # a terminal: logs stay off the dialogue's lines
            self.backend.hold_logs, self.backend.show_prompt = hold_logs, show_prompt
        self.face = make_face(self, self.params, self.backend, self.log)
        self.turns = SpeechTurns(self.backend, publish=self.when_active(
                                     self._publish_utterance, "a line heard (not published)"),
                                 on_state=self._publish_state,
                                 on_input_finished=self._on_input_finished,
                                 on_spoken=self._publish_spoken,
                                 on_partial=self.when_active(self._publish_partial,
                                                             "a partial line"),
                                 on_speaking=lambda on: self.pub_hearing.publish(Bool(data=on)),
                                 reply_timeout=self.params["reply_timeout"], logger=self.log,
                                 acknowledger=Acknowledger(self.params["acknowledge_after"]),
                                 observer=self.face)
        if self.params["ros4hri"] and self.params["barge_in"] and pm.IdsList is not None:
            # a ROS4HRI recogniser hears the user talk over the robot: stop speaking
            self.hri_ear = HriBargeIn(self, lambda voice: self.turns.barge_in(
                f"ROS4HRI voice {voice} spoke during the reply"))
        self._starter = threading.Thread(target=self._start_backend, name="speech-start",
                                         daemon=True)

    def activate(self) -> None:
        """The first activation starts the backend; a later one listens and speaks again."""
        if self._starter.ident is None:
            self._starter.start()

    def deactivate(self) -> None:
        """Stop what is being said; lines heard from now on are not published."""
        self.turns.cancel(0)
        self.log.info("speech inactive: not listening, not speaking")

    def _health(self) -> list[Health]:
        """The backend: started, listening or away (a robot that does not answer)."""
        inactive = self.lifecycle_health("speech")
        if inactive:
            return inactive
        values = {"backend": self.backend_kind, "state": STATE_NAMES[self.turns.state],
                  "barge-ins": getattr(self.backend, "barge_ins", 0)}
        away = self.turns.unavailable_since
        if away is not None:
            level = ERROR if time.monotonic() - away >= FAULT_ERROR_S else WARN
            return [Health("speech", level, f"{self.backend_kind}: unavailable for "
                           f"{time.monotonic() - away:.0f} s; retrying", values)]
        if not self.started.is_set():
            return [Health("speech", WARN, "not started yet: waiting for the manager to "
                           "subscribe", values)]
        return [Health("speech", OK, f"{self.backend_kind}: {values['state']}", values)]

    def _on_users(self, msg: DetectedUsers) -> None:
        """The users the camera tracks: the closest is whom the robot listens to."""
        people = [TrackedPerson(u.id, u.position.x, u.position.z) for u in msg.users]
        self._users = (time.monotonic(), closest(people))

    def _tracked_user(self) -> str:
        """The closest user on camera/users, if it is recent ("" otherwise)."""
        at, user = self._users
        return user if time.monotonic() - at <= PEOPLE_FRESH_S else ""

    @property
    def state(self) -> int:
        return self.turns.state

    @property
    def input_done(self) -> threading.Event:
        return self.turns.input_done

    def _start_backend(self) -> None:
        """Start the backend when someone listens to our utterances (or after the wait)."""
        wait = self.params["wait_for_subscriber"]
        deadline = time.monotonic() + wait
        while wait > 0 and self._listeners_missing():
            if time.monotonic() >= deadline:
                self.log.warning(f"no subscription to {self.pub_utterance.topic_name} from "
                                 f"{', '.join(self._listeners_missing())} after {wait:g} s; "
                                 "starting anyway")
                break
            if self._closed.wait(0.05):
                return
        if self._closed.is_set() or not self._clock_started(deadline):
            return
        if self.backend.reads_text_input:
            self.turns.listening()              # input is read from now on
        self.backend.start(self.turns)
        self.started.set()
        self.log.info(f"speech backend {self.backend_kind!r} started")

    def _clock_started(self, deadline: float) -> bool:
        """With `script_clock_topic`: wait for its first frame (False: the node closed).

        Subscribed only now, so a camera that waits for this node (its wait_for_listeners)
        starts its video when the listeners of our lines are ready.
        """
        topic = self.params["script_clock_topic"]
        if not topic:
            return True
        first = threading.Event()
        # no QoS event handlers: it is destroyed below, off the executor, while the executor
        # may add a handler to its wait set (InvalidHandle, "destruction was requested": a
        # fresh-clone run of the people demo printed it, with a CPU burner beside it)
        sub = self.create_subscription(Image, topic, lambda _msg: first.set(),
                                       qos_profile_sensor_data,
                                       **no_event_handlers("subscription"))
        self.log.info(f"the script starts with the first frame on {sub.topic_name}")
        while not first.wait(0.05):
            if self._closed.is_set():
                return False
            if time.monotonic() >= deadline:
                self.log.warning(f"no frame on {sub.topic_name}: starting anyway")
                break
        self.destroy_subscription(sub)
        return True

    def _listeners_missing(self) -> list[str]:
        """Who of `wait_for_listeners` (or anybody, when none is named) does not listen yet."""
        topic, named = self.pub_utterance.topic_name, self.params["wait_for_listeners"]
        if not named:
            return [] if self.pub_utterance.get_subscription_count() else ["anybody"]
        there = {i.node_name for i in self.get_subscriptions_info_by_topic(topic)}
        return [n for n in named if n not in there]

    def _make_backend(self, input_stream, output_stream) -> SpeechBackend:
        """The chosen backend (speech.SPEECH_BACKENDS), built from the parameters."""
        p, cls = self.params, SPEECH_BACKENDS.load(self.backend_kind)
        io = SpeechIO(input_stream, output_stream, self.log, audio=self.audio)
        try:
            return cls.from_params(p, io)
        except ValueError as e:    # e.g. a part that cannot load (names its parameter)
            raise ParameterError(str(e)) from None

    # ---------------------------------------------------------------- ROS in and out
    def handle_utterance(self, text: str, speaker: str = "", language: str = "",
                         confidence: float = -1.0) -> None:
        """Publish one user utterance as if the backend heard it (barge-in first)."""
        self.turns.utterance(text, speaker, language, confidence)

    def _publish_utterance(self, heard: HeardUtterance) -> None:
        msg = self._utterance_msg(heard)
        self.pub_utterance.publish(msg)
        if self.hri is not None:
            self.hri.heard(msg)

    def _publish_partial(self, heard: HeardUtterance) -> None:
        msg = self._utterance_msg(heard)
        self.pub_partial.publish(msg)
        if self.hri is not None:
            self.hri.hearing(msg)

    def _utterance_msg(self, heard: HeardUtterance) -> Utterance:
        msg = Utterance()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.params["frame_id"]
        msg.text = heard.text
        msg.speaker = heard.speaker or self.params["speaker"]
        msg.source = self.backend_kind
        msg.language = heard.language or self.params["language"]
        msg.confidence = heard.confidence
        if heard.spoken is not None:        # the monotonic clock's times on the node's clock
            now_ns, mono = self.get_clock().now().nanoseconds, time.monotonic()
            for field, t in zip(("speech_start", "speech_end"), heard.spoken):
                setattr(msg, field, Time(nanoseconds=now_ns - int((mono - t) * 1e9)).to_msg())
        return msg

    def _publish_state(self, state: int) -> None:
        msg = SpeechState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.params["frame_id"]
        msg.state = state
        msg.backend = self.backend_kind
        self.pub_state.publish(msg)
        if self.hri is not None:
            self.hri.robot_speaking(state == SpeechState.SPEAKING)

    def _publish_spoken(self, turn_id: int, event: int, text: str) -> None:
        if self._closed.is_set():
            return
        msg = Spoken(turn_id=int(turn_id), event=int(event), text=text)
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.params["frame_id"]
        self.pub_spoken.publish(msg)

    def _on_cancel_reply(self, msg: UInt32) -> None:
        if self.turns is not None:
            self.turns.cancel(int(msg.data))

    def _on_input_finished(self) -> None:
        if self.params["exit_when_done"]:
            threading.Thread(target=self._finish, name="speech-finish", daemon=True).start()

    def _finish(self) -> None:
        if not self.turns.finish(self.params["reply_timeout"]):
            self.log.warning("input finished; stopping without the last reply")
        self.log.info("exit_when_done: shutting down")
        self._on_done()

    # ---------------------------------------------------------------- shutdown
    def close(self) -> None:
        """Stop the backend and the speaker thread (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if getattr(self, "_starter", None) is not None and self._starter.ident is not None:
            self._starter.join(timeout=2.0)
        if self.turns is not None:
            self.turns.close()
        if getattr(self, "face", None) is not None:
            self.face.close()

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(args=None):
    import sys
    if "--list-devices" in (sys.argv if args is None else args):
        from vision_dialogue.voice.sources import AudioSourceError, list_devices
        try:
            print(list_devices())
        except AudioSourceError as e:
            print(f"[speech_node] {e}", file=sys.stderr)
            return 1
        return 0
    return run_node(lambda: SpeechNode(), "speech_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
