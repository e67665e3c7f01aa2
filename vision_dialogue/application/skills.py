"""The communication skills an application drives: Say, Ask and Chat (ROS-free).

ROS4HRI's communication_skills, as the manager serves them (`ros/manager/skill_servers.py`
wires the actions): the skills here only decide what to say, what to listen for and when they
are over; a `SkillHost` (the manager) says lines, hands them the person's lines and asks the
LLM.

One skill speaks at a time (`SkillArbiter`): a goal with a higher priority pre-empts the running
one (whose result says "preempted"); a goal of equal or lower priority waits, highest priority
first, then first come; when `max_waiting` goals already wait, a new one is rejected.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from vision_dialogue.core.conversation_types import SkillOutcome
from vision_dialogue.llm.answers import AnswerSchema, SchemaError, corrects, \
    extraction_messages, follow_up, keep_valid, parse_json_object, question_for, read_plainly

DEFAULT_PRIORITY = 128
"""std_skills' Meta default priority (0..255)."""

_log = logging.getLogger("vision_dialogue.skills")


class SkillRejected(RuntimeError):
    """Too many skills wait already; the goal is refused."""


class Ticket:
    """One skill's place at the arbiter; `preempted` is set when a higher priority came."""

    def __init__(self, name: str, priority: int, seq: int):
        self.name, self.priority, self.seq = name, int(priority), seq
        self.preempted = threading.Event()

    def __repr__(self) -> str:
        return f"{self.name}(priority {self.priority})"


class SkillArbiter:
    """One skill at a time, by priority (see the module docstring)."""

    def __init__(self, max_waiting: int = 4):
        self.max_waiting = int(max_waiting)
        self._cv = threading.Condition()
        self._running: Ticket | None = None
        self._waiting: list[Ticket] = []
        self._seq = 0

    @property
    def running(self) -> Ticket | None:
        return self._running

    def enter(self, name: str, priority: int = DEFAULT_PRIORITY) -> Ticket:
        """Join the line; pre-empts a running skill of lower priority. Raises SkillRejected."""
        with self._cv:
            self._seq += 1
            ticket = Ticket(name, priority, self._seq)
            if self._running is None and not self._waiting:
                self._running = ticket
                return ticket
            if len(self._waiting) >= self.max_waiting:
                raise SkillRejected(f"{len(self._waiting)} skills wait already "
                                    f"(running: {self._running})")
            self._waiting.append(ticket)
            self._waiting.sort(key=lambda t: (-t.priority, t.seq))
            if self._running is not None and priority > self._running.priority:
                self._running.preempted.set()
            return ticket

    def wait_turn(self, ticket: Ticket, give_up: Callable[[], bool],
                  poll: float = 0.05) -> bool:
        """Block until `ticket` runs (True), or `give_up()` says stop (False, and it leaves)."""
        with self._cv:
            while self._running is not ticket:
                if give_up() or ticket.preempted.is_set():
                    self._remove(ticket)
                    return False
                if self._running is None and self._waiting and self._waiting[0] is ticket:
                    self._running = self._waiting.pop(0)
                    return True
                self._cv.wait(poll)
            return True

    def leave(self, ticket: Ticket) -> None:
        """The skill is over (or gave up waiting): the next one may run."""
        with self._cv:
            self._remove(ticket)

    def _remove(self, ticket: Ticket) -> None:
        if self._running is ticket:
            self._running = None
        if ticket in self._waiting:
            self._waiting.remove(ticket)
        self._cv.notify_all()


@dataclass
class Control:
    """Why a running skill must stop now ("" while it may go on)."""

    ticket: Ticket | None = None
    cancelled: Callable[[], bool] = lambda: False
    deadline: float = float("inf")      # time.monotonic()

    def reason(self) -> str:
        if self.cancelled():
            return "cancelled"
        if self.ticket is not None and self.ticket.preempted.is_set():
            return "preempted"
        if time.monotonic() >= self.deadline:
            return "timeout"
        return ""

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


@dataclass
class Heard:
    """A person's line, as a skill receives it."""

    text: str
    speaker: str = ""


