#!/usr/bin/env python3
"""Benchmark: the Ask skill's answers, the intents, and a Say goal's time to the first audio.

Parts (`--parts ask,intents,chats,intent_sessions,say`):

- ask: the held-out-style battery in skills_battery.yaml (25 goals: names, numbers, yes/no,
  enums, things held or seen, two keys at once, people who decline). Each goal runs the real
  `run_ask` (question, listen, follow-ups) with the person's scripted lines and what the robot
  sees; speech takes no time here, so "s" is the time from the goal to its result spent on our
  side and in the LLM. Right: a value as expected; wrong: a value not expected (worse than a
  missing one); missing: an expected key not obtained.
- intents: 26 lines (12 requests of four declared intents, 14 that ask for none). Precision and
  recall of the intent, arguments right, LLM calls, seconds per line.
- chats: the Chat skill in a conversation each (chat_battery.yaml, chat_sessions.py): a
  purpose with results to find out, the robot's opening and replies from the model under
  test, a scripted person answering each robot line (some answer two things at once, some
  correct themselves). Chats done with every result right, results right/wrong/missing, chats
  ended wrongly or unfinished, the robot lines needed, replies that ask again for a result
  the chat already had (a "?" and the result's key or a word of its description), and
  whether the opening asks (a "?") or reads the instruction out; all chats and per half
  (the newest half never tuned on).
- intent_sessions: intents inside conversations (intent_battery.yaml, intent_sessions.py):
  112 lines in 28 sessions, requests, near-misses and requests that depend on an earlier line,
  each line answered by the model under test. Precision, recall, arguments right, intents late
  (after the next line), delay from the line p50/p95, the reply's first sentence p50; all
  lines and per half. The baseline, interleaved session by session, is the manager before
  intents were read first: each line read after its reply, in the background.
- say: `skill/say` goals between processes (manager, speech node, this client) with the speech
  node's script backend and its local voice (Piper, WAV out in real time): the time from the
  goal to the first audio (the speech node's BEGAN report, the local voice's first AudioChunk
  on audio/output), p50 over `--say-goals`.

Engines (`--engines`): `local` = the embedded default (1.5B) on llama.cpp in this process,
`server` = the same GGUF behind llama.cpp's OpenAI-compatible server (the openai backend).

Baselines, measured in the same run and interleaved goal by goal: for ask and intents, what a
user would otherwise write: one LLM call asking for the JSON (no plain readers, no constrained
output, no grounding, every line to the LLM), keeping the values whose types fit; for say,
publishing the line on dialogue/reply directly (no skill, no result).
For chats there is no other method to interleave: the code before a change is run in turn with
the code after (swapped in the working tree; the records say `dirty`).

Prints a table and one JSON line. Usage:
    source env.sh && python benchmarks/bench_skills.py [--engines local,server] [--parts ask]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from vision_dialogue.llm.answers import parse_json_object  # noqa: E402
from vision_dialogue.llm.intent_reader import FoundIntent, IntentReader  # noqa: E402
from vision_dialogue.core.persona import Persona, default_persona_file, load_persona  # noqa: E402
from vision_dialogue.application.skills import Control, Heard, fill, run_ask  # noqa: E402
from vision_dialogue.core.conversation_types import SkillOutcome  # noqa: E402
from answer_scores import score_answers  # noqa: E402
from chat_sessions import chats_part  # noqa: E402
from intent_sessions import intent_sessions_part, intent_specs, \
    print_intent_sessions  # noqa: E402
from results import record  # noqa: E402 - benchmarks/ is on sys.path

BATTERY = Path(__file__).with_name("skills_battery.yaml")
CHAT_BATTERY = Path(__file__).with_name("chat_battery.yaml")
INTENT_BATTERY = Path(__file__).with_name("intent_battery.yaml")
METHODS = ("ours", "baseline")


# --- the LLM engines --------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_engine(name: str, warm_server: bool = False):
    """(backend, close) for `local` or `server` (the 1.5B GGUF both ways).

    `warm_server`: the server's backend warms the next prompt between turns
    (`warm_server_prompt`), as the local engine does (`warm_cache`).
    """
    from vision_dialogue.llm.default_model import ensure_default_gguf, server_argv
    from vision_dialogue.llm.factory import BackendOptions, backend_class
    if name == "local":
        b = backend_class("llamacpp").from_options(BackendOptions(
            model="default:1.5b", max_new_tokens=150, temperature=0.0))
        return b, lambda: None
    gguf = ensure_default_gguf(variant="1.5b")
    port = _free_port()
    proc = subprocess.Popen(server_argv(gguf, port, threads=2, python=sys.executable),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import urllib.request
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/models", timeout=5) as r:
                model = json.load(r)["data"][0]["id"]
            break
        except OSError:
            time.sleep(0.5)
    else:
        raise RuntimeError("llama.cpp's server did not start")
    b = backend_class("openai").from_options(BackendOptions(
        base_url=url, model=model, api_key_env="OPENAI_API_KEY", timeout=120.0,
        max_retries=0, supports_images=False, max_new_tokens=150, temperature=0.0,
        params={"warm_server_prompt": warm_server}))
    return b, lambda: (proc.terminate(), proc.wait(30))


# --- ask --------------------------------------------------------------------------------------
class BenchHost:
    """The manager, played: lines are said at once, the person's lines come from the goal."""

    def __init__(self, backend, said, seen=""):
        self.backend, self.said_lines, self.seen_text = backend, list(said), seen
        self.asked: list[str] = []
        self.llm_calls = 0

    def say(self, text, control, feedback):
        self.asked.append(text)
        return SkillOutcome("spoken")

    def listen(self, control):
        return Heard(self.said_lines.pop(0)) if self.said_lines else None

    def seen(self):
        return self.seen_text

    def ask_llm(self, messages, max_tokens, json_schema=None):
        self.llm_calls += 1
        kw = {"json_schema": json_schema} if json_schema is not None else {}
        return self.backend.complete(messages, max_tokens=max_tokens, temperature=0.0, **kw)


