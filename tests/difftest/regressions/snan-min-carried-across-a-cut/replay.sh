#!/bin/sh
# Replays this repro: the driver on pipeline.yaml, the inputs and cuts.txt,
# then the judge. SLUICE_ROOT, DRIVER and BACKEND override the defaults.
here=$(cd "$(dirname "$0")" && pwd)
ROOT=${SLUICE_ROOT:-$(cd "$here/../../../.." && pwd)}
exec /usr/bin/python3 "$ROOT/tests/difftest/difftest.py" --driver "${DRIVER:-$ROOT/build/tests/difftest_driver}" --replay "$here" --backend "${BACKEND:-cpu}"
