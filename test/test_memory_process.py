"""What the robot remembers of a person, as a robot runs it, on the embedded default model.

Every node a process of its own (default names); the manager on the embedded default
(llama.cpp in its process, temperature 0: greedy, the same words every run). Session 1: our
camera shows a photo of Barack and our detector finds his face; he says his name, yes to the
consent question, and three facts about himself; the manager's side question keeps them (the
model's JSON); he walks away (the camera shows an empty room) and his session is summed up
(by the model); every process is stopped. Session 2, from new processes, another photo of
him: the robot greets him by name, and its replies to "What do I love doing?" and "What did
we talk about last time?" hold his facts' words. (What the prompt holds, on the fake server:
test_fleet_process.py and test_standard_interfaces.py.)
"""
from __future__ import annotations

import json
import os

import pytest

from PIL import Image

from people_rig import Observer, Session, face_source, introduce, rows_of
from ros_processes import transcript_records
from vision_dialogue.ros import perception_msgs as pm

pytestmark = [pytest.mark.skipif(bool(pm.missing()), reason=f"{pm.missing()} not installed"),
              pytest.mark.timeout(600)]
pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed "
                    "(pip install -r requirements/llamacpp.txt)")

FACTS = ("I love sailing on the lake.", "I work in building B.",
         "My daughter plays the violin.")
#: the manager's parameters: a reply waits as long as the suite's load makes it (not a
#: latency test), two short sentences at most
MANAGER = ("reply_deadline:=180.0", "max_reply_tokens:=48")


@pytest.fixture(scope="module")
def embedded_model() -> str:
    """The embedded default's GGUF, joined before any manager loads it."""
    from vision_dialogue.llm.default_model import ModelSetupError, ensure_default_gguf
    try:
        return ensure_default_gguf()
    except ModelSetupError as e:
        pytest.skip(f"the embedded model is not installed: {e}")


def reply_to(tmp_path, line: str, before: set) -> str | None:
    """The robot's reply to `line` in this run's transcript (None while there is none)."""
    records = transcript_records(tmp_path, before)
    turns = {r["turn_id"] for r in records if r.get("type") == "user" and r["text"] == line}
    return next((r["text"] for r in records
                 if r.get("type") == "reply" and r.get("turn_id") in turns), None)


def kept(url: str, person_id: str) -> dict[str, list[str]]:
    """His facts and session summaries, read from the store's tables."""
    rows = rows_of(url, person_id)
    return {"facts": [r["text"] for r in rows["facts"]],
            "sessions": [r["summary"] for r in rows["sessions"]]}


def test_a_person_is_remembered_by_new_processes_on_the_embedded_model(embedded_model,
                                                                       tmp_path):
    store = tmp_path / "people.db"
    url = f"sqlite:///{store}"
    watch = Observer()
    try:
        known = first_session(watch, tmp_path, store, url)
        watch.tracked, watch.names = [], {}
        first_run = {f.parent.name for f in (tmp_path / "tr").glob("*/transcript.jsonl")}
        session = Session(None, tmp_path, face_source("detector", tmp_path, "two",
                                                      ("obama", 3)), store, {},
                          "greet_first:=true", *MANAGER)
        try:
            assert watch.wait(lambda: watch.names.get(known) == "Barack", 180), session.logs()
            greeting = session.speech.expect("Barack", 180)
            assert greeting and greeting.startswith("robot:"), session.logs()
            replies = {}
            for question in ("What do I love doing?", "What did we talk about last time?"):
                session.speech.say(question)
                assert watch.wait(lambda: reply_to(tmp_path, question, first_run), 240), \
                    session.logs()
                replies[question] = reply_to(tmp_path, question, first_run).lower()
        finally:
            session.close()
    finally:
        watch.close()
    assert "sail" in replies["What do I love doing?"], replies
    assert any(w in replies["What did we talk about last time?"]
               for w in ("sail", "building b", "violin")), (replies, kept(url, known))


def first_session(watch: Observer, tmp_path, store, url: str) -> str:
    """Barack says yes, his name and three facts, then walks away; his id once all is kept."""
    session = Session(None, tmp_path, face_source("detector", tmp_path, "one",
                                                  ("obama", 1)), store,
                      {"remember you": "Yes, please."}, *MANAGER)
    try:
        # seen first: a line said before any face is in view is nobody's (no name, no ask)
        assert watch.wait(lambda: len(watch.tracked) == 1, 180), session.logs()
        known = introduce(watch, session)
        for line in FACTS:
            session.speech.say(line)
            assert watch.wait(lambda: reply_to(tmp_path, line, set()), 240), session.logs()
        assert watch.wait(lambda: len(kept(url, known)["facts"]) >= 3, 240), \
            (kept(url, known), session.logs())
        walk_away(tmp_path / "one")
        assert watch.wait(lambda: kept(url, known)["sessions"], 240), \
            (kept(url, known), session.logs())
    finally:
        session.close()
    assert b"Barack" in store.read_bytes()
    print(json.dumps(kept(url, known)))           # (in the test's output, to read)
    return known


def walk_away(folder) -> None:
    """The camera's next frame is an empty room (its folder source reads the file anew)."""
    shown = folder / "frame.jpg"
    Image.new("RGB", Image.open(shown).size, (90, 90, 90)).save(folder / "empty.part", "JPEG")
    os.replace(folder / "empty.part", shown)
