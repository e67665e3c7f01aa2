"""Focus, repeats and load: ROS-free parts of issue 21.

The note before the question (core/focus.py), near repeats and the nobody line
(core/reply_filter.py), lines to avoid (llm/avoid.py), warm-ups, and the thread count from the
machine's load (llm/cpu_threads.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.conversation_types import LineNote
from vision_dialogue.core.entries import UserEntry
from vision_dialogue.core.focus import (ABOUT_THE_PERSON_NOTE, NOT_YOURS_NOTE,
                                        NOW_NOTE, SOFT_YES_NO_NOTE, YES_NO_NOTE, Person,
                                        asked_about, asks_to_repeat, focus_note, is_yes_no,
                                        question_of)
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.reply_filter import NoteFilter, near_repeat
from vision_dialogue.llm.cpu_threads import CpuShare


@pytest.mark.parametrize("text, yes_no", [
    ("Am I holding a cup of coffee?", True), ("Hello! Can you see me?", True),
    ("Is it a dog?", True), ("Didn't you see it?", True), ("What colour is my outfit?", False),
    ("Hello! What do you see?", False), ("Is it bright in here", False),
    ("Thank you, goodbye!", False)])
def test_yes_no_questions(text, yes_no):
    assert is_yes_no(text) is yes_no


@pytest.mark.parametrize("text, about", [
    ("Am I wearing orange?", Person.FIRST), ("Do I look tired?", Person.FIRST),
    ("Is my suit orange?", Person.FIRST), ("What am I wearing?", Person.FIRST),
    ("Is there a flag behind me?", Person.FIRST), ("Are you tired?", Person.SECOND),
    ("Hello! Do you have a cat?", Person.SECOND), ("Can you see me?", Person.SECOND),
    ("Do you like my outfit?", None), ("Is there a cup?", None), ("Thank you!", None)])
def test_whom_a_question_is_about(text, about):
    """The 1.5B echoed the question's pronoun; the note says whose side to answer from."""
    assert asked_about(text) is about


def test_the_question_is_the_last_asked_sentence():
    assert question_of("Hello there! Can you see me? I am waving.") == "Can you see me?"
    assert question_of("Thank you. Goodbye!") == "Goodbye!"


def test_asks_to_repeat():
    assert asks_to_repeat("Sorry, can you say that again?")
    assert asks_to_repeat("What did you just say?")
    assert not asks_to_repeat("What did you see?")


def test_the_focus_note():
    assert focus_note("Am I holding a cup of coffee?") == \
        f"[{YES_NO_NOTE} {ABOUT_THE_PERSON_NOTE}]"
    memories = ["I saw you in orange", "I saw a cup", "It was dark"]
    start = focus_note("What did you see at the very beginning?", past=True, memories=memories)
    assert "I saw you in orange." in start and "cup" not in start
    recent = focus_note("What did you see before?", past=True, memories=memories)
    assert "I saw a cup." in recent and "It was dark." in recent and YES_NO_NOTE not in recent
    assert "about earlier" in focus_note("Did you see a cat before?", past=True)
    assert YES_NO_NOTE in focus_note("Did you see a cat before?", past=True)
    assert focus_note("What colour is my outfit?") == f"[{ABOUT_THE_PERSON_NOTE}]"
    assert focus_note("What do you see?") == ""          # the robot's side: no note
    assert focus_note("Hello there.") == ""
    assert focus_note("") == ""
    assert focus_note("Is it a dog?", style="soft") == f"[{SOFT_YES_NO_NOTE}]"
    with pytest.raises(ValueError, match="focus_note"):
        ConversationConfig(focus_note="loud")


SEEN = "one person, close, on the left, smiling, wearing orange and black (the view changed)"


@pytest.mark.parametrize("question, repeated", [
    ("Is my suit orange?", "the person's clothes are orange, with some black"),
    ("What am I wearing today?", "the person's clothes are orange, with some black"),
    ("Do you like my jacket?", "the person's clothes are orange, with some black"),
    ("Am I smiling?", None),                        # not about clothes
    ("What did I wear before?", None),              # about earlier: the memories, not now
])
def test_a_question_about_clothes_hears_what_the_person_wears(question, repeated):
    note = focus_note(question, past="before" in question, observation=SEEN)
    if repeated is None:
        assert NOW_NOTE not in note
    else:
        assert f"{NOW_NOTE} {repeated}." in note
    assert NOW_NOTE not in focus_note(question, observation="one person, close, on the left")


