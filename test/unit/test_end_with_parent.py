"""A node ends with the program that started it (ros2 launch), not with a shell (nohup ... &)."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from pids import wait_gone

CHILD = ("from vision_dialogue.ros.node_runner import end_with_parent; end_with_parent(); "
         "import time; print('ready', flush=True); time.sleep(60)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_node_ends_with_the_program_that_started_it_but_not_with_a_shell(tmp_path):
    launcher = textwrap.dedent(f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {CHILD!r}], stdout=subprocess.PIPE,
                                 text=True)
        child.stdout.readline()
        print(child.pid, flush=True)      # then this 'launcher' dies without a word
    """)
    out = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True,
                         timeout=60, env=os.environ)
    pid = int(out.stdout.split()[-1])
    assert wait_gone(pid, 10), "the node outlived the program that started it"

    shell = subprocess.run(
        ["bash", "-c", f"{sys.executable} -c {CHILD!r} > {tmp_path}/out 2>&1 & echo $!; "
                       f"until grep -q ready {tmp_path}/out; do sleep 0.05; done"],
        capture_output=True, text=True, timeout=60, env=os.environ)
    pid = int(shell.stdout.split()[-1])
    try:
        assert not wait_gone(pid, 1.5), "a node started from a shell ended with the shell"
    finally:
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 10)           # gone before the next test (it is in the test's domain)
