#!/usr/bin/env bash
# cli_backends.sh — `sluice run` of one pipeline on the CPU and CUDA backends over the same
# generated input in /dev/shm (issue 11's command-line bar: CUDA at most half the CPU's
# time). A benchmark, not a test: it prints each run's wall time, its own summary line and
# where its time went (--timings), then a table of medians, and says whether the backends
# wrote the same bytes.
#
#   bench/cli_backends.sh SLUICE_BINARY [LOG2_ROWS=27] [ROUNDS=3] [PIPELINE=pipelines/cull-visible.yaml]
#
# Run from the repository root. Each round runs `--backend cpu`, `--backend cpu
# --write-behind off` and `--backend cuda`, interleaved, after one CUDA warm-up run (its
# kernels are compiled and cached then). Inputs and outputs live in /dev/shm and are removed
# at the end.
set -euo pipefail
sluice=${1:?usage: cli_backends.sh SLUICE_BINARY [LOG2_ROWS] [ROUNDS] [PIPELINE]}
log2=${2:-27}
rounds=${3:-3}
pipeline=${4:-pipelines/cull-visible.yaml}
rows=$((1 << log2))
work=$(mktemp -d /dev/shm/sluice-cli-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

t0=$(date +%s.%N)
"$sluice" gen "$pipeline" --rows "$rows" --out "$work/in" >/dev/null
echo "input: $rows rows of $pipeline in $work/in ($(du -sh "$work/in" | cut -f1)), generated in $(awk "BEGIN {print $(date +%s.%N) - $t0}") s"

# run NAME ARGS...: one run into $work/out-NAME; prints its wall time and summary line and
# appends the wall time to $work/NAME.times.
run() {
  local name=$1
  shift
  rm -rf "$work/out-$name"
  local start end summary wall
  start=$(date +%s.%N)
  summary=$("$sluice" run "$pipeline" --in "$work/in" --out "$work/out-$name" --no-progress \
    --timings "$@" 2>&1 | tail -2) || summary="FAILED: $summary"
  end=$(date +%s.%N)
  wall=$(awk "BEGIN {print $end - $start}")
  echo "$wall" >>"$work/$name.times"
  printf '%-16s %7.3f s wall   %s\n' "$name" "$wall" "${summary//$'\n'/$'\n                                 '}"
}

run cuda-warmup --backend cuda
for ((i = 0; i < rounds; i++)); do
  run cpu --backend cpu
  run cpu-in-turn --backend cpu --write-behind off
  run cuda --backend cuda
done

median() { sort -n "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
cpu=$(median "$work/cpu.times")
cpu_in_turn=$(median "$work/cpu-in-turn.times")
cuda=$(median "$work/cuda.times")
best_cpu=$(awk "BEGIN {print ($cpu < $cpu_in_turn) ? $cpu : $cpu_in_turn}")
echo
echo "| run ($rows rows, median of $rounds) | wall s |"
echo "|---|---|"
echo "| --backend cpu | $cpu |"
echo "| --backend cpu --write-behind off | $cpu_in_turn |"
echo "| --backend cuda | $cuda |"
echo "| cuda / best cpu | $(awk "BEGIN {printf \"%.3f\", $cuda / $best_cpu}") |"

# Integer columns must agree exactly; float columns may differ in their last bits where the
# GPU contracts a multiply and an add.
for f in "$work/out-cpu"/*.npy; do
  name=$(basename "$f")
  if cmp -s "$f" "$work/out-cuda/$name"; then echo "$name: same bytes on both backends"
  else echo "$name: DIFFERS between the backends"; fi
done