@pytest.mark.parametrize("question, told", [
    ("Are you wearing orange?", True), ("Do you have a cat?", True),
    ("Is that dog yours?", False),                  # not a question about the robot
    ("Do you own a car?", True), ("Do you like cats?", False), ("Do I have a cat?", False),
    ("What do you see?", False),
])
def test_a_question_about_what_the_robot_wears_or_has_is_told_what_it_sees_is_not_its(
        question, told):
    assert (NOT_YOURS_NOTE in focus_note(question, observation=SEEN)) is told


def test_an_answer_with_the_questions_own_new_word_is_not_a_repeat():
    """A sentence bringing the question's own word the earlier line lacked is said at once.

    'Do you like cats?' after 'No, I do not like coffee.': 'No, I do not like cats.' (the 1.5B's
    first try, dropped as a repeat, came back sampled with an invented tail on the
    perspective battery).
    """
    replies = iter(["No, I do not like coffee.", "No, I do not like cats."])
    be = FakeChatBackend(responder=lambda m, k: next(replies))
    c = Conversation(be, load_persona(), ConversationConfig(stream=False))
    try:
        assert c.turn("Do you like coffee?").text == "No, I do not like coffee."
        assert c.turn("Do you like cats?").text == "No, I do not like cats."
        assert len(be.calls) == 2 and c.replies.repeats_avoided == 0
    finally:
        c.close()


def test_near_repeats():
    said = [tuple("i see you in the middle wearing orange".split())]
    assert near_repeat("i can see you in the middle wearing orange".split(), said)
    assert not near_repeat("i see a cup of coffee on the table".split(), said)
    # a word of the question that the earlier line lacks: a new answer, not a repeat
    liked = [tuple("no i do not like coffee".split())]
    assert near_repeat("no i do not like cats".split(), liked)
    assert not near_repeat("no i do not like cats".split(), liked, asked={"like", "cats"})
    assert near_repeat("no i do not like coffee".split(), liked, asked={"like", "coffee"})
    f = NoteFilter(said=["I see you in the middle, wearing orange."])
    assert f.feed("I can see you in the middle, wearing orange!") == ""
    assert f.said_before == ["I can see you in the middle, wearing orange!"]
    assert f.feed("What do you like about it?") == "What do you like about it?"
    assert f.feed("What do you like about it?") == ""        # a repeat within the reply
    assert f.said_before == ["I can see you in the middle, wearing orange!"]


def test_a_first_clause_spoken_alone_is_judged_with_its_sentence():
    """A clause that starts a sentence said before waits for its rest; the whole is judged."""
    f = NoteFilter(said=["I see you in the middle, wearing orange."])
    assert f.feed("I see you in the middle,") == ""           # held: it may be a repeat
    assert f.feed("wearing orange.") == ""
    assert f.said_before == ["I see you in the middle, wearing orange."]
    f = NoteFilter(said=["I see you in the middle, wearing orange."])
    assert f.feed("I see you in the middle,") == ""
    assert f.feed("next to a tall green plant.") == \
        "I see you in the middle, next to a tall green plant."   # new: said, once
    f = NoteFilter(said=["I see you in the middle, wearing orange."])
    assert f.feed("Hello there my friend,") == "Hello there my friend,"    # said at once
    assert f.feed("how are you today?") == "how are you today?"
    assert f.feed("Hello there my friend, how are you today?") == ""     # kept as one sentence
    f = NoteFilter()
    assert f.feed("Oh dear, I could not go,") == "Oh dear, I could not go,"
    assert f.feed("speed: 'very fast' is not a number.") == \
        "speed: 'very fast' is not a number."            # the rest keeps its first word


def test_a_yes_or_no_is_said_at_once_though_a_sentence_said_before_began_with_it():
    """bench_voice: after the first "Yes, ..." every "Yes," waited for its whole sentence."""
    f = NoteFilter(said=["Yes, I can see you.", "No, I do not see a cup."])
    assert f.feed("Yes,") == "Yes,"                         # an answer: said at once
    assert f.feed("there is a cup on the table.") == "there is a cup on the table."
    f = NoteFilter(said=["Yes, I can see you."])
    assert f.feed("Yes,") == "Yes,"
    assert f.feed("I can see you.") == ""                    # the repeat is dropped after it
    assert f.said_before == ["I can see you."]
    f = NoteFilter(said=["Well, I can see you."])
    assert f.feed("Well,") == ""                             # not an answer alone: it waits
    assert f.feed("I can see you.") == ""
    f = NoteFilter(question="Do you like cats?", said=["I like cats."])
    assert f.feed("No,") == ""                               # against its word: judged alone
    assert f.feed("I do not like cats.") == ""


