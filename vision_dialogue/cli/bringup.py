"""bringup: start a whole setup (nodes + one YAML) without `ros2 launch`.

    bringup <setup> [--params-file F] [--namespace NS] [--nodes a,b] [--processes]
                    [--log-level L] [--dry-run]
    python -m vision_dialogue.cli.bringup demo

Setups: furhat, standalone, vfm, demo, described once in ros/setups.py, which
launch/bringup.launch.py reads too. By default every node runs in this process on one
MultiThreadedExecutor, in a context initialised with `--ros-args --params-file F`; with
`--processes` each node runs as its installed executable with the same arguments. Ctrl-C or
SIGTERM stops everything cleanly; so does the end of the demo script (the speech node's
`on_done`, or its process exiting).
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from vision_dialogue.common.native_stacks import native_stacks
from vision_dialogue.common.signal_flag import SignalFlag
from vision_dialogue.ros.console import VERBOSE_ENV, quiet_console
from vision_dialogue.ros.node_runner import end_program
from vision_dialogue.common.resources import PACKAGE, SOURCE_ROOT, ResourceNotFound
from vision_dialogue.llm.factory import KINDS, SERVER_KIND, local_kinds
from vision_dialogue.ros.setups import (NODES, SETUPS, Setup, camera_listeners,
                                        default_params_file, node_overrides, people_memory,
                                        script_wait, start_order, utterance_listeners)

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")


class BringupError(ValueError):
    """Bad command-line input (unknown setup, node, missing file)."""


def llm_overrides(llm: str | None, base_url: str | None = None,
                  model: str | None = None) -> dict:
    """Manager parameters for `--llm KIND [--base-url U] [--model M]` (KIND: llm.factory)."""
    if not llm and not base_url and not model:
        return {}
    llm = llm or (SERVER_KIND if base_url else "")
    out: dict = {}
    if llm and llm not in local_kinds():
        out = {"llm_backend": llm, "model": model or "gpt-4o-mini",
               "supports_images": True}
        if base_url:
            out["base_url"] = base_url
    elif llm in local_kinds():
        if base_url:
            raise BringupError(f"--base-url needs --llm {SERVER_KIND}")
        out = {"llm_backend": llm, "model": model or "default",
               "supports_images": False}
    elif model:
        out = {"model": model}
    return out


def input_overrides(video: str | None = None, script: str | None = None,
                    camera: str | None = None) -> dict[str, dict]:
    """Node parameters for `--video FILE`, `--script FILE` and `--camera N` (checked now)."""
    out: dict[str, dict] = {}
    if video and camera is not None:
        raise BringupError("--video and --camera both choose the camera: give one")
    for flag, path in (("--video", video), ("--script", script)):
        if path and not Path(path).is_file():
            raise BringupError(f"{flag}: no such file: {path}")
    if video:
        out["camera"] = {"source": "video", "video_path": str(Path(video).resolve())}
    if camera is not None:
        out["camera"] = {"source": "webcam", "device": str(camera)}
    if script:
        out["speech"] = {"backend": "script", "script_file": str(Path(script).resolve())}
    return out


def param_overrides(items, keys) -> dict[str, dict]:
    """`-p node.param:=value` items -> {node key: {param: value}} (values read as YAML).

    `node` is a node key (manager) or its executable (manager_node); the node must be started
    and declare the parameter, else BringupError naming it.
    """
    out: dict[str, dict] = {}
    by_name = {NODES[k].executable: k for k in NODES} | {k: k for k in NODES}
    for item in items or ():
        target, sep, raw = item.partition(":=")
        node, dot, name = target.partition(".")
        if not sep or not dot or not name:
            raise BringupError(f"-p {item!r}: expected node.parameter:=value, e.g. "
                               "manager.n:=6")
        key = by_name.get(node)
        if key is None or key not in keys:
            raise BringupError(f"-p {item!r}: no node {node!r} in this bringup "
                               f"(nodes: {', '.join(keys)})")
        module = importlib.import_module(NODES[key].module)
        known = {p.name for p in (*module.PARAMS, *getattr(module, "EXTRA_PARAMS", ()))} \
            | {"use_sim_time"}
        if name not in known:
            raise BringupError(f"-p {item!r}: {NODES[key].executable} has no parameter "
                               f"{name!r} (`{NODES[key].executable} --help` lists them)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out.setdefault(key, {})[name] = value
    return out


def setup_overrides(setup: Setup, params_file: str | Path, keys=None,
                    llm: dict | None = None, *extra: dict[str, dict]) -> dict[str, dict]:
    """What bringup adds to the YAML.

    The setup's fill-ins (ros/setups.py); for the manager, the `--llm/--base-url/--model`
    choice; then `extra` in order (`--video/--script/--camera`, `-p node.param:=value`),
    the last word winning.
    """
    out = node_overrides(setup, params_file, keys)
    if llm and "manager" in (setup.nodes if keys is None else keys):
        out.setdefault("manager", {}).update(llm)
    for more in extra:
        for key, values in more.items():
            out.setdefault(key, {}).update(values)
    return out


def resolve(setup_name: str, params_file: str | None, nodes: str | None,
            namespace: str = "", monitor: bool | None = None, events: bool | None = None,
            detector: bool | None = None, people: bool | None = None):
    """(Setup, params file path, node keys) with clear errors for bad input.

    monitor, events, detector, people: True/False starts/leaves out the monitor page, the
    events node, the object detector, the people node; None: the setup's default.
    """
    setup = SETUPS.get(setup_name)
    if setup is None:
        raise BringupError(f"unknown setup {setup_name!r}; one of {', '.join(SETUPS)}")
    try:
        path = Path(params_file) if params_file else default_params_file(setup)
    except ResourceNotFound as e:
        raise BringupError(str(e)) from None
    if not path.is_file():
        raise BringupError(f"params file not found: {path}")
    keys = setup.default_nodes
    for key, wanted in (("monitor", monitor), ("events", events), ("detector", detector),
                        ("people", people)):
        if wanted is None:
            continue
        if key not in setup.nodes:
            raise BringupError(f"setup {setup.name} has no {key} node")
        keys = tuple(k for k in setup.nodes
                     if (k in keys and k != key) or (k == key and wanted))
    if namespace and namespace.strip("/"):
        from rclpy.exceptions import InvalidNamespaceException
        from rclpy.validate_namespace import validate_namespace
        try:
            validate_namespace("/" + namespace.strip("/"))
        except InvalidNamespaceException as e:
            raise BringupError(f"--namespace {namespace!r} is not a valid ROS namespace "
                               f"({str(e).splitlines()[0]})") from None
    if nodes:
        keys = tuple(k.strip() for k in nodes.split(",") if k.strip())
        bad = [k for k in keys if k not in setup.nodes]
        if bad:
            raise BringupError(f"--nodes: {bad} not in setup {setup.name} "
                               f"(nodes: {', '.join(setup.nodes)})")
    return setup, path.resolve(), keys


def ros_args(params_file: Path, namespace: str, log_level: str) -> list[str]:
    args = ["--ros-args", "--params-file", str(params_file), "--log-level", log_level]
    if namespace.strip("/"):
        args += ["-r", f"__ns:=/{namespace.strip('/')}"]
    return args


# ---------------------------------------------------------------------------- in-process
class InProcessBringup:
    """All nodes of a setup in one context on one MultiThreadedExecutor.

    start() builds the nodes (ParameterError propagates, with the nodes built so far
    destroyed); spin() runs until stop() (a node's on_done calls it) or shutdown.
    """

    def __init__(self, setup: Setup, params_file: Path, keys, namespace: str = "",
                 context=None, overrides: dict | None = None):
        self.setup, self.params_file, self.keys = setup, params_file, tuple(keys)
        self.namespace = "/" + namespace.strip("/") if namespace.strip("/") else None
        self.context = context
        self.overrides = overrides if overrides is not None else setup_overrides(
            setup, params_file, self.keys)
        self.nodes: dict = {}
        self.exit_codes: dict = {}      # {key: node.exit_code} of the nodes closed
        self.executor = None
        self.done = None
        self.reason = ""

    def start(self) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.parameter import Parameter
        from rclpy.task import Future
        self.done = Future()
        try:
            for key in start_order(self.keys):
                spec = NODES[key]
                cls = getattr(importlib.import_module(spec.module), spec.class_name)
                kwargs = {"context": self.context or rclpy.get_default_context()}
                if self.namespace:
                    kwargs["namespace"] = self.namespace
                extra = self.overrides.get(key)
                if extra:
                    kwargs["parameter_overrides"] = [Parameter(k, value=v)
                                                     for k, v in extra.items()]
                if "on_done" in inspect.signature(cls.__init__).parameters:
                    # the speech node's end of script (exit_when_done) ends the whole setup
                    kwargs["on_done"] = lambda k=key: self.stop(f"{k} finished")
                self.nodes[key] = cls(**kwargs)
        except BaseException:
            self._destroy()
            raise
        self.executor = MultiThreadedExecutor(context=self.context)
        for node in self.nodes.values():
            self.executor.add_node(node)

    def stop(self, reason: str = "stopped") -> None:
        if self.done is not None and not self.done.done():
            self.reason = reason
            self.done.set_result(reason)

    def spin(self, timeout_sec: float | None = None) -> str:
        """Spin until stopped; returns the reason ('' on timeout).

        A failing callback is logged and the spinning goes on (as each node's own executable
        does), so one node's error does not end every node of the setup.
        """
        from rclpy.executors import ExternalShutdownException
        from rclpy.logging import get_logger

        from vision_dialogue.ros.node_runner import spin_through_failures
        end = None if timeout_sec is None else time.monotonic() + timeout_sec

        def spin() -> None:
            left = None if end is None else max(0.0, end - time.monotonic())
            self.executor.spin_until_future_complete(self.done, timeout_sec=left)
        try:
            spin_through_failures(spin, get_logger("bringup"),
                                  lambda: self.context_ok() and not self.done.done() and
                                  (end is None or time.monotonic() < end))
        except (KeyboardInterrupt, ExternalShutdownException):
            self.stop("interrupted")
        if not self.done.done() and not self.context_ok():
            self.stop("shut down (Ctrl-C or SIGTERM)")
        return self.reason

    def context_ok(self) -> bool:
        import rclpy
        return rclpy.ok(context=self.context)

    def _destroy(self) -> None:
        for key, node in reversed(list(self.nodes.items())):
            close = getattr(node, "close", None)
            try:
                if callable(close):
                    close()
                self.exit_codes[key] = int(getattr(node, "exit_code", 0) or 0)
            finally:
                if self.executor is not None:
                    self.executor.remove_node(node)
                node.destroy_node()
        self.nodes.clear()

    def shutdown(self) -> None:
        """close() and destroy every node, then the executor."""
        self._destroy()
        if self.executor is not None:
            self.executor.shutdown()
            self.executor = None


def run_in_process(setup, params_file, keys, namespace, log_level, overrides=None) -> int:
    import rclpy
    from vision_dialogue.ros.params import ParameterError
    args = ["bringup"] + ros_args(params_file, "", log_level)  # namespace given per node
    with rclpy.init(args=args):
        b = InProcessBringup(setup, params_file, keys, namespace, overrides=overrides)
        try:
            b.start()
        except ParameterError as e:
            print(f"[bringup] invalid parameter: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001 - one clear line instead of a traceback
            print(f"[bringup] cannot start {setup.name}: {type(e).__name__}: {e}",
                  file=sys.stderr)
            return 1
        print(f"[bringup] {setup.name}: running {', '.join(b.nodes)} in one process "
              f"(Ctrl-C to stop)", file=sys.stderr)
        try:
            reason = b.spin()
        finally:
            b.shutdown()
        failed = {k: c for k, c in b.exit_codes.items() if c}
        print(f"[bringup] stopped ({reason})" + (f"; failed: {failed}" if failed else ""),
              file=sys.stderr)
    return 1 if failed else 0


# ---------------------------------------------------------------------------- processes
def find_executable(name: str) -> list[str]:
    """Command that runs executable `name`: the installed wrapper, else `python -m module`."""
    for prefix in [str(SOURCE_ROOT / "install" / PACKAGE)] + \
            os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        exe = Path(prefix) / "lib" / PACKAGE / name
        if prefix and exe.is_file() and os.access(exe, os.X_OK):
            return [sys.executable, str(exe)]
    spec = next(s for s in NODES.values() if s.executable == name)
    return [sys.executable, "-m", spec.module]


def process_commands(setup, params_file, keys, namespace, log_level,
                     overrides: dict | None = None) -> dict[str, list[str]]:
    """{node key: argv} for --processes (and --dry-run)."""
    overrides = setup_overrides(setup, params_file, keys) if overrides is None else overrides
    cmds = {}
    for key in start_order(keys):
        argv = find_executable(NODES[key].executable) + ros_args(params_file, namespace,
                                                                 log_level)
        for k, v in overrides.get(key, {}).items():
            argv += ["-p", f"{k}:={str(v).lower() if isinstance(v, bool) else v}"]
        cmds[key] = argv
    return cmds


#: how long a child has to end after SIGTERM (after its SIGINT's grace) before SIGKILL
TERM_WAIT_S = 3.0
#: the innermost native frames printed of each thread of a child that did not end
STUCK_FRAMES = 24


class ProcessBringup:
    """Each node as a child process.

    When one exits (the demo script is done, say) or on stop(), every child gets SIGINT, then
    SIGTERM/SIGKILL after `grace` seconds.
    """

    def __init__(self, commands: dict[str, list[str]], grace: float = 10.0, env=None):
        self.commands, self.grace, self.env = commands, grace, env
        self.procs: dict[str, subprocess.Popen] = {}
        self._stop = SignalFlag()     # stop() is the SIGINT/SIGTERM handler's
        self.reason = ""

    def start(self) -> None:
        for key, argv in self.commands.items():
            self.procs[key] = subprocess.Popen(argv, env=self.env)

    def stop(self, reason: str = "stopped") -> None:
        if not self._stop.is_set():
            self.reason = reason
            self._stop.set()

    def wait(self, timeout: float | None = None) -> str:
        """Until stop() or a child exits (poll every 0.2 s); '' on timeout."""
        waited = 0.0
        while not self._stop.is_set():
            time.sleep(0.2)
            for key, p in self.procs.items():
                if p.poll() is not None:
                    self.stop(f"{key} exited with code {p.returncode}")
                    break
            waited += 0.2
            if timeout is not None and waited >= timeout:
                break
        return self.reason

    def shutdown(self) -> dict[str, int]:
        """Stop all children; returns {key: exit code}."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        codes = {}
        for key, p in self.procs.items():
            try:
                codes[key] = p.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                p.terminate()
                try:
                    codes[key] = p.wait(timeout=TERM_WAIT_S)
                except subprocess.TimeoutExpired:
                    self._stuck(key, p.pid)
                    p.kill()
                    codes[key] = p.wait()
        return codes

    def _stuck(self, key: str, pid: int) -> None:
        """Where a child that ignored SIGINT and SIGTERM is stuck (its native stacks).

        Its own faulthandler printed the Python frames; a node stuck in rcl or the DDS
        library shows none that says where (gdb's, where installed; else /proc's).
        """
        try:
            stacks = native_stacks(pid, frames=STUCK_FRAMES)
        except OSError as e:            # it ended meanwhile
            stacks = f"(none: {e})"
        print(f"[bringup] {key} (pid {pid}) still runs {self.grace + TERM_WAIT_S:g} s after "
              f"SIGINT and SIGTERM; SIGKILL next. Its threads' native stacks:\n{stacks}",
              file=sys.stderr, flush=True)


def run_processes(setup, params_file, keys, namespace, log_level, overrides=None) -> int:
    group = ProcessBringup(process_commands(setup, params_file, keys, namespace, log_level,
                                            overrides))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: group.stop(signal.Signals(s).name))
    group.start()
    print(f"[bringup] {setup.name}: started {', '.join(group.procs)} as processes "
          f"(Ctrl-C to stop)", file=sys.stderr)
    reason = group.wait()
    codes = group.shutdown()
    print(f"[bringup] stopped ({reason}); exit codes {codes}", file=sys.stderr)
    bad = [c for c in codes.values() if c not in (0, -signal.SIGINT, 130)]
    return 1 if bad else 0


