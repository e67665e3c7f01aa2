"""What the robot remembers of each enrolled person, in the people store, with an audit.

Only people who said yes are in the store, so only they have a memory. Kept per person: facts
they said about themselves (one per thing they are about: a correction replaces the fact), a
summary of each session with them, and their visits (first and last seen, how many). Never an
image, a recording or a line they did not say of themselves. Every read and write is in the
audit table with its reason and no personal content; forgetting a person (the store's
`forget`, or `expire` after `retention_days` unseen) deletes all of it and leaves only "a
person was forgotten at T".
"""
from __future__ import annotations

import enum
import time
from dataclasses import asdict, dataclass

import sqlalchemy as sa

from vision_dialogue.application.identity.schema import AUDIT, FACTS, PEOPLE, SESSIONS, VISITS
from vision_dialogue.application.identity.store import PeopleStore, forget_rows, person_exists
from vision_dialogue.application.identity.words import content_stems

#: seconds without being seen after which a person's next sighting is a new visit
VISIT_GAP_S = 30 * 60.0
DAY_S = 24 * 3600.0


class MemoryKind(str, enum.Enum):
    """What an audit row is about."""

    FACT = "fact"
    SESSION = "session"
    VISIT = "visit"
    PERSON = "person"


class AuditAction(str, enum.Enum):
    """What was done: read, written, or the person forgotten (asked, or expired)."""

    READ = "read"
    WRITE = "write"
    FORGOTTEN = "forgotten"


@dataclass(frozen=True)
class Fact:
    """Something a person said about themselves: what it is about, in their words."""

    about: str
    text: str
    said_when: float = 0.0


@dataclass(frozen=True)
class SessionSummary:
    started: float
    ended: float
    summary: str


@dataclass(frozen=True)
class Visits:
    first_seen: float
    last_seen: float
    count: int


@dataclass(frozen=True)
class Recall:
    """What the robot knows of one person, read for one reason (newest fact first)."""

    person_id: str
    name: str
    facts: tuple[Fact, ...] = ()
    last_session: SessionSummary | None = None
    visits: Visits | None = None


@dataclass(frozen=True)
class AuditRecord:
    at: float
    action: AuditAction
    kind: MemoryKind
    why: str
    person_id: str | None


def topic_key(about: str) -> str:
    """The stored form of what a fact is about: lower case, single spaces, at most 128."""
    return " ".join(about.lower().split())[:128]


