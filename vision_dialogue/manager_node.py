"""The conversation manager node: camera frames + utterances in, replies + prompt state out.

A thin ROS adapter around `vision_dialogue.core.conversation.Conversation` (a type without a
package is vision_dialogue_interfaces'):
* `camera/image_raw` (sensor_msgs/Image) and its image_transport companion
  `<resolved image topic>/compressed` (sensor_msgs/CompressedImage) -> frames of the prompt
  timeline. `image_qos:=auto` (default) subscribes with the QoS the camera offers (RELIABLE
  for stock drivers, best effort for sensor-data publishers), as `ros2 bag record` does;
* `dialogue/utterance` (Utterance) -> a FIFO queue served by one turn worker
  thread, so LLM calls never block the executor and frames keep flowing during a reply;
* `dialogue/partial` (Utterance): the words so far of a line still being said;
  a local LLM reads the prompt with them ahead of the turn (`warm_cache`);
* `dialogue/hearing` (std_msgs/Bool): the person is speaking; frame summaries wait meanwhile
  (a summary rewrites the prompt's middle, which the reply would then read again);
* `dialogue/reply` (Reply): one message per streamed sentence (final=false),
  then the whole text (final=true);
* `dialogue/prompt_state` (PromptState, transient local, depth 1): after
  every change and on a timer; a monitor that starts late gets the newest one;
* `dialogue/events` (std_msgs/String, transient local, depth 200): every transcript record as
  JSON (frames with a small JPEG thumbnail), for the `monitor` page and any other tool
  (the three: ros/manager/outputs.py).

Every header stamp comes from the node's clock (bag time under `use_sim_time`).

With `use_tools` (Visual ChatGPT, docs/tools_in_dialogue.md) the LLM may also call the VFM
server's tools (ros/manager/vfm_client.py) during a turn; images they make are published on
`dialogue/tool_image`, and pictures shared on `dialogue/shared_image` are stored in the
image store and announced to the LLM with Visual ChatGPT's "Received." exchange. With
`robot_tools_file` the LLM may call the robot's own services and actions
(ros/manager/robot_tools.py).
"""
from __future__ import annotations

import os

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from vision_dialogue.ros.console import VERBOSE_ENV
from vision_dialogue.core.conversation import Conversation
from vision_dialogue.common.health import OK, WARN, Health
from vision_dialogue.core.persona import PersonaError, default_persona_file, load_persona
from vision_dialogue.core.people import PeopleInView
from vision_dialogue.core.proactive import ProactivePolicy
from vision_dialogue.core.transcript import TranscriptWriter
from vision_dialogue.core.entries import Entry, ReplyEntry
from vision_dialogue.core.turn_taking import ReplyChunk, TurnHooks, TurnTaker
from vision_dialogue.core.frame_input import FrameInput
from vision_dialogue.common.frame_intake import FRAME_AT_EXIT_S, FrameIntake
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros.image_input import ImageTopicInput
from vision_dialogue.ros.standard_inputs import object_notes
from vision_dialogue.ros.image_msgs import ImageConversionError
from vision_dialogue.ros.managed import ManagedNode
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.manager.inputs import ManagerInputs
from vision_dialogue.ros.manager.llm_check import LlmCheck
from vision_dialogue.ros.manager.memory import connect_memory
from vision_dialogue.ros.manager.outputs import ManagerOutputs
from vision_dialogue.ros.manager.params import PARAMS, conversation_config, cross_check, \
    image_policy, proactive_config
from vision_dialogue.ros.manager.tools import connect_application, connect_robot_tools, \
    connect_vfm_tools
from vision_dialogue.ros.topics import IMAGE_TOPIC, PERSONS_TRACKED_TOPIC
from vision_dialogue.ros.params import ParameterError, declare_params

PERSONA_READ_WAIT_S = 20.0
"""Seconds configure waits for a local model to read the persona before the manager
subscribes to the camera (whose `wait_for_listeners` waits for that subscription): a first
frame that came sooner had its opening remark read the persona first (about 2 s for the
1.5B on 2 cores) and shifted the whole demo's timing. Longer, it goes on reading meanwhile."""


