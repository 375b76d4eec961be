#!/usr/bin/env bash
# cookbook.sh SLUICE NP PIPELINES_DIR WORK_ROOT — every cookbook pipeline through
# `mpirun -np NP sluice run` against one process on the same generated input: integer and bool
# outputs byte-identical, float outputs within a relative 1e-4 (f32) / 1e-9 (f64) with NaNs in
# the same places (tests/mpi/compare.py; the bound is notes/DISTRIBUTED.md's), at two batch
# sizes (the reduce pipelines included); and `sluice explain --ranks` for each. Then the
# failures every rank must report: a CSV input (cannot be split) and an OUTDIR that cannot be
# made, each exiting 1 on every rank and leaving no output.
set -euo pipefail
sluice=$1 np=$2 pipelines=$3
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
mpirun=(mpirun --oversubscribe -np "$np")
# A folder of this run's own under WORK_ROOT: the same test may run twice at once (CI's
# cuda_absent test runs the suite again in the same build tree), and a fixed folder let one
# run delete the other's files. Kept on failure for inspection, removed on success.
mkdir -p "$4"
work=$(mktemp -d "$4/run.XXXXXX")
fails=0
for yaml in "$pipelines"/*.yaml; do
  name=$(basename "$yaml" .yaml)
  dir=$work/$name
  mkdir -p "$dir"
  # explain --ranks says what crosses ranks and the passes (every stage kind runs distributed)
  if "$sluice" explain "$yaml" --ranks --backend cpu >"$dir/explain.txt" 2>&1; then
    grep -q "passes over each rank's part: [0-9]" "$dir/explain.txt" ||
      { echo "FAIL: $name: explain --ranks gives no passes:"; cat "$dir/explain.txt"; fails=$((fails + 1)); }
  else
    echo "FAIL: $name: explain --ranks failed:"; cat "$dir/explain.txt"; fails=$((fails + 1))
  fi
  "$sluice" gen "$yaml" --rows 30011 --out "$dir/in" >/dev/null
  "$sluice" run "$yaml" --in "$dir/in" --out "$dir/ref" --backend cpu --threads 1 \
    --no-progress 2>/dev/null
  for rows in 4093 100000; do
    out=$dir/np$np-b$rows
    if ! "${mpirun[@]}" "$sluice" run "$yaml" --in "$dir/in" --out "$out" --backend cpu \
        --threads 1 --batch-rows "$rows" 2>"$dir/err"; then
      echo "FAIL: $name (batch rows $rows): mpirun -np $np sluice run failed:"; cat "$dir/err"
      fails=$((fails + 1))
      continue
    fi
    if ! "$py" "$here/compare.py" "$dir/ref" "$out"; then
      echo "FAIL: $name (batch rows $rows): $np ranks differ from one process"
      fails=$((fails + 1))
    fi
  done
done

# A CSV cannot be split among ranks: every rank says so, exit 1, no OUTDIR.
csv=$work/in.csv
printf 'x,y,id\n1,2,3\n' >"$csv"
if "${mpirun[@]}" "$sluice" run "$pipelines/cull-visible.yaml" --in "$csv" --out "$work/csv-out" \
    --backend cpu >"$work/csv.log" 2>&1; then
  echo "FAIL: a CSV input under mpirun succeeded"; fails=$((fails + 1))
fi
# Counted as occurrences, not lines: the ranks' messages may interleave on one line.
if [ "$(grep -o 'CSV stream cannot be split' "$work/csv.log" | wc -l)" -ne "$np" ] || [ -e "$work/csv-out" ]; then
  echo "FAIL: a CSV input: not every rank reported it, or an OUTDIR was left:"; cat "$work/csv.log"
  fails=$((fails + 1))
fi

# An OUTDIR that cannot be made (its parent is a file): rank 0 fails, every rank exits 1.
touch "$work/a-file"
if "${mpirun[@]}" "$sluice" run "$pipelines/cull-visible.yaml" --in "$work/cull-visible/in" \
    --out "$work/a-file/out" --backend cpu >"$work/outdir.log" 2>&1; then
  echo "FAIL: an OUTDIR that cannot be made: the run succeeded"; fails=$((fails + 1))
fi
if [ "$(grep -o 'rank 0 failed\|rank 0 of' "$work/outdir.log" | wc -l)" -ne "$np" ]; then
  echo "FAIL: an OUTDIR that cannot be made: not every rank reported rank 0's failure:"
  cat "$work/outdir.log"; fails=$((fails + 1))
fi

if [ "$fails" -ne 0 ]; then echo "$fails failures (files kept in $work)"; exit 1; fi
rm -rf "$work"
echo "cookbook under mpirun -np $np: ok"
