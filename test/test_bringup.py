"""bringup.

The setup table, every setup YAML against the real nodes' declared parameters, and
starting/stopping setups in one process and as processes.
"""
from __future__ import annotations

import configparser
import importlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data

from conftest import DEMO_DIR, DOMAIN_ID, REPO, close_context
from installed.user_env import what_failed
from vision_dialogue.cli import bringup
from vision_dialogue.ros import setups
from vision_dialogue.cli.bringup import BringupError
from vision_dialogue.ros.setups import NODES, SCRIPT_WAITS_FOR_MANAGER_S, SETUPS

CONFIG = REPO / "config"
STANDALONE = CONFIG / "standalone_setup.yaml"


def console_scripts() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = cfg["options.entry_points"]["console_scripts"].strip().splitlines()
    return {k.strip(): v.strip() for k, v in (ln.split("=", 1) for ln in lines)}


def node_class(key: str):
    spec = NODES[key]
    return getattr(importlib.import_module(spec.module), spec.class_name)


def fakes_for(key: str) -> dict:
    """Process-boundary fakes for building a node in a test.

    The manager gets an in-process chat backend (no model load, no network); the speech node gets
    empty in/out streams.
    """
    if key == "manager":
        from fake_chat_backend import FakeChatBackend
        return {"backend": FakeChatBackend(supports_images=False),
                "observer": lambda bgr: "a test observation"}
    if key == "speech":
        return {"input_stream": io.StringIO(""), "output_stream": io.StringIO(),
                "on_done": lambda: None}
    if key == "people":
        return {"face_embedder": Unprinted(), "voice_embedder": Unprinted()}
    return {}


class Unprinted:
    """A printer a parameter test never uses: people_node starts no print process for it.

    The real ones load dlib's and resemblyzer's models in processes of their own: seconds per
    node alone, and most of this file's time beside a loaded suite's other tests.
    """

    def embed(self, *_args):
        raise AssertionError("a parameter test printed a face or a voice")


def overrides_for(key: str, tmp_path: Path) -> dict:
    """Parameters a test node takes in place of the YAML's: the people store in `tmp_path`.

    The demos' store is the user's ($XDG_DATA_HOME/vision_dialogue/people.db): a test does not
    open it.
    """
    return {"store_url": f"sqlite:///{tmp_path / 'people.db'}"} if key == "people" else {}


def yaml_node_params(path: Path, executable: str) -> dict:
    return setups.load_node_params(path, executable)


def child_env() -> dict:
    """Environment for subprocesses: source tree first (new modules before a rebuild)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["ROS_DOMAIN_ID"] = str(DOMAIN_ID)
    env.setdefault("VD_DEMO_DIR", DEMO_DIR)
    return env


# ---------------------------------------------------------------------------- the table
def test_setup_table_matches_files_and_entry_points():
    scripts = console_scripts()
    for spec in NODES.values():
        assert scripts.get(spec.executable) == f"{spec.module}:main", spec
    for name, setup in SETUPS.items():
        assert setup.name == name
        assert (CONFIG / setup.params_file).is_file(), setup.params_file
        assert (REPO / "launch" / setup.launch_file).is_file(), setup.launch_file
        assert setup.nodes and all(k in NODES for k in setup.nodes)
        for key, paths in setup.config_paths.items():
            assert key in setup.nodes
    for exe in ("bringup", "bag_record", "bag_play"):
        assert exe in scripts


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_setup_yaml_sections_name_only_setup_nodes(setup):
    data = yaml.safe_load((CONFIG / SETUPS[setup].params_file).read_text())
    allowed = {f"/**/{NODES[k].executable}" for k in SETUPS[setup].nodes}
    assert set(data) <= allowed, f"{setup}: sections {set(data) - allowed} start no node"
    for section in data.values():
        assert set(section) == {"ros__parameters"}


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_yaml_parses_through_params_file(setup):
    """rcl parses the YAML (a malformed file raises here, as it would at node startup)."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=DOMAIN_ID,
               args=["x", "--ros-args", "--params-file", str(CONFIG / SETUPS[setup].params_file)])
    try:
        node = Node("probe", context=ctx)
        node.destroy_node()
    finally:
        close_context(ctx)


def _params_case(setup_name: str, key: str):
    setup = SETUPS[setup_name]
    return setup, CONFIG / setup.params_file, NODES[key].executable


CASES = [(s, k) for s in sorted(SETUPS) for k in SETUPS[s].nodes]


