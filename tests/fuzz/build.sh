#!/usr/bin/env bash
# build.sh — builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c) with clang under
# AddressSanitizer and UndefinedBehaviorSanitizer, against the library built from the same
# sources with coverage instrumentation. The main build uses gcc; this one is separate.
#
#   tests/fuzz/build.sh [HARNESS…]      # default: every harness
#   FUZZ_BUILD_DIR=…  (default: build-fuzz)   FUZZ_CC=… (default: clang)
#
# Output: $FUZZ_BUILD_DIR/fuzz_<harness> executables.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
CC="${FUZZ_CC:-clang}"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS_COMMON="-O1 -g $SAN"

if [ $# -gt 0 ]; then HARNESSES=("$@"); else HARNESSES=(io expr pipeline session); fi

# libFuzzer's runtime is in Debian's libclang-rt-N-dev, only a Recommends of clang: install
# it when it is missing (as scripts/deps.sh installs the rest).
if [ ! -f "$("$CC" -print-file-name=libclang_rt.fuzzer-x86_64.a)" ]; then
  major="$("$CC" -dumpversion | cut -d. -f1)"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "libclang-rt-$major-dev"
fi

# The library: every source the main build compiles (no CUDA), instrumented for coverage.
# Warnings are not errors here: clang and gcc disagree on some, and the gcc build is the
# one that enforces them.
cmake -S "$ROOT" -B "$BUILD/lib" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_FLAGS="$CFLAGS_COMMON -fsanitize=fuzzer-no-link" \
  -DSLUICE_WITH_CUDA=OFF -DSLUICE_BUILD_TESTS=OFF -DSLUICE_WERROR=OFF >/dev/null
# The harnesses call internal functions (sl_*), which the installed libsluice.a keeps local:
# they link the internal archive of the same objects, as the test suites do.
cmake --build "$BUILD/lib" --target sluice_internal -j "$(nproc)" >/dev/null

YAML_LIBS="$(pkg-config --libs yaml-0.1)"
for h in "${HARNESSES[@]}"; do
  extra=()
  # The command line's readers are not part of the library: compile them in.
  if [ "$h" = io ]; then extra=("$ROOT"/cli/npy.c "$ROOT"/cli/csv.c "$ROOT"/cli/raw.c "$ROOT"/cli/input.c); fi
  "$CC" $CFLAGS_COMMON -fsanitize=fuzzer -Wall -Wextra \
    -I"$ROOT/include" -I"$ROOT/core" -I"$ROOT/kernels" -I"$ROOT" -I"$ROOT/tests/fuzz" \
    "$ROOT/tests/fuzz/fuzz_$h.c" "${extra[@]}" "$BUILD/lib/libsluice_internal.a" $YAML_LIBS -lpthread -lm \
    -o "$BUILD/fuzz_$h"
  echo "built $BUILD/fuzz_$h"
done
