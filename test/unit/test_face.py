"""The robot's face without ROS.

Affect, gestures, gaze aversion, the controller, and both Furhat APIs (their protocol fakes)
driven through the speech turns as the speech node drives them.
"""
from __future__ import annotations

import json
import random
import threading
import time

import pytest

from fake_furhat import FakeFurhat
from fake_furhat_realtime import FakeFurhatRealtime
from conftest import until as wait_until
from vision_dialogue.face.affect import (ANGRY, EXCITED, HAPPY, NEUTRAL, SAD, SCARED, SURPRISED,
                                         Affect, reaction, read_affect)
from vision_dialogue.face.controller import BUILTIN, FaceConfig, FaceController, FaceOutput
from vision_dialogue.face.gaze import GazeAversion, GazeMove, GazeTiming
from vision_dialogue.face.gestures import (BLEND_SHAPES, SHAPES, GestureError, checked_gesture,
                                           expression_gesture, idle_gesture)
from vision_dialogue.furhat.realtime_speech import FurhatRealtimeBackend
from vision_dialogue.furhat.remote_speech import FurhatRemoteBackend
from vision_dialogue.speech.turns import SpeechTurns

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------ affect
@pytest.mark.parametrize("line, expression", [
    ("My dog died yesterday.", SAD),
    ("I got fired this morning.", SAD),
    ("I won the lottery!", EXCITED),
    ("Haha, that's a funny one.", HAPPY),
    ("You are a stupid useless robot.", ANGRY),
    ("I'm really worried about my exam.", SCARED),
    ("Wow, no way!", SURPRISED),
    ("What colour is my shirt?", NEUTRAL),
    ("I'm not worried at all.", NEUTRAL),
    ("", NEUTRAL),
])
def test_read_affect_names_the_expression_of_clear_lines(line, expression):
    assert read_affect(line).expression == expression


def test_valence_sign_follows_the_line_and_a_question_is_not_strong():
    assert read_affect("My grandmother passed away.").valence < 0
    assert read_affect("We're getting married in June!").valence > 0
    assert not read_affect("Where is the station?").strong
    assert read_affect("My grandmother passed away.").strong


def test_the_robot_shares_feelings_and_is_hurt_not_angry_when_insulted():
    assert reaction(read_affect("My cat died.")).expression == SAD
    assert reaction(read_affect("I passed my driving test!")).expression == EXCITED
    hurt = reaction(read_affect("You are an idiot."))
    assert hurt.expression == SAD and hurt.valence < 0 and hurt.arousal < 0.5
    assert reaction(read_affect("Tell me about the weather.")).expression == NEUTRAL


# ------------------------------------------------------------------ gestures
def test_gestures_are_clamped_to_the_documented_ranges_and_unknown_parameters_go():
    g = checked_gesture(json.dumps({"name": "x" * 99, "frames": [
        {"time": [0.2], "params": {"SMILE_OPEN": 3.0, "EXPR_SAD": -1, "NECK_ROLL": 90,
                                   "NECK_PAN": -80, "GAZE_PAN": 70, "LASER": 1}},
        {"time": [0.5, 1.0], "persist": 1, "params": {"reset": True}}]}),
        max_head=10.0, max_gaze=25.0)
    p = g["frames"][0]["params"]
    assert p == {"SMILE_OPEN": 1.0, "EXPR_SAD": 0.0, "NECK_ROLL": 10.0, "NECK_PAN": -10.0,
                 "GAZE_PAN": 25.0}
    assert g["frames"][1] == {"time": [0.5, 1.0], "params": {"reset": True}, "persist": True}
    assert len(g["name"]) == 64 and g["class"] == "furhatos.gestures.Gesture"


@pytest.mark.parametrize("bad, why", [
    ("{not json", "not JSON"),
    ({"frames": []}, "non-empty list of frames"),
    ({"frames": [{"time": [1.0], "params": {}}, {"time": [0.5], "params": {}}]}, "must rise"),
    ({"frames": [{"time": [30.0], "params": {}}]}, "must rise"),
    ({"frames": [{"time": [0.1], "params": {"SMILE_OPEN": float("nan")}}]}, "finite"),
    ({"frames": [{"time": ["soon"], "params": {}}]}, "finite"),
    ({"frames": [{"time": [0.1]}]}, "needs params"),
])
def test_malformed_gestures_are_refused_with_the_reason(bad, why):
    with pytest.raises(GestureError, match=why):
        checked_gesture(bad)


