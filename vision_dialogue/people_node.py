"""people_node: who the robot is talking to, across sessions, only with their consent.

Reads faces (REP-155 ``/humans/faces/tracked`` and each face's ``cropped`` image, from our
detector or any ROS4HRI face detector) and voices (``dialogue/utterance`` with the
microphone's ``audio/input``), prints them (application/identity/embedders.py, on a worker off the
reply path), matches them to the people it knows (application/identity/persons.py) and publishes
REP-155 persons: ``/humans/persons/tracked``, ``/known`` and per person ``face_id``, ``voice_id``,
``name``, ``alias``, ``anonymous``, plus ``/humans/candidate_matches``. With
``person_manager: external`` (a robot whose ROS4HRI person manager owns the persons) only the
candidate matches are published. ``people/state`` (std_msgs/String, JSON, latched) says who
is in view, how sure each match is and their consent, for the monitor.

Nobody is remembered without their yes: with ``enrol: ask`` the robot asks once (the
manager's Ask skill) "May I remember you, so I can greet you next time?"; "forget me" is
confirmed aloud and leaves nothing in the store. Services ``people/enrol``,
``people/forget``, ``people/list``.

    people_node --ros-args -p enrol:=ask -p store_url:=sqlite:///~/people.db
"""
from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from std_msgs.msg import String

from vision_dialogue.common.health import OK, WARN, Health
from vision_dialogue.application.identity.embedders import FaceEmbedder, IdentityInputError, \
    InOwnProcess, ModelMissing, VoiceEmbedder
from vision_dialogue.application.identity.memory import PersonMemory
from vision_dialogue.application.identity.persons import IdentityError, NextStep, Persons
from vision_dialogue.application.identity.records import CONSENT_QUESTION, EnrolPolicy
from vision_dialogue.application.identity.store import DEFAULT_STORE_URL, PeopleStore, \
    StoreError, sqlite_path
from vision_dialogue.application.identity.voice_clips import MAX_CLIP_S, AudioRing, seconds_for
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros.face_crops import FaceCrops
from vision_dialogue.ros.hri_output import ANONYMOUS_VOICE, voice_id
from vision_dialogue.ros.hri_persons import HriPersonsOutput
from vision_dialogue.ros.image_msgs import DEFAULT_MAX_PIXELS, ImageConversionError, \
    from_image_msg, stamp_to_ns
from vision_dialogue.ros.managed import MANAGED_PARAM, ManagedNode
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.params import Param, declare_params
from vision_dialogue.ros.people_services import PeopleServices
from vision_dialogue.ros.people_talk import PeopleTalk
from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS
from vision_dialogue.ros.topics import AUDIO_INPUT_TOPIC, PEOPLE_FORGOTTEN_TOPIC, \
    PEOPLE_SPEAKERS_TOPIC, PEOPLE_STATE_TOPIC, UTTERANCE_TOPIC
from vision_dialogue_interfaces.msg import AudioChunk, Forgotten, LineSpeaker, Utterance

#: a face in view not yet printed holds the persons' report this long at most (its crop may
#: never come): the persons of one frame go out together, so a listener that greets whoever
#: comes greets a known person and a stranger who arrive together as both, not as the
#: stranger whose print happened to be read first
FIRST_PRINT_WAIT_S = 5.0
#: how long a line waits for the microphone's audio up to its end (the chunks may come later)
AUDIO_WAIT_S = 1.0
#: prints of one face track, at most: the pool is steady by then, and the CPU is the reply's
MAX_TRACK_PRINTS = 5
#: the worker thread's niceness: prints yield the cores to the LLM's reply
WORKER_NICENESS = 10
#: seconds between two tries to reach a people store's database server that did not answer
STORE_RETRY_S = 5.0
#: seconds between two looks for people not seen for memory_retention_days
RETENTION_CHECK_S = 3600.0

