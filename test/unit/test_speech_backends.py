"""Speech backends without ROS.

Script files, terminal, and the Furhat backends against fake robots on 127.0.0.1 (the real furhat-
remote-api client; our websocket client).
"""
from __future__ import annotations

import io
import json
import logging
import os
import threading
import time

import numpy as np

import pytest

from fake_furhat import FakeFurhat
from fake_furhat_realtime import FakeFurhatRealtime
from vision_dialogue.speech import SPEECH_BACKENDS
from vision_dialogue.furhat.realtime_speech import FurhatRealtimeBackend
from vision_dialogue.furhat.remote_speech import FurhatRemoteBackend
from vision_dialogue.speech.script import (ScriptBackend, ScriptError, ScriptItem,
                                           load_answers, load_script)
from vision_dialogue.speech.terminal import TerminalBackend
from vision_dialogue.voice.audio import write_wav

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """SpeechEvents that records what a backend reports, with times."""

    def __init__(self):
        self.utterances: list[tuple[float, str, str, str]] = []
        self.listens = 0
        self.finished = threading.Event()
        self.t0 = time.monotonic()

    def utterance(self, text, speaker="", language="", confidence=-1.0, spoken=None):
        self.utterances.append((time.monotonic() - self.t0, text, speaker, language))

    def listening(self):
        self.listens += 1

    def input_finished(self):
        self.finished.set()

    def texts(self):
        return [u[1] for u in self.utterances]

    def wait(self, n, timeout=5.0):
        deadline = time.monotonic() + timeout
        while len(self.utterances) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.utterances) >= n


# ------------------------------------------------------------------ script files
def test_load_script_yaml_with_defaults(tmp_path):
    f = tmp_path / "demo.yaml"
    f.write_text("language: sv-SE\nspeaker: anna\nitems:\n"
                 "  - say: Hej\n  - {say: 'What is this?', wait_for_reply: true}\n"
                 "  - {say: Bye, delay: 1.5, language: en-GB, speaker: bob}\n")
    items = load_script(f)
    assert items == [ScriptItem("Hej", 0.0, False, "sv-SE", "anna"),
                     ScriptItem("What is this?", 0.0, True, "sv-SE", "anna"),
                     ScriptItem("Bye", 1.5, False, "en-GB", "bob")]


def test_load_script_json_list(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps([{"say": "one", "delay": 0}, {"say": "two"}]))
    assert [i.say for i in load_script(f)] == ["one", "two"]


@pytest.mark.parametrize("content,problem", [
    (None, "file not found"),
    ("items: [say: x", "not valid YAML"),
    ("[]", "non-empty list"),
    ("- hello\n", "item 1: expected a mapping"),
    ("- {say: ''}\n", "item 1: 'say' must be a non-empty string"),
    ("- {say: a}\n- {say: b, delay: -1}\n", "item 2: 'delay' must be a number"),
    ("- {say: a, dealy: 2}\n", "item 1: unknown keys ['dealy']"),
    ("- {say: a, wait_for_reply: maybe}\n", "item 1: 'wait_for_reply' must be true or false"),
    ("- {say: a, at: soon}\n", "item 1: 'at' must be a number of seconds >= 0"),
])
def test_invalid_scripts_name_file_and_problem(tmp_path, content, problem):
    f = tmp_path / "bad.yaml"
    if content is not None:
        f.write_text(content)
    with pytest.raises(ScriptError) as e:
        load_script(f)
    assert str(f) in str(e.value) and problem in str(e.value)


def test_shipped_demo_script_is_valid():
    from conftest import REPO
    items = load_script(REPO / "config" / "demo_script.yaml")
    assert 4 <= len(items) <= 6
    assert any(i.wait_for_reply for i in items) and any(i.delay > 0 for i in items)


