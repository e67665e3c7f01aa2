"""The speech I/O node: utterances in (terminal, script, Furhat Remote API, Furhat Realtime API),
replies out, with sentence-by-sentence speech of streamed replies, barge-in and a turn state.

Topics (relative, remappable):
  publishes  dialogue/utterance    vision_dialogue/Utterance   what the user said
  subscribes dialogue/reply        vision_dialogue/Reply       chunks (final=false), then final
  publishes  dialogue/speech_state vision_dialogue/SpeechState IDLE/LISTENING/THINKING/SPEAKING
                                                               (transient local: late joiners
                                                               get the current state)

Replies: each non-empty chunk is spoken as it arrives (a queue and one speaker thread keep the
order); the final message is spoken only if no chunk of its turn came (split into sentences).
Barge-in: an utterance that arrives while a reply is queued or being spoken stops speech
(`backend.stop_speaking()`), drops the rest of that reply (later chunks of its turn are
ignored) and is published as usual.
"""
from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from collections import defaultdict, deque
from typing import Callable, TextIO

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions

from vision_dialogue.core.sentences import split_sentences
from vision_dialogue.msg import Reply, SpeechState, Utterance
from vision_dialogue.node_runner import run_node
from vision_dialogue.ros_params import Param, declare_params
from vision_dialogue.speech import BACKEND_NAMES, SpeechBackend, backend_class
from vision_dialogue.speech.script import ScriptError, load_script

def _non_empty(v: str) -> str | None:
    return None if str(v).strip() else "must not be empty"


def _xyz(v) -> str | None:
    if len(v) != 3 or not all(math.isfinite(float(x)) for x in v):
        return "must be 3 finite numbers [x, y, z] in metres"
    return None


PARAMS = [
    Param("backend", "terminal", "Where utterances come from and replies go.",
          choices=BACKEND_NAMES),
    Param("frame_id", "microphone", "frame_id of the utterance and state headers.",
          check=_non_empty),
    Param("language", "en-US", "BCP-47 language: recognition language on Furhat, and the "
          "language tag of utterances (script items may override it).", check=_non_empty),
    Param("speaker", "", "Speaker label put on terminal/script utterances (script items may "
          "override it)."),
    Param("reply_timeout", 30.0, "Seconds to wait for a reply before listening again.",
          range=(0.1, 3600.0)),
    Param("wait_for_subscriber", 10.0, "Start the backend once dialogue/utterance has a "
          "subscriber (so the first utterances are not lost), or after this many seconds; "
          "0: start at once.", range=(0.0, 3600.0)),
    Param("exit_when_done", False, "Shut the node down when input ends (end of script, or EOF "
          "on the terminal), after the last reply."),
    Param("script_file", "", "YAML/JSON script for backend=script: a list of "
          "{say: text, delay: s} or {say: text, wait_for_reply: true}."),
    Param("furhat_host", "localhost", "Furhat robot (or SDK) host name or IP.",
          check=_non_empty),
    Param("furhat_port", 0, "Furhat port; 0: the API's default (54321 Remote API, "
          "9000 Realtime API).", range=(0, 65535)),
    Param("furhat_key", "", "Realtime API key, if the robot requires one."),
    Param("voice", "", "Furhat voice name; empty keeps the robot's current voice."),
    Param("gaze_away_gesture", "GazeAway", "Gesture played while the reply is produced; "
          "empty for none."),
    Param("gaze_away_location", [0.5, 0.4, 1.0], "Point [x, y, z] (metres, robot frame) "
          "attended while the reply is produced.", check=_xyz),
    Param("barge_in", True, "Furhat backends: keep listening while the robot speaks, so the "
          "user can interrupt (speech stops and the new utterance is published)."),
    Param("listen_timeout", 30.0, "Furhat: longest wait for one listen to return, s.",
          range=(0.5, 600.0)),
    Param("say_timeout", 120.0, "Furhat: longest a blocking say may take, s.",
          range=(1.0, 3600.0)),
    Param("request_timeout", 5.0, "Furhat: timeout of other robot calls, s.",
          range=(0.05, 60.0)),
    Param("backoff_initial", 0.5, "Robot unreachable: first retry delay, s (doubles).",
          range=(0.01, 60.0)),
    Param("backoff_max", 10.0, "Robot unreachable: longest retry delay, s.",
          range=(0.01, 600.0)),
]
# The backend is built from these at startup; changing them later would not take effect, so
# `ros2 param set` refuses instead of pretending.
PARAMS = [dataclasses.replace(p, read_only=True) for p in PARAMS]


