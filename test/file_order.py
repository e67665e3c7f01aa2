"""The order test files start in under pytest-xdist: the longest first (test/conftest.py).

ROS-free and pytest-free, so test/tier_summary.py reads it too and names a long file that
weighs too little here (it started late and may have kept the run waiting).
"""
from __future__ import annotations

from pathlib import Path

#: files that take longest (the wall seconds of their tests, without waits for a lone test, in
#: a fresh-clone run of the suite on 2 cores, three workers and one busy process: run 209 of
#: bench_suite.json, cd84663, from its timeline): under pytest-xdist they start first, so the
#: last file a worker takes is a short one (longest first packs the workers best); only the
#: order depends on these numbers. Stale numbers cost: test_memory_process, missing here, took
#: 96 s and started last, 40 s after the other workers had ended; before that
#: test_llamacpp_backend weighed 19 while it took 200 s. Update them when a file grows
HEAVY_FILES = {
    # the system tier
    "test_voice": 187, "test_bringup": 166, "test_llama_server": 130, "test_memory_process": 96,
    "test_installed_events": 95, "test_llamacpp_backend": 88, "test_installed_default": 88,
    "test_installed_voice": 69, "test_stock_driver": 66, "test_two_hosts": 62,
    "test_skills_ros": 61, "test_real_launch": 54, "test_people_process": 53,
    "test_frames_across_processes": 50, "test_docs_site": 49, "test_voice_node": 48,
    "test_installed_session": 47, "test_installed_lifecycle": 37, "test_faults": 36,
    "test_robot_tools": 36, "test_standard_interfaces": 36, "test_people_node": 33,
    "test_fleet_process": 27, "test_manager_node": 26, "test_manager_tools": 24, "test_bags": 21,
    "test_ros_helpers": 21, "test_replay": 21, "test_monitor_browser": 20,
    "test_installed_diagnostics": 20, "test_installed_vfm": 18, "test_install_tree": 18,
    "test_speech_node": 16, "test_vfm_server": 15, "test_camera_node": 15,
    "test_people_store_server": 15, "test_local_llm": 14, "test_launch_files": 14,
    "test_stop_limit": 13,
    # the unit tier
    "test_vfm_tools": 42, "test_suite_plugins": 34, "test_lint": 23, "test_events": 19,
    "test_objects": 15, "test_face": 14, "test_doctor": 14, "test_console": 13,
    "test_prompt_bound": 12, "test_turn_model": 11, "test_perception": 11,
    "test_print_process": 10,
}

#: a file whose tests take this long (s) is named when it weighs less than half its time
NAMED_FROM_S = 30.0


def underweighed(seconds: dict[str, float]) -> list[str]:
    """'test_x.py N s' for each long file that `HEAVY_FILES` weighs at under half its time."""
    return [f"{Path(f).name} {t:.0f} s" for f, t in sorted(seconds.items(), key=lambda kv: -kv[1])
            if t >= NAMED_FROM_S and HEAVY_FILES.get(Path(f).stem, 0) < t / 2]