PARAMS = [
    Param("person_manager", "own", "own: publish REP-155 persons; external: a robot's own "
          "ROS4HRI person manager owns them, publish only /humans/candidate_matches.",
          choices=("own", "external")),
    Param("enrol", EnrolPolicy.ASK.value, "ask: remember a person only after they say yes to "
          "the robot's question; never; always: everyone seen or heard (only for studies "
          "where consent was signed on paper).", choices=tuple(p.value for p in EnrolPolicy)),
    Param("store_url", DEFAULT_STORE_URL, "Where the people it knows are kept (an SQLAlchemy "
          "URL; '~' allowed in an SQLite path; postgresql://... for robots sharing one store, "
          "its password in PGPASSWORD or ~/.pgpass)."),
    Param("memory_retention_days", 0.0, "Forget everyone not seen for this many days (their "
          "identity and what the robot remembers of them), at start and then hourly; 0: "
          "keep until forgotten.", range=(0.0, 36500.0)),
    Param("ask_after_lines", 3, "Lines a stranger says before the consent question (at once "
          "when they say their name).", range=(1, 1000)),
    Param("faces", True, "Print faces (REP-155 /humans/faces/<id>/cropped)."),
    Param("voices", True, "Print voices (dialogue/utterance with audio/input)."),
    Param("face_interval", 1.0, "Seconds between two prints of one face track.",
          range=(0.05, 60.0)),
    Param("max_image_pixels", DEFAULT_MAX_PIXELS, "Largest face crop (width x height) decoded.",
          range=(64, 10 ** 9)),
    MANAGED_PARAM,
]


