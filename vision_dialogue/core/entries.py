"""What the conversation tells its listeners: one typed entry per thing that happened (ROS-free).

A listener is `fn(entry)` and tells entries apart by their class. Each entry has one JSON
record, `to_record()`: the format of the transcript's lines and of the manager's
`dialogue/events` messages, which the monitor reads live or from a finished run (None: not
recorded; a tool's call is in its reply's record). The record's "type" is the entry's `TYPE`.

Words: an *entry* is this; an *event* is something seen between frames (a wave, an arrival:
`SeenEntry`, whose record type stays "event"); a *record* is the JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar

from vision_dialogue.core.conversation_types import SkillOutcome, TurnResult
from vision_dialogue.common.images import Frame
from vision_dialogue.llm.tool_loop import ToolRecord


@dataclass(frozen=True)
class Entry:
    """Something that happened in the conversation (see the module docstring)."""

    TYPE: ClassVar[str] = ""

    def to_record(self) -> dict | None:
        return {"type": self.TYPE, **self._fields()}

    def _fields(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


Listener = Callable[[Entry], None]


@dataclass(frozen=True)
class FrameEntry(Entry):
    """A camera frame entered the prompt (the transcript stores its JPEG as `file`)."""

    TYPE: ClassVar[str] = "frame"
    frame: Frame

    def to_record(self) -> dict:
        f = self.frame
        return {"type": self.TYPE, "frame_id": f.id, "stamp": f.stamp, "file": None,
                "dark": f.dark, "observation": f.observation, "objects": f.objects}


@dataclass(frozen=True)
class ObjectsEntry(Entry):
    """An object detector's note for a frame that came after it."""

    TYPE: ClassVar[str] = "objects"
    frame: Frame
    text: str

    def to_record(self) -> dict:
        return {"type": self.TYPE, "frame_id": self.frame.id, "text": self.text,
                "observation": self.frame.observation}


@dataclass(frozen=True)
class UserEntry(Entry):
    """A person's line in the prompt; `turn_id`: the reply that takes it.

    `skill`: set (maybe "") for a line heard without a reply of its own (an Ask's answer).
    """

    TYPE: ClassVar[str] = "user"
    turn_id: int
    text: str
    speaker: str = ""
    skill: str | None = None

    def to_record(self) -> dict:
        record = {"type": self.TYPE, "turn_id": self.turn_id, "text": self.text,
                  "speaker": self.speaker}
        if self.skill is not None:
            record["skill"] = self.skill
        return record


@dataclass(frozen=True)
class ReplyEntry(Entry):
    """The robot's line: a reply, or a line the application had it say (`result.skill`)."""

    TYPE: ClassVar[str] = "reply"
    result: TurnResult

    def to_record(self) -> dict:
        r = self.result
        rec = {"type": self.TYPE, "turn_id": r.turn_id, "in_reply_to": r.in_reply_to,
               "text": r.text, "sentences": r.sentences, "fallback": r.fallback,
               "error": r.error, "frames_in_prompt": r.frame_ids,
               "summaries_in_prompt": [list(x) for x in r.summary_ids],
               "first_sentence_s": r.first_sentence_s, "reply_s": r.reply_s,
               "prompt_chars": r.prompt_chars}
        if r.skill:
            rec["skill"] = r.skill
        if r.tools:
            rec["tools"] = [{"name": t.name, "arguments": t.arguments, "text": t.outcome.text,
                             "image_file": t.outcome.image_file, "error": t.outcome.error}
                            for t in r.tools]
        return rec


@dataclass(frozen=True)
class ExchangeEntry(Entry):
    """A person's line and the robot's, without the LLM (a shared picture's "Received.")."""

    TYPE: ClassVar[str] = "exchange"
    user: str
    robot: str
    info: dict = field(default_factory=dict)

    def to_record(self) -> dict:
        values = {"user": self.user, "robot": self.robot, **self.info}
        return {"type": self.TYPE, **{k: v for k, v in values.items()
                                      if isinstance(v, (str, int, float, bool))}}


@dataclass(frozen=True)
class SummarisingEntry(Entry):
    """The first `m` raw frames are being summarised."""

    TYPE: ClassVar[str] = "summarising"
    frame_ids: list


