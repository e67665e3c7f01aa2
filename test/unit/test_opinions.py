"""core/opinions.py: an answer on the robot's likes that takes the other side of its own line."""
from __future__ import annotations

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.opinions import asks_liking, contradicted, stance
from vision_dialogue.core.persona import load_persona

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
        assert note == load_persona().consistent_note.format(stance="like")
        assert "orange" not in note          # not quoted: a small model would copy it
    finally:
        c.close()
