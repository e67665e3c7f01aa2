"""people_node in one process: real photos through dlib, the Ask and Say skills faked.

Session 1 sees a face, hears a name, asks for consent and enrols; a new node on the same store
(session 2) knows another photo of the same person by id and name, and a second person is a
stranger. "No" and "forget me" leave nothing in the store file.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from conftest import REPO, matched, spin_until
from vision_dialogue.ros import perception_msgs as pm

pytestmark = [pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed"),
              pytest.mark.timeout(300)]
PHOTOS = REPO / "test" / "data" / "people"
dlib = pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")


#: every photo the module's tests show: their faces are cut before any node of the module starts
CROPPED = [("obama", 1), ("obama", 3), ("biden", 1), ("biden", 2), ("kit_harington", 1),
           ("kit_harington", 2), ("alex_lacamoire", 1)]


def face_crop(person: str, shot: int) -> np.ndarray:
    """The face of a photo with a margin, BGR, as a detector's `cropped` topic carries it."""
    return _crops()[(person, shot)]


@functools.cache
def _crops() -> dict[tuple[str, int], np.ndarray]:
    """The faces of CROPPED, cut once, read-only.

    Cut before any node of the module starts: a fresh-clone run hung for minutes in dlib's
    detector, cutting a face here while the in-process people_node ran the same detector object
    (`_faces()`, shared to load the models once) on its worker; a dlib detector is not
    thread-safe.
    """
    faces, crops = _faces(), {}
    for person, shot in CROPPED:
        rgb = np.asarray(PILImage.open(PHOTOS / person / f"{shot}.jpg").convert("RGB"))
        x, y, w, h = faces.faces_in(rgb)[0]
        m = w // 4
        crop = np.ascontiguousarray(rgb[max(0, y - m):y + h + m, max(0, x - m):x + w + m, ::-1])
        crop.setflags(write=False)
        crops[(person, shot)] = crop
    return crops


@functools.cache
def _faces():
    """One face printer for the module's nodes (its models load once), one node at a time."""
    from vision_dialogue.application.identity.embedders import FaceEmbedder
    return FaceEmbedder()


@pytest.fixture(scope="module", autouse=True)
def _faces_cut_first():
    """The photos' faces cut before the first test makes a node (see `_crops`)."""
    _crops()