class SkillHost(Protocol):
    """What the skills need from the manager."""

    def say(self, text: str, control: Control,
            feedback: Callable[[str, str], None]) -> SkillOutcome:
        """Say a line; wait until it was said.

        status: spoken, sent (no speech node reports back), interrupted (the person spoke),
        no_speech, cancelled or preempted.
        """

    def listen(self, control: Control) -> Heard | None:
        """The person's next line (None once `control` says stop)."""

    def seen(self) -> str:
        """What the robot sees now, in words (the newest frame's notes)."""

    def ask_llm(self, messages: list, max_tokens: int, json_schema: dict | None = None) -> str:
        """One LLM completion (constrained to `json_schema` where the backend can)."""


Feedback = Callable[[str, str, dict], None]
"""feedback(stage, text, answers so far)."""


def fill(host: SkillHost, schema: AnswerSchema, keys: list[str], question: str,
         lines: list[str], log=_log, yes_no_said: bool = False) -> dict:
    """Answers for `keys` from the person's `lines` (plain readers, then the LLM), all valid.

    `yes_no_said`: see `keep_valid` (a chat's results).
    """
    got = read_plainly(schema, keys, lines[-1]) if lines else {}
    rest = [k for k in keys if k not in got]
    if not rest:
        return got
    seen = host.seen()
    try:
        text = host.ask_llm(extraction_messages(schema, rest, question, lines, seen),
                            max_tokens=24 + 24 * len(rest),
                            json_schema=schema.object_schema(rest))
    except Exception as e:  # noqa: BLE001 - an LLM failure leaves the keys missing
        log.warning(f"answers not extracted ({type(e).__name__}: {e})")
        return got
    got.update(keep_valid(schema, rest, parse_json_object(text), lines + [seen], yes_no_said))
    return got


def word_question(host: SkillHost, schema: AnswerSchema, instruction: str,
                  log=_log) -> str:
    """The question for an Ask whose goal has none: worded by the LLM, else plainly."""
    keys = list(schema.properties)
    plain = question_for(schema, keys)
    try:
        text = host.ask_llm([{"role": "system", "content": instruction.format(
            keys=schema.describe(keys))}], max_tokens=40).strip().strip('"')
    except Exception as e:  # noqa: BLE001
        log.warning(f"question not worded by the LLM ({e}); asking plainly")
        return plain
    first = text.split("\n")[0].strip()
    return first if first.endswith("?") and 3 <= len(first.split()) <= 30 else plain


def run_ask(host: SkillHost, control: Control, feedback: Feedback, question: str,
            answers_schema: str, max_followups: int, wording: str, log=_log,
            filler: Callable[..., dict] = fill) -> SkillOutcome:
    """The Ask skill: ask, listen, follow up on what is missing, return the valid answers.

    `filler`: how answers are read from the lines (`fill`; a benchmark swaps in its baseline).
    """
    try:
        schema = AnswerSchema.parse(answers_schema)
    except SchemaError as e:
        return SkillOutcome("error", error=str(e))
    question = " ".join(question.split()) or word_question(host, schema, wording, log)
    answers: dict = {}
    lines: list[str] = []
    asked = question
    for attempt in range(int(max_followups) + 1):
        said = host.say(asked, control, lambda stage, text: feedback(stage, text, answers))
        if said.status not in ("spoken", "sent", "interrupted"):   # interrupted: answered early
            return SkillOutcome(said.status, answers, said.error)
        feedback("asked" if attempt == 0 else "follow_up", asked, answers)
        heard = host.listen(control)
        if heard is None:
            return SkillOutcome(control.reason() or "timeout", answers)
        lines.append(heard.text)
        feedback("heard", heard.text, answers)
        need = [k for k in schema.properties if k not in answers]
        feedback("extracting", heard.text, answers)
        answers.update(filler(host, schema, need, question, lines, log))
        missing = schema.missing(answers)
        if not missing:
            return SkillOutcome("answered", answers)
        asked = follow_up(schema, missing, question if not answers else "")
    return SkillOutcome("partial", answers, f"not obtained: {', '.join(schema.missing(answers))}")


