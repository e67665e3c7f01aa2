"""A node program ends with its exit code once its workers are done, without finalization."""
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import atexit, sys, threading, time
    from vision_dialogue.ros.console import quiet_console
    from vision_dialogue.ros.node_runner import end_program
    quiet_console(False)
    atexit.register(lambda: print("finalized", flush=True))
    release = threading.Event()
    def work():
        release.wait({wait})
        print("worker done", flush=True)
    threading.Thread(target=work, name="llm-worker").start()
    print("last line on stderr", file=sys.stderr)
    end_program(3, "prog", grace={grace})
""")


def run(wait: float, grace: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM.format(wait=wait, grace=grace)],
                          capture_output=True, text=True, timeout=60, env=os.environ)


def test_the_exit_waits_for_a_worker_and_keeps_the_code_and_the_held_log_lines():
    out = run(wait=0.3, grace=30)
    assert out.returncode == 3, out.stderr
    assert "worker done" in out.stdout
    assert "last line on stderr" in out.stderr      # held by the console pump, written out
    assert "finalized" not in out.stdout            # no finalization: atexit never ran
    assert "without waiting" not in out.stderr


def test_a_worker_busy_past_the_grace_does_not_hold_the_exit():
    out = run(wait=120, grace=0.5)
    assert out.returncode == 3, out.stderr
    assert "worker done" not in out.stdout
    assert "[prog] exiting without waiting for 1 busy worker thread(s): llm-worker" \
        in out.stderr
