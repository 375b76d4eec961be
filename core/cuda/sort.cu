// sort.cu — the radix sort launchers behind the `sort` stage (see core/cuda/sort.h for the
// strategies; kernels/sl_sortkey.h defines the key images, the same as the CPU's). Compiled
// by nvcc into the library; the only file that includes CUB's device-wide radix sort,
// instantiated eleven times and no more (sort.h lists them): each instantiation costs nvcc
// tens of seconds and CI builds on two cores.
#include <climits>
#include <cstring>

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include "cuda/sort.h"
#include "runtime/sortkey.h"

namespace {

constexpr int kThreads = 256;
constexpr size_t kAlign = 256;

size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// ---- device side: images, their inverse, gathers --------------------------------------
// The image of a key is kernels/sl_sortkey.h's; these kernels only load keys, apply it and
// pack or store the results.

struct pack_args {
    int nkeys;
    int kinds[SL_CUDA_SORT_MAX_KEYS];   // SL_SORTKEY_*
    int widths[SL_CUDA_SORT_MAX_KEYS];  // bits: 8, 16, 32, 64
    bool descending[SL_CUDA_SORT_MAX_KEYS];
    const void *cols[SL_CUDA_SORT_MAX_KEYS];
    bool narrowed;  // one key, bits [lo, hi) extracted
    int lo, hi;
};

// The bits of row `row` of a column of `width` bits, zero-extended.
__device__ __forceinline__ uint64_t load_bits(int width, const void *col, uint64_t row) {
    switch (width) {
    case 8: return static_cast<const uint8_t *>(col)[row];
    case 16: return static_cast<const uint16_t *>(col)[row];
    case 32: return static_cast<const uint32_t *>(col)[row];
    default: return static_cast<const uint64_t *>(col)[row];
    }
}

// img[i] = the packed image of row (perm ? perm[i] : i); first_perm, when given, receives
// the identity permutation (the first pass of PERMUTE writes it here, saving a launch).
template <typename Img>
__global__ void image_kernel(pack_args a, const uint32_t *__restrict__ perm, Img *__restrict__ img,
                             uint32_t *__restrict__ first_perm, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t row = perm ? perm[i] : i;
        uint64_t v = 0;
        for (int k = 0; k < a.nkeys; k++) {
            int w = a.widths[k];
            uint64_t u = sl_sortkey_image(a.kinds[k], w, load_bits(w, a.cols[k], row)) ^
                         sl_sortkey_flip(w, a.descending[k]);
            if (a.narrowed) {
                u = (u >> a.lo) & sl_sortkey_mask(a.hi - a.lo);
                w = a.hi - a.lo;
            }
            v = w >= 64 ? u : ((v << w) | u);
        }
        img[i] = static_cast<Img>(v);
        if (first_perm) first_perm[i] = static_cast<uint32_t>(i);
    }
}

// The single-key KEYS/PAIRS paths: one kind and width of key fixed at compile time and four
// rows per thread, all loaded before any is used, so each thread keeps several loads in
// flight (the generic kernels above have one, which ran at ~1.6 TB/s on the H200, run 3 of
// bench/RESULTS.md). Rows of a thread are blockDim apart: every load instruction of a warp
// is still coalesced.
constexpr int kRowsPerThread = 4;

template <int KIND, int WIDTH>
__global__ void image1_kernel(const void *__restrict__ col, bool descending,
                              uint32_t *__restrict__ img, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x * kRowsPerThread;
    const uint32_t flip = (uint32_t)sl_sortkey_flip(WIDTH, descending);
    for (uint64_t first = (uint64_t)blockIdx.x * blockDim.x * kRowsPerThread + threadIdx.x;
         first < n; first += stride) {
        uint32_t v[kRowsPerThread];
#pragma unroll
        for (int k = 0; k < kRowsPerThread; k++) {
            uint64_t i = first + (uint64_t)k * blockDim.x;
            v[k] = i < n ? (uint32_t)sl_sortkey_image(KIND, WIDTH, load_bits(WIDTH, col, i))
                         : 0u;
        }
#pragma unroll
        for (int k = 0; k < kRowsPerThread; k++) {
            uint64_t i = first + (uint64_t)k * blockDim.x;
            if (i < n) img[i] = v[k] ^ flip;
        }
    }
}