def naive_fill(host, schema, keys, question, lines, log=None) -> dict:
    """The baseline: one prompt for the JSON, the values whose types fit."""
    prompt = (f"The robot asked: {question}\nThe person answered: {' '.join(lines)}\n"
              f"What the robot sees: {host.seen()}\nExtract these keys as a JSON object: "
              f"{', '.join(keys)}.")
    text = host.ask_llm([{"role": "system", "content": "You extract information as JSON."},
                         {"role": "user", "content": prompt}], max_tokens=80)
    got = parse_json_object(text)
    return {k: v for k, v in got.items() if k in keys and schema.valid(k, v)}


def run_ask_battery(backend, goals, persona: Persona, method: str) -> list[dict]:
    rows = []
    for g in goals:
        host = BenchHost(backend, g["said"], g.get("seen", ""))
        t0 = time.perf_counter()
        out = run_ask(host, Control(deadline=time.monotonic() + 600),
                      lambda *a: None, g["question"], json.dumps(g["schema"]), 2,
                      persona.ask_wording_instruction,
                      filler=naive_fill if method == "baseline" else fill)
        s = time.perf_counter() - t0
        r, w, m = score_answers(g["expect"], out.data)
        rows.append({"right": r, "wrong": w, "missing": m, "s": s, "llm": host.llm_calls,
                     "got": out.data, "asked": host.asked})
    return rows


# --- intents ----------------------------------------------------------------------------------
class NaiveIntents(IntentReader):
    """The baseline: every line to the LLM, free JSON, arguments kept if they are strings."""

    def read(self, line):
        self.asked += 1
        got = parse_json_object(self.ask_llm(self.messages(line), max_tokens=60))
        spec = self.specs.get(str(got.get("intent", "")))
        if spec is None:
            return None
        args = got.get("arguments") if isinstance(got.get("arguments"), dict) else {}
        return FoundIntent(spec.name, {k: v for k, v in args.items() if isinstance(v, str)},
                           1.0)


