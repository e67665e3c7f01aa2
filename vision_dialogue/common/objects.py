"""What object detectors report, as notes on the conversation's frames and as visual events.

Any detector can feed it (our detector node, a robot's YOLO node, Isaac ROS, depthai): the ROS
side turns vision_msgs/Detection2DArray into `ObjectSighting`s and calls `ObjectNotes`.

* Wording that holds up (benchmarks/bench_objects.py): a class at or above `sure` is named ("a
  cup in the middle"); between `min_score` and `sure` it is "maybe a cup"; an animal whose
  runner-up at the same place is another animal is "a dog or a cat" (the detector confuses
  the scikit-image cat with a dog; "an animal, maybe a dog or a cat" was measured too: the
  1.5B model then answered "is there a cat?" and "is there a dog?" both with no); a "person"
  is left to the people notes when those are counted by our own perception (`skip`).
* Timing: a set of detections is attached to the frame nearest in time, within `max_age` s
  (older ones are stale); a set that arrives after its frame (a detector runs on the frame the
  manager already has) still reaches that frame.
* Events: a class coming into view or leaving it (absent for `max_age` s) is one short line.

No ROS imports.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

ANIMALS = frozenset(("bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear",
                     "zebra", "giraffe"))
#: a runner-up animal at least this share of the best one's score makes the wording hedge
#: (bench_objects.py: the demo's cat pan read as dog 0.54 with cat 0.25 on the same spot)
RIVAL_SHARE = 0.4
_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_PLURALS = {"person": "people", "mouse": "mice", "sheep": "sheep", "knife": "knives",
            "skis": "skis", "scissors": "scissors", "bus": "buses", "sandwich": "sandwiches",
            "wine glass": "wine glasses", "bench": "benches", "couch": "couches"}


def horizontal_position(cx: float) -> str:
    """Where in the picture, in words, from the centre's x as a fraction of the width."""
    if cx < 0.38:
        return "on the left"
    if cx > 0.62:
        return "on the right"
    return "in the middle"


@dataclass(frozen=True)
class ObjectSighting:
    """One detected object: class name, score, centre x (0..1 of the width), runner-ups."""

    label: str
    score: float
    cx: float = 0.5
    alternatives: tuple[tuple[str, float], ...] = field(default=())

    @classmethod
    def from_box(cls, label: str, score: float, box: Sequence[float], width: float,
                 alternatives: Iterable[tuple[str, float]] = ()) -> "ObjectSighting":
        """From an (x1, y1, x2, y2) pixel box in an image `width` pixels wide."""
        cx = ((box[0] + box[2]) / 2) / width if width > 0 else 0.5
        return cls(label, float(score), min(max(cx, 0.0), 1.0), tuple(alternatives))


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _plural(label: str) -> str:
    if label in _PLURALS:
        return _PLURALS[label]
    return label + ("es" if label.endswith(("s", "ch", "sh", "x")) else "s")


def _rival(s: ObjectSighting) -> str | None:
    """Another animal nearly as likely at an animal's place (the detector mixes them up)."""
    if s.label not in ANIMALS:
        return None
    return next((alt for alt, score in s.alternatives
                 if alt in ANIMALS and alt != s.label and score >= RIVAL_SHARE * s.score), None)


def _kept(sightings: Iterable[ObjectSighting], min_score: float,
          skip: Iterable[str]) -> list[ObjectSighting]:
    """The sightings that hold up: at least `min_score`, of a class not skipped."""
    skip = set(skip)
    return [s for s in sightings if s.score >= min_score and s.label not in skip]


@dataclass(frozen=True)
class ObjectPhrase:
    """One group of sightings in words; `claims` is the class it names plainly ("" if hedged)."""

    text: str
    claims: str


