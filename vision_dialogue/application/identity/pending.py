"""Memory writes that wait for the people store: a local durable queue, replayed in order.

A fact or a session summary is acknowledged once it is in the queue file (committed with
`synchronous=FULL`), then written to the store at once, or, while the store (a fleet's
PostgreSQL server) is away, replayed when it answers again: a server that goes away
mid-conversation or a killed process loses nothing acknowledged. Each write is replayed and
removed in one transaction of the queue that holds its write lock, so two processes sharing
the file never replay one write twice (one that is replayed but whose removal did not commit
is replayed again: a fact replaces the one about the same thing, so that is harmless). Rows
are kept per store (its URL without a password), so a queue shared by robots of several
stores replays each write to its own. The file is owner-only and deleted rows are overwritten
in it (secure_delete): once replayed, a fact is no longer in the queue file.
"""
from __future__ import annotations

import enum
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import sqlalchemy as sa

from vision_dialogue.application.identity.memory import Fact, PersonMemory, Recall, SessionSummary
from vision_dialogue.application.identity.store import PeopleStore, StoreError, \
    local_url, prepare_sqlite_file, sqlite_engine
from vision_dialogue.common.resources import user_path

#: the prefix of the ids people_node gives enrolled people (anonymous ones: `anonymous_...`)
ENROLLED_ID_PREFIX = "person_"

