"""A new variant is one module and one row (issue 34), proven on a copy of the package.

A speech backend, a camera source and an LLM backend, each written into the copy as a module
of its own plus one row in its kind's table, and run by its node with a parameter only it
declares.

Nothing else of the copy changes (checked file by file), so no node, no doctor and no other
file names the new variant; its parameter is declared, checked and read through the table.
"""
from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import DOMAIN_ID
from ros_processes import process_env

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "vision_dialogue"
NEW_DOMAIN = 1 + DOMAIN_ID % 9   # apart from conftest's 30..200, the robot's 10+, the skills' 201+

MODULES = {
    "speech/throwaway.py": '''
        """A throwaway speech backend: hears one line (its own parameter), prints what it says.

        Like a person, it says the line again while nobody answers (the first may go out before
        the manager has matched the topic).
        """
        import threading

        from vision_dialogue.speech.base import SpeechBackend
        from vision_dialogue.variants import Param


        class ThrowawayBackend(SpeechBackend):
            name = "throwaway"
            PARAMS = [Param("throwaway_line", "hello", "The one line this backend hears.")]

            @classmethod
            def check(cls, p):
                return None if p["throwaway_line"].strip() else \\
                    "throwaway_line: must not be empty"

            @classmethod
            def from_params(cls, p, io):
                return cls(p["throwaway_line"], io.logger)

            def __init__(self, line, logger=None):
                super().__init__(logger)
                self.line, self.answered = line, threading.Event()

            def start(self, events):
                super().start(events)
                threading.Thread(target=self._say, args=(events,), daemon=True).start()

            def _say(self, events):
                while True:
                    events.utterance(self.line)
                    if self.answered.wait(3.0):
                        return

            def speak(self, text):
                print(f"SAID {text}", flush=True)
                self.answered.set()
                return True
    ''',
    "camera/throwaway.py": '''
        """A throwaway camera source: grey frames of a level its own parameter sets."""
        import time

        import numpy as np

        from vision_dialogue.camera.sources import CameraSource, CapturedFrame
        from vision_dialogue.variants import Param


        class ThrowawaySource(CameraSource):
            kind = "throwaway"
            PARAMS = [Param("throwaway_grey", 128, "Grey level of every frame.",
                            range=(0, 255))]

            @classmethod
            def from_params(cls, p, ctx):
                return cls(p["throwaway_grey"])

            def __init__(self, grey):
                self.grey = grey

            def open(self):
                pass

            def read(self):
                time.sleep(0.01)
                return CapturedFrame(np.full((48, 64, 3), self.grey, np.uint8), time.time_ns())

            def close(self):
                pass
    ''',
    "llm/throwaway.py": '''
        """A throwaway LLM backend: always answers what its own parameter says."""
        from vision_dialogue.variants import Param


        class ThrowawayLLM:
            in_process = False
            supports_images = False
            PARAMS = [Param("throwaway_reply", "Hello.", "What this backend always answers.")]

            @classmethod
            def from_options(cls, o):
                return cls(o.params["throwaway_reply"])

            def __init__(self, reply):
                self.reply = reply

            def complete(self, messages, **kw):
                return self.reply

            def stream(self, messages, **kw):
                yield self.reply
    ''',
}
ROWS = {   # table file -> (the line the table opens with, the row added under it)
    "speech/__init__.py": ('SPEECH_BACKENDS = VariantTable("backend", "speech backend", {',
                           '    "throwaway": '
                           '"vision_dialogue.speech.throwaway:ThrowawayBackend",'),
    "camera/sources.py": ('CAMERA_SOURCES = VariantTable("source", "camera source", {',
                          '    "throwaway": "vision_dialogue.camera.throwaway:ThrowawaySource",'),
    "llm/factory.py": ('LLM_BACKENDS = VariantTable("llm_backend", "LLM backend", {',
                       '    "throwaway": "vision_dialogue.llm.throwaway:ThrowawayLLM",'),
}