template <int KIND, int WIDTH>
__global__ void inverse1_kernel(const uint32_t *__restrict__ img, bool descending,
                                void *__restrict__ out, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x * kRowsPerThread;
    const uint32_t flip = (uint32_t)sl_sortkey_flip(WIDTH, descending);
    for (uint64_t first = (uint64_t)blockIdx.x * blockDim.x * kRowsPerThread + threadIdx.x;
         first < n; first += stride) {
        uint32_t u[kRowsPerThread];
#pragma unroll
        for (int k = 0; k < kRowsPerThread; k++) {
            uint64_t i = first + (uint64_t)k * blockDim.x;
            u[k] = i < n ? img[i] : 0u;
        }
#pragma unroll
        for (int k = 0; k < kRowsPerThread; k++) {
            uint64_t i = first + (uint64_t)k * blockDim.x;
            if (i >= n) continue;
            uint32_t v = (uint32_t)sl_sortkey_key(KIND, WIDTH, u[k] ^ flip);
            if (WIDTH == 8) static_cast<uint8_t *>(out)[i] = static_cast<uint8_t>(v);
            else if (WIDTH == 16) static_cast<uint16_t *>(out)[i] = static_cast<uint16_t>(v);
            else static_cast<uint32_t *>(out)[i] = v;
        }
    }
}

template <typename T>
__global__ void gather_kernel(const T *__restrict__ in, const uint32_t *__restrict__ perm,
                              T *__restrict__ out, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        out[i] = in[perm[i]];
}

