"""Matching a print to the enrolled people, and a track's prints pooled over its frames.

One rule per modality (its distance and its threshold) in `RULES`; the thresholds are the
ones `benchmarks/bench_people.py` chose (false accepts at most 1 % of impostor pairs on its
photos and voices; docs/people.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from vision_dialogue.application.identity.records import Embedding, Modality


def euclidean(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b))


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(1.0 - np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-9))


@dataclass(frozen=True)
class MatchRule:
    """How close two prints of one modality must be to be the same person."""

    modality: Modality
    distance: Callable[[np.ndarray, np.ndarray], float]
    threshold: float

    def confidence(self, distance: float) -> float:
        """0.5 at the threshold, 1 for identical prints, 0 at twice the threshold."""
        return float(min(1.0, max(0.0, 1.0 - distance / (2.0 * self.threshold))))


#: faces: dlib's own 0.6, no false accept on the benchmark's photos (the first at 0.65);
#: voices: 0.1, the largest with false accepts at most 1 % on its clips (voice alone is weak)
RULES = {
    Modality.FACE: MatchRule(Modality.FACE, euclidean, 0.6),
    Modality.VOICE: MatchRule(Modality.VOICE, cosine_distance, 0.1),
}


@dataclass(frozen=True)
class Match:
    person_id: str
    distance: float
    confidence: float


class Gallery:
    """The enrolled prints of one modality and model; `best` finds whose a print is."""

    def __init__(self, rule: MatchRule, prints: list[tuple[str, np.ndarray]] = ()):
        self.rule = rule
        self._prints = list(prints)

    def add(self, person_id: str, vector: np.ndarray) -> None:
        self._prints.append((person_id, np.asarray(vector, np.float32)))

    def drop(self, person_id: str) -> None:
        self._prints = [(p, v) for p, v in self._prints if p != person_id]

    def best(self, vector: np.ndarray) -> Match | None:
        """The nearest enrolled person, if within the threshold."""
        nearest: dict[str, float] = {}
        for pid, v in self._prints:
            if v.shape == vector.shape:
                d = self.rule.distance(vector, v)
                nearest[pid] = min(d, nearest.get(pid, d))
        if not nearest:
            return None
        pid = min(nearest, key=nearest.get)
        d = nearest[pid]
        return Match(pid, d, self.rule.confidence(d)) if d <= self.rule.threshold else None

    def __len__(self) -> int:
        return len(self._prints)


class PooledPrint:
    """A face track's prints (or a voice's) pooled: the mean is steadier than one frame's."""

    KEEP = 8        # the newest prints kept for an enrolment

    def __init__(self):
        self.prints: list[Embedding] = []
        self.count = 0

    def add(self, embedding: Embedding) -> np.ndarray:
        self.prints = (self.prints + [embedding])[-self.KEEP:]
        self.count += 1
        return self.mean

    @property
    def mean(self) -> np.ndarray:
        return np.mean([e.vector for e in self.prints], axis=0).astype(np.float32)

    def pooled(self) -> Embedding | None:
        """One print for the store: the mean, with the model of the prints."""
        if not self.prints:
            return None
        first = self.prints[-1]
        return Embedding(first.modality, first.model, first.version, self.mean)
