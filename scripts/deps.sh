#!/usr/bin/env bash
# deps.sh — installs what building and testing sluice needs on Debian/Ubuntu (idempotent).
# The CUDA toolkit is optional: with it the CUDA backend is built too. Open MPI comes from
# scripts/mpi_deps.sh, called at the end.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libyaml-dev check python3 python3-numpy clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
# Open MPI, for the distributed component (dist/) and its mpirun suites (tests/mpi/).
"$(dirname "$0")/mpi_deps.sh"