DRIVER = '''
import json, sys, time
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
import vision_dialogue
assert vision_dialogue.__path__[0].startswith(sys.argv[1]), vision_dialogue.__path__
from vision_dialogue.camera_node import CameraNode
from vision_dialogue.manager_node import ManagerNode
from vision_dialogue_interfaces.msg import Reply
from vision_dialogue.ros.params import ParameterError
from vision_dialogue.speech_node import SpeechNode
from sensor_msgs.msg import Image

out = {}
with rclpy.init():
    for cls, kw in ((SpeechNode, {"backend": "throwaway", "throwaway_line": " "}),
                    (CameraNode, {"source": "throwaway", "throwaway_grey": 300})):
        try:
            cls(parameter_overrides=[Parameter(k, value=v) for k, v in kw.items()])
        except ParameterError as e:
            out.setdefault("refused", []).append(str(e))
    probe = rclpy.create_node("probe")
    got = {"frames": [], "replies": []}
    probe.create_subscription(Image, "camera/image_raw", got["frames"].append, 10)
    probe.create_subscription(Reply, "dialogue/reply", got["replies"].append, 10)
    nodes = [
        CameraNode(parameter_overrides=[Parameter("source", value="throwaway"),
                                        Parameter("throwaway_grey", value=77),
                                        Parameter("frame_period", value=0.1)]),
        ManagerNode(parameter_overrides=[
            Parameter("llm_backend", value="throwaway"),
            Parameter("throwaway_reply", value="A throwaway hello."),
            Parameter("transcript_dir", value=sys.argv[2])]),
        SpeechNode(parameter_overrides=[Parameter("backend", value="throwaway"),
                                        Parameter("throwaway_line", value="Hi from the copy.")]),
    ]
    ex = MultiThreadedExecutor(num_threads=4)
    for n in nodes + [probe]:
        ex.add_node(n)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (
            got["frames"] and any(r.final for r in got["replies"])):
        ex.spin_once(timeout_sec=0.1)
    out["grey"] = sorted({int(f.data[0]) for f in got["frames"]})
    out["replies"] = [(r.in_reply_to, r.text) for r in got["replies"] if r.final]
    out["described"] = [nodes[0].describe_parameter("throwaway_grey").description,
                        nodes[1].describe_parameter("throwaway_reply").description,
                        nodes[2].describe_parameter("throwaway_line").description]
    for n in nodes:
        n.destroy_node()
    ex.shutdown()
print("RESULT " + json.dumps(out), flush=True)
'''


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The package copied, then the three modules and the three rows added, nothing else."""
    root = tmp_path_factory.mktemp("new_variants")
    shutil.copytree(PKG, root / "vision_dialogue",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel, source in MODULES.items():
        (root / "vision_dialogue" / rel).write_text(textwrap.dedent(source).lstrip())
    for rel, (opening, row) in ROWS.items():
        path = root / "vision_dialogue" / rel
        text = path.read_text()
        assert text.count(opening) == 1, f"{rel}: the table's opening line moved"
        path.write_text(text.replace(opening, f"{opening}\n{row}"))
    return root


def changed_files(root: Path) -> set[str]:
    """Files of the copy that differ from the package or are new (relative paths)."""
    out = set()
    for path in (root / "vision_dialogue").rglob("*.py"):
        rel = path.relative_to(root / "vision_dialogue")
        orig = PKG / rel
        if not orig.exists() or not filecmp.cmp(path, orig, shallow=False):
            out.add(str(rel))
    return out


def test_only_one_module_and_one_row_per_variant_change(copy):
    assert changed_files(copy) == set(MODULES) | set(ROWS)


def test_each_new_variant_runs_in_its_node_with_its_own_parameter(copy, tmp_path):
    env = process_env(NEW_DOMAIN)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), env["PYTHONPATH"]])
    run = subprocess.run([sys.executable, "-c", DRIVER, str(copy), str(tmp_path / "tr")],
                         env=env, capture_output=True, text=True, timeout=150, cwd=tmp_path)
    lines = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    # declared with the variant's description and checked by its own rules
    assert out["described"] == ["Grey level of every frame.",
                                "What this backend always answers.",
                                "The one line this backend hears."]
    assert out["refused"][0].startswith("throwaway_line: must not be empty")
    assert out["refused"][1].startswith("throwaway_grey") and "out of range" in out["refused"][1]
    # built from its own parameter, and working: frames, a line heard, a reply made
    assert out["grey"] == [77]
    assert out["replies"], run.stderr[-3000:]
    assert out["replies"][0] == ["Hi from the copy.", "A throwaway hello."]   # heard, answered
    assert "SAID A throwaway hello." in run.stdout, run.stdout
