"""People it knows, as a robot runs it: every node a process of its own, default names.

A folder camera shows a real photo; our detector finds the face and publishes its crop (or a
third-party face detector process, test/hri_peer.py, publishes faces and crops); the people
node prints it; the person types "My name is Barack." and "Yes, please." to the
consent question the manager's Ask skill puts. Every process is stopped; a second session
from new processes, with another photo of the same person beside a stranger's, names him on
/humans/persons/<id>/name with the same person id and the manager's prompt says his name; the
stranger gets another id and no name. "Forget me" then leaves nothing in the store file.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PIL import Image

from conftest import REPO, side_domain, spin_until
from ros_processes import Proc, manager_process, process_env, speech_process
from vision_dialogue.ros import perception_msgs as pm

pytestmark = [pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed"),
              pytest.mark.timeout(600)]
pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")
PEOPLE_DOMAIN = side_domain(7)
PHOTOS = REPO / "test" / "data" / "people"
PEER = REPO / "test" / "hri_peer.py"


def env() -> dict:
    return process_env(PEOPLE_DOMAIN)


def photo(folder: Path, *people: tuple[str, int]) -> Path:
    """One picture of these photos side by side (each 320 px high), in a folder of its own."""
    shots = [Image.open(PHOTOS / who / f"{n}.jpg").convert("RGB") for who, n in people]
    shots = [s.resize((round(s.width * 320 / s.height), 320)) for s in shots]
    canvas = Image.new("RGB", (sum(s.width for s in shots), 320), (90, 90, 90))
    x = 0
    for s in shots:
        canvas.paste(s, (x, 0))
        x += s.width
    folder.mkdir(parents=True)
    canvas.save(folder / "frame.jpg", quality=92)
    return folder


def node_process(module: str, tmp_path: Path, *params: str) -> Proc:
    args = [sys.executable, "-m", f"vision_dialogue.{module}", "--ros-args"]
    for p in params:
        args += ["-p", p]
    return Proc(args, tmp_path, env=env())


def face_source(faces: str, tmp_path: Path, name: str, *people: tuple[str, int]) -> list:
    """Our camera and detector on the photos side by side, or a third party's faces process."""
    if faces == "detector":
        folder = photo(tmp_path / name, *people)
        return [node_process("camera_node", tmp_path, "source:=folder",
                             f"folder_path:={folder}", "frame_period:=1.0", "loop:=true"),
                node_process("detector_node", tmp_path, "text:=false", "max_rate:=2.0")]
    stock = {k: v for k, v in env().items() if k != "FASTDDS_DEFAULT_PROFILES_FILE"}
    peer = Proc([sys.executable, str(PEER), "faces", "--rate", "2"]
                + [f"--photo={PHOTOS / who / f'{n}.jpg'}" for who, n in people], tmp_path,
                env=stock)
    assert peer.expect('"ready"', 60), peer.err[-20:]
    return [peer]


class Session:
    """Faces (face_source), people, manager and speech nodes, each a process."""

    def __init__(self, fake, tmp_path: Path, faces: list, store: Path, answers: dict,
                 *manager_params: str):
        self.procs = faces + [
            node_process("people_node", tmp_path, f"store_url:=sqlite:///{store}",
                         "ask_after_lines:=2", "voices:=false", "face_interval:=0.5"),
            manager_process(fake, tmp_path, *manager_params, env=env())]
        # the person's first lines reach people_node too, which subscribes once its models
        # are loaded (a suite run lost "My name is Barack." to it: said before it listened)
        self.speech = speech_process(tmp_path, env=env(),
                                     listeners=("manager_node", "people_node"))
        self.procs.append(self.speech)

        def answer(line: str) -> None:
            for cue, reply in answers.items():
                if line.startswith("robot:") and cue in line:
                    self.speech.say(reply)
        self.speech.on_line = answer

    def logs(self) -> str:
        return "\n".join([line for p in self.procs for line in p.err[-15:]]
                         + self.speech.seen[-20:])

    def close(self) -> None:
        for p in self.procs:
            p.close()


