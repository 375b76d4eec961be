#!/usr/bin/env bash
# device_verify.sh — the whole GPU verification in one short command, for a session's last
# minutes of device time: build, benchmark (alone on the GPU), then the GPU suites side by
# side, then compute-sanitizer memcheck/racecheck/synccheck side by side on small sizes.
# Every suite and benchmark runs with tests/tools/segv_trace.c preloaded: a crash's stack,
# resolved by scripts/segv_resolve.sh, lands in the summary (the machine has no debugger).
# Knobs (environment): LG, REPS (benchmark size and repetitions); STREAM (stream_bench too);
# SWEEP, SWEEP_JOBS (the fused jobs again under other launch shapes or settings);
# PROFILE_JOBS (Nsight Compute);
# BENCH_ONLY (stop after the benchmarks); BACKEND_LATE (full gpu_backend beside the sanitizers);
# SKIP_SAN (stop before the sanitizers); SKIP_SUITES (no full-size suites: sanitizers only);
# SAN (which sanitizer runs: TOOL:SUITE[:CASE] words); SUITE_TIMEOUT, SAN_TIMEOUT (seconds).
# Logs go to $OUT/verify-logs.tgz, the summary and the benchmark table beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .device/env.sh ] && source .device/env.sh
OUT=${OUT:-out}; mkdir -p "$OUT"
# The device tool brings back only a few files from $OUT: the logs travel as one archive,
# written at the end and by finish() on every early exit (so keep SUITE/SAN_TIMEOUT inside
# the run's time limit).
LOG=$(mktemp -d /tmp/sluice-verify.XXXXXX)
finish() { tar czf "$OUT/verify-logs.tgz" -C "$LOG" . 2>/dev/null; cp "$LOG/summary.txt" "$LOG/bench.txt" "$OUT/" 2>/dev/null; }
trap finish EXIT
trap 'exit 143' TERM INT
BUILD=${BUILD:-build-gpu}
export SLUICE_CACHE_DIR=$PWD/$BUILD/kernel-cache CK_FORK=no
say() { echo "== $*" | tee -a "$LOG/summary.txt"; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOG/device.txt"
# No commit here: the device tool copies the working tree with an older .git, so HEAD would
# name the wrong commit; bench/RESULTS.md records the commit that was sent.
# -g: line numbers for a crash's stack (segv_trace below); it does not change the code.
cmake -B $BUILD -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g -DSLUICE_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOG/configure.log" 2>&1
GPU_SUITES=$(cd tests && ls gpu_*.c | sed 's/\.c$//' | tr '\n' ' ')
cmake --build $BUILD -j16 --target gpu_bench stream_bench lookahead_scan sluice_segv_trace $GPU_SUITES \
  >"$LOG/build.log" 2>&1 || { say "BUILD FAILED"; grep -E "error" "$LOG/build.log" | head -20; }
# Every suite runs with the crash reporter preloaded; a crash's stack is resolved into its log.
TRACE=$PWD/$BUILD/tests/libsluice_segv_trace.so
say "built in $(( $(date +%s) - t0 )) s"
"$BUILD/bench/gpu_bench" ${LG:-28} ${REPS:-10} >"$LOG/bench.txt" 2>&1; say "gpu_bench rc=$?"
# Batches in flight with device outputs (crashed at the first push in the fifth session: RESULTS.md)
GPU_BENCH_DEPTH=3 GPU_BENCH_JOBS=scan,filter,six LD_PRELOAD=$TRACE timeout 60 "$BUILD/bench/gpu_bench" 24 3 \
  >"$LOG/bench_depth3.txt" 2>&1
say "gpu_bench at depth 3 (2^24 rows) rc=$?"; scripts/segv_resolve.sh "$LOG/bench_depth3.txt" | tee -a "$LOG/summary.txt"
# issue 12's experiment: a scan that never waits for another block's prefix (bench/lookahead_scan.cu)
LD_PRELOAD=$TRACE timeout 60 "$BUILD/bench/lookahead_scan" ${LG:-28} ${REPS:-10} >"$LOG/lookahead.txt" 2>&1
say "lookahead_scan rc=$? $(grep -E '^\| (f32|i32)' "$LOG/lookahead.txt" | tr '\n' ' ')"
scripts/segv_resolve.sh "$LOG/lookahead.txt" | tee -a "$LOG/summary.txt"
# STREAM=1: issue 11's streaming figures (bench/stream_bench.c), alone on the GPU too.
if [ -n "${STREAM:-}" ]; then
  LD_PRELOAD=$TRACE timeout 240 "$BUILD/bench/stream_bench" 26 8 3 >"$LOG/stream_bench.txt" 2>&1
  say "stream_bench rc=$?"; scripts/segv_resolve.sh "$LOG/stream_bench.txt" | tee -a "$LOG/summary.txt"
  sed -n '/^| job/,$p' "$LOG/stream_bench.txt" >> "$LOG/bench.txt"
fi
# SWEEP="256:32 SLUICE_CUDA_OVERLAP=0 A=1,B=2 ...": the fused jobs again under each variant: a
# launch shape (SLUICE_CUDA_TUNING) or VAR=VALUE settings joined by commas.
for variant in ${SWEEP:-}; do
  name=$(echo "$variant" | tr ':=,' 'x._')
  if [[ $variant == *=* ]]; then IFS=, read -ra envs <<<"$variant"; else envs=("SLUICE_CUDA_TUNING=$variant"); fi
  env "${envs[@]}" GPU_BENCH_JOBS=${SWEEP_JOBS:-scan,filter,linrec,segscan,six} timeout 60 \
    "$BUILD/bench/gpu_bench" ${LG:-28} ${REPS:-10} >"$LOG/sweep_$name.txt" 2>&1
  say "sweep $variant: $(grep -E '^(scan|filter|linrec|segscan|six)' "$LOG/sweep_$name.txt" | sed -E 's/ +/ /g' | cut -c1-60 | tr '\n' ';')"
done
# PROFILE_JOBS="scan ...": Nsight Compute on one launch of each job's fused kernel (2^26 rows)
if [ -n "${PROFILE_JOBS:-}" ]; then
  JOBS="$PROFILE_JOBS" LG=26 OUT="$LOG" BUILD=$BUILD scripts/device_profile.sh >"$LOG/profile.txt" 2>&1
  say "profile: $(grep -cE 'Duration' "$LOG/profile.txt") kernels"
fi
[ -n "${BENCH_ONLY:-}" ] && { cat "$LOG/summary.txt"; sed -n '/^| job/,$p' "$LOG/bench.txt"; exit 0; }
run_suite() { # name, log, extra env...
  local name=$1 log=$2; shift 2
  local s=$(date +%s)
  env LD_PRELOAD=$TRACE "$@" timeout ${SUITE_TIMEOUT:-300} "$BUILD/tests/$name" >"$LOG/$log.log" 2>&1
  local rc=$?
  say "$log: rc=$rc ($(( $(date +%s) - s )) s) $(grep -E '^[0-9]+%:' "$LOG/$log.log" | tail -1)"
  scripts/segv_resolve.sh "$LOG/$log.log" | tee -a "$LOG/summary.txt"
}
# The full-size gpu_backend, by its four test cases side by side: whole, with a cold kernel
# cache and other suites beside it, it ran past 200 s (bench/RESULTS.md, twenty-fourth session).
backend_full() {
  for c in api stages sort pipelines; do run_suite gpu_backend gpu_backend_$c CK_RUN_CASE=$c & done
  wait
}
if [ -z "${SKIP_SUITES:-}" ]; then
# gpu_reduce at full size is the longest single suite (one test case): it starts first
run_suite gpu_reduce gpu_reduce &
run_suite gpu_sort gpu_sort & run_suite gpu_fused gpu_fused &
# BACKEND_LATE=1: the full-size gpu_backend runs beside the sanitizers; BACKEND_LATE=skip:
# not at all
[ -z "${BACKEND_LATE:-}" ] && backend_full &
run_suite gpu_backend gpu_backend_small SLUICE_TEST_SMALL=1 &
wait
# The streaming, pinned-memory, carry and determinism suites (small sizes where the suite
# has them), side by side.
run_suite gpu_stream gpu_stream & run_suite gpu_pinned gpu_pinned SLUICE_TEST_SMALL=1 &
run_suite gpu_carry gpu_carry & run_suite gpu_determinism gpu_determinism &
wait
# The register-capped configuration that once gave wrong key-segmented counts (bench/RESULTS.md
# "Race review"): twice, to see whether the wrong rows repeat (code generation) or move (race).
run_suite gpu_fused capped_1 SLUICE_CUDA_TUNING=256:4:4 SLUICE_TEST_SMALL=1 &
run_suite gpu_fused capped_2 SLUICE_CUDA_TUNING=256:4:4 SLUICE_TEST_SMALL=1 &
wait
fi
[ -n "${SKIP_SAN:-}" ] && { say "total $(( $(date +%s) - t0 )) s (sanitizers skipped)"; sed -n '/^| job/,$p' "$LOG/bench.txt" >> "$LOG/summary.txt"; cat "$LOG/summary.txt"; exit 0; }
# Each sanitizer run is TOOL:SUITE[:CASE] (CASE: one check test case, CK_RUN_CASE), all side by
# side; racecheck, by far the slowest, gets the suites cut into their cases, and line
# information in the kernels so a report names the source line. Known: racecheck reports the
# look-back-warp kernels' hand-over (handed_agg written, then read ten generated lines later,
# across a __syncthreads) — its false positive, shown by scripts/racecheck_probe.cu
# (bench/RESULTS.md, runs 16-18); any other pair is news.
SAN=${SAN:-memcheck:gpu_backend memcheck:gpu_fused synccheck:gpu_fused synccheck:gpu_backend
racecheck:gpu_fused racecheck:gpu_sort:types racecheck:gpu_sort:ranges racecheck:gpu_backend:api
racecheck:gpu_backend:stages racecheck:gpu_backend:sort racecheck:gpu_backend:pipelines}
san() { # tool, suite, case
  local tool=$1 name=$2 tc=${3:-}
  local s=$(date +%s) log="$LOG/san_${tool}_${name}${tc:+_$tc}.log"
  local envs=(SLUICE_TEST_SMALL=1)
  [ -n "$tc" ] && envs+=(CK_RUN_CASE=$tc)
  [ "$tool" = racecheck ] && envs+=(SLUICE_NVRTC_LINEINFO=1)
  env "${envs[@]}" timeout ${SAN_TIMEOUT:-90} compute-sanitizer --tool $tool --error-exitcode 9 \
    "$BUILD/tests/$name" >"$log" 2>&1
  say "compute-sanitizer $tool $name${tc:+ ($tc)}: rc=$? ($(( $(date +%s) - s )) s) $(grep -E '^[0-9]+%:' "$log" | tail -1) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
}
for run in $SAN; do IFS=: read -r tool name tc <<<"$run"; san "$tool" "$name" "$tc" & done
[ "${BACKEND_LATE:-}" = 1 ] && [ -z "${SKIP_SUITES:-}" ] && backend_full &
wait
say "total $(( $(date +%s) - t0 )) s"
sed -n '/^| job/,$p' "$LOG/bench.txt" >> "$LOG/summary.txt"
cat "$LOG/summary.txt"
