"""Building the OpenAI-format messages: replies, frame-summary requests, history folding.

Reply prompt, in order: the persona's system text; the running history summary (if any); the
timeline items in arrival order (frames as images, summaries as "[Earlier you saw: ...]",
user lines as `user`, robot lines as `assistant`; adjacent user-side items share one message;
for a text-only backend, frame observations and summaries are `system` messages in place);
and, in the system message, a note when no frame has arrived yet or the newest frame is dark.
The newest frame goes in at full configured size, older ones downscaled (ImagePolicy). With a
text-only backend the frames, summaries and events between two dialogue lines go in as one
line of text observations, worded as their "merge" summary will be ("Earlier you saw: A; then
B"), and what the robot sees now is said again right before the person's last line
(`now_index`): a local model keeps the prompt it has read (llama.cpp's prefix cache) when a
frame comes or is summarised, instead of reading again everything after the frame.
"""
from __future__ import annotations

from typing import Sequence

from vision_dialogue.common.images import ImagePolicy
from vision_dialogue.core.persona import Persona
from vision_dialogue.core.timeline import ROBOT, THEN, EventItem, FrameItem, Item, LineItem, \
    SummaryItem, merge_observations, run_span

UNSEEN = "nothing I can make out"     # a frame without an observation (its observer failed)


