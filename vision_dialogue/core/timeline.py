"""The prompt timeline: frames, frame summaries, dialogue lines and events in arrival order.

Events are what a detector saw between frames (a wave, an arrival). They never end a run of
frames for a summary: a summary takes the events inside its run (and those right before it)
with its frames, so events cannot pile up between summaries.

Thread-safe: frames and utterances may be added from different threads while background
summaries complete. Items are only ever appended at the end; summaries replace their frames
in place and history folding removes a prefix, so positions of other items never cross.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from vision_dialogue.common.images import Frame
from vision_dialogue.common.redaction import FORGOTTEN, ForgottenPeople

USER, ROBOT = "user", "robot"


@dataclass(eq=False)
class FrameItem:
    """A raw frame in the timeline. `pending`: a summary request holds it."""

    frame: Frame
    pending: bool = False
    failures: int = 0
    kind: str = "frame"

    @property
    def id(self) -> int:
        return self.frame.id


@dataclass(eq=False)
class SummaryItem:
    """One short sentence that replaced consecutive frames `frame_ids`."""

    text: str
    frame_ids: tuple[int, ...]
    failed: bool = False          # neutral marker after repeated summary failures
    pending_fold: bool = False
    method: str = "llm"           # "llm", "merge" (observations joined), or "provisional"
    kind: str = "summary"

    def label(self) -> str:
        a, b = self.frame_ids[0], self.frame_ids[-1]
        return f"summary {a}" if a == b else f"summary {a}-{b}"


@dataclass(eq=False)
class LineItem:
    """A dialogue line: role is "user" or "robot"."""

    role: str
    text: str
    seq: int = 0
    pending_fold: bool = False
    kind: str = "line"
    speaker: str = ""             # who said a user line, when the speech backend knows
    # a robot line's calls of the robot's own tools: (name, arguments JSON, what came back),
    # shown to the LLM as the calls they were (a small model copies its past replies: with
    # the text alone it stopped calling and said "I will go to the kitchen.")
    calls: tuple = ()


@dataclass(eq=False)
class EventItem:
    """Something seen between frames, in words ("someone on the left waved")."""

    text: str
    stamp: float = 0.0
    event: str = ""               # the detector's kind: wave, arrived, scene_change, ...
    pending_fold: bool = False
    kind: str = "event"


Item = FrameItem | SummaryItem | LineItem | EventItem


def run_span(items: Sequence[Item], frames: Sequence[FrameItem]) -> list[Item]:
    """The items a summary of `frames` replaces, in timeline order.

    The frames, the events between them and the events right before the first one, unless a
    history fold holds those ([] if the frames are gone).
    """
    ids = {id(f) for f in frames}
    idx = [i for i, it in enumerate(items) if id(it) in ids]
    if not idx:
        return []
    first = idx[0]
    while first > 0 and isinstance(items[first - 1], EventItem) \
            and not items[first - 1].pending_fold:
        first -= 1
    return [it for it in items[first:idx[-1] + 1]
            if id(it) in ids or isinstance(it, EventItem)]


THEN = "; then "
"""What joins the parts of a merged observation ("a person; then no one")."""


def merge_observations(observations: Sequence[str]) -> str:
    """One line from consecutive frames' observations, without an LLM.

    Empty ones are skipped and repeats collapse, so what changed stays in order:
    "a person, close, wearing orange; then no one, brown and orange colours".
    """
    kept: list[str] = []
    for obs in observations:
        obs = " ".join((obs or "").split()).rstrip(".")
        if obs and (not kept or kept[-1] != obs):
            kept.append(obs)
    return THEN.join(kept)


def describe(item: Item) -> str:
    """One compact line per item, e.g. "frame 3", "summary 1-2", "user: hi"."""
    if isinstance(item, FrameItem):
        return f"frame {item.id}" + (" (summarising)" if item.pending else "")
    if isinstance(item, SummaryItem):
        return item.label() + ": " + item.text
    if isinstance(item, EventItem):
        return f"event: {item.text}"
    return f"{item.role}: {item.text}"


class Timeline:
    """An ordered, lock-protected list of timeline items."""

    def __init__(self):
        self._items: list[Item] = []
        self._lock = threading.RLock()
        self._frame_ids = itertools.count(1)
        self._line_seq = itertools.count(1)
        self.folded_lines = 0
        self.history_summary = ""
        self._text_chars = 0        # characters of lines + summaries in the timeline
        self._folding = False

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def redact(self, who: ForgottenPeople) -> int:
        """Forget me in the prompt: their lines' words gone, their names elsewhere; how many."""
        changed = 0
        with self._lock:
            for item in self._items:
                if isinstance(item, FrameItem):
                    continue
                if isinstance(item, LineItem) and who.line_of_theirs(item.role, item.speaker):
                    text, item.speaker = FORGOTTEN, FORGOTTEN
                else:
                    text = who.redact(item.text)
                if text != item.text:
                    self._text_chars += len(text) - len(item.text)
                    item.text, changed = text, changed + 1
            self.history_summary = who.redact(self.history_summary)
        return changed

    def add_frame(self, frame: Frame) -> FrameItem:
        """Append `frame`, giving it the next frame id (1, 2, ...) in arrival order."""
        item = FrameItem(frame)
        with self._lock:
            frame.id = next(self._frame_ids)
            self._items.append(item)
        return item

    def add_line(self, role: str, text: str, speaker: str = "", calls: tuple = ()) -> LineItem:
        if role not in (USER, ROBOT):
            raise ValueError(f"role must be {USER!r} or {ROBOT!r}, got {role!r}")
        with self._lock:
            item = LineItem(role, text, next(self._line_seq), speaker=speaker,
                            calls=tuple(calls))
            self._items.append(item)
            self._text_chars += len(text)
        return item

    def add_event(self, text: str, stamp: float = 0.0, event: str = "") -> EventItem:
        """Append something seen between frames (see EventItem)."""
        item = EventItem(text, stamp, event)
        with self._lock:
            self._items.append(item)
            self._text_chars += len(text)
        return item

    def snapshot(self) -> list[Item]:
        """A copy of the item list (items themselves are shared; treat them as read-only)."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def last_lines(self, count: int) -> list[LineItem]:
        """The last `count` dialogue lines still in the timeline, oldest first."""
        with self._lock:
            lines = [it for it in self._items if isinstance(it, LineItem)]
        return lines[-count:] if count > 0 else []

    # --- summaries -------------------------------------------------------------------------
    def take(self, select: Callable[[list[Item]], list[FrameItem]]) -> list[FrameItem]:
        """Mark pending the frames `select` picks from the items (under the lock); return them.

        `select` is the summary rule's choice (core/summariser.py SummaryRule); a pending
        frame is not picked again until it is released or spliced.
        """
        with self._lock:
            chosen = select(self._items)
            for it in chosen:
                it.pending = True
            return chosen

    def splice_summary(self, frames: Sequence[FrameItem], text: str, failed: bool = False,
                       method: str = "llm") -> SummaryItem | None:
        """Replace `frames` (still in the timeline) and their events by one summary, in place.

        None when the frames are gone (another path summarised them first).
        """
        with self._lock:
            span = run_span(self._items, frames)
            if not span:
                return None
            summ = SummaryItem(text, tuple(f.id for f in frames), failed=failed, method=method)
            ids = {id(it) for it in span}
            first = next(i for i, it in enumerate(self._items) if id(it) in ids)
            self._items = [it for it in self._items if id(it) not in ids]
            self._items.insert(first, summ)
            self._text_chars += len(text) - sum(len(it.text) for it in span
                                                if isinstance(it, EventItem))
            return summ

    def span(self, frames: Sequence[FrameItem]) -> list[Item]:
        """run_span of `frames` in the timeline now."""
        with self._lock:
            return run_span(self._items, frames)

    def release(self, frames: Iterable[FrameItem], failed: bool = True) -> None:
        """A summary failed (or gave way to a reply): the frames become selectable again."""
        with self._lock:
            for f in frames:
                f.pending = False
                f.failures += int(failed)

    def pending_frames(self) -> list[list[FrameItem]]:
        """Runs of consecutive frames held by summaries still in flight, oldest first."""
        runs: list[list[FrameItem]] = []
        with self._lock:
            in_run = False
            for it in self._items:
                if in_run and isinstance(it, EventItem):
                    continue
                held = isinstance(it, FrameItem) and it.pending
                if held and not in_run:
                    runs.append([])
                if held:
                    runs[-1].append(it)
                in_run = held
        return runs

    # --- history folding -------------------------------------------------------------------
    def select_for_fold(self, budget_chars: int, keep_recent_lines: int) -> list[Item]:
        """Choose the oldest text prefix to fold once lines and summaries exceed the budget.

        The prefix stops at the first frame and never reaches the newest `keep_recent_lines`
        dialogue lines. Marks the chosen items pending; [] if nothing to do.
        """
        with self._lock:
            if self._folding or self._text_chars <= budget_chars:
                return []
            lines = [i for i, it in enumerate(self._items) if isinstance(it, LineItem)]
            limit = lines[-keep_recent_lines] if 0 < keep_recent_lines <= len(lines) else (
                len(self._items) if keep_recent_lines == 0 else 0)
            chosen: list[Item] = []
            for it in self._items[:limit]:
                if isinstance(it, FrameItem):
                    break
                chosen.append(it)
            if not any(isinstance(it, LineItem) for it in chosen):
                return []
            for it in chosen:
                it.pending_fold = True
            self._folding = True
            return chosen

    def apply_fold(self, items: Sequence[Item], new_summary: str) -> None:
        """Remove the folded items and set the running history summary."""
        ids = {id(it) for it in items}
        with self._lock:
            self._items = [it for it in self._items if id(it) not in ids]
            self.folded_lines += sum(1 for it in items if isinstance(it, LineItem))
            self._text_chars -= sum(len(it.text) for it in items)
            self.history_summary = new_summary
            self._folding = False

    def release_fold(self, items: Iterable[Item]) -> None:
        with self._lock:
            for it in items:
                it.pending_fold = False
            self._folding = False
