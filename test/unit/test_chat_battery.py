"""The chat battery: well formed, halves fixed, its rules, and a chat run on a scripted model."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from answer_scores import score_answers  # noqa: E402
from chat_sessions import asks_again, chat_scores, recited, run_chat_item  # noqa: E402
from fake_chat_backend import FakeChatBackend  # noqa: E402
from vision_dialogue.llm.answers import AnswerSchema  # noqa: E402
from vision_dialogue.core.persona import load_persona  # noqa: E402

CHATS = yaml.safe_load((BENCH / "chat_battery.yaml").read_text())["chats"]


def test_the_chat_battery_has_fixed_halves_of_chats_with_purposes():
    assert len(CHATS) >= 10
    halves = [c["half"] for c in CHATS]
    assert halves.count("a") == halves.count("b") and set(halves) == {"a", "b", "c", "d", "e"}
    for c in CHATS:
        schema = AnswerSchema.parse({"properties": c["results"]})
        assert set(c["expect"]) == set(schema.properties), c["name"]
        assert all(schema.valid(k, v) for k, v in c["expect"].items()), c["name"]
        assert len(c["person"]) >= len(c["expect"])        # enough lines to answer
    # the kinds the issue names: numbers said in words, an enum, yes/no, two things at once
    kinds = {p.get("type") for c in CHATS for p in c["results"].values()}
    assert {"string", "integer", "boolean"} <= kinds
    assert any("enum" in p for c in CHATS for p in c["results"].values())


def test_the_rules():
    instruction = "Find out the visitor's name and which floor they are going to."
    assert recited("I'm looking for the visitor's name and which floor they need to go to.",
                   instruction)
    assert not recited("Hello! What is your name?", instruction)
    assert score_answers({"to": "station", "n": 4}, {"to": "the train station", "n": 3}) == \
        (1, 1, 0)
    assert score_answers({"ok": False, "x": 1}, {"ok": False}) == (1, 0, 1)


def test_a_reply_that_asks_again_for_a_result_in_is_counted():
    keys = {"name": "the visitor's name", "sugar": "whether they want sugar"}
    assert asks_again("Great! Keiko. What's your name?", {"name": keys["name"]})
    assert asks_again("Do you take sugar?", {"sugar": keys["sugar"]})
    assert not asks_again("Nice to meet you, what is the floor?", {"sugar": keys["sugar"]})
    assert not asks_again("Your name is lovely.", {"name": keys["name"]})     # no question
    assert not asks_again("Thank you for your name. Which floor are you going to?",
                          {"name": keys["name"]})         # its question is about another
    # the row counts the replies that asked for a name the chat had
    item = next(c for c in CHATS if c["name"] == "front desk")

    def asker(messages, kind):
        last = str(messages[-1]["content"])
        return _model(messages, kind) if last.endswith("JSON:") else "What is your name?"
    row = run_chat_item(FakeChatBackend(supports_images=False, responder=asker),
                        load_persona(), item)
    assert row["asked_again"] == 2 and chat_scores([row])["asked_again"] == 2


def _model(messages, kind):
    """A model that opens with a question and extracts what the person said, as a good one."""
    last = messages[-1]["content"]
    if str(last).endswith("JSON:"):                 # the results' extraction
        said = str(last)
        out = {}
        if "Zebulon" in said:
            out["name"] = "Zebulon"
        if "fourth floor" in said:
            out["floor"] = 4
        return json.dumps(out)
    opening = load_persona().chat_opening_instruction
    return "Hello! What is your name?" if str(last) == opening else "I see."


def test_a_chat_runs_on_the_conversation_with_the_scripted_person():
    item = next(c for c in CHATS if c["name"] == "front desk")
    row = run_chat_item(FakeChatBackend(supports_images=False, responder=_model),
                        load_persona(), item)
    assert row["status"] == "done" and row["results"] == {"name": "Zebulon", "floor": 4}
    assert row["all_right"] and row["wrong"] == 0
    assert row["opening_asks"] and not row["opening_recited"] and row["asked_again"] == 0
    scores = chat_scores([row])
    assert scores["done_all_right"] == 1 and scores["half_a"]["chats"] == 1


def test_a_chat_whose_person_runs_out_of_lines_is_unfinished():
    item = dict(next(c for c in CHATS if c["name"] == "front desk"), person=["Hello!"])
    row = run_chat_item(FakeChatBackend(supports_images=False, responder=_model),
                        load_persona(), item)
    assert row["status"] == "unfinished" and row["missing"] == 2 and not row["all_right"]


def test_the_replies_prompt_says_what_the_chat_still_needs_before_the_persons_line():
    item = next(c for c in CHATS if c["name"] == "front desk")
    be = FakeChatBackend(supports_images=False, responder=_model)
    run_chat_item(be, load_persona(), item)
    replies = [m for kind, m, _ in be.calls if not str(m[-1]["content"]).endswith("JSON:")]
    first, second = replies[0], replies[1]
    needs = load_persona().needs_note.format(
        needs="the visitor's name; the floor they go to")
    assert any(m["content"] == needs for m in first)           # the opening asks for it
    assert second[-1]["content"] == "Hello! I am Zebulon."
    assert second[-2]["role"] == "system" and "Still to find out" in second[-2]["content"]
