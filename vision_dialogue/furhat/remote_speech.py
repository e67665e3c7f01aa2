"""Furhat through the Remote API (REST, port 54321) with the official `furhat-remote-api`.

Turn-taking as in Abbo & Belpaeme (2023): attend the closest user and listen; on text gaze
away (a gesture and attending a location) while the reply is produced; attend the user who
spoke (by id: the closest user when the listen ended, from GET /furhat/users, which is also
the utterance's speaker) and say the reply (blocking); listen again. `ApiException` and
urllib3's `MaxRetryError` (and other connection errors) mean the robot is unreachable: logged
once per outage, retried with capped exponential backoff; the node keeps running.
"""
from __future__ import annotations

from furhat_remote_api import FurhatRemoteAPI
from swagger_client.rest import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from vision_dialogue.core.people import TrackedPerson, closest
from vision_dialogue.speech.base import ListenResult, RobotTurnTaking, RobotUnavailable, \
    SpeechIO, robot_options

#: `message` values of GET /furhat/listen that are not user text.
LISTEN_STATUSES = ("SILENCE", "INTERRUPTED", "FAILED")


def location_string(xyz) -> str:
    """[x, y, z] -> "x,y,z" as /furhat/attend?location= expects."""
    return ",".join(f"{float(v):g}" for v in xyz)


class FurhatRemoteBackend(RobotTurnTaking):
    """Speech I/O through a Furhat's Remote API.

    One REST client (with its thread pool) per backend. `host`/`port` address the robot (the
    package hard-codes :54321; we set `api_client.configuration.host` to honour `port`).
    """

    name = "furhat"
    ROBOT_HOST_PARAM = "furhat_host"

    @classmethod
    def from_params(cls, p, io: SpeechIO) -> "FurhatRemoteBackend":
        return cls(p["furhat_host"], p["furhat_port"] or 54321, **robot_options(p, io.logger))

    def __init__(self, host: str = "localhost", port: int = 54321, *, voice: str = "",
                 language: str = "en-US", gaze_away_gesture: str = "GazeAway",
                 gaze_away_location=(-0.5, 0.3, 1.5), listen_timeout: float = 30.0,
                 say_timeout: float = 120.0, request_timeout: float = 5.0, **kwargs):
        super().__init__(language=language, **kwargs)
        self.host, self.port = host, int(port)
        self.voice = voice
        self.gaze_away_gesture = gaze_away_gesture
        self.gaze_away_location = location_string(gaze_away_location)
        self.listen_timeout, self.say_timeout = listen_timeout, say_timeout
        self.request_timeout = request_timeout
        self.client = FurhatRemoteAPI(host)
        self.client.api_client.configuration.host = f"http://{host}:{int(port)}"
        # No urllib3-level retries: a refused connection fails at once (MaxRetryError) and our
        # own backoff retries, instead of urllib3 logging a warning per retry.
        self.client.api_client.rest_client.pool_manager.connection_pool_kw["retries"] = Retry(
            total=0, backoff_factor=0)

    # one REST call, with robot errors mapped to RobotUnavailable
    def _call(self, fn, *, timeout: float | None = None, connect_timeout: float | None = None,
              **params):
        read = self.request_timeout if timeout is None else timeout
        connect = self.request_timeout if connect_timeout is None else connect_timeout
        try:
            status = fn(_request_timeout=(connect, read), **params)
        except ApiException as e:
            raise RobotUnavailable(f"{fn.__name__} at {self.host}:{self.port}: "
                                   f"HTTP {e.status} {e.reason}") from None
        except (MaxRetryError, Urllib3Error, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise RobotUnavailable(f"{fn.__name__} at {self.host}:{self.port}: {reason}") from None
        except (ValueError, TypeError, AttributeError) as e:   # an answer we cannot parse
            raise RobotUnavailable(f"{fn.__name__} at {self.host}:{self.port}: "
                                   f"unexpected answer ({e})") from None
        return status

    def _robot_setup(self) -> None:
        self._call(self.client.get_users)  # probe: answers when the robot is up
        if self.voice:
            status = self._call(self.client.set_voice, name=self.voice)
            if status is not None and getattr(status, "success", True) is False:
                self.log.warning(f"furhat: voice {self.voice!r} not set: {status.message}")

    def _robot_attend_user(self, user_id: str = "") -> None:
        if user_id:
            self._call(self.client.attend, userid=user_id)
        else:
            self._call(self.client.attend, user="CLOSEST")

    def _robot_attended_user(self) -> str:
        """The closest user (the one attend CLOSEST looks at) from GET /furhat/users."""
        users = self._call(self.client.get_users) or []
        return closest([TrackedPerson(str(u.id), getattr(u.location, "x", 0.0) or 0.0,
                                      getattr(u.location, "z", 0.0) or 0.0)
                        for u in users if getattr(u, "id", None) is not None
                        and getattr(u, "location", None) is not None])

    def _robot_listen(self) -> ListenResult:
        status = self._call(self.client.listen, timeout=self.listen_timeout,
                            language=self.language)
        message = (getattr(status, "message", "") or "").strip()
        if getattr(status, "success", True) is False and message not in LISTEN_STATUSES:
            return ListenResult(status="FAILED")
        if message.upper() in LISTEN_STATUSES:
            return ListenResult(status=message.upper())
        return ListenResult(text=message)

    def _robot_gaze_away(self) -> None:
        if self.gaze_away_gesture:
            self._call(self.client.gesture, name=self.gaze_away_gesture, blocking=False)
        self._call(self.client.attend, location=self.gaze_away_location)

    def _robot_say(self, text: str) -> bool:
        status = self._call(self.client.say, timeout=self.say_timeout, text=text, blocking=True)
        return getattr(status, "success", True) is not False

    def _robot_stop_speaking(self) -> None:
        self._call(self.client.say_stop)

    def face(self, max_gaze: float):
        from vision_dialogue.furhat.face import RemoteApiFace
        return RemoteApiFace(self.client, self._call, max_gaze)

    def close(self) -> None:
        self._stop.set()
        try:                                 # end a pending listen so the thread can exit
            self._call(self.client.listen_stop, timeout=1.0, connect_timeout=0.5)
        except RobotUnavailable:
            pass
        super().close()
        pool = getattr(self.client.api_client, "pool", None)
        if pool is not None:
            pool.close()
            pool.join()
            self.client.api_client.pool = _ClosedPool()


class _ClosedPool:
    """Stands in for the closed ThreadPool so the ApiClient's __del__ has nothing to do."""

    def close(self) -> None:
        pass

    def join(self) -> None:
        pass
