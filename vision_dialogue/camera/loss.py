"""Frames a publisher announced against frames that arrived, to notice loss between processes.

Every DDS message carries its writer's publication sequence number, so a subscriber can tell
how many frames a publisher sent since it first heard from it, and how many reached it. A
stock camera driver that publishes large raw frames best effort, without a shared-memory
profile, loses most of them between processes, silently; so does a frame bigger than the
transport carries. ROS-free: the node feeds `arrived()` from each message's info.
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

    def losing(self) -> list[PublisherLoss]:
        """Publishers that announced enough frames and lost more than `max_loss` of them."""
        return [p for p in self.publishers()
                if p.announced >= self.min_announced and p.share > self.max_loss]


def loss_fix(topic: str, profile: str) -> str:
    """What to do about frames lost between processes (the manager's and doctor's words)."""
    return (f"start that publisher with FASTDDS_DEFAULT_PROFILES_FILE={profile} (large "
            f"shared-memory segments), or have it publish {topic}/compressed (image_transport "
            "compressed), or reliable QoS")