unsigned grid_for(uint64_t n) {
    uint64_t blocks = (n + kThreads - 1) / kThreads;
    // A grid-stride loop covers the rest; 2^16 blocks of 256 threads fill any current GPU.
    return (unsigned)(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

// The keys of at most 32 bits, as (kind, width): one instantiation of each single-key kernel
// per pair (bool shares u8's).
#define SL_SORT_NARROW_KEYS(X)                                                               \
    X(SL_SORTKEY_UNSIGNED, 8) X(SL_SORTKEY_UNSIGNED, 16) X(SL_SORTKEY_UNSIGNED, 32)          \
    X(SL_SORTKEY_SIGNED, 8) X(SL_SORTKEY_SIGNED, 16) X(SL_SORTKEY_SIGNED, 32)                \
    X(SL_SORTKEY_FLOAT, 16) X(SL_SORTKEY_FLOAT, 32)

cudaError_t launch_image1(sluice_type type, const void *col, bool descending, uint32_t *img,
                          uint64_t n, cudaStream_t st) {
    unsigned g = grid_for((n + kRowsPerThread - 1) / kRowsPerThread);
    int kind = sl_sortkey_kind(type), width = sl_sortkey_bits(type);
#define SL_CASE_(K, W)                                                                       \
    if (kind == (K) && width == (W)) {                                                       \
        image1_kernel<K, W><<<g, kThreads, 0, st>>>(col, descending, img, n);                \
        return cudaGetLastError();                                                           \
    }
    SL_SORT_NARROW_KEYS(SL_CASE_)
#undef SL_CASE_
    return cudaErrorInvalidValue;
}

cudaError_t launch_inverse1(sluice_type type, const uint32_t *img, bool descending, void *out,
                            uint64_t n, cudaStream_t st) {
    unsigned g = grid_for((n + kRowsPerThread - 1) / kRowsPerThread);
    int kind = sl_sortkey_kind(type), width = sl_sortkey_bits(type);
#define SL_CASE_(K, W)                                                                       \
    if (kind == (K) && width == (W)) {                                                       \
        inverse1_kernel<K, W><<<g, kThreads, 0, st>>>(img, descending, out, n);              \
        return cudaGetLastError();                                                           \
    }
    SL_SORT_NARROW_KEYS(SL_CASE_)
#undef SL_CASE_
    return cudaErrorInvalidValue;
}

// ---- float keys: CUB's float sort, then the zero-run fix-up ------------------------------
// CUB's float sort ranks -0.0 as +0.0 and is stable, so its output differs from sluice's
// order only inside the run of zeros (sort.h). The fix-up finds the run, counts the rows that
// go first in it and rewrites it; every launch has a fixed grid and reads the run's bounds
// from scratch, so nothing is read back and the stream never waits.
//
// Fix-up scratch (native_float, at off_cub, over CUB's finished temporary storage):
//   u32 run[2 + fix_blocks]: run[0], run[1] the run's bounds [lo, hi); run[2 + b] how many
//                            of chunk b's rows go first;
//   PAIRS: u8 flags[max_rows], u32 values[max_rows]: the run's rows, copied out before the
//          rewrite moves them (row lo + i at i).
constexpr int kBoundsThreads = 256;  // two searches of 128 threads each
constexpr int kFixThreads = 256;
constexpr int kFixMaxBlocks = 1024;         // chunks of the run: one block each
constexpr int64_t kFixRowsPerBlock = 4096;  // fewer blocks for small sorts

template <typename Bits>
struct float_bits {
    static constexpr int width = (int)sizeof(Bits) * 8;
    static constexpr Bits minus_zero = (Bits)((Bits)1 << (width - 1));
    static constexpr Bits plus_zero = 0;
};

// The rank CUB sorts a float's bits by, as an unsigned number that ascends along the sorted
// output: sluice's ascending image with -0.0's image replaced by +0.0's (what
// ProcessFloatMinusZero does), inverted when descending. NaNs keep their images, so a
// search by rank never compares floats.
template <typename Bits>
__device__ __forceinline__ Bits cub_rank(Bits bits, bool descending) {
    using F = float_bits<Bits>;
    Bits img = (Bits)sl_sortkey_image(SL_SORTKEY_FLOAT, F::width, bits);
    const Bits minus_zero_img = (Bits)~F::minus_zero, plus_zero_img = F::minus_zero;
    if (img == minus_zero_img) img = plus_zero_img;
    return descending ? (Bits)~img : img;
}

// One block: run[0] = the rows ranked below zero, run[1] = those ranked at most zero, so the
// zeros are rows [run[0], run[1]). Threads [0, 128) find the first, [128, 256) the second at
// the same time, each by a 128-ary search: a step probes the last row of each of 128 equal
// chunks of the rows left, the chunks whose last row is below the bound (a prefix: the keys
// are sorted) are known to lie before it, and the search goes on in the first chunk that is
// not. 2^31 rows take five steps.
template <typename Bits>
__global__ void __launch_bounds__(kBoundsThreads)
zero_run_bounds(const Bits *__restrict__ keys, uint32_t n, bool descending, uint32_t *run) {
    constexpr int H = kBoundsThreads / 2, WARPS = H / 32;
    __shared__ uint32_t below_warp[2][WARPS];
    const int half = threadIdx.x / H, t = threadIdx.x % H;
    const Bits zero = cub_rank<Bits>(float_bits<Bits>::plus_zero, descending);
    // The bound lies in [a, b]: rows before a are below it, rows from b on are not.
    uint32_t a = 0, b = n;
    for (;;) {
        const bool open = a < b;  // the same in every thread of a half
        if (!__syncthreads_or(open)) break;
        uint32_t step = open ? (b - a + H - 1) / H : 0;
        bool below = false;
        if (open && (uint64_t)a + (uint64_t)t * step < b) {
            uint64_t end = (uint64_t)a + (uint64_t)(t + 1) * step;
            uint32_t last = (uint32_t)((end < b ? end : b) - 1);
            Bits r = cub_rank<Bits>(keys[last], descending);
            below = half == 0 ? r < zero : r <= zero;
        }
        unsigned ballot = __ballot_sync(0xffffffffu, below);
        if (threadIdx.x % 32 == 0) below_warp[half][t / 32] = (uint32_t)__popc(ballot);
        __syncthreads();
        uint32_t c = 0;  // chunks wholly below
        for (int w = 0; w < WARPS; w++) c += below_warp[half][w];
        __syncthreads();  // below_warp is rewritten by the next step
        if (open) {
            uint64_t first = (uint64_t)a + (uint64_t)c * step;
            if (first >= b) {
                a = b;  // every chunk below
            } else {
                // chunk c's last row is not below: the bound is at most that row
                uint64_t end = first + step;
                b = (uint32_t)((end < b ? end : b) - 1);
                a = (uint32_t)first;
            }
        }
    }
    if (t == 0) run[half] = a;
}

// Sum over the block of one value a thread (blockDim.x == kFixThreads); every thread gets it.
__device__ __forceinline__ uint32_t block_sum(uint32_t v, uint32_t *shared_warps) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) shared_warps[threadIdx.x / 32] = v;
    __syncthreads();
    uint32_t s = 0;
    for (int w = 0; w < kFixThreads / 32; w++) s += shared_warps[w];
    __syncthreads();
    return s;
}

