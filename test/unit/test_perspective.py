"""The robot's side of a reply (core/perspective.py): echoed pronouns turned round, no more."""
from __future__ import annotations

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.conversation_types import LineNote
from vision_dialogue.core.perspective import Person, from_own_side, persons_in_order, \
    question_person
from vision_dialogue.core.persona import load_persona


@pytest.mark.parametrize("question, reply, said", [
    # the 1.5B's echoes on the perspective battery
    ("Am I holding a cup of coffee?", "No, I am not holding a cup of coffee.",
     "No, you are not holding a cup of coffee."),
    ("Is there a flag behind me?", "No, there is no flag behind me.",
     "No, there is no flag behind you."),
    ("Is there a cup in front of you?", "No, there is no cup in front of you.",
     "No, there is no cup in front of me."),
    ("What am I wearing?", "I am wearing an orange space suit.",
     "You are wearing an orange space suit."),
    ("Is my suit orange?", "Yes, my suit is orange.", "Yes, your suit is orange."),
    ("Are you tired?", "No, you are not tired.", "No, I am not tired."),
    ("Hello. Is your name Pepper?", "Yes, your name is Pepper.", "Yes, my name is Pepper."),
    ("Do you like cats?", "No, you do not.", "No, I do not."),
    ("Am I late?", "Yes, you are. And I am sorry, I am late too.",
     "Yes, you are. And I am sorry, I am late too."),
    # both persons, in the question's order: the question's own words, turned round whole
    ("Am I still in front of you?", "Yes, I am still in front of you.",
     "Yes, you are still in front of me."),
    ("Can you see me?", "Yes, you can see me.", "Yes, I can see you."),
    ("Do you like my outfit?", "Yes, you like my outfit.", "Yes, I like your outfit."),
    # already the robot's side, or not an echo: left as they are
    ("Are you tired?", "No, I am not tired.", "No, I am not tired."),
    ("Do I look tired?", "No, I think you look fresh.", "No, I think you look fresh."),
    ("Am I late?", "I am not sure, but it is early.", "I am not sure, but it is early."),
    ("Can you see me?", "Yes, I can see you.", "Yes, I can see you."),
    ("Do you like my outfit?", "No, I do not like your outfit.",
     "No, I do not like your outfit."),
    ("Am I in front of you?", "Yes, and I am happy you came.",
     "Yes, and I am happy you came."),
    ("Do you like coffee?", "Yes, and you should try it.", "Yes, and you should try it."),
    ("Hello there!", "Hello, I am glad you came.", "Hello, I am glad you came."),
    ("Show me the edges", "I drew the edges.", "I drew the edges."),
])
def test_an_echoed_question_is_said_from_the_robots_side(question, reply, said):
    assert from_own_side(reply, question) == said


def test_whose_pronouns_a_question_uses():
    assert question_person("Am I smiling?") is Person.FIRST
    assert question_person("Do you like cats?") is Person.SECOND
    assert question_person("Do you like my outfit?") is None
    assert question_person("Is it raining?") is None
    assert persons_in_order("Am I still in front of you?") == (Person.FIRST, Person.SECOND)
    assert persons_in_order("Can you see me and my cup?") == (Person.SECOND, Person.FIRST)
    assert persons_in_order("Is it raining?") == ()


def test_the_reply_the_person_hears_is_turned_round():
    """Wired into every reply: what is spoken and kept is the robot's side."""
    be = FakeChatBackend(supports_images=False,
                         responder=lambda m, k: "No, I am not holding a cup of coffee.")
    conv = Conversation(be, load_persona(), ConversationConfig(),
                        observer=lambda bgr: "one person, close, in the middle")
    try:
        conv.add_frame(np.full((60, 80, 3), 120, np.uint8))
        result = conv.turn("Am I holding a cup of coffee?")
    finally:
        conv.close()
    assert result.text == "No, you are not holding a cup of coffee."


def test_a_fact_the_person_told_said_in_their_words_is_theirs():
    """A reply saying the person's fact in their words ("I run marathons") says it as theirs."""
    told = 'You have met Dana before. Dana told you: "I run marathons"; "I like green tea".'
    assert from_own_side("I run marathons.", "What sport do I do?", told) == \
        "You run marathons."
    assert from_own_side("I run marathons.", "What sport do I do?") == "I run marathons."
    # the robot's own words, not the person's: kept
    assert from_own_side("I think so.", "What sport do I do?", told) == "I think so."
    assert from_own_side("I like tea.", "Do you like tea?", told) == "I like tea."


def test_a_remembered_fact_told_back_in_the_persons_words_is_turned_round_in_a_reply():
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: "I run marathons.")
    conv = Conversation(be, load_persona(), ConversationConfig())
    conv.remember_with(lambda: 'You have met Dana before. Dana told you: "I run marathons".',
                       lambda line, late: LineNote())
    try:
        result = conv.turn("What sport do I do?")
    finally:
        conv.close()
    assert result.text == "You run marathons."


def test_a_remembered_fact_asked_for_again_is_told_again_not_dropped_as_a_repeat():
    """Asked about a fact again in other words, the same answer is the right one."""
    replies = iter(["You work at the city hospital."] * 3 + ["I am not sure."])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    conv = Conversation(be, load_persona(), ConversationConfig())
    known = ['You have met Fay before. Fay told you: "I work at the city hospital".']
    conv.remember_with(lambda: known[0], lambda line, late: LineNote())
    try:
        assert conv.turn("What is my job?").text == "You work at the city hospital."
        assert conv.turn("Where is my workplace?").text == "You work at the city hospital."
        assert conv.replies.repeats_avoided == 0 and len(be.of_kind("reply")) == 2
        known[0] = ""                         # not something they told: a repeat, asked again
        assert conv.turn("Where is my workplace?").text == "I am not sure."
        assert conv.replies.repeats_avoided == 1
    finally:
        conv.close()
