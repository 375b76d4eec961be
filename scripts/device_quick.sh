#!/usr/bin/env bash
# device_quick.sh — a short GPU check of one change, for when device time is scarce: builds only
# gpu_bench and the named suites, runs the named benchmark jobs (alone on the GPU), then the
# suites side by side (small sizes unless FULL=1) and compute-sanitizer memcheck of one suite.
# About 3 minutes on an H200 against device_verify.sh's 6-7.
# Knobs (environment): JOBS (gpu_bench jobs, comma-separated; default the reduce and segmented
# ones), LG, REPS; SUITES (space-separated; default gpu_reduce gpu_fused gpu_backend); FULL=1
# (full-size suites); MEMCHECK (the suite memcheck runs on, small sizes; empty: none).
# Output: $OUT/summary.txt (printed), $OUT/bench.txt, and every step's log in $OUT/logs.tgz (the
# device tool brings back only a few files from $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .device/env.sh ] && source .device/env.sh
RESULT=${OUT:-out}; mkdir -p "$RESULT"
OUT=$(mktemp -d /tmp/sluice-quick.XXXXXX)
finish() { tar czf "$RESULT/logs.tgz" -C "$OUT" . 2>/dev/null; cp "$OUT/summary.txt" "$OUT/bench.txt" "$RESULT/" 2>/dev/null; }
trap finish EXIT
B=${BUILD:-build-gpu}
export SLUICE_CACHE_DIR=$PWD/$B/kernel-cache CK_FORK=no
SUITES=${SUITES:-gpu_reduce gpu_fused gpu_backend}
MEMCHECK=${MEMCHECK-gpu_reduce}
t0=$(date +%s)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
cmake -B "$B" -DCMAKE_BUILD_TYPE=Release -DSLUICE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  >"$OUT/configure.log" 2>&1
cmake --build "$B" -j16 --target gpu_bench $SUITES >"$OUT/build.log" 2>&1 ||
  { say "BUILD FAILED"; grep -E "error" "$OUT/build.log" | head -20; exit 1; }
say "built in $(( $(date +%s) - t0 )) s"
GPU_BENCH_JOBS=${JOBS:-reduce,segreduce,reducebykey,segscan,scan} timeout 180 \
  "$B/bench/gpu_bench" ${LG:-28} ${REPS:-10} >"$OUT/bench.txt" 2>&1
say "gpu_bench rc=$?"
small=(SLUICE_TEST_SMALL=1); [ -n "${FULL:-}" ] && small=()
for s in $SUITES; do
  ( env ${small[@]+"${small[@]}"} timeout 300 "$B/tests/$s" >"$OUT/$s.log" 2>&1
    say "$s rc=$? $(grep -E '^[0-9]+%' "$OUT/$s.log" | tail -1)" ) &
done
if [ -n "$MEMCHECK" ]; then
  SLUICE_TEST_SMALL=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/$MEMCHECK" >"$OUT/memcheck.log" 2>&1
  say "memcheck $MEMCHECK rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log")"
fi
wait
say "total $(( $(date +%s) - t0 )) s"
grep -E "^(copy|scan|filter|linrec|segscan|six|reduce|segreduce|reducebykey|u32|f32)" "$OUT/bench.txt" |
  tee -a "$OUT/summary.txt"
