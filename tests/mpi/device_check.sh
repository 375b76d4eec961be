#!/usr/bin/env bash
# device_check.sh — the distributed session's GPU path on the lent one-GPU machine: two MPI
# ranks sharing the one GPU (MPI transport), CUDA backend, against one CPU process. Run from
# the repository root with .device/ carried (../shared/device/README.md); writes its logs to
# $OUT (or ./device-check-out). Builds the library with CUDA through CMake; dist/ and the
# MPI programs through CMake when mpicc is there, else by hand against libmpi and the Open
# MPI headers carried in build-devmpi/include (the machine has the runtime, maybe no headers);
# or, with PREBUILT=DIR, runs DIR/sluice and DIR/test_mpi_session built elsewhere.
#   1. test_mpi_session cases on 2 ranks, --backend cuda: every case must equal one CPU
#      process, the scans whose state crosses ranks included (scans of every operator, head
#      flags, key segments, two carry phases, filters before scans: the CUDA backend's
#      carry_get/carry_set), and maps, filters, sorts of every key kind, per-batch scans,
#      offsets, and every reduce case (key runs, head flags, whole stream, per batch, offsets,
#      after a filter, a scan, a sort or another reduce: a reduce's open segment, index and
#      flush crossing ranks on CUDA); its last line counts the runs that carried scan state
#      between ranks and the reduce runs compared, and "reduce cases on CUDA" repeats the
#      latter (0 there: none ran); then the same on 3 ranks, one seed: only a middle rank
#      is seeded with an open segment it must not emit at flush (the reduce's `continues`);
#   2. the same on the CPU backend, as a control;
#   3. `mpirun -np 2 sluice run --backend cuda` on the cookbook against one CPU process;
#   4. bench/mpi_scaling.sh on the CPU backend (16 quiet cores: 1, 2 and 4 ranks against one
#      process), what notes/DISTRIBUTED.md's model is checked against.
set -uo pipefail
out=${OUT:-device-check-out}
mkdir -p "$out"
[ -f .device/env.sh ] && source .device/env.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export SLUICE_CACHE_DIR=$PWD/build-dev/kernel-cache
{ nvidia-smi -L; command -v mpirun mpicc; mpirun --version | head -1; } 2>&1 | tee "$out/machine.txt"
b=build-dev
mkdir -p $b
if [ -n "${PREBUILT:-}" ] && "$PREBUILT/sluice" --version >/dev/null 2>&1; then
  # Binaries built elsewhere with the same CUDA and Open MPI ABI: no build on the device.
  echo "prebuilt binaries from $PREBUILT" | tee -a "$out/machine.txt"
  sluice=$PREBUILT/sluice test=$PREBUILT/test_mpi_session
elif ! cmake -B $b -DCMAKE_BUILD_TYPE=Release -DSLUICE_WITH_CUDA=ON >"$out/cmake.log" 2>&1; then
  tail -20 "$out/cmake.log"; exit 1
elif grep -q "building libsluice_mpi" "$out/cmake.log"; then
  cmake --build $b -j16 --target sluice_cli test_mpi_session >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  sluice=$b/sluice test=$b/tests/mpi/test_mpi_session
