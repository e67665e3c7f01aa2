"""The conversation manager node: camera frames + utterances in, replies + prompt state out.

A thin ROS adapter around `vision_dialogue.core.conversation.Conversation`:
* `camera/image_raw` (sensor_msgs/Image) and its image_transport companion
  `<resolved image topic>/compressed` (sensor_msgs/CompressedImage) -> frames of the prompt
  timeline. `image_qos:=auto` (default) subscribes with the QoS the camera offers (RELIABLE
  for stock drivers, best effort for sensor-data publishers), as `ros2 bag record` does;
* `dialogue/utterance` (vision_dialogue/Utterance) -> a FIFO queue served by one turn worker
  thread, so LLM calls never block the executor and frames keep flowing during a reply;
* `dialogue/partial` (vision_dialogue/Utterance): the words so far of a line still being said;
  a local LLM reads the prompt with them ahead of the turn (`warm_cache`);
* `dialogue/hearing` (std_msgs/Bool): the person is speaking; frame summaries wait meanwhile
  (a summary rewrites the prompt's middle, which the reply would then read again);
* `dialogue/reply` (vision_dialogue/Reply): one message per streamed sentence (final=false),
  then the whole text (final=true);
* `dialogue/prompt_state` (vision_dialogue/PromptState, transient local, depth 1): after
  every change and on a timer; a monitor that starts late gets the newest one;
* `dialogue/events` (std_msgs/String, transient local, depth 200): every transcript record as
  JSON (frames with a small JPEG thumbnail), for the `monitor` page and any other tool.

Every header stamp comes from the node's clock (bag time under `use_sim_time`).

With `use_tools` (Visual ChatGPT, docs/tools_in_dialogue.md) the LLM may also call the VFM
server's tools (vision_dialogue/ros/vfm_client.py) during a turn; images they make are published
on `dialogue/tool_image`, and pictures shared on `dialogue/shared_image` are stored in the
image store and announced to the LLM with Visual ChatGPT's "Received." exchange. With
`robot_tools_file` the LLM may call the robot's own services and actions
(vision_dialogue/ros/robot_tools.py).
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos_overriding_options import QoSOverridingOptions
from std_msgs.msg import Bool, String

from vision_dialogue.ros.console import VERBOSE_ENV
from vision_dialogue.llm.base import BackendError
from vision_dialogue.llm.probe import unreachable
from vision_dialogue.llm.factory import backend_class
from vision_dialogue.core.conversation import Conversation
from vision_dialogue.core.health import LLM_CHECK_PERIOD_S, OK, WARN, Health, LlmWatch, \
    ReplyStats
from vision_dialogue.core.persona import PersonaError, default_persona_file, load_persona
from vision_dialogue.core.people import PeopleInView, TrackedPerson
from vision_dialogue.core.proactive import ProactivePolicy
from vision_dialogue.core.transcript import TranscriptWriter, describe_record, event_record, \
    record_from_json
from vision_dialogue.core.turn_taking import ReplyChunk, TurnTaker
from vision_dialogue.core.frame_input import FrameInput
from vision_dialogue.core.frame_intake import FrameIntake
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros.dialogue_tools import DialogueTools
from vision_dialogue.ros.image_input import ImageTopicInput
from vision_dialogue.ros.standard_inputs import connect_standard_inputs, object_notes
from vision_dialogue.ros.image_msgs import ImageConversionError, stamp_to_ns
from vision_dialogue.msg import DetectedUsers, PromptState, Reply, SpeechState, Utterance, \
    VisualEvent
from vision_dialogue.ros.managed import ManagedNode
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.robot_tools import RobotTools
from vision_dialogue.ros.qos import EVENTS_QOS, LATCHED_QOS, RELIABLE_QOS
from vision_dialogue.ros.manager_params import PARAMS, backend_options, conversation_config, \
    cross_check, image_policy, proactive_config
from vision_dialogue.ros.skill_host import ManagerSkillHost
from vision_dialogue.ros.topics import EVENTS_TOPIC, FACE_RECORDS_TOPIC, HEARING_TOPIC, \
    PARTIAL_TOPIC, VISUAL_EVENTS_TOPIC
from vision_dialogue.ros.skill_servers import IntentOutput, SkillServers
from vision_dialogue.ros.params import ParameterError, declare_params

#: utterances the subscription holds while the callback is busy (a burst must not be lost)
UTTERANCE_DEPTH = 100
THUMBNAIL_SIDE = 192      # longest side of the frame thumbnails in dialogue/events


class ManagerNode(ManagedNode):
    """Vision-enabled dialogue manager.

    A managed node (ros/managed.py): configure builds it (a missing persona or transcript
    folder refuses the transition); active, it takes frames, lines, events and skill goals
    and answers; inactive it ignores them and answers nothing (waiting turns are dropped on
    record, a reply being given is no longer published) and keeps its prompt. The LLM server
    is first looked at on the first activation.

    `backend=` / `observer=` inject a ChatBackend / frame observer (tests, benchmarks); otherwise
    they come from the parameters.
    """

    def __init__(self, *, backend=None, observer=None, **kwargs):
        super().__init__(kwargs.pop("node_name", "manager_node"), **kwargs)
        self._built = self._closed = False   # built by configure, closed at the end
        self.exit_code = 0              # run_node's exit status: 1 when every reply failed
        self._given = (backend, observer)
        self._probe = self._observer_made = None
        self.params = declare_params(self, PARAMS, cross_check=cross_check)
        self._verbose = os.environ.get(VERBOSE_ENV) == "1"      # bringup/node --verbose
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(self.params["managed"])

    def _build(self, backend, observer) -> None:
        """Everything the manager is made of, in the order it needs (configure)."""
        p, log = self.params, self.get_logger()
        persona_path = p["persona_file"] or str(default_persona_file())
        try:
            persona = load_persona(persona_path)
        except PersonaError as e:
            raise ParameterError(f"persona_file: {e}") from None
        made_here = backend is None
        self.backend = self._make_backend() if made_here else backend
        # a server backend is probed at start (is it there, does it take images)
        probe = getattr(backend_class(p["llm_backend"]), "probe", None) if made_here else None
        probed = None
        if probe is not None and self.backend.supports_images and p["probe_images"]:
            probed = self._check_images(probe)
        if observer is None and not getattr(self.backend, "supports_images", True):
            observer = self._observer_made = self._make_observer()
        self.policy = image_policy(p)
        self.conversation = conv = Conversation(self.backend, persona,
                                                conversation_config(p, self.policy),
                                                observer=observer, logger=log)
        self.redact = None
        if p["blur_faces"]:
            from vision_dialogue.perception.privacy import FaceBlurrer
            self.redact = FaceBlurrer()         # thumbnails and stored frames
        self.transcript = self._open_transcript()
        conv.add_listener(self._on_event)
        self._create_publishers()
        self.proactive = ProactivePolicy(proactive_config(p))
        self.people = PeopleInView(conv)
        # a frame's one way: the intake's worker -> FrameInput (its detections' note) -> the
        # conversation, whose "frame" event the turn-taker hears
        notes = object_notes(p, observed_people=observer is not None)
        self.frames = FrameInput(conv, notes, lambda: self.get_clock().now().nanoseconds)
        self.intake = FrameIntake(self.frames.take, min_interval=p["min_frame_interval"],
                                  errors=(ImageConversionError, ValueError),
                                  warn=log.warning, what="camera frame")
        self.turns = TurnTaker(conv, self.proactive, p, self._publish_reply,
                               max_waiting=p["max_queued_turns"], frames=self.intake,
                               tracked=self.people.count, on_dropped=self.publish_state,
                               logger=log)
        self.camera = ImageTopicInput(self, "camera/image_raw", self.intake, p["image_qos"],
                                      p["max_image_pixels"], taking=lambda: self.active)
        self.vcg = self._dialogue_tools() if p["use_tools"] else None   # Visual ChatGPT
        self.robot_tools = self._robot_tools() if p["robot_tools_file"] else None
        self._create_subscriptions(notes)
        self._application_side()
        self._apply_live_params()
        self._report_health(probe)
        self.turns.start_worker()
        self._built = True
        log.info(f"manager ready: backend={p['llm_backend']} "
                 f"({type(self.backend).__name__}) model={p['model']!r} "
                 f"n={p['n']} m={p['m']} persona={persona_path}")
        self._probe = None if probe is None else threading.Thread(
            target=self._probe_llm, args=(probe, probed), name="vd-probe", daemon=True)

    # --- lifecycle (ros/managed.py) --------------------------------------------------------
    def configure(self) -> None:
        """Build it all, once: the persona read, the LLM backend made, the transcript opened.

        A local model loads here. A later configure (after cleanup) finds it built.
        """
        if not self._built:
            self._build(*self._given)

    def activate(self) -> None:
        if self._probe is not None and self._probe.ident is None:
            self._probe.start()

    def deactivate(self) -> None:
        dropped = self.turns.queue.drop_waiting("the manager was deactivated (lifecycle)")
        self.get_logger().info(f"manager inactive: answering nothing ({dropped} waiting "
                               "turn(s) dropped), the prompt kept")

    # --- construction ------------------------------------------------------------------------
    def _apply_live_params(self) -> None:
        """Live parameters (ros/params.py).

        Those read at each use need nothing here; these are copied into the conversation and the
        frame intake, so a change is pushed.
        """
        p, conv = self.params, self.conversation
        p.on_change("n", lambda v: conv.set_summary_rule(v, p["m"]))
        p.on_change("m", lambda v: conv.set_summary_rule(p["n"], v))
        p.on_change("min_frame_interval", lambda v: setattr(self.intake, "min_interval", v))
        p.on_change("history_budget_chars", lambda v: setattr(conv.folder, "budget_chars", v))
        p.on_change("keep_recent_lines", lambda v: setattr(conv.folder, "keep_recent_lines", v))
        p.on_change("max_reply_tokens", lambda v: setattr(conv.config, "max_reply_tokens", v))
        p.on_change("stream", lambda v: setattr(conv.config, "stream", v))
        p.on_change("max_tool_rounds", lambda v: setattr(conv.turn_tools, "max_rounds", v))
        p.on_change("max_queued_turns", lambda v: setattr(self.turns.queue, "max_waiting", v))

    def _application_side(self) -> None:
        """skill/say, skill/ask, skill/chat and the intents (README 'Drive the conversation')."""
        p, log = self.params, self.get_logger()
        self.skill_host = host = ManagerSkillHost(self, self.conversation, self.turns,
                                                  self.people, log)
        self.turns.converse = lambda: bool(p["free_conversation"] or host.chat_active)
        self.skills = SkillServers(self, self.conversation, host, p, log) if p["skills"] \
            else None
        self.intents = IntentOutput(self, self.conversation, self.turns, host,
                                    p["intents_file"], log) if p["intents_file"] else None
        tools = self.robot_tools
        if tools is not None:           # barge-in, or the chat ending, stops a robot action
            self.turns.on_heard = lambda text: tools.interrupt("the person spoke")
            host.on_chat_end = lambda: tools.interrupt("the chat skill ended")

    def _robot_tools(self) -> RobotTools | None:
        """The robot's own services and actions as the LLM's tools (`robot_tools_file`)."""
        conv, p, log = self.conversation, self.params, self.get_logger()
        if not conv.turn_tools.supported:
            log.warning(f"robot_tools_file: the {p['llm_backend']!r} backend cannot call "
                        "tools; answering without the robot's tools")
            return None
        try:
            tools = RobotTools.from_file(
                self, p["robot_tools_file"], logger=log,
                on_event=lambda record: conv.notify("robot_action", record))
        except ParameterError:
            self.close_early()
            raise
        conv.add_tools(tools)
        conv.turn_tools.max_rounds = p["max_tool_rounds"]
        log.info(f"robot tools for the LLM: {', '.join(tools.tools)}")
        return tools

    def _dialogue_tools(self) -> DialogueTools:
        """Visual ChatGPT's side: the VFM tools, found by the turn worker before its first turn."""
        camera = self.camera
        try:
            vcg = DialogueTools(
                self, self.conversation, self.params, camera_frame_id=lambda: camera.frame_id,
                publish_event=self.publish_event, on_shared=self.turns.shared_image,
                thumbnail_side=THUMBNAIL_SIDE)
        except ParameterError:
            self.close_early()
            raise
        self.turns.on_start, self.turns.on_shared = vcg.discover, vcg.shared_image
        return vcg

    def close_early(self) -> None:
        """A part failed while the node was built: stop what already runs."""
        self.intake.close()
        self.turns.close()
        self.conversation.close(0)
        if getattr(self, "vcg", None) is not None:
            self.vcg.close()
        if self.transcript is not None:
            self.transcript.close()

    def _make_backend(self):
        kind = self.params["llm_backend"]
        try:
            return backend_class(kind).from_options(backend_options(self.params))
        except (BackendError, ValueError, OSError) as e:
            raise ParameterError(f"llm_backend: cannot start {kind!r} ({e})") from None

    def _check_images(self, probe):
        """Before the conversation is built: ask whether the server's model takes images.

        One tiny image (a few tokens). A model that refuses it (a text-only model: llama.cpp's
        server answers HTTP 500) gets frames as text observations, said in one log line,
        instead of a session of fallback replies. Unreachable: as configured (the probe thread
        warns). Returns the Probe.
        """
        o, timeout = backend_options(self.params), self.params["request_timeout"]
        found = probe(o, timeout=min(10.0, timeout), images=True)
        if found.images is False:
            self.backend.supports_images = False
            self.get_logger().warning(
                f"{found.detail}: frames go in as text observations instead "
                "(supports_images:=false says so and skips this check)")
            return probe(o, timeout=min(5.0, timeout))
        return found

    def _probe_llm(self, probe, found=None) -> None:
        """At startup: is the endpoint there and does it serve the model? One warning if not.

        So a server that is not running is noticed now, not at the first turn; the result also
        goes to dialogue/events (the monitor's LLM badge). `found`: the image check's answer.
        """
        if found is None:
            found = probe(backend_options(self.params),
                          timeout=min(5.0, self.params["request_timeout"]))
        if found.ok is False:
            self.get_logger().warning(f"LLM check at startup: {found.detail}; {found.fix}. "
                                      "Turns get the fallback line until it answers.")
        self.publish_event({"type": "health", "component": "llm", "ok": found.ok,
                            "detail": found.detail})

    def _make_observer(self):
        """Perception for a text-only backend; None (frames go in unobserved) if it fails."""
        try:
            from vision_dialogue.perception.observer import make_observer
            return make_observer()
        except Exception as e:  # noqa: BLE001
            self.get_logger().warning(f"no frame observer ({e}); frames go in without "
                                      "observations")
            return None

    def _open_transcript(self) -> TranscriptWriter | None:
        if not self.params["transcript_dir"]:
            return None
        try:
            transcript = TranscriptWriter(self.params["transcript_dir"], self.policy,
                                          logger=self.get_logger(),
                                          retention=self.params["frame_retention"],
                                          redact=self.redact)
        except OSError as e:
            self.conversation.close(0)
            raise ParameterError(f"transcript_dir: cannot write there ({e})") from None
        self.conversation.add_listener(transcript)
        self.get_logger().info(f"transcript: {transcript.path}")
        return transcript

    def _create_publishers(self) -> None:
        overridable = QoSOverridingOptions.with_default_policies()
        self.reply_pub = self.create_publisher(Reply, "dialogue/reply", 10,
                                               qos_overriding_options=overridable)
        self.state_pub = self.create_publisher(PromptState, "dialogue/prompt_state", LATCHED_QOS)
        self.events_pub = self.create_publisher(String, EVENTS_TOPIC, EVENTS_QOS)

    def _create_subscriptions(self, notes) -> None:
        """The inputs besides the camera's (created in _build, beside the frame intake)."""
        p = self.params
        self.create_subscription(DetectedUsers, "camera/users",
                                 self.when_active(self._on_users, "camera/users"), 10)
        if p["visual_events"]:
            self.create_subscription(VisualEvent, VISUAL_EVENTS_TOPIC, self.when_active(
                self._on_visual_event, "a visual event"), 50)
        # volatile: matches a latched (transient local) speech node and a plain publisher alike
        self.create_subscription(SpeechState, "dialogue/speech_state", self._on_speech_state,
                                 RELIABLE_QOS)
        # one callback at a time, so utterances reach the turn queue in the order they came
        self.create_subscription(Utterance, "dialogue/utterance", self.when_active(
                                 self._on_utterance, "a line (not answered)"), UTTERANCE_DEPTH,
                                 callback_group=MutuallyExclusiveCallbackGroup(),
                                 qos_overriding_options=QoSOverridingOptions
                                 .with_default_policies())
        # the words so far of a line still being said: the prompt is read ahead (a local LLM)
        self.create_subscription(Utterance, PARTIAL_TOPIC,
                                 self.when_active(self._on_partial, "a partial line"), 10)
        self.create_subscription(Bool, HEARING_TOPIC,
                                 lambda msg: self.conversation.hearing(msg.data), RELIABLE_QOS)
        # what the robot's face showed (the speech node's face), into the transcript
        self.create_subscription(String, FACE_RECORDS_TOPIC, self._on_face_record, RELIABLE_QOS)
        # vision_msgs detections and ROS4HRI in, where those packages are installed
        frames = self.frames
        self.detections, self.voices = connect_standard_inputs(
            self, p, self.conversation, self.turns, self.people, notes,
            frame_width=lambda: frames.width, on_engaging=self._on_engaging)
        if p["prompt_state_period"] > 0:
            self.create_timer(p["prompt_state_period"], self.publish_state,
                              callback_group=MutuallyExclusiveCallbackGroup())

    def _on_face_record(self, msg: String) -> None:
        """An expression the robot's face showed, for the transcript and the monitor."""
        try:
            record = record_from_json(msg.data)
        except ValueError as e:
            self.get_logger().warning(f"{FACE_RECORDS_TOPIC}: ignoring a record ({e})",
                                      throttle_duration_sec=10.0)
            return
        self.conversation.notify("face", record)

    def _on_engaging(self, label: str) -> None:
        """A ROS4HRI person starts engaging with the robot: the opening remark, once."""
        if self.turns.greet_once():
            self.get_logger().info(f"{label} is engaging: greeting")

    # --- frames ----------------------------------------------------------------------------
    @property
    def frames_received(self) -> int:
        return self.intake.received

    @property
    def frames_skipped(self) -> int:
        return self.intake.skipped

    # --- turns -----------------------------------------------------------------------------
    def _on_utterance(self, msg: Utterance) -> None:
        self.turns.utterance(msg.text, msg.speaker, msg.language)

    def _on_partial(self, msg: Utterance) -> None:
        self.conversation.hear_ahead(msg.text, msg.speaker, msg.language)

    def _on_users(self, msg: DetectedUsers) -> None:
        """The people the camera tracks (Furhat): a note in the prompt, arrivals, departures."""
        self.people.update([TrackedPerson(u.id, u.position.x, u.position.z, u.emotion)
                            for u in msg.users])

    def _on_visual_event(self, msg: VisualEvent) -> None:
        stamp_ns = stamp_to_ns(msg.header.stamp) or self.get_clock().now().nanoseconds
        self.turns.seen(msg.kind, msg.text or msg.kind, stamp_ns / 1e9)

    def _on_speech_state(self, msg: SpeechState) -> None:
        """The robot talks or thinks: no remark unasked now."""
        self.proactive.robot_busy(msg.state in (SpeechState.THINKING, SpeechState.SPEAKING))

    def _publish_reply(self, c: ReplyChunk) -> None:
        if not self.active:           # deactivated while answering: nothing more is said
            return
        r = Reply()
        r.header.stamp = self.get_clock().now().to_msg()
        r.header.frame_id = self.params["frame_id"]
        r.turn_id, r.chunk_index, r.text = int(c.turn_id), int(c.index), c.text
        r.in_reply_to, r.final, r.fallback = c.in_reply_to, bool(c.final), bool(c.fallback)
        self.reply_pub.publish(r)

    # --- state -----------------------------------------------------------------------------
    def _on_event(self, kind: str, data: dict) -> None:
        r = data.get("result") if kind == "reply" else None
        if r is not None and not getattr(r, "skill", ""):
            self.reply_stats.add(r.first_sentence_s, r.fallback, r.error)
        self.publish_state()
        record = event_record(kind, data)
        frame = data.get("frame")
        thumb = None
        if frame is not None:
            try:
                thumb = frame.stored_jpeg(THUMBNAIL_SIDE, self.params["jpeg_quality"], self.redact)
            except Exception:  # noqa: BLE001 - no thumbnail (never an unblurred one)
                pass            # the record still goes out
        self.publish_event(record, thumb)
        line = describe_record(record) if self._verbose and record is not None else ""
        if line:
            self.get_logger().info(line)        # bringup --verbose

    def _report_health(self, probe) -> None:
        """/diagnostics: the LLM server looked at every few seconds, the replies, the prompt."""
        self.reply_stats = ReplyStats()
        self.llm_watch = LlmWatch(
            None if probe is None else lambda: probe(backend_options(self.params),
                                                     timeout=LLM_CHECK_PERIOD_S),
            self.reply_stats, unreachable=lambda: unreachable(self.params["base_url"]))
        self.llm_watch.start()

    def _health(self) -> list[Health]:
        """The LLM (server checked, replies), and the prompt with the frames coming in."""
        if not self._built:             # not configured (yet): nothing built to look at
            return self.lifecycle_health("conversation") or []
        llm = self.llm_watch.health(backend=self.params["llm_backend"], model=self.params["model"])
        inactive = self.lifecycle_health("conversation")
        if inactive:
            return [llm] + inactive
        st, losing = self.conversation.state(), self.camera.loss.losing()
        values = {"frames received": self.frames_received, "frames rejected":
                  self.intake.rejected, "frames lost between processes": sum(
                      p.lost for p in self.camera.loss.publishers()),
                  "turns dropped": self.turns.queue.dropped, "turns waiting":
                  len(self.turns.queue), "raw frames": st["raw_frames"],
                  "prompt chars": st["prompt_chars"]}
        if losing:
            worst = max(losing, key=lambda p: p.share)
            return [llm, Health("conversation", WARN, f"a camera publisher lost {worst.lost} of "
                                f"{worst.announced} frames on the way", values)]
        return [llm, Health("conversation", OK, f"{st['raw_frames']} raw frames, "
                            f"{st['prompt_chars']} characters in the prompt", values)]

    def publish_event(self, record: dict | None, thumbnail: bytes | None = None) -> None:
        """Publish a record on dialogue/events (`thumbnail`: its JPEG, as base64)."""
        if record is None or not self._open() or not rclpy.ok(context=self.context):
            return
        record = {"t": round(time.time(), 3), **record}
        if thumbnail:
            record["thumbnail"] = base64.b64encode(thumbnail).decode("ascii")
        self.events_pub.publish(String(data=json.dumps(record, ensure_ascii=False)))

    def publish_state(self) -> None:
        """Publish a PromptState snapshot now."""
        if not self._open() or not rclpy.ok(context=self.context):
            return
        st = self.conversation.state()
        msg = PromptState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.params["frame_id"]
        msg.frames_received = _u32(self.frames_received)
        msg.frames_rejected = _u32(self.intake.rejected)
        causes = sorted(self.intake.rejected_by_cause.items())
        msg.rejected_causes = [c for c, _ in causes]
        msg.rejected_counts = [_u32(n) for _, n in causes]
        msg.turns_dropped = _u32(self.turns.queue.dropped)
        for k in ("raw_frames", "frame_summaries", "dialogue_lines", "folded_lines",
                  "pending_summaries", "prompt_chars", "prompt_image_bytes"):
            setattr(msg, k, _u32(st[k]))
        msg.summaries, msg.history_summary = st["summaries"], st["history_summary"]
        msg.timeline = [t[:200] for t in st["timeline"]]
        try:
            self.state_pub.publish(msg)
        except Exception as e:  # noqa: BLE001 - shutting down
            self.get_logger().debug(f"prompt state not published: {e}")

    def _open(self) -> bool:
        """Built (configured once) and not closed: the parts exist and run."""
        return self._built and not self._closed

    def close(self) -> None:
        """Stop the turn worker, let summaries finish briefly, close the transcript."""
        if not self._open():
            return
        self._closed = True
        self.llm_watch.close()
        self.intake.close()
        if self.vcg is not None:
            self.vcg.close()
        if self.robot_tools is not None:
            self.robot_tools.close()
        if self.intents is not None:
            self.intents.close()
        self.turns.close()
        self.conversation.close(timeout=2.0)
        if self._observer_made is not None:
            # after the frame in hand: MediaPipe's threads must not outlive the process (a
            # manager stopped mid-frame died of std::terminate); one given to us is the giver's
            self._observer_made.close()
        if self.transcript is not None:
            self.transcript.close()
        if self.turns.every_reply_failed:
            self.exit_code = 1
            self.get_logger().error(
                f"every reply of this session ({self.turns.replies}) was the fallback line: the "
                f"LLM never answered ({self.params['llm_backend']}, model "
                f"{self.params['model']!r}; see the errors above)")


def _u32(n: int) -> int:
    """A count for a uint32 message field (a very long session saturates, never wraps)."""
    return int(min(n, 2 ** 32 - 1))


def main(args=None):
    return run_node(lambda: ManagerNode(), "manager_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
