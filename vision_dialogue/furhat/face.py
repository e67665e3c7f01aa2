"""The robot's face on a Furhat: gestures and gaze for face/controller.py, on either API.

Remote API: a gesture is POST /furhat/gesture with its GestureDefinition (or a built-in name);
the eyes move with a persisting gesture of GAZE_PAN/GAZE_TILT frames, so the head stays where
it attends. Realtime API: no gesture definitions, so a gesture's frames are played as
`request.face.params` at their times (a reset frame sets what the gesture moved back to 0),
and the eyes move with GAZE_PAN/GAZE_TILT parameters. Each call has the backend's request
timeout; the face's own thread makes them, so a robot that does not answer never holds speech.
"""
from __future__ import annotations

import threading

from vision_dialogue.face.controller import FaceOutput
from vision_dialogue.face.gaze import GazeMove
from vision_dialogue.face.gestures import gaze_gesture


class RemoteApiFace(FaceOutput):
    """Furhat Remote API: `call(fn, **params)` is the backend's guarded REST call."""

    def __init__(self, client, call, max_gaze: float = 30.0):
        self.client, self.call, self.max_gaze = client, call, max_gaze

    def gesture(self, gesture) -> None:
        if isinstance(gesture, str):
            self.call(self.client.gesture, name=gesture, blocking=False)
        else:
            self.call(self.client.gesture, body=gesture, blocking=False)

    def gaze(self, move: GazeMove) -> None:
        self.gesture(gaze_gesture(move.pan, move.tilt, move.move_s, self.max_gaze))


class RealtimeApiFace(FaceOutput):
    """Furhat Realtime API: `call(fn, *args)` is the backend's guarded websocket call."""

    def __init__(self, client, call):
        self.client, self.call = client, call
        self._timers: list[threading.Timer] = []

    def gesture(self, gesture) -> None:
        if isinstance(gesture, str):
            self.call(self.client.gesture, gesture)
            return
        moved: set[str] = set()
        for frame in gesture["frames"]:
            params = dict(frame["params"])
            if params.pop("reset", False):
                params.update({name: 0.0 for name in moved - params.keys()})
            moved.update(params)
            self._at(frame["time"][-1], params)

    def _at(self, delay: float, params: dict) -> None:
        if delay <= 0.0:
            self.call(self.client.face_params, params)
            return
        timer = threading.Timer(delay, self.call, (self.client.face_params, params))
        timer.daemon = True
        self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        timer.start()

    def gaze(self, move: GazeMove) -> None:
        self.call(self.client.face_params, {"GAZE_PAN": move.pan, "GAZE_TILT": move.tilt})

    def cancel(self) -> None:
        """Frames not yet played are dropped (the backend closes)."""
        for timer in self._timers:
            timer.cancel()
