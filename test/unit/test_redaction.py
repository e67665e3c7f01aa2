"""Forget me in the transcripts: nothing that names them is left in the files themselves."""
from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from vision_dialogue.core.entries import FrameEntry, SeenEntry, UserEntry
from vision_dialogue.common.images import Frame
from vision_dialogue.common.redaction import FORGOTTEN, ForgottenPeople, RunLock, redact_record, \
    redact_transcripts
from vision_dialogue.core.transcript import TranscriptWriter

BARACK = ForgottenPeople(("person_abc123",), ("Barack",))


def a_session(writer: TranscriptWriter, name: str = "Barack", pid: str = "person_abc123"):
    """A run in which Barack comes, says things, and is answered by name; Ann too."""
    writer(FrameEntry(Frame(np.zeros((24, 32, 3), np.uint8), id=1)))
    writer(SeenEntry(f"{name} ({pid}) came into view", "arrived", 1.0))
    writer(UserEntry(1, "I love sailing.", name))
    writer(UserEntry(2, "Annual leave starts Monday.", "Ann"))
    writer.write({"type": "reply", "text": f"Sailing sounds lovely, {name.lower()}!",
                  "sentences": [f"Sailing sounds lovely, {name}!"]})


def test_their_lines_names_ids_and_frames_leave_every_run(tmp_path):
    old = TranscriptWriter(tmp_path, run_name="old")
    a_session(old)
    old.close()
    other = TranscriptWriter(tmp_path, run_name="other")
    a_session(other, name="Ann", pid="person_ann")
    other.close()
    before_other = (tmp_path / "other" / "transcript.jsonl").read_bytes()

    done = {Path(r.run).name: r for r in redact_transcripts(tmp_path, BARACK)}

    raw = (tmp_path / "old" / "transcript.jsonl").read_bytes()
    assert b"Barack" not in raw and b"barack" not in raw and b"person_abc123" not in raw
    assert b"I love sailing" not in raw                                  # his own line
    records = [json.loads(line) for line in raw.splitlines()]
    assert {"type": "user", "text": FORGOTTEN, "speaker": FORGOTTEN}.items() <= records[2].items()
    assert records[3]["text"] == "Annual leave starts Monday."        # Ann's line, whole
    assert records[0]["file"] is None and records[0]["forgotten"] is True
    assert not list((tmp_path / "old" / "frames").glob("*.jpg"))
    assert (done["old"].lines, done["old"].frames) == (3, 1)
    # a run without him is untouched, byte for byte, frames too
    assert (tmp_path / "other" / "transcript.jsonl").read_bytes() == before_other
    assert list((tmp_path / "other" / "frames").glob("*.jpg"))
    assert (done["other"].lines, done["other"].frames) == (0, 0)


def test_a_running_writer_redacts_its_own_run_and_goes_on_writing(tmp_path):
    closed = TranscriptWriter(tmp_path, run_name="closed")
    a_session(closed)
    closed.close()
    live = TranscriptWriter(tmp_path, run_name="live")
    a_session(live)
    # another process (the operator's CLI) leaves the live run to its writer
    assert [(Path(r.run).name, r.skipped) for r in redact_transcripts(tmp_path, BARACK)] == \
        [("closed", False), ("live", True)]
    assert b"Barack" in (tmp_path / "live" / "transcript.jsonl").read_bytes()

    done = live.forget(BARACK)
    assert [Path(r.run).name for r in done] == ["live", "closed"]
    live(UserEntry(3, "Goodbye!", "Ann"))
    live.close()
    lines = (tmp_path / "live" / "transcript.jsonl").read_text().splitlines()
    assert "Barack" not in "".join(lines)
    assert json.loads(lines[-1])["text"] == "Goodbye!"           # written after the rewrite
    assert len(lines) == 6


def _hold(run: str, ready, release) -> None:
    lock = RunLock(Path(run))
    lock.take()
    ready.set()
    release.wait(30)


