/* sl_lookback.cuh — the grid level: tiles (whose index the generated kernels take from an
 * atomic counter, so a tile never waits on one that has not started) publish their
 * aggregate and find their exclusive prefix by decoupled look-back over the tile states of
 * their predecessors (Merrill & Garland, "Single-pass Parallel Prefix Scan with Decoupled
 * Look-back"). The state is any monoid tuple the generated kernel defines; the combine
 * functor is never assumed commutative. Tile indices and row offsets are 64-bit.
 *
 * The look-back is done by one warp: its 32 lanes read a window of preceding tile states
 * at once (several per lane), wait until none is unpublished, take everything after the
 * nearest inclusive prefix, fold it with a warp scan (left stays left) and either stop (an
 * inclusive prefix was seen) or move the window further left. Tile 0 starts from the carry
 * of the previous batch instead. Memory layout of the states: see sl_scratch.h.
 *
 * Which tiles are inclusive when a look-back reads them depends on timing, so this fast
 * look-back combines the same operands in an association that changes from run to run.
 * For exact operators (integers, min/max, bitwise, count, flags) every association gives
 * the same bits; for float sums, products and recurrences and for declared operators it
 * does not. `determinism: run_to_run` therefore uses the ordered look-back below for such
 * states: the exclusive prefix of every tile is defined by one fixed association over the
 * tiles' aggregates and the carry (chunks of 32 tiles scanned by a warp's fixed tree, the
 * chunks folded left to right: lookback_exclusive_ordered), and the look-back computes exactly
 * that: the only inclusive states are the chunks' prefixes, each the value the fold has
 * there, so the result is the same bits whichever tiles happened to finish first. */
#ifndef SL_LOOKBACK_CUH
#define SL_LOOKBACK_CUH

#include "sl_block.cuh"
#include "sl_scratch.h"
#include "sl_trace.cuh"

