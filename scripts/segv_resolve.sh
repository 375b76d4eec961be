#!/usr/bin/env bash
# segv_resolve.sh LOG — turns the "module(+offset) [address]" frames that
# tests/tools/segv_trace.c printed into LOG into "function at file:line" with addr2line
# (frames of modules without debug information keep their symbol or offset). Prints
# nothing when LOG holds no trace.
set -uo pipefail
log=$1
command -v addr2line >/dev/null || { echo "segv_resolve: no addr2line here"; exit 0; }
sed -n '/== segv_trace: fatal/,/== segv_trace: end/p' "$log" | while IFS= read -r line; do
  # glibc prints module(symbol+offset) [address] or module(+offset) [address]
  if [[ $line =~ ^([^\(]+)\(([^\)]*)\)\ ?\[(0x[0-9a-f]+)\]$ ]]; then
    module=${BASH_REMATCH[1]} inside=${BASH_REMATCH[2]}
    if [[ $inside =~ ^\+(0x[0-9a-f]+)$ ]] && [ -f "$module" ]; then
      # a return address: the call is the byte before it
      at=$(printf '0x%x' $(( BASH_REMATCH[1] - 1 )))
      where=$(addr2line -f -C -i -e "$module" "$at" 2>/dev/null | paste -sd' ' -)
      echo "  $(basename "$module") +$at: $where"
    else
      echo "  $(basename "$module") $inside"
    fi
  else
    echo "$line"
  fi
done
