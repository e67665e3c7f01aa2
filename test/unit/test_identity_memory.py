"""What the robot remembers of a person: kept with consent, recalled, exported, forgotten."""
from __future__ import annotations

import json
import sqlite3

import pytest

from vision_dialogue.application.identity.facts import FACTS_SCHEMA, grounded, line_note, \
    parse_facts, recall_note, standing_note
from vision_dialogue.application.identity.memory import AuditAction, Fact, MemoryKind, \
    PersonMemory, Recall, SessionSummary
from vision_dialogue.application.identity.records import Consent, ConsentWay
from vision_dialogue.application.identity.schema import SCHEMA_VERSION
from vision_dialogue.application.identity.store import PeopleStore
from vision_dialogue.core.conversation_types import LineNote


class Clock:
    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t


@pytest.fixture
def memory(tmp_path):
    store = PeopleStore(f"sqlite:///{tmp_path / 'people.db'}")
    clock = Clock()
    yield PersonMemory(store, clock=clock), clock, tmp_path / "people.db"
    store.close()


def enrol(memory: PersonMemory, name: str) -> str:
    return memory.store.enrol(name, [], Consent(ConsentWay.ASKED, answer="Yes."))


def test_facts_are_kept_per_topic_a_correction_replaces_and_every_access_is_audited(memory):
    mem, clock, _ = memory
    anna = enrol(mem, "Anna")
    assert mem.remember(anna, Fact("workplace", "works in building B"), "fact from line 3")
    clock.t += 10
    assert mem.remember(anna, Fact("hobby: loves sailing", "loves sailing"), "fact from line 4")
    clock.t += 10
    assert mem.remember(anna, Fact("Workplace", "moved to building C"), "fact from line 9")
    assert not mem.remember("person_nobody", Fact("hobby", "x"), "fact from line 1")
    recall = mem.recall(anna, "recall for a reply")
    assert [f.text for f in recall.facts] == ["moved to building C", "loves sailing"]
    audit = mem.audit()
    assert [(a.action, a.kind) for a in audit] == [(AuditAction.WRITE, MemoryKind.FACT)] * 3 \
        + [(AuditAction.READ, MemoryKind.PERSON)]
    assert audit[0].why == "fact from line 3" and audit[-1].person_id == anna
    with pytest.raises(ValueError, match="needs what it is about"):
        mem.remember(anna, Fact(" ", "x"), "bad")


def test_visits_sessions_export_and_forget_leave_only_that_a_person_was_forgotten(memory):
    mem, clock, path = memory
    anna, ben = enrol(mem, "Anna"), enrol(mem, "Ben")
    assert mem.seen(anna).count == 1
    clock.t += 60
    assert mem.seen(anna).count == 1                  # the same visit
    clock.t += 3600
    assert mem.seen(anna).count == 2
    mem.remember(anna, Fact("hobby: loves sailing", "loves sailing"), "fact from line 4")
    mem.session_ended(anna, SessionSummary(clock.t - 300, clock.t, "her sailing trip"),
                      "session ended")
    mem.remember(ben, Fact("pet: has a dog called Rex", "has a dog called Rex"), "line 7")
    exported = mem.export(anna)
    assert exported["name"] == "Anna" and exported["facts"][0]["text"] == "loves sailing"
    assert exported["sessions"][0]["summary"] == "her sailing trip"
    assert exported["visits"][0]["count"] == 2 and exported["audit"]
    json.dumps(exported)
    assert mem.store.forget(person_id=anna) == [anna]
    assert mem.recall(anna, "recall") is None and mem.export(anna) is None
    db = sqlite3.connect(path)
    for table in ("people", "facts", "sessions", "visits", "embeddings", "audit"):
        rows = db.execute(f"SELECT * FROM {table}").fetchall()
        assert not [r for r in rows if anna in map(str, r)], (table, rows)
    assert ("forgotten", "person", None) in db.execute(
        "SELECT action, kind, person_id FROM audit").fetchall()
    db.close()
    raw = path.read_bytes()
    assert b"sailing" not in raw and anna.encode() not in raw and b"Rex" in raw


def test_people_not_seen_for_the_retention_days_are_forgotten(memory):
    mem, clock, _ = memory
    anna, ben = enrol(mem, "Anna"), enrol(mem, "Ben")
    mem.seen(anna)
    clock.t += 5 * 86400
    mem.seen(ben)
    clock.t += 26 * 86400
    assert mem.expire(30) == [anna]
    assert {p.name for p in mem.store.people()} == {"Ben"}
    assert mem.audit()[-1].why == "not seen for 30 days"
    with pytest.raises(ValueError, match="retention_days"):
        mem.expire(0)


