"""The manager's LLM: built from its parameters, and looked at (start-up probe, /diagnostics).

A server backend (one with `probe`, llm/factory.py) is asked at start whether its model takes
images (one tiny image: a model that refuses it gets frames as text observations instead of a
session of fallback replies), looked at once more when the node first activates (a warning
and the monitor's LLM badge, dialogue/events), and every few seconds for /diagnostics
(common/health.LlmWatch, with the replies' latency and fallbacks). An in-process model is never
probed.
"""
from __future__ import annotations

import threading
from typing import Callable

from vision_dialogue.common.health import LLM_CHECK_PERIOD_S, Health, LlmWatch, ReplyStats
from vision_dialogue.llm import model_choice
from vision_dialogue.llm.base import BackendError
from vision_dialogue.llm.factory import backend_class
from vision_dialogue.llm.probe import unreachable
from vision_dialogue.ros.manager.params import backend_options
from vision_dialogue.ros.params import ParameterError


class LlmCheck:
    """The LLM backend's making and health (see the module docstring).

    `given`: a backend injected (tests, benchmarks): used as is, never probed.
    publish_event(record): the node's dialogue/events. `watch.start()` once the node is built.
    """

    def __init__(self, params, logger, publish_event: Callable[[dict], None], given=None):
        self.params, self.log, self._publish_event = params, logger, publish_event
        kind = params["llm_backend"]
        self.backend = given if given is not None else self._make(kind)
        self.probe = getattr(backend_class(kind), "probe", None) if given is None else None
        self.stats = ReplyStats()
        self._found = None
        if self.probe is not None and self.backend.supports_images and params["probe_images"]:
            self._found = self._check_images()
        self._startup = None if self.probe is None else threading.Thread(
            target=self._look_once, name="vd-probe", daemon=True)
        self.watch = LlmWatch(
            None if self.probe is None else lambda: self.probe(backend_options(self.params),
                                                               timeout=LLM_CHECK_PERIOD_S),
            self.stats, unreachable=lambda: unreachable(self.params["base_url"]))

    def _make(self, kind: str):
        try:
            if backend_class(kind).in_process:
                # default:auto -> the variant this machine runs fast enough; from here on the
                # model it runs (focus note, the ready line, /diagnostics)
                self.params["model"] = model_choice.resolve(
                    self.params["model"], self.params["local_threads"], self.log)
            return backend_class(kind).from_options(backend_options(self.params))
        except (BackendError, ValueError, OSError) as e:
            raise ParameterError(f"llm_backend: cannot start {kind!r} ({e})") from None

    def _check_images(self):
        """Before the conversation is built: whether the server's model takes images.

        Unreachable: as configured (the start-up look warns). Returns the Probe.
        """
        o, timeout = backend_options(self.params), self.params["request_timeout"]
        found = self.probe(o, timeout=min(10.0, timeout), images=True)
        if found.images is False:
            self.backend.supports_images = False
            self.log.warning(f"{found.detail}: frames go in as text observations instead "
                             "(supports_images:=false says so and skips this check)")
            return self.probe(o, timeout=min(5.0, timeout))
        return found

    def start(self) -> None:
        """The first activation: whether the endpoint is there and serves the model."""
        if self._startup is not None and self._startup.ident is None:
            self._startup.start()

    def _look_once(self) -> None:
        """One warning if the server is not there, so it is noticed now, not at the first turn.

        The result also goes to dialogue/events (the monitor's LLM badge); the image check's
        answer is reused.
        """
        found = self._found or self.probe(backend_options(self.params),
                                          timeout=min(5.0, self.params["request_timeout"]))
        if found.ok is False:
            self.log.warning(f"LLM check at startup: {found.detail}; {found.fix}. "
                             "Turns get the fallback line until it answers.")
        self._publish_event({"type": "health", "component": "llm", "ok": found.ok,
                             "detail": found.detail})

    def health(self) -> Health:
        return self.watch.health(backend=self.params["llm_backend"], model=self.params["model"])

    def close(self) -> None:
        self.watch.close()