# ------------------------------------------------------------------ script backend
def test_script_delays_and_wait_for_reply():
    out = io.StringIO()
    items = [ScriptItem("first"), ScriptItem("second", delay=0.2),
             ScriptItem("third", wait_for_reply=True)]
    b = ScriptBackend(items, reply_timeout=5.0, output_stream=out, language="en-US")
    rec = Recorder()
    b.start(rec)
    assert rec.wait(2)
    t_first, t_second = rec.utterances[0][0], rec.utterances[1][0]
    assert t_second - t_first >= 0.19                       # the delay
    time.sleep(0.3)
    assert len(rec.utterances) == 2                          # third waits for a reply
    t_reply = time.monotonic() - rec.t0
    b.speak("A reply.")
    b.end_reply("A reply.")
    assert rec.wait(3)
    assert rec.utterances[2][0] >= t_reply
    assert not rec.finished.is_set()                         # waits for the last reply too
    b.end_reply("Last reply.")
    assert rec.finished.wait(2)
    assert rec.utterances[0][3] == "en-US"
    assert "you: first" in out.getvalue() and "robot: A reply." in out.getvalue()
    b.close()


def test_script_waits_for_the_robots_opening_remark_however_long_it_takes():
    out = io.StringIO()
    b = ScriptBackend([ScriptItem("hello", wait_for_greeting=True)], reply_timeout=5.0,
                      output_stream=out)
    rec = Recorder()
    b.start(rec)
    try:
        time.sleep(0.4)
        assert rec.utterances == []                # the robot has not spoken yet
        b.speak("Hello there, I like your shirt.")
        b.end_reply("Hello there, I like your shirt.")
        assert rec.wait(1)
        assert out.getvalue().index("robot: Hello there") < out.getvalue().index("you: hello")
    finally:
        b.close()


def test_script_at_times_items_from_the_start_and_names_several_speakers():
    out = io.StringIO()
    items = [ScriptItem("hi", speaker="Anna"), ScriptItem("late", speaker="Ben", at=0.5),
             ScriptItem("already past", speaker="Ben", at=0.1)]
    b = ScriptBackend(items, reply_timeout=5.0, output_stream=out)
    rec = Recorder()
    b.start(rec)
    try:
        assert rec.wait(3)
        times = [u[0] for u in rec.utterances]
        assert times[0] < 0.2 and 0.5 <= times[1] < 0.8 and times[2] - times[1] < 0.1
        assert "Anna: hi" in out.getvalue() and "Ben: late" in out.getvalue()
    finally:
        b.close()


def test_script_wait_for_reply_times_out_and_goes_on(caplog):
    log = logging.getLogger("test.script")
    b = ScriptBackend([ScriptItem("a"), ScriptItem("b", wait_for_reply=True)],
                      reply_timeout=0.01, output_stream=io.StringIO(), logger=log)
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="test.script"):
        b.start(rec)
        assert rec.wait(2)
        assert rec.finished.wait(2)
    assert rec.utterances[1][0] - rec.utterances[0][0] >= 1.0     # reply_timeout + 1 s
    assert "no reply within" in caplog.text
    b.close()


ANSWERED = """
items:
  - say: "I am Anna."
    speaker: Anna
  - say: "What colour is my suit?"
    speaker: Anna
    wait_for_reply: true
answers:
  - when: "May I remember you"
    say: "Yes, you may."
"""


