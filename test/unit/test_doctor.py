"""doctor: each check against real endpoints, files and sockets, and the command's exit code."""
import os
import socket
import subprocess
import sys

import pytest

from conftest import REPO
from fake_openai import FakeOpenAI
from vision_dialogue.cli import doctor
from vision_dialogue.cli.doctor import FAIL, OK, SKIP, WARN, Config


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_llm_endpoint_reachable_model_listed_and_images():
    with FakeOpenAI(models=["fake-vlm", "other"]) as fake:
        cfg = Config(llm_backend="openai", base_url=fake.base_url, model="fake-vlm")
        assert doctor.check_llm(cfg).result == OK
        cfg.images = True                       # one tiny request with an image
        row = doctor.check_llm(cfg)
        assert row.result == OK and "takes images" in row.detail
        assert any(isinstance(m.get("content"), list) for r in fake.requests
                   for m in r["messages"])
        cfg.model = "gpt-5"
        row = doctor.check_llm(cfg)
        assert row.result == FAIL and "does not serve model 'gpt-5'" in row.detail
        assert "fake-vlm" in row.detail and "-p model:=" in row.fix
    row = doctor.check_llm(Config(llm_backend="openai", model="m",
                                  base_url=f"http://127.0.0.1:{closed_port()}/v1"))
    assert row.result == FAIL and "unreachable" in row.detail and "start the server" in row.fix
    local = doctor.check_llm(Config())                 # the local model: its engine, no endpoint
    assert local.name == "local LLM engine" and local.result in (OK, doctor.WARN)


def test_dds_profile_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("VD_NO_DDS_PROFILE", raising=False)
    monkeypatch.delenv("RMW_IMPLEMENTATION", raising=False)
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds.xml"))
    row = doctor.check_dds(Config())
    assert row.result == OK and "64 MB" in row.detail
    monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE")
    row = doctor.check_dds(Config())
    assert row.result == WARN and "source install/setup.bash" in row.fix
    small = tmp_path / "small.xml"
    small.write_text((REPO / "config" / "fastdds.xml").read_text().replace("67108864", "524288"))
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", str(small))
    assert doctor.check_dds(Config()).result == WARN
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", str(tmp_path / "gone.xml"))
    assert doctor.check_dds(Config()).result == FAIL


def test_shared_memory_of_killed_processes_is_found_and_live_segments_are_not(
        monkeypatch, tmp_path):
    import fcntl

    from vision_dialogue.ros import dds
    live, dead = "fastdds_00000000000000aa", "fastdds_00000000000000bb"
    for name in (live, dead):
        (tmp_path / name).write_bytes(b"\0" * 4096)
        (tmp_path / f"{name}_el").write_bytes(b"")
    (tmp_path / "fastdds_port7411").write_bytes(b"")        # a port, not a segment
    with open(tmp_path / f"{live}_el", "ab") as held:        # as a running process holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        assert dds.zombie_segments(tmp_path) == [tmp_path / dead]
        monkeypatch.setattr(dds, "SHM_DIR", tmp_path)
        row = doctor.check_shared_memory(Config())
        assert row.result == WARN and row.detail.startswith("1 Fast DDS segment")
        assert row.fix.startswith("fastdds shm clean")
        (tmp_path / dead).unlink()
        assert doctor.check_shared_memory(Config()).result == OK
    assert dds.zombie_segments(tmp_path / "absent") == []