def test_each_expression_has_a_gesture_in_range_that_varies():
    rng = random.Random(3)
    for name in SHAPES:
        g = expression_gesture(Affect(name, -0.8 if name == SAD else 0.8, 0.5, 0.9), rng,
                               max_head=12.0)
        for frame in g["frames"]:
            for k, v in frame["params"].items():
                if k in BLEND_SHAPES:
                    assert 0.0 <= v <= 1.0
                elif k != "reset":
                    assert abs(v) <= 12.0, (name, k, v)
        assert g["frames"][-1]["params"] == {"reset": True}
    a, b = (expression_gesture(Affect(HAPPY, 0.8, 0.5, 0.9), rng) for _ in range(2))
    assert a["frames"][0]["params"] != b["frames"][0]["params"]
    assert expression_gesture(Affect(NEUTRAL)) is None
    assert idle_gesture(rng)["frames"]


# ------------------------------------------------------------------ gaze timing
def test_gaze_aversion_alternates_within_the_configured_timing():
    timing = GazeTiming(contact_s=(2.0, 5.0), away_s=(0.5, 4.0), pan=20.0, tilt=15.0,
                        move_s=0.2)
    gaze = GazeAversion(timing, random.Random(7))
    assert gaze.step(0.0) is None            # not speaking: nothing, ever
    gaze.start(0.0)
    t, moves = 0.0, []
    while t < 60.0:
        move = gaze.step(t)
        if move is not None:
            moves.append((t, move))
        t = round(t + 0.01, 2)
    away = [(t, m) for t, m in moves if not m.contact]
    assert len(away) >= 5 and all(abs(m.pan) <= 20 and abs(m.tilt) <= 15 for _, m in away)
    assert [m.contact for _, m in moves[:4]] == [False, True, False, True]
    assert 2.0 <= moves[0][0] <= 5.01
    for (t0, m0), (t1, _) in zip(moves, moves[1:]):
        lo, hi = timing.away_s if not m0.contact else timing.contact_s
        assert lo + 0.2 - 0.011 <= t1 - t0 <= hi + 0.2 + 0.011
    assert gaze.stop() in (None, GazeMove(0.0, 0.0, 0.2))
    assert gaze.step(t + 100) is None


# ------------------------------------------------------------------ the controller
class Recorded(FaceOutput):
    """A FaceOutput that keeps what it was given, with times; `delay` makes it slow."""

    def __init__(self, delay: float = 0.0):
        self.delay, self.items, self.lock = delay, [], threading.Lock()

    def _keep(self, kind, value):
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.items.append((time.monotonic(), kind, value))

    def expression(self, cue):
        self._keep("expression", cue)

    def gesture(self, gesture):
        self._keep("gesture", gesture)

    def gaze(self, move):
        self._keep("gaze", move)

    def of(self, kind):
        with self.lock:
            return [(t, v) for t, k, v in self.items if k == kind]


FAST = GazeTiming(contact_s=(0.15, 0.2), away_s=(0.15, 0.2), pan=20.0, tilt=15.0, move_s=0.05)


def test_the_reaction_is_shown_at_once_and_recorded_with_its_line():
    out, records = Recorded(), []
    face = FaceController(FaceConfig(idle=False), out, on_record=records.append,
                          rng=random.Random(1))
    try:
        t0 = time.monotonic()
        face.heard("My dog died yesterday.")
        (t, cue), = out.of("expression")           # synchronous: no thread in between
        assert cue.affect.expression == SAD and t - t0 < 0.1
        assert out.of("gesture")[0][1]["name"] == "vd_sad"
        assert records == [{"moment": "heard", "line": "My dog died yesterday.", "turn_id": 0,
                            **cue.affect.as_record(), "gesture": "vd_sad"}]
        face.heard("What time is it?")
        assert out.of("expression")[-1][1].affect.expression == NEUTRAL
        assert len(out.of("gesture")) == 1         # a neutral line moves nothing
        face.sentence(3, "I'm so sorry to hear that.", first=True)
        face.sentence(3, "It is half past four.")  # no expression of its own: none shown
        assert [r["moment"] for r in records] == ["heard", "heard", "sentence"]
        assert records[-1]["turn_id"] == 3 and records[-1]["expression"] == SAD
    finally:
        face.close()


def test_gaze_moves_away_and_back_only_while_speaking_and_returns_on_barge_in():
    out = Recorded()
    face = FaceController(FaceConfig(gaze=FAST, idle=False), out, rng=random.Random(2))
    try:
        face.state("listening")
        time.sleep(0.5)
        assert out.of("gaze") == []                # listening: the eyes stay
        face.sentence(1, "Let me tell you a long story.", first=True)
        assert wait_until(lambda: len(out.of("gaze")) >= 4)
        moves = out.of("gaze")
        assert [m.contact for _, m in moves[:4]] == [False, True, False, True]
        for (t0, m0), (t1, _) in zip(moves, moves[1:4]):
            assert 0.15 <= t1 - t0 <= 0.2 + 0.05 + 0.15, (t1 - t0)
        assert wait_until(lambda: not out.of("gaze")[-1][1].contact)
        t_cut = time.monotonic()
        face.interrupted()                         # the person barges in while eyes are away
        t_back, back = out.of("gaze")[-1]
        assert back.contact and t_back - t_cut < 0.05
        n = len(out.of("gaze"))
        time.sleep(0.5)
        assert len(out.of("gaze")) == n            # and they stay, until the next reply
    finally:
        face.close()


