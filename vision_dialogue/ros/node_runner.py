"""The one `main()` every node executable uses: DDS profile, `--help`, init, spin, clean exit."""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn, Sequence

from vision_dialogue.common.signal_flag import SignalFlag
from vision_dialogue.ros.console import direct_stderr, quiet_console, wants_verbose
from vision_dialogue.ros.dds import apply_default_profile

if TYPE_CHECKING:   # rclpy is imported after the DDS profile is set
    from rclpy.node import Node


def help_text(name: str, doc: str | None, params: Sequence = ()) -> str:
    """`<exe> --help`: the module's first docstring paragraph and the parameter table."""
    lines = [f"usage: {name} [--help] [--ros-args -p NAME:=VALUE ... "
             f"| --params-file FILE | -r FROM:=TO ...]", ""]
    if doc:
        lines += [doc.strip().split("\n\n")[0], ""]
    if params:
        lines.append("parameters (default):")
        for p in params:
            desc = " ".join(p.text().split())
            live = " [settable at run time]" if p.live else ""
            lines.append(f"  {p.name} ({p.default!r}){live}")
            lines.append(f"      {desc}")
    return "\n".join(lines)


def wants_help(args: Sequence[str]) -> bool:
    """-h/--help among the arguments before --ros-args."""
    user = list(args[1:])
    if "--ros-args" in user:
        user = user[:user.index("--ros-args")]
    return any(a in ("-h", "--help") for a in user)


def ros_args_error(err: Exception) -> str:
    """rcl's "failed to initialize rcl: Couldn't parse ...

    at arguments.c:352" -> the part a user can act on.
    """
    text = str(err).replace("failed to initialize rcl: ", "")
    text = text.split(", at /")[0].split(" Error: error not set")[0]
    return text.strip().rstrip(".")


class _held_stderr:
    """Hold what is written to file descriptor 2 (by rcl, in C) until the block ends.

    It is then written out, unless discard() was called: a bad argument gives one line, not
    rcl's two.
    """

    def __enter__(self):
        import tempfile
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._tmp = tempfile.TemporaryFile()
        os.dup2(self._tmp.fileno(), 2)
        self._keep = True
        return self

    def discard(self) -> None:
        self._keep = False

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        if self._keep:
            self._tmp.seek(0)
            os.write(2, self._tmp.read())
        self._tmp.close()
        return False


def run_node(factory: Callable[[], "Node"], name: str, args=None,
             threads: int | None = None, params: Sequence = (), doc: str | None = None,
             drain: bool = False) -> int:
    """Run one node: the body of every node executable's main().

    Creates the node with `factory` inside `with rclpy.init()` and spins it on a
    MultiThreadedExecutor until Ctrl-C or shutdown. Invalid parameters exit with code 2 and
    one line naming the parameter; `--help` prints the parameters and exits 0.

    drain=True (bag_record): Ctrl-C and SIGTERM stop the spinning but leave the context up, so
    `node.drain(executor)` can still take what DDS delivered just before (rclpy's own handler
    shuts the context down first, and those messages would be lost).
    """
    program = args is None     # run as a program, not called from Python (tests)
    args = list(sys.argv if args is None else args)
    if wants_help(args):
        try:
            print(help_text(name, doc, params), flush=True)
        except BrokenPipeError:        # `node --help | head`: the reader has had enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    code = _run(factory, name, args, threads, drain, program)
    return end_program(code, name) if program else code


def _run(factory, name: str, args: list, threads: int | None, drain: bool,
         program: bool) -> int:
    """run_node past --help: init, create, spin, close; the exit code."""
    verbose = wants_verbose(args)
    if program:
        quiet_console(verbose)   # third-party start-up noise off unless --verbose
        end_with_parent()
        stacks_on_request()
        signal.signal(signal.SIGALRM, signal.SIG_DFL)    # STOP_LIMIT_S's end, the kernel's
    apply_default_profile()   # before the first participant of this process
    import rclpy
    from rclpy._rclpy_pybind11 import RCLError
    bad_args = None
    if program and not drain:
        _no_interrupt_once_rclpy_stops()   # before init: rclpy's handler calls the one it found
    with _held_stderr() as held:
        try:
            init = rclpy.init(args=args, **_init_options(drain))
        except RCLError as e:     # e.g. `-p n:=` (no value): rcl cannot parse the arguments
            held.discard()        # rcl's own "[ERROR] [rcl]: Failed to parse ..." line
            bad_args = ros_args_error(e)
    if bad_args is not None:
        print(f"[{name}] invalid arguments: {bad_args}", file=sys.stderr)
        return 2
    with init:
        node = _create(factory, name, program)
        if isinstance(node, int):
            return node
        _spin(node, threads, drain, program)
    _ignore_stop_signals(program)   # rclpy's shutdown restored the handlers: still quiet
    return int(getattr(node, "exit_code", 0) or 0)   # a node may end in failure (manager)