// Block b's chunk of the run: run rows [len * b / G, len * (b + 1) / G).
__device__ __forceinline__ void fix_chunk(uint32_t len, uint32_t *first, uint32_t *end) {
    *first = (uint32_t)((uint64_t)len * blockIdx.x / gridDim.x);
    *end = (uint32_t)((uint64_t)len * (blockIdx.x + 1) / gridDim.x);
}

// run[2 + b] = the rows of chunk b that go first (-0.0 ascending, +0.0 descending). PAIRS
// (values given): the chunk's first-flags and values copied to flags[i], vcopy[i] for run row
// i, as the rewrite overwrites the rows in place.
template <typename Bits>
__global__ void __launch_bounds__(kFixThreads)
zero_run_count(const Bits *__restrict__ keys, const uint32_t *__restrict__ values, bool descending,
               uint32_t *__restrict__ run, uint8_t *__restrict__ flags, uint32_t *__restrict__ vcopy) {
    __shared__ uint32_t warps[kFixThreads / 32];
    const uint32_t lo = run[0], len = run[1] - run[0];
    if (len == 0) return;  // the common case: no zero
    const Bits goes_first = descending ? float_bits<Bits>::plus_zero : float_bits<Bits>::minus_zero;
    uint32_t first, end, count = 0;
    fix_chunk(len, &first, &end);
    for (uint32_t i = first + threadIdx.x; i < end; i += kFixThreads) {
        bool f = keys[lo + i] == goes_first;
        count += f;
        if (values) {
            flags[i] = f;
            vcopy[i] = values[lo + i];
        }
    }
    count = block_sum(count, warps);
    if (threadIdx.x == 0) run[2 + blockIdx.x] = count;
}

// The rewrite of the run: keys by position (the m rows that go first, then the others) and,
// for PAIRS, each value at its place in a stable partition (flagged rows in arrival order,
// then the others in arrival order). A block takes its chunk a tile of kFixThreads rows at a
// time, ranking the tile's flagged rows by a block-wide prefix of the flags.
template <typename Bits>
__global__ void __launch_bounds__(kFixThreads)
zero_run_rewrite(Bits *__restrict__ keys, uint32_t *__restrict__ values, bool descending,
                 const uint32_t *__restrict__ run, const uint8_t *__restrict__ flags,
                 const uint32_t *__restrict__ vcopy) {
    __shared__ uint32_t warps[kFixThreads / 32];
    const uint32_t lo = run[0], len = run[1] - run[0];
    if (len == 0) return;
    using F = float_bits<Bits>;
    const Bits goes_first = descending ? F::plus_zero : F::minus_zero;
    const Bits goes_last = descending ? F::minus_zero : F::plus_zero;
    // m: flagged rows in the run; before: those in earlier chunks
    uint32_t m = 0, before = 0;
    for (uint32_t c = threadIdx.x; c < gridDim.x; c += kFixThreads) {
        uint32_t k = run[2 + c];
        m += k;
        if (c < blockIdx.x) before += k;
    }
    m = block_sum(m, warps);
    before = block_sum(before, warps);
    uint32_t first, end;
    fix_chunk(len, &first, &end);
    for (uint32_t i = first + threadIdx.x; i < end; i += kFixThreads)
        keys[lo + i] = i < m ? goes_first : goes_last;
    if (!values) return;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (uint32_t base = first; base < end; base += kFixThreads) {  // uniform in the block
        const uint32_t i = base + threadIdx.x;
        const bool in = i < end;
        const bool f = in && flags[i];
        const uint32_t v = in ? vcopy[i] : 0u;
        const unsigned ballot = __ballot_sync(0xffffffffu, f);
        if (lane == 0) warps[warp] = (uint32_t)__popc(ballot);
        __syncthreads();
        uint32_t rank = (uint32_t)__popc(ballot & ((1u << lane) - 1u)), tile = 0;
        for (int w = 0; w < kFixThreads / 32; w++) {
            if (w < warp) rank += warps[w];
            tile += warps[w];
        }
        __syncthreads();
        if (in) {
            const uint32_t flagged_before = before + rank;  // flagged run rows before row i
            values[lo + (f ? flagged_before : m + (i - flagged_before))] = v;
        }
        before += tile;
    }
}

// ---- CUB: the eleven instantiations (sort.h lists them) ---------------------------------

