"""What goes into and comes out of a Conversation: its settings, a turn's result, the callback.

Apart from core/conversation.py so a caller (the manager, a benchmark) reads them in one
place. ROS-free.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Protocol

from vision_dialogue.core.focus import STYLES as FOCUS_STYLES
from vision_dialogue.common.images import ImagePolicy
from vision_dialogue.llm.tool_loop import ToolRecord

#: how frames become a summary: the LLM's sentence, or their notes merged without it
#: (core/summariser.py; "auto" in the config chooses by the backend)
SUMMARY_MODES = ("llm", "merge")


@dataclass(frozen=True)
class LineNote:
    """What is remembered that a line asks about: the note, and the facts it tells.

    The prompt keeps a note read ahead with a line's first words where it tells all that the
    whole line's note would (core/prompt_assembly.py): another note would be read after the
    line's last word, before the reply's first.
    """

    text: str = ""
    facts: frozenset[str] = frozenset()

    def tells_all_of(self, other: "LineNote") -> bool:
        return bool(other.facts) and other.facts <= self.facts


class TurnSequence:
    """Turns one at a time: the lock a turn holds while the timeline changes, the last id.

    Shared by every way a line enters the conversation (a reply, a line said as given, a
    line only heard), so each knows its turn's id.
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.last = 0

    def next(self) -> int:
        """A new turn's id (hold `lock`)."""
        self.last += 1
        return self.last


class SentenceCallback(Protocol):
    """Called with each reply sentence as it is ready.

    fallback: the sentence is the persona's fallback line after an LLM failure.
    """

    def __call__(self, sentence: str, index: int, fallback: bool = False) -> None: ...


DECIDE_ACTIONS = ("auto", "first", "in_reply")
"""How a turn calls the robot's own actions: "first" = decided on a short prompt before the
reply (core/action_choice.py), "in_reply" = the LLM calls them in its reply, "auto" = first
for a backend with `simple_tool_use` (a small local model), else in the reply."""


@dataclass
class ConversationConfig:
    """Settings of the conversation core (the node maps its parameters onto these)."""

    n: int = 4                           # the paper's rule at start (SummaryRule checks it)
    m: int = 3
    policy: ImagePolicy = field(default_factory=ImagePolicy)
    history_budget_chars: int = 3000
    keep_recent_lines: int = 6
    max_reply_tokens: int = 150
    summary_max_tokens: int = 60
    model: str | None = None             # None: the backend's default
    summary_model: str | None = None     # None: same as model
    stream: bool = True
    max_summary_failures: int = 3
    workers: int = 2                     # background summary / fold threads
    summary_mode: str = "auto"           # "llm", "merge", or "auto": merge for text-only
    camera_timeout_s: float = 0.0        # no frame for this long: the robot cannot see (0: off)
    look_back: bool = True               # offer look_back to backends that call tools
    archive_frames: int = 720            # frames kept for look_back (an hour at one per 5 s)
    focus_note: str = "strict"           # text-only: the note before the question (STYLES, none)
    avoid_repeats: bool = True           # a reply the robot said before is asked for again
    warm_cache: bool = True              # a local model reads a changed prompt between turns
    decide_actions: str = "auto"         # DECIDE_ACTIONS: the robot's tools decided first?

    def __post_init__(self):
        if self.camera_timeout_s < 0:
            raise ValueError(f"camera_timeout={self.camera_timeout_s!r} must be >= 0")
        if self.focus_note not in FOCUS_STYLES + ("none",):
            raise ValueError(f"focus_note={self.focus_note!r} must be one of "
                             f"{[*FOCUS_STYLES, 'none']}")
        if self.decide_actions not in DECIDE_ACTIONS:
            raise ValueError(f"decide_actions={self.decide_actions!r} must be one of "
                             f"{list(DECIDE_ACTIONS)}")
        if self.summary_mode not in ("auto",) + SUMMARY_MODES:
            raise ValueError(f"summary_mode={self.summary_mode!r} must be one of "
                             f"{['auto', *SUMMARY_MODES]}")


@dataclass
class TurnResult:
    """The outcome of one user turn."""

    turn_id: int
    in_reply_to: str
    text: str
    sentences: list[str]
    fallback: bool = False
    error: str | None = None
    overhead_s: float = 0.0     # time in our code (prompt building etc.), excluding the LLM
    frame_ids: list[int] = field(default_factory=list)   # raw frames the reply prompt showed
    summary_ids: list[tuple] = field(default_factory=list)  # frame ids behind its summaries
    tools: list[ToolRecord] = field(default_factory=list)  # tool calls made for this reply
    first_sentence_s: float | None = None   # from the turn's start to its first spoken sentence
    reply_s: float = 0.0                    # from the turn's start to the whole reply
    prompt_chars: int = 0                   # text characters of the reply prompt
    skill: str = ""                         # "say": a line the application had said (no LLM)


@dataclass
class SkillOutcome:
    """How a skill ended: `status` (see the action definitions), `data` its JSON result."""

    status: str
    data: dict = field(default_factory=dict)
    error: str = ""
    turn_id: int = 0

    @property
    def success(self) -> bool:
        return self.status in ("spoken", "sent", "answered", "done")

    def json(self) -> str:
        return json.dumps(self.data, ensure_ascii=False)
