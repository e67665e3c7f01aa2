"""What the monitor page shows, built from event records; no ROS, no web.

Records are the manager's `dialogue/events` messages, or the lines of a finished run's
transcript.jsonl (the same format: core/entries.py, each entry's `to_record()`). The view keeps:

- the timeline in arrival order: frames (raw, being summarised, summarised; with their
  observation and a thumbnail), summaries with the frames they replaced, the person's and the
  robot's lines, tool calls and notes (dropped utterances, failed summaries, history folds);
- per-turn latency (first sentence, whole reply) and prompt size, for the plot;
- the speech state and the health of the LLM, the VFM server and the camera.

Every change bumps `version`; `snapshot()` is the JSON the page renders. Thread-safe: the ROS
callbacks write, the web server reads.
"""
from __future__ import annotations

import base64
import json
import threading
import time
from collections import OrderedDict
from pathlib import Path

from vision_dialogue.core.transcript import read_transcript

HEALTH_PARTS = ("llm", "vfm", "camera")
"""Components whose health the page shows (besides the speech state)."""


def note_item(kind: str, record: dict, t: float) -> dict:
    """The page's note for a record with no view of its own (dropped, event, fold, others)."""
    if kind == "dropped":
        return {"kind": "note", "t": t, "level": "warning",
                "text": f"not answered ({record.get('reason', '')}): {record.get('text', '')}"}
    if kind == "event":
        return {"kind": "note", "t": t, "level": "info", "text": f"seen: {record.get('text', '')}"}
    if kind == "skill":
        if record.get("stage") != "end":
            return {"kind": "note", "t": t, "level": "info",
                    "text": f"skill {record.get('skill')} {record.get('stage')}"}
        ok = bool(record.get("success"))
        result = json.dumps(record.get("result") or {}, ensure_ascii=False)
        why = f": {record['error']}" if record.get("error") else ""
        return {"kind": "note", "t": t, "level": "info" if ok else "warning",
                "text": f"skill {record.get('skill')} {record.get('status')}{why}"
                        + (f" {result}" if result != "{}" else "")}
    if kind == "intent":
        return {"kind": "note", "t": t, "level": "info",
                "text": f"intent {record.get('intent')} "
                        f"{json.dumps(record.get('data') or {}, ensure_ascii=False)} "
                        f"from {record.get('source', '')}: \"{record.get('utterance', '')}\""}
    if kind == "robot_action":
        stage = record.get("stage", "")
        detail = record.get("text", "")
        if stage == "sent":
            detail = json.dumps(record.get("arguments") or {}, ensure_ascii=False)
        return {"kind": "note", "t": t,
                "level": "warning" if stage in ("failed", "cancelled") else "info",
                "text": f"robot {record.get('kind', 'action')} {record.get('tool')} {stage}: "
                        f"{detail}"}
    if kind == "face":
        return face_note(record, t)
    if kind == "fold":
        return {"kind": "note", "t": t, "level": "info",
                "text": "older dialogue folded into the memory: "
                        + str(record.get("summary", record.get("text", "")))}
    return {"kind": "note", "t": t, "level": "info",
            "text": f"{kind}: " + ", ".join(f"{k}={v}" for k, v in record.items()
                                            if k not in ("t",))}


def face_note(record: dict, t: float) -> dict:
    """The robot's face at a line: the expression, valence/arousal, its gesture and the line."""
    name = str(record.get("expression", ""))
    gesture = f", gesture {record['gesture']}" if record.get("gesture") else ""
    whose = "reacting to" if record.get("moment") == "heard" else "saying"
    return {"kind": "note", "t": t, "level": "face", "moment": record.get("moment", ""),
            "line": str(record.get("line", "")),
            "text": f"face: {name} (valence "
                    f"{float(record.get('valence', 0)):+.2f}, arousal "
                    f"{float(record.get('arousal', 0)):+.2f}{gesture}) {whose} "
                    f"\"{record.get('line', '')}\""}


