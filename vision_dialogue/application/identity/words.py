"""The words of what a person says, compared loosely: crude stems, without filler words.

Enough to tell that "loves sailing" is in "I love sailing on the lake" (a fact grounded in
the person's words) and that "moved to building C" is about what "works in building B" was.
"""
from __future__ import annotations

import re

from vision_dialogue.core.perspective import stem

#: words with which a person speaks of themselves (a line that may hold a fact of theirs, a
#: question about them, a fact kept in their own words)
FIRST_PERSON = frozenset("i i'm im i've ive i'd my mine me we we're our ours us".split())

#: words that carry no fact (the person's pronouns, verbs of being, articles)
FILLER = frozenset("""a an the i me my mine am is are was were be been i'm im i've ive i'd id
 you your he she his her they their them it its this that these those to of in on at for with
 and or but so as by from do does did really very also just now too quite some any new""".split())


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def content_stems(text: str) -> set[str]:
    """The stems of a text's words that carry something (no pronouns, articles, "is")."""
    return {stem(w) for w in words(text) if w not in FILLER}


def in_first_person(text: str) -> bool:
    """Whether `text` speaks of the person saying it ("I run marathons", "What is my job?")."""
    return bool(FIRST_PERSON & set(words(text)))