class Robot:
    """The rest of the robot: a face detector's topics, lines heard, the Ask and Say skills."""

    def __init__(self, ctx, answers: dict, skills: bool = True, namespace: str | None = None):
        import rclpy
        from sensor_msgs.msg import Image
        from std_msgs.msg import String

        from vision_dialogue.ros.qos import LATCHED_QOS
        from vision_dialogue_interfaces.msg import AudioChunk, Utterance
        self.node = n = rclpy.create_node("robot_rest", context=ctx, namespace=namespace)
        self.answers, self.asked, self.said, self.names = answers, [], [], {}
        self.tracked: list[str] = []
        self.faces = n.create_publisher(pm.IdsList, "/humans/faces/tracked", LATCHED_QOS)
        self.crops: dict[str, object] = {}
        self.lines = n.create_publisher(Utterance, "dialogue/utterance", 10)
        self.audio = n.create_publisher(AudioChunk, "audio/input", 50)
        self._Image, self._String, self._Utterance = Image, String, Utterance
        n.create_subscription(pm.IdsList, "/humans/persons/tracked",
                              lambda m: setattr(self, "tracked", list(m.ids)), LATCHED_QOS)
        self._name_subs = {}
        if skills:
            self.start_skills()

    def start_skills(self) -> None:
        """The manager's Ask and Say servers (a manager that starts after people_node: later)."""
        from rclpy.action import ActionServer

        from vision_dialogue_interfaces.action import Ask, Say
        ActionServer(self.node, Ask, "skill/ask", self._ask)
        ActionServer(self.node, Say, "skill/say", self._say)

    def _ask(self, handle):
        from vision_dialogue_interfaces.action import Ask
        key = next(iter(json.loads(handle.request.answers_schema)))
        self.asked.append((handle.request.question, handle.request.person_id))
        handle.succeed()
        answer = self.answers.get(key)
        return Ask.Result(success=answer is not None, status="answered",
                          answers=json.dumps({} if answer is None else {key: answer}))

    def _say(self, handle):
        from vision_dialogue_interfaces.action import Say
        self.said.append(handle.request.input)
        handle.succeed()
        return Say.Result(success=True, status="spoken")

    def show(self, fid: str, bgr: np.ndarray) -> None:
        from vision_dialogue.ros.image_msgs import to_image_msg
        if fid not in self.crops:
            self.crops[fid] = self.node.create_publisher(
                self._Image, f"/humans/faces/{fid}/cropped", 10)
        self.faces.publish(pm.IdsList(ids=sorted(self.crops)))
        self.crops[fid].publish(to_image_msg(bgr))

    def hide_all(self) -> None:
        for pub in self.crops.values():
            self.node.destroy_publisher(pub)
        self.crops = {}
        self.faces.publish(pm.IdsList(ids=[]))

    def say(self, text: str, speaker: str = "") -> None:
        self.lines.publish(self._Utterance(text=text, source="test", speaker=speaker))

    def name_of(self, pid: str) -> str | None:
        from vision_dialogue.ros.qos import LATCHED_QOS
        if pid not in self._name_subs:
            self._name_subs[pid] = self.node.create_subscription(
                self._String, f"/humans/persons/{pid}/name",
                lambda m: self.names.__setitem__(pid, m.data), LATCHED_QOS)
        return self.names.get(pid)


def people_node(ctx, store: Path, namespace: str | None = None, **params):
    from rclpy.parameter import Parameter

    from vision_dialogue.people_node import PeopleNode
    values = {"store_url": f"sqlite:///{store}", "voices": False, "ask_after_lines": 2,
              "face_interval": 0.05} | params
    return PeopleNode(context=ctx, face_embedder=_faces(), namespace=namespace,
                      voice_embedder=_voices() if values["voices"] else None,
                      parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items()])


def until(ex, predicate, robot=None, show=None, timeout=60.0) -> bool:
    """Spin until predicate(); while waiting, show the face again (a camera's next frames)."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if show is not None:
            robot.show(*show)
        if spin_until(ex, predicate, timeout=0.5):
            return True
    return False


def end(ex, robot, node) -> None:
    """The session's end: every node of it stopped (a new process would start fresh)."""
    ex.shutdown(timeout_sec=10)
    node.destroy_node()
    robot.node.destroy_node()


@pytest.fixture
def rig(ros_context, request):
    """Each test's nodes in a namespace of its own (the skill servers' names too).

    A client that had used its Ask server was told it was gone, 20 s later, while the graph
    still listed the same-named servers of earlier tests' shut-down contexts (a suite run).
    """
    from rclpy.executors import MultiThreadedExecutor
    made, sessions = [], [0]
    own = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]

    def make(store, answers, skills=True, namespace=None, **params):
        for session in made:
            end(*session)
        made.clear()
        sessions[0] += 1
        namespace = namespace or f"{own}_{sessions[0]}"
        robot = Robot(ros_context, answers, skills, namespace)
        node = people_node(ros_context, store, namespace, **params)
        ex = robot.ex = MultiThreadedExecutor(context=ros_context)
        for n in (robot.node, node):
            ex.add_node(n)
        made.append((ex, robot, node))
        if skills:      # the event a question needs: the people node has found both servers
            talk = node.talk
            assert spin_until(ex, lambda: talk.ask.server_is_ready()
                              and talk.say_client.server_is_ready(), 60), talk.servers_seen()
        return ex, robot, node
    yield make
    for session in made:
        end(*session)


