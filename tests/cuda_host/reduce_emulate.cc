/* reduce_emulate.cc — runs the generated code of a GPU group ending in a reduce on the host,
 * so that the generated states, combines, per-row outputs and close kernel can be checked
 * without a GPU, under the host compiler's sanitizers (test_cuda_codegen's reduce_on_host
 * builds it with -fsanitize=address,undefined and compares its results).
 *
 * The generated source (core/cuda/codegen.c) is included as SL_GENERATED; sl_tile.cuh's
 * device loop is left out (its include guard is defined here) and this file stands in for
 * what the generated Tile calls of it: tile_rows, the element-by-element loads, the barriers
 * (one host thread plays the block's threads one after another). The tile loop itself is
 * emulated in two associations:
 *   ordered   every row folded into one running state, left to right;
 *   gpu       sl_block.cuh's: each thread folds its items, the warps scan by Kogge-Stone
 *             steps, the warp totals are folded in order, tiles by their aggregates.
 * Exact operators give the same bits in both; so must a batch pushed whole and cut into
 * pieces (the carry and the close kernel between them), unless the reduce is per batch.
 * Usage: reduce_emulate SEED ROWS [CUT_A CUT_B]: prints "rows N" and one line per output row
 * (each output's bytes as a hexadecimal little-endian number), for the ordered association
 * over the whole batch, then checks the gpu association, and with cuts the batches [0, A)
 * [A, B) [B, ROWS), against it; exit status 1 on a difference. The inputs are random bytes
 * (splitmix64 from SEED, input after input, ROWS + 1 elements each). Built with SL_GENERATED
 * (the source's path), SL_IN_SIZES and SL_OUT_SIZES (bytes per element of the kernel's inputs
 * and outputs, in argument order) and SL_CARRY_IDENTITY (the carry's identity bytes).
 * Offsets segments are not emulated (head_bit and segment_ending abort). */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __global__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct uint4 {
    unsigned x, y, z, w;
};
struct sl_dim3 {
    unsigned x, y, z;
};
static sl_dim3 threadIdx = {0, 0, 0};
static const sl_dim3 blockDim = {1, 1, 1};
static void __syncthreads() {}

#define SL_TILE_CUH /* the device loop: emulated below */
#include "sl_monoid.h"
#include "sl_ops.h"
#include "sl_scratch.h"

namespace sl {
template <class... P> struct phase_list {};
template <int STAGES> struct tile_queue {
    int bulk[STAGES];
};
template <int ITEMS> struct tile_rows {
    long long rows = 0, tile = 0, tile_first = 0, first = 0, tile_len = 0;
    bool head_bit(int) const { abort(); }
    long long segment_ending(int) const { abort(); }
    void at(long long rows_, long long tile_, long long tile_rows_) {
        rows = rows_;
        tile = tile_;
        tile_len = tile_rows_;
        tile_first = tile_ * tile_rows_;
        first = tile_first + (long long)threadIdx.x * ITEMS;
    }
};
template <int BAR, int THREADS> inline void block_sync() {}
template <typename T, int ITEMS>
inline void load_blocked(const T *col, int64_t first, int64_t rows, T (&v)[ITEMS]) {
    for (int i = 0; i < ITEMS; i++)
        if (first + i < rows) v[i] = col[first + i];
}
template <typename T, int ITEMS> inline void load_staged(const T *, T (&)[ITEMS]) { abort(); }
template <typename T, int ITEMS, int BLOCK, int BAR>
inline void store_tile(T *, int64_t, int64_t, const T (&)[ITEMS], uint4 *) { abort(); }
inline bool bulk_tile(long long, long long, long long) { return false; }
inline bool aligned16(const void *) { return false; }
template <int S> inline void queue_expect(tile_queue<S> &, int, unsigned) {}
template <int S> inline void queue_arrive(tile_queue<S> &, int) {}
template <int S> inline void bulk_load(tile_queue<S> &, int, void *, const void *, unsigned) {}
template <class K, class A> inline void fused_kernel(const A &) {}
template <class K, class A> inline void segment_index(const A &) {}
} // namespace sl

#include SL_GENERATED

static const unsigned char carry_identity[] = {SL_CARRY_IDENTITY};
static const int in_sizes[] = {SL_IN_SIZES};
static const int out_sizes[] = {SL_OUT_SIZES};
static const int NIN = (int)(sizeof in_sizes / sizeof in_sizes[0]);
static const int NOUT = (int)(sizeof out_sizes / sizeof out_sizes[0]);

typedef Kernel::Tile Tile;

/* One phase of one tile over the block's threads' Tiles `th`: the reduction, the tile's
 * prefix from `excl_in` (the previous tiles' state, or the carry for tile 0), the
 * epilogue. Returns the tile's aggregate. */
