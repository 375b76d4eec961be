#!/usr/bin/env bash
# mpi_scaling.sh [SLUICE] [ROWS] [BACKEND] — `mpirun -np N sluice run` against one process, on
# generated inputs of ROWS rows (default 2^23) for four cookbook pipelines (a filter with
# positions, a scan, a ragged scan, a stream-wide sort): wall seconds of one process, then of
# 1, 2 and 4 ranks (one thread each; --oversubscribe past the cores), and the speedup of
# each over one process. Outputs are checked equal (tests/mpi/compare.py) so a fast wrong
# run cannot pass. Prints a table; recorded results go to bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
sluice=${1:-build/sluice} rows=${2:-8388608} backend=${3:-cpu}
py=/usr/bin/python3; [ -x "$py" ] || py=python3
# Open MPI refuses root without these (containers, CI); harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
printf '%-16s %10s %8s %8s %8s %8s   %s\n' pipeline rows "1 proc" "np 1" "np 2" "np 4" "speedup np 2/np 4"
for name in cull-visible drawdown ragged-cumsum sort-by-depth; do
  yaml=pipelines/$name.yaml
  "$sluice" gen "$yaml" --rows "$rows" --out "$work/$name-in" >/dev/null
  t0=$(now); "$sluice" run "$yaml" --in "$work/$name-in" --out "$work/$name-ref" --backend "$backend" \
    --threads 1 --no-progress 2>/dev/null; t1=$(now)
  one=$(awk "BEGIN { print $t1 - $t0 }")
  line=$(printf '%-16s %10s %8.3f' "$name" "$rows" "$one")
  speed=""
  for np in 1 2 4; do
    t0=$(now)
    mpirun --oversubscribe -np "$np" "$sluice" run "$yaml" --in "$work/$name-in" \
      --out "$work/$name-np$np" --backend "$backend" --threads 1 2>/dev/null
    t1=$(now)
    "$py" tests/mpi/compare.py "$work/$name-ref" "$work/$name-np$np" || { echo "$name np $np: WRONG"; exit 1; }
    t=$(awk "BEGIN { print $t1 - $t0 }")
    line="$line $(printf '%8.3f' "$t")"
    [ "$np" -gt 1 ] && speed="$speed $(awk "BEGIN { printf \"%5.2fx\", $one / $t }")"
  done
  echo "$line  $speed"
done