def test_a_yes_is_remembered_across_sessions_and_a_stranger_is_not(rig, tmp_path):
    store = tmp_path / "people.db"
    ex, robot, node = rig(store, {"remember": True})
    obama1 = face_crop("obama", 1)
    assert until(ex, lambda: len(robot.tracked) == 1, robot, ("facea", obama1))
    [anonymous] = robot.tracked
    assert anonymous.startswith("anonymous_person_")
    assert spin_until(ex, lambda: robot.node.count_subscribers("dialogue/utterance") > 0, 10)
    robot.say("Hello robot.")
    robot.say("My name is Barack.")
    assert until(ex, lambda: robot.said, timeout=60), robot.asked
    assert robot.asked == [("May I remember you, so I can greet you next time?", "")]
    assert robot.said == ["Thank you! I will remember you next time."]
    assert until(ex, lambda: robot.tracked and robot.tracked[0].startswith("person_"))
    [known] = robot.tracked
    assert until(ex, lambda: robot.name_of(known) == "Barack")
    people = [p for p in node.store.people()]
    assert [(p.person_id, p.name, p.faces) for p in people] == [(known, "Barack", 1)]
    assert people[0].consent.way.value == "asked"

    ex2, robot2, node2 = rig(store, {})                         # session 2: a new node
    obama3, biden1 = face_crop("obama", 3), face_crop("biden", 1)
    assert until(ex2, lambda: robot2.tracked == [known], robot2, ("faceq", obama3))
    assert until(ex2, lambda: robot2.name_of(known) == "Barack")
    assert until(ex2, lambda: len(robot2.tracked) == 2, robot2, ("facer", biden1))
    stranger = next(p for p in robot2.tracked if p != known)
    assert stranger.startswith("anonymous_person_")
    assert until(ex2, lambda: robot2.name_of(stranger) == "")


def test_a_question_waits_for_a_manager_that_comes_later(rig, tmp_path, monkeypatch):
    """The name is heard before the Ask server is up: the question waits for it, not a line.

    (The wait is long here: on a loaded machine the name is seen seconds after it was heard.)
    """
    from vision_dialogue.ros import people_talk
    monkeypatch.setattr(people_talk, "SERVER_WAIT_S", 600.0)
    # a namespace of its own: the skill servers of an earlier test in this domain may still be
    # in the graph for a moment, and the question would go to them
    ex, robot, node = rig(tmp_path / "people.db", {"remember": True}, skills=False,
                          namespace="late_manager")
    assert until(ex, lambda: len(robot.tracked) == 1, robot, ("facea", face_crop("obama", 1)))
    [anonymous] = robot.tracked
    assert spin_until(ex, lambda: robot.node.count_subscribers("dialogue/utterance") > 0, 10)
    robot.say("My name is Barack.")
    assert until(ex, lambda: robot.name_of(anonymous) == "Barack")     # heard, not yet asked
    robot.start_skills()
    assert until(ex, lambda: robot.said, timeout=60), robot.asked
    assert robot.asked == [("May I remember you, so I can greet you next time?", "")]
    assert robot.said == ["Thank you! I will remember you next time."]
    assert [p.name for p in node.store.people()] == ["Barack"]


def test_a_name_said_before_the_face_was_printed_is_asked_about_once_it_is(rig, tmp_path):
    """The name comes before the one face in view is printed: asked when the print comes.

    (A loaded machine prints late; the question no longer waits for a later line.)
    """
    ex, robot, node = rig(tmp_path / "people.db", {"remember": True})
    robot.faces.publish(pm.IdsList(ids=["facea"]))                # in view, no crop yet
    assert until(ex, lambda: "facea" in node.face_crops.tracked)
    assert spin_until(ex, lambda: robot.node.count_subscribers("dialogue/utterance") > 0, 10)
    robot.say("Hi robot, I am Barack.", speaker="Barack")
    assert until(ex, lambda: "Barack" in node.persons._name_of_label)   # heard, nobody's yet
    assert robot.asked == []
    assert until(ex, lambda: robot.said, robot, ("facea", face_crop("obama", 1)), timeout=60)
    assert robot.asked == [("May I remember you, so I can greet you next time?", "")]
    assert [p.name for p in node.store.people()] == ["Barack"]


