"""The people store: enrolled people's names, face and voice prints and consent records.

Never an image or a recording: embeddings (with the model and version that made them), names
and, per person, how and when they said yes. SQLAlchemy Core keeps it one table layout for
the embedded SQLite file (the default, one robot) and a database server (a fleet). An SQLite
file is made readable by its owner only, every write is committed before it returns (a
killed process loses nothing acknowledged), and "forget" leaves no trace in the file itself
(secure_delete, then VACUUM). A file that is not a people store is an error and is never
written to.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import string
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from vision_dialogue.application.identity.records import DEFAULT_STORE_URL, Consent, ConsentWay, \
    Embedding, KnownPerson, Modality
from vision_dialogue.application.identity.schema import AUDIT, EMBEDDINGS, FACTS, META, METADATA, \
    MIGRATIONS, PEOPLE, SCHEMA_VERSION, SESSIONS, VISITS
from vision_dialogue.common.resources import user_path

#: PostgreSQL advisory lock held while a store's layout is made or migrated
LAYOUT_LOCK_KEY = 0x76645F70   # "vd_p"
#: seconds a connection to a database server may take (a host that does not answer)
CONNECT_TIMEOUT_S = 5


class StoreError(Exception):
    """The store cannot be used (corrupt, not a people store, unwritable): identity is off."""


def new_person_id() -> str:
    """A persistent person id: 'person_' and eight random letters (a ROS name token)."""
    return "person_" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(8))


def driver_url(url: str) -> str:
    """The URL with its driver: `postgresql://` means psycopg (3), the one requirements name.

    Credentials belong in the environment (`PGPASSWORD`) or libpq's password file
    (`PGPASSFILE`, `~/.pgpass`), TLS in `?sslmode=require` or `PGSSLMODE`: libpq reads them.
    """
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain):]
    return url


def _connect_args(url: str) -> dict:
    """A server that does not answer is given up after CONNECT_TIMEOUT_S (libpq waits on)."""
    if driver_url(url).startswith("postgresql+psycopg://") and "connect_timeout" not in url:
        return {"connect_timeout": CONNECT_TIMEOUT_S}
    return {}


def sqlite_path(url: str) -> Path | None:
    """The file of an sqlite:/// URL, '~' and a leading XDG variable expanded; else None.

    `user_path` expands them. The `file:...?mode=ro&uri=true` form names its file too.
    """
    if not url.startswith("sqlite:///"):
        return None
    rest = url[len("sqlite:///"):]
    return user_path(rest.removeprefix("file:").split("?")[0])


def local_url(url: str) -> str:
    """`url` with its SQLite file's path as `sqlite_path` reads it; other URLs as they are.

    What the engine opens, the messages name and the memory queue keys writes by.
    """
    path = sqlite_path(url)
    if path is None:
        return url
    rest = url[len("sqlite:///"):]
    query = rest.partition("?")[2]
    return (f"sqlite:///{'file:' if rest.startswith('file:') else ''}{path}"
            f"{'?' + query if query else ''}")


class PeopleStore:
    """The enrolled people at `url` (an SQLAlchemy URL; an SQLite path: `sqlite_path`)."""

    def __init__(self, url: str = DEFAULT_STORE_URL):
        self.url, self.path = local_url(url), sqlite_path(url)
        writable_file = self.path is not None and "mode=ro" not in self.url
        if writable_file:
            prepare_sqlite_file(self.path)
        try:
            if writable_file:
                self.engine = sqlite_engine(self.path)
            else:
                self.engine = sa.create_engine(driver_url(self.url), pool_pre_ping=True,
                                               connect_args=_connect_args(self.url))
                if self.path is not None:
                    _sqlite_events(self.engine)
            self._open()
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as e:
            raise StoreError(f"people store {self.url}: {_reason(e)}; identity is off and the "
                             "store is left as it was") from None

    def _open(self) -> None:
        """Create or check the layout, migrating it under a lock (a fleet's robots start too)."""
        with self.engine.begin() as db:
            if db.dialect.name == "postgresql":       # SQLite: the write lock of the begin
                db.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                           {"key": LAYOUT_LOCK_KEY})
            tables = set(sa.inspect(db).get_table_names())
            if not tables:
                METADATA.create_all(db)
                db.execute(META.insert().values(key="schema_version",
                                                value=str(SCHEMA_VERSION)))
                return
            if "meta" not in tables:
                raise StoreError(f"{self.url} is a database but not a people store "
                                 f"(tables {sorted(tables)}); identity is off, the file is "
                                 "left as it was")
            version = int(db.execute(sa.select(META.c.value).where(
                META.c.key == "schema_version")).scalar_one())
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.url} has layout {version}, newer than this version "
                                 f"knows ({SCHEMA_VERSION}): update vision_dialogue")
            for v in range(version, SCHEMA_VERSION):
                MIGRATIONS[v](db)
                db.execute(META.update().where(META.c.key == "schema_version").values(
                    value=str(v + 1)))

    # --- writing ----------------------------------------------------------------------------
    def enrol(self, name: str, embeddings: list[Embedding], consent: Consent,
              person_id: str = "") -> str:
        """Store a person who said yes (a new one, or more prints for `person_id`)."""
        with self.writing() as db:
            if person_id and person_exists(db, person_id):
                if name:
                    db.execute(PEOPLE.update().where(PEOPLE.c.person_id == person_id)
                               .values(name=name))
            else:
                person_id = person_id or new_person_id()
                db.execute(PEOPLE.insert().values(
                    person_id=person_id, name=name, consent_way=consent.way.value,
                    consent_question=consent.question, consent_answer=consent.answer,
                    consent_when=consent.when))
            if embeddings:
                db.execute(EMBEDDINGS.insert(), [
                    {"person_id": person_id, "modality": e.modality.value, "model": e.model,
                     "model_version": e.version, "vector": e.vector.tobytes()}
                    for e in embeddings])
        return person_id

    def set_name(self, person_id: str, name: str) -> bool:
        with self.writing() as db:
            return db.execute(PEOPLE.update().where(PEOPLE.c.person_id == person_id)
                              .values(name=name)).rowcount > 0

    def forget(self, person_id: str = "", name: str = "", why: str = "forget") -> list[str]:
        """Remove a person (by id, or everyone of that name), every print and memory of theirs.

        The audit keeps only that a person was forgotten, and when. The file is then rewritten
        (VACUUM) so that the removed rows are gone from it, not only from the tables.
        """
        cond = PEOPLE.c.person_id == person_id if person_id else \
            sa.func.lower(PEOPLE.c.name) == name.strip().lower()
        if not (person_id or name.strip()):
            return []
        with self.writing() as db:
            ids = list(db.execute(sa.select(PEOPLE.c.person_id).where(cond)).scalars())
            forget_rows(db, ids, why)
        if ids:
            self.vacuum()
        return ids

    def vacuum(self) -> None:
        """Rewrite an SQLite file so that deleted rows are gone from the file itself."""
        if self.path is not None:
            with self.reading() as db:
                db.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")

    @contextlib.contextmanager
    def writing(self):
        """A transaction, committed when the block ends; a database error is a StoreError."""
        with self._errors():
            with self.engine.begin() as db:
                yield db

    @contextlib.contextmanager
    def reading(self):
        """A connection to read with; a database error is a StoreError."""
        with self._errors():
            with self.engine.connect() as db:
                yield db

    @contextlib.contextmanager
    def _errors(self):
        try:
            yield
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as e:
            raise StoreError(f"people store {self.url}: {_reason(e)}") from None

    # --- reading ----------------------------------------------------------------------------
    def people(self) -> list[KnownPerson]:
        counts = sa.select(EMBEDDINGS.c.person_id, EMBEDDINGS.c.modality,
                           sa.func.count()).group_by(EMBEDDINGS.c.person_id,
                                                     EMBEDDINGS.c.modality)
        with self.reading() as db:
            n = {(pid, kind): c for pid, kind, c in db.execute(counts)}
            rows = db.execute(sa.select(PEOPLE).order_by(PEOPLE.c.consent_when)).all()
        return [KnownPerson(r.person_id, r.name, Consent(
            ConsentWay(r.consent_way), r.consent_question, r.consent_answer, r.consent_when),
            faces=n.get((r.person_id, Modality.FACE.value), 0),
            voices=n.get((r.person_id, Modality.VOICE.value), 0)) for r in rows]

    def ping(self) -> None:
        """A StoreError unless the database answers now (one round trip)."""
        with self.reading() as db:
            db.execute(sa.text("SELECT 1"))

    def knows(self, person_id: str) -> bool:
        """Whether `person_id` is enrolled (one row read, not the whole list)."""
        with self.reading() as db:
            return person_exists(db, person_id)

    def person(self, person_id: str) -> KnownPerson | None:
        return next((p for p in self.people() if p.person_id == person_id), None)

    def prints(self, modality: Modality, model: str, version: str) -> list[tuple[str, np.ndarray]]:
        """(person id, vector) of every print made by this model and version."""
        query = sa.select(EMBEDDINGS.c.person_id, EMBEDDINGS.c.vector).where(
            EMBEDDINGS.c.modality == modality.value, EMBEDDINGS.c.model == model,
            EMBEDDINGS.c.model_version == version)
        with self.reading() as db:
            return [(pid, np.frombuffer(blob, np.float32)) for pid, blob in db.execute(query)]

    def export(self, person_id: str = "") -> dict:
        """The enrolled people (or one) and their prints, as JSON-able data (right of access)."""
        query = sa.select(EMBEDDINGS)
        if person_id:
            query = query.where(EMBEDDINGS.c.person_id == person_id)
        with self.reading() as db:
            rows = db.execute(query).all()
        people = {p.person_id: p.as_dict() | {"embeddings": []} for p in self.people()
                  if not person_id or p.person_id == person_id}
        for r in rows:
            people[r.person_id]["embeddings"].append({
                "modality": r.modality, "model": r.model, "model_version": r.model_version,
                "vector": np.frombuffer(r.vector, np.float32).round(6).tolist()})
        return {"schema_version": SCHEMA_VERSION, "people": list(people.values())}

    def close(self) -> None:
        self.engine.dispose()


