"""An in-process ChatBackend for core tests and benchmarks (no network).

Requests are recorded; replies come from `responder(messages, kind)` where kind is "summary",
"fold" or "reply" (guessed from the prompt), or defaults. `gate[kind]` (a threading.Event)
makes calls of that kind wait until it is set; `fail[kind]` (int) makes that many calls raise.
"""
from __future__ import annotations

import threading
import time

from vision_dialogue.llm.base import BackendError


def kind_of(messages) -> str:
    last = messages[-1]["content"]
    text = last if isinstance(last, str) else " ".join(
        p.get("text", "") for p in last if p.get("type") == "text")
    if "one short sentence" in text:
        return "summary"
    if "Earlier memory:" in text:
        return "fold"
    return "reply"


class FakeChatBackend:
    def __init__(self, supports_images: bool = True, latency: float = 0.0, responder=None):
        self.supports_images = supports_images
        self.latency = latency
        self.responder = responder
        self.calls: list[tuple[str, list, dict]] = []
        self.gate: dict[str, threading.Event] = {}
        self.fail: dict[str, int] = {}
        self._lock = threading.Lock()
        self._n = 0

    def _answer(self, messages, kw) -> str:
        kind = kind_of(messages)
        with self._lock:
            self.calls.append((kind, messages, kw))
            self._n += 1
            n = self._n
            failing = self.fail.get(kind, 0) > 0
            if failing:
                self.fail[kind] -= 1
        gate = self.gate.get(kind)
        if gate is not None:
            assert gate.wait(10.0), f"gate for {kind} never opened"
        if self.latency:
            time.sleep(self.latency)
        if failing:
            raise BackendError(f"fake {kind} failure")
        if self.responder is not None:
            return self.responder(messages, kind)
        return {"summary": f"I saw thing {n}.", "fold": f"Memory {n}.",
                "reply": "Hello there. Lovely day!"}[kind]

    def complete(self, messages, *, model=None, max_tokens=None, temperature=None) -> str:
        return self._answer(messages, {"model": model, "max_tokens": max_tokens,
                                       "temperature": temperature})

    def stream(self, messages, *, model=None, max_tokens=None, temperature=None):
        text = self._answer(messages, {"model": model, "max_tokens": max_tokens, "stream": True,
                                       "temperature": temperature})
        for s in text.replace(". ", ".|").replace("! ", "!|").replace("? ", "?|").split("|"):
            if s.strip():
                yield s.strip()

    def of_kind(self, kind: str) -> list:
        with self._lock:
            return [c for c in self.calls if c[0] == kind]


class OneAtATimeBackend(FakeChatBackend):
    """A slow local model: one generation at a time, `token_s` per token, preemptible.

    Like TransformersChatBackend: a background call (background=True) stops at its next token
    when a reply is waiting and raises Preempted. Records how many background tokens each reply
    waited for (`reply_waits`: at most the one being computed when it came, whatever the load).
    """

    preemptible = True

    def __init__(self, token_s: float = 0.01, reply_tokens: int = 5, summary_tokens: int = 30,
                 **kw):
        super().__init__(**kw)
        self.token_s, self.reply_tokens, self.summary_tokens = token_s, reply_tokens, \
            summary_tokens
        self._model = threading.Lock()
        self._waiting = 0
        self._stopped = threading.Event()
        self.reply_waits: list[int] = []
        self.preempted = 0
        self._background_tokens = 0

    def stop_background(self) -> None:
        self._stopped.set()

    def complete(self, messages, *, model=None, max_tokens=None, temperature=None,
                 background=False) -> str:
        from vision_dialogue.llm.base import Preempted
        if not background:
            return self._reply(messages, {"model": model, "max_tokens": max_tokens})
        with self._model:
            for _ in range(self.summary_tokens):
                if self._waiting or self._stopped.is_set():
                    with self._lock:
                        self.preempted += 1
                    raise Preempted("a reply is waiting")
                time.sleep(self.token_s)
                with self._lock:
                    self._background_tokens += 1
            return self._answer(messages, {"model": model, "background": True})

    def stream(self, messages, *, model=None, max_tokens=None, temperature=None):
        yield self._reply(messages, {"model": model, "max_tokens": max_tokens, "stream": True})

    def _reply(self, messages, kw) -> str:
        with self._lock:
            self._waiting += 1
            before = self._background_tokens
        with self._model:
            with self._lock:
                self._waiting -= 1
                self.reply_waits.append(self._background_tokens - before)
            time.sleep(self.token_s * self.reply_tokens)
            return self._answer(messages, kw)
