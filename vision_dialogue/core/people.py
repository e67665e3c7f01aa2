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
