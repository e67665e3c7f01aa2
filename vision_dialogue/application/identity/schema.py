"""The people store's tables, in one place, and the migrations between their versions.

Layout 1: who is enrolled (names, consent records) and their face and voice prints. Layout 2
adds what the robot remembers of each enrolled person: facts they said about themselves
(one per thing they are about, so a correction replaces it), a summary of each session with
them, their visits, and an audit of every read and write of that memory which holds no
personal content (a pseudonymous person id, the kind, the reason). Rows of a person go with
the person (ON DELETE CASCADE, and forget deletes them explicitly too).
"""
from __future__ import annotations

import sqlalchemy as sa

#: the layout's version; MIGRATIONS[v] takes a store from version v to v + 1
SCHEMA_VERSION = 2

METADATA = sa.MetaData()
META = sa.Table("meta", METADATA, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.String(256), nullable=False))
PEOPLE = sa.Table(
    "people", METADATA,
    sa.Column("person_id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(256), nullable=False, default=""),
    sa.Column("consent_way", sa.String(32), nullable=False),
    sa.Column("consent_question", sa.Text, nullable=False),
    sa.Column("consent_answer", sa.Text, nullable=False, default=""),
    sa.Column("consent_when", sa.Float, nullable=False))


def _of_person() -> sa.Column:
    return sa.Column("person_id", sa.String(64),
                     sa.ForeignKey("people.person_id", ondelete="CASCADE"), nullable=False,
                     index=True)


EMBEDDINGS = sa.Table(
    "embeddings", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _of_person(),
    sa.Column("modality", sa.String(16), nullable=False),
    sa.Column("model", sa.String(128), nullable=False),
    sa.Column("model_version", sa.String(64), nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False))
FACTS = sa.Table(
    "facts", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _of_person(),
    sa.Column("about", sa.String(128), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("said_when", sa.Float, nullable=False),
    sa.UniqueConstraint("person_id", "about", name="one_fact_per_topic"))
SESSIONS = sa.Table(
    "sessions", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True), _of_person(),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("ended", sa.Float, nullable=False),
    sa.Column("summary", sa.Text, nullable=False))
VISITS = sa.Table(
    "visits", METADATA,
    sa.Column("person_id", sa.String(64), sa.ForeignKey("people.person_id",
                                                        ondelete="CASCADE"),
              primary_key=True),
    sa.Column("first_seen", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
    sa.Column("count", sa.Integer, nullable=False))
AUDIT = sa.Table(
    "audit", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("action", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("why", sa.String(128), nullable=False),
    sa.Column("person_id", sa.String(64), nullable=True, index=True))

#: the tables layout 2 added (created by its migration on a layout-1 store)
MEMORY_TABLES = (FACTS, SESSIONS, VISITS, AUDIT)


def _add_memory(db) -> None:
    METADATA.create_all(db, tables=list(MEMORY_TABLES))


MIGRATIONS = {1: _add_memory}
