"""Is the person done? The end of a line scored by a small language model.

The rules of voice/turn_end.py read the recogniser's punctuation, and Whisper writes a "?" at
a pause in "What colour is ... the jacket I am wearing?". A language model reads the words
alone: given the line so far as a person's chat message (lower case, no punctuation, as
LiveKit's turn detector does), the probability that the next token ends the sentence or the
message ("?", ".", "!", the end-of-message token) says whether the line can end there. The
embedded 0.5B (not trained for this) scores a short line in about 0.1 s on 2 cores, while the
reply's model waits for the words anyway.

The model corrects the rules where they read the punctuation: below `open_below` a line the
rules call complete or unsure goes on (a line of one or two words, "Stop!", becomes unsure at
most); at `complete_at` or more an unsure line is complete. What the rules are sure of (a last
word no line ends with, a trailing comma, a bare greeting) they decide alone. The thresholds
were set on the lines of benchmarks/bench_voice.py (benchmarks/bench_voice.py).
"""
from __future__ import annotations

import re
import threading

import llama_cpp
import numpy as np

from vision_dialogue.llm.llamacpp_backend import common_prefix
from vision_dialogue.voice.turn_end import COMPLETE, INCOMPLETE, UNSURE, open_for_sure, turn_end

#: probability of an end from which a line the rules are unsure of is over
COMPLETE_AT = 0.5
#: probability of an end below which a line goes on
OPEN_BELOW = 0.03
#: a shorter line ("Stop!", "Thanks") is never held open on the model's word alone
MIN_OPEN_WORDS = 3
#: what ends a sentence or a message, alone or with spaces and line breaks
_ENDS = re.compile(r"^\s*(\.|\?|!|\.\.\.|…|<\|im_end\|>|<\|endoftext\|>)\s*$")
#: what the model is told before the person's line (read once, kept in its cache)
PREFIX = ("<|im_start|>system\nYou are a friendly robot talking with a person.<|im_end|>\n"
          "<|im_start|>user\n")
_PUNCTUATION = re.compile(r"[^\w\s'-]")


def normalise(text: str) -> str:
    """The words as spoken: lower case, no punctuation (the recogniser's guesses at a pause)."""
    return " ".join(_PUNCTUATION.sub(" ", text.lower()).split())


class ModelTurnJudge:
    """turn_end's verdict, with the words' end-of-message probability deciding the unsure."""

    instant = False   # the backend runs it off the audio thread

    def __init__(self, gguf_path: str, *, threads: int = 2, complete_at: float = COMPLETE_AT,
                 open_below: float = OPEN_BELOW):
        self.complete_at, self.open_below = float(complete_at), float(open_below)
        self._llm = llama_cpp.Llama(model_path=str(gguf_path), n_ctx=256, n_threads=threads,
                                    n_threads_batch=threads, verbose=False)
        self._prefix = self._tokens(PREFIX)
        self._ends = np.array([t for t in range(self._llm.n_vocab()) if _ENDS.match(
            self._llm.detokenize([t], special=True).decode("utf-8", "ignore"))])
        self._lock = threading.Lock()
        self.last_probability = 0.0

    @classmethod
    def embedded(cls, **kw) -> "ModelTurnJudge":
        """On the embedded 0.5B (the file is joined from its parts once)."""
        from vision_dialogue.llm.default_model import ensure_default_gguf
        return cls(ensure_default_gguf(variant="0.5b"), **kw)

    def _tokens(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode(), add_bos=False, special=True)

    def probability(self, text: str) -> float:
        """P(the message ends after these words)."""
        tokens = self._prefix + self._tokens(normalise(text))
        with self._lock:
            llm = self._llm
            # the part of the last prompt still in the cache (the prefix); the last token is
            # always read, for its logits
            kept = common_prefix(llm._input_ids[:llm.n_tokens].tolist(), tokens[:-1])
            llm.n_tokens = kept
            llm.eval(tokens[kept:])      # the last token's logits only (no logits_all)
            logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1),
                                           shape=(llm.n_vocab(),)).astype(np.float64)
        probabilities = np.exp(logits - logits.max())
        return float(probabilities[self._ends].sum() / probabilities.sum())

    def __call__(self, text: str) -> str:
        words = normalise(text).split()
        rule = turn_end(text)
        if not words or open_for_sure(text.strip(), words):
            return rule       # nothing, "and", "the", a trailing comma, "Hello robot.": sure
        p = self.last_probability = self.probability(text)
        if p < self.open_below:
            return INCOMPLETE if len(words) >= MIN_OPEN_WORDS or rule == INCOMPLETE else UNSURE
        return COMPLETE if rule == COMPLETE or p >= self.complete_at else UNSURE

    def close(self) -> None:
        self._llm.close()