def test_the_rest_of_a_sentence_does_not_start_its_spoken_clause_again():
    """README command 1's demo: "I saw a person close," then "I saw someone close, in ..."."""
    f = NoteFilter()
    assert f.feed("I saw a person close,") == "I saw a person close,"
    assert f.feed("I saw someone close, in the middle, smiling, looking at me.") == \
        "in the middle, smiling, looking at me."
    f = NoteFilter()
    assert f.feed("I saw someone close,") == "I saw someone close,"
    assert f.feed("I saw someone close, in the middle.") == "in the middle."
    obs = "one person, close, in the middle, smiling, looking at you, wearing orange"
    f = NoteFilter(observations=[obs], memories=[obs])
    assert f.feed("I saw a person close,") == "I saw a person close,"
    assert f.feed("I saw someone close, in the middle, smiling, looking at me.") == \
        "in the middle, smiling, looking at me."      # later in its sentence: speech, no echo
    f = NoteFilter()                     # a rest that goes on from its clause is kept whole
    assert f.feed("When we started,") == "When we started,"
    assert f.feed("I saw a person, close to me.") == "I saw a person, close to me."


def _conv(supports_images: bool, seen: str = "one person, close, in the middle", **cfg):
    be = FakeChatBackend(supports_images=supports_images,
                         responder=lambda m, k: "Yes, you are.")
    obs = (lambda bgr: seen) if not supports_images else None
    return be, Conversation(be, load_persona(), ConversationConfig(**cfg), observer=obs)


def test_the_newest_frames_observation_reaches_the_note():
    """What the newest frame's observation says the person wears is told before the question."""
    be, c = _conv(False, seen="one person, close, in the middle, wearing mostly green")
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        c.turn("Is my shirt green?")
        note = be.calls[-1][1][-2]["content"]
        assert f"{NOW_NOTE} the person's clothes are mostly green." in note
    finally:
        c.close()


@pytest.mark.parametrize("supports_images, focus, noted", [
    (False, "strict", True), (False, "none", False), (True, "strict", False)])
def test_a_text_model_gets_the_note_right_before_the_question(supports_images, focus, noted):
    """Only text-only backends (small local models) get the note; it stays out of the timeline."""
    be, c = _conv(supports_images, focus_note=focus)
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        c.turn("Am I holding a cup of coffee?")
        before, last = be.calls[-1][1][-2:]
        assert last["role"] == "user" and "Am I holding a cup of coffee?" in str(last["content"])
        assert (before["role"] == "system" and YES_NO_NOTE in before["content"]) is noted
        assert not any(YES_NO_NOTE in str(d) for d in c.state()["timeline"])
    finally:
        c.close()


class _Stat:
    """A /proc/stat whose busy, niced and idle ticks the test moves."""

    def __init__(self, path, running=None):
        self.path, self.busy, self.niced, self.idle = path, 0, 0, 0
        self.running = running
        self.write()

    def add(self, busy, idle, niced=0):
        self.busy += busy
        self.idle += idle
        self.niced += niced
        self.write()

    def write(self):
        running = "" if self.running is None else f"procs_running {self.running}\n"
        self.path.write_text(f"cpu {self.busy} {self.niced} 0 {self.idle} 0 0 0 0 0 0\n"
                             "cpu0 1 2 3 4\n" + running)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A 2-core machine whose clock, /proc/stat and own process's ticks the test moves."""
    import vision_dialogue.llm.cpu_threads as ct
    monkeypatch.setattr(ct.os, "cpu_count", lambda: 2)
    clock = [100.0]
    monkeypatch.setattr(ct.time, "monotonic", lambda: clock[0])
    m = type("Machine", (), {})()
    m.clock, m.stat, m.own = clock, _Stat(tmp_path / "stat"), [0.0]
    m.share = lambda: CpuShare(cores=2, stat=m.stat.path, own=lambda: m.own[0])
    return m


def test_threads_follow_the_free_cores(machine, tmp_path):
    share, stat = machine.share(), machine.stat
    assert share.threads() == 2            # nothing measured yet: all cores
    machine.clock[0] += 5
    stat.add(busy=500, idle=500)           # another process kept one core busy
    assert share.threads() == 1 and round(share.others_busy, 2) == 1.0
    machine.clock[0] += 0.1
    stat.add(busy=0, idle=20)
    assert share.threads() == 1            # too short a look: the last answer stands
    machine.clock[0] += 5
    stat.add(busy=50, idle=950)            # quiet again
    assert share.threads() == 2
    assert CpuShare(fixed=3).threads() == 3
    with pytest.raises(ValueError):
        CpuShare(fixed=-1)
    assert CpuShare(stat=tmp_path / "missing").threads() >= 1


