"""The monitor page as a person sees it, in headless Chromium.

A scripted session of installed processes over a fake LLM, watched live; then the finished
session browsed from its folder.

Set VD_MONITOR_SCREENSHOT=docs/monitor.png to refresh the README's screenshot.
"""
from __future__ import annotations

import json
import os
import socket
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from browser import Browser, find_chromium
from fake_openai import FakeOpenAI, Reply
from installed.user_env import stop
from vision_dialogue.camera.demo_video import ensure_demo_video

SCRIPT = ["Hello! Can you see me?", "What am I wearing?", "And what is there now?"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ANSWERS = iter(["Hello! I like your orange suit.", "You wear an orange space suit.",
                "I still see you in your suit, smiling."])


def responder(request: dict) -> Reply:
    """Replies that differ per turn, with a model's pace (so the latency plot has a shape)."""
    last = json.dumps(request["messages"][-1])
    if request.get("max_tokens") == 1:        # the manager's start-up image check
        return "White."
    if "one short sentence" in last:          # the paper's frame summary request
        return Reply(text="A person in an orange suit waved at me.", delay=0.3)
    return Reply(text=next(ANSWERS, "Goodbye!"), delay=0.4, chunk_delay=0.05)


def wait_for_state(port: int, timeout: float = 60.0) -> dict | None:
    """The monitor's /api/state once it answers (the node takes a few seconds to start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=5) as r:
                return json.load(r)
        except OSError:
            time.sleep(0.3)
    return None


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed "
                    "(scripts/test.sh installs it with apt-get when it can)")
def test_monitor_page_shows_the_live_session_in_a_browser(readme_installed, tmp_path):
    """On the tree README command 1 builds.

    A symlink install: the page's script and style sheet are links into the source tree.
    """
    installed = readme_installed
    static = installed.site / "monitor" / "static"
    assert (static / "app.js").is_symlink(), f"{static} is not the README's symlink install"
    port = free_port()
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"items": [
        {"say": SCRIPT[0], "delay": 4.0}] + [
        {"say": s, "wait_for_reply": True, "delay": 2.0} for s in SCRIPT[1:]]}))
    transcripts = tmp_path / "transcripts"
    ros = ["--ros-args", "--log-level", "info"]
    procs = {}
    with FakeOpenAI(responder=responder) as fake:
        env = dict(installed.env, OPENAI_API_KEY="sk-test")
        procs["monitor"] = installed.popen(installed.exe("monitor") + ros + [
            "-p", f"port:={port}"], log=tmp_path / "monitor.log")
        procs["manager"] = installed.popen(installed.exe("manager_node") + ros + [
            "-p", "llm_backend:=openai", "-p", f"base_url:={fake.base_url}",
            "-p", "model:=fake-vlm", "-p", "max_retries:=0", "-p", "n:=4", "-p", "m:=2",
            "-p", f"transcript_dir:={transcripts}"], env=env, log=tmp_path / "manager.log")
        procs["camera"] = installed.popen(installed.exe("camera_node") + ros + [
            "-p", "source:=video", "-p", f"video_path:={ensure_demo_video()}",
            "-p", "frame_period:=1.0"], log=tmp_path / "camera.log")
        assert wait_for_state(port), (tmp_path / "monitor.log").read_text()
        with Browser() as page:
            page.open(f"http://127.0.0.1:{port}/")
            assert page.wait_for("document.querySelector('#connection').textContent === 'live'")
            procs["speech"] = installed.popen(installed.exe("speech_node") + ros + [
                "-p", "backend:=script", "-p", f"script_file:={script}",
                "-p", "exit_when_done:=true", "-p", "reply_timeout:=20.0"],
                log=tmp_path / "speech.log")
            try:
                # pushed while the page stays open: no reload
                done = (f"document.querySelectorAll('#timeline li.robot').length >= "
                        f"{len(SCRIPT)}")
                assert page.wait_for(done, 90), page.eval("document.body.innerText")
                assert procs["speech"].wait(30) == 0
                time.sleep(1.5)                     # the last frames and summaries
                seen = page.eval("""(() => ({
                  users: [...document.querySelectorAll('#timeline li.user .text')]
                         .map(e => e.textContent),
                  robots: [...document.querySelectorAll('#timeline li.robot .text')]
                          .map(e => e.textContent),
                  thumbs: [...document.querySelectorAll('#timeline li.frame img.thumb')]
                          .filter(i => i.complete && i.naturalWidth > 0).length,
                  summarised: document.querySelectorAll('#timeline li.summary img.thumb')
                              .length,
                  observations: document.querySelectorAll('#timeline li.frame').length,
                  plot: (document.querySelector('#prompt-plot polyline') || {})
                        .getAttribute?.('points') || '',
                  latency: document.querySelectorAll('#latency-plot polyline').length,
                  llm: document.querySelector('#health-llm').className,
                  camera: document.querySelector('#health-camera').className,
                  speech: document.querySelector('#speech').textContent,
                  meta: document.querySelector('#timeline li.robot .meta').textContent,
                }))()""")
                shot = page.screenshot(tmp_path / "monitor.png")
                if os.environ.get("VD_MONITOR_SCREENSHOT"):
                    Path(os.environ["VD_MONITOR_SCREENSHOT"]).write_bytes(shot.read_bytes())
                assert not page.console, page.console
                styled = page.eval("getComputedStyle(document.body).backgroundColor")
            finally:
                codes = {name: stop(p) for name, p in procs.items()}
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in procs}
    assert all(c == 0 for c in codes.values()), (codes, logs["monitor"][-2000:])
    assert "Traceback" not in "".join(logs.values())
    assert seen["users"] == SCRIPT, seen
    assert len(seen["robots"]) == len(SCRIPT) and "orange suit" in seen["robots"][0], seen
    assert seen["thumbs"] >= 4 and seen["summarised"] >= 2, seen
    assert len(seen["plot"].split()) == len(SCRIPT), seen        # one point per turn
    assert seen["latency"] == 2 and "first sentence" in seen["meta"], seen
    assert "ok" in seen["llm"] and "ok" in seen["camera"], seen
    assert seen["speech"].startswith("speech: "), seen
    assert styled == "rgb(246, 246, 244)", styled     # style.css applied (body background)
    assert (tmp_path / "monitor.png").stat().st_size > 20_000

    # the finished session, browsed from its folder by a new monitor process
    run_dir = next(transcripts.iterdir())
    port2 = free_port()
    past = installed.popen(installed.exe("monitor") + ros + [
        "-p", f"port:={port2}", "-p", f"transcript:={run_dir}"], log=tmp_path / "past.log")
    try:
        snap = wait_for_state(port2)
    finally:
        assert stop(past) == 0, (tmp_path / "past.log").read_text()
    assert snap and snap["source"] == str(run_dir)
    assert [i["text"] for i in snap["items"] if i["kind"] == "user"] == SCRIPT
