#!/usr/bin/env bash
# mpi_deps.sh — installs Open MPI (mpirun, mpicc, the headers) on Debian/Ubuntu when it is
# missing, so the distributed component (dist/, include/sluice_mpi.h) is built and its
# mpirun suites (tests/mpi/) run. Idempotent; does nothing when mpicc and mpirun exist.
# NCCL is not in Debian: the build probes for it and leaves it out where it is absent.
set -euo pipefail
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then exit 0; fi
pkgs=(openmpi-bin libopenmpi-dev)
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
