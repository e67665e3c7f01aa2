"""Privacy of stored frames: face blurring (transcripts, thumbnails, bags) and retention."""
from __future__ import annotations

import os
import time

import cv2
import numpy as np
import pytest
from skimage import data

from vision_dialogue.core.entries import FrameEntry
from vision_dialogue.common.images import Frame
from vision_dialogue.core.transcript import (DAY_S, TranscriptWriter, expire_frames,
                                             parse_retention, read_transcript)
from vision_dialogue.perception.privacy import FaceBlurrer


@pytest.fixture(scope="module")
def blurrer():
    return FaceBlurrer()


def astronaut() -> np.ndarray:
    return cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (640, 480))


def test_faces_are_pixelated_and_nothing_else_changes(blurrer):
    img = astronaut()
    [box] = blurrer.boxes(img)
    out = blurrer(img)
    assert blurrer.boxes(out) == []                       # no face left to find
    x0, y0, x1, y1 = box
    mask = np.ones(img.shape[:2], bool)
    mask[y0:y1, x0:x1] = False
    assert np.array_equal(out[mask], img[mask])           # the rest of the frame is untouched
    assert np.abs(out[~mask].astype(int) - img[~mask]).mean() > 5
    scene = cv2.resize(np.ascontiguousarray(data.coffee()[:, :, ::-1]), (640, 480))
    assert np.array_equal(blurrer(scene), scene)          # no face: the same frame


def stored(writer: TranscriptWriter, bgr: np.ndarray, frame_id: int = 1):
    writer(FrameEntry(Frame(bgr, id=frame_id)))
    return read_transcript(writer.path)[-1]


def test_transcript_frames_are_stored_blurred(tmp_path, blurrer):
    w = TranscriptWriter(tmp_path, run_name="run", redact=blurrer)
    rec = stored(w, astronaut())
    w.close()
    jpeg = cv2.imread(str(tmp_path / "run" / rec["file"]))
    assert blurrer.boxes(cv2.resize(jpeg, (640, 480))) == []


def test_a_frame_that_cannot_be_blurred_is_not_stored(tmp_path):
    def broken(bgr):
        raise RuntimeError("detector crashed")
    w = TranscriptWriter(tmp_path, run_name="run", redact=broken)
    rec = stored(w, astronaut())
    w.close()
    assert rec["file"] is None and w.errors == 1
    assert not list((tmp_path / "run" / "frames").iterdir())


def test_retention_none_session_and_days(tmp_path):
    img = astronaut()
    w = TranscriptWriter(tmp_path / "none", run_name="r", retention="none")
    assert stored(w, img)["file"] is None and not (tmp_path / "none/r/frames").exists()
    w.close()

    w = TranscriptWriter(tmp_path / "s", run_name="r", retention="session")
    assert (tmp_path / "s/r" / stored(w, img)["file"]).is_file()
    w.close()
    assert not (tmp_path / "s/r/frames").exists()
    last = read_transcript(tmp_path / "s/r/transcript.jsonl")[-1]
    assert last["type"] == "frames_deleted" and last["count"] == 1

    root = tmp_path / "d"
    old = TranscriptWriter(root, run_name="old")
    stored(old, img)
    old.close()
    recent = TranscriptWriter(root, run_name="recent")
    stored(recent, img)
    recent.close()
    ten_days_ago = time.time() - 10 * DAY_S
    os.utime(root / "old" / "transcript.jsonl", (ten_days_ago, ten_days_ago))
    new = TranscriptWriter(root, run_name="new", retention="7d")
    new.close()
    assert not (root / "old/frames").exists() and (root / "old/transcript.jsonl").is_file()
    assert len(list((root / "recent/frames").iterdir())) == 1
    assert expire_frames(root, 7) == 0


@pytest.mark.parametrize("value, parsed", [("keep", "keep"), ("none", "none"),
                                           ("session", "session"), ("30d", 30)])
def test_retention_values(value, parsed):
    assert parse_retention(value) == parsed


@pytest.mark.parametrize("bad", ["forever", "7", "-1d", "7 days", ""])
def test_bad_retention_values_say_what_is_allowed(bad):
    with pytest.raises(ValueError, match="keep, none, session"):
        parse_retention(bad)
