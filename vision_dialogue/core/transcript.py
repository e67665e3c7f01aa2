"""A crash-safe JSONL transcript of the conversation, with frames stored as JPEG files.

One run = one folder `<root>/<YYYYmmdd-HHMMSS>-<pid>/` holding `transcript.jsonl` and
`frames/frame_000001.jpg`, ... Every entry is one JSON line, written and flushed at once
(frames: the JPEG file is written first, then the line that references it), so a crash
loses nothing that was already reported. Plug it into a Conversation as a listener (each entry
written as its record, core/entries.py).

Privacy: `retention` says how long frame files live (RETENTIONS: kept, never stored, deleted
when the run closes, or deleted N days after their run by the next run that starts); the
transcript's text stays. `redact` (e.g. perception.privacy.FaceBlurrer) is applied to every
frame before it is stored; a frame it fails on is not stored.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from pathlib import Path

from vision_dialogue.common.images import ImagePolicy
from vision_dialogue.core.entries import Entry, FrameEntry
from vision_dialogue.common.redaction import TRANSCRIPT_FILE, ForgottenPeople, RunLock, \
    RunRedaction, redact_run, redact_transcripts

_log = logging.getLogger("vision_dialogue.transcript")
#: frame_retention values besides "<N>d" (frames deleted N days after their run)
RETENTIONS = ("keep", "none", "session")
_DAYS = re.compile(r"^(\d{1,5})d$")
DAY_S = 86400.0


def parse_retention(value: str) -> str | int:
    """'keep' | 'none' | 'session' as they are, '<N>d' as N (days); ValueError otherwise."""
    value = str(value).strip()
    if value in RETENTIONS:
        return value
    m = _DAYS.match(value)
    if m:
        return int(m.group(1))
    raise ValueError(f"{value!r}: one of {', '.join(RETENTIONS)}, or a number of days "
                     "such as 7d")


def expire_frames(root: str | os.PathLike, days: int, keep: Path | None = None,
                  now: float | None = None) -> int:
    """Delete the frames/ folders of runs under `root` last written more than `days` ago.

    A run's age is its transcript's last write. Returns the number of frame files deleted.
    """
    now = time.time() if now is None else now
    deleted = 0
    for run in Path(root).glob(f"*/{TRANSCRIPT_FILE}"):
        frames = run.parent / "frames"
        if run.parent == keep or not frames.is_dir():
            continue
        if now - run.stat().st_mtime > days * DAY_S:
            deleted += sum(1 for _ in frames.iterdir())
            shutil.rmtree(frames, ignore_errors=True)
    return deleted


class TranscriptWriter:
    """Appends conversation events to `transcript.jsonl` in a fresh run folder."""

    def __init__(self, root: str | os.PathLike, policy: ImagePolicy | None = None,
                 run_name: str | None = None, logger=None, fsync: bool = False,
                 retention: str = "keep", redact=None):
        self.policy = policy or ImagePolicy()
        self.log = logger or _log
        self.retention = parse_retention(retention)
        self.redact = redact
        name = run_name or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self.dir = Path(root) / name
        self.frames_dir = self.dir / "frames"
        made = self.dir if self.retention == "none" else self.frames_dir
        made.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / TRANSCRIPT_FILE
        self._run_lock = RunLock(self.dir)       # others leave this run to us (redaction)
        self._run_lock.take()
        self._f = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._fsync = fsync
        self.errors = 0
        if isinstance(self.retention, int):
            gone = expire_frames(root, self.retention, keep=self.dir)
            if gone:
                self.log.info(f"frame_retention={retention}: deleted {gone} frame files of "
                              f"runs older than {self.retention} days")

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

    def __call__(self, entry: Entry) -> None:
        """Conversation listener: each entry as its record (a frame's also as a JPEG file)."""
        record = entry.to_record()
        if record is None:
            return
        if isinstance(entry, FrameEntry):
            record["file"] = None if self.retention == "none" else self._store(entry.frame)
        self.write(record)

    def _store(self, f) -> str | None:
        """Write a frame's JPEG (redacted first, if asked); its path, None if not stored."""
        rel = f"frames/frame_{f.id:06d}.jpg"
        try:
            jpeg = f.stored_jpeg(self.policy.newest_max_side, self.policy.jpeg_quality,
                                 self.redact)
            (self.dir / rel).write_bytes(jpeg)
        except Exception as e:  # noqa: BLE001 - a failed redaction stores nothing
            self.errors += 1
            self.log.error(f"cannot store frame {f.id} ({type(e).__name__}: {e})")
            return None
        return rel

    def forget(self, who: ForgottenPeople) -> list[RunRedaction]:
        """Them out of this run (still being written) and every other run under its root."""
        with self._lock:
            if self._f is None:
                return []
            self._f.close()
            try:
                own = redact_run(self.dir, who)
            finally:
                self._f = open(self.path, "a", encoding="utf-8")
        return [own] + redact_transcripts(self.dir.parent, who, own_run=self.dir)

    def close(self) -> None:
        if self.retention == "session" and self._f is not None:
            n = sum(1 for _ in self.frames_dir.glob("*.jpg"))
            shutil.rmtree(self.frames_dir, ignore_errors=True)
            self.write({"type": "frames_deleted", "count": n,
                        "reason": "frame_retention=session"})
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None
                self._run_lock.release()


def describe_record(r: dict) -> str:
    """One console line for a record (frames, summaries, events, replies; "" for the rest)."""
    if r["type"] == "frame":
        return f"frame {r['frame_id']}: {r.get('observation') or '(image)'}"
    if r["type"] == "summary":
        return f"summary of frames {r['frame_ids']} ({r['method']}): {r['text']}"
    if r["type"] == "event":
        return f"seen between frames: {r['text']}"
    if r["type"] == "reply":
        return (f"turn {r['turn_id']}: first sentence {r['first_sentence_s']:.2f} s, "
                f"reply {r['reply_s']:.2f} s, {len(r['frames_in_prompt'])} frames and "
                f"{r['prompt_chars']} characters in the prompt")
    return ""


def record_from_json(text: str) -> dict:
    """A record sent as JSON text (dialogue/events, dialogue/face); ValueError if it is not one."""
    record = json.loads(text)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


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
