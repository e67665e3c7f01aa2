#!/usr/bin/env bash
# README command 2: set up (idempotent) and run the whole test suite. Extra args go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# llamacpp: llama.cpp's real server for test/installed/test_llama_server.py (compiled once)
VD_EXTRAS="${VD_EXTRAS:-model model-1.5b} llamacpp" "$ROOT/scripts/setup.sh"
# Debian packages some tests need, installed when this user can: Chromium (the monitor's
# browser test) and espeak-ng (a second synthetic voice for the speech-to-text tests).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[test] installing ${missing[*]} for the tests" >&2
  { apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 \
         && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; }; } \
    || echo "[test] ${missing[*]} could not be installed: their tests will be skipped" >&2
fi
# shellcheck source=/dev/null
source "$ROOT/env.sh"
cd "$ROOT"
exec python -m pytest "$@"
