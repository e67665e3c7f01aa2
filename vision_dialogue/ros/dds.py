"""The Fast DDS profile that lets raw camera frames cross processes (no rclpy import).

Fast DDS' default shared-memory segment (0.5 MB) is smaller than one 640x480 bgr8 Image
(0.9 MB): such messages fall back to UDP fragments, and best-effort frames between
processes on one host mostly never arrive. `config/fastdds.xml` uses 64 MB segments and a
port queue of 2048 fragments: our camera publishes frames up to 1920x1080 bgr8
(`MAX_FRAME_BYTES`, so the segment holds several in flight) and a driver's single frame up to
64 MB (a 4000x3000 one is 36 MB) crosses, best effort too. It is the default wherever we start
processes (env.sh, the install's environment hook, bringup, the launch files, every node's
main); a profile the user chose (FASTDDS_DEFAULT_PROFILES_FILE already set) always wins, and
VD_NO_DDS_PROFILE=1 keeps Fast DDS' own defaults.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from vision_dialogue.common.resources import ResourceNotFound, config_file

PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
PROFILE_NAME = "fastdds.xml"
#: set (e.g. VD_NO_DDS_PROFILE=1) to keep Fast DDS' own defaults (benchmark baseline)
OPT_OUT_ENV = "VD_NO_DDS_PROFILE"
#: shared-memory segment size in config/fastdds.xml; one raw frame must fit in it
SEGMENT_BYTES = 64 * 1024 * 1024
#: the largest raw frame that crosses processes reliably with the profile (1920x1080 bgr8)
MAX_FRAME_BYTES = 1920 * 1080 * 3
#: where Fast DDS keeps its shared-memory segments on Linux
SHM_DIR = Path("/dev/shm")
#: a participant's segment's lock file: `fastdds_<16 hex>_el`, held while its process lives
SEGMENT_LOCK = re.compile(r"^fastdds_[0-9a-z]{16}_el$")


def profile_path() -> Path | None:
    """config/fastdds.xml of the source checkout or the installed package; None if absent."""
    try:
        p = config_file(PROFILE_NAME)
    except ResourceNotFound:
        return None
    return p if p.is_file() else None


def apply_default_profile(env: dict | None = None) -> str | None:
    """Set FASTDDS_DEFAULT_PROFILES_FILE to our profile unless it is set already.

    Must run before the first rclpy.init() of the process (and before starting child processes).
    Returns the profile in effect (None when none is found).
    """
    env = os.environ if env is None else env
    if env.get(PROFILE_ENV):
        return env[PROFILE_ENV]
    if env.get(OPT_OUT_ENV):
        return None
    p = profile_path()
    if p is None:
        return None
    env[PROFILE_ENV] = str(p)
    return str(p)


def zombie_segments(shm_dir: Path | None = None) -> list[Path]:
    """Shared-memory segments whose process is gone: each still holds its memory.

    Fast DDS writes every participant's segment in full (64 MB with our profile) and removes
    it when the process ends cleanly; a killed or crashed process leaves it behind, and
    `fastdds shm clean` (Fast DDS' own tool) removes it. A live participant holds an
    exclusive lock on the segment's `_el` file, which is how that tool tells them apart too.
    """
    import fcntl
    shm_dir = SHM_DIR if shm_dir is None else shm_dir
    try:
        names = sorted(os.listdir(shm_dir))
    except OSError:
        return []
    found = []
    for name in names:
        if not SEGMENT_LOCK.match(name):
            continue
        try:
            with open(shm_dir / name, "ab") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)   # released when closed
        except OSError:
            continue            # locked: its process is alive (or the file just went)
        segment = shm_dir / name[:-len("_el")]
        if segment.is_file():
            found.append(segment)
    return found