def _cross_check(v: dict) -> str | None:
    if v["backoff_initial"] > v["backoff_max"]:
        return (f"backoff_initial: {v['backoff_initial']} is larger than "
                f"backoff_max={v['backoff_max']}")
    if v["backend"] == "script":
        try:
            load_script(v["script_file"])
        except ScriptError as e:
            return f"script_file: {e}"
    return None


class _Events:
    """The SpeechEvents a backend reports to (kept off the Node's namespace)."""

    def __init__(self, node: "SpeechNode"):
        self._node = node

    def utterance(self, text: str, speaker: str = "", language: str = "",
                  confidence: float = -1.0) -> None:
        self._node.handle_utterance(text, speaker, language, confidence)

    def listening(self) -> None:
        self._node._on_listening()

    def input_finished(self) -> None:
        self._node._on_input_finished()

    def unavailable(self) -> None:
        self._node._on_unavailable()


class SpeechNode(Node):
    """Speech I/O node. kwargs go to Node.__init__ (context=, parameter_overrides=, ...).

    input_stream/output_stream replace stdin/stdout for the terminal and script backends;
    on_done is called when input ended and exit_when_done is set (default: shut down the
    node's context, which ends `run_node`'s spin).
    """

    def __init__(self, name: str = "speech_node", *, input_stream: TextIO | None = None,
                 output_stream: TextIO | None = None,
                 on_done: Callable[[], None] | None = None, **kwargs):
        self._closed = threading.Event()
        self.backend: SpeechBackend | None = None
        self._speaker: threading.Thread | None = None
        super().__init__(name, **kwargs)
        self.p = declare_params(self, PARAMS, _cross_check)
        self.log = self.get_logger()
        self._on_done = on_done or (lambda: self.context.try_shutdown())
        self._cv = threading.Condition(threading.RLock())
        self._state = None
        self._speech_q: "queue.Queue[tuple]" = queue.Queue()
        self._reply_turn: int | None = None    # newest turn with reply queued/being spoken
        self._speaking_turn: int | None = None  # turn whose reply the speaker thread began
        self._chunks: dict[int, int] = defaultdict(int)
        self._interrupted: deque[int] = deque(maxlen=16)
        self._awaiting_since: float | None = None
        self.input_done = threading.Event()
        self.started = threading.Event()     # the backend is running

        group = ReentrantCallbackGroup()
        overridable = QoSOverridingOptions.with_default_policies()
        self.pub_utterance = self.create_publisher(Utterance, "dialogue/utterance", 10,
                                                   qos_overriding_options=overridable)
        state_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_state = self.create_publisher(SpeechState, "dialogue/speech_state", state_qos)
        self.create_subscription(Reply, "dialogue/reply", self._on_reply, 50,
                                 callback_group=group, qos_overriding_options=overridable)
        self.backend = self._make_backend(input_stream, output_stream)
        self._set_state(SpeechState.IDLE)
        self._speaker = threading.Thread(target=self._speak_loop, name="speech-speaker",
                                         daemon=True)
        self._speaker.start()
        self._starter = threading.Thread(target=self._start_backend, name="speech-start",
                                         daemon=True)
        self._starter.start()

    def _start_backend(self) -> None:
        """Start the backend when someone listens to our utterances (or after the wait)."""
        wait = self.p["wait_for_subscriber"]
        deadline = time.monotonic() + wait
        while wait > 0 and self.pub_utterance.get_subscription_count() == 0:
            if time.monotonic() >= deadline:
                self.log.warning(f"nobody subscribes to {self.pub_utterance.topic_name} after "
                                 f"{wait:g} s; starting anyway")
                break
            if self._closed.wait(0.05):
                return
        if self._closed.is_set():
            return
        if self.p["backend"] in ("terminal", "script"):
            self._on_listening()              # input is read from now on
        self.backend.start(_Events(self))
        self.started.set()
        self.log.info(f"speech backend {self.p['backend']!r} started")

    # ---------------------------------------------------------------- setup
    def _make_backend(self, input_stream, output_stream) -> SpeechBackend:
        p, name = self.p, self.p["backend"]
        cls = backend_class(name)
        if name == "terminal":
            return cls(input_stream, output_stream, language=p["language"],
                       speaker=p["speaker"], logger=self.log)
        if name == "script":
            return cls(p["script_file"], reply_timeout=p["reply_timeout"],
                       output_stream=output_stream, language=p["language"],
                       speaker=p["speaker"], logger=self.log)
        robot = dict(voice=p["voice"], language=p["language"],
                     gaze_away_gesture=p["gaze_away_gesture"],
                     gaze_away_location=list(p["gaze_away_location"]),
                     listen_timeout=p["listen_timeout"], say_timeout=p["say_timeout"],
                     request_timeout=p["request_timeout"], barge_in=p["barge_in"],
                     reply_timeout=p["reply_timeout"], backoff_initial=p["backoff_initial"],
                     backoff_max=p["backoff_max"], logger=self.log)
        if name == "furhat":
            return cls(p["furhat_host"], p["furhat_port"] or 54321, **robot)
        return cls(p["furhat_host"], p["furhat_port"] or 9000, key=p["furhat_key"], **robot)

    # ---------------------------------------------------------------- state
    @property
    def state(self) -> int:
        return self._state

    def _set_state(self, state: int) -> None:
        with self._cv:
            if state == self._state:
                return
            self._state = state
            msg = SpeechState()
            msg.header.stamp = self.get_clock().now().to_msg()
            msg.header.frame_id = self.p["frame_id"]
            msg.state = state
            msg.backend = self.p["backend"]
            if not self._closed.is_set():
                self.pub_state.publish(msg)
            self._cv.notify_all()

    def _idle(self) -> bool:
        return (self._reply_turn is None and self._awaiting_since is None
                and self._speech_q.empty())

    # ---------------------------------------------------------------- input
    def handle_utterance(self, text: str, speaker: str = "", language: str = "",
                         confidence: float = -1.0) -> None:
        """Publish one user utterance (barge-in first if a reply is being spoken)."""
        text = (text or "").strip()
        if not text or self._closed.is_set():
            return
        with self._cv:
            barge = self._reply_turn is not None or self._speaking_turn is not None
            if barge:
                for t in (self._reply_turn, self._speaking_turn):
                    if t is not None and t not in self._interrupted:
                        self._interrupted.append(t)
                self._drain_speech()
                self._reply_turn = self._speaking_turn = None
            self._awaiting_since = time.monotonic()
        if barge:
            self.log.info("barge-in: the user spoke during the reply; stopping speech")
            self._backend_call(self.backend.stop_speaking)
        msg = Utterance()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.p["frame_id"]
        msg.text = text
        msg.speaker = speaker or self.p["speaker"]
        msg.source = self.p["backend"]
        msg.language = language or self.p["language"]
        msg.confidence = float(confidence)
        self.pub_utterance.publish(msg)
        self._set_state(SpeechState.THINKING)
        self._backend_call(self.backend.on_thinking)

    def _drain_speech(self) -> None:
        while True:
            try:
                item = self._speech_q.get_nowait()
            except queue.Empty:
                return
            if item[1] not in self._interrupted:
                self._interrupted.append(item[1])

    def _on_listening(self) -> None:
        with self._cv:
            if self._idle() and self._speaking_turn is None:
                self._set_state(SpeechState.LISTENING)

    def _on_unavailable(self) -> None:
        with self._cv:
            if self._idle() and self._speaking_turn is None:
                self._set_state(SpeechState.IDLE)      # not listening while the robot is away

    def _on_input_finished(self) -> None:
        self.input_done.set()
        self.log.info("input finished")
        if not self.p["exit_when_done"]:
            return
        threading.Thread(target=self._finish, name="speech-finish", daemon=True).start()

    def _finish(self) -> None:
        with self._cv:
            if not self._cv.wait_for(lambda: self._idle() and self._speaking_turn is None,
                                     timeout=self.p["reply_timeout"]):
                self.log.warning("input finished; stopping without the last reply")
            self._set_state(SpeechState.IDLE)
        self.log.info("exit_when_done: shutting down")
        self._on_done()

    # ---------------------------------------------------------------- replies
    def _on_reply(self, msg: Reply) -> None:
        tid = int(msg.turn_id)
        with self._cv:
            if tid in self._interrupted:
                self.log.debug(f"ignoring reply of interrupted turn {tid}")
                return
            self._awaiting_since = None
            if not msg.final:
                text = msg.text.strip()
                if text:
                    self._chunks[tid] += 1
                    self._reply_turn = tid
                    self._speech_q.put(("say", tid, text))
                return
            if self._chunks.pop(tid, 0) == 0:
                for sentence in split_sentences(msg.text):
                    self._speech_q.put(("say", tid, sentence))
            if msg.fallback:
                self.log.warning(f"turn {tid}: the reply is the fallback (the LLM failed)")
            self._reply_turn = tid
            self._speech_q.put(("end", tid, msg.text))
            for old in [t for t in self._chunks if t < tid - 8]:  # forget abandoned turns
                self._chunks.pop(old, None)

    def _speak_loop(self) -> None:
        while not self._closed.is_set():
            try:
                kind, tid, text = self._speech_q.get(timeout=0.1)
            except queue.Empty:
                self._check_reply_timeout()
                continue
            with self._cv:
                if tid in self._interrupted:
                    continue
                begin = kind == "say" and self._speaking_turn != tid
                if kind == "say":
                    self._speaking_turn = tid
                    self._set_state(SpeechState.SPEAKING)
            if kind == "say":
                if begin:
                    self._backend_call(self.backend.begin_reply)
                if self._backend_call(self.backend.speak, text) is False:
                    self.log.debug(f"turn {tid}: sentence not (fully) spoken")
                continue
            with self._cv:                          # "end": the reply is complete
                if tid in self._interrupted:
                    continue
                self._speaking_turn = None
                if self._reply_turn == tid:
                    self._reply_turn = None
                idle = self._idle()
            self._backend_call(self.backend.end_reply, text)
            with self._cv:
                if idle and self._speaking_turn is None:
                    self._set_state(SpeechState.LISTENING)
                self._cv.notify_all()

    def _check_reply_timeout(self) -> None:
        with self._cv:
            since = self._awaiting_since
            if since is None or time.monotonic() - since < self.p["reply_timeout"]:
                return
            self._awaiting_since = None
        self.log.warning(f"no reply within {self.p['reply_timeout']:g} s; listening again")
        self._backend_call(self.backend.end_reply, "", True)
        with self._cv:
            if self._idle() and self._speaking_turn is None:
                self._set_state(SpeechState.LISTENING)
            self._cv.notify_all()

    def _backend_call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - a backend bug must not stop the node
            self.log.error(f"speech backend {fn.__name__} failed: {e!r}")
            return None

    # ---------------------------------------------------------------- shutdown
    def close(self) -> None:
        """Stop the backend and the speaker thread (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.backend is not None:
            self._backend_call(self.backend.close)
        if getattr(self, "_starter", None) is not None:
            self._starter.join(timeout=2.0)
        if self._speaker is not None and self._speaker is not threading.current_thread():
            self._speaker.join(timeout=2.0)

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(args=None):
    return run_node(lambda: SpeechNode(), "speech_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
