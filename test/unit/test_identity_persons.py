"""A session's persons: known across sessions only with consent; faces and voices joined."""
from __future__ import annotations

import numpy as np
import pytest

from vision_dialogue.application.identity.matching import RULES, Gallery, PooledPrint
from vision_dialogue.application.identity.persons import ConsentState, IdentityError, NextStep, \
    Persons
from vision_dialogue.application.identity.phrases import asks_to_be_forgotten, name_in
from vision_dialogue.application.identity.records import Consent, ConsentWay, Embedding, \
    EnrolPolicy, Modality
from vision_dialogue.application.identity.store import PeopleStore

FACE_MODEL = ("dlib_face_recognition_resnet_model_v1", "test")
VOICE_MODEL = ("resemblyzer_ge2e", "test")


def person_vector(who: int, size: int, scale: float) -> np.ndarray:
    return np.random.default_rng(who).normal(size=size) * scale


def face(who: int, shot: int = 0) -> Embedding:
    """A face print of `who`: each person's centre plus a small per-photo change.

    Centres about 1.1 apart (dlib-like scale), photos 0.2 from their centre.
    """
    noise = np.random.default_rng(1000 + 17 * who + shot).normal(size=128) * 0.02
    return Embedding(Modality.FACE, *FACE_MODEL, person_vector(who, 128, 0.07) + noise)


def voice(who: int, clip: int = 0) -> Embedding:
    noise = np.random.default_rng(5000 + 31 * who + clip).normal(size=256) * 0.2
    return Embedding(Modality.VOICE, *VOICE_MODEL, person_vector(100 + who, 256, 1.0) + noise)


def test_the_made_up_prints_behave_like_real_ones():
    """The test's prints: one person's within the threshold, two people's far outside."""
    same = RULES[Modality.FACE].distance(face(1, 0).vector, face(1, 1).vector)
    other = RULES[Modality.FACE].distance(face(1, 0).vector, face(2, 0).vector)
    assert same < 0.4 < 0.8 < other
    assert RULES[Modality.VOICE].distance(voice(1, 0).vector, voice(1, 1).vector) < 0.1
    assert RULES[Modality.VOICE].distance(voice(1).vector, voice(2).vector) > 0.8


@pytest.fixture
def store(tmp_path):
    s = PeopleStore(f"sqlite:///{tmp_path}/people.db")
    yield s
    s.close()


def say(persons: Persons, person, *lines: str) -> list[NextStep]:
    return [persons.heard_line(person, line) for line in lines]


def test_a_stranger_is_asked_once_and_yes_makes_them_known_in_the_next_session(store):
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=3)
    ada = session.face_print("face_a", face(1))
    assert ada.anonymous and ada.person_id.startswith("anonymous_person_")
    assert say(session, ada, "Hello there.", "Nice weather.") == [NextStep.NOTHING] * 2
    assert say(session, ada, "My name is Ada.") == [NextStep.ASK_CONSENT]     # her name
    assert ada.consent is ConsentState.ASKING and ada.name == "Ada"
    assert say(session, ada, "What is that?") == [NextStep.NOTHING]         # asked once
    known = session.consent_answer(ada.person_id, True, "yes, please")
    assert known.known and known.person_id.startswith("person_") and known.name == "Ada"
    assert session.face_of["face_a"] == known.person_id
    [stored] = store.people()
    assert (stored.person_id, stored.name, stored.faces) == (known.person_id, "Ada", 1)
    assert stored.consent.way is ConsentWay.ASKED and stored.consent.answer == "yes, please"

    tomorrow = Persons(store, EnrolPolicy.ASK)           # new process, another photo
    again = tomorrow.face_print("face_q", face(1, shot=5))
    assert (again.person_id, again.name, again.known) == (known.person_id, "Ada", True)
    assert again.confidence > 0.5
    assert say(tomorrow, again, "a", "b", "c", "d") == [NextStep.NOTHING] * 4   # never asked
    stranger = tomorrow.face_print("face_r", face(2))
    assert stranger.anonymous and stranger.name == ""


def test_no_keeps_nothing_and_is_not_asked_again(store):
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=2)
    bob = session.face_print("face_b", face(2))
    session.voice_print("anonymous_speaker", voice(2), ["face_b"])
    assert say(session, bob, "Hi.", "Hmm.") == [NextStep.NOTHING, NextStep.ASK_CONSENT]
    declined = session.consent_answer(bob.person_id, False, "no thanks")
    assert declined.consent is ConsentState.DECLINED and declined.prints() == []
    session.face_print("face_b", face(2, 1))
    assert declined.prints() == []                       # nor gathered from now on
    assert say(session, declined, "x", "My name is Bob.") == [NextStep.NOTHING] * 2
    assert store.people() == [] and store.export()["people"] == []
    session.face_gone("face_b")                          # leaves, comes back: not asked
    back = session.face_print("face_b2", face(2, 4))
    assert back.consent is ConsentState.DECLINED and back.prints() == []
    assert say(session, back, "a", "b", "c") == [NextStep.NOTHING] * 3
    later = Persons(store, EnrolPolicy.ASK).face_print("face_z", face(2, 3))
    assert later.anonymous and later.consent is ConsentState.UNASKED    # a new session