@dataclass
class ChatRole:
    """A Chat's purpose: what the LLM is told, the results wanted, the lines that frame it."""

    name: str
    instruction: str
    results: AnswerSchema | None = None
    opening: str = ""           # said as given when the robot starts (else the LLM words it)
    closing: str = ""           # said when the results are in

    @classmethod
    def parse(cls, name: str, configuration: str) -> "ChatRole":
        """From DialogueRole's name and JSON configuration; SchemaError when it is bad."""
        try:
            cfg = json.loads(configuration) if configuration.strip() else {}
        except json.JSONDecodeError as e:
            raise SchemaError(f"role.configuration is not valid JSON ({e.msg})") from None
        if not isinstance(cfg, dict):
            raise SchemaError("role.configuration must be a JSON object")
        unknown = set(cfg) - {"instruction", "results", "required", "opening", "closing"}
        if unknown:
            raise SchemaError(f"role.configuration: unknown keys {sorted(unknown)} (known: "
                              "instruction, results, required, opening, closing)")
        results = None
        if cfg.get("results"):
            results = AnswerSchema.parse({"properties": cfg["results"],
                                          "required": cfg.get("required",
                                                              list(cfg["results"]))})
        instruction = str(cfg.get("instruction", "")).strip()
        if not instruction and not name.strip():
            raise SchemaError("the role needs a name or an instruction")
        return cls(name.strip() or "chat", instruction or f"act as a {name.strip()}", results,
                   str(cfg.get("opening", "")).strip(), str(cfg.get("closing", "")).strip())


class ChatHost(SkillHost, Protocol):
    """What Chat needs beyond Ask's host: the free conversation, with a purpose."""

    def begin_chat(self, role: ChatRole) -> None:
        """Replies from now on serve the role's purpose; the chat's exchanges are collected."""

    def end_chat(self) -> None:
        """The purpose is gone from the prompt."""

    def start_turn(self, text: str | None, instruction: str = "") -> None:
        """Queue a turn of the conversation.

        The person's line (a reply follows), or (text None) the robot speaking first with
        `instruction`.
        """

    def next_exchange(self, control: Control, timeout: float) -> tuple[str, str] | None:
        """The chat's next (person's line, robot's reply); None if none came in `timeout`."""

    def present(self) -> bool | None:
        """Whether a person is in view (None: nobody can tell)."""

    def heard_at(self) -> float | None:
        """When the person's newest line was heard (time.monotonic(); None: none yet)."""

    def still_needed(self, needs: str) -> None:
        """What the chat has yet to find out, for the replies' prompt ("" when nothing)."""


LINE_OWED_S = 60.0
"""Longest the robot's owed line keeps an unseen person there (a line dropped never comes)."""


class _Absence:
    """Whether the chat's person left: nobody in view for `clock_s`, the robot owing no line.

    A person who speaks is there, seen or not (the demo's camera showed nobody while the
    visitor answered): while the robot owes a line (its opening, a reply to their newest line)
    they wait for it, and after each of the robot's lines they get `clock_s` to answer.
    """

    def __init__(self, host: ChatHost, clock_s: float):
        self.host, self.clock_s = host, clock_s
        self.replied_at = time.monotonic()     # the robot's newest line (the chat's start)
        self.owed = False                      # the robot is making a line it started
        self._since: float | None = None

    def replied(self) -> None:
        self.replied_at, self.owed = time.monotonic(), False

    def owes_line(self) -> bool:
        """Whether the robot is making a line (LINE_OWED_S at most).

        One it started, or the reply to a line heard since its newest.
        """
        heard = self.host.heard_at() or 0.0
        return (self.owed or heard > self.replied_at) and \
            time.monotonic() - max(heard, self.replied_at) < LINE_OWED_S

    def gone(self) -> bool:
        now = time.monotonic()
        if self.owes_line() or self.host.present() is not False:
            self._since = None
            return False
        self._since = max(self._since or now, self.replied_at)
        return now - self._since >= self.clock_s


CHAT_CORRECTION_S = 6.0
"""How long a chat whose results are in still hears a correction after the robot's line."""


