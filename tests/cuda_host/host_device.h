/* host_device.h — what the device headers (kernels/) need from CUDA, for running them on the
 * host: with SL_HOST_EMULATION the kernels' volatile accesses become host atomics
 * (sl_lookback.cuh) and their dynamic shared memory comes from here (sl_device.cuh). One host
 * thread per GPU thread plays a block (g_block): __syncthreads is a barrier over the block, a
 * shuffle or ballot an exchange between the 32 threads of a warp between two barriers of the
 * warp, a named barrier one over its threads, __shared__ variables are statics. Included
 * before the device headers by reduce_emulate.cc (the generated kernels of reduce groups) and
 * tile_states_test.cc (the look-back's tile states). */
#ifndef SL_HOST_DEVICE_H
#define SL_HOST_DEVICE_H

#include <pthread.h>
#include <sched.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>

#define SL_HOST_EMULATION 1
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __global__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct uint4 {
    unsigned x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
struct sl_dim3 {
    unsigned x, y, z;
};
inline thread_local sl_dim3 threadIdx, blockDim;
/* The block being run and the grid's size: the blocks of a grid run one after another
 * (launch_grid), so every thread of a block reads the same values. */
inline sl_dim3 blockIdx = {0, 0, 0}, gridDim = {1, 1, 1};

/* The block being run: its barriers (named barrier 1 over its first `named_threads` threads:
 * the row-owning threads of the kernel with a look-back warp), the warps' exchange slots,
 * its dynamic shared memory. */
struct host_block {
    pthread_barrier_t all, named;
    int named_threads;
    pthread_barrier_t warp[32];
    unsigned slot[32][32];
    std::unique_ptr<unsigned char[]> smem;
};
inline host_block *g_block;

static inline void __syncthreads() { pthread_barrier_wait(&g_block->all); }
static inline void sl_host_named_barrier(int bar, int threads) {
    if (bar != 1 || threads != g_block->named_threads) {
        fprintf(stderr, "host emulation: named barrier %d over %d threads is not emulated\n", bar, threads);
        abort();
    }
    pthread_barrier_wait(&g_block->named);
}
static inline void __syncwarp(unsigned = 0xffffffffu) { pthread_barrier_wait(&g_block->warp[threadIdx.x / 32]); }
/* every lane of the warp puts v and takes lane `from`'s */
static inline unsigned warp_exchange(unsigned v, unsigned from) {
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    g_block->slot[w][lane] = v;
    __syncwarp();
    const unsigned got = g_block->slot[w][from & 31u];
    __syncwarp();
    return got;
}
static inline unsigned __shfl_sync(unsigned, unsigned v, int lane) { return warp_exchange(v, (unsigned)lane); }
static inline unsigned __shfl_up_sync(unsigned, unsigned v, int d) {
    const unsigned lane = threadIdx.x % 32;
    return warp_exchange(v, lane >= (unsigned)d ? lane - (unsigned)d : lane);
}
static inline unsigned __ballot_sync(unsigned, int pred) {
    unsigned bits = 0;
    for (unsigned l = 0; l < 32; l++) bits |= (warp_exchange(pred != 0, l) ? 1u : 0u) << l;
    return bits;
}
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline void __nanosleep(unsigned) { sched_yield(); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T __ldg(const T *p) { return *p; }
static inline size_t __cvta_generic_to_shared(const void *p) { return (size_t)p; }
static inline void *sl_host_dynamic_smem() { return g_block->smem.get(); }

#endif