class HealthBoard:
    """Each part's health on the page (HEALTH_PARTS first): ok (None: no news), detail, when."""

    def __init__(self):
        self.parts = {k: {"ok": None, "detail": "no news yet", "t": None}
                      for k in HEALTH_PARTS}

    def set(self, component: str, ok: bool | None, detail: str, t: float) -> None:
        self.parts[component] = {"ok": ok, "detail": str(detail)[:200], "t": t}

    def same(self, component: str, ok: bool | None, detail: str) -> bool:
        """Whether this is the news the board already shows."""
        old = self.parts.get(component, {})
        return old.get("ok") == ok and old.get("detail") == detail

    def view(self) -> dict:
        return {k: dict(v) for k, v in self.parts.items()}


class SessionView:
    """The monitor's model of one session (see the module docstring).

    max_items: timeline entries kept (the oldest go first); max_thumbnails: JPEG thumbnails
    kept in memory (live); frames_dir: where a finished run's frame files are (browsing).
    """

    def __init__(self, max_items: int = 600, max_thumbnails: int = 300,
                 frames_dir: Path | None = None, source: str = "live"):
        self.max_items, self.max_thumbnails = max_items, max_thumbnails
        self.frames_dir = frames_dir
        self.source = source
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.version = 0
        self._items: list[dict] = []
        self._frames: dict[int, dict] = {}           # frame id -> its timeline entry
        self._thumbs: OrderedDict[int, bytes] = OrderedDict()
        self._images: list[bytes] = []                # images the tools made (live)
        self._turns: list[dict] = []
        self._speech = {"state": "unknown", "t": None}
        self._health = HealthBoard()
        self._last_frame_t: float | None = None
        self._people: list[dict] = []                # people_node's people/state

    # --- input ---------------------------------------------------------------------------
    def ingest(self, record: dict) -> None:
        """Add one event record (unknown types are kept as notes)."""
        kind = record.get("type")
        t = record.get("t") or time.time()
        handler = {
            "frame": self._add_frame, "objects": self._set_objects,
            "summarising": self._on_summarising, "summary_deferred": self._on_summarising,
            "summary": self._on_summary, "summary_failed": self._on_summary_failed,
            "user": self._on_user, "reply": self._add_reply, "exchange": self._on_exchange,
            "tool_image": self._on_tool_image, "health": self._on_health,
        }.get(kind)
        with self._lock:
            if handler is not None:
                handler(record, t)
            else:
                self._append(note_item(kind, record, t))
            self._bump()

    def _on_summarising(self, record: dict, t: float) -> None:
        status = "summarising" if record.get("type") == "summarising" else "raw"
        for fid in record.get("frame_ids", []):
            if fid in self._frames and self._frames[fid]["status"] != "summarised":
                self._frames[fid]["status"] = status

    def _on_summary(self, record: dict, t: float) -> None:
        ids = list(record.get("frame_ids", []))
        for fid in ids:
            if fid in self._frames:
                self._frames[fid]["status"] = "summarised"
        self._place_summary({"kind": "summary", "t": t, "frame_ids": ids,
                             "text": record.get("text", ""),
                             "method": record.get("method", "llm")})

    def _on_summary_failed(self, record: dict, t: float) -> None:
        for fid in record.get("frame_ids", []):
            if fid in self._frames and self._frames[fid]["status"] == "summarising":
                self._frames[fid]["status"] = "raw"
        self._append({"kind": "note", "t": t, "level": "warning",
                      "text": f"summary of frames {record.get('frame_ids')} failed: "
                              f"{record.get('error', '')}"})

    def _on_user(self, record: dict, t: float) -> None:
        self._append({"kind": "user", "t": t, "turn_id": record.get("turn_id"),
                      "text": record.get("text", ""), "speaker": record.get("speaker", "")})

    def _on_exchange(self, record: dict, t: float) -> None:
        self._append({"kind": "user", "t": t, "text": record.get("user", "")})
        self._append({"kind": "robot", "t": t, "text": record.get("robot", "")})

    def _on_tool_image(self, record: dict, t: float) -> None:
        thumb = record.get("thumbnail")
        if thumb:
            self._images.append(base64.b64decode(thumb))
        self._append({"kind": "image", "t": t, "image_file": record.get("image_file"),
                      "thumbnail": f"images/{len(self._images) - 1}.jpg" if thumb else None})

    def _on_health(self, record: dict, t: float) -> None:
        self._health.set(record.get("component", "?"), record.get("ok"),
                         record.get("detail", ""), t)

    def set_speech_state(self, state: str) -> None:
        with self._lock:
            self._speech = {"state": state, "t": time.time()}
            self._bump()

    def set_health(self, component: str, ok: bool | None, detail: str) -> None:
        with self._lock:
            if not self._health.same(component, ok, detail):
                self._health.set(component, ok, detail, time.time())
                self._bump()

    def set_people(self, state_json: str) -> None:
        """people_node's `people/state`: who is in view, the match and their consent.

        Raises ValueError for a state that is not its JSON (the page keeps the last good one).
        """
        state = json.loads(state_json)
        people = state.get("people") if isinstance(state, dict) else None
        if not isinstance(people, list) or not all(
                isinstance(p, dict) and isinstance(p.get("person_id"), str) for p in people):
            raise ValueError("expected {\"people\": [{\"person_id\": ...}, ...]}")
        keep = ("person_id", "name", "known", "confidence", "consent", "faces", "heard")
        with self._lock:
            self._people = [{k: p.get(k) for k in keep} for p in people]
            self._bump()

    def thumbnail(self, frame_id: int) -> bytes | None:
        """Return the frame's JPEG: from its record when live, from its file when browsing."""
        with self._lock:
            data = self._thumbs.get(frame_id)
            entry = self._frames.get(frame_id)
        if data is not None:
            return data
        if entry and entry.get("file") and self.frames_dir is not None:
            path = (self.frames_dir.parent / entry["file"]).resolve()
            if path.is_relative_to(self.frames_dir.parent.resolve()) and path.is_file():
                return path.read_bytes()
        return None

    def tool_image(self, index: int) -> bytes | None:
        """Return the JPEG of the index-th image a tool made (None: no such image)."""
        with self._lock:
            return self._images[index] if 0 <= index < len(self._images) else None

    def camera_age(self) -> float | None:
        """Seconds since the last frame arrived (None: none yet)."""
        with self._lock:
            return None if self._last_frame_t is None else time.time() - self._last_frame_t

    # --- output --------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """The page's data (JSON-ready)."""
        with self._lock:
            return {"version": self.version, "source": self.source,
                    "items": [dict(i) for i in self._items],
                    "turns": [dict(t) for t in self._turns],
                    "speech": dict(self._speech),
                    "people": [dict(p) for p in self._people],
                    "health": self._health.view()}

    def wait_change(self, seen: int, timeout: float) -> int:
        """Block until `version` differs from `seen` (or timeout); the current version."""
        with self._changed:
            self._changed.wait_for(lambda: self.version != seen, timeout)
            return self.version

    # --- helpers (lock held) -------------------------------------------------------------
    def _bump(self) -> None:
        self.version += 1
        self._changed.notify_all()

    def _append(self, item: dict) -> None:
        self._items.append(item)
        if item["kind"] in ("user", "robot"):
            self._gather_faces(item)
        self._append_trim()

    def _gather_faces(self, line: dict, look_back: int = 16) -> None:
        """Move the faces shown for `line` to right after it.

        The speech node reacts as it hears a line and shows a sentence's face as it says it:
        before the manager records the line.
        """
        text = line.get("text", "")
        moment = "heard" if line["kind"] == "user" else "sentence"
        start = max(0, len(self._items) - 1 - look_back)
        faces = [it for it in self._items[start:-1] if it.get("level") == "face"
                 and it.get("moment") == moment and it.get("line")
                 and (it["line"] == text if moment == "heard" else it["line"] in text)]
        if faces:
            self._items[start:-1] = [it for it in self._items[start:-1]
                                     if not any(it is f for f in faces)]
            self._items.extend(faces)

    def _place_summary(self, item: dict) -> None:
        """Put a summary right after the last frame it replaced, where it sits in the prompt.

        It is made later, so appending it would put it after newer frames and lines.
        """
        last = max(item["frame_ids"], default=None)
        at = next((i for i, it in enumerate(self._items)
                   if it["kind"] == "frame" and it["id"] == last), None)
        if at is None:
            self._append(item)
        else:
            self._items.insert(at + 1, item)
            self._append_trim()

    def _append_trim(self) -> None:
        while len(self._items) > self.max_items:
            old = self._items.pop(0)
            if old["kind"] == "frame":
                self._frames.pop(old["id"], None)

    def _set_objects(self, record: dict, t: float) -> None:
        frame = self._frames.get(int(record.get("frame_id", 0)))
        if frame is not None:
            frame["objects"] = record.get("text", "")
            frame["observation"] = record.get("observation") or frame["observation"]

    def _add_frame(self, record: dict, t: float) -> None:
        fid = int(record.get("frame_id", 0))
        thumb = record.get("thumbnail")
        if thumb:
            self._thumbs[fid] = base64.b64decode(thumb)
            while len(self._thumbs) > self.max_thumbnails:
                self._thumbs.popitem(last=False)
        has_image = bool(thumb) or bool(record.get("file") and self.frames_dir is not None)
        entry = {"kind": "frame", "t": t, "id": fid, "status": "raw",
                 "observation": record.get("observation") or "",
                 "objects": record.get("objects") or "",
                 "dark": bool(record.get("dark")), "file": record.get("file"),
                 "thumbnail": f"frames/{fid}.jpg" if has_image else None}
        self._frames[fid] = entry
        self._append(entry)
        self._last_frame_t = t
        self._health.set("camera", True, f"frame {fid}", t)

    def _add_reply(self, record: dict, t: float) -> None:
        if record.get("skill"):        # a line the application had said: no LLM turn
            self._append({"kind": "robot", "t": t, "turn_id": record.get("turn_id"),
                          "text": record.get("text", ""), "skill": record["skill"]})
            return
        self._append({"kind": "robot", "t": t, "turn_id": record.get("turn_id"),
                      "in_reply_to": record.get("in_reply_to", ""),
                      "text": record.get("text", ""), "fallback": bool(record.get("fallback")),
                      "error": record.get("error"),
                      "first_sentence_s": record.get("first_sentence_s"),
                      "reply_s": record.get("reply_s"),
                      "frames_in_prompt": record.get("frames_in_prompt", []),
                      "tools": record.get("tools", [])})
        self._turns.append({"turn_id": record.get("turn_id"), "t": t,
                            "first_sentence_s": record.get("first_sentence_s"),
                            "reply_s": record.get("reply_s"),
                            "prompt_chars": record.get("prompt_chars"),
                            "frames_in_prompt": len(record.get("frames_in_prompt", []))})
        if record.get("fallback"):
            self._health.set("llm", False, record.get("error") or "fallback reply", t)
        else:
            self._health.set("llm", True, f"turn {record.get('turn_id')} answered", t)


def load_run(folder: str | Path, **kw) -> SessionView:
    """A SessionView of a finished run: `folder` holds transcript.jsonl and frames/."""
    folder = Path(folder)
    path = folder / "transcript.jsonl" if folder.is_dir() else folder
    if not path.is_file():
        raise FileNotFoundError(f"no transcript.jsonl in {folder}")
    view = SessionView(frames_dir=path.parent / "frames", source=str(path.parent), **kw)
    for record in read_transcript(path):
        view.ingest(record)
    return view
