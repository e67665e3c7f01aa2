"""The manager's application side: the Say, Ask and Chat actions and the intents it publishes.

* `skill/say`, `skill/ask`, `skill/chat` (vision_dialogue_interfaces/action/Say, Ask, Chat,
  with ROS4HRI communication_skills' field names): each goal waits its turn at one
  `SkillArbiter` (a higher priority pre-empts), runs the ROS-free skill of application/skills.py on
  the manager (ros/manager/skill_host.py), publishes feedback per stage and honours cancel;
* `intents` (vision_dialogue_interfaces/Intent, hri_actions_msgs/Intent's fields): each of the
  person's lines is read on the turn worker before the robot answers it, and the declared
  intent it asks for is published then (application/intents.LineIntents): from its own line, within
  a short LLM question of it, never after the next line.
Both are written to the transcript and shown on the monitor (records "skill", "intent").
"""
from __future__ import annotations

import json
import threading
import time

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.task import Future

from vision_dialogue_interfaces.action import Ask, Chat, Say
from vision_dialogue.llm.answers import SchemaError
from vision_dialogue.core.entries import IntentEntry, SkillEntry
from vision_dialogue.application.intents import IntentsError, LineIntents, load_intents, \
    recent_lines
from vision_dialogue.llm.intent_reader import FoundIntent, IntentReader
from vision_dialogue.application.skills import ChatRole, Control, SkillArbiter, \
    SkillRejected, Ticket, run_ask, run_chat
from vision_dialogue.core.conversation_types import SkillOutcome
from vision_dialogue_interfaces.msg import Intent
from vision_dialogue.ros.params import ParameterError
from vision_dialogue.ros.qos import RELIABLE_QOS, SKILL_FEEDBACK_QOS
from vision_dialogue.ros.manager.skill_host import ManagerSkillHost
from vision_dialogue.ros.topics import ASK_ACTION, CHAT_ACTION, INTENTS_TOPIC, SAY_ACTION


class SkillServers:
    """The three skill actions on the manager node (see the module docstring)."""

    def __init__(self, node, conversation, host: ManagerSkillHost, params, logger):
        self.node, self.conversation, self.params, self.log = node, conversation, params, logger
        self.host = host
        self.arbiter = SkillArbiter(params["max_waiting_skills"])
        self._tickets: dict[bytes, Ticket | SkillRejected] = {}
        # one goal request at a time (each is quick; the skills run on threads of their own):
        # goals join the line in the order they came, as the README's "first come" says
        group = MutuallyExclusiveCallbackGroup()
        self.servers = [
            ActionServer(node, kind, name, execute_callback=_on_own_thread(node, run),
                         callback_group=group,
                         goal_callback=self._goal_check,
                         handle_accepted_callback=self._join_line(skill),
                         cancel_callback=lambda handle: CancelResponse.ACCEPT,
                         feedback_pub_qos_profile=SKILL_FEEDBACK_QOS)
            for kind, name, skill, run in ((Say, SAY_ACTION, "say", self._say),
                                           (Ask, ASK_ACTION, "ask", self._ask),
                                           (Chat, CHAT_ACTION, "chat", self._chat))]

    def _goal_check(self, goal) -> GoalResponse:
        """Skills only while the manager is active (a managed node: ros/managed.py)."""
        if getattr(self.node, "active", True):
            return GoalResponse.ACCEPT
        self.log.warning("skill goal rejected: the manager is inactive (lifecycle)")
        return GoalResponse.REJECT

    def _join_line(self, skill: str):
        """An accepted goal takes its ticket at once, before its thread starts.

        Two goals sent back to back run on two threads that start in either order; the ticket
        taken here, one accepted goal at a time, keeps the order they were sent in.
        """
        def accepted(handle) -> None:
            try:
                ticket = self.arbiter.enter(skill, handle.request.priority)
            except SkillRejected as e:
                ticket = e
            self._tickets[bytes(handle.goal_id.uuid)] = ticket
            handle.execute()
        return accepted

    # --- the three skills ---------------------------------------------------------------------
    def _say(self, handle):
        goal = handle.request

        def body(control, feedback):
            text = " ".join(goal.input.split())
            if not text:
                return SkillOutcome("error", error="input is empty: nothing to say")
            return self.host.say(text, control, lambda stage, t: feedback(stage, t))
        out = self._run(handle, "say", 0.0, body,
                        lambda stage, text: Say.Feedback(stage=stage, text=text))
        return Say.Result(success=out.success, status=out.status, error=out.error,
                          turn_id=int(out.turn_id))

    def _ask(self, handle):
        goal = handle.request

        def body(control, feedback):
            self.host.begin_listening(goal.person_id)
            try:
                return run_ask(self.host, control, feedback, goal.question, goal.answers_schema,
                               goal.max_followups,
                               self.conversation.persona.ask_wording_instruction, self.log)
            finally:
                self.host.end_listening()
        timeout = goal.timeout if goal.timeout > 0 else self.params["ask_timeout"]
        out = self._run(handle, "ask", timeout, body,
                        lambda stage, text, answers=None: Ask.Feedback(
                            stage=stage, text=text, answers=_json(answers)))
        return Ask.Result(success=out.success, status=out.status, error=out.error,
                          answers=out.json())

    def _chat(self, handle):
        goal = handle.request
        try:
            role = ChatRole.parse(goal.role.name, goal.role.configuration)
        except SchemaError as e:
            role, bad = None, str(e)

        def body(control, feedback):
            if role is None:
                return SkillOutcome("error", error=bad)
            self.host.chat_person = goal.person_id
            return run_chat(self.host, control, feedback, role, goal.initiate,
                            goal.initial_input, self.params["chat_person_lost"],
                            self.conversation.persona.chat_opening_instruction, self.log,
                            self.params["chat_correction"])
        out = self._run(handle, "chat", goal.timeout, body,
                        lambda stage, text, results=None: Chat.Feedback(
                            stage=stage, text=text, role_results=_json(results)))
        return Chat.Result(success=out.success, status=out.status, error=out.error,
                           role_results=out.json())

    # --- what every skill does ----------------------------------------------------------------
    def _run(self, handle, name: str, timeout: float, body, make_feedback):
        """Wait for the turn, run `body(control, feedback)`, end the goal as its outcome says."""
        gid = bytes(handle.goal_id.uuid).hex()[:8]

        def feedback(stage, text, *extra):
            handle.publish_feedback(make_feedback(stage, text, *extra))

        ticket = self._tickets.pop(bytes(handle.goal_id.uuid), None)
        if isinstance(ticket, SkillRejected):
            out = SkillOutcome("rejected", error=str(ticket))
        elif ticket is None:          # never through _join_line: said, not an empty result
            out = SkillOutcome("error", error="the goal has no place in the skills' line")
        else:
            out = self._take_turn(handle, ticket, timeout, body, feedback, name, gid)
        self._record(name, gid, "end", out)
        if out.status == "cancelled" and handle.is_cancel_requested:
            handle.canceled()
        elif out.success:
            handle.succeed()
        else:
            handle.abort()
        return out

    def _take_turn(self, handle, ticket, timeout, body, feedback, name, gid) -> SkillOutcome:
        cancelled = (lambda: handle.is_cancel_requested)
        try:
            feedback("queued", "")
            if not self.arbiter.wait_turn(ticket, cancelled):
                return SkillOutcome("cancelled" if cancelled() else "preempted")
            self._record(name, gid, "start")
            control = Control(ticket, cancelled)
            if timeout > 0:
                control.deadline = time.monotonic() + timeout
            return body(control, feedback)
        except Exception as e:  # noqa: BLE001 - a skill bug ends its goal, not the node
            self.log.error(f"{name} skill failed: {type(e).__name__}: {e}")
            return SkillOutcome("error", error=f"{type(e).__name__}: {e}")
        finally:
            self.arbiter.leave(ticket)

    def _record(self, skill, gid, stage, out: SkillOutcome | None = None) -> None:
        """A skill's start or end (`out`) for the transcript, the monitor and the log."""
        why = f" ({out.status}{': ' + out.error if out.error else ''})" if out else ""
        self.conversation.notify(SkillEntry(skill, gid, stage, out))
        self.log.info(f"skill {skill} {gid}: {stage}{why}")


