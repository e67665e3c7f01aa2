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

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from vision_dialogue.ros.params import Param, ParameterError

MANAGED_PARAM = Param("managed", False, "Wait, unconfigured, for a lifecycle manager (nav2's "
                      "lifecycle_manager, `ros2 lifecycle set`) to configure and activate this "
                      "node; false: configure and activate at start (the lifecycle services "
                      "still answer).")


class ConfigureError(Exception):
    """What a node needs is not there (a missing file, a device that does not open)."""


class ManagedNode(LifecycleNode):
    """A LifecycleNode whose transitions call configure/activate/deactivate/cleanup."""

    def start_lifecycle(self, managed: bool) -> None:
        """At the end of the constructor: configure and activate now, unless `managed`."""
        self.configure_error: Exception | None = None
        self.active = False
        if managed:
            self.get_logger().info("managed: waiting for a lifecycle manager to configure "
                                   "and activate this node")
            return
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            raise self.configure_error or ParameterError("configure failed")
        self.trigger_activate()

    # what a node fills in
    def configure(self) -> None:
        """Check and build; raise ConfigureError or ParameterError to refuse."""

    def activate(self) -> None:
        """Start the work."""

    def deactivate(self) -> None:
        """Stop the work, keep what configure built."""

    def cleanup(self) -> None:
        """Release what configure built."""

    # the lifecycle callbacks
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.configure()
        except (ConfigureError, ParameterError) as e:
            self.configure_error = e
            self.get_logger().error(f"cannot configure: {e}")
            self.cleanup()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.activate()
        self.active = True
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self.deactivate()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.cleanup()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self.active:
            self.active = False
            self.deactivate()
        self.cleanup()
        return TransitionCallbackReturn.SUCCESS