def test_the_models_own_work_and_niced_work_leave_it_all_cores(machine):
    """Its own threads are not others' load; niced work (people prints) gives way to it.

    The demo with the people node replied on one thread for its first three turns: the niced
    loading of the print models counted as busy, and the answer stuck (warm-ups and replies
    back to back never made a long enough window).
    """
    share, stat = machine.share(), machine.stat
    share.threads()
    machine.clock[0] += 5
    stat.add(busy=900, idle=100)           # its own generation kept both cores busy...
    machine.own[0] += 900                  # ...all of it this process's
    assert share.threads() == 2 and share.others_busy == 0
    machine.clock[0] += 5
    stat.add(busy=0, niced=500, idle=500)  # a niced process kept a core busy
    assert share.threads() == 2 and share.others_busy == 0
    machine.clock[0] += 5
    stat.add(busy=700, idle=300)           # own work and a process of normal priority
    machine.own[0] += 200
    assert share.threads() == 1 and round(share.others_busy, 2) == 1.0


def test_short_looks_do_not_keep_an_old_answer_forever(machine):
    """Generations back to back: the window grows over short looks until it can measure."""
    share, stat = machine.share(), machine.stat
    share.threads()
    machine.clock[0] += 5
    stat.add(busy=500, idle=500)
    assert share.threads() == 1
    for _ in range(4):                     # looks 0.1 s apart, the machine quiet again
        machine.clock[0] += 0.1
        stat.add(busy=0, idle=20)
        share.threads()
    assert share.last == 2


def test_work_that_has_ended_leaves_its_cores_to_the_reply(machine):
    """Work that ended frees its core for the reply; work that keeps running still counts.

    The recogniser kept a core busy until the person's words were known.
    """
    stat = machine.stat
    stat.running = 1                                    # only the caller runs now
    share = machine.share()
    share.threads()
    machine.clock[0] += 5
    stat.add(busy=500, idle=500)
    assert share.threads() == 2 and share.others_busy == 0
    machine.clock[0] += 5
    stat.add(busy=500, idle=500)
    stat.running = 2                                    # and another process still runs
    stat.write()
    assert share.threads() == 1 and round(share.others_busy, 2) == 1.0


class _WarmBackend(FakeChatBackend):
    """Records warm-ups (what a local model's warm() would read)."""

    def __init__(self, **kw):
        super().__init__(supports_images=False, **kw)
        self.warmed = []

    def warm(self, messages):
        self.warmed.append(messages)
        return 1


def _warmed_after_a_frame() -> tuple[_WarmBackend, Conversation]:
    """A conversation whose first frame has been warmed."""
    be = _WarmBackend()
    c = Conversation(be, load_persona(), ConversationConfig(n=4, m=3),
                     observer=lambda bgr: "one person, close, in the middle")
    c.add_frame(np.full((60, 80, 3), 120, np.uint8))
    assert c.wait_idle() and _until(
        lambda: be.warmed and be.warmed[-1] == c.prompt.reply_messages())
    return be, c


def test_the_persona_is_read_before_the_first_frame():
    """A local model reads the persona while the camera starts, not in the opening remark."""
    be = _WarmBackend()
    c = Conversation(be, load_persona(), ConversationConfig(n=4, m=3))
    try:
        assert _until(lambda: be.warmed)
        first = be.warmed[0][0]
        assert first == {"role": "system", "content": load_persona().system.strip()}
    finally:
        c.close()


def test_a_changed_prompt_is_warmed_between_turns_with_the_reply_prompt():
    be, c = _warmed_after_a_frame()
    try:
        assert be.warmed[-1] == c.prompt.reply_messages()
        c.turn("Hello!")
        reply_prompt = be.calls[-1][1]
        assert reply_prompt[:len(be.warmed[-1]) - 1] == be.warmed[-1][:-1]
    finally:
        c.close()
    off = _WarmBackend()
    c = Conversation(off, load_persona(), ConversationConfig(warm_cache=False))
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        c.turn("Hello!")
        assert off.warmed == []
    finally:
        c.close()


def test_the_people_note_is_warmed_so_a_turn_reads_only_its_line_and_focus_note():
    """The warm-up reads the note on who is there, right before the person's line.

    The reply's prompt is then the warmed one plus this turn's focus note and line.
    """
    be, c = _warmed_after_a_frame()
    try:
        c.set_people("Anna in front of you")
        c.add_frame(np.full((60, 80, 3), 110, np.uint8))
        assert _until(lambda: "Anna" in str(be.warmed[-1][-1]["content"]))
        warmed = be.warmed[-1]
        c.turn("Is anyone with you?")
        prompt = be.calls[-1][1]
        assert prompt[:len(warmed)] == warmed
        assert [m["role"] for m in prompt[len(warmed):]] == ["system", "user"]   # focus, line
    finally:
        c.close()


