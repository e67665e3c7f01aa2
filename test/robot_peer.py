"""A robot's own nodes, as a third party writes them: a Trigger service and a GoTo action.

Run as a process (tests only): `python robot_peer.py`. It serves `/wave_hand`
(std_srvs/srv/Trigger) and `/go_to` (vd_test_robot/action/GoTo, built by the tests), and prints
one line per thing it does, for the test to read: `WAVED`, `GOAL <place> <speed>`,
`FEEDBACK <remaining>`, `ARRIVED <place>`, `CANCELLED <place>`. A walk takes 0.6 s, 4 s to "the
garden" (past the reply deadline), or 120 s to "the moon" (for a cancel), with feedback every
0.1 s. Nothing in it knows vision_dialogue.
"""
import sys
import time

import rclpy
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from std_srvs.srv import Trigger
from vd_test_robot.action import GoTo


def say(line):
    print(line, flush=True)


def main():
    with rclpy.init():
        node = rclpy.create_node("robot_peer")
        group = ReentrantCallbackGroup()

        def wave(request, response):
            say("WAVED")
            response.success, response.message = True, "waved with the right hand"
            return response

        def go(handle):
            place, speed = handle.request.place, handle.request.speed
            say(f"GOAL {place} {speed:g}")
            steps = {"the moon": 1200, "the garden": 40}.get(place, 6)
            for k in range(steps):
                if handle.is_cancel_requested:
                    handle.canceled()
                    say(f"CANCELLED {place}")
                    return GoTo.Result(arrived=False, place=place)
                fb = GoTo.Feedback(stage="walking", remaining=float(steps - k))
                handle.publish_feedback(fb)
                say(f"FEEDBACK {steps - k}")
                time.sleep(0.1)
            handle.succeed()
            say(f"ARRIVED {place}")
            return GoTo.Result(arrived=True, place=place)

        node.create_service(Trigger, "/wave_hand", wave, callback_group=group)
        ActionServer(node, GoTo, "/go_to", go, callback_group=group,
                     cancel_callback=lambda handle: CancelResponse.ACCEPT)
        ex = MultiThreadedExecutor(num_threads=4)
        ex.add_node(node)
        say("READY")
        try:
            ex.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass


if __name__ == "__main__":
    sys.exit(main())
