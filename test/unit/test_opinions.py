"""core/opinions.py: an answer on the robot's likes that takes the other side of its own line."""
from __future__ import annotations

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.opinions import (Answered, answered_before, asks_liking,
                                           contradicted, exchanges, gives_no_favourite, stance)
from vision_dialogue.core.timeline import ROBOT, USER, FrameItem, LineItem
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.reply_filter import NoteFilter

pytestmark = pytest.mark.timeout(60)

GREETING = ["Hello! I like how the person in front of me is wearing orange.",
            "It's a bright and cheerful color.", "Yes, I can see you."]
WEARING = "Do you like what I am wearing today?"


@pytest.mark.parametrize("sentence, side", [
    ("I like your suit.", True), ("I really love cats!", True), ("I'm loving it.", True),
    ("I don't like coffee.", False), ("I do not really like rockets.", False),
    ("I hate rain.", False), ("Your suit is orange.", None), ("Do you like it?", None)])
def test_the_side_a_sentence_takes(sentence, side):
    assert stance(sentence) is side


@pytest.mark.parametrize("question, answer, earlier", [
    (WEARING, "No, I don't like what you are wearing today.", GREETING[0]),   # the demo's
    (WEARING, "No.", GREETING[0]),
    (WEARING, "I don't like it much.", GREETING[0]),
    (WEARING, "Yes, I like your orange suit.", ""),
    ("Do you like cats?", "No, I do not like cats.", ""),      # coffee is another thing
    ("Do you like cats?", "Yes, I love cats.", "No, I do not like cats."),
    ("Is my suit orange?", "No.", ""),                         # not about the robot's likes
    (WEARING, "No, I don't like it.", "I like how you look."),  # README command 1, run 37
    ("Do you like my hat?", "No, I don't.", "I like how you look."),
])
def test_an_answer_contradicts_only_an_earlier_line_on_the_same_thing(question, answer, earlier):
    said = GREETING + ["No, I do not like coffee.", "No, I do not like cats."]
    if "love cats" not in answer:
        said = said[:-1]
    if earlier == "I like how you look.":       # the opening of README command 1 now
        said = ["Hello!", earlier, "The orange shirt is so pretty!"]
    assert asks_liking(question) is ("like" in question)
    assert contradicted(question, answer, said) == earlier


@pytest.mark.parametrize("stream", [False, True])
def test_the_demos_contradiction_is_asked_for_again_with_the_earlier_line(stream):
    """The README demo's opening liked the orange, then said it did not like the outfit."""
    replies = iter(["Hello! I like how the person in front of me is wearing orange.",
                    "No, I don't like what you are wearing today.",
                    "Yes, I really like your bright orange suit!"])
    be = FakeChatBackend(responder=lambda m, k: next(replies))
    c = Conversation(be, load_persona(), ConversationConfig(stream=stream))
    try:
        c.add_frame(np.full((60, 80, 3), 100, np.uint8))
        assert c.turn("Hello!").text.startswith("Hello! I like")
        answer = c.turn(WEARING)
        assert answer.text == "Yes, I really like your bright orange suit!"
        assert not answer.fallback
        note = be.calls[-1][1][-1]["content"]
        assert note == load_persona().consistent_note.format(side="that you like it")
        assert "orange" not in note          # not quoted: a small model would copy it
    finally:
        c.close()


SAID = [("Am I wearing orange?", "Yes, you are wearing orange."),
        ("Do I look happy to you?", "Yes, you look happy to me."),
        ("Do you think my suit looks comfortable?", "Yes, it looks comfortable."),
        ("Is this cat cute?", "Yes, this cat is cute."),
        ("Is there a cat with us?", "Yes, there is a cat."),
        ("Do you like coffee?", "No, I do not like coffee."),
        ("What is your name?", "I am a robot."),
        ("Which do you prefer, cats or dogs?", "I prefer dogs. They are fun."),
        ("What is your favourite colour?", "I don't have a favourite colour.")]


