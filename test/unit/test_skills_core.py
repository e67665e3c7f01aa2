"""The communication skills without ROS: answers, the arbiter, Ask, Chat, intents, spoken turns.

llm/answers.py, application/skills.py, application/intents.py, llm/intent_reader.py and
speech/turns.py's reports, with a host that plays the manager (a scripted person and a scripted
LLM).
"""
from __future__ import annotations

import json
import queue
import threading
import time

import pytest

from vision_dialogue.llm.answers import AnswerSchema, SchemaError, keep_valid, numbers_in, \
    read_plainly, yes_or_no
from vision_dialogue.application.intents import IntentsError, LineIntents, load_intents
from vision_dialogue.llm.intent_reader import IntentReader, IntentSpec, refers_back
from vision_dialogue.application.skills import ChatRole, Control, Heard, SkillArbiter, \
    SkillRejected, corrected, run_ask, run_chat
from vision_dialogue.core.conversation_types import SkillOutcome
from vision_dialogue.speech.turns import BEGAN, DONE, INTERRUPTED, SENTENCE, SpeechTurns

from test_speech_turns import RecordingBackend, until


# --- answers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, why", [
    ("{not json", "not valid JSON"),
    ("[]", "non-empty JSON object"),
    ('{"when": {"type": "date"}}', "type 'date'"),
    ('{"name": "string"}', "must be an object"),
    ('{"age": {"type": "integer", "minimum": "x"}}', "'x' is not of type"),
    ('{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}',
     "required keys ['b']"),
])
def test_a_bad_schema_is_a_clear_error(text, why):
    with pytest.raises(SchemaError, match=why.replace("[", r"\[").replace("]", r"\]")):
        AnswerSchema.parse(text)


def test_yes_no_and_numbers_are_read_plainly():
    assert yes_or_no("Yes, please.") is True and yes_or_no("Sure thing") is True
    assert yes_or_no("No, thanks") is False and yes_or_no("I'm not") is False
    assert yes_or_no("I am not sure") is None and yes_or_no("Maybe later") is None
    assert yes_or_no("The blue one") is None
    assert numbers_in("I am thirty four years old") == [34.0]
    assert numbers_in("twenty, or 7.5") == [20.0, 7.5]
    assert numbers_in("seven") == [7.0]
    # hundreds and thousands in words (the chat battery's room four hundred and twelve)
    assert numbers_in("Dinner for room four hundred and twelve, please.") == [412.0]
    assert numbers_in("two thousand and five") == [2005.0]
    assert numbers_in("two three, nine and ten") == [2.0, 3.0, 9.0, 10.0]
    schema = AnswerSchema.parse({"ok": {"type": "boolean"}, "age": {"type": "integer",
                                                                    "maximum": 130},
                                 "drink": {"enum": ["tea", "coffee"]}})
    keys = list(schema.properties)
    assert read_plainly(schema, keys, "Yes, I'm 34 and I'd like tea") == \
        {"ok": True, "age": 34, "drink": "tea"}
    assert read_plainly(schema, keys, "I am 200") == {}          # past the maximum


def test_a_chats_yes_or_no_nobody_answered_is_not_kept():
    """The chat battery: "A table for four, under the name Omar." gave `window: false`.

    An Ask's answer is to its question: there a statement keeps its boolean.
    """
    schema = AnswerSchema.parse({"window": {"type": "boolean"}, "tour": {"type": "boolean"},
                                 "first_visit": {"type": "boolean"}})
    assert keep_valid(schema, ["window"], {"window": False},
                      ["A table for four, under the name Omar."], yes_no_said=True) == {}
    assert keep_valid(schema, ["tour"], {"tour": False}, ["Hello, is there a tour today?"],
                      yes_no_said=True) == {}
    for line, value in (("Yes, by the window, please.", True), ("Not by the window.", False),
                        ("I don't need the window.", False), ("Window seats are fine.", True),
                        ("Go ahead.", True)):
        assert keep_valid(schema, ["window"], {"window": value}, [line], yes_no_said=True) == \
            {"window": value}
    assert read_plainly(schema, ["tour"], "Go ahead.") == {"tour": True}
    # a correction's "no" answers no yes/no (behind the server: `appointment: false`)
    assert keep_valid(schema, ["window"], {"window": False},
                      ["Oh wait, no, it's the sixth floor."], yes_no_said=True) == {}
    assert keep_valid(schema, ["window"], {"window": False},
                      ["Sorry, not the window after all."], yes_no_said=True) == \
        {"window": False}
    twice = ["I have been here twice before."]
    assert keep_valid(schema, ["first_visit"], {"first_visit": False}, twice) == \
        {"first_visit": False}
    assert keep_valid(schema, ["first_visit"], {"first_visit": False}, twice,
                      yes_no_said=True) == {}


