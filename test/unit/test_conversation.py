"""Conversation.

Prompt order, image sizes in the prompt, persona notes, text-only frames, streaming, fallback,
transcript.
"""
import base64
import json
import logging
import time

import cv2
import numpy as np
import pytest
from skimage import data

from fake_chat_backend import FakeChatBackend
from vision_dialogue.llm.base import BackendError
from vision_dialogue.core.conversation import Conversation, ConversationConfig, clean_reply
from vision_dialogue.common.images import ImagePolicy
from vision_dialogue.core.persona import PersonaError, load_persona
from vision_dialogue.core.transcript import TranscriptWriter, read_transcript


def photo(which=data.astronaut):
    return cv2.resize(np.ascontiguousarray(which()[:, :, ::-1]), (640, 480))


def dims(part):
    raw = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    return cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR).shape[:2]


def conv(be, **cfg):
    return Conversation(be, load_persona(), ConversationConfig(**cfg))


def test_a_reply_that_reads_an_instruction_out_is_not_spoken():
    """The tools' notes and the standing notes (a Chat's purpose) are instructions too.

    A small model read look-back's note out in the demo on llama.cpp's server ("When the person
    asks about something you saw earlier ... call look_back"): the sentence is dropped and the
    rest of the reply is said.
    """
    from vision_dialogue.core.lookback import LOOK_BACK_NOTE
    replies = iter([LOOK_BACK_NOTE + " Yes, I saw a cup on the table.",
                    "Your purpose is to find out the visitor's name. Hello!"])
    c = conv(FakeChatBackend(responder=lambda msgs, kind: next(replies)))
    try:
        c.add_frame(photo(data.coffee))
        c.builder.notes["purpose"] = "Your purpose is to find out the visitor's name."
        assert c.turn("Did you see a cup?").text == "Yes, I saw a cup on the table."
        assert c.turn("Hi.").text == "Hello!"
    finally:
        c.close()


def test_prompt_order_and_newest_frame_full_size():
    be = FakeChatBackend()
    c = conv(be, policy=ImagePolicy(newest_max_side=320, older_max_side=128, detail="auto"))
    try:
        c.add_frame(photo())
        c.add_frame(photo(data.coffee))
        c.turn("Hi, who are you?")
        c.add_frame(photo(data.chelsea))
        c.turn("What now?")
        msgs = be.of_kind("reply")[-1][1]
        roles = [m["role"] for m in msgs]
        assert roles == ["system", "user", "assistant", "user"]
        first, last = msgs[1]["content"], msgs[3]["content"]
        # frames 1, 2 then the first utterance, in one user message
        assert [p["type"] for p in first] == ["image_url", "image_url", "text"]
        assert first[2]["text"] == "Hi, who are you?"
        assert dims(first[0]) == (96, 128) and dims(first[1]) == (96, 128)   # older: small
        # the newest frame, labelled, at full configured size, then the new utterance
        assert [p["type"] for p in last] == ["text", "image_url", "text"]
        assert "your eyes" in last[0]["text"]
        assert dims(last[1]) == (240, 320) and last[1]["image_url"]["detail"] == "auto"
        assert last[2]["text"] == "What now?"
        assert msgs[2]["content"] == "Hello there. Lovely day!"
    finally:
        c.close()


def test_no_frames_and_dark_frames_keep_character():
    be = FakeChatBackend()
    c = conv(be)
    persona = c.persona
    try:
        c.turn("Hello?")
        msgs = be.of_kind("reply")[-1][1]
        # the note is part of the system message, not a trailing turn a model could read out
        assert msgs[0]["role"] == "system" and persona.no_frames_note.strip() in msgs[0]["content"]
        assert msgs[-1]["role"] == "user" and msgs[-1]["content"] == "Hello?"
        c.add_frame(np.full((480, 640, 3), 3, np.uint8))
        c.turn("And now?")
        msgs = be.of_kind("reply")[-1][1]
        assert persona.dark_frames_note.strip() in msgs[0]["content"]
        assert persona.no_frames_note.strip() not in msgs[0]["content"]
        c.add_frame(photo())
        c.turn("Better?")
        msgs = be.of_kind("reply")[-1][1]
        assert msgs[0]["content"] == persona.system.strip()   # no note once it can see
    finally:
        c.close()