template <class P>
static typename P::S run_phase(std::vector<Tile> &th, bool gpu, const typename P::S &tile_excl) {
    typedef typename P::S S;
    const typename P::Op op;
    const int n = (int)th.size();
    std::vector<S> agg(n, P::identity()), excl(n, P::identity());
    for (int x = 0; x < n; x++)
        for (int i = 0; i < ITEMS; i++) {
            S e = P::identity();
            th[x].element(e, i);
            agg[x] = op(agg[x], e);
        }
    S block = P::identity();
    if (gpu) { /* sl_warp.cuh / sl_block.cuh's association */
        std::vector<S> inc(agg);
        for (int w = 0; w < n / 32; w++)
            for (int d = 1; d < 32; d *= 2) {
                std::vector<S> prev(inc.begin() + w * 32, inc.begin() + w * 32 + 32);
                for (int l = d; l < 32; l++) inc[w * 32 + l] = op(prev[l - d], prev[l]);
            }
        std::vector<S> warp_prefix(n / 32);
        for (int w = 0; w < n / 32; w++) {
            warp_prefix[w] = block;
            block = op(block, inc[w * 32 + 31]);
        }
        for (int x = 0; x < n; x++)
            excl[x] = x % 32 == 0 ? warp_prefix[x / 32] : op(warp_prefix[x / 32], inc[x - 1]);
    } else {
        for (int x = 0; x < n; x++) {
            excl[x] = block;
            block = op(block, agg[x]);
        }
    }
    for (int x = 0; x < n; x++) {
        S run = op(tile_excl, excl[x]);
        for (int i = 0; i < ITEMS; i++) {
            S e = P::identity();
            th[x].element(e, i);
            const S before = run;
            run = op(run, e);
            th[x].outputs(i, before, run, e, tile_excl);
        }
    }
    return block;
}

/* The phases of one tile in order (each one's outputs feed the next one's elements). */
template <int PH>
static void run_phases(sl::phase_list<>, std::vector<Tile> &, const SlArgs &, bool, bool,
                       std::vector<std::vector<unsigned char>> &) {}
template <int PH, class P, class... REST>
static void run_phases(sl::phase_list<P, REST...>, std::vector<Tile> &th, const SlArgs &a,
                       bool gpu, bool last_tile, std::vector<std::vector<unsigned char>> &prefix) {
    typedef typename P::S S;
    const typename P::Op op;
    S tile_excl;
    if (th[0].tile == 0) { /* the carry with the per-batch resets (sl_tile.cuh carry_in) */
        tile_excl = P::identity();
        memcpy(&tile_excl, a.carry_in + P::CARRY_OFFSET, sizeof tile_excl);
        P::reset(tile_excl);
        prefix[PH].assign(sizeof(S), 0);
        memcpy(prefix[PH].data(), &tile_excl, sizeof tile_excl);
    } else {
        memcpy(&tile_excl, prefix[PH].data(), sizeof tile_excl);
    }
    const S agg = run_phase<P>(th, gpu, tile_excl);
    const S incl = op(tile_excl, agg);
    memcpy(prefix[PH].data(), &incl, sizeof incl);
    if (last_tile) memcpy(a.carry_out + P::CARRY_OFFSET, &incl, sizeof incl);
    for (Tile &t : th) t.maps(PH); /* sl_tile.cuh run_phases: what phase PH makes known */
    run_phases<PH + 1>(sl::phase_list<REST...>{}, th, a, gpu, last_tile, prefix);
}

/* A table of output rows: each column's elements, out_sizes bytes each. */
struct table {
    long long rows = 0;
    std::vector<std::vector<unsigned char>> cols = std::vector<std::vector<unsigned char>>(NOUT);
};

/* One batch of `rows` rows from `in` (column pointers), as core/cuda/fused.c runs it: the
 * main kernel (not for an empty batch: its carry is copied), the close kernel; or, with
 * flush, the close kernel in flush mode. Appends the rows out to `out`. */
