#!/usr/bin/env bash
# test.sh — installs dependencies, builds, and runs the whole test suite (GPU suites skip
# with status 77 where no GPU is present). The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
