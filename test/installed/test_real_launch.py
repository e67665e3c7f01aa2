"""Every launch file under the real, upstream `ros2 launch` (../shared/tools/ros2-launch).

The installed tree (a clean colcon build) is launched as a user on a robot does: argument
listing, bad arguments, two setups in two namespaces at once playing given files with a
layered params file, the end of the script ending the launch, and Ctrl-C / SIGTERM ending
every node quietly. The manager talks to the fake OpenAI server (the real llama.cpp server:
test_llama_server.py).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from fake_openai import FakeOpenAI
import real_launch
from pids import alive
from installed.user_env import REPO, wait_for_log
from vision_dialogue.camera.demo_video import ensure_demo_video
from vision_dialogue.ros.setups import NODES, SETUPS

LAUNCH_FILES = sorted(p.name for p in (REPO / "launch").glob("*.launch.py"))
CLEAN = re.compile(r"process has finished cleanly")
NOISE = ("Traceback", "KeyboardInterrupt", "process has died", "exit code -")

pytestmark = pytest.mark.skipif(not real_launch.available(), reason=real_launch.MISSING)


@pytest.fixture(scope="session")
def ros2(installed) -> str:
    """`ros2` of the upstream launch tool, installed once (idempotent, cached by its stamp)."""
    return str(real_launch.install(installed.env) / "ros2")


def _as_a_terminal() -> None:
    """Leave SIGINT and SIGQUIT at their defaults, as a terminal does.

    A test run started in the background of a non-interactive shell inherits SIGINT and
    SIGQUIT ignored, and `ros2 launch` would then never hear the Ctrl-C the test sends.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def launch(installed, ros2, *args, log: Path, env=None) -> subprocess.Popen:
    """`ros2 launch vision_dialogue ...` in its own process group, as a terminal starts it."""
    return subprocess.Popen([ros2, "launch", "vision_dialogue", *args], cwd=installed.home,
                            env=env or installed.env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True, text=True,
                            preexec_fn=_as_a_terminal)


