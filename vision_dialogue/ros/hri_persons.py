"""What people_node tells a ROS4HRI stack about persons (REP-155).

With our person manager (``person_manager: own``): ``/humans/persons/tracked`` and
``/known`` (hri_msgs/IdsList, latched) and per person ``face_id``, ``voice_id``, ``name``,
``alias`` (std_msgs/String) and ``anonymous`` (std_msgs/Bool), all latched and published when
they change. Always: ``/humans/candidate_matches`` (hri_msgs/IdsMatch), a face or voice to a
person with a confidence, which is all a robot's own person manager (``external``) needs.
"""
from __future__ import annotations

from std_msgs.msg import Bool, String

from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS, no_event_handlers
from vision_dialogue.ros.topics import CANDIDATE_MATCHES_TOPIC, PERSONS_KNOWN_TOPIC, \
    PERSONS_TRACKED_TOPIC, hri_topic

_FIELDS = (("face_id", String), ("voice_id", String), ("name", String), ("alias", String),
           ("anonymous", Bool))


class HriPersonsOutput:
    """REP-155 persons from a session's persons (application/identity/persons.py)."""

    def __init__(self, node, own: bool):
        self.node, self.own = node, own
        self.matches_pub = node.create_publisher(pm.IdsMatch, CANDIDATE_MATCHES_TOPIC,
                                                 RELIABLE_QOS)
        self.tracked_pub = self.known_pub = None
        if own:
            self.tracked_pub = node.create_publisher(pm.IdsList, PERSONS_TRACKED_TOPIC,
                                                     LATCHED_QOS)
            self.known_pub = node.create_publisher(pm.IdsList, PERSONS_KNOWN_TOPIC,
                                                   LATCHED_QOS)
        self._pubs: dict[str, dict] = {}
        self._last: dict[tuple, object] = {}

    def publish(self, persons: list, known_ids: list[str]) -> None:
        """The tracked persons (SessionPerson) and every known id; fields on change only."""
        if not self.own:
            return
        stamp = self.node.get_clock().now().to_msg()
        ids = [p.person_id for p in persons]
        pm.follow_ids(self._pubs, ids, self._person_publishers, self._release)
        for topic_pub, listed in ((self.tracked_pub, ids), (self.known_pub, known_ids)):
            msg = pm.IdsList(ids=sorted(listed))
            msg.header.stamp = stamp
            topic_pub.publish(msg)
        for p in persons:
            values = {"face_id": sorted(p.face_ids)[0] if p.face_ids else "",
                      "voice_id": p.voice_id if p.heard else "", "name": p.name,
                      "alias": p.alias, "anonymous": p.anonymous}
            for field, value in values.items():
                if self._last.get((p.person_id, field)) != value:
                    self._last[(p.person_id, field)] = value
                    self._pubs[p.person_id][field].publish(
                        Bool(data=value) if field == "anonymous" else String(data=value))

    def match(self, id1: str, id1_type: int, person_id: str, confidence: float) -> None:
        """A face (IdsMatch.FACE) or a voice (IdsMatch.VOICE) is this person."""
        self.matches_pub.publish(pm.IdsMatch(id1=id1, id1_type=id1_type, id2=person_id,
                                             id2_type=pm.IdsMatch.PERSON,
                                             confidence=float(confidence)))

    def _person_publishers(self, pid: str) -> dict:
        quiet = no_event_handlers("publisher")          # destroyed when the person goes
        return {field: self.node.create_publisher(kind, hri_topic("persons", pid, field),
                                                  LATCHED_QOS, **quiet)
                for field, kind in _FIELDS}

    def _release(self, pubs: dict) -> None:
        for pub in pubs.values():
            self.node.destroy_publisher(pub)
        self._last = {k: v for k, v in self._last.items() if k[0] in self._pubs}
