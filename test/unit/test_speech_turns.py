"""The speech node's turn logic (speech/turns.py) without ROS.

States, reply queue, barge-in, reply timeout, a failing backend.
"""
from __future__ import annotations

import threading
import time

from conftest import until
from vision_dialogue.speech.base import SpeechBackend
from vision_dialogue.speech.turns import IDLE, LISTENING, SPEAKING, THINKING, SpeechTurns


class RecordingBackend(SpeechBackend):
    """Records every hook; speak() takes `say_seconds` unless stopped (barge-in)."""

    name = "recording"

    def __init__(self, say_seconds: float = 0.0, fail_on: str = ""):
        super().__init__()
        self.calls: list[tuple] = []
        self.say_seconds, self.fail_on = say_seconds, fail_on
        self._stop = threading.Event()

    def _record(self, *call):
        self.calls.append(call)
        if call[0] == self.fail_on:
            raise RuntimeError(f"{call[0]} broke")

    def on_thinking(self):
        self._record("thinking")

    def begin_reply(self):
        self._record("begin")

    def speak(self, text):
        self._stop.clear()
        self._record("say", text)
        return not self._stop.wait(self.say_seconds)

    def stop_speaking(self):
        self._record("stop")
        self._stop.set()

    def end_reply(self, text, timed_out=False):
        self._record("end", text, timed_out)

    def names(self):
        return [c[0] for c in self.calls]


def make(backend=None, reply_timeout=5.0):
    backend = backend or RecordingBackend()
    states, heard = [], []
    turns = SpeechTurns(backend, publish=heard.append, on_state=states.append,
                        reply_timeout=reply_timeout)
    return turns, backend, states, heard


def test_a_turn_goes_listening_thinking_speaking_listening():
    turns, backend, states, heard = make()
    try:
        turns.listening()
        turns.utterance(" hello robot ", speaker="ana", language="en-GB", confidence=0.9)
        assert heard[0].text == "hello robot" and heard[0].speaker == "ana"
        assert heard[0].language == "en-GB" and heard[0].confidence == 0.9
        assert turns.state == THINKING and backend.names() == ["thinking"]
        turns.on_reply(1, "Hi there.", final=False)
        turns.on_reply(1, "Nice hat.", final=False)
        turns.on_reply(1, "Hi there. Nice hat.", final=True)
        assert until(lambda: turns.state == LISTENING and "end" in backend.names())
        assert backend.calls[1:] == [("begin",), ("say", "Hi there."), ("say", "Nice hat."),
                                     ("end", "Hi there. Nice hat.", False)]
        assert states == [IDLE, LISTENING, THINKING, SPEAKING, LISTENING]
        assert turns.wait_idle(1.0)
    finally:
        turns.close()


def test_a_final_reply_without_chunks_is_spoken_sentence_by_sentence():
    turns, backend, _, _ = make()
    try:
        turns.utterance("hi")
        turns.on_reply(4, "One. Two!", final=True)
        assert until(lambda: "end" in backend.names())
        assert [c for c in backend.calls if c[0] == "say"] == [("say", "One."), ("say", "Two!")]
    finally:
        turns.close()


def test_barge_in_stops_speech_and_drops_the_rest_of_that_reply():
    turns, backend, _, heard = make(RecordingBackend(say_seconds=5.0))
    try:
        turns.utterance("tell me a story")
        turns.on_reply(1, "Once upon a time.", final=False)
        assert until(lambda: ("say", "Once upon a time.") in backend.calls)
        t0 = time.monotonic()
        turns.utterance("stop, please")
        # stopped, not said to its end (5 s)
        assert "stop" in backend.names() and time.monotonic() - t0 < 5.0
        turns.on_reply(1, "There was a robot.", final=False)      # late chunk of turn 1
        turns.on_reply(1, "Once upon a time. There was a robot.", final=True)
        turns.on_reply(2, "Okay.", final=True)
        assert until(lambda: ("say", "Okay.") in backend.calls, timeout=8.0)
        said = [c[1] for c in backend.calls if c[0] == "say"]
        assert said == ["Once upon a time.", "Okay."]
        assert [h.text for h in heard] == ["tell me a story", "stop, please"]
    finally:
        turns.close()


def test_no_reply_in_time_tells_the_backend_and_listens_again():
    turns, backend, states, _ = make(reply_timeout=0.3)
    try:
        turns.utterance("anyone there?")
        assert until(lambda: ("end", "", True) in backend.calls)
        assert until(lambda: turns.state == LISTENING)
    finally:
        turns.close()


