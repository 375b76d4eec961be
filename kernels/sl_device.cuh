/* sl_device.cuh — the ground floor of sluice's device library: moving a trivially copyable
 * value through 32-bit words (the unit of shuffles and of L2-coherent loads and stores),
 * barriers over part of a block, and the blocked, vectorised loads and stores of a tile's
 * columns. Its integer types come from sl_stdint.h.
 *
 * Layering (each file includes the one below): sl_items -> sl_device -> sl_warp -> sl_block ->
 * sl_lookback -> sl_tile (with sl_pipe beside it). Generated kernels (core/cuda/codegen.c)
 * include sl_tile.cuh, sl_monoid.h and sl_ops.h; everything here is templates and inline
 * functions, so NVRTC instantiates only what a kernel uses. */
#ifndef SL_DEVICE_CUH
#define SL_DEVICE_CUH

#include "sl_items.cuh"
#include "sl_stdint.h"

namespace sl {

/* A barrier over THREADS threads of the block (whole warps): __syncthreads when BAR is 0,
 * else the named hardware barrier BAR (kernels that give one warp another role synchronise
 * their other threads among themselves this way, and hand values between the roles with
 * block_arrive; a host emulation of the kernels, tests/cuda_host, supplies
 * sl_host_named_barrier). */
template <int BAR, int THREADS> __device__ __forceinline__ void block_sync() {
    if constexpr (BAR == 0) {
        __syncthreads();
    } else {
#if defined(SL_HOST_EMULATION)
        sl_host_named_barrier(BAR, THREADS, true);
#else
        asm volatile("bar.sync %0, %1;" ::"n"(BAR), "n"(THREADS) : "memory");
#endif
    }
}

/* Counts the calling warp into named barrier BAR of THREADS threads without waiting for it
 * (`bar.arrive`): a producer's half of a hand-over whose consumers block_sync the same
 * barrier. What the warp wrote to shared memory before is visible to them after their sync.
 * A producer must not arrive again before the consumers' sync has completed the barrier
 * (the count would complete it without them): the caller's protocol guarantees it. */
template <int BAR, int THREADS> __device__ __forceinline__ void block_arrive() {
    static_assert(BAR != 0, "barrier 0 is __syncthreads");
#if defined(SL_HOST_EMULATION)
    sl_host_named_barrier(BAR, THREADS, false);
#else
    asm volatile("bar.arrive %0, %1;" ::"n"(BAR), "n"(THREADS) : "memory");
#endif
}

/* Programmatic dependent launch (sm_90+): the host may launch a fused kernel before the
 * kernel ahead of it on the stream has finished (core/cuda/fused.c), so that its launch and
 * its blocks' start overlap that kernel's last blocks. Every fused kernel calls this before
 * it touches global memory: it waits until the work ahead on the stream is complete and its
 * memory visible (a no-op when the launch was an ordinary one), then lets the next kernel's
 * launch begin. The host emulation and older GPUs run kernels in stream order only. */
__device__ __forceinline__ void wait_for_stream_and_release_next() {
#if !defined(SL_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The block's dynamic shared memory as `name`, an array of T: extern __shared__ on the device;
 * a host emulation of the kernels (tests/cuda_host, SL_HOST_EMULATION) supplies a block's
 * buffer from sl_host_dynamic_smem(). */
#if defined(SL_HOST_EMULATION)
#define SL_DYNAMIC_SMEM(T, name) T *const name = static_cast<T *>(sl_host_dynamic_smem())
#else
#define SL_DYNAMIC_SMEM(T, name) extern __shared__ T name[]
#endif

/* Number of 32-bit words a value of type T occupies when moved word by word. */
template <typename T> struct words_of {
    static constexpr int value = (int)((sizeof(T) + 3) / 4);
};

/* Bytes of a state that carry data: T::PAYLOAD_BYTES when the generated struct declares it
 * (the fields that rows set, laid out first: a state padded to its alignment, e.g. an i64
 * count and an f32 sum, 12 of 16 bytes; the batch constants after them), else sizeof(T). */
template <typename T, typename = void> struct payload_of {
    static constexpr int value = (int)sizeof(T);
};
template <typename T> struct payload_of<T, decltype((void)T::PAYLOAD_BYTES)> {
    static constexpr int value = T::PAYLOAD_BYTES;
};
/* The words of T that carry data (payload_of, rounded up). */
template <typename T> struct payload_words_of {
    static constexpr int value = (payload_of<T>::value + 3) / 4;
};

/* The set bits of a mask of either width (a compacting tile's KeepBits: 32 bits up to 32
 * items a thread, 64 above), so that the generator names the mask's type in one place. */
__device__ __forceinline__ int popcount(unsigned x) { return __popc(x); }
__device__ __forceinline__ int popcount(unsigned long long x) { return __popcll(x); }

template <typename T> __device__ __forceinline__ void to_words(const T &v, uint32_t *w) {
    w[words_of<T>::value - 1] = 0; /* defined padding bits for a size not a multiple of 4 */
    memcpy(w, &v, sizeof(T));
}
template <typename T> __device__ __forceinline__ T from_words(const uint32_t *w) {
    T v;
    memcpy(&v, w, sizeof(T));
    return v;
}

/* ---- blocked tile loads and stores ---------------------------------------------------
 * A thread owns ITEMS consecutive rows [first, first + ITEMS). In a full tile with a
 * suitably aligned column the ITEMS elements are moved with the widest vector access
 * (16, 8 or 4 bytes) that divides them; at the ragged end of a batch each element is
 * guarded by `rows`. Out-of-range elements are left untouched (callers treat them as
 * dead rows). */

template <int BYTES> struct vec_of;
template <> struct vec_of<16> { typedef uint4 type; };
template <> struct vec_of<8> { typedef uint2 type; };
template <> struct vec_of<4> { typedef uint32_t type; };
template <> struct vec_of<2> { typedef uint16_t type; };
template <> struct vec_of<1> { typedef uint8_t type; };

template <typename T, int ITEMS> struct vector_width {
    static constexpr int total = (int)sizeof(T) * ITEMS;
    static constexpr int value = total % 16 == 0 ? 16 : total % 8 == 0 ? 8 : total % 4 == 0 ? 4 : 0;
};

template <typename T, int ITEMS, class Items>
__device__ __forceinline__ void load_blocked(const T *__restrict__ col, int64_t first, int64_t rows, Items &v) {
    constexpr int W = vector_width<T, ITEMS>::value;
    const T *src = col + first;
    if (W != 0 && first + ITEMS <= rows && ((uintptr_t)src % (W ? W : 1)) == 0) {
        typedef typename vec_of<W ? W : 4>::type V;
        constexpr int NV = W ? (int)sizeof(T) * ITEMS / W : 1;
        V tmp[NV];
        const V *vs = reinterpret_cast<const V *>(src);
#pragma unroll
        for (int k = 0; k < NV; k++) tmp[k] = __ldg(vs + k);
        memcpy(raw_of(v), &tmp[0], sizeof(T) * ITEMS);
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; i++)
            if (first + i < rows) v[i] = src[i];
    }
}

/* ---- striped whole-tile loads ----------------------------------------------------------
 * For a fold that does not care which thread takes which rows (a commutative reduce:
 * kernels/sl_tile.cuh fold_block_tiles) the blocked layout's cost is pure waste: each
 * warp-wide 16-byte access of it touches half of 32 sectors, so L1 and L2 see every sector
 * twice. Here thread `slot` of `threads` instead takes the chunks slot, slot + threads,
 * slot + 2 * threads, ... of CHUNK consecutive rows each, so every warp-wide access reads
 * 32 * CHUNK * sizeof(T) contiguous bytes. Item k * CHUNK + j of the thread is row
 * tile_first + (k * threads + slot) * CHUNK + j. Every column of a group is loaded with the
 * same CHUNK, so item i of every column is the same row. Whole tiles only, and only where
 * striped_aligned holds for every column (the caller's check). */
template <typename T, int CHUNK> __device__ __forceinline__ bool striped_aligned(const T *col) {
    return ((uintptr_t)col % ((int)sizeof(T) * CHUNK)) == 0;
}

template <typename T, int ITEMS, int CHUNK, class Items>
__device__ __forceinline__ void load_striped(const T *__restrict__ col, int64_t tile_first, int slot,
                                             int threads, Items &v) {
    static_assert(ITEMS % CHUNK == 0, "a thread's items are whole chunks");
    constexpr int BYTES = (int)sizeof(T) * CHUNK;
    static_assert(BYTES == 1 || BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16,
                  "a chunk is one access of at most 16 bytes");
    typedef typename vec_of<BYTES>::type V;
    const V *vs = reinterpret_cast<const V *>(col + tile_first) + slot;
    V tmp[ITEMS / CHUNK];
#pragma unroll
    for (int k = 0; k < ITEMS / CHUNK; k++) tmp[k] = __ldg(vs + (int64_t)k * threads);
    memcpy(raw_of(v), &tmp[0], sizeof(T) * ITEMS);
}

template <typename T, int ITEMS, class Items>
__device__ __forceinline__ void store_blocked(T *__restrict__ col, int64_t first, int64_t rows, const Items &v) {
    constexpr int W = vector_width<T, ITEMS>::value;
    T *dst = col + first;
    if (W != 0 && first + ITEMS <= rows && ((uintptr_t)dst % (W ? W : 1)) == 0) {
        typedef typename vec_of<W ? W : 4>::type V;
        constexpr int NV = W ? (int)sizeof(T) * ITEMS / W : 1;
        V tmp[NV];
        memcpy(&tmp[0], raw_of(v), sizeof(T) * ITEMS);
        V *vd = reinterpret_cast<V *>(dst);
#pragma unroll
        for (int k = 0; k < NV; k++) vd[k] = tmp[k];
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; i++)
            if (first + i < rows) dst[i] = v[i];
    }
}