def test_idle_movements_only_while_listening_and_expressions_fade():
    out = Recorded()
    face = FaceController(FaceConfig(idle_every_s=(0.05, 0.1), hold_s=0.3, gaze_aversion=False),
                          out, rng=random.Random(4))
    try:
        face.state("listening")
        assert wait_until(lambda: len(out.of("gesture")) >= 3)
        face.state("thinking")
        time.sleep(0.15)
        n = len(out.of("gesture"))
        time.sleep(0.4)
        assert len(out.of("gesture")) == n         # not while the robot thinks or speaks
        face.heard("I won the lottery!")
        assert wait_until(lambda: out.of("expression")[-1][1].affect.expression == NEUTRAL,
                          timeout=2.0)
        shown, faded = out.of("expression")[-2:]
        assert shown[1].affect.expression == EXCITED and 0.25 <= faded[0] - shown[0] <= 1.0
    finally:
        face.close()


def test_a_robot_that_does_not_answer_never_delays_the_conversation():
    out, robot = Recorded(), Recorded(delay=1.0)
    face = FaceController(FaceConfig(gaze=FAST, idle=False), out, robot, rng=random.Random(5))
    try:
        t0 = time.monotonic()
        for line in ("My dog died.", "I won the lottery!", "Wow, no way!", "You idiot."):
            face.heard(line)
            face.sentence(1, "Oh wow, that is wonderful!")
        assert time.monotonic() - t0 < 1.0     # not one robot call's wait (1 s), let alone four
        assert wait_until(lambda: robot.of("gesture"), timeout=3.0)
        time.sleep(2.2)
        # at most the first was being sent; the others waited in one slot and only the newest
        # went: the robot's face catches up instead of replaying the past 8 expressions
        assert len(robot.of("gesture")) <= 2
        assert robot.of("gesture")[-1][1]["name"] == "vd_happy"
    finally:
        face.close()


# ------------------------------------------------------------------ Furhat Remote API
def _turns(backend, face):
    return SpeechTurns(backend, publish=lambda heard: None, observer=face, reply_timeout=10.0)


CONTACT = {"GAZE_PAN": 0.0, "GAZE_TILT": 0.0}


def _last_gaze(srv):
    moves = _gaze_bodies(srv)
    return moves[-1][1] if moves else None


def _gaze_bodies(srv):
    return [(q["t"], q["body"]["frames"][0]["params"]) for _, p, q in srv.calls
            if p == "/furhat/gesture" and q.get("body", {}).get("name") == "vd_gaze"]


def test_remote_api_gaze_aversion_during_a_spoken_reply_and_contact_on_barge_in():
    srv = FakeFurhat(say_seconds=1.2).start()
    backend = FurhatRemoteBackend("127.0.0.1", srv.port, request_timeout=2.0)
    face = FaceController(FaceConfig(gaze=FAST, idle=False), Recorded(),
                          backend.face(30.0), rng=random.Random(6))
    turns = _turns(backend, face)
    try:
        turns.on_reply(1, "Well, let me think about that for a moment.", final=False)
        turns.on_reply(1, "", final=True)
        assert turns.wait_idle(5.0)
        assert wait_until(lambda: _last_gaze(srv) == CONTACT, timeout=1.0)
        moves = _gaze_bodies(srv)
        says = [q["t"] for _, p, q in srv.calls if p == "/furhat/say"]
        assert len(moves) >= 3 and not any(p["GAZE_PAN"] == 0 for _, p in moves[:1])
        assert all(abs(p["GAZE_PAN"]) <= 20 and abs(p["GAZE_TILT"]) <= 15 for _, p in moves)
        assert all(says[0] <= t <= says[0] + 1.6 for t, _ in moves)   # only while speaking
        # barge-in: the eyes come back as soon as the person speaks
        srv.say_seconds = 5.0
        turns.on_reply(2, "This is a very long answer that goes on and on.", final=False)
        assert wait_until(lambda: len(_gaze_bodies(srv)) > len(moves)
                          and _last_gaze(srv) != CONTACT)
        t_cut = time.monotonic()
        turns.utterance("Sorry, stop.")
        assert wait_until(lambda: _last_gaze(srv) == CONTACT, timeout=5.0)
        assert _gaze_bodies(srv)[-1][0] - t_cut < srv.say_seconds   # before the say would end
    finally:
        turns.close()
        face.close()
        srv.stop()


