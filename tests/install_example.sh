#!/usr/bin/env bash
# install_example.sh — installs the build into a temporary prefix, builds examples/ against it
# with find_package(sluice) and with pkg-config, and runs the result.
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/sluice"
"$tmp/prefix/bin/sluice" --version
cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/ex" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/ex/embed"
"$tmp/ex/embed_static"
libdir=$(ls -d "$tmp/prefix"/lib*/pkgconfig | head -1)
PKG_CONFIG_PATH=$libdir cc -o "$tmp/embed_pc" "$src/examples/embed.c" \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs sluice)
LD_LIBRARY_PATH="$(dirname "$libdir")" "$tmp/embed_pc"
