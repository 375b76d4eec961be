#!/usr/bin/env bash
# device_profile.sh — hardware counters of the fused kernels on the GPU machine: builds
# gpu_bench, then runs Nsight Compute on one launch of each named job's sluice kernel (and,
# with CUB=1, of CUB's kernel for the same job) at 2^LG rows. Reports go to $OUT/ncu_<job>.txt.
# Usage: JOBS="scan filter" LG=26 scripts/device_profile.sh
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .device/env.sh ] && source .device/env.sh
OUT=${OUT:-out}; mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
export SLUICE_CACHE_DIR=$PWD/$BUILD/kernel-cache
if [ ! -x "$BUILD/bench/gpu_bench" ]; then
  cmake -B $BUILD -DCMAKE_BUILD_TYPE=Release -DSLUICE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null 2>&1
  cmake --build $BUILD -j16 --target gpu_bench >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
for job in ${JOBS:-scan}; do
  # skip the warm-up launches: profile a timed one
  GPU_BENCH_JOBS=$job timeout ${NCU_TIMEOUT:-150} ncu --clock-control none -k regex:'^sl_fused$' --launch-skip 2 --launch-count 1 \
    $SECTIONS "$BUILD/bench/gpu_bench" ${LG:-26} 3 >"$OUT/ncu_$job.txt" 2>&1
  echo "== $job (rc=$?)"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Eligible Warps|No Eligible|Stall|stall" "$OUT/ncu_$job.txt" | sed -E 's/ +/ /g' | cut -c1-160 | head -40
done
