#!/usr/bin/env bash
# public_symbols.sh — the libraries a user links define no global symbol outside the sluice*
# API, so nothing in them can collide with an embedding program's own symbols: every defined
# global of libsluice.a (the installed static library, made from one relocatable object whose
# internal symbols are local; see CMakeLists.txt) and every defined symbol of libsluice.so's
# dynamic table starts with "sluice". Also checks that the API is there (a library whose
# symbols were all localized would pass the first check and link nothing).
# Usage: public_symbols.sh LIBSLUICE_A LIBSLUICE_SO
set -euo pipefail
static_lib=$1 shared_lib=$2
status=0

# nm lists "ADDRESS TYPE NAME" for defined symbols; archive member headers and blank lines
# have fewer fields.
check() {
  local what=$1 listing=$2
  local foreign api
  foreign=$(awk 'NF == 3 && $3 !~ /^sluice/ {print "  " $2 " " $3}' <<<"$listing")
  api=$(awk 'NF == 3 && $3 ~ /^sluice_/' <<<"$listing" | wc -l)
  if [ -n "$foreign" ]; then
    echo "FAIL: $what defines $(wc -l <<<"$foreign") global symbol(s) outside the sluice* API:"
    head -n 40 <<<"$foreign"
    status=1
  fi
  for required in sluice_context_create sluice_pipeline_load_file sluice_session_open; do
    if ! awk -v want="$required" 'NF == 3 && $3 == want {found = 1} END {exit !found}' <<<"$listing"; then
      echo "FAIL: $what does not define $required"
      status=1
    fi
  done
  echo "$what: $api sluice_* symbols, $( [ -n "$foreign" ] && wc -l <<<"$foreign" || echo 0) others"
}

check "$static_lib (nm -g --defined-only)" "$(nm -g --defined-only "$static_lib")"
check "$shared_lib (nm -D --defined-only)" "$(nm -D --defined-only "$shared_lib")"
exit $status