def test_bracketed_notes_are_never_spoken():
    """Small models sometimes read out the prompt's [memory notes].

    They are filtered, also when a note spans several streamed sentences.
    """
    from vision_dialogue.core.reply_filter import NoteFilter, clean_reply

    assert clean_reply("[Your eyes are closed.] Hi! I like your hat 😀.") == "Hi! I like your hat."
    # stage directions and parenthesised notes are never spoken
    assert clean_reply("I see brown things (the person just left).") == "I see brown things."
    f = NoteFilter()
    spoken = [f.feed(s) for s in ["[Your eyes have not opened yet.", "Stay in character.]",
                                  "Hello there!", "[Earlier you saw: a cat] Nice cat."]]
    assert spoken == ["", "", "Hello there!", "Nice cat."]
    labelled = NoteFilter(["You saw:", "What you see now (your eyes):"])
    assert labelled.feed("You saw: a person in orange.") == "a person in orange."
    assert labelled.feed("what you see now (your eyes): a cat.") == "a cat."
    echo = NoteFilter(notes=["(Someone has just come in front of you. Open the conversation.)"])
    assert echo.feed("Someone has just come in front of you.") == ""
    assert echo.feed("Someone is in front of me!") == "Someone is in front of me!"
    assert NoteFilter(notes=["[It is dark. Do not talk about images.]"]).feed(
        "Do not talk about images.") == ""
    # an observation may be said in one's own words, but not read out whole
    seen = NoteFilter(observations=["one person, close, in the middle, wearing orange and black",
                                    "no one there; orange and brown things"],
                      said=["What do you like about it?", "Yes."])
    assert seen.feed("I see you in the middle, wearing orange and black.") == \
        "I see you in the middle, wearing orange and black."
    assert seen.feed("One person, close, in the middle, wearing orange and black.") == ""
    assert seen.feed("No one there; orange and brown things.") == ""
    assert seen.feed("Orange and brown things.") == "" and seen.feed("Orange things.") == \
        "Orange things."
    # a sentence the robot already said is not said again; short ones may be
    assert seen.feed("What do you like about it?") == ""
    assert seen.feed("Yes.") == "Yes."
    assert seen.feed("Do you like cats?") == "Do you like cats?"
    assert seen.feed("Do you like cats?") == ""
    # any short label a small model makes up goes too; a colon later in a sentence stays
    assert labelled.feed("You see: It is too dark.") == "It is too dark."
    assert labelled.feed("Robot: Hello!") == "Hello!"
    assert labelled.feed("I think that you really saw this: a cat.") == \
        "I think that you really saw this: a cat."
    be = FakeChatBackend(responder=lambda msgs, kind: "[Your eyes have not opened yet: you "
                         "cannot see. Stay calm.] Hello! What is your name?")
    c = conv(be)
    try:
        res = c.turn("Hello?")
        assert res.sentences == ["Hello!", "What is your name?"] and not res.fallback
    finally:
        c.close()


def test_summaries_wait_for_a_running_turn():
    """A summary that becomes due during a reply waits for the reply, then runs.

    A local model runs one generation at a time.
    """
    import threading
    gate = threading.Event()
    order = []

    class Backend(FakeChatBackend):
        def stream(self, messages, **kw):
            order.append("reply-start")
            gate.wait(5)
            order.append("reply-end")
            yield "Hi there."

        def complete(self, messages, **kw):
            order.append("summary")
            return "I saw a person."

    be = Backend()
    c = conv(be, n=2, m=1)
    try:
        t = threading.Thread(target=c.turn, args=("Hello?",))
        t.start()
        while "reply-start" not in order:
            time.sleep(0.005)
        c.add_frame(photo())
        c.add_frame(photo())          # n=2 frames: a summary is due now
        time.sleep(0.2)
        assert "summary" not in order
        gate.set()
        t.join(5)
        assert c.wait_idle(5)
        assert order == ["reply-start", "reply-end", "summary"]
    finally:
        c.close()