def ended(proc: subprocess.Popen, timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def show_args(installed, ros2, name: str) -> set[str]:
    out = subprocess.run([ros2, "launch", "vision_dialogue", name, "--show-args"],
                         cwd=installed.home, env=installed.env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return set(re.findall(r"^    '(\w+)':", out.stdout, re.M))


@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_each_launch_file_declares_the_arguments_its_setup_uses(installed, ros2, name):
    declared = show_args(installed, ros2, name)
    assert {"namespace", "params_file", "use_sim_time", "log_level", "use_respawn"} <= declared
    setup = SETUPS.get(name.removesuffix(".launch.py"))
    if setup is None:          # bringup.launch.py: any setup
        assert declared >= {"setup", "video_path", "script_file", "image_topic"} | {
            f"use_{k}" for k in NODES}
        return
    assert "setup" not in declared
    assert {a for a in declared if a.startswith("use_") and a != "use_sim_time"
            and a != "use_respawn"} == {f"use_{k}" for k in setup.nodes}
    assert ("video_path" in declared) == ("camera" in setup.nodes)
    assert ("script_file" in declared) == ("speech" in setup.nodes)
    assert ("image_topic" in declared) == ("camera" in setup.nodes)
    assert ("stream_topic" in declared) == ("events" in setup.nodes)


@pytest.mark.parametrize("args, named", [
    (["bringup.launch.py", "setup:=nonsense"], "setup:=nonsense"),
    (["demo.launch.py", "params_file:=/nonexistent.yaml"], "/nonexistent.yaml"),
    (["standalone.launch.py", "video_path:=/nowhere/v.mp4"], "/nowhere/v.mp4"),
])
def test_a_bad_argument_fails_with_one_line_naming_it(installed, ros2, tmp_path, args, named):
    log = tmp_path / "launch.log"
    code = ended(launch(installed, ros2, *args, log=log), 120)
    text = log.read_text()
    errors = [ln for ln in text.splitlines() if "[ERROR]" in ln]
    assert code != 0 and len(errors) == 1 and named in errors[0], text
    assert "Traceback" not in text and "process started" not in text, text


def user_files(tmp_path: Path, fake: FakeOpenAI, script: list[dict]) -> tuple[Path, Path]:
    """A params file with one node's overrides (the fake LLM, n=6) and a script file."""
    params = tmp_path / "mine.yaml"
    params.write_text(yaml.safe_dump({"/**/manager_node": {"ros__parameters": {
        "llm_backend": "openai", "base_url": fake.base_url, "model": "fake-vlm",
        "max_retries": 0, "n": 6}}}))
    script_file = tmp_path / "script.yaml"
    script_file.write_text(yaml.safe_dump({"items": script}))
    return params, script_file


def test_two_namespaced_setups_play_the_given_files_and_end_with_their_script(
        installed, ros2, tmp_path):
    """Two standalone setups at once, each playing the given video and script.

    standalone (webcam + terminal by its YAML) given video_path and script_file plays them
    (no source:=/backend:= needed), layers the user's params file over the setup's (n from
    it; m, exit_when_done and the rest stay the setup's), serves two monitor pages, and ends
    by itself when the script is over, as `bringup` does.
    """
    env = dict(installed.env, OPENAI_API_KEY="sk-test")
    pages_checked = threading.Event()

    def reply(request: dict) -> str:
        """The first line is answered once both pages were read: the sessions run till then.

        Neither reply claims to see: the lines may come before the manager's first frame (the
        camera sends one every 5 s), and a claim to see without one is said as a blind line.
        """
        prompt = str(request["messages"])
        if prompt.rfind("What do you see?") > prompt.rfind("Hello there!"):
            return "Let me think about that."
        pages_checked.wait(180)
        return "Hello, nice to meet you."
    with FakeOpenAI(responder=reply) as fake:
        params, script = user_files(tmp_path, fake, [
            {"say": "Hello there!", "wait_for_reply": True},
            {"say": "What do you see?", "wait_for_reply": True}])
        procs, logs = {}, {}
        for ns in ("a", "b"):
            logs[ns] = tmp_path / f"{ns}.log"
            procs[ns] = launch(installed, ros2, "standalone.launch.py", f"namespace:={ns}",
                               f"video_path:={ensure_demo_video()}", f"script_file:={script}",
                               f"params_file:={params}", log=logs[ns], env=env)
        try:
            urls = {ns: wait_for_log(logs[ns], r"monitor: (http://\S+/)", procs[ns])[0]
                    for ns in procs}
            assert len(set(urls.values())) == 2, urls
            for ns, url in urls.items():      # both pages answer, each with its own session
                with urllib.request.urlopen(url + "api/state", timeout=10) as r:
                    assert r.status == 200 and "items" in json.load(r)
            pages_checked.set()
            codes = {ns: ended(p, 180) for ns, p in procs.items()}
        finally:
            pages_checked.set()
            for p in procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGINT)
                    ended(p, 30)
    for ns, log in logs.items():
        text = log.read_text()
        assert codes[ns] == 0, text
        assert f"camera source: video {ensure_demo_video()}" in text, text
        assert f"on /{ns}/camera/image_raw" in text, text
        assert "speech backend 'script' started" in text, text
        assert "starting anyway" not in text, text     # its first line waited for the manager
        layered = "backend=openai (OpenAIChatBackend) model='fake-vlm' n=6 m=3"
        assert layered in text, text
        assert "robot: Hello, nice to meet you." in text, text      # the fake answered both
        assert "robot: Let me think about that." in text, text
        assert "speech_node finished" in text or "process has finished cleanly" in text
        assert not any(n in text for n in NOISE), text


@pytest.mark.parametrize("who, sig", [("group", signal.SIGINT), ("launch", signal.SIGINT),
                                      ("launch", signal.SIGTERM)])
def test_ctrl_c_and_sigterm_end_every_node_quietly(installed, ros2, tmp_path, who, sig):
    """Ctrl-C or SIGTERM: every node ends within seconds, cleanly, transcript saved.

    Ctrl-C at the terminal is SIGINT to the whole process group: every node gets it twice,
    once from the terminal, once from launch. A signal to `ros2 launch` alone is the other
    case. Upstream launch exits at once on SIGTERM and leaves its nodes to themselves ("using
    SIGTERM can result in orphaned processes"): our nodes then end on their own (they ask for
    SIGTERM when their parent dies).
    """
    env = dict(installed.env, OPENAI_API_KEY="sk-test", ROS_LOG_DIR=str(tmp_path / "roslog"))
    with FakeOpenAI(default_reply="Nice to meet you.") as fake:
        params, script = user_files(tmp_path, fake, [
            {"say": "Hello, robot!", "wait_for_reply": True}, {"say": "Bye.", "delay": 600}])
        log = tmp_path / "launch.log"
        proc = launch(installed, ros2, "demo.launch.py", f"script_file:={script}",
                      f"params_file:={params}", "use_monitor:=false", log=log, env=env)
        wait_for_log(log, r"robot: Nice to meet you\.", proc)
        pids = [int(p) for p in re.findall(r"process started with pid \[(\d+)\]",
                                           log.read_text())]
        assert len(pids) == 4, log.read_text()          # manager, detector, camera, speech
        t0 = time.monotonic()
        if who == "group":
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        try:
            code = ended(proc, 30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"ros2 launch still ran 30 s after {sig.name} to {who}; nodes "
                                 f"alive: {[p for p in pids if alive(p)]}:\n"
                                 f"{log.read_text()[-6000:]}") from None
        try:
            while any(alive(p) for p in pids) and time.monotonic() - t0 < 30:
                time.sleep(0.1)
            took = time.monotonic() - t0
            stuck = [p for p in pids if alive(p)]
        finally:     # none left to latch its states into the later tests of this domain
            for p in pids:
                if alive(p):
                    os.kill(p, signal.SIGKILL)
    text = log.read_text()
    stacks = "".join(f.read_text() for f in (tmp_path / "roslog").glob("stop-stacks-*"))
    assert not stuck and took < 15, (took, stuck, stacks, text[-6000:])
    transcript = max((installed.home / "runs" / "transcripts").glob("*/transcript.jsonl"),
                     key=lambda f: f.stat().st_mtime)
    assert "Nice to meet you." in transcript.read_text()       # flushed at the end
    if sig == signal.SIGTERM:
        return      # launch is gone at once; the nodes' output went with it
    assert code == 0, text
    assert len(CLEAN.findall(text)) == 4, text
    assert not any(n in text for n in NOISE), text
