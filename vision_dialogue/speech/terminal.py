"""Terminal speech I/O: the user types lines, the robot's replies are printed as they stream."""
from __future__ import annotations

import sys
import threading
from typing import Callable, TextIO

from vision_dialogue.speech.base import SpeechBackend, SpeechIO


class TerminalBackend(SpeechBackend):
    """Reads one utterance per line from `input_stream` (stdin) on a thread.

    Empty lines are skipped; end of file ends input cleanly (`input_finished`). Replies go to
    `output_stream` (stdout), sentence by sentence on one "robot:" line. At a terminal the
    person gets a `you:` prompt on its own line. `hold_logs(on)` and `show_prompt(text)` (the
    node wires them to ros/console.py) keep log lines off the robot's line and the prompt.
    """

    name = "terminal"
    PROMPT = "you: "
    reads_text_input = True

    @classmethod
    def from_params(cls, p, io: SpeechIO) -> "TerminalBackend":
        return cls(io.input_stream, io.output_stream, language=p["language"],
                   speaker=p["speaker"], logger=io.logger)

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
        self.hold_logs: Callable[[bool], None] = lambda on: None
        self.show_prompt: Callable[..., None] = \
            lambda prompt, write=None: write() if write is not None else None
        self._prompting = False

    def interactive(self) -> bool:
        """Whether a person types at a terminal (then the `you:` prompt is shown)."""
        try:
            return self.input.isatty() and self.output.isatty()
        except (AttributeError, ValueError, OSError):
            return False

    def _prompt(self) -> None:
        if self.interactive() and not self._prompting:
            self._prompting = True
            self.show_prompt(self.PROMPT, lambda: self._write(self.PROMPT))

    def start(self, events) -> None:
        super().start(events)
        self._prompt()
        self._thread = threading.Thread(target=self._read_loop, name="terminal-input",
                                        daemon=True)
        self._thread.start()

    def _read_loop(self) -> None:
        try:
            for line in iter(self.input.readline, ""):
                self._prompting = False          # Enter ended the prompt's line
                self.show_prompt(None)
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
            self.hold_logs(False)
            self._prompt()

    def begin_reply(self) -> None:
        self._newline()
        if self._prompting:        # the robot speaks first: its line replaces the prompt
            self._prompting = False
            self.show_prompt(None, lambda: self._write("\r\x1b[K"))
        self.hold_logs(True)
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

    def close(self) -> None:
        """Leave the terminal clean: an open robot line ended, no `you:` prompt left behind."""
        self._newline()
        if self._prompting:
            self._prompting = False
            self.show_prompt(None, lambda: self._write("\r\x1b[K"))
        super().close()
