#!/usr/bin/env python3
"""Benchmark: how well the robot talks about what it sees (the dialogue evaluation battery).

Walks through the demo video's scenes (a person in an orange suit, a cup of coffee, darkness,
a cat, a rocket) with the conversation core and the battery in dialogue_battery.yaml: 22
questions, each asked right after a new frame of the current scene, as the camera would give
them (`--frame-lead S`: S seconds after it, as in a session, where a frame comes every 5 s
and the prompt is read between them). Every reply is scored automatically:

- grounding: a question about now is answered with what is there (the question's `expect`);
- hallucination: a reply about now names what is not there (`forbid`, the scene's `absent`);
- memory: a question about earlier scenes is answered with what was there;
- persona: short (<= 3 sentences, <= 40 words), no emoji, no prompt label or note read out,
  no scene inventory ("background mostly ...");
- latency: time to the first sentence and to the whole reply, per turn.

`--battery benchmarks/perspective_battery.yaml` asks about the person ("Am I...") and about
the robot ("Are you..."), each to be answered from the right side; `--battery
benchmarks/consistency_battery.yaml` has the robot state opinions and facts early and asks
about them later in other words (the later answer must agree). Each item of both belongs to
a half (a, b) fixed before any tuning; the scores come per half.

`--battery benchmarks/people_battery.yaml` asks about who is there and what they did, over the
two-person video (vision_dialogue/camera/people_video.py): the video plays in steps (`until`),
the conversation gets a frame every 5 s, and the event detector (perception/events.py) reads
the video at 4 frames a second for waves, arrivals and departures between frames. Two
speakers ask. The setup `events=false` is the baseline: the paper's frames only. The setup
`objects=true` adds the offline object detector's notes to each frame (the detector node's
path; `objects=false`, the default, is the baseline without it). The setup `persona=PATH`
runs the conversation with that persona file (default: the packaged config/persona.yaml), to
weigh a persona change against the one that ships, interleaved.

Backends: `--llm local` (the embedded model as it ships, the 1.5B on llama.cpp, with frame
perception; `--engines` for others) or
`--llm openai --base-url URL --model NAME` (any OpenAI-compatible server; frames go as images
unless --no-images). `--setup NAME:key=value,...` (repeatable) runs several conversation
settings (ConversationConfig fields) interleaved, battery by battery (ABBA), against the same
backend; the first is the baseline of the ratios. Prints each exchange with -v, a table and
one JSON line.

    source env.sh && python benchmarks/bench_dialogue.py --llm local
    python benchmarks/bench_dialogue.py --llm openai --base-url http://127.0.0.1:8000/v1 \
        --model qwen2-vl
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
if os.environ.get("VD_BENCH_FROM_PATH") != "1":   # 1: import vision_dialogue from PYTHONPATH
    sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

BATTERY = Path(__file__).with_name("dialogue_battery.yaml")
FRAME_PERIOD_S = 5.0          # the paper's camera: the conversation's frames
STREAM_EVERY = 2              # the events node looks at every 2nd frame of the 8 fps video
PERSONA_MAX_WORDS = 40
PERSONA_MAX_SENTENCES = 3
PERSONA_LEAKS = ("[", "]", "you see:", "you saw:", "what you see now", "earlier you saw",
                 "your eyes", "observation", "frame", "image", "picture", "photo", "camera")
PERSONA_INVENTORY = ("background", "the scene", "clothes mostly", "arms down", "no one there",
                     "things")
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF]")
SHIPPED_ENGINE = "llamacpp@default:1.5b"    # what the offline setups run (config/*_setup.yaml)
DEMO_MANAGER = dict(n=4, m=3, max_reply_tokens=60, stream=True)   # config/demo_setup.yaml


def has_phrase(text: str, phrases) -> list[str]:
    """The phrases (whole words, case-insensitive) that occur in text."""
    low = " " + re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("’", "'")) + " "
    return [p for p in phrases if f" {p.lower()} " in low]


@dataclass
class Exchange:
    """One scored question and answer."""

    scene: str
    kind: str
    question: str
    reply: str = ""
    first_s: float | None = None
    total_s: float = 0.0
    fallback: bool = False
    grounded: bool | None = None       # grounding or memory question: expected content named
    answered: bool | None = None       # a yes/no question (`answer`): answered so, directly
    repeated: bool = False             # says again what an earlier reply of the session said
    hallucinated: list[str] = field(default_factory=list)
    persona_faults: list[str] = field(default_factory=list)
    half: str = ""                     # perspective and consistency items: a or b
    right: bool | None = None          # a perspective or consistency item: every rule held


def persona_faults(reply: str) -> list[str]:
    """What in a reply breaks the persona (empty: in character)."""
    faults = []
    words = reply.split()
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", reply.strip()) if s]
    if len(words) > PERSONA_MAX_WORDS:
        faults.append(f"{len(words)} words")
    if len(sentences) > PERSONA_MAX_SENTENCES:
        faults.append(f"{len(sentences)} sentences")
    if EMOJI.search(reply):
        faults.append("emoji")
    low = reply.lower()
    faults += [f"leak {w!r}" for w in PERSONA_LEAKS if w in low]
    faults += [f"inventory {w!r}" for w in PERSONA_INVENTORY if w in low]
    return faults


YES_WORDS = ("yes", "yeah", "yep", "sure", "of course", "i do", "i can", "i did", "it is",
             "there is", "you are", "i think so")
NO_WORDS = ("no", "nope", "not", "n't", "cannot", "nobody", "no one", "nothing", "never",
            "none", "gone")
HEDGES = ("not sure", "don't know if", "don't know whether", "do not know if",
          "do not know whether", "can't tell", "cannot tell", "no idea", "not certain")
"""A first sentence with one of these answers neither yes nor no ("I'm not sure if ...")."""


def yes_or_no(reply: str) -> str:
    """Return "yes", "no" or "" (no direct answer) from a reply's first sentence."""
    first = re.split(r"(?<=[.!?])\s+", reply.strip())[0] if reply.strip() else ""
    low = " " + re.sub(r"[^a-z' ]+", " ", first.lower().replace("’", "'")) + " "
    start = " ".join(low.split()[:3])
    if has_phrase(first, HEDGES):
        return ""
    if has_phrase(start, ["no", "nope"]):
        return "no"
    if has_phrase(start, ["yes", "yeah", "yep", "sure", "of course"]):
        return "yes"
    if any(f" {w} " in low or (w == "n't" and "n't " in low) for w in NO_WORDS):
        return "no"
    return "yes" if has_phrase(start, YES_WORDS) else ""


