#!/usr/bin/env bash
# demo.sh — the main job: installs dependencies, builds, generates a stream of ROWS rows
# (default 2^24) for the shipped culling pipeline and runs it (GPU if present, else CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
rows=${ROWS:-16777216}
pipeline=${PIPELINE:-pipelines/cull-visible.yaml}
work=${WORK_DIR:-build/demo}
sluice=${BUILD_DIR:-build}/sluice
rm -rf "$work" && mkdir -p "$work"
"$sluice" explain "$pipeline"
"$sluice" gen "$pipeline" --rows "$rows" --out "$work/in" --seed 1
start=$(date +%s.%N)
"$sluice" run "$pipeline" --in "$work/in" --out "$work/out" --backend auto
end=$(date +%s.%N)
python3 - "$work/out" "$rows" "$start" "$end" <<'PY'
import os, sys
import numpy as np
out, rows, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cols = sorted(f for f in os.listdir(out) if f.endswith('.npy'))
kept = len(np.load(os.path.join(out, cols[0]), mmap_mode='r')) if cols else 0
print(f"{rows} rows in, {kept} rows out ({100.0*kept/max(rows,1):.1f}% kept), "
      f"columns: {', '.join(c[:-4] for c in cols)}; {t1-t0:.2f} s end to end")
PY
