"""The one `main()` every node executable uses: init, build the node, spin, shut down cleanly."""
from __future__ import annotations

import sys
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

from vision_dialogue.ros_params import ParameterError


def run_node(factory: Callable[[], "rclpy.node.Node"], name: str, args=None,
             threads: int | None = None) -> int:
    """Create the node with `factory` inside `with rclpy.init()` and spin it on a
    MultiThreadedExecutor until Ctrl-C or shutdown. Invalid parameters exit with code 2 and
    one line naming the parameter."""
    with rclpy.init(args=args if args is not None else sys.argv):
        try:
            node = factory()
        except ParameterError as e:
            print(f"[{name}] invalid parameter: {e}", file=sys.stderr)
            return 2
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            executor.remove_node(node)
            node.destroy_node()
    return 0
