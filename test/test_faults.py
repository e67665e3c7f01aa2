"""Fault injection: hostile input and failures at every boundary of the running nodes.

Each probe drives the real nodes through their public interfaces (topics, parameters,
actions, files) with fakes only at process boundaries (an OpenAI-compatible server on
127.0.0.1). Probes carry `@pytest.mark.fault(area, fault)`; other test files mark theirs
too, and the run ends with the fault matrix (test/conftest.py prints it).
"""
from __future__ import annotations

import os
import resource
import socket
import threading
import time

import cv2
import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import CompressedImage

from conftest import matched
from fake_openai import FakeOpenAI, Reply
from manager_rig import Rig, photo, running_manager
from vision_dialogue.core.persona import load_persona
from vision_dialogue.core.summariser import SummaryRule
from vision_dialogue.ros.image_msgs import stamp_from_ns, to_compressed_msg, to_image_msg
from vision_dialogue.ros.params import ARRAY_TYPES

FALLBACK_LINES = load_persona().fallback_lines


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def bomb_jpeg(width: int = 20000, height: int = 20000) -> bytes:
    """A tiny valid JPEG whose header declares width x height (a decompression bomb)."""
    data = bytearray(cv2.imencode(".jpg", np.full((8, 8, 3), 128, np.uint8))[1].tobytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 7] = height.to_bytes(2, "big")
    data[sof + 7:sof + 9] = width.to_bytes(2, "big")
    return bytes(data)


def transcript(rig) -> list[dict]:
    """The manager's transcript so far (a line being written is skipped)."""
    from vision_dialogue.core.transcript import read_transcript
    return read_transcript(rig.node.transcript.path)


# ------------------------------------------------------------------------ the LLM
LLM_FAULTS = {
    "refused": None,                                   # nothing listens on the port
    "HTTP 429 on every attempt": [429, 429],
    "HTTP 500": [500, 500],
    "garbage body": [{"not": "a completion"}],
    "stream cut before any text": [Reply(text="Hi there. Bye.", disconnect_after=1)] * 2,
    "in-stream error event": [Reply(text="Hi there. Bye.", error_after=1)],
}


@pytest.mark.fault("LLM", "refused / 429 / 500 / garbage / cut / error event")
@pytest.mark.parametrize("fault", list(LLM_FAULTS))
def test_llm_failure_gives_the_fallback_and_the_node_keeps_working(ros_context, tmp_path,
                                                                   fault):
    with FakeOpenAI() as fake:
        base = fake.base_url if LLM_FAULTS[fault] else f"http://127.0.0.1:{closed_port()}/v1"
        for r in LLM_FAULTS[fault] or []:
            fake.push(r)
        stream = fault != "garbage body"
        rig = Rig(ros_context, fake, tmp_path, base_url=base, max_retries=1, stream=stream)
        try:
            rig.say("hello?")
            assert rig.wait(lambda: rig.finals(), timeout=15)
            final = rig.finals()[0]
            assert final.fallback and final.text in FALLBACK_LINES, final.text
            fake.push("I am back.")
            if LLM_FAULTS[fault]:                     # the same node answers the next turn
                rig.say("and now?")
                assert rig.wait(lambda: len(rig.finals()) == 2, timeout=15)
                assert rig.finals()[1].text == "I am back." and not rig.finals()[1].fallback
        finally:
            rig.close()


CUTS = {  # events: 0 role, 1 "First ", 2 "sentence. ", 3 "Second", 4 " sentence.", 5 finish
    "closed in good order mid-sentence, no finish_reason": dict(end_after=4),
    "connection dropped after the first sentence": dict(disconnect_after=4),
    "error event after the first sentence": dict(error_after=4),
}