PROGRAM_GRACE_S = 10.0
"""How long a program's exit waits for worker threads still busy after its nodes closed."""


def end_program(code: int, name: str, grace: float = PROGRAM_GRACE_S) -> NoReturn:
    """Exit with `code` once worker threads are done (at most `grace` s), without finalization.

    After an orderly stop (nodes closed, threads joined, context shut down) Python's
    finalization only frees memory, destroying rclpy's, the DDS library's and the models'
    native objects in no set order; on a loaded 2-core machine it once held a stopped manager
    past launch's SIGTERM (its stacks: no Python frame) and once ended a clean exit in SIGSEGV.
    Threads still busy (a local LLM in the middle of a generation) get `grace` seconds.
    """
    import logging

    from vision_dialogue.ros.console import restore_console
    deadline = time.monotonic() + grace
    busy = _busy_threads()
    while busy and time.monotonic() < deadline:
        busy[0].join(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        busy = _busy_threads()
    if busy:
        print(f"[{name}] exiting without waiting for {len(busy)} busy worker thread(s): "
              f"{', '.join(t.name for t in busy[:5])}", file=sys.stderr)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):    # a reader that went away, a closed stream
            pass
    restore_console()
    _drop_empty_stacks_file()
    os._exit(code)


def _drop_empty_stacks_file() -> None:
    faulthandler.cancel_dump_traceback_later()
    try:
        if _stacks_file is not None and _stacks_file.stat().st_size == 0:
            _stacks_file.unlink()
    except OSError:
        pass


def _busy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]


def _create(factory: Callable[[], "Node"], name: str, program: bool):
    """The node, or the exit code when it could not be made (bad parameter, Ctrl-C)."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    from vision_dialogue.ros.params import ParameterError
    try:
        return factory()
    except ParameterError as e:
        # a stop signal during the start's transitions fails them too ("the start failed")
        if rclpy.ok():
            print(f"[{name}] invalid parameter: {e}", file=sys.stderr)
            return 2
        return _stopped_while_starting(name, program)
    except (KeyboardInterrupt, ExternalShutdownException):
        return _stopped_while_starting(name, program)
    except Exception:
        # Ctrl-C while a slow node loads its models: rclpy's handler has shut the context
        # down, and the node's next publisher or subscription fails on it
        if rclpy.ok():
            raise
        return _stopped_while_starting(name, program)


def _stopped_while_starting(name: str, program: bool) -> int:
    """Ctrl-C or SIGTERM before the node was made: no traceback, exit 0."""
    _ignore_stop_signals(program)    # the second Ctrl-C (see _spin) while init ends
    print(f"[{name}] stopped while starting", file=sys.stderr)
    return 0


def _spin(node: "Node", threads: int | None, drain: bool, program: bool) -> None:
    """Spin until Ctrl-C or shutdown, then close and destroy the node."""
    from rclpy._rclpy_pybind11 import RCLError
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
    if program:
        watch_for_stop(node.context)
    try:
        executor = MultiThreadedExecutor(num_threads=threads)
    except (RCLError, RuntimeError):     # rcl's error, or rclpy's for a context shut down
        # the stop signal came after the node was made and before the executor (a loaded
        # machine's slow start): the context is gone, so end as any other stop does
        if node.context.ok():
            raise
        _ignore_stop_signals(program)
        stacks_if_slow_to_stop(program)
        _close(node)
        return
    executor.add_node(node)
    try:
        if drain and _spin_until_signal(executor):
            node.drain(executor)
        elif not drain:
            _spin_on(executor, node, program)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        # Ctrl-C shut the context down while the executor built its next wait set ("the
        # given context is not valid"): a shutdown like the others, not a failure
        if node.context.ok():
            raise
    finally:
        # Ctrl-C in a `ros2 launch` terminal reaches a node twice (the terminal's SIGINT to
        # the process group, then launch's own): the repeat must not break the clean-up
        # (transcript flush, threads joined) with a KeyboardInterrupt traceback.
        _ignore_stop_signals(program)
        stacks_if_slow_to_stop(program)
        _close(node, executor)


def _close(node: "Node", executor=None) -> None:
    """The node's own clean-up (transcript flush, threads joined), then the node destroyed."""
    close = getattr(node, "close", None)
    if callable(close):
        close()
    if executor is not None:
        executor.remove_node(node)
    node.destroy_node()
    if executor is not None:
        # its idle worker threads end now, not when the executor is collected: a reference
        # left somewhere (a loaded machine's late callback) kept them, and `end_program`
        # waited its whole grace for them while `ros2 launch` escalated to SIGKILL
        executor.shutdown(timeout_sec=0, wait_for_threads=False)