# ---------------------------------------------------------------------------- CLI
def parse_cli(argv):
    ap = argparse.ArgumentParser(
        prog="bringup", description="Start a vision_dialogue setup without ros2 launch.",
        epilog="setups: " + "; ".join(f"{s.name}: {s.description}" for s in SETUPS.values()))
    ap.add_argument("setup", choices=list(SETUPS))
    ap.add_argument("--params-file", help="YAML with all nodes' parameters "
                    "(default: config/<setup>_setup.yaml)")
    ap.add_argument("--namespace", default="", help="ROS namespace for every node")
    ap.add_argument("--nodes", help="comma-separated subset, e.g. camera,manager")
    ap.add_argument("--processes", action="store_true", help="one process per node")
    ap.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    ap.add_argument("--llm", choices=KINDS,
                    help="manager LLM backend instead of the YAML's (openai: key in "
                    "$OPENAI_API_KEY, model gpt-4o-mini unless --model)")
    ap.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://host:8000/v1")
    ap.add_argument("--model", help="manager model name (openai), checkpoint (transformers) or "
                    "GGUF file (llamacpp)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the per-node commands and exit")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NODE.PARAM:=VALUE",
                    help="set one node's parameter, e.g. -p manager.n:=6 -p camera.frame_period"
                    ":=2 (repeatable; after the YAML)")
    ap.add_argument("--video", metavar="FILE", help="the camera plays this video file")
    ap.add_argument("--camera", metavar="N", help="the camera reads this webcam "
                    "(OpenCV index or /dev/videoN)")
    ap.add_argument("--script", metavar="FILE", help="the speech node plays this script "
                    "(config/demo_script.yaml shows the format)")
    ap.add_argument("--monitor", action=argparse.BooleanOptionalAction, default=None,
                    help="start (or leave out) the monitor page, http://127.0.0.1:8765/ "
                    "(default: on in demo and standalone, off in furhat)")
    ap.add_argument("--events", action=argparse.BooleanOptionalAction, default=None,
                    help="start (or leave out) the events node: waves, pointing, arrivals "
                    "from the camera stream between frames (default: on in people_demo)")
    ap.add_argument("--detector", action=argparse.BooleanOptionalAction, default=None,
                    help="start (or leave out) the object detector (vision_msgs detections; "
                    "default: on)")
    ap.add_argument("--people", action=argparse.BooleanOptionalAction, default=None,
                    help="start (or leave out) the people node: who it is talking to across "
                    "sessions, remembered only with consent (docs/people.md; default: on in "
                    "people_demo and furhat)")
    ap.add_argument("--managed", action="store_true",
                    help="start the nodes unconfigured, for a lifecycle manager to configure "
                    "and activate (docs/lifecycle.md)")
    ap.add_argument("--verbose", action="store_true",
                    help="show third-party libraries' start-up output (muted by default)")
    return ap.parse_args(argv)