def test_a_run_locked_by_another_process_is_skipped_not_rewritten(tmp_path):
    w = TranscriptWriter(tmp_path, run_name="run")
    a_session(w)
    w.close()
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path / "run"), ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        [done] = redact_transcripts(tmp_path, BARACK)
        assert done.skipped and b"Barack" in (tmp_path / "run" / "transcript.jsonl").read_bytes()
    finally:
        release.set()
        holder.join(30)
    [done] = redact_transcripts(tmp_path, BARACK)
    assert not done.skipped and done.lines == 3


def test_names_are_whole_words_and_a_torn_line_about_them_is_dropped(tmp_path):
    who = ForgottenPeople((), ("Ann",))
    assert who.redact("Ann, annual plans with ANN and Anne.") == \
        f"{FORGOTTEN}, annual plans with {FORGOTTEN} and Anne."
    assert redact_record({"type": "user", "speaker": " ann ", "text": "hi"}, who)["text"] == \
        FORGOTTEN
    run = tmp_path / "r"
    run.mkdir()
    (run / "transcript.jsonl").write_text('{"type": "user", "text": "hello"}\n'
                                          '{"type": "user", "speaker": "Ann", "te')
    [done] = redact_transcripts(tmp_path, who)
    assert done.lines == 1
    assert (run / "transcript.jsonl").read_text() == '{"type": "user", "text": "hello"}\n'
    with pytest.raises(ValueError, match="person id or a name"):
        ForgottenPeople(("",), (" ",))


def test_the_operators_forget_clears_the_store_and_the_transcripts(tmp_path, capsys):
    from vision_dialogue.cli import people as cli
    from vision_dialogue.application.identity.memory import PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    from vision_dialogue.application.identity.store import PeopleStore
    url = f"sqlite:///{tmp_path / 'people.db'}"
    store = PeopleStore(url)
    pid = store.enrol("Barack", [], Consent(ConsentWay.OPERATOR, question="q", answer="yes"))
    PersonMemory(store).seen(pid, "face seen")
    store.close()
    runs = tmp_path / "transcripts"
    w = TranscriptWriter(runs, run_name="met")
    a_session(w, pid=pid)
    w.close()
    assert cli.main(["people", "--store", url, "forget", "--id", pid,
                     "--transcripts", str(runs)]) == 0
    out = capsys.readouterr().out
    assert pid in out and "3 lines in 1 runs redacted, 1 frames deleted" in out
    raw = (runs / "met" / "transcript.jsonl").read_bytes()
    assert b"Barack" not in raw and pid.encode() not in raw
    assert b"Barack" not in (tmp_path / "people.db").read_bytes()
    # again: nobody in the store, nothing left to clear
    assert cli.main(["people", "--store", url, "forget", "--name", "Barack",
                     "--transcripts", str(runs)]) == 1


def test_the_live_prompt_forgets_them_and_the_next_request_does_not_name_them():
    """The manager's prompt: a later reply must not bring the name back into the files."""
    from fake_chat_backend import FakeChatBackend
    from vision_dialogue.core.conversation import Conversation, ConversationConfig
    from vision_dialogue.core.people import PeopleInView, TrackedPerson
    from vision_dialogue.core.persona import load_persona
    be = FakeChatBackend(responder=lambda msgs, kind: "Sailing is fun, Barack!")
    c = Conversation(be, load_persona(), ConversationConfig())
    now = [0.0]
    people = PeopleInView(c, clock=lambda: now[0])
    try:
        people.update([TrackedPerson("person_abc123", 0.0, 0.0, name="Barack")], named=True)
        c.turn("I love sailing.", speaker="Barack")
        c.turn("I am Ann.", speaker="Ann")
        assert "Barack" in json.dumps(be.calls[-1][1])
        assert c.forget(BARACK) >= 3          # his arrival, his line, the reply naming him
        people.forget(BARACK)
        now[0] = 60.0
        people.update([], named=True)         # he left: not told by name
        be.responder = lambda msgs, kind: "Goodbye!"
        c.turn("Bye.", speaker="Ann")
        sent = json.dumps(be.calls[-1][1])
        assert not any(w in sent for w in ("Barack", "I love sailing", "person_abc123"))
        assert "I am Ann." in sent and "someone left" in sent, sent
    finally:
        c.close()
