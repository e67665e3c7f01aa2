"""Benchmark of the demo.

Reply latency per turn, time to the first streamed sentence, and (optionally) setup time from a
fresh clone.

Runs `bringup demo` in this process (camera on the demo video, the scripted dialogue, the
manager on the embedded local model, as README command 1 does) with a watcher node on
dialogue/utterance and dialogue/reply. Per turn:
  latency = final Reply - Utterance (receive times), first = first Reply chunk - Utterance.
Baseline, measured in the same run after the demo: the bare LLM backend answering each
utterance with only the persona (no frames, no history, no ROS), non-streamed, so
  ratio = demo latency / bare LLM latency  (what vision, history and the pipeline cost).

    python benchmarks/bench_demo.py                      # the demo as shipped (minutes on CPU)
    python benchmarks/bench_demo.py --turns 2            # stop after two replies
    python benchmarks/bench_demo.py --fake-llm 0.5       # fake OpenAI server, 0.5 s per reply
    python benchmarks/bench_demo.py --setup-from-clone   # also: git clone + scripts/setup.sh
    python benchmarks/bench_demo.py --runs 5             # five demos: each conversation and its
                                                         # self-contradictions (the rules in
                                                         # demo_consistency.yaml), printed

Prints a table and one JSON line: {"benchmark": "demo", ...}.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
CONSISTENCY = Path(__file__).with_name("demo_consistency.yaml")
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(Path(__file__).parent))


class TurnWatch:
    """Receive times of utterances and reply chunks/finals, keyed by utterance text."""

    def __init__(self, ctx, namespace=None):
        from rclpy.node import Node
        from vision_dialogue_interfaces.msg import Reply, Utterance
        self.node = Node("bench_demo_watch", context=ctx, namespace=namespace)
        self.lock = threading.Lock()
        self.turns: list[dict] = []
        self.remarks: list[str] = []      # the robot's lines said unasked (the greeting first)
        self.node.create_subscription(Utterance, "dialogue/utterance", self._utt, 50)
        self.node.create_subscription(Reply, "dialogue/reply", self._reply, 100)

    def _find(self, text):
        for t in reversed(self.turns):
            if t["text"] == text:
                return t
        return None

    def _utt(self, msg):
        with self.lock:
            self.turns.append({"text": " ".join(msg.text.split()), "t_utt": time.monotonic(),
                               "t_first": None, "t_final": None, "reply": "",
                               "fallback": False})

    def _reply(self, msg):
        now = time.monotonic()
        with self.lock:
            if not msg.in_reply_to.strip():
                if msg.final and not msg.fallback:
                    self.remarks.append(msg.text)
                return
            t = self._find(" ".join(msg.in_reply_to.split()))
            if t is None:
                return
            if not msg.final and t["t_first"] is None:
                t["t_first"] = now
            if msg.final and t["t_final"] is None:
                t["t_final"] = now
                t["reply"], t["fallback"] = msg.text, bool(msg.fallback)
                if t["t_first"] is None:   # not streamed: the first sentence came with it
                    t["t_first"] = now

    def done_turns(self):
        with self.lock:
            return [t for t in self.turns if t["t_final"] is not None]


def run_demo(args, tmp: Path):
    """Run the demo until the script ends (or --turns replies).

    Returns (turns, remarks said unasked, the manager's backend, startup seconds, fake server
    or None).
    """
    import rclpy
    from rclpy.parameter import Parameter  # noqa: F401
    from vision_dialogue.cli import bringup

    setup, params_file, keys = bringup.resolve("demo", args.params_file, None,
                                               detector=False if args.no_detector else None,
                                               people=True if args.people else None)
    llm = bringup.llm_overrides(args.llm, args.base_url, args.model)
    fake = None
    if args.fake_llm is not None:
        from fake_openai import FakeOpenAI, Reply
        fake = FakeOpenAI(responder=lambda req: Reply(
            text="I see you there. You look happy today.", delay=args.fake_llm)).start()
        os.environ.setdefault("OPENAI_API_KEY", "bench-key")
        llm = bringup.llm_overrides("openai", fake.base_url, "fake-vlm")
        llm["supports_images"] = True
    overrides = bringup.setup_overrides(setup, params_file, keys, llm)
    overrides.setdefault("manager", {})["transcript_dir"] = str(tmp / "transcripts")
    for extra in (bringup.input_overrides(script=args.script),
                  bringup.param_overrides(args.param, keys)):
        for node, params in extra.items():
            overrides.setdefault(node, {}).update(params)
    t0 = time.monotonic()
    with rclpy.init(args=["bench"] + bringup.ros_args(params_file, "", args.log_level)):
        watch = TurnWatch(rclpy.get_default_context())  # before the script's first line
        b = bringup.InProcessBringup(setup, params_file, keys, overrides=overrides)
        b.start()
        startup = time.monotonic() - t0
        b.executor.add_node(watch.node)
        if args.turns:
            def check():
                if len(watch.done_turns()) >= args.turns:
                    b.stop(f"{args.turns} turns done")
            watch.node.create_timer(0.5, check)
        timer = threading.Timer(args.timeout, lambda: b.stop("timeout"))
        timer.daemon = True
        timer.start()
        reason = b.spin()
        timer.cancel()
        backend = b.nodes["manager"].backend
        b.executor.remove_node(watch.node)
        turns, remarks = watch.done_turns(), list(watch.remarks)
        b.shutdown()
        watch.node.destroy_node()
    print(f"demo stopped: {reason}", file=sys.stderr)
    return turns, remarks, backend, startup, fake


def baseline(backend, turns, max_tokens: int) -> list[float]:
    """Bare LLM: persona + the utterance only, non-streamed."""
    from vision_dialogue.core.persona import load_persona
    from vision_dialogue.manager_node import default_persona_file
    persona = load_persona(default_persona_file())
    out = []
    for t in turns:
        msgs = [{"role": "system", "content": persona.system},
                {"role": "user", "content": t["text"]}]
        t0 = time.perf_counter()
        try:
            backend.complete(msgs, max_tokens=max_tokens)
        except Exception as e:  # noqa: BLE001
            print(f"baseline call failed: {e}", file=sys.stderr)
            out.append(float("nan"))
            continue
        out.append(time.perf_counter() - t0)
    return out


def conversation_quality(turns: list[dict]) -> dict:
    """Repeats, yes/no questions answered with yes or no, and turn 8 against turn 2."""
    from bench_dialogue import sentence_words, yes_or_no
    from vision_dialogue.core.focus import is_yes_no
    from vision_dialogue.core.reply_filter import near_repeat
    earlier, repeated, yes_no, answered = [], 0, 0, 0
    for t in turns:
        mine = sentence_words(t["reply"])
        repeated += not t["fallback"] and any(near_repeat(list(w), earlier) for w in mine)
        earlier.extend(mine)
        if is_yes_no(t["text"]):
            yes_no += 1
            answered += bool(yes_or_no(t["reply"])) and not t["fallback"]
    firsts = [t["t_first"] - t["t_utt"] for t in turns]
    return {"repeated_replies": repeated, "yes_no_questions": yes_no,
            "yes_no_answered": answered,
            "turn8_over_turn2": round(firsts[7] / firsts[1], 2) if len(firsts) > 7 else None}


DENIALS = {"not", "no", "nothing", "nobody", "never", "cannot", "dislike", "none"}


def line_side(text: str, rule: dict, direct: bool) -> str:
    """Return yes, no or "" (no side): how `text` speaks to `rule` (demo_consistency.yaml)."""
    from bench_dialogue import yes_or_no
    if direct and (side := yes_or_no(text)):
        return side
    about, opinion = set(rule["about"]), set(rule.get("opinion", ()))
    for clause in re.split(r"(?<=[.!?])\s+|[,;:]|\bbut\b", text.strip()):
        words = re.findall(r"[a-z']+", clause.lower().replace("\u2019", "'"))
        if not about & set(words) or (opinion and not opinion & set(words)):
            continue
        denies = DENIALS & set(words) or any(w.endswith("n't") for w in words) \
            or "no one" in " ".join(words)
        return "no" if denies else "yes"
    return ""


def contradictions(turns: list[dict], remarks: list[str], rules: list[dict]) -> list[str]:
    """The rules on which two of the conversation's lines take opposite sides (printed)."""
    from vision_dialogue.core.focus import is_yes_no
    said = {" ".join(t["text"].split()): t["reply"] for t in turns if not t["fallback"]}
    if remarks:
        said["greeting"] = remarks[0]
    out = []
    for rule in rules:
        sides = [(line, line_side(said[line], rule, is_yes_no(line)), said[line])
                 for line in rule["lines"] if line in said]
        if len({side for _, side, _ in sides if side}) > 1:
            out.append(f"{rule['name']}: " + " / ".join(f"{line!r} -> {reply!r}"
                                                        for line, _, reply in sides))
    return out


