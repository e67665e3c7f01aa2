"""Furhat through the Realtime API (websocket, port 9000), on vision_dialogue.furhat.realtime.

The same turn-taking as the Remote API backend (RobotTurnTaking). With barge-in, listening
keeps running while the robot speaks (`stop_robot_start=False`), and a new utterance stops
speech with `request.speak.stop`.
"""
from __future__ import annotations

from vision_dialogue.furhat.realtime import (FurhatAuthError, FurhatRealtimeClient,
                                             FurhatRealtimeError)
from vision_dialogue.speech.base import ROBOT_PARAMS, ListenResult, RobotTurnTaking, \
    RobotUnavailable, SpeechIO, robot_options
from vision_dialogue.variants import Param


class FurhatRealtimeBackend(RobotTurnTaking):
    """Speech I/O through a Furhat's Realtime API; one websocket client per backend."""

    name = "furhat_realtime"
    ROBOT_HOST_PARAM = "furhat_host"
    PARAMS = ROBOT_PARAMS + [Param("furhat_key", "", "Realtime API key, if the robot requires "
                                   "one.")]

    @classmethod
    def from_params(cls, p, io: SpeechIO) -> "FurhatRealtimeBackend":
        return cls(p["furhat_host"], p["furhat_port"] or 9000, key=p["furhat_key"],
                   **robot_options(p, io.logger))

    def __init__(self, host: str = "localhost", port: int = 9000, *, key: str = "",
                 voice: str = "", language: str = "en-US", gaze_away_gesture: str = "GazeAway",
                 gaze_away_location=(-0.5, 0.3, 1.5), listen_timeout: float = 30.0,
                 say_timeout: float = 120.0, request_timeout: float = 5.0, **kwargs):
        super().__init__(language=language, **kwargs)
        self.voice = voice
        self.gaze_away_gesture = gaze_away_gesture
        self.gaze_away_location = tuple(float(v) for v in gaze_away_location)
        self.listen_timeout = listen_timeout
        self._face = None
        # The client's own reconnect is off: RobotTurnTaking's loop owns backoff + reconnect.
        self.client = FurhatRealtimeClient(host, port, key=key or None, timeout=request_timeout,
                                           speak_timeout=say_timeout, reconnect=False,
                                           logger=self.log)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FurhatAuthError as e:
            raise RobotUnavailable(f"{e} (check the `furhat_key` parameter)") from None
        except FurhatRealtimeError as e:   # includes timeouts
            raise RobotUnavailable(str(e)) from None

    def _robot_setup(self) -> None:
        if not self.client.connected:
            self.client.close()
            self._call(self.client.connect)
        if self.voice:
            self._call(self.client.set_voice, name=self.voice)

    def _robot_attend_user(self, user_id: str = "") -> None:
        self._call(self.client.attend_user, user_id or "closest")

    def _robot_listen(self) -> ListenResult:
        if not self.client.connected:
            raise RobotUnavailable(f"not connected to {self.client.url}")
        try:
            text = self.client.listen(language=self.language, timeout=self.listen_timeout,
                                      stop_robot_start=not self.barge_in)
        except TimeoutError:
            return ListenResult(status="FAILED")
        except FurhatRealtimeError as e:
            raise RobotUnavailable(str(e)) from None
        return ListenResult(text=text) if text else ListenResult(status="SILENCE")

    def _robot_gaze_away(self) -> None:
        if self.gaze_away_gesture:
            self._call(self.client.gesture, self.gaze_away_gesture)
        self._call(self.client.attend_location, *self.gaze_away_location)

    def _robot_say(self, text: str) -> bool:
        end = self._call(self.client.speak, text, abort=False, wait=True)
        return not (end or {}).get("aborted", False)

    def _robot_stop_speaking(self) -> None:
        self._call(self.client.stop_speaking)

    def face(self, max_gaze: float):
        from vision_dialogue.furhat.face import RealtimeApiFace
        self._face = RealtimeApiFace(self.client, self._call)
        return self._face

    def close(self) -> None:
        self._stop.set()
        if self._face is not None:
            self._face.cancel()
        self.client.close()                # ends a pending listen at once
        super().close()
