"""Who is there: people a camera tracks (Furhat's users), in words, and who came and went.

A tracked person has an id, a position in the robot's frame (x to its left, z ahead, in
metres) and, where the camera gives one, an emotion. `describe_people` is the prompt's note;
`Presence` turns successive lists of ids into arrivals and departures (a departure only after
`grace_s` out of view, since trackers lose people for a frame or two).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

#: people a camera tracked longer ago than this are no longer "now", s
PEOPLE_FRESH_S = 5.0
#: speaker labels that are roles or placeholders, not names (a robot does not call you "user")
GENERIC_SPEAKERS = frozenset({"", "visitor", "user", "person", "human", "speaker", "guest",
                              "unknown", "anonymous", "anonymous_speaker", "someone"})
#: |x| below this (metres) is "in front of you"
_CENTRE_M = 0.25


@dataclass(frozen=True)
class TrackedPerson:
    id: str
    x: float = 0.0          # metres, robot frame: positive to the robot's left
    z: float = 0.0          # metres ahead
    emotion: str = ""
    name: str = ""          # how to call them ("Zebulon", "someone"); "" -> "user <id>"

    @property
    def label(self) -> str:
        return self.name or f"user {self.id}"


def is_a_name(speaker: str) -> bool:
    """Whether an utterance's speaker label is a person's name ("Zebulon").

    Not a role ("visitor"), a placeholder or a tracker's id ("anonymous_speaker", "3",
    "voice_7f3a").
    """
    label = speaker.strip().lower()
    return bool(label) and label not in GENERIC_SPEAKERS and not any(c.isdigit() for c in label)


def describe_people(people: list[TrackedPerson]) -> str:
    """'user 3 in front of you, 1.2 m away, looking happy; user 5 to your left, 2.0 m away'."""
    out = []
    for p in sorted(people, key=lambda p: -p.x):
        where = ("in front of you" if abs(p.x) < _CENTRE_M
                 else "to your left" if p.x > 0 else "to your right")
        text = f"{p.label} {where}"
        if p.z > 0:
            text += f", {p.z:.1f} m away"
        if p.emotion and p.emotion.lower() not in ("neutral", "none", "unknown"):
            text += f", looking {p.emotion.lower()}"
        out.append(text)
    return "; ".join(out)


def closest(people: list[TrackedPerson]) -> str:
    """Id of the person nearest the robot ("" for nobody): whom a robot attends first."""
    best = min(people, key=lambda p: math.hypot(p.x, p.z), default=None)
    return best.id if best is not None else ""


class Presence:
    """Arrivals and departures from successive sets of tracked ids."""

    def __init__(self, grace_s: float = 3.0, clock=time.monotonic):
        self.grace_s, self.clock = grace_s, clock
        self._last_seen: dict[str, float] = {}

    def update(self, ids) -> tuple[list[str], list[str]]:
        """(arrived, left) since the previous update."""
        now = self.clock()
        ids = [str(i) for i in ids]
        arrived = [i for i in ids if i not in self._last_seen]
        for i in ids:
            self._last_seen[i] = now
        left = [i for i, t in self._last_seen.items() if now - t > self.grace_s]
        for i in left:
            del self._last_seen[i]
        return arrived, left

    @property
    def count(self) -> int:
        return len(self._last_seen)

    def ids(self) -> set[str]:
        return set(self._last_seen)


class PeopleInView:
    """The people a tracker reports (Furhat's camera/users, ROS4HRI's persons), one presence.

    `update` gives the conversation its people note and the arrivals and departures; `count()`
    is how many are in view while the last report is fresh (None: no tracker, or stale).
    """

    def __init__(self, conversation, clock=time.monotonic):
        self.conversation, self.clock = conversation, clock
        self.presence = Presence(clock=clock)
        self._at = -1e9                         # clock() of the last report
        self._labels: dict[str, str] = {}       # id -> how to call them, for departures too
        self._reported: list[str] = []          # the ids of the last report

    def update(self, people: list[TrackedPerson], named: bool = False) -> None:
        """A tracker's people now.

        `named`: arrivals and departures by their labels (ROS4HRI); else the conversation's
        "user <id>" person events (Furhat).
        """
        arrived, left = self.presence.update(p.id for p in people)
        self._at, self._reported = self.clock(), [str(p.id) for p in people]
        if not named:
            self.conversation.set_people(describe_people(people), arrived, left)
            return
        self._labels.update({p.id: p.label for p in people})
        self.conversation.set_people(describe_people(people),
                                     known=[p.name for p in people if is_a_name(p.name)])
        for ids, words, kind in ((arrived, "came into view", "arrived"),
                                 (left, "left", "left")):
            for i in ids:
                self.conversation.add_event(f"{self._labels.get(i, 'someone')} {words}",
                                            event=kind)

    def forget(self, who) -> None:
        """Forget me (common/redaction.ForgottenPeople): their departure is not told by name."""
        self._labels = {i: label for i, label in self._labels.items()
                        if not (who.is_them(i) or who.is_them(label))}

    def count(self) -> int | None:
        """People in view by the tracker, if it reported within PEOPLE_FRESH_S."""
        return self.presence.count if self.clock() - self._at <= PEOPLE_FRESH_S else None

    def reported(self) -> list[str]:
        """The ids of the tracker's last report, if fresh ([] if not).

        Not `presence`, which keeps an id for its grace after it went: an anonymous person
        just enrolled under a new id is one person, not two, in the report.
        """
        return sorted(self._reported) if self.count() is not None else []

    def tracks(self, person_id: str) -> bool | None:
        """Whether the tracker sees this person now (None: no fresh report)."""
        if self.count() is None:
            return None
        return str(person_id) in self.presence.ids()
