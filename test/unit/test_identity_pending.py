"""Memory writes wait in a durable queue while the people store is away; none is lost."""
from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from vision_dialogue.application.identity.memory import AuditAction, Fact, MemoryKind, \
    PersonMemory, SessionSummary
from vision_dialogue.application.identity.pending import PendingWrites, QueuedMemory, \
    open_queued_memory, store_key
from vision_dialogue.application.identity.records import DEFAULT_QUEUE_FILE, DEFAULT_STORE_URL, \
    Consent, ConsentWay
from vision_dialogue.application.identity.remembering import MemoryKeeper
from vision_dialogue.application.identity.store import PeopleStore, StoreError, local_url, \
    sqlite_path


class Server:
    """A people store that can be away: opening it raises StoreError while `up` is False."""

    def __init__(self, path):
        self.url, self.up, self.opened = f"sqlite:///{path}", True, []

    def open(self) -> PeopleStore:
        if not self.up:
            raise StoreError(f"people store {self.url}: connection refused")
        self.opened.append(PeopleStore(self.url))
        return self.opened[-1]

    def close(self):
        for store in self.opened:
            store.close()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "people.db")
    anna = s.open().enrol("Anna", [], Consent(ConsentWay.ASKED, answer="Yes."))
    s.anna = anna
    yield s
    s.close()


def queued(server, path) -> QueuedMemory:
    return QueuedMemory(PendingWrites(path, store_key(server.url)), server.open)


def test_writes_wait_while_the_store_is_away_and_are_written_in_order_when_it_answers(
        server, tmp_path):
    server.up = False
    queue_file = tmp_path / "queue.db"
    mem = queued(server, queue_file)
    assert mem.remember(server.anna, Fact("hobby", "loves sailing"), "fact from line 2")
    assert mem.remember(server.anna, Fact("hobby", "loves rowing now"), "fact from line 5")
    assert mem.session_ended(server.anna, SessionSummary(1.0, 2.0, "Talked about boats."),
                             "session ended")
    assert mem.waiting == 3 and "connection refused" in mem.last_error
    assert b"rowing" in queue_file.read_bytes()
    with pytest.raises(StoreError):                    # no note while away, at once
        mem.recall(server.anna, "recall for a reply")
    assert mem.knows(server.anna) and not mem.knows("anonymous_person_x")
    server.up = True
    assert mem.flush() == 0 and mem.last_error == ""
    recall = mem.recall(server.anna, "recall for a reply")
    assert [f.text for f in recall.facts] == ["loves rowing now"]      # in order: 5 after 2
    assert recall.last_session.summary == "Talked about boats."
    assert b"rowing" not in queue_file.read_bytes()                    # written, then gone
    assert oct(queue_file.stat().st_mode & 0o777) == "0o600"


def test_a_new_process_writes_what_a_killed_one_acknowledged(server, tmp_path):
    server.up = False
    queue_file = tmp_path / "queue.db"
    first = queued(server, queue_file)
    first.remember(server.anna, Fact("work", "works in building B"), "fact from line 3")
    del first                                            # killed: nothing closed, no flush
    server.up = True
    second = open_queued_memory(server.url, str(queue_file))
    assert second.waiting == 0
    assert [f.text for f in second.recall(server.anna, "r").facts] == ["works in building B"]
    second.close()


def test_a_person_forgotten_before_the_replay_gets_nothing_written(server, tmp_path):
    server.up = False
    mem = queued(server, tmp_path / "queue.db")
    mem.remember(server.anna, Fact("hobby", "loves sailing"), "fact from line 2")
    server.up = True
    store = server.open()
    store.forget(server.anna)
    assert mem.flush() == 0
    assert store.people() == [] and mem.recall(server.anna, "r") is None
    assert [a.action for a in PersonMemory(store).audit()] == [AuditAction.FORGOTTEN]