@pytest.mark.fault("LLM", "stream cut after the first sentence (each framing)")
@pytest.mark.parametrize("cut", list(CUTS))
def test_cut_stream_never_speaks_a_half_sentence(ros_context, tmp_path, cut):
    with running_manager(ros_context, tmp_path, max_retries=0) as (rig, fake):
        fake.push(Reply(text="First sentence. Second sentence.",
                        chunks=["First ", "sentence. ", "Second", " sentence."], **CUTS[cut]))
        rig.say("tell me two things")
        assert rig.wait(lambda: rig.finals(), timeout=10)
        spoken = [r.text for r in rig.replies if not r.final]
        assert spoken[0] == "First sentence." and "Second" not in " ".join(spoken)
        final = rig.finals()[0]
        assert final.fallback and final.text.startswith("First sentence. ")
        assert "Second" not in final.text


@pytest.mark.fault("LLM", "hung server (reply deadline)")
def test_hung_llm_is_answered_with_the_fallback_at_the_deadline(ros_context, tmp_path):
    with running_manager(ros_context, tmp_path,
                         reply_deadline=1.0, request_timeout=30.0) as (rig, fake):
        fake.push(Reply(text="Far too late.", delay=5.0))
        t0 = time.monotonic()
        rig.say("are you there?")
        assert rig.wait(lambda: rig.finals(), timeout=10)
        took = time.monotonic() - t0
        final = rig.finals()[0]
        assert final.fallback and took < 5.0, (took, final.text)   # not the late answer's 5 s
        time.sleep(max(0.0, 5.5 - took))           # the late answer arrives ...
        rig.wait(lambda: False, timeout=0.5)
        assert len(rig.finals()) == 1              # ... and is not spoken
        assert "Far too late" not in " ".join(r.text for r in rig.replies)
        reply = [r for r in transcript(rig) if r["type"] == "reply"][0]
        assert reply["fallback"] and "DeadlineExceeded" in reply["error"]


# ------------------------------------------------------------------------ camera frames
@pytest.mark.fault("images", "JPEG declaring 20000x20000 (decompression bomb)")
def test_decompression_bomb_is_rejected_before_decoding(ros_context, tmp_path):
    with running_manager(ros_context, tmp_path) as (rig, fake):
        msg = CompressedImage(format="jpeg", data=bomb_jpeg())
        assert len(msg.data) < 1000
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rig.jpg_pub.publish(msg)
        assert rig.wait(lambda: rig.node.intake.rejected == 1, timeout=5)   # not decoded
        grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        assert grew_mb < 200, f"memory grew {grew_mb:.0f} MB"
        assert dict(rig.node.intake.rejected_by_cause) == {"too_large": 1}
        rig.jpg_pub.publish(to_compressed_msg(photo()))          # still takes frames
        assert rig.wait(lambda: rig.node.intake.accepted == 1)
        rig.node.publish_state()
        assert rig.wait(lambda: rig.states and rig.states[-1].frames_rejected == 1)
        st = rig.states[-1]
        assert list(st.rejected_causes) == ["too_large"] and list(st.rejected_counts) == [1]


@pytest.mark.fault("images", "raw frame in an unsupported encoding + its JPEG copy")
def test_unreadable_raw_frame_does_not_hide_its_jpeg_copy(ros_context, tmp_path):
    with running_manager(ros_context, tmp_path, min_frame_interval=2.0) as (rig, fake):
        stamp = stamp_from_ns(1_700_000_000_000_000_000)
        raw = to_image_msg(photo(), stamp=stamp, frame_id="cam")
        raw.encoding = "yuv422"
        rig.img_pub.publish(raw)
        assert rig.wait(lambda: rig.node.intake.rejected == 1)
        rig.jpg_pub.publish(to_compressed_msg(photo(), stamp=stamp, frame_id="cam"))
        assert rig.wait(lambda: rig.node.intake.accepted == 1)  # interval slot still free
        assert dict(rig.node.intake.rejected_by_cause) == {"encoding": 1}


