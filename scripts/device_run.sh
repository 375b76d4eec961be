#!/usr/bin/env bash
# device_run.sh — the one command a GPU run needs: builds the CUDA targets, runs the GPU test
# suites (then again under compute-sanitizer memcheck, racecheck and synccheck on small
# sizes), runs the benchmark, and prints a short table last.
#
#   run carry: [".device"]  command: scripts/device_run.sh [all|tests|sanitize|bench] [log2_rows] [reps]
#
# Logs go to $OUT (the device tool brings them back) or ./out elsewhere. Each step's status
# is recorded and the script goes on, so one failure does not hide the other results. Order:
# benchmark (seconds), test suites (minutes), sanitizers (slowest; each run is cut at
# SAN_TIMEOUT seconds, default 45: rc=124 means "stopped early, no error seen until then").
# GPU_TESTS limits the suites, TEST_TIMEOUT caps each suite (default 900 s).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .device/env.sh ] && source .device/env.sh
OUT=${OUT:-out}
mkdir -p "$OUT"
# The device tool brings back at most 8 files: logs go to LOG and come back as one archive.
FINAL_OUT=$OUT
LOG=$(mktemp -d /tmp/sluice-device-logs.XXXXXX)
OUT=$LOG
MODE=${1:-all}
LG=${2:-28}
REPS=${3:-20}
BUILD=${BUILD:-build-gpu}
export SLUICE_CACHE_DIR=$PWD/$BUILD/kernel-cache
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$OUT/device.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$OUT/device.txt"

# GPU_TESTS="gpu_sort ..." limits the suites (default: every tests/gpu_*.c).
gpu_tests=${GPU_TESTS:-$(ls tests/gpu_*.c 2>/dev/null | xargs -n1 basename 2>/dev/null | sed 's/\.c$//')}
t0=$(date +%s)
cmake -B $BUILD -DCMAKE_BUILD_TYPE=Release -DSLUICE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  > "$OUT/configure.log" 2>&1 || { note "configure FAILED (configure.log)"; tail -20 "$OUT/configure.log"; }
targets=${TARGETS:-"gpu_bench $gpu_tests"}
built=""
for t in $targets; do
  if cmake --build $BUILD -j16 --target "$t" >> "$OUT/build.log" 2>&1; then built="$built $t";
  else note "build of $t FAILED (build.log)"; fi
done
note "built:$built in $(( $(date +%s) - t0 )) s"
grep -E "error" "$OUT/build.log" | head -20

has() { case " $built " in *" $1 "*) return 0;; esac; return 1; }
exe() { if [ -x "$BUILD/tests/$1" ]; then echo "$BUILD/tests/$1"; else echo "$BUILD/bench/$1"; fi; }

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  if has gpu_bench; then
    s=$(date +%s)
    "$BUILD/bench/gpu_bench" "$LG" "$REPS" > "$OUT/bench.txt" 2>&1
    note "gpu_bench 2^$LG x$REPS: rc=$? ($(( $(date +%s) - s )) s)"
  fi
fi

if [ "$MODE" = all ] || [ "$MODE" = tests ]; then
  for t in $gpu_tests; do
    has "$t" || continue
    s=$(date +%s)
    timeout ${TEST_TIMEOUT:-900} "$(exe "$t")" > "$OUT/$t.log" 2>&1
    rc=$?
    note "$t: rc=$rc ($(( $(date +%s) - s )) s) $(grep -E '^[0-9]+%:' "$OUT/$t.log" | tail -1)"
    [ $rc -ne 0 ] && grep -E "Failure|Error|error" "$OUT/$t.log" | head -8
  done
fi

if [ "$MODE" = all ] || [ "$MODE" = sanitize ]; then
  for tool in memcheck racecheck synccheck; do
    for t in $gpu_tests; do
      has "$t" || continue
      s=$(date +%s)
      SLUICE_TEST_SMALL=1 timeout ${SAN_TIMEOUT:-45} compute-sanitizer --tool $tool --error-exitcode 9 \
        "$(exe "$t")" > "$OUT/san_${tool}_$t.log" 2>&1
      rc=$?
      note "compute-sanitizer $tool $t: rc=$rc ($(( $(date +%s) - s )) s) $(grep -E 'ERROR SUMMARY' "$OUT/san_${tool}_$t.log" | tail -1)"
    done
  done
fi


{
  echo
  echo "---- summary ----"
  for l in "${summary[@]}"; do echo "$l"; done
  [ -f "$OUT/bench.txt" ] && sed -n '/^| job/,$p' "$OUT/bench.txt"
} | tee "$LOG/summary.txt"
tar czf "$FINAL_OUT/device-logs.tgz" -C "$LOG" .
cp "$LOG/summary.txt" "$FINAL_OUT/" 2>/dev/null
[ -f "$LOG/bench.txt" ] && cp "$LOG/bench.txt" "$FINAL_OUT/"
exit 0
