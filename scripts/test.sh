#!/usr/bin/env bash
# README command 2: set up (idempotent) and run the whole test suite, in two tiers:
#   1. unit (test/unit): the ROS-free rooms, with rclpy and every ROS package made
#      unimportable (a ROS import there fails); about a minute; a failure stops the run here;
#   2. system (the rest): nodes in this process, separate processes, real models, a clean
#      install (test/installed), the docs site.
# Both tiers run on three workers (pytest-xdist): each test file whole on one, longest first.
# Many tests wait for a process, a video's time or a network: on two workers a third of the
# two cores stayed idle over a whole run, so a third worker fills it (bench_suite.py has the
# runs of each); the clean build of the install tree is made once, by the first worker
# that needs it, while the others go on. Extra args go to pytest in both tiers (e.g. -k manager, -x).
#   scripts/test.sh --tier unit     or     scripts/test.sh --tier system     one tier alone
#   VD_TEST_WORKERS=0 scripts/test.sh                                        one process
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tier=all
if [ "${1:-}" = "--tier" ]; then tier="${2:?--tier unit|system}"; shift 2; fi
case "$tier" in all|unit|system) ;; *) echo "test.sh: --tier unit|system, not $tier" >&2; exit 2 ;; esac
# Debian packages some tests need, installed when this user can (before setup, whose build
# then fills ccache): Chromium (the monitor's browser test), espeak-ng (a second synthetic
# voice for the speech-to-text tests), ccache (the clean build of test/installed reuses what
# setup compiled instead of compiling the message code again), postgresql (a private server
# for the fleet's shared people store, test/test_people_store_server.py), gdb (a stuck test
# process's native stacks, test/native_stacks.py: which thread held the interpreter).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
command -v ccache >/dev/null 2>&1 || missing+=(ccache)
command -v gdb >/dev/null 2>&1 || missing+=(gdb)
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Debian's postgresql would make and start a server of its own on port 5432: the tests make
  # private ones, so no default cluster is made
  mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/vision_dialogue.conf
  echo "[test] installing ${missing[*]} for the tests" >&2
  { apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 \
         && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; }; } \
    || echo "[test] ${missing[*]} could not be installed: their tests are skipped (ccache: slower)" >&2
fi
# llamacpp: llama.cpp's real server for test/installed/test_llama_server.py (compiled once);
# docs: the documentation site's builder, which the suite builds with warnings as errors
VD_EXTRAS="${VD_EXTRAS:-model model-1.5b} llamacpp docs" "$ROOT/scripts/setup.sh"
# shellcheck source=/dev/null
source "$ROOT/env.sh"
cd "$ROOT"
results="$ROOT/build/test-results"
mkdir -p "$results"
rm -f "$results"/*.xml "$results"/stacks-*.txt "$results"/timeline-*.tsv
export VD_TEST_RESULTS_DIR="$results"  # the backstop's stacks and the timeline go here (test/)
started=$SECONDS
# --max-worker-restart 0: a worker that dies fails the run at once, naming the test it was
# running; pytest-xdist 3.8's loadfile scheduling replaces a dead worker with one that is never
# given work, and the run then waits forever (pytest-xdist #784, #1323)
workers=(-n "${VD_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder --max-worker-restart 0)
[ "${VD_TEST_WORKERS:-3}" = 0 ] && workers=()
run_tier() {   # run_tier NAME [pytest args...]: 0, or pytest's exit code (5, none selected: 0)
  local name="$1" status=0
  shift
  echo "[test] tier $name" >&2
  VD_TEST_TIER="$name" python -m pytest "$@" --junitxml="$results/$name.xml" || status=$?
  local stacks
  for stacks in "$results"/stacks-*.txt; do      # a test process the backstop ended
    [ -s "$stacks" ] && { echo "[test] $(basename "$stacks"):" >&2; cat "$stacks" >&2; }
  done
  [ "$status" = 5 ] && status=0
  return "$status"
}
# Nodes a test kills on purpose (kill -9, a hang) leave their Fast DDS shared memory in
# /dev/shm, 64 MB each: Fast DDS' own cleaner frees those of ended processes, before the run
# (an earlier run's) and after it, so runs on one machine do not eat its memory.
shm_clean() {
  fastdds shm clean 2>/dev/null | sed -n 's/^\([0-9]*\) zombie segments cleaned$/[test] \1 segments of ended processes freed/p' >&2 || true
}
shm_clean
code=0
if [ "$tier" != system ]; then
  VD_BLOCK_ROS=1 run_tier unit test/unit "${workers[@]}" "$@" || code=$?
fi
if [ "$code" = 0 ] && [ "$tier" != unit ]; then
  VD_UNIT_TIER_RAN="$([ "$tier" = all ] && echo 1 || echo 0)" \
    run_tier system test --ignore=test/unit "${workers[@]}" "$@" || code=$?
fi
shm_clean
python "$ROOT/test/tier_summary.py" "$results" "$((SECONDS - started))"
exit "$code"
