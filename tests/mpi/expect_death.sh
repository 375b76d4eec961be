#!/usr/bin/env bash
# expect_death.sh TEST_MPI_SESSION NP — the last of NP ranks dies (SIGKILL) in the middle of a
# pass while the others wait in its collective: the job must end, not hang (CTest's timeout
# would catch a hang), with a non-zero status and the launcher naming the lost rank.
set -uo pipefail
prog=$1 np=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
mpirun --oversubscribe -np "$np" "$prog" die >"$log" 2>&1
rc=$?
cat "$log"
if [ "$rc" -eq 0 ]; then echo "FAIL: the job succeeded although a rank died"; exit 1; fi
if ! grep -qi "signal 9\|killed" "$log"; then echo "FAIL: nothing says which rank died"; exit 1; fi
echo "a rank that dies ends the job (status $rc): ok"
