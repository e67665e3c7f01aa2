"""The manager as the skills' host (application/skills.SkillHost).

Lines said through the speech node, the person's lines handed to the skill that listens, the
LLM, what the robot sees.

A Say goes through the turn queue like a reply (so it is said in order, with a turn id); it is
said when the speech node reports the turn DONE on `dialogue/spoken`, interrupted when it
reports INTERRUPTED (the person spoke over it), and a cancelled one is stopped by publishing
its turn id on `dialogue/cancel_reply`. A speech node that does not report (a third-party
one) gives status "sent" once the reply is published.
"""
from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Callable

from std_msgs.msg import UInt32

from vision_dialogue.core.entries import Entry, ReplyEntry, UserEntry
from vision_dialogue.application.skills import ChatRole, Control, Heard
from vision_dialogue.core.conversation_types import SkillOutcome
from vision_dialogue.llm.base import short_question
from vision_dialogue_interfaces.msg import Spoken
from vision_dialogue.ros.qos import RELIABLE_QOS
from vision_dialogue.ros.topics import CANCEL_REPLY_TOPIC, REPLY_TOPIC, SPOKEN_TOPIC

SPEECH_DISCOVERY_S = 2.0
"""How long a Say waits for a speech node to be discovered before it says there is none."""
STAMP_TRUSTED_S = 30.0
"""A line's stamp further than this from the manager's clock (a bag's old stamps, another
machine's unsynchronised clock) is not compared with when an Ask's question went out."""
SPOKEN_WAIT_S_PER_WORD = 1.0
"""Longest wait for the speech node's report of a said line, per word (at least 20 s)."""


class SpokenTracker:
    """What the speech node reported of each reply turn (dialogue/spoken), newest 64 turns."""

    def __init__(self):
        self._cv = threading.Condition()
        self._turns: collections.OrderedDict[int, list] = collections.OrderedDict()

    def on_msg(self, msg: Spoken) -> None:
        with self._cv:
            self._turns.setdefault(int(msg.turn_id), []).append((int(msg.event), msg.text))
            while len(self._turns) > 64:
                self._turns.popitem(last=False)
            self._cv.notify_all()

    def events(self, turn_id: int) -> list:
        with self._cv:
            return list(self._turns.get(turn_id, ()))

    def wait(self, poll: float) -> None:
        with self._cv:
            self._cv.wait(poll)


