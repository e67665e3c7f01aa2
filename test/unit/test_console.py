"""The quiet console: third-party start-up noise muted, everything else passed through."""
import os
import subprocess
import sys
import textwrap

import pytest

from vision_dialogue.ros.console import NOISE, wants_verbose

REAL_NOISE = textwrap.dedent("""
    import sys
    from vision_dialogue.ros.console import quiet_console, wants_verbose
    quiet_console(wants_verbose(sys.argv))
    import cv2, skimage.data
    from vision_dialogue.perception.observer import FrameObserver
    print("before", file=sys.stderr, flush=True)
    obs = FrameObserver().analyse(cv2.cvtColor(skimage.data.astronaut(), cv2.COLOR_RGB2BGR))
    cv2.VideoCapture(97)                       # no such camera: OpenCV's own error block
    print("after:", obs.text, file=sys.stderr, flush=True)
""")


def run(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


@pytest.mark.parametrize("line, noise", [
    ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.", True),
    ("W0000 00:00:1795394129.540020    1361 inference_feedback_manager.cc:114] Feedback manager "
     "requires a model with a single signature inference.", True),
    ("[ WARN:0@1.234] global cap_v4l.cpp:914 open VIDEOIO(V4L2:/dev/video97): can't open", True),
    ("Loading weights: 100%|██████████| 291/291", True),
    ("[INFO] [1795394128.4] [manager_node]: manager ready", False),
    ("[WARN] [1795394128.4] [camera_node]: camera 0 unavailable; retrying", False),
    ("robot: Hello there!", False),
])
def test_noise_pattern(line, noise):
    assert bool(NOISE.match(line)) is noise


def test_verbose_flag_is_taken_out_of_the_arguments(monkeypatch):
    monkeypatch.delenv("VD_VERBOSE", raising=False)
    args = ["manager_node", "--verbose", "--ros-args", "-p", "n:=4"]
    assert wants_verbose(args) and args == ["manager_node", "--ros-args", "-p", "n:=4"]
    assert not wants_verbose(["manager_node"])


def test_real_third_party_noise_is_muted_and_our_lines_pass_in_order():
    """MediaPipe, TensorFlow Lite, absl, protobuf and OpenCV write from C++ and Python."""
    quiet = run(REAL_NOISE)
    assert quiet.returncode == 0, quiet.stderr
    lines = quiet.stderr.splitlines()
    assert lines[0] == "before" and lines[-1].startswith("after: one person")
    assert len(lines) == 2, quiet.stderr
    loud = run(REAL_NOISE, VD_VERBOSE="1")      # the same with VD_VERBOSE=1: all of it
    assert loud.returncode == 0
    assert "Feedback manager" in loud.stderr or "TensorFlow Lite" in loud.stderr
    assert len(loud.stderr.splitlines()) > 4


TQDM_BAR = textwrap.dedent("""
    import sys
    from vision_dialogue.ros.console import quiet_console, wants_verbose
    quiet_console(wants_verbose([]))
    from tqdm.auto import tqdm      # as transformers' GGUF conversion imports it
    for _ in tqdm(range(50), desc="Converting and de-quantizing GGUF tensors..."):
        pass
    print("done", file=sys.stderr)
""")


def test_progress_bars_of_plain_tqdm_are_muted():
    """The GGUF conversion's bar (plain tqdm, not transformers' switch) prints nothing."""
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "VD_VERBOSE")}

    def bar(**extra):
        return subprocess.run([sys.executable, "-c", TQDM_BAR], capture_output=True, text=True,
                              timeout=120, env={**env, **extra})
    quiet = bar()
    assert quiet.returncode == 0 and quiet.stderr.strip() == "done", quiet.stderr
    assert "Converting and de-quantizing" in bar(VD_VERBOSE="1").stderr


DIALOGUE = textwrap.dedent("""
    import os, sys, threading, time
    from vision_dialogue.ros import console
    from vision_dialogue.speech.terminal import TerminalBackend
    console.quiet_console(False)

    class Events:
        def utterance(self, *a, **k): pass
        def input_finished(self): pass

    term = TerminalBackend(sys.stdin, sys.stdout)
    if sys.argv[1] == "hooked":
        term.hold_logs, term.show_prompt = console.hold_logs, console.show_prompt
    term.start(Events())
    time.sleep(0.3)
    os.write(2, b"[WARN] [1.0] [camera_node]: a log line while the prompt waits\\n")
    time.sleep(0.6)
    term.begin_reply()
    term.speak("Hello there.")
    os.write(2, b"[WARN] [2.0] [manager_node]: a log line in the middle of the reply\\n")
    time.sleep(0.6)
    term.speak("How are you?")
    term.end_reply("Hello there. How are you?")
    time.sleep(0.6)
    console.restore_console()
""")


def run_at_a_terminal(mode: str) -> str:
    """The dialogue above in a pseudo-terminal (what a person sees), as one stream of text."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:   # the child: stdin, stdout and stderr are the terminal
        os.execvpe(sys.executable, [sys.executable, "-c", DIALOGUE, mode], os.environ)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_log_lines_never_break_the_robots_line_or_the_prompt():
    """At a terminal: the robot's line and the `you:` prompt stay whole.

    A log line during the robot's reply waits until the line is finished; one during the
    prompt is written over the prompt's line, and the prompt is drawn again below it.
    """
    seen = run_at_a_terminal("hooked")
    assert "robot: Hello there. How are you?\n" in seen, repr(seen)
    assert seen.index("How are you?") < seen.index("in the middle of the reply")
    # the prompt's line was cleared for the log line and drawn again after it
    assert "you: \r\x1b[K[WARN] [1.0] [camera_node]: a log line while the prompt waits\nyou: " \
        in seen, repr(seen)
    assert seen.rstrip().endswith("you:"), repr(seen)
    # without the hooks (what it was before): the log line lands inside the robot's line
    broken = run_at_a_terminal("plain")
    assert "robot: Hello there.[WARN]" in broken.replace(" [WARN]", "[WARN]"), repr(broken)


def test_the_prompt_is_drawn_while_no_log_line_can_be_written():
    """Drawing or clearing the prompt holds the console's lock.

    So no log line lands between the prompt appearing and the console knowing it is there (the
    `you: [bringup] ...` glitch).
    """
    code = textwrap.dedent("""
        from vision_dialogue.ros import console
        console.quiet_console(False)
        seen = []
        console.show_prompt("you: ", lambda: seen.append(console._pump._lock.locked()))
        console.show_prompt(None, lambda: seen.append(console._pump._lock.locked()))
        console.restore_console()
        print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "[True, True]", out.stderr