def test_a_face_one_frame_showed_is_printed_from_its_latched_crop(rig, tmp_path):
    """A crop sent before the people node subscribed (it reads the face's id first) is printed.

    The demo's 5-second frames showed its person's face once, and nobody was reported.
    """
    from vision_dialogue.ros.qos import LATCHED_QOS
    ex, robot, node = rig(tmp_path / "people.db", {})
    crop = robot.node.create_publisher(robot._Image, "/humans/faces/facea/cropped", LATCHED_QOS)
    from vision_dialogue.ros.image_msgs import to_image_msg
    crop.publish(to_image_msg(face_crop("obama", 1)))           # once, nobody listening yet
    robot.faces.publish(pm.IdsList(ids=["facea"]))
    assert until(ex, lambda: len(robot.tracked) == 1), node.counts
    assert node._track_prints.get("facea") == 1               # through both of its subscriptions


def test_a_crop_that_comes_through_both_subscriptions_is_taken_once():
    """A latched list's face: its crop latched and plain; a plain list's face: plain only."""
    from types import SimpleNamespace

    from vision_dialogue.ros.face_crops import FaceCrops
    from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS
    made, got = [], []
    node = SimpleNamespace(create_subscription=lambda kind, topic, cb, qos, **kw: made.append(
        (topic, cb, qos.durability)) or topic, destroy_subscription=lambda sub: None)
    crops = FaceCrops(node, lambda fid, msg: got.append((fid, msg.header.stamp.sec)),
                      lambda fid: None)
    crops._on_faces(pm.IdsList(ids=["faceb"]), RELIABLE_QOS)        # a third party's list
    crops._on_faces(pm.IdsList(ids=["faceb"]), RELIABLE_QOS)
    assert [d for topic, _, d in made if "faceb" in topic] == [RELIABLE_QOS.durability]
    crops._on_faces(pm.IdsList(ids=["facea"]), RELIABLE_QOS)        # ours: both lists
    crops._on_faces(pm.IdsList(ids=["facea"]), LATCHED_QOS)
    assert sorted(d for topic, _, d in made if "facea" in topic) == sorted(
        (RELIABLE_QOS.durability, LATCHED_QOS.durability))
    both = [cb for topic, cb, _ in made if topic == "/humans/faces/facea/cropped"]

    def crop(sec):
        from sensor_msgs.msg import Image
        msg = Image()
        msg.header.stamp.sec = sec
        return msg
    for cb in both:
        cb(crop(5))
    both[1](crop(6))
    both[0](crop(6))
    both[0](crop(0))
    both[1](crop(0))                 # unstamped (a third party's): each one is taken
    assert got == [("facea", 5), ("facea", 6), ("facea", 0), ("facea", 0)]


def test_the_persons_of_one_frame_are_reported_together(rig, tmp_path, monkeypatch):
    """Two faces come into view; the first is printed: no persons go out until the second is.

    A listener greets whoever is reported first: a stranger printed before a known person
    was greeted alone (a suite run).
    """
    from vision_dialogue import people_node as module
    monkeypatch.setattr(module, "FIRST_PRINT_WAIT_S", 600.0)      # the event, not the bound
    ex, robot, node = rig(tmp_path / "people.db", {})
    robot.crops["faceb"] = robot.node.create_publisher(robot._Image, "/humans/faces/faceb/cropped",
                                                       10)
    sent = []
    publish = node.out.publish
    node.out.publish = lambda persons, known: (sent.append([p.person_id for p in persons]),
                                               publish(persons, known))
    assert until(ex, lambda: node._track_prints.get("facea"), robot,
                 ("facea", face_crop("obama", 1)))
    node.publish()
    assert not any(sent), sent                   # faceb in view, not printed yet
    assert until(ex, lambda: len(robot.tracked) == 2, robot, ("faceb", face_crop("biden", 1)))
    assert [len(ids) for ids in sent if ids][0] == 2, sent


