"""A dialogue session of separate processes from the install tree.

Started as a launch file starts them (installed executable, --ros-args, params), and as
`bringup demo --processes`.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from fake_openai import FakeOpenAI
from installed.user_env import around_traceback, stop, until, what_failed

COLOURS = [(0, 0, 255), (0, 255, 0), (255, 0, 0), (0, 255, 255)]


def count_images(request: dict) -> int:
    return sum(1 for m in request["messages"] if isinstance(m.get("content"), list)
               for part in m["content"] if part.get("type") == "image_url")


def seeing_responder(request: dict) -> str:
    """Replies that say how many camera views the prompt held (0: frames did not arrive)."""
    return f"I have {count_images(request)} views of you. Nice to meet you."


@pytest.fixture
def fake_llm():
    with FakeOpenAI() as fake:
        fake.responder = seeing_responder
        yield fake


def write_video(path: Path, frames: int = 20, fps: float = 10.0) -> Path:
    out = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (320, 240))
    for i in range(frames):
        out.write(np.full((240, 320, 3), COLOURS[i % len(COLOURS)], np.uint8))
    out.release()
    return path


def transcript_records(root: Path) -> list[dict]:
    files = sorted(root.glob("*/transcript.jsonl"))
    assert files, f"no transcript under {root}"
    return [json.loads(line) for line in files[-1].read_text().splitlines()]


def _has_frame(root: Path) -> bool:
    """Whether a transcript under `root` has a frame record yet."""
    return any('"type": "frame"' in f.read_text() for f in root.glob("*/transcript.jsonl"))


def test_camera_manager_speech_as_separate_processes(installed, fake_llm, tmp_path):
    """Raw frames only (no JPEG copy): they must cross processes with the default settings."""
    video = write_video(tmp_path / "clip.avi")
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"items": [
        {"say": "Hello robot, can you see me?", "delay": 3.0},
        {"say": "Thank you, goodbye!", "wait_for_reply": True, "delay": 1.0}]}))
    transcripts = tmp_path / "transcripts"
    env = dict(installed.env, OPENAI_API_KEY="sk-test")
    ros = ["--ros-args", "--log-level", "info"]
    manager = installed.popen(installed.exe("manager_node") + ros + [
        "-p", "llm_backend:=openai", "-p", f"base_url:={fake_llm.base_url}",
        "-p", "model:=fake-vlm", "-p", "max_retries:=0", "-p", "n:=6", "-p", "m:=3",
        "-p", f"transcript_dir:={transcripts}"], env=env, log=tmp_path / "manager.log")
    camera = installed.popen(installed.exe("camera_node") + ros + [
        "-p", "source:=video", "-p", f"video_path:={video}", "-p", "frame_period:=0.5",
        "-p", "publish_compressed:=false"], log=tmp_path / "camera.log")
    # the person speaks once a frame is in the manager's prompt (its transcript's frame
    # record): a fixed 3 s was too short for a loaded machine to start both processes
    speech = None
    try:
        assert until(lambda: _has_frame(transcripts), 90), \
            (tmp_path / "manager.log").read_text()[-2000:]
        speech = installed.popen(installed.exe("speech_node") + ros + [
            "-p", "backend:=script", "-p", f"script_file:={script}", "-p",
            "exit_when_done:=true", "-p", "reply_timeout:=20.0"], log=tmp_path / "speech.log")
        assert speech.wait(timeout=90) == 0, (tmp_path / "speech.log").read_text()[-3000:]
    finally:
        codes = {name: stop(p) for name, p in
                 (("speech", speech), ("camera", camera), ("manager", manager))
                 if p is not None}
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in ("speech", "camera", "manager")}
    assert codes["manager"] == 0 and codes["camera"] == 0, (codes, logs["manager"][-2000:])
    for name, text in logs.items():
        assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"
    spoken = re.findall(r"robot: (.*)", logs["speech"])
    assert len(spoken) == 2, logs["speech"]
    views = [int(n) for n in re.findall(r"I have (\d+) views", logs["speech"])]
    assert views and min(views) >= 1, f"no camera frame reached the manager: {spoken}"
    records = transcript_records(transcripts)
    kinds = [r["type"] for r in records]
    turns = [(r["type"], r.get("text")) for r in records if r["type"] in ("user", "reply")]
    assert kinds.count("user") == 2 and kinds.count("reply") == 2, \
        (turns, logs["speech"][-1500:], logs["manager"][-3000:])
    frames = [r for r in records if r["type"] == "frame"]
    assert len(frames) >= 4, kinds
    assert all((transcripts / next(transcripts.iterdir()).name / f["file"]).is_file()
               for f in frames)


def test_bringup_demo_as_processes_with_a_fake_llm(installed, fake_llm):
    """README's demo as separate processes, from a directory outside the checkout."""
    env = dict(installed.env, OPENAI_API_KEY="sk-test")
    t0 = time.monotonic()
    res = installed.run(installed.exe("bringup") + [
        "demo", "--processes", "--llm", "openai", "--base-url", fake_llm.base_url,
        "--model", "fake-vlm"], env=env, timeout=240)
    out = res.stdout + res.stderr
    assert res.returncode == 0, what_failed(out, 4000)
    assert "Traceback" not in out, around_traceback(out)
    script = yaml.safe_load((installed.prefix / "share/vision_dialogue/config/"
                             "demo_script.yaml").read_text())["items"]
    spoken = re.findall(r"robot: (.*)", out)
    # the opening remark (greet_first, on in the demo) when the person appears, before the
    # script's first line; then one reply per line
    assert len(spoken) == len(script) + 1, out[-4000:]
    assert out.index("robot: ") < out.index("you: "), out[-4000:]
    assert any(int(n) >= 1 for n in re.findall(r"I have (\d+) views", out)), spoken
    records = transcript_records(installed.home / "runs" / "transcripts")
    assert [r["text"] for r in records if r["type"] == "user"] == [i["say"] for i in script]
    print(f"bringup demo --processes: {time.monotonic() - t0:.1f} s")
