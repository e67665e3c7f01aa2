"""Where the memory notes go in the reply prompt: a local model reads the standing note once.

(A 1.5B on two cores read the whole note again at every reply when it went before each line:
bench_memory.py measured the first sentence more than twice as slow with memory on.)
"""
from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.conversation_types import LineNote
from vision_dialogue.core.persona import load_persona

STANDING = "You have met Dana before. Dana told you: loves sailing."
WORK = "Dana told you: works in building B."


def texts(msgs):
    return [m["content"] if isinstance(m["content"], str) else
            " ".join(p.get("text", "") for p in m["content"]) for m in msgs]


def test_the_standing_note_stays_where_it_first_went_and_a_lines_note_is_before_it():
    be = FakeChatBackend()
    c = Conversation(be, load_persona(), ConversationConfig(warm_cache=False))
    known = [STANDING]
    c.prompt.standing = lambda: known[0]
    c.prompt.recall = lambda line, late: LineNote(WORK, frozenset({WORK})) if "work" in line \
        else LineNote()
    try:
        for line in ("Hello!", "Where do I work?", "Nice weather today."):
            c.turn(line)
        prompts = [texts(c[1]) for c in be.of_kind("reply")]
        at = prompts[0].index(STANDING)
        assert prompts[0][at + 1:] and "Hello!" in prompts[0][-1]
        for later in prompts[1:]:
            assert later[:at + 1] == prompts[0][:at + 1]        # the same prefix, note and all
            assert later.count(STANDING) == 1
        assert prompts[1][-2:] == [WORK, "Where do I work?"]    # the line's own note: last
        assert WORK not in prompts[2]
        known[0] = STANDING + " Last time you talked about: boats."     # a new note: at the end
        c.turn("Bye!")
        newest = texts(be.of_kind("reply")[-1][1])
        assert STANDING not in newest and newest[-2] == known[0] and "Bye!" in newest[-1]
        known[0] = ""                                           # they left: no note
        c.turn("Hello?")
        assert not [t for t in texts(be.of_kind("reply")[-1][1]) if "Dana" in t]
    finally:
        c.close()


def read_ahead(c, words):
    """The messages a warm-up reads while the person has said `words` so far."""
    return texts(c.prompt.turn_messages(words, "", "", "", False, c.prompt.ahead(words, ""),
                                        ahead=True)[1])


def test_a_note_first_heard_with_the_lines_last_word_goes_after_the_line():
    be = FakeChatBackend()
    c = Conversation(be, load_persona(), ConversationConfig(warm_cache=False))
    c.prompt.standing = lambda: STANDING
    c.prompt.recall = lambda line, late: LineNote(WORK, frozenset({WORK})) if "work" in line \
        else LineNote()
    try:
        assert WORK not in read_ahead(c, "Where do I")          # no note yet: the line read
        at_pause = read_ahead(c, "Where do I work?")
        assert at_pause[-2:] == ["Where do I work?", WORK]      # not the line again after it
        c.turn("Where do I work?")
        final = texts(be.of_kind("reply")[-1][1])
        assert final == at_pause                                # what the warm-up read: cached
        # heard with the first words, the note goes before the line, and stays there
        assert read_ahead(c, "My work")[-2:] == [WORK, "My work"]
        assert read_ahead(c, "My work is far")[-2:] == [WORK, "My work is far"]
        c.turn("My work is far.")
        assert texts(be.of_kind("reply")[-1][1])[-2:] == [WORK, "My work is far."]
        c.turn("Where do I work?")                              # typed: nothing read ahead
        assert texts(be.of_kind("reply")[-1][1])[-2:] == [WORK, "Where do I work?"]
    finally:
        c.close()


def test_a_note_read_ahead_that_tells_what_the_whole_line_asks_stays_before_it():
    """What do I love ... baking?: the first words' note told the fact the line asks about."""
    both = LineNote("Dana told you: loves sailing; loves baking bread.",
                    frozenset({"sailing", "baking"}))
    baking = LineNote("Dana told you: loves baking bread.", frozenset({"baking"}))
    be = FakeChatBackend()
    c = Conversation(be, load_persona(), ConversationConfig(warm_cache=False))
    c.prompt.standing = lambda: STANDING
    c.prompt.recall = lambda line, late: baking if "baking" in line else \
        both if "love" in line else LineNote()
    try:
        assert read_ahead(c, "What do I love")[-2:] == [both.text, "What do I love"]
        at_pause = read_ahead(c, "What do I love baking?")
        assert at_pause[-2:] == [both.text, "What do I love baking?"]
        c.turn("What do I love baking?")
        assert texts(be.of_kind("reply")[-1][1]) == at_pause
    finally:
        c.close()
