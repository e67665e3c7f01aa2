"""Speech without ROS.

The backend interface, the terminal and script backends, the robot turn-taking base class and the
turn logic (reply queue, barge-in, states).

May import: llm (sentence splitting), variants. `SPEECH_BACKENDS` is the one table of the
speech node's `backend` parameter: a new backend is a module with a SpeechBackend subclass and
one row here (its parameters come with it: `PARAMS`); the Furhat backends (in furhat/) and the
local voice backend (in voice/) are modules of their own.
"""
from __future__ import annotations

from vision_dialogue.speech.base import (ListenResult, RobotTurnTaking, RobotUnavailable,
                                         SpeechBackend, SpeechBackendError, SpeechEvents)
from vision_dialogue.variants import VariantTable

SPEECH_BACKENDS = VariantTable("backend", "speech backend", {
    "terminal": "vision_dialogue.speech.terminal:TerminalBackend",
    "script": "vision_dialogue.speech.script:ScriptBackend",
    "furhat": "vision_dialogue.furhat.remote_speech:FurhatRemoteBackend",
    "furhat_realtime": "vision_dialogue.furhat.realtime_speech:FurhatRealtimeBackend",
    "local": "vision_dialogue.voice.backend:LocalVoiceBackend",
}, fallback="terminal")
"""backend parameter value -> "module:Class" (variants/table.py); auto: the script_file given,
else the terminal."""


__all__ = ["ListenResult", "RobotTurnTaking", "RobotUnavailable",
           "SPEECH_BACKENDS", "SpeechBackend", "SpeechBackendError", "SpeechEvents"]