@pytest.mark.parametrize("setup_name,key", CASES)
def test_every_yaml_parameter_is_declared_by_its_node(setup_name, key, tmp_path, monkeypatch):
    """Every parameter in a setup YAML is declared by its node and takes the YAML's value.

    Loads the YAML with --params-file and builds the real node class in that context (an
    undeclared parameter would be silently ignored by ROS).
    """
    cls = node_class(key)
    setup, path, exe = _params_case(setup_name, key)
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    given = yaml_node_params(path, exe)
    extra = {**setups.node_overrides(setup, path, (key,)).get(key, {}),
             **overrides_for(key, tmp_path)}
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=DOMAIN_ID,
               args=["x", "--ros-args", "--params-file", str(path)])
    node = None
    try:
        node = cls(context=ctx, namespace="/t27",
                   parameter_overrides=[Parameter(k, value=v) for k, v in extra.items()],
                   **fakes_for(key))
        declared = set(node._parameters)
        missing = set(given) - declared
        assert not missing, f"{setup.params_file} sets {sorted(missing)} that {exe} never declares"
        for name, value in given.items():
            if name in extra:
                assert node.get_parameter(name).value == extra[name]
            else:
                got = node.get_parameter(name).value
                got = list(got) if isinstance(got, (list, tuple)) or \
                    type(got).__name__ == "array" else got
                assert got == value, f"{exe}.{name}: YAML {value!r}, node has {got!r}"
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        close_context(ctx)


# ---------------------------------------------------------------------------- CLI input
def test_bad_cli_input_gives_clear_errors(tmp_path, capsys):
    with pytest.raises(BringupError, match="unknown setup 'nope'"):
        bringup.resolve("nope", None, None)
    with pytest.raises(BringupError, match="params file not found"):
        bringup.resolve("demo", str(tmp_path / "none.yaml"), None)
    with pytest.raises(BringupError, match=r"--nodes: \['vfm'\] not in setup demo"):
        bringup.resolve("demo", None, "camera,vfm")
    with pytest.raises(BringupError, match="not a valid ROS namespace"):
        bringup.resolve("demo", None, None, "1robot")
    setup, path, keys = bringup.resolve("demo", None, " manager , camera")
    assert keys == ("manager", "camera") and path == (CONFIG / "demo_setup.yaml").resolve()
    assert bringup.main(["bringup", "demo", "--params-file", str(tmp_path / "x.yaml")]) == 2
    assert "params file not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bringup.main(["bringup", "nosuchsetup"])
    # an invalid parameter in the YAML: one line naming it, exit code 2, nothing left running
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"/**/camera_node": {"ros__parameters": {
        "source": "video", "video_path": "/x.avi", "frame_period": -1.0}}}))
    assert bringup.main(["bringup", "demo", "--nodes", "camera", "--params-file", str(bad)]) == 2
    assert "invalid parameter: frame_period" in capsys.readouterr().err