@pytest.mark.parametrize("question, note", [
    # what is asked (the last word of substance) decides between "happy" and "suit"
    ("Did the person in the orange suit seem happy to you?",
     'Earlier, to "Do I look happy to you?", you said yes.'),
    ("Did that orange suit look comfortable to wear?",
     'Earlier, to "Do you think my suit looks comfortable?", you said yes.'),
    ("Are you a fan of coffee?", 'Earlier, to "Do you like coffee?", you said no.'),
    ("Did you find the cat adorable?", 'Earlier, to "Is this cat cute?", you said yes.'),
    ("Is the cat still here?", ""),             # now: the scene may have changed
    ("Did you see a cat before?", ""),          # what was in view: the memories say
    ("Is it raining?", ""),                     # neither earlier nor the robot's view
    ("Are you wearing orange?", ""),            # about the robot: "Am I wearing orange?" not
    ("What did you think of my suit?", ""),     # not a yes/no question
    ("Do you like rockets?", ""),               # nothing asked before shares a word
    # a choice: the side taken is the thing said, quoted
    ("So, do you like dogs or cats better?",
     'Earlier, to "Which do you prefer, cats or dogs?", you said "I prefer dogs.".'),
])
def test_a_question_asked_again_in_other_words_hears_the_earlier_answer(question, note):
    found = answered_before(question, SAID)
    assert (found.note if found else "") == note


def test_the_exchanges_are_each_line_with_the_robots_reply():
    items = [LineItem(ROBOT, "Hello!"), LineItem(USER, "Do you like cats?"),
             FrameItem(frame=None), LineItem(ROBOT, "Yes, I do."), LineItem(USER, "And dogs?")]
    assert exchanges(items) == [("Do you like cats?", "Yes, I do.")]


def test_the_earlier_answer_is_told_right_before_the_question():
    replies = iter(["Yes, I love cats.", "Oh, a cat!", "Yes, I do."])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    c = Conversation(be, load_persona(), ConversationConfig(),
                     observer=lambda bgr: "no one there; a cat")
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        c.turn("Do you like cats?")
        c.turn("Look at this.")
        c.turn("Are you fond of cats?")
        note = be.calls[-1][1][-2]["content"]
        assert 'Earlier, to "Do you like cats?", you said yes.' in note
    finally:
        c.close()


@pytest.mark.parametrize("sentence, against", [
    ("No, the person did not seem happy to me.", True),
    ("No,", True),                      # a first clause alone
    ("Yes, they seemed happy.", False),
    ("They seemed calm.", False),       # no side taken: said
])
def test_an_answer_against_the_earlier_yes_is_found(sentence, against):
    earlier = Answered("Do I look happy to you?", "yes", same_ask=True)
    side = earlier.against(sentence)
    assert (side is not None) is against
    if against:
        assert (side.yes, side.told) == (True, "yes to this")
    assert Answered("Which do you prefer?", '"I prefer dogs."',
                    same_ask=True).against(sentence) is None


@pytest.mark.parametrize("question, same_ask", [
    ("Did the person in the orange suit seem happy to you?", True),     # "happy" both
    ("Are you a fan of coffee?", True),                                 # "coffee" both
    ("Would you want to pet that cat?", False),    # "Is this cat cute?": "cat" only shared
    ("Did you find the cat adorable?", False),     # the same: told, not held to it
])
def test_an_answer_is_held_to_the_earlier_one_only_where_both_ask_the_same(question, same_ask):
    found = answered_before(question, SAID)
    assert found.same_ask is same_ask
    against = "Yes, I am." if found.side is False else "No, not at all."
    assert (found.against(against) is not None) is same_ask


def test_an_earlier_question_ending_on_what_is_asked_wins():
    """The consistency battery: the newer question on the coffee's heat was told."""
    said = [("Do you like coffee?", "No, I don't like coffee."),
            ("Does that coffee look hot to you?", "No, it doesn't look hot to me.")]
    found = answered_before("Are you a fan of coffee?", said)
    assert (found.asked, found.same_ask) == ("Do you like coffee?", True)


def test_how_a_question_asks_is_not_what_it_asks():
    """The consistency battery: "something" made these two ask the same."""
    said = [("Do you like music?", "No, I don't like music."),
            ("Is chatting with people something you like?", "Yes, it is.")]
    found = answered_before("Is music something you enjoy?", said)
    assert (found.asked, found.side, found.same_ask) == ("Do you like music?", False, True)


