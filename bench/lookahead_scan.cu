/* lookahead_scan.cu — an experiment for issue 12 (single-pass kernels at copy speed): an
 * exclusive sum scan whose blocks never wait for another block's prefix, measured beside a
 * device-to-device copy of the same bytes and CUB's DeviceScan::ExclusiveSum in the same run.
 * Not part of the library: it answers whether the design below reaches >= 90% of copy on the
 * H200 before kernels/sl_tile.cuh is rebuilt around it (bench/RESULTS.md has the figures).
 *
 * Usage: lookahead_scan [log2_rows=28] [reps=10] [blocks_per_sm]  (without blocks_per_sm:
 * as many as fit, and the f32 job again at one and at two blocks per SM)
 *
 * The design (the one the issue describes; CCCL's newest scan works this way too):
 * - Persistent blocks with a static schedule: block b takes tiles b, b + G, b + 2G, ... (G
 *   blocks), so it knows its own previous tile's inclusive prefix.
 * - A tile's state holds its aggregate only, published the moment the tile is reduced, in one
 *   64-bit word together with the launch's epoch (so states need no clearing between
 *   launches). Nothing ever publishes or waits for an inclusive prefix: nothing chains.
 * - A look-ahead warp per block keeps the block's running prefix R (everything up to and
 *   including its previous tile) and adds, in order, the aggregates of the G - 1 tiles
 *   between its previous tile and its next one, reading them as they appear while the block's
 *   other warps still work on the current tile. The next tile's exclusive prefix is then
 *   R + own aggregate + those, ready about when the tile's data is.
 * - Thread 0 keeps STAGES - 1 tiles of input in flight with bulk copies (cp.async.bulk) into a
 *   ring of shared-memory stages (kernels/sl_pipe.cuh), and writes each finished tile back
 *   from its stage with a bulk store; the ragged last tile goes element by element.
 * Float sums are regrouped (tile by tile), as every parallel scan's are; the inputs here are
 * small integers so that every grouping is exact and the check can be exact. */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include "../kernels/sl_pipe.cuh"
#include "cuda_check.h"

namespace la {

/* mbarriers for the hand-overs inside a block (one arrival completes a phase). */
__device__ __forceinline__ void bar_init(unsigned long long *b) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sl::smem_address(b)) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned long long *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sl::smem_address(b)) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned long long *b, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(sl::smem_address(b)), "r"(parity)
                     : "memory");
}

/* Bulk store shared -> global of `bytes` (16-byte aligned, a multiple of 16), in the calling
 * thread's bulk group. */
__device__ __forceinline__ void bulk_store(void *dst, const void *src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(sl::smem_address(src)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
/* Waits until at most N of the calling thread's bulk groups still read shared memory. */
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

/* The consumers' own barrier (the look-ahead warp is not in it). */
template <int THREADS> __device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory");
}

/* A tile state: the launch's epoch in the high word, the aggregate's bits in the low word. */
template <typename T> __device__ __forceinline__ unsigned long long pack(unsigned epoch, T v) {
    static_assert(sizeof(T) == 4, "four-byte values");
    unsigned bits;
    memcpy(&bits, &v, 4);
    return ((unsigned long long)epoch << 32) | bits;
}
template <typename T> __device__ __forceinline__ T unpack(unsigned long long w) {
    unsigned bits = (unsigned)w;
    T v;
    memcpy(&v, &bits, 4);
    return v;
}
__device__ __forceinline__ void publish(unsigned long long *at, unsigned long long w) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(at), "l"(w) : "memory");
}
__device__ __forceinline__ unsigned long long peek(const unsigned long long *at) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(at) : "memory");
    return w;
}

/* Stores a thread's ITEMS consecutive values into its place in a staged tile, spreading each
 * 8-thread phase of 16-byte writes over the banks as sl::load_staged's reads do. */
template <typename T, int ITEMS> __device__ __forceinline__ void store_staged(T *tile, const T (&v)[ITEMS]) {
    constexpr int CH = (int)sizeof(T) * ITEMS / 16;
    static_assert(CH * 16 == (int)sizeof(T) * ITEMS && CH <= 8 && (CH & (CH - 1)) == 0, "16-byte chunks");
    uint4 put[CH];
    memcpy(&put[0], &v[0], sizeof put);
    uint4 *d4 = reinterpret_cast<uint4 *>(tile + (long long)threadIdx.x * ITEMS);
    const int rot = CH == 1 ? 0 : (int)(threadIdx.x / (8 / CH)) & (CH - 1);
#pragma unroll
    for (int j = 0; j < CH; j++) {
        uint4 w = put[0];
#pragma unroll
        for (int c = 0; c < CH; c++)
            if (((j + rot) & (CH - 1)) == c) w = put[c];
        d4[(j + rot) & (CH - 1)] = w;
    }
}

