"""Who is there and who speaks: speakers in the prompt, tracked people, arrivals and departures."""
from __future__ import annotations

import json

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.entries import PersonEntry
from vision_dialogue.core.people import Presence, TrackedPerson, describe_people
from vision_dialogue.core.persona import load_persona


def test_people_in_words_left_to_right_with_distance_and_emotion():
    people = [TrackedPerson("5", x=-0.8, z=2.0),
              TrackedPerson("3", x=0.1, z=1.2, emotion="Happy"),
              TrackedPerson("7", x=0.9, z=1.5, emotion="neutral")]
    assert describe_people(people) == ("user 7 to your left, 1.5 m away; "
                                       "user 3 in front of you, 1.2 m away, looking happy; "
                                       "user 5 to your right, 2.0 m away")
    assert describe_people([]) == ""


def test_arrivals_at_once_departures_after_the_grace_time():
    t = [0.0]
    p = Presence(grace_s=3.0, clock=lambda: t[0])
    assert p.update(["1"]) == (["1"], [])
    t[0] = 1.0
    assert p.update(["1", "2"]) == (["2"], [])
    t[0] = 2.0
    assert p.update(["2"]) == ([], [])           # 1 lost for a moment: not gone yet
    t[0] = 5.0
    assert p.update(["2"]) == ([], ["1"]) and p.count == 1


def conv(be):
    return Conversation(be, load_persona(), ConversationConfig(n=4, m=3))


def test_with_two_speakers_lines_are_labelled_and_the_reply_addressed():
    be = FakeChatBackend()
    c = conv(be)
    try:
        c.turn("Hello robot.", speaker="Anna")
        c.turn("And me? I am here too.", speaker="Ben")
        msgs = be.of_kind("reply")[-1][1]
        text = json.dumps(msgs)
        assert "[Anna] Hello robot." in text and "[Ben] And me? I am here too." in text
        assert msgs[-1] == {"role": "system", "content": "[Answer Ben.]"}
    finally:
        c.close()


def test_one_named_speaker_is_called_by_name_and_a_role_is_not_a_name():
    """One named speaker is called by name and a role is not a name.

    The only person speaking, named "Zebulon", reaches the LLM by name; "visitor" (the script's
    default), "anonymous_speaker" (ROS4HRI) and tracker ids do not.
    """
    from vision_dialogue.core.people import is_a_name
    for speaker, labelled in (("visitor", False), ("Zebulon", True)):
        be = FakeChatBackend()
        c = conv(be)
        try:
            c.turn("Hello robot.", speaker=speaker)
            c.turn("Do you know my name?", speaker=speaker)
            msgs = be.of_kind("reply")[-1][1]
        finally:
            c.close()
        assert (f"[{speaker}] Hello robot." in json.dumps(msgs)) is labelled
        assert (msgs[-1] == {"role": "system", "content": f"[Answer {speaker}.]"}) is labelled
    assert [is_a_name(s) for s in ("Zebulon", "Anna Lee", "visitor", "User", "",
                                   "anonymous_speaker", "voice_7f3a", "3")] == \
        [True, True, False, False, False, False, False, False]


def test_tracked_people_reach_the_prompt_and_their_comings_and_goings_the_events():
    be = FakeChatBackend()
    c = conv(be)
    events = []
    c.add_listener(events.append)
    try:
        c.set_people("user 3 in front of you, 1.2 m away, looking happy", arrived=["3"])
        c.turn("Hi!")
        msgs = be.of_kind("reply")[-1][1]
        assert msgs[1] == {"role": "system", "content": "[People your camera tracks now: user 3 "
                                                        "in front of you, 1.2 m away, looking "
                                                        "happy.]"}
        c.set_people("", left=["3"])
        c.turn("Still there?")
        assert "camera tracks" not in json.dumps(be.of_kind("reply")[-1][1])
        people = [e for e in events if isinstance(e, PersonEntry)]
        assert people == [PersonEntry("arrived", "3"), PersonEntry("left", "3")]
    finally:
        c.close()