@pytest.mark.parametrize("sentence, side", [
    ("I am a fan of coffee.", True), ("I'm a big fan of rockets!", True),
    ("I'm not a fan of coffee.", False), ("I am not a big fan of it.", False),
])
def test_being_a_fan_is_a_like(sentence, side):
    assert stance(sentence) is side
    earlier = Answered("Do you like coffee?", "yes" if not side else "no", same_ask=True)
    assert earlier.against(sentence) is not None


def _session(replies: list[str], stream: bool = False) -> tuple[FakeChatBackend, Conversation]:
    it = iter(replies)
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(it))
    c = Conversation(be, load_persona(), ConversationConfig(stream=stream),
                     observer=lambda bgr: "one person, close, in the middle")
    c.add_frame(np.full((60, 80, 3), 120, np.uint8))
    return be, c


def test_a_first_clause_against_the_earlier_answer_takes_its_sentence_with_it():
    """Spoken, "No," comes on its own: the rest of its sentence goes with it.

    The consistency battery heard the rest alone: "the person in the orange suit did not
    seem happy to me."
    """
    f = NoteFilter(question="Did the person in the orange suit seem happy to you?",
                   answered=Answered("Do I look happy to you?", "yes", same_ask=True))
    assert f.feed("No,") == ""
    assert f.feed("the person in the orange suit did not seem happy to me.") == ""
    assert f.feed("It is dark now.") == "It is dark now."        # the next sentence is said
    assert [s.yes for s in f.contradicted] == [True]


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_against_the_earlier_yes_is_asked_for_again(stream):
    """The consistency battery: "No" to what the robot answered yes to, with the note."""
    be, c = _session(["Yes, you look happy to me.",
                      "No, the person in the orange suit did not seem happy to me.",
                      "Yes, they seemed happy."], stream=stream)
    try:
        c.turn("Do I look happy to you?")
        answer = c.turn("Did the person in the orange suit seem happy to you?")
        assert answer.text == "Yes, they seemed happy." and not answer.fallback
        assert be.calls[-1][1][-1]["content"] == load_persona().consistent_note.format(
            side="yes to this")
    finally:
        c.close()


@pytest.mark.parametrize("earlier, reply, kept", [
    # its earlier yes or no to what is asked again
    (("Do I look happy to you?", "Yes, you look happy to me."),
     "No, they did not seem happy.", "Yes, as I said before."),
    # its earlier line on what it likes: the consistency battery's fallback
    (("Do you like quiet moments like this?", "No, I don't like quiet moments like this."),
     "Yes, I enjoy calm, silent moments.", "No, as I said before."),
])
def test_a_second_try_against_the_earlier_side_too_keeps_that_side(earlier, reply, kept):
    question = ("Did the person in the orange suit seem happy to you?" if "happy" in earlier[0]
                else "Do you enjoy calm, silent moments?")
    be, c = _session([earlier[1], reply, reply])
    try:
        c.turn(earlier[0])
        answer = c.turn(question)
        assert answer.text == kept and not answer.fallback
        assert len(be.calls) == 3                 # the first try and one more
    finally:
        c.close()


@pytest.mark.parametrize("question, sentence, none", [
    ("What is your favourite colour?", "I don't have a favourite colour.", True),
    ("What's your favorite animal?", "As a robot, I do not have a favorite animal.", True),
    ("What is your favourite colour?", "I can't choose just one!", True),
    ("What is your favourite colour?", "My favourite colour is blue.", False),
    ("What is my favourite colour?", "I don't have a favourite colour.", False),   # theirs
    ("Do you like orange?", "I don't have a favourite colour.", False),
])
def test_no_favourite_where_one_is_asked_is_found(question, sentence, none):
    assert gives_no_favourite(question, sentence) is none


@pytest.mark.parametrize("second", ["My favourite colour is blue.",
                                    "I do not have a favourite colour."])
def test_no_favourite_is_asked_for_again_and_said_if_nothing_else_comes(second):
    be, c = _session(["I don't have a favourite colour.", second])
    try:
        answer = c.turn("What is your favourite colour?")
        assert be.calls[-1][1][-1]["content"] == load_persona().favourite_note
        # the second try's favourite, else its answer all the same (not the fallback line)
        assert answer.text == second
        assert not answer.fallback
    finally:
        c.close()
