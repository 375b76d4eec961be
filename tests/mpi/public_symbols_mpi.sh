#!/usr/bin/env bash
# public_symbols_mpi.sh — libsluice_mpi's installed libraries pass tests/public_symbols.sh's
# check (every defined global starts with "sluice"; the core API is there: they hold it) and
# also define the distributed API, sluice_mpi_*, every function include/sluice_mpi.h declares.
# Usage: public_symbols_mpi.sh PUBLIC_SYMBOLS_SH LIBSLUICE_MPI_A LIBSLUICE_MPI_SO
set -euo pipefail
check=$1 static_lib=$2 shared_lib=$3
here=$(cd "$(dirname "$0")" && pwd)
status=0
"$check" "$static_lib" "$shared_lib" || status=1
# Every name declared SLUICE_API in the header must be defined in both libraries.
mapfile -t api < <(grep -o 'SLUICE_API [^(]*(' "$here/../../include/sluice_mpi.h" |
                   sed -E 's/.*[ *](sluice_mpi_[a-z_]+)\($/\1/')
if [ "${#api[@]}" -lt 10 ]; then
  echo "FAIL: found only ${#api[@]} SLUICE_API functions in sluice_mpi.h"; exit 1
fi
static_syms=$(nm -g --defined-only "$static_lib" | awk 'NF == 3 {print $3}')
shared_syms=$(nm -D --defined-only "$shared_lib" | awk 'NF == 3 {print $3}')
for f in "${api[@]}"; do
  grep -qx "$f" <<<"$static_syms" || { echo "FAIL: $static_lib does not define $f"; status=1; }
  grep -qx "$f" <<<"$shared_syms" || { echo "FAIL: $shared_lib does not define $f"; status=1; }
done
echo "sluice_mpi.h: ${#api[@]} functions, checked in both libraries"
exit $status