def sentence_words(reply: str) -> list[tuple[str, ...]]:
    """A reply's sentences of 4 words or more, as word tuples (for the repeat score)."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", reply.strip()):
        words = tuple(re.findall(r"[a-z0-9']+", sentence.lower()))
        if len(words) >= 4:
            out.append(words)
    return out


def step_kind(step: dict) -> str:
    """An item's kind: its `kind`, or a consistency battery's claim or check."""
    return step.get("kind") or ("claim" if "claim" in step else
                                "consistency" if "check" in step else "grounding")


def taken_side(reply: str, options: dict | None) -> str:
    """The side a reply takes: the first option it names, or its yes/no ("" for none)."""
    if not options:
        return yes_or_no(reply)
    low = " " + re.sub(r"[^a-z0-9' ]+", " ", reply.lower()) + " "
    named = [(low.find(f" {w} "), name) for name, words in options.items() for w in words
             if f" {w} " in low]
    return min(named)[1] if named else ""


def score(ex: Exchange, step: dict, scene: dict, earlier: list | None = None,
          claims: dict | None = None) -> None:
    """Fill in the exchange's grounding, hallucination, answer, repeat and persona results.

    earlier: the sentence word tuples of the session's earlier replies (extended here).
    claims: a consistency battery's claims so far, by key (a claim's reply is added here; a
    check is right when it takes the claim's side, `taken_side`).
    """
    ex.half = str(step.get("half", ""))
    from vision_dialogue.core.reply_filter import near_repeat
    reply = ex.reply
    if step.get("answer") is not None:
        expected = "yes" if step["answer"] in (True, "yes") else "no"
        ex.answered = yes_or_no(reply) == expected and not ex.fallback
    if earlier is not None:
        mine = sentence_words(reply)
        ex.repeated = not ex.fallback and any(near_repeat(list(w), earlier) for w in mine)
        earlier.extend(mine)
    if step.get("expect"):
        ex.grounded = bool(has_phrase(reply, step["expect"])) and not ex.fallback
        if ex.kind == "memory" and has_phrase(reply, step.get("forbid", [])):
            ex.grounded = False         # "no, no one waved" names "waved" but is wrong
    if ex.kind == "grounding":
        asked = {p for p in scene.get("absent", []) if has_phrase(ex.question, [p])}
        forbid = list(step.get("forbid", [])) + [p for p in scene.get("absent", [])
                                                 if p not in asked]
        ex.hallucinated = has_phrase(reply, forbid)
    elif ex.kind == "perspective":       # only the item's own rules: whose side it speaks
        ex.hallucinated = has_phrase(reply, step.get("forbid", []))
        ex.right = not ex.fallback and not ex.hallucinated and ex.answered is not False \
            and ex.grounded is not False
    elif claims is not None and ex.kind == "claim":
        claims[step["claim"]] = reply
    elif claims is not None and ex.kind == "consistency":
        said = claims.get(step["check"], "")
        side = taken_side(said, step.get("options"))
        ex.right = not ex.fallback and bool(side) and \
            taken_side(reply, step.get("options")) == side
    ex.persona_faults = persona_faults(reply)


def video_frames(video: Path) -> tuple[list, dict]:
    """Every frame of a built video and its manifest (scenes, fps)."""
    import cv2
    manifest = json.loads(video.with_suffix(".json").read_text())
    cap = cv2.VideoCapture(str(video))
    frames = []
    while True:
        ok, img = cap.read()
        if not ok:
            break
        frames.append(img)
    cap.release()
    return frames, manifest


def demo_video() -> tuple[list, dict]:
    """Every frame of the demo video (built if missing) and its manifest."""
    from vision_dialogue.camera.demo_video import ensure_demo_video
    return video_frames(ensure_demo_video())


class DemoFrames:
    """Frames of each scene of the demo video, handed out spread over the scene."""

    def __init__(self):
        frames, manifest = demo_video()
        self.scenes = {s["name"]: frames[s["first_frame"]:s["first_frame"] + s["frames"]]
                       for s in manifest["scenes"]}
        self._next = {name: 0 for name in self.scenes}

    def take(self, scene: str):
        """The scene's next frame (a few video frames on, as a camera every few seconds)."""
        frames = self.scenes[scene]
        i = self._next[scene]
        self._next[scene] = i + 3
        return frames[i % len(frames)]