def test_text_only_backend_gets_observations():
    be = FakeChatBackend(supports_images=False)
    seen = []

    def observer(bgr):
        seen.append(bgr.shape)
        return f"a scene of mean {int(bgr.mean())}"

    # the paper's LLM summaries asked for explicitly (text-only models merge by default)
    c = Conversation(be, load_persona(), ConversationConfig(n=3, m=2, summary_mode="llm"),
                     observer=observer)
    try:
        c.add_frame(np.full((60, 80, 3), 100, np.uint8))
        c.add_frame(np.full((60, 80, 3), 200, np.uint8))
        c.turn("What do you see?")
        msgs = be.of_kind("reply")[-1][1]
        text = json.dumps(msgs)
        assert "image_url" not in text
        assert "Earlier you saw: a scene of mean 100" in text
        assert "your eyes): a scene of mean 200" in text
        assert isinstance(msgs[1]["content"], str)       # plain strings for text-only models
        c.add_frame(np.full((60, 80, 3), 50, np.uint8))   # summary on observations
        c.wait_idle(5)
        smsgs = be.of_kind("summary")[0][1]
        assert "a scene of mean 100" in json.dumps(smsgs) and "image_url" not in json.dumps(smsgs)
    finally:
        c.close()


def test_closing_leaves_the_observer_it_was_given_to_its_owner():
    """Benchmarks share one observer across conversations: closing one must not release it."""
    released = []

    class Observer:
        def __call__(self, bgr):
            return "a room"

        def close(self):
            released.append(True)

    c = Conversation(FakeChatBackend(supports_images=False), load_persona(),
                     ConversationConfig(), observer=Observer())
    c.add_frame(np.full((60, 80, 3), 90, np.uint8))
    c.close()
    assert released == []


def test_a_reply_reading_its_notes_out_is_said_in_the_robots_words():
    """A reply that reads an observation out verbatim is said in the robot's words.

    The observer's `speak` says it instead (without one, the sentence is dropped).
    """
    notes = {100: "no one there; orange and brown things", 200: "one person, close, on the left"}

    class Observer:
        def __call__(self, bgr):
            return notes[int(bgr.mean())]

        @staticmethod
        def speak(text, past):
            return ("Earlier: " if past else "Now: ") + text.split(";")[0] + "."

    replies = iter(["No one there; orange and brown things.", "Yes, I like it.",
                    "One person, close, on the left, I think."])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    c = Conversation(be, load_persona(), ConversationConfig(stream=False), observer=Observer())
    try:
        c.add_frame(np.full((60, 80, 3), 100, np.uint8))
        assert c.turn("What can you see?").text == "Now: no one there."
        assert c.turn("Do you like it?").text == "Yes, I like it."
        c.add_frame(np.full((60, 80, 3), 200, np.uint8))
        assert c.turn("And now?").text == "Now: one person, close, on the left."
    finally:
        c.close()


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_that_repeats_an_earlier_one_is_asked_for_again(stream):
    """A reply that only repeats earlier lines is asked for once more, sampled, with a note."""
    replies = iter(["No, I did not see a drink. Do you like tea?",
                    "No, I did not see any drink. Do you like tea?",  # a near repeat
                    "Maybe you had one before I woke up!"])
    be = FakeChatBackend(responder=lambda m, k: next(replies))
    heard = []
    c = conv(be, stream=stream)
    try:
        assert c.turn("Did you see a drink?").text == "No, I did not see a drink. Do you like tea?"
        second = c.turn("Did you see a drink?", on_sentence=lambda s, i, fallback=False:
                        heard.append(s))
        assert second.text == "Maybe you had one before I woke up!"
        assert not second.fallback and c.replies.repeats_avoided == 1
        assert heard == (["Maybe you had one before I woke up!"] if stream else [])
        retry_msgs, retry_kw = be.calls[-1][1], be.calls[-1][2]
        assert retry_kw["temperature"] > 0 and be.calls[-2][2]["temperature"] is None
        assert retry_msgs[-1] == {"role": "system", "content": load_persona().repeat_note}
    finally:
        c.close()


