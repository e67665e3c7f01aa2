"""People it knows, as a robot runs it: every node a process of its own, default names.

A folder camera shows a real photo; our detector finds the face and publishes its crop (or a
third-party face detector process, test/hri_peer.py, publishes faces and crops); the people
node prints it; the person types "My name is Barack." and "Yes, please." to the
consent question the manager's Ask skill puts. Every process is stopped; a second session
from new processes, with another photo of the same person beside a stranger's, names him on
/humans/persons/<id>/name with the same person id and the manager's prompt says his name; the
stranger gets another id and no name. "Forget me" then leaves nothing in the store file, nor
in the manager's transcripts (this run's, still written, and the first run's).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from people_rig import Observer, Session, call_forget, face_source, introduce
from ros_processes import transcript_records
from vision_dialogue.ros import perception_msgs as pm

pytestmark = [pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed"),
              pytest.mark.timeout(600)]
pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")


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
        known = introduce(watch, session)
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
            transcript_records(tmp_path, first_run)), 60), session.logs()
        # the opening remark waits for the people node's report, which names him (not the
        # first frame with someone in it)
        assert watch.wait(lambda: asked(fake_openai, "Greet Barack by name"), 60), \
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
        # the manager clears him from its transcripts: this run's, still written, and the first
        assert watch.wait(lambda: not mentions(tmp_path, "Barack", known), 60), \
            mentions(tmp_path, "Barack", known)
        session.speech.say("Goodbye!")
        assert watch.wait(lambda: asked(fake_openai, "Goodbye!"), 60), session.logs()
    finally:
        session.close()
        watch.close()
    assert not mentions(tmp_path, "Barack", known)          # nor after the processes ended


def mentions(tmp_path: Path, *words: str) -> list[str]:
    """The transcript lines on this machine that hold any of `words`."""
    return [line for f in (tmp_path / "tr").glob("*/transcript.jsonl")
            for line in f.read_text().splitlines() if any(w in line for w in words)]


def asked(fake, line: str) -> list:
    """The LLM requests whose messages hold the person's line (the reply's, not a summary)."""
    return [r["messages"] for r in fake.requests if line in json.dumps(r["messages"])]