def parse_engine(text: str) -> tuple[str, str, str]:
    """Split "KIND[/DTYPE][@MODEL]" into (kind, dtype, model): "llamacpp@default:1.5b"."""
    head, _, model = text.partition("@")
    kind, _, dtype = head.partition("/")
    return kind.strip() or "transformers", dtype.strip() or "auto", model.strip() or "default"


def make_backend(args, engine: str = "transformers"):
    """The backend of one engine ("KIND[/DTYPE][@MODEL]", local) or the --llm openai server."""
    from vision_dialogue.llm.factory import make_backend as build
    if args.llm == "local":
        kind, dtype, model = parse_engine(engine)
        return build(kind, model=args.model or model,
                     max_new_tokens=DEMO_MANAGER["max_reply_tokens"], dtype=dtype)
    return build("openai", base_url=args.base_url, model=args.model or "gpt-4o-mini",
                 supports_images=not args.no_images, timeout=args.timeout, max_retries=1)


class PeopleVideo:
    """The two-person video, played forward in steps.

    Frames to the conversation every FRAME_PERIOD_S; stream frames to the event detector,
    whose events go into the conversation.
    """

    def __init__(self, events: bool):
        from vision_dialogue.camera.people_video import ensure_people_video
        from vision_dialogue.perception.events import EventDetector
        self.frames, manifest = video_frames(ensure_people_video())
        self.fps = manifest["fps"]
        self.detector = EventDetector() if events else None
        self.i = 0

    def play_until(self, conv, t: float) -> None:
        period = round(FRAME_PERIOD_S * self.fps)
        while self.i < min(len(self.frames), round(t * self.fps)):
            frame, stamp = self.frames[self.i], self.i / self.fps
            if self.detector is not None and self.i % STREAM_EVERY == 0:
                for event in self.detector.observe(frame, stamp):
                    conv.add_event(event.text, stamp=stamp, event=event.kind)
            if self.i % period == 0:
                conv.add_frame(frame)
            self.i += 1

    def close(self) -> None:
        if self.detector is not None:
            self.detector.close()


