/* sl_pipe.cuh — the input pipeline of the persistent fused kernels: while a block works on
 * one tile, the copy engine is already bringing the next tile's input columns into another
 * of its shared-memory stages (two, or three in the kernel with a look-back warp; Hopper's
 * bulk copy, `cp.async.bulk`, completing on an mbarrier). Without it a block's loads are in
 * flight only between taking a tile and its look-back, and the SM's memory pipe idles while
 * the block waits on its predecessors (on the H200 most cycles per instruction were then
 * barrier waits during the look-back: bench/RESULTS.md).
 *
 * Protocol (thread 0 produces, the whole block consumes):
 *   queue_init          thread 0, once: the stages' barriers
 *   issue (generated)   thread 0: record whether the tile is bulk-copied, then either
 *                       arm the stage's barrier with the byte count and start one bulk copy
 *                       per staged column, or just arrive (the consumers will load that tile
 *                       from global memory themselves: a ragged last tile, a column that is
 *                       not 16-byte aligned, or a GPU older than sm_90); copies that must
 *                       land with the tile whatever the path (sl_tile.cuh issue_tile: the
 *                       tile's segment index entries) are armed first by queue_expect_more
 *   queue_wait          every thread, before reading a stage
 * Each stage's barrier completes exactly one phase per use, so the k-th tile a block
 * handles waits on stage k % STAGES with parity (k / STAGES) & 1.
 *
 * Shared memory the copy engine writes was read (and, for output staging, written) by
 * ordinary instructions during the previous tile: every thread fences the async proxy
 * (`fence.proxy.async`) before the end-of-tile barrier, and only after that barrier does
 * thread 0 start a copy into it.
 *
 * A host emulation of the kernels (tests/cuda_host, SL_HOST_EMULATION) takes the bulk-copy
 * path too, its mbarriers and copy engine emulated by sl_host_mbarrier_* and
 * sl_host_bulk_copy, so that it checks which tile each stage holds. */
#ifndef SL_PIPE_CUH
#define SL_PIPE_CUH

#include "sl_device.cuh"

#if defined(SL_HOST_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define SL_HAS_BULK_COPY 1
#else
#define SL_HAS_BULK_COPY 0
#endif

namespace sl {

/* The stages' barriers, the tile each stage holds and whether it was bulk-copied. */
template <int STAGES> struct tile_queue {
    unsigned long long full[STAGES];
    long long tile[STAGES];
    int bulk[STAGES];
};

__device__ __forceinline__ unsigned smem_address(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

template <int STAGES> __device__ __forceinline__ void queue_init(tile_queue<STAGES> &q) {
#if defined(SL_HOST_EMULATION)
    for (int s = 0; s < STAGES; s++) sl_host_mbarrier_init(&q.full[s], 1);
    sl_host_fence_proxy_async();
#elif SL_HAS_BULK_COPY
#pragma unroll
    for (int s = 0; s < STAGES; s++)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&q.full[s])) : "memory");
    /* make the initialised barriers visible to the copy engine */
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
    (void)q;
#endif
}

/* Arms stage `s` for `bytes` bytes of bulk copies (counts as the stage's one arrival). */
template <int STAGES>
__device__ __forceinline__ void queue_expect(tile_queue<STAGES> &q, int s, unsigned bytes) {
#if defined(SL_HOST_EMULATION)
    sl_host_mbarrier_arrive_expect_tx(&q.full[s], bytes);
#elif SL_HAS_BULK_COPY
    unsigned long long state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state)
                 : "r"(smem_address(&q.full[s])), "r"(bytes)
                 : "memory");
    (void)state;
#else
    (void)q; (void)s; (void)bytes;
#endif
}

/* Adds `bytes` of bulk copies to stage `s`'s current phase without arriving: called before
 * the phase's one arrival (queue_expect or queue_arrive), so that the phase cannot complete
 * before those copies land (issue_tile's segment index entries). */
template <int STAGES>
__device__ __forceinline__ void queue_expect_more(tile_queue<STAGES> &q, int s, unsigned bytes) {
#if defined(SL_HOST_EMULATION)
    sl_host_mbarrier_expect_tx(&q.full[s], bytes);
#elif SL_HAS_BULK_COPY
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(
                     smem_address(&q.full[s])),
                 "r"(bytes)
                 : "memory");
#else
    (void)q; (void)s; (void)bytes;