template <typename N>
cudaError_t cub_keys_u32(void *tmp, size_t &bytes, const uint32_t *in, uint32_t *out, N n,
                         int lo, int hi, cudaStream_t st) {
    return cub::DeviceRadixSort::SortKeys(tmp, bytes, in, out, n, lo, hi, st);
}
template <typename K, typename N>
cudaError_t cub_pairs(void *tmp, size_t &bytes, const K *kin, K *kout, const uint32_t *vin,
                      uint32_t *vout, N n, int lo, int hi, cudaStream_t st) {
    return cub::DeviceRadixSort::SortPairs(tmp, bytes, kin, kout, vin, vout, n, lo, hi, st);
}

// CUB's float sorts (native_float): keys as floats, so CUB twiddles them itself. Each order
// is an instantiation of its own.
template <typename F>
cudaError_t cub_float_keys(bool descending, void *tmp, size_t &bytes, const F *in, F *out, int n,
                           cudaStream_t st) {
    if (descending)
        return cub::DeviceRadixSort::SortKeysDescending(tmp, bytes, in, out, n, 0,
                                                        (int)sizeof(F) * 8, st);
    return cub::DeviceRadixSort::SortKeys(tmp, bytes, in, out, n, 0, (int)sizeof(F) * 8, st);
}
cudaError_t cub_float_pairs(bool descending, void *tmp, size_t &bytes, const float *kin,
                            float *kout, const uint32_t *vin, uint32_t *vout, int n,
                            cudaStream_t st) {
    if (descending)
        return cub::DeviceRadixSort::SortPairsDescending(tmp, bytes, kin, kout, vin, vout, n, 0,
                                                         32, st);
    return cub::DeviceRadixSort::SortPairs(tmp, bytes, kin, kout, vin, vout, n, 0, 32, st);
}

// Dispatches on the row count: 32-bit counts while they fit (CUB's fastest offsets).
template <typename K>
cudaError_t pairs(void *tmp, size_t &bytes, const K *kin, K *kout, const uint32_t *vin,
                  uint32_t *vout, int64_t n, int lo, int hi, cudaStream_t st) {
    if (n <= INT_MAX)
        return cub_pairs<K, int>(tmp, bytes, kin, kout, vin, vout, (int)n, lo, hi, st);
    return cub_pairs<K, int64_t>(tmp, bytes, kin, kout, vin, vout, n, lo, hi, st);
}

size_t pairs_bytes_for(bool wide, int64_t max_rows, int bits, cudaError_t *err) {
    size_t best = 0;
    // Both row-count widths may run when max_rows passes INT_MAX: size for the larger.
    int64_t sizes[2] = {max_rows < INT_MAX ? max_rows : INT_MAX, max_rows};
    for (int64_t n : sizes) {
        size_t b = 0;
        cudaError_t e = wide ? pairs<uint64_t>(nullptr, b, nullptr, nullptr, nullptr, nullptr, n,
                                               0, bits, 0)
                             : pairs<uint32_t>(nullptr, b, nullptr, nullptr, nullptr, nullptr, n,
                                               0, bits, 0);
        if (e != cudaSuccess) *err = e;
        if (b > best) best = b;
    }
    return best;
}

}  // namespace

