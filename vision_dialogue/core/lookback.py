"""Look-back memory, the paper's future work: the LLM sees frames that left the prompt again.

Every frame of the session goes into a bounded `FrameArchive` (newest `max_frames`; a frame
every 5 s keeps an hour), with the summary sentence that replaced it once it is summarised.
`LookBack` offers one function tool, `look_back`, to backends that call tools: by time
(`seconds_ago`), by what to look for (`about`, matched against the frames' observations and
summaries), or, with neither, the first frame of the session. It answers with what the frame
was (time, summary, observation) and, for a vision backend, the frame itself. It runs in this
process on frames already in memory, so a look costs milliseconds, and the tool loop's round
limit bounds the turn. A turn that offers tools is not streamed, so the conversation offers
look_back on turns about the past (`about_the_past`) and whenever other tools are offered.

`ToolSet` offers several tool providers as one (look-back next to the VFM tools).
"""
from __future__ import annotations

import re
import threading
import time
from collections import deque
from typing import Callable, Sequence

from vision_dialogue.common.images import Frame
from vision_dialogue.llm.tool_loop import TOOLS_NOTE, ToolOutcome

LOOK_BACK = "look_back"
#: system note when the look-back tool is offered
LOOK_BACK_NOTE = (
    "When the person asks about something you saw earlier and your notes do not say enough, "
    "call look_back to see that moment again: seconds_ago for a time, about for a thing. "
    "Then answer in your own words, in the past tense.")
SCHEMA = {"type": "function", "function": {
    "name": LOOK_BACK,
    "description": "See again a moment you saw earlier in this conversation, before what is "
                   "in view now. Give seconds_ago, or about (what to look for), or neither "
                   "for the first thing you saw.",
    "parameters": {"type": "object", "properties": {
        "seconds_ago": {"type": "string", "description": "how long ago, in seconds, e.g. '60'"},
        "about": {"type": "string", "description": "what to look for, e.g. 'a cup'"}},
        "required": []}}}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "is", "was", "with",
         "there", "some", "any", "thing", "things", "what", "saw", "see"}


#: an utterance about earlier moments: the look_back tool is offered for its turn
_PAST = re.compile(r"\b(earlier|before|ago|previous(ly)?|last time|at first|when we (started|"
                   r"began|met)|a (minute|moment|while) back|did you see|have you seen|you saw|"
                   r"was there|were there|used to be|remember)\b", re.I)


def about_the_past(text: str) -> bool:
    """Whether the person asks about something earlier (so the look-back tool may help)."""
    return bool(_PAST.search(text))


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if w not in _STOP}


class FrameArchive:
    """The session's frames (bounded), each with the summary that replaced it, if any."""

    def __init__(self, max_frames: int = 720):
        self._frames: deque[Frame] = deque(maxlen=max_frames)
        self._summaries: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, frame: Frame) -> None:
        with self._lock:
            if len(self._frames) == self._frames.maxlen:
                self._summaries.pop(self._frames[0].id, None)
            self._frames.append(frame)

    def summarised(self, frame_ids: Sequence[int], text: str) -> None:
        with self._lock:
            for i in frame_ids:
                self._summaries[int(i)] = text

    def summary_of(self, frame_id: int) -> str:
        return self._summaries.get(frame_id, "")

    def frames(self, exclude: set[int] = frozenset()) -> list[Frame]:
        with self._lock:
            return [f for f in self._frames if f.id not in exclude]

    def find(self, seconds_ago: float | None = None, about: str = "",
             exclude: set[int] = frozenset(), now: float | None = None) -> Frame | None:
        """The frame asked for: nearest in time, best match for `about`, or the first."""
        frames = self.frames(exclude)
        if not frames:
            return None
        if about.strip():
            wanted = _words(about)
            scored = [(len(wanted & _words(f"{f.observation or ''} {self.summary_of(f.id)}")),
                       -k, f) for k, f in enumerate(frames)]
            best = max(scored, key=lambda s: s[:2])
            if best[0] > 0:
                return best[2]
            if seconds_ago is None:
                return None
        if seconds_ago is not None:
            t = (time.time() if now is None else now) - seconds_ago
            return min(frames, key=lambda f: abs(f.stamp - t))
        return frames[0]


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} seconds ago"
    if seconds < 5400:
        return f"{round(seconds / 60)} minutes ago"
    return f"{seconds / 3600:.1f} hours ago"