class PromptBuilder:
    """Turns timeline snapshots into chat messages."""

    def __init__(self, persona: Persona, policy: ImagePolicy, supports_images: bool = True):
        self.persona = persona
        self.policy = policy
        self.supports_images = supports_images
        self.label_speakers = False     # on once two people have spoken: "[speaker] line"
        self.notes: dict[str, str] = {}  # standing system notes (a Chat's purpose, abilities)

    # --- parts -----------------------------------------------------------------------------
    def _frame_parts(self, item: FrameItem, newest: bool, summary_size: bool = False) -> list:
        f = item.frame
        if not self.supports_images:
            obs = f.observation or UNSEEN
            label = self.persona.frame_label if newest and not summary_size else "You saw:"
            return [{"type": "text", "text": f"[{label} {obs}]"}]
        parts = []
        if newest and not summary_size:
            parts.append({"type": "text", "text": f"[{self.persona.frame_label}]"})
        parts.append(self.policy.part(f, newest and not summary_size))
        if f.objects:
            parts.append({"type": "text", "text": f"[{self.persona.objects_label} {f.objects}]"})
        return parts

    def _add_now_note(self, msgs: list, newest: FrameItem | None) -> None:
        """A text-only prompt: what the robot sees now, at the end (`now_index`)."""
        if newest is not None:
            msgs.insert(now_index(msgs), {"role": "system",
                                          "content": f"{self.persona.frame_label} "
                                                     f"{newest.frame.observation or UNSEEN}"})

    def _summary_part(self, item: SummaryItem) -> dict:
        return {"type": "text", "text": f"[{self.persona.summary_label} {item.text}]"}

    def _event_text(self, item: EventItem) -> str:
        return f"{self.persona.event_label} {item.text}"

    @staticmethod
    def _pack(messages: list, role: str, parts: list) -> None:
        """Append parts as `role`, merging into the previous message of the same role."""
        if messages and messages[-1]["role"] == role and isinstance(messages[-1]["content"], list):
            messages[-1]["content"].extend(parts)
        else:
            messages.append({"role": role, "content": list(parts)})

    @staticmethod
    def _flatten(messages: list) -> list:
        """Text-only content lists become plain strings (what every backend accepts)."""
        for msg in messages:
            c = msg["content"]
            if isinstance(c, list) and all(p.get("type") == "text" for p in c):
                msg["content"] = "\n".join(p["text"] for p in c)
        return messages

    def _head(self, history_summary: str) -> list:
        msgs = [{"role": "system", "content": self.persona.system.strip()}]
        if history_summary:
            msgs.append({"role": "system",
                         "content": f"[{self.persona.history_label} {history_summary}]"})
        return msgs

    # --- prompts ---------------------------------------------------------------------------
    def reply_messages(self, items: Sequence[Item], history_summary: str = "",
                       camera_lost: bool = False) -> list:
        """The prompt for the robot's next reply (the last user line is in `items`).

        Hot path (every turn): one pass, adjacent user-side items merged into one message,
        text-only messages as plain strings; frames use their cached data URLs. `camera_lost`:
        no frame came for a while, so the newest one is not what the robot sees now.
        """
        msgs = self._head(history_summary)
        msgs += [{"role": "system", "content": n} for n in self.notes.values() if n]
        newest = None if camera_lost else next(
            (it for it in reversed(items) if it.kind == "frame"), None)
        packer = _Packer(msgs)
        seen: list[Item] = []           # a text-only prompt's run of frames, summaries, events
        for it in items:
            if not self.supports_images and it.kind in ("frame", "summary", "event"):
                # Text-only backend: what the robot saw goes in as system messages at its place
                # in the timeline, so the user turns hold only what the person said (small
                # models otherwise echo or continue the user turn); one line per run between
                # two dialogue lines (what it sees now is said at the end)
                seen.append(it)
                continue
            self._add_seen(packer, seen)
            seen = []
            if it.kind == "line" and it.role == ROBOT:
                if it.calls:
                    packer.flush()
                    msgs.extend(_calls_made(it))
                packer.add("assistant", [{"type": "text", "text": it.text}], merge=False)
            else:
                packer.add("user", self._user_parts(it, newest))
        self._add_seen(packer, seen)
        packer.flush()
        if not self.supports_images:
            self._add_now_note(msgs, newest)
        self._add_eyes_note(msgs, newest, camera_lost)
        return msgs

    def _add_seen(self, packer: "_Packer", run: list) -> None:
        if run:
            packer.add("system", [{"type": "text", "text": self.seen_text(run)}])

    def seen_text(self, run: Sequence[Item]) -> str:
        """One line for a run of frames, summaries and events between two dialogue lines.

        Worded as a "merge" summary of the run will be: a summary of some of its frames, or a
        new frame at its end, leaves the line as the model read it up to there (llama.cpp's
        prefix cache holds), instead of changing every line after it.
        """
        parts: list[str] = []
        for it in run:
            if it.kind == "summary":
                parts += it.text.split(THEN)
            elif it.kind == "event":
                parts.append(it.text)
            else:
                parts.append(it.frame.observation or UNSEEN)
        label = self.persona.summary_label if any(it.kind != "event" for it in run) \
            else self.persona.event_label
        return f"{label} {merge_observations(parts)}"

    def _user_parts(self, item: Item, newest: FrameItem | None) -> list:
        if item.kind == "frame":
            return self._frame_parts(item, item is newest)
        if item.kind == "summary":
            return [self._summary_part(item)]
        if item.kind == "event":
            return [{"type": "text", "text": f"[{self._event_text(item)}]"}]
        if self.label_speakers and item.speaker:
            return [{"type": "text", "text": f"[{item.speaker}] {item.text}"}]
        return [{"type": "text", "text": item.text}]

    def _add_eyes_note(self, msgs: list, newest: FrameItem | None, camera_lost: bool) -> None:
        """When the robot cannot see now (no frame yet, camera lost, darkness), say so.

        Vision models get the note in the first system message. A small text model ignores a note
        that far from the question and invents a view, so it gets it in place of what it would
        see now, right before the person's last line.
        """
        note = ""
        if camera_lost:
            note = self.persona.camera_lost_note
        elif newest is None:
            note = self.persona.no_frames_note
        elif newest.frame.dark:
            note = self.persona.dark_frames_note
        if not note:
            return
        if self.supports_images:
            msgs[0] = {"role": "system", "content": f"{msgs[0]['content']}\n\n{note.strip()}"}
            return
        msgs.insert(now_index(msgs), {"role": "system", "content": note.strip().strip("[]")})

    def summary_messages(self, items: Sequence[Item], frames: Sequence[FrameItem],
                         history_summary: str = "") -> list:
        """The paper's summary request.

        Instructions, the conversation, earlier summaries and events up to the frames, then the
        frames (older size) with the events between them, then the request for one sentence.
        """
        msgs = self._head(history_summary)
        span = run_span(items, frames) or list(frames)
        for it in items:
            if it is span[0]:
                break
            if isinstance(it, SummaryItem):
                self._pack(msgs, "user", [self._summary_part(it)])
            elif isinstance(it, EventItem):
                self._pack(msgs, "user", [{"type": "text", "text": f"[{self._event_text(it)}]"}])
            elif isinstance(it, LineItem):
                role = "assistant" if it.role == ROBOT else "user"
                self._pack(msgs, role, [{"type": "text", "text": it.text}])
        parts: list = []
        for f in span:
            if isinstance(f, EventItem):
                parts.append({"type": "text", "text": f"[{self._event_text(f)}]"})
            else:
                parts.extend(self._frame_parts(f, newest=False, summary_size=True))
        parts.append({"type": "text", "text": self.persona.summary_instruction.strip()})
        self._pack(msgs, "user", parts)
        return self._flatten(msgs)

    def fold_messages(self, items: Sequence[Item], history_summary: str) -> list:
        """Ask for a new running history summary from the old one plus `items`."""
        lines = []
        for it in items:
            if isinstance(it, LineItem):
                who = f"Person ({it.speaker})" if it.speaker and self.label_speakers \
                    else "Person"
                lines.append(("Robot: " if it.role == ROBOT else f"{who}: ") + it.text)
            elif isinstance(it, SummaryItem):
                lines.append(f"(The robot saw: {it.text})")
            elif isinstance(it, EventItem):
                lines.append(f"(The robot noticed: {it.text})")
        body = (f"Earlier memory: {history_summary or '(none)'}\n\nNew part:\n"
                + "\n".join(lines))
        return [{"role": "system", "content": self.persona.history_instruction.strip()},
                {"role": "user", "content": body}]


