"""Nodes as separate processes, as a robot runs them (tests only).

`Proc` collects a process's stdout lines (and stderr, the ROS log); `manager_process` and
`speech_process` start the package's nodes with default names against the fake OpenAI server;
`process_env(domain)` gives them a ROS domain of their own, so that no node another test left
in the pytest process can take their goals or lines.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from vision_dialogue.core.transcript import read_transcript

REPO = Path(__file__).resolve().parents[1]


def process_env(domain: int, **extra) -> dict:
    """The environment of a test's processes: its ROS domain, the checkout importable first."""
    env = dict(os.environ, **extra)
    env["ROS_DOMAIN_ID"] = str(domain)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


class Proc:
    """A process whose stdout lines are collected; `expect(text)` waits for one."""

    def __init__(self, args, cwd, stdin=False, on_line=None, env=None):
        self.proc = subprocess.Popen(args, env=env or dict(os.environ), cwd=cwd, text=True,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        self.err: list[str] = []
        self.on_line = on_line
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.seen.append(line)
            self.lines.put(line)
            if self.on_line is not None:
                self.on_line(line)

    def events(self, timeout):
        """The JSON lines (skill_client.py) until "done" or "failed"."""
        out, end = [], time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                e = json.loads(self.lines.get(timeout=0.1))
            except (queue.Empty, json.JSONDecodeError):
                continue
            out.append(e)
            if e["event"] in ("done", "failed"):
                break
        return out

    def wait_err(self, text, timeout=60.0):
        """Until a log line (stderr) holds `text`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            if any(text in line for line in list(self.err)):
                return True
            time.sleep(0.05)
        return False

    def say(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def expect(self, text, timeout=60.0, after=0):
        """Wait until a stdout line (from line `after` on) holds `text`.

        Returns the line; None at the timeout or when the process ends.
        """
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in list(self.seen)[after:]:
                if text in line:
                    return line
            if self.proc.poll() is not None:
                return None
            time.sleep(0.05)
        return None


def manager_process(fake, tmp_path, *params, env) -> Proc:
    """The manager on the fake OpenAI server (`params`: more `name:=value` parameters).

    `fake` None: on the embedded default model (llama.cpp in its process, greedy).
    """
    llm = ["-p", "llm_backend:=llamacpp", "-p", "model:=default", "-p", "temperature:=0.0"] \
        if fake is None else ["-p", f"base_url:={fake.base_url}", "-p", "model:=fake",
                              "-p", "probe_images:=false"]
    args = [sys.executable, "-m", "vision_dialogue.manager_node", "--ros-args", *llm,
            "-p", f"transcript_dir:={tmp_path / 'tr'}", "-p", "max_retries:=0"]
    for p in params:
        args += ["-p", p]
    return Proc(args, tmp_path, env=env)


def speech_process(tmp_path, *, env, listeners: tuple[str, ...] = ()) -> Proc:
    """The speech node, terminal backend: the test types the person's lines on its stdin.

    `listeners`: the nodes whose utterance subscription it waits for before its backend
    starts (its `wait_for_listeners`): a line typed then reaches each of them.
    """
    wait = ["-p", f"wait_for_listeners:=[{', '.join(listeners)}]",
            "-p", "wait_for_subscriber:=150.0"] if listeners else []
    speech = Proc([sys.executable, "-m", "vision_dialogue.speech_node", "--ros-args",
                   "-p", "backend:=terminal", "-p", "speaker:=visitor", *wait], tmp_path,
                  stdin=True, env=env)
    assert speech.wait_err("speech backend 'terminal' started", 180 if listeners else 60), \
        speech.err[-20:]
    return speech


def transcript_records(tmp_path, before: set = frozenset()) -> list[dict]:
    """The records of the manager's transcript(s) under tmp_path/tr (runs not in `before`).

    Read as the package reads a transcript: the manager may be writing its last line now (a
    torn '{"t": 1' was read as a record under load).
    """
    return [record for f in (tmp_path / "tr").glob("*/transcript.jsonl")
            if f.parent.name not in before for record in read_transcript(f)]
