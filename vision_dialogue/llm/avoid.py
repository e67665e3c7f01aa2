"""Not saying it again: the word triples of earlier lines, penalised while generating.

After a reply that only repeated an earlier one, the conversation asks once more with the
repeated lines in `avoid`. A local backend then lowers the score of every token that would
complete a three-token run of those lines, so the model cannot walk the same path again but may
still use any single word ("yes", "you") of it.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

AVOID_BIAS = 8.0
"""How much a token that continues an avoided triple loses (logits; -inf would forbid)."""


def token_triples(encode: Callable[[str], Sequence[int]],
                  texts: Iterable[str]) -> set[tuple[int, int, int]]:
    """Every run of three tokens in `texts`, tokenised alone and after a space (mid-reply)."""
    out = set()
    for text in texts:
        for variant in (text.strip(), " " + text.strip()):
            ids = list(encode(variant))
            out.update(tuple(ids[i:i + 3]) for i in range(len(ids) - 2))
    return out


def triple_penalty(triples: set[tuple[int, int, int]], bias: float = AVOID_BIAS):
    """A logits processor (token ids so far, scores) -> scores for llama.cpp."""
    after: dict[tuple[int, int], set[int]] = {}
    for a, b, c in triples:
        after.setdefault((a, b), set()).add(c)

    def penalise(input_ids, scores):
        if len(input_ids) >= 2:
            for c in after.get((int(input_ids[-2]), int(input_ids[-1])), ()):
                scores[c] -= bias
        return scores
    return penalise
