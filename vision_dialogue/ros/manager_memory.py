"""The manager's memory of people (identity/remembering.py), wired to its turns and prompt.

With `people_store_url` set (bringup sets it to people_node's `store_url` where people_node
runs): each line goes, on a worker of its own, to the keeper, which asks the model for the
facts of a known person's line as a side question; each reply's prompt gets the note of what
is remembered of the known person in view; a known person's session is summed up when they
leave (not when the manager stops: its model is closed by then). The persons in view are
those ROS4HRI reports (people_node's persistent ids).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from vision_dialogue.llm.base import short_question

#: tokens of the model's answer to the extraction question (three short facts in JSON)
EXTRACT_MAX_TOKENS = 160
#: seconds between two looks for people who left (their session is then summed up)
DEPARTURE_CHECK_S = 2.0


class ManagerMemory:
    """A MemoryKeeper on the manager's backend, its lines on one worker thread."""

    def __init__(self, keeper, people):
        self.keeper, self.people = keeper, people
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="vd-memory")

    def in_view(self) -> list[str]:
        """The person ids the tracker reports now (none while its report is stale)."""
        return sorted(self.people.presence.ids()) if self.people.count() is not None else []

    def heard(self, text: str) -> None:
        in_view = self.in_view()       # who is there when the line is heard, not later
        try:
            self._worker.submit(self.keeper.heard, in_view, text)
        except RuntimeError:           # closing
            pass

    def check_departures(self) -> None:
        """Sum up the sessions of those who left (on the worker, in the model's idle time)."""
        if self.keeper.in_session():
            try:
                self._worker.submit(self.keeper.left, self.in_view())
            except RuntimeError:       # closing
                pass

    def note(self, line: str) -> str:
        return self.keeper.note(self.in_view(), line)

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        self.keeper.memory.store.close()


def connect_memory(node, p, conversation, turns, people, backend,
                   log) -> ManagerMemory | None:
    """The manager's memory of people, or None (off, or the store cannot be opened: a WARN)."""
    if not p["people_store_url"]:
        return None
    from vision_dialogue.identity.memory import PersonMemory
    from vision_dialogue.identity.remembering import MemoryKeeper
    from vision_dialogue.identity.store import PeopleStore, StoreError
    try:
        store = PeopleStore(p["people_store_url"])
    except StoreError as e:
        log.warning(f"memory of people off: {e}")
        return None

    def ask(messages: list, schema: dict) -> str:
        return short_question(backend, messages, EXTRACT_MAX_TOKENS, json_schema=schema,
                              side=True, temperature=0.0)

    keeper = MemoryKeeper(PersonMemory(store), ask, note_chars=p["memory_note_chars"],
                          in_company=p["memory_in_company"], logger=log)
    memory = ManagerMemory(keeper, people)
    before = turns.on_heard

    def heard(text: str) -> None:
        before(text)
        memory.heard(text)
    turns.on_heard = heard
    conversation.prompt.recall = memory.note
    node.create_timer(DEPARTURE_CHECK_S, memory.check_departures)
    log.info(f"memory of people on: {p['people_store_url']}")
    return memory
