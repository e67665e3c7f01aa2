"""The installed tier's helpers: run vision_dialogue the way a user does.

`build_workspace` copies the tree as it would be committed (files git tracks or would
track) into a temporary workspace, runs a clean, non-symlink `colcon build`, and gives an
environment made by `source install/setup.bash` over the ROS underlay only: no source
checkout on any path, the working directory outside the checkout, and the environment
hooks' defaults (the Fast DDS profile) as a user's shell has them.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import until as polled
from vision_dialogue.ros.node_runner import STACKS_SIGNAL

REPO = Path(__file__).resolve().parents[2]
PKG = "vision_dialogue"
#: variables that a user's shell gets from sourcing the workspace (reset before sourcing)
WORKSPACE_VARS = ("PYTHONPATH", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH",
                  "PATH", "COLCON_PREFIX_PATH")


def committed_files(repo: Path) -> list[str]:
    """Files git tracks or would track (not ignored) and that exist: what a clone holds."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=repo, check=True, capture_output=True).stdout
    return sorted({f for f in out.decode().split("\0") if f and (repo / f).is_file()})


#: the interface packages, built as scripts/setup.sh builds them before the package: ours and,
#: where no installed copy is found (a robot's ROS 2 has them), the standard ones
INTERFACE_DIRS = (Path("interfaces"), Path("third_party") / "interfaces")
INTERFACE_PKGS = ("vision_dialogue_interfaces", "vision_msgs", "hri_msgs")


def built_interfaces(ws: Path) -> bool:
    """Copy the interfaces setup built (REPO/install/<pkg>, plain files) into ws/install.

    They are generated message code, as a robot's ROS 2 installs them (ours as a release's
    vision_dialogue_interfaces would be), not the Python package under test; generating them
    again took 55 of the tier's 60 s. False where setup did not build them (the workspace then
    builds them itself).
    """
    built = [REPO / "install" / pkg for pkg in INTERFACE_PKGS]
    if not all((b / "share" / "colcon-core" / "packages" / b.name).is_file() and
               not any(p.is_symlink() for p in b.rglob("*")) for b in built):
        return False
    for b in built:
        shutil.copytree(b, ws / "install" / b.name)
    return True


def _without_checkout(env: dict) -> dict:
    """`env` with every path into the source checkout removed (its install tree included)."""
    env = dict(env)
    for var in WORKSPACE_VARS:
        if var in env:
            parts = [p for p in env[var].split(os.pathsep)
                     if p and not Path(p).resolve().is_relative_to(REPO)]
            env[var] = os.pathsep.join(parts)
    for var in ("FASTDDS_DEFAULT_PROFILES_FILE", "VD_FASTDDS_PROFILE", "PYTHONSTARTUP"):
        env.pop(var, None)
    return env


def _sourced_env(setup: Path, base: dict) -> dict:
    """The environment after `source <setup>` in bash, starting from `base`."""
    out = subprocess.run(["bash", "-c", f'source "{setup}" && env -0'], env=base, check=True,
                         capture_output=True).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


@dataclass
class Installed:
    """A clean build of the package and a user's environment for it."""

    ws: Path
    env: dict
    home: Path        # working directory for the processes (outside the checkout)

    @property
    def prefix(self) -> Path:
        return self.ws / "install" / PKG

    @property
    def site(self) -> Path:
        v = sys.version_info
        return self.prefix / "lib" / f"python{v.major}.{v.minor}" / "site-packages" / PKG

    def exe(self, name: str) -> list[str]:
        """argv of an installed executable, as `ros2 run vision_dialogue <name>` runs it."""
        return [str(self.prefix / "lib" / PKG / name)]

    def run(self, argv, timeout=60.0, env=None, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=self.home, env=env or self.env, capture_output=True,
                              text=True, timeout=timeout, **kw)

    def popen(self, argv, env=None, log: Path | None = None, **kw) -> subprocess.Popen:
        out = open(log, "w") if log else subprocess.DEVNULL
        return subprocess.Popen(argv, cwd=self.home, env=env or self.env, stdout=out,
                                stderr=subprocess.STDOUT, text=True, **kw)


def wait_for_log(log: Path, pattern: str, proc: subprocess.Popen, timeout: float = 120.0,
                 count: int = 1) -> list[str]:
    """The matches of `pattern` once `count` are in the log (the process still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.findall(pattern, log.read_text())
        if len(found) >= count:
            return found
        assert proc.poll() is None, f"it ended ({proc.returncode}):\n{log.read_text()}"
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} x{count} in {timeout} s:\n{log.read_text()}")


def stop(proc: subprocess.Popen, timeout: float = 15.0) -> int:
    """SIGINT (Ctrl-C, as ros2 launch sends), then SIGKILL; the exit code.

    A node still up after `timeout` is first asked for its threads' stacks (STACKS_SIGNAL),
    which go to its log, so the test's failure shows where it was stuck; its native stacks
    (common/native_stacks.py: gdb where installed) go to the test's stderr.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            from vision_dialogue.common.native_stacks import native_stacks
            print(f"native stacks of {proc.args[0] if proc.args else proc.pid}, still up "
                  f"{timeout:.0f} s after Ctrl-C:\n{native_stacks(proc.pid)[-30000:]}",
                  file=sys.stderr)
            proc.send_signal(STACKS_SIGNAL)
            try:
                return proc.wait(timeout=2.0)      # the stacks written (it may end meanwhile)
            except subprocess.TimeoutExpired:
                proc.kill()
    return proc.wait()


