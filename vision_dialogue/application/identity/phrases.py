"""What a person says about who they are: their name, and "forget me".

Regular expressions, not the LLM: both must work with any backend, at once, and a wrong
"forget me" is confirmed aloud before anything is removed.
"""
from __future__ import annotations

import re

_NAME_WORD = r"([A-Z][a-z'\-]+(?:\s+[A-Z][a-z'\-]+)?)"
#: "my name is Ada", "call me Ada", "I'm Ada Lovelace" (a capitalised word after "I'm")
_NAME = [re.compile(r"\bmy name(?:'s| is)\s+" + _NAME_WORD, re.I),
         re.compile(r"\b(?:call me|i am called|they call me)\s+" + _NAME_WORD, re.I),
         re.compile(r"\b(?:I'm|I am|this is)\s+" + _NAME_WORD)]
#: capitalised words after "I'm" that are not names
_NOT_NAMES = frozenset("""i a an the not so very just here there back fine good great ok okay
    sorry sure glad happy hungry tired looking going trying new from in at on with still also
    really well ready done leaving lost afraid english american british french german""".split())
_FORGET = re.compile(
    r"\b(?:forget (?:me|about me|my (?:face|voice|name)|who i am)|"
    r"(?:delete|erase|remove) (?:me|my (?:face|voice|data|name|details))|"
    r"don'?t remember me|stop remembering me)\b", re.I)
_KEEP = re.compile(r"\b(?:don'?t|do not|never|not) forget\b", re.I)


def name_in(text: str) -> str:
    """The name a person gives for themselves in a line ("" if none)."""
    for pattern in _NAME:
        m = pattern.search(text)
        if not m:
            continue
        first, *rest = m.group(1).split()
        words = [first] + [w for w in rest if w[:1].isupper()]     # "Ada and" is "Ada"
        while words and words[-1].lower() in _NOT_NAMES:
            words.pop()
        if words and words[0].lower() not in _NOT_NAMES:
            return " ".join(w.capitalize() for w in words)
    return ""


def asks_to_be_forgotten(text: str) -> bool:
    """'Forget me', 'delete my face', 'don't remember me' and the like."""
    return bool(_FORGET.search(text)) and not _KEEP.search(text)
