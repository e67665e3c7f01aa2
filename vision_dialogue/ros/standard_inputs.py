"""What other perception stacks tell the conversation, over the standard interfaces.

* ``detections`` (vision_msgs/Detection2DArray, any publisher QoS) with ``label_info``
  (vision_msgs/LabelInfo, latched; each publishing node's map names its own detections'
  ids) or the ``labels`` parameter for numeric class ids: objects
  noted on the frame nearest in time, classes coming and going as visual events
  (common/objects.py).
* ROS4HRI (REP-155): voices' final ``speech`` become user turns, spoken by the person whose
  ``voice_id`` is that voice; persons (name, face place and expression, engagement) become
  the people notes, arrivals and departures, and a greeting; bodies' gestures become visual
  events (Ros4hriInput).

Each part is on when its interface package is installed; nothing changes when nobody publishes.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import qos_profile_sensor_data
from std_msgs.msg import Bool, String

from vision_dialogue.common.objects import UNRESOLVED, DetectionSet, LabelMap, ObjectNotes
from vision_dialogue.core.people import TrackedPerson
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.topics import hri_topic
from vision_dialogue.ros.qos import LATCHED_FROM_MANY_QOS, LATCHED_QOS, RELIABLE_QOS, \
    endpoint_named, endpoint_node, no_event_handlers


def object_notes(p, observed_people: bool) -> ObjectNotes | None:
    """Where detections will come in (`detections` on, vision_msgs installed): their notes.

    `observed_people`: the manager's own observer describes people (faces, pose: where, how
    close, what they wear), so a detector's persons are left to it.
    """
    if not p["detections"] or "vision_msgs" in pm.missing():
        return None
    # faces, hands and words are parts of a person or a scene, not objects
    skip = ("face", "hand", "text") + (("person",) if observed_people else ())
    return ObjectNotes(max_age=p["objects_max_age"], min_score=p["objects_min_score"],
                       sure=p["objects_sure"], skip=skip)


def connect_standard_inputs(node, p, conversation, turns, people, notes: ObjectNotes | None,
                            *, frame_width: Callable[[], int],
                            on_engaging: Callable[[str], None]):
    """The manager's standard inputs: (DetectionsInput or None, Ros4hriInput or None).

    `p`: the manager's parameters (detections, ros4hri, labels); `turns`: its TurnTaker
    (utterances, gestures); `people`: its PeopleInView; `notes`: `object_notes(p, ...)`. One
    log line names an input asked for whose message package is not installed.
    """
    off = [f"{name} ({pkg} not installed)" for name, pkg, on in (
        ("detections", "vision_msgs", p["detections"]),
        ("ROS4HRI", "hri_msgs", p["ros4hri"])) if on and pkg in pm.missing()]
    if off:
        node.get_logger().info(f"standard perception inputs off: {', '.join(off)}; "
                               "scripts/setup.sh builds them")
    detections = voices = None
    if notes is not None:
        detections = DetectionsInput(
            node, notes, LabelMap([x for x in p["labels"] if x]),
            on_note=conversation.set_objects,
            on_event=lambda text, stamp: conversation.add_event(text, stamp, "objects"),
            frame_width=frame_width)
    if p["ros4hri"] and "hri_msgs" not in pm.missing():
        # a voice's final result is a user turn like any utterance
        voices = Ros4hriInput(
            node, lambda text, speaker, confidence, locale: turns.utterance(
                text, speaker, locale),
            on_people=lambda seen: people.update(seen, named=True),
            on_engaging=on_engaging, on_gesture=lambda *a: turns.seen(*a))
    return detections, voices


#: seconds a label map waits for the graph to name its publisher before it is kept unnamed
UNPLACED_S = 5.0


class PublishingNodes:
    """The node that published a message, from its MessageInfo's publisher GID.

    A detector's ``detections`` and ``label_info`` come from two publishers of one node: the
    node's name ties a label map to its detections. Looked up in the ROS graph once per
    publisher (a publisher the graph does not know yet is looked up again at most every
    LOOKUP_AGAIN_S: a message can arrive before discovery names its node; its node is then
    UNRESOLVED, and its ids stay unnamed rather than named by another node's map); "" when
    there is no MessageInfo.
    """

    LOOKUP_AGAIN_S = 0.5

    def __init__(self, node):
        self.node = node
        self._known: dict[bytes, str] = {}
        self._looked: dict[bytes, float] = {}      # unknown gid -> when the graph was asked

    @staticmethod
    def gid_of(info) -> bytes:
        return bytes(((info or {}).get("publisher_gid") or {}).get("data") or b"")

    def node_of(self, topic: str, info) -> str:
        return self.node_of_gid(topic, self.gid_of(info))

    def node_of_gid(self, topic: str, gid: bytes) -> str:
        if not gid:
            return ""
        now = time.monotonic()
        if gid not in self._known and now - self._looked.get(gid, -1e9) >= self.LOOKUP_AGAIN_S:
            self._looked[gid] = now
            for e in self.node.get_publishers_info_by_topic(topic):
                if not endpoint_named(e):          # DDS knows the writer, the ROS graph
                    continue                       # not yet its node: ask again later
                key = bytes(e.endpoint_gid)[:len(gid)]
                self._known[key] = endpoint_node(e)
        return self._known.get(gid, UNRESOLVED)


class DetectionsInput:
    """``detections`` (+ ``label_info``) into ObjectNotes; frames take them in frame_input.

    on_note(frame_stamp, note): a set arrived after its frame; on_event(text, stamp): a class
    came or went. `frame_width()`: the newest frame's width, for positions.
    """

    def __init__(self, node, notes: ObjectNotes, labels: LabelMap,
                 on_note: Callable[[float, str], None], on_event: Callable[[str, float], None],
                 frame_width: Callable[[], int]):
        self.node, self.notes, self.labels = node, notes, labels
        self.on_note, self.on_event, self.frame_width = on_note, on_event, frame_width
        self.received = 0
        self.sources = PublishingNodes(node)
        self.topic = node.resolve_topic_name(pm.DETECTIONS_TOPIC)
        self.labels_topic = node.resolve_topic_name(pm.LABEL_INFO_TOPIC)
        self.log = node.get_logger()
        self._warned_unnamed = False
        self._unplaced: dict[bytes, tuple[float, list]] = {}   # gid -> (since, class map)
        # last: in a managed node's configure the executor spins, and a latched map can come
        # before this constructor returns
        group = MutuallyExclusiveCallbackGroup()
        # best effort matches both reliable and best-effort detectors
        self.sub = node.create_subscription(pm.Detection2DArray, pm.DETECTIONS_TOPIC,
                                            self._on_detections, qos_profile_sensor_data,
                                            callback_group=group)
        self.labels_sub = node.create_subscription(
            pm.LabelInfo, pm.LABEL_INFO_TOPIC, self._on_label_info, LATCHED_FROM_MANY_QOS,
            callback_group=group)

    def _on_label_info(self, msg, info) -> None:
        class_map = [(c.class_id, c.class_name) for c in msg.class_map]
        gid = self.sources.gid_of(info)
        source = self.sources.node_of_gid(self.labels_topic, gid)
        if source == UNRESOLVED:       # before discovery names its node: placed when it does
            self._unplaced[gid] = (time.monotonic(), class_map)
            return
        self.labels.update(class_map, source)

    def _place_label_maps(self) -> None:
        """Maps whose publisher the graph now names go to its node (after UNPLACED_S: to "")."""
        for gid, (since, class_map) in list(self._unplaced.items()):
            source = self.sources.node_of_gid(self.labels_topic, gid)
            if source != UNRESOLVED or time.monotonic() - since > UNPLACED_S:
                self.labels.update(class_map, "" if source == UNRESOLVED else source)
                del self._unplaced[gid]

    def _map_coming(self, source: str) -> bool:
        """`source` publishes label_info but its map is not here yet (it is on its way)."""
        if source in ("", UNRESOLVED) or self.labels.has(source):
            return False
        return any(endpoint_node(e) == source
                   for e in self.node.get_publishers_info_by_topic(self.labels_topic))

    def _on_detections(self, msg, info) -> None:
        if self._unplaced:
            self._place_label_maps()
        source = self.sources.node_of(self.topic, info)
        det: DetectionSet = pm.from_detection_array(
            msg, self.labels, self.frame_width(), source,
            name_as=UNRESOLVED if self._map_coming(source) else None)
        if det.unnamed and not self._warned_unnamed:
            self._warned_unnamed = True
            self.log.warning(
                f"{self.topic}: class ids without names (no {self.labels_topic} yet, and no "
                "labels parameter): those detections are left out until names come")
        with self.notes.in_order:
            frame_stamp, note, events = self.notes.add(det)
            if frame_stamp is not None:
                self.on_note(frame_stamp, note)
        for text in events:
            self.on_event(text, det.stamp)
        self.received += 1          # counted once taken in: its note and events are in


#: ROS4HRI gestures (hri_msgs/Gesture) as our visual event kinds, with their words
GESTURES = {6: ("wave", "waved"), 3: ("raised_hand", "raised a hand"),
            4: ("raised_hand", "raised a hand"), 5: ("raised_hand", "raised both hands"),
            9: ("point", "pointed up"), 11: ("thumbs_up", "gave a thumbs up")}
ENGAGING = 2          # hri_msgs/EngagementLevel.ENGAGING
#: a new person is reported once their name message came (empty for a stranger), or after
#: this long without one (a person manager that publishes no names; their latched topics
#: arrive once the subscriptions made when the person is first tracked have matched: 2 s was
#: too short in a busy suite run). Once the person's name topic has a publisher, the wait
#: counts from when that was seen: on a busy machine the discovery of a new person's topics
#: is what comes late, and their latched name follows it. Nobody is greeted while anyone
#: tracked still waits, so two people arriving together are greeted together, by name where
#: one is known
NAME_WAIT_S = 6.0
#: how often the persons are reported (departures are noticed by time)
REPORT_EVERY_S = 0.5


class Ros4hriInput:
    """ROS4HRI (REP-155) into the conversation.

    * voices: each tracked voice's final ``speech`` → on_speech(text, speaker, confidence,
      locale), the speaker being the person with that voice (name, else alias, else the id);
    * persons: the tracked persons with their face's ``roi`` and ``expression`` →
      on_people([TrackedPerson]) (named persons by name, others as "someone"); a person
      becoming ENGAGING, or first reported where nobody publishes their engagement (our
      people_node) → on_engaging(label);
    * bodies: a tracked body's ``gesture`` → on_gesture(kind, text).

    Topics of a person, face, voice or body are subscribed while it is tracked. Faces alone are
    not read: people come from a person manager, which fuses faces, bodies and voices (so the
    faces our own detector publishes do not come back as people).
    """

    def __init__(self, node, on_speech: Callable[[str, str, float, str], None],
                 on_people: Callable[[list], None] | None = None,
                 on_engaging: Callable[[str], None] | None = None,
                 on_gesture: Callable[[str, str], None] | None = None):
        self.node, self.on_speech = node, on_speech
        self.on_people, self.on_engaging, self.on_gesture = on_people, on_engaging, on_gesture
        # kind -> tracked id -> its subscriptions
        self._subs: dict[str, dict[str, list]] = {k: {} for k in ("voice", "person", "body",
                                                                  "face")}
        self._of: dict[str, dict[str, str]] = {k: {} for k in (
            "voice_id", "face_id", "name", "alias", "expression")}
        self._roi: dict[str, float] = {}             # face id -> centre x (0..1)
        self._engagement: dict[str, int] = {}
        self._first_seen: dict[str, float] = {}      # person id -> monotonic time
        self._name_seen: dict[str, float] = {}       # ... when their name topic had a publisher
        self._unnamed: set[str] = set()              # waited for a name long enough
        self._reported = False                       # anyone tracked yet
        self.lists_heard = False                     # a person manager's list (even empty)
        self._announced: set[str] = set()            # person ids reported once
        self._lock = threading.Lock()
        self._skipped: set[str] = set()
        self.group = MutuallyExclusiveCallbackGroup()  # turns in the order they were said
        # id lists: latched by some publishers (hri_person_manager), plain by others; a latched
        # subscription misses plain publishers and a plain one the latched list sent before
        # it matched, so both (updates are idempotent; the one that never matches a given
        # publisher is expected, not warned)
        quiet = SubscriptionEventCallbacks(use_default_callbacks=False)
        for topic, kind in ((pm.VOICES_TRACKED_TOPIC, "voice"),
                            (pm.PERSONS_TRACKED_TOPIC, "person"),
                            (pm.BODIES_TRACKED_TOPIC, "body")):
            for qos in (LATCHED_QOS, RELIABLE_QOS):
                node.create_subscription(pm.IdsList, topic,
                                         lambda m, k=kind: self._on_tracked(k, m.ids), qos,
                                         callback_group=self.group, event_callbacks=quiet)
        if on_people is not None:        # a list latched once is reported too
            node.create_timer(REPORT_EVERY_S, self._report, callback_group=self.group)

    # --- who is who -----------------------------------------------------------------------
    def _name(self, pid: str) -> str:
        return self._of["name"].get(pid) or self._of["alias"].get(pid) or ""

    def speaker(self, voice_id: str) -> str:
        """The name of the person with this voice, else the voice id."""
        with self._lock:
            person = next((p for p, v in self._of["voice_id"].items() if v == voice_id), None)
            return (self._name(person) if person else "") or voice_id

    def tracked_faces(self) -> dict[str, str]:
        """Every person tracked now -> their face id ("" for none): one just tracked too."""
        ids = tuple(self._subs["person"])      # one C-level copy: the list may change meanwhile
        with self._lock:
            return {pid: self._of["face_id"].get(pid, "") for pid in ids}

    def people(self) -> list:
        """The tracked persons as TrackedPerson (x from the face's place in the image).

        A person whose name message has not come, first tracked less than NAME_WAIT_S ago,
        is left out.
        """
        return self._persons(time.monotonic())[0]

    def _persons(self, now: float) -> tuple[list, bool]:
        """people(), and whether anyone tracked was left out waiting for a name."""
        with self._lock:
            out, waiting = [], False
            for pid in tuple(self._subs["person"]):
                if self._waiting(pid, now):
                    waiting = True
                    continue
                face = self._of["face_id"].get(pid, "")
                cx = self._roi.get(face)
                out.append(TrackedPerson(pid, 0.0 if cx is None else (0.5 - cx) * 2.0, 0.0,
                                         self._of["expression"].get(face, ""),
                                         name=self._name(pid) or "someone"))
            return out, waiting

    def _waiting(self, pid: str, now: float) -> bool:
        """Whether a tracked person's name may still come (their name message has not).

        NAME_WAIT_S from when their name topic was first seen with a publisher, or from when
        they were first tracked while it has none; a person once given up on stays so.
        """
        if pid in self._of["name"] or self._name(pid) or pid in self._unnamed:
            return False
        name_topic = hri_topic("persons", pid, "name")
        if pid not in self._name_seen and self.node.count_publishers(name_topic):
            self._name_seen[pid] = now
        if now - self._name_seen.get(pid, self._first_seen.get(pid, now)) < NAME_WAIT_S:
            return True
        self._unnamed.add(pid)
        return False

    # --- subscriptions ----------------------------------------------------------------------
    def _on_tracked(self, kind: str, ids) -> None:
        added, removed = pm.follow_ids(self._subs[kind], ids, getattr(self, f"_follow_{kind}"),
                                       lambda subs: _unsubscribe(self.node, subs))
        if kind != "person":
            return
        self.lists_heard = True
        for pid in added:
            self._first_seen[pid] = time.monotonic()
            self._reported = True
        for pid in removed:                 # the person's face and name go with them
            _unsubscribe(self.node, self._subs["face"].pop(self._of["face_id"].pop(pid, ""), []))
            self._first_seen.pop(pid, None)
            with self._lock:
                self._of["name"].pop(pid, None)
                self._name_seen.pop(pid, None)
                self._unnamed.discard(pid)
        self._report()

    def _report(self) -> None:
        """The persons to on_people, on each list and every REPORT_EVERY_S.

        Once anyone was tracked: departures are noticed by time, so an empty list must keep
        coming. A person first reported whose engagement nobody publishes (people_node) is
        on_engaging's then, once nobody tracked waits for a name: the opening remark, by name
        for the people the manager knows among everyone who came together.
        """
        if self.on_people is None or not self._reported:
            return
        seen, waiting = self._persons(time.monotonic())
        self.on_people(seen)
        if waiting:
            return
        for person in seen:
            if person.id in self._announced:
                continue
            self._announced.add(person.id)
            if self.on_engaging is not None and not self.node.count_publishers(
                    hri_topic("persons", person.id, "engagement_status")):
                self.on_engaging(person.label)

    def _sub(self, msg_type, topic: str, callback, qos=LATCHED_QOS):
        return self.node.create_subscription(msg_type, topic, callback, qos,
                                             callback_group=self.group,
                                             **no_event_handlers("subscription"))

    def _follow_voice(self, vid: str) -> list:
        return [self._sub(pm.LiveSpeech, hri_topic("voices", vid, "speech"),
                          lambda m: self._on_speech(vid, m), RELIABLE_QOS)]

    def _follow_person(self, pid: str) -> list:
        subs = [self._sub(String, hri_topic("persons", pid, field),
                          lambda m, f=field: self._set(f, pid, m))
                for field in ("voice_id", "face_id", "name", "alias")]
        subs.append(self._sub(pm.EngagementLevel,
                              hri_topic("persons", pid, "engagement_status"),
                              lambda m: self._on_engagement(pid, m.level), RELIABLE_QOS))
        return subs

    def _follow_face(self, fid: str) -> list:
        return [self._sub(pm.NormalizedRegionOfInterest2D, hri_topic("faces", fid, "roi"),
                          lambda m: self._roi.__setitem__(fid, (m.xmin + m.xmax) / 2),
                          RELIABLE_QOS),
                self._sub(pm.Expression, hri_topic("faces", fid, "expression"),
                          lambda m: self._of["expression"].__setitem__(fid, m.expression),
                          RELIABLE_QOS)]

    def _follow_body(self, bid: str) -> list:
        return [self._sub(pm.Gesture, hri_topic("bodies", bid, "gesture"),
                          lambda m: self._on_gesture(m.gesture), RELIABLE_QOS)]

    def _set(self, field: str, pid: str, msg) -> None:
        with self._lock:
            self._of[field][pid] = msg.data.strip()
        if field == "face_id" and msg.data.strip():
            fid = msg.data.strip()          # the person's face: its place and expression
            if fid not in self._subs["face"]:
                self._subs["face"][fid] = self._follow_face(fid)

    def _on_engagement(self, pid: str, level: int) -> None:
        before, self._engagement[pid] = self._engagement.get(pid), level
        if level == ENGAGING and before != ENGAGING and self.on_engaging is not None:
            self.on_engaging(self._name(pid) or "someone")

    def _on_gesture(self, gesture: int) -> None:
        if gesture in GESTURES and self.on_gesture is not None:
            kind, words = GESTURES[gesture]
            self.on_gesture(kind, f"someone {words}")

    def _on_speech(self, voice_id: str, msg) -> None:
        text = " ".join(msg.final.split())
        if not text or self._ours(voice_id):         # incremental results are not turns
            return
        self.on_speech(text, self.speaker(voice_id), float(msg.confidence), msg.locale)

    def _ours(self, voice_id: str) -> bool:
        """Whether this voice's speech comes only from vision_dialogue speech nodes.

        That is, from nodes that also publish a ``dialogue/utterance`` topic, in any namespace:
        our own speech node's turns already came on ours, and another setup's (a second robot
        beside this one: REP-155 topics are global) are not for this robot.
        """
        node = self.node

        def publishers(topic: str) -> set:
            return {(i.node_namespace, i.node_name)
                    for i in node.get_publishers_info_by_topic(topic)}
        speech = publishers(hri_topic("voices", voice_id, "speech"))
        ours = set().union(*(publishers(t) for t, _ in node.get_topic_names_and_types()
                             if t.endswith("/dialogue/utterance")))
        skip = bool(speech) and speech <= ours
        if skip and voice_id not in self._skipped:
            self._skipped.add(voice_id)
            node.get_logger().info(f"ROS4HRI voice {voice_id!r} is a vision_dialogue speech "
                                   "node's: its turns come on dialogue/utterance")
        return skip


class HriBargeIn:
    """The speech node's ear on ROS4HRI voices, for barge-in.

    A voice that starts speaking (``is_speaking`` true, or an incremental ``speech`` result)
    calls on_voice(voice id); the speech node stops the robot if it is talking.
    """

    def __init__(self, node, on_voice: Callable[[str], None]):
        self.node, self.on_voice = node, on_voice
        self._subs: dict[str, list] = {}
        self.group = MutuallyExclusiveCallbackGroup()
        quiet = SubscriptionEventCallbacks(use_default_callbacks=False)
        for qos in (LATCHED_QOS, RELIABLE_QOS):     # a latched list can come at once
            node.create_subscription(pm.IdsList, pm.VOICES_TRACKED_TOPIC, self._on_voices, qos,
                                     callback_group=self.group, event_callbacks=quiet)

    def _on_voices(self, msg) -> None:
        pm.follow_ids(self._subs, msg.ids, self._follow, lambda subs: _unsubscribe(self.node,
                                                                                   subs))

    def _follow(self, vid: str) -> list:
        return [self.node.create_subscription(
                    Bool, hri_topic("voices", vid, "is_speaking"),
                    lambda m: m.data and self.on_voice(vid),
                    RELIABLE_QOS, callback_group=self.group, **no_event_handlers("subscription")),
                self.node.create_subscription(
                    pm.LiveSpeech, hri_topic("voices", vid, "speech"),
                    lambda m: m.incremental.strip() and self.on_voice(vid), RELIABLE_QOS,
                    callback_group=self.group, **no_event_handlers("subscription"))]


def _unsubscribe(node, subs) -> None:
    for sub in subs:
        node.destroy_subscription(sub)