def test_a_question_the_robot_asks_gets_the_scripted_answer_before_the_next_line(tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text(ANSWERED)
    out = io.StringIO()
    b = ScriptBackend(script, reply_timeout=5.0, output_stream=out)
    rec = Recorder()
    b.start(rec)
    try:
        assert rec.wait(1)
        b.end_reply("Hello Anna.")                  # not a question it answers
        assert rec.wait(2) and rec.texts() == ["I am Anna.", "What colour is my suit?"]
        b.end_reply("Nice to meet you. may i remember you, so I can greet you next time?")
        b.end_reply("Sorry, I did not catch that. May I remember you?")   # asked again
        b.end_reply("Thank you! I will remember you next time.")
        assert rec.finished.wait(3)
        assert rec.texts()[2:] == ["Yes, you may.", "Yes, you may."]
        assert [u[2] for u in rec.utterances[2:]] == ["Anna", "Anna"]   # the last speaker
        assert "you: Yes, you may." in out.getvalue()
    finally:
        b.close()


def test_the_script_does_not_say_its_next_line_into_a_line_the_robot_is_saying(tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text('items: [{say: "I am Anna."}, {say: "What colour is my suit?", '
                      'delay: 0.2}]\nanswers: [{when: "May I remember you", say: "Yes."}]\n')
    b = ScriptBackend(script, reply_timeout=5.0, output_stream=io.StringIO())
    rec = Recorder()
    b.start(rec)
    try:
        assert rec.wait(1)
        b.speak("May I remember you,")             # the robot's question begins
        time.sleep(0.6)
        assert rec.texts() == ["I am Anna."]       # the next line waits for its end
        b.end_reply("May I remember you, so I can greet you next time?")
        assert rec.wait(3)
        assert rec.texts() == ["I am Anna.", "Yes.", "What colour is my suit?"]
    finally:
        b.close()


@pytest.mark.parametrize("answers, problem", [
    ("answers: {when: x}", "'answers' must be a list"),
    ("answers: [{when: x}]", "answer 1: 'say' must be a non-empty string"),
    ("answers: [{when: x, say: y, to: z}]", "answer 1: expected a mapping with keys"),
    ("answers: [{when: '', say: y}]", "answer 1: 'when' must be a non-empty string")])
def test_a_bad_answer_is_a_clear_error(tmp_path, answers, problem):
    script = tmp_path / "s.yaml"
    script.write_text(f"items: [{{say: hi}}]\n{answers}\n")
    with pytest.raises(ScriptError, match=problem):
        load_answers(script)
    assert ScriptBackend.check({"script_file": str(script)}).startswith("script_file: ")


class _SaysYes:
    """A TTS whose 'speech' is a constant level per line: the level tells the lines apart."""

    def synthesize(self, text):
        return np.full(1600, {"Hello.": 0.1, "Is there a cat?": 0.2,
                              "Yes, you may.": 0.3}[text], np.float32), 16000


def test_a_spoken_script_answers_the_robots_question_before_its_next_line(tmp_path):
    from vision_dialogue.voice.sources import WavSource, load_wav_answers, load_wav_items
    from vision_dialogue.voice.spoken_script import build_spoken_script
    script = tmp_path / "s.yaml"
    script.write_text('items: [{say: "Hello."}, {say: "Is there a cat?", wait_for_reply: true}]'
                      '\nanswers: [{when: "may I remember you", say: "Yes, you may."}]\n')
    seq = build_spoken_script(script, tmp_path / "spoken", _SaysYes())
    answers = load_wav_answers(seq)
    assert [a.when for a in answers] == ["may I remember you"]
    robot = {"lines": (0, ""), "ready": False}
    source = WavSource(load_wav_items(seq), realtime=False, reply_timeout=5.0, tail=0.0,
                       answers=answers, robot_line=lambda: robot["lines"],
                       turn_ready=lambda: robot["ready"], robot_speaking=lambda: False)
    levels, stop, silent_after_answer = [], threading.Event(), 0
    for chunk in source.chunks(stop):
        level = round(float(np.abs(chunk).max()), 1)
        if level and (not levels or levels[-1] != level):
            levels.append(level)
            if level == 0.1:            # its reply to hello ends with the question
                robot["lines"], robot["ready"] = (1, "Nice to meet you. May I remember you?"), True
        if levels == [0.1, 0.3] and not level:     # the robot thanks them a while later
            silent_after_answer += 1
            if silent_after_answer == 20:
                robot["lines"] = (2, "Thank you! I will remember you next time.")
    # hello, the answer, then the script's next line once the robot had its word on it
    assert levels == [0.1, 0.3, 0.2] and silent_after_answer == 20


def test_an_answer_without_its_file_is_a_clear_error(tmp_path):
    from vision_dialogue.voice.audio import AudioFileError
    from vision_dialogue.voice.sources import load_wav_answers
    write_wav(tmp_path / "a.wav", np.zeros(160, np.float32), 16000)
    seq = tmp_path / "seq.yaml"
    seq.write_text("items: [{wav: a.wav}]\nanswers: [{when: remember, wav: gone.wav}]\n")
    with pytest.raises(AudioFileError, match="answer 0: .*gone.wav: no such file"):
        load_wav_answers(seq)


# ------------------------------------------------------------------ terminal backend
def test_terminal_reads_lines_until_eof_and_prints_stream():
    r, w = os.pipe()
    rin = os.fdopen(r, "r")
    out = io.StringIO()
    b = TerminalBackend(rin, out, language="en-GB", speaker="me")
    rec = Recorder()
    b.start(rec)
    os.write(w, b"hello robot\n\n   \ncaf\xe9 ol\xc3\xa9\nwhat is that?\n")
    assert rec.wait(3)
    assert rec.texts() == ["hello robot", "caf\ufffd ol\u00e9", "what is that?"]
    assert rec.utterances[0][2:] == ("me", "en-GB")
    b.begin_reply()
    b.speak("It is a cup.")
    b.speak("A red one.")
    b.end_reply("It is a cup. A red one.")
    assert out.getvalue() == "robot: It is a cup. A red one.\n"
    assert not rec.finished.is_set()
    os.close(w)                                              # EOF
    assert rec.finished.wait(2)
    rin.close()


# ------------------------------------------------------------------ Furhat Remote API
@pytest.fixture
def furhat():
    srv = FakeFurhat(listen_wait=0.2).start()
    yield srv
    srv.stop()


def remote_backend(srv, **kw):
    kw.setdefault("barge_in", False)
    return FurhatRemoteBackend("127.0.0.1", srv.port, backoff_initial=0.05, backoff_max=0.2,
                               request_timeout=2.0, **kw)


def test_backend_class_names():
    assert SPEECH_BACKENDS.load("furhat") is FurhatRemoteBackend
    assert SPEECH_BACKENDS.load("furhat_realtime") is FurhatRealtimeBackend
    with pytest.raises(ValueError, match="backend: unknown speech backend 'x'"):
        SPEECH_BACKENDS.load("x")


def test_remote_silence_interrupted_failed_then_text(furhat):
    for m in ("SILENCE", "INTERRUPTED", "FAILED", "what is on the table"):
        furhat.listen_results.put(m)
    b = remote_backend(furhat, language="en-GB", voice="Emma")
    rec = Recorder()
    b.start(rec)
    try:
        assert rec.wait(1)
        assert rec.texts() == ["what is on the table"]
        assert rec.utterances[0][3] == "en-GB"
        seq = furhat.sequence()
        assert seq[:2] == ["users", "voice"]
        assert seq.count("listen") == 4          # SILENCE/INTERRUPTED/FAILED: listen again
        listens = [q for _, p, q in furhat.calls if p == "/furhat/listen"]
        assert all(q["language"] == "en-GB" for q in listens)
        assert [q for _, p, q in furhat.calls if p == "/furhat/voice"][0]["name"] == "Emma"
    finally:
        b.close()


@pytest.mark.fault("robot", "Furhat Remote API down, then back")
def test_remote_robot_down_logs_once_backs_off_and_recovers(furhat, caplog):
    port = furhat.port
    furhat.stop()
    log = logging.getLogger("test.furhat")
    b = FurhatRemoteBackend("127.0.0.1", port, backoff_initial=0.05, backoff_max=0.2,
                            request_timeout=1.0, barge_in=False, logger=log)
    rec = Recorder()
    with caplog.at_level(logging.INFO, logger="test.furhat"):
        b.start(rec)
        time.sleep(0.8)                     # several retries: 0.05, 0.1, 0.2, 0.2, ...
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "robot unavailable" in errors[0].getMessage()
        assert b.outages == 1 and b._thread.is_alive()
        srv2 = FakeFurhat(port=port, listen_wait=0.2).start()
        try:
            srv2.listen_results.put("are you back")
            assert rec.wait(1, timeout=5)
            assert rec.texts() == ["are you back"]
            assert "robot reachable again" in caplog.text
            assert srv2.sequence()[:3] == ["users", "attend user=CLOSEST", "listen"]
        finally:
            b.close()
            srv2.stop()


@pytest.mark.fault("robot", "Furhat Remote API answers with errors")
def test_remote_api_exception_is_a_robot_problem_too(furhat, caplog):
    furhat.fail_paths = {"/furhat/listen"}
    log = logging.getLogger("test.furhat500")
    b = remote_backend(furhat, logger=log)
    rec = Recorder()
    with caplog.at_level(logging.INFO, logger="test.furhat500"):
        b.start(rec)
        assert furhat.wait_for(lambda f: f.paths().count("/furhat/listen") >= 3)
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "furhat_listen_get" in errors[0] and "500" in errors[0]
        furhat.fail_paths = set()
        furhat.listen_results.put("working again")
        assert rec.wait(1)
        assert "robot reachable again" in caplog.text
    b.close()


def test_remote_say_blocks_and_stop_interrupts(furhat):
    furhat.say_seconds = 10.0
    b = remote_backend(furhat)
    done = {}
    t = threading.Thread(target=lambda: done.update(ok=b.speak("a long answer")))
    t0 = time.monotonic()
    t.start()
    assert furhat.wait_for(lambda f: "say a long answer" in f.sequence())
    b.stop_speaking()
    t.join(timeout=10)
    assert time.monotonic() - t0 < 10.0 and done["ok"] is True   # stopped, not said out
    say = [q for _, p, q in furhat.calls if p == "/furhat/say"][0]
    assert say["text"] == "a long answer" and say["blocking"].lower() == "true"
    assert "say_stop" in furhat.sequence()
    b.close()


# ------------------------------------------------------------------ Furhat Realtime API
def test_realtime_backend_listen_speak_and_gaze():
    srv = FakeFurhatRealtime(key="k").start()
    b = FurhatRealtimeBackend("127.0.0.1", srv.port, key="k", language="de-DE",
                              gaze_away_location=(0.1, 0.2, 0.9), backoff_initial=0.05,
                              barge_in=False)
    rec = Recorder()
    srv.hear.put("was siehst du")
    b.start(rec)
    try:
        assert rec.wait(1)
        assert rec.texts() == ["was siehst du"]
        b.on_thinking()
        b.begin_reply()
        assert b.speak("Ich sehe einen Astronauten.") is True
        b.end_reply("Ich sehe einen Astronauten.")
        assert srv.wait_for("request.listen.start", 2)
        types = [t for t in srv.types() if t != "request.listen.config"]
        assert types[:8] == ["request.auth", "request.attend.user", "request.listen.start",
                             "request.gesture.start", "request.attend.location",
                             "request.attend.user", "request.speak.text",
                             "request.attend.user"]
        loc = [e for e in srv.received if e["type"] == "request.attend.location"][0]
        assert (loc["x"], loc["y"], loc["z"]) == (0.1, 0.2, 0.9)
        cfg = [e for e in srv.received if e["type"] == "request.listen.config"][0]
        assert cfg["languages"] == ["de-DE"]
    finally:
        b.close()
        srv.stop()


@pytest.mark.fault("robot", "Furhat Realtime API down, then back")
def test_realtime_backend_robot_down_then_up(caplog):
    srv = FakeFurhatRealtime().start()
    port = srv.port
    srv.stop()
    log = logging.getLogger("test.rt")
    b = FurhatRealtimeBackend("127.0.0.1", port, backoff_initial=0.05, backoff_max=0.2,
                              request_timeout=1.0, logger=log)
    rec = Recorder()
    with caplog.at_level(logging.INFO, logger="test.rt"):
        b.start(rec)
        deadline = time.monotonic() + 5
        while b.outages == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.4)                                    # several retries
        assert b.outages == 1
        srv2 = FakeFurhatRealtime(port=port).start()
        try:
            srv2.hear.put("hello again")
            assert rec.wait(1, timeout=5)
            assert "robot reachable again" in caplog.text
        finally:
            b.close()
            srv2.stop()
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


def test_backends_and_realtime_client_import_no_ros():
    import subprocess
    import sys
    from conftest import REPO
    code = ("import sys\n"
            "import vision_dialogue.speech.terminal, vision_dialogue.speech.script\n"
            "import vision_dialogue.furhat.remote_speech\n"
            "import vision_dialogue.furhat.realtime_speech, vision_dialogue.furhat.realtime\n"
            "bad = [m for m in sys.modules\n"
            "       if m.startswith(('rclpy', 'vision_dialogue_interfaces.msg'))]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
