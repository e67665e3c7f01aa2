"""`python -m vision_dialogue.cli.demo_assets`: build the demo videos and print their paths.

    python -m vision_dialogue.cli.demo_assets [--out DIR] [--force]   # the demo video
    python -m vision_dialogue.cli.demo_assets --people                # the two-person video

The videos are made by camera/demo_video.py and camera/people_video.py.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vision_dialogue.camera.demo_video import default_dir, ensure_demo_video


def main(args=None) -> int:
    ap = argparse.ArgumentParser(prog="demo_assets", description="Build the demo video.")
    ap.add_argument("--out", type=Path, help=f"directory (default {default_dir()})")
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--people", action="store_true",
                    help="the two-person video of people_demo (camera/people_video.py) instead")
    ns = ap.parse_args(sys.argv[1:] if args is None else args)
    if ns.people:
        from vision_dialogue.camera.people_video import ensure_people_video
        print(ensure_people_video(ns.out, force=ns.force))
    else:
        print(ensure_demo_video(ns.out, force=ns.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