def _spin_on(executor, node: "Node", program: bool) -> None:
    """`executor.spin()`, which a failing callback ends: the error is logged, spinning goes on.

    A program spins in steps of at most STOP_POLL_S and also ends on STOP_REQUESTED, so a
    Ctrl-C stops it even when rclpy's own handling of it did not reach the executor.
    """
    if not program:
        spin_through_failures(executor.spin, node.get_logger(), node.context.ok)
        return

    def running() -> bool:
        return node.context.ok() and not STOP_REQUESTED.is_set()

    def spin() -> None:
        while running():
            executor.spin_once(timeout_sec=STOP_POLL_S)
    spin_through_failures(spin, node.get_logger(), running)
    if STOP_REQUESTED.is_set() and node.context.ok():   # often only not yet: rclpy's is async
        node.get_logger().debug("stopping on a signal before rclpy's handler acted on it")


def spin_through_failures(spin: Callable[[], None], logger, ok: Callable[[], bool]) -> None:
    """Call `spin()` until it returns, again after each failure, while `ok()`.

    rclpy re-raises a callback's exception from the executor (and an InvalidHandle when an
    endpoint is destroyed under another thread building its wait set), and the whole process
    would die of one bad message; a robot's component logs it (with its traceback, at most
    every 5 s, with the count) and keeps working. Ctrl-C, shutdown and rcl errors end it.
    """
    import traceback

    from rclpy._rclpy_pybind11 import RCLError
    from rclpy.executors import ExternalShutdownException
    failed = 0
    while ok():
        try:
            spin()
            return
        except (KeyboardInterrupt, ExternalShutdownException, RCLError):
            raise
        except Exception:  # noqa: BLE001 - logged; the node runs on
            failed += 1
            logger.error(f"a callback failed ({failed} so far; the node runs on):\n"
                         + traceback.format_exc(), throttle_duration_sec=5.0)


#: parents a node outlives: shells and terminal multiplexers, service managers
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "fish", "ksh", "tcsh", "csh", "tmux",
                    "tmux: server", "screen", "nohup", "systemd", "init", "su", "sudo", "sshd"})


STACKS_SIGNAL = signal.SIGUSR1
"""`kill -USR1 <pid>` prints every thread's stack of a running node to its stderr."""


def stacks_on_request() -> None:
    """Print every thread's stack on STACKS_SIGNAL (and on a crash): what a node is doing.

    A node that stays up after Ctrl-C is found stuck without a debugger (the tests send it
    before they kill a node that did not stop, so the stacks are in its log).
    """
    stderr = direct_stderr()    # past the console's pump: it stops when a thread hangs in C
    faulthandler.register(STACKS_SIGNAL, file=stderr, all_threads=True)
    faulthandler.enable(file=stderr)    # and a crash (SIGSEGV, SIGABRT) prints them too


STACKS_IF_STOP_TAKES_S = 4.0
"""A node still running this long after its stop began prints its stacks (launch escalates to
SIGTERM at 5 s, then kills): what held it is in the log of the run that showed it."""

STOP_LIMIT_S = 20
"""A node still running this long after its stop began is ended by the kernel (SIGALRM).

An orderly stop takes at most ~15 s (the conversation's 2 s, a frame in the observer, then
PROGRAM_GRACE_S for a busy worker). Past that it is stuck (a native deadlock in the DDS
library), and a node orphaned by `ros2 launch` on SIGTERM has nobody else to end it: it would
stay, latching old states to every later run in its domain.
"""

_started_by: int | None = None
"""The pid of the program that started this node, when this node ends with it (not a shell's:
`end_with_parent`)."""

_stacks_file: Path | None = None
"""Where an orphan's stop writes its stacks if slow; removed at exit when nothing was."""

_stop_armed = threading.Lock()
"""Taken by the first thread to arm the stop's stacks and limit: they are armed once."""


def stacks_if_slow_to_stop(program: bool) -> None:
    """Arm the stacks print of a stop that takes too long, and the kernel's end of one stuck.

    Once per process, by whichever thread sees the stop first (`watch_for_stop`, or the
    main thread's spin ending). The stacks go to stderr; to the ROS log directory when the
    parent that read our stderr is gone (launch killed with SIGTERM), where they would
    otherwise be lost.
    """
    if not program or not _stop_armed.acquire(blocking=False):
        return
    faulthandler.dump_traceback_later(STACKS_IF_STOP_TAKES_S, exit=False, file=_stacks_out())
    signal.alarm(STOP_LIMIT_S)   # SIGALRM has no handler (`_run`): the kernel ends the process