def shared_workspace(root: Path, worker: str) -> Installed:
    """One clean build for the whole run, shared by the test workers (pytest-xdist).

    The first worker builds it under `root` (a folder every worker sees) while holding a lock;
    the others wait and use it. Each worker gets a home (working directory) of its own, so
    their transcripts and runs never mix.
    """
    from filelock import FileLock
    ws = root / "ws"
    with FileLock(str(root / "ws.lock")):
        if not (ws / "built").is_file():
            if ws.exists():
                shutil.rmtree(ws)          # a build that failed half-way
            build_workspace(ws)
            # what the build itself put under share/ (running a launch file from it later
            # writes a __pycache__ there, as on any robot: not the build's debris)
            debris = (ws / "install").glob(f"{PKG}/share/{PKG}/**/__pycache__")
            (ws / "built").write_text("".join(f"{d}\n" for d in debris))
    return use_workspace(ws, ws / f"user-{worker}")


def build_workspace(ws: Path) -> None:
    """Copy the committed tree to ws/src and colcon build it (no symlinks).

    The interfaces come from setup's build (`built_interfaces`), else build beside it.
    """
    src = ws / "src" / PKG
    for rel in committed_files(REPO):
        dst = src / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dst)
    base = _without_checkout(os.environ)
    base["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    t0 = time.monotonic()
    interfaces = [] if built_interfaces(ws) else [str(src / i) for i in INTERFACE_DIRS]
    launcher = []
    if shutil.which("ccache"):           # as scripts/setup.sh: what setup compiled is reused
        launcher = ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        base["CCACHE_BASEDIR"] = str(ws / "build")
    build = subprocess.run(
        ["colcon", "--log-base", str(ws / "log"), "build", "--base-paths", str(ws / "src"),
         *interfaces,
         "--build-base", str(ws / "build"), "--install-base", str(ws / "install"),
         "--cmake-args", "-DBUILD_TESTING=OFF", f"-DPython3_EXECUTABLE={sys.executable}",
         *launcher,
         "--event-handlers", "console_cohesion+", "status-"],
        cwd=ws, env=base, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, \
        f"colcon build failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
    print(f"installed tier: clean colcon build in {time.monotonic() - t0:.0f} s")


def use_workspace(ws: Path, home: Path) -> Installed:
    """A user's environment for the built workspace `ws`: `source install/setup.bash`."""
    base = _without_checkout(os.environ)
    base["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    env = _sourced_env(ws / "install" / "setup.bash", base)
    env["PYTHONUNBUFFERED"] = "1"
    home.mkdir(parents=True, exist_ok=True)
    return Installed(ws=ws, env=env, home=home)


def readme_install(home: Path) -> Installed:
    """The install tree README command 1 made in the checkout, in a user's environment.

    That is `colcon build --symlink-install` by scripts/setup.sh, then
    `source install/setup.bash`.
    """
    setup = REPO / "install" / "setup.bash"
    if not setup.is_file():
        raise FileNotFoundError(f"{setup} is missing: run scripts/setup.sh (README command 1)")
    base = _without_checkout(os.environ)
    base["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    env = _sourced_env(setup, base)
    env["PYTHONUNBUFFERED"] = "1"
    home.mkdir(parents=True, exist_ok=True)
    return Installed(ws=REPO, env=env, home=home)


class OwnParticipant:
    """A node of the test in a participant of its own, spun on a thread.

    What another process on the robot (a lifecycle manager, a diagnostics viewer) sees.
    """

    def __init__(self, name: str):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from conftest import DOMAIN_ID
        from spinning import SpinThread
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=DOMAIN_ID)
        self.node = rclpy.create_node(name, context=self.ctx)
        self._spinning = SpinThread(SingleThreadedExecutor(context=self.ctx), [self.node],
                                    name=f"spin-{name}")

    def spin(self) -> None:
        """Start spinning (after the subscriptions and clients are made)."""
        self._spinning.start()

    def close(self) -> None:
        """Stop and join the spin thread, destroy the node, shut the context down."""
        from conftest import close_context
        try:
            self._spinning.close()
        finally:
            close_context(self.ctx)


def around_traceback(out: str, tail: int = 3000) -> str:
    """The output around its first traceback (from a few lines before it), else its tail.

    A traceback in the middle of a long output is cut from the tail a failure message shows.
    """
    at = out.find("Traceback")
    if at < 0:
        return out[-tail:]
    return out[max(0, at - 600):at + tail]


#: a thread's Python stack as faulthandler prints it (a node's stop that takes too long, or
#: bringup's stuck child): its head line and its frames
PYTHON_STACK = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call "
                          r"first\):\n(?:^ +File .*\n?)+", re.MULTILINE)
#: frames of each stack a failure message keeps (the innermost: faulthandler prints them first)
STACK_FRAMES = 12


def what_failed(out: str, tail: int = 3000) -> str:
    """A failed run's message: the Python stacks it printed, then its last `tail` characters.

    A node stuck at its stop prints its threads' stacks long before the run ends (then
    bringup's native stacks of it, which fill the tail): the message keeps both, so the next
    failure says where the node was (test_installed_events' people node was killed so, its
    Python frames cut off).
    """
    stacks = ["\n".join(m.group(0).splitlines()[:STACK_FRAMES + 1])
              for m in PYTHON_STACK.finditer(out)]
    head = "Python stacks printed during the run:\n" + "\n".join(stacks) + "\n...\n" \
        if stacks else ""
    return head + out[-tail:]


def until(pred, timeout: float = 30.0, step: float = 0.05) -> bool:
    """conftest's `until`, with the longer default wait of processes that start slowly."""
    return polled(pred, timeout, step)


#: an unanswered call is sent again after this many seconds (see `ask`)
RESEND_S = 5.0


def ask(send, timeout: float = 30.0):
    """The result of the future `send()` returns; sent again while unanswered.

    Just after discovery a service's response can be lost: rmw_fastrtps drops it when the
    client's response reader has not matched the server yet ("client will not receive
    response" in the server's log), as a loaded machine makes likely. Only for calls that may
    be repeated (get_state, a goal that may run twice).
    """
    import threading
    done = threading.Event()
    deadline = time.monotonic() + timeout
    futures = []
    while True:
        futures.append(send())
        futures[-1].add_done_callback(lambda _f: done.set())
        if done.wait(min(RESEND_S, max(0.0, deadline - time.monotonic()))):
            return next(f.result() for f in futures if f.done())
        assert time.monotonic() < deadline, f"no answer in {timeout:g} s"


class LifecycleCalls:
    """change_state and get_state of one managed node, as a lifecycle manager calls them."""

    def __init__(self, node, name: str):
        from lifecycle_msgs.srv import ChangeState, GetState
        self.name = name
        self.change = node.create_client(ChangeState, f"/{name}/change_state")
        self.get = node.create_client(GetState, f"/{name}/get_state")

    def wait_for_services(self, timeout: float) -> None:
        assert self.get.wait_for_service(timeout_sec=timeout), f"no /{self.name}/get_state"
        assert self.change.wait_for_service(timeout_sec=timeout), f"no /{self.name}/change_state"

    def state(self, timeout: float = 30.0) -> int:
        from lifecycle_msgs.srv import GetState
        return ask(lambda: self.get.call_async(GetState.Request()), timeout).current_state.id

    def transition(self, transition_id: int, timeout: float = 30.0) -> bool:
        """Whether the transition succeeded.

        Unanswered, the node's state says whether it happened (the response was lost) or is
        under way (wait for it); only a request the node never saw is sent again.
        """
        import threading

        from lifecycle_msgs.msg import State, Transition
        from lifecycle_msgs.srv import ChangeState
        goal = {Transition.TRANSITION_CONFIGURE: State.PRIMARY_STATE_INACTIVE,
                Transition.TRANSITION_ACTIVATE: State.PRIMARY_STATE_ACTIVE,
                Transition.TRANSITION_DEACTIVATE: State.PRIMARY_STATE_INACTIVE,
                Transition.TRANSITION_CLEANUP: State.PRIMARY_STATE_UNCONFIGURED}[transition_id]
        request = ChangeState.Request(transition=Transition(id=transition_id))
        done = threading.Event()
        deadline = time.monotonic() + timeout
        futures, state = [], None
        while True:
            if state not in (goal, *TRANSITIONAL):      # not sent yet, or never seen
                futures.append(self.change.call_async(request))
                futures[-1].add_done_callback(lambda _f: done.set())
            if done.wait(min(RESEND_S, max(0.0, deadline - time.monotonic()))):
                answer = next(f.result() for f in futures if f.done())
                # a resent request answers "invalid" once the first one has done it
                return answer.success or (len(futures) > 1 and self.state() == goal)
            assert time.monotonic() < deadline, f"{self.name}: no answer in {timeout:g} s"
            state = self.state()
            if state == goal:
                return True


#: lifecycle_msgs' transition states (a transition under way)
TRANSITIONAL = tuple(range(10, 16))
