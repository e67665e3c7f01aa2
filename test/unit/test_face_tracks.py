"""Stable face ids across frames (perception/face_tracks.py), ROS-free."""
from __future__ import annotations

import re

from vision_dialogue.perception.face_tracks import FaceTracker


def test_a_face_keeps_its_id_while_it_moves_and_a_new_face_gets_a_new_one():
    tracker = FaceTracker()
    (a,) = tracker.update([(0.10, 0.1, 0.2, 0.3)])
    assert tracker.update([(0.12, 0.1, 0.2, 0.3)]) == [a]             # moved a little
    ids = tracker.update([(0.13, 0.1, 0.2, 0.3), (0.7, 0.1, 0.2, 0.3)])
    assert ids[0] == a and ids[1] != a
    assert tracker.tracked == ids


def test_a_face_missed_for_more_than_max_missed_frames_is_gone():
    tracker = FaceTracker(max_missed=1)
    (a,) = tracker.update([(0.1, 0.1, 0.2, 0.3)])
    assert tracker.update([]) == [] and tracker.tracked == []
    assert tracker.update([(0.1, 0.1, 0.2, 0.3)]) == [a]              # one frame missed: kept
    tracker.update([])
    tracker.update([])
    assert tracker.update([(0.1, 0.1, 0.2, 0.3)]) != [a]              # two missed: a new face


def test_ids_are_valid_ros_name_tokens():
    tracker = FaceTracker()
    for _ in range(200):
        (fid,) = tracker.update([(0.5, 0.5, 0.1, 0.1)])
        tracker.update([])
        tracker.update([])
        assert re.fullmatch(r"[a-z]{5}", fid), fid
