"""What a forgotten person leaves in the transcripts on this machine: nothing that names them.

"Forget me" removes a person from the people store (identity/); their lines and frames are
also in the manager's transcripts (core/transcript.py). Here each run that mentions them is
rewritten: their own lines become FORGOTTEN, their name and person ids in any other text
too, and the run's stored frames are deleted (a frame does not say who is in it, so every
frame of a run they appear in goes). Each file is replaced whole (a new file, synced, then
renamed over the old one), so a crash leaves the old or the new transcript, never half.

A run that a running manager writes holds a lock on its folder (RunLock); others skip it,
and that manager redacts its own run (TranscriptWriter.forget).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: what a forgotten person's words and name become
FORGOTTEN = "[forgotten]"
TRANSCRIPT_FILE = "transcript.jsonl"


@dataclass(frozen=True)
class ForgottenPeople:
    """The persons forgotten: their ids and the names they were known by."""

    person_ids: tuple[str, ...]
    names: tuple[str, ...] = ()
    _pattern: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        words = sorted({w.strip() for w in self.person_ids + self.names if w.strip()},
                       key=len, reverse=True)
        if not words:
            raise ValueError("ForgottenPeople: give a person id or a name")
        # whole words only: "Ann" is not redacted out of "Annual"
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)",
                             re.IGNORECASE)
        object.__setattr__(self, "_pattern", pattern)

    def mentioned_in(self, text: str) -> bool:
        return bool(self._pattern.search(text))

    def redact(self, text: str) -> str:
        return self._pattern.sub(FORGOTTEN, text)

    def is_them(self, speaker: str) -> bool:
        """Whether a speaker label is one of their names or ids."""
        return self._pattern.fullmatch(speaker.strip()) is not None

    def said(self, record: dict) -> bool:
        """Whether a transcript record is a line of theirs (`line_of_theirs`)."""
        return self.line_of_theirs(record.get("type"), record.get("speaker"))

    def line_of_theirs(self, role, speaker) -> bool:
        """Whether a line is theirs: a person's line whose speaker is one of their names or ids.

        (The timeline's role and a transcript record's type are both "user" for it.)
        """
        return role == "user" and isinstance(speaker, str) and self.is_them(speaker)


@dataclass(frozen=True)
class RunRedaction:
    """What was done to one run: lines changed, frame files deleted; skipped if in use."""

    run: str
    lines: int = 0
    frames: int = 0
    skipped: bool = False


def _redacted(value, who: ForgottenPeople):
    """Every string in a JSON value with their names and ids replaced."""
    if isinstance(value, str):
        return who.redact(value)
    if isinstance(value, list):
        return [_redacted(v, who) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v, who) for k, v in value.items()}
    return value


def redact_record(record: dict, who: ForgottenPeople) -> dict:
    """A transcript record without them: their own line's text gone, their names elsewhere."""
    if who.said(record):
        return {**record, "speaker": FORGOTTEN, "text": FORGOTTEN}
    return _redacted(record, who)


def redact_run(run_dir: Path, who: ForgottenPeople) -> RunRedaction:
    """Rewrite one run's transcript without them; its frames deleted if they appear in it.

    The caller holds the run (RunLock, or the writer's own lock). A line that is not JSON
    (a crash mid-line) is kept only if it does not mention them.
    """
    path = Path(run_dir) / TRANSCRIPT_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    out, changed = [], 0
    for line in lines:
        if not who.mentioned_in(line):
            out.append(line)
            continue
        changed += 1
        try:
            record = json.loads(line)
        except ValueError:
            continue                        # unreadable and about them: dropped
        out.append(json.dumps(redact_record(record, who), ensure_ascii=False) + "\n")
    if not changed:
        return RunRedaction(str(run_dir))
    frames = _delete_frames(Path(run_dir) / "frames")
    out = [_without_file(line) for line in out] if frames else out
    tmp = path.with_name(path.name + ".redacting")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _sync_dir(Path(run_dir))
    return RunRedaction(str(run_dir), changed, frames)


def _delete_frames(frames_dir: Path) -> int:
    if not frames_dir.is_dir():
        return 0
    gone = 0
    for jpeg in frames_dir.glob("*.jpg"):
        jpeg.unlink(missing_ok=True)
        gone += 1
    return gone


def _without_file(line: str) -> str:
    """A frame record whose JPEG was deleted says so (file null, forgotten true)."""
    if '"type": "frame"' not in line:
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if record.get("type") != "frame" or not record.get("file"):
        return line
    return json.dumps({**record, "file": None, "forgotten": True}, ensure_ascii=False) + "\n"


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunLock:
    """An exclusive lock on a run folder: held by its writer for the run's life."""

    def __init__(self, run_dir: Path):
        self.fd = os.open(run_dir, os.O_RDONLY)

    def take(self, wait: bool = True) -> bool:
        """Whether it is ours now (wait=False: give up at once if another holds it)."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            return True
        except BlockingIOError:
            return False

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)           # closing the descriptor releases its lock
            self.fd = None


def redact_transcripts(root: str | os.PathLike, who: ForgottenPeople,
                       own_run: str | os.PathLike | None = None) -> list[RunRedaction]:
    """Every run under `root` without them; a run a running manager holds is skipped.

    `own_run`: the caller's own run, which it redacts itself under its own lock.
    """
    done = []
    for transcript in sorted(Path(root).glob(f"*/{TRANSCRIPT_FILE}")):
        if own_run is not None and transcript.parent == Path(own_run):
            continue
        lock = RunLock(transcript.parent)
        try:
            if not lock.take(wait=False):
                done.append(RunRedaction(str(transcript.parent), skipped=True))
                continue
            done.append(redact_run(transcript.parent, who))
        finally:
            lock.release()
    return done


__all__ = ["FORGOTTEN", "ForgottenPeople", "RunRedaction", "RunLock", "redact_record",
           "redact_run", "redact_transcripts"]
