#!/usr/bin/env bash
# smoke.sh — CI's short fuzzing run: builds every harness, replays its committed corpus and
# regression inputs, then fuzzes each for SMOKE_SECONDS (default 45) from that corpus. Any
# crash, leak, sanitizer report, timeout or failed invariant fails the script; the input
# that caused it is left in $FUZZ_BUILD_DIR/findings/<harness>/ and printed.
# Kept under ~6 minutes in all on two cores (build ~2 min + 4 x 45 s).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_EACH="${SMOKE_SECONDS:-45}"
HARNESSES=(io expr pipeline session)

"$ROOT/tests/fuzz/build.sh" "${HARNESSES[@]}"

status=0
for h in "${HARNESSES[@]}"; do
  work="$BUILD/corpus-work/$h"     # grows while fuzzing; the committed corpus stays as is
  findings="$BUILD/findings/$h"
  mkdir -p "$work" "$findings"
  seeds=("$ROOT/tests/fuzz/corpus/$h")
  [ -d "$ROOT/tests/fuzz/regressions/$h" ] && seeds+=("$ROOT/tests/fuzz/regressions/$h")
  echo "== fuzz_$h: ${SECONDS_EACH}s"
  if ! "$BUILD/fuzz_$h" "$work" "${seeds[@]}" -max_total_time="$SECONDS_EACH" \
       -timeout=30 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
       -artifact_prefix="$findings/" >"$BUILD/fuzz_$h.log" 2>&1; then
    echo "fuzz_$h FAILED; last lines of $BUILD/fuzz_$h.log:"
    tail -n 60 "$BUILD/fuzz_$h.log"
    ls -l "$findings"
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$BUILD/fuzz_$h.log" | tr '\n' ' '
    echo
  fi
done
exit $status
