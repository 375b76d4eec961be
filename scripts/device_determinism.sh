#!/usr/bin/env bash
# device_determinism.sh — on the GPU machine (the device tool): what `determinism: run_to_run`
# promises, measured. Builds the tree NEW (and, given, the tree OLD for a before/after; a
# source export of an older commit with this tree's tests/gpu_determinism.c copied in), then
#   1. runs the issue-9 repro three times per tree: 2^28 rows from `sluice gen` (seed 7)
#      through `sluice run --backend cuda`, md5 of s.npy and t.npy;
#   2. runs tests/gpu_determinism (OLD: cut at OLD_TEST_TIMEOUT seconds, default 60, enough
#      to see its first pipelines) and gpu_fused's run_to_run case (CPU comparison);
#   3. runs gpu_bench's scan, linrec, segscan and six jobs at 2^LG rows (default 28, REPS
#      repetitions, default 10), without and with GPU_BENCH_DETERMINISM=run_to_run, alone on
#      the GPU.
# Steps 1-2 of both trees run side by side (correctness only); step 3 runs alone.
#
#   run carry: [".device", "DIRS"]  command: scripts/device_determinism.sh NEW [OLD]
#
# Logs go to $OUT (./out elsewhere); a summary is printed last.
set -uo pipefail
[ -f .device/env.sh ] && source .device/env.sh
OUT=${OUT:-out}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
NEW=$(realpath "$1")
OLD=${2:+$(realpath "$2")}
LG=${LG:-28}
REPS=${REPS:-10}
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
date -u | tee -a "$OUT/device.txt"

# ---- builds (both at once) ------------------------------------------------------------
build() { # SRC DIR JOBS TARGETS...
    local src=$1 dir=$2 jobs=$3
    shift 3
    cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release >"$dir.configure.log" 2>&1 &&
        cmake --build "$dir" -j "$jobs" --target "$@" >"$dir.build.log" 2>&1
}
mkdir -p /tmp/det
build "$NEW" /tmp/det/new 12 sluice_cli gpu_determinism gpu_fused gpu_bench &
pid_new=$!
if [ -n "$OLD" ]; then
    build "$OLD" /tmp/det/old 4 sluice_cli gpu_determinism &
    pid_old=$!
fi
wait $pid_new || { stamp "NEW build failed"; tail -40 /tmp/det/new.build.log /tmp/det/new.configure.log; exit 1; }
if [ -n "$OLD" ]; then wait $pid_old || { stamp "OLD build failed"; tail -30 /tmp/det/old.build.log; OLD=; }; fi
stamp "built"

# ---- the issue-9 repro's input ----------------------------------------------------------
cat >/tmp/det/det-scan-rtr.yaml <<'EOF'
sluice: 1
name: det-scan-rtr
determinism: run_to_run
input: {x: f32, k: u32}
stages:
  - map: {g: k / 1000}
  - scan: {of: x, op: sum, into: s}
  - segmented_scan: {of: x, op: sum, segments: {key: g}, into: t}
output: [s, t]
EOF
/tmp/det/new/sluice gen /tmp/det/det-scan-rtr.yaml --rows "2^$LG" --out /tmp/det/in --seed 7 ||
    stamp "sluice gen failed"
stamp "generated"

repro() { # TREE LABEL
    for i in 1 2 3; do
        rm -rf "/tmp/det/out-$2"
        SLUICE_CACHE_DIR=/tmp/det/kc-$2 "$1/sluice" run /tmp/det/det-scan-rtr.yaml --in /tmp/det/in \
            --out "/tmp/det/out-$2" --backend cuda >/dev/null 2>"/tmp/det/run-$2.err" ||
            { echo "$2 run $i failed: $(tail -3 /tmp/det/run-$2.err)"; continue; }
        echo "$2 run $i: s.npy $(md5sum </tmp/det/out-$2/s.npy | cut -c1-32)" \
            " t.npy $(md5sum </tmp/det/out-$2/t.npy | cut -c1-32)"
    done
    rm -rf "/tmp/det/out-$2"
}

# ---- correctness, both trees side by side --------------------------------------------------
if [ -n "$OLD" ]; then
    (
        repro /tmp/det/old old
        stamp "old: gpu_determinism (cut at ${OLD_TEST_TIMEOUT:-60} s)"
        CK_DEFAULT_TIMEOUT=900 SLUICE_CACHE_DIR=/tmp/det/kc-old \
            timeout "${OLD_TEST_TIMEOUT:-60}" /tmp/det/old/tests/gpu_determinism
        echo "old gpu_determinism rc=$?"
    ) >"$OUT/old.log" 2>&1 &
    pid_oldrun=$!
fi
(
    CK_DEFAULT_TIMEOUT=900 SLUICE_CACHE_DIR=/tmp/det/kc-new timeout 400 /tmp/det/new/tests/gpu_determinism
    echo "new gpu_determinism rc=$?"
    stamp "new: gpu_fused run_to_run"
    CK_RUN_CASE=run_to_run CK_DEFAULT_TIMEOUT=900 SLUICE_CACHE_DIR=/tmp/det/kc-new timeout 200 \
        /tmp/det/new/tests/gpu_fused
    echo "new gpu_fused run_to_run rc=$?"
    repro /tmp/det/new new
) >"$OUT/new.log" 2>&1
[ -n "$OLD" ] && wait $pid_oldrun
stamp "correctness done"

# ---- cost: gpu_bench without and with run_to_run, alone on the GPU ------------------------------
export SLUICE_CACHE_DIR=/tmp/det/kc-new
GPU_BENCH_JOBS=scan,linrec,segscan,six timeout 200 /tmp/det/new/bench/gpu_bench "$LG" "$REPS" \
    >"$OUT/bench_fast.txt" 2>&1
GPU_BENCH_DETERMINISM=run_to_run GPU_BENCH_JOBS=scan,linrec,segscan,six timeout 200 \
    /tmp/det/new/bench/gpu_bench "$LG" "$REPS" >"$OUT/bench_run_to_run.txt" 2>&1
stamp "bench done"

# ---- summary ------------------------------------------------------------------------------
echo "==== device"; cat "$OUT/device.txt"
[ -n "$OLD" ] && { echo "==== OLD"; grep -E "run [0-9]|DIFFER|same|rc=|Checks" "$OUT/old.log"; }
echo "==== NEW"; grep -E "run [0-9]|DIFFER|rc=|Checks|%:" "$OUT/new.log"
echo "==== gpu_bench (default mode)"; grep -E "^copy|^scan|^linrec|^segscan|^six|^device|^sluice" "$OUT/bench_fast.txt"
echo "==== gpu_bench (run_to_run)"; grep -E "^copy|^scan|^linrec|^segscan|^six|^sluice" "$OUT/bench_run_to_run.txt"
stamp "end"
