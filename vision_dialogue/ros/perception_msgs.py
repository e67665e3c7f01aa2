"""The standard perception interfaces, vision_msgs and hri_msgs (ROS4HRI, REP-155), if installed.

Neither has a PyPI wheel: setup builds the vendored copies (third_party/interfaces) when no
installed copy is found, and a robot's ROS 2 has them as packages. Without them the nodes run as
before, with one log line saying what is off: `missing()` names what is absent.
Conversions between the messages and the ROS-free `common.objects` types live here too.
"""
from __future__ import annotations

from typing import Callable, Iterable

from vision_dialogue.common.objects import DetectionSet, LabelMap, ObjectSighting
from vision_dialogue.ros.image_msgs import stamp_to_ns
from vision_dialogue.ros.topics import (  # noqa: F401 - the standard topics' names, here too
    BODIES_TRACKED_TOPIC, DETECTIONS_TOPIC, FACES_TRACKED_TOPIC, LABEL_INFO_TOPIC,
    PERSONS_TRACKED_TOPIC, ROBOT_SPEAKING_TOPIC, VOICES_TRACKED_TOPIC)

try:
    from vision_msgs.msg import BoundingBox2D, Detection2D, Detection2DArray, LabelInfo, \
        ObjectHypothesisWithPose
except ImportError:           # optional: see missing()
    Detection2DArray = LabelInfo = None
try:
    from hri_msgs.msg import EngagementLevel, Expression, Gesture, IdsList, IdsMatch, \
        LiveSpeech, NormalizedRegionOfInterest2D
except ImportError:
    EngagementLevel = Expression = Gesture = IdsList = IdsMatch = LiveSpeech = None
    NormalizedRegionOfInterest2D = None


def missing() -> list[str]:
    """The interface packages that are not importable ([] when both are)."""
    return [name for name, mod in (("vision_msgs", Detection2DArray), ("hri_msgs", IdsList))
            if mod is None]


def follow_ids(table: dict, ids, make: Callable, release: Callable) -> tuple[set, set]:
    """Keep one entry per tracked id in `table` (REP-155: an id's topics while it is tracked).

    `make(id)` for ids new in `ids`, `release(entry)` for ids gone; returns (added, removed).
    """
    ids = {str(i) for i in ids}
    added, removed = ids - set(table), set(table) - ids
    for i in added:
        table[i] = make(i)
    for i in removed:
        release(table.pop(i))
    return added, removed


def from_detection_array(msg, labels: LabelMap, width: float = 0.0,
                         source: str = "", name_as: str | None = None) -> DetectionSet:
    """A Detection2DArray as a DetectionSet.

    Each detection's best hypothesis, its class name through `labels` (the map of `source`,
    the publishing node), its centre as a fraction of `width` (0: the detections' widest
    extent, as no image size is in the message). Detections whose class id has no name are
    left out and counted in `unnamed`. `name_as`: the source whose map names the ids, if not
    `source` (UNRESOLVED while `source`'s own map is on its way).
    """
    sightings, unnamed = [], 0
    namer = source if name_as is None else name_as
    span = width or max((d.bbox.center.position.x + d.bbox.size_x / 2
                         for d in msg.detections), default=0.0)
    for det in msg.detections:
        if not det.results:
            continue
        ranked = sorted(det.results, key=lambda r: -r.hypothesis.score)
        best = ranked[0].hypothesis
        name = labels.name(best.class_id, namer)
        if name is None:
            unnamed += 1
            continue
        alts = tuple((alt, float(r.hypothesis.score)) for r in ranked[1:4]
                     if (alt := labels.name(r.hypothesis.class_id, namer)))
        cx = det.bbox.center.position.x / span if span > 0 else 0.5
        sightings.append(ObjectSighting(name, float(best.score), min(max(cx, 0.0), 1.0), alts))
    return DetectionSet(stamp_to_ns(msg.header.stamp) / 1e9, tuple(sightings), unnamed=unnamed,
                        source=source)


def to_detection_array(header, detected: Iterable):
    """perception.object_detector.Detected boxes as a Detection2DArray (class_id: the name)."""
    out = Detection2DArray(header=header)
    for i, d in enumerate(detected):
        x1, y1, x2, y2 = d.box
        det = Detection2D(header=header, id=d.track or f"{d.label}-{i}")
        det.bbox = BoundingBox2D(size_x=float(x2 - x1), size_y=float(y2 - y1))
        det.bbox.center.position.x, det.bbox.center.position.y = (x1 + x2) / 2, (y1 + y2) / 2
        for label, score in [(d.label, d.score), *d.alternatives]:
            h = ObjectHypothesisWithPose()
            h.hypothesis.class_id, h.hypothesis.score = label, float(score)
            det.results.append(h)
        out.detections.append(det)
    return out
