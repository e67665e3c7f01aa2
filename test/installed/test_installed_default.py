"""README command 1's conversation on the real default: `bringup demo` as a user runs it.

The embedded model's 1.5B variant on llama.cpp (`llm_backend: local`), from the clean install
tree, with nothing overridden but the reply deadline: every reply is the model's (no fallback),
no line is said twice, and each yes/no question gets a yes or a no. Skipped where
llama-cpp-python or the 1.5B parts are not installed (README command 2 installs both).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed "
                    "(VD_EXTRAS=llamacpp scripts/setup.sh compiles it once, about 2.5 min)")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
PEER = Path(__file__).resolve().parents[1] / "hri_peer.py"

from bench_dialogue import yes_or_no  # noqa: E402
from installed.user_env import stop, what_failed  # noqa: E402
from vision_dialogue.core.focus import is_yes_no  # noqa: E402
from vision_dialogue.core.reply_filter import near_repeat  # noqa: E402


#: three of config/demo_script.yaml's lines, timed as there
SHORT_SCRIPT = """
language: en-US
speaker: visitor
items:
  - say: "Hello! Can you see me?"
    wait_for_greeting: true
    delay: 1.0
  - say: "Is there a cat with us?"
    wait_for_reply: true
    at: 32.0
  - say: "Thank you, that was fun. Goodbye!"
    wait_for_reply: true
"""

#: seconds a reply may take here (the product's default is 15; see the test): with a process
#: spinning beside the suite two replies came 70 s after their line
REPLY_DEADLINE_S = 150.0


@pytest.fixture(scope="module")
def gguf():
    from vision_dialogue.llm.default_model import ModelSetupError, ensure_default_gguf
    try:
        return ensure_default_gguf(variant="1.5b")
    except ModelSetupError as e:
        pytest.skip(f"the embedded 1.5B model is not installed: {e}")


# the limit counts the session fixtures this test may be the first to build (the install,
# the model: 130 s in a fresh-clone run, whose demo then ran 170 s of the 300 s default) and
# its wait for the tests running when it asks (cores_alone)
@pytest.mark.timeout(900)
def test_bringup_demo_converses_on_the_embedded_default(installed, gguf, tmp_path,
                                                        cores_alone):
    """The demo converses, names the cat, and other stacks hear it.

    A third-party-like listener process hears our detections, REP-155 faces and voices and
    /robot_speaking.
    """
    listener = subprocess.Popen([sys.executable, str(PEER), "listen", "--topic", "/detections"],
                                cwd=installed.home, env=installed.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    try:
        # the reply deadline is the only setting changed: the other test worker keeps a core
        # busy, and a reply the model gives in 70 s is still its reply (what is checked here
        # is what it says; how fast it says it is benchmarks/bench_demo.py's)
        # three of the demo script's lines (its whole script is README command 1's and
        # bench_demo.py's; here it was the suite's longest test, 476 s on a 2-core AVX2 CPU):
        # a yes/no question, the cat, the goodbye
        script = tmp_path / "script.yaml"
        script.write_text(SHORT_SCRIPT)
        run = installed.run(installed.exe("bringup") + [
            "demo", "--log-level", "info", "--no-monitor", "--script", str(script),
            "-p", f"manager.reply_deadline:={REPLY_DEADLINE_S}"], timeout=720)
    finally:
        stop(listener)
    heard = [json.loads(ln) for ln in listener.stdout.read().splitlines()
             if ln.startswith("{")]
    out = run.stdout + run.stderr
    assert run.returncode == 0, what_failed(out, 4000)
    assert "LlamaCppChatBackend" in out and "model='default:1.5b'" in out, out[-4000:]
    robot = [ln[len("robot: "):] for ln in run.stdout.splitlines() if ln.startswith("robot: ")]
    assert len(robot) >= 4, out[-4000:]               # the greeting and the script's lines
    assert "fallback" not in out.lower(), out[-4000:]
    said: list[tuple] = []
    for line in robot:
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            words = re.findall(r"[a-z0-9']+", sentence.lower())
            if len(words) >= 4:
                assert not near_repeat(words, said), (sentence, robot)
                said.append(tuple(words))
    # (yes/no question, its reply) as the manager recorded them: on the terminal a reply's
    # line may come after the script's next line (a fresh-clone run lost the cat's pair)
    asked = [(r["in_reply_to"], r["text"]) for r in _records(installed.home, out, "reply")
             if is_yes_no(r["in_reply_to"])]
    # "Is there a cat with us?" is answered as the newest frame shows it: yes while the cat is
    # in view (the script asks at 32 s; the video shows it from 26 to 34 s), no once it has gone
    # (on a machine whose replies take 3-5 s the question comes after the cat has left). A
    # note unsure of the animal ("a dog or a cat in the middle") settles nothing: either
    # answer stands then, and so does a hedge, which core/focus.py UNSURE_NOTE asks for
    # ("Maybe ...", "I think there might be a cat with us." in a busy fresh-clone run).
    cat = next(r for q, r in asked if "cat" in q)
    shown = _objects_when_asked(installed.home, out, "cat")
    unsure = re.search(r"\bor an? cat\b|\bcat or\b", shown)
    answered = all(yes_or_no(r) or (unsure and r is cat) for q, r in asked)
    assert asked and answered, (asked, shown)
    # the detector named the demo's objects, on the standard topic, as other stacks see it
    # (faces, with ids, are tested frame by frame in test_standard_interfaces.py: here the one
    # demo frame that shows a face whole may come while the detector still loads)
    classes = {c for e in heard if e["event"] == "detections" for c in e["classes"]}
    assert {"cup", "person"} <= classes, classes
    assert any(e["event"] == "faces" for e in heard), heard[-20:]     # REP-155 faces out
    speaking = [e["value"] for e in heard if e["event"] == "robot_speaking"]
    assert True in speaking and speaking[-1] is False, speaking
    assert any(e["event"] == "speech" and e["final"] for e in heard), heard[-20:]
    # the robot's face, as a face of the robot's own hears it: "Thank you, that was fun.
    # Goodbye!" gets a happy reaction; the transcript has each face beside its line
    faces = [e["expression"] for e in heard if e["event"] == "expression"]
    assert "happy" in faces and "neutral" in faces, faces
    recorded = _records(installed.home, out, "face")
    assert any(r["moment"] == "heard" and r["line"] == "Thank you, that was fun. Goodbye!"
               and r["expression"] == "happy" for r in recorded), recorded
    if not unsure:
        assert yes_or_no(cat) == ("yes" if "cat" in shown else "no"), (cat, shown)


def _transcript(home: Path, out: str) -> list[dict]:
    """The records of the run whose output is `out`."""
    from vision_dialogue.core.transcript import read_transcript
    found = re.search(r"transcript: (\S+transcript\.jsonl)", out)
    assert found, out[-2000:]
    path = Path(found.group(1))
    return read_transcript(path if path.is_absolute() else home / path)


def _records(home: Path, out: str, kind: str) -> list[dict]:
    return [r for r in _transcript(home, out) if r["type"] == kind]


def _objects_when_asked(home: Path, out: str, word: str) -> str:
    """The newest frame's objects note when the question with `word` was asked."""
    objects: dict[int, str] = {}
    newest = None
    for rec in _transcript(home, out):
        if rec["type"] == "frame":
            newest, objects[rec["frame_id"]] = rec["frame_id"], rec.get("objects") or ""
        elif rec["type"] == "objects":
            objects[rec["frame_id"]] = rec["text"]
        elif rec["type"] == "user" and word in rec["text"]:
            return objects.get(newest, "")
    return ""
