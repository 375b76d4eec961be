#!/bin/sh
# isolated.sh — runs a command (an mpirun, or a script that calls mpirun) with Open MPI's
# session directory under a fresh temporary folder. Concurrent mpiruns otherwise race to
# create the same /tmp/ompi.<host>.<uid> and one of them fails with "File exists" (seen when
# ctest -j runs the mpi tests beside the cuda_absent test's second run of the suite).
d=$(mktemp -d "${TMPDIR:-/tmp}/sluice-ompi.XXXXXX") || exit 1
TMPDIR=$d OMPI_MCA_orte_tmpdir_base=$d PRTE_MCA_prte_tmpdir_base=$d "$@"
rc=$?
rm -rf "$d"
exit $rc