def test_a_layout_1_store_is_migrated_and_keeps_its_people(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value VARCHAR(256) NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE people (person_id VARCHAR(64) PRIMARY KEY, name VARCHAR(256) NOT NULL,
            consent_way VARCHAR(32) NOT NULL, consent_question TEXT NOT NULL,
            consent_answer TEXT NOT NULL, consent_when FLOAT NOT NULL);
        CREATE TABLE embeddings (id INTEGER PRIMARY KEY, person_id VARCHAR(64) NOT NULL,
            modality VARCHAR(16) NOT NULL, model VARCHAR(128) NOT NULL,
            model_version VARCHAR(64) NOT NULL, vector BLOB NOT NULL);
        INSERT INTO people VALUES ('person_abcdefgh', 'Anna', 'asked', 'May I?', 'Yes', 1.0);
    """)
    db.close()
    store = PeopleStore(f"sqlite:///{path}")
    mem = PersonMemory(store)
    assert mem.remember("person_abcdefgh", Fact("hobby: sailing", "sailing"), "line 1")
    assert [p.name for p in store.people()] == ["Anna"]
    store.close()
    version = sqlite3.connect(path).execute(
        "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert int(version) == SCHEMA_VERSION == 2


@pytest.mark.parametrize("fact, line, kept", [
    ("loves sailing", "I love sailing on weekends.", True),
    ("works in building B", "I work in building B, by the way.", True),
    ("works as a doctor", "I like the weather today.", False),      # invented
    ("has a dog called Rex", "My dog Rex is waiting outside.", False),   # "called" not said
    ("", "I love sailing.", False),
])
def test_a_fact_is_kept_only_in_the_persons_own_words(fact, line, kept):
    assert grounded(fact, line) is kept


def test_the_models_answer_gives_grounded_facts_by_topic_and_nothing_for_bad_json():
    line = "I work in building B and I love sailing."
    reply = json.dumps({"facts": [{"topic": "workplace", "fact": "works in building B"},
                                  {"topic": "hobby", "fact": "loves sailing"},
                                  {"topic": "family", "fact": "has three daughters"},
                                  {"topic": "astrology", "fact": "love"}]})
    facts = parse_facts(reply, line, 5.0)
    assert [(f.about, f.text) for f in facts] == [
        ("workplace", "works in building B"), ("hobby: loves sailing", "loves sailing")]
    assert set(FACTS_SCHEMA["properties"]["facts"]["items"]["properties"]["topic"]["enum"]) \
        >= {"workplace", "hobby"}
    for bad in ("not json", "[]", '{"facts": "x"}', '{"facts": [1, null]}', ""):
        assert parse_facts(bad, line, 5.0) == []


def test_the_recall_note_puts_matching_facts_first_and_keeps_to_its_cap():
    recall = Recall("p1", "Anna", (Fact("plans", "flies to Oslo next week", 3.0),
                                   Fact("workplace", "works in building B", 2.0),
                                   Fact("hobby: loves sailing", "loves sailing", 1.0)),
                    SessionSummary(0.0, 1.0, "her new boat and the weather."))
    note = recall_note(recall, "Do you remember what I love doing? Sailing!", 400)
    assert note.startswith("You have met Anna before. Anna told you: loves sailing; flies to "
                           "Oslo next week; works in building B.")
    assert note.endswith("Last time you talked about: her new boat and the weather.")
    short = recall_note(recall, "What do I love?", 70)
    assert len(short) <= 70 and "loves sailing" in short and "Oslo" not in short
    assert recall_note(Recall("p2", "Ben"), "Hello", 400) == ""
    assert recall_note(recall, "hi", 10) == ""


def test_a_question_about_a_topic_recalls_its_fact_though_they_share_no_word():
    """A fact left out of the standing note comes with a line that asks about its topic.

    "What do I do for a living?" of "is a nurse" (the oldest of many): only the facts of the
    topic asked about.
    """
    facts = [Fact("work", "is a nurse", 1.0), Fact("home", "lives in Ghent", 2.0),
             Fact("likes: likes green tea", "likes green tea", 3.0),
             Fact("hobby: runs marathons", "runs marathons", 4.0)]
    facts += [Fact(f"other: fact {i}", f"keeps a long list number {i} of things", 10.0 + i)
              for i in range(12)]
    recall = Recall("p1", "Dana", tuple(reversed(facts)))          # newest first, as read
    standing = standing_note(recall, 400)
    assert "is a nurse" not in standing and "lives in Ghent" not in standing

    def asked(line):
        return line_note(recall, line, 200).text
    assert asked("What do I do for a living?") == "Dana told you: is a nurse."
    assert asked("Where do I live?") == "Dana told you: lives in Ghent."
    assert asked("What do I like to drink?") == "Dana told you: likes green tea."
    assert asked("What sport do I do?") == "Dana told you: runs marathons."
    assert asked("Nice weather today.") == ""                     # asks about nothing
    assert asked("Is that your house?") == ""                     # not about them
    assert "is a nurse" in recall_note(recall, "What is my job?", 120)


def test_a_fact_in_the_persons_own_words_is_told_as_their_words():
    """A fact kept in the person's own words ("I run marathons.") is told in quotes.

    "Dana told you: I run marathons" was answered "I run marathons." (the robot's own);
    quoted, it is the person's.
    """
    recall = Recall("p1", "Dana", (Fact("hobby: i run marathons.", "I run marathons.", 2.0),
                                   Fact("hobby: loves sailing", "loves sailing.", 1.0)))
    assert standing_note(recall, 400) == \
        'You have met Dana before. Dana told you: "I run marathons"; loves sailing.'
    note = line_note(recall, "What sport do I do?", 200)
    assert note.text == 'Dana told you: "I run marathons"; loves sailing.'   # both hobbies
    assert note.facts == {'p1: "I run marathons"', "p1: loves sailing"}
    told = line_note(recall, "What sport do I do?", 200, told=standing_note(recall, 30))
    assert told.text == note.text                       # a standing note too short for any
    assert line_note(recall, "What sport do I do?", 200,
                     told=standing_note(recall, 400)) == LineNote()      # it told both


def test_the_operators_command_exports_one_person_and_expires_the_unseen(tmp_path, capsys):
    from vision_dialogue.cli import people as cli
    url = f"sqlite:///{tmp_path / 'people.db'}"
    store = PeopleStore(url)
    mem = PersonMemory(store)
    anna = enrol(mem, "Anna")
    mem.remember(anna, Fact("hobby: loves sailing", "loves sailing"), "fact from line 4")
    store.close()
    assert cli.main(["people", "--store", url, "export", anna]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["name"] == "Anna" and exported["facts"][0]["text"] == "loves sailing"
    assert cli.main(["people", "--store", url, "export", "person_nobody"]) == 1
    assert "nobody has the id person_nobody" in capsys.readouterr().err
    assert cli.main(["people", "--store", url, "expire", "--days", "0"]) == 2
    assert "retention_days 0" in capsys.readouterr().err
    assert cli.main(["people", "--store", url, "expire", "--days", "30"]) == 0
    assert "forgot 0" in capsys.readouterr().out          # enrolled just now


def test_a_fact_under_the_same_topic_with_nothing_in_common_is_kept_beside_it(memory):
    """A small model files both under "work": the nurse does not erase building B."""
    mem, clock, _ = memory
    dana = enrol(mem, "Dana")
    assert mem.remember(dana, Fact("work", "is a nurse"), "fact from line 1")
    clock.t += 1
    assert mem.remember(dana, Fact("work", "works in building B"), "fact from line 2")
    clock.t += 1
    assert mem.remember(dana, Fact("work", "moved to building C"), "fact from line 3")
    assert {f.text for f in mem.recall(dana, "t").facts} == {"is a nurse", "moved to building C"}


def test_what_the_person_told_is_said_also_while_the_robot_cannot_see():
    """A colour the person told is no claim to see; one nobody told still is.

    "You like green tea." is said while the robot cannot see, when the person told it.
    """
    from vision_dialogue.core.persona import load_persona
    from vision_dialogue.core.reply_filter import turn_filter
    told = 'You have met Dana before. Dana told you: "I like green tea"; "I drive a red van".'
    persona = load_persona()
    notes = turn_filter(persona, [], None, blind=True, told=told)
    assert notes.feed("You like green tea.") == "You like green tea."
    assert notes.feed("You drive a red van.") == "You drive a red van."
    blind = turn_filter(persona, [], None, blind=True)
    assert blind.feed("You like green tea.") in persona.blind_lines
    assert turn_filter(persona, [], None, blind=True, told=told).feed(
        "Your shirt is blue.") in persona.blind_lines