@dataclass(frozen=True)
class SummaryDeferredEntry(Entry):
    """A summary gave way to a reply; it is tried again later."""

    TYPE: ClassVar[str] = "summary_deferred"
    frame_ids: list


@dataclass(frozen=True)
class SummaryEntry(Entry):
    """Frames became one sentence in the prompt (`item`: the timeline's summary item)."""

    TYPE: ClassVar[str] = "summary"
    frame_ids: list
    text: str
    method: str = "llm"
    item: Any = None

    def to_record(self) -> dict:
        return {"type": self.TYPE, "frame_ids": self.frame_ids, "text": self.text,
                "method": self.method}


@dataclass(frozen=True)
class SummaryFailedEntry(Entry):
    """A summary failed; after `attempts` failures a neutral `marker` took the frames' place."""

    TYPE: ClassVar[str] = "summary_failed"
    frame_ids: list
    error: str
    attempts: int
    marker: Any = None

    def to_record(self) -> dict:
        return {"type": self.TYPE, "frame_ids": self.frame_ids, "error": self.error,
                "attempts": self.attempts, "marker": self.marker is not None}


@dataclass(frozen=True)
class FoldEntry(Entry):
    """The oldest `items` of the dialogue became the history summary."""

    TYPE: ClassVar[str] = "fold"
    items: int
    history_summary: str


@dataclass(frozen=True)
class FoldFailedEntry(Entry):
    """Folding the history failed (it is kept whole and tried again)."""

    TYPE: ClassVar[str] = "fold_failed"
    items: int
    error: str


@dataclass(frozen=True)
class DroppedEntry(Entry):
    """A person's line was never answered, and why."""

    TYPE: ClassVar[str] = "dropped"
    text: str
    reason: str
    speaker: str = ""


@dataclass(frozen=True)
class PersonEntry(Entry):
    """A tracked person `id` "arrived" or "left" (`event`)."""

    TYPE: ClassVar[str] = "person"
    event: str
    id: str


@dataclass(frozen=True)
class SeenEntry(Entry):
    """Something seen between frames ("someone on the left waved"); `event`: its kind."""

    TYPE: ClassVar[str] = "event"
    text: str
    event: str
    stamp: float


@dataclass(frozen=True)
class ToolEntry(Entry):
    """A tool the LLM called during turn `turn_id` (recorded with its reply, not alone)."""

    TYPE: ClassVar[str] = "tool"
    turn_id: int
    record: ToolRecord

    def to_record(self) -> None:
        return None


@dataclass(frozen=True)
class SkillEntry(Entry):
    """A skill's goal started or ended (`outcome`: how it ended)."""

    TYPE: ClassVar[str] = "skill"
    skill: str
    goal: str
    stage: str
    outcome: SkillOutcome | None = None

    def to_record(self) -> dict:
        rec = {"type": self.TYPE, "skill": self.skill, "goal": self.goal, "stage": self.stage}
        out = self.outcome
        if out is not None:
            rec.update(status=out.status, success=out.success, error=out.error,
                       result=out.data)
        return rec


@dataclass(frozen=True)
class IntentEntry(Entry):
    """An intent read from a person's line and published."""

    TYPE: ClassVar[str] = "intent"
    intent: str
    data: dict
    source: str
    utterance: str
    confidence: float


@dataclass(frozen=True)
class RobotActionEntry(Entry):
    """One stage of a call of the robot's own tools ("asked", "sent", "feedback", ...).

    `detail`: the arguments sent (stage "sent"), otherwise the stage's text.
    """

    TYPE: ClassVar[str] = "robot_action"
    tool: str
    kind: str
    address: str
    stage: str
    detail: Any = None

    def to_record(self) -> dict:
        return {"type": self.TYPE, "tool": self.tool, "kind": self.kind,
                "address": self.address, "stage": self.stage,
                "arguments" if self.stage == "sent" else "text": self.detail}


@dataclass(frozen=True)
class FaceEntry(Entry):
    """What the robot's face showed: the speech node's own record, as it sent it."""

    TYPE: ClassVar[str] = "face"
    record: dict

    def to_record(self) -> dict:
        return {"type": self.TYPE, **self.record}
