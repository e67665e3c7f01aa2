"""Speech I/O backends (no ROS): terminal, script, Furhat Remote API, Furhat Realtime API.

`BACKENDS` maps the speech node's `backend` parameter to the class. The Furhat backends
import their client libraries lazily, so terminal/script work without them.
"""
from __future__ import annotations

from vision_dialogue.speech.base import (ListenResult, RobotTurnTaking, RobotUnavailable,
                                         SpeechBackend, SpeechBackendError, SpeechEvents)

BACKEND_NAMES = ("terminal", "script", "furhat", "furhat_realtime")


def backend_class(name: str) -> type[SpeechBackend]:
    """The backend class for a `backend` parameter value; ValueError for an unknown name."""
    if name == "terminal":
        from vision_dialogue.speech.terminal import TerminalBackend
        return TerminalBackend
    if name == "script":
        from vision_dialogue.speech.script import ScriptBackend
        return ScriptBackend
    if name == "furhat":
        from vision_dialogue.speech.furhat_remote import FurhatRemoteBackend
        return FurhatRemoteBackend
    if name == "furhat_realtime":
        from vision_dialogue.speech.furhat_realtime_backend import FurhatRealtimeBackend
        return FurhatRealtimeBackend
    raise ValueError(f"unknown speech backend {name!r}; one of {list(BACKEND_NAMES)}")


__all__ = ["BACKEND_NAMES", "ListenResult", "RobotTurnTaking", "RobotUnavailable",
           "SpeechBackend", "SpeechBackendError", "SpeechEvents", "backend_class"]
