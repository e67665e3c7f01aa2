"""How the skills' benchmarks score what was obtained against what a battery expects.

One rule for the Ask goals (bench_skills.py) and the chats (chat_sessions.py): a string is
right when it holds the expected words (case aside), anything else when equal; a key expected
as null must stay missing.
"""
from __future__ import annotations


def score_answers(expect: dict, got: dict) -> tuple[int, int, int]:
    """(right, wrong, missing) of one Ask goal or one chat."""
    right = wrong = missing = 0
    for key, want in expect.items():
        if key not in got:
            missing += want is not None
            right += want is None
            continue
        have = got[key]
        ok = want is not None and (
            str(want).lower() in str(have).lower() if isinstance(want, str) else have == want)
        right += ok
        wrong += not ok
    return right, wrong, missing
