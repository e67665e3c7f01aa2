"""Two robots share one people store on a PostgreSQL server: B knows whom A met, and his facts.

Robot A (its nodes processes in a ROS domain of their own, default names, a third party's
faces) meets Barack: he says yes, his name and that he loves sailing, and the fact is in the
server's database. The server is stopped mid-session: his next fact waits in robot A's queue
while the conversation goes on (`/diagnostics` WARN), and is in the database once the server
is back. Robot B (another domain, new processes) sees another photo of him, names him, and
its reply to "What do I love doing?" is told that he loves sailing. Forget then leaves no
row of his in any table. A private cluster (test/postgres_server.py) serves both; without
Debian's PostgreSQL the test skips, saying so.
"""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import side_domain
from people_rig import Observer, Session, call_forget, face_source, introduce, rows_of
from ros_processes import transcript_records
from postgres_server import PrivateCluster, postgres_bin
from vision_dialogue.ros import perception_msgs as pm

pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")
pytest.importorskip("psycopg", reason="psycopg is not installed (requirements/identity.txt)")
BIN = postgres_bin()
pytestmark = [
    pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed"),
    pytest.mark.skipif(BIN is None, reason="PostgreSQL's server programs are not installed "
                       "(apt-get install postgresql; scripts/test.sh does it as root)"),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="runuser is not installed"),
    pytest.mark.timeout(600),
]
ROBOT_A, ROBOT_B = side_domain(20), side_domain(22)
FACTS = {"sailing": ("hobby", "loves sailing"), "building B": ("workplace", "works in building B")}


def model(req) -> str:
    """The fake LLM: his facts when asked for them (the memory's side question), else a reply."""
    schema = json.dumps(req.get("response_format"))
    if '"facts"' in schema:
        line = req["messages"][-1]["content"]
        return json.dumps({"facts": [{"topic": t, "fact": f} for cue, (t, f) in FACTS.items()
                                     if cue in line]})
    if '"summary"' in schema:
        return json.dumps({"summary": "his sailing and his work"})
    return f"Nice to meet you ({len(req['messages'])})."


def facts_of(url: str, person_id: str) -> set[str]:
    return {r["text"] for r in rows_of(url, person_id)["facts"]}


def diagnostics_level(watch: Observer, name: str) -> list[int]:
    """The levels of /diagnostics statuses named `name`, as they come."""
    from diagnostic_msgs.msg import DiagnosticArray

    from vision_dialogue.ros.topics import DIAGNOSTICS_TOPIC
    levels: list[int] = []
    watch.node.create_subscription(
        DiagnosticArray, DIAGNOSTICS_TOPIC,
        lambda m: levels.extend(s.level[0] for s in m.status if s.name == name), 10)
    return levels


def test_a_person_met_by_one_robot_is_known_with_his_facts_by_another(fake_openai, tmp_path):
    fake_openai.responder = model
    server = PrivateCluster(BIN)
    server.start()
    url = server.url
    watch = Observer(ROBOT_A)
    robot_a = Session(fake_openai, tmp_path, face_source("third_party", tmp_path, "a",
                                                         ("obama", 1), domain=ROBOT_A),
                      url, {"remember you": "Yes, please."}, domain=ROBOT_A)
    try:
        memory_health = diagnostics_level(watch, "manager_node: people memory")
        assert watch.wait(lambda: len(watch.tracked) == 1, 180), robot_a.logs()
        barack = introduce(watch, robot_a)
        robot_a.speech.say("I love sailing.")
        assert watch.wait(lambda: facts_of(url, barack) == {"loves sailing"}, 60), \
            robot_a.logs()
        # the server goes away mid-session: the fact waits, the conversation goes on
        server.stop()
        replies = len([s for s in robot_a.speech.seen if s.startswith("robot:")])
        robot_a.speech.say("I work in building B.")
        manager = robot_a.procs[-2]
        assert manager.wait_err("wait for the people store", 60), "\n".join(manager.err)
        assert watch.wait(lambda: 1 in memory_health, 30), memory_health     # WARN
        assert watch.wait(lambda: len([s for s in robot_a.speech.seen
                                       if s.startswith("robot:")]) > replies, 60), \
            robot_a.logs()
        server.start()
        assert watch.wait(lambda: "works in building B" in facts_of(url, barack), 60), \
            robot_a.logs()
        assert watch.wait(lambda: memory_health[-1:] == [0], 30), memory_health  # OK again
        assert all(p.proc.poll() is None for p in robot_a.procs), robot_a.logs()
    finally:
        robot_a.close()
        watch.close()

    fake_openai.requests.clear()
    robot_a_runs = {f.parent.name for f in (tmp_path / "tr").glob("*/transcript.jsonl")}
    watch = Observer(ROBOT_B)
    robot_b = Session(fake_openai, tmp_path, face_source("third_party", tmp_path, "b",
                                                         ("obama", 3), domain=ROBOT_B),
                      url, {}, domain=ROBOT_B)
    try:
        assert watch.wait(lambda: watch.tracked == [barack]
                          and watch.names.get(barack) == "Barack", 180), robot_b.logs()
        # robot B's manager sees him (its own record, not this test's view of the graph: a
        # busy suite run asked before the manager had his report, and no note came)
        assert watch.wait(lambda: "Barack came into view" in json.dumps(
            transcript_records(tmp_path, robot_a_runs)), 60), robot_b.logs()
        robot_b.speech.say("What do I love doing?")
        question = "What do I love doing?"
        assert watch.wait(lambda: any(question in json.dumps(r["messages"])
                                      for r in fake_openai.requests), 60), robot_b.logs()
        asked = next(json.dumps(r["messages"]) for r in fake_openai.requests
                     if question in json.dumps(r["messages"]))
        assert "Barack told you: " in asked and "loves sailing" in asked, \
            (asked[-600:], "\n".join(robot_b.procs[-2].err))
        removed = call_forget(watch, barack)
        assert removed == [barack]
    finally:
        robot_b.close()
        watch.close()
    try:
        left = rows_of(url, barack)
        assert not any(left.values()), left
    finally:
        server.close()