def object_phrases(sightings: Iterable[ObjectSighting], *, min_score: float = 0.3,
                   sure: float = 0.45, skip: Iterable[str] = (),
                   most: int = 4) -> list[ObjectPhrase]:
    """Sightings grouped by class, most confident first, at most `most` groups.

    A class seen several times is counted ("three horses"), with a place only when they are all
    in one; under `sure` it is "maybe ..."; an animal with a rival animal is "a dog or a cat".
    """
    kept = sorted(_kept(sightings, min_score, skip), key=lambda s: -s.score)
    groups: dict[object, list[ObjectSighting]] = {}
    for s in kept:
        rival = _rival(s)
        groups.setdefault(frozenset((s.label, rival)) if rival else s.label, []).append(s)
    phrases = []
    for key, group in list(groups.items())[:most]:
        best, count = group[0], len(group)
        places = {horizontal_position(s.cx) for s in group}
        where = f" {places.pop()}" if len(places) == 1 else ""
        number = _NUMBERS[count] if count < len(_NUMBERS) else str(count)
        if isinstance(key, frozenset):
            a, b = best.label, next(iter(key - {best.label}))    # the key came from best
            text = f"{number} animals, {_plural(a)} or {_plural(b)}," if count > 1 else \
                f"{_article(a)} {a} or {_article(b)} {b}"
            phrases.append(ObjectPhrase(f"{text}{where}".rstrip(","), ""))
            continue
        words = _plural(best.label) if count > 1 else best.label
        head = f"{number} {words}" if count > 1 else f"{_article(words)} {words}"
        hedged = best.score < sure
        phrases.append(ObjectPhrase(f"{'maybe ' if hedged else ''}{head}{where}",
                                    "" if hedged else best.label))
    return phrases


def describe_objects(sightings: Iterable[ObjectSighting], **options) -> str:
    """The objects in words: "a cup in the middle; maybe a cat on the left".

    "" when nothing holds up (options: see object_phrases).
    """
    return "; ".join(p.text for p in object_phrases(sightings, **options))


@dataclass
class DetectionSet:
    """One message's detections, stamped (seconds) with the frame they were computed on."""

    stamp: float
    sightings: tuple[ObjectSighting, ...]
    unnamed: int = 0          # detections left out: a class id with no name known
    source: str = ""          # the publishing node: each detector's set is its view only


class ObjectNotes:
    """Keeps recent detection sets; gives a frame its objects note and the class events.

    `attach(frame_stamp)` → note text ("" if none fresh); `add(det_set)` → (frame stamp the
    set belongs to or None, note, events): the caller updates that frame's note and adds the
    events to the timeline.

    A frame's note joins, per source (detector), the set nearest to the frame: two detectors
    on the same topics each see only their classes, so one's set is not the whole view and
    the note must not flip between them. A class is gone only when no source saw it for
    `max_age` s.

    Hold `in_order` while attaching a frame's note and putting the frame in place, and while
    adding a set and applying its note: a set that comes for a frame still being put in
    place then waits for it, instead of finding no frame and being lost.
    """

    def __init__(self, *, max_age: float = 5.0, min_score: float = 0.3, sure: float = 0.45,
                 skip: Iterable[str] = ()):
        self.max_age, self.min_score, self.sure = float(max_age), float(min_score), float(sure)
        self.skip = set(skip)
        self._sets: deque[DetectionSet] = deque(maxlen=64)
        self._frames: deque[float] = deque(maxlen=8)     # stamps of recent frames
        self._chosen: dict[float, dict[str, DetectionSet]] = {}  # frame -> source -> set
        self._last_seen: dict[str, float] = {}           # class -> newest stamp it was seen
        self._lock = threading.Lock()
        self.in_order = threading.Lock()

    def note(self, det: DetectionSet) -> str:
        return describe_objects(det.sightings, min_score=self.min_score, sure=self.sure,
                                skip=self.skip)

    def _frame_note(self, frame_stamp: float) -> str:
        chosen = self._chosen.get(frame_stamp, {})
        return self.note(DetectionSet(frame_stamp, self._joined(
            chosen[source] for source in sorted(chosen))))

    def _joined(self, sets: Iterable[DetectionSet]) -> tuple[ObjectSighting, ...]:
        """Each class from the source that saw most of it (then the surest).

        Two detectors that both see the one person make one person, not two.
        """
        best: dict[str, tuple[int, float, list[ObjectSighting]]] = {}
        for det in sets:
            by_class: dict[str, list[ObjectSighting]] = {}
            for s in det.sightings:
                by_class.setdefault(s.label, []).append(s)
            for label, group in by_class.items():
                rank = (sum(s.score >= self.min_score for s in group), max(s.score for s in group))
                if label not in best or rank > best[label][:2]:
                    best[label] = (*rank, group)
        return tuple(s for *_rank, group in best.values() for s in group)

    def attach(self, frame_stamp: float) -> str:
        """The note for a new frame: each source's nearest fresh detection set, or ""."""
        with self._lock:
            self._frames.append(frame_stamp)
            chosen = {}
            for det in self._sets:
                held = chosen.get(det.source)
                gap = abs(det.stamp - frame_stamp)
                if gap <= self.max_age and (held is None or gap < abs(held.stamp - frame_stamp)):
                    chosen[det.source] = det
            if not chosen:
                return ""
            self._chosen[frame_stamp] = chosen
            self._trim()
            return self._frame_note(frame_stamp)

    def add(self, det: DetectionSet) -> tuple[float | None, str, list[str]]:
        """Take a detection set; returns (frame stamp, note, events).

        The frame stamp is that of the frame whose note this set now changes, or None.
        """
        with self._lock:
            self._sets.append(det)
            events = self._events(det)
            target = min(self._frames, key=lambda f: abs(f - det.stamp), default=None)
            if target is not None:
                gap = abs(target - det.stamp)
                held = self._chosen.get(target, {}).get(det.source)
                if gap > self.max_age or (held is not None and gap >= abs(held.stamp - target)):
                    target = None
                else:
                    self._chosen.setdefault(target, {})[det.source] = det
            self._trim()
            return target, (self._frame_note(target) if target is not None else ""), events

    def _events(self, det: DetectionSet) -> list[str]:
        """Classes that came into view with this set (sure), or left before it.

        Left: not even unsure for max_age s. An animal the detector is torn about arrives as
        "an animal".
        """
        now = det.stamp
        kept = _kept(det.sightings, self.min_score, self.skip)
        present = {("animal" if _rival(s) else s.label) for s in kept}
        arrived = {("animal" if _rival(s) else s.label) for s in kept if s.score >= self.sure}
        events = []
        for key in sorted(arrived):
            if now - self._last_seen.get(key, float("-inf")) > self.max_age:
                events.append(f"{_article(key)} {key} came into view")
        for key, at in list(self._last_seen.items()):
            if key not in present and now - at > self.max_age:
                events.append(f"the {key} is no longer in view")
                del self._last_seen[key]
        for key in present:
            if key in arrived or key in self._last_seen:
                self._last_seen[key] = now
        return events

    def _trim(self) -> None:
        keep = set(self._frames)
        for stamp in [s for s in self._chosen if s not in keep]:
            del self._chosen[stamp]


