"""What a line expresses, read locally in well under a millisecond (no model call).

Valence comes from VADER (a sentiment lexicon with rules for negation, intensifiers and
punctuation, made for short social text); the named expression from a small table of cues
(news of a death, a win, a joke, an insult...), which VADER's valence must not contradict.
Names are ROS4HRI's (hri_msgs/Expression). `reaction` is the face the robot makes at a
person's line: it shares sadness and joy, is surprised with them, and is hurt, not angry, when
insulted; a question or small talk keeps a neutral face.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

NEUTRAL, HAPPY, SAD, SURPRISED, ANGRY = "neutral", "happy", "sad", "surprised", "angry"
CONFUSED, SCARED, DISGUSTED, EXCITED, TIRED = "confused", "scared", "disgusted", "excited", "tired"
#: the hri_msgs/Expression names this module gives
EXPRESSIONS = (NEUTRAL, HAPPY, SAD, SURPRISED, ANGRY, CONFUSED, SCARED, DISGUSTED, EXCITED,
               TIRED)

#: expression -> (cue patterns, its valence sign, its arousal); the first cue found names the
#: expression, so the table reads from the most specific to the least
CUES: tuple[tuple[str, tuple[str, ...], int, float], ...] = (
    (SAD, (r"\b(died|dead|passed away|funeral|lost (my|our|her|his)|cancer|miss (him|her|them)"
           r"|broke up|dumped|divorc\w*|fired|laid off|lonely|depressed|crying|cried"
           r"|in (the )?hospital|put down|heartbroken|sorry (to hear|for your loss)"
           r"|sad|sadly|unhappy|upset|miserable)\b",), -1,
     -0.3),
    (ANGRY, (r"\b(stupid|idiot\w*|dumb|useless|shut up|hate you|you suck|pathetic|moron"
             r"|worthless|annoying|piece of junk)\b",), -1, 0.7),
    (SCARED, (r"\b(scared|afraid|terrified|frightened|nervous|worried|anxious|panic\w*)\b",),
     -1, 0.6),
    (DISGUSTED, (r"\b(gross|disgusting|yuck|eww+|revolting|nasty)\b",), -1, 0.4),
    (EXCITED, (r"\b(won|win|promot\w+|engaged|got the job|got in|accepted|passed (my|the)"
               r"|we're having a baby|getting married|can't wait|so excited)\b",), 1, 0.8),
    (HAPPY, (r"\b(haha+|hehe+|lol|funny|joke|knock knock|why did the|congratulations"
             r"|great news|good news|love it|wonderful|delighted|glad|happy birthday"
             r"|that's great|well done|happy|glad|thrilled|cheerful)\b",), 1, 0.5),
    (SURPRISED, (r"\b(wow|whoa|no way|can't believe|cannot believe|unbelievable"
                 r"|guess what|oh my|really\?)", r"!\?"), 0, 0.8),
    (CONFUSED, (r"\b(i don't understand|don't get it|confus\w+|what do you mean|huh\b"
                r"|makes no sense)",), 0, 0.2),
    (TIRED, (r"\b(tired|exhausted|sleepy|worn out|bored)\b",), -1, -0.6),
)
#: the valence's magnitude at which a line with no cue still shows happy or sad
VALENCE_ALONE = 0.5
#: what the robot shows at a person's expression (it shares feelings, and is hurt by insults)
REACTIONS = {HAPPY: HAPPY, EXCITED: EXCITED, SAD: SAD, SURPRISED: SURPRISED, ANGRY: SAD,
             SCARED: SAD, DISGUSTED: DISGUSTED, CONFUSED: CONFUSED, TIRED: NEUTRAL,
             NEUTRAL: NEUTRAL}


@dataclass(frozen=True)
class Affect:
    """What a line expresses: valence and arousal in [-1, 1], a name, and how sure (0..1)."""

    expression: str = NEUTRAL
    valence: float = 0.0
    arousal: float = 0.0
    confidence: float = 0.0

    @property
    def strong(self) -> bool:
        """Worth a visible expression (not a neutral face or a faint guess)."""
        return self.expression != NEUTRAL and self.confidence >= 0.5

    def as_record(self) -> dict:
        return {"expression": self.expression, "valence": round(self.valence, 3),
                "arousal": round(self.arousal, 3), "confidence": round(self.confidence, 3)}


@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    return SentimentIntensityAnalyzer()


@lru_cache(maxsize=1)
def _cue_table():
    return [(name, [re.compile(p, re.IGNORECASE) for p in patterns], sign, arousal)
            for name, patterns, sign, arousal in CUES]


def _clip(x: float) -> float:
    return max(-1.0, min(1.0, float(x)))


_NEGATION = re.compile(r"\b(not|never|no|isn't|wasn't|don't|didn't|nothing)\b\W+(\w+\W+){0,2}$",
                       re.IGNORECASE)


def _found(pattern, text: str) -> bool:
    """`pattern` occurs in `text` and is not negated ("I'm not worried at all")."""
    return any(not _NEGATION.search(text[:m.start()]) for m in pattern.finditer(text))


def _cue(text: str, valence: float):
    """The first cue found whose valence sign VADER does not contradict, or None."""
    for name, patterns, sign, arousal in _cue_table():
        if any(_found(p, text) for p in patterns):
            if sign and valence * sign <= -0.3:   # "no joke, this is awful"
                continue
            return name, sign, arousal
    return None


def read_affect(text: str) -> Affect:
    """What `text` expresses (a person's line or a sentence of the robot's)."""
    text = " ".join(str(text or "").split())
    if not text:
        return Affect()
    valence = float(_vader().polarity_scores(text)["compound"])
    shouted = re.search(r"\b[A-Z]{3,}\b", text) is not None
    excitement = min(0.3, 0.1 * text.count("!")) + (0.2 if shouted else 0.0)
    cue = _cue(text, valence)
    if cue is not None:
        name, sign, arousal = cue
        if sign and valence * sign < 0.3:          # the cue knows the sign better than VADER
            valence = sign * max(0.5, abs(valence))
        confidence = min(1.0, 0.6 + 0.4 * abs(valence))
        return Affect(name, _clip(valence), _clip(arousal + excitement), confidence)
    if abs(valence) >= VALENCE_ALONE:
        name = HAPPY if valence > 0 else SAD
        return Affect(name, valence, _clip(0.2 + abs(valence) * 0.3 + excitement),
                      abs(valence))
    return Affect(NEUTRAL, valence, _clip(excitement), 1.0 - abs(valence))


def reaction(heard: Affect) -> Affect:
    """The robot's face at a person's line that expresses `heard`."""
    name = REACTIONS.get(heard.expression, NEUTRAL)
    if name == NEUTRAL:
        return Affect(NEUTRAL, 0.0, 0.0, heard.confidence)
    # surprise and confusion sit at neutral valence (Russell's circumplex): only arousal
    valence = 0.0 if name in (SURPRISED, CONFUSED) else heard.valence
    if heard.expression == ANGRY:                   # hurt: sad, quieter than the insult
        return Affect(SAD, -min(0.6, abs(valence)), -0.2, heard.confidence)
    return Affect(name, valence, heard.arousal * 0.8, heard.confidence)
