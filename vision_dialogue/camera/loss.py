"""Frames a publisher announced against frames that arrived, to notice loss between processes.

Two signals, because a publisher whose frames mostly do not arrive gives few of the first:

* every DDS message carries its writer's publication sequence number, so a subscriber can tell
  how many frames a publisher sent since it first heard from it, and how many reached it
  (`arrived()`, per publisher);
* the middleware reports each sample it knows was lost on the topic (the subscription's
  "message lost" event: a best-effort sample whose fragments never all came), also when none
  arrives at all (`lost()`, per topic: the event does not say whose it was).

A stock camera driver that publishes large raw frames best effort, without a shared-memory
profile, loses most of them between processes, silently; so does a frame bigger than the
transport carries. ROS-free: the node feeds both from the subscription.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Hashable

#: frames a publisher must have announced before its loss is judged
MIN_ANNOUNCED = 4
#: the share of announced frames lost above which the loss is reported
MAX_LOSS = 0.2


@dataclass
class PublisherLoss:
    """One publisher's frames since it was first heard: announced, arrived, lost share."""

    publisher: Hashable
    announced: int
    arrived: int
    since: float

    @property
    def lost(self) -> int:
        return max(0, self.announced - self.arrived)

    @property
    def share(self) -> float:
        return self.lost / self.announced if self.announced else 0.0


class LossMeter:
    """Per publisher: the first and last publication sequence number seen, and the count.

    A sequence number lower than the last one seen means the publisher restarted: its count
    starts again.
    """

    def __init__(self, min_announced: int = MIN_ANNOUNCED, max_loss: float = MAX_LOSS,
                 clock: Callable[[], float] = time.monotonic):
        self.min_announced, self.max_loss, self.clock = min_announced, max_loss, clock
        self._pubs: dict[Hashable, list] = {}     # publisher -> [first, last, arrived, since]
        self.reported_lost = 0          # samples the middleware reported lost on the topic
        self._lost_at: dict[Hashable, tuple[int, float]] = {}   # publisher -> (lost, time)

    def lost(self, count: int) -> None:
        """The middleware reported `count` more samples lost on the topic."""
        self.reported_lost += max(0, int(count))

    def seen(self, publisher: Hashable) -> None:
        """`publisher` is on the topic (the graph shows it): losses reported now may be its."""
        self._lost_at.setdefault(publisher, (self.reported_lost, self.clock()))

    def first_seen(self, publisher: Hashable) -> float | None:
        """When `seen()` first heard of `publisher` (this meter's clock), or None."""
        entry = self._lost_at.get(publisher)
        return None if entry is None else entry[1]

    def reported_loss(self, publisher: Hashable) -> PublisherLoss | None:
        """The losses reported since `publisher` was seen, with its own arrivals.

        The reports name no publisher: a caller asks only for publishers that may lose frames
        (best effort). None until at least `min_announced` were lost and more than `max_loss`
        of its frames.
        """
        if publisher not in self._lost_at:
            return None
        before, since = self._lost_at[publisher]
        lost = self.reported_lost - before
        entry = self._pubs.get(publisher)
        arrived = entry[2] if entry else 0
        if lost < self.min_announced or lost / (lost + arrived) <= self.max_loss:
            return None
        return PublisherLoss(publisher, lost + arrived, arrived, since)

    def arrived(self, publisher: Hashable, seq: int | None) -> None:
        if seq is None or seq <= 0:
            return                  # no sequence numbers from this middleware: nothing to judge
        entry = self._pubs.get(publisher)
        if entry is None or seq <= entry[1]:
            self._pubs[publisher] = [seq, seq, 1, self.clock()]
            return
        entry[1], entry[2] = seq, entry[2] + 1

    def publishers(self) -> list[PublisherLoss]:
        return [PublisherLoss(p, last - first + 1, n, since)
                for p, (first, last, n, since) in self._pubs.items()]

    def total_lost(self) -> int:
        """Frames lost on the topic: by sequence numbers or as reported, whichever is more."""
        return max(self.reported_lost, sum(p.lost for p in self.publishers()))

    def losing(self) -> list[PublisherLoss]:
        """Publishers that announced enough frames and lost more than `max_loss` of them."""
        return [p for p in self.publishers()
                if p.announced >= self.min_announced and p.share > self.max_loss]


def loss_fix(topic: str, profile: str) -> str:
    """What to do about frames lost between processes (the manager's and doctor's words)."""
    return (f"start that publisher with FASTDDS_DEFAULT_PROFILES_FILE={profile} (large "
            f"shared-memory segments), or have it publish {topic}/compressed (image_transport "
            "compressed), or reliable QoS")