def run_intents(backend, specs, lines, method):
    def llm(msgs, max_tokens, json_schema=None):
        kw = {"json_schema": json_schema} if json_schema is not None else {}
        return backend.complete(msgs, max_tokens=max_tokens, temperature=0.0, **kw)
    reader = (NaiveIntents if method == "baseline" else IntentReader)(specs, llm)
    rows = []
    for item in lines:
        t0 = time.perf_counter()
        found = reader.read(item["said"])
        s = time.perf_counter() - t0
        name = found.intent if found else "none"
        args_ok = None
        if found and item["expect"] != "none" and item.get("data"):
            args_ok = all(str(v).lower() in str(found.data.get(k, "")).lower()
                          for k, v in item["data"].items())
        rows.append({"expect": item["expect"], "got": name, "s": s, "args_ok": args_ok,
                     "data": found.data if found else {}})
    return rows, reader.asked


def intent_scores(rows, asked) -> dict:
    predicted = [r for r in rows if r["got"] != "none"]
    positives = [r for r in rows if r["expect"] != "none"]
    correct = [r for r in predicted if r["got"] == r["expect"]]
    args = [r["args_ok"] for r in correct if r["args_ok"] is not None]
    return {"precision": round(len(correct) / len(predicted), 2) if predicted else 1.0,
            "recall": round(len(correct) / len(positives), 2),
            "false_alarms": sum(r["expect"] == "none" for r in predicted),
            "args_right": f"{sum(args)}/{len(args)}", "llm_calls": asked,
            "s_p50": round(statistics.median(r["s"] for r in rows), 2),
            "s_max": round(max(r["s"] for r in rows), 2)}


