#!/usr/bin/env bash
# README command 1: set up everything (including the embedded offline LLM) and run the demo:
# camera (demo video) + speech (scripted dialogue) + manager over ROS topics, replies streamed
# to the terminal, transcript saved under runs/. Extra args go to `bringup demo`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VD_EXTRAS="${VD_EXTRAS:-model model-1.5b llamacpp}" "$ROOT/scripts/setup.sh"
# shellcheck source=/dev/null
source "$ROOT/env.sh"
cd "$ROOT"
exec python -m vision_dialogue.cli.bringup demo "$@"