def test_only_valid_grounded_values_are_kept():
    schema = AnswerSchema.parse({"name": {"type": "string"}, "age": {"type": "integer"},
                                 "drink": {"type": "string", "enum": ["tea", "coffee"]}})
    keys = list(schema.properties)
    said = ["My name is Zebulon and I am 41. Teas are my thing."]
    assert keep_valid(schema, keys, {"name": "Zebulon", "age": 41.0, "drink": "tea"}, said) == \
        {"name": "Zebulon", "age": 41, "drink": "tea"}
    # a name nobody said, a wrong type, an enum value not declared, "unknown"
    assert keep_valid(schema, keys, {"name": "John", "age": "41", "drink": "milk"}, said) == {}
    assert keep_valid(schema, keys, {"name": "unknown"}, said) == {}
    # a value that names nothing ("I think I left something behind.": no lost item)
    item = AnswerSchema.parse({"item": {"type": "string"}})
    assert keep_valid(item, ["item"], {"item": "something behind"},
                      ["I think I left something behind."]) == {}
    assert keep_valid(item, ["item"], {"item": "black scarf"}, ["My black scarf."]) == \
        {"item": "black scarf"}
    # an enum value nobody named is a guess (to "Hmm, let me think." the 1.5B chose "okay")
    rating = AnswerSchema.parse({"rating": {"type": "string", "enum": ["bad", "okay", "great"]},
                                 "who": {"type": "string",
                                         "enum": ["dentist", "physiotherapist"]}})
    assert keep_valid(rating, ["rating"], {"rating": "okay"}, ["Hmm, let me think."]) == {}
    assert keep_valid(rating, ["rating"], {"rating": "great"}, ["I'd say it was great."]) == \
        {"rating": "great"}
    assert keep_valid(rating, ["who"], {"who": "physiotherapist"}, ["I see the physio."]) == \
        {"who": "physiotherapist"}
    # a number nobody said is a guess (behind the server the 1.5B filled floor 0 from a name)
    floor = AnswerSchema.parse({"floor": {"type": "integer"}})
    assert keep_valid(floor, ["floor"], {"floor": 0}, ["Hello! I am Zebulon."]) == {}
    assert keep_valid(floor, ["floor"], {"floor": 4}, ["To the fourth floor."]) == {"floor": 4}
    assert keep_valid(floor, ["floor"], {"floor": 12}, ["Twelve, please."]) == {"floor": 12}


