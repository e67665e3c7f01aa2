"""A stock camera driver's frames, lost between processes, are noticed and worked around.

The driver is a third-party-like process (frame_driver.py: rclpy + sensor_msgs only) started
without the project's Fast DDS profile, publishing large raw frames with sensor-data QoS, as
a camera driver or a bag player does. The installed manager must say so within seconds,
naming the publisher and the fix, and take `<topic>/compressed` when the driver publishes it.
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from installed.user_env import stop

DRIVER = Path(__file__).with_name("frame_driver.py")


def wait_for(log: Path, pattern: str, timeout: float) -> re.Match | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, log.read_text())
        if m:
            return m
        time.sleep(0.2)
    return None


@pytest.mark.parametrize("compressed", [False, True], ids=["raw only", "with compressed"])
def test_lost_frames_of_a_driver_without_the_profile_are_reported(installed, tmp_path,
                                                                  compressed):
    transcripts = tmp_path / "tr"
    manager = installed.popen(installed.exe("manager_node") + [
        "--ros-args", "-p", "base_url:=http://127.0.0.1:9/v1", "-p", "n:=1000", "-p", "m:=999",
        "-p", f"transcript_dir:={transcripts}", "-p", "probe_images:=false"],
        env=dict(installed.env, OPENAI_API_KEY="sk-test"), log=tmp_path / "manager.log")
    driver_env = dict(installed.env)
    driver_env.pop("FASTDDS_DEFAULT_PROFILES_FILE")        # a stock driver: Fast DDS defaults
    driver = installed.popen([sys.executable, str(DRIVER), "--name", "usb_cam", "--rate", "2",
                              "--size", "1280x960", "--count", "240", "--settle", "0"]
                             + (["--compressed"] if compressed else []),
                             env=driver_env, log=tmp_path / "driver.log")
    log = tmp_path / "manager.log"
    try:
        found = wait_for(log, r"frames from /usb_cam \(best effort\) are lost between "
                         r"processes: ([^.]*)\. Fix: (.*)", timeout=90)
        doctor = None if compressed else installed.run(
            installed.exe("doctor") + ["--topic", "camera/image_raw"], timeout=120)
        if compressed and found:
            frames_before = len(list(transcripts.glob("*/frames/*")))
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and \
                    len(list(transcripts.glob("*/frames/*"))) < frames_before + 3:
                time.sleep(0.3)
            frames_after = len(list(transcripts.glob("*/frames/*")))
    finally:
        stop(driver)
        code = stop(manager)
    text = log.read_text()
    assert found, text[-3000:]
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert "FASTDDS_DEFAULT_PROFILES_FILE=" in found.group(2)
    assert text.count("are lost between processes") == 1           # said once
    if compressed:
        assert "camera/image_raw/compressed is published: using it instead" in found.group(2)
        assert frames_after >= frames_before + 3, (frames_before, frames_after)
    else:
        assert "using it instead" not in text
        row = next(ln for ln in doctor.stdout.splitlines() if ln.startswith("frames "))
        assert doctor.returncode == 1 and "FAIL" in row and "/usb_cam" in row, doctor.stdout
        assert "FASTDDS_DEFAULT_PROFILES_FILE=" in doctor.stdout
