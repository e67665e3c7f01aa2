"""The health rules every node reports on /diagnostics (common/health.py), ROS-free."""
from __future__ import annotations

import time

from vision_dialogue.common.health import ERROR, FAULT_ERROR_S, OK, WARN, LlmWatch, ReplyStats, \
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
    """Connected to every period (no request); the model list asked once per coming up."""
    down = [""]
    probes = []

    def probe():
        probes.append(1)
        return Probe(True, "serves 'm'")
    stats = ReplyStats()
    watch = LlmWatch(probe, stats, period=0.02, unreachable=lambda: down[-1])
    assert watch.health().level == WARN                        # not checked yet
    watch.start()
    try:
        def level_becomes(level):
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and watch.health().level != level:
                time.sleep(0.01)
            return watch.health()
        assert level_becomes(OK).message == "serves 'm'"
        time.sleep(0.2)                                         # many looks, one probe
        assert len(probes) == 1
        down.append("http://127.0.0.1:8080 unreachable (Connection refused)")
        h = level_becomes(ERROR)
        assert h.task == "llm" and "unreachable" in h.message
        down.append("")
        assert level_becomes(OK).level == OK and len(probes) == 2
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


def test_a_closed_port_is_unreachable_and_an_open_one_is_not():
    import socket
    from vision_dialogue.llm.probe import unreachable
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert unreachable(f"http://127.0.0.1:{port}/v1") == ""
    assert "unreachable" in unreachable(f"http://127.0.0.1:{port}/v1")


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
