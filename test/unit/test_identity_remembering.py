"""The conversation's side of memory: whose line, which facts, what the reply is told."""
from __future__ import annotations

import json
import threading
import time

import pytest

from vision_dialogue.application.identity.memory import Fact, PersonMemory
from vision_dialogue.application.identity.records import Consent, ConsentWay
from vision_dialogue.application.identity.remembering import MemoryKeeper, \
    says_something_of_themselves
from vision_dialogue.application.identity.store import PeopleStore


class FakeModel:
    """Answers the extraction question with the facts given for a line; counts the calls."""

    def __init__(self, facts_of: dict):
        self.facts_of, self.asked = facts_of, []

    def __call__(self, messages, schema):
        line = messages[-1]["content"]
        self.asked.append(line)
        if "summary" in schema["properties"]:
            return json.dumps({"summary": f"{line.count(chr(10)) + 1} lines about sailing"})
        if line not in self.facts_of:
            raise RuntimeError("the model is away")
        return json.dumps({"facts": [{"topic": t, "fact": f} for t, f in self.facts_of[line]]})


@pytest.fixture
def keeper(tmp_path):
    store = PeopleStore(f"sqlite:///{tmp_path / 'people.db'}")
    anna = store.enrol("Anna", [], Consent(ConsentWay.ASKED, answer="Yes."))
    model = FakeModel({
        "I work in building B and I love sailing.": [("workplace", "works in building B"),
                                                     ("hobby", "loves sailing"),
                                                     ("family", "has three daughters")],
        "I moved to building C last week.": [("workplace", "moved to building C")]})
    yield MemoryKeeper(PersonMemory(store), model, note_chars=300), model, anna
    store.close()


def test_facts_of_the_one_known_person_in_view_are_kept_and_a_correction_replaces(keeper):
    keep, model, anna = keeper
    kept = keep.heard([anna], "I work in building B and I love sailing.")
    assert [f.text for f in kept] == ["works in building B", "loves sailing"]   # not invented
    assert keep.heard([anna], "What is the weather like?") == []     # asks: model not asked
    assert keep.heard([anna, "anonymous_person_x"], "I moved to building C last week.") == []
    assert keep.heard(["anonymous_person_x"], "I moved to building C last week.") == []
    assert len(model.asked) == 1                    # two in view, a stranger: nobody asked
    keep.heard([anna], "I moved to building C last week.")
    facts = keep.memory.recall(anna, "test").facts
    assert [f.text for f in facts] == ["moved to building C", "loves sailing"]


def test_the_note_tells_a_known_person_alone_and_nothing_in_company(keeper):
    keep, _, anna = keeper
    keep.memory.remember(anna, Fact("hobby: loves sailing", "loves sailing"), "line 1")
    note = keep.note([anna], "Do you remember what I love?")
    assert note == "You have met Anna before. Anna told you: loves sailing."
    assert keep.note([anna, "anonymous_person_x"], "Hi") == ""
    keep.in_company = True
    assert "loves sailing" in keep.note([anna, "anonymous_person_x"], "Hi")
    assert keep.note(["anonymous_person_x"], "Hi") == ""


def test_a_failing_model_or_store_costs_a_fact_never_a_reply(keeper, caplog):
    keep, _, anna = keeper
    assert keep.heard([anna], "I like my new job a lot.") == []        # the model raised
    assert "facts of line 1 not taken: RuntimeError" in caplog.text
    keep.memory.store.engine.dispose()
    keep.memory.store.path.unlink()
    keep.memory.store.path.mkdir()                                    # the file is gone
    assert keep.note([anna], "Hi") == "" and "no recall" in caplog.text


@pytest.mark.parametrize("line, maybe", [
    ("I love sailing.", True), ("My daughter plays the violin", True),
    ("I'm from Ghent.", True), ("Can you see me?", False), ("The cup is red.", False)])
def test_only_a_line_about_the_speaker_goes_to_the_model(line, maybe):
    assert says_something_of_themselves(line) is maybe


def test_a_known_persons_session_is_summed_up_when_they_leave(keeper):
    keep, model, anna = keeper
    keep.heard([anna], "I work in building B and I love sailing.")
    keep.heard([anna], "Can you see my boat?")
    keep.heard(["anonymous_person_x"], "Hello!")                       # nobody's session
    assert keep.left([anna]) == [] and keep.memory.recall(anna, "t").last_session is None
    assert keep.left([]) == [anna]
    last = keep.memory.recall(anna, "test").last_session
    assert last.summary == "2 lines about sailing" and last.started <= last.ended
    assert model.asked[-1] == "- I work in building B and I love sailing.\n- Can you see my boat?"
    assert keep.left([]) == []                                          # summed up once