def person_exists(db, person_id: str) -> bool:
    """Whether the people table has this id, on an open connection."""
    return db.execute(sa.select(PEOPLE.c.person_id).where(
        PEOPLE.c.person_id == person_id)).first() is not None


def forget_rows(db, ids: list[str], why: str, at: float | None = None) -> None:
    """Delete every row of these people, their audit rows too; audit "a person was forgotten"."""
    if not ids:
        return
    for table in (FACTS, SESSIONS, VISITS, AUDIT, EMBEDDINGS, PEOPLE):
        db.execute(table.delete().where(table.c.person_id.in_(ids)))
    db.execute(AUDIT.insert(), [{"at": time.time() if at is None else at, "action": "forgotten",
                                 "kind": "person", "why": why, "person_id": None}
                                for _ in ids])


def prepare_sqlite_file(path: Path, what: str = "people store") -> None:
    """Create the folder and file, owner-only; never touch a file that exists but is odd."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        elif path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError as e:
        raise StoreError(f"{what} {path}: {e.strerror or e} (identity is off)") from None


def sqlite_engine(path: Path) -> sa.engine.Engine:
    """An engine on an SQLite file with the store's pragmas and write-locking transactions."""
    return _sqlite_events(sa.create_engine(f"sqlite:///{path}", pool_pre_ping=True))


def _sqlite_events(engine: sa.engine.Engine) -> sa.engine.Engine:
    sa.event.listen(engine, "connect", _sqlite_pragmas)
    sa.event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    """Per connection: foreign keys, deleted rows overwritten, durable commits.

    The driver's own transaction handling is off (`_sqlite_begin` begins them): it would not
    begin one before a CREATE TABLE, and two processes could make one layout twice.
    """
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    for pragma in ("foreign_keys=ON", "secure_delete=ON", "synchronous=FULL",
                   "journal_mode=DELETE"):
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def _sqlite_begin(conn) -> None:
    """Each transaction takes SQLite's write lock at once: a read-then-write never races."""
    if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _reason(e: Exception) -> str:
    """The driver's own words ('file is not a database'), without SQLAlchemy's wrapping."""
    orig = getattr(e, "orig", None)
    return str(orig or e).splitlines()[0]