def run_chat(host: ChatHost, control: Control, feedback: Feedback, role: ChatRole,
             initiate: bool, initial_input: str, person_lost_s: float,
             opening_instruction: str, log=_log,
             correction_s: float = CHAT_CORRECTION_S) -> SkillOutcome:
    """The Chat skill: converse with the role's purpose until its results are in.

    Then the person's next line, heard within `correction_s` of the robot's newest line, may
    still correct a result ("Oh wait, it's three children actually."); the chat is `done`
    after a line that corrects nothing, or after that time.
    """
    absence = _Absence(host, person_lost_s)
    host.begin_chat(role)
    results: dict = {}
    lines: list[str] = []
    try:
        feedback("started", role.name, results)
        host.still_needed(needs_of(role, results))
        if initial_input.strip():
            host.start_turn(initial_input.strip())
            absence.owed = True
        elif initiate and role.opening:
            said = host.say(role.opening, control, lambda s, t: feedback(s, t, results))
            if said.status in ("cancelled", "preempted", "no_speech"):
                return SkillOutcome(said.status, results, said.error)
            absence.replied()
        elif initiate:
            host.start_turn(None, opening_instruction)
            absence.owed = True
        while True:
            why = control.reason()
            if why:
                return SkillOutcome(why, results)
            if absence.gone():
                return SkillOutcome("person_left", results)
            person = _next_line(host, control, absence, lines, feedback, results)
            if role.results is None or not person:
                continue
            _read_results(host, role, lines, results, log)
            feedback("results", json.dumps(results), results)
            host.still_needed(needs_of(role, results))
            if not role.results.missing(results):
                if role.closing:
                    host.say(role.closing, control, lambda s, t: None)
                    absence.replied()
                _hear_corrections(host, control, role, absence, correction_s, lines,
                                  feedback, results, log)
                return SkillOutcome("done", results)
    finally:
        host.still_needed("")
        host.end_chat()


def _next_line(host: ChatHost, control: Control, absence: _Absence, lines: list[str],
               feedback: Feedback, results: dict, timeout: float = 0.2) -> str | None:
    """The person's line of the chat's next exchange, added to `lines`.

    "" for a robot's line alone, None when no exchange came in `timeout`.
    """
    exchange = host.next_exchange(control, timeout=timeout)
    if exchange is None:
        return None
    absence.replied()
    person, reply = exchange
    if person:
        lines.append(person)
        feedback("heard", person, results)
    feedback("replied", reply, results)
    return person


def _read_results(host: SkillHost, role: ChatRole, lines: list[str], results: dict,
                  log=_log) -> bool:
    """Read missing results and corrections from the newest line; whether any changed."""
    need = [k for k in role.results.properties if k not in results]
    have = [k for k in role.results.properties if k in results]
    before = dict(results)
    new = fill(host, role.results, need, role.instruction, lines, log, yes_no_said=True)
    results.update(new)
    results.update(corrected(host, role.results, have, role.instruction, lines, new, log))
    return results != before


def _hear_corrections(host: ChatHost, control: Control, role: ChatRole, absence: _Absence,
                      window_s: float, lines: list[str], feedback: Feedback, results: dict,
                      log=_log) -> None:
    """After the results are in, read the person's corrections heard in `window_s`.

    Lines heard within `window_s` of the robot's newest line are read while they correct a
    result (a line being answered is waited for, the window starts again after each).
    """
    while not control.reason():
        if not absence.owes_line() and time.monotonic() - absence.replied_at >= window_s:
            return
        person = _next_line(host, control, absence, lines, feedback, results)
        if not person:
            continue
        if not corrects(person) or not _read_results(host, role, lines, results, log):
            return
        log.info(f"chat {role.name}: a result corrected after all were in")
        feedback("results", json.dumps(results), results)


def corrected(host: SkillHost, schema: AnswerSchema, have: list[str], instruction: str,
              lines: list[str], taken: dict, log=_log) -> dict:
    """New values for results already in that the newest line corrects.

    A chat reads each result once; "Oh wait, no, it's the sixth floor." after "the third
    floor" would otherwise leave the third. Read from all the lines (the model sees what is
    corrected), kept only when the newest line says them and they are not a value it just
    gave another result (`taken`): "It's red. No wait, it's dark blue." corrects the colour,
    not the umbrella. Booleans are left as they are: a correction's "no" is not an answer.
    """
    line = lines[-1] if lines else ""
    keys = [k for k in have if schema.kind(k) != "boolean"]
    if not keys or not corrects(line):
        return {}
    got = fill(host, schema, keys, instruction, lines, log)
    fresh = {str(v).lower() for v in taken.values()}
    return {k: v for k, v in keep_valid(schema, list(got), got, [line]).items()
            if str(v).lower() not in fresh}


def needs_of(role: ChatRole, results: dict) -> str:
    """The role's results still missing, in their descriptions ("the floor they go to")."""
    if role.results is None:
        return ""
    return "; ".join(role.results.what(k) for k in role.results.missing(results))