def now_index(msgs: list) -> int:
    """Where a note about now goes: before the person's unanswered line, else at the end.

    (System notes after that line do not count.) Such notes change every turn; at the end, a
    local model reads only them again (the prompt before them is the one it read, llama.cpp's
    prefix cache).
    """
    last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i]["role"] != "system"), None)
    return last if last is not None and msgs[last]["role"] == "user" else len(msgs)


def _calls_made(line) -> list[dict]:
    """A robot line's tool calls as the messages they were: the call, then each result."""
    ids = [f"call_{line.seq}_{k}" for k in range(len(line.calls))]
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args, _) in zip(ids, line.calls)]}] + [
        {"role": "tool", "tool_call_id": i, "content": result}
        for i, (_, _, result) in zip(ids, line.calls)]


class _Packer:
    """Appends parts to a message list, merging adjacent parts of the same role into one message.

    A message whose parts are all text becomes one plain string.
    """

    def __init__(self, msgs: list):
        self.msgs, self.role, self.parts = msgs, None, []

    def add(self, role: str, parts: list, merge: bool = True) -> None:
        if merge and role == self.role:
            self.parts.extend(parts)
            return
        self.flush()
        self.role, self.parts = role, list(parts)

    def flush(self) -> None:
        if self.role is None:
            return
        text_only = all(p.get("type") == "text" for p in self.parts)
        self.msgs.append({"role": self.role, "content": "\n".join(p["text"] for p in self.parts)
                          if text_only else self.parts})
        self.role, self.parts = None, []


def prompt_size(messages: Sequence[dict]) -> tuple[int, int]:
    """(characters of text, bytes of image data URLs) of a message list."""
    chars = images = 0
    for m in messages:
        c = m["content"]
        if isinstance(c, str):
            chars += len(c)
            continue
        for p in c:
            if p.get("type") == "text":
                chars += len(p["text"])
            elif p.get("type") == "image_url":
                images += len(p["image_url"]["url"])
    return chars, images
