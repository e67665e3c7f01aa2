"""Speaking first beyond the paper: on an arrival or a changed scene, never over anyone."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

from vision_dialogue.common.images import change_thumbnail, thumbnail_difference
from vision_dialogue.core.proactive import ProactiveConfig, ProactivePolicy


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def scene_difference(a: np.ndarray, b: np.ndarray) -> float:
    return thumbnail_difference(change_thumbnail(a), change_thumbnail(b))


def photo(which) -> np.ndarray:
    return cv2.resize(np.ascontiguousarray(which()[:, :, ::-1]), (320, 240))


def policy(mode="arrivals_and_scenes", **kw):
    clock = Clock()
    return ProactivePolicy(ProactiveConfig(mode, min_interval_s=60, quiet_s=8, absent_s=20,
                                           **kw), clock=clock), clock


def test_scene_difference_tells_a_new_view_from_the_same_one():
    a, b = photo(data.astronaut), photo(data.coffee)
    noisy = np.clip(a.astype(int) + np.random.default_rng(0).integers(-8, 8, a.shape), 0,
                    255).astype(np.uint8)
    assert scene_difference(a, noisy) < 5 < 40 < scene_difference(a, b)


def test_an_arrival_after_nobody_for_a_while():
    p, clock = policy("arrivals")
    img = photo(data.astronaut)
    clock.t += 100
    assert p.on_frame(img, 0) is None
    clock.t += 10
    assert p.on_frame(img, 1) is None            # gone for 10 s only: the same visit
    assert p.on_frame(img, 0) is None
    clock.t += 25
    assert p.on_frame(img, 1) == "arrival"


def test_never_while_the_robot_talks_the_user_just_spoke_or_too_soon():
    p, clock = policy()
    a, b = photo(data.astronaut), photo(data.coffee)
    assert p.on_frame(a, None) is None
    assert p.on_frame(b, None) is None           # within min_interval of the start
    clock.t += 61
    p.robot_busy(True)
    assert p.on_frame(a, None) is None
    p.robot_busy(False)
    p.user_spoke()
    assert p.on_frame(b, None) is None
    clock.t += 9
    assert p.on_frame(a, None, waiting=1) is None     # a turn is waiting
    assert p.on_frame(b, None) == "scene"
    p.remark_made()
    clock.t += 30
    assert p.on_frame(a, None) is None           # rate limit
    clock.t += 31
    assert p.on_frame(b, None) == "scene"


def test_paper_mode_never_speaks_first():
    p, clock = policy("paper")
    clock.t += 1000
    frames = [photo(data.astronaut), photo(data.coffee), photo(data.chelsea)]
    assert [p.on_frame(f, n) for f, n in zip(frames, (0, 1, 0))] == [None] * 3


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="paper"):
        ProactiveConfig("chatty")


def test_a_wave_is_answered_and_an_arrival_event_after_absence_greeted():
    p, clock = policy("arrivals")
    clock.t += 61
    assert p.on_event("wave") == "wave"
    p.remark_made()
    assert p.on_event("wave") is None                 # min_interval_s
    clock.t += 61
    p.user_spoke()
    assert p.on_event("wave") is None                 # the user is talking
    clock.t += 9
    assert p.on_event("wave", waiting=1) is None      # someone waits for an answer
    assert p.on_event("scene_change") is None and p.on_event("point") is None
    assert p.on_event("arrived") is None              # nobody-before unknown: no greeting
    p.on_frame(photo(data.coffee), people=0)
    clock.t += 21
    assert p.on_event("arrived") == "arrival"
    assert policy("paper")[0].on_event("wave") is None


def test_a_wave_while_the_robot_is_busy_waits_for_it_then_is_answered_once():
    p, clock = policy("arrivals")
    img = photo(data.astronaut)
    clock.t += 100
    p.robot_busy(True)                           # talking with someone else
    assert p.on_event("wave") is None
    clock.t += 3
    assert p.on_frame(img, 2) is None            # still busy: held
    p.robot_busy(False)
    p.user_spoke()                               # the other person answers the robot
    clock.t += 3
    assert p.on_frame(img, 2) is None            # just spoken to: held
    clock.t += 8
    assert p.on_frame(img, 2) == "wave"          # free, 14 s after the wave
    p.remark_made()
    clock.t += 100
    assert p.on_frame(img, 2) is None            # answered once


def test_a_held_wave_passes_after_its_hold_and_paper_holds_none():
    p, clock = policy("arrivals", wave_hold_s=5)
    img = photo(data.astronaut)
    clock.t += 100
    p.user_spoke()
    assert p.on_event("wave") is None
    clock.t += 9                                 # free now, but the wave was 9 s ago
    assert p.on_frame(img, 1) is None
    assert p.on_event("wave") == "wave"          # a new wave, the robot free: at once
    paper, clock = policy("paper")
    clock.t += 100
    assert paper.on_event("wave") is None
    clock.t += 1
    assert paper.on_frame(img, 1) is None
    with pytest.raises(ValueError, match="wave_hold_s"):
        ProactiveConfig("arrivals", wave_hold_s=-1)