class ObjectsNote:
    """The detector node's path, in-process: each frame's objects note, as the manager adds it.

    Setup `objects=true`: CenterNet (perception/object_detector.py) on every frame, worded by
    common/objects.py with the manager's defaults (people left to the observer).
    """

    def __init__(self, observer):
        from vision_dialogue.perception.object_detector import ObjectDetector
        self.detector = ObjectDetector()
        self.skip = ("face", "person") if observer is not None else ("face",)

    def note(self, frame) -> str:
        from vision_dialogue.common.objects import ObjectSighting, describe_objects
        return describe_objects([ObjectSighting.from_box(d.label, d.score, d.box,
                                                         frame.shape[1], d.alternatives)
                                 for d in self.detector.detect(frame)], skip=self.skip)

    def wrap(self, conv):
        add = conv.add_frame
        conv.add_frame = lambda frame, **kw: add(frame, objects=self.note(frame), **kw)
        return conv


def run_battery(backend, observer, setup: dict, battery: dict, deadline_s: float,
                verbose: bool, frame_lead: float = 0.0) -> list[Exchange]:
    """One conversation through the whole battery; the scored exchanges.

    frame_lead: seconds between a question's frame and the question (0: right after it).
    """
    from vision_dialogue.core.conversation import Conversation, ConversationConfig
    from vision_dialogue.core.persona import load_persona
    setup = dict(setup)
    events = bool(setup.pop("events", True))
    objects = ObjectsNote(observer) if setup.pop("objects", False) else None
    persona = load_persona(setup.pop("persona", None))
    conv = Conversation(backend, persona, ConversationConfig(**{**DEMO_MANAGER, **setup}),
                        observer=observer)
    if objects is not None:
        conv = objects.wrap(conv)
    people = PeopleVideo(events) if battery.get("video") == "people" else None
    frames = None if people else DemoFrames()
    scene, out, earlier, claims = None, [], [], {}
    try:
        for step in battery["steps"]:
            if "until" in step:
                scene = step.get("scene", scene)
                people.play_until(conv, float(step["until"]))
                continue
            if "scene" in step:
                scene = step["scene"]
                for _ in range(int(step.get("frames", 1))):
                    conv.add_frame(frames.take(scene))
                continue
            if frames is not None:
                conv.add_frame(frames.take(scene))
                time.sleep(frame_lead)      # the camera's frame came that long before
            out.append(ask(conv, step, scene, battery["scenes"][scene], deadline_s, earlier,
                           claims))
            if verbose:
                ex = out[-1]
                read = getattr(backend, "reply_times", {})
                new = getattr(backend, "prompt_tokens", 0) - getattr(backend, "reused_tokens", 0)
                print(f"  [{scene:9}] you: {ex.question}\n              robot: {ex.reply}"
                      f"   ({ex.first_s or 0:.1f}/{ex.total_s:.1f} s, {new} new tokens, first "
                      f"token {read.get('first_token', 0) - read.get('asked', 0):.2f} s"
                      + (f", grounded={ex.grounded}" if ex.grounded is not None else "")
                      + (f", answered={ex.answered}" if ex.answered is not None else "")
                      + (f", right={ex.right}" if ex.right is not None else "")
                      + (", REPEATED" if ex.repeated else "")
                      + (f", HALLUCINATED {ex.hallucinated}" if ex.hallucinated else "")
                      + (f", persona {ex.persona_faults}" if ex.persona_faults else "") + ")",
                      flush=True)
    finally:
        conv.close(timeout=1.0)
        if people is not None:
            people.close()
    return out


