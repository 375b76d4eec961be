#!/usr/bin/env bash
# ci.sh — CI's entry point for random differential testing: builds the driver if asked for
# none, then runs difftest.py for a fixed wall time (DIFFTEST_SECONDS, default 240) on the CPU
# backend, or with the arguments given. Prints how many cases ran; exits non-zero on a
# failure, after printing the shrunk repro. Exits 77 (skipped) where python3 lacks numpy.
#
#   tests/difftest/ci.sh                          # CI: build/, 240 s, CPU, a fresh seed
#   tests/difftest/ci.sh --driver D --seed 20261201 --cases 120  # ctest's short run
#   tests/difftest/ci.sh --backend both                          # CPU against GPU
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "difftest: SKIPPED: $PY has no numpy (scripts/deps.sh installs python3-numpy)"
  exit 77
fi
args=("$@")
have_driver=0
for a in "$@"; do [ "$a" = --driver ] && have_driver=1; done
if [ $have_driver = 0 ]; then
  build="${DIFFTEST_BUILD_DIR:-$ROOT/build}"
  if [ ! -x "$build/tests/difftest_driver" ]; then
    BUILD_DIR="$build" "$ROOT/scripts/build.sh" >/dev/null
  fi
  args+=(--driver "$build/tests/difftest_driver")
fi
has_out=0
for a in "$@"; do [ "$a" = --out ] && has_out=1; done
if [ $has_out = 0 ]; then   # repros go beside the build, not into the source tree
  args+=(--out "${DIFFTEST_OUT:-${DIFFTEST_BUILD_DIR:-$ROOT/build}/difftest-failures}")
fi
has_len=0
for a in "$@"; do case "$a" in --cases|--seconds|--case|--replay|--replay-all|--export|--judge-results) has_len=1;; esac; done
if [ $has_len = 0 ]; then
  # A new seed each run, printed, so the fixed time explores new cases and any failure
  # replays with --seed S --case I.
  seed="${DIFFTEST_SEED:-$(date +%s)}"
  args+=(--seconds "${DIFFTEST_SECONDS:-240}" --seed "$seed")
  # DIFFTEST_CASES: also stop after that many cases (CI: inside the range of its fixed seed
  # that was run clean, however fast the machine).
  [ -n "${DIFFTEST_CASES:-}" ] && args+=(--cases "$DIFFTEST_CASES")
fi
exec "$PY" "$ROOT/tests/difftest/difftest.py" "${args[@]}"
