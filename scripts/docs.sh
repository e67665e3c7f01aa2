#!/usr/bin/env bash
# Build the documentation site into build/docs/ (HTML): the guides in docs/, the reference
# pages generated from the code, the results page generated from benchmarks/results/.
# Needs README command 1's setup (the API pages import the package); installs the pinned
# docs requirements into the venv once. Warnings are errors (-W), as in the test suite.
#   scripts/docs.sh            build (incremental)
#   scripts/docs.sh --clean    build from scratch
# VD_DOCS_OUT=DIR builds into DIR instead (the test suite's build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=/dev/null
source "$ROOT/env.sh"
stamp="$VIRTUAL_ENV/.vd-docs-requirements.sha256"
want="$(sha256sum "$ROOT/requirements/docs.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[docs] installing requirements/docs.txt" >&2
  python -m pip install -q -r "$ROOT/requirements/docs.txt" 2> >(grep -v 'is ignored: it is neither' >&2)
  echo "$want" > "$stamp"
fi
out="${VD_DOCS_OUT:-$ROOT/build/docs}"
trees="$out-doctrees"
if [ "${1:-}" = "--clean" ]; then rm -rf "$out" "$trees"; fi
started=$SECONDS
python -m sphinx -W --keep-going -q -b html -d "$trees" "$ROOT/docs" "$out"
echo "[docs] built $out/index.html in $((SECONDS - started)) s" >&2