extern "C" sluice_status sl_cuda_sort_prepare(sl_cuda_sort *s, const sl_cuda_sort_desc *d,
                                              int64_t max_rows) {
    if (!s || !d || !d->types || d->nkeys < 1 || d->nkeys > SL_CUDA_SORT_MAX_KEYS ||
        d->ncolumns < d->nkeys || max_rows < 0 || max_rows > SL_CUDA_SORT_MAX_ROWS)
        return SLUICE_ERR_INVALID_ARGUMENT;
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows < 1 ? 1 : max_rows;
    s->ncolumns = d->ncolumns;
    s->nkeys = d->nkeys;
    s->value_column = -1;
    for (int k = 0; k < d->nkeys; k++) {
        if (d->keys[k] < 0 || d->keys[k] >= d->ncolumns) return SLUICE_ERR_INVALID_ARGUMENT;
        s->keys[k] = d->keys[k];
        s->key_types[k] = d->types[d->keys[k]];
        s->descending[k] = d->descending || d->key_descending[k];
        if (sluice_type_size(s->key_types[k]) == 0) return SLUICE_ERR_INVALID_ARGUMENT;
    }
    int w0 = sl_sortkey_bits(s->key_types[0]);
    s->bits_lo = d->nkeys == 1 ? d->bits_lo : 0;
    s->bits_hi = d->nkeys == 1 ? d->bits_hi : w0;
    if (s->bits_lo < 0 || s->bits_hi > w0 || s->bits_lo >= s->bits_hi) {
        if (d->nkeys != 1 || (d->bits_lo == 0 && d->bits_hi == 0)) {
            s->bits_lo = 0;
            s->bits_hi = w0;
        } else {
            return SLUICE_ERR_INVALID_ARGUMENT;
        }
    }

    // Strategy: one key of at most 32 bits sorts its images directly (and carries one 4-byte
    // column as CUB's values); everything else sorts a permutation.
    int others = d->ncolumns - 1;
    int other = -1;
    for (int c = 0; c < d->ncolumns; c++)
        if (c != d->keys[0]) other = c;
    // Float keys CUB sorts itself (sort.h): one f32 key alone or with one 4-byte column, one
    // f64 key alone; full width, 32-bit row counts.
    sluice_type kt = s->key_types[0];
    bool value4 = others == 1 && sluice_type_size(d->types[other]) == 4;
    s->native_float = d->nkeys == 1 && s->bits_lo == 0 && s->bits_hi == w0 &&
                      max_rows <= INT_MAX &&
                      ((kt == SLUICE_F32 && (others == 0 || value4)) ||
                       (kt == SLUICE_F64 && others == 0));
    if (d->nkeys == 1 && (w0 <= 32 || s->native_float) && others == 0 && max_rows <= INT_MAX)
        s->strategy = SL_CUDA_SORT_KEYS;
    else if (d->nkeys == 1 && w0 <= 32 && value4)
        s->strategy = SL_CUDA_SORT_PAIRS, s->value_column = other;
    else
        s->strategy = SL_CUDA_SORT_PERMUTE;
    s->identity_image = s->key_types[0] == SLUICE_U32 && !s->descending[0];

    cudaError_t err = cudaSuccess;
    size_t n = (size_t)s->max_rows, off = 0;
    if (s->native_float) {
        bool desc = s->descending[0];
        int rows = (int)s->max_rows;
        if (kt == SLUICE_F64)
            err = cub_float_keys<double>(desc, nullptr, s->cub_bytes, nullptr, nullptr, rows, 0);
        else if (s->strategy == SL_CUDA_SORT_KEYS)
            err = cub_float_keys<float>(desc, nullptr, s->cub_bytes, nullptr, nullptr, rows, 0);
        else
            err = cub_float_pairs(desc, nullptr, s->cub_bytes, nullptr, nullptr, nullptr, nullptr,
                                  rows, 0);
        int64_t blocks = (s->max_rows + kFixRowsPerBlock - 1) / kFixRowsPerBlock;
        s->fix_blocks = (int)(blocks < kFixMaxBlocks ? blocks : kFixMaxBlocks);
        s->fix_bytes = align_up((2 + (size_t)s->fix_blocks) * 4);
        if (s->strategy == SL_CUDA_SORT_PAIRS) s->fix_bytes += align_up(n) + align_up(n * 4);
        if (err != cudaSuccess) return SLUICE_ERR_CUDA;
        s->off_cub = 0;
        s->scratch_bytes = align_up(s->cub_bytes > s->fix_bytes ? s->cub_bytes : s->fix_bytes);
        return SLUICE_OK;
    }
    if (s->strategy != SL_CUDA_SORT_PERMUTE) {
        int lo = s->bits_lo, hi = s->bits_hi;
        if (s->strategy == SL_CUDA_SORT_KEYS) {
            err = cub_keys_u32<int>(nullptr, s->cub_bytes, nullptr, nullptr, (int)n, lo, hi, 0);
        } else {
            s->cub_bytes = pairs_bytes_for(false, s->max_rows, hi, &err);
        }
        if (!s->identity_image) {
            s->off_img_in = off, off = align_up(off + n * 4);
            s->off_img_out = off, off = align_up(off + n * 4);
        }
    } else {
        // Packs of at most 64 bits, filled from the least significant key upwards.
        int k = d->nkeys - 1;
        bool wide = false;
        while (k >= 0) {
            sl_cuda_sort_pack *p = &s->packs[s->npacks++];
            p->bits = 0;
            p->count = 0;
            while (k >= 0) {
                int w = d->nkeys == 1 ? s->bits_hi - s->bits_lo
                                      : sl_sortkey_bits(s->key_types[k]);
                if (p->bits + w > 64) break;
                p->bits += w;
                p->count++;
                k--;
            }
            p->first = k + 1;
            if (p->bits > 32) wide = true;
            size_t b = pairs_bytes_for(p->bits > 32, s->max_rows, p->bits, &err);
            if (b > s->cub_bytes) s->cub_bytes = b;
        }
        size_t img = wide ? 8 : 4;
        s->off_img_in = off, off = align_up(off + n * img);
        s->off_img_out = off, off = align_up(off + n * img);
        s->off_perm_in = off, off = align_up(off + n * 4);
        s->off_perm_out = off, off = align_up(off + n * 4);
    }
    if (err != cudaSuccess) return SLUICE_ERR_CUDA;
    s->off_cub = off;
    s->scratch_bytes = align_up(off + s->cub_bytes);
    return SLUICE_OK;
}