static void run_batch(const std::vector<const unsigned char *> &in, long long rows, bool flush,
                      bool gpu, std::vector<unsigned char> &carry, table &out) {
    const size_t cap = (size_t)rows + 1;
    std::vector<std::vector<unsigned char>> bufs(NOUT);
    SlArgs a;
    memset(&a, 0, sizeof a);
    std::vector<unsigned char> carry_out(carry.size());
    long long out_rows = 0;
    a.rows = rows;
    a.nsegments = -1;
    a.carry_in = carry.data();
    a.carry_out = carry_out.data();
    a.out_rows = &out_rows;
    for (int k = 0; k < NIN; k++) a.in[k] = in[k];
    for (int k = 0; k < NOUT; k++) {
        bufs[k].assign(cap * (size_t)out_sizes[k], 0);
        a.out[k] = bufs[k].data();
    }
    const long long tile = Kernel::tile;
    const long long ntiles = (rows + tile - 1) / tile;
    if (flush || rows == 0) memcpy(carry_out.data(), carry.data(), carry.size());
    if (!flush && rows > 0) {
        a.ntiles = ntiles;
        const Kernel::Params params(a);
        std::vector<std::vector<unsigned char>> prefix(Kernel::phases + 2);
        for (long long t = 0; t < ntiles; t++) {
            std::vector<Tile> th;
            for (int x = 0; x < Kernel::block; x++) {
                threadIdx.x = (unsigned)x;
                th.emplace_back(params);
                th.back().at(rows, t, tile);
                th.back().load_inputs(a, false, nullptr);
                th.back().maps(0);
            }
            run_phases<1>(Kernel::Phases{}, th, a, gpu, t == ntiles - 1, prefix);
            for (int x = 0; x < Kernel::block; x++) {
                threadIdx.x = (unsigned)x;
                th[x].store<0>(a, nullptr);
            }
        }
    }
    a.ntiles = flush ? -1 : ntiles;
    threadIdx.x = 0;
    sl_reduce_close(a);
    if (out_rows < 0 || (size_t)out_rows > cap) {
        fprintf(stderr, "reduce_emulate: %lld rows out of a batch of %lld\n", out_rows, rows);
        exit(1);
    }
    for (int k = 0; k < NOUT; k++)
        out.cols[k].insert(out.cols[k].end(), bufs[k].begin(),
                           bufs[k].begin() + (size_t)out_rows * (size_t)out_sizes[k]);
    out.rows += out_rows;
    carry = carry_out;
}

/* The stream cut at `cuts` (ascending row numbers), then flushed. */
static table run_stream(const std::vector<std::vector<unsigned char>> &cols, long long rows,
                        const std::vector<long long> &cuts, bool gpu) {
    std::vector<unsigned char> carry(carry_identity, carry_identity + sizeof carry_identity);
    table out;
    long long at = 0;
    std::vector<long long> ends(cuts);
    ends.push_back(rows);
    for (long long end : ends) {
        std::vector<const unsigned char *> in(NIN);
        for (int k = 0; k < NIN; k++) in[k] = cols[k].data() + (size_t)at * (size_t)in_sizes[k];
        run_batch(in, end - at, false, gpu, carry, out);
        at = end;
    }
    run_batch(std::vector<const unsigned char *>(NIN), 0, true, gpu, carry, out);
    return out;
}

static bool same(const table &x, const table &y, const char *what) {
    if (x.rows != y.rows) {
        fprintf(stderr, "reduce_emulate: %s: %lld rows, the ordered fold %lld\n", what, y.rows, x.rows);
        return false;
    }
    for (int k = 0; k < NOUT; k++)
        for (long long r = 0; r < x.rows; r++)
            if (memcmp(&x.cols[k][(size_t)r * out_sizes[k]], &y.cols[k][(size_t)r * out_sizes[k]],
                       (size_t)out_sizes[k]) != 0) {
                fprintf(stderr, "reduce_emulate: %s: output %d row %lld differs\n", what, k, r);
                return false;
            }
    return true;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: reduce_emulate SEED ROWS [CUT_A CUT_B]\n");
        return 2;
    }
    unsigned long long seed = strtoull(argv[1], NULL, 10);
    long long rows = atoll(argv[2]), ca = argc == 5 ? atoll(argv[3]) : 0;
    long long cb = argc == 5 ? atoll(argv[4]) : 0;
    if (rows < 0 || ca < 0 || cb < ca || cb > rows) {
        fprintf(stderr, "reduce_emulate: cuts must satisfy 0 <= A <= B <= ROWS\n");
        return 2;
    }
    /* random input bytes (splitmix64): the pipelines derive small keys from them */
    std::vector<std::vector<unsigned char>> cols(NIN);
    for (int k = 0; k < NIN; k++) {
        cols[k].resize((size_t)(rows + 1) * (size_t)in_sizes[k]);
        for (unsigned char &b : cols[k]) {
            unsigned long long z = (seed += 0x9e3779b97f4a7c15ull);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            b = (unsigned char)(z ^ (z >> 31));
        }
    }
    const table ordered = run_stream(cols, rows, {}, false);
    printf("rows %lld\n", ordered.rows);
    for (long long r = 0; r < ordered.rows; r++) {
        for (int k = 0; k < NOUT; k++) {
            unsigned long long v = 0;
            memcpy(&v, &ordered.cols[k][(size_t)r * out_sizes[k]], (size_t)out_sizes[k]);
            printf("%s%llx", k ? " " : "", v);
        }
        printf("\n");
    }
    bool ok = same(ordered, run_stream(cols, rows, {}, true), "gpu association");
    if (argc == 5) {
        ok = same(ordered, run_stream(cols, rows, {ca, cb}, false), "cut batches") && ok;
        ok = same(ordered, run_stream(cols, rows, {ca, cb}, true), "cut batches, gpu association") && ok;
    }
    return ok ? 0 : 1;
}
