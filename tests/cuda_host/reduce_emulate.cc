/* reduce_emulate.cc — runs the generated kernels of a GPU group ending in a reduce, or of one
 * that compacts (SL_CLOSES 0: no close kernel), or of one that keeps every row (SL_KEEPS_ROWS
 * 1: as many rows out as in, as core/cuda/fused.c counts them), on the host,
 * kernels/sl_tile.cuh's loop and its templates included, so that they can be checked without
 * a GPU under the host compiler's sanitizers (test_cuda_codegen's reduce_on_host,
 * compaction_on_host and ordered_on_host build it with
 * -fsanitize=address,undefined and compare its rows with the CPU backend's).
 *
 * The generated source (core/cuda/codegen.c) is included as SL_GENERATED after
 * host_device.h, which supplies what the device headers need from CUDA (one host thread per
 * GPU thread plays a block; __shared__ variables are statics, so a launch runs one block at a
 * time: grid 1, the block taking every tile in turn). Kernels are launched as core/cuda/fused.c does: the main
 * kernel over a batch (not for an empty one: its carry is copied), then the close kernel
 * (unless the main kernel closed the batch itself: Kernel::closes); at flush the close
 * kernel alone.
 *
 * Usage: reduce_emulate SEED ROWS [CUT_A CUT_B]: prints "rows N" and one line per output
 * row (each output's bytes as a hexadecimal little-endian number) for the batch pushed
 * whole, then flushed; with cuts, checks that the batches [0, A) [A, B) [B, ROWS) give the
 * same rows (a per-stream reduce) and exits 1 if not. The inputs are random bytes
 * (splitmix64 from SEED, input after input, ROWS + 1 elements each). Built with
 * SL_GENERATED (the source's path), SL_IN_SIZES and SL_OUT_SIZES (bytes per element of the
 * kernel's inputs and outputs, in argument order), SL_CARRY_IDENTITY (the carry's identity
 * bytes), SL_CLOSE_THREADS (the close kernel's block), SL_CLOSES (1: the group has a close
 * kernel, a reduce's), SL_REDUCE_OFFSETS (1: the reduce is over the offsets' segments, whose
 * empty-segments kernel runs before the close kernel) and SL_OFFSETS_INPUT (the kernel input
 * that is an offsets input, or -1), and linked with -latomic (16-byte atomics). Every loop
 * runs (the aggregate loop, the two-stage one, and the one with a look-back warp, whose named
 * barriers are emulated too), over a grid of up to EMULATED_GRID blocks run one after another.
 *
 * With an offsets input, ROWS and the cuts count segments, not rows: the segments' lengths
 * come first, from splitmix64 seeded with SEED ^ OFFSETS_SEED (offsets_lengths below: empty,
 * short and multi-tile segments), then the other inputs as above with (rows + 1) elements for
 * the rows the segments hold; the offsets input is not drawn. The segment index kernel runs
 * before the main kernel and the empty-segments kernel before the close kernel, as
 * core/cuda/fused.c launches them. test_cuda_codegen makes the same inputs for the CPU.
 *
 * reduce_emulate SEED ROWS part FROM TO CARRY_IN CARRY_OUT FLUSH (no offsets input): rows
 * [FROM, TO) of the same inputs as one batch, from the carry bytes in file CARRY_IN ("-": the
 * identity), then the flush if FLUSH is 1; prints the rows as above and writes the carry after
 * it to file CARRY_OUT. tests/test_cuda_carry_host.c seeds and reads carries this way, as the
 * CUDA backend's carry hooks do on the device. */
#include <pthread.h>
#include <sched.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "host_device.h"

#include SL_GENERATED

/* Runs `kernel` as one block of `threads` threads with `smem` bytes of dynamic shared memory
 * (left uninitialised, as on the device). */