def test_asked_what_it_knows_the_note_holds_all_of_it_or_says_nothing_was_kept(keeper):
    keep, _, anna = keeper
    keep.note_chars = 60
    assert keep.note([anna], "What do you know about me?") == (
        "You have met Anna before, but they have told you nothing about themselves that you "
        "kept: say so.")
    assert keep.note([anna], "Hello!") == ""                 # not asked: nothing to say
    for i, hobby in enumerate(["loves sailing", "plays the violin", "grows tomatoes"]):
        keep.memory.remember(anna, Fact(f"hobby: {hobby}", hobby, float(i + 1)), "line")
    # written past this keeper (another robot): the standing note has them at her next arrival
    assert keep.note([anna], "Hello!") == ""
    assert keep.standing([]) == ""
    hello = keep.note([anna], "Hello!")
    assert hello.count(";") == 0 and "grows tomatoes" in hello   # the cap: the newest fits
    told = keep.note([anna], "What do you remember about me?")
    assert all(h in told for h in ("loves sailing", "plays the violin", "grows tomatoes"))


def test_a_line_said_just_before_the_yes_is_kept_once_the_same_face_is_known(keeper):
    """A line of an anonymous person waits with their face until that face is known.

    (Their new id was not reported yet when it was heard.) Never another face's person's.
    """
    keep, model, anna = keeper
    line = "I work in building B and I love sailing."
    assert keep.heard(["anonymous_person_q"], line, {"anonymous_person_q": "face1"}) == []
    assert keep.heard(["anonymous_person_r"], "I moved to building C last week.",
                      {"anonymous_person_r": "face2"}) == []
    assert model.asked == [] and keep.waiting_lines() == 2
    assert keep.place({"anonymous_person_q": "face1"}) == []     # not known yet: waits
    kept = keep.place({anna: "face1", "anonymous_person_r": "face2"})   # she said yes
    assert [f.text for f in kept] == ["works in building B", "loves sailing"]
    assert keep.waiting_lines() == 1                              # face2's waits on
    assert keep.place({anna: "face1"}) == [] and keep.waiting_lines() == 1
    facts = {f.text for f in keep.memory.recall(anna, "t").facts}
    assert facts == {"works in building B", "loves sailing"}


class CountedReads:
    """A PersonMemory whose reads are counted (each one is an audited store read)."""

    def __init__(self, memory):
        self.memory, self.reads = memory, 0

    def __getattr__(self, name):
        return getattr(self.memory, name)

    def recall(self, person_id, why):
        self.reads += 1
        return self.memory.recall(person_id, why)


def test_the_standing_note_is_read_once_while_the_same_people_are_in_view(keeper):
    """The reply prompt asks for it at every warm-up and reply: the store is read once.

    A fact kept, someone arriving or leaving, or someone forgotten reads it again.
    """
    keep, _, anna = keeper
    keep.memory = counted = CountedReads(keep.memory)
    keep.memory.remember(anna, Fact("hobby: loves sailing", "loves sailing"), "line 1")
    first = keep.standing([anna])
    assert first == "You have met Anna before. Anna told you: loves sailing."
    for line in ("Hello!", "How are you?", "What is that?"):
        assert keep.note([anna], line) == first
    assert counted.reads == 1
    keep.heard([anna], "I work in building B and I love sailing.")      # this keeper wrote
    assert "works in building B" in keep.standing([anna]) and counted.reads == 2
    keep.standing([anna])
    keep.forget()
    keep.standing([anna])
    assert counted.reads == 3
    keep.standing([anna, "anonymous_person_x"])          # in company: nothing told or read
    assert counted.reads == 3


class CommitsThenWaits(CountedReads):
    """A memory whose write is in the store before `remember` returns (a queue's own commit).

    `on_commit()` runs in that moment: a reply's prompt read then.
    """

    def __init__(self, memory, on_commit):
        super().__init__(memory)
        self.on_commit = on_commit

    def remember(self, person_id, fact, why):
        kept = self.memory.remember(person_id, fact, why)
        self.on_commit()
        return kept


def test_a_note_read_while_a_fact_is_written_is_read_again_once_it_is(keeper):
    """A note read between a fact's commit and the end of its write tells the fact.

    A suite run's reply missed the facts in the store: read in that moment, the note from
    before them was used.
    """
    keep, _, anna = keeper
    assert keep.standing([anna]) == ""              # read before: nothing kept of her yet
    during = []
    keep.memory = CommitsThenWaits(keep.memory, lambda: during.append(keep.standing([anna])))
    keep.heard([anna], "I work in building B and I love sailing.")
    assert "works in building B" in during[0] and "loves sailing" in during[-1]
    assert "works in building B" in keep.note([anna], "What do I love doing?")
    reads = keep.memory.reads
    keep.standing([anna])
    assert keep.memory.reads == reads               # once it ended, read once and kept