@pytest.mark.fault("images", "bad frames of different causes (warnings per cause)")
def test_each_cause_of_bad_frames_gets_its_own_warning(ros_context, tmp_path, capfd):
    with running_manager(ros_context, tmp_path) as (rig, fake):
        for _ in range(3):
            rig.jpg_pub.publish(CompressedImage(format="jpeg", data=b"garbage"))
        rig.jpg_pub.publish(CompressedImage(format="jpeg", data=bomb_jpeg()))
        odd = to_image_msg(photo())
        odd.data = odd.data[:100]
        rig.img_pub.publish(odd)
        assert rig.wait(lambda: rig.node.intake.rejected == 5)
        time.sleep(0.2)
        err = capfd.readouterr().err
        assert err.count("dropping a bad camera frame (corrupt") == 1     # throttled
        assert "dropping a bad camera frame (too_large" in err
        assert "dropping a bad camera frame (inconsistent" in err
        assert dict(rig.node.intake.rejected_by_cause) == {
            "corrupt": 3, "too_large": 1, "inconsistent": 1}


# ------------------------------------------------------------------------ utterances
@pytest.mark.fault("utterances", "burst of 100 with no gap")
def test_utterance_burst_is_answered_in_order_or_dropped_on_record(ros_context, tmp_path):
    """Lines that wait together get one reply; a flood past the bound is dropped on record."""
    slow_yes = lambda req: time.sleep(0.05) or "Yes."   # noqa: E731 - a turn takes 50 ms
    with running_manager(ros_context, tmp_path, max_queued_turns=4, stream=False,
                         responder=slow_yes) as (rig, _):
        for i in range(100):
            rig.say(f"line {i}")
        records = []

        def settled():
            records[:] = transcript(rig)
            heard = [r for r in records if r["type"] == "user"]
            dropped = [r for r in records if r["type"] == "dropped"]
            return len(heard) + len(dropped) == 100 and records[-1]["type"] == "reply"
        assert rig.wait(settled, timeout=40)
        heard = [int(r["text"].split()[1]) for r in records if r["type"] == "user"]
        answered = [int(r["in_reply_to"].split()[1]) for r in records
                    if r["type"] == "reply"]
        dropped = [r for r in records if r["type"] == "dropped"]
        assert heard == sorted(heard) and heard[-1] == 99 == answered[-1]  # in order, newest
        assert set(answered) <= set(heard) and len(answered) < len(heard)  # some took several
        assert sorted(heard + [int(r["text"].split()[1]) for r in dropped]) == list(range(100))
        assert dropped and all("queue full" in r["reason"] for r in dropped)
        assert rig.node.turns.queue.dropped == len(dropped)


@pytest.mark.fault("utterances", "three lines while a reply is slow")
def test_lines_said_while_a_reply_is_slow_get_one_reply(ros_context, tmp_path):
    with running_manager(ros_context, tmp_path, max_queued_turns=4, stream=False) as (rig, fake):
        release = threading.Event()
        fake.responder = lambda req: release.wait(20) and "Okay."
        rig.say("hello robot")
        assert rig.wait(lambda: fake.request_count == 1, timeout=10)  # the slow reply began
        for text in ("what is on the table?", "the red thing", "on the left"):
            rig.say(text)
        assert rig.wait(lambda: len(rig.node.turns.queue) == 3, timeout=10)
        release.set()
        assert rig.wait(lambda: len([r for r in transcript(rig) if r["type"] == "reply"]) == 2,
                        timeout=20)
        recs = transcript(rig)
        assert [r["text"] for r in recs if r["type"] == "user"] == [
            "hello robot", "what is on the table?", "the red thing", "on the left"]
        assert [r["in_reply_to"] for r in recs if r["type"] == "reply"] == [
            "hello robot", "on the left"]
        assert not [r for r in recs if r["type"] == "dropped"] and fake.request_count == 2


