"""The monitor: its session view, its web server, and its node.

The page itself, in a browser: test/installed/test_monitor_browser.py.
"""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from std_msgs.msg import String

from conftest import matched, spin_until
from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.transcript import TranscriptWriter
from vision_dialogue.monitor.session import SessionView, load_run
from vision_dialogue.monitor.web import MonitorServer
from vision_dialogue.ros.params import ParameterError
from vision_dialogue.ros.qos import RECORDS_QOS
from vision_dialogue.ros.topics import RECORDS_TOPIC


def get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def session(tmp_path, be=None, turns=("Hello!", "What now?"), n=3, m=2, feed=None):
    """A real conversation over a fake LLM, recorded as a transcript: (view fed live, run dir).

    `feed(conv)` drives the conversation instead of the default: two frames, then each turn.
    """
    be = be or FakeChatBackend()
    conv = Conversation(be, load_persona(), ConversationConfig(n=n, m=m, stream=False))
    writer = TranscriptWriter(tmp_path / "runs")
    view = SessionView()
    conv.add_listener(writer)
    conv.add_listener(lambda entry: view.ingest(
        dict(entry.to_record() or {"type": "ignored"}, t=time.time())))
    try:
        (feed or (lambda c: frames_and_turns(c, turns)))(conv)
    finally:
        conv.close()
        writer.close()
    return view, writer.dir


def frames_and_turns(conv, turns):
    for i, text in enumerate(turns):
        for k in range(2):
            conv.add_frame(np.full((48, 64, 3), 40 * (2 * i + k + 1), np.uint8))
        conv.wait_idle(5)
        conv.turn(text)


def test_view_follows_frames_through_summaries_and_turns(tmp_path):
    view, _ = session(tmp_path)
    snap = view.snapshot()
    kinds = [i["kind"] for i in snap["items"] if i["kind"] != "note"]
    assert kinds.count("frame") == 4 and kinds.count("user") == 2 and kinds.count("robot") == 2
    frames = {i["id"]: i for i in snap["items"] if i["kind"] == "frame"}
    summaries = [i for i in snap["items"] if i["kind"] == "summary"]
    assert summaries and all(frames[f]["status"] == "summarised"
                             for s in summaries for f in s["frame_ids"])
    assert any(f["status"] == "raw" for f in frames.values())
    # each summary sits right after the last frame it replaced, as in the prompt
    items = snap["items"]
    for s in summaries:
        at = items.index(s)
        assert items[at - 1]["kind"] == "frame" and items[at - 1]["id"] == max(s["frame_ids"])
    # per-turn latency and prompt size for the plot; the LLM is healthy after answers
    assert [t["turn_id"] for t in snap["turns"]] == [1, 2]
    assert all(t["reply_s"] >= t["first_sentence_s"] >= 0 and t["prompt_chars"] > 100
               for t in snap["turns"])
    assert snap["health"]["llm"]["ok"] is True and snap["health"]["camera"]["ok"] is True


def test_view_marks_frames_being_summarised_and_a_failing_llm():
    view = SessionView()
    for fid in (1, 2, 3):
        view.ingest({"type": "frame", "frame_id": fid, "observation": f"view {fid}"})
    view.ingest({"type": "summarising", "frame_ids": [1, 2]})
    status = {i["id"]: i["status"] for i in view.snapshot()["items"] if i["kind"] == "frame"}
    assert status == {1: "summarising", 2: "summarising", 3: "raw"}
    view.ingest({"type": "summary_deferred", "frame_ids": [1, 2]})    # gave way to a reply
    assert all(i["status"] == "raw" for i in view.snapshot()["items"] if i["kind"] == "frame")
    before = view.version
    view.ingest({"type": "reply", "turn_id": 1, "text": "Oops", "fallback": True,
                 "error": "APIConnectionError: refused"})
    assert view.version > before and view.wait_change(before, 0.01) == view.version
    health = view.snapshot()["health"]["llm"]
    assert health["ok"] is False and "refused" in health["detail"]