static pack_args pack_for(const sl_cuda_sort *s, const sl_cuda_sort_pack *p, const void *const *in) {
    pack_args a;
    memset(&a, 0, sizeof a);
    a.nkeys = p->count;
    for (int i = 0; i < p->count; i++) {
        sluice_type t = s->key_types[p->first + i];
        a.kinds[i] = sl_sortkey_kind(t);
        a.widths[i] = sl_sortkey_bits(t);
        a.descending[i] = s->descending[p->first + i];
        a.cols[i] = in[s->keys[p->first + i]];
    }
    a.narrowed = s->nkeys == 1 &&
                 (s->bits_lo != 0 || s->bits_hi != sl_sortkey_bits(s->key_types[0]));
    a.lo = s->bits_lo;
    a.hi = s->bits_hi;
    return a;
}

static cudaError_t gather_column(sluice_type t, const void *in, const uint32_t *perm, void *out,
                                 uint64_t n, cudaStream_t st) {
    unsigned g = grid_for(n);
    switch (sluice_type_size(t)) {
    case 1: gather_kernel<<<g, kThreads, 0, st>>>((const uint8_t *)in, perm, (uint8_t *)out, n); break;
    case 2: gather_kernel<<<g, kThreads, 0, st>>>((const uint16_t *)in, perm, (uint16_t *)out, n); break;
    case 4: gather_kernel<<<g, kThreads, 0, st>>>((const uint32_t *)in, perm, (uint32_t *)out, n); break;
    default: gather_kernel<<<g, kThreads, 0, st>>>((const uint64_t *)in, perm, (uint64_t *)out, n); break;
    }
    return cudaGetLastError();
}

// native_float: CUB's float sort from the input columns into the output columns, then the
// zero-run fix-up over the output (sort.h).
template <typename Bits>
static cudaError_t fix_zero_run(const sl_cuda_sort *s, char *base, uint32_t n, Bits *keys,
                                uint32_t *values, cudaStream_t st) {
    bool desc = s->descending[0];
    char *fix = base + s->off_cub;
    uint32_t *run = (uint32_t *)fix;
    uint8_t *flags = nullptr;
    uint32_t *vcopy = nullptr;
    if (values) {
        flags = (uint8_t *)(fix + align_up((2 + (size_t)s->fix_blocks) * 4));
        vcopy = (uint32_t *)((char *)flags + align_up((size_t)s->max_rows));
    }
    zero_run_bounds<Bits><<<1, kBoundsThreads, 0, st>>>(keys, n, desc, run);
    zero_run_count<Bits><<<s->fix_blocks, kFixThreads, 0, st>>>(keys, values, desc, run, flags,
                                                                vcopy);
    zero_run_rewrite<Bits><<<s->fix_blocks, kFixThreads, 0, st>>>(keys, values, desc, run, flags,
                                                                  vcopy);
    return cudaGetLastError();
}