def test_the_opening_remark_greets_the_people_a_person_manager_named_by_name():
    """A known person in view (people_node named them) is greeted by name; a stranger is not.

    "someone" (a person the manager has not named) and a tracker's id are not names.
    """
    from vision_dialogue.core.people import PeopleInView
    be = FakeChatBackend()
    c = conv(be)
    try:
        people = PeopleInView(c)
        people.update([TrackedPerson("p1", name="someone"), TrackedPerson("7")], named=True)
        c.remark()
        stranger = json.dumps(be.of_kind("reply")[-1][1])
        assert "Now say hello to the person in front of you" in stranger
        people.update([TrackedPerson("p1", name="Barack"), TrackedPerson("7")], named=True)
        c.remark()
        known = json.dumps(be.of_kind("reply")[-1][1])
        assert "Greet Barack by name" in known, known
        people.update([TrackedPerson("p1", name="Barack"), TrackedPerson("p2", name="Ada")],
                      named=True)
        c.remark()
        assert "Greet Barack and Ada by name" in json.dumps(be.of_kind("reply")[-1][1])
    finally:
        c.close()


def test_a_greeting_that_came_empty_is_asked_for_again_with_its_instruction_last():
    """The 0.5B once ended a known person's greeting at once; the sampled retry left his name out.

    (An empty reply to the person's line is asked again as it was: test_focus_and_repeats.)
    """
    from vision_dialogue.core.people import PeopleInView
    replies = iter(["", "Hello again, Barack!"])
    be = FakeChatBackend(responder=lambda m, k: next(replies) if k == "reply" else "ok")
    c = conv(be)
    try:
        PeopleInView(c).update([TrackedPerson("p1", name="Barack")], named=True)
        assert c.remark().text == "Hello again, Barack!"
        first, again = [msgs for _kind, msgs, _kw in be.of_kind("reply")]
        assert again[:-1] == first
        assert again[-1]["content"].startswith("Greet Barack by name"), again[-1]
    finally:
        c.close()


def test_a_known_person_is_greeted_by_name_whatever_the_llm_said():
    """The 0.5B greeted Barack as "Hello! I'm a robot, not a real person." (a suite run)."""
    from vision_dialogue.core.people import PeopleInView
    from vision_dialogue.core.persona import addressed
    assert addressed("Hello!", ["Barack"]) == "Hello, Barack!"
    assert addressed("Hi there.", ["Barack", "Ada"]) == "Hi, Barack and Ada!"
    assert addressed("Nice to see you again, barack.", ["Barack"]) == \
        "Nice to see you again, barack."
    assert addressed("I'm here to help.", ["Barack"]) == "Hello, Barack! I'm here to help."
    replies = iter(["Hello! I'm a robot, not a real person.", "Hi! Nice to see you."])
    be = FakeChatBackend(responder=lambda m, k: next(replies) if k == "reply" else "ok")
    c = conv(be)
    try:
        people = PeopleInView(c)
        people.update([TrackedPerson("p1", name="Barack")], named=True)
        assert c.remark().sentences == ["Hello, Barack!", "I'm a robot, not a real person."]
        people.update([TrackedPerson("p1", name="someone")], named=True)
        assert c.remark().text == "Hi! Nice to see you."     # a stranger: as the LLM said
        be.fail["reply"] = 1                            # the fallback names him too
        people.update([TrackedPerson("p1", name="Barack")], named=True)
        res = c.remark()
        assert res.fallback and "Barack" in res.text, res.text
    finally:
        c.close()


def test_the_report_holds_who_is_there_now_and_presence_keeps_a_leaver_a_while():
    """A person just enrolled changes id: the report has one, presence both for a grace.

    (A departure is told once the grace is past.) A stale report holds nobody.
    """
    from vision_dialogue.core.people import PeopleInView
    clock = [100.0]
    c = conv(FakeChatBackend())
    try:
        people = PeopleInView(c, clock=lambda: clock[0])
        people.update([TrackedPerson("anonymous_person_x")], named=True)
        people.update([TrackedPerson("person_abc", name="Barack")], named=True)
        assert people.reported() == ["person_abc"]
        assert people.presence.ids() == {"anonymous_person_x", "person_abc"}
        clock[0] += 60.0
        assert people.reported() == [] and people.count() is None
    finally:
        c.close()