def test_two_processes_sharing_a_queue_write_each_fact_once(server, tmp_path):
    server.up = False
    queue_file = tmp_path / "queue.db"
    one, two = queued(server, queue_file), queued(server, queue_file)
    for i in range(20):
        (one if i % 2 else two).remember(server.anna, Fact(f"thing {i}", f"fact {i}"), f"l {i}")
    server.up = True
    threads = [threading.Thread(target=m.flush) for m in (one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    writes = [a for a in PersonMemory(server.open()).audit()
              if (a.action, a.kind) == (AuditAction.WRITE, MemoryKind.FACT)]
    assert len(writes) == 20 and one.queue.count() == 0


def test_a_queue_keeps_each_stores_writes_for_that_store(server, tmp_path):
    other = Server(tmp_path / "other.db")
    other.up = server.up = False
    queue_file = tmp_path / "queue.db"
    queued(other, queue_file).remember("person_abc", Fact("x", "y"), "l 1")
    mem = queued(server, queue_file)
    assert mem.waiting == 0                              # the other store's write is not ours
    assert queued(other, queue_file).waiting == 1


def test_the_queue_key_never_holds_a_password():
    assert store_key("postgresql://robot:s3cret@db.local/people") == \
        "postgresql://robot:***@db.local/people"


def test_a_file_that_is_not_a_queue_is_a_clear_error(tmp_path):
    odd = tmp_path / "queue.db"
    odd.write_text("not a database " * 100)
    with pytest.raises(StoreError, match="memory queue"):
        PendingWrites(odd, "sqlite:///x")


def test_the_keeper_keeps_a_known_persons_facts_while_the_store_is_away(server, tmp_path):
    server.up = False
    keeper = MemoryKeeper(queued(server, tmp_path / "queue.db"),
                          lambda messages, schema: '{"facts": [{"topic": "hobby", '
                          '"fact": "love sailing"}]}')
    assert [f.text for f in keeper.heard([server.anna], "I love sailing.")] == ["love sailing"]
    assert keeper.heard(["anonymous_person_q"], "I love rowing.") == []
    assert keeper.note([server.anna], "Hello.") == ""            # no note while away
    server.up = True
    assert keeper.memory.flush() == 0
    assert "love sailing" in keeper.note([server.anna], "What do I like?")


def test_a_failed_read_is_noticed_and_the_next_flush_sees_the_store_back(server, tmp_path):
    mem = queued(server, tmp_path / "queue.db")
    assert mem.recall(server.anna, "r").name == "Anna"
    mem.memory.store.close()
    mem.memory.store.engine = sa.create_engine("sqlite:////nonexistent/dir/people.db")
    with pytest.raises(StoreError):
        mem.recall(server.anna, "r")
    assert mem.last_error and mem.waiting == 0
    mem.memory = None                                    # the next flush opens it again
    assert mem.flush() == 0 and mem.last_error == ""
    assert mem.recall(server.anna, "r").name == "Anna"


def test_the_default_store_and_queue_follow_the_users_xdg_homes(tmp_path, monkeypatch):
    """A user who moved their XDG data and state homes finds the store and the queue there."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))    # never the user's, whatever happens
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    store = PeopleStore(DEFAULT_STORE_URL)
    store.enrol("Anna", [], Consent(ConsentWay.ASKED, answer="Yes."))
    store.close()
    assert (tmp_path / "data" / "vision_dialogue" / "people.db").is_file()
    queue = PendingWrites(DEFAULT_QUEUE_FILE, "k")
    assert queue.path == tmp_path / "state" / "vision_dialogue" / "memory-queue.db"
    assert queue.path.is_file()
    monkeypatch.setenv("XDG_DATA_HOME", "")           # empty: the spec's default
    assert sqlite_path(DEFAULT_STORE_URL) == \
        tmp_path / "home" / ".local" / "share" / "vision_dialogue" / "people.db"
    assert local_url("sqlite:///file:$XDG_DATA_HOME/p.db?mode=ro&uri=true") == \
        f"sqlite:///file:{tmp_path / 'home' / '.local' / 'share' / 'p.db'}?mode=ro&uri=true"
    assert local_url("postgresql://db.example/people") == "postgresql://db.example/people"
    # only the whole variable name, at the start
    assert str(sqlite_path("sqlite:///$XDG_DATA_HOMEX/a.db")) == "$XDG_DATA_HOMEX/a.db"