template <typename T, int BLOCK, int ITEMS, int STAGES>
__global__ void __launch_bounds__(BLOCK + 32) scan_kernel(const T *__restrict__ in, T *__restrict__ out,
                                                          long long n, unsigned long long *states,
                                                          unsigned epoch, T carry) {
    constexpr int TILE = BLOCK * ITEMS;
    constexpr int WARPS = BLOCK / 32;
    extern __shared__ __align__(128) unsigned char smem[];
    T *stage_buf = reinterpret_cast<T *>(smem);
    __shared__ sl::tile_queue<STAGES> q;
    __shared__ unsigned long long agg_ready[2], excl_ready[2];
    __shared__ T warp_total[WARPS];
    __shared__ T own_agg[2], tile_excl[2];

    const long long ntiles = (n + TILE - 1) / TILE;
    const long long G = gridDim.x, b = blockIdx.x;
    const long long mine = b < ntiles ? (ntiles - 1 - b) / G + 1 : 0;
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x & 31);

    if (threadIdx.x == 0) {
        sl::queue_init(q);
        for (int i = 0; i < 2; i++) {
            bar_init(&agg_ready[i]);
            bar_init(&excl_ready[i]);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    /* Thread 0's producer step: tile k of this block into stage k % STAGES. */
    auto issue = [&](long long k) {
        const long long t = b + k * G;
        const int s = (int)(k % STAGES);
        q.tile[s] = t;
        if ((t + 1) * TILE <= n) {
            q.bulk[s] = 1;
            sl::queue_expect(q, s, TILE * (unsigned)sizeof(T));
            sl::bulk_load(q, s, stage_buf + (long long)s * TILE, in + t * TILE, TILE * (unsigned)sizeof(T));
        } else {
            q.bulk[s] = 0; /* the ragged last tile: read from global memory */
            sl::queue_arrive(q, s);
        }
    };

    if (warp == WARPS) {
        /* The look-ahead warp. R: the inclusive prefix of the block's previous tile (the
         * carry before its first). */
        T R = carry;
        long long prev = -1;
        for (long long k = 0; k < mine; k++) {
            const long long t = b + k * G;
            /* The aggregates of tiles prev+1 .. t-1, in order, each lane a stride of them:
             * every load is in flight at once, and a lane re-reads only states not yet there. */
            T part = T(0);
            for (long long base = prev + 1; base < t; base += 32 * 8) {
                unsigned long long w[8];
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const long long u = base + j * 32 + lane;
                    w[j] = u < t ? peek(&states[u]) : pack(epoch, T(0));
                }
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const long long u = base + j * 32 + lane;
                    while ((unsigned)(w[j] >> 32) != epoch) {
                        __nanosleep(20);
                        w[j] = peek(&states[u]);
                    }
                    part += unpack<T>(w[j]);
                }
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
            if (k > 0) { /* R = E(previous) + own aggregate of the previous tile */
                bar_wait(&agg_ready[(k - 1) & 1], (unsigned)(((k - 1) >> 1) & 1));
                R += own_agg[(k - 1) & 1];
            }
            R += part; /* now E(t), the tile's exclusive prefix */
            if (lane == 0) {
                tile_excl[k & 1] = R;
                bar_arrive(&excl_ready[k & 1]);
            }
            prev = t;
        }
        return;
    }

    /* The consumers (and thread 0 the producer). */
    if (threadIdx.x == 0)
        for (long long k = 0; k < STAGES && k < mine; k++) issue(k);
    for (long long k = 0; k < mine; k++) {
        const long long t = b + k * G;
        const int s = (int)(k % STAGES);
        T *tile = stage_buf + (long long)s * TILE;
        sl::queue_wait(q, s, (unsigned)((k / STAGES) & 1));
        const bool bulk = q.bulk[s] != 0;
        const long long first = t * TILE + (long long)threadIdx.x * ITEMS;
        T v[ITEMS];
        if (bulk) {
            sl::load_staged<T, ITEMS>(tile, v);
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; i++) v[i] = first + i < n ? in[first + i] : T(0);
        }
        /* thread-local inclusive scan */
#pragma unroll
        for (int i = 1; i < ITEMS; i++) v[i] += v[i - 1];
        /* warp inclusive scan of the threads' totals */
        T x = v[ITEMS - 1];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            T y = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= o) x += y;
        }
        T x_excl = __shfl_up_sync(0xffffffffu, x, 1);
        if (lane == 0) x_excl = T(0);
        if (lane == 31) warp_total[warp] = x;
        consumers_sync<BLOCK>();
        T before = T(0), agg = T(0);
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            const T wt = warp_total[w];
            if (w < warp) before += wt;
            agg += wt;
        }
        if (threadIdx.x == 0) {
            publish(&states[t], pack(epoch, agg));
            own_agg[k & 1] = agg;
            bar_arrive(&agg_ready[k & 1]);
        }
        const T thread_excl = before + x_excl;
        bar_wait(&excl_ready[k & 1], (unsigned)((k >> 1) & 1));
        const T base = tile_excl[k & 1] + thread_excl;
        T o[ITEMS];
        o[0] = base;
