/* cuda_check.h — CK(call): a benchmark's CUDA runtime call that must succeed; on failure it
 * prints where and why and exits 1 (benchmarks stop at the first broken measurement rather
 * than print a figure of nothing). For the programs in bench/, C and CUDA C++ alike. */
#ifndef SLUICE_BENCH_CUDA_CHECK_H
#define SLUICE_BENCH_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CK(x)                                                                                 \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#endif
