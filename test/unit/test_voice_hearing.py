"""voice/hearing.py: the segment being heard as a typed record, its partial lines, echo."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from types import SimpleNamespace

import numpy as np

from vision_dialogue.voice.hearing import CHUNK_S, PartialLines, Segment, is_echo, tell


def test_a_resumed_segment_forgets_what_was_read_at_its_pause():
    seg = Segment(started_at=1.0, echo=True)
    seg.paused_at, seg.speculative, seg.judged, seg.end_rule = 2.0, Future(), Future(), "hold"
    seg.resume()
    assert (seg.paused_at, seg.speculative, seg.judged, seg.end_rule) == (None,) * 4
    assert seg.started_at == 1.0 and seg.echo        # what the segment is stays


def partials(every=1.0, at_pause=False, current=None):
    said, heard = [], []

    def transcribe(audio):
        heard.append(len(audio))
        return SimpleNamespace(text=f" words {len(heard)} ")

    lines = PartialLines(transcribe, lambda: np.zeros(160), lambda: current[0], said.append,
                         every, at_pause, realtime=False, logger=logging.getLogger("test"))
    return lines, said, heard


def test_partials_come_every_so_many_seconds_of_audio_faster_than_real_time():
    seg = Segment(started_at=0.0)
    lines, said, heard = partials(every=1.0, current=[seg])
    chunks = round(3.2 / CHUNK_S)                       # 3.2 s of speech, chunk by chunk
    for i in range(chunks):
        lines.tick(seg, i * CHUNK_S)
    assert said == ["words 1", "words 2", "words 3"]
    seg.paused_at = 3.3                                 # no partial while the segment pauses
    lines.tick(seg, 3.3)
    assert len(heard) == 3
    lines.close()


def test_a_partial_of_a_segment_no_longer_heard_or_of_echo_is_not_reported():
    old, new = Segment(started_at=0.0), Segment(started_at=5.0)
    current = [new]
    lines, said, _ = partials(every=0.0, at_pause=True, current=current)
    done = Future()
    lines.at_a_pause(done, old)                         # the words of an earlier segment
    done.set_result(SimpleNamespace(text="too late"))
    echo = Segment(started_at=6.0, echo=True)
    current[0] = echo
    heard = Future()
    lines.at_a_pause(heard, echo)
    heard.set_result(SimpleNamespace(text="the robot's own words"))
    current[0] = new
    ok = Future()
    lines.at_a_pause(ok, new)
    ok.set_result(SimpleNamespace(text="  where is the kitchen  "))
    assert said == ["where is the kitchen"]
    lines.close()


def test_without_partials_at_pauses_nothing_is_reported_at_a_pause():
    seg = Segment(started_at=0.0)
    lines, said, _ = partials(every=0.0, at_pause=False, current=[seg])
    done = Future()
    lines.at_a_pause(done, seg)
    done.set_result(SimpleNamespace(text="hello"))
    lines.tick(seg, 10.0)                               # every=0: no timed partials either
    assert said == []
    lines.close()


def test_echo_is_a_line_that_reads_like_one_the_robot_said():
    spoken = ["I can see a red mug on the table.", "Hello there."]
    assert is_echo("i can see a red mug on the table", spoken)
    assert not is_echo("where is the kitchen", spoken)
    assert not is_echo("anything", [])


def test_tell_calls_a_hook_only_where_the_owner_has_it():
    got = threading.Event()
    owner = SimpleNamespace(partial=lambda text, who: got.set())
    assert tell(owner, "partial", "hi", "") and got.is_set()
    assert not tell(owner, "speaking", True)
    assert not tell(None, "partial", "hi", "")
