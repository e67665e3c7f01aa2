#!/usr/bin/env bash
# README command 2: set up (idempotent) and run the whole test suite. Extra args go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# llamacpp: llama.cpp's real server for test/installed/test_llama_server.py (compiled once)
VD_EXTRAS="${VD_EXTRAS:-model} llamacpp" "$ROOT/scripts/setup.sh"
# The monitor's browser test needs Chromium (Debian's package): install it when this user can.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[test] installing chromium for the browser test" >&2
  { apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 \
         && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; } \
    || echo "[test] chromium could not be installed: the browser test will be skipped" >&2
fi
# shellcheck source=/dev/null
source "$ROOT/env.sh"
cd "$ROOT"
exec python -m pytest "$@"