class IntentOutput:
    """Intents from the person's lines, published on `intents` (see the module docstring)."""

    def __init__(self, node, conversation, host: ManagerSkillHost, path: str, logger):
        try:
            specs = load_intents(path)
        except IntentsError as e:
            raise ParameterError(f"intents_file: {e}") from None
        self.node, self.conversation, self.log = node, conversation, logger
        reader = IntentReader(specs, lambda msgs, **kw: host.ask_llm(msgs, side=True, **kw),
                              logger)
        self.lines = LineIntents(reader, lambda: recent_lines(conversation),
                                 self.publish, logger, warm=conversation.warm_side_soon)
        self.pub = node.create_publisher(Intent, INTENTS_TOPIC, RELIABLE_QOS)
        conversation.set_note("abilities", conversation.persona.abilities_note.format(
            abilities=reader.abilities()))
        logger.info(f"intents: {', '.join(s.name for s in specs)} (from {path})")

    def read(self, text: str, speaker: str) -> None:
        """A person's line, read for intents on the turn worker before its reply (TurnHooks)."""
        self.lines.read(text, speaker)

    def publish(self, found: FoundIntent, text: str, speaker: str) -> None:
        """`found`, read from the person's line `text`, on `intents` and in the transcript."""
        msg = Intent(intent=found.intent, data=found.json(), modality=Intent.MODALITY_SPEECH,
                     source=speaker or Intent.UNKNOWN_AGENT, priority=found.priority,
                     confidence=float(found.confidence), utterance=text)
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(msg)
        self.conversation.notify(IntentEntry(found.intent, found.data, msg.source, text,
                                             found.confidence))
        self.log.info(f"intent: {found.intent} {found.json()} from {text[:60]!r}")


def _on_own_thread(node, work):
    """An execute callback that runs `work(handle)` on a thread of its own.

    A skill runs for as long as the person takes; run on an executor thread, a running skill
    and a waiting one would hold every thread of the manager's executor (two on 2 cores), and
    the person's answer could never be delivered. The coroutine gives its thread back and is
    resumed when the result is in (the done callback wakes the executor).
    """
    async def execute(handle):
        done = Future(executor=node.executor)
        done.add_done_callback(lambda _: None)

        def run():
            try:
                done.set_result(work(handle))
            except BaseException as e:  # noqa: BLE001 - the goal ends, the node goes on
                done.set_exception(e)
        threading.Thread(target=run, name="vd-skill", daemon=True).start()
        return await done
    return execute


def _json(value) -> str:
    return json.dumps(value or {}, ensure_ascii=False)