def test_demo_overrides_and_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    setup, path, keys = bringup.resolve("demo", None, None)
    over = setups.node_overrides(setup, path, keys)
    video = Path(over["camera"]["video_path"])
    assert video.is_file() and video.parent == Path(DEMO_DIR)
    assert over["speech"]["script_file"] == str(CONFIG / "demo_script.yaml")
    # a YAML that sets the paths itself is left alone
    own = tmp_path / "own.yaml"
    own.write_text(yaml.safe_dump({"/**/camera_node": {"ros__parameters": {
        "source": "video", "video_path": "/data/v.avi"}}}))
    assert "camera" not in setups.node_overrides(setup, own, ("camera",))
    assert bringup.main(["bringup", "demo", "--dry-run", "--namespace", "r1",
                         "--nodes", "camera", "--log-level", "debug"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("camera: ")
    for piece in ("--ros-args", f"--params-file {path}", "--log-level debug",
                  "-r __ns:=/r1", f"-p video_path:={video}"):
        assert piece in out[0]


def test_node_parameters_video_script_and_camera_from_the_command_line(
        tmp_path, capsys, monkeypatch):
    """-p node.param:=value, --video, --script, --camera reach the nodes' command lines."""
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    clip, script = tmp_path / "clip.avi", tmp_path / "talk.yaml"
    clip.write_bytes(b"x")
    script.write_text("items: [{say: hi}]\n")
    assert bringup.main(["bringup", "standalone", "--dry-run", "--video", str(clip),
                         "--script", str(script), "-p", "manager.n:=6",
                         "-p", "manager_node.persona_file:=/p.yaml",
                         "-p", "camera.frame_period:=2.5", "--no-monitor"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
    assert set(lines) == {"manager", "camera", "speech", "detector"}
    assert "-p n:=6" in lines["manager"] and "-p persona_file:=/p.yaml" in lines["manager"]
    assert "-p source:=video" in lines["camera"] and f"-p video_path:={clip}" in lines["camera"]
    assert "-p frame_period:=2.5" in lines["camera"]
    assert "-p backend:=script" in lines["speech"] and f"script_file:={script}" in lines["speech"]
    # a script's first line waits for the manager (lost before), unless the user's file says
    assert f"-p wait_for_subscriber:={SCRIPT_WAITS_FOR_MANAGER_S}" in lines["speech"]
    mine = tmp_path / "mine.yaml"
    mine.write_text(STANDALONE.read_text() + "\n/**/speech_node:\n  ros__parameters:\n"
                    "    wait_for_subscriber: 5.0\n")
    assert bringup.main(["bringup", "standalone", "--dry-run", "--script", str(script),
                         "--params-file", str(mine)]) == 0
    assert "wait_for_subscriber:=" not in capsys.readouterr().out
    assert bringup.main(["bringup", "standalone", "--dry-run", "--camera", "2"]) == 0
    out = capsys.readouterr().out
    assert "-p source:=webcam" in out and "-p device:=2" in out and "monitor: " in out
    for argv, message in (
            (["-p", "manager.nn:=6"], "manager_node has no parameter 'nn'"),
            (["-p", "vfm.load:=x"], "no node 'vfm' in this bringup"),
            (["-p", "manager.n=6"], "expected node.parameter:=value"),
            (["--video", str(tmp_path / "none.avi")], "--video: no such file"),
            (["--video", str(clip), "--camera", "0"], "give one"),
            (["--nodes", "manager", "--script", str(script)], "need the speech node")):
        assert bringup.main(["bringup", "standalone", "--dry-run", *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_the_people_demos_video_waits_for_the_events_node_and_the_script(capsys, monkeypatch):
    """The video starts with the script and the events node; one left out is not waited for.

    (The speech node subscribes to the camera once its listeners are ready: its clock topic.)
    """
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    assert bringup.main(["bringup", "people_demo", "--dry-run", "--no-monitor"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
    assert "-p wait_for_listeners:=['events_node', 'speech_node']" in lines["camera"]
    assert bringup.main(["bringup", "people_demo", "--dry-run", "--no-monitor",
                         "--no-events"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
    assert "-p wait_for_listeners:=['speech_node']" in lines["camera"]


def test_the_demos_video_waits_for_the_manager_and_the_detector_that_run(capsys, monkeypatch):
    """Its first frame went out before the manager subscribed (5 s lost); none left: [""]."""
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    for argv, waits in ((["demo"], "['manager_node', 'detector_node']"),
                        (["demo", "--no-detector"], "['manager_node']"),
                        (["demo", "--nodes", "camera"], "['']")):
        assert bringup.main(["bringup", *argv, "--dry-run", "--no-monitor"]) == 0
        lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
        assert f"-p wait_for_listeners:={waits}" in lines["camera"], lines["camera"]


def test_monitor_on_by_setup_and_by_flag(capsys):
    assert bringup.resolve("demo", None, None)[2] == ("camera", "speech", "manager", "monitor",
                                                      "detector")
    assert "monitor" not in bringup.resolve("furhat", None, None)[2]
    assert "monitor" in bringup.resolve("furhat", None, None, monitor=True)[2]
    assert "monitor" not in bringup.resolve("demo", None, None, monitor=False)[2]
    with pytest.raises(BringupError, match="setup vfm has no monitor"):
        bringup.resolve("vfm", None, None, monitor=True)
    # the object detector: on in every setup (on the robot for people_node's face crops)
    assert "detector" not in bringup.resolve("demo", None, None, detector=False)[2]
    assert "detector" in bringup.resolve("furhat", None, None)[2]
    assert "detector" not in bringup.resolve("furhat", None, None, detector=False)[2]
    # people_node: on where people are met again (the people demo, the robot)
    for setup, on in [("people_demo", True), ("voice_demo", False), ("furhat", True),
                      ("demo", False), ("standalone", False)]:
        assert ("people" in bringup.resolve(setup, None, None)[2]) is on, setup
        assert "people" not in bringup.resolve(setup, None, None, people=False)[2]
    assert "people" in bringup.resolve("demo", None, None, people=True)[2]


# ---------------------------------------------------------------------------- running
def _frame_sink(ctx, topic):
    from sensor_msgs.msg import Image
    got = []
    node = Node("frame_sink", context=ctx)
    node.create_subscription(Image, topic, got.append, qos_profile_sensor_data)
    return node, got


def test_in_process_start_and_stop(tmp_path, monkeypatch, spin):
    """The demo camera runs in-process from the setup YAML.

    Frames from its real video source arrive in the namespace, and stop()/shutdown() leave no
    node behind.
    """
    node_class("camera")
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    params = tmp_path / "fast.yaml"
    data = yaml.safe_load((CONFIG / "demo_setup.yaml").read_text())
    data["/**/camera_node"]["ros__parameters"]["frame_period"] = 0.2
    data["/**/camera_node"]["ros__parameters"].pop("wait_for_listeners")   # the camera alone
    params.write_text(yaml.safe_dump(data))
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=DOMAIN_ID,
               args=bringup.ros_args(params, "", "info"))
    try:
        setup, path, keys = bringup.resolve("demo", str(params), "camera")
        b = bringup.InProcessBringup(setup, path, keys, namespace="t27", context=ctx)
        b.start()
        sink, got = _frame_sink(ctx, "/t27/camera/image_raw")
        b.executor.add_node(sink)
        assert b.nodes["camera"].get_fully_qualified_name() == "/t27/camera_node"
        assert b.nodes["camera"].get_parameter("frame_period").value == 0.2
        assert spin(b.executor, lambda: len(got) >= 2, 10.0), "no frames from the demo video"
        assert (got[0].width, got[0].height) == (640, 480)
        # a node's `finished` future ends the run (how the demo ends with the script)
        from rclpy.task import Future
        fin = Future()
        b.nodes["camera"].finished = fin
        fin.add_done_callback(lambda _f: b.stop("camera finished"))
        fin.set_result(True)
        assert b.spin(timeout_sec=5.0) == "camera finished"
        b.executor.remove_node(sink)
        sink.destroy_node()
        b.shutdown()
        assert b.nodes == {} and b.executor is None
    finally:
        close_context(ctx)


def _wait_for_frames(ctx, topic, n=1, timeout=30.0, proc=None):
    from rclpy.executors import SingleThreadedExecutor
    sink, got = _frame_sink(ctx, topic)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(sink)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < n:
        ex.spin_once(timeout_sec=0.1)
        if proc is not None and proc.poll() is not None:
            break
    ex.remove_node(sink)
    sink.destroy_node()
    return got


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("mode,sig", [("processes", signal.SIGINT),
                                      ("in-process", signal.SIGTERM)])
def test_cli_runs_and_stops_cleanly(ros_context, tmp_path, mode, sig):
    """`bringup demo --nodes camera [--processes]` publishes frames and stops cleanly.

    Ctrl-C (SIGINT) / SIGTERM stop it with exit code 0 and no process left behind.
    """
    node_class("camera")
    params = tmp_path / "fast.yaml"
    data = yaml.safe_load((CONFIG / "demo_setup.yaml").read_text())
    cam = data["/**/camera_node"]["ros__parameters"]
    cam["frame_period"] = 0.3
    # 320x240 raw frames fit Fast DDS's default shared-memory segment; 640x480 ones can be lost
    # between processes (docs/camera.md), and this test is about start/stop, not DDS
    cam["width"], cam["height"] = 320, 240
    params.write_text(yaml.safe_dump(data))
    env = child_env()
    env["VD_DEMO_DIR"] = DEMO_DIR
    ns = f"cli_{mode.replace('-', '_')}"
    cmd = [sys.executable, "-m", "vision_dialogue.cli.bringup", "demo", "--nodes", "camera",
           "--params-file", str(params), "--namespace", ns, "--log-level", "warn"]
    if mode == "processes":
        cmd.append("--processes")
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        got = _wait_for_frames(ros_context, f"/{ns}/camera/image_raw", proc=proc)
        said = proc.stdout.read() if proc.poll() is not None else ""
        assert got, f"no frames; bringup said:\n{said}"
        kids = _children(proc.pid)
        if mode == "processes":
            assert len(kids) == 1, kids
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, out
        assert "stopped" in out
        time.sleep(0.2)
        assert not [k for k in kids if _alive(k)], "a node process outlived bringup"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_process_group_stops_all_when_one_exits():
    """When one node process ends (the demo script's speech node), the others are stopped."""
    py = sys.executable
    group = bringup.ProcessBringup({
        "speech": [py, "-c", "import time; time.sleep(0.3)"],
        "manager": [py, "-c", "import signal, sys, time\n"
                    "signal.signal(signal.SIGINT, lambda *a: sys.exit(0))\n"
                    "time.sleep(60)"],
    }, grace=5.0)
    group.start()
    t0 = time.monotonic()
    reason = group.wait(timeout=20)
    assert reason == "speech exited with code 0"
    codes = group.shutdown()
    assert codes == {"speech": 0, "manager": 0}
    assert time.monotonic() - t0 < 10


def test_a_node_that_ignores_sigint_and_sigterm_leaves_its_native_stacks(tmp_path, capfd):
    """Before SIGKILL bringup prints where a stuck child is, natively (C frames say where).

    CI: the demo's manager hung in its lifecycle state machine's destroy, and its Python
    frames (faulthandler's) ended there.
    """
    ready = tmp_path / "ready"
    group = bringup.ProcessBringup({"stuck": [sys.executable, "-c", (
        "import pathlib, signal, time\n"
        "for s in (signal.SIGINT, signal.SIGTERM):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(120)")]}, grace=0.5)
    group.start()
    try:
        end = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < end, "the child never started"
            time.sleep(0.05)
        assert group.shutdown() == {"stuck": -signal.SIGKILL}
    finally:
        for p in group.procs.values():
            if p.poll() is None:
                p.kill()
    err = capfd.readouterr().err
    pid = group.procs["stuck"].pid
    assert f"[bringup] stuck (pid {pid}) still runs" in err, err
    assert "sleep" in err.split("native stacks:", 1)[1].lower(), err


@pytest.mark.parametrize("mode", ["in-process"])
def test_demo_runs_to_the_end_of_its_script(tmp_path, mode):
    """The whole demo runs to the end of its script with a fake OpenAI server as the LLM.

    Video camera + scripted speech + manager: every scripted line gets a streamed reply, the
    transcript is saved, and the end of the script stops bringup by itself with exit code 0.
    In one process here; `--processes` is test_installed_session's, from the install tree.
    """
    for key in ("camera", "speech", "manager"):
        node_class(key)
    from fake_openai import FakeOpenAI
    script = yaml.safe_load((CONFIG / "demo_script.yaml").read_text())
    lines = [item["say"] for item in script["items"]]
    env = child_env()
    env["VD_DEMO_DIR"] = DEMO_DIR
    env["OPENAI_API_KEY"] = "test-key"
    count = iter(range(1, 1000))

    def responder(req):    # a different reply each time (the robot never repeats itself)
        return f"Reply number {next(count)}, nice to talk."

    with FakeOpenAI(responder=responder) as fake:
        cmd = [sys.executable, "-m", "vision_dialogue.cli.bringup", "demo", "--llm", "openai",
               "--base-url", fake.base_url, "--model", "fake-vlm",
               "--namespace", f"demo_{mode[:2]}", "--log-level", "warn"]
        if mode == "processes":
            cmd.append("--processes")
        proc = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                              timeout=120)
        requests = fake.requests
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, what_failed(out)
    assert "speech finished" in out or "speech exited with code 0" in out, out[-3000:]
    for line in lines:
        assert f"you: {line}" in out, f"{line!r} was not said:\n{out[-3000:]}"
    assert out.count("robot: Reply number") >= len(lines), out[-3000:]
    replies = [r for r in requests if r.get("stream")]
    assert len(replies) >= len(lines)
    transcripts = list((tmp_path / "runs" / "transcripts").glob("*/transcript.jsonl"))
    assert len(transcripts) == 1
    text = transcripts[0].read_text()
    assert all(line in text for line in lines)


def test_managed_starts_every_lifecycle_node_unconfigured(tmp_path, monkeypatch, capsys):
    """--managed: managed:=true for each managed node (not the monitor); -p still wins."""
    monkeypatch.setenv("VD_DEMO_DIR", DEMO_DIR)
    assert bringup.main(["bringup", "demo", "--dry-run", "--managed",
                         "-p", "speech.managed:=false"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert {key: cmd.split("managed:=")[-1] if "managed:=" in cmd else None
            for key, cmd in lines.items()} == {
        "monitor": None, "manager": "true", "detector": "true", "camera": "true",
        "speech": "false"}
    assert bringup.main(["bringup", "demo", "--dry-run"]) == 0
    assert "managed:=" not in capsys.readouterr().out