def test_a_repeat_is_said_when_asked_for_or_when_nothing_else_comes():
    """The person asks to hear it again: no second try; a second try that repeats: said."""
    line = "No, I did not see a drink. Do you like tea?"
    be = FakeChatBackend(responder=lambda m, k: line)
    c = conv(be, stream=False)
    try:
        assert c.turn("Did you see a drink?").text == line
        assert c.turn("Sorry, can you say that again?").text == line
        assert len(be.calls) == 2 and c.replies.repeats_avoided == 0
        again = c.turn("Did you see a drink?")
        assert again.text == line and not again.fallback          # better than a fallback
        assert len(be.calls) == 4 and c.replies.repeats_avoided == 1
    finally:
        c.close()


def test_a_repeat_is_said_when_the_second_try_is_dropped_too():
    """Second try read its notes out: the first try's repeat is said, not the fallback."""
    line = "No, I did not see a drink. Do you like tea?"
    replies = iter([line, line, "[Now: a person in orange, in the middle.]"])
    be = FakeChatBackend(responder=lambda m, k: next(replies))
    c = conv(be, stream=False)
    try:
        assert c.turn("Did you see a drink?").text == line
        again = c.turn("What did you see?")
        assert again.text == line and not again.fallback and len(be.calls) == 3
    finally:
        c.close()


def test_an_empty_reply_names_what_the_filter_dropped(caplog):
    """Both tries only read a note out: the fallback, and the error names the dropped lines."""
    from vision_dialogue.core.reply_filter import NoteFilter
    f = NoteFilter(notes=["Answer in one short sentence about the person in front of you."])
    assert f.feed("Answer in one short sentence about the person in front of you.") == ""
    assert f.echoes == 1 and f.dropped == [
        "Answer in one short sentence about the person in front of you."]
    note = "Do not read your notes out, answer the person in your own words."
    be = FakeChatBackend(responder=lambda m, k: note)
    c = conv(be, stream=False)
    try:
        with caplog.at_level(logging.ERROR):
            reply = c.turn("How are you?")
    finally:
        c.close()
    assert reply.fallback and len(be.calls) == 2
    assert f"empty reply (dropped: '{note} | {note}')" in caplog.text


def test_no_second_try_when_avoid_repeats_is_off():
    line = "No, I did not see a drink. Do you like tea?"
    be = FakeChatBackend(responder=lambda m, k: line)
    c = conv(be, stream=False, avoid_repeats=False)
    try:
        c.turn("Did you see a drink?")
        assert c.turn("Did you see a drink?").text == line and len(be.calls) == 2
    finally:
        c.close()


def test_a_reply_that_is_only_an_echo_of_a_memory_is_said_rather_than_a_fallback():
    """With no way to rephrase (no perception), a reply that only reads a summary is still said."""
    from vision_dialogue.core.reply_filter import NoteFilter
    f = NoteFilter(memories=["The person wore a dark suit and waved."])
    assert f.feed("The person wore a dark suit and waved.") == ""
    assert f.repeats == ["The person wore a dark suit and waved."]
    # with a rephraser that cannot say it, the same
    g = NoteFilter(memories=["The person wore a dark suit and waved."], speak=lambda t, past: "")
    assert g.feed("The person wore a dark suit and waved.") == "" and g.repeats
    # with one that can, its words
    h = NoteFilter(memories=["The person wore a dark suit and waved."],
                   speak=lambda t, past: "You had a dark suit on.")
    assert h.feed("The person wore a dark suit and waved.") == "You had a dark suit on."
    assert not h.repeats


def test_no_claim_to_see_while_the_robot_cannot_see():
    """No frame yet (or the camera lost): "I can see you" becomes the persona's blind line."""
    persona = load_persona()
    replies = iter(["Yes, I can see you. You look happy! What is your name?",
                    "I cannot see you yet. Where are you from?",
                    "My shirt is a white shirt.",
                    "Yes, I can see you. Do you like robots?"])
    c = conv(FakeChatBackend(responder=lambda m, k: next(replies)), stream=False)
    try:
        assert c.turn("Can you see me?").text == f"{persona.blind_lines[0]} What is your name?"
        # a sentence that says it cannot see is kept as it is
        assert c.turn("Hello?").text == "I cannot see you yet. Where are you from?"
        # the small model's first-person answer about the person's clothes: not said either
        assert c.turn("What colour is my shirt?").text == persona.blind_lines[1]   # the next
        c.add_frame(photo())                    # now it can: the claim stands
        assert c.turn("And now?").text == "Yes, I can see you. Do you like robots?"
    finally:
        c.close()