class LookBack:
    """The look_back tool over `archive` (a ToolProvider for Conversation).

    in_prompt(): ids of the frames the prompt shows now (they are not looked back at).
    image_url(frame): a data URL for vision backends, or None (text-only: words only).
    """

    note = LOOK_BACK_NOTE

    def __init__(self, archive: FrameArchive, in_prompt: Callable[[], set[int]],
                 image_url: Callable[[Frame], str] | None = None):
        self.archive, self.in_prompt, self.image_url = archive, in_prompt, image_url

    def schemas(self) -> list[dict]:
        return [SCHEMA] if self.archive.frames(self.in_prompt()) else []

    def run(self, name: str, args: dict) -> ToolOutcome:
        if name != LOOK_BACK:
            return ToolOutcome(error=f"unknown tool {name!r}")
        seconds = None
        if str(args.get("seconds_ago") or "").strip():
            try:
                seconds = float(str(args["seconds_ago"]).strip().split()[0])
            except ValueError:
                return ToolOutcome(error=f"seconds_ago must be a number of seconds, got "
                                         f"{args['seconds_ago']!r}")
        about = str(args.get("about") or "")
        frame = self.archive.find(seconds, about, exclude=self.in_prompt())
        if frame is None:
            what = f" with {about!r}" if about.strip() else ""
            return ToolOutcome(text=f"You saw nothing earlier{what}.")
        parts = [f"Frame {frame.id}, {_ago(time.time() - frame.stamp)}."]
        summary = self.archive.summary_of(frame.id)
        if summary:
            parts.append(f"What you noted then: {summary}")
        if frame.observation:
            parts.append(f"What was there: {frame.observation}")
        url = self.image_url(frame) if self.image_url is not None else None
        return ToolOutcome(text=" ".join(parts), image_url=url)


class ToolSet:
    """Several tool providers offered as one; a call goes to the provider that offered it."""

    def __init__(self, *providers, on_error: Callable[[Exception], None] = lambda e: None):
        self.providers = [p for p in providers if p is not None]
        self.on_error = on_error
        self._owner: dict[str, object] = {}

    def notes(self) -> list[str]:
        """The system notes of the providers that offered a tool (`note`, else TOOLS_NOTE).

        A provider whose note is `standing` has it in the prompt already (every turn).
        """
        offering = [p for p in self.providers if p in self._owner.values()
                    and not getattr(p, "standing", False)]
        return [getattr(p, "note", TOOLS_NOTE) for p in offering]

    def schemas(self) -> list[dict]:
        """Every provider's schemas; one that fails is left out this time (on_error)."""
        out, owner = [], {}
        for p in self.providers:
            try:
                schemas = list(p.schemas() or [])
            except Exception as e:  # noqa: BLE001 - the other tools are still offered
                self.on_error(e)
                continue
            for s in schemas:
                name = s["function"]["name"]
                if name in owner:
                    self.on_error(ValueError(f"two tools are named {name!r}; the first one "
                                             "is offered"))
                    continue
                owner[name] = p
                out.append(s)
        self._owner = owner
        return out

    def owner(self, name: str):
        """The provider that offered tool `name` this time (None: none did)."""
        return self._owner.get(name)

    def run(self, name: str, args: dict) -> ToolOutcome:
        provider = self._owner.get(name)
        if provider is None:
            return ToolOutcome(error=f"unknown tool {name!r}")
        return provider.run(name, args)
