"""The manager's memory of people (application/identity/remembering), wired to turns and prompt.

With `people_store_url` set (bringup sets it to people_node's `store_url` where people_node
runs): each line goes, on a worker of its own, to the keeper, which asks the model for the
facts of a known person's line as a side question (whose line: the person people_node's
voice print named, on people/speakers, waited for at most SPEAKER_WAIT_S where a voice
identifier publishes; else the one person in view); each reply's prompt gets the note of what
is remembered of the known person in view (a standing note while they are, read once, and
what each line asks that it does not tell); a known person's session is summed up when they
leave (not when the manager stops: its model is closed by then). The persons in view are
those ROS4HRI reports (people_node's persistent ids). Facts and summaries go through a durable
queue (application/identity/pending.py): while the store is away they wait, `/diagnostics` says how
many, and they are written when it answers again; a store down at start-up is tried again.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from vision_dialogue.common.health import OK, WARN, Health
from vision_dialogue.core.conversation_types import LineNote
from vision_dialogue.llm.base import short_question
from vision_dialogue.ros.image_msgs import stamp_seconds
from vision_dialogue.ros.qos import RELIABLE_QOS
from vision_dialogue.ros.topics import PEOPLE_SPEAKERS_TOPIC
from vision_dialogue_interfaces.msg import LineSpeaker

#: tokens of the model's answer to the extraction question (three short facts in JSON)
EXTRACT_MAX_TOKENS = 160
#: seconds between two looks for people who left (their session is then summed up), and
#: for writes that wait for the store
DEPARTURE_CHECK_S = 2.0
#: seconds a line's facts wait for a voice identifier (people_node) to say whose voice said
#: it: it prints the voice first (a fraction of a second on two cores; more when busy)
SPEAKER_WAIT_S = 5.0


class ManagerMemory:
    """A MemoryKeeper on the manager's backend, its lines on one worker thread."""

    def __init__(self, keeper, people, speakers, identifier, faces=lambda: None):
        """`faces()`: person id -> face id of those a ROS4HRI person manager tracks now.

        All of them (also one just enrolled whose name has not come yet); None without one.
        `speakers`: the LineSpeakers the voice identifier's answers go to; `identifier()`:
        whether one publishes them now (else a line's speaker is not waited for).
        """
        self.keeper, self.people, self.faces = keeper, people, faces
        self.speakers, self.identifier = speakers, identifier
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="vd-memory")

    def in_view(self) -> tuple[list[str], dict[str, str]]:
        """The person ids tracked now, and their faces (the tracker's report without one)."""
        faces = self.faces()
        if faces is None:
            return self.people.reported(), {}
        return sorted(faces), faces

    def heard(self, text: str, said_at: float | None = None) -> None:
        """A person's line (`said_at`: its stamp, s, which people/speakers repeats)."""
        in_view, faces = self.in_view()    # who is there when the line is heard, not later
        try:
            self._worker.submit(self._heard, in_view, text, faces, time.monotonic(), said_at)
        except RuntimeError:               # closing
            pass

    def _heard(self, in_view: list[str], text: str, faces: dict, since: float,
               said_at: float | None = None) -> list:
        """On the worker: the line's facts, for the person whose voice said it if known."""
        voice = self.speakers.wait(text, since, SPEAKER_WAIT_S, said_at) \
            if self.identifier() else None
        return self.keeper.heard(in_view, text, faces, voice)

    def check_departures(self) -> None:
        """Sum up the sessions of those who left; write what waits for the store.

        On the worker, in the model's idle time.
        """
        in_view, faces = self.in_view()        # read once a tick
        try:
            if self.keeper.in_session():
                self._worker.submit(self.keeper.left, in_view)
            memory = self.keeper.memory
            if memory.waiting or memory.last_error:     # writes wait, or the store was away
                self._worker.submit(self.keeper.flush)
            if self.keeper.waiting_lines():             # lines of someone saying yes
                self._worker.submit(self.keeper.place, faces)
        except RuntimeError:           # closing
            pass

    def health(self) -> Health:
        """WARN while writes wait for the store (they are kept and written when it answers)."""
        memory = self.keeper.memory
        values = {"writes waiting": memory.waiting, "store": memory.store_key}
        if memory.waiting or memory.last_error:
            return Health("people memory", WARN, f"{memory.waiting} memory write(s) wait for "
                          f"the people store: {memory.last_error or 'not written yet'}", values)
        return Health("people memory", OK, "memory of people on", values)

    def standing(self) -> str:
        return self.keeper.standing(self.in_view()[0])

    def line_note(self, line: str, late: bool = False) -> LineNote:
        return self.keeper.line_note(self.in_view()[0], line, late)

    def close(self) -> None:
        self.speakers.close()              # a line waiting for its speaker goes on at once
        self._worker.shutdown(wait=True, cancel_futures=True)
        self.keeper.memory.close()


def connect_memory(node, p, conversation, turns, people, backend, log,
                   faces=lambda: None) -> ManagerMemory | None:
    """The manager's memory of people, or None (off, or the store cannot be opened: a WARN)."""
    if not p["people_store_url"]:
        return None
    from vision_dialogue.application.identity.pending import open_queued_memory
    from vision_dialogue.application.identity.remembering import LineSpeakers, MemoryKeeper
    from vision_dialogue.application.identity.store import StoreError
    try:
        queued = open_queued_memory(p["people_store_url"], p["memory_queue_file"], log)
    except StoreError as e:            # the queue file itself: a store away is only a WARN
        log.warning(f"memory of people off: {e}")
        return None

    def ask(messages: list, schema: dict) -> str:
        return short_question(backend, messages, EXTRACT_MAX_TOKENS, json_schema=schema,
                              side=True, temperature=0.0)

    keeper = MemoryKeeper(queued, ask, note_chars=p["memory_note_chars"],
                          in_company=p["memory_in_company"], logger=log)
    memory = ManagerMemory(keeper, people, LineSpeakers(),
                           lambda: node.count_publishers(PEOPLE_SPEAKERS_TOPIC) > 0, faces)
    node.create_subscription(LineSpeaker, PEOPLE_SPEAKERS_TOPIC, lambda m: memory.speakers.said(
        m.text, m.person_id, m.by_voice, stamp_seconds(m.header.stamp)),
        RELIABLE_QOS)
    turns.hear_with(memory.heard)
    conversation.remember_with(memory.standing, memory.line_note)
    node.create_timer(DEPARTURE_CHECK_S, memory.check_departures)
    log.info(f"memory of people on: {p['people_store_url']}")
    return memory