template <class F> static void launch(int threads, size_t smem, F kernel) {
    host_block b;
    pthread_barrier_init(&b.all, nullptr, (unsigned)threads);
    for (int w = 0; w < threads / 32; w++) pthread_barrier_init(&b.warp[w], nullptr, 32);
    b.smem.reset(new unsigned char[smem ? smem : 1]);
    g_block = &b;
    std::vector<std::thread> ts;
    for (int x = 0; x < threads; x++)
        ts.emplace_back([&kernel, x, threads] {
            threadIdx = {(unsigned)x, 0, 0};
            blockDim = {(unsigned)threads, 1, 1};
            kernel();
        });
    for (std::thread &t : ts) t.join();
    g_block = nullptr;
    pthread_barrier_destroy(&b.all);
    for (int w = 0; w < threads / 32; w++) pthread_barrier_destroy(&b.warp[w]);
}

#ifndef SL_OFFSETS_INPUT
#define SL_OFFSETS_INPUT -1
#endif
#define OFFSETS_SEED 0x0ff5e75ull

static unsigned long long splitmix(unsigned long long *state) {
    unsigned long long z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The offsets of `units` segments: one in forty of up to 9000 rows (over two tiles), the rest
 * up to 40 rows; for an even seed one in eight empty besides, for an odd one none (so that
 * tiles without two equal entries, whose segments the warp loop counts from its heads, are
 * common too). */
static std::vector<long long> offsets_lengths(unsigned long long seed, long long units) {
    unsigned long long state = seed ^ OFFSETS_SEED;
    const long long least = (long long)(seed & 1);
    std::vector<long long> off(1, 0);
    for (long long j = 0; j < units; j++) {
        const unsigned long long z = splitmix(&state);
        const long long len = z % 8 == 0 && !least ? 0
                              : z % 40 == 1        ? least + (long long)((z >> 8) % 9000)
                                                   : least + (long long)((z >> 8) % 40);
        off.push_back(off.back() + len);
    }
    return off;
}

/* A grid of `blocks` blocks, one after another: a block never waits for a later one in these
 * kernels (the look-back loops' first block takes every tile from the counter and the later
 * ones find none; the aggregate loops' blocks fold their own tiles and the last one run is the
 * last to finish, which joins the blocks' records). */
template <class F> static void launch_grid(int blocks, int threads, size_t smem, F kernel) {
    gridDim = {(unsigned)blocks, 1, 1};
    for (int b = 0; b < blocks; b++) {
        blockIdx = {(unsigned)b, 0, 0};
        launch(threads, smem, kernel);
    }
    blockIdx = {0, 0, 0};
    gridDim = {1, 1, 1};
}

/* Blocks of the main kernel's grid (the device's are as many as fit at once). */
#define EMULATED_GRID 3

static const unsigned char carry_identity[] = {SL_CARRY_IDENTITY};
static const int in_sizes[] = {SL_IN_SIZES};
static const int out_sizes[] = {SL_OUT_SIZES};
static const int NIN = (int)(sizeof in_sizes / sizeof in_sizes[0]);
static const int NOUT = (int)(sizeof out_sizes / sizeof out_sizes[0]);

/* The phases' scratch bytes for ntiles tiles (as codegen.c sl_cuda_codegen_phase_offset). */
template <class... P> static unsigned long long phase_bytes(sl::phase_list<P...>, unsigned long long ntiles) {
    return (0ull + ... + sl_phase_scratch_bytes(sizeof(typename P::S), ntiles,
                                                Kernel::aggregate && (Kernel::offsets || Kernel::runs)));
}

/* A table of output rows: each column's elements, out_sizes bytes each. */
struct table {
    long long rows = 0;
    std::vector<std::vector<unsigned char>> cols = std::vector<std::vector<unsigned char>>(NOUT);
};

/* One batch of `rows` rows from `in` (column pointers; with an offsets input, that input
 * holds `nseg` + 1 offsets from 0), or the flush; appends the rows out. */
static void run_batch(const std::vector<const unsigned char *> &in, long long rows, long long nseg,
                      bool flush, std::vector<unsigned char> &carry, table &out) {
    const size_t cap = (size_t)(rows > nseg ? rows : nseg) + 1;
    std::vector<std::vector<unsigned char>> bufs(NOUT);
    SlArgs a;
    memset(&a, 0, sizeof a);
    std::vector<unsigned char> carry_out(carry.size());
    long long out_rows = 0;
    const long long ntiles = (rows + Kernel::tile - 1) / Kernel::tile;
    std::vector<unsigned char> scratch(
        SL_SCRATCH_ALIGN + sl_segment_index_bytes(SL_OFFSETS_INPUT >= 0 ? 1 : 0, (unsigned long long)ntiles) +
            phase_bytes(Kernel::Phases{}, (unsigned long long)ntiles),
        0);
    a.rows = rows;
    a.nsegments = SL_OFFSETS_INPUT >= 0 ? nseg : -1;
    a.ntiles = flush ? -1 : ntiles;
    a.scratch = scratch.data();
    a.carry_in = carry.data();
    a.carry_out = carry_out.data();
    a.out_rows = &out_rows;
    for (int k = 0; k < NIN; k++) a.in[k] = in[k];
    for (int k = 0; k < NOUT; k++) {
        bufs[k].assign(cap * (size_t)out_sizes[k], 0);
        a.out[k] = bufs[k].data();
    }
    if (flush || rows == 0) {
        memcpy(carry_out.data(), carry.data(), carry.size());
    } else {
#if SL_OFFSETS_INPUT >= 0
        const int index_threads = (int)((ntiles + 1 + 31) / 32 * 32);
        launch(index_threads, 0, [&a] { sl_fused_segindex(a); });
#endif
        const int grid = ntiles < EMULATED_GRID ? (int)ntiles : EMULATED_GRID; /* as fused.c */
        launch_grid(grid, THREADS, (size_t)DYNAMIC_SMEM, [&a] { sl_fused(a); });
    }
#if SL_REDUCE_OFFSETS /* as fused.c: a reduce over the offsets' segments */
    if (!flush && nseg > 0) launch(SL_CLOSE_THREADS, 0, [&a] { sl_reduce_empties(a); });
#endif
#if SL_CLOSES
    /* as fused.c: where the main kernel closed the batch (Kernel::closes), no close kernel */
    if (flush || rows == 0 || !Kernel::closes)
        launch(SL_CLOSE_THREADS, 0, [&a] { sl_reduce_close(a); });
#endif
#if SL_KEEPS_ROWS
    if (!flush) out_rows = rows;
#endif
    if (out_rows < 0 || (size_t)out_rows > cap) {
        fprintf(stderr, "reduce_emulate: %lld rows out of a batch of %lld\n", out_rows, rows);
        exit(1);
    }
    for (int k = 0; k < NOUT; k++)
        out.cols[k].insert(out.cols[k].end(), bufs[k].begin(),
                           bufs[k].begin() + (long)out_rows * out_sizes[k]);
    out.rows += out_rows;
    carry = carry_out;
}

/* The stream cut at `cuts` (ascending row numbers; with offsets, segment numbers into `off`),
 * then flushed. */
static table run_stream(const std::vector<std::vector<unsigned char>> &cols, long long units,
                        const std::vector<long long> &off, const std::vector<long long> &cuts) {
    std::vector<unsigned char> carry(carry_identity, carry_identity + sizeof carry_identity);
    table out;
    long long at = 0;
    std::vector<long long> ends(cuts);
    ends.push_back(units);
    for (long long end : ends) {
        const long long r0 = off.empty() ? at : off[(size_t)at], r1 = off.empty() ? end : off[(size_t)end];
        std::vector<long long> batch_off;
        for (long long j = at; !off.empty() && j <= end; j++) batch_off.push_back(off[(size_t)j] - r0);
        std::vector<const unsigned char *> in(NIN);
        for (int k = 0; k < NIN; k++)
            in[k] = k == SL_OFFSETS_INPUT ? (const unsigned char *)batch_off.data()
                                          : cols[k].data() + (size_t)r0 * (size_t)in_sizes[k];
        run_batch(in, r1 - r0, off.empty() ? 0 : end - at, false, carry, out);
        at = end;
    }
    run_batch(std::vector<const unsigned char *>(NIN), 0, 0, true, carry, out);
    return out;
}

static void print_rows(const table &t) {
    printf("rows %lld\n", t.rows);
    for (long long r = 0; r < t.rows; r++) {
        for (int k = 0; k < NOUT; k++) {
            unsigned long long v = 0;
            memcpy(&v, &t.cols[k][(size_t)r * out_sizes[k]], (size_t)out_sizes[k]);
            printf("%s%llx", k ? " " : "", v);
        }
        printf("\n");
    }
}

/* The `part` mode (above): 0, or 2 on a bad argument or file. */
static int run_part(const std::vector<std::vector<unsigned char>> &cols, long long rows, char **argv) {
    const long long from = atoll(argv[4]), to = atoll(argv[5]);
    if (SL_OFFSETS_INPUT >= 0 || from < 0 || to < from || to > rows) {
        fprintf(stderr, "reduce_emulate part: needs 0 <= FROM <= TO <= ROWS and no offsets input\n");
        return 2;
    }
    std::vector<unsigned char> carry(carry_identity, carry_identity + sizeof carry_identity);
    if (strcmp(argv[6], "-") != 0) {
        FILE *f = fopen(argv[6], "rb");
        if (!f || fread(carry.data(), 1, carry.size(), f) != carry.size() || fgetc(f) != EOF) {
            fprintf(stderr, "reduce_emulate part: %s does not hold %zu carry bytes\n", argv[6],
                    carry.size());
            if (f) fclose(f);
            return 2;
        }
        fclose(f);
    }
    table out;
    std::vector<const unsigned char *> in(NIN);
    for (int k = 0; k < NIN; k++) in[k] = cols[k].data() + (size_t)from * (size_t)in_sizes[k];
    run_batch(in, to - from, 0, false, carry, out);
    if (atoi(argv[8]) == 1) run_batch(std::vector<const unsigned char *>(NIN), 0, 0, true, carry, out);
    FILE *f = fopen(argv[7], "wb");
    if (!f || fwrite(carry.data(), 1, carry.size(), f) != carry.size() || fclose(f) != 0) {
        fprintf(stderr, "reduce_emulate part: cannot write %s\n", argv[7]);
        return 2;
    }
    print_rows(out);
    return 0;
}

static bool same(const table &x, const table &y, const char *what) {
    if (x.rows != y.rows) {
        fprintf(stderr, "reduce_emulate: %s: %lld rows, the whole batch %lld\n", what, y.rows, x.rows);
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
    const bool part = argc == 9 && strcmp(argv[3], "part") == 0;
    if (argc != 3 && argc != 5 && !part) {
        fprintf(stderr, "usage: reduce_emulate SEED ROWS [CUT_A CUT_B]\n"
                        "       reduce_emulate SEED ROWS part FROM TO CARRY_IN CARRY_OUT FLUSH\n");
        return 2;
    }
    unsigned long long seed = strtoull(argv[1], NULL, 10);
    long long rows = atoll(argv[2]), ca = argc == 5 ? atoll(argv[3]) : 0;
    long long cb = argc == 5 ? atoll(argv[4]) : 0;
    if (rows < 0 || ca < 0 || cb < ca || cb > rows) { /* (segments with offsets) */
        fprintf(stderr, "reduce_emulate: cuts must satisfy 0 <= A <= B <= ROWS\n");
        return 2;
    }
    /* with offsets, `rows` counts segments: the rows are the segments' */
    const long long units = rows;
    const std::vector<long long> off =
        SL_OFFSETS_INPUT >= 0 ? offsets_lengths(seed, units) : std::vector<long long>();
    if (!off.empty()) rows = off.back();
    std::vector<std::vector<unsigned char>> cols(NIN);
    for (int k = 0; k < NIN; k++) {
        if (k == SL_OFFSETS_INPUT) continue;
        cols[k].resize((size_t)(rows + 1) * (size_t)in_sizes[k]);
        for (unsigned char &b : cols[k]) b = (unsigned char)splitmix(&seed);
    }
    if (part) return run_part(cols, rows, argv);
    const table whole = run_stream(cols, units, off, {});
    print_rows(whole);
    return argc == 5 && !same(whole, run_stream(cols, units, off, {ca, cb}), "cut batches") ? 1 : 0;
}
