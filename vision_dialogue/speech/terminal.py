"""Terminal speech I/O: the user types lines, the robot's replies are printed as they stream."""
from __future__ import annotations

import sys
import threading
from typing import TextIO

from vision_dialogue.speech.base import SpeechBackend


class TerminalBackend(SpeechBackend):
    """Reads one utterance per line from `input_stream` (stdin) on a thread.

    Empty lines are skipped; end of file ends input cleanly (`input_finished`). Replies go to
    `output_stream` (stdout), sentence by sentence on one "robot:" line.
    """

    name = "terminal"

    def __init__(self, input_stream: TextIO | None = None, output_stream: TextIO | None = None,
                 *, language: str = "", speaker: str = "", logger=None):
        super().__init__(logger)
        self.input = input_stream if input_stream is not None else sys.stdin
        try:    # a line that is not valid UTF-8 is read with U+FFFD, not the end of input
            self.input.reconfigure(errors="replace")
        except (AttributeError, ValueError, OSError):
            pass
        self.output = output_stream if output_stream is not None else sys.stdout
        self.language, self.speaker = language, speaker
        self._thread: threading.Thread | None = None
        self._out_lock = threading.Lock()
        self._line_open = False

    def start(self, events) -> None:
        super().start(events)
        self._thread = threading.Thread(target=self._read_loop, name="terminal-input",
                                        daemon=True)
        self._thread.start()

    def _read_loop(self) -> None:
        try:
            for line in iter(self.input.readline, ""):
                text = line.strip()
                if text:
                    self.events.utterance(text, speaker=self.speaker, language=self.language)
        except (OSError, ValueError) as e:   # closed or unreadable stream
            self.log.warning(f"terminal: input ended: {e}")
        self.events.input_finished()

    def _write(self, text: str) -> None:
        with self._out_lock:
            try:
                self.output.write(text)
                self.output.flush()
            except (OSError, ValueError):
                pass

    def _newline(self) -> None:
        if self._line_open:
            self._line_open = False
            self._write("\n")

    def begin_reply(self) -> None:
        self._newline()
        self._write("robot:")
        self._line_open = True

    def speak(self, text: str) -> bool:
        if not self._line_open:
            self.begin_reply()
        self._write(" " + text)
        return True

    def stop_speaking(self) -> None:
        if self._line_open:
            self._write(" [interrupted]")
            self._newline()

    def end_reply(self, text: str, timed_out: bool = False) -> None:
        if timed_out:
            self._newline()
            self._write("robot: (no reply)\n")
        self._newline()