@pytest.mark.fault("utterances", "queued past the reply deadline")
def test_stale_utterances_expire_on_record(ros_context, tmp_path):
    with running_manager(ros_context, tmp_path,
                         reply_deadline=20.0, max_queued_turns=10, stream=False) as (rig, fake):
        release = threading.Event()
        fake.responder = lambda req: release.wait(20) and "Okay."
        rig.say("question 0")
        assert rig.wait(lambda: fake.request_count == 1, timeout=10)   # answering it
        assert rig.node.set_parameters([Parameter("reply_deadline", value=0.5)])[0].successful
        for i in range(1, 5):
            rig.say(f"question {i}")
        assert rig.wait(lambda: len(rig.node.turns.queue) == 4, timeout=10)
        sent = time.monotonic()
        rig.wait(lambda: time.monotonic() > sent + 0.6, timeout=2)    # their deadlines pass
        release.set()
        assert rig.wait(lambda: len([r for r in transcript(rig)
                                     if r["type"] in ("reply", "dropped")]) == 5, timeout=20)
        recs = transcript(rig)
        expired = [r for r in recs if r["type"] == "dropped"]
        replies = [r for r in recs if r["type"] == "reply"]
        # the four that waited behind the first join one turn, whose newest deadline passed
        # while they waited: all four go, on record, and the LLM is not asked for them
        assert [r["in_reply_to"] for r in replies] == ["question 0"]
        assert [r["text"] for r in expired] == [f"question {i}" for i in range(1, 5)]
        assert all(r["reason"].startswith("expired") for r in expired)
        assert fake.request_count == 1


# ------------------------------------------------------------------------ parameters
@pytest.mark.fault("parameters", "min_frame_interval changed at run time")
def test_a_live_parameter_takes_effect_while_running(ros_context, tmp_path):
    with running_manager(ros_context, tmp_path) as (rig, fake):
        res = rig.node.set_parameters([Parameter("min_frame_interval", value=60.0)])[0]
        assert res.successful
        for _ in range(3):
            rig.jpg_pub.publish(to_compressed_msg(photo()))
            time.sleep(0.05)
        assert rig.wait(lambda: rig.node.intake.received == 3)
        assert rig.wait(lambda: rig.node.intake.accepted + rig.node.intake.skipped == 3)
        assert rig.node.intake.accepted == 1 and rig.node.intake.skipped == 2
        res = rig.node.set_parameters_atomically([Parameter("n", value=3),
                                                  Parameter("m", value=2)])
        assert res.successful
        assert rig.node.conversation.summariser.rule == SummaryRule(3, 2)


def _nodes_with_their_params(ctx, tmp_path):
    """Every node of the package, built with harmless settings, and its PARAMS."""
    import cv2 as _cv2

    from vision_dialogue import camera_node, manager_node, speech_node, vfm_server
    from vision_dialogue.cli import bag_play, bag_record
    folder = tmp_path / "imgs"
    folder.mkdir()
    _cv2.imwrite(str(folder / "a.png"), np.zeros((8, 8, 3), np.uint8))
    script = tmp_path / "s.yaml"
    script.write_text("- say: hi\n")
    import io

    from fake_chat_backend import FakeChatBackend
    yield (manager_node.ManagerNode(context=ctx, backend=FakeChatBackend(), parameter_overrides=[
        Parameter("transcript_dir", value="")]), manager_node.PARAMS)
    yield (camera_node.CameraNode(context=ctx, parameter_overrides=[
        Parameter("source", value="folder"), Parameter("folder_path", value=str(folder))]),
        camera_node.PARAMS)
    yield (speech_node.SpeechNode(context=ctx, input_stream=io.StringIO(""),
                                  output_stream=io.StringIO(), on_done=lambda: None,
                                  parameter_overrides=[Parameter("wait_for_subscriber",
                                                                 value=0.0)]),
           speech_node.PARAMS)
    yield (vfm_server.VfmServer(context=ctx, parameter_overrides=[
        Parameter("image_dir", value=str(tmp_path / "store")),
        Parameter("load", value="canny_cpu")]), vfm_server.PARAMS)
    yield (bag_record.BagRecorder(context=ctx, parameter_overrides=[
        Parameter("output", value=str(tmp_path / "bag"))]), bag_record.PARAMS)
    del bag_play


