"""A robot action that matters is done only after the person says yes (ROS-free).

A tool declared `confirm` in the robot tools file (application/robot_tools.py) is not called when
the LLM first asks for it: the turn's reply is the robot's question ("Shall I go to the kitchen?")
and the call waits here. The person's next line answers it, read by the Ask skill's yes/no
reader (llm/answers.yes_or_no): a yes makes the call in that turn; a no, a line that is
neither, or no line within the tool's `confirm_within` seconds makes none, and the LLM reads a
tool result saying it was not called and why. The question is a turn of its own, so it works
with every speech setup (a half-duplex voice hears the answer once the question is said).
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from typing import Callable

from vision_dialogue.llm.answers import yes_or_no
from vision_dialogue.llm.tool_loop import ToolOutcome
from vision_dialogue.llm.written_calls import ToolCall

_ids = itertools.count(1)


def call_key(name: str, arguments: dict) -> str:
    """One call's identity: its name and its checked arguments."""
    return f"{name} {json.dumps(arguments, sort_keys=True, default=str)}"


@dataclass(frozen=True)
class PendingCall:
    """A call the robot asked about and waits to hear yes to."""

    name: str
    arguments: dict
    question: str
    asked_at: float               # the clock's time
    within: float                 # seconds the answer may take

    def unanswered(self) -> str:
        """Why the call is not made when no answer came in time."""
        return f"the person gave no answer within {self.within:g} s to \"{self.question}\""


@dataclass(frozen=True)
class Verdict:
    """How a question was answered: `yes`, or why the call is not made."""

    yes: bool
    why: str = ""                  # "" for a yes
    reported: bool = False         # logged when it came (no answer in time)


@dataclass(frozen=True)
class Held:
    """A call not made now: what the LLM reads, and the stage for the monitor and transcript."""

    outcome: ToolOutcome
    stage: str                     # "asked", "not_confirmed", "" (reported when it came)
    detail: str


class Confirmations:
    """The calls that wait for a yes (at most one per call key), and the verdicts given.

    `ask` when the LLM first calls; `resolve(line)` at the start of the person's next turn;
    `take` when the call comes round again: the verdict, used once.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, PendingCall] = {}
        self._verdicts: dict[str, Verdict] = {}
        self._expired: list[PendingCall] = []     # no answer in time; not yet told the LLM

    def ask(self, name: str, arguments: dict, question: str, within: float) -> None:
        """The robot asks `question` before `name(arguments)`; the call waits."""
        with self._lock:
            self._pending[call_key(name, arguments)] = PendingCall(
                name, dict(arguments), question, self.clock(), float(within))

    def expire(self) -> list[PendingCall]:
        """The calls whose answer did not come in time: each gets its no (see `resolve`).

        Called often (the manager's timer), so the log and the monitor tell at once.
        """
        now = self.clock()
        out = []
        with self._lock:
            for key, p in list(self._pending.items()):
                if now - p.asked_at > p.within:
                    self._verdicts[key] = Verdict(False, p.unanswered(), reported=True)
                    self._expired.append(self._pending.pop(key))
                    out.append(p)
        return out

    def resolve(self, line: str) -> list[ToolCall]:
        """The waiting calls, answered by the person's `line`: the calls to run now.

        Each gets its verdict (see `take`): yes when the line opens with a clear yes and came
        in time; otherwise the reason it is not called. The calls that expired since the last
        line come too, so the LLM reads that they were not made.
        """
        self.expire()
        answer = yes_or_no(line)
        with self._lock:
            out = [ToolCall(f"confirm_{next(_ids)}", p.name, dict(p.arguments))
                   for p in self._expired]
            self._expired.clear()
            for key, p in list(self._pending.items()):
                if answer is True:
                    verdict = Verdict(True)
                elif answer is False:
                    verdict = Verdict(False, f"the person said no to \"{p.question}\"")
                else:
                    verdict = Verdict(False, f"the person did not say yes to \"{p.question}\" "
                                             f"(they said \"{line.strip()}\")")
                self._verdicts[key] = verdict
                out.append(ToolCall(f"confirm_{next(_ids)}", p.name, dict(p.arguments)))
            self._pending.clear()
        return out

    def take(self, name: str, arguments: dict) -> Verdict | None:
        """The verdict on this call, used once; None when it was never asked about."""
        with self._lock:
            return self._verdicts.pop(call_key(name, arguments), None)

    def hold(self, tool, given: dict, values: dict) -> Held | None:
        """Before calling `tool` (application/robot_tools.RobotTool) with checked `values`.

        None: call it (no `confirm`, or the person said yes). Otherwise the call is held: the
        robot asks first (its question is the reply), or the answer was not a yes.
        """
        if not tool.confirm:
            return None
        verdict = self.take(tool.name, values)
        if verdict is None:
            question = tool.question(given, values)
            self.ask(tool.name, values, question, tool.confirm_within)
            return Held(ToolOutcome(ask=question), "asked", question)
        if verdict.yes:
            return None
        return Held(ToolOutcome(error=f"not called, because {verdict.why}"),
                    "" if verdict.reported else "not_confirmed", verdict.why)