def test_a_question_that_could_not_be_put_is_no_answer_and_comes_at_a_later_line(store):
    """No manager yet: the person is not taken as having said no; the next line asks again."""
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=1)
    eve = session.face_print("face_e", face(3))
    assert say(session, eve, "Hello.") == [NextStep.ASK_CONSENT]
    session.not_asked(eve.person_id)
    assert eve.consent is ConsentState.UNASKED and store.people() == []
    assert say(session, eve, "Are you there?") == [NextStep.ASK_CONSENT]
    session.consent_answer(eve.person_id, False, "no")
    session.not_asked(eve.person_id)                     # a no stays a no
    assert say(session, eve, "Bye.") == [NextStep.NOTHING]


def test_a_voice_heard_with_one_face_in_view_is_that_persons_and_is_known_later(store):
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=1)
    heard, match = session.voice_print("anonymous_speaker", voice(3), [])
    assert match is None and heard.anonymous and not heard.face_ids     # heard, not seen
    seen = session.face_print("face_c", face(3))
    joined, _ = session.voice_print("anonymous_speaker", voice(3, 1), ["face_c"])
    assert joined is seen and len(session.tracked()) == 1                # one person
    assert joined.voice.count == 2 and joined.face.count == 1
    assert say(session, joined, "Call me Cleo") == [NextStep.ASK_CONSENT]
    known = session.consent_answer(joined.person_id, True)
    voice_only = Persons(store, EnrolPolicy.ASK)                          # voice alone
    person, match = voice_only.voice_print("anonymous_speaker", voice(3, 7), [])
    assert person.person_id == known.person_id and person.name == "Cleo" and match


def test_two_faces_in_view_do_not_take_a_voice_and_never_means_never(store):
    session = Persons(store, EnrolPolicy.NEVER, ask_after_lines=1)
    a, b = session.face_print("fa", face(4)), session.face_print("fb", face(5))
    speaker, _ = session.voice_print("v", voice(4), ["fa", "fb"])
    assert speaker is not a and speaker is not b
    assert say(session, a, "My name is Ann.", "more") == [NextStep.NOTHING] * 2
    assert store.people() == []


def test_always_enrols_at_the_first_print_as_for_a_signed_study(store):
    session = Persons(store, EnrolPolicy.ALWAYS)
    p = session.face_print("fd", face(6))
    assert p.known
    [stored] = store.people()
    assert stored.consent.way is ConsentWay.ALWAYS and stored.person_id == p.person_id


def test_forget_me_leaves_a_stranger_who_is_not_asked_again(store):
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=1)
    p = session.face_print("fe", face(7))
    say(session, p, "I'm Eve")
    eve = session.consent_answer(p.person_id, True)
    assert say(session, eve, "Please forget me.") == [NextStep.CONFIRM_FORGET]
    assert session.forget(eve.person_id) == [eve.person_id]
    assert store.people() == []
    now = session.people[session.face_of["fe"]]
    assert now.anonymous and now.name == "" and now.consent is ConsentState.DECLINED
    assert now.prints() == []
    assert Persons(store).face_print("fx", face(7, 2)).anonymous


def test_requests_about_unknown_people_are_clear_errors(store):
    session = Persons(store)
    with pytest.raises(IdentityError, match="no person 'person_nobody'"):
        session.enrol("person_nobody", "X", Consent(ConsentWay.APPLICATION))
    p = session.voice_print("v", voice(1), [])[0]
    no_store = Persons(None)
    q = no_store.face_print("f", face(1))
    with pytest.raises(IdentityError, match="no people store"):
        no_store.enrol(q.person_id, "X", Consent(ConsentWay.APPLICATION))
    assert session.enrol(p.person_id, "Vic", Consent(ConsentWay.APPLICATION)).startswith(
        "person_")


def test_a_gallery_names_the_nearest_within_the_threshold_and_pools_a_track():
    rule = RULES[Modality.FACE]
    gallery = Gallery(rule, [("p1", face(1).vector), ("p2", face(2).vector)])
    assert gallery.best(face(1, 3).vector).person_id == "p1"
    assert gallery.best(face(9).vector) is None
    assert rule.confidence(rule.threshold) == pytest.approx(0.5)
    pool = PooledPrint()
    for shot in range(12):
        pool.add(face(1, shot))
    assert len(pool.prints) == PooledPrint.KEEP and pool.count == 12
    assert rule.distance(pool.mean, person_vector(1, 128, 0.07)) < rule.distance(
        face(1, 0).vector, person_vector(1, 128, 0.07))