@pytest.mark.fault("parameters", "every parameter set at run time")
def test_every_parameter_takes_effect_live_or_is_refused_with_the_reason(
        ros_context, tmp_path):
    for node, params in _nodes_with_their_params(ros_context, tmp_path):
        try:
            for p in params:
                if p.array_of is not None and p.default in ([], None):   # declared by type
                    given = Parameter(p.name, ARRAY_TYPES[p.array_of],
                                      node.get_parameter_or(p.name).value or [])
                else:
                    given = Parameter(p.name, value=node.get_parameter(p.name).value)
                res = node.set_parameters([given])[0]
                if p.live:
                    assert res.successful, (node.get_name(), p.name, res.reason)
                else:
                    assert not res.successful and "read-only" in res.reason, \
                        (node.get_name(), p.name)
        finally:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()


@pytest.mark.fault("parameters", "unparseable value on the command line")
def test_unparseable_ros_args_exit_2_with_one_line(tmp_path):
    import subprocess
    import sys
    from conftest import REPO
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-m", "vision_dialogue.manager_node", "--ros-args",
                          "-p", "n:="], capture_output=True, text=True, timeout=60, env=env,
                         cwd=tmp_path)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("[manager_node] invalid arguments"), \
        res.stderr
    assert "Traceback" not in res.stderr + res.stdout


# ------------------------------------------------------------------------ VFM server
@pytest.mark.fault("VFM", "image file swapped for a symlink after the check")
def test_a_file_swapped_for_a_link_between_check_and_read_is_refused(tmp_path):
    from vision_dialogue.vfm.image_store import ImageStore, StoreError
    store = ImageStore(tmp_path / "store")
    name = store.add(np.full((16, 16, 3), 200, np.uint8))
    secret = tmp_path / "secret.png"
    cv2.imwrite(str(secret), np.zeros((16, 16, 3), np.uint8))
    real = store.resolve(name)                 # the check passes ...
    real.unlink()
    real.symlink_to(secret)                    # ... then the file becomes a link out
    with pytest.raises(StoreError, match="cannot be opened safely"):
        store._read_inside(real, name)
    with pytest.raises(StoreError):
        store.load(name)


@pytest.mark.fault("VFM", "image store growing without bound")
def test_store_keeps_its_size_cap_evicting_the_least_recently_used(tmp_path):
    from vision_dialogue.vfm.image_store import ImageStore
    rng = np.random.default_rng(0)
    noise = [rng.integers(0, 255, (64, 64, 3), np.uint8) for _ in range(12)]   # ~12 KB PNGs
    probe = ImageStore(tmp_path / "probe")
    size = (probe.root / probe.add(noise[0])).stat().st_size
    store = ImageStore(tmp_path / "s", max_bytes=int(4.5 * size))   # room for 4 images

    def add(i):
        time.sleep(0.02)          # distinct modification times
        return store.add(noise[i])
    first, second, third = add(0), add(1), add(2)
    store.load(first)             # used again: now the most recently used
    add(3)
    assert store.evicted == 0
    add(4)                        # the fifth image: one must go, the least recently used
    names = {p.name for p in store.root.iterdir()}
    assert store.evicted == 1 and second not in names and {first, third} <= names
    for i in range(5, 12):
        add(i)
    total = sum(p.stat().st_size for p in store.root.iterdir())
    assert total <= 4.5 * size and len(list(store.root.iterdir())) == 4


@pytest.mark.fault("VFM", "decompression bomb in the image store")
def test_store_refuses_an_image_declaring_too_many_pixels(tmp_path):
    from vision_dialogue.vfm.image_store import ImageStore, StoreError
    store = ImageStore(tmp_path / "s", max_pixels=4096 * 4096)
    (store.root / "bomb.png").write_bytes(bomb_jpeg())
    with pytest.raises(StoreError, match="over the .*-pixel limit|rejected before decoding"):
        store.load("bomb.png")