def test_no_and_forget_me_leave_nothing_in_the_store_file(rig, tmp_path):
    store = tmp_path / "people.db"
    ex, robot, node = rig(store, {"remember": False})
    assert until(ex, lambda: len(robot.tracked) == 1, robot, ("facea", face_crop("kit_harington",
                                                                                 1)))
    assert spin_until(ex, lambda: robot.node.count_subscribers("dialogue/utterance") > 0, 10)
    robot.say("I'm Kit.")
    assert until(ex, lambda: robot.said)
    assert robot.said == ["All right, I will not keep anything about you."]
    assert node.store.people() == [] and b"Kit" not in store.read_bytes()
    robot.say("Hello again, my name is Kit.")                   # not asked again,
    robot.hide_all()                                            # nor when seen again
    assert until(ex, lambda: robot.tracked == [])
    assert until(ex, lambda: len(robot.tracked) == 1, robot, ("facec", face_crop(
        "kit_harington", 2)))
    robot.say("Nice to see you.")
    robot.say("Me again.")
    assert not until(ex, lambda: len(robot.asked) > 1, timeout=3)

    robot.answers.update(remember=True, forget=True)
    robot.hide_all()
    assert until(ex, lambda: robot.tracked == [])
    ada = face_crop("alex_lacamoire", 1)
    assert until(ex, lambda: len(robot.tracked) == 1, robot, ("faceb", ada))
    robot.say("My name is Alex.")
    assert until(ex, lambda: len(robot.said) == 2)
    [alex] = node.store.people()
    assert b"Alex" in store.read_bytes()
    # the manager is told whom to clear from its transcripts (people/forgotten)
    from vision_dialogue_interfaces.msg import Forgotten
    told = []
    robot.node.create_subscription(Forgotten, "people/forgotten", told.append, 10)
    assert spin_until(ex, lambda: matched(node.forgotten_pub, robot.node), 10)
    robot.say("Please forget me.")
    assert until(ex, lambda: len(robot.said) == 3)
    assert robot.asked[-1][0].startswith("Shall I forget you?")
    assert robot.said[-1] == "Done. I have forgotten you."
    assert node.store.people() == []
    raw = store.read_bytes()
    assert b"Alex" not in raw and alex.person_id.encode() not in raw
    assert until(ex, lambda: told)
    assert (list(told[0].person_ids), list(told[0].names)) == ([alex.person_id], ["Alex"])


def diagnostics_of(ex, node_obj, robot) -> list:
    """The people node's /diagnostics statuses, once one came."""
    from diagnostic_msgs.msg import DiagnosticArray
    got = []
    robot.node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: got.extend(
        s for s in m.status if s.name.startswith("people_node")), 10)
    assert spin_until(ex, lambda: got, 10)
    return got


def call(ex, robot, srv_type, name, request):
    client = robot.node.create_client(srv_type, name)
    assert spin_until(ex, client.service_is_ready, 10)
    future = client.call_async(request)
    assert spin_until(ex, future.done, 10)
    return future.result()


@pytest.mark.parametrize("store_kind", ["corrupt", "unwritable"])
def test_a_bad_store_turns_identity_off_loudly_and_the_node_keeps_running(
        rig, tmp_path, store_kind):
    from vision_dialogue_interfaces.srv import Enrol, ListPeople
    if store_kind == "corrupt":
        store = tmp_path / "people.db"
        store.write_bytes(b"junk" * 1000)
    else:                                           # /proc takes no new folder, even as root
        store = Path("/proc/vision_dialogue_test/people.db")
    ex, robot, node = rig(store, {"remember": True})
    [status] = diagnostics_of(ex, node, robot)[:1]
    assert status.level == b"\x01" and "store off" in status.message, status.message
    assert until(ex, lambda: len(robot.tracked) == 1, robot, ("facea", face_crop("obama", 1)))
    [pid] = robot.tracked                               # still sees people, as strangers
    reply = call(ex, robot, Enrol, "people/enrol", Enrol.Request(person_id=pid, name="X"))
    assert not reply.ok and "no people store" in reply.message
    assert json.loads(call(ex, robot, ListPeople, "people/list",
                           ListPeople.Request()).people_json) == []
    if store_kind == "corrupt":
        assert store.read_bytes() == b"junk" * 1000