#pragma unroll
        for (int i = 1; i < ITEMS; i++) o[i] = base + v[i - 1];
        if (bulk) {
            store_staged<T, ITEMS>(tile, o);
            sl::fence_async_proxy();
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; i++)
                if (first + i < n) out[first + i] = o[i];
        }
        consumers_sync<BLOCK>();
        if (threadIdx.x == 0) {
            if (bulk) bulk_store(out + t * TILE, tile, TILE * (unsigned)sizeof(T));
            bulk_commit(); /* an empty group for a ragged tile keeps the count in step */
            /* The previous tile's store has read its stage: refill it STAGES - 1 tiles ahead. */
            if (k >= 1 && k - 1 + STAGES < mine) {
                bulk_wait_read<1>();
                issue(k - 1 + STAGES);
            }
        }
    }
    if (threadIdx.x == 0) bulk_wait_all();
}

} /* namespace la */

static int cmp(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
static float median(std::vector<float> t) {
    qsort(t.data(), t.size(), sizeof(float), cmp);
    return t[t.size() / 2];
}

template <typename T> struct Lookahead {
    static constexpr int BLOCK = 256, ITEMS = 16, STAGES = 4, TILE = BLOCK * ITEMS;
    unsigned long long *states = nullptr;
    unsigned epoch = 0;
    int grid = 0;
    size_t smem = (size_t)STAGES * TILE * sizeof(T);
    void setup(long long n, int blocks_per_sm) {
        auto kern = la::scan_kernel<T, BLOCK, ITEMS, STAGES>;
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int dev = 0, sms = 0, occ = 0;
        CK(cudaGetDevice(&dev));
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, BLOCK + 32, smem));
        if (blocks_per_sm > 0 && blocks_per_sm < occ) occ = blocks_per_sm;
        long long ntiles = (n + TILE - 1) / TILE;
        grid = (int)std::min<long long>(ntiles, (long long)sms * std::max(occ, 1));
        CK(cudaMalloc(&states, (size_t)ntiles * 8 + 8));
        CK(cudaMemset(states, 0, (size_t)ntiles * 8 + 8));
        printf("lookahead: %d blocks (%d SMs x %d), tile %d, %d stages, %zu B shared\n", grid, sms, occ,
               TILE, STAGES, smem);
    }
    void run(const T *in, T *out, long long n) {
        la::scan_kernel<T, BLOCK, ITEMS, STAGES><<<grid, BLOCK + 32, smem>>>(in, out, n, states, ++epoch, T(0));
    }
    ~Lookahead() { cudaFree(states); }
};

/* Exact check against the sequential exclusive scan (inputs small integers: every grouping of
 * the float sums is exact; ints wrap identically). Returns the number of wrong rows. */
template <typename T> static long long check(const std::vector<T> &h, const T *dout, long long n) {
    std::vector<T> got((size_t)n);
    CK(cudaMemcpy(got.data(), dout, (size_t)n * sizeof(T), cudaMemcpyDeviceToHost));
    long long bad = 0;
    double acc = 0;
    for (long long i = 0; i < n; i++) {
        if ((double)got[(size_t)i] != acc && bad++ < 5)
            printf("  row %lld: got %.1f want %.1f\n", i, (double)got[(size_t)i], acc);
        acc += (double)h[(size_t)i];
    }
    return bad;
}