def test_a_line_asking_of_a_fact_gets_it_told_again_right_before_it(keeper):
    """A fact a line asks about is told right before it, whether or not the standing note did.

    Also one it told: a small model would otherwise have to pick it out of a long note.
    """
    keep, _, anna = keeper
    keep.note_chars = 90
    facts = ["loves sailing", "plays the violin", "grows tomatoes", "keeps bees"]
    for i, fact in enumerate(facts):
        keep.memory.remember(anna, Fact(f"hobby: {fact}", fact, float(i + 1)), "line")
    standing = keep.standing([anna])
    assert "keeps bees" in standing and "sailing" not in standing       # the newest fit
    assert keep.for_line([anna], "Do I like sailing?") == "Anna told you: loves sailing."
    assert keep.for_line([anna], "Do you know about my bees?") == "Anna told you: keeps bees."
    assert keep.for_line([anna], "Nice weather today.") == ""
    # read after the line's last word: only what the standing note lacks
    assert keep.for_line([anna], "Do you know about my bees?", late=True) == ""
    assert keep.for_line([anna], "Do I like sailing?", late=True) == \
        "Anna told you: loves sailing."
    # only the best match: "grows sailing boats" shares three words, the others one
    keep.memory.remember(anna, Fact("hobby: grows sailing boats", "grows sailing boats", 0.5),
                         "line")
    keep.forget()
    assert keep.for_line([anna], "Do I grow boats for sailing?") == \
        "Anna told you: grows sailing boats."
    assert keep.note([anna], "Do I like sailing?") == \
        standing + " Anna told you: loves sailing."


def test_a_line_a_voice_print_named_gives_its_facts_also_with_others_in_view(keeper):
    keep, model, anna = keeper
    ben = keep.memory.store.enrol("Ben", [], Consent(ConsentWay.ASKED, answer="Yes."))
    line = "I work in building B and I love sailing."
    assert keep.heard([anna, ben], line) == []                      # whose? nobody for sure
    assert model.asked == []
    kept = keep.heard([anna, ben], line, voice=ben)                 # his voice said it
    assert [f.text for f in kept] == ["works in building B", "loves sailing"]
    assert keep.memory.recall(anna, "test").facts == ()
    assert len(keep.memory.recall(ben, "test").facts) == 2


def test_whose_voice_said_a_line_comes_after_it_and_pairs_with_its_words():
    from vision_dialogue.application.identity.remembering import LineSpeakers
    speakers = LineSpeakers()
    heard = time.monotonic()
    speakers.said("I love sailing.", "p1", by_voice=True)           # before the wait: kept
    assert speakers.wait("I  love sailing.", heard, timeout=0) == "p1"
    assert speakers.wait("I love sailing.", heard, timeout=0) is None   # taken once
    speakers.said("Yes.", "p2", by_voice=False)                     # the one in view: no voice
    assert speakers.wait("Yes.", heard, timeout=0) is None
    for who in ("p3", "p4"):                                        # the same words, in order
        speakers.said("Hello.", who, by_voice=True)
    assert [speakers.wait("Hello.", heard, 0) for _ in range(2)] == ["p3", "p4"]
    later = threading.Timer(0.2, speakers.said, ("I work in building B.", "p5", True))
    later.start()
    try:
        assert speakers.wait("I work in building B.", heard, timeout=30) == "p5"
    finally:
        later.join()
    waiting = threading.Thread(target=speakers.wait, args=("Nobody answers.", heard, 60))
    waiting.start()
    speakers.close()                                                 # the node closes
    waiting.join(timeout=30)
    assert not waiting.is_alive()


def test_two_people_saying_the_same_words_are_told_apart_by_their_lines_stamps():
    from vision_dialogue.application.identity.remembering import LineSpeakers
    speakers = LineSpeakers()
    heard = time.monotonic()
    speakers.said("Hello.", "p1", True, stamp=100.25)
    speakers.said("Hello.", "p2", True, stamp=101.5)
    assert speakers.wait("Hello.", heard, 0, stamp=101.5) == "p2"       # not the oldest
    assert speakers.wait("Hello.", heard, 0, stamp=101.5) is None       # taken once
    assert speakers.wait("Hello.", heard, 0, stamp=100.25) == "p1"
    speakers.said("Hi.", "p3", True)                                    # no stamp: by words
    assert speakers.wait("Hi.", heard, 0, stamp=7.0) == "p3"
    speakers.said("Hey.", "p4", True, stamp=8.0)
    assert speakers.wait("Hey.", heard, 0) == "p4"                      # a line with none
