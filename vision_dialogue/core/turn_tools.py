"""Visual ChatGPT's side of a turn: which tools it offers and the tool-call loop that runs them.

The tools are the providers' (the manager's VFM bridge, the robot's own actions) and look_back
(core/lookback.py); each provider that offers a tool adds its system note (`note`, else
TOOLS_NOTE). The loop itself is llm/tool_loop.py. ROS-free.
"""
from __future__ import annotations

import contextlib
import json
import logging
from typing import Callable, ContextManager, Iterable

from vision_dialogue.core.action_choice import ActionChooser, chooser_for, claims_action
from vision_dialogue.llm.answers import yes_or_no
from vision_dialogue.core.entries import Entry, ToolEntry
from vision_dialogue.core.lookback import LOOK_BACK, LOOK_BACK_NOTE, LookBack, ToolSet
from vision_dialogue.llm.base import short_question
from vision_dialogue.llm.tool_loop import (TOOLS_NOTE, AgentResult, ToolRecord, run_tool_loop,
                                           stream_tool_loop)


class ToolProvider:
    """What `Conversation.set_tools` needs (the manager's VFM bridge implements it).

    `schemas()` -> OpenAI function specs offered now (may be empty: no tools this turn);
    `run(name, args)` -> llm.tool_loop.ToolOutcome; `note`: the system note offered with them.
    """

    note = TOOLS_NOTE

    def schemas(self) -> list[dict]:  # pragma: no cover - interface
        raise NotImplementedError

    def run(self, name: str, args: dict):  # pragma: no cover - interface
        raise NotImplementedError