def ask(conv, step: dict, scene: str, scene_truth: dict, deadline_s: float,
        earlier: list, claims: dict) -> Exchange:
    ex = Exchange(scene, step_kind(step), step["say"])
    t0 = time.monotonic()

    def first(sentence, index, fallback=False):
        if ex.first_s is None:
            ex.first_s = time.monotonic() - t0

    res = conv.turn(step["say"], on_sentence=first, deadline=t0 + deadline_s,
                    speaker=step.get("speaker", ""))
    ex.total_s = time.monotonic() - t0
    ex.reply, ex.fallback = res.text, res.fallback
    score(ex, step, scene_truth, earlier, claims)
    return ex


def summarise(exchanges: list[Exchange]) -> dict:
    """Scores of one or more batteries (rates in 0..1, seconds)."""
    ground = [e for e in exchanges if e.kind == "grounding" and e.grounded is not None]
    memory = [e for e in exchanges if e.kind == "memory"]
    now = [e for e in exchanges if e.kind == "grounding"]
    firsts = sorted(e.first_s for e in exchanges if e.first_s is not None)
    totals = sorted(e.total_s for e in exchanges)

    def rate(xs, ok):
        return round(sum(1 for x in xs if ok(x)) / len(xs), 3) if xs else None

    def pct(xs, q):
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None

    kinds = {}
    for kind in ("perspective", "consistency"):
        items = [e for e in exchanges if e.kind == kind]
        if items:
            kinds[kind] = rate(items, lambda e: e.right)
            for half in sorted({e.half for e in items if e.half}):
                kinds[f"{kind}_{half}"] = rate([e for e in items if e.half == half],
                                               lambda e: e.right)
    return {
        **kinds,
        "questions": len(exchanges),
        "grounding": rate(ground, lambda e: e.grounded),
        "hallucination": rate(now, lambda e: e.hallucinated),
        "memory": rate(memory, lambda e: e.grounded),
        "answers": rate([e for e in exchanges if e.answered is not None], lambda e: e.answered),
        "repeats": rate(exchanges, lambda e: e.repeated),
        "persona": rate(exchanges, lambda e: not e.persona_faults),
        "fallbacks": sum(e.fallback for e in exchanges),
        "first_sentence_p50_s": pct(firsts, 0.5), "first_sentence_p95_s": pct(firsts, 0.95),
        "reply_p50_s": pct(totals, 0.5), "reply_p95_s": pct(totals, 0.95),
        "turn2_s": round(exchanges[1].total_s, 2) if len(exchanges) > 1 else None,
        "turn10_s": round(exchanges[9].total_s, 2) if len(exchanges) > 9 else None,
    }


def with_measured_focus(setup: dict, engine: str, args) -> dict:
    """The setup, with the manager's `focus_note: auto` for the embedded model if unset."""
    if "focus_note" in setup or args.llm != "local":
        return setup
    from vision_dialogue.llm.factory import measured_focus_note
    kind, _, model = parse_engine(engine)
    return {**setup, "focus_note": measured_focus_note(kind, args.model or model)}


