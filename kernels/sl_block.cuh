/* sl_block.cuh — block-wide exclusive scan of one state per thread: a warp scan by
 * shuffles, the warp totals through shared memory, and each thread folding the totals of
 * the warps before its own (WARPS is small, 8 for 256 threads, so a serial fold beats a
 * second level of shuffles and needs one barrier only: __syncthreads, or named barrier BAR
 * over the BLOCK threads that scan). Returns the thread's exclusive prefix within the block
 * and the block's aggregate. */
#ifndef SL_BLOCK_CUH
#define SL_BLOCK_CUH

#include "sl_warp.cuh"

namespace sl {

template <typename T, int BLOCK> struct block_scan_storage {
    T warp_total[BLOCK / 32];
};

/* WORDS: the words of T the warp scan moves (sl_warp.cuh, shfl_up); the others must be the
 * same in every thread's x and in `identity`. */
template <typename T, int BLOCK, int BAR = 0, typename Op, int WORDS = words_of<T>::value>
__device__ __forceinline__ void block_exclusive_scan(block_scan_storage<T, BLOCK> &storage, T x,
                                                     T identity, Op op, T &exclusive,
                                                     T &aggregate) {
    constexpr int WARPS = BLOCK / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T inclusive = warp_inclusive_scan<T, Op, WORDS>(x, lane, op);
    T left = shfl_up<T, WORDS>(inclusive, 1);
    if (lane == 31) storage.warp_total[warp] = inclusive;
    block_sync<BAR, BLOCK>();
    T warp_prefix = identity;
    T total = identity;
#pragma unroll
    for (int w = 0; w < WARPS; w++) {
        if (w == warp) warp_prefix = total;
        total = op(total, storage.warp_total[w]);
    }
    exclusive = lane == 0 ? warp_prefix : op(warp_prefix, left);
    aggregate = total;
}

} /* namespace sl */

#endif
