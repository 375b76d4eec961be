#!/usr/bin/env bash
# gpu_table.sh — gpu_bench's whole table with every job in a process of its own.
#
# One gpu_bench process that runs every job opens and closes dozens of sessions, each
# allocating and freeing its outputs and scratch; late in such a process some pipelines ran
# 8-13% slower than the same kernels in a fresh process (bench/RESULTS.md, thirty-ninth
# session, run 3). Here each job (GPU_BENCH_JOBS) runs in a fresh process with its own copy
# measured beside it, so a job's figure does not depend on what ran before it. The table rows
# are gpu_bench's; each job's copy row names the job it was measured with.
#
# Usage: bench/gpu_table.sh [log2_rows=28] [reps=6]   (BUILD: the build folder, build-gpu)
# Prints each job's output as it goes, then the table. A job that fails prints its output's
# tail and the table goes on without its rows.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LG=${1:-28}
REPS=${2:-6}
BENCH="$BUILD/bench/gpu_bench"
[ -x "$BENCH" ] || { echo "gpu_table.sh: $BENCH is not built" >&2; exit 1; }
# every job gpu_bench knows (its GPU_BENCH_JOBS comment), in its order
JOBS="scan filter linrec widen f64acc narrow cull segscan sort sortf32 sortf32pairs sortf64 six host
reduce segreduce reducebykey"
table=$(mktemp)
trap 'rm -f "$table"' EXIT
echo "| job (2^$LG rows, a process each) | sluice | CUB | bar |" >"$table"
echo "|---|---|---|---|" >>"$table"
for job in $JOBS; do
  out=$(GPU_BENCH_JOBS=$job "$BENCH" "$LG" "$REPS" 2>&1)
  rc=$?
  # everything as it goes (rows too: a run cut short by a time limit keeps what it measured)
  echo "$out"
  if [ $rc -ne 0 ]; then
    echo "gpu_table.sh: job $job exited $rc" >&2
    echo "$out" | tail -5 >&2
    continue
  fi
  # the job's rows; its copy row names the job
  echo "$out" | grep -E '^\| ' | grep -vE '^\| job |^\|---' |
    sed -E "s/^\| device-to-device copy \|/| device-to-device copy (with $job) |/" >>"$table"
done
cat "$table"
