"""Speech without ROS.

The backend interface, the terminal and script backends, the robot turn-taking base class and the
turn logic (reply queue, barge-in, states).

May import: llm (sentence splitting). `backend_class` maps the speech node's `backend`
parameter to a class; the Furhat backends (in furhat/) and the local voice backend (in voice/)
are imported only when chosen.
"""
from __future__ import annotations

import importlib

from vision_dialogue.speech.base import (ListenResult, RobotTurnTaking, RobotUnavailable,
                                         SpeechBackend, SpeechBackendError, SpeechEvents)

#: backend parameter value -> "module:Class", imported only when chosen
BACKEND_CLASSES = {
    "terminal": "vision_dialogue.speech.terminal:TerminalBackend",
    "script": "vision_dialogue.speech.script:ScriptBackend",
    "furhat": "vision_dialogue.furhat.remote_speech:FurhatRemoteBackend",
    "furhat_realtime": "vision_dialogue.furhat.realtime_speech:FurhatRealtimeBackend",
    "local": "vision_dialogue.voice.backend:LocalVoiceBackend",
}
BACKEND_NAMES = tuple(BACKEND_CLASSES)


def backend_class(name: str) -> type[SpeechBackend]:
    """The backend class for a `backend` parameter value; ValueError for an unknown name."""
    try:
        module, cls = BACKEND_CLASSES[name].split(":")
    except KeyError:
        raise ValueError(f"unknown speech backend {name!r}; one of {list(BACKEND_NAMES)}") \
            from None
    return getattr(importlib.import_module(module), cls)


__all__ = ["BACKEND_NAMES", "ListenResult", "RobotTurnTaking", "RobotUnavailable",
           "SpeechBackend", "SpeechBackendError", "SpeechEvents", "backend_class"]
