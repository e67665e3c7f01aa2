"""Timeline and the paper's summarisation rule (selection, splicing, folding)."""
import threading

import numpy as np
import pytest

from vision_dialogue.common.images import Frame
from vision_dialogue.core.summariser import SummaryRule
from vision_dialogue.core.timeline import ROBOT, USER, FrameItem, LineItem, SummaryItem, \
    Timeline, describe


def frame():
    return Frame(bgr=np.zeros((4, 4, 3), np.uint8))


def labels(tl):
    return [describe(i) for i in tl.snapshot()]


def test_figure2_sequence_n3_m2():
    """The paper's Figure 2 (n=3, m=2).

    Frames 1 and 2 arrive, the user speaks, frame 3 arrives: three raw frames, so the first two
    consecutive ones (1, 2) are summarised. The robot answers, frames 4 and 5 arrive: again three
    raw frames (3, 4, 5), but the first consecutive run is frame 3 alone, because the robot's line
    sits between frames 3 and 4. Only frame 3 is summarised, so the summary stays in its place,
    before the robot's line.
    """
    tl = Timeline()
    n, m = 3, 2
    tl.add_frame(frame())
    assert tl.take(SummaryRule(n, m).due) == []
    tl.add_frame(frame())
    assert tl.take(SummaryRule(n, m).due) == []
    tl.add_line(USER, "Hello robot")
    tl.add_frame(frame())
    chosen = tl.take(SummaryRule(n, m).due)
    assert [f.id for f in chosen] == [1, 2]
    tl.splice_summary(chosen, "A person waved.")
    assert labels(tl) == ["summary 1-2: A person waved.", "user: Hello robot", "frame 3"]
    tl.add_line(ROBOT, "Hi! Nice glasses.")
    tl.add_frame(frame())
    assert tl.take(SummaryRule(n, m).due) == []
    tl.add_frame(frame())
    chosen = tl.take(SummaryRule(n, m).due)
    assert [f.id for f in chosen] == [3]          # only frame 3: the robot line stops the run
    tl.splice_summary(chosen, "The person smiled.")
    assert labels(tl) == ["summary 1-2: A person waved.", "user: Hello robot",
                          "summary 3: The person smiled.", "robot: Hi! Nice glasses.",
                          "frame 4", "frame 5"]


def test_frames_being_summarised_are_not_selected_again():
    tl = Timeline()
    for _ in range(4):
        tl.add_frame(frame())
    first = tl.take(SummaryRule(4, 3).due)
    assert [f.id for f in first] == [1, 2, 3]
    assert all(f.pending for f in first)
    tl.add_frame(frame())                         # raw, not pending: 4, 5
    assert tl.take(SummaryRule(4, 3).due) == []
    tl.add_frame(frame())
    tl.add_frame(frame())                         # 4, 5, 6, 7
    second = tl.take(SummaryRule(4, 3).due)
    assert [f.id for f in second] == [4, 5, 6]


def test_splice_lands_in_place_after_more_items_arrived():
    tl = Timeline()
    tl.add_line(USER, "first")
    for _ in range(4):
        tl.add_frame(frame())
    chosen = tl.take(SummaryRule(4, 3).due)
    tl.add_line(USER, "while summarising")
    tl.add_frame(frame())
    tl.add_line(ROBOT, "answer")
    tl.splice_summary(chosen, "S.")
    assert labels(tl) == ["user: first", "summary 1-3: S.", "frame 4",
                          "user: while summarising", "frame 5", "robot: answer"]


def test_release_keeps_frames_and_allows_retry():
    tl = Timeline()
    for _ in range(4):
        tl.add_frame(frame())
    chosen = tl.take(SummaryRule(4, 3).due)
    tl.release(chosen)
    assert [describe(i) for i in tl.snapshot()] == ["frame 1", "frame 2", "frame 3", "frame 4"]
    assert [f.failures for f in chosen] == [1, 1, 1]
    again = tl.take(SummaryRule(4, 3).due)
    assert [f.id for f in again] == [1, 2, 3]


def test_frame_ids_follow_arrival_order_under_concurrency():
    tl = Timeline()

    def worker(k):
        for i in range(50):
            tl.add_frame(frame())
            tl.add_line(USER, f"{k}-{i}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items = tl.snapshot()
    ids = [i.id for i in items if isinstance(i, FrameItem)]
    assert ids == list(range(1, 401))
    for k in range(8):
        mine = [i.text for i in items if isinstance(i, LineItem) and i.text.startswith(f"{k}-")]
        assert mine == [f"{k}-{i}" for i in range(50)]


def test_fold_selection_respects_budget_keep_recent_and_frames():
    tl = Timeline()
    for i in range(6):
        tl.add_line(USER if i % 2 == 0 else ROBOT, f"line number {i}")   # 13 chars each
    assert tl.select_for_fold(budget_chars=1000, keep_recent_lines=2) == []
    chosen = tl.select_for_fold(budget_chars=30, keep_recent_lines=2)
    assert [c.text for c in chosen] == [f"line number {i}" for i in range(4)]
    assert tl.select_for_fold(30, 2) == []        # one fold at a time
    tl.apply_fold(chosen, "They said hello.")
    assert labels(tl) == ["user: line number 4", "robot: line number 5"]
    assert tl.folded_lines == 4 and tl.history_summary == "They said hello."
    # a raw frame stops the fold, so frames and lines keep their order
    tl2 = Timeline()
    tl2.add_line(USER, "a" * 40)
    tl2.add_frame(frame())
    tl2.add_line(USER, "b" * 40)
    tl2.add_line(ROBOT, "c" * 40)
    chosen = tl2.select_for_fold(50, 1)
    assert [c.text for c in chosen] == ["a" * 40]


def test_bad_role_rejected():
    with pytest.raises(ValueError, match="role"):
        Timeline().add_line("narrator", "x")


def test_summary_label():
    assert SummaryItem("x", (3,)).label() == "summary 3"
    assert SummaryItem("x", (3, 4, 5)).label() == "summary 3-5"