/* ---- staged tile stores -----------------------------------------------------------------
 * The blocked layout above makes each warp-wide 16-byte access touch every other half of
 * 32 sectors, so L1 and L2 see each sector twice (measured on the H200: L2 throughput 1.8x
 * DRAM throughput, DRAM at 38%). For full, 16-byte-aligned tiles the block instead
 * transposes the blocked layout through shared memory and writes the tile with perfectly
 * coalesced 16-byte stores (lane l of the block takes chunk k*BLOCK + l). Chunk c lives at
 * c ^ ((c >> 3) & 7): both the striped and the blocked access patterns are then free of
 * bank conflicts for 1, 2, 4 or 8 chunks per thread. The condition is uniform across the
 * block, so the barriers inside are safe. `buf` holds BLOCK * ITEMS * sizeof(T) bytes.
 * (Tiles come in through the copy engine instead: kernels/sl_pipe.cuh.) */
__device__ __forceinline__ int swizzle_chunk(int c) { return c ^ ((c >> 3) & 7); }

template <typename T, int ITEMS> struct staging {
    static constexpr int CHUNKS = (int)(sizeof(T) * ITEMS) / 16; /* per thread */
    static constexpr bool OK = (sizeof(T) * ITEMS) % 16 == 0 && CHUNKS >= 1 && CHUNKS <= 8;
};