def test_finished_run_is_browsed_from_its_folder(tmp_path):
    live, run_dir = session(tmp_path)
    past = load_run(run_dir)
    assert [i["kind"] for i in past.snapshot()["items"]] == \
        [i["kind"] for i in live.snapshot()["items"]]
    frame = next(i for i in past.snapshot()["items"] if i["kind"] == "frame")
    assert frame["thumbnail"] == f"frames/{frame['id']}.jpg"
    assert past.thumbnail(frame["id"])[:3] == b"\xff\xd8\xff"
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path / "nowhere")


def test_server_serves_page_state_thumbnails_and_pushes_changes(tmp_path):
    view, run_dir = session(tmp_path)
    view = load_run(run_dir)
    srv = MonitorServer(view, "127.0.0.1", 0)
    srv.start()
    try:
        status, ctype, page = get(srv.url)
        assert status == 200 and "text/html" in ctype and b"vision_dialogue monitor" in page
        assert b"http" not in page.replace(b"http-equiv", b"")     # no CDN: works offline
        _, _, js = get(srv.url + "static/app.js")
        assert b"EventSource" in js
        state = json.loads(get(srv.url + "api/state")[2])
        frame = next(i for i in state["items"] if i["kind"] == "frame")
        status, ctype, jpg = get(srv.url + frame["thumbnail"])
        assert ctype == "image/jpeg" and jpg[:3] == b"\xff\xd8\xff"
        with pytest.raises(urllib.error.HTTPError):
            get(srv.url + "frames/999999.jpg")
        # server-sent events: the state at once, then again after a change
        got = []

        def listen():
            with urllib.request.urlopen(srv.url + "events", timeout=10) as r:
                for raw in r:
                    if raw.startswith(b"data: "):
                        got.append(json.loads(raw[6:]))
                        if len(got) == 2:
                            return

        t = threading.Thread(target=listen, daemon=True)
        t.start()
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        view.ingest({"type": "user", "turn_id": 9, "text": "pushed to the page"})
        t.join(10)
        assert len(got) == 2 and got[1]["items"][-1]["text"] == "pushed to the page"
    finally:
        srv.stop()


def test_images_made_by_tools_are_shown_and_served():
    import base64
    import cv2
    view = SessionView()
    jpg = cv2.imencode(".jpg", np.full((30, 40, 3), 200, np.uint8))[1].tobytes()
    view.ingest({"type": "tool_image", "image_file": "a1b2_canny.png",
                 "thumbnail": base64.b64encode(jpg).decode()})
    item = view.snapshot()["items"][-1]
    assert item == {"kind": "image", "t": item["t"], "image_file": "a1b2_canny.png",
                    "thumbnail": "images/0.jpg"}
    srv = MonitorServer(view, "127.0.0.1", 0)
    srv.start()
    try:
        assert get(srv.url + "images/0.jpg")[2] == jpg
        with pytest.raises(urllib.error.HTTPError):
            get(srv.url + "images/1.jpg")
    finally:
        srv.stop()


def test_port_in_use_is_an_error_at_start():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(OSError):
            MonitorServer(SessionView(), "127.0.0.1", s.getsockname()[1]).start()