namespace sl {

/* ---- L2-coherent word access (the look-back must not read stale L1 lines) -----------
 * Relaxed at GPU scope: the states are written and read by blocks of one kernel on one
 * device, so nothing wider is needed, and on the H200 these measured 0-1% faster than
 * volatile accesses (relaxed at system scope; bench/RESULTS.md, twenty-first session).
 * A host emulation of the kernels (tests/cuda_host, SL_HOST_EMULATION: host threads play a
 * block) gets the same accesses as atomics: each one indivisible, as the device's are. */

#if defined(SL_HOST_EMULATION)
#define SL_HOST_WORD_(T, p) reinterpret_cast<T *>(const_cast<uint32_t *>(p))
__device__ __forceinline__ void store_relaxed_u64(uint64_t *p, uint64_t v) {
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ uint64_t load_relaxed_u64(const uint64_t *p) {
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ void store_relaxed_v4(uint32_t *p, const uint32_t (&w)[4]) {
    unsigned __int128 x;
    memcpy(&x, w, sizeof x);
    __atomic_store_n(SL_HOST_WORD_(unsigned __int128, p), x, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ void load_relaxed_v4(const uint32_t *p, uint32_t (&w)[4]) {
    const unsigned __int128 x = __atomic_load_n(SL_HOST_WORD_(unsigned __int128, p), __ATOMIC_SEQ_CST);
    memcpy(w, &x, sizeof x);
}
__device__ __forceinline__ void store_relaxed_v2u64(uint64_t *p, uint64_t a, uint64_t b) {
    __atomic_store_n(p, a, __ATOMIC_SEQ_CST);
    __atomic_store_n(p + 1, b, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ void load_relaxed_v2u64(const uint64_t *p, uint64_t &a, uint64_t &b) {
    a = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    b = __atomic_load_n(p + 1, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ void store_relaxed_u32(uint32_t *p, uint32_t v) {
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ uint32_t load_relaxed_u32(const uint32_t *p) {
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}
__device__ __forceinline__ void store_release_u32(uint32_t *p, uint32_t v) {
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
__device__ __forceinline__ void fence_acquire() { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
#undef SL_HOST_WORD_
#else
__device__ __forceinline__ void store_relaxed_u64(uint64_t *p, uint64_t v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t load_relaxed_u64(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_relaxed_v4(uint32_t *p, const uint32_t (&w)[4]) {
    asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]),
                 "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
}
__device__ __forceinline__ void load_relaxed_v4(const uint32_t *p, uint32_t (&w)[4]) {
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(p)
                 : "memory");
}
/* Two 8-byte words in one 16-byte access; each word is indivisible (what the tagged
 * states rely on), the pair need not be. */
__device__ __forceinline__ void store_relaxed_v2u64(uint64_t *p, uint64_t a, uint64_t b) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void load_relaxed_v2u64(const uint64_t *p, uint64_t &a, uint64_t &b) {
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
__device__ __forceinline__ void store_relaxed_u32(uint32_t *p, uint32_t v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_relaxed_u32(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
/* A state's status after its words (states too wide for one word with their status): the
 * writer's release store, and the reader's acquire fence after the loads that saw it (the
 * PTX memory model's release and fence-acquire patterns; both lighter than __threadfence,
 * which is fence.sc). */
__device__ __forceinline__ void store_release_u32(uint32_t *p, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void fence_acquire() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
#endif

/* A state that absorbs what lies left of it: op(x, s) == s, bit for bit, for every x — a
 * segmented scan's state once its span holds a segment head (its values restart there, the
 * flag is set whatever x holds). A look-back that reads such a state needs nothing before
 * it, whichever association it uses: every fold whose last operand absorbs is that operand.
 * The generated Op says which states absorb (ABSORBS, absorbs()); others absorb none. */
template <typename Op, typename = void> struct op_absorbs {
    static constexpr bool value = false;
};
template <typename Op> struct op_absorbs<Op, decltype((void)Op::ABSORBS)> {
    static constexpr bool value = Op::ABSORBS;
};
template <typename Op, typename T> __device__ __forceinline__ bool absorbs(const T &v) {
    if constexpr (op_absorbs<Op>::value) return Op::absorbs(v);
    else return ((void)v, false);
}

/* Only a state's payload (sl_device.cuh, payload_of) travels through the tile states, so a
 * padded state still fits one 16-byte word with its status. (The scratch is sized by
 * sizeof(T): never too small.) The layouts (sl_scratch.h):
 *   PACKING 8, 16  status and payload in one 8- or 16-byte word;
 *   PACKING 32     tagged words: payload word k in the low half of 8-byte word k, the status
 *                  in every high half. A reader that sees different statuses among a
 *                  state's words (its inclusive prefix half written over its aggregate)
 *                  takes it as unpublished and reads again. One round trip and no fence for
 *                  states of 13 to 32 bytes (a count beside a kept-row count, a segmented
 *                  sum with its flags, a small recurrence);
 *   PACKING 0      a status array, then one array of aggregates and one of inclusive
 *                  prefixes; the status is written after the state, behind a release. */

/* The tile states of one look-back phase, carved from scratch (see sl_scratch.h). */
template <typename T> struct tile_states {
    static constexpr int PAYLOAD = payload_of<T>::value;
    static constexpr int PACKING = PAYLOAD <= 4 ? 8 : PAYLOAD <= 12 ? 16 : PAYLOAD <= 32 ? 32 : 0;
    static constexpr int W = words_of<T>::value;
    static constexpr int PW = (PAYLOAD + 3) / 4; /* words that carry data */
    static constexpr int TW = (PW + 1) / 2 * 2;  /* PACKING 32: tagged words a tile */
    /* States a lane reads in the look-back's first window and in each one after it
       (lookback_exclusive). Tagged states take 2 as the separate arrays do: at 4 the
       look-back spilled under the overlapped loop's 56-register cap and measured slower
       (bench/RESULTS.md, eleventh session). */
    static constexpr int K_FIRST = PACKING == 8 || PACKING == 16 ? 4 : 2;
    static constexpr int K_NEXT = PACKING == 8 ? 8 : PACKING == 16 ? 4 : 2;
    unsigned char *base;
    int64_t ntiles;

    /* `v` as a reader of its published state gets it back: in the packed layouts the words
       past the payload (batch constants, which those do not carry) read as zeros. */
    __device__ __forceinline__ static T as_read(const T &v) {
        if constexpr (PACKING == 0) return v;
        uint32_t w[W];
        to_words(v, w);
#pragma unroll
        for (int k = PW; k < W; k++) w[k] = 0;
        return from_words<T>(w);
    }

    __device__ __forceinline__ void publish(int64_t tile, uint32_t status, const T &v) const {
        if constexpr (PACKING == 8) {
            uint32_t w[W];
            to_words(v, w);
            store_relaxed_u64(reinterpret_cast<uint64_t *>(base) + tile,
                               ((uint64_t)status << 32) | w[0]);
        } else if constexpr (PACKING == 16) {
            uint32_t w[4] = {status, 0, 0, 0};
            uint32_t vw[W];
            to_words(v, vw);
#pragma unroll
            for (int k = 0; k < PW; k++) w[1 + k] = vw[k];
            store_relaxed_v4(reinterpret_cast<uint32_t *>(base) + 4 * tile, w);
        } else if constexpr (PACKING == 32) {
            uint32_t vw[W];
            to_words(v, vw);
            uint64_t *at = reinterpret_cast<uint64_t *>(base) + (int64_t)TW * tile;
            const uint64_t tag = (uint64_t)status << 32;
#pragma unroll
            for (int k = 0; k < TW; k += 2)
                store_relaxed_v2u64(at + k, tag | vw[k], tag | (k + 1 < PW ? vw[k + 1] : 0u));
        } else {
            uint32_t *status_words = reinterpret_cast<uint32_t *>(base);
            uint32_t *values = values_of(status);
            uint32_t vw[W];
            to_words(v, vw);
            /* a state's words start on a 4-byte boundary: sizeof(T) > 12 here and the
               generator pads states to a multiple of 4 bytes */
#pragma unroll
            for (int k = 0; k < W; k++) store_relaxed_u32(values + (int64_t)W * tile + k, vw[k]);
            store_release_u32(status_words + tile, status);
        }
    }

    /* PACKING 0: the status words, then an array of aggregates and one of inclusive states. */
    __device__ __forceinline__ uint32_t *values_of(uint32_t status) const {
        return reinterpret_cast<uint32_t *>(
            base + sl_scratch_align((unsigned long long)ntiles * 4ull) +
            (status == SL_STATUS_INCLUSIVE ? sl_scratch_align((unsigned long long)ntiles * sizeof(T))
                                           : 0ull));
    }
    /* PACKING 0, in two steps so that a window's loads go out together: the status (no
       ordering), then, after one fence_acquire for the window, the state it announces. */
    __device__ __forceinline__ uint32_t read_status(int64_t tile) const {
        return load_relaxed_u32(reinterpret_cast<const uint32_t *>(base) + tile);
    }
    __device__ __forceinline__ T read_value(int64_t tile, uint32_t status) const {
        const uint32_t *values = values_of(status);
        uint32_t vw[W];
#pragma unroll
        for (int k = 0; k < W; k++) vw[k] = load_relaxed_u32(values + (int64_t)W * tile + k);
        return from_words<T>(vw);
    }

    /* One non-blocking read: status SL_STATUS_INVALID means not yet published. */
    __device__ __forceinline__ void read(int64_t tile, uint32_t &status, T &v) const {
        if constexpr (PACKING == 8) {
            uint64_t word = load_relaxed_u64(reinterpret_cast<const uint64_t *>(base) + tile);
            status = (uint32_t)(word >> 32);
            uint32_t w[W] = {};
            w[0] = (uint32_t)word;
            v = from_words<T>(w);
        } else if constexpr (PACKING == 16) {
            uint32_t w[4];
            load_relaxed_v4(reinterpret_cast<const uint32_t *>(base) + 4 * tile, w);
            status = w[0];
            uint32_t vw[W] = {};
#pragma unroll
            for (int k = 0; k < PW; k++) vw[k] = w[1 + k];
            v = from_words<T>(vw);
        } else if constexpr (PACKING == 32) {
            const uint64_t *at = reinterpret_cast<const uint64_t *>(base) + (int64_t)TW * tile;
            uint64_t x[TW];
#pragma unroll
            for (int k = 0; k < TW; k += 2) load_relaxed_v2u64(at + k, x[k], x[k + 1]);
            status = (uint32_t)(x[0] >> 32);
            bool same = true;
#pragma unroll
            for (int k = 1; k < TW; k++) same = same && (uint32_t)(x[k] >> 32) == status;
            if (!same) status = SL_STATUS_INVALID; /* half written over: read again */
            uint32_t vw[W] = {};
#pragma unroll
            for (int k = 0; k < PW; k++) vw[k] = (uint32_t)x[k];
            v = from_words<T>(vw);
        } else {
            status = read_status(tile);
            if (status == SL_STATUS_INVALID) return;
            fence_acquire();
            v = read_value(tile, status);
        }
    }
};

/* Backs off until `status` is published; `reread` reads it (and whatever comes with it) again. */
template <typename F> __device__ __forceinline__ void wait_published(const uint32_t &status, F reread) {
    int backoff = 8;
    while (status == SL_STATUS_INVALID) {
        __nanosleep(backoff);
        if (backoff < 256) backoff *= 2;
        reread();
    }
}

/* Backs off until all K statuses are published; `reread(j)` reads state j (and whatever
 * comes with it) again. Every poll rereads all the states still unpublished at once, so a
 * thread waits one round trip a poll, not one a state: waited one state at a time (as
 * wait_published does), a thread whose K states were all unpublished at the first read pays
 * K round trips in turn, even when they have all been published meanwhile. Every window
 * uses it: the block-wide one (bench/RESULTS.md, seventeenth session, runs 4-5: 288 threads of
 * 2-4 states each took 6,000-14,000 cycles where every state they read was published within
 * about 1,000 of the first read) and the look-back warp's (twenty-first session: the
 * segmented sums, recurrences, wide sums and cull 3-8% faster, nothing slower). */
template <int K, typename F>
__device__ __forceinline__ void wait_published_all(const uint32_t (&status)[K], F reread) {
    int backoff = 8;
    for (;;) {
        bool waiting = false;
#pragma unroll
        for (int j = 0; j < K; j++) waiting = waiting || status[j] == SL_STATUS_INVALID;
        if (!waiting) return;
        __nanosleep(backoff);
        if (backoff < 256) backoff *= 2;
#pragma unroll
        for (int j = 0; j < K; j++)
            if (status[j] == SL_STATUS_INVALID) reread(j);
    }
}

/* Returns once `tile`'s state is published, polled from one lane (a long backoff: the caller
 * is early). The overlapped loop's look-back warp starts a tile's look-back as soon as the
 * tile is taken, when its nearest predecessors are still being reduced: polled from every
 * lane of a window, their states put hundreds of loads a poll on the memory system for
 * nothing (bench/RESULTS.md, twenty-second session). Once the nearest one is published, the
 * window's others as a rule are too. Called by all 32 lanes of a warp. */
template <typename T>
__device__ __forceinline__ void wait_published_before(const tile_states<T> &states, int64_t tile) {
    if ((threadIdx.x & 31) == 0 && tile >= 0) {
        uint32_t status;
        T v;
        states.read(tile, status, v);
        int backoff = 64;
        while (status == SL_STATUS_INVALID) {
            __nanosleep(backoff);
            if (backoff < 1024) backoff *= 2;
            states.read(tile, status, v);
        }
    }
    __syncwarp();
}

/* The K consecutive states from `lane_first` (those before tile 0 as inclusive identities),
 * polling all the unpublished ones together until none is (wait_published_all). */
template <int K, typename T>
__device__ __forceinline__ void read_states(const tile_states<T> &states, int64_t lane_first,
                                            T identity, uint32_t (&status)[K], T (&v)[K]) {
    if constexpr (tile_states<T>::PACKING == 0) {
        /* statuses first, all of them, then one fence, then the states they announce */
#pragma unroll
        for (int j = 0; j < K; j++)
            status[j] = lane_first + j >= 0 ? states.read_status(lane_first + j) : SL_STATUS_INCLUSIVE;
        wait_published_all<K>(status, [&](int j) { status[j] = states.read_status(lane_first + j); });
        fence_acquire();
#pragma unroll
        for (int j = 0; j < K; j++)
            v[j] = lane_first + j >= 0 ? states.read_value(lane_first + j, status[j]) : identity;
        return;
    }
#pragma unroll
    for (int j = 0; j < K; j++) {
        status[j] = SL_STATUS_INCLUSIVE; /* before tile 0: tile 0 is always inclusive */
        v[j] = identity;
        if (lane_first + j >= 0) states.read(lane_first + j, status[j], v[j]);
    }
    wait_published_all<K>(status, [&](int j) { states.read(lane_first + j, status[j], v[j]); });
}

/* Lane l reads the K consecutive states [window_end - 32K + 1 + lK, ... + K) of one window
 * with K independent loads issued together (one L2 round trip for the whole window, not K)
 * and waits for any that are unpublished. States before tile 0 read as inclusive identities
 * (tile 0 is always inclusive). */
template <int K, typename T>
__device__ __forceinline__ void read_window(const tile_states<T> &states, int64_t window_end,
                                            T identity, uint32_t (&status)[K], T (&v)[K]) {
    const int lane = threadIdx.x & 31;
    read_states<K>(states, window_end - (int64_t)(32 * K - 1) + (int64_t)lane * K, identity,
                   status, v);
}

/* One window of the look-back, once read (lookback_window: read_window): each lane folds
 * its states from the last inclusive one among them; the warp then folds the lanes from the
 * last lane holding an inclusive state and puts the result left of `exclusive`. Returns
 * whether an inclusive prefix was found (the look-back is done). Left stays left
 * throughout. */
template <int K, typename T, typename Op>
__device__ __forceinline__ bool fold_window(const uint32_t (&status)[K], const T (&v)[K],
                                            T identity, Op op, T &exclusive) {
    const int lane = threadIdx.x & 31;
    T folded = identity;
    bool has_inclusive = false;
#pragma unroll
    for (int j = 0; j < K; j++) {
        if (status[j] == SL_STATUS_INCLUSIVE || absorbs<Op>(v[j])) {
            folded = v[j]; /* everything before it is already inside v, or absorbed by it */
            has_inclusive = true;
        } else {
            folded = op(folded, v[j]);
        }
    }
    const unsigned inclusive_lanes = __ballot_sync(FULL_MASK, has_inclusive);
    const int start = inclusive_lanes ? 31 - __clz((int)inclusive_lanes) : 0;
    T x = lane >= start ? folded : identity;
    x = warp_inclusive_scan(x, lane, op);
    exclusive = op(shfl_idx(x, 31), exclusive);
    return inclusive_lanes != 0;
}

/* One window of the look-back: read_window, then fold_window. */
template <int K, typename T, typename Op>
__device__ __forceinline__ bool lookback_window(const tile_states<T> &states, int64_t window_end,
                                                T identity, Op op, T &exclusive) {
    uint32_t status[K];
    T v[K];
    read_window<K>(states, window_end, identity, status, v);
    return fold_window<K>(status, v, identity, op, exclusive);
}

/* The exclusive prefix of `tile` (> 0) from its predecessors; called by all 32 lanes of
 * one warp, returns the same value in every lane.
 *
 * How far back the nearest inclusive prefix lies grows with the tiles in flight: a tile
 * becomes inclusive only when its own look-back ends, so at full speed (hundreds of blocks,
 * tens of tiles taken per microsecond) the look-back must fold the aggregates of the last
 * hundreds of tiles, and each window costs one L2 round trip (1-2 microseconds when memory
 * is busy). So the windows are wide: 4 states per lane, then 8 (128, then 256 tiles per
 * round trip); fewer for states that need a 16-byte word (4, then 4) and for larger ones (2,
 * then 2), for the registers their loads hold: tile_states::K_FIRST and K_NEXT.
 * Narrower windows read state by state made the look-back the bottleneck on the H200, and
 * twice these widths for the look-back warp measured worse: the round trips are not the
 * whole cost of an iteration (bench/RESULTS.md, runs 10-11). */
template <typename T, typename Op>
__device__ __noinline__ T lookback_exclusive(const tile_states<T> &states, int64_t tile,
                                             T identity, Op op) {
    constexpr int K_FIRST = tile_states<T>::K_FIRST, K_NEXT = tile_states<T>::K_NEXT;
    T exclusive = identity;
    int64_t window_end = tile - 1;
    if (lookback_window<K_FIRST>(states, window_end, identity, op, exclusive)) return exclusive;
    window_end -= 32 * K_FIRST;
    while (!lookback_window<K_NEXT>(states, window_end, identity, op, exclusive))
        window_end -= 32 * K_NEXT;
    return exclusive;
}

/* lookback_exclusive's loop from the window that ends at `window_end` (< 0: nothing left of
 * it, the identity): what lies left of a window already folded (lookback_window_block). */
template <typename T, typename Op>
__device__ __noinline__ T lookback_exclusive_from(const tile_states<T> &states, int64_t window_end,
                                                  T identity, Op op) {
    constexpr int K_NEXT = tile_states<T>::K_NEXT;
    T exclusive = identity;
    while (!lookback_window<K_NEXT>(states, window_end, identity, op, exclusive))
        window_end -= 32 * K_NEXT;
    return exclusive;
}

/* The states a thread reads in lookback_window_block (a function of its own, so these loads
 * do not count against the overlapped loop's registers): 8-byte states 4, 16- and 32-byte
 * ones 2 (1152 or 576 tiles a window for a block of 288 threads), states in separate arrays 1. */
template <typename T>
constexpr int block_window_states() {
    return tile_states<T>::PACKING == 8 ? 4 : tile_states<T>::PACKING == 0 ? 1 : 2;
}

/* The last tile left of `tile`'s block-wide window of NT threads: where a look-back goes on
 * when that window held no inclusive state (lookback_exclusive_from's window_end). */
template <typename T, int NT>
__device__ __forceinline__ int64_t before_block_window(int64_t tile) {
    return tile - 1 - (int64_t)block_window_states<T>() * NT;
}

/* One window read by all NT threads of a block (a multiple of 32) at once: the
 * R * NT = block_window_states<T>() * NT states that end at `tile` - 1, a block's first look-back:
 * when every block starts its first tile at about the same time, the aggregates before it
 * are all published within a round trip of each other, and one wide read finds the
 * nearest inclusive prefix (tile 0's, as a rule) where a warp's windows would wait for the
 * tiles between to finish their own look-backs, level after level. Thread i folds its
 * R states from the last inclusive one among them, each warp its lanes (as lookback_window),
 * and every thread then folds the warps' results from the last warp that saw an inclusive
 * state, so all of them return the same: whether an inclusive state was found, and in
 * `window` the fold of the states after it (of all of them when none was). `warp_vals`
 * and `warp_inclusive` are shared arrays of NT / 32 entries; the call holds one barrier and
 * the caller must pass another before it uses them again. Left stays left throughout. */
template <int NT, typename T, typename Op>
__device__ __noinline__ bool lookback_window_block(const tile_states<T> &states, int64_t tile,
                                                      T identity, Op op, T *warp_vals,
                                                      unsigned *warp_inclusive, T &window) {
    constexpr int R = block_window_states<T>(), NW = NT / 32;
    static_assert(NT % 32 == 0, "a block window is read by whole warps");
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    uint32_t status[R];
    T v[R];
    read_states<R>(states, tile - (int64_t)R * NT + (int64_t)threadIdx.x * R, identity, status,
                            v);
    T folded = identity;
    bool has_inclusive = false;
#pragma unroll
    for (int j = 0; j < R; j++) {
        if (status[j] == SL_STATUS_INCLUSIVE || absorbs<Op>(v[j])) {
            folded = v[j];
            has_inclusive = true;
        } else {
            folded = op(folded, v[j]);
        }
    }
    const unsigned inclusive_lanes = __ballot_sync(FULL_MASK, has_inclusive);
    const int start = inclusive_lanes ? 31 - __clz((int)inclusive_lanes) : 0;
    T x = lane >= start ? folded : identity;
    x = warp_inclusive_scan(x, lane, op);
    if (lane == 31) {
        warp_vals[warp] = x;
        warp_inclusive[warp] = inclusive_lanes != 0;
    }
    __syncthreads();
    int from = 0;
#pragma unroll
    for (int w = 0; w < NW; w++)
        if (warp_inclusive[w]) from = w;
    T acc = identity;
    for (int w = from; w < NW; w++) acc = op(acc, warp_vals[w]);
    window = acc;
    return warp_inclusive[from] != 0;
}

/* ---- the ordered look-back (determinism: run_to_run) ---------------------------------- */

/* Chunks of this many tiles (a warp's lanes) fix the association of the ordered prefixes. */
static constexpr int ORDERED_CHUNK = 32;

/* The chunk total T_c = S_c[31] of K consecutive chunks at once, folded in chunk order into
 * `acc` (Q of the chunk before the first): lane l reads tile 32c + l of each chunk c (K loads
 * issued together: one round trip for the K chunks), waits until all are published (they are
 * all predecessors, taken and reduced without waiting on anything), scans each chunk by
 * warp_inclusive_scan, then folds the K totals one at a time. A chunk whose last tile has
 * published its inclusive state Q_c replaces acc with it: it is the value the fold has there.
 * Chunks past `last_chunk` are left out. */
template <int K, typename T, typename Op>
__device__ __forceinline__ T fold_chunks_ordered(const tile_states<T> &states, int64_t first_chunk,
                                                 int64_t last_chunk, T acc, T identity, Op op) {
    const int lane = threadIdx.x & 31;
    uint32_t status[K];
    T v[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        status[k] = SL_STATUS_AGGREGATE; /* a chunk left out: nothing to wait for */
        v[k] = identity;
        if (first_chunk + k <= last_chunk)
            states.read((first_chunk + k) * ORDERED_CHUNK + lane, status[k], v[k]);
    }
    wait_published_all<K>(status, [&](int k) {
        states.read((first_chunk + k) * ORDERED_CHUNK + lane, status[k], v[k]);
    });
    T total[K];
#pragma unroll
    for (int k = 0; k < K; k++) total[k] = shfl_idx(warp_inclusive_scan(v[k], lane, op), 31);
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (first_chunk + k > last_chunk) break;
        const unsigned inclusive = status[k] == SL_STATUS_INCLUSIVE ? 1u : 0u;
        const bool closed = __shfl_sync(FULL_MASK, inclusive, 31) != 0;
        acc = closed ? shfl_idx(v[k], 31) : op(acc, total[k]);
    }
    return acc;
}

/* Q_c of chunk `chunk` (>= -1) where every chunk's last tile publishes its chunk's total T_c
 * (SL_STATUS_TOTAL) once the chunk's aggregates are in, before its own look-back, and Q_c
 * after it (the phase trait CHUNK_TOTALS): lane l reads the last tile of chunk `hi` - l, 32
 * chunks a round trip, until a window holds a published Q (or reaches the carry, Q_-1); the
 * totals of the chunks after the nearest Q are then folded onto it in chunk order, one
 * combine a chunk, from the same reads. A chunk end whose total is not yet published is read
 * again until it is; its closing tile needs nothing but its chunk's aggregates for it. T_c is
 * the chunk's warp scan that fold_chunks_ordered computes (ordered_chunk_total), so the bits
 * are the same either way. */
template <typename T, typename Op, typename Carry>
__device__ __forceinline__ T chunk_prefix_totals(const tile_states<T> &states, int64_t chunk,
                                                 Carry carry, T identity, Op op,
                                                 substep_clock &sub) {
    const int lane = threadIdx.x & 31;
    uint32_t status;
    T v;
    auto read_end = [&](int64_t c) {
        status = SL_STATUS_INVALID;
        v = identity;
        if (c >= 0) {
            states.read(c * ORDERED_CHUNK + (ORDERED_CHUNK - 1), status, v);
        } else if (c == -1) {
            status = SL_STATUS_INCLUSIVE;
            v = carry();
        }
    };
    int64_t hi = chunk; /* lane l holds chunk hi - l's end */
    int nearest;        /* the lane of the nearest Q */
    for (;;) {
        read_end(hi - lane);
        const unsigned closed = __ballot_sync(FULL_MASK, status == SL_STATUS_INCLUSIVE);
        if (closed) {
            nearest = 31 - __clz((int)(closed & (0u - closed)));
            break;
        }
        hi -= 32;
    }
    sub.mark<1>();
    T q = shfl_idx(v, nearest);
    for (int after = nearest;;) { /* lanes [0, after) hold chunks after the one q closes */
        int backoff = 8;
        for (;;) {
            const bool ready =
                lane >= after || status == SL_STATUS_TOTAL || status == SL_STATUS_INCLUSIVE;
            if (__ballot_sync(FULL_MASK, !ready) == 0) break;
            __nanosleep(backoff);
            if (backoff < 256) backoff *= 2;
            if (!ready) read_end(hi - lane);
        }
        for (int l = after - 1; l >= 0; l--) {
            const bool inclusive = __shfl_sync(FULL_MASK, status, l) == SL_STATUS_INCLUSIVE;
            const T x = shfl_idx(v, l);
            q = inclusive ? x : op(q, x);
        }
        if (hi == chunk) break;
        hi += 32;
        after = 32;
        read_end(hi - lane);
    }
    return q;
}

/* Q_c of chunk `chunk` (>= -1; Q_-1 is the carry, `carry()` reads it): from the nearest chunk at
 * or before it whose last tile has published Q (32 chunk ends read a round trip), then the
 * totals of the chunks after that one, folded in order, K_NEXT chunks a round trip (8 for
 * 8-byte states: the scan 0.5-1% faster than with 4, in both modes; 16 spilled and ran 15%
 * slower: bench/RESULTS.md, twenty-first session); with TOTALS, chunk_prefix_totals. */
template <bool TOTALS, typename T, typename Op, typename Carry>
__device__ __forceinline__ T chunk_prefix_ordered(const tile_states<T> &states, int64_t chunk,
                                                  Carry carry, T identity, Op op,
                                                  substep_clock &sub) {
    if constexpr (TOTALS) return chunk_prefix_totals(states, chunk, carry, identity, op, sub);
    constexpr int K = tile_states<T>::K_NEXT;
    const int lane = threadIdx.x & 31;
    int64_t nearest = chunk; /* the window's chunk ends: nearest - lane */
    T q = identity;
    for (;;) {
        const int64_t end_of = nearest - lane;
        uint32_t status = SL_STATUS_INVALID;
        T v = identity;
        if (end_of >= 0) {
            states.read(end_of * ORDERED_CHUNK + (ORDERED_CHUNK - 1), status, v);
        } else if (end_of == -1) {
            status = SL_STATUS_INCLUSIVE;
            v = carry();
        }
        const unsigned closed = __ballot_sync(FULL_MASK, status == SL_STATUS_INCLUSIVE);
        if (closed) {
            const int at = 31 - __clz((int)(closed & (0u - closed))); /* the nearest */
            q = shfl_idx(v, at);
            nearest -= at;
            break;
        }
        nearest -= 32;
    }
    sub.mark<1>();
    for (int64_t first = nearest + 1; first <= chunk; first += K)
        q = fold_chunks_ordered<K>(states, first, chunk, q, identity, op);
    sub.mark<2>();
    return q;
}

/* What a chunk's closing tile (tile mod 32 = 31) keeps from its ordered look-back until its
 * own aggregate is known: its lane's operand of the chunk's warp scan, Q_c-1, and whether
 * S_c[30] absorbed everything left of it (Q_c-1 then needless). */
template <typename T> struct ordered_chunk_close {
    T lane_value;
    T q;
    bool absorbed;
};

/* T_c = S_c[31] of the chunk that `aggregate`'s tile closes (tile mod 32 = 31), from the
 * lane values its lookback_exclusive_ordered read: the chunk's warp scan again with the
 * tile's aggregate in its lane, as the chunk's readers scan it (fold_chunks_ordered), so the
 * bits agree. Called by all 32 lanes of one warp. */
template <typename T, typename Op>
__device__ __forceinline__ T ordered_chunk_total(const ordered_chunk_close<T> &close,
                                                 const T &aggregate, Op op) {
    const int lane = threadIdx.x & 31;
    const T v = lane == ORDERED_CHUNK - 1 ? tile_states<T>::as_read(aggregate) : close.lane_value;
    return shfl_idx(warp_inclusive_scan(v, lane, op), ORDERED_CHUNK - 1);
}

/* The exclusive prefix E_j of `tile` under the association that timing cannot change
 * (determinism: run_to_run). Tiles form chunks of 32; with l = tile mod 32, c = tile / 32 and
 * A_j the tiles' aggregates:
 *   S_c[l] = warp_inclusive_scan of A_32c .. A_32c+l (a fixed tree of combines),
 *   Q_-1 = the carry, Q_c = Q_c-1 (+) S_c[31],
 *   E_j = Q_c-1 when l = 0, else Q_c-1 (+) S_c[l-1].
 * Every tile publishes its aggregate (tile 0 too); a chunk's last tile alone publishes an
 * inclusive state, Q_c (ordered_chunk_inclusive, once its aggregate is known). So a look-back
 * does one dependent combine a chunk, not one a tile (the left fold P_j = P_j-1 (+) A_j it
 * replaced cost run_to_run 12-50% of the fast mode's speed), and a state it reads is Q
 * itself or an aggregate, whichever tiles happened to finish first. It waits for the
 * aggregates of its own chunk before it looks for Q: by then the previous chunk's Q is as a
 * rule published (reading the chunk ends first found older ones and folded more: slower by
 * 12-34%). Figures: bench/RESULTS.md, nineteenth session.
 * E_j does not need the tile's own aggregate, so the look-back may run before the tile is
 * reduced. Called by all 32 lanes of one warp; returns the same in every lane. `carry()`
 * reads the state before the batch (only when Q_-1 is needed); `close` is what
 * ordered_chunk_inclusive needs when the tile closes its chunk. TOTALS (chunk_prefix_totals):
 * a tile that closes its chunk publishes the chunk's total T_c from `aggregate`, its own,
 * once it has read the chunk's others; other tiles' `aggregate` is not read. */
template <bool TOTALS, typename T, typename Op, typename Carry>
__device__ __noinline__ T lookback_exclusive_ordered(const tile_states<T> &states, int64_t tile,
                                                     Carry carry, T identity, Op op,
                                                     ordered_chunk_close<T> &close,
                                                     T aggregate) {
    const int lane = threadIdx.x & 31;
    const int64_t chunk = tile / ORDERED_CHUNK;
    const int at = (int)(tile % ORDERED_CHUNK);
    substep_clock sub; /* SL_TRACE: 0 the chunk's own tiles, 1 the search, 2 the folds */
    uint32_t status = SL_STATUS_AGGREGATE;
    /* lanes from the tile's on are unused by the lanes before it; the tile's own lane takes
       its aggregate in ordered_chunk_inclusive */
    T v = identity;
    if (lane < at) {
        const int64_t before = chunk * ORDERED_CHUNK + lane;
        states.read(before, status, v);
        wait_published(status, [&] { states.read(before, status, v); });
    }
    const T scanned = warp_inclusive_scan(v, lane, op);
    const T within = shfl_idx(scanned, at > 0 ? at - 1 : 0);
    close.lane_value = v;
    close.q = identity;
    /* S_c[l-1] that absorbs makes Q_c-1 needless: E_j is S_c[l-1] itself, and Q_c (which
       folds the tile's own aggregate after it) absorbs as well */
    close.absorbed = at > 0 && absorbs<Op>(within);
    if constexpr (TOTALS)
        if (at == ORDERED_CHUNK - 1) {
            const T total = ordered_chunk_total(close, aggregate, op);
            if (lane == 0) states.publish(tile, SL_STATUS_TOTAL, total);
        }
    sub.mark<0>();
    if (close.absorbed) return within;
    const T q = chunk_prefix_ordered<TOTALS>(states, chunk - 1, carry, identity, op, sub);
    close.q = q;
    return at == 0 ? q : op(q, within);
}

/* Q_c of the chunk that `aggregate`'s tile closes (tile mod 32 = 31), from what its
 * lookback_exclusive_ordered kept and the chunk's total (ordered_chunk_total). Called by all
 * 32 lanes of the warp that did the look-back. */
template <typename T, typename Op>
__device__ __forceinline__ T ordered_chunk_inclusive(const ordered_chunk_close<T> &close,
                                                     const T &aggregate, Op op) {
    const T total = ordered_chunk_total(close, aggregate, op);
    return close.absorbed ? total : op(close.q, total);
}

/* The whole block finds the tile's exclusive prefix. `aggregate` is the tile's reduction
 * (the same in every thread), `carry()` reads the state before this batch (for tile 0, and
 * for the ordered look-back when it reaches the batch's start). Publishes the tile's
 * aggregate, then its inclusive prefix (ORDERED: a chunk's last tile its Q,
 * lookback_exclusive_ordered; with TOTALS its chunk's total before), and returns the
 * exclusive prefix in every thread.
 * `broadcast` is a shared slot; the call ends with a barrier. */
template <bool ORDERED = false, bool TOTALS = false, typename T, typename Op, typename Carry>
__device__ __forceinline__ T tile_exclusive_prefix(const tile_states<T> &states, int64_t tile,
                                                   Carry carry, const T &aggregate,
                                                   T identity, Op op, T *broadcast) {
    if (threadIdx.x < 32) {
        T exclusive;
        if constexpr (ORDERED) {
            if (threadIdx.x == 0) states.publish(tile, SL_STATUS_AGGREGATE, aggregate);
            ordered_chunk_close<T> close;
            exclusive = lookback_exclusive_ordered<TOTALS>(states, tile, carry, identity, op, close,
                                                           aggregate);
            if (tile % ORDERED_CHUNK == ORDERED_CHUNK - 1) {
                const T closed = ordered_chunk_inclusive(close, aggregate, op);
                if (threadIdx.x == 0) states.publish(tile, SL_STATUS_INCLUSIVE, closed);
            }
        } else {
            if (tile == 0) {
                exclusive = threadIdx.x == 0 ? carry() : identity;
            } else {
                if (threadIdx.x == 0) states.publish(tile, SL_STATUS_AGGREGATE, aggregate);
                exclusive = lookback_exclusive(states, tile, identity, op);
            }
            if (threadIdx.x == 0) states.publish(tile, SL_STATUS_INCLUSIVE, op(exclusive, aggregate));
        }
        if (threadIdx.x == 0) *broadcast = exclusive;
    }
    __syncthreads();
    return *broadcast;
}

} /* namespace sl */

#endif
