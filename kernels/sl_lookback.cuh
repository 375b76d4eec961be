/* sl_lookback.cuh — the grid level: tiles take their index from an atomic counter (so a
 * tile never waits on one that has not started), publish their aggregate, and find their
 * exclusive prefix by decoupled look-back over the tile states of their predecessors
 * (Merrill & Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back"). The
 * state is any monoid tuple the generated kernel defines; the combine functor is never
 * assumed commutative. Tile indices and row offsets are 64-bit.
 *
 * The look-back is done by one warp: its 32 lanes read the 32 preceding tile states at
 * once, wait until none is unpublished, take everything after the nearest inclusive prefix,
 * fold it with a warp scan (left stays left) and either stop (an inclusive prefix was seen)
 * or move the window 32 tiles further left. Tile 0 starts from the carry of the previous
 * batch instead. Memory layout of the states: see sl_scratch.h. */
#ifndef SL_LOOKBACK_CUH
#define SL_LOOKBACK_CUH

#include "sl_block.cuh"
#include "sl_scratch.h"

namespace sl {

/* ---- L2-coherent word access (the look-back must not read stale L1 lines) ----------- */

__device__ __forceinline__ void store_volatile_u64(uint64_t *p, uint64_t v) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t load_volatile_u64(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_volatile_v4(uint32_t *p, const uint32_t (&w)[4]) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]),
                 "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
}
__device__ __forceinline__ void load_volatile_v4(const uint32_t *p, uint32_t (&w)[4]) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p)
                 : "memory");
}
__device__ __forceinline__ void store_volatile_u32(uint32_t *p, uint32_t v) {
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_volatile_u32(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* The tile states of one look-back phase, carved from scratch (see sl_scratch.h). */
template <typename T> struct tile_states {
    static constexpr int PACKING = sizeof(T) <= 4 ? 8 : sizeof(T) <= 12 ? 16 : 0;
    static constexpr int W = words_of<T>::value;
    unsigned char *base;
    int64_t ntiles;

    __device__ __forceinline__ void publish(int64_t tile, uint32_t status, const T &v) const {
        if constexpr (PACKING == 8) {
            uint32_t w[1];
            to_words(v, w);
            store_volatile_u64(reinterpret_cast<uint64_t *>(base) + tile,
                               ((uint64_t)status << 32) | w[0]);
        } else if constexpr (PACKING == 16) {
            uint32_t w[4] = {status, 0, 0, 0};
            uint32_t vw[W];
            to_words(v, vw);
#pragma unroll
            for (int k = 0; k < W; k++) w[1 + k] = vw[k];
            store_volatile_v4(reinterpret_cast<uint32_t *>(base) + 4 * tile, w);
        } else {
            uint32_t *status_words = reinterpret_cast<uint32_t *>(base);
            uint32_t *values = reinterpret_cast<uint32_t *>(
                base + sl_scratch_align((unsigned long long)ntiles * 4ull) +
                (status == SL_STATUS_INCLUSIVE
                     ? sl_scratch_align((unsigned long long)ntiles * sizeof(T))
                     : 0ull));
            uint32_t vw[W];
            to_words(v, vw);
            /* a state's words start on a 4-byte boundary: sizeof(T) > 12 here and the
               generator pads states to a multiple of 4 bytes */
#pragma unroll
            for (int k = 0; k < W; k++) store_volatile_u32(values + (int64_t)W * tile + k, vw[k]);
            __threadfence();
            store_volatile_u32(status_words + tile, status);
        }
    }

    /* One non-blocking read: status SL_STATUS_INVALID means not yet published. */
    __device__ __forceinline__ void read(int64_t tile, uint32_t &status, T &v) const {
        if constexpr (PACKING == 8) {
            uint64_t word = load_volatile_u64(reinterpret_cast<const uint64_t *>(base) + tile);
            status = (uint32_t)(word >> 32);
            uint32_t w[1] = {(uint32_t)word};
            v = from_words<T>(w);
        } else if constexpr (PACKING == 16) {
            uint32_t w[4];
            load_volatile_v4(reinterpret_cast<const uint32_t *>(base) + 4 * tile, w);
            status = w[0];
            uint32_t vw[W];
#pragma unroll
            for (int k = 0; k < W; k++) vw[k] = w[1 + k];
            v = from_words<T>(vw);
        } else {
            const uint32_t *status_words = reinterpret_cast<const uint32_t *>(base);
            status = load_volatile_u32(status_words + tile);
            if (status == SL_STATUS_INVALID) return;
            __threadfence();
            const uint32_t *values = reinterpret_cast<const uint32_t *>(
                base + sl_scratch_align((unsigned long long)ntiles * 4ull) +
                (status == SL_STATUS_INCLUSIVE
                     ? sl_scratch_align((unsigned long long)ntiles * sizeof(T))
                     : 0ull));
            uint32_t vw[W];
#pragma unroll
            for (int k = 0; k < W; k++) vw[k] = load_volatile_u32(values + (int64_t)W * tile + k);
            v = from_words<T>(vw);
        }
    }
};

/* The exclusive prefix of `tile` (> 0) from its predecessors; called by all 32 lanes of
 * one warp, returns the same value in every lane.
 *
 * The first window is the 32 nearest predecessors (one state per lane): usually enough.
 * When it holds no inclusive prefix the nearest one tends to be far back (at full speed
 * hundreds of tiles are in flight), and each window costs an L2 round trip, so later
 * windows take 4 consecutive states per lane (128 tiles per round trip). A lane folds its
 * states from the last inclusive one among them; the warp then folds the lanes from the
 * last lane holding an inclusive state. Left stays left throughout. */
template <typename T, typename Op>
__device__ __noinline__ T lookback_exclusive(const tile_states<T> &states, int64_t tile,
                                             T identity, Op op) {
    const int lane = threadIdx.x & 31;
    T exclusive = identity;
    int64_t window_end = tile - 1;
    int per_lane = 1;
    for (;;) {
        const int64_t lane_first = window_end - (int64_t)(32 * per_lane - 1) + (int64_t)lane * per_lane;
        T folded = identity;
        bool has_inclusive = false;
#pragma unroll 1
        for (int j = 0; j < per_lane; j++) {
            const int64_t idx = lane_first + j;
            uint32_t status = SL_STATUS_INCLUSIVE;
            T v = identity;
            if (idx >= 0) {
                int backoff = 8;
                for (;;) {
                    states.read(idx, status, v);
                    if (status != SL_STATUS_INVALID) break;
                    __nanosleep(backoff);
                    if (backoff < 256) backoff *= 2;
                }
            }
            if (status == SL_STATUS_INCLUSIVE) {
                folded = v; /* everything before it is already inside v */
                has_inclusive = true;
            } else {
                folded = op(folded, v);
            }
        }
        const unsigned inclusive_lanes = __ballot_sync(FULL_MASK, has_inclusive);
        const int start = inclusive_lanes ? 31 - __clz((int)inclusive_lanes) : 0;
        T x = lane >= start ? folded : identity;
        x = warp_inclusive_scan(x, lane, op);
        exclusive = op(shfl_idx(x, 31), exclusive);
        if (inclusive_lanes) break;
        window_end -= 32 * per_lane;
        per_lane = 4;
    }
    return exclusive;
}

/* The whole block finds the tile's exclusive prefix. `aggregate` is the tile's reduction
 * (the same in every thread), `carry` the state before this batch (used by tile 0).
 * Publishes the tile's aggregate, then its inclusive prefix, and returns the exclusive
 * prefix in every thread. `broadcast` is a shared slot; the call ends with a barrier. */
template <typename T, typename Op>
__device__ __forceinline__ T tile_exclusive_prefix(const tile_states<T> &states, int64_t tile,
                                                   const T &carry, const T &aggregate,
                                                   T identity, Op op, T *broadcast) {
    if (threadIdx.x < 32) {
        T exclusive;
        if (tile == 0) {
            exclusive = carry;
        } else {
            if (threadIdx.x == 0) states.publish(tile, SL_STATUS_AGGREGATE, aggregate);
            exclusive = lookback_exclusive(states, tile, identity, op);
        }
        if (threadIdx.x == 0) {
            states.publish(tile, SL_STATUS_INCLUSIVE, op(exclusive, aggregate));
            *broadcast = exclusive;
        }
    }
    __syncthreads();
    return *broadcast;
}

/* The next tile index: one atomic per block, broadcast through shared memory. */
__device__ __forceinline__ int64_t next_tile(unsigned long long *counter,
                                             unsigned long long *broadcast) {
    if (threadIdx.x == 0) *broadcast = atomicAdd(counter, 1ull);
    __syncthreads();
    return (int64_t)*broadcast;
}

} /* namespace sl */

#endif