def test_node_shows_the_managers_event_records(ros_context):
    from vision_dialogue.monitor_node import MonitorNode
    node = MonitorNode(context=ros_context, parameter_overrides=[Parameter("port", value=0)])
    io = rclpy.create_node("test_io", context=ros_context)
    pub = io.create_publisher(String, RECORDS_TOPIC, RECORDS_QOS)
    ex = MultiThreadedExecutor(num_threads=2, context=ros_context)
    ex.add_node(node)
    ex.add_node(io)
    try:
        assert spin_until(ex, lambda: matched(pub, *ex.get_nodes()), timeout=10)
        pub.publish(String(data=json.dumps({"type": "user", "turn_id": 1, "text": "Hi there"})))
        pub.publish(String(data="{not json"))          # skipped with a warning
        pub.publish(String(data=json.dumps({"type": "reply", "turn_id": 1, "text": "Hello!",
                                            "first_sentence_s": 0.4, "reply_s": 0.9})))
        assert spin_until(ex, lambda: len(node.view.snapshot()["items"]) >= 2, timeout=10)
        state = json.loads(get(node.server.url + "api/state")[2])
        assert [(i["kind"], i["text"]) for i in state["items"]] == \
            [("user", "Hi there"), ("robot", "Hello!")]
        assert state["turns"][0]["first_sentence_s"] == 0.4
    finally:
        ex.shutdown()
        node.destroy_node()
        io.destroy_node()


def test_the_page_shows_who_people_node_recognises_and_their_consent(ros_context):
    """people_node's latched people/state, sent before the monitor started, reaches the page.

    A state that is not its JSON is skipped (the last good one stays).
    """
    from vision_dialogue.application.identity.persons import ConsentState, SessionPerson
    from vision_dialogue.monitor_node import MonitorNode
    from vision_dialogue.ros.qos import LATCHED_QOS
    from vision_dialogue.ros.topics import PEOPLE_STATE_TOPIC
    io = rclpy.create_node("test_people_state", context=ros_context)
    pub = io.create_publisher(String, PEOPLE_STATE_TOPIC, LATCHED_QOS)
    barack = SessionPerson("person_abcdefgh", known=True, name="Barack", confidence=0.8123,
                           consent=ConsentState.GIVEN, face_ids={"f1"})
    stranger = SessionPerson("anonymous_person_xyzab", face_ids={"f2"})
    pub.publish(String(data=json.dumps({"people": [barack.shown(), stranger.shown()]})))
    node = MonitorNode(context=ros_context, parameter_overrides=[Parameter("port", value=0)])
    ex = MultiThreadedExecutor(num_threads=2, context=ros_context)
    ex.add_node(node)
    ex.add_node(io)
    try:
        assert spin_until(ex, lambda: node.view.snapshot()["people"], timeout=10)
        pub.publish(String(data="[1, 2]"))                  # skipped with a warning
        pub.publish(String(data=json.dumps({"people": [barack.shown()]})))
        assert spin_until(ex, lambda: len(node.view.snapshot()["people"]) == 1, timeout=10)
        state = json.loads(get(node.server.url + "api/state")[2])
        assert state["people"] == [{"person_id": "person_abcdefgh", "name": "Barack",
                                    "known": True, "confidence": 0.81, "consent": "given",
                                    "faces": 1, "heard": False}]
    finally:
        ex.shutdown()
        node.destroy_node()
        io.destroy_node()
    with pytest.raises(ValueError):
        SessionView().set_people(json.dumps({"people": [{"name": "no id"}]}))


@pytest.mark.parametrize("params, match", [
    ({"host": "my laptop"}, "host"),
    ({"port": 70000}, "port"),
    ({"transcript": "/no/such/run"}, "transcript"),
])
def test_node_rejects_bad_parameters_naming_them(ros_context, params, match):
    from vision_dialogue.monitor_node import MonitorNode
    with pytest.raises(ParameterError, match=f"^{match}"):
        MonitorNode(context=ros_context, parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()])


def test_events_between_frames_are_shown_and_kept_in_the_transcript(tmp_path):
    from vision_dialogue.core.transcript import read_transcript

    def frame_and_wave(conv):
        conv.add_frame(np.full((48, 64, 3), 90, np.uint8))
        conv.add_event("someone on the left waved", event="wave")
    view, run_dir = session(tmp_path, feed=frame_and_wave)
    notes = [i["text"] for i in view.snapshot()["items"] if i["kind"] == "note"]
    assert "seen: someone on the left waved" in notes
    records = read_transcript(run_dir / "transcript.jsonl")
    assert [(r["event"], r["text"]) for r in records if r["type"] == "event"] == [
        ("wave", "someone on the left waved")]