def test_a_frame_that_came_during_a_turn_is_read_after_it():
    """Not at the next turn: a warm-up during a turn is skipped, so one follows the turn."""
    be, c = _warmed_after_a_frame()
    try:
        during = []

        def camera(entry):
            if isinstance(entry, UserEntry) and not during:     # the turn is under way
                during.append(c.add_frame(np.full((60, 80, 3), 90, np.uint8)))
                assert _until(lambda: not c.warmer._pending)    # its warm-up was skipped
        c.add_listener(camera)
        n = len(be.warmed)
        c.turn("Hello!")
        assert during
        assert _until(lambda: len(be.warmed) > n and be.warmed[-1] == c.prompt.reply_messages())
        roles = [m["role"] for m in be.warmed[-1]]
        assert roles[-2:] == ["assistant", "system"]            # the reply, then what it sees
        assert be.warmed[-1][-1]["content"].startswith(load_persona().frame_label)
    finally:
        c.close()


def _chat_text(msgs: list) -> str:
    """The prompt as a chat template writes it, without the last message's end marker."""
    return "".join(f"<{m['role']}>{m['content']}</>" for m in msgs)[:-len("</>")]


def test_a_text_prompt_only_grows_at_its_end_as_frames_and_turns_come():
    """What a local model read stays valid: frames, people and turns change the prompt's end.

    llama.cpp reads only what follows the longest common prefix.
    """
    be = _WarmBackend()
    c = Conversation(be, load_persona(), ConversationConfig(n=8, m=3),
                     observer=lambda bgr: f"something at level {int(bgr.mean())}")
    try:
        c.add_frame(np.full((60, 80, 3), 60, np.uint8))
        before = c.prompt.reply_messages()
        c.add_frame(np.full((60, 80, 3), 90, np.uint8))
        after = c.prompt.reply_messages()
        assert _chat_text(after).startswith(_chat_text(before[:-1]))    # the "now" note went
        assert after[-1]["content"] == f"{load_persona().frame_label} something at level 90"
        c.set_people("one person, close, in the middle")
        c.turn("What do you see?")
        sent = be.calls[-1][1]
        assert _chat_text(sent).startswith(_chat_text(after[:-1]))      # notes after it
        assert sent[-1]["content"] == "What do you see?"
        assert any("one person, close" in m["content"] for m in sent[len(after) - 1:])
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        later = c.prompt.reply_messages()
        assert _chat_text(later).startswith(_chat_text(after[:-1]))     # and go with it
        assert "What do you see?" in _chat_text(later)[len(_chat_text(after[:-1])):]
    finally:
        c.close()


def test_summaries_wait_while_the_person_speaks():
    """A summary rewrites the prompt's middle: not while the person speaks (bounded)."""
    from vision_dialogue.core import summariser
    from vision_dialogue.core.timeline import FrameItem, SummaryItem
    be = _WarmBackend()
    c = Conversation(be, load_persona(), ConversationConfig(n=2, m=1),
                     observer=lambda bgr: "one person, close, in the middle")
    try:
        def kinds():
            return [type(it).__name__ for it in c.timeline.snapshot()
                    if isinstance(it, (FrameItem, SummaryItem))]
        c.hearing(True)
        for level in (60, 90, 120):
            c.add_frame(np.full((60, 80, 3), level, np.uint8))
        assert kinds() == ["FrameItem"] * 3                 # held: nothing rewritten
        c.hearing(False)
        assert kinds() == ["FrameItem"] * 3          # the turn that follows reads it as it is
        c.turn("What do you see?")
        assert kinds().count("FrameItem") == 1 and kinds()[-1] == "FrameItem", kinds()
        c.hearing(True)                                     # a "stopped" that never came
        summariser.HOLD_MAX_S, old = 0.0, summariser.HOLD_MAX_S
        try:
            c.add_frame(np.full((60, 80, 3), 150, np.uint8))
        finally:
            summariser.HOLD_MAX_S = old
        assert kinds().count("FrameItem") == 1, kinds()      # not held for ever
    finally:
        c.close()