def test_unavailable_robot_is_idle_and_a_failing_backend_is_survived():
    turns, backend, states, heard = make(RecordingBackend(fail_on="begin"))
    try:
        turns.listening()
        turns.unavailable()
        assert turns.state == IDLE
        turns.utterance("hello")
        turns.on_reply(1, "Hi.", final=True)       # begin_reply raises: logged, speech goes on
        assert until(lambda: ("say", "Hi.") in backend.calls and turns.state == LISTENING)
        assert heard[0].text == "hello"
        turns.utterance("   ")                      # blank: nothing published
        assert len(heard) == 1
    finally:
        turns.close()


def test_input_finished_is_reported_once_and_close_is_idempotent():
    finished = []
    backend = RecordingBackend()
    turns = SpeechTurns(backend, publish=lambda u: None,
                        on_input_finished=lambda: finished.append(1))
    turns.input_finished()
    assert turns.input_done.is_set() and finished == [1]
    turns.close()
    turns.close()
    turns.utterance("after close")                 # ignored, no crash
    assert backend.names() == []


# --- an acknowledgement when the reply is late ----------------------------------------------
def test_the_kind_of_line_picks_the_acknowledgement():
    from vision_dialogue.speech.acknowledgement import kind_of_line
    assert kind_of_line("What colour is the cup on the table?") == "looking"
    assert kind_of_line("how many chairs can you see") == "looking"     # no question mark
    assert kind_of_line("Do you remember my name?") == "thinking"
    assert kind_of_line("What would you like to do this afternoon?") == "thinking"
    assert kind_of_line("I like cats.") == "listening"
    assert kind_of_line("My name is Anna and I work here.") == "listening"


def test_an_acknowledgement_is_never_due_on_two_turns_in_a_row_nor_twice_in_one():
    from vision_dialogue.speech.acknowledgement import LOOKING_PHRASES, Acknowledger
    ack = Acknowledger(1.0)
    said = []
    for turn in range(6):
        ack.heard("What do you see?")
        said.append([ack.due(w) for w in (0.5, 1.0, 2.0)])
    assert said[0] == [None, LOOKING_PHRASES[0], None]
    assert said[1] == [None, None, None]                    # the turn after one: none
    assert said[2] == [None, LOOKING_PHRASES[1], None]      # the phrases take turns
    assert ack.said == 3
    assert Acknowledger(0.0).due(99.0) is None               # off


def test_a_late_reply_is_acknowledged_first_and_a_prompt_one_is_not():
    backend = RecordingBackend()
    states, heard = [], []
    from vision_dialogue.speech.acknowledgement import Acknowledger
    turns = SpeechTurns(backend, publish=heard.append, on_state=states.append,
                        acknowledger=Acknowledger(0.2))
    try:
        turns.listening()
        t0 = time.monotonic()
        turns.utterance("What colour is my cup?")
        assert until(lambda: ("say", "Let me see.") in backend.calls)
        late = time.monotonic() - t0
        assert 0.2 <= late < 0.6, late
        turns.on_reply(1, "It is red.", False)
        turns.on_reply(1, "It is red.", True)
        assert until(lambda: turns.state == LISTENING)
        said = [c[1] for c in backend.calls if c[0] == "say"]
        assert said == ["Let me see.", "It is red."]
        # the next turn is late too, but never two in a row; the one after answers in time
        for line, reply, delay in (("Do you like it?", "I do.", 0.4),
                                   ("I like cats.", "Me too.", 0.0)):
            turns.utterance(line)
            time.sleep(delay)
            turns.on_reply(2, reply, True)
            assert until(lambda: ("end", reply, False) in backend.calls)
        said = [c[1] for c in backend.calls if c[0] == "say"]
        assert said == ["Let me see.", "It is red.", "I do.", "Me too."]
    finally:
        turns.close()


def test_the_person_speaking_stops_the_acknowledgement():
    from vision_dialogue.speech.acknowledgement import Acknowledger
    backend = RecordingBackend(say_seconds=5.0)
    turns = SpeechTurns(backend, publish=lambda h: None, acknowledger=Acknowledger(0.1))
    try:
        turns.listening()
        turns.utterance("What do you see?")
        assert until(lambda: ("say", "Let me see.") in backend.calls)
        turns.utterance("Actually, never mind.")
        assert until(lambda: "stop" in backend.names())
    finally:
        turns.close()