@pytest.mark.fault("VFM", "burst of 20 goals")
def test_a_burst_of_goals_is_queued_and_every_goal_answered(tmp_path):
    import tiny_models
    from test_vfm_server import Harness
    from vision_dialogue_interfaces.action import ImageToImage
    ckpts = tiny_models.cached(tmp_path / "tiny")
    h = Harness(tmp_path / "store", ckpts, load="canny_cpu,text2image_cpu",
                max_parallel_goals=1)
    try:
        name = _store_image(h)
        results, lock = [], threading.Lock()
        futures = [h.clients["image_to_image"].send_goal_async(
            ImageToImage.Goal(tool="canny", image_file=name)) for _ in range(20)]
        for f in futures:
            gh = _wait_future(f)
            assert gh.accepted
            res = _wait_future(gh.get_result_async()).result
            with lock:
                results.append(res.success)
        assert results == [True] * 20
    finally:
        h.close()


def _store_image(h) -> str:
    from vision_dialogue.vfm.image_store import ImageStore
    return ImageStore(h.server.store.root).add(cv2.resize(photo(), (64, 64)))


def _wait_future(future, timeout=30.0):
    import threading
    ev = threading.Event()
    future.add_done_callback(lambda _f: ev.set())
    assert ev.wait(timeout), "no response"
    return future.result()


@pytest.mark.fault("VFM", "generated image flagged by the safety checker")
def test_safety_checker_is_on_by_default_and_withholds_flagged_images(tmp_path):
    import tiny_models
    from vision_dialogue.vfm.errors import ModelMissingError, ToolError
    from vision_dialogue.vfm.models.common import RunContext
    from vision_dialogue.vfm.toolbox import Toolbox
    sd = tiny_models.stable_diffusion(tmp_path / "sd")
    ctx = RunContext(steps=1, image_size=64, seed=1)
    box = Toolbox({"text2image": "cpu"}, {"sd": str(sd)})       # default: checker on
    assert box.run("text2image", None, "a red ball", ctx).shape[2] == 3
    flagging = tiny_models.stable_diffusion(tmp_path / "sd_flag")
    tiny_models.safety_checker(flagging, flag_everything=True)
    with pytest.raises(ToolError, match="safety checker withheld"):
        Toolbox({"text2image": "cpu"}, {"sd": str(flagging)}).run(
            "text2image", None, "x", ctx)
    bare = tiny_models.stable_diffusion(tmp_path / "sd_bare")
    import shutil
    shutil.rmtree(bare / "safety_checker")
    with pytest.raises(ModelMissingError, match="safety_checker"):
        Toolbox({"text2image": "cpu"}, {"sd": str(bare)}).run("text2image", None, "x", ctx)
    out = Toolbox({"text2image": "cpu"}, {"sd": str(bare)}, safety_checker=False).run(
        "text2image", None, "x", ctx)
    assert out.ndim == 3                                   # only when explicitly turned off


# ------------------------------------------------------------------------ camera
@pytest.mark.fault("camera", "4000x3000 frames, larger than a raw frame can cross")
def test_oversized_frames_are_downscaled_to_cross_processes(ros_context, tmp_path, capfd):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from conftest import spin_until
    from vision_dialogue.camera_node import CameraNode
    from vision_dialogue.ros.dds import MAX_FRAME_BYTES
    folder = tmp_path / "big"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.jpg"), np.full((3000, 4000, 3), 90, np.uint8))
    cam = CameraNode(context=ros_context, parameter_overrides=[
        Parameter("source", value="folder"), Parameter("folder_path", value=str(folder)),
        Parameter("frame_period", value=0.2)])
    import rclpy
    sub = rclpy.create_node("big_sub", context=ros_context)
    got = []
    sub.create_subscription(Image, "camera/image_raw", got.append, qos_profile_sensor_data)
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(cam)
    ex.add_node(sub)
    try:
        assert spin_until(ex, lambda: got, timeout=10)
        m = got[0]
        assert len(m.data) <= MAX_FRAME_BYTES and abs(m.width / m.height - 4 / 3) < 0.01
        assert "larger than a raw frame that crosses processes" in capfd.readouterr().err
    finally:
        ex.shutdown()
        cam.destroy_node()
        sub.destroy_node()