def setup_from_clone() -> float:
    """Seconds for `git clone` of this repo + scripts/setup.sh in a temp dir."""
    with tempfile.TemporaryDirectory(prefix="vd_clone_") as d:
        t0 = time.monotonic()
        subprocess.run(["git", "clone", "-q", str(REPO), d + "/repo"], check=True)
        subprocess.run(["bash", d + "/repo/scripts/setup.sh"], check=True)
        return time.monotonic() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=0, help="stop after N replies (0: whole script)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="give up after N seconds")
    ap.add_argument("--params-file", help="demo YAML (default config/demo_setup.yaml)")
    ap.add_argument("--llm", choices=("openai", "transformers", "llamacpp", "local"))
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NODE.PARAM:=VALUE",
                    help="a node parameter, as bringup's -p (e.g. manager.focus_note:=none)")
    ap.add_argument("--script", help="a speech script instead of the demo's (e.g. "
                    "benchmarks/held_out_script.yaml)")
    ap.add_argument("--no-detector", action="store_true",
                    help="leave the object detector node out (the demo before issue 22)")
    ap.add_argument("--people", action="store_true",
                    help="also run the people node (faces and voices known across sessions)")
    ap.add_argument("--base-url")
    ap.add_argument("--model")
    ap.add_argument("--fake-llm", type=float, metavar="SECONDS",
                    help="use a fake OpenAI server answering after SECONDS (pipeline only)")
    ap.add_argument("--setup-from-clone", action="store_true",
                    help="also time git clone + scripts/setup.sh (long)")
    ap.add_argument("--log-level", default="warn")
    ap.add_argument("--runs", type=int, default=1,
                    help="run the demo N times; each run's conversation and contradictions "
                         "(demo_consistency.yaml) are printed")
    args = ap.parse_args(argv)

    rules = yaml.safe_load(CONSISTENCY.read_text())["rules"]
    runs = []
    for n in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="vd_bench_demo_") as tmp:
            turns, remarks, backend, startup, fake = run_demo(args, Path(tmp))
        found = contradictions(turns, remarks, rules)
        runs.append({"run": n, "startup_s": round(startup, 2), "remarks": remarks,
                     "lines": [[t["text"], t["reply"]] for t in turns], "contradictions": found})
        print(f"--- run {n}: the conversation")
        for r in remarks[:1]:
            print(f"  robot (unasked): {r}")
        for t in turns:
            print(f"  person: {t['text']}\n  robot:  {t['reply']}"
                  + ("  [fallback]" if t["fallback"] else ""))
        print(f"  self-contradictions: {len(found)}" + "".join(f"\n    {c}" for c in found))
        if fake is not None and n < args.runs:
            fake.close()
    if not turns:
        print("no turn completed", file=sys.stderr)
    from vision_dialogue.ros.setups import load_node_params
    from vision_dialogue.common.resources import share_dir
    max_tokens = load_node_params(share_dir("config") / "demo_setup.yaml",
                                  "manager_node").get("max_reply_tokens", 60)
    base = baseline(backend, turns, max_tokens)
    if fake is not None:
        fake.close()
    clone_s = setup_from_clone() if args.setup_from_clone else None

    print(f"{'turn':>4} {'latency s':>10} {'first s':>8} {'bare LLM s':>11} {'ratio':>6} "
          f"{'fallback':>8}  utterance -> reply")
    rows = []
    for i, (t, b) in enumerate(zip(turns, base), 1):
        lat, first = t["t_final"] - t["t_utt"], t["t_first"] - t["t_utt"]
        ratio = lat / b if b and b == b else float("nan")
        rows.append({"turn": i, "latency_s": round(lat, 3), "first_sentence_s": round(first, 3),
                     "baseline_s": round(b, 3) if b == b else None,
                     "ratio": round(ratio, 2) if ratio == ratio else None,
                     "fallback": t["fallback"]})
        print(f"{i:>4} {lat:>10.2f} {first:>8.2f} {b:>11.2f} {ratio:>6.2f} "
              f"{str(t['fallback']):>8}  {t['text'][:30]!r} -> {t['reply'][:50]!r}")

    def med(key):
        vals = [r[key] for r in rows if r[key] is not None]
        return round(statistics.median(vals), 3) if vals else None

    quality = conversation_quality(turns)
    print(f"repeated replies {quality['repeated_replies']}, yes/no questions answered with yes "
          f"or no {quality['yes_no_answered']}/{quality['yes_no_questions']}, first sentence "
          f"turn 8 / turn 2 {quality['turn8_over_turn2']}")
    summary = {"benchmark": "demo", "llm": "fake" if args.fake_llm is not None else
               (args.llm or "yaml"), "turns": len(rows), "startup_s": round(startup, 2),
               "latency_p50_s": med("latency_s"), "first_sentence_p50_s": med("first_sentence_s"),
               "baseline_bare_llm_p50_s": med("baseline_s"), "ratio_p50": med("ratio"),
               "fallbacks": sum(r["fallback"] for r in rows),
               "setup_from_clone_s": round(clone_s, 1) if clone_s is not None else None,
               "script": args.script or "demo", **quality, "per_turn": rows,
               "runs_with_contradictions": sum(bool(r["contradictions"]) for r in runs),
               "runs": runs}
    print(f"startup {startup:.1f} s; p50 latency {summary['latency_p50_s']} s, first sentence "
          f"{summary['first_sentence_p50_s']} s, bare LLM {summary['baseline_bare_llm_p50_s']} s"
          + (f"; setup from a fresh clone {clone_s:.0f} s" if clone_s is not None else ""))
    print(f"runs with a self-contradiction: {summary['runs_with_contradictions']} of "
          f"{len(runs)} (the last run's timings above)")
    print(json.dumps(summary))
    record("bench_demo", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
