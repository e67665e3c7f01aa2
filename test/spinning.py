"""The one way a test spins an executor on a thread: stopped and joined before nodes go.

rclpy's `Executor.shutdown()` does not wait for a thread inside `spin()` (it destroys the
guard condition that thread waits on); a node destroyed under that thread left it at 100 % of
a core in `_wait_for_ready_callbacks`, holding the interpreter lock, and a CI run hung for
good. Here the thread spins `spin_once` until told to stop, is joined, and only then are the
executor shut down and the nodes destroyed. A thread that does not end within the time limit
fails the test with its stack.
"""
from __future__ import annotations

import sys
import threading
import traceback


class SpinThread:
    """`executor` spun on a thread of its own until `close()`; `nodes` destroyed by `close()`.

    Use as a context manager, or call `start()` and `close()`. A callback's exception ends the
    spinning and is raised again by `close()` (and shown by `alive()`).
    """

    def __init__(self, executor, nodes=(), name: str = "test-spin", step: float = 0.05):
        self.executor, self.nodes, self.step = executor, list(nodes), step
        for node in self.nodes:
            executor.add_node(node)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException
        try:
            while not self._stop.is_set() and self.executor.context.ok():
                self.executor.spin_once(timeout_sec=self.step)
        except ExternalShutdownException:
            pass
        except BaseException as e:  # noqa: BLE001 - kept for close() and alive()
            self.error = e

    def start(self) -> "SpinThread":
        self._thread.start()
        return self

    def alive(self) -> bool:
        """Whether it still spins (False after a callback's exception: see `error`)."""
        return self._thread.is_alive()

    def close(self, timeout: float = 30.0) -> None:
        """Stop spinning, join the thread, shut the executor down, destroy the nodes."""
        self._stop.set()
        if self._thread.ident is not None:
            self.executor.wake()
            self._thread.join(timeout)
            if self._thread.is_alive():
                frame = sys._current_frames().get(self._thread.ident)
                stack = "".join(traceback.format_stack(frame)) if frame else "?"
                raise AssertionError(f"the spin thread did not end in {timeout:g} s:\n{stack}")
        self.executor.shutdown(timeout_sec=timeout)
        for node in self.nodes:
            node.destroy_node()
        self.nodes = []
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def __enter__(self) -> "SpinThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