def test_faces_that_cannot_be_printed_and_requests_for_nobody_are_refused(rig, tmp_path):
    from vision_dialogue_interfaces.srv import Enrol, Forget
    ex, robot, node = rig(tmp_path / "people.db", {})
    tiny = np.ascontiguousarray(face_crop("obama", 1)[::12, ::12])          # about 12 px
    turned = np.ascontiguousarray(np.rot90(face_crop("obama", 1)))          # no frontal face
    for fid, crop in (("tiny", tiny), ("turned", turned)):
        before = node.counts["refused"]
        assert until(ex, lambda: node.counts["refused"] >= before + 2, robot, (fid, crop),
                     timeout=30)
        robot.hide_all()
    assert robot.tracked == [] and node.counts["face prints"] == 0
    assert spin_until(ex, lambda: node.persons.people == {}, 5)
    reply = call(ex, robot, Enrol, "people/enrol", Enrol.Request(person_id="person_nobody"))
    assert not reply.ok and "no person 'person_nobody'" in reply.message
    reply = call(ex, robot, Forget, "people/forget", Forget.Request())
    assert not reply.ok and "person_id or a name" in reply.message
    reply = call(ex, robot, Forget, "people/forget", Forget.Request(name="Nobody"))
    assert not reply.ok and list(reply.removed) == []


def test_missing_models_turn_their_part_off_on_diagnostics(ros_context, tmp_path, monkeypatch):
    import sys

    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from vision_dialogue.people_node import PeopleNode
    monkeypatch.setitem(sys.modules, "dlib", None)          # import dlib fails
    monkeypatch.setitem(sys.modules, "resemblyzer", None)
    node = PeopleNode(context=ros_context, parameter_overrides=[
        Parameter("store_url", value=f"sqlite:///{tmp_path}/people.db")])
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    try:
        assert node.active and node.faces is None and node.voices is None
        assert "dlib-bin" in node.problems["faces"] and "resemblyzer" in node.problems["voices"]
        [health] = node._health()
        assert health.level == 1 and "faces off" in health.message
    finally:
        ex.shutdown(timeout_sec=10)
        node.destroy_node()


@functools.cache
def _voices():
    from vision_dialogue.application.identity.embedders import VoiceEmbedder
    return VoiceEmbedder()