def test_the_words_so_far_are_read_ahead_into_the_reply_prompt():
    """A partial line warms the prompt the turn will send, without entering the timeline."""
    be, c = _warmed_after_a_frame()
    try:
        lines = len(c.timeline)
        c.hear_ahead("What colour is   my")
        assert _until(lambda: be.warmed[-1][-1]["content"] == "What colour is my")
        ahead = be.warmed[-1]
        assert len(c.timeline) == lines                # nothing entered the prompt
        c.turn("What colour is my jacket?")
        sent = be.calls[-1][1]
        # everything before the person's line is what was read ahead (the focus note too)
        assert sent[:-1] == ahead[:-1] and sent[-1]["content"] == "What colour is my jacket?"
        n = len(be.warmed)
        c._no_turn.clear()                             # a turn under way: nothing is read
        c.hear_ahead("And")
        assert c.wait_idle() and len(be.warmed) == n
        c._no_turn.set()
    finally:
        c.close()


def test_a_note_only_the_whole_line_asks_for_comes_after_what_was_read_ahead():
    """Where do I ... work?: the partial words ask about nothing remembered, the line does.

    The note goes after the line, so a model that read the partial line ahead reads only the
    line's last words and the note when the person ends (before it, the whole line again).
    """
    note = 'Ada told you: "I work in building B".'
    be, c = _warmed_after_a_frame()
    try:
        c.remember_with(lambda: "", lambda line, late: LineNote(note, frozenset({note}))
                        if "work" in line.lower() else LineNote())
        c.hear_ahead("Where do I")
        assert _until(lambda: be.warmed[-1][-1]["content"] == "Where do I") and c.wait_idle()
        ahead = [m["content"] for m in be.warmed[-1]]
        assert note not in ahead and "[They ask about themselves" in ahead[-2]
        c.turn("Where do I work?")
        sent = [m["content"] for m in be.calls[-1][1]]
        assert sent[:-2] == ahead[:-1]             # up to the focus note, all read ahead
        assert sent[-2:] == ["Where do I work?", note]
    finally:
        c.close()


def test_a_frame_while_the_person_speaks_is_read_ahead_with_their_words_so_far():
    """A frame's warm-up keeps the words so far (it read the prompt without them, once).

    The reply then reads only the rest of the line; after it, warm-ups read the plain prompt.
    """
    be = _WarmBackend()
    c = Conversation(be, load_persona(), ConversationConfig(n=4, m=3),
                     observer=lambda bgr: f"a wall of grey {int(bgr.mean())}")
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        c.hear_ahead("What colour is my")
        assert _until(lambda: be.warmed and be.warmed[-1][-1]["content"] == "What colour is my")
        assert c.wait_idle()
        n = len(be.warmed)
        c.add_frame(np.full((60, 80, 3), 200, np.uint8))
        assert _until(lambda: len(be.warmed) > n) and c.wait_idle()
        assert be.warmed[-1][-1]["content"] == "What colour is my"
        assert "grey 200" in str(be.warmed[-1])                     # with the new frame
        c.turn("What colour is my jacket?")
        assert c.wait_idle()
        assert be.warmed[-1][-1]["content"] != "What colour is my"     # the line came
    finally:
        c.close()


def test_who_is_in_view_and_what_is_remembered_of_them_are_read_ahead():
    """A person who came, and the memory's standing note, are read before anyone speaks.

    The same people again ask for nothing (a tracker reports them again and again).
    """
    be, c = _warmed_after_a_frame()
    try:
        n = len(be.warmed)
        c.set_people("one person, in the middle", known=("Ada",))
        assert _until(lambda: len(be.warmed) > n) and c.wait_idle()
        assert "one person, in the middle" in str(be.warmed[-1])
        n = len(be.warmed)
        c.set_people("one person, in the middle", known=("Ada",))
        assert c.wait_idle() and len(be.warmed) == n
        c.remember_with(lambda: "You have met Ada before.", lambda line, late: LineNote())
        assert _until(lambda: len(be.warmed) > n) and c.wait_idle()
        assert "You have met Ada before." in str(be.warmed[-1])
    finally:
        c.close()


def _until(check, timeout=10.0):
    import time
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_token_triples_and_their_penalty():
    from vision_dialogue.llm.avoid import token_triples, triple_penalty
    encode = {"yes i can see you": [1, 2, 3, 4, 5], " yes i can see you": [9, 2, 3, 4, 5]}.get
    triples = token_triples(encode, ["yes i can see you"])
    assert triples == {(1, 2, 3), (2, 3, 4), (3, 4, 5), (9, 2, 3)}
    penalise = triple_penalty(triples, bias=5.0)
    scores = penalise([7, 2, 3], [0.0] * 6)
    assert scores[4] == -5.0 and sum(scores) == -5.0
    assert penalise([3], [0.0] * 6) == [0.0] * 6