# --- the arbiter --------------------------------------------------------------------------------
def test_a_higher_priority_preempts_and_equal_ones_wait_in_order():
    arb = SkillArbiter(max_waiting=2)
    low = arb.enter("say", 100)
    assert arb.running is low
    same = arb.enter("say", 100)
    assert not low.preempted.is_set()
    high = arb.enter("ask", 200)
    assert low.preempted.is_set()                 # the running one must stop
    with pytest.raises(SkillRejected, match="2 skills wait"):
        arb.enter("say", 50)
    order = []

    def run(ticket):
        if arb.wait_turn(ticket, lambda: False):
            order.append(ticket.name + str(ticket.priority))
            arb.leave(ticket)
    threads = [threading.Thread(target=run, args=(t,)) for t in (same, high)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    assert order == []                            # `low` still runs
    arb.leave(low)
    for t in threads:
        t.join(2)
    assert order == ["ask200", "say100"]


def test_a_waiting_goal_that_is_cancelled_leaves_the_line():
    arb = SkillArbiter()
    first = arb.enter("chat", 128)
    second = arb.enter("say", 128)
    assert arb.wait_turn(second, lambda: True) is False
    arb.leave(first)
    third = arb.enter("say", 128)
    assert arb.running is third


# --- Ask and Chat with a scripted host ----------------------------------------------------------
class Host:
    """The manager, played: lines said are recorded; the person answers from a script."""

    def __init__(self, answers=(), llm=lambda msgs, schema: "{}", seen="", present=True):
        self.said, self.llm_calls, self.seen_text = [], [], seen
        self.answers = list(answers)
        self.llm, self._present = llm, present
        self.exchanges: queue.Queue = queue.Queue()
        self.purpose, self.turns = None, []
        self.heard = None            # time.monotonic() of the person's newest line
        self.needs: list[str] = []   # what the chat said it still needs, in order

    def say(self, text, control, feedback):
        self.said.append(text)
        return SkillOutcome("spoken")

    def listen(self, control):
        if not self.answers:
            while not control.reason():
                time.sleep(0.01)
            return None
        return Heard(self.answers.pop(0))

    def seen(self):
        return self.seen_text

    def ask_llm(self, messages, max_tokens, json_schema=None):
        self.llm_calls.append(messages)
        return self.llm(messages, json_schema)

    def begin_chat(self, role):
        self.purpose = role.instruction

    def end_chat(self):
        self.purpose = None

    def start_turn(self, text, instruction=""):
        self.turns.append((text, instruction))

    def next_exchange(self, control, timeout):
        try:
            return self.exchanges.get(timeout=timeout)
        except queue.Empty:
            return None

    def present(self):
        return self._present

    def heard_at(self):
        return self.heard

    def still_needed(self, needs):
        self.needs.append(needs)


def extractor(msgs, schema):
    """An LLM that fills `name` and `holding` as a good one would."""
    text = msgs[-1]["content"]
    out = {}
    if "Zebulon" in text:
        out["name"] = "Zebulon"
    if "holding" in json.dumps(schema or {}) and "a blue cup" in text:
        out["holding"] = "a blue cup"
    return json.dumps(out)


def run(host, schema, question="", followups=2, timeout=5.0):
    stages = []
    out = run_ask(host, Control(deadline=time.monotonic() + timeout),
                  lambda stage, text, answers: stages.append(stage), question,
                  json.dumps(schema), followups, "Ask for: {keys}")
    return out, stages


def test_ask_fills_from_words_and_from_what_it_sees_and_follows_up():
    host = Host(["Hmm, let me think.", "My name is Zebulon. Look at this!"],
                llm=extractor, seen="a person holding a blue cup")
    out, stages = run(host, {"name": {"type": "string"}, "holding": {"type": "string"}},
                      "What is your name, and what are you holding?")
    assert out.status == "answered" and out.success
    assert out.data == {"name": "Zebulon", "holding": "a blue cup"}
    assert host.said[0] == "What is your name, and what are you holding?"
    # the follow-up asks for what is missing (what they hold was seen)
    assert host.said[1] == "Sorry, I did not get that. Could you tell me name?"
    assert stages[:2] == ["queued", "asked"] or "asked" in stages
    assert "follow_up" in stages and stages.count("heard") == 2


def test_a_boolean_is_read_without_the_llm_and_a_wrong_value_never_comes_back():
    host = Host(["Yes, I am."], llm=lambda m, s: '{"ok": "maybe"}')
    out, _ = run(host, {"ok": {"type": "boolean"}}, "Are you ready?")
    assert out.data == {"ok": True} and host.llm_calls == []
    # the LLM invents a name nobody said: it is not kept, the Ask ends partial
    host = Host(["I would rather not say."], llm=lambda m, s: '{"name": "Bob"}')
    out, _ = run(host, {"name": {"type": "string"}}, "Your name?", followups=0)
    assert out.status == "partial" and out.data == {} and not out.success


def test_a_question_nothing_was_answered_to_is_asked_again_in_its_own_words():
    host = Host(["What colour is my suit?", "Yes, you may."], llm=lambda m, s: "{}")
    out, stages = run(host, {"remember": {"type": "boolean", "description":
                                          "whether the person agrees to be remembered"}},
                      "May I remember you?")
    assert host.said == ["May I remember you?", "Sorry, I did not get that. May I remember you?"]
    assert out.status == "answered" and out.data == {"remember": True}


def test_ask_without_a_question_words_one_and_ends_on_timeout_with_what_it_has():
    host = Host([], llm=lambda m, s: "What is your name?")
    out, _ = run(host, {"name": {"type": "string"}}, "", timeout=0.3)
    assert host.said == ["What is your name?"] and out.status == "timeout"
    out, _ = run(Host(), {"x": {"type": "date"}})
    assert out.status == "error" and "type 'date'" in out.error


def test_chat_converses_with_its_purpose_until_the_results_are_in():
    role = ChatRole.parse("receptionist", json.dumps({
        "instruction": "Find out the visitor's name.", "results": {"name": {"type": "string"}},
        "closing": "Thank you, I will tell them you are here."}))
    host = Host(llm=extractor)
    host.exchanges.put(("Hello there.", "Hello! Who are you?"))
    host.exchanges.put(("I am Zebulon.", "Nice to meet you, Zebulon."))
    stages = []
    out = run_chat(host, Control(deadline=time.monotonic() + 5), lambda s, t, r: stages.append(s),
                   role, True, "", 5.0, "Start.", correction_s=0)
    assert out.status == "done" and out.data == {"name": "Zebulon"}
    assert host.turns == [(None, "Start.")]            # the robot opened (initiate)
    assert host.said == ["Thank you, I will tell them you are here."]
    assert host.purpose is None                        # the purpose left the prompt
    # the replies' prompt says what is still missing, until it is in; then nothing
    assert host.needs == ["name", "name", "", ""]
    assert "results" in stages


def test_a_result_corrected_in_a_later_line_is_read_again():
    """A person says the third floor, then "Oh wait, no, it's the sixth": the sixth is kept."""
    role = ChatRole.parse("front desk", json.dumps({
        "instruction": "Find out the name, the floor and whether they have an appointment.",
        "results": {"name": {"type": "string"}, "floor": {"type": "integer"},
                    "appointment": {"type": "boolean"}}}))
    floors = {"third": 3, "sixth": 6}

    def llm(msgs, schema):                # reads what the lines it is shown say, last first
        text = msgs[-1]["content"]
        out = {"name": "Nora"} if "Nora" in text else {}
        said = [n for w, n in floors.items() if w in text]
        if said and "floor" in json.dumps(schema or {}):
            out["floor"] = said[-1] if len(said) == 1 else max(said)
        return json.dumps(out)
    host = Host(llm=llm)
    for line in ("I'm Nora, going to the third floor.", "Oh wait, no, it's the sixth floor.",
                 "Yes, I have an appointment."):
        host.exchanges.put((line, "Thank you."))
    out = run_chat(host, Control(deadline=time.monotonic() + 5), lambda *a: None, role, False,
                   "", 5.0, "", correction_s=0)
    assert out.status == "done"
    assert out.data == {"name": "Nora", "floor": 6, "appointment": True}
    # a line without a correction word (whole words: "waiting" is not "wait") leaves it
    for line in ("The sixth floor is nice.", "I am waiting for the sixth floor."):
        assert corrected(host, role.results, ["floor"], "", [line], {}) == {}


GARDEN_WALK = json.dumps({"instruction": "Sign the visitor up; their name and how many children.",
                          "results": {"name": {"type": "string"},
                                      "children": {"type": "integer"}}})


def garden_llm(msgs, schema):
    """Reads the name and the newest number of children the lines it is shown say."""
    text, out = msgs[-1]["content"], {}
    if "Lena" in text:
        out["name"] = "Lena"
    said = [(text.rfind(w), n) for w, n in (("two", 2), ("three", 3)) if w in text]
    if said and "children" in json.dumps(schema or {}):
        out["children"] = max(said)[1]
    return json.dumps(out)


def test_a_correction_right_after_the_results_are_in_is_still_taken():
    """The next line, within `correction_s` of the results being in, may still correct one.

    The chat battery's half c: "Oh wait, it's three children actually." came after the chat
    had ended with two.
    """
    role = ChatRole.parse("garden walk", GARDEN_WALK)
    host = Host(llm=garden_llm)
    for line in ("Sign me up, I'm Lena, with two children.",
                 "Oh wait, it's three children actually.", "Thanks!", "Bye."):
        host.exchanges.put((line, "Lovely."))
    stages = []
    out = run_chat(host, Control(deadline=time.monotonic() + 30),
                   lambda s, t, r: stages.append((s, dict(r))), role, False, "", 5.0, "")
    assert out.status == "done" and out.data == {"name": "Lena", "children": 3}
    assert [r for s, r in stages if s == "results"] == [{"name": "Lena", "children": 2},
                                                        {"name": "Lena", "children": 3}]
    assert host.exchanges.get_nowait()[0] == "Bye."     # "Thanks!" corrected nothing: done
    # nobody says more: done once `correction_s` has passed, long before the deadline
    host = Host(llm=garden_llm)
    host.exchanges.put(("Sign me up, I'm Lena, with two children.", "Lovely."))
    t0 = time.monotonic()
    out = run_chat(host, Control(deadline=t0 + 30), lambda *a: None, role, False, "", 5.0, "",
                   correction_s=0.3)
    assert out.data == {"name": "Lena", "children": 2} and 0.3 <= time.monotonic() - t0 < 20


def test_a_line_heard_in_the_correction_window_is_waited_for():
    """A line heard within the correction window is waited for, however slow its reply.

    The person spoke within the window but the robot's reply to it (the exchange) is slow:
    the chat waits for it rather than ending on the clock.
    """
    role = ChatRole.parse("garden walk", GARDEN_WALK)
    host = Host(llm=garden_llm)
    host.exchanges.put(("Sign me up, I'm Lena, with two children.", "Lovely."))
    polls = []
    plain = host.next_exchange

    def next_exchange(control, timeout):
        polls.append(time.monotonic())
        if len(polls) == 2:                      # the results are in: the person speaks now
            host.heard = time.monotonic()
        if 2 <= len(polls) < 6:                  # its reply takes four polls (over 0.1 s)
            time.sleep(timeout)                  # as the queue's get would
            return None
        if len(polls) == 6:
            host.exchanges.put(("Sorry, three children.", "Three, noted."))
        return plain(control, timeout)
    host.next_exchange = next_exchange
    out = run_chat(host, Control(deadline=time.monotonic() + 30), lambda *a: None, role, False,
                   "", 5.0, "", correction_s=0.1)
    assert len(polls) >= 6 and polls[5] - polls[1] > 0.1      # waited past the window
    assert out.status == "done" and out.data == {"name": "Lena", "children": 3}


def test_a_correction_changes_only_what_it_says():
    """The line "It's red. No wait, it's dark blue." corrects the colour, not the umbrella."""
    results = {"item": {"type": "string"}, "colour": {"type": "string"}}
    schema = ChatRole.parse("lost", json.dumps({"instruction": "What, and which colour?",
                                                "results": results})).results
    lines = ["I lost my umbrella.", "It's red. No wait, it's dark blue."]
    for answer in ('{"item": "dark blue"}', '{"item": "umbrella"}'):
        host = Host(llm=lambda msgs, sch, a=answer: a)
        assert corrected(host, schema, ["item"], "", lines, {"colour": "dark blue"}) == {}
    host = Host(llm=lambda msgs, sch: '{"colour": "dark blue"}')
    assert corrected(host, schema, ["colour"], "", lines, {}) == {"colour": "dark blue"}


def test_chat_ends_when_the_person_leaves_or_on_cancel():
    role = ChatRole.parse("small talk", "")
    host = Host(present=False)
    host.exchanges.put(("Hi", "Hello!"))          # the robot answered; nobody answers back
    t0 = time.monotonic()
    out = run_chat(host, Control(deadline=t0 + 30), lambda *a: None, role, False, "Hi", 0.3, "")
    assert out.status == "person_left" and time.monotonic() - t0 >= 0.3
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    out = run_chat(Host(), Control(cancelled=cancel.is_set), lambda *a: None, role, False, "",
                   5.0, "")
    assert out.status == "cancelled"
    with pytest.raises(SchemaError, match="unknown keys"):
        ChatRole.parse("x", '{"instructions": "typo"}')


def chat_beside(host, role, talk, clock_s: float, initial: str = ""):
    """run_chat while `talk(stop)` plays the person and the robot on a thread (joined)."""
    stop = threading.Event()
    talker = threading.Thread(target=talk, args=(stop,))
    talker.start()
    try:
        return run_chat(host, Control(deadline=time.monotonic() + 10), lambda *a: None, role,
                        False, initial, clock_s, "", correction_s=0)
    finally:
        stop.set()
        talker.join()


FRONT_DESK = json.dumps({"instruction": "Find out the visitor's name.",
                         "results": {"name": {"type": "string"}}})


def test_a_person_who_keeps_talking_has_not_left_though_nobody_is_in_view():
    """The demo's camera showed nobody while the visitor answered: the chat ended person_left."""
    role = ChatRole.parse("front desk", FRONT_DESK)
    host = Host(present=False, llm=extractor)
    host.heard = time.monotonic()

    def talk(stop):      # a line every 0.1 s for 0.6 s (the clock is 0.3 s), then the name
        for _ in range(6):
            if stop.wait(0.1):
                return
            host.heard = time.monotonic()
        host.exchanges.put(("I am Zebulon.", "Nice to meet you, Zebulon."))

    out = chat_beside(host, role, talk, 0.3)
    assert out.status == "done" and out.data == {"name": "Zebulon"}
    # silent and out of view: gone after the clock from the newest line
    host = Host(present=False)
    host.heard = time.monotonic()
    t0 = time.monotonic()
    out = run_chat(host, Control(deadline=t0 + 5), lambda *a: None, role, False, "", 0.3, "")
    assert out.status == "person_left" and time.monotonic() - t0 >= 0.3


def test_the_person_waits_for_a_slow_reply_and_gets_the_clock_after_each_one():
    """Nobody in view: a reply slower than the clock, and lines of the robot's, are no absence.

    The person's first line starts the chat and the robot answers it after 1.5 s (the clock is
    1 s); then the robot says three more lines, and the person answers right after.
    """
    role = ChatRole.parse("front desk", FRONT_DESK)
    host = Host(present=False, llm=extractor)
    spoke = threading.Event()

    def start_turn(text, instruction=""):          # the person's line is heard as it starts
        host.heard = time.monotonic()
        spoke.set()
    host.start_turn = start_turn

    def robot_talks(stop):
        if not spoke.wait(5) or stop.wait(1.5):
            return
        for _ in range(3):
            host.exchanges.put(("", "Let me tell you about the building."))
            if stop.wait(0.1):
                return
        host.exchanges.put(("I am Zebulon.", "Nice to meet you, Zebulon."))

    out = chat_beside(host, role, robot_talks, 1.0, initial="Hello.")
    assert out.status == "done" and out.data == {"name": "Zebulon"}


# --- intents ------------------------------------------------------------------------------------
INTENTS = """
intents:
  - name: guide
    description: Take the person to a place in the building.
    arguments: {place: {type: string, description: the place to go to}}
    examples: ["Can you take me to the kitchen?"]
  - name: wave
    description: Wave a hand at the person.
"""


def intent_llm(calls):
    def llm(msgs, max_tokens, json_schema=None):
        calls.append(msgs)
        line = msgs[-1]["content"].lower()
        if "kitchen" in line:
            return '{"intent": "guide", "arguments": {"place": "kitchen"}}'
        if "dance" in line:
            return '{"intent": "dance"}'              # not declared: never published
        if "somewhere" in line:
            return '{"intent": "guide", "arguments": {"place": "the moon"}}'   # not said
        return '{"intent": "none"}'
    return llm


def test_a_declared_intent_is_found_and_nothing_is_invented(tmp_path):
    f = tmp_path / "intents.yaml"
    f.write_text(INTENTS)
    calls = []
    reader = IntentReader(load_intents(f), intent_llm(calls))
    found = reader.read("Could you take me to the kitchen, please?")
    assert found.intent == "guide" and found.data == {"place": "kitchen"}
    assert found.confidence == 1.0 and json.loads(found.json()) == {"place": "kitchen"}
    assert reader.read("Could you dance for me?") is None
    assert reader.read("Can you take me somewhere?") is None     # its place was never said
    asked = len(calls)
    assert reader.read("What a lovely morning it is.") is None   # small talk: no LLM call
    assert len(calls) == asked
    assert "guide (Take the person to a place in the building)" in reader.abilities()


def test_a_line_that_refers_back_takes_its_argument_from_the_lines_before(tmp_path):
    """Take me there, after the robot named the place: the place comes from that line."""
    f = tmp_path / "intents.yaml"
    f.write_text(INTENTS)
    calls = []

    def llm(msgs, max_tokens, json_schema=None):
        calls.append(msgs[-1]["content"])
        return '{"intent": "guide", "arguments": {"place": "cafeteria"}}'
    reader = IntentReader(load_intents(f), llm)
    earlier = ["person: I am hungry.", "robot: The cafeteria is on the ground floor."]
    found = reader.read("Great, can you take me there?", earlier)
    assert found is not None and found.data == {"place": "cafeteria"}
    assert "robot: The cafeteria is on the ground floor." in calls[-1]
    assert calls[-1].index("cafeteria") < calls[-1].index("Now the person said")
    # a line that does not refer back is read alone: an argument from before is not its own
    assert reader.read("Can you take me to the library?", earlier) is None
    assert "cafeteria is on" not in calls[-1] and refers_back("bring it to me") and \
        not refers_back("Bring me a thing, please.")
    # a thing of the person's an earlier line named (bench_skills' "my floor" session)
    floor = ["person: I work on the seventh floor.", "robot: How nice."]
    assert refers_back("Can you book a room for all of us?") and refers_back("Wave to everyone!")
    assert refers_back("Could we get a meeting room for the group?")
    assert refers_back("Can you call the elevator for me, to my floor?", floor)
    assert not refers_back("Can you call the elevator for me, to my floor?", [])
    assert not refers_back("Bring me my coat, please.", floor)
    assert not refers_back("Take my robot friend along.", floor)     # "robot:" is no word said


def test_a_group_asks_as_a_person_does():
    """A group asks as a person does: "We need a room" as "I need" (bench_skills' "meeting")."""
    reader = IntentReader([IntentSpec("book_room", "Book a meeting room.", None)],
                          lambda msgs, max_tokens, json_schema=None: '{"intent": "book_room"}')
    for line in ("We need a meeting room for six people.", "We'd like a room for three.",
                 "I would like a room for two."):
        assert reader.worth_asking(line), line
    assert not reader.worth_asking("We needed a room yesterday, it was full.")
    for line in ("Could we get a room?", "Can I have a room?", "I'm trying to find a room."):
        assert reader.worth_asking(line), line
    assert not reader.worth_asking("Pleased to meet you.")           # whole words only


def test_an_intent_needs_a_request_and_a_word_of_its_own_and_gets_typed_arguments(tmp_path):
    """The 1.5B read "I took the lift to the third floor" as a request and "dance" as a wave."""
    f = tmp_path / "intents.yaml"
    f.write_text(INTENTS + """
  - name: call_elevator
    description: Call the lift to a floor.
    arguments: {floor: {type: integer, description: the floor to go to}}
""")
    asked = []

    def llm(msgs, max_tokens, json_schema=None):        # a model that always waves
        asked.append(msgs[-1]["content"])
        return '{"intent": "wave", "arguments": {}}'
    reader = IntentReader(load_intents(f), llm)
    assert reader.read("I took the lift to the third floor this morning.") is None
    assert reader.read("The kitchen was busy yesterday.") is None
    assert asked == []                                   # no request, no imperative: no LLM
    assert reader.read("Will you dance for me?") is None        # asked, but nothing of a wave
    assert len(asked) == 1
    assert reader.read("Wave to my friend over there!").intent == "wave"    # an imperative
    assert reader.worth_asking("Actually my knee hurts, call the lift to the fourth floor.")
    assert not reader.worth_asking("My knee hurts, the lift was slow.")    # no clause asks
    # a clause that starts with another word and names an intent's thing: maybe a command
    assert reader.worth_asking("OK, then send the elevator down for me.")
    for line in ("Which floor is the dentist on?", "Don't wave, it's embarrassing.",
                 "I'll take the stairs to the fifth floor.", "Do you ride the lift?"):
        assert not reader.worth_asking(line), line
    assert reader.read("Please wave goodbye.").intent == "wave"
    # the robot's own actions keep the looser test: a shared word is enough
    loose = IntentReader(load_intents(f), llm, strict=False)
    assert loose.read("The kitchen was busy yesterday.").intent == "wave"
    # the answer's arguments are typed by the intents' own: a floor is an integer
    args = reader.schema()["properties"]["arguments"]["anyOf"]
    assert {"type": "object", "properties": {"floor": {"type": "integer", "description":
                                                       "the floor to go to"}},
            "additionalProperties": False} in args


def test_an_intent_whose_arguments_the_line_says_needs_no_word_of_its_declaration(tmp_path):
    """An intent whose line says its arguments is kept without a word of its declaration.

    Half c of the intent sessions: "show me the way to the rooftop garden" shares no word
    with "Take the person to a place in the building", but says its place.
    """
    f = tmp_path / "intents.yaml"
    f.write_text(INTENTS)
    answer = {"intent": "guide", "arguments": {"place": "rooftop garden"}}
    reader = IntentReader(load_intents(f),
                          lambda m, max_tokens, json_schema=None: json.dumps(answer))
    found = reader.read("Could you show me the way to the rooftop garden?")
    assert found is not None and found.data == {"place": "rooftop garden"}
    # not from a question about what the robot sees or knows (bench_skills' half b)
    answer["arguments"] = {"place": "table"}
    assert reader.read("Can you see the red cup on the table?") is None
    assert reader.read("Do you know where the table is?") is None
    answer["arguments"] = {"place": "rooftop garden"}
    # or a line before says it, which the line points at
    earlier = ["person: The rooftop garden sounds nice."]
    assert reader.read("Could you show me the way there?", earlier).data == answer["arguments"]
    # an intent without arguments still needs a word of its own ("Will you dance?" no wave),
    # and "person: " before a line is no word of it ("Take the person to ...")
    answer = {"intent": "wave"}
    assert reader.read("Could you dance for me?") is None
    assert reader.read("Could you do that again?", ["person: I like dancing."]) is None


def test_line_intents_publish_what_is_found_and_survive_a_failing_llm(tmp_path):
    f = tmp_path / "intents.yaml"
    f.write_text(INTENTS)
    published, logged = [], []
    lines = LineIntents(IntentReader(load_intents(f), intent_llm([])), lambda: [],
                        lambda found, line, speaker: published.append((found.intent, line,
                                                                       speaker)))
    assert lines.read("Can you take me to the kitchen?", "ada").intent == "guide"
    assert lines.read("How nice.") is None
    assert published == [("guide", "Can you take me to the kitchen?", "ada")]

    def broken(msgs, max_tokens, json_schema=None):
        raise TimeoutError("the model did not answer")
    log = type("Log", (), {"warning": lambda self, m: logged.append(m)})()
    lines = LineIntents(IntentReader(load_intents(f), broken), lambda: [],
                        lambda *a: published.append(a), log)
    assert lines.read("Can you take me to the kitchen?") is None
    assert len(published) == 1 and "TimeoutError" in logged[0]


@pytest.mark.parametrize("text, why", [
    ("intents: {}", "expected a list"),
    ("intents: [{name: 'bad name', description: x}]", "must be an identifier"),
    ("intents: [{name: a, description: x}, {name: a, description: y}]", "declared twice"),
    ("intents: [{name: a}]", "needs a description"),
    ("intents: [{name: a, description: x, arguments: {p: {type: thing}}}]", "type 'thing'"),
    ("intents: [{name: a, description: x, colour: red}]", "unknown keys"),
])
def test_a_bad_intents_file_names_the_problem(tmp_path, text, why):
    f = tmp_path / "i.yaml"
    f.write_text(text)
    with pytest.raises(IntentsError, match=why):
        load_intents(f)


# --- what the speech node reports of each turn --------------------------------------------------
def test_the_speech_turns_report_began_sentences_done_and_interrupted():
    reports = []
    backend = RecordingBackend(say_seconds=0.2)
    turns = SpeechTurns(backend, publish=lambda u: None,
                        on_spoken=lambda tid, ev, text: reports.append((tid, ev)))
    try:
        turns.on_reply(1, "Hello there.", final=False)
        turns.on_reply(1, "Hello there.", final=True)
        assert until(lambda: (1, DONE) in reports)
        assert reports == [(1, BEGAN), (1, SENTENCE), (1, DONE)]
        turns.on_reply(2, "A long line.", final=False)
        assert until(lambda: (2, BEGAN) in reports)
        assert turns.cancel(2) is True                         # a cancelled Say
        assert until(lambda: (2, INTERRUPTED) in reports)
        assert "stop" in backend.names()
        turns.cancel(3)                                        # not here yet: never said
        turns.on_reply(3, "Never.", final=True)
        turns.on_reply(4, "Another.", final=False)
        assert until(lambda: (4, BEGAN) in reports)
        turns.utterance("Wait!")                               # barge-in
        assert until(lambda: (4, INTERRUPTED) in reports)
        assert not any(tid == 3 for tid, _ in reports)
    finally:
        turns.close()


def test_a_chat_knows_whether_its_person_is_still_tracked():
    from vision_dialogue.core.people import PeopleInView, TrackedPerson

    class Conv:
        def set_people(self, *a, **k):
            pass

        def add_event(self, *a, **k):
            pass
    now = [0.0]
    people = PeopleInView(Conv(), clock=lambda: now[0])
    assert people.tracks("anna") is None                 # no tracker has reported
    people.update([TrackedPerson("anna", 0.0, 1.0)], named=True)
    assert people.tracks("anna") is True and people.tracks("ben") is False
    now[0] = 10.0                                        # its last report went stale
    people.update([], named=True)
    assert people.tracks("anna") is False


def test_a_greeting_or_an_evasion_is_no_answer():
    schema = AnswerSchema.parse({"name": {"type": "string"}})
    said = ["Hello there!", "I'd rather not say."]
    for value in ("Hello there!", "I'd rather not say", "sorry"):
        assert keep_valid(schema, ["name"], {"name": value}, said) == {}
    assert keep_valid(schema, ["name"], {"name": "Priya"}, ["Fine, it's Priya."]) == \
        {"name": "Priya"}


def test_the_monitor_shows_skills_intents_and_a_said_line():
    from vision_dialogue.monitor.session import SessionView
    view = SessionView()
    view.ingest({"type": "reply", "turn_id": 1, "text": "Welcome to the lab!", "skill": "say"})
    view.ingest({"type": "skill", "skill": "ask", "goal": "ab12", "stage": "end",
                 "status": "answered", "success": True, "error": "",
                 "result": {"name": "Zebulon"}})
    view.ingest({"type": "skill", "skill": "chat", "goal": "cd34", "stage": "end",
                 "status": "cancelled", "success": False, "error": "", "result": {}})
    view.ingest({"type": "intent", "intent": "guide", "data": {"place": "kitchen"},
                 "source": "visitor", "utterance": "Take me to the kitchen.", "confidence": 1})
    items = view.snapshot()["items"]
    assert items[0]["kind"] == "robot" and items[0]["skill"] == "say"
    assert view.snapshot()["turns"] == []          # a said line is no LLM turn
    texts = [i["text"] for i in items[1:]]
    assert texts[0] == 'skill ask answered {"name": "Zebulon"}' and items[1]["level"] == "info"
    assert texts[1] == "skill chat cancelled" and items[2]["level"] == "warning"
    assert texts[2] == 'intent guide {"place": "kitchen"} from visitor: "Take me to the kitchen."'