def test_furhat_reached_or_not(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(doctor, "FURHAT_PORTS", {"Remote API": server.getsockname()[1],
                                                     "camera feed": closed_port()})
        row = doctor.check_furhat(Config(furhat_host="127.0.0.1"))
        assert row.result == WARN and "Remote API" in row.detail and "camera feed" in row.detail
    monkeypatch.setattr(doctor, "FURHAT_PORTS", {"Remote API": closed_port()})
    row = doctor.check_furhat(Config(furhat_host="127.0.0.1"))
    assert row.result == FAIL and "nothing answers" in row.detail
    assert doctor.check_furhat(Config()).result == SKIP


def test_disk_and_camera(monkeypatch, tmp_path):
    assert doctor.check_disk(Config(transcript_dir=str(tmp_path / "a" / "b"))).result == OK
    monkeypatch.setattr(doctor, "FREE_DISK_FAIL", 1 << 62)
    row = doctor.check_disk(Config(transcript_dir=str(tmp_path)))
    assert row.result == FAIL and "GB free" in row.detail
    monkeypatch.setattr(doctor.glob, "glob", lambda pattern: [])
    assert doctor.check_camera(Config()).result == WARN               # the demo needs none
    assert doctor.check_camera(Config(camera_source="webcam")).result == FAIL
    assert doctor.check_camera(Config(camera_source="video")).result == SKIP


def test_setup_yaml_decides_what_is_checked(tmp_path):
    ns = doctor.argparse.Namespace(setup="furhat", params_file=None, base_url=None, model=None,
                                   furhat_host=None, images=False)
    cfg = doctor.config_from(ns)
    assert cfg.furhat_host == "127.0.0.1" and cfg.camera_source == "furhat"
    ns.setup = "demo"
    cfg = doctor.config_from(ns)
    assert cfg.llm_backend == "local" and cfg.model == "default:1.5b"
    ns.setup, ns.base_url, ns.model = None, "http://h:1/v1", "my-vlm"
    cfg = doctor.config_from(ns)
    assert (cfg.llm_backend, cfg.base_url, cfg.model) == ("openai", "http://h:1/v1", "my-vlm")


@pytest.mark.parametrize("model, code", [("fake-vlm", 0), ("nope", 1)])
def test_command_prints_a_table_and_exits_by_the_checks(model, code):
    """As a user runs it: a process, the table, exit 0 only when nothing failed."""
    with FakeOpenAI() as fake:
        res = subprocess.run([sys.executable, "-m", "vision_dialogue.cli.doctor",
                              "--base-url", fake.base_url, "--model", model],
                             capture_output=True, text=True, timeout=180,
                             env=dict(os.environ, OPENAI_API_KEY="sk-test"))
    assert res.returncode == code, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:2] == ["check", "result"] and len(lines) >= 10
    llm = next(line for line in lines if line.startswith("LLM endpoint"))
    assert (" ok " in llm) is (code == 0)
    if code:
        assert "fix: set model to one it serves" in res.stdout
        assert "failed: LLM endpoint" in lines[-1]
    assert "Traceback" not in res.stderr and "Feedback manager" not in res.stderr
    assert subprocess.run([sys.executable, "-m", "vision_dialogue.cli.doctor", "--setup", "x"],
                          capture_output=True).returncode == 2


def test_local_voice_models_and_microphone(monkeypatch):
    pytest.importorskip("faster_whisper")
    monkeypatch.setattr(doctor, "microphones", lambda: [])
    assert doctor.check_voice(Config()).result == OK                  # WAV input works
    no_mic = doctor.check_voice(Config(voice_in="mic"))
    assert no_mic.result == FAIL and "--list-devices" in no_mic.fix
    monkeypatch.setattr(doctor, "microphones", lambda: ["USB Mic"])
    assert "USB Mic" in doctor.check_voice(Config(voice_in="mic")).detail

    def no_portaudio():
        raise OSError("PortAudio library not found")
    monkeypatch.setattr(doctor, "microphones", no_portaudio)
    r = doctor.check_voice(Config(voice_in="mic"))
    assert r.result == FAIL and "libportaudio2" in r.fix
    monkeypatch.setattr(doctor, "VOICE_MODULES", {"no_such_module_xyz": "Whisper tiny.en"})
    r = doctor.check_voice(Config(voice_in="file"))
    assert r.result == FAIL and "Whisper tiny.en" in r.detail and "voice.txt" in r.fix
    ns = doctor.argparse.Namespace(setup="voice_demo", params_file=None, base_url=None,
                                   model=None, furhat_host=None, images=False)
    assert doctor.config_from(ns).voice_in == "file"      # its audio_in is filled in at start
    ns.setup = "demo"
    assert doctor.config_from(ns).voice_in == ""


def test_local_engine_check_says_which_engine_runs(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    for installed, backend, result in [(True, "local", doctor.OK), (False, "local", doctor.WARN),
                                       (False, "llamacpp", doctor.FAIL),
                                       (False, "transformers", doctor.OK)]:
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, ok=installed: (
            real(name, *a) if name != "llama_cpp" or ok else None))
        if installed and real("llama_cpp") is None:
            continue                      # the library itself is not here to report
        check = doctor.check_llm(doctor.Config(llm_backend=backend))
        assert (check.name, check.result) == ("local LLM engine", result), check
        assert ("llama.cpp" in check.detail) is installed
        assert ("llamacpp" in check.fix) is (result != doctor.OK)
