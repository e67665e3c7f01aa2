"""people_node's words: the consent question and "forget me", through the manager's skills.

The question goes to the manager's Ask skill (``skill/ask``) with a boolean answer, so its
yes/no reader and its follow-up when an answer is unclear are the ones applications use; the
robot's reply after it goes to the Say skill. An error, a timeout or an unclear answer keep
nothing: consent is a yes, never a silence. A question waits up to `SERVER_WAIT_S` for the
manager's Ask server to be discovered (the manager may start after people_node, and a client sees
a server a moment after the server's topics); without one by then the question is not put, which
is no answer: it may come at the person's next line.
"""
from __future__ import annotations

import json
import time
from typing import Callable

from rclpy.action import ActionClient, get_action_server_names_and_types_by_node

from vision_dialogue.application.identity.records import CONSENT_QUESTION
from vision_dialogue.ros.topics import ASK_ACTION, SAY_ACTION
from vision_dialogue_interfaces.action import Ask, Say

FORGET_QUESTION = ("Shall I forget you? I would delete your name and what I keep of your face "
                   "and voice.")
#: what the robot says after each answer
SAID = {
    "enrolled": "Thank you! I will remember you next time.",
    "declined": "All right, I will not keep anything about you.",
    "forgotten": "Done. I have forgotten you.",
    "kept": "All right, I will keep remembering you.",
    "nothing_kept": "I have not kept anything about you, and I will not.",
}
ASK_TIMEOUT_S = 30.0
#: how long a question or a reply waits for the manager's skill server to be discovered
SERVER_WAIT_S = 15.0
SERVER_POLL_S = 0.2


class PeopleTalk:
    """Asks a person for consent or to confirm forgetting; says what was done."""

    def __init__(self, node):
        self.node = node
        self.ask = ActionClient(node, Ask, ASK_ACTION)
        self.say_client = ActionClient(node, Say, SAY_ACTION)
        self.asked = 0

    def ask_consent(self, person_id: str) -> None:
        def answered(yes: bool | None, text: str) -> None:
            new_id = self.node.consent_answer(person_id, yes is True, text)
            self.say(SAID["enrolled" if yes and new_id else "declined"], new_id or person_id)
        self._ask(CONSENT_QUESTION, "remember", "whether the person agrees to be remembered",
                  person_id, answered, lambda: self.node.consent_not_asked(person_id))

    def confirm_forget(self, person_id: str, known: bool) -> None:
        if not known:
            self.node.forget_person(person_id)
            self.say(SAID["nothing_kept"], person_id)
            return

        def answered(yes: bool | None, _text: str) -> None:
            if yes:
                self.node.forget_person(person_id)
            self.say(SAID["forgotten" if yes else "kept"], person_id if not yes else "")
        self._ask(FORGET_QUESTION, "forget", "whether the person wants to be forgotten",
                  person_id, answered)

    def _ask(self, question: str, key: str, what: str, person_id: str,
             then: Callable[[bool | None, str], None],
             not_put: Callable[[], None] = lambda: None) -> None:
        """Put the question; `then(answer, answers_json)`, or `not_put()` without a server."""
        log = self.node.get_logger()

        def no_server() -> None:
            log.warning(f"no Ask skill server ({ASK_ACTION}: is the manager running?): "
                        f"cannot ask {person_id!r} yet; nothing kept ({self.servers_seen()})")
            not_put()
        self._when_ready(self.ask, lambda: self._put(question, key, what, person_id, then,
                                                     not_put), no_server)

    def _put(self, question: str, key: str, what: str, person_id: str,
             then: Callable[[bool | None, str], None], not_put: Callable[[], None]) -> None:
        log = self.node.get_logger()
        self.asked += 1
        # person_id "": the manager's Ask takes the next line of whoever speaks (its lines
        # carry the speech node's speaker label, not REP-155 ids); the question is only put
        # when one person is in view or their voice is known (application/identity/persons.py)
        goal = Ask.Goal(question=question, person_id="", timeout=ASK_TIMEOUT_S,
                        max_followups=1, answers_schema=json.dumps(
                            {key: {"type": "boolean", "description": what}}))

        def on_result(future) -> None:
            result = future.result().result
            try:
                answer = json.loads(result.answers or "{}").get(key)
            except json.JSONDecodeError:
                answer = None
            log.info(f"asked {person_id}: {question!r} -> {result.status} {answer!r}")
            then(answer if isinstance(answer, bool) else None, result.answers)

        def on_accepted(future) -> None:
            handle = future.result()
            if not handle.accepted:
                log.warning(f"the Ask skill refused the question to {person_id}")
                not_put()
                return
            handle.get_result_async().add_done_callback(on_result)
        self.ask.send_goal_async(goal).add_done_callback(on_accepted)

    def say(self, line: str, person_id: str = "") -> None:
        self._when_ready(
            self.say_client,
            lambda: self.say_client.send_goal_async(Say.Goal(input=line, person_id=person_id)),
            lambda: self.node.get_logger().warning(f"no Say skill server: not said: {line!r}"))

    def servers_seen(self) -> str:
        """What the ROS graph shows of the skill servers (a client may not have matched yet)."""
        nodes = self.node.get_node_names_and_namespaces()
        servers = [f"{name} ({ns.rstrip('/')}/{node})" for node, ns in nodes
                   for name, _types in get_action_server_names_and_types_by_node(
                       self.node, node, ns)]
        return f"action servers in the graph: {', '.join(servers) or 'none'}"

    def _when_ready(self, client: ActionClient, then: Callable[[], None],
                    gave_up: Callable[[], None]) -> None:
        """`then()` once `client` has discovered its server, or `gave_up()` after SERVER_WAIT_S.

        Waits for the event (the server discovered) on a timer, never blocking the node.
        """
        if client.server_is_ready():
            then()
            return
        deadline = time.monotonic() + SERVER_WAIT_S
        timer = None

        def check() -> None:
            ready = client.server_is_ready()
            if not ready and time.monotonic() < deadline:
                return
            timer.cancel()
            self.node.destroy_timer(timer)
            (then if ready else gave_up)()
        timer = self.node.create_timer(SERVER_POLL_S, check)