def parse_setup(text: str) -> tuple[str, dict]:
    """Parse a setup: "name:key=value,key=value" -> (name, {key: yaml value})."""
    name, _, rest = text.partition(":")
    kv = {}
    for pair in filter(None, rest.split(",")):
        k, _, v = pair.partition("=")
        kv[k.strip()] = yaml.safe_load(v)
    return name, kv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llm", choices=("local", "openai"), default="local")
    ap.add_argument("--model", default="", help="local checkpoint / server model name")
    ap.add_argument("--base-url", default="", help="OpenAI-compatible server (--llm openai)")
    ap.add_argument("--no-images", action="store_true",
                    help="send text observations to the server instead of images")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--dtype", default="",
                    help="transformers: the precision(s), comma-separated to compare them "
                    "interleaved (auto, float32, bfloat16, int8)")
    ap.add_argument("--engines", default="",
                    help="local engines to compare interleaved, comma-separated "
                    "KIND[/DTYPE][@MODEL]: transformers/float32@default,llamacpp@default:1.5b "
                    "(replaces --dtype; default: llamacpp@default:1.5b, what ships)")
    ap.add_argument("--deadline", type=float, default=60.0,
                    help="reply deadline per turn in seconds (the demo's reply_deadline)")
    ap.add_argument("--setup", action="append", default=[],
                    help="NAME:key=value,... conversation settings; repeatable (interleaved)")
    ap.add_argument("--reps", type=int, default=1, help="batteries per setup")
    ap.add_argument("--frame-lead", type=float, default=0.0,
                    help="seconds between each question's new frame and the question (0: "
                    "right after it, the worst case; in a session a frame comes every 5 s)")
    ap.add_argument("--battery", type=Path, default=BATTERY)
    ap.add_argument("--label", default="", help="a name for this run in the JSON line")
    ap.add_argument("--save", type=Path, help="write every exchange to this JSON file")
    ap.add_argument("--rescore", type=Path,
                    help="score the exchanges of a --save file again (no LLM)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every exchange")
    args = ap.parse_args(argv)

    battery = yaml.safe_load(args.battery.read_text())
    if args.rescore:
        return rescore(args.rescore, battery)
    setups = [parse_setup(s) for s in args.setup] or [("default", {})]
    dtypes = [e.strip() for e in args.engines.split(",") if e.strip()] or [
        f"transformers/{d.strip()}" for d in args.dtype.split(",") if d.strip()] or [
        SHIPPED_ENGINE]
    backends = {d: make_backend(args, d) for d in dtypes}
    observer = None
    if not getattr(backends[dtypes[0]], "supports_images", True):
        from vision_dialogue.perception.observer import make_observer
        observer = make_observer()
    runs = [(name if len(dtypes) == 1 else f"{name}/{d}", with_measured_focus(setup, d, args),
             d) for d in dtypes for name, setup in setups]
    results: dict[str, list[Exchange]] = {name: [] for name, _, _ in runs}
    for rep in range(args.reps):
        # interleaved, one battery per run in turn, the order reversed every other rep: a run
        # after another in one process met a different machine (the first battery of "objects"
        # after "base" ran on one thread: 2.8 s p50; first, on two: 1.95 s)
        for name, setup, dtype in (runs if rep % 2 == 0 else runs[::-1]):
            print(f"battery {rep + 1}/{args.reps}, {name} {setup}", flush=True)
            results[name] += run_battery(backends[dtype], observer, setup, battery,
                                         args.deadline, args.verbose, args.frame_lead)
    scores = {name: summarise(ex) for name, ex in results.items()}
    if args.save:
        args.save.write_text(json.dumps({n: [asdict(e) for e in ex] for n, ex in results.items()},
                                        indent=1))
    print_table(scores)
    line = {"benchmark": "dialogue", "label": args.label, "llm": args.llm,
            "model": args.model or "default", "engines": dtypes, "dtype": args.dtype,
            "reps": args.reps,
            "frame_lead": args.frame_lead,
            "scores": scores}
    print(json.dumps(line))
    record("bench_dialogue", line)
    return 0


def rescore(path: Path, battery: dict) -> int:
    """Score saved exchanges again with the current battery (its checks may have changed)."""
    steps = {s["say"]: s for s in battery["steps"] if "say" in s}
    scores = {}
    for name, saved in json.loads(path.read_text()).items():
        exchanges, earlier, claims = [], [], {}
        for d in saved:
            ex = Exchange(d["scene"], d["kind"], d["question"], d["reply"], d["first_s"],
                          d["total_s"], d["fallback"])
            score(ex, steps[ex.question], battery["scenes"][ex.scene], earlier, claims)
            exchanges.append(ex)
        scores[name] = summarise(exchanges)
    print_table(scores)
    print(json.dumps({"benchmark": "dialogue", "rescored": str(path), "scores": scores}))
    return 0


def print_table(scores: dict) -> None:
    first = next(iter(scores.values()), {})
    cols = [k for k in first if k.startswith(("perspective", "consistency"))] + [
        "grounding", "hallucination", "memory", "answers", "repeats", "persona", "fallbacks",
        "first_sentence_p50_s", "first_sentence_p95_s", "reply_p50_s", "reply_p95_s",
        "turn2_s", "turn10_s"]
    print("\n| setup | questions | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for name, s in scores.items():
        print(f"| {name} | {s['questions']} | "
              + " | ".join("-" if s.get(c) is None else str(s[c]) for c in cols) + " |")
    print("(rates in 0..1: grounding, memory, answers and persona higher is better, "
          "hallucination and repeats lower)")


if __name__ == "__main__":
    sys.exit(main())
