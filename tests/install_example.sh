#!/usr/bin/env bash
# install_example.sh — installs the build into a temporary prefix, builds examples/ against it
# with find_package(sluice) and with pkg-config (shared and --static), and runs the installed
# `sluice` and every example program in an empty environment (no LD_LIBRARY_PATH, no
# PKG_CONFIG_PATH): installed programs must find libsluice.so through their RUNPATH.
# Where the build has libsluice_mpi (MPI was found), the same for the distributed example
# (examples/mpi_embed.c) against the package's `mpi` component and sluice-mpi.pc, each run
# under `mpirun -np 2` in that empty environment (plus what Open MPI needs to run as root).
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/sluice"

# What a user's shell may not have: only the system's paths, nothing of this build.
clean_run() { env -i PATH=/usr/bin:/bin HOME="$tmp" "$@"; }

clean_run "$prefix/bin/sluice" --version
# the installed program runs a pipeline, not just --version
clean_run "$prefix/bin/sluice" gen "$src/pipelines/cull-visible.yaml" --rows 1000 --seed 1 \
  --out "$tmp/in" >/dev/null
clean_run "$prefix/bin/sluice" run "$src/pipelines/cull-visible.yaml" --in "$tmp/in" \
  --out "$tmp/out" --backend cpu >/dev/null
test -s "$tmp/out/id.npy"

cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/ex" >/dev/null
clean_run "$tmp/ex/embed"
clean_run "$tmp/ex/embed_static"

libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1)
PKG_CONFIG_PATH=$libdir cc -o "$tmp/embed_pc" "$src/examples/embed.c" \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs sluice)
# it is linked with the shared library, found through the rpath pkg-config gave it
readelf -d "$tmp/embed_pc" | grep -q 'NEEDED.*libsluice\.so'
clean_run "$tmp/embed_pc"
# the static link line alone links a C program with libsluice.a (-l:libsluice.a picks it
# over the shared library); it needs no shared CUDA library
PKG_CONFIG_PATH=$libdir cc -o "$tmp/embed_pc_static" "$src/examples/embed.c" \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --static --libs sluice | sed 's/-lsluice\b/-l:libsluice.a/')
if readelf -d "$tmp/embed_pc_static" | grep -E 'NEEDED.*lib(sluice|nvrtc|cudart|cuda)\.so'; then
  echo "FAIL: the statically linked program needs the shared libraries above"
  exit 1
fi
clean_run "$tmp/embed_pc_static"

# ---- libsluice_mpi, where the build has it ---------------------------------------------------
if ! ls "$build"/dist/libsluice_mpi.so* >/dev/null 2>&1; then
  echo "install_example: this build has no libsluice_mpi (MPI not found): MPI example skipped"
  exit 0
fi
test -f "$prefix/include/sluice_mpi.h"
mpirun=$(command -v mpirun || command -v mpiexec)
here=$(cd "$(dirname "$0")" && pwd)
# Open MPI refuses root without these (CI containers run as root); isolated.sh gives the run
# a session directory of its own.
mpi_run() {
  env -i PATH=/usr/bin:/bin HOME="$tmp" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    "$here/mpi/isolated.sh" "$mpirun" --oversubscribe -np 2 "$@"
}
cmake -S "$src/examples" -B "$tmp/ex-mpi" -DCMAKE_PREFIX_PATH="$prefix" -DSLUICE_EXAMPLES_MPI=ON >/dev/null
cmake --build "$tmp/ex-mpi" >/dev/null
mpi_run "$tmp/ex-mpi/mpi_embed"
mpi_run "$tmp/ex-mpi/mpi_embed_static"
# it links libsluice_mpi alone: the sluice API comes with it
if readelf -d "$tmp/ex-mpi/mpi_embed" | grep -E 'NEEDED.*libsluice\.so'; then
  echo "FAIL: mpi_embed needs libsluice.so beside libsluice_mpi.so"
  exit 1
fi
PKG_CONFIG_PATH=$libdir cc -o "$tmp/mpi_embed_pc" "$src/examples/mpi_embed.c" \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs sluice-mpi)
readelf -d "$tmp/mpi_embed_pc" | grep -q 'NEEDED.*libsluice_mpi\.so'
mpi_run "$tmp/mpi_embed_pc"
PKG_CONFIG_PATH=$libdir cc -o "$tmp/mpi_embed_pc_static" "$src/examples/mpi_embed.c" \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --static --libs sluice-mpi |
    sed 's/-lsluice_mpi\b/-l:libsluice_mpi.a/')
if readelf -d "$tmp/mpi_embed_pc_static" | grep -E 'NEEDED.*lib(sluice|sluice_mpi|nvrtc|cudart|cuda)\.so'; then
  echo "FAIL: the statically linked MPI program needs the shared libraries above"
  exit 1
fi
mpi_run "$tmp/mpi_embed_pc_static"
# A package without the MPI part (as one built where MPI was not found): asking for the
# component fails at configure time, naming it, instead of a missing target later.
rm "$prefix"/lib*/cmake/sluice/sluiceMpiTargets*.cmake
if cmake -S "$src/examples" -B "$tmp/ex-nompi" -DCMAKE_PREFIX_PATH="$prefix" \
    -DSLUICE_EXAMPLES_MPI=ON >"$tmp/nompi.log" 2>&1; then
  echo "FAIL: find_package(sluice COMPONENTS mpi) succeeded without the MPI part"
  exit 1
fi
grep -q "component mpi is not installed" "$tmp/nompi.log" ||
  { echo "FAIL: the configure error does not say the mpi component is missing:"; cat "$tmp/nompi.log"; exit 1; }