#: the source of detections whose publishing node discovery has not named yet
UNRESOLVED = "?"


class LabelMap:
    """Class ids to names: the publisher's vision_msgs/LabelInfo, then a `labels` parameter.

    Detectors that put the index in class_id (Isaac ROS, depthai) need one of them; an id with
    no name is None (a number means nothing in a conversation), and a class_id that is already
    a name is kept. Maps are kept per `source` (the publishing node): two detectors on the same
    topics number their classes each their own way, and one's map must not name the other's
    ids. Detections from a source without a map use the only map there is, if one; with maps
    from several other sources it is not known which applies, and the id stays unnamed; so it
    does from an UNRESOLVED source (its node not known yet: it may be the one with the map).
    """

    def __init__(self, labels: Sequence[str] = ()):
        self._from_param = {str(i): name for i, name in enumerate(labels) if name}
        self._from_topic: dict[str, dict[str, str]] = {}

    def update(self, class_map: Iterable[tuple[int | str, str]], source: str = "") -> None:
        self._from_topic[source] = {str(i): str(name) for i, name in class_map if str(name)}

    def has(self, source: str) -> bool:
        """Whether `source` has given its own map."""
        return source in self._from_topic

    def _map(self, source: str) -> dict[str, str]:
        if source in self._from_topic:
            return self._from_topic[source]
        if source == UNRESOLVED:
            return {}
        maps = list(self._from_topic.values())
        return maps[0] if len(maps) == 1 else {}

    def name(self, class_id: str, source: str = "") -> str | None:
        cid = str(class_id).strip()
        found = self._map(source).get(cid) or self._from_param.get(cid)
        if found:
            return found
        return None if cid.lstrip("-").isdigit() or not cid else cid.replace("_", " ")

    @property
    def known(self) -> int:
        return sum(map(len, self._from_topic.values())) or len(self._from_param)