def speak(robot, clip: str, text: str, at_s: float, late_s: float = 0.0) -> object:
    """A recorded clip on audio/input (as the local voice publishes it), then its line.

    `late_s`: the line is published that long after the voice ended (a busy recogniser) and
    says when the voice began and ended, as the local voice does. Returns the line's stamp.
    """
    import soundfile

    from vision_dialogue.ros.image_msgs import stamp_from_ns
    from vision_dialogue_interfaces.msg import AudioChunk
    assert spin_until(robot.ex, lambda: robot.lines.get_subscription_count()
                      and robot.audio.get_subscription_count(), 10)
    who, n = clip.split("/")
    samples, rate = soundfile.read(REPO / "test" / "data" / "voices" / who / f"{n}.flac",
                                   dtype="int16")
    start_ns = int(at_s * 1e9)
    for i in range(0, len(samples), rate // 2):                # half-second chunks
        chunk = samples[i:i + rate // 2]
        msg = AudioChunk(sample_rate=rate, channels=1, encoding="S16LE",
                         data=chunk.tobytes())
        msg.header.stamp = stamp_from_ns(start_ns + int(i * 1e9 / rate))
        robot.audio.publish(msg)
    line = robot._Utterance(text=text, source="test")
    end_ns = start_ns + int(len(samples) * 1e9 / rate)
    line.header.stamp = stamp_from_ns(end_ns + int(late_s * 1e9))
    if late_s:
        line.speech_start, line.speech_end = stamp_from_ns(start_ns), stamp_from_ns(end_ns)
    robot.lines.publish(line)
    return line.header.stamp


def test_a_voice_alone_is_known_again_and_a_face_then_its_voice_are_one_person(
        rig, tmp_path):
    """Seven words a line: its clip is 3.75 s before its end, the whole 3 s recording."""
    store = tmp_path / "people.db"
    ex, robot, node = rig(store, {"remember": True}, voices=True)
    speak(robot, "diane/2", "It is a lovely day today, isn't it?", 100.0)
    speak(robot, "diane/3", "I would like to see the manager, please.", 110.0)
    assert until(ex, lambda: robot.said), node.counts          # asked, said yes
    [diane] = node.store.people()
    assert (diane.faces, diane.voices) == (0, 1)                 # heard, never seen
    assert until(ex, lambda: robot.tracked == [diane.person_id])

    ex, robot, node = rig(store, {}, voices=True)                # session 2: a new node
    from vision_dialogue_interfaces.msg import LineSpeaker
    speakers = []                                       # whose each line was, for the manager
    robot.node.create_subscription(LineSpeaker, "people/speakers", speakers.append, 10)
    assert spin_until(ex, lambda: matched(node.speakers_pub, robot.node), 10)
    # recognised 3 s late: the clip is the span the voice was heard in, not the 3.6 s the
    # words would take before the line (which held 0.6 s of her voice)
    said_at = speak(robot, "diane/1", "Good morning, I am here again today.", 50.0, late_s=3.0)
    assert until(ex, lambda: robot.tracked == [diane.person_id]), robot.tracked
    assert until(ex, lambda: speakers)
    assert (speakers[0].text, speakers[0].person_id, speakers[0].by_voice) == (
        "Good morning, I am here again today.", diane.person_id, True)
    assert speakers[0].header.stamp == said_at          # the line's own: the manager pairs by it
    # a stranger seen, then heard while alone in view: one person with a face and a voice
    assert until(ex, lambda: len(robot.tracked) == 2, robot, ("faces", face_crop("biden", 2)))
    speak(robot, "sheila/1", "Hello, who are you and what is this place?", 60.0)
    assert until(ex, lambda: any(p.heard and p.face_ids for p in node.persons.tracked()))
    both = next(p for p in node.persons.tracked() if p.face_ids)
    assert both.anonymous and both.voice.count == 1 and both.voice_id == "anonymous_speaker"
    assert until(ex, lambda: len(speakers) == 2)        # no enrolled voice: the one in view
    assert (speakers[1].person_id, speakers[1].by_voice) == (both.person_id, False)


def test_people_not_seen_for_the_retention_days_are_forgotten_at_start(rig, tmp_path):
    """memory_retention_days: who was last seen 40 days ago is gone; who came 5 days ago stays."""
    import time

    from vision_dialogue.application.identity.memory import PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.store import PeopleStore
    store = tmp_path / "people.db"
    people = PeopleStore(f"sqlite:///{store}")
    now = time.time()
    for name, days_ago in (("Old", 40), ("Recent", 5)):
        pid = people.enrol(name, [], Consent(ConsentWay.ASKED, answer="Yes.",
                                             when=now - 50 * 86400))
        PersonMemory(people, clock=lambda d=days_ago: now - d * 86400).seen(pid)
    people.close()
    _, _, node = rig(store, {}, memory_retention_days=30.0)
    assert [p.name for p in node.store.people()] == ["Recent"]
    assert b"Old" not in store.read_bytes()