class _AvoidingBackend(FakeChatBackend):
    avoids = True

    def stream(self, messages, *, model=None, max_tokens=None, temperature=None, avoid=()):
        self.avoided = list(avoid)
        return super().stream(messages, model=model, max_tokens=max_tokens,
                              temperature=temperature)


def test_a_local_model_is_told_which_lines_to_avoid():
    replies = iter(["Yes, I can see you now.", "Yes, I can see you now.", "You wave at me!"])
    be = _AvoidingBackend(supports_images=False, responder=lambda m, k: next(replies))
    c = Conversation(be, load_persona(), ConversationConfig(),
                     observer=lambda bgr: "one person, close, in the middle")
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        c.turn("Can you see me?")
        assert c.turn("Can you see me now?").text == "You wave at me!"
        assert be.avoided == ["Yes, I can see you now."]
    finally:
        c.close()


class _Seen:
    """What perception's observer returns: a text and the people it counted."""

    def __init__(self, text, people):
        self.text, self.people = text, people


def test_a_claim_to_see_the_person_when_nobody_is_in_view_is_corrected():
    replies = iter(["Yes, I can still see you. You look great!", "Yes, I see you."])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    seen = {"now": _Seen("no one there; a cup", [])}
    c = Conversation(be, load_persona(), ConversationConfig(), observer=lambda bgr: seen["now"])
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        first = c.turn("Can you still see me?")
        assert first.text.startswith("No, I do not see you right now.")
        assert "You look great!" in first.text
        seen["now"] = _Seen("one person, close, in the middle", [object()])
        c.add_frame(np.full((60, 80, 3), 140, np.uint8))
        assert c.turn("And now?").text == "Yes, I see you."
    finally:
        c.close()


def test_a_bare_yes_spoken_first_goes_with_a_claim_the_nobody_line_takes_the_place_of():
    """The first clause "Yes," waits while nobody is in view: its sentence may be replaced.

    Spoken at once, "Yes," and then the nobody line for "I can see you." made "Yes, No, I do not
    see you right now." (the dialogue battery, with the first clause from its first word).
    """
    nobody = "No, I do not see you right now."
    f = NoteFilter(nobody_line=nobody, question="Can you still see me?")
    assert f.feed("Yes,") == ""
    assert f.feed("I can still see you.") == nobody
    f = NoteFilter(nobody_line=nobody, question="Is there a cup?")
    assert f.feed("Yes,") == ""
    assert f.feed("there is a cup on the table.") == "Yes, there is a cup on the table."
    f = NoteFilter(question="Can you still see me?")      # someone in view: said at once
    assert f.feed("Yes,") == "Yes,"


def test_an_echo_turned_to_the_robots_side_is_judged_as_the_robot_would_say_it():
    """An echo turned to the robot's side meets the nobody rule.

    'Am I still in front of you?' -> 'Yes, I am still in front of you.' with nobody in view:
    turned round it claims to see the person, so the nobody line is said (the 1.5B, the
    perspective battery's coffee scene).
    """
    be = FakeChatBackend(supports_images=False,
                         responder=lambda m, k: "Yes, I am still in front of you.")
    c = Conversation(be, load_persona(), ConversationConfig(),
                     observer=lambda bgr: _Seen("no one there; a cup", []))
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        assert c.turn("Am I still in front of you?").text == "No, I do not see you right now."
    finally:
        c.close()


def test_a_claim_that_someone_is_here_when_nobody_is_in_view_is_corrected():
    """A claim that someone is here, with no one in view, becomes the anyone line.

    'Is anyone here with you?' -> 'Yes, there are people here with you.' (the 1.5B model, the
    battery's rocket scene).
    """
    replies = iter(["Yes, there are people here with you.", "There is no one else here.",
                    "Yes, there is someone on the left."])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    seen = {"now": _Seen("no one there; a rocket", [])}
    c = Conversation(be, load_persona(), ConversationConfig(), observer=lambda bgr: seen["now"])
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        assert c.turn("Is anyone here with you?").text == "No, I do not see anyone here right now."
        assert c.turn("Really nobody?").text == "There is no one else here."   # a denial stays
        seen["now"] = _Seen("one person, on the left", [object()])
        c.add_frame(np.full((60, 80, 3), 140, np.uint8))
        assert c.turn("And now?").text == "Yes, there is someone on the left."
    finally:
        c.close()