class PeopleNode(ManagedNode):
    """Faces and voices in, REP-155 persons out; enrolment and forgetting with consent."""

    def __init__(self, face_embedder=None, voice_embedder=None, **kwargs):
        super().__init__(kwargs.pop("node_name", "people_node"), **kwargs)
        self.params = p = declare_params(self, PARAMS)
        self._given = (face_embedder, voice_embedder)
        self.faces = self.voices = self.store = self.persons = None
        self.problems: dict[str, str] = {}
        self.counts = {"face prints": 0, "voice prints": 0, "refused": 0}
        self._lock = threading.RLock()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="vd-people",
                                          initializer=_yield_cpu)
        self._track_prints: dict[str, int] = {}
        self._busy: set[str] = set()
        self._last_print: dict[str, float] = {}
        self.audio = AudioRing()
        self.out = HriPersonsOutput(self, p["person_manager"] == "own")
        self.state_pub = self.create_publisher(String, PEOPLE_STATE_TOPIC, LATCHED_QOS)
        self.forgotten_pub = self.create_publisher(Forgotten, PEOPLE_FORGOTTEN_TOPIC,
                                                   RELIABLE_QOS)
        self.speakers_pub = self.create_publisher(LineSpeaker, PEOPLE_SPEAKERS_TOPIC,
                                                  RELIABLE_QOS)
        self._shown = ""
        self.talk = PeopleTalk(self)
        self.face_crops = FaceCrops(self, self._on_crop, self._face_gone)
        self._utterances = None         # subscribed once the models are loaded (configure)
        self._store_retry = None        # a timer while a database server is away
        self._retention = None          # the hourly timer of memory_retention_days
        self.create_subscription(AudioChunk, AUDIO_INPUT_TOPIC, self._on_audio,
                                 RELIABLE_QOS)
        self.people_services = PeopleServices(self, self._lock)
        self.create_timer(1.0, self.publish)
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(p["managed"])

    # --- lifecycle ------------------------------------------------------------------------
    def configure(self) -> None:
        """Open the store and load the models; what fails turns that part off, loudly."""
        p, log = self.params, self.get_logger()
        self.store = self._open_store()
        self.persons = Persons(self.store, EnrolPolicy(p["enrol"]), p["ask_after_lines"])
        if p["memory_retention_days"] > 0:
            self._expire()
            if self._retention is None:
                self._retention = self.create_timer(RETENTION_CHECK_S, self._expire)
        for part, wanted, given, make in (("faces", p["faces"], self._given[0], FaceEmbedder),
                                          ("voices", p["voices"], self._given[1],
                                           VoiceEmbedder)):
            try:
                setattr(self, part, given or (InOwnProcess(make) if wanted else None))
            except ModelMissing as e:
                self.problems[part] = str(e)
                log.warning(f"{part} off: {e}")
        known = len(self.store.people()) if self.store else 0
        log.info(f"people: {known} known, enrol {p['enrol']}, store {p['store_url']}, "
                 f"faces {'on' if self.faces else 'off'}, voices "
                 f"{'on' if self.voices else 'off'}, persons {p['person_manager']}")
        # the person's lines from now on: a speech node that waits for this subscription
        # (wait_for_listeners) says its first line once the models are in
        if self._utterances is None:
            self._utterances = self.create_subscription(Utterance, UTTERANCE_TOPIC,
                                                        self._on_utterance, RELIABLE_QOS)

    def _open_store(self) -> PeopleStore | None:
        """The store, or None: an error for a file, a WARN and a retry for a database server.

        A fleet's server may start after the robot, or be away for a while: people_node
        tries again every `STORE_RETRY_S` and takes the store when it answers.
        """
        url = self.params["store_url"]
        try:
            store = PeopleStore(url)
        except StoreError as e:
            self.problems["store"] = str(e)
            if sqlite_path(url) is not None:
                self.get_logger().error(str(e))
            else:
                self.get_logger().warning(f"{e}; trying again every {STORE_RETRY_S:g} s")
                if self._store_retry is None:
                    self._store_retry = self.create_timer(STORE_RETRY_S, self._retry_store)
            return None
        self.problems.pop("store", None)
        if self._store_retry is not None:
            self.destroy_timer(self._store_retry)
            self._store_retry = None
        return store

    def _expire(self) -> None:
        """Forget those not seen for `memory_retention_days` (docs/memory.md)."""
        days = self.params["memory_retention_days"]
        with self._lock:
            if self.store is None or self.persons is None:
                return
            try:
                gone = PersonMemory(self.store).expire(days)
            except StoreError as e:
                self.get_logger().warning(f"retention: nobody forgotten now: {e}")
                return
            if gone:
                self.persons.attach_store(self.store)        # the known ids without them
        if gone:
            self.get_logger().info(f"retention: forgot {len(gone)} not seen for {days:g} days")
            self.publish()

    def _retry_store(self) -> None:
        with self._lock:
            if self.store is not None or self.persons is None:
                return
            self.store = self._open_store()
            if self.store is not None:
                self.persons.attach_store(self.store)
                self.get_logger().info(f"people store {self.params['store_url']} is back: "
                                       f"{len(self.persons.known_ids)} known")
        self.publish()

    def cleanup(self) -> None:
        for timer in (self._store_retry, self._retention):
            if timer is not None:
                self.destroy_timer(timer)
        self._store_retry = self._retention = None
        if self.store is not None:
            self.store.close()
        self.store = self.persons = None
        for made in made_here((self.faces, self.voices), self._given):
            made.close()            # its print process
        self.faces = self.voices = None

    # --- faces ----------------------------------------------------------------------------
    def _face_gone(self, fid: str) -> None:
        with self._lock:
            self._last_print.pop(fid, None)
            self._track_prints.pop(fid, None)
            if self.persons is not None:
                self.persons.face_gone(fid)

    def _on_crop(self, fid: str, msg) -> None:
        """A face crop: printed on the worker, at most every `face_interval` s per face."""
        now = self.get_clock().now().nanoseconds / 1e9
        if (not self.active or self.faces is None or fid in self._busy
                or self._track_prints.get(fid, 0) >= MAX_TRACK_PRINTS
                or now - self._last_print.get(fid, -1e9) < self.params["face_interval"]):
            return
        try:
            rgb = from_image_msg(msg, self.params["max_image_pixels"])[..., ::-1]
        except ImageConversionError as e:
            self._refused(f"face {fid}: {e}")
            return
        self._busy.add(fid)
        self._last_print[fid] = now
        self._submit(self._print_face, fid, rgb)

    def _print_face(self, fid: str, rgb) -> None:
        faces = self.faces          # None once cleaned up (a lifecycle cleanup meanwhile)
        try:
            if faces is None:
                return
            embedding = faces.embed(rgb)
        except IdentityInputError as e:
            self._refused(f"face {fid}: {e}")
            return
        finally:
            self._busy.discard(fid)
        with self._lock:
            if self.persons is None or fid not in self.face_crops.tracked:
                return
            person = self.persons.face_print(fid, embedding)
            self.counts["face prints"] += 1
            self._track_prints[fid] = self._track_prints.get(fid, 0) + 1
            # a name said while this face alone was in view, before its print, is theirs
            waiting = self.persons.name_waiting(fid)
            if waiting is not None:
                step = self.persons.heard_line(waiting[0], "", waiting[1])
        self.out.match(fid, pm.IdsMatch.FACE, person.person_id,
                       person.confidence if person.known else 1.0)
        if person.known:
            self._visit(person.person_id)
        if waiting is not None:
            self._next_step(step, waiting[0])
        else:
            self.publish()

    def _visit(self, person_id: str) -> None:
        """A known person is seen: their visits (first, last, how many; docs/memory.md)."""
        store = self.store
        if store is None:
            return
        try:
            PersonMemory(store).seen(person_id, "face seen")
        except StoreError as e:
            self.get_logger().warning(f"visit of {person_id} not kept: {e}",
                                      throttle_duration_sec=30.0)

    # --- voices and words -----------------------------------------------------------------
    def _on_audio(self, msg) -> None:
        if msg.encoding == "S16LE" and msg.channels == 1:
            self.audio.add(stamp_to_ns(msg.header.stamp),
                           np.frombuffer(bytes(msg.data), np.int16), msg.sample_rate)

    def _on_utterance(self, msg) -> None:
        if self.active and msg.text.strip():
            start_ns, end_ns = stamp_to_ns(msg.speech_start), stamp_to_ns(msg.speech_end)
            if not (0 < start_ns < end_ns):     # the backend did not say: the line's length
                end_ns = stamp_to_ns(msg.header.stamp)
                start_ns = end_ns - int(seconds_for(msg.text) * 1e9)
            self._submit(self._heard, msg.text.strip(), voice_id(msg.speaker), start_ns, end_ns,
                         msg.header.stamp)

    def _heard(self, text: str, vid: str, start_ns: int, end_ns: int, stamp) -> None:
        """On the worker: whose line (a voice print, the label's person, the one in view).

        The manager is told (people/speakers), for the facts of the line.
        """
        embedding = self._voice_print(start_ns, end_ns)
        label = "" if vid == ANONYMOUS_VOICE else vid
        match = None
        with self._lock:
            if self.persons is None:
                return
            faces = list(self.face_crops.tracked)
            if embedding is not None:
                person, match = self.persons.voice_print(vid, embedding, faces)
                self.counts["voice prints"] += 1
                self.out.match(vid, pm.IdsMatch.VOICE, person.person_id,
                               match.confidence if match else 1.0)
            else:
                person = self.persons.speaker(faces, label)
            self._said_by(stamp, text, person, match)
            if person is None:
                self.persons.unplaced_line(text, label, faces)
                return
            step = self.persons.heard_line(person, text, label)
        self._next_step(step, person)

    def _said_by(self, stamp, text: str, person, match) -> None:
        """people/speakers: the line's person, and whether its voice print named them."""
        confidence = match.confidence if match else (1.0 if person else 0.0)
        msg = LineSpeaker(text=text, person_id=person.person_id if person else "",
                          confidence=float(confidence), by_voice=match is not None)
        msg.header.stamp = stamp
        self.speakers_pub.publish(msg)

    def _next_step(self, step: NextStep, person) -> None:
        """After a line of `person`'s: publish, then ask for consent or to confirm forgetting."""
        self.publish()
        if step is NextStep.ASK_CONSENT:
            self.talk.ask_consent(person.person_id)
        elif step is NextStep.CONFIRM_FORGET:
            self.talk.confirm_forget(person.person_id, known=person.known)

    def _voice_print(self, start_ns: int, end_ns: int):
        """The print of the voice from start to end (the speech node says when it spoke)."""
        voices = self.voices        # None once cleaned up
        if voices is None or not self.count_publishers(AUDIO_INPUT_TOPIC):
            return None
        if not self.audio.wait_for(end_ns, AUDIO_WAIT_S) and not self.audio.sample_rate:
            return None
        clip = self.audio.clip(end_ns, min(MAX_CLIP_S, (end_ns - start_ns) / 1e9))
        try:
            return voices.embed(clip, self.audio.sample_rate) if len(clip) else None
        except IdentityInputError as e:
            self._refused(f"voice: {e}")
            return None

    def _submit(self, job, *args) -> None:
        """On the worker; an error there is logged (a pool would keep it silently)."""
        def run():
            try:
                job(*args)
            except Exception as e:  # noqa: BLE001 - one bad input must not stop the worker
                if self.context.ok():   # at shutdown a publisher may be gone: not an error
                    self.get_logger().error(f"{job.__name__}: {type(e).__name__}: {e}")
        try:
            self._worker.submit(run)
        except RuntimeError:        # shutting down
            pass

    def _refused(self, why: str) -> None:
        self.counts["refused"] += 1
        self.get_logger().info(f"not printed: {why}", throttle_duration_sec=5.0)

    # --- consent answers (PeopleTalk calls these) -----------------------------------------
    def consent_not_asked(self, person_id: str) -> None:
        with self._lock:
            if self.persons is not None:
                self.persons.not_asked(person_id)

    def consent_answer(self, person_id: str, yes: bool, answer: str) -> str:
        """The person's answer to the consent question: their id from now on ("" if gone)."""
        try:
            with self._lock:
                person = self.persons.consent_answer(person_id, yes, answer)
        except (IdentityError, StoreError, AttributeError) as e:
            self.get_logger().error(f"consent answer for {person_id}: {e}; nothing kept")
            return ""
        done = f"enrolled as {person.person_id}" if yes else "declined; nothing kept"
        self.get_logger().info(f"{person_id}: {done}")
        self.publish()
        return person.person_id

    def forget_person(self, person_id: str = "", name: str = "") -> list[str]:
        """Forget them here; the manager is told (people/forgotten) to clear its transcripts."""
        with self._lock:
            if self.persons is None:
                return []
            names = self.persons.names_of(person_id, name)
            removed = self.persons.forget(person_id, name)
        self.get_logger().info(f"forgotten: {removed or 'nobody'}")
        self.publish()
        if removed:
            msg = Forgotten(person_ids=removed, names=names)
            msg.header.stamp = self.get_clock().now().to_msg()
            self.forgotten_pub.publish(msg)
        return removed

    # --- out ------------------------------------------------------------------------------
    def _first_prints_pending(self) -> bool:
        """Whether a face in view has no print yet (for FIRST_PRINT_WAIT_S at most)."""
        if not self.active or self.faces is None:
            return False
        now = time.monotonic()
        return any(fid not in self._track_prints and now - since < FIRST_PRINT_WAIT_S
                   for fid, _, since in tuple(self.face_crops.tracked.values()))

    def publish(self) -> None:
        """The persons in view, once every face in view was printed (FIRST_PRINT_WAIT_S)."""
        with self._lock:
            if self.persons is None or self._first_prints_pending():
                return
            tracked = self.persons.tracked()
            self.out.publish(tracked, sorted(self.persons.known_ids))
            shown = json.dumps({"people": [p.shown() for p in tracked]})
            if shown != self._shown:            # latched: a monitor started later sees it
                self._shown = shown
                self.state_pub.publish(String(data=shown))

    def _health(self) -> list[Health]:
        values = dict(self.counts)
        inactive = self.lifecycle_health("people", values)
        if inactive:
            return inactive
        if self.problems:
            off = "; ".join(f"{part} off: {why}" for part, why in self.problems.items())
            return [Health("people", WARN, off, values)]
        values["tracked"] = len(self.persons.tracked()) if self.persons else 0
        return [Health("people", OK, f"{values['tracked']} tracked; question "
                       f"{CONSENT_QUESTION!r}", values)]

    def destroy_node(self):
        for made in made_here((self.faces, self.voices), self._given):
            made.stop()             # a print in progress ends now: the worker is free at once
        self._worker.shutdown(wait=True, cancel_futures=True)
        self.cleanup()
        return super().destroy_node()


def made_here(printers: tuple, given: tuple) -> list:
    """The face and voice printers a node made (InOwnProcess), not those it was given."""
    return [made for made, handed in zip(printers, given)
            if made is not None and made is not handed]


def _yield_cpu() -> None:
    """The worker thread (Linux: a thread has its own niceness) gives way to the reply."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)
    except (AttributeError, OSError):
        pass


def main(args=None):
    return run_node(lambda: PeopleNode(), "people_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
