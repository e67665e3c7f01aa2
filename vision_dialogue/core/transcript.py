"""A crash-safe JSONL transcript of the conversation, with frames stored as JPEG files.

One run = one folder `<root>/<YYYYmmdd-HHMMSS>-<pid>/` holding `transcript.jsonl` and
`frames/frame_000001.jpg`, ... Every event is one JSON line, written and flushed at once
(frames: the JPEG file is written first, then the line that references it), so a crash
loses nothing that was already reported. Plug it into a Conversation as a listener.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from vision_dialogue.core.images import ImagePolicy

_log = logging.getLogger("vision_dialogue.transcript")


class TranscriptWriter:
    """Appends conversation events to `transcript.jsonl` in a fresh run folder."""

    def __init__(self, root: str | os.PathLike, policy: ImagePolicy | None = None,
                 run_name: str | None = None, logger=None, fsync: bool = False):
        self.policy = policy or ImagePolicy()
        self.log = logger or _log
        name = run_name or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self.dir = Path(root) / name
        self.frames_dir = self.dir / "frames"
        self.frames_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "transcript.jsonl"
        self._f = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._fsync = fsync
        self.errors = 0

    def write(self, record: dict) -> None:
        """Append one record (adds "t", wall-clock seconds) and flush it."""
        record = {"t": round(time.time(), 3), **record}
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            if self._f is None:
                return
            try:
                self._f.write(line)
                self._f.flush()
                if self._fsync:
                    os.fsync(self._f.fileno())
            except OSError as e:
                self.errors += 1
                self.log.error(f"transcript write failed ({e})")

    def __call__(self, kind: str, data: dict) -> None:
        """Conversation listener: turns events into records (frames also into JPEG files)."""
        record = event_record(kind, data)
        if record is None:
            return
        if kind == "frame":
            f = data["frame"]
            rel = f"frames/frame_{f.id:06d}.jpg"
            try:
                (self.dir / rel).write_bytes(
                    f.jpeg(self.policy.newest_max_side, self.policy.jpeg_quality))
            except (OSError, ValueError) as e:
                self.errors += 1
                self.log.error(f"cannot store frame {f.id} ({e})")
                rel = None
            record["file"] = rel
        self.write(record)

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None


def event_record(kind: str, data: dict) -> dict | None:
    """The JSON record of a Conversation event (None: not recorded).

    One format for the transcript's lines and the manager's `dialogue/events` messages, which
    the monitor reads live or from a finished run.
    """
    if kind == "frame":
        f = data["frame"]
        return {"type": "frame", "frame_id": f.id, "stamp": f.stamp, "file": None,
                "dark": f.dark, "observation": f.observation}
    if kind == "user":
        return {"type": "user", **data}
    if kind == "reply":
        r = data["result"]
        rec = {"type": "reply", "turn_id": r.turn_id, "in_reply_to": r.in_reply_to,
               "text": r.text, "sentences": r.sentences, "fallback": r.fallback,
               "error": r.error, "frames_in_prompt": r.frame_ids,
               "summaries_in_prompt": [list(x) for x in r.summary_ids],
               "first_sentence_s": r.first_sentence_s, "reply_s": r.reply_s,
               "prompt_chars": r.prompt_chars}
        if getattr(r, "tools", None):
            rec["tools"] = [{"name": t.name, "arguments": t.arguments, "text": t.outcome.text,
                             "image_file": t.outcome.image_file, "error": t.outcome.error}
                            for t in r.tools]
        return rec
    if kind == "exchange":
        return {"type": "exchange", **{k: v for k, v in data.items()
                                       if isinstance(v, (str, int, float, bool))}}
    if kind == "summary":
        return {"type": "summary", "frame_ids": data["frame_ids"], "text": data["text"],
                "method": data.get("method", "llm")}
    if kind == "summary_failed":
        return {"type": "summary_failed", "frame_ids": data["frame_ids"],
                "error": data["error"], "attempts": data["attempts"],
                "marker": data["marker"] is not None}
    if kind in ("summarising", "summary_deferred", "fold", "fold_failed", "dropped"):
        return {"type": kind, **data}
    return None


def read_transcript(path: str | os.PathLike) -> list[dict]:
    """All records of a transcript.jsonl (skips a torn last line after a crash)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out
