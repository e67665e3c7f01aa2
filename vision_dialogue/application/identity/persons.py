"""A session's persons: face tracks and utterances become known or anonymous people.

REP-155's person manager, without ROS: a face track's pooled print is matched to the
enrolled people (a known person keeps their persistent id), else the track is an anonymous
person for this session only. An utterance's voice print is matched the same way, else it
joins the one person in view (a face seen, then a voice heard: one person), else a person
heard but not seen. Enrolment happens only with consent (`EnrolPolicy`); a person who says
no, or asks to be forgotten, leaves nothing in the store, and their session prints are
dropped at once.
"""
from __future__ import annotations

import enum
import secrets
import string
from dataclasses import dataclass, field

import numpy as np

from vision_dialogue.application.identity.matching import RULES, Gallery, Match, MatchRule, \
    PooledPrint
from vision_dialogue.application.identity.phrases import asks_to_be_forgotten, name_in
from vision_dialogue.application.identity.records import Consent, ConsentWay, Embedding, \
    EnrolPolicy
from vision_dialogue.application.identity.store import PeopleStore, StoreError

ANONYMOUS_PREFIX = "anonymous_person_"


class ConsentState(str, enum.Enum):
    UNASKED = "unasked"
    ASKING = "asking"
    GIVEN = "given"          # enrolled (asked, or enrolled before this session)
    DECLINED = "declined"    # said no, or asked to be forgotten: not asked again this session


class NextStep(str, enum.Enum):
    """What people_node should do after a line of a person's."""

    NOTHING = "nothing"
    ASK_CONSENT = "ask_consent"
    CONFIRM_FORGET = "confirm_forget"


@dataclass
class SessionPerson:
    person_id: str
    known: bool = False
    name: str = ""
    consent: ConsentState = ConsentState.UNASKED
    confidence: float = 0.0
    lines: int = 0
    face_ids: set = field(default_factory=set)
    heard: bool = False
    voice_id: str = ""      # the voice (REP-155 id) last heard from them
    alias: str = ""         # REP-155: the id this person is the same as ("" for none)
    face: PooledPrint = field(default_factory=PooledPrint)
    voice: PooledPrint = field(default_factory=PooledPrint)

    @property
    def anonymous(self) -> bool:
        return not self.known

    def prints(self) -> list[Embedding]:
        return [e for e in (self.face.pooled(), self.voice.pooled()) if e is not None]

    def drop_prints(self) -> None:
        self.face, self.voice = PooledPrint(), PooledPrint()

    def shown(self) -> dict:
        """What the monitor shows of them: who, how sure the match is, and their consent."""
        return {"person_id": self.person_id, "name": self.name, "known": self.known,
                "confidence": round(self.confidence, 2) if self.known else None,
                "consent": self.consent.value, "faces": len(self.face_ids),
                "heard": self.heard}


class IdentityError(ValueError):
    """A request about a person that cannot be done (unknown id, no store, no prints)."""


def _key(embedding: Embedding) -> tuple:
    return embedding.modality, embedding.model, embedding.version


def anonymous_id() -> str:
    return ANONYMOUS_PREFIX + "".join(secrets.choice(string.ascii_lowercase) for _ in range(5))


