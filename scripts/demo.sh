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
start=$(date +%s%N)
"$sluice" run "$pipeline" --in "$work/in" --out "$work/out" --backend auto
end=$(date +%s%N)
echo "demo: $rows rows through $pipeline in $(( (end - start) / 1000000 )) ms end to end" \
     "(reading .npy, running, writing .npy); outputs in $work/out"