def test_remote_api_gestures_in_order_clamped_and_a_dead_endpoint_does_not_delay_speech():
    srv = FakeFurhat(say_seconds=0.3).start()
    backend = FurhatRemoteBackend("127.0.0.1", srv.port, request_timeout=0.5)
    face = FaceController(FaceConfig(gaze_aversion=False, idle=False, max_head=5.0),
                          Recorded(), backend.face(30.0), rng=random.Random(8))
    turns = _turns(backend, face)
    try:
        for i, line in enumerate(("My dog died yesterday.", "I won the lottery!")):
            turns.utterance(line)
            assert wait_until(lambda: len(_named(srv)) == i + 1)
        names = [b["name"] for b in _named(srv)]
        assert names == ["vd_sad", "vd_excited"]
        for body in _named(srv):
            for frame in body["frames"]:
                assert all(abs(v) <= 5.0 for k, v in frame["params"].items()
                           if k.startswith("NECK_"))
        # the gesture endpoint hangs: speech goes on at its own pace
        srv.hang_paths["/furhat/gesture"] = 3.0
        t0 = time.monotonic()
        turns.utterance("Haha, that is hilarious!")
        turns.on_reply(3, "Haha, I love that joke! It is wonderful.", final=True)
        assert turns.wait_idle(5.0)
        assert time.monotonic() - t0 < 3.0     # two sentences of 0.3 s, not the gesture's 3 s
    finally:
        turns.close()
        face.close()
        srv.stop()


def _named(srv):
    return [q["body"] for _, p, q in srv.calls
            if p == "/furhat/gesture" and q.get("body", {}).get("name", "").startswith("vd_")
            and q["body"]["name"] != "vd_gaze"]


def test_builtin_style_sends_furhats_own_gesture_names():
    srv = FakeFurhat().start()
    backend = FurhatRemoteBackend("127.0.0.1", srv.port)
    face = FaceController(FaceConfig(gesture_style=BUILTIN, gaze_aversion=False, idle=False),
                          Recorded(), backend.face(30.0))
    try:
        face.heard("My cat passed away last night.")
        assert srv.wait_for(lambda f: "gesture ExpressSad" in f.sequence())
    finally:
        face.close()
        srv.stop()


# ------------------------------------------------------------------ Furhat Realtime API
def test_realtime_api_gaze_and_gesture_frames_as_face_parameters():
    srv = FakeFurhatRealtime(speak_seconds=1.0).start()
    backend = FurhatRealtimeBackend("127.0.0.1", srv.port, backoff_initial=0.05)
    backend.client.connect()
    face = FaceController(FaceConfig(gaze=FAST, idle=False), Recorded(), backend.face(30.0),
                          rng=random.Random(9))
    turns = _turns(backend, face)
    try:
        turns.utterance("I won the lottery!")
        turns.on_reply(1, "That is amazing news, congratulations!", final=True)
        assert turns.wait_idle(5.0)

        def params():
            return [e["params"] for e in list(srv.received)
                    if e["type"] == "request.face.params"]

        def gaze():
            return [p for p in params() if set(p) == {"GAZE_PAN", "GAZE_TILT"}]

        assert wait_until(lambda: gaze()[-1] == {"GAZE_PAN": 0.0, "GAZE_TILT": 0.0})
        assert any(p["GAZE_PAN"] != 0 and abs(p["GAZE_PAN"]) <= 20 for p in gaze())
        # the gestures' frames, played at their times: smiles, then the reset frame's zero
        # (the reaction to the line and the reply's joy; an open or a closed smile, and the
        # reply's second smile or not, as the face's threads meet: any of these is right)

        def smile(p):
            return p.get("SMILE_OPEN", p.get("SMILE_CLOSED"))

        assert wait_until(lambda: [smile(p) for p in params() if smile(p) is not None]
                          [-1:] == [0.0], timeout=6.0)
        smiles = [smile(p) for p in params() if smile(p) is not None]
        assert len(smiles) >= 3 and all(0 < v <= 1.0 for v in smiles[:-1]), smiles
    finally:
        turns.close()
        face.close()
        backend.close()
        srv.stop()


def test_a_gesture_that_cannot_be_made_safe_is_dropped_with_a_log_line(monkeypatch, caplog):
    from vision_dialogue.face import controller
    monkeypatch.setattr(controller, "expression_gesture", lambda *a, **k: checked_gesture(
        {"frames": [{"time": [99.0], "params": {}}]}))
    out = Recorded()
    face = FaceController(FaceConfig(idle=False, gaze_aversion=False), out)
    try:
        face.heard("My dog died yesterday.")
        assert out.of("expression")[0][1].affect.expression == SAD   # the topic still has it
        assert out.of("gesture") == [] and "sad gesture was dropped" in caplog.text
    finally:
        face.close()
