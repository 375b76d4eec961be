// pin_bench.cu — issue 11's pinned memory: what getting and giving back pinned host memory
// costs through sluice (sluice_cuda_host_alloc / sluice_cuda_host_free, whose large blocks the
// result pool shares: core/cuda/pinned.c) beside CUDA's own cudaHostAlloc / cudaFreeHost, in
// the same run, and that a copy engine reads either at the bus's speed.
//
//   pin_bench [MIB=64] [BLOCKS=3] [ROUNDS=3]
//
// Each round allocates BLOCKS blocks of MIB MiB one way, copies each to the device once
// (pinned H2D, GB/s), frees them, then the other way; the table gives the median over the
// rounds. A benchmark, not a test: gpu_pinned checks the memory's rules.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_time.h"
#include "cuda_check.h"
#include "sluice.h"
#include "sluice_cuda.h"

struct timing {
    double get_ms, h2d_gbs, free_ms;
};

// One round of one way: sluice's when ctx is given, else CUDA's.
static timing one_round(sluice_context *ctx, size_t bytes, int blocks, void *device) {
    void *p[64];
    timing t;
    double a = now_ms();
    for (int i = 0; i < blocks; i++) {
        if (ctx) {
            if (sluice_cuda_host_alloc(ctx, bytes, &p[i]) != SLUICE_OK) {
                fprintf(stderr, "pin_bench: sluice_cuda_host_alloc of %zu bytes failed\n", bytes);
                exit(1);
            }
        } else {
            CK(cudaHostAlloc(&p[i], bytes, cudaHostAllocPortable));
        }
    }
    t.get_ms = now_ms() - a;
    a = now_ms();
    for (int i = 0; i < blocks; i++) CK(cudaMemcpy(device, p[i], bytes, cudaMemcpyHostToDevice));
    t.h2d_gbs = (double)bytes * blocks / (now_ms() - a) / 1e6;
    a = now_ms();
    for (int i = 0; i < blocks; i++) {
        if (ctx) {
            if (sluice_cuda_host_free(ctx, p[i]) != SLUICE_OK) {
                fprintf(stderr, "pin_bench: sluice_cuda_host_free failed\n");
                exit(1);
            }
        } else {
            CK(cudaFreeHost(p[i]));
        }
    }
    t.free_ms = now_ms() - a;
    return t;
}

int main(int argc, char **argv) {
    const long mib = argc > 1 ? atol(argv[1]) : 64;
    const int blocks = argc > 2 ? atoi(argv[2]) : 3, rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (mib < 1 || blocks < 1 || blocks > 64 || rounds < 1 || rounds > 15) {
        fprintf(stderr, "usage: pin_bench [MIB=64] [BLOCKS=3 (<= 64)] [ROUNDS=3 (<= 15)]\n");
        return 2;
    }
    const size_t bytes = (size_t)mib << 20;
    double t0 = now_ms();
    CK(cudaFree(0));
    printf("CUDA context: %.1f ms\n", now_ms() - t0);
    void *device = NULL;
    CK(cudaMalloc(&device, bytes));
    sluice_context *ctx = NULL;
    if (sluice_context_create(&ctx, nullptr) != SLUICE_OK) return 1;
    double get[2][15], h2d[2][15], fr[2][15];
    for (int r = 0; r < rounds; r++)
        for (int way = 0; way < 2; way++) {
            timing t = one_round(way ? ctx : NULL, bytes, blocks, device);
            get[way][r] = t.get_ms;
            h2d[way][r] = t.h2d_gbs;
            fr[way][r] = t.free_ms;
        }
    const double gb = (double)bytes * blocks / 1e9;
    printf("\n| %d blocks of %ld MiB, median of %d | get, ms (GB/s) | pinned H2D, GB/s | free, ms |\n",
           blocks, mib, rounds);
    printf("|---|---|---|---|\n");
    const char *names[2] = {"cudaHostAlloc / cudaFreeHost", "sluice_cuda_host_alloc / _free"};
    double g[2];
    for (int way = 0; way < 2; way++) {
        g[way] = bench_median(get[way], rounds);
        printf("| %s | %.1f (%.2f) | %.1f | %.1f |\n", names[way], g[way], gb / (g[way] / 1e3),
               bench_median(h2d[way], rounds), bench_median(fr[way], rounds));
    }
    printf("| sluice / CUDA, time to get | %.2fx | | |\n", g[1] / g[0]);
    sluice_context_destroy(ctx);
    CK(cudaFree(device));
    return 0;
}