static cudaError_t run_native_float(const sl_cuda_sort *s, char *base, int64_t rows,
                                    const void *const *in, void *const *out, cudaStream_t st) {
    void *tmp = base + s->off_cub;
    size_t tmp_bytes = s->cub_bytes;
    bool desc = s->descending[0];
    int key = s->keys[0];
    cudaError_t e;
    if (s->key_types[0] == SLUICE_F64) {
        e = cub_float_keys<double>(desc, tmp, tmp_bytes, (const double *)in[key],
                                   (double *)out[key], (int)rows, st);
        if (e != cudaSuccess) return e;
        return fix_zero_run<uint64_t>(s, base, (uint32_t)rows, (uint64_t *)out[key], nullptr, st);
    }
    uint32_t *values = nullptr;
    if (s->strategy == SL_CUDA_SORT_KEYS) {
        e = cub_float_keys<float>(desc, tmp, tmp_bytes, (const float *)in[key], (float *)out[key],
                                  (int)rows, st);
    } else {
        values = (uint32_t *)out[s->value_column];
        e = cub_float_pairs(desc, tmp, tmp_bytes, (const float *)in[key], (float *)out[key],
                            (const uint32_t *)in[s->value_column], values, (int)rows, st);
    }
    if (e != cudaSuccess) return e;
    return fix_zero_run<uint32_t>(s, base, (uint32_t)rows, (uint32_t *)out[key], values, st);
}

extern "C" int sl_cuda_sort_run(const sl_cuda_sort *s, void *scratch, int64_t rows,
                                const sluice_type *types, const void *const *in,
                                void *const *out, void *stream) {
    if (rows <= 0) return cudaSuccess;
    if (rows > s->max_rows) return cudaErrorInvalidValue;
    cudaStream_t st = (cudaStream_t)stream;
    char *base = (char *)scratch;
    void *tmp = base + s->off_cub;
    size_t tmp_bytes = s->cub_bytes;
    uint64_t n = (uint64_t)rows;
    unsigned g = grid_for(n);
    cudaError_t e;
    int key = s->keys[0];

    if (s->native_float) return run_native_float(s, base, rows, in, out, st);
    if (s->strategy != SL_CUDA_SORT_PERMUTE) {
        const uint32_t *kin = (const uint32_t *)in[key];
        uint32_t *kout = (uint32_t *)out[key];
        if (!s->identity_image) {
            uint32_t *img = (uint32_t *)(base + s->off_img_in);
            e = launch_image1(s->key_types[0], in[key], s->descending[0], img, n, st);
            if (e != cudaSuccess) return e;
            kin = img;
            kout = (uint32_t *)(base + s->off_img_out);
        }
        if (s->strategy == SL_CUDA_SORT_KEYS)
            e = cub_keys_u32<int>(tmp, tmp_bytes, kin, kout, (int)rows, s->bits_lo, s->bits_hi, st);
        else
            e = pairs<uint32_t>(tmp, tmp_bytes, kin, kout, (const uint32_t *)in[s->value_column],
                                (uint32_t *)out[s->value_column], rows, s->bits_lo, s->bits_hi,
                                st);
        if (e != cudaSuccess) return e;
        if (!s->identity_image) {
            e = launch_inverse1(s->key_types[0], kout, s->descending[0], out[key], n, st);
            if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
    }

    // PERMUTE: one stable pass per pack, least significant first, then gather every column.
    uint32_t *perm = (uint32_t *)(base + s->off_perm_in);
    uint32_t *perm_alt = (uint32_t *)(base + s->off_perm_out);
    void *img = base + s->off_img_in;
    void *img_alt = base + s->off_img_out;
    for (int p = 0; p < s->npacks; p++) {
        const sl_cuda_sort_pack *pk = &s->packs[p];
        pack_args a = pack_for(s, pk, in);
        const uint32_t *through = p == 0 ? nullptr : perm;
        uint32_t *first = p == 0 ? perm : nullptr;
        if (pk->bits > 32) {
            image_kernel<uint64_t><<<g, kThreads, 0, st>>>(a, through, (uint64_t *)img, first, n);
            if ((e = cudaGetLastError()) != cudaSuccess) return e;
            e = pairs<uint64_t>(tmp, tmp_bytes, (const uint64_t *)img, (uint64_t *)img_alt, perm,
                                perm_alt, rows, 0, pk->bits, st);
        } else {
            image_kernel<uint32_t><<<g, kThreads, 0, st>>>(a, through, (uint32_t *)img, first, n);
            if ((e = cudaGetLastError()) != cudaSuccess) return e;
            e = pairs<uint32_t>(tmp, tmp_bytes, (const uint32_t *)img, (uint32_t *)img_alt, perm,
                                perm_alt, rows, 0, pk->bits, st);
        }
        if (e != cudaSuccess) return e;
        uint32_t *t = perm;
        perm = perm_alt;
        perm_alt = t;
    }
    for (int c = 0; c < s->ncolumns; c++)
        if ((e = gather_column(types[c], in[c], perm, out[c], n, st)) != cudaSuccess) return e;
    return cudaSuccess;
}
