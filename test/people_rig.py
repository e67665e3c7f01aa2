"""People's processes for the process tests: faces, people_node, manager and speech.

A test runs a `Session` (each node a process of its own, default names) in a ROS domain of
its own and watches it with an `Observer` in that domain (test_people_process.py: one robot;
test_fleet_process.py: two robots, two domains, one PostgreSQL store).
"""
from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

from conftest import REPO, close_context, side_domain, spin_until
from ros_processes import Proc, manager_process, process_env, speech_process
from vision_dialogue.ros import perception_msgs as pm

PEOPLE_DOMAIN = side_domain(7)
PHOTOS = REPO / "test" / "data" / "people"
PEER = REPO / "test" / "hri_peer.py"


def env(domain: int = PEOPLE_DOMAIN) -> dict:
    return process_env(domain)


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


def node_process(module: str, tmp_path: Path, *params: str,
                 domain: int = PEOPLE_DOMAIN) -> Proc:
    args = [sys.executable, "-m", f"vision_dialogue.{module}", "--ros-args"]
    for p in params:
        args += ["-p", p]
    return Proc(args, tmp_path, env=env(domain))


def face_source(faces: str, tmp_path: Path, name: str, *people: tuple[str, int],
                domain: int = PEOPLE_DOMAIN) -> list:
    """Our camera and detector on the photos side by side, or a third party's faces process."""
    if faces == "detector":
        folder = photo(tmp_path / name, *people)
        return [node_process("camera_node", tmp_path, "source:=folder",
                             f"folder_path:={folder}", "frame_period:=1.0", "loop:=true",
                             domain=domain),
                node_process("detector_node", tmp_path, "text:=false", "max_rate:=2.0",
                             domain=domain)]
    stock = {k: v for k, v in env(domain).items() if k != "FASTDDS_DEFAULT_PROFILES_FILE"}
    peer = Proc([sys.executable, str(PEER), "faces", "--rate", "2"]
                + [f"--photo={PHOTOS / who / f'{n}.jpg'}" for who, n in people], tmp_path,
                env=stock)
    assert peer.expect('"ready"', 60), peer.err[-20:]
    return [peer]


class Session:
    """Faces (face_source), people, manager and speech nodes, each a process."""

    def __init__(self, fake, tmp_path: Path, faces: list, store: Path | str, answers: dict,
                 *manager_params: str, domain: int = PEOPLE_DOMAIN):
        """`store`: an SQLite file, or a store URL (a PostgreSQL server).

        `fake`: the fake OpenAI server the manager talks to; None: the embedded default model.

        The manager is told the store as bringup tells it (`people_store_url`), with a
        memory queue of this robot's (its domain) in `tmp_path`.
        """
        url = store if isinstance(store, str) else f"sqlite:///{store}"
        robot = (f"people_store_url:={url}",
                 f"memory_queue_file:={tmp_path / f'memory_queue_{domain}.db'}")
        self.procs = faces + [
            node_process("people_node", tmp_path, f"store_url:={url}", "ask_after_lines:=2",
                         "voices:=false", "face_interval:=0.5", domain=domain),
            manager_process(fake, tmp_path, *robot, *manager_params, env=env(domain))]
        # the person's first lines reach people_node too, which subscribes once its models
        # are loaded (a suite run lost "My name is Barack." to it: said before it listened)
        self.speech = speech_process(tmp_path, env=env(domain),
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

    def __init__(self, domain: int = PEOPLE_DOMAIN):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String

        from vision_dialogue.ros.qos import LATCHED_QOS
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
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
        close_context(self.ctx)


def call_forget(watch: Observer, person_id: str) -> list[str]:
    from vision_dialogue_interfaces.srv import Forget
    client = watch.node.create_client(Forget, "people/forget")
    assert watch.wait(client.service_is_ready, 60)
    future = client.call_async(Forget.Request(person_id=person_id))
    assert watch.wait(future.done, 30)
    assert future.result().ok, future.result().message
    return list(future.result().removed)


def introduce(watch: Observer, session: Session, name: str = "Barack") -> str:
    """The person in view says their name and yes (the session's answers): their new id.

    Waits for the manager's Ask skill first (a third party's faces come before it is up).
    """
    assert watch.wait(watch.ask.server_is_ready, 60), session.logs()
    session.speech.say("Hello there.")
    session.speech.say(f"My name is {name}.")
    assert watch.wait(lambda: watch.tracked and watch.tracked[0].startswith("person_")
                      and watch.names.get(watch.tracked[0]) == name, 120), session.logs()
    [known] = watch.tracked
    assert session.speech.expect("I will remember you next time", 60), session.logs()
    return known


def rows_of(url: str, person_id: str) -> dict[str, list[dict]]:
    """Every row that names the person, per table, read from the database itself.

    (A read of the tables: the store's own recall would add an audit row.)
    """
    import sqlalchemy as sa

    from vision_dialogue.application.identity.schema import METADATA
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as db:
            return {t.name: [dict(r._mapping) for r in db.execute(
                sa.select(t).where(t.c.person_id == person_id))]
                for t in METADATA.sorted_tables if "person_id" in t.c}
    finally:
        engine.dispose()