def _raw_get(port: int, path: str) -> tuple[int, bytes]:
    """GET `path` exactly as written (no client-side normalisation of '..' or %2e)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_static_files_are_served_through_a_symlink_install_and_nothing_else(
        tmp_path, monkeypatch):
    """Static files through a symlink install are served; nothing else is.

    colcon --symlink-install links each static file into the source tree: served all the
    same; traversal, encoded traversal and a planted link to a file outside are 404.
    """
    from vision_dialogue.monitor import web as monitor_web
    linked = tmp_path / "install" / "static"
    linked.mkdir(parents=True)
    for name in monitor_web.STATIC_FILES:
        (linked / name).symlink_to(monitor_web.STATIC_DIR / name)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the web")
    (linked / "secret.txt").symlink_to(secret)
    monkeypatch.setattr(monitor_web, "STATIC_DIR", linked)
    srv = MonitorServer(SessionView(), "127.0.0.1", 0)
    srv.start()
    try:
        for name, ctype in monitor_web.STATIC_FILES.items():
            status, got, body = get(srv.url + "static/" + name)
            assert status == 200 and ctype in got
            assert body == (linked / name).read_bytes() and body
        for path in ("/static/secret.txt", "/static/../web.py", "/static/%2e%2e/web.py",
                     "/static/..%2fweb.py", "/static/%2e%2e%2f%2e%2e%2fsecret.txt",
                     "/static/", "/static/.", "/static//etc/passwd"):
            status, body = _raw_get(srv.port, path)
            assert status == 404, (path, status)
            assert b"not for the web" not in body
    finally:
        srv.stop()


def test_a_detectors_late_note_reaches_its_frame_on_the_page_model():
    """The `objects` record (detections that came after their frame) updates that frame."""
    from vision_dialogue.monitor.session import SessionView
    view = SessionView()
    view.ingest({"type": "frame", "frame_id": 3, "observation": "no one there", "t": 1.0})
    view.ingest({"type": "objects", "frame_id": 3, "text": "a cup in the middle",
                 "observation": "no one there; a cup in the middle", "t": 1.2})
    view.ingest({"type": "objects", "frame_id": 99, "text": "ignored", "t": 1.3})
    frame = next(it for it in view.snapshot()["items"] if it["kind"] == "frame")
    assert frame["objects"] == "a cup in the middle"
    assert frame["observation"] == "no one there; a cup in the middle"


def test_the_faces_shown_for_a_line_sit_right_after_it():
    """The speech node's face comes before the manager records the line: moved after it."""
    from vision_dialogue.monitor.session import SessionView
    view = SessionView()
    face = {"type": "face", "moment": "heard", "line": "My dog died.", "expression": "sad",
            "valence": -0.6, "arousal": -0.2, "gesture": "vd_sad"}
    said = {"type": "face", "moment": "sentence", "line": "I'm so sorry.", "expression": "sad",
            "valence": -0.5, "arousal": -0.2, "gesture": ""}
    other = {"type": "face", "moment": "heard", "line": "Never said.", "expression": "happy",
             "valence": 0.6, "arousal": 0.3, "gesture": ""}
    for r in (other, face, {"type": "user", "text": "My dog died.", "turn_id": 1}, said,
              {"type": "reply", "text": "I'm so sorry. Do you want to talk?", "turn_id": 1}):
        view.ingest(r)
    kinds = [(i["kind"], i.get("line", i.get("text"))) for i in view.snapshot()["items"]]
    assert kinds == [("note", "Never said."), ("user", "My dog died."),
                     ("note", "My dog died."), ("robot", "I'm so sorry. Do you want to talk?"),
                     ("note", "I'm so sorry.")]
