"""Managed (lifecycle) nodes: configure, activate, deactivate, cleanup, as ROS 2 defines them.

A `ManagedNode` is an rclpy `LifecycleNode`: it answers the standard `lifecycle_msgs` services
(`<node>/change_state`, `get_state`, ...) and publishes `<node>/transition_event`, so nav2's
`lifecycle_manager` or `ros2 lifecycle set` can drive it. A node declares its parameters in
its constructor and splits the rest in four:

* `configure()`: check what it needs and build (publishers, the source); raise
  `ConfigureError` (or ParameterError) with the reason to refuse;
* `activate()` / `deactivate()`: start and stop the work (capture, timers), keeping what
  configure built;
* `cleanup()`: release what configure built.

By default (`managed:=false`) the node configures and activates itself at the end of its
construction, as a plain node starts, and a refused configure ends the executable with the
reason; it still answers the lifecycle services, so it can be deactivated and reactivated.
With `managed:=true` it waits, unconfigured, for a lifecycle manager; a refused configure is
a FAILURE of that transition with the reason logged, and the node keeps running.
"""
from __future__ import annotations

import functools
import time
import traceback
from typing import Callable

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from vision_dialogue.common.health import ERROR, OK, Health
from vision_dialogue.ros.params import Param, ParameterError
from vision_dialogue.ros.teardown import DestroyedWhole

MANAGED_PARAM = Param("managed", False, "Wait, unconfigured, for a lifecycle manager (nav2's "
                      "lifecycle_manager, `ros2 lifecycle set`) to configure and activate this "
                      "node; false: configure and activate at start (the lifecycle services "
                      "still answer).")


class ConfigureError(Exception):
    """What a node needs is not there (a missing file, a device that does not open)."""


class ManagedNode(DestroyedWhole, LifecycleNode):
    """A LifecycleNode whose transitions call configure/activate/deactivate/cleanup."""

    def __init__(self, node_name: str, **kwargs):
        #: why the last transition failed ("configure", the error); None after a good one
        self.transition_error: tuple[str, Exception] | None = None
        self.active = False
        self.ignored_inactive = 0      # messages a when_active callback ignored
        self._quiet = False
        super().__init__(node_name, **kwargs)

    def start_lifecycle(self, managed: bool) -> None:
        """At the end of the constructor: configure and activate now, unless `managed`."""
        if managed:
            self.get_logger().info("managed: waiting for a lifecycle manager to configure "
                                   "and activate this node")
            return
        self._quiet = True                  # a failure here is raised, not logged twice
        try:
            for step in (self.trigger_configure, self.trigger_activate):
                if step() != TransitionCallbackReturn.SUCCESS:     # the reason, as raised
                    raise (self.transition_error[1] if self.transition_error
                           else ParameterError("the start failed"))
        finally:
            self._quiet = False

    def when_active(self, callback: Callable, what: str) -> Callable:
        """`callback`, which ignores what comes while the node is not active.

        For subscriptions whose work an inactive node must not do (a reply, a line heard);
        one log line every 10 s says what was ignored. The signature is kept (functools.wraps),
        so rclpy still passes MessageInfo where `callback` takes it.
        """
        last_logged = [-1e9]

        @functools.wraps(callback)
        def gated(*args):
            if self.active:
                return callback(*args)
            self.ignored_inactive += 1
            if time.monotonic() - last_logged[0] >= 10.0:     # each kind of message apart
                last_logged[0] = time.monotonic()
                self.get_logger().info(f"inactive (lifecycle): {what} ignored")
            return None
        return gated

    def lifecycle_health(self, part: str, values: dict | None = None) -> list[Health] | None:
        """/diagnostics while not active: a refused configure (ERROR, why) or inactive (OK).

        None when active. `values`: the node's counters, shown either way.
        """
        if self.active:
            return None
        values = values or {}
        if self.transition_error is not None:
            what, error = self.transition_error
            return [Health(part, ERROR, f"cannot {what}: {error}", values)]
        state = self._state_machine.current_state[1]
        return [Health(part, OK, f"inactive (lifecycle: {state})", values)]

    # what a node fills in
    def configure(self) -> None:
        """Check and build; raise ConfigureError or ParameterError to refuse."""

    def activate(self) -> None:
        """Start the work."""

    def deactivate(self) -> None:
        """Stop the work, keep what configure built."""

    def cleanup(self) -> None:
        """Release what configure built."""

    # the lifecycle callbacks (rclpy turns an exception in one into a bare ERROR, unsaid:
    # each is caught here, logged with its reason and kept for start_lifecycle)
    def _step(self, what: str, fn) -> TransitionCallbackReturn:
        """`fn()`; an error fails the transition, is logged and kept.

        The first error of a transition is kept: the clean-up after a refused configure does
        not hide its reason.
        """
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - said, and the node keeps running
            if self.transition_error is None:
                self.transition_error = (what, e)
            if not self._quiet:
                expected = isinstance(e, (ConfigureError, ParameterError))
                self.get_logger().error(f"cannot {what}: {e}" if expected else
                                        f"cannot {what}: {type(e).__name__}: {e}\n"
                                        + traceback.format_exc())
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.transition_error = None
        result = self._step("configure", self.configure)
        if result != TransitionCallbackReturn.SUCCESS:
            self._step("clean up", self.cleanup)
        return result

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.transition_error = None
        # active before activate() runs: what it starts (the speech node's script, on its own
        # thread) may publish at once, and a line said before the flag was set was dropped
        self.active = True
        result = self._step("activate", self.activate)
        if result == TransitionCallbackReturn.SUCCESS:
            return super().on_activate(state)
        self.active = False
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self._step("deactivate", self.deactivate)
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._step("clean up", self.cleanup)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self.active:
            self.active = False
            self._step("deactivate", self.deactivate)
        return self._step("clean up", self.cleanup)