def test_streaming_sentences_and_final_line():
    be = FakeChatBackend(responder=lambda m, k: "Nice hat! Is it new? \U0001F600" if k == "reply"
                         else "S.")
    c = conv(be)
    c.add_frame(photo())       # it sees: a remark about a hat may be said
    got = []
    try:
        r = c.turn("  hello   robot ", on_sentence=lambda s, i, fallback=False: got.append((i, s)))
        assert got == [(0, "Nice hat!"), (1, "Is it new?")]          # emoji dropped
        assert r.text == "Nice hat! Is it new?" and not r.fallback and r.turn_id == 1
        assert r.in_reply_to == "hello robot"
        assert c.state()["timeline"][-1] == "robot: Nice hat! Is it new?"
    finally:
        c.close()


def test_llm_failure_gives_fallback_and_next_turn_works():
    be = FakeChatBackend()
    be.fail["reply"] = 1
    c = conv(be, stream=False)
    c.add_frame(photo())
    try:
        r = c.turn("Hello")
        assert r.fallback and r.text in c.persona.fallback_lines and "fake reply" in r.error
        r2 = c.turn("Hello again")
        assert not r2.fallback and r2.text == "Hello there. Lovely day!" and r2.turn_id == 2
        # the fallback is part of the conversation, as the robot said it
        assert c.state()["timeline"][2] == "robot: " + r.text
    finally:
        c.close()


def test_greet_asks_last_and_falls_back_to_a_greeting():
    """The opening remark: the greet instruction is the prompt's last (system) message.

    When the LLM fails or only echoes it, the robot still says hello (not "say that again").
    """
    be = FakeChatBackend()
    c = conv(be, stream=False)
    try:
        c.add_frame(photo())
        r = c.remark()
        msgs = be.of_kind("reply")[-1][1]
        assert msgs[-1] == {"role": "system", "content": c.persona.greet_instruction}
        assert r.text == "Hello there. Lovely day!" and r.in_reply_to == "" and not r.fallback
        be.fail["reply"] = 1
        failed = c.remark()
        assert failed.fallback and failed.text in c.persona.greet_fallback_lines
        echoing = conv(FakeChatBackend(responder=lambda m, k: c.persona.greet_instruction))
        try:
            echoed = echoing.remark()
            assert echoed.fallback and echoed.text in c.persona.greet_fallback_lines
        finally:
            echoing.close()
    finally:
        c.close()


def test_failure_mid_stream_appends_fallback_chunk():
    class Broken(FakeChatBackend):
        def stream(self, messages, **kw):
            yield "I think"
            raise BackendError("connection dropped")

    c = conv(Broken())
    got = []
    try:
        r = c.turn("Hi", on_sentence=lambda s, i, fallback=False: got.append((s, fallback)))
        assert got[0] == ("I think", False)
        assert got[1][1] is True and got[1][0] in c.persona.fallback_lines
        assert r.fallback and r.text == "I think " + got[1][0]
    finally:
        c.close()


def test_empty_or_bad_input_is_a_clear_error():
    c = conv(FakeChatBackend())
    try:
        with pytest.raises(ValueError, match="empty"):
            c.turn("   ")
        with pytest.raises(ValueError, match="frame"):
            c.add_frame(np.zeros((4, 4, 3), np.float64))
        assert c.state()["timeline"] == []
    finally:
        c.close()


def test_state_counts_and_prompt_size():
    c = conv(FakeChatBackend(), n=4, m=3)
    try:
        for _ in range(4):
            c.add_frame(photo())
        c.wait_idle(5)
        c.turn("hi")
        st = c.state()
        assert (st["raw_frames"], st["frame_summaries"], st["dialogue_lines"]) == (1, 1, 2)
        assert st["prompt_image_bytes"] > 10000 and st["prompt_chars"] > 100
        assert st["timeline"][0].startswith("summary 1-3")
    finally:
        c.close()