class PersonMemory:
    """Facts, sessions and visits of the people in `store`, every access audited."""

    def __init__(self, store: PeopleStore, clock=time.time, visit_gap_s: float = VISIT_GAP_S):
        self.store, self.clock, self.visit_gap_s = store, clock, visit_gap_s

    # --- writing ----------------------------------------------------------------------------
    @staticmethod
    def check_fact(fact: Fact) -> tuple[str, str]:
        """What the fact is about and its words, as stored; a ValueError for an empty part."""
        about, text = topic_key(fact.about), " ".join(fact.text.split())
        if not about or not text:
            raise ValueError(f"a fact needs what it is about and its words: {fact!r}")
        return about, text

    @staticmethod
    def check_session(session: SessionSummary) -> None:
        if not session.summary.strip():
            raise ValueError("an empty session summary")

    def remember(self, person_id: str, fact: Fact, why: str) -> bool:
        """Keep `fact`, replacing what was known about the same thing; False: not enrolled.

        The same thing: the same topic, and a word in common ("moved to building C" replaces
        "works in building B"). A fact under the same topic with nothing in common is kept
        beside it: a small model files "I am a nurse" and "I work in building B" both under
        "work", and the second must not erase the first.
        """
        about, text = self.check_fact(fact)
        with self.store.writing() as db:
            if not person_exists(db, person_id):
                return False
            same = db.execute(sa.select(FACTS.c.about, FACTS.c.text).where(
                FACTS.c.person_id == person_id, sa.or_(
                    FACTS.c.about == about, FACTS.c.about.startswith(f"{about}: ")))).all()
            if same and ":" not in about:     # one thing at a time: which one it corrects
                about = next((a for a, t in same if content_stems(t) & content_stems(text)),
                             topic_key(f"{about}: {text}"))
            db.execute(FACTS.delete().where(FACTS.c.person_id == person_id,
                                            FACTS.c.about == about))
            db.execute(FACTS.insert().values(person_id=person_id, about=about, text=text,
                                             said_when=fact.said_when or self.clock()))
            self._audit(db, AuditAction.WRITE, MemoryKind.FACT, why, person_id)
        return True

    def session_ended(self, person_id: str, session: SessionSummary, why: str) -> bool:
        """Keep the summary of a session with the person; False: not enrolled."""
        self.check_session(session)
        with self.store.writing() as db:
            if not person_exists(db, person_id):
                return False
            db.execute(SESSIONS.insert().values(person_id=person_id, **asdict(session)))
            self._audit(db, AuditAction.WRITE, MemoryKind.SESSION, why, person_id)
        return True

    def seen(self, person_id: str, why: str = "seen") -> Visits | None:
        """The person is here now: a new visit after `visit_gap_s` unseen; None: not enrolled."""
        now = self.clock()
        with self.store.writing() as db:
            if not person_exists(db, person_id):
                return None
            row = db.execute(sa.select(VISITS).where(VISITS.c.person_id == person_id)).first()
            if row is None:
                visits = Visits(now, now, 1)
                db.execute(VISITS.insert().values(person_id=person_id, **asdict(visits)))
            else:
                new = now - row.last_seen > self.visit_gap_s
                visits = Visits(row.first_seen, now, row.count + int(new))
                db.execute(VISITS.update().where(VISITS.c.person_id == person_id)
                           .values(last_seen=now, count=visits.count))
                if not new:
                    return visits               # the same visit: no audit row per frame
            self._audit(db, AuditAction.WRITE, MemoryKind.VISIT, why, person_id)
        return visits

    def expire(self, retention_days: float) -> list[str]:
        """Forget everyone not seen for `retention_days` (enrolled and never seen: since then)."""
        if retention_days <= 0:
            raise ValueError(f"retention_days {retention_days}: more than 0 (off: do not call)")
        cutoff = self.clock() - retention_days * DAY_S
        last = sa.func.coalesce(VISITS.c.last_seen, PEOPLE.c.consent_when)
        query = sa.select(PEOPLE.c.person_id).select_from(
            PEOPLE.outerjoin(VISITS, VISITS.c.person_id == PEOPLE.c.person_id)).where(
            last < cutoff)
        with self.store.writing() as db:
            ids = list(db.execute(query).scalars())
            forget_rows(db, ids, f"not seen for {retention_days:g} days", at=self.clock())
        if ids:
            self.store.vacuum()
        return ids

    # --- reading ----------------------------------------------------------------------------
    def knows(self, person_id: str) -> bool:
        return self.store.knows(person_id)

    def recall(self, person_id: str, why: str) -> Recall | None:
        """Everything remembered of the person (audited as one read); None: not enrolled."""
        with self.store.writing() as db:
            name = db.execute(sa.select(PEOPLE.c.name).where(
                PEOPLE.c.person_id == person_id)).scalar_one_or_none()
            if name is None:
                return None
            facts = tuple(Fact(r.about, r.text, r.said_when) for r in db.execute(
                sa.select(FACTS).where(FACTS.c.person_id == person_id)
                .order_by(FACTS.c.said_when.desc(), FACTS.c.id.desc())))
            last = db.execute(sa.select(SESSIONS).where(SESSIONS.c.person_id == person_id)
                              .order_by(SESSIONS.c.ended.desc()).limit(1)).first()
            visits = db.execute(sa.select(VISITS).where(
                VISITS.c.person_id == person_id)).first()
            self._audit(db, AuditAction.READ, MemoryKind.PERSON, why, person_id)
        return Recall(person_id, name, facts,
                      SessionSummary(last.started, last.ended, last.summary) if last else None,
                      Visits(visits.first_seen, visits.last_seen, visits.count)
                      if visits else None)

    def export(self, person_id: str) -> dict | None:
        """Everything stored about one person, as JSON-able data (their right of access)."""
        person = self.store.export(person_id=person_id)["people"]
        if not person:
            return None
        with self.store.writing() as db:
            tables = {"facts": FACTS, "sessions": SESSIONS, "visits": VISITS, "audit": AUDIT}
            rows = {key: [{c: v for c, v in r._mapping.items() if c not in ("id", "person_id")}
                          for r in db.execute(sa.select(t).where(t.c.person_id == person_id))]
                    for key, t in tables.items()}
            self._audit(db, AuditAction.READ, MemoryKind.PERSON, "export", person_id)
        return person[0] | rows

    def audit(self) -> list[AuditRecord]:
        with self.store.reading() as db:
            return [AuditRecord(r.at, AuditAction(r.action), MemoryKind(r.kind), r.why,
                                r.person_id)
                    for r in db.execute(sa.select(AUDIT).order_by(AUDIT.c.id))]

    # --- helpers ----------------------------------------------------------------------------
    def _audit(self, db, action: AuditAction, kind: MemoryKind, why: str,
               person_id: str) -> None:
        db.execute(AUDIT.insert().values(at=self.clock(), action=action.value, kind=kind.value,
                                         why=why[:128], person_id=person_id))
