"""The local voice as a user runs it: installed executables, separate processes.

`bringup voice_demo --processes` with a fake LLM (the demo script spoken into the microphone
path, the robot's sentences written as WAV files), and a speech node without a microphone.
"""
from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from conftest import DEMO_DIR
from fake_openai import FakeOpenAI
from installed.user_env import around_traceback, stop, what_failed
from voice_samples import word_error_rate

pytest.importorskip("faster_whisper")
pytest.importorskip("piper")


# the limit counts the wait for another real-time test (cores_for_real_time)
@pytest.mark.timeout(600)
def test_bringup_voice_demo_as_processes(installed, tmp_path, cores_for_real_time):
    count = iter(range(1, 1000))
    with FakeOpenAI(responder=lambda req: f"Reply number {next(count)}, nice to talk.") as fake:
        env = dict(installed.env, OPENAI_API_KEY="sk-test", VD_DEMO_DIR=DEMO_DIR)
        res = installed.run(installed.exe("bringup") + [
            "voice_demo", "--processes", "--llm", "openai", "--base-url", fake.base_url,
            "--model", "fake-vlm", "--no-monitor"], env=env, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, what_failed(out, 4000)
    assert "Traceback" not in out, around_traceback(out)
    config = installed.prefix / "share" / "vision_dialogue" / "config"
    script = [i["say"] for i in
              yaml.safe_load((config / "demo_script.yaml").read_text())["items"]]
    heard = re.findall(r"you: (.*)", out)
    assert len(heard) == len(script), out[-4000:]
    assert word_error_rate(script, heard) <= 0.2, heard
    voice = installed.home / "runs" / "voice"
    sentences = [json.loads(x) for x in (voice / "sentences.jsonl").read_text().splitlines()]
    assert sum(s["text"].startswith("Reply number") for s in sentences) >= len(script)
    assert all((voice / s["file"]).stat().st_size > 1000 for s in sentences)
    assert sorted(re.findall(r"robot: (Reply number \d+)", out)) == \
        sorted({m for m in re.findall(r"robot: (Reply number \d+)", out)})  # none said twice


def test_speech_node_without_a_microphone_keeps_running(installed, tmp_path):
    listing = installed.run(installed.exe("speech_node") + ["--list-devices"])
    assert listing.returncode in (0, 1) and "Traceback" not in listing.stderr
    log = tmp_path / "speech.log"
    proc = installed.popen(installed.exe("speech_node") + [
        "--ros-args", "-p", "backend:=local", "-p", "audio_in:=mic",
        "-p", "audio_device:=no such microphone", "-p", "wait_for_subscriber:=0.0",
        "-p", "backoff_max:=0.5"], log=log)
    try:
        # the event, with a ceiling for a loaded machine (the node may take long to start)
        deadline = time.monotonic() + 180
        while "audio input unavailable" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        # then a few retry periods (backoff_max 0.5 s): still running, the error not repeated
        time.sleep(3.0)
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        code = stop(proc)
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert text.count("audio input unavailable") == 1, text[-3000:]
    assert "Traceback" not in text
