"""A robot application driving the conversation: a behaviour-tree Sequence of skill goals.

Written as a third party writes it (rclpy and the package's action types only); the goals come
from a JSON file.

    python skill_client.py steps.json

Each step: {"skill": "say"|"ask"|"chat", "goal": {...fields...}, "wait": true,
"expect": "spoken", "cancel_on": "<feedback stage>", "after": [step, "<stage>"],
"await_stages": ["<stage>", ...]}. Like a Sequence node, it stops at the first step whose status
is not `expect` (when given). Prints one JSON line per event: ready, feedback, result, stages,
failed, done.

rclpy's ActionClient drops feedback that arrives after its goal's result (feedback is a topic,
the result a service: either may come first), so the client also reads the feedback topic
itself: a step's "stages" event lists every stage published for its goal, and `await_stages`
waits (at most `STAGES_WAIT_S`) for those that are still on their way.
"""
import json
import sys
import time

import rclpy
from rclpy.action import ActionClient

from vision_dialogue_interfaces.action import Ask, Chat, Say
from vision_dialogue_interfaces.msg import DialogueRole

KINDS = {"say": (Say, "skill/say"), "ask": (Ask, "skill/ask"), "chat": (Chat, "skill/chat")}
STAGES_WAIT_S = 20.0


def out(**event):
    print(json.dumps(event), flush=True)


def make_goal(kind, fields):
    goal = KINDS[kind][0].Goal()
    for key, value in fields.items():
        setattr(goal, key, DialogueRole(**value) if key == "role" else value)
    return goal


class Step:
    def __init__(self, i, spec, node, clients):
        self.i, self.spec = i, spec
        self.stages, self.handle, self.result, self.uuid = [], None, None, None
        client = clients[spec["skill"]]
        self.sent_at = time.monotonic()
        self.future = client.send_goal_async(make_goal(spec["skill"], spec.get("goal", {})),
                                             feedback_callback=self.on_feedback)
        self.future.add_done_callback(self.on_accepted)

    def on_accepted(self, fut):
        self.handle = fut.result()
        self.uuid = bytes(self.handle.goal_id.uuid)
        self.handle.get_result_async().add_done_callback(self.on_result)

    def on_feedback(self, msg):
        fb = msg.feedback
        self.stages.append(fb.stage)
        out(event="feedback", step=self.i, stage=fb.stage, text=fb.text)
        if fb.stage == self.spec.get("cancel_on") and self.handle is not None:
            self.handle.cancel_goal_async()

    def on_result(self, fut):
        r = fut.result().result
        self.result = {k: getattr(r, k) for k in r.get_fields_and_field_types()}
        # goal_status: action_msgs/GoalStatus (4 succeeded, 5 cancelled, 6 aborted; 0 unknown:
        # the server that answered did not know the goal)
        out(event="result", step=self.i, skill=self.spec["skill"],
            goal_status=fut.result().status,
            seconds=round(time.monotonic() - self.sent_at, 3), **self.result)


def read_feedback_topics(node):
    """Every stage published on the skills' feedback topics, by goal id, in order."""
    published = {}

    def on_message(msg):
        published.setdefault(bytes(msg.goal_id.uuid), []).append(msg.feedback.stage)
    for cls, name in KINDS.values():
        node.create_subscription(cls.Impl.FeedbackMessage, f"{name}/_action/feedback",
                                 on_message, 100)
    return published


def report_stages(node, started, published):
    """One "stages" event per step, once its `await_stages` are in; False when some never came."""
    deadline = time.monotonic() + STAGES_WAIT_S
    for step in started:
        wanted = set(step.spec.get("await_stages", ()))
        while not wanted <= set(published.get(step.uuid, ())) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        out(event="stages", step=step.i, stages=published.get(step.uuid, []))
        if not wanted <= set(published.get(step.uuid, ())):
            out(event="failed", step=step.i, why=f"stages never published: {sorted(wanted)}")
            return False
    return True


def main():
    steps = json.loads(open(sys.argv[1]).read())
    with rclpy.init():
        node = rclpy.create_node("application")
        clients = {k: ActionClient(node, cls, name) for k, (cls, name) in KINDS.items()}
        published = read_feedback_topics(node)
        for name, client in clients.items():
            if not client.wait_for_server(timeout_sec=60):
                out(event="failed", why=f"no {name} server")
                return 1
        out(event="ready")
        started = []
        for i, spec in enumerate(steps):
            after = spec.get("after")
            # the stage, or that step's end (its result can come before its last feedback)
            while after and after[1] not in started[after[0]].stages and \
                    started[after[0]].result is None:
                rclpy.spin_once(node, timeout_sec=0.05)
            step = Step(i, spec, node, clients)
            started.append(step)
            if not spec.get("wait", True):
                continue
            while step.result is None:
                rclpy.spin_once(node, timeout_sec=0.05)
            if "expect" in spec and step.result["status"] != spec["expect"]:
                out(event="failed", step=i)
                return 1
        while any(s.result is None for s in started):
            rclpy.spin_once(node, timeout_sec=0.05)
        if not report_stages(node, started, published):
            return 1
        out(event="done")
        node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