# --- say --------------------------------------------------------------------------------------
def say_latency(goals: int, tmp: Path) -> dict:
    """Goal -> first audio between processes, script and local voice; the direct Reply too."""
    import rclpy
    from rclpy.action import ActionClient

    from vision_dialogue_interfaces.action import Say
    from vision_dialogue_interfaces.msg import AudioChunk, Reply, Spoken
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    script = tmp / "wait.yaml"
    script.write_text("items:\n  - say: bye\n    at: 36000\n")
    backends = {"script": ["-p", "backend:=script", "-p", f"script_file:={script}"],
                "local": ["-p", "backend:=local", "-p", "audio_in:=topic", "-p",
                          f"audio_out_dir:={tmp / 'voice'}", "-p", "publish_audio:=true"]}
    out = {}
    with rclpy.init():
        node = rclpy.create_node("bench_say")
        client = ActionClient(node, Say, "skill/say")
        reply_pub = node.create_publisher(Reply, "dialogue/reply", 10)
        firsts: list = []
        node.create_subscription(Spoken, "dialogue/spoken", lambda m: firsts.append(
            ("script", m)) if m.event == Spoken.BEGAN else None, 50)
        node.create_subscription(AudioChunk, "audio/output",
                                 lambda m: firsts.append(("local", m)), 50)
        manager = subprocess.Popen(
            [sys.executable, "-m", "vision_dialogue.manager_node", "--ros-args", "-p",
             "base_url:=http://127.0.0.1:9/v1", "-p", f"transcript_dir:={tmp / 'tr'}", "-p",
             "probe_images:=false"], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        try:
            if not client.wait_for_server(timeout_sec=120):
                raise RuntimeError(f"no skill/say server: {manager.stderr.read()[-2000:]}")
            for kind, args in backends.items():
                out[kind] = _say_runs(node, client, reply_pub, firsts, kind, args, goals, env)
        finally:
            manager.terminate()
            manager.wait(30)
            node.destroy_node()
    return out


def _say_runs(node, client, reply_pub, firsts, kind, args, goals, env) -> dict:
    import rclpy

    from vision_dialogue_interfaces.action import Say
    from vision_dialogue_interfaces.msg import Reply
    speech = subprocess.Popen([sys.executable, "-m", "vision_dialogue.speech_node",
                               "--ros-args", *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    times = {"skill": [], "direct": []}
    try:
        end = time.monotonic() + 120
        while node.count_subscribers("dialogue/reply") < 1 and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
        time.sleep(2.0)                       # the backend starts (Piper loads)
        for i in range(goals * 2):
            how = ("skill", "direct")[i % 2]
            text = f"Welcome, visitor number {i + 1}. Please take a seat."
            firsts.clear()
            t0 = node.get_clock().now().nanoseconds
            if how == "skill":
                fut = client.send_goal_async(Say.Goal(input=text))
            else:
                reply_pub.publish(Reply(turn_id=100000 + i, text=text, final=True))
            marker = f"number {i + 1}."

            def mine():      # this line's first audio (not the end of an earlier one)
                return next((m for k, m in firsts if k == kind and marker in m.text), None)
            end = time.monotonic() + 30
            while mine() is None and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.01)
            first = mine()
            if first is not None:
                stamp = first.header.stamp.sec * 10**9 + first.header.stamp.nanosec
                times[how].append((stamp - t0) / 1e9)
            if how == "skill":          # its result: the line was said to the end
                while not fut.done():
                    rclpy.spin_once(node, timeout_sec=0.01)
                res = fut.result().get_result_async()
                while not res.done():
                    rclpy.spin_once(node, timeout_sec=0.01)
            else:
                time.sleep(0.5 if kind == "script" else 4.0)
    finally:
        speech.terminate()
        speech.wait(30)
    return {how: {"p50": round(statistics.median(v), 3), "n": len(v)} if v else {"n": 0}
            for how, v in times.items()}


# --- main -------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="local,server")
    ap.add_argument("--parts", default="ask,intents,chats,intent_sessions,say")
    ap.add_argument("--say-goals", type=int, default=20)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    battery = yaml.safe_load(BATTERY.read_text())
    persona = load_persona(default_persona_file())
    parts = a.parts.split(",")
    result: dict = {"machine": f"{os.cpu_count()} cores"}
    llm_parts = {"ask", "intents", "chats", "intent_sessions"}
    for engine in (a.engines.split(",") if llm_parts & set(parts) else []):
        backend, close = make_engine(engine)
        try:
            backend.complete([{"role": "user", "content": "Hi"}], max_tokens=1)   # loaded
            if "ask" in parts:
                result[f"ask/{engine}"] = ask_part(backend, battery["ask"], persona, a.verbose)
                print(json.dumps({f"ask/{engine}": result[f"ask/{engine}"]}), flush=True)
            if "intents" in parts:
                result[f"intents/{engine}"] = intents_part(backend, battery, a.verbose)
                print(json.dumps({f"intents/{engine}": result[f"intents/{engine}"]}),
                      flush=True)
            if "chats" in parts:
                chats = yaml.safe_load(CHAT_BATTERY.read_text())["chats"]
                result[f"chats/{engine}"] = chats_part(backend, chats, persona, a.verbose)
                print(json.dumps({f"chats/{engine}": result[f"chats/{engine}"]}), flush=True)
            if "intent_sessions" in parts:
                key = f"intent_sessions/{engine}"
                result[key] = intent_sessions_part(
                    backend, yaml.safe_load(INTENT_BATTERY.read_text()), persona, a.verbose)
                print(json.dumps({key: result[key]}), flush=True)
        finally:
            close()
    if "say" in parts:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            result["say"] = say_latency(a.say_goals, Path(tmp))
    print_table(result)
    print(json.dumps(result))
    record("bench_skills", result)
    return 0


def ask_part(backend, goals, persona, verbose) -> dict:
    rows = {m: [] for m in METHODS}
    for g in goals:                       # interleaved goal by goal (ABAB)
        for m in METHODS:
            row = run_ask_battery(backend, [g], persona, m)[0]
            rows[m].append(row)
            if verbose:
                print(f"[{m}] {g['said']} -> {row['got']} ({row['s']:.1f} s)", flush=True)
    out = {}
    for m, rs in rows.items():
        out[m] = {"goals": len(rs), "right": sum(r["right"] for r in rs),
                  "wrong": sum(r["wrong"] for r in rs),
                  "missing": sum(r["missing"] for r in rs),
                  "s_p50": round(statistics.median(r["s"] for r in rs), 2),
                  "s_p95": round(sorted(r["s"] for r in rs)[int(0.95 * (len(rs) - 1))], 2),
                  "llm_calls": sum(r["llm"] for r in rs)}
    return out


def intents_part(backend, battery, verbose) -> dict:
    specs = intent_specs(battery["intents_declared"])
    out = {}
    for m in METHODS:
        rows, asked = run_intents(backend, specs, battery["intents"], m)
        if verbose:
            for r in rows:
                print(f"[{m}] {r['expect']:8} -> {r['got']:8} {r['data']}", flush=True)
        out[m] = intent_scores(rows, asked)
    return out


def print_table(result: dict) -> None:
    if any(key.startswith("ask/") for key in result):
        print("\n| part / engine | method | right | wrong | missing | s p50 | s p95 | LLM calls |")
        print("|---|---|---|---|---|---|---|---|")
    for key, val in result.items():
        if key.startswith("ask/"):
            for m, r in val.items():
                print(f"| {key} | {m} | {r['right']} | {r['wrong']} | {r['missing']} | "
                      f"{r['s_p50']} | {r['s_p95']} | {r['llm_calls']} |")
    if any(key.startswith("intents/") for key in result):
        print("\n| part / engine | method | precision | recall | false alarms | arguments "
              "right | s p50 | s max | LLM calls |")
        print("|---|---|---|---|---|---|---|---|---|")
    for key, val in result.items():
        if key.startswith("intents/"):
            for m, r in val.items():
                print(f"| {key} | {m} | {r['precision']} | {r['recall']} | {r['false_alarms']}"
                      f" | {r['args_right']} | {r['s_p50']} | {r['s_max']} | {r['llm_calls']} |")
    print_chats(result)
    print_intent_sessions(result)
    if "say" in result:
        print("\n| speech backend | skill/say p50 (s) | direct Reply p50 (s) | goals |")
        print("|---|---|---|---|")
        for kind, r in result["say"].items():
            print(f"| {kind} | {r['skill'].get('p50')} | {r['direct'].get('p50')} | "
                  f"{r['skill']['n']} |")


def print_chats(result: dict) -> None:
    """The chats' table: all chats, then each half."""
    rows = [(key, part, r) for key, val in result.items() if key.startswith("chats/")
            for m, scores in val.items()
            for part, r in [("all", scores)] + [(k.replace("_", " "), v) for k, v in
                                                sorted(scores.items()) if k.startswith("half_")]]
    if not rows:
        return
    print("\n| part / engine | chats | done, all right | right | wrong | missing | ended wrongly "
          "| unfinished | robot lines p50 | asked again | openings asking / recited | s p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, part, r in rows:
        if not r["chats"]:
            continue
        print(f"| {key} {part} | {r['chats']} | {r['done_all_right']} | {r['right']} | "
              f"{r['wrong']} | {r['missing']} | {r['ended_wrongly']} | {r['unfinished']} | "
              f"{r['robot_lines_p50']} | {r.get('asked_again', '')} | "
              f"{r['openings_asking']} / {r['openings_recited']} of "
              f"{r['openings']} | {r['s_p50']} |")


if __name__ == "__main__":
    raise SystemExit(main())
