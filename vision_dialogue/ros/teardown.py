"""Nodes destroyed whole, at a known moment: after a refused constructor, and at the end.

* A node whose constructor raises (a bad parameter, a missing file) is half built: rcl holds
  its participant entities and its context still tracks it. Left to the garbage collector, it
  is destroyed whenever the collector runs, possibly after its context was shut down, and
  rclpy then crashes the process (a segmentation fault seen in the test suite, in the
  constructor of a later node). Here it is destroyed before the error leaves the constructor.
* rclpy's `Node.destroy_node()` leaves the node's action servers and clients alive, and
  they keep the node's handle in use: its rcl node, and with the last one the DDS
  participant, was then finalized by the garbage collector at interpreter exit, where Fast DDS
  waited forever on a listener with the interpreter lock held (a manager at 100 % of a core
  after `ros2 launch` was stopped with SIGTERM). Here they are destroyed first.
* rclpy's `LifecycleNode.destroy_node()` leaves the lifecycle state machine alive, and it too
  holds the rcl node: the node stayed in the ROS graph, and a test process kept one DDS
  participant (a dozen threads) per lifecycle node made until the collector ran, which then
  destroyed it in C with the interpreter lock held, in the middle of a later test (CI's
  worker stuck six minutes so). Here the state machine goes right after the node, held in use
  through each transition: a stop inside one (the context shut down by a signal in a
  callback) destroys the node there, and rclpy's last step of the transition then used a
  state machine destroyed at once (the process crashed).
"""
from __future__ import annotations

import functools


def _destroy_half_built(node) -> None:
    """`node.destroy_node()`, or ours and rclpy's where the node's override needs unbuilt parts."""
    try:
        node.destroy_node()
    except Exception:  # noqa: BLE001 - an override that needs parts never built
        try:
            DestroyedWhole.destroy_node(node)
        except Exception:  # noqa: BLE001 - rclpy's own init failed: nothing to destroy
            pass


class DestroyedWhole:
    """Mixin before an rclpy node class: see the module docstring.

    Each subclass's `__init__` is wrapped; only the outermost destroys the node, once.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_destroys_when_refused", False):
            return

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            outermost = "_vd_building" not in self.__dict__
            if outermost:
                self.__dict__["_vd_building"] = True
            try:
                init(self, *args, **kw)
            except BaseException:
                if outermost:
                    _destroy_half_built(self)
                raise
            finally:
                if outermost:
                    self.__dict__.pop("_vd_building", None)
        __init__._destroys_when_refused = True
        cls.__init__ = __init__

    def _LifecycleNodeMixin__change_state(self, transition_id: int):  # noqa: N802 - rclpy's
        """A lifecycle node's transition (rclpy's private one), its state machine held in use.

        Its destruction (destroy_node, below) then waits until the transition is done.
        """
        with self._state_machine:
            return super()._LifecycleNodeMixin__change_state(transition_id)

    def destroy_node(self):
        """Its action servers and clients, then rclpy's destroy_node, then its state machine.

        Only those: a publisher's or subscription's event handlers are its own, destroyed
        with it by rclpy (destroying one alone under a spinning executor breaks its next
        wait set). Each is taken off the node before its handle goes.
        """
        from rclpy.action import ActionClient, ActionServer
        for waitable in list(getattr(self, "waitables", ())):
            if isinstance(waitable, (ActionServer, ActionClient)):
                try:
                    waitable.destroy()      # removes itself from the node's waitables
                except Exception:  # noqa: BLE001 - already destroyed
                    pass
        try:
            return super().destroy_node()
        finally:
            machine = self.__dict__.get("_state_machine")     # a LifecycleNode's
            if machine is not None:
                machine.destroy_when_not_in_use()             # then the rcl node goes