else
  echo "no mpicc: building dist/ and the MPI programs by hand" | tee -a "$out/machine.txt"
  cmake --build $b -j16 --target sluice_internal >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  libmpi=$(ls /usr/lib/x86_64-linux-gnu/libmpi.so* 2>/dev/null | head -1)
  cuda=$(dirname "$(dirname "$(command -v nvcc)")")
  flags=(-O2 -std=gnu11 -DSLUICE_WITH_MPI=1 -DSLUICE_WITH_CUDA=1 -Iinclude -Icore -Ikernels -Idist
         -Icli -Ibuild-devmpi/include -I"$cuda/include")  # dist/nccl.c: cuda_runtime_api.h
  libs=($b/libsluice_internal.a "$libmpi" -L"$cuda/lib64" -L"$cuda/targets/x86_64-linux/lib"
        -lcudart_static -lyaml -ldl -lrt -lpthread -lm -lstdc++)
  gcc "${flags[@]}" -o $b/test_mpi_session tests/mpi/test_mpi_session.c dist/*.c "${libs[@]}" \
    >>"$out/build.log" 2>&1 && gcc "${flags[@]}" -o $b/sluice-mpi cli/*.c dist/*.c "${libs[@]}" \
    >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  sluice=$b/sluice-mpi test=$b/test_mpi_session
fi
echo "== 1. test_mpi_session, 2 ranks, CUDA backend" | tee "$out/results.txt"
timeout 420 mpirun -np 2 $test cases 2 cuda >"$out/cases-cuda.log" 2>&1; echo "exit $?" >>"$out/cases-cuda.log"
grep -v "^---\|^$" "$out/cases-cuda.log" | tail -25 | tee -a "$out/results.txt"
n=$(grep -o "[0-9]* runs of reduce cases compared" "$out/cases-cuda.log" | grep -o "^[0-9]*")
echo "reduce cases on CUDA: ${n:-0} runs compared with one CPU process (failures counted above)" | tee -a "$out/results.txt"
timeout 300 mpirun -np 3 $test cases 1 cuda >"$out/cases-cuda-3.log" 2>&1; echo "exit $?" >>"$out/cases-cuda-3.log"
grep -v "^---\|^$" "$out/cases-cuda-3.log" | tail -8 | tee -a "$out/results.txt"
n=$(grep -o "[0-9]* runs of reduce cases compared" "$out/cases-cuda-3.log" | grep -o "^[0-9]*")
echo "reduce cases on CUDA, 3 ranks: ${n:-0} runs compared with one CPU process" | tee -a "$out/results.txt"
echo "== 2. test_mpi_session, 2 ranks, CPU backend (control)" | tee -a "$out/results.txt"
timeout 60 mpirun -np 2 $test cases 1 cpu 2>&1 | grep "test_mpi_session" | tee -a "$out/results.txt"
echo "== 3. mpirun -np 2 sluice run --backend cuda vs one CPU process" | tee -a "$out/results.txt"
w=$b/cookbook
rm -rf $w; mkdir -p $w
for yaml in pipelines/*.yaml; do
  n=$(basename "$yaml" .yaml)
  $sluice gen "$yaml" --rows 300007 --out $w/$n-in >/dev/null 2>&1
  $sluice run "$yaml" --in $w/$n-in --out $w/$n-ref --backend cpu --no-progress >/dev/null 2>&1
  if timeout 60 mpirun -np 2 $sluice run "$yaml" --in $w/$n-in --out $w/$n-gpu --backend cuda \
      >$w/$n.log 2>&1; then
    if python3 -c "import numpy" 2>/dev/null; then
      if python3 tests/mpi/compare.py $w/$n-ref $w/$n-gpu >>$w/$n.log 2>&1; then r="same as one CPU process"
      else r="DIFFERS: $(tail -2 $w/$n.log | tr '\n' ' ')"; fi
    else # no numpy there: byte-identical files, or which differ (float scans may, in bounds)
      r="byte-identical to one CPU process"
      for f in $w/$n-ref/*.npy; do cmp -s "$f" "$w/$n-gpu/$(basename "$f")" || r="bytes differ in $(basename "$f") (no numpy to bound them)"; done
    fi
  else
    r="refused/failed: $(grep -m1 'rank 0' $w/$n.log | cut -c1-240)"
  fi
  # which transport moved a sort's rows (two ranks on one GPU: MPI, NCCL refuses them)
  t=$(grep -o 'rows between ranks: [a-z]*' $w/$n.log | head -1)
  printf '%-16s %s%s\n' "$n" "$r" "${t:+ ($t)}" | tee -a "$out/results.txt"
done
echo "== 4. CPU backend: one process against 1, 2 and 4 ranks (bench/mpi_scaling.sh)" | tee -a "$out/results.txt"
timeout ${SCALING_TIMEOUT:-60} bench/mpi_scaling.sh $sluice 8388608 cpu 2>&1 | tee -a "$out/results.txt"