template <typename T, int ITEMS, int BLOCK, int BAR = 0, class Items>
__device__ __forceinline__ void store_tile(T *__restrict__ col, int64_t tile_first, int64_t rows, const Items &v,
                                           uint4 *buf) {
    T *dst = col + tile_first;
    if constexpr (staging<T, ITEMS>::OK) {
        constexpr int CH = staging<T, ITEMS>::CHUNKS;
        if (tile_first + (int64_t)BLOCK * ITEMS <= rows && ((uintptr_t)dst % 16) == 0) {
            uint4 tmp[CH];
            memcpy(&tmp[0], raw_of(v), sizeof(T) * ITEMS);
            block_sync<BAR, BLOCK>(); /* the buffer may still be read by a previous transpose */
#pragma unroll
            for (int k = 0; k < CH; k++) buf[swizzle_chunk(threadIdx.x * CH + k)] = tmp[k];
            block_sync<BAR, BLOCK>();
            uint4 *d = reinterpret_cast<uint4 *>(dst);
#pragma unroll
            for (int k = 0; k < CH; k++) d[k * BLOCK + threadIdx.x] = buf[swizzle_chunk(k * BLOCK + threadIdx.x)];
            return;
        }
    }
    store_blocked<T, ITEMS>(col, tile_first + (int64_t)threadIdx.x * ITEMS, rows, v);
}

} /* namespace sl */

#endif
