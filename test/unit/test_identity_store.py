"""The people store: what it keeps, that forgetting leaves nothing in the file, bad files."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from vision_dialogue.application.identity.records import Consent, ConsentWay, Embedding, Modality
from vision_dialogue.application.identity.store import PeopleStore, StoreError

MODEL = ("dlib_face_recognition_resnet_model_v1", "test")


def face(seed: int) -> Embedding:
    return Embedding(Modality.FACE, *MODEL, np.random.default_rng(seed).normal(size=128))


def voice(seed: int) -> Embedding:
    return Embedding(Modality.VOICE, "resemblyzer_ge2e", "test",
                     np.random.default_rng(seed).normal(size=256))


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path}/people/people.db"


def test_enrolled_people_keep_names_prints_and_consent_in_an_owner_only_file(url, tmp_path):
    store = PeopleStore(url)
    pid = store.enrol("Ada", [face(1), voice(2)], Consent(ConsentWay.ASKED, answer="yes"))
    assert pid.startswith("person_")
    path = tmp_path / "people" / "people.db"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store.close()
    again = PeopleStore(url)                    # another process's view: a new engine
    [ada] = again.people()
    assert (ada.person_id, ada.name, ada.faces, ada.voices) == (pid, "Ada", 1, 1)
    assert ada.consent.way is ConsentWay.ASKED and ada.consent.answer == "yes"
    assert "remember you" in ada.consent.question
    [(who, vector)] = again.prints(Modality.FACE, *MODEL)
    assert who == pid and np.allclose(vector, face(1).vector)
    assert again.prints(Modality.FACE, MODEL[0], "another version") == []
    exported = again.export()["people"][0]
    assert exported["name"] == "Ada" and len(exported["embeddings"]) == 2


def test_forgetting_leaves_nothing_of_the_person_in_the_file_itself(url, tmp_path):
    store = PeopleStore(url)
    ada = store.enrol("Adalinda", [face(1), face(3)], Consent(ConsentWay.OPERATOR))
    bob = store.enrol("Bobbington", [face(2)], Consent(ConsentWay.OPERATOR))
    path = tmp_path / "people" / "people.db"
    raw = path.read_bytes()
    assert b"Adalinda" in raw and face(1).vector.tobytes()[:16] in raw
    assert store.forget(person_id=ada) == [ada]
    raw = path.read_bytes()
    for trace in (b"Adalinda", ada.encode(), face(1).vector.tobytes()[:16],
                  face(3).vector.tobytes()[:16]):
        assert trace not in raw
    assert b"Bobbington" in raw
    assert store.forget(name="bobbington") == [bob]
    assert b"Bobbington" not in path.read_bytes() and store.people() == []
    assert store.forget(person_id="person_nobody") == [] and store.forget() == []


def test_a_write_acknowledged_before_the_process_is_killed_is_kept(url):
    code = (f"import os, sys; sys.path.insert(0, {str(REPO)!r})\n"
            "from vision_dialogue.application.identity.store import PeopleStore\n"
            "from vision_dialogue.application.identity.records import Consent, ConsentWay\n"
            f"pid = PeopleStore({url!r}).enrol('Kim', [], Consent(ConsentWay.OPERATOR))\n"
            "print(pid, flush=True); os.kill(os.getpid(), 9)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == -9, res.stderr
    assert [p.person_id for p in PeopleStore(url).people()] == [res.stdout.strip()]


def test_a_corrupt_file_is_a_clear_error_and_is_left_as_it_was(tmp_path):
    path = tmp_path / "people.db"
    junk = b"not a database at all, but someone's file\n" * 100
    path.write_bytes(junk)
    with pytest.raises(StoreError, match="not a database.*left as it was"):
        PeopleStore(f"sqlite:///{path}")
    assert path.read_bytes() == junk


def test_a_database_that_is_not_a_people_store_is_refused(tmp_path):
    import sqlite3
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a people store"):
        PeopleStore(f"sqlite:///{path}")
    assert path.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_clear_error(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="identity is off"):
            PeopleStore(f"sqlite:///{folder}/people.db")
    finally:
        folder.chmod(0o700)


def test_a_read_only_file_is_a_clear_error_on_write(tmp_path):
    """As root too: an immutable-like case, a store opened read-only by SQLite's URI."""
    path = tmp_path / "people.db"
    PeopleStore(f"sqlite:///{path}").close()
    store = PeopleStore(f"sqlite:///file:{path}?mode=ro&uri=true")
    with pytest.raises(StoreError, match="readonly"):
        store.enrol("Kim", [face(1)], Consent(ConsentWay.OPERATOR))
    assert store.people() == []