class Observer:
    """The test's own node in the people's domain: persons tracked and their names."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String

        from vision_dialogue.ros.qos import LATCHED_QOS
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=PEOPLE_DOMAIN)
        self.node = rclpy.create_node("people_observer", context=self.ctx)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.tracked: list[str] = []
        self.names: dict[str, str] = {}
        self._String, self._latched, self._subs = String, LATCHED_QOS, {}
        self.node.create_subscription(pm.IdsList, "/humans/persons/tracked", self._on_tracked,
                                      LATCHED_QOS)
        from rclpy.action import ActionClient

        from vision_dialogue.ros.topics import ASK_ACTION
        from vision_dialogue_interfaces.action import Ask
        self.ask = ActionClient(self.node, Ask, ASK_ACTION)    # the manager's, once it is up

    def _on_tracked(self, msg) -> None:
        self.tracked = list(msg.ids)
        for pid in self.tracked:
            if pid not in self._subs:
                self._subs[pid] = self.node.create_subscription(
                    self._String, f"/humans/persons/{pid}/name",
                    lambda m, pid=pid: self.names.__setitem__(pid, m.data), self._latched)

    def wait(self, predicate, timeout: float) -> bool:
        return spin_until(self.ex, predicate, timeout=timeout, step=0.1)

    def close(self) -> None:
        self.ex.shutdown(timeout_sec=10)
        self.node.destroy_node()
        self.ctx.try_shutdown()


@pytest.mark.parametrize("faces", ["detector", "third_party"])
def test_a_person_who_said_yes_is_known_by_new_processes_and_forget_me_leaves_nothing(
        fake_openai, tmp_path, faces):
    fake_openai.responder = lambda req: "Nice to meet you."
    store = tmp_path / "people.db"
    watch = Observer()
    session = Session(fake_openai, tmp_path, face_source(faces, tmp_path, "one", ("obama", 1)),
                      store,
                      {"remember you": "Yes, please."})
    try:
        assert watch.wait(lambda: len(watch.tracked) == 1, 180), session.logs()
        [stranger] = watch.tracked
        assert stranger.startswith("anonymous_person_")
        # the manager's Ask skill is up (a third party's faces come before it is)
        assert watch.wait(watch.ask.server_is_ready, 60), session.logs()
        session.speech.say("Hello there.")
        session.speech.say("My name is Barack.")
        assert watch.wait(lambda: watch.tracked and watch.tracked[0].startswith("person_")
                          and watch.names.get(watch.tracked[0]) == "Barack", 120), \
            session.logs()
        [known] = watch.tracked
        assert session.speech.expect("I will remember you next time", 60), session.logs()
    finally:
        session.close()
    assert b"Barack" in store.read_bytes()

    watch.tracked, watch.names = [], {}
    first_run = {f.parent.name for f in (tmp_path / "tr").glob("*/transcript.jsonl")}
    fake_openai.responder = lambda req: "Hello again."
    session = Session(fake_openai, tmp_path, face_source(faces, tmp_path, "two", ("obama", 3),
                                                         ("biden", 2)), store,
                      {}, "greet_first:=true")
    try:
        assert watch.wait(lambda: len(watch.tracked) == 2 and known in watch.tracked, 180), \
            (watch.tracked, session.logs())
        other = next(p for p in watch.tracked if p != known)
        assert other.startswith("anonymous_person_")
        assert watch.wait(lambda: watch.names.get(known) == "Barack"
                          and watch.names.get(other) == "", 30), watch.names
        # the manager knows him: its timeline has his arrival by name (its own transcript)
        assert watch.wait(lambda: "Barack came into view" in json.dumps(
            session_records(tmp_path, first_run)), 60), session.logs()
        # the opening remark waits for the people node's report, which names him (not the
        # first frame with someone in it)
        assert watch.wait(lambda: asked(fake_openai, "Now say hello to Barack by name"), 60), \
            session.logs()
        session.speech.say("Do you know who I am?")
        assert watch.wait(lambda: asked(fake_openai, "Do you know who I am?"), 60), \
            session.logs()
        assert "Barack" in json.dumps(asked(fake_openai, "Do you know who I am?")[-1])
        # two people in view: whose line "forget me" is cannot be told, so the operator's
        # service (the spoken way is test_people_node.py's)
        removed = call_forget(watch, known)
        assert removed == [known]
        raw = store.read_bytes()
        assert b"Barack" not in raw and known.encode() not in raw
    finally:
        session.close()
        watch.close()


def session_records(tmp_path: Path, before: set) -> list[dict]:
    """The transcript records of the manager runs not in `before` (this session's)."""
    return [json.loads(line) for f in (tmp_path / "tr").glob("*/transcript.jsonl")
            if f.parent.name not in before for line in f.read_text().splitlines()]


def asked(fake, line: str) -> list:
    """The LLM requests whose messages hold the person's line (the reply's, not a summary)."""
    return [r["messages"] for r in fake.requests if line in json.dumps(r["messages"])]


def call_forget(watch: Observer, person_id: str) -> list[str]:
    from vision_dialogue_interfaces.srv import Forget
    client = watch.node.create_client(Forget, "people/forget")
    assert watch.wait(client.service_is_ready, 60)
    future = client.call_async(Forget.Request(person_id=person_id))
    assert watch.wait(future.done, 30)
    assert future.result().ok, future.result().message
    return list(future.result().removed)
