"""voice/tts.py's KeptPhrases: short phrases said again at once, the openings made ahead."""
from __future__ import annotations

import logging
import threading

import numpy as np

from vision_dialogue.voice.tts import OPENINGS, KeptPhrases, TTSError


class CountingVoice:
    """A synthesiser that writes down what it was asked; `gate` holds each call until set."""

    name = "counting"

    def __init__(self, fail: bool = False, gate: threading.Event | None = None):
        self.asked: list[str] = []
        self.fail, self.gate = fail, gate
        self.called = threading.Event()

    def synthesize(self, text):
        self.called.set()
        if self.gate is not None:
            assert self.gate.wait(10.0), "the test never opened the gate"
        if self.fail:
            raise TTSError("no voice")
        self.asked.append(text)
        return np.full(len(text), len(self.asked), np.float32), 22050


def test_a_short_phrase_is_synthesised_once_and_said_again_from_what_was_kept():
    voice = CountingVoice()
    kept = KeptPhrases(voice)
    first = kept.synthesize("Yes,")
    again = kept.synthesize("Yes,")
    assert voice.asked == ["Yes,"]
    assert again[1] == 22050 and np.array_equal(first[0], again[0])


def test_a_long_sentence_is_synthesised_each_time_unless_asked_to_keep_it():
    voice = CountingVoice()
    kept = KeptPhrases(voice, keep_words=3)
    sentence = "I see a red cup on the table."
    kept.synthesize(sentence)
    kept.synthesize(sentence)
    assert voice.asked == [sentence, sentence] and not kept.kept(sentence)
    kept.synthesize("Hmm, let me see a bit.", keep=True)      # an acknowledgement
    kept.synthesize("Hmm, let me see a bit.")
    assert voice.asked.count("Hmm, let me see a bit.") == 1


def test_the_least_lately_said_phrase_goes_first_when_full():
    kept = KeptPhrases(CountingVoice(), keep_max=2)
    kept.synthesize("Yes,")
    kept.synthesize("No,")
    kept.synthesize("Yes,")              # said lately again: "No," is now the oldest
    kept.synthesize("Hello!")
    assert [kept.kept(p) for p in ("Yes,", "No,", "Hello!")] == [True, False, True]


def test_the_openings_are_made_on_a_thread_of_their_own():
    gate = threading.Event()
    voice = CountingVoice(gate=gate)
    kept = KeptPhrases(voice)
    kept.warm()
    assert not any(kept.kept(p) for p in OPENINGS)      # nothing waits for the warm-up
    gate.set()
    kept.warm(wait=True)             # a second warm-up ends the first: each phrase made once
    assert voice.asked == list(OPENINGS) and all(kept.kept(p) for p in OPENINGS)


def test_close_stops_a_warm_up_before_its_next_phrase():
    gate = threading.Event()
    voice = CountingVoice(gate=gate)
    kept = KeptPhrases(voice)
    kept.warm(("One,", "Two,", "Three,"))
    assert voice.called.wait(10.0)
    closing = threading.Thread(target=kept.close)
    closing.start()
    assert kept._stop.wait(10.0)          # close has asked; the first phrase is still made
    gate.set()
    closing.join(10.0)
    assert not closing.is_alive() and voice.asked == ["One,"]


def test_a_voice_that_fails_ahead_is_a_warning_and_the_phrase_is_tried_when_said(caplog):
    voice = CountingVoice(fail=True)
    kept = KeptPhrases(voice, log=logging.getLogger("test"))
    with caplog.at_level(logging.WARNING):
        kept.warm()
        kept.close()
    assert "cannot synthesise 'No,' ahead: no voice" in caplog.text
    voice.fail = False
    kept.synthesize("No,")
    assert voice.asked == ["No,"]


def test_a_voice_that_keeps_nothing_makes_nothing_ahead():
    voice = CountingVoice()
    kept = KeptPhrases(voice, keep_max=0)
    kept.warm(wait=True)
    kept.synthesize("Yes,")
    kept.synthesize("Yes,")
    assert voice.asked == ["Yes,", "Yes,"] and not kept.kept("Yes,")