_QUEUE = sa.MetaData()
PENDING = sa.Table(
    "pending", _QUEUE,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("store", sa.String(512), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("person_id", sa.String(64), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("why", sa.String(256), nullable=False),
    sa.Column("queued", sa.Float, nullable=False))


class WriteKind(str, enum.Enum):
    """What a queued write keeps."""

    FACT = "fact"
    SESSION = "session"


@dataclass(frozen=True)
class PendingWrite:
    """One acknowledged write the store has not taken yet."""

    id: int
    kind: WriteKind
    person_id: str
    record: Fact | SessionSummary
    why: str


_RECORDS = {WriteKind.FACT: Fact, WriteKind.SESSION: SessionSummary}


class PendingWrites:
    """The queue file at `path`, its rows for the store `store_key`."""

    def __init__(self, path: str | Path, store_key: str):
        self.path, self.store_key = user_path(str(path)), store_key
        prepare_sqlite_file(self.path, "memory queue")
        try:
            self.engine = sqlite_engine(self.path)
            _QUEUE.create_all(self.engine)
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"memory queue {self.path}: {e.orig or e}") from None

    def add(self, kind: WriteKind, person_id: str, record: Fact | SessionSummary,
            why: str) -> int:
        """Keep one write durably (its acknowledgement); its queue id."""
        with self.engine.begin() as db:
            return db.execute(PENDING.insert().values(
                store=self.store_key, kind=kind.value, person_id=person_id,
                payload=json.dumps(asdict(record)), why=why,
                queued=time.time())).inserted_primary_key[0]

    def count(self) -> int:
        with self.engine.connect() as db:
            return db.execute(sa.select(sa.func.count()).select_from(PENDING).where(
                PENDING.c.store == self.store_key)).scalar_one()

    def replay(self, write) -> int:
        """`write(pending)` for each write in order, each removed as it succeeds; how many.

        Stops at the first StoreError (the store is still away): that one and those after it
        stay queued.
        """
        done = 0
        while True:
            with self.engine.begin() as db:     # the queue's write lock: one replayer at once
                row = db.execute(sa.select(PENDING).where(PENDING.c.store == self.store_key)
                                 .order_by(PENDING.c.id).limit(1)).first()
                if row is None:
                    return done
                kind = WriteKind(row.kind)
                write(PendingWrite(row.id, kind, row.person_id,
                                   _RECORDS[kind](**json.loads(row.payload)), row.why))
                db.execute(PENDING.delete().where(PENDING.c.id == row.id))
            done += 1

    def drop_person(self, person_id: str) -> int:
        """Remove the writes about a person (forgotten before they were replayed)."""
        with self.engine.begin() as db:
            return db.execute(PENDING.delete().where(PENDING.c.person_id == person_id)).rowcount

    def close(self) -> None:
        self.engine.dispose()


def store_key(url: str) -> str:
    """A store's URL as the queue keeps it: never its password; an SQLite file's whole path."""
    return sa.engine.make_url(local_url(url)).render_as_string(hide_password=True)


class QueuedMemory:
    """PersonMemory whose writes go through a durable queue; the store opened when it answers.

    `open_store()` makes the PeopleStore (a server that is down at start-up raises StoreError:
    it is tried again at the next flush). Reads need the store: without it they raise
    StoreError, and the caller goes on without a note.
    """

    def __init__(self, queue: PendingWrites, open_store, logger=None):
        self.queue, self._open_store, self.log = queue, open_store, logger
        self.store_key = queue.store_key
        self.memory: PersonMemory | None = None
        #: the store's last error ("" once it answers), and the writes that wait for it
        self.last_error, self.waiting = "", queue.count()

    def _memory(self) -> PersonMemory:
        if self.memory is None:
            self.memory = PersonMemory(self._open_store())
        return self.memory

    # --- reads: the store itself -------------------------------------------------------------
    def knows(self, person_id: str) -> bool:
        """Whether the person is enrolled (while the store is away: their id is an enrolled one's).

        The store decides when the write is replayed.
        """
        try:
            return self._memory().store.knows(person_id)
        except StoreError as e:
            self.last_error = str(e)
            return person_id.startswith(ENROLLED_ID_PREFIX)

    def recall(self, person_id: str, why: str) -> Recall | None:
        """What is remembered of the person; while the store is away, a StoreError at once.

        The reply goes on without a note, never waiting for a connection on its path.
        """
        if self.last_error:
            raise StoreError(self.last_error)
        try:
            return self._memory().recall(person_id, why)
        except StoreError as e:
            self.last_error = str(e)            # the next flush looks whether it is back
            raise

    # --- writes: through the queue -----------------------------------------------------------
    def remember(self, person_id: str, fact: Fact, why: str) -> bool:
        """Queue the fact (acknowledged) and write what is queued; True: acknowledged."""
        PersonMemory.check_fact(fact)
        self.queue.add(WriteKind.FACT, person_id, fact, why)
        self.flush()
        return True

    def session_ended(self, person_id: str, session: SessionSummary, why: str) -> bool:
        PersonMemory.check_session(session)
        self.queue.add(WriteKind.SESSION, person_id, session, why)
        self.flush()
        return True

    def flush(self) -> int:
        """Write the queued writes to the store, in order; how many still wait.

        Logged when writes begin to wait and when they are written after waiting.
        """
        before = self.waiting
        try:
            memory = self._memory()
            memory.store.ping()                 # the store answers (a read failed too)
            self.queue.replay(lambda w: self._write(memory, w))
            self.last_error = ""
        except StoreError as e:
            self.last_error = str(e)
        self.waiting = self.queue.count()
        if self.log is not None and self.waiting and not before:
            self.log.warning(f"memory: {self.waiting} write(s) wait for the people store: "
                             f"{self.last_error}")
        elif self.log is not None and before and not self.waiting:
            self.log.info("memory: the people store answers again; the waiting writes are "
                          "written")
        return self.waiting

    @staticmethod
    def _write(memory: PersonMemory, w: PendingWrite) -> None:
        """One replayed write; a person no longer enrolled (forgotten meanwhile) takes none."""
        if w.kind is WriteKind.FACT:
            memory.remember(w.person_id, w.record, w.why)
        else:
            memory.session_ended(w.person_id, w.record, w.why)

    def close(self) -> None:
        self.queue.close()
        if self.memory is not None:
            self.memory.store.close()


def open_queued_memory(store_url: str, queue_file: str, logger=None) -> QueuedMemory:
    """The memory of the people in `store_url`, its writes queued in `queue_file`."""
    memory = QueuedMemory(PendingWrites(queue_file, store_key(store_url)),
                          lambda: PeopleStore(store_url), logger)
    memory.flush()                 # the writes an earlier process acknowledged, and the store
    if memory.last_error and logger is not None:
        logger.warning(f"memory: the people store does not answer yet ({memory.last_error}); "
                       "facts wait for it, and it is tried again")
    return memory