class TurnTools:
    """The tools of a conversation's turns and the loop that calls them.

    `config`: the ConversationConfig (model, reply tokens, stream, look_back, image policy);
    `emit(entry)`: the conversation's listeners (a ToolEntry for each call).
    """

    def __init__(self, backend, config, look_back: LookBack, emit: Callable[[Entry], None],
                 logger: logging.Logger, show_images: bool):
        self.backend, self.config, self.look_back = backend, config, look_back
        self._emit, self.log = emit, logger
        self.providers: list[ToolProvider] = []
        self.max_rounds = 3
        self.show_images = show_images           # images the tools make go to the LLM
        self._offered = ToolSet()
        self._chooser: tuple[str, ActionChooser | None] = ("", None)   # (its tools, it)
        self._decided_now: list | None = None      # this turn's decision (None: the reply's)
        # the reply deadline's pause (deadlines.FirstBy.pause) while the robot acts
        self.pausing: Callable[[], ContextManager] = contextlib.nullcontext

    @property
    def supported(self) -> bool:
        """Whether the backend can call tools (has complete_with_tools)."""
        return callable(getattr(self.backend, "complete_with_tools", None))

    @property
    def streamed(self) -> bool:
        """Replies stream, and the backend streams them with tools offered."""
        return self.config.stream and callable(getattr(self.backend, "stream_with_tools", None))

    @property
    def provider(self) -> ToolProvider | None:
        """Return the tools set first (the VFM bridge where there is one); None: none."""
        return self.providers[0] if self.providers else None

    def schemas(self, past: bool = False) -> list[dict]:
        """The tools of this turn: the providers' (VFM, the robot's) tools, and look_back.

        look_back comes on every turn of a backend that streams with tools; otherwise (a turn
        with tools is then not streamed) when the person asks about the past or other tools
        are offered anyway, so look-back alone does not cost every turn that. A backend with
        `simple_tool_use` (a small local model) is offered only its providers' tools, and
        gets one round of calls, then is told how they went (tool_loop.outcome_note).
        """
        self._decided_now = None
        if not self.supported:
            return []
        simple = getattr(self.backend, "simple_tool_use", False)
        offer = self.config.look_back and not simple and \
            (past or bool(self.providers) or self.streamed)
        self._offered = ToolSet(*self.providers, self.look_back if offer else None,
                                on_error=lambda e: self.log.warning(
                                    f"tools unavailable this turn ({type(e).__name__}: {e})"))
        schemas = self._offered.schemas()
        if [s["function"]["name"] for s in schemas] == [LOOK_BACK] and not past \
                and not self.streamed:
            return []          # the VFM tools are gone this turn: stream as usual
        return schemas

    def instructions(self) -> list[str]:
        """Every note the tools may put in a prompt: look-back's and each provider's.

        The reply filter drops a sentence that reads one out (a small model does).
        """
        return [LOOK_BACK_NOTE, TOOLS_NOTE] + [getattr(p, "note", TOOLS_NOTE)
                                               for p in self.providers]

    def acting_names(self) -> set[str]:
        """The names of the tools that move the robot (a provider's `acts`)."""
        return {s["function"]["name"] for p in self.providers if getattr(p, "acts", False)
                for s in p.schemas()}

    def verbs(self) -> set[str]:
        """The verbs of the actions the providers offer (`verbs`: the robot's tools)."""
        if not self.supported:
            return set()
        return set().union(*(getattr(p, "verbs", ()) for p in self.providers))

    def claims_undone(self, sentence: str, records: list[ToolRecord], line: str) -> bool:
        """Whether `sentence` says the robot did, or does now, an action no tool ran.

        Only on a turn whose actions were decided first (the reply comes after its calls, so
        none can follow) and that ran none, to a line that is not a question (to "Did you go
        to the kitchen?" an earlier turn's action may be told): a small model copies the
        person's line ("I went to the library yesterday.") or its own earlier replies ("I
        will go to the kitchen.") as if it had acted.
        """
        if self._decided_now is None or line.rstrip().endswith("?"):
            return False
        acting = self.acting_names()
        if any(r.name in acting for r in records):
            return False
        return claims_action(sentence, sorted(self.verbs()))

    def stream(self, msgs: list, schemas: list, turn_id: int,
               records: list[ToolRecord], line: str = "") -> Iterable[str]:
        """The tool-call loop for one turn, streamed: sentences as they come.

        `line`: the person's words, from which the robot's actions may be decided first.
        """
        msgs, kwargs = self._loop(msgs, schemas, turn_id, records, line)
        return stream_tool_loop(self.backend, msgs, schemas, self._run,
                                AgentResult("", 0), **kwargs)

    def reply(self, msgs: list, schemas: list, turn_id: int,
              records: list[ToolRecord], line: str = "") -> str:
        """The tool-call loop for one turn: the reply text (the caller filters it).

        Every tool call is appended to `records` as it completes; raises on an LLM failure.
        """
        msgs, kwargs = self._loop(msgs, schemas, turn_id, records, line)
        return run_tool_loop(self.backend, msgs, schemas, self._run, **kwargs).text

    def decides_first(self, schemas: list) -> bool:
        """Whether this turn's robot actions are decided before the reply (DECIDE_ACTIONS).

        Only when every tool offered is one of the robot's actions: the VFM tools and
        look_back are the reply's to call.
        """
        mode = self.config.decide_actions
        if mode == "in_reply" or (mode == "auto" and
                                  not getattr(self.backend, "simple_tool_use", False)):
            return False
        acting = self.acting_names()
        return bool(acting) and all(s["function"]["name"] in acting for s in schemas)

    def decide(self, schemas: list, line: str) -> list | None:
        """The calls `line` asks for, decided on a short prompt.

        []: none; None: the reply's to decide (not decided first, or the decision failed).
        """
        if not line.strip() or not self.decides_first(schemas):
            return None
        key = json.dumps(schemas, sort_keys=True)
        if self._chooser[0] != key:
            self._chooser = (key, chooser_for(schemas, self._ask, self.log))
        chooser = self._chooser[1]
        if chooser is None:
            return None
        try:
            calls = chooser.choose(line)
        except Exception as e:  # noqa: BLE001 - an LLM failure: the reply decides as before
            self.log.warning(f"robot action not decided first ({type(e).__name__}: {e}); "
                             "the reply may call it")
            return None
        self.log.info(f"decided first: {[(c.name, c.arguments) for c in calls] or 'no action'}")
        return calls

    def _ask(self, messages: list, max_tokens: int, json_schema: dict | None = None) -> str:
        """One short completion for the chooser (its own cache where the backend has one)."""
        return short_question(self.backend, messages, max_tokens, json_schema, side=True,
                              model=self.config.model)

    def _run(self, name: str, args: dict):
        """Run one tool; the reply deadline waits while the robot acts (a provider's `acts`)."""
        acts = getattr(self._offered.owner(name), "acts", False)
        with self.pausing() if acts else contextlib.nullcontext():
            return self._offered.run(name, args)

    def answered(self, line: str) -> list:
        """The calls that waited for the person's yes, answered by `line` (ToolCalls).

        A provider that asks before it acts (`answered(line)`: the robot's tools declared
        `confirm`) gives each call waiting for a yes; whether it is made is the provider's
        verdict when the call comes round (application/confirmation.py).
        """
        if not line.strip():
            return []
        calls = []
        for p in self.providers:
            answer = getattr(p, "answered", None)
            if callable(answer):
                calls.extend(answer(line))
        return calls

    def _decided(self, schemas: list, line: str) -> list | None:
        """The calls this turn makes before the reply: answered questions, then the chooser's.

        A yes to the robot's question is the turn's action; any other line may ask for one of
        its own.
        """
        answered = self.answered(line)
        if answered and yes_or_no(line) is True:
            return answered
        chosen = self.decide(schemas, line)
        return answered + (chosen or []) if answered else chosen

    def _loop(self, msgs: list, schemas: list, turn_id: int,
              records: list[ToolRecord], line: str) -> tuple[list, dict]:
        """The prompt with the tools' notes, and the loop's keyword arguments for one turn."""
        cfg = self.config
        decided = self._decided_now = self._decided(schemas, line)
        # right before the person's line: the prompt's start stays as the last reply read it
        # (a local model's cached prefix), and the line stays last
        notes = [{"role": "system", "content": n} for n in self._offered.notes()]
        users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
        at = users[-1] if users else len(msgs)
        msgs = msgs[:at] + notes + msgs[at:]

        def on_tool(rec: ToolRecord) -> None:
            records.append(rec)
            o = rec.outcome
            self.log.info(f"turn {turn_id}: tool {rec.name}({rec.arguments}) -> "
                          + (f"error: {o.error}" if o.error else o.image_file or
                             (o.text or "")[:80]))
            self._emit(ToolEntry(turn_id, rec))

        return msgs, dict(max_rounds=self.max_rounds, model=cfg.model,
                          one_round=getattr(self.backend, "simple_tool_use", False),
                          max_tokens=cfg.max_reply_tokens, image_parts=self.show_images,
                          image_detail=cfg.policy.detail, on_tool=on_tool, logger=self.log,
                          decided=decided)
