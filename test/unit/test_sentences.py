"""SentenceSplitter / split_sentences: boundaries, things that must not split, streaming."""
from __future__ import annotations

import pytest

from vision_dialogue.llm.sentences import SentenceSplitter, iter_sentences, split_sentences


def feed_all(deltas):
    s = SentenceSplitter()
    out = []
    for d in deltas:
        out.extend(s.feed(d))
    return out + s.flush()


def test_basic_terminators_in_order():
    assert split_sentences("Hi! How are you? I am fine. Great.") == [
        "Hi!", "How are you?", "I am fine.", "Great."]


def test_unicode_ellipsis_and_runs_of_marks():
    assert split_sentences("Really?! No way!!! Yes.") == ["Really?!", "No way!!!", "Yes."]


def test_decimals_do_not_split():
    assert split_sentences("Pi is 3.14 and e is 2.718. Next.") == ["Pi is 3.14 and e is 2.718.",
                                                                   "Next."]


def test_decimal_split_across_deltas_is_held_back():
    s = SentenceSplitter()
    assert s.feed("It costs 3") == []
    assert s.feed(".") == []          # could be "3." + "5": must wait
    assert s.feed("5 euros. And") == ["It costs 3.5 euros."]
    assert s.flush() == ["And"]


@pytest.mark.parametrize("text", [
    "I met Mr. Smith and Dr. Jones today.",
    "Bring fruit, e.g. apples or i.e. anything round.",
    "It was Prof. Brown vs. Mrs. Green at St. Mary's.",
])
def test_abbreviations_do_not_split(text):
    assert split_sentences(text + " Then we left.") == [text, "Then we left."]


def test_ellipsis_mid_sentence_does_not_split():
    assert split_sentences("Well... I think so. Hmm… maybe later.") == [
        "Well... I think so.", "Hmm… maybe later."]


def test_ellipsis_ends_sentence_at_newline_and_end():
    assert split_sentences("Let me think...\nOkay… the cup...") == [
        "Let me think...", "Okay… the cup..."]


def test_newlines_split_and_blank_lines_give_nothing():
    assert split_sentences("- a red cup\n\n\n- a blue  pen\n   \nlast") == [
        "- a red cup", "- a blue  pen", "last"]


def test_whitespace_stripped_and_never_empty():
    s = SentenceSplitter()
    assert s.feed("   ") == []
    assert s.feed("\n\n \t\n") == []
    assert s.flush() == []
    assert split_sentences("") == []
    assert split_sentences("  Hello.   World.  ") == ["Hello.", "World."]


def test_closing_quotes_and_brackets_stay_with_sentence():
    assert split_sentences('He said "hi." (Really!) Ok.') == ['He said "hi."', "(Really!)", "Ok."]


def test_no_split_without_following_whitespace():
    assert split_sentences("Visit example.com today.") == ["Visit example.com today."]


def test_sentence_comes_out_as_soon_as_it_ends():
    s = SentenceSplitter()
    assert s.feed("Hello there") == []
    assert s.feed(".") == []
    assert s.feed(" How") == ["Hello there."]
    assert s.pending.strip() == "How"
    assert s.feed(" are you?\n") == ["How are you?"]
    assert s.pending == ""


@pytest.mark.parametrize("text", [
    "Hi! How are you? I see a cup. It costs 3.5 euros, e.g. cheap. Mr. Bean... is here.\nOk",
    "Wow!!! Look at that “red” hat.) Nice? Yes.\n\n- one\n- two",
])
def test_char_by_char_equals_whole_text(text):
    assert feed_all(list(text)) == split_sentences(text)
    # and any chunking in between
    assert feed_all([text[i:i + 3] for i in range(0, len(text), 3)]) == split_sentences(text)


def test_flush_resets():
    s = SentenceSplitter()
    s.feed("First part")
    assert s.flush() == ["First part"]
    assert s.feed("Second. ") == ["Second."]
    assert s.flush() == []


def test_feed_rejects_non_text():
    with pytest.raises(TypeError):
        SentenceSplitter().feed(b"bytes.")


def test_iter_sentences_is_lazy():
    consumed = []

    def deltas():
        for d in ["One. ", "Two", ". ", "Three"]:
            consumed.append(d)
            yield d

    it = iter_sentences(deltas())
    assert next(it) == "One."
    assert consumed == ["One. "]          # the rest was not read yet
    assert list(it) == ["Two.", "Three"]


def test_the_first_clause_of_a_spoken_reply_comes_on_its_own():
    """From 4 words, the first piece ends at a comma, semicolon or spaced dash (not a colon)."""
    def pieces(text, words=4):
        s = SentenceSplitter(first_clause_words=words)
        out = []
        for token in text.split(" "):          # streamed word by word, as a model writes
            out.extend(s.feed(token + " "))
        return out + s.flush()
    assert pieces("Yes, I can see you sitting there, with a cup. It is blue, and big.") == [
        "Yes, I can see you sitting there,", "with a cup.", "It is blue, and big."]
    assert pieces("Oh dear, Error: go_to: speed is wrong. Ok.") == [
        "Oh dear, Error: go_to: speed is wrong.", "Ok."]            # not at a colon
    assert pieces("I see two people - one is waving. Hi.") == [
        "I see two people -", "one is waving.", "Hi."]
    assert pieces("Hi! I can see you, over there.") == ["Hi!", "I can see you, over there."]
    assert pieces("A well-known old painting, I think.") == [
        "A well-known old painting,", "I think."]
    assert pieces("A well-known painting, I think.") == ["A well-known painting, I think."]
    assert pieces("It costs 1,000 euros and more.") == ["It costs 1,000 euros and more."]
    assert pieces("Yes, I can see you, there.", words=0) == ["Yes, I can see you, there."]
    assert pieces("Yes, I can see you, there.", words=1) == ["Yes,", "I can see you, there."]
    assert pieces("Hello! Yes, I can.", words=1) == ["Hello!", "Yes, I can."]  # first piece only
    assert split_sentences("Yes, I can see you, there.") == ["Yes, I can see you, there."]
    s = SentenceSplitter(first_clause_words=4)
    assert s.feed("One two three four,") == []              # undecided until more comes
    assert s.feed(" five.") == ["One two three four,"] and s.flush() == ["five."]
    assert s.feed("One two three four, five. ") == ["One two three four,", "five."]
