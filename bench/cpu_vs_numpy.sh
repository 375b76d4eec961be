#!/bin/sh
# cpu_vs_numpy.sh — runs bench/cpu_vs_numpy.py with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# cleared for this command only (set on some machines for old OpenBLAS builds, they slow a
# current NumPy) and Debian's python3, whose numpy is the one the bar names.
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 \
    "$(dirname "$0")/cpu_vs_numpy.py" "$@"