template <typename T> static int job(const char *name, long long n, int reps, int bpsm) {
    std::vector<T> h((size_t)n);
    unsigned long long x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < h.size(); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const int k = (int)(x >> 60) - 8; /* -8 .. 7; every other row negated: mean 0, so */
        h[i] = (T)(i & 1 ? k : -k);       /* the prefixes stay far below 2^24 (f32 exact) */
    }
    T *din, *dout;
    CK(cudaMalloc(&din, (size_t)n * sizeof(T)));
    CK(cudaMalloc(&dout, (size_t)n * sizeof(T)));
    CK(cudaMemcpy(din, h.data(), (size_t)n * sizeof(T), cudaMemcpyHostToDevice));
    cudaEvent_t a, z;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&z));
    auto timed = [&](auto &&fn) {
        std::vector<float> t;
        fn();
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(a));
            fn();
            CK(cudaEventRecord(z));
            CK(cudaEventSynchronize(z));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, z));
            t.push_back(ms);
        }
        CK(cudaGetLastError());
        return median(t);
    };
    float copy = timed([&] { CK(cudaMemcpyAsync(dout, din, (size_t)n * sizeof(T), cudaMemcpyDeviceToDevice)); });

    Lookahead<T> lk;
    lk.setup(n, bpsm);
    CK(cudaMemset(dout, 0xff, (size_t)n * sizeof(T)));
    lk.run(din, dout, n);
    CK(cudaDeviceSynchronize());
    long long bad = check(h, dout, n);
    float t_la = timed([&] { lk.run(din, dout, n); });
    long long bad2 = check(h, dout, n); /* after many launches: epochs, reuse of states */

    size_t tmp_bytes = 0;
    void *tmp = nullptr;
    CK(cub::DeviceScan::ExclusiveSum(nullptr, tmp_bytes, din, dout, n));
    CK(cudaMalloc(&tmp, tmp_bytes));
    float t_cub = timed([&] { CK(cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, din, dout, n)); });
    long long bad_cub = check(h, dout, n);

    double bytes = 2.0 * (double)n * sizeof(T);
    printf("%s, n = %lld: copy %.3f ms (%.0f GB/s); lookahead %.3f ms = %.1f%% of copy (%s); CUB "
           "ExclusiveSum %.3f ms = %.1f%% of copy (%s); lookahead / CUB speed %.2f\n",
           name, n, copy, bytes / copy / 1e6, t_la, 100.0 * copy / t_la,
           bad || bad2 ? "WRONG" : "exact", t_cub, 100.0 * copy / t_cub, bad_cub ? "WRONG" : "exact",
           t_cub / t_la);
    printf("| %s exclusive sum, 2^%d rows | %.1f%% of copy | %.1f%% | %.2f |\n", name,
           63 - __builtin_clzll((unsigned long long)n), 100.0 * copy / t_la, 100.0 * copy / t_cub,
           t_cub / t_la);
    CK(cudaFree(tmp));
    CK(cudaFree(din));
    CK(cudaFree(dout));
    return bad || bad2 ? 1 : 0;
}

int main(int argc, char **argv) {
    int lg = argc > 1 ? atoi(argv[1]) : 28;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    int bpsm = argc > 3 ? atoi(argv[3]) : 0; /* 0: as many as fit, and 1 and 2 besides */
    if (lg < 10 || lg > 30 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: lookahead_scan [log2_rows 10..30] [reps] [blocks_per_sm]\n");
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "lookahead_scan: no usable GPU\n");
        return 77;
    }
    long long n = 1ll << lg;
    int fails = 0;
    printf("| job | lookahead | CUB | lookahead / CUB |\n|---|---|---|---|\n");
    fails += job<float>("f32", n, reps, bpsm);
    if (argc <= 3) { /* the launch shape's share: one and two blocks per SM */
        fails += job<float>("f32, 1 block per SM", n, reps, 1);
        fails += job<float>("f32, 2 blocks per SM", n, reps, 2);
    }
    fails += job<int>("i32", n, reps, bpsm);
    /* ragged sizes: the last tile element by element, fewer tiles than blocks */
    fails += job<float>("f32 ragged", n - 12345, reps, bpsm);
    fails += job<int>("i32 tiny", 5000, 3, bpsm);
    return fails ? 1 : 0;
}
