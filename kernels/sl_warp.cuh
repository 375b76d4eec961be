/* sl_warp.cuh — warp-level building blocks over any monoid state: shuffles of a whole state
 * (word by word), and the inclusive scan of 32 lanes by shuffles (Kogge-Stone: log2(32)
 * steps, each lane combining the value `d` lanes to its left with its own). The combine
 * functor is never assumed commutative: the left operand is always the earlier lane. And the
 * warp's least and total of a 32-bit count (warp_min_u32, warp_sum_u32). */
#ifndef SL_WARP_CUH
#define SL_WARP_CUH

#include "sl_device.cuh"

namespace sl {

static constexpr unsigned FULL_MASK = 0xffffffffu;

/* The state `delta` lanes to the left. WORDS < all of T's words: only the first WORDS move,
 * the rest stay the lane's own — for callers whose states agree there in every lane (the
 * batch constants of thread folds, sl_tile.cuh), which then cost no shuffles. */
template <typename T, int WORDS = words_of<T>::value>
__device__ __forceinline__ T shfl_up(const T &v, int delta) {
    static_assert(WORDS >= 1 && WORDS <= words_of<T>::value, "words to move");
    uint32_t w[words_of<T>::value];
    to_words(v, w);
#pragma unroll
    for (int k = 0; k < WORDS; k++) w[k] = __shfl_up_sync(FULL_MASK, w[k], delta);
    return from_words<T>(w);
}

/* The state of lane `lane`. WORDS: as shfl_up. */
template <typename T, int WORDS = words_of<T>::value>
__device__ __forceinline__ T shfl_idx(const T &v, int lane) {
    static_assert(WORDS >= 1 && WORDS <= words_of<T>::value, "words to move");
    uint32_t w[words_of<T>::value];
    to_words(v, w);
#pragma unroll
    for (int k = 0; k < WORDS; k++) w[k] = __shfl_sync(FULL_MASK, w[k], lane);
    return from_words<T>(w);
}

/* Inclusive scan across the warp; every lane of the warp must call it. WORDS: as shfl_up. */
template <typename T, typename Op, int WORDS = words_of<T>::value>
__device__ __forceinline__ T warp_inclusive_scan(T x, int lane, Op op) {
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        T left = shfl_up<T, WORDS>(x, d);
        if (lane >= d) x = op(left, x);
    }
    return x;
}

/* The warp's least and total of a 32-bit value (one instruction each from sm_80 on). */
__device__ __forceinline__ unsigned warp_min_u32(unsigned v) {
#if !defined(SL_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_min_sync(FULL_MASK, v);
#else
    for (int d = 16; d > 0; d >>= 1) {
        const unsigned o = __shfl_sync(FULL_MASK, v, (int)((threadIdx.x & 31) ^ (unsigned)d));
        v = o < v ? o : v;
    }
    return v;
#endif
}
__device__ __forceinline__ unsigned warp_sum_u32(unsigned v) {
#if !defined(SL_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_add_sync(FULL_MASK, v);
#else
    for (int d = 16; d > 0; d >>= 1) v += __shfl_sync(FULL_MASK, v, (int)((threadIdx.x & 31) ^ (unsigned)d));
    return v;
#endif
}

} /* namespace sl */

#endif
