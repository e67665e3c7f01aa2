"""`model: default:auto`: the embedded 1.5B where this machine is fast enough, else the 0.5B.

The spoken loop's goal is one second from the end of speech to the robot's first sound, and
about 0.4 s of it is left for the reply's first clause (the rest: the silence that ends the
turn, the end-of-turn judge, the voice). The 1.5B answers better (grounding on the dialogue
battery) but writes that clause twice as slowly as the 0.5B, and CPUs sold under one name
differ by as much (docs/results.md, bench_voice.py by CPU family). So at start-up the 1.5B
does the clause's work once (reads a line, writes a few tokens; the fastest of three tries,
so a start-up's passing burst of work elsewhere counts less) and is kept when that fits the
budget. The choice and its figure go to the log; `model: default:1.5b` or `default` fixes it.
ROS-free.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from vision_dialogue.llm.base import BackendError
from vision_dialogue.llm.options import default_variant
from vision_dialogue.variants import AUTO     # the variant name (default:auto) asking for it

_LOG = logging.getLogger(__name__)

PREFERRED, FALLBACK = "1.5b", "0.5b"
"""The variant kept where it is fast enough, and the one used where it is not."""
READ_TOKENS = 32
"""Tokens a reply reads after the prompt it had read ahead: the line's last words, the focus
note and the reply's opening (bench_voice.py's `read`)."""
CLAUSE_TOKENS = 6
"""Tokens of a first clause ("Yes, I can see you.")."""
CLAUSE_BUDGET_S = 0.4
"""Seconds the first clause may take for a one-second spoken loop: bench_voice.py's `llm` part
where the loop met the goal (results file, family 26 EPYC: 0.38-0.40 s p50) less what the
measured work leaves out."""
TRIES = 3
NO_LLAMACPP = ("llama.cpp is not installed, and on transformers the 1.5B is too slow for spoken "
               "replies")


@dataclass(frozen=True)
class VariantChoice:
    """Which variant `default:auto` runs, and the measured clause time that chose it."""

    variant: str
    clause_s: float | None     # None: not measured (see `unmeasured`)
    budget_s: float = CLAUSE_BUDGET_S
    unmeasured: str = NO_LLAMACPP      # why it was not measured

    @property
    def model(self) -> str:
        """The model name it resolves to ("default:1.5b")."""
        return f"default:{self.variant}"

    def reason(self) -> str:
        """One log line: what was chosen and why."""
        if self.clause_s is None:
            return f"model default:auto runs the {self.variant.upper()}: {self.unmeasured}"
        verdict = "within" if self.variant == PREFERRED else "over"
        return (f"model default:auto runs the {self.variant.upper()}: the 1.5B's first clause "
                f"takes {self.clause_s:.2f} s on this machine, {verdict} the "
                f"{self.budget_s:.2f} s a one-second spoken loop leaves it "
                f"(model:=default:1.5b or model:=default to fix the choice)")


def clause_seconds(llm, tries: int = TRIES) -> float:
    """Seconds a llama_cpp.Llama takes to read READ_TOKENS and write CLAUSE_TOKENS.

    The best of `tries` (greedy; the context is cleared before each and after).
    """
    line = llm.tokenize(b" Can you tell me what is on the table in front of us?" * 4,
                        add_bos=False)[:READ_TOKENS]
    best = float("inf")
    for _ in range(max(1, tries)):
        llm.reset()
        start = time.perf_counter()
        llm.eval(line)
        for _ in range(CLAUSE_TOKENS):
            llm.eval([llm.sample(temp=0.0)])
        best = min(best, time.perf_counter() - start)
    llm.reset()
    return best


def choose(measure: Callable[[], float] | None,
           budget_s: float = CLAUSE_BUDGET_S) -> VariantChoice:
    """The variant for `default:auto`.

    PREFERRED when `measure()` (its clause seconds) fits `budget_s`, else FALLBACK; FALLBACK
    unmeasured when there is nothing to measure with (None).
    """
    if measure is None:
        return VariantChoice(FALLBACK, None, budget_s)
    took = measure()
    return VariantChoice(PREFERRED if took <= budget_s else FALLBACK, took, budget_s)


def resolve(model: str, threads: int = 0, log: logging.Logger | None = None) -> str:
    """`model` with `default:auto` replaced by the chosen variant's name.

    Any other name is returned as it is, unmeasured; the choice is logged.
    """
    if default_variant(model) != AUTO:
        return model
    from vision_dialogue.llm.llamacpp_backend import llamacpp_installed
    measure = _measure_preferred(threads) if llamacpp_installed() else None
    try:
        choice = choose(measure)
    except BackendError as e:          # the 1.5B is not installed: the 0.5B, and why
        choice = VariantChoice(FALLBACK, None, unmeasured=f"the 1.5B cannot load ({e})")
    (log or _LOG).info(choice.reason())
    return choice.model


def _measure_preferred(threads: int) -> Callable[[], float]:
    """A measure of the PREFERRED variant's clause time on llama.cpp.

    With `threads` threads (0: the usable cores); the model is loaded for it and closed.
    """
    def measure() -> float:
        import llama_cpp

        from vision_dialogue.llm.cpu_threads import usable_cores
        from vision_dialogue.llm.default_model import ensure_default_gguf
        n = threads or usable_cores()
        llm = llama_cpp.Llama(model_path=ensure_default_gguf(variant=PREFERRED), n_ctx=256,
                              n_threads=n, n_threads_batch=n, verbose=False)
        try:
            return clause_seconds(llm)
        finally:
            llm.close()
    return measure
