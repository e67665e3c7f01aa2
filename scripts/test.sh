#!/usr/bin/env bash
# README command 2: set up (idempotent) and run the whole test suite. Extra args go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
# shellcheck source=/dev/null
source "$ROOT/env.sh"
cd "$ROOT"
exec python -m pytest "$@"
