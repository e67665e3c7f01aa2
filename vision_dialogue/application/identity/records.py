"""The typed records identity passes around: an embedding, a consent, an enrolled person."""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

import numpy as np


class Modality(str, enum.Enum):
    """What an embedding is of."""

    FACE = "face"
    VOICE = "voice"


class ConsentWay(str, enum.Enum):
    """How a person's yes to being remembered was given (kept with the enrolment)."""

    ASKED = "asked"              # the robot asked aloud and the person said yes
    ALWAYS = "always"            # enrol: always, consent signed on paper (a study)
    APPLICATION = "application"  # the application's people/enrol service
    OPERATOR = "operator"        # the `people enrol` command (photo and name by an operator)


class EnrolPolicy(str, enum.Enum):
    """people_node's `enrol` parameter."""

    ASK = "ask"
    NEVER = "never"
    ALWAYS = "always"


#: where a robot keeps the people it knows (people_node's `store_url`; the variable is read
#: when the store opens, ~/.local/share when unset: common/resources.user_path)
DEFAULT_STORE_URL = "sqlite:///$XDG_DATA_HOME/vision_dialogue/people.db"
#: where a manager's memory writes wait while the people store is away
#: (application/identity/pending.py)
DEFAULT_QUEUE_FILE = "$XDG_STATE_HOME/vision_dialogue/memory-queue.db"
#: the reply prompt's note of what is remembered of a person, at most (characters): about a
#: tenth of what the paper's prompt bound (n frames' notes and the lines between) holds
MEMORY_NOTE_CHARS = 400

#: the question the robot asks before it remembers anyone (kept in each consent record)
CONSENT_QUESTION = "May I remember you, so I can greet you next time?"


@dataclass(frozen=True)
class Consent:
    """A person's yes to being remembered: when, how, and the words of the question."""

    way: ConsentWay
    question: str = CONSENT_QUESTION
    answer: str = ""
    when: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Embedding:
    """One face or voice print, with the model (and its version) that made it."""

    modality: Modality
    model: str
    version: str
    vector: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "vector", np.asarray(self.vector, np.float32).ravel())


@dataclass(frozen=True)
class KnownPerson:
    """An enrolled person as the store lists them (no vectors)."""

    person_id: str
    name: str
    consent: Consent
    faces: int = 0
    voices: int = 0

    def as_dict(self) -> dict:
        return {"person_id": self.person_id, "name": self.name, "faces": self.faces,
                "voices": self.voices,
                "consent": {"way": self.consent.way.value, "question": self.consent.question,
                            "answer": self.consent.answer, "when": self.consent.when}}