def main(args=None) -> int:
    argv = list(sys.argv[1:] if args is None else args[1:])
    ns = parse_cli(argv)
    if args is None:     # as a program (tests call main() with args and keep their stderr)
        quiet_console(ns.verbose or os.environ.get(VERBOSE_ENV) == "1")
    from vision_dialogue.ros.dds import apply_default_profile
    apply_default_profile()     # this process and every child: raw frames cross processes
    try:
        setup, params_file, keys = resolve(ns.setup, ns.params_file, ns.nodes, ns.namespace,
                                           ns.monitor, ns.events, ns.detector, ns.people)
        llm = llm_overrides(ns.llm, ns.base_url, ns.model)
        if llm and "manager" not in keys:
            raise BringupError("--llm/--base-url/--model need the manager node")
        inputs = input_overrides(ns.video, ns.script, ns.camera)
        if "speech" in inputs:          # a script given: its first line waits for the manager
            inputs["speech"].update(script_wait(params_file))
        for key in inputs:
            if key not in keys:
                raise BringupError(f"--video/--camera/--script need the {key} node")
        if "speech" in keys:            # its first line waits for each node that hears it
            inputs.setdefault("speech", {}).update(utterance_listeners(keys))
        camera = camera_listeners(params_file, keys)   # a video waits only for nodes that run
        if camera:
            inputs.setdefault("camera", {}).update(camera)
        memory = people_memory(params_file, keys)   # the manager remembers in people_node's
        if memory:                                  # store
            inputs.setdefault("manager", {}).update(memory)
        managed = {k: {"managed": True} for k in keys if ns.managed and NODES[k].managed}
        overrides = setup_overrides(setup, params_file, keys, llm, inputs, managed,
                                    param_overrides(ns.param, keys))
        run_args = (setup, params_file, keys, ns.namespace, ns.log_level, overrides)
        if ns.dry_run:
            for key, cmd in process_commands(*run_args).items():
                print(f"{key}: {' '.join(cmd)}")
            return 0
        if ns.processes:
            return run_processes(*run_args)
        code = run_in_process(*run_args)
        # as a program (not called from Python with args): never hang on busy worker threads
        return end_program(code, "bringup") if args is None else code
    except BringupError as e:
        print(f"[bringup] {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
