"""Raw frames from a separate camera-driver process to manager_node: the share that arrives.

Cells: driver QoS (sensor_data: best effort depth 5; reliable: depth 10, as usb_cam and
v4l2_camera) x rate (0.2, 5, 30 fps) x size (640x480, 1280x720) x setting:
  baseline  the previous defaults: no Fast DDS profile, the manager subscribes best effort
            (`image_qos:=sensor_data`, what it did before);
  ours      today's defaults: config/fastdds.xml in both processes (env.sh, the install's
            hook, bringup and the launch files set it) and `image_qos:=auto`.
Settings alternate cell by cell (interleaved). Prints a table and one JSON line.

    source env.sh && python benchmarks/bench_frames.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from results import record  # noqa: E402 - benchmarks/ is on sys.path

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "test" / "installed" / "frame_driver.py"
PROFILE = REPO / "config" / "fastdds.xml"
SETTINGS = ("baseline", "ours")
FRAMES_AT = {0.2: 4, 5.0: 20, 30.0: 60}


def env_for(setting: str, domain: int) -> dict:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               OPENAI_API_KEY="unused", PYTHONUNBUFFERED="1")
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    if setting == "ours":
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(PROFILE)
    else:
        env["VD_NO_DDS_PROFILE"] = "1"
    return env


def frames_received(domain: int) -> int:
    """frames_received of the manager's latched PromptState, read in a fresh process."""
    code = ("import rclpy,time\n"
            "from rclpy.qos import QoSProfile,ReliabilityPolicy as R,DurabilityPolicy as D\n"
            "from vision_dialogue_interfaces.msg import PromptState\n"
            "with rclpy.init():\n"
            " n=rclpy.create_node('bench_probe'); got=[]\n"
            " n.create_subscription(PromptState,'dialogue/prompt_state',lambda m:"
            "got.append(m.frames_received),QoSProfile(depth=1,reliability=R.RELIABLE,"
            "durability=D.TRANSIENT_LOCAL))\n"
            " t=time.time()\n"
            " while not got and time.time()-t<5: rclpy.spin_once(n,timeout_sec=0.05)\n"
            " print(got[-1] if got else -1)\n")
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=30)
    return int(out.stdout.strip().splitlines()[-1])


def cell(setting: str, qos: str, fps: float, size: str, domain: int) -> tuple[int, int]:
    env = env_for(setting, domain)
    image_qos = "auto" if setting == "ours" else "sensor_data"
    manager = subprocess.Popen(
        [sys.executable, "-m", "vision_dialogue.manager_node", "--ros-args",
         "-p", "base_url:=http://127.0.0.1:9/v1", "-p", "n:=1000", "-p", "m:=999",
         "-p", "transcript_dir:=''", "-p", f"image_qos:={image_qos}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        count = FRAMES_AT[fps]
        res = subprocess.run([sys.executable, str(DRIVER), "--qos", qos, "--rate", str(fps),
                              "--size", size, "--count", str(count)], env=env,
                             capture_output=True, text=True, timeout=120)
        sent = json.loads(res.stdout.strip().splitlines()[-1])["sent"]
        time.sleep(0.5)
        return frames_received(domain), sent
    finally:
        manager.send_signal(signal.SIGINT)
        try:
            manager.wait(10)
        except subprocess.TimeoutExpired:
            manager.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the 0.2 fps cells")
    ap.add_argument("--qos", choices=("sensor_data", "reliable"), action="append",
                    help="only this driver QoS (repeatable; default both)")
    a = ap.parse_args()
    rates = [5.0, 30.0] if a.quick else [0.2, 5.0, 30.0]
    rows = []
    domain = random.randint(100, 200)
    for qos in a.qos or ("sensor_data", "reliable"):
        for fps in rates:
            for size in ("640x480", "1280x720"):
                row = {"qos": qos, "fps": fps, "size": size}
                order = SETTINGS if len(rows) % 2 == 0 else SETTINGS[::-1]   # interleaved
                for setting in order:
                    got, sent = cell(setting, qos, fps, size, domain)
                    row[setting] = round(100.0 * got / sent, 1) if sent else 0.0
                rows.append(row)
                print(f"{qos:12s} {fps:5g} fps {size:9s}  baseline {row['baseline']:5.1f} %"
                      f"   ours {row['ours']:5.1f} %", flush=True)
    worst = {s: min(r[s] for r in rows) for s in SETTINGS}
    print()
    print("| driver QoS | fps | size | baseline (no profile, best-effort sub) | ours |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['qos']} | {r['fps']:g} | {r['size']} | {r['baseline']:.0f} % | "
              f"{r['ours']:.0f} % |")
    line = {"benchmark": "frames_across_processes", "rows": rows,
            "worst_percent": worst, "goal_percent": 95}
    print(json.dumps(line))
    record("bench_frames", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