class ManagerSkillHost:
    """SkillHost and ChatHost on the manager's turn taking and conversation."""

    def __init__(self, node, conversation, turns, people, logger):
        self.node, self.conversation, self.turns, self.people = node, conversation, turns, \
            people
        self.log = logger
        self.spoken = SpokenTracker()
        node.create_subscription(Spoken, SPOKEN_TOPIC, self.spoken.on_msg, RELIABLE_QOS)
        self.cancel_pub = node.create_publisher(UInt32, CANCEL_REPLY_TOPIC, RELIABLE_QOS)
        self._heard: "queue.Queue[Heard]" = queue.Queue()
        self._exchanges: "queue.Queue[tuple[str, str]]" = queue.Queue()
        self.listening_to: str | None = None     # an Ask listens (to this person, "" = anyone)
        # when the Ask's question went out (node clock, s): a line said before it is no answer
        self._question_sent_at: float | None = None
        self.chat_active = False
        self.chat_person = ""          # the Chat goal's person_id: its turns are theirs
        self._heard_at: float | None = None     # time.monotonic() of the newest person line
        self.on_chat_end: Callable[[], None] = lambda: None     # stops a robot action
        conversation.add_listener(self._on_entry)

    # --- saying -------------------------------------------------------------------------------
    def say(self, text: str, control: Control,
            feedback: Callable[[str, str], None]) -> SkillOutcome:
        end = time.monotonic() + SPEECH_DISCOVERY_S    # a speech node just started
        while self.node.count_subscribers(REPLY_TOPIC) == 0:
            if time.monotonic() >= end or control.reason():
                return SkillOutcome("no_speech", error=f"nobody subscribes to {REPLY_TOPIC}: "
                                    "no speech node is running")
            time.sleep(0.05)
        done, box = threading.Event(), {}
        # the question goes out from the moment it is served: a person who answers as soon
        # as it is heard (a script, in 30 ms) answers after that, not before the reply's
        # record (the done callback ran after the answer was claimed: a loaded run lost it)
        item = self.turns.say(text, lambda r: (box.update(result=r), done.set()),
                              started=self._sent_now)
        feedback("queued", text)
        while not done.wait(0.05):
            why = control.reason()
            if why and self.turns.queue.remove(item):
                return SkillOutcome(why)
        result = box.get("result")
        if result is None:
            return SkillOutcome("error", error="the line was dropped before it was said (the "
                                "manager is shutting down)")
        return self._wait_spoken(result.turn_id, text, control, feedback)

    def _wait_spoken(self, turn_id: int, text: str, control: Control,
                     feedback: Callable[[str, str], None]) -> SkillOutcome:
        if self.node.count_publishers(SPOKEN_TOPIC) == 0:
            return SkillOutcome("sent", turn_id=turn_id)     # nobody can tell us more
        end = time.monotonic() + max(20.0, SPOKEN_WAIT_S_PER_WORD * len(text.split()))
        told = 0
        while time.monotonic() < end:
            events = self.spoken.events(turn_id)
            for event, sentence in events[told:]:
                if event in (Spoken.BEGAN, Spoken.SENTENCE):
                    feedback("speaking", sentence)
                elif event == Spoken.DONE:
                    return SkillOutcome("spoken", turn_id=turn_id)
                elif event == Spoken.INTERRUPTED:
                    return SkillOutcome("interrupted", turn_id=turn_id,
                                        error="the person spoke over it")
            told = len(events)
            why = control.reason()
            if why:
                self.cancel_pub.publish(UInt32(data=int(turn_id)))
                return SkillOutcome(why, turn_id=turn_id)
            self.spoken.wait(0.05)
        return SkillOutcome("sent", turn_id=turn_id,
                            error="the speech node did not say when it finished")

    # --- listening ----------------------------------------------------------------------------
    def begin_listening(self, person_id: str) -> None:
        """The person's lines go to the skill from now on (an Ask), not to a reply."""
        while not self._heard.empty():
            self._heard.get_nowait()
        self._question_sent_at = None
        self.listening_to = person_id

    def end_listening(self) -> None:
        self.listening_to = None

    def _sent_now(self) -> None:
        """The question went out now (see claim)."""
        self._question_sent_at = self.node.get_clock().now().nanoseconds / 1e9

    def claim(self, text: str, speaker: str, said_at: float | None = None) -> bool:
        """Whether a line is an Ask's answer: its person's, said after its question went out.

        A line said before (its stamp, `said_at`) is no answer however late it reaches the
        manager: in a process test the people node heard "My name is Barack." and asked its
        consent question 0.4 s before the manager had that line, which then answered it.
        """
        want, sent = self.listening_to, self._question_sent_at
        if want is None or sent is None or (want and speaker and speaker != want):
            return False
        now = self.node.get_clock().now().nanoseconds / 1e9
        if said_at is not None and abs(now - said_at) < STAMP_TRUSTED_S and said_at < sent:
            return False
        self.conversation.hear(text, speaker, skill="ask")
        self._heard.put(Heard(text, speaker))
        return True

    def listen(self, control: Control) -> Heard | None:
        while not control.reason():
            try:
                return self._heard.get(timeout=min(0.1, max(0.01, control.left())))
            except queue.Empty:
                continue
        return None

    # --- seeing and the LLM -------------------------------------------------------------------
    def seen(self) -> str:
        frame = self.conversation.newest_frame()
        if frame is None or self.conversation.camera_lost():
            return ""
        return " ".join(t for t in (frame.observation, frame.objects) if t).strip()

    def ask_llm(self, messages: list, max_tokens: int, json_schema: dict | None = None,
                side: bool = False) -> str:
        """One completion, greedy.

        `side`: a short question asked before a reply (an intent), on the backend's own cache
        for such questions where it has one, so the reply's cached prompt stays.
        """
        return short_question(self.conversation.backend, messages, max_tokens, json_schema,
                              side=side, temperature=0.0)

    # --- chatting -----------------------------------------------------------------------------
    def begin_chat(self, role: ChatRole) -> None:
        while not self._exchanges.empty():
            self._exchanges.get_nowait()
        self.conversation.set_note("purpose", self.conversation.persona.purpose_note.format(
            name=role.name, instruction=role.instruction))
        self.chat_active = True

    def end_chat(self) -> None:
        self.chat_active = False
        self.on_chat_end()
        self.conversation.set_note("purpose", None)

    def start_turn(self, text: str | None, instruction: str = "") -> None:
        self.turns.start(text, instruction, speaker=self.chat_person)

    def next_exchange(self, control: Control, timeout: float) -> tuple[str, str] | None:
        try:
            return self._exchanges.get(timeout=timeout)
        except queue.Empty:
            return None

    def present(self) -> bool | None:
        if self.chat_person:             # the ROS4HRI person (or tracked user) chatted with
            seen = self.people.tracks(self.chat_person)
            if seen is not None:
                return seen
        tracked = self.people.count()
        if tracked is not None:
            return tracked > 0
        frame = self.conversation.newest_frame()
        if frame is None or frame.people is None or self.conversation.camera_lost():
            return None
        return frame.people > 0

    def heard_at(self) -> float | None:
        return self._heard_at

    def still_needed(self, needs: str) -> None:
        self.conversation.set_needs(needs)

    def _on_entry(self, entry: Entry) -> None:
        if isinstance(entry, UserEntry):
            self._heard_at = time.monotonic()
        if isinstance(entry, ReplyEntry) and self.chat_active:
            r = entry.result
            if not r.skill:
                self._exchanges.put((r.in_reply_to, r.text))
