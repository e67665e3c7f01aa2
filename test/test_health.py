"""The health rules every node reports on /diagnostics (core/health.py), ROS-free."""
from __future__ import annotations

import threading
import time

from vision_dialogue.core.health import ERROR, FAULT_ERROR_S, OK, WARN, LlmWatch, ReplyStats, \
    SinceFailing, StatusBoard, Throughput, by_age, error_after, warn_after
from vision_dialogue.llm.probe import Probe


def test_something_expected_every_period_is_ok_then_warn_then_error():
    period = 0.5
    assert by_age(None, period, "frame")[0] == WARN                      # none yet
    assert by_age(0.4, period, "frame") == (OK, "frame 0.4 s ago")
    assert by_age(warn_after(period) + 0.1, period, "frame")[0] == WARN
    level, message = by_age(error_after(period) + 0.1, period, "frame")
    assert level == ERROR and "no frame for 6 s (expected every 0.5 s)" == message
    assert warn_after(period) < 5.0 and error_after(period) < 10.0         # a camera at 2 Hz


def test_a_fault_known_at_once_warns_then_errors_and_clears_on_success():
    now = [0.0]
    fault = SinceFailing(clock=lambda: now[0])
    assert fault.level() == OK
    fault.failed("no .png/.jpg images in folder /x")
    now[0] += FAULT_ERROR_S - 0.1
    fault.failed("still")                       # a repeat keeps the first time it failed
    assert fault.level() == WARN and fault.reason == "still"
    now[0] += 0.2
    assert fault.level() == ERROR
    fault.succeeded()
    assert fault.level() == OK and fault.since is None


def test_reply_stats_give_the_p50_of_real_replies_and_count_fallbacks():
    stats = ReplyStats(window=3)
    for s in (5.0, 1.0, 2.0, 3.0):
        stats.add(s, fallback=False)
    stats.add(9.0, fallback=True, error="APIConnectionError")   # not a latency
    v = stats.values()
    assert v == {"replies": 5, "fallback replies": 1, "first sentence p50 (s)": "2.00"}
    assert stats.last_fallback and stats.last_error == "APIConnectionError"


def test_the_llm_watch_follows_a_server_that_stops_and_comes_back():
    answers = [Probe(True, "serves 'm'")]
    looked = threading.Event()

    def probe():
        looked.set()
        return answers[-1]
    stats = ReplyStats()
    watch = LlmWatch(probe, stats, period=0.02)
    assert watch.health().level == WARN                        # not checked yet
    watch.start()
    try:
        assert looked.wait(5)

        def level_becomes(level):
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and watch.health().level != level:
                time.sleep(0.01)
            return watch.health()
        assert level_becomes(OK).message == "serves 'm'"
        answers.append(Probe(False, "http://x unreachable (ConnectError)"))
        h = level_becomes(ERROR)
        assert h.task == "llm" and "unreachable" in h.message
        answers.append(Probe(True, "serves 'm'"))
        assert level_becomes(OK).level == OK
        stats.add(None, fallback=True, error="timeout")         # a reply failed meanwhile
        assert watch.health().level == WARN and "timeout" in watch.health().message
        stats.add(0.8, fallback=False)
        assert watch.health(model="m").level == OK and watch.health(model="m").values[
            "model"] == "m"
    finally:
        watch.close()
    in_process = LlmWatch(None, ReplyStats())
    in_process.start()                                          # nothing to probe: no thread
    assert in_process.health().level == OK and in_process._thread is None


def test_throughput_counts_the_recent_items_and_their_time():
    now = [100.0]
    work = Throughput(window=10.0, clock=lambda: now[0])
    assert work.values() == {"done": 0, "rate (Hz)": "0.00", "mean time (ms)": ""}
    for _ in range(5):
        work.add(0.2)
        now[0] += 1.0
    assert work.values() == {"done": 5, "rate (Hz)": "0.50", "mean time (ms)": "200"}
    now[0] += 20
    assert work.values()["rate (Hz)"] == "0.00" and work.values()["done"] == 5


def test_the_board_shows_the_worst_fresh_status_of_a_task_across_nodes():
    now = [0.0]
    board = StatusBoard(max_age=5.0, clock=lambda: now[0])
    assert board.worst("camera") is None
    board.update("/left/camera_node: camera", OK, "frame 0.1 s ago")
    board.update("/right/camera_node: camera", ERROR, "source failing: no device")
    board.update("manager_node: llm", OK, "serves 'm'")
    right = "/right/camera_node: camera: source failing: no device"
    assert board.worst("camera") == (ERROR, right)
    now[0] += 3.0
    board.update("/left/camera_node: camera", OK, "frame 0.2 s ago")
    now[0] += 3.0                                    # the right camera's node went quiet
    assert board.worst("camera") == (OK, "/left/camera_node: camera: frame 0.2 s ago")
    assert board.worst("llm") is None                # stale too