#endif
}

/* Completes stage `s`'s phase without copies (the tile is loaded from global memory). */
template <int STAGES>
__device__ __forceinline__ void queue_arrive(tile_queue<STAGES> &q, int s) {
#if defined(SL_HOST_EMULATION)
    sl_host_mbarrier_arrive_expect_tx(&q.full[s], 0);
#elif SL_HAS_BULK_COPY
    unsigned long long state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];"
                 : "=l"(state)
                 : "r"(smem_address(&q.full[s]))
                 : "memory");
    (void)state;
#else
    (void)q; (void)s;
#endif
}

/* One bulk copy global -> shared of `bytes` bytes (both addresses 16-byte aligned, bytes a
 * multiple of 16), counted against stage `s`'s barrier. */
template <int STAGES>
__device__ __forceinline__ void bulk_load(tile_queue<STAGES> &q, int s, void *dst, const void *src,
                                          unsigned bytes) {
#if defined(SL_HOST_EMULATION)
    sl_host_bulk_copy(dst, src, bytes, &q.full[s]);
#elif SL_HAS_BULK_COPY
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            smem_address(dst)),
        "l"(src), "r"(bytes), "r"(smem_address(&q.full[s]))
        : "memory");
#else
    (void)q; (void)s; (void)dst; (void)src; (void)bytes;
#endif
}

/* Waits until stage `s` holds its tile (every thread). */
template <int STAGES>
__device__ __forceinline__ void queue_wait(tile_queue<STAGES> &q, int s, unsigned parity) {
#if defined(SL_HOST_EMULATION)
    sl_host_mbarrier_wait_parity(&q.full[s], parity);
#elif SL_HAS_BULK_COPY
    const unsigned bar = smem_address(&q.full[s]);
    unsigned done = 0;
    for (;;) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
        if (done) break;
    }
#else
    (void)q; (void)s; (void)parity;
#endif
}

/* Orders this thread's ordinary shared-memory accesses before later copy-engine writes. */
__device__ __forceinline__ void fence_async_proxy() {
#if defined(SL_HOST_EMULATION)
    sl_host_fence_proxy_async();
#elif SL_HAS_BULK_COPY
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* Whether tile [tile_first, tile_first + tile_rows) can be bulk-copied: a whole tile (the
 * ragged last one is loaded element by element) on a GPU with the copy engine. Column
 * alignment is checked by the caller. */
__device__ __forceinline__ bool bulk_tile(long long tile_first, long long rows, long long tile_rows) {
    return SL_HAS_BULK_COPY && tile_first + tile_rows <= rows;
}

/* A thread's ITEMS consecutive elements from a column's tile in shared memory (the tile as
 * the copy engine wrote it: row r at element r). 16-byte reads of consecutive threads would
 * fall on the same banks (a thread's run is CH 16-byte chunks, so threads t and t + 8/CH
 * share banks); each thread therefore starts at chunk (t / (8/CH)) mod CH and goes round,
 * which spreads every 8-thread phase over all 32 banks, and the chunks are put back in
 * order with selects (registers cannot be indexed at run time). */
template <typename T, int ITEMS, class Items>
__device__ __forceinline__ void load_staged(const T *tile_col, Items &v) {
    constexpr int BYTES = (int)sizeof(T) * ITEMS;
    const T *src = tile_col + (long long)threadIdx.x * ITEMS;
    if constexpr (BYTES % 16 == 0 && BYTES / 16 <= 8) {
        constexpr int CH = BYTES / 16;
        const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
        uint4 got[CH], put[CH];
        if constexpr (CH == 1) {
            got[0] = s4[0];
            put[0] = got[0];
        } else {
            const int rot = (int)(threadIdx.x / (8 / CH)) & (CH - 1);
#pragma unroll
            for (int j = 0; j < CH; j++) got[j] = s4[(j + rot) & (CH - 1)];
            /* got[j] is chunk (j + rot) mod CH: chunk c is got[(c - rot) mod CH] */
#pragma unroll
            for (int c = 0; c < CH; c++) {
                put[c] = got[c];
#pragma unroll
                for (int r = 1; r < CH; r++)
                    if (rot == r) put[c] = got[(c - r) & (CH - 1)];
            }
        }
        memcpy(raw_of(v), &put[0], sizeof(T) * ITEMS);
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) v[i] = src[i];
    }
}

} /* namespace sl */

#endif