def test_transcript_records_every_event_and_frame_files(tmp_path):
    be = FakeChatBackend()
    be.fail["reply"] = 1
    c = conv(be, n=3, m=2, stream=False)
    tw = TranscriptWriter(tmp_path, run_name="run1")
    c.add_listener(tw)
    try:
        for _ in range(3):
            c.add_frame(photo())
        c.wait_idle(5)
        c.turn("Hello")          # fails -> fallback
        c.turn("Again")
        recs = read_transcript(tmp_path / "run1" / "transcript.jsonl")
    finally:
        c.close()
        tw.close()
    types = [r["type"] for r in recs]
    assert types.count("frame") == 3 and "summary" in types
    assert [r["type"] for r in recs if r["type"] in ("user", "reply")] == [
        "user", "reply", "user", "reply"]
    replies = [r for r in recs if r["type"] == "reply"]
    assert replies[0]["fallback"] and replies[0]["in_reply_to"] == "Hello"
    assert replies[1]["text"] == "Hello there. Lovely day!"
    summ = next(r for r in recs if r["type"] == "summary")
    assert summ["frame_ids"] == [1, 2]
    assert replies[1]["frames_in_prompt"] == [3]
    assert replies[1]["summaries_in_prompt"] == [[1, 2]]
    for r in recs:
        if r["type"] == "frame":
            img = cv2.imread(str(tmp_path / "run1" / r["file"]))
            assert img is not None and img.shape == (480, 640, 3)


def test_frames_after_close_do_not_raise():
    c = conv(FakeChatBackend(), n=2, m=1)
    c.add_frame(photo())
    c.close()
    c.add_frame(photo())          # the pool is gone: the frame stays raw, nothing raises
    assert c.state()["raw_frames"] == 2 and c.state()["pending_summaries"] == 0


def test_persona_errors_are_clear(tmp_path):
    with pytest.raises(PersonaError, match="cannot read"):
        load_persona(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("system: hi\n")
    with pytest.raises(PersonaError, match="missing keys"):
        load_persona(bad)


def test_clean_reply():
    assert clean_reply("Hi \u2764\ufe0f there\n friend \U0001F44B") == "Hi there friend"


def test_make_backend_factory():
    from vision_dialogue.llm.factory import make_backend
    from vision_dialogue.llm.openai_backend import OpenAIChatBackend
    be = make_backend("openai", base_url="http://127.0.0.1:9/v1", model="m1", timeout=3.0,
                      max_retries=1, supports_images=False)
    assert isinstance(be, OpenAIChatBackend)
    assert (be.base_url, be.model, be.timeout, be.max_retries, be.supports_images) == (
        "http://127.0.0.1:9/v1", "m1", 3.0, 1, False)
    with pytest.raises(ValueError, match="^llm_backend"):
        make_backend("magic")


def test_conversation_over_the_openai_client_and_fake_server():
    """The core with the real OpenAI client against the fake server: streamed sentences."""
    from fake_openai import FakeOpenAI
    from vision_dialogue.llm.factory import make_backend
    with FakeOpenAI(default_reply="Hello! I see you.") as fake:
        be = make_backend("openai", base_url=fake.base_url, model="fake-vlm", max_retries=0)
        c = conv(be)
        try:
            c.add_frame(photo())
            got = []
            r = c.turn("hi", on_sentence=lambda s, i, fallback=False: got.append(s))
            assert got == ["Hello!", "I see you."] and r.text == "Hello! I see you."
            req = fake.requests[-1]
            assert req["stream"] is True and req["model"] == "fake-vlm"
            assert any(p.get("type") == "image_url" for m in req["messages"]
                       if isinstance(m["content"], list) for p in m["content"])
        finally:
            c.close()


def test_a_user_speaking_another_language_gets_the_reply_asked_in_it():
    be = FakeChatBackend()
    c = conv(be)
    try:
        c.turn("Hallo Roboter, was siehst du?", language="de")
        c.turn("Hello again.", language="en-US")
        c.turn("And now?")
        asked = [msgs[-1]["content"] for _, msgs, _ in be.of_kind("reply")]
        assert asked[0] == "The person speaks German: answer in German, briefly."
        assert all("answer in" not in str(a) for a in asked[1:]), asked
    finally:
        c.close()
