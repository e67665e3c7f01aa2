"""The people store and its memory on a real PostgreSQL server, as a fleet of robots shares it.

One private cluster for the module (test/postgres_server.py; Debian's PostgreSQL, which
scripts/test.sh installs where it can, else these tests skip saying so). Checked: two robots'
processes opening a new store at once make one layout (the migration's lock); what one robot
learns the other recalls; two processes writing at once lose nothing; a server that goes
away is a clear StoreError, and the store works again once it is back; forget leaves no row
of the person in any table.
"""
from __future__ import annotations

import multiprocessing
import shutil

import pytest

from postgres_server import PrivateCluster, postgres_bin

pytest.importorskip("psycopg", reason="psycopg is not installed (requirements/identity.txt)")
BIN = postgres_bin()
pytestmark = [
    pytest.mark.skipif(BIN is None, reason="PostgreSQL's server programs are not installed "
                       "(apt-get install postgresql; scripts/test.sh does it as root)"),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="runuser is not installed"),
    pytest.mark.timeout(300),
]

FACTS_PER_ROBOT = 40


@pytest.fixture(scope="module")
def server():
    cluster = PrivateCluster(BIN)
    cluster.start()
    yield cluster
    cluster.close()


def _robot(url: str, robot: str, person_id: str, start, results) -> None:
    """One robot's process: open the store (maybe making its layout), write its facts."""
    from vision_dialogue.application.identity.memory import Fact, PersonMemory
    from vision_dialogue.application.identity.store import PeopleStore
    start.wait(30)
    store = PeopleStore(url)
    memory = PersonMemory(store)
    written = 0
    for i in range(FACTS_PER_ROBOT):
        if person_id and memory.remember(person_id, Fact(f"other: {robot} {i}", f"{robot} {i}"),
                                         f"fact from line {i}"):
            written += 1
    store.close()
    results.put((robot, written))


def _run_robots(url: str, person_id: str) -> dict:
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_robot, args=(url, name, person_id, start, results))
             for name in ("reception", "guide")]
    for p in procs:
        p.start()
    start.set()
    done = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return done


def test_two_robots_make_one_layout_share_what_they_learn_and_lose_no_write(server):
    from vision_dialogue.application.identity.memory import PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.schema import SCHEMA_VERSION
    from vision_dialogue.application.identity.store import PeopleStore
    assert _run_robots(server.url, "") == {"reception": 0, "guide": 0}   # both open it new
    store = PeopleStore(server.url)
    with store.reading() as db:
        assert db.exec_driver_sql("SELECT value FROM meta").scalars().all() == [
            str(SCHEMA_VERSION)]
    anna = store.enrol("Anna", [], Consent(ConsentWay.ASKED, answer="Yes, you may."))
    assert _run_robots(server.url, anna) == {"reception": FACTS_PER_ROBOT,
                                             "guide": FACTS_PER_ROBOT}
    recall = PersonMemory(store).recall(anna, "recall for a reply")
    assert recall.name == "Anna" and len(recall.facts) == 2 * FACTS_PER_ROBOT
    assert {f.text for f in recall.facts} >= {"reception 0", "guide 39"}
    store.close()


def test_a_server_away_is_a_clear_error_and_the_store_works_when_it_is_back(server):
    from vision_dialogue.application.identity.memory import Fact, PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.store import PeopleStore, StoreError
    store = PeopleStore(server.url)
    memory = PersonMemory(store)
    ben = store.enrol("Ben", [], Consent(ConsentWay.ASKED, answer="Yes."))
    server.stop()
    try:
        with pytest.raises(StoreError, match="people store postgresql://"):
            memory.remember(ben, Fact("workplace", "works in building B"), "fact from line 2")
    finally:
        server.start()
    assert memory.remember(ben, Fact("workplace", "works in building B"), "fact from line 2")
    assert [f.text for f in memory.recall(ben, "recall").facts] == ["works in building B"]
    assert store.forget(person_id=ben) == [ben]
    with store.reading() as db:
        for table in ("people", "embeddings", "facts", "sessions", "visits", "audit"):
            rows = db.exec_driver_sql(f"SELECT * FROM {table}").all()
            assert not [r for r in rows if ben in map(str, r)], (table, rows)
    store.close()


def test_people_node_waits_for_a_server_away_at_start_up_and_takes_it_when_back(
        server, ros_context):
    """A server away at start-up is a WARN and a retry, not a crash; the store comes back."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from conftest import spin_until
    from vision_dialogue.common.health import WARN
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.store import PeopleStore
    from vision_dialogue.people_node import STORE_RETRY_S, PeopleNode
    store = PeopleStore(server.url)
    cleo = store.enrol("Cleo", [], Consent(ConsentWay.ASKED, answer="Yes."))
    store.close()
    server.stop()
    try:
        node = PeopleNode(context=ros_context, parameter_overrides=[
            Parameter("store_url", value=server.url), Parameter("faces", value=False),
            Parameter("voices", value=False)])
        assert node.store is None and "people store postgresql://" in node.problems["store"]
        assert node._health()[0].level == WARN                    # on /diagnostics
    finally:
        server.start()
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    try:
        assert spin_until(ex, lambda: node.store is not None, timeout=STORE_RETRY_S * 6)
        assert cleo in node.persons.known_ids and "store" not in node.problems
    finally:
        ex.shutdown(timeout_sec=10)
        node.destroy_node()
