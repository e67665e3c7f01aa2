"""A burst of stop signals never deadlocks the handler that notes them (SignalFlag)."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

#: the program's shape: a handler that notes the stop, a thread polling for it, a main loop
PROGRAM = textwrap.dedent("""
    import signal, threading, time
    from vision_dialogue.common.signal_flag import SignalFlag
    flag = SignalFlag()
    signal.signal(signal.SIGTERM, lambda *_: flag.set())
    def watch():
        while True:
            if flag.is_set():
                flag.clear()
            time.sleep(0.001)
    threading.Thread(target=watch, daemon=True).start()
    print("ready", flush=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1:
        flag.is_set()
    print("done", flush=True)
""")


def test_a_burst_of_sigterms_never_deadlocks_the_handler():
    """threading.Event in its place hung in about half of such bursts (its lock, re-entered)."""
    hung = 0
    for _ in range(5):
        child = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE,
                                 text=True, env=os.environ)
        assert child.stdout.readline().strip() == "ready"
        for _ in range(2000):
            try:
                os.kill(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                break
        try:
            out, _ = child.communicate(timeout=15)
            assert "done" in out
        except subprocess.TimeoutExpired:
            hung += 1
            child.kill()
            child.wait()
    assert hung == 0, f"{hung} of 5 programs hung in their signal handler"