def watch_for_stop(context) -> threading.Thread:
    """A thread that arms the stop limit as the stop begins, whatever the main thread does.

    Fresh-clone runs showed why: after launch's SIGTERM a node's context was down (its face
    thread's publishes failed for 30 s) and its main thread never came back to arm anything
    (its signal handler had deadlocked: `SignalFlag`). The stop begins when the context is
    down, a stop signal is noted, or the program that started the node is gone. A daemon: it
    ends at the stop, or with the process (`end_program` exits without waiting for daemons).
    """
    def watch() -> None:    # the checks that take no lock first: `ok()` takes rclpy's
        while not STOP_REQUESTED.is_set() and \
                (_started_by is None or os.getppid() == _started_by) and context.ok():
            time.sleep(STOP_POLL_S)
        stacks_if_slow_to_stop(True)
    thread = threading.Thread(target=watch, name="vd-stop-watch", daemon=True)
    thread.start()
    return thread


def _stacks_out():
    global _stacks_file
    if _started_by is None or os.getppid() == _started_by:
        return direct_stderr()
    from rclpy.logging import get_logging_directory
    try:
        folder = Path(get_logging_directory())    # ROS_LOG_DIR, else ~/.ros/log
        folder.mkdir(parents=True, exist_ok=True)
        _stacks_file = folder / f"stop-stacks-{os.getpid()}.log"
        return open(_stacks_file, "w")      # noqa: SIM115 - faulthandler holds it
    except OSError:
        return direct_stderr()


def end_with_parent() -> None:
    """Get SIGTERM when the process that started this node dies (Linux; elsewhere nothing).

    `ros2 launch` killed with SIGTERM exits at once and leaves its nodes running ("using
    SIGTERM can result in orphaned processes", upstream); so does a crashed `bringup`. With
    this, each node then ends through its usual clean shutdown instead of running on alone.
    Not when a shell (or a service manager) started it: that parent may go on purpose.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    global _started_by
    PR_SET_PDEATHSIG = 1
    parent = os.getppid()
    try:    # started from a shell (`nohup node &`, then the shell closes): keep running
        name = Path(f"/proc/{parent}/comm").read_text().strip()
    except OSError:
        return
    if name in SHELLS:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    _started_by = parent           # its end is this node's stop (`watch_for_stop`)
    if os.getppid() != parent:     # the parent died before the request: end now
        os.kill(os.getpid(), signal.SIGTERM)


def _ignore_stop_signals(program: bool) -> None:
    """Ignore further SIGINT/SIGTERM: the node is already stopping.

    Only in a program's main thread: a node run from a test thread keeps Python's handling.
    """
    if program and threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)


STOP_POLL_S = 0.5
"""How often a program's spinning looks at STOP_REQUESTED (the stop rclpy's handler missed)."""

STOP_REQUESTED = SignalFlag()
"""Set by a program's own SIGINT/SIGTERM handler, which rclpy's handler calls after its own."""


def _no_interrupt_once_rclpy_stops() -> None:
    """Ctrl-C without a KeyboardInterrupt in the main thread, and noted for the spinning.

    rclpy's handler shuts the context down, which ends the spinning, and then calls Python's
    handler, whose KeyboardInterrupt came at whatever the main thread ran (once in a garbage
    collector's `__del__`, which printed a traceback). Ours only notes the stop: on loaded
    fresh machines rclpy's handler twice left a node spinning 15 s after Ctrl-C (its stacks:
    the main thread in `rcl_wait`, the context still up), and `_spin_on` ends on the note.
    """
    if threading.current_thread() is threading.main_thread():
        STOP_REQUESTED.clear()
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, lambda *_: STOP_REQUESTED.set())


def _init_options(drain: bool) -> dict:
    if not drain or threading.current_thread() is not threading.main_thread():
        return {}
    from rclpy.signals import SignalHandlerOptions
    return {"signal_handler_options": SignalHandlerOptions.NO}


def _spin_until_signal(executor) -> bool:
    """Spin until SIGINT/SIGTERM (True) or the context ends (False); our handlers, not rclpy's."""
    if threading.current_thread() is not threading.main_thread():
        executor.spin()        # called from a test thread: rclpy's handling, nothing to drain
        return False
    stop = SignalFlag()
    saved = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.is_set() and executor.context.ok():
            executor.spin_once(timeout_sec=0.1)
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    return stop.is_set()