class Persons:
    """The persons of one session, known and anonymous, and their consent."""

    def __init__(self, store: PeopleStore | None, policy: EnrolPolicy = EnrolPolicy.ASK,
                 ask_after_lines: int = 3, rules: dict | None = None):
        self.policy, self.ask_after_lines = policy, ask_after_lines
        self.rules: dict = rules or RULES
        self.people: dict[str, SessionPerson] = {}
        self.face_of: dict[str, str] = {}       # face id -> person id
        self.voice_only: dict[str, str] = {}    # voice id -> person heard but not seen
        #: a speaker label (the speech node's: a script's speaker, a robot's user id) -> the
        #: person its lines were, and a name said under a label before its person was known;
        #: this session only, in memory
        self._label_of: dict[str, str] = {}
        #: label -> (the name, the faces in view when it was said)
        self._name_of_label: dict[str, tuple[str, frozenset[str]]] = {}
        self._galleries: dict[tuple, Gallery] = {}
        #: this session only, in memory: the prints of those who said no, so that they are
        #: not asked again when they come back into view (dropped with the session)
        self._declined: dict[tuple, Gallery] = {}
        #: the enrolled ids (REP-155's /humans/persons/known), read once, kept by enrol/forget
        self.known_ids: set[str] = set()
        self.attach_store(store)

    def attach_store(self, store: PeopleStore | None) -> None:
        """Use `store` from now on (a database server that was away at start-up is back)."""
        self.store, self._galleries = store, {}
        if store is not None:
            try:
                self.known_ids = {p.person_id for p in store.people()}
            except StoreError:
                pass

    # --- prints in ----------------------------------------------------------------------
    def face_print(self, face_id: str, embedding: Embedding) -> SessionPerson:
        """A print of a tracked face: whose face it is (the track's prints pooled)."""
        current = self.people.get(self.face_of.get(face_id, ""))
        probe = embedding.vector if current is None else np.mean(
            [e.vector for e in current.face.prints] + [embedding.vector], axis=0)
        match = self._gallery(embedding).best(probe)
        target = self._matched(match) or current or self._new_anonymous(embedding)
        if current is not None and current is not target:
            if current.anonymous:
                self._merge(current, target)
            else:                               # two known people: the face is target's now
                current.face_ids.discard(face_id)
        target.face_ids.add(face_id)
        self.face_of[face_id] = target.person_id
        return self._keep(target, "face", embedding)

    def voice_print(self, voice_id: str, embedding: Embedding,
                    faces_in_view: list[str]) -> tuple[SessionPerson, Match | None]:
        """An utterance's print: a known voice, the one person in view, or a person heard."""
        match = self._gallery(embedding).best(embedding.vector)
        in_view = self._one_in_view(faces_in_view)
        heard_only = self.people.get(self.voice_only.get(voice_id, ""))
        target = (self._matched(match)
                  or (self.people[in_view[0]] if in_view else None)
                  or heard_only or self._new_anonymous(embedding))
        for other in [heard_only] + [self.people[p] for p in in_view]:
            if other is not None and other is not target and other.anonymous:
                self._merge(other, target)      # a face seen, then its voice: one person
        if target.face_ids:
            self.voice_only.pop(voice_id, None)
        else:
            self.voice_only[voice_id] = target.person_id
        target.heard, target.voice_id = True, voice_id
        return self._keep(target, "voice", embedding), match

    def face_gone(self, face_id: str) -> None:
        person = self.people.get(self.face_of.pop(face_id, ""))
        if person is not None:
            person.face_ids.discard(face_id)
            if not person.face_ids and person.person_id not in self.voice_only.values():
                self.people.pop(person.person_id)       # an anonymous one's prints go too

    def tracked(self) -> list[SessionPerson]:
        return [p for p in self.people.values() if p.face_ids or p.heard]

    def speaker(self, faces_in_view: list[str], label: str = "") -> SessionPerson | None:
        """Who said a line without a print: whom its speaker label was, else the one in view.

        `label`: the speech node's speaker label when it names one speaker ("" when it is the
        same for everyone); once a line of it was one person's, its later lines are theirs.
        """
        person = self.people.get(self._label_of.get(label, "")) if label else None
        if person is None:
            in_view = self._one_in_view(faces_in_view)
            person = self.people[in_view[0]] if in_view else None
        if person is not None and label:
            self._label_of[label] = person.person_id
        return person

    def _one_in_view(self, faces_in_view: list[str]) -> list[str]:
        """[the person id] when the faces in view are all one person's, else [].

        A face whose print has not come yet is someone too: with it in view, who spoke is
        not known (a second person's line was taken for the first one's while the second
        face waited for its print).
        """
        if any(f not in self.face_of for f in faces_in_view):
            return []
        ids = {self.face_of[f] for f in faces_in_view}
        return list(ids) if len(ids) == 1 else []

    def unplaced_line(self, text: str, label: str = "", faces_in_view: list[str] = ()) -> None:
        """A line nobody could be named for: a name said in it waits for its label's person.

        That is the person of the label's next placed line, or, when one face was in view
        and had no print yet, the person that face's print makes (`name_waiting`).
        """
        name = name_in(text)
        if name and label:
            self._name_of_label[label] = (name, frozenset(faces_in_view))

    def name_waiting(self, face_id: str) -> tuple[SessionPerson, str] | None:
        """(the person of `face_id`, a label) when a name is theirs now.

        A name said while that face alone was in view, before its print: the label's lines
        are that person's from now on.
        """
        person = self.people.get(self.face_of.get(face_id, ""))
        if person is None or person.name or person.person_id in self._label_of.values():
            return None
        label = next((lb for lb, (_, faces) in self._name_of_label.items()
                      if faces == {face_id}), None)
        if label is None:
            return None
        self._label_of[label] = person.person_id
        return person, label

    def _keep(self, person: SessionPerson, part: str, embedding: Embedding) -> SessionPerson:
        """Keep a print for a possible enrolment (never a decliner's); `always` enrols."""
        if person.consent is not ConsentState.DECLINED:
            getattr(person, part).add(embedding)
        if self.policy is EnrolPolicy.ALWAYS and person.anonymous and self.store is not None:
            return self.people[self.enrol(person.person_id, person.name,
                                          Consent(ConsentWay.ALWAYS))]
        return person

    def _matched(self, match: Match | None) -> SessionPerson | None:
        if match is None:
            return None
        person = self.people.get(match.person_id)
        self.known_ids.add(match.person_id)     # enrolled after this session began, too
        if person is None:
            known = self.store.person(match.person_id) if self.store else None
            person = SessionPerson(match.person_id, known=True, consent=ConsentState.GIVEN,
                                   name=known.name if known else "")
            self.people[person.person_id] = person
        person.confidence = match.confidence
        return person

    def _new_anonymous(self, embedding: Embedding) -> SessionPerson:
        """A stranger; one who said no earlier in this session is not asked again."""
        person = SessionPerson(anonymous_id())
        declined = self._declined.get(_key(embedding))
        if declined is not None and declined.best(embedding.vector) is not None:
            person.consent = ConsentState.DECLINED
        self.people[person.person_id] = person
        return person

    def _merge(self, old: SessionPerson, into: SessionPerson) -> None:
        """One person, not two: `old`'s faces, voice, lines and name go to `into`."""
        self.people.pop(old.person_id, None)
        for fid in old.face_ids:
            self.face_of[fid] = into.person_id
        for vid, pid in list(self.voice_only.items()):
            if pid == old.person_id:
                self.voice_only[vid] = into.person_id
        into.face_ids |= old.face_ids
        into.heard, into.voice_id = into.heard or old.heard, into.voice_id or old.voice_id
        into.lines += old.lines
        into.name = into.name or old.name
        if into.anonymous and old.consent is ConsentState.DECLINED:
            into.consent = ConsentState.DECLINED
        if into.consent is not ConsentState.DECLINED:
            for part in ("face", "voice"):
                mine, theirs = getattr(into, part), getattr(old, part)
                mine.prints = (theirs.prints + mine.prints)[-PooledPrint.KEEP:]
                mine.count += theirs.count

    def _gallery(self, embedding: Embedding) -> Gallery:
        key = _key(embedding)
        if key not in self._galleries:
            rule: MatchRule = self.rules[embedding.modality]
            self._galleries[key] = Gallery(rule, self.store.prints(*key) if self.store else [])
        return self._galleries[key]

    # --- words in -----------------------------------------------------------------------
    def heard_line(self, person: SessionPerson, text: str, label: str = "") -> NextStep:
        """A line said by `person`: their name, "forget me", or time to ask for consent.

        A name said earlier under the line's speaker label, when nobody could be named for
        it, is theirs now.
        """
        person.lines += 1
        earlier = self._name_of_label.pop(label, ("", ()))[0] if label else ""
        name = name_in(text) or earlier
        if name and name != person.name:
            person.name = name
            if person.known and self.store is not None:
                self.store.set_name(person.person_id, name)
        if asks_to_be_forgotten(text):
            return NextStep.CONFIRM_FORGET
        if (self.policy is EnrolPolicy.ALWAYS and person.anonymous and person.prints()
                and self.store is not None):
            self.enrol(person.person_id, person.name, Consent(ConsentWay.ALWAYS))
        if (self.policy is EnrolPolicy.ASK and person.anonymous
                and person.consent is ConsentState.UNASKED and person.prints()
                and (person.lines >= self.ask_after_lines or name)):
            person.consent = ConsentState.ASKING
            return NextStep.ASK_CONSENT
        return NextStep.NOTHING

    def not_asked(self, person_id: str) -> None:
        """The consent question could not be put (no manager yet): it may come at a later line.

        Not a no: nothing was answered (and nothing is kept meanwhile).
        """
        person = self.people.get(person_id)
        if person is not None and person.consent is ConsentState.ASKING:
            person.consent = ConsentState.UNASKED

    def consent_answer(self, person_id: str, yes: bool, answer: str = "") -> SessionPerson:
        """The person's answer: yes enrols them, anything else keeps nothing."""
        person = self._person(person_id)
        if yes:
            new_id = self.enrol(person_id, person.name, Consent(ConsentWay.ASKED, answer=answer))
            return self.people[new_id]
        self._decline(person)
        return person

    def _decline(self, person: SessionPerson) -> None:
        """No: nothing kept beyond this session; their prints only mark them as asked."""
        for e in person.prints():
            self._declined.setdefault(_key(e), Gallery(self.rules[e.modality])).add(
                person.person_id, e.vector)
        person.consent = ConsentState.DECLINED
        person.drop_prints()

    # --- enrol and forget ---------------------------------------------------------------
    def enrol(self, person_id: str, name: str, consent: Consent) -> str:
        """Store a session person who said yes; they become known under a persistent id."""
        person = self._person(person_id)
        if self.store is None:
            raise IdentityError("no people store: identity is off (see /diagnostics)")
        prints = person.prints()
        if not prints and person.anonymous:
            raise IdentityError(f"{person_id} has no face or voice print yet")
        new_id = self.store.enrol(name or person.name, prints, consent,
                                  person_id=person_id if person.known else "")
        self.known_ids.add(new_id)
        for e in prints:
            self._gallery(e).add(new_id, e.vector)
        if new_id != person_id:
            known = SessionPerson(new_id, known=True, consent=ConsentState.GIVEN,
                                  confidence=1.0)
            self._merge(person, known)
            self.people[new_id] = known
            person = known
        person.name = name or person.name
        person.consent = ConsentState.GIVEN
        return new_id

    def names_of(self, person_id: str = "", name: str = "") -> list[str]:
        """The names the person to forget goes by (the store's and this session's)."""
        names = {name.strip()} if name.strip() else set()
        known = self.store.person(person_id) if self.store and person_id else None
        session = self.people.get(person_id)
        names.update(p.name for p in (known, session) if p is not None and p.name)
        return sorted(names)

    def forget(self, person_id: str = "", name: str = "") -> list[str]:
        """Remove from the store, the galleries and this session; they are anonymous now."""
        removed = self.store.forget(person_id=person_id, name=name) if self.store else []
        self.known_ids.difference_update(removed)
        if person_id and person_id not in removed and person_id in self.people:
            removed.append(person_id)           # an anonymous person: the session's prints
        for pid in removed:
            for gallery in self._galleries.values():
                gallery.drop(pid)
            person = self.people.pop(pid, None)
            if person is not None:
                stranger = SessionPerson(anonymous_id(), consent=ConsentState.DECLINED)
                self._decline(person)
                person.name = ""
                self._merge(person, stranger)
                self.people[stranger.person_id] = stranger
        return removed

    def _person(self, person_id: str) -> SessionPerson:
        person = self.people.get(person_id)
        if person is None:
            raise IdentityError(f"no person {person_id!r} in this session (see "
                                "/humans/persons/tracked)")
        return person


__all__ = ["Persons", "SessionPerson", "ConsentState", "NextStep", "IdentityError",
           "StoreError", "anonymous_id"]
