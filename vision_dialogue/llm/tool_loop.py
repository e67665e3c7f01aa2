"""The tool-call loop: tools offered to the LLM as OpenAI function tools (Visual ChatGPT).

ROS-free. Given a backend with ``complete_with_tools`` (see llm/openai_backend.py), the reply
prompt, the tool schemas and an executor ``run_tool(name, args) -> ToolOutcome``,
`run_tool_loop` lets the LLM call tools for up to ``max_rounds`` rounds and returns its final
reply text::

    round k: ask the LLM (tools offered) -> no tool calls: its text is the reply
             -> tool calls: append the assistant message with its calls, run each tool,
                append one `tool` message per call (the result text, "The new image is
                <file>." or "Error: ..."), optionally followed by one `user` message that
                shows the new images to a vision LLM; next round.
    after max_rounds rounds of calls: one last request with tool_choice="none" and a note
    asking for the answer now.

Failures never raise out of a tool: an unknown tool name, missing/invalid arguments, a tool
error or timeout all go back to the LLM as a tool message starting with "Error:", so it can
say so in character. An LLM failure (BackendError) does raise; the caller falls back.

The function specs of the VFM tools come from vfm/tool_schemas.py.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

__all__ = ["ToolOutcome", "ToolRecord", "AgentResult", "run_tool_loop", "stream_tool_loop",
           "TOOLS_NOTE", "FINAL_NOTE", "outcome_note", "round_note", "questions"]

_log = logging.getLogger("vision_dialogue.tool_loop")

#: System note added to the reply prompt when tools are offered.
TOOLS_NOTE = (
    "You have tools that look closer at what you see or make pictures (function calls). "
    "Use one only when the person asks for something you cannot do by just looking, e.g. "
    "reading small text, editing or drawing a picture. Without image_file a tool works on "
    "what you see now (your eyes). Every image a tool makes gets a file name such as "
    "\"3f2a_pix2pix_1b2c_1b2c.png\"; give that name as image_file to work on it again, and "
    "never invent a file name. Do not read file names out loud: talk about the picture. "
    "If a tool reports an error, tell the person in your own words, in character.")

#: Note added before the last request once the round limit is reached.
FINAL_NOTE = ("[No more tools this turn. Answer the person now, in character, with what you "
              "have.]")


def outcome_note(records: Sequence["ToolRecord"]) -> str:
    """The last request's note for a small model (`one_round`): how its calls went.

    A 1.5B model given only the tool message repeats the call or reads the result out; told
    in one line what worked, it says so in its own words (benchmarks/bench_robot_tools.py).
    """
    return (f"[{_went(records)}. Now tell the person in one short sentence, speaking as "
            "\"I\", what you did or could not do. No tool call, no JSON.]")


def round_note(records: Sequence["ToolRecord"]) -> str:
    """The note after a round's tool messages: how the calls went, in words.

    Read from the tool messages alone, the 1.5B model behind llama.cpp's server answered a
    walk that arrived with "I'm sorry, but I cannot assist with that."
    """
    return f"[{_went(records)}. Tell the person, speaking as \"I\", what you did or could not do.]"


def _went(records: Sequence["ToolRecord"]) -> str:
    return "; ".join(f"{r.name} worked" if r.outcome.ok else
                     f"{r.name} waits for the person's yes" if r.outcome.ask else
                     f"{r.name} did NOT work ({r.outcome.error})" for r in records)


@dataclass
class ToolOutcome:
    """What a tool gave back.

    `text` (image-to-text), `image_file` (a new image in the store), or `error` (anything that went
    wrong). `image_url`: optional data URL of the new image, shown to a vision LLM after the tool
    message. `ask`: nothing was done yet; the robot asks the person this first (a robot tool
    declared `confirm`, application/confirmation.py), and the turn's reply is that question.
    """

    text: str | None = None
    image_file: str | None = None
    error: str | None = None
    image_url: str | None = None
    ask: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.ask is None

    def message(self) -> str:
        """The tool message content the LLM reads."""
        if self.ask is not None:
            return (f"Not done yet: I asked the person \"{self.ask}\" first and wait for their "
                    "yes.")
        if self.error is not None:
            return (f"Error: {self.error}. The tool did not work; tell the person in your own "
                    "words.")
        if self.image_file:
            extra = f" {self.text}" if self.text else ""
            return f"The new image is {self.image_file}.{extra}"
        return self.text if self.text else "(the tool returned nothing)"


@dataclass
class ToolRecord:
    """One tool call of a turn, for logs, transcripts and the dialogue memory."""

    call_id: str
    name: str
    arguments: dict
    outcome: ToolOutcome


@dataclass
class AgentResult:
    """What one turn's tool loop gave.

    The final reply text, rounds used, every tool call made, the messages of the exchange
    (prompt + assistant/tool messages + the final answer's request), and whether the round
    limit was hit.
    """

    text: str
    rounds: int
    records: list[ToolRecord] = field(default_factory=list)
    messages: list = field(default_factory=list)
    hit_limit: bool = False

    def images(self) -> list[str]:
        """File names of the images the tools made this turn, in order."""
        return [r.outcome.image_file for r in self.records
                if r.outcome.ok and r.outcome.image_file]

    def memory_note(self) -> str:
        """Return a short bracketed note naming the images made ("" when none).

        It goes into the dialogue memory, so later turns can refer to them.
        """
        made = [f"{r.outcome.image_file} ({r.name})" for r in self.records
                if r.outcome.ok and r.outcome.image_file]
        return f"[Images I made: {', '.join(made)}]" if made else ""


# --- the loop --------------------------------------------------------------------------------
def _is_text(prop: dict) -> bool:
    """A parameter the VFM tools take as text (string type, or none declared)."""
    return prop.get("type", "string") == "string"


def _check_args(schema: dict, args: dict) -> str | None:
    params = schema["function"].get("parameters", {})
    props = params.get("properties", {})
    for key in params.get("required", []):
        v = args.get(key)
        if v is None or isinstance(v, str) and not v.strip():
            return f"missing argument {key!r} ({props.get(key, {}).get('description', '')})"
    for key, v in args.items():
        if key not in props:
            return f"unknown argument {key!r}; this tool takes {', '.join(props) or 'none'}"
        if v is not None and _is_text(props[key]) and not isinstance(v, (str, int, float)):
            return f"argument {key!r} must be a string"
    return None


def run_tool_loop(backend: Any, messages: Sequence[dict], tools: Sequence[dict],
                  run_tool: Callable[[str, dict], ToolOutcome], *, max_rounds: int = 3,
                  model: str | None = None, max_tokens: int | None = None,
                  image_parts: bool = False, image_detail: str = "low",
                  on_tool: Callable[[ToolRecord], None] | None = None,
                  logger: Any = None, one_round: bool = False,
                  decided: Sequence | None = None) -> AgentResult:
    """Let the LLM call `tools` for at most `max_rounds` rounds, then return its reply.

    backend.complete_with_tools(messages, tools, model=, tool_choice=, max_tokens=) ->
    (text, [ToolCall(id, name, arguments)]). `run_tool(name, args)` runs one tool and returns
    a ToolOutcome; it may raise, which counts as a tool error. `image_parts`: after the tool
    messages of a round, add one user message with the new images (their `image_url`) so a
    vision LLM sees them. `on_tool(record)` is called after every tool call. `one_round` (a
    small model): one round of calls, then the answer, told how they went (outcome_note).
    `decided`: calls chosen before the reply (see stream_tool_loop). Raises BackendError
    (from the backend) when an LLM request fails, ValueError for max_rounds < 0.
    """
    if max_rounds < 0:
        raise ValueError(f"max_rounds={max_rounds} must be >= 0")
    log = logger or _log
    rounds = _Rounds(tools, run_tool, image_parts, image_detail, on_tool, log)
    msgs = list(messages)
    result = AgentResult("", 0, messages=msgs)
    if one_round:
        max_rounds, rounds.tell = min(max_rounds, 1), False
    if decided is not None:
        rounds.run_decided(decided, msgs, result.records)
        max_rounds, one_round = 0, True        # no call asked for; the answer is told how
    for round_no in range(1, max_rounds + 1):
        if questions(result.records):
            break
        text, calls = backend.complete_with_tools(msgs, tools, model=model, tool_choice="auto",
                                                  max_tokens=max_tokens)
        result.rounds = round_no
        if not calls:
            result.text = text
            return result
        msgs.extend(rounds.run(round_no, text, calls, result.records))
        if rounds.only_repeats:
            break
    asked = questions(result.records)
    if asked:                   # the robot asks before it acts: the question is the reply
        result.text = " ".join(asked)
        return result
    # round limit reached, no rounds allowed, or only repeats: one last answer without tools
    if decided is None or result.records:
        msgs.append({"role": "system", "content": _last_note(
            result, max_rounds, one_round or rounds.only_repeats, log)})
    text, calls = backend.complete_with_tools(msgs, tools, model=model, tool_choice="none",
                                              max_tokens=max_tokens)
    if calls:
        log.warning(f"ignoring {len(calls)} tool call(s) after the round limit")
    result.rounds += 1
    result.text = text
    return result


def stream_tool_loop(backend: Any, messages: Sequence[dict], tools: Sequence[dict],
                     run_tool: Callable[[str, dict], ToolOutcome], result: AgentResult, *,
                     max_rounds: int = 3, model: str | None = None,
                     max_tokens: int | None = None, image_parts: bool = False,
                     image_detail: str = "low",
                     on_tool: Callable[[ToolRecord], None] | None = None,
                     logger: Any = None, one_round: bool = False,
                     decided: Sequence | None = None) -> Iterator[str]:
    """`run_tool_loop`, streamed: yield the reply's sentences as they come.

    Every round is one streamed request with the tools offered
    (backend.stream_with_tools(messages, tools, calls=[...])): its sentences are yielded at
    once (the first one is spoken while the rest is generated), and the calls that streamed in
    run before the next round. `result` is filled in as the turn goes (records, rounds, text).
    `decided`: the calls chosen before the reply (core/action_choice.py): they run first, and
    the one request answers told how they went, no calls asked for ([]: none ran, no note).
    """
    if max_rounds < 0:
        raise ValueError(f"max_rounds={max_rounds} must be >= 0")
    log = logger or _log
    rounds = _Rounds(tools, run_tool, image_parts, image_detail, on_tool, log)
    msgs = result.messages = list(messages)
    said: list[str] = []
    if one_round:
        max_rounds, rounds.tell = min(max_rounds, 1), False
    if decided is not None:
        rounds.run_decided(decided, msgs, result.records)
        max_rounds, one_round = 0, True        # no call asked for; the answer is told how
    for round_no in range(1, max_rounds + 2):
        asked = questions(result.records)
        if asked:               # the robot asks before it acts: the question is the reply
            result.text = " ".join(asked)
            yield from asked
            return
        last = round_no > max_rounds or rounds.only_repeats
        if last and (decided is None or result.records):
            msgs.append({"role": "system", "content": _last_note(
                result, max_rounds, one_round or rounds.only_repeats, log)})
        calls: list = []
        this_round: list[str] = []
        for sentence in backend.stream_with_tools(
                msgs, tools, model=model, tool_choice="none" if last else "auto",
                max_tokens=max_tokens, calls=calls):
            this_round.append(sentence)
            said.append(sentence)
            result.text = " ".join(said)
            yield sentence
        result.rounds = round_no
        if not calls or last:
            if calls:
                log.warning(f"ignoring {len(calls)} tool call(s) after the round limit")
            return
        msgs.extend(rounds.run(round_no, " ".join(this_round), calls, result.records))


def questions(records: Sequence[ToolRecord]) -> list[str]:
    """The questions the robot asks before acting, from this turn's calls (ToolOutcome.ask)."""
    return list(dict.fromkeys(r.outcome.ask for r in records if r.outcome.ask))


def _last_note(result: AgentResult, max_rounds: int, told: bool, log) -> str:
    """The note before the answer without tools (the limit reached is logged).

    `told`: the LLM is told how its calls went (one round for a small model, or a round of
    repeats), instead of FINAL_NOTE.
    """
    if told and result.records:
        return outcome_note(result.records)
    result.hit_limit = max_rounds > 0
    if result.hit_limit:
        log.warning(f"tool round limit ({max_rounds}) reached; asking for the answer now")
    return FINAL_NOTE


class _Rounds:
    """One round of tool calls: the assistant message, each tool run, the tool messages."""

    def __init__(self, tools, run_tool, image_parts, image_detail, on_tool, log):
        self.by_name = {t["function"]["name"]: t for t in tools}
        self.run_tool, self.image_parts, self.image_detail = run_tool, image_parts, image_detail
        self.on_tool, self.log = on_tool, log
        self.done: dict[str, ToolOutcome] = {}   # this turn's calls, by name and arguments
        self.tell = True          # a round note after the tool messages (not before the last)
        self.only_repeats = False                # the last round only asked again

    def run(self, round_no: int, text: str, calls, records: list) -> list[dict]:
        """The messages this round adds; every call made is appended to `records`.

        A call made before in this turn (same name and arguments) is not run again (a robot
        would wave twice): the LLM reads the earlier outcome, and a round of nothing but
        repeats ends the calls (`only_repeats`).
        """
        ids = [c.id or f"call_{round_no}_{k}" for k, c in enumerate(calls)]
        # content "" (not null): llama.cpp's server answers HTTP 500 to an assistant message
        # whose content is null
        msgs = [{"role": "assistant", "content": text or "", "tool_calls": [
            {"id": i, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for i, c in zip(ids, calls)]}]
        shown: list = []
        repeats = 0
        for call_id, c in zip(ids, calls):
            key = f"{c.name} {json.dumps(c.arguments, sort_keys=True)}"
            if key in self.done:
                repeats += 1
                self.log.warning(f"the LLM called {c.name} again with the same arguments; "
                                 "not run twice")
                msgs.append({"role": "tool", "tool_call_id": call_id, "content":
                             f"(Already done this turn.) {self.done[key].message()}"})
                continue
            outcome = _run_one(self.by_name, self.run_tool, c.name, dict(c.arguments), self.log)
            self.done[key] = outcome
            rec = ToolRecord(call_id, c.name, dict(c.arguments), outcome)
            records.append(rec)
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": outcome.message()})
            self._notify(rec)
            if self.image_parts and outcome.ok and outcome.image_url:
                label = f"The image {outcome.image_file}" if outcome.image_file else \
                    f"What {c.name} shows"
                shown.append({"type": "text", "text": f"[{label}:]"})
                shown.append({"type": "image_url", "image_url": {"url": outcome.image_url,
                                                                 "detail": self.image_detail}})
        self.only_repeats = repeats == len(calls)
        if not self.only_repeats and self.tell:
            msgs.append({"role": "system", "content": round_note(records[-(len(calls) -
                                                                           repeats):])})
        if shown:             # last: what the LLM looks at next
            msgs.append({"role": "user", "content": shown})
        return msgs

    def run_decided(self, decided, msgs: list, records: list) -> None:
        """Run the calls chosen before the reply (core/action_choice.py) as round 1's.

        No round note after them: the one request that follows is told how they went.
        """
        self.tell = False
        if decided:
            msgs.extend(self.run(1, "", list(decided), records))

    def _notify(self, rec: ToolRecord) -> None:
        if self.on_tool is None:
            return
        try:
            self.on_tool(rec)
        except Exception as e:  # noqa: BLE001 - a listener must not break the turn
            self.log.error(f"tool listener failed: {e}")


def _run_one(by_name: dict, run_tool: Callable[[str, dict], ToolOutcome], name: str,
             args: dict, log: Any) -> ToolOutcome:
    schema = by_name.get(name)
    if schema is None:
        known = ", ".join(by_name) or "none"
        log.warning(f"the LLM called an unknown tool {name!r}")
        return ToolOutcome(error=f"there is no tool named {name!r}; the tools are: {known}")
    err = _check_args(schema, args)
    if err:
        log.warning(f"tool {name}: {err}")
        return ToolOutcome(error=f"{name}: {err}")
    # numbers as text: local models write {"seconds_ago": 30} for a string parameter; other
    # types (a robot tool's) go as they are, to the provider's own checks
    props = schema["function"].get("parameters", {}).get("properties", {})
    args = {k: str(v).strip() if _is_text(props[k]) else v for k, v in args.items()
            if v is not None and not (_is_text(props[k]) and (isinstance(v, bool)
                                                              or not str(v).strip()))}
    try:
        out = run_tool(name, args)
    except Exception as e:  # noqa: BLE001 - a tool failure goes back to the LLM
        log.error(f"tool {name} raised {type(e).__name__}: {e}")
        return ToolOutcome(error=f"{name} failed: {e}")
    if not isinstance(out, ToolOutcome):
        return ToolOutcome(error=f"{name} returned no result")
    return out