# ------------------------------------------------------------------------ durability, secrets
@pytest.mark.fault("durability", "manager killed with SIGKILL in the middle of a turn")
def test_transcript_survives_kill_9_mid_turn(ros_context, tmp_path):
    import signal
    import subprocess
    import sys

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from conftest import REPO, spin_until
    from vision_dialogue.core.transcript import read_transcript
    from vision_dialogue_interfaces.msg import PromptState, Utterance
    from vision_dialogue.ros.qos import LATCHED_QOS
    with FakeOpenAI() as fake:
        fake.responder = lambda req: time.sleep(30) or "never"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO),
                                                           os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.Popen(
            [sys.executable, "-m", "vision_dialogue.manager_node", "--ros-args",
             "-p", f"base_url:={fake.base_url}", "-p", f"transcript_dir:={tmp_path / 'tr'}",
             "-p", "reply_deadline:=60.0", "-p", "probe_images:=false"], env=env, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        io_node = rclpy.create_node("killer", context=ros_context)
        img = io_node.create_publisher(CompressedImage, "camera/image_raw/compressed", 10)
        utt = io_node.create_publisher(Utterance, "dialogue/utterance", 10)
        state: list = []
        io_node.create_subscription(PromptState, "dialogue/prompt_state", state.append,
                                    LATCHED_QOS)
        ex = SingleThreadedExecutor(context=ros_context)
        ex.add_node(io_node)
        try:
            assert spin_until(ex, lambda: matched(utt, *ex.get_nodes())
                              and matched(img, *ex.get_nodes()), timeout=20)
            # frames and the utterance come on different topics, in no set order: the
            # utterance goes once the manager holds three frames (sent until it does: on a
            # busy machine the first went before the manager took any)

            def three_frames():
                img.publish(to_compressed_msg(photo()))
                return spin_until(ex, lambda: state and state[-1].frames_received >= 3,
                                  timeout=0.3)
            assert spin_until(ex, three_frames, timeout=30)
            utt.publish(Utterance(text="tell me a story"))
            assert fake.wait_for_requests(1, timeout=10)        # the turn is under way
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
            ex.shutdown()
            io_node.destroy_node()
    (run,) = (tmp_path / "tr").iterdir()
    recs = read_transcript(run / "transcript.jsonl")
    frames = [r for r in recs if r["type"] == "frame"]
    assert len(frames) >= 3 and all((run / r["file"]).is_file() for r in frames)
    assert [r["text"] for r in recs if r["type"] == "user"] == ["tell me a story"]


@pytest.mark.fault("secrets", "server echoes the API key in its error")
def test_the_api_key_never_leaves_the_process(ros_context, tmp_path, monkeypatch, capfd):
    key = "sk-test-0123456789abcdefSECRET"
    monkeypatch.setenv("VD_FAULT_KEY", key)
    with running_manager(ros_context, tmp_path, api_key_env="VD_FAULT_KEY") as (rig, fake):
        fake.push(Reply(status=401, error_message=f"Incorrect API key provided: {key}"))
        rig.jpg_pub.publish(to_compressed_msg(photo()))
        rig.say("hi")
        assert rig.wait(lambda: rig.finals())
        rig.node.publish_state()
        assert rig.wait(lambda: rig.states)
        assert fake.headers[0]["authorization"] == f"Bearer {key}"   # it was sent ...
        seen = [r.text for r in rig.replies] + [str(s) for s in rig.states]
        seen.append(rig.node.transcript.path.read_text())
        seen.append(capfd.readouterr().err)
        assert not any(key in s for s in seen)                    # ... and nowhere else