def test_a_reply_that_only_read_its_notes_out_is_asked_again_in_own_words():
    persona = load_persona()
    replies = iter([persona.dark_frames_note.strip(" []\n"), "It is too dark for me, sorry!"])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    c = Conversation(be, persona, ConversationConfig(), observer=lambda bgr: "darkness")
    try:
        c.add_frame(np.zeros((60, 80, 3), np.uint8))
        res = c.turn("What do you see now?")
        assert res.text == "It is too dark for me, sorry!" and not res.fallback
        assert be.calls[-1][1][-1]["content"] == persona.own_words_note
        assert be.calls[-1][2]["temperature"] > 0 and c.replies.repeats_avoided == 0
    finally:
        c.close()


@pytest.mark.parametrize("second, fallback", [("Hello there, I see you.", False), ("", True)])
def test_an_empty_reply_is_asked_for_once_more(second, fallback):
    """A small model on llama.cpp once ended a reply at once (a clean-clone CI run's fallback)."""
    replies = iter(["", second])
    be = FakeChatBackend(supports_images=False, responder=lambda m, k: next(replies))
    c = Conversation(be, load_persona(), ConversationConfig(avoid_repeats=False),
                     observer=lambda bgr: "a person")
    try:
        c.add_frame(np.full((60, 80, 3), 120, np.uint8))
        res = c.turn("And what did you see when we started talking?")
        assert len(be.calls) == 2 and res.fallback == fallback
        assert res.text in load_persona().fallback_lines if fallback else res.text == second
        assert be.calls[1][1] == be.calls[0][1]                 # the same prompt, no note
        assert be.calls[1][2]["temperature"] > 0
    finally:
        c.close()


def test_what_the_question_asks_about_is_repeated_next_to_it_from_the_objects_note():
    from vision_dialogue.core.focus import objects_asked_about
    note = "a dog or a cat in the middle; a cup on the left"
    assert objects_asked_about("Is there a cat with us?", note) == "a dog or a cat in the middle"
    assert objects_asked_about("Do you see cups?", note) == "a cup on the left"
    assert objects_asked_about("Is anyone on the left?", note) == ""     # places are not things
    text = focus_note("Is there a cat with us?", objects=note, style="soft")
    assert text.startswith("[In front of you, your eyes see now: a dog or a cat in the middle. ")
    # not for a question about the past: that one gets memories
    assert "Your eyes" not in focus_note("Did you see a cat earlier?", past=True,
                                         memories=["a cat"], objects=note)


def test_a_yes_no_question_on_one_of_two_animals_the_eyes_cannot_tell_apart_gets_maybe():
    """Is it a dog, with "a dog or a cat" in view: not a yes or a no (the 1.5B said yes)."""
    from vision_dialogue.core.focus import UNSURE_NOTE, names_one_of_a_pair
    note = "a dog or a cat in the middle; a cup on the left"
    assert names_one_of_a_pair("Is it a dog?", "a dog or a cat in the middle")
    assert names_one_of_a_pair("Do you see cats?", "two animals, dogs or cats, on the left")
    assert not names_one_of_a_pair("Is it a dog or a cat?", "a dog or a cat in the middle")
    assert not names_one_of_a_pair("Is there a cup?", "a cup on the left")
    text = focus_note("Is it a dog?", objects=note, style="soft")
    assert UNSURE_NOTE in text and SOFT_YES_NO_NOTE not in text
    for plain in ("Is there a cup on the table?", "Is it a dog or a cat?"):
        text = focus_note(plain, objects=note, style="soft")
        assert SOFT_YES_NO_NOTE in text and UNSURE_NOTE not in text, plain
    # not a yes/no question: no "Maybe" asked for
    assert UNSURE_NOTE not in focus_note("Tell me about the dog.", objects=note, style="soft")
    # nothing of the pair in view: the yes/no note as before
    assert UNSURE_NOTE not in focus_note("Is it a dog?", objects="a cup on the left")


def test_a_request_for_one_of_the_robots_actions_gets_no_yes_no_note():
    """A question such as "Could you wave at me?" asks to act when the robot can wave."""
    from vision_dialogue.core.focus import asks_to_act
    acts = {"wave", "hand", "go", "fetch", "bring", "look"}
    assert asks_to_act("Could you wave at me?", acts)
    assert asks_to_act("Hi there. Can you please fetch my umbrella?", acts)
    assert not asks_to_act("Could you wave at me?", set())          # no such tool
    assert not asks_to_act("Can you see my cup?", acts)             # a question for the eyes
    assert not asks_to_act("Do you like waving?", acts)
    assert focus_note("Could you wave at me?") == f"[{YES_NO_NOTE}]"
    assert focus_note("Could you wave at me?", acts=acts) == ""
    assert focus_note("Can you see my cup?", acts=acts) == f"[{YES_NO_NOTE}]"