@pytest.mark.parametrize("line, name", [
    ("My name is Ada.", "Ada"), ("my name is ada lovelace", "Ada"),
    ("Hi, I'm Grace Hopper and I work here", "Grace Hopper"), ("Call me Ishmael.", "Ishmael"),
    ("I'm fine, thanks.", ""), ("I'm looking for the lift", ""), ("I am not sure", ""),
    ("What's your name?", ""), ("My name is not important", ""),
])
def test_names_people_give_for_themselves(line, name):
    assert name_in(line) == name


@pytest.mark.parametrize("line, forget", [
    ("Forget me, please.", True), ("Can you delete my face?", True),
    ("Please don't remember me", True), ("Remove my data", True),
    ("Don't forget me!", False), ("I forget my keys", False), ("Remember me", False),
])
def test_forget_me_in_a_persons_words(line, forget):
    assert asks_to_be_forgotten(line) is forget


def test_a_lines_clip_is_cut_from_the_microphone_ring_and_waits_for_late_audio():
    import threading

    from vision_dialogue.application.identity.voice_clips import AudioRing, seconds_for
    ring = AudioRing(keep_s=5.0)
    rate = 16000
    tone = (np.arange(rate) % 100).astype(np.int16)             # one second per chunk
    for second in range(3):
        ring.add(second * 10 ** 9, tone + second, rate)
    clip = ring.clip(3 * 10 ** 9, 1.5)                           # the last 1.5 s
    assert len(clip) == int(1.5 * rate) and clip[-1] == tone[-1] + 2
    assert ring.clip(10 * 10 ** 9, 1.0).size == 0                # nothing heard then
    assert seconds_for("yes") == 1.5 and seconds_for("word " * 100) == 12.0
    late = threading.Timer(0.2, lambda: ring.add(3 * 10 ** 9, tone, rate))
    late.start()
    assert ring.wait_for(4 * 10 ** 9, timeout=10.0)             # the last chunk came late
    late.join()
    assert not ring.wait_for(9 * 10 ** 9, timeout=0.1)
    ring.add(20 * 10 ** 9, tone, rate)                           # older than keep_s: gone
    assert ring.clip(3 * 10 ** 9, 3.0).size == 0


def test_a_speakers_label_keeps_their_lines_and_the_name_said_before_they_could_be_told(store):
    """Two in view: "I am Ben" is nobody's yet; alone, Ben's label makes it his.

    Then Anna's label stays hers though two are in view again.
    """
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=3)
    anna = session.face_print("face_a", face(1))
    ben = session.face_print("face_b", face(2))
    assert session.speaker(["face_a", "face_b"], "Ben") is None        # two in view
    session.unplaced_line("Hello, I am Ben. Did you see me wave?", "Ben")
    session.face_gone("face_a")                                        # Anna left
    assert session.speaker(["face_b"], "Ben") is ben
    assert say_as(session, ben, "Ben", "Who is here now?") == NextStep.ASK_CONSENT
    assert ben.name == "Ben" and anna.name == ""
    anna = session.face_print("face_a2", face(1))                      # back: a new track
    assert session.speaker(["face_a2"], "Anna") is anna
    assert session.speaker(["face_a2", "face_b"], "Anna") is anna      # her label, two in view
    assert session.speaker(["face_a2", "face_b"], "") is None          # no label: nobody
    session.unplaced_line("I am Carl.", "")                            # no label: no name kept
    assert say_as(session, anna, "", "Hi.") == NextStep.NOTHING and anna.name == ""


def say_as(persons: Persons, person, label: str, line: str) -> NextStep:
    return persons.heard_line(person, line, label)


def test_a_face_in_view_without_its_print_yet_makes_the_speaker_unknown(store):
    session = Persons(store, EnrolPolicy.ASK)
    anna = session.face_print("face_a", face(1))
    assert session.speaker(["face_a"]) is anna
    assert session.speaker(["face_a", "face_b"]) is None       # Ben came; no print of his yet
    assert session.speaker(["face_a", "face_b"], "Ben") is None
    ben = session.face_print("face_b", face(2))
    assert session.speaker(["face_b"], "Ben") is ben


def test_a_name_said_before_the_one_face_in_views_print_is_theirs_when_it_comes(store):
    """A name said while the one face in view waits for its print is theirs once it comes.

    Anna is then asked; with two faces in view the name waits for a later line.
    """
    session = Persons(store, EnrolPolicy.ASK, ask_after_lines=3)
    assert session.speaker(["face_a"], "Anna") is None                 # no print yet
    session.unplaced_line("Hi robot, I am Anna.", "Anna", ["face_a"])
    assert session.name_waiting("face_a") is None                       # still no print
    anna = session.face_print("face_a", face(1))
    assert session.name_waiting("face_a") == (anna, "Anna")
    assert session.heard_line(anna, "", "Anna") == NextStep.ASK_CONSENT and anna.name == "Anna"
    assert session.speaker(["face_a", "face_b"], "Anna") is anna       # her label from now on
    assert session.name_waiting("face_a") is None                       # once
    session.unplaced_line("I am Ben.", "Ben", ["face_a", "face_b"])    # two in view: not his
    ben = session.face_print("face_b", face(2))
    assert session.name_waiting("face_b") is None and ben.name == ""