def persona_of(p) -> tuple:
    """(path, Persona) of the `persona_file` parameter (ours when empty)."""
    path = p["persona_file"] or str(default_persona_file())
    try:
        return path, load_persona(path)
    except PersonaError as e:
        raise ParameterError(f"persona_file: {e}") from None


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
        self._observer_made = None
        self.params = declare_params(self, PARAMS, cross_check=cross_check)
        self._verbose = os.environ.get(VERBOSE_ENV) == "1"      # bringup/node --verbose
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(self.params["managed"])

    def _build(self, backend, observer) -> None:
        """Everything the manager is made of, in the order it needs (configure)."""
        p, log = self.params, self.get_logger()
        persona_path, persona = persona_of(p)
        self.out = ManagerOutputs(self, p, self._open, verbose=self._verbose)
        self.llm = LlmCheck(p, log, self.out.record, given=backend)
        self.backend = self.llm.backend
        if observer is None and not getattr(self.backend, "supports_images", True):
            observer = self._observer_made = self._make_observer()
        self.policy = image_policy(p)
        self.conversation = conv = Conversation(self.backend, persona,
                                                conversation_config(p, self.policy),
                                                observer=observer, logger=log)
        if p["blur_faces"]:
            from vision_dialogue.perception.privacy import FaceBlurrer
            self.out.redact = FaceBlurrer()   # thumbnails and stored frames
        self.transcript = self._open_transcript()
        conv.add_listener(self._on_entry)
        self.proactive = ProactivePolicy(proactive_config(p))
        self.people = PeopleInView(conv)
        # a frame's one way: the intake's worker -> FrameInput (its detections' note) -> the
        # conversation, whose FrameEntry the turn-taker hears
        notes = object_notes(p, observed_people=observer is not None)
        self.frames = FrameInput(conv, notes, lambda: self.get_clock().now().nanoseconds)
        self.intake = FrameIntake(self.frames.take, min_interval=p["min_frame_interval"],
                                  errors=(ImageConversionError, ValueError),
                                  warn=log.warning, what="camera frame")
        self.vcg = self.robot_tools = self.memory = self.voices = None
        self.skill_host = self.skills = self.intents = None
        self.turns = TurnTaker(conv, self.proactive, p, self._publish_reply,
                               max_waiting=p["max_queued_turns"], frames=self.intake,
                               tracked=self.people.count, hooks=self._turn_hooks(), logger=log)
        self.camera = self._camera_input(conv)
        try:
            if p["use_tools"]:       # Visual ChatGPT
                self.vcg = connect_vfm_tools(self, conv, self.turns, self.camera, p,
                                             self.out.record)
            if p["robot_tools_file"]:
                self.robot_tools = connect_robot_tools(self, conv, p, log)
        except ParameterError:
            self.close_early()
            raise
        self.memory = connect_memory(self, p, conv, self.turns, self.people, self.backend, log,
                                     faces=self._tracked_faces)
        self.inputs = ManagerInputs(self, conv, self.turns, self.people, self.proactive,
                                    self.transcript, notes, self.memory, self.frames)
        self.detections, self.voices = self.inputs.detections, self.inputs.voices
        if p["prompt_state_period"] > 0:
            self.create_timer(p["prompt_state_period"], self.publish_state,
                              callback_group=MutuallyExclusiveCallbackGroup())
        self.skill_host, self.skills, self.intents = connect_application(
            self, conv, self.turns, self.people, self.robot_tools, p, log)
        self._apply_live_params()
        self.llm.watch.start()
        self.turns.start_worker()
        self._built = True
        log.info(f"manager ready: backend={p['llm_backend']} "
                 f"({type(self.backend).__name__}) model={p['model']!r} "
                 f"n={p['n']} m={p['m']} persona={persona_path}")

    def _camera_input(self, conv) -> ImageTopicInput:
        """The camera's subscription, made once a local model has read the persona (bounded)."""
        if not conv.wait_idle(PERSONA_READ_WAIT_S):
            self.get_logger().warning(f"the persona not read in {PERSONA_READ_WAIT_S:g} s; "
                                      "frames come in meanwhile (the first reply reads the rest)")
        p = self.params
        return ImageTopicInput(self, IMAGE_TOPIC, self.intake, p["image_qos"],
                               p["max_image_pixels"], taking=lambda: self.active)

    def _turn_hooks(self) -> TurnHooks:
        """What the parts built after the turn-taker plug into it, all here (read at each use).

        The VFM tools found before the first turn and serving shared pictures; an Ask's answer
        taken by the skill; a reply for lines no skill took between chats only with
        `free_conversation`; each line read for intents; with a person manager publishing
        persons, the opening remark waits for its report (it names people), not a frame. With
        `people_store_url` set (bringup sets it where people_node runs) it waits for that
        report from the start: a first frame before the people node is discovered is no
        greeting.
        """
        p = self.params
        return TurnHooks(
            on_start=lambda: self.vcg and self.vcg.discover(),
            on_shared=lambda bgr: self.vcg and self.vcg.shared_image(bgr),
            claim=lambda text, speaker, said_at: bool(
                self.skill_host and self.skill_host.claim(text, speaker, said_at)),
            converse=lambda: bool(p["free_conversation"]
                                  or (self.skill_host and self.skill_host.chat_active)),
            on_person_line=lambda text, speaker: self.intents and self.intents.read(text,
                                                                                    speaker),
            persons_from_a_manager=lambda: self.voices is not None and (
                bool(p["people_store_url"]) or self.count_publishers(PERSONS_TRACKED_TOPIC) > 0),
            person_manager_reports=lambda: self.voices is not None and self.voices.lists_heard,
            on_dropped=self.publish_state,
            speech_listens=lambda: self.out.reply_pub.get_subscription_count() > 0)

    # --- lifecycle (ros/managed.py) --------------------------------------------------------
    def configure(self) -> None:
        """Build it all, once: the persona read, the LLM backend made, the transcript opened.

        A local model loads here. A later configure (after cleanup) finds it built.
        """
        if not self._built:
            self._build(*self._given)

    def activate(self) -> None:
        self.llm.start()

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
        for name in ("history_budget_chars", "keep_recent_lines", "max_reply_tokens", "stream",
                     "max_tool_rounds"):
            p.on_change(name, lambda v, name=name: conv.tune(**{name: v}))
        p.on_change("max_queued_turns", lambda v: setattr(self.turns.queue, "max_waiting", v))

    def close_early(self) -> None:
        """A part failed while the node was built: stop what already runs."""
        self.intake.close()
        self.turns.close()
        self.conversation.close(0)
        if self.vcg is not None:
            self.vcg.close()
        if self.transcript is not None:
            self.transcript.close()

    def _make_observer(self):
        """Perception for a text-only backend; None (frames go in unobserved) if it fails.

        Its models load here, at configure, not on the first frame: on a loaded machine that
        load (MediaPipe's import alone) outlasted the first frames and held up a stop.
        """
        try:
            from vision_dialogue.perception.observer import make_observer
            observer = make_observer()
        except Exception as e:  # noqa: BLE001
            self.get_logger().warning(f"no frame observer ({e}); frames go in without "
                                      "observations")
            return None
        loaded = observer.frames.warm_up()
        self.get_logger().info(f"frame observer models loaded: {', '.join(loaded) or 'none'}")
        return observer

    def _open_transcript(self) -> TranscriptWriter | None:
        if not self.params["transcript_dir"]:
            return None
        try:
            transcript = TranscriptWriter(self.params["transcript_dir"], self.policy,
                                          logger=self.get_logger(),
                                          retention=self.params["frame_retention"],
                                          redact=self.out.redact)
        except OSError as e:
            self.conversation.close(0)
            raise ParameterError(f"transcript_dir: cannot write there ({e})") from None
        self.conversation.add_listener(transcript)
        self.get_logger().info(f"transcript: {transcript.path}")
        return transcript

    # --- frames ----------------------------------------------------------------------------
    @property
    def frames_received(self) -> int:
        return self.intake.received

    @property
    def frames_skipped(self) -> int:
        return self.intake.skipped

    # --- turns -----------------------------------------------------------------------------
    def _publish_reply(self, c: ReplyChunk) -> None:
        if self.active:           # deactivated while answering: nothing more is said
            self.out.reply(c)

    # --- state -----------------------------------------------------------------------------
    def _on_entry(self, entry: Entry) -> None:
        if isinstance(entry, ReplyEntry) and not entry.result.skill:
            r = entry.result
            self.llm.stats.add(r.first_sentence_s, r.fallback, r.error)
        self.publish_state()
        self.out.entry(entry)

    def _tracked_faces(self) -> dict[str, str] | None:
        """Person id -> face id of those a ROS4HRI person manager tracks (None: no ROS4HRI)."""
        return self.voices.tracked_faces() if self.voices is not None else None

    def _health(self) -> list[Health]:
        """The LLM, the memory of people, and the prompt with the frames coming in.

        The LLM: its server checked, its replies; the memory: writes waiting for its store.
        """
        if not self._built:             # not configured (yet): nothing built to look at
            return self.lifecycle_health("conversation") or []
        llm = [self.llm.health()] + ([self.memory.health()] if self.memory else [])
        inactive = self.lifecycle_health("conversation")
        if inactive:
            return llm + inactive
        st, losing = self.conversation.state(), self.camera.losing()
        values = {"frames received": self.frames_received, "frames rejected":
                  self.intake.rejected,
                  "frames lost between processes": self.camera.loss.total_lost(),
                  "turns dropped": self.turns.queue.dropped, "turns waiting":
                  len(self.turns.queue), "raw frames": st["raw_frames"],
                  "prompt chars": st["prompt_chars"]}
        if losing:
            worst = max(losing, key=lambda p: p.share)
            return llm + [Health("conversation", WARN, f"a camera publisher lost {worst.lost} "
                                 f"of {worst.announced} frames on the way", values)]
        return llm + [Health("conversation", OK, f"{st['raw_frames']} raw frames, "
                             f"{st['prompt_chars']} characters in the prompt", values)]

    def publish_state(self) -> None:
        """Publish a PromptState snapshot now."""
        if self._open():
            self.out.state(self.conversation.state(), self.intake, self.turns.queue.dropped)

    def _open(self) -> bool:
        """Built (configured once) and not closed: the parts exist and run."""
        return self._built and not self._closed

    def destroy_node(self):
        """Close first (idempotent), then destroy.

        A node destroyed without close() left the observer's MediaPipe graphs running, and
        the process ended in std::terminate.
        """
        self.close()
        return super().destroy_node()

    def close(self) -> None:
        """Stop the turn worker, let summaries finish briefly, close the transcript."""
        if not self._open():
            return
        self._closed = True
        self.llm.close()
        self.intake.close()
        if self.vcg is not None:
            self.vcg.close()
        if self.robot_tools is not None:
            self.robot_tools.close()
        self.turns.close()
        if self.memory is not None:
            self.memory.close()
        self.conversation.close(timeout=2.0)
        # after the frame in hand, not past FRAME_AT_EXIT_S (the process then ends without
        # destroying anything); one given to us is the giver's
        if self._observer_made is not None and \
                not self._observer_made.close(timeout=FRAME_AT_EXIT_S):
            self.get_logger().warning(f"a frame was still in the observer after "
                                      f"{FRAME_AT_EXIT_S:g} s; exiting without waiting for it")
        if self.transcript is not None:
            self.transcript.close()
        if self.turns.every_reply_failed:
            self.exit_code = 1
            self.get_logger().error(
                f"every reply of this session ({self.turns.replies}) was the fallback line: the "
                f"LLM never answered ({self.params['llm_backend']}, model "
                f"{self.params['model']!r}; see the errors above)")


def main(args=None):
    return run_node(lambda: ManagerNode(), "manager_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
