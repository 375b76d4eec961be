/* gpu_sort.c — the GPU radix sort (core/cuda/sort.cu through core/cuda/sort.h) against a plain
 * stable sort on the host: every key type, ascending and descending, bits ranges, several
 * keys (packed and in several passes), each with its own order, each strategy (keys only,
 * one 4-byte value, a permutation with gathers), sizes 0, 1, 31, 32, 33, tile edges ±1,
 * large sizes, and a batch of 2^31 + 1000 rows where the device has the memory. Random bit
 * patterns, so floats include NaNs of both signs, infinities and both zeros. Then sort
 * pipelines with per-key orders (`order: [descending, ascending]`) on the CUDA backend
 * against the CPU backend, bit for bit. Float keys that take CUB's float sort (f32 alone or
 * with one 4-byte column, f64 alone): zero runs of every length beside NaNs of both signs,
 * values recording arrival order, directly and through sessions against the CPU backend.
 * Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda/sort.h"
#include "testutil.h"
#include "common/types.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define CUDA_OK(call) ck_assert_int_eq((int)(call), (int)cudaSuccess)

static const sluice_type all_types[] = {SLUICE_BOOL, SLUICE_I8, SLUICE_I16, SLUICE_I32,
                                        SLUICE_I64, SLUICE_U8, SLUICE_U16, SLUICE_U32,
                                        SLUICE_U64, SLUICE_F16, SLUICE_F32, SLUICE_F64};

/* The oracle's key image, written from pipelines/SCHEMA.md independently of the library. */
static uint64_t oracle_image(sluice_type t, const void *col, int64_t i) {
    uint64_t b = 0;
    size_t w = sluice_type_size(t);
    memcpy(&b, (const char *)col + (size_t)i * w, w); /* little-endian */
    uint64_t sign = 1ull << (w * 8 - 1), mask = w == 8 ? ~0ull : (1ull << (w * 8)) - 1;
    switch (t) {
    case SLUICE_I8: case SLUICE_I16: case SLUICE_I32: case SLUICE_I64: return b ^ sign;
    case SLUICE_F16: case SLUICE_F32: case SLUICE_F64: return (b & sign) ? (~b & mask) : (b | sign);
    default: return b;
    }
}

typedef struct sort_case {
    int ncols;
    sluice_type types[6];
    int nkeys;
    int keys[4];
    bool descending;    /* every key, through sl_cuda_sort_desc.descending */
    int lo, hi;         /* 0, 0: full width */
    unsigned desc_mask; /* bit k: key k descending, through key_descending[k] */
} sort_case;

static const sort_case *g_case;
static void *const *g_cols;

static uint64_t case_key(const sort_case *c, int k, int64_t row) {
    sluice_type t = c->types[c->keys[k]];
    int w = (int)sluice_type_size(t) * 8;
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    uint64_t u = oracle_image(t, g_cols[c->keys[k]], row);
    if (c->descending || ((c->desc_mask >> k) & 1u)) u = ~u & mask;
    if (c->nkeys == 1 && c->hi > 0) {
        int bw = c->hi - c->lo;
        u = (u >> c->lo) & (bw == 64 ? ~0ull : (1ull << bw) - 1);
    }
    return u;
}

static int cmp_rows(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    for (int k = 0; k < g_case->nkeys; k++) {
        uint64_t x = case_key(g_case, k, a), y = case_key(g_case, k, b);
        if (x != y) return x < y ? -1 : 1;
    }
    return a < b ? -1 : a > b; /* stability */
}

/* Sorts the host columns host[] (n rows of case c) on the device with the sort prepared for
 * max_rows rows and checks every output column against the oracle, bit for bit. native: 1 or
 * 0 asserts that the prepared sort does or does not take CUB's float sort (-1: either). */
static void check_sort(const sort_case *c, int64_t n, int64_t max_rows, void *const *host,
                       int native) {
    void *sorted[6], *dev_in[6], *dev_out[6];
    for (int i = 0; i < c->ncols; i++) {
        size_t bytes = (size_t)n * sluice_type_size(c->types[i]) + 8;
        sorted[i] = malloc(bytes);
        ck_assert_ptr_nonnull(sorted[i]);
        CUDA_OK(cudaMalloc(&dev_in[i], bytes));
        CUDA_OK(cudaMalloc(&dev_out[i], bytes));
        CUDA_OK(cudaMemcpy(dev_in[i], host[i], bytes, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(dev_out[i], 0xA5, bytes)); /* poison: every row must be written */
    }
    sl_cuda_sort_desc d;
    memset(&d, 0, sizeof d);
    d.ncolumns = c->ncols;
    d.types = c->types;
    d.nkeys = c->nkeys;
    memcpy(d.keys, c->keys, sizeof c->keys);
    d.descending = c->descending;
    for (int k = 0; k < c->nkeys; k++) d.key_descending[k] = (c->desc_mask >> k) & 1u;
    d.bits_lo = c->lo;
    d.bits_hi = c->hi ? c->hi : (int)sluice_type_size(c->types[c->keys[0]]) * 8;
    sl_cuda_sort s;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, max_rows), SLUICE_OK);
    if (native >= 0) ck_assert_int_eq(s.native_float, native);
    void *scratch;
    CUDA_OK(cudaMalloc(&scratch, s.scratch_bytes));
    /* poison: the fix-up may not rely on zeroed scratch */
    CUDA_OK(cudaMemset(scratch, 0x5A, s.scratch_bytes));
    CUDA_OK(sl_cuda_sort_run(&s, scratch, n, c->types, (const void *const *)dev_in, dev_out, NULL));
    CUDA_OK(cudaDeviceSynchronize());

    int64_t *order = malloc((size_t)(n + 1) * sizeof *order);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    g_case = c;
    g_cols = host;
    qsort(order, (size_t)n, sizeof *order, cmp_rows);
    for (int i = 0; i < c->ncols; i++) {
        size_t w = sluice_type_size(c->types[i]);
        CUDA_OK(cudaMemcpy(sorted[i], dev_out[i], (size_t)n * w, cudaMemcpyDeviceToHost));
        for (int64_t r = 0; r < n; r++) {
            if (memcmp((char *)sorted[i] + r * w, (char *)host[i] + order[r] * w, w) != 0)
                ck_abort_msg("strategy %d (CUB's float sort %d), %lld rows (prepared for %lld): "
                             "column %d (%s) differs at row %lld (keys %d, descending %d, "
                             "per-key mask %u, bits %d..%d)",
                             (int)s.strategy, (int)s.native_float, (long long)n,
                             (long long)max_rows, i, sluice_type_name(c->types[i]), (long long)r,
                             c->nkeys, c->descending, c->desc_mask, d.bits_lo, d.bits_hi);
        }
    }
    free(order);
    cudaFree(scratch);
    for (int i = 0; i < c->ncols; i++) {
        free(sorted[i]);
        cudaFree(dev_in[i]);
        cudaFree(dev_out[i]);
    }
}

static void run_case(const sort_case *c, int64_t n, uint64_t seed) {
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    void *host[6];
    for (int i = 0; i < c->ncols; i++) {
        size_t bytes = (size_t)n * sluice_type_size(c->types[i]) + 8;
        host[i] = malloc(bytes);
        ck_assert_ptr_nonnull(host[i]);
        uint8_t *h = host[i];
        /* Few distinct values in some columns, so ties (and stability) matter. */
        bool narrow = (seed + (uint64_t)i) % 3 == 0;
        for (size_t b = 0; b < bytes; b++) h[b] = (uint8_t)tu_rng_next(&rng);
        if (narrow)
            for (size_t b = 0; b < bytes; b++) h[b] &= 0x81;
        if (c->types[i] == SLUICE_BOOL)
            for (size_t b = 0; b < bytes; b++) h[b] &= 1;
    }
    check_sort(c, n, n + 7, host, -1);
    for (int i = 0; i < c->ncols; i++) free(host[i]);
}

static const int64_t sizes[] = {0, 1, 31, 32, 33, 255, 256, 257, 4095, 4096, 4097, 100003};
/* SLUICE_TEST_SMALL (compute-sanitizer runs): the edge sizes only. */
static size_t nsizes(void) { return getenv("SLUICE_TEST_SMALL") ? NELEM(sizes) - 1 : NELEM(sizes); }

/* One key of type all_types[_i]: alone (KEYS), with a u32 (PAIRS), with u8 + f64 (PERMUTE). */
START_TEST(test_every_key_type) {
    sluice_type t = all_types[_i];
    for (int shape = 0; shape < 3; shape++) {
        /* desc 2: descending through key_descending[0] alone */
        for (int desc = 0; desc < 3; desc++) {
            sort_case c = {0};
            c.types[0] = t;
            c.ncols = 1 + (shape == 1 ? 1 : shape == 2 ? 2 : 0);
            if (shape == 1) c.types[1] = SLUICE_U32;
            if (shape == 2) c.types[1] = SLUICE_U8, c.types[2] = SLUICE_F64;
            c.nkeys = 1;
            c.descending = desc == 1;
            c.desc_mask = desc == 2 ? 1u : 0u;
            for (size_t k = 0; k < nsizes(); k++)
                run_case(&c, sizes[k], 1000u * (uint64_t)_i + 10u * (uint64_t)shape + (uint64_t)desc + (uint64_t)k);
        }
    }
}
END_TEST

START_TEST(test_bits_ranges) {
    const struct { sluice_type t; int lo, hi; } r[] = {
        {SLUICE_U32, 4, 12}, {SLUICE_U32, 0, 1}, {SLUICE_I32, 16, 32}, {SLUICE_F32, 31, 32},
        {SLUICE_U64, 20, 60}, {SLUICE_I64, 0, 64}, {SLUICE_U16, 3, 11}, {SLUICE_F64, 8, 40}};
    for (size_t i = 0; i < NELEM(r); i++) {
        for (int with_value = 0; with_value < 3; with_value++) {
            for (int desc = 0; desc < 3; desc++) { /* 2: through key_descending[0] */
                sort_case c = {0};
                c.types[0] = r[i].t;
                c.ncols = 1 + with_value;
                c.types[1] = SLUICE_U32;
                c.types[2] = SLUICE_I16;
                c.nkeys = 1;
                c.descending = desc == 1;
                c.desc_mask = desc == 2 ? 1u : 0u;
                c.lo = r[i].lo;
                c.hi = r[i].hi;
                run_case(&c, 33, 7 + i);
                if (!getenv("SLUICE_TEST_SMALL")) run_case(&c, 50001, 8 + i);
            }
        }
    }
}
END_TEST

START_TEST(test_several_keys) {
    const sort_case cases[] = {
        /* two keys packed in one image */
        {3, {SLUICE_I16, SLUICE_F32, SLUICE_U32}, 2, {0, 1}, false, 0, 0, 0u},
        {3, {SLUICE_I16, SLUICE_F32, SLUICE_U32}, 2, {1, 0}, true, 0, 0, 0u},
        /* three keys over 64 bits: two packs, two stable passes */
        {4, {SLUICE_U64, SLUICE_I64, SLUICE_U8, SLUICE_F16}, 3, {0, 1, 2}, false, 0, 0, 0u},
        {4, {SLUICE_U64, SLUICE_I64, SLUICE_U8, SLUICE_F16}, 3, {2, 0, 1}, true, 0, 0, 0u},
        /* key columns that are not first, bool keys */
        {3, {SLUICE_F64, SLUICE_BOOL, SLUICE_I8}, 2, {1, 2}, false, 0, 0, 0u},
        {5, {SLUICE_F16, SLUICE_F16, SLUICE_F16, SLUICE_F16, SLUICE_F16}, 4, {3, 2, 1, 0}, false, 0, 0,
         0u},
        /* each key its own order: packed, over several packs, f16s packed four to an image */
        {3, {SLUICE_I16, SLUICE_F32, SLUICE_U32}, 2, {0, 1}, false, 0, 0, 1u},
        {3, {SLUICE_I16, SLUICE_F32, SLUICE_U32}, 2, {1, 0}, false, 0, 0, 2u},
        {4, {SLUICE_U64, SLUICE_I64, SLUICE_U8, SLUICE_F16}, 3, {0, 1, 2}, false, 0, 0, 5u},
        {4, {SLUICE_U64, SLUICE_I64, SLUICE_U8, SLUICE_F16}, 3, {2, 0, 1}, false, 0, 0, 2u},
        {3, {SLUICE_F64, SLUICE_BOOL, SLUICE_I8}, 2, {1, 2}, false, 0, 0, 1u},
        {5, {SLUICE_F16, SLUICE_F16, SLUICE_F16, SLUICE_F16, SLUICE_F16}, 4, {3, 2, 1, 0}, false, 0, 0,
         10u},
    };
    for (size_t i = 0; i < NELEM(cases); i++)
        for (size_t k = 0; k < nsizes(); k++) run_case(&cases[i], sizes[k], 77 + i * 31 + k);
}
END_TEST

START_TEST(test_large) {
    sort_case pairs = {2, {SLUICE_U32, SLUICE_U32}, 1, {0}, false, 0, 0, 0u};
    run_case(&pairs, (1 << 22) + 3, 5);
    sort_case f = {2, {SLUICE_F32, SLUICE_I64}, 1, {0}, true, 0, 0, 0u};
    run_case(&f, (1 << 21) - 1, 6);
}
END_TEST

/* ---- float keys: CUB's float sort and the zero-run fix-up ----------------------------------- */
/* CUB's float sort ranks -0.0 as +0.0, and the fix-up after it (core/cuda/sort.cu) puts each
 * zero back in sluice's order. The keys below make zero runs of every length, next to NaNs of
 * both signs, and each value column holds its row's arrival index: a sort that left CUB's
 * order (-0.0 and +0.0 interleaved in arrival order), misplaced the run's bounds or broke the
 * arrival order within either zero differs from the oracle in a key or in a value. */

typedef enum zero_mix {
    ZM_NO_ZERO,   /* random bits, no zero (the run is empty) */
    ZM_ONE_MINUS, /* one -0.0 at a random row among random nonzero keys */
    ZM_ONE_PLUS,  /* one +0.0 */
    ZM_ALL_MINUS, /* every row -0.0 */
    ZM_ALL_PLUS,  /* every row +0.0 */
    ZM_ALL_MIXED, /* every row -0.0 or +0.0: the run is the whole batch */
    ZM_NEIGHBOURS,/* ±0.0, quiet and signalling NaNs of both signs, ±inf, ±smallest subnormal, ±1 */
    ZM_RANDOM,    /* random bits, a quarter of the rows ±0.0 */
    ZM_COUNT
} zero_mix;

/* n keys of float type t (f32 or f64) drawn as `mix` says. */
static void fill_float_keys(sluice_type t, void *col, int64_t n, zero_mix mix, tu_rng *rng) {
    const size_t w = sluice_type_size(t);
    const uint64_t sign = 1ull << (w * 8 - 1), mask = w == 8 ? ~0ull : (1ull << (w * 8)) - 1;
    const uint64_t inf = w == 8 ? 0x7ff0000000000000ull : 0x7f800000ull;
    const uint64_t quiet = w == 8 ? 0x0008000000000000ull : 0x00400000ull;
    const uint64_t one = w == 8 ? 0x3ff0000000000000ull : 0x3f800000ull;
    const uint64_t near[12] = {0,          sign,           inf | quiet, inf | quiet | sign,
                               inf | 1,    inf | 1 | sign, inf,         inf | sign,
                               1,          1 | sign,       one,         one | sign};
    const int64_t lone = n > 0 ? tu_rng_range(rng, 0, n - 1) : 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = tu_rng_next(rng), v;
        switch (mix) {
        case ZM_ALL_MINUS: v = sign; break;
        case ZM_ALL_PLUS: v = 0; break;
        case ZM_ALL_MIXED: v = (r >> 17) & 1u ? sign : 0; break;
        case ZM_NEIGHBOURS: v = near[r % 12]; break;
        case ZM_RANDOM: v = r % 4 == 0 ? ((r >> 17) & 1u ? sign : 0) : r & mask; break;
        default:
            v = r & mask;
            if ((v & ~sign) == 0) v |= 1; /* a zero becomes the smallest subnormal */
            if (i == lone && mix == ZM_ONE_MINUS) v = sign;
            if (i == lone && mix == ZM_ONE_PLUS) v = 0;
            break;
        }
        memcpy((char *)col + (size_t)i * w, &v, w);
    }
}

/* Host columns for case c: its key from fill_float_keys, every other column (4 bytes) its
 * row's arrival index. */
static void make_zero_case(const sort_case *c, int64_t n, zero_mix mix, uint64_t seed,
                           void **host) {
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    for (int i = 0; i < c->ncols; i++) {
        host[i] = calloc((size_t)n * sluice_type_size(c->types[i]) + 8, 1);
        ck_assert_ptr_nonnull(host[i]);
        if (i == c->keys[0]) {
            fill_float_keys(c->types[i], host[i], n, mix, &rng);
        } else {
            ck_assert_uint_eq(sluice_type_size(c->types[i]), 4);
            for (int64_t r = 0; r < n; r++) {
                uint32_t a = (uint32_t)r;
                memcpy((char *)host[i] + (size_t)r * 4, &a, 4);
            }
        }
    }
}

/* The shapes that take CUB's float sort: an f32 key alone (KEYS) or with one 4-byte column
 * (PAIRS: first or second, of three types), an f64 key alone (KEYS). */
static const sort_case float_shapes[] = {
    {1, {SLUICE_F32}, 1, {0}, false, 0, 0, 0u},
    {2, {SLUICE_F32, SLUICE_U32}, 1, {0}, false, 0, 0, 0u},
    {2, {SLUICE_I32, SLUICE_F32}, 1, {1}, false, 0, 0, 0u},
    {2, {SLUICE_F32, SLUICE_F32}, 1, {0}, false, 0, 0, 0u},
    {1, {SLUICE_F64}, 1, {0}, false, 0, 0, 0u},
};

/* Every zero mix, in both orders (descending through `descending` and through
 * key_descending[0]), for float_shapes[_i]: sizes from one row to past one CUB tile and past
 * 2^20 rows, each sort prepared for its size or for 2^20 rows (so that most of the fix-up's
 * chunks of a small run are empty or one row long). */
START_TEST(test_zero_runs) {
    static const int64_t zsizes[] = {1, 2, 33, 4097, 20011, ((int64_t)1 << 20) + 4097};
    const size_t nz = getenv("SLUICE_TEST_SMALL") ? NELEM(zsizes) - 1 : NELEM(zsizes);
    for (int desc = 0; desc < 3; desc++) {
        sort_case c = float_shapes[_i];
        c.descending = desc == 1;
        c.desc_mask = desc == 2 ? 1u : 0u;
        for (int mix = 0; mix < ZM_COUNT; mix++) {
            for (size_t k = 0; k < nz; k++) {
                int64_t n = zsizes[k];
                bool large = n > ((int64_t)1 << 20);
                /* past 2^20 rows: the mixes with a run, in two of the three orders */
                if (large && (desc == 2 || mix == ZM_NO_ZERO || mix == ZM_ALL_PLUS ||
                              mix == ZM_ALL_MINUS || mix == ZM_ONE_PLUS))
                    continue;
                int64_t max_rows = large || mix % 2 ? n : (int64_t)1 << 20;
                void *host[6];
                make_zero_case(&c, n, (zero_mix)mix, 500u + 97u * (uint64_t)_i + 13u * (uint64_t)mix + k,
                               host);
                check_sort(&c, n, max_rows, host, 1);
                for (int i = 0; i < c.ncols; i++) free(host[i]);
            }
        }
    }
}
END_TEST

/* One zero run over a whole large batch (2^24 + 17 rows of -0.0 and +0.0 at random, with
 * their arrival indices; 2^22 + 3 f64 keys): every chunk of the fix-up's largest grid holds
 * many tiles of the run. */
START_TEST(test_zero_run_large) {
    for (int desc = 0; desc < 2; desc++) {
        sort_case pairs = {2, {SLUICE_F32, SLUICE_U32}, 1, {0}, desc == 1, 0, 0, 0u};
        int64_t n = ((int64_t)1 << 24) + 17;
        void *host[6];
        make_zero_case(&pairs, n, ZM_ALL_MIXED, 71u + (uint64_t)desc, host);
        check_sort(&pairs, n, n, host, 1);
        for (int i = 0; i < pairs.ncols; i++) free(host[i]);
        sort_case keys = {1, {SLUICE_F64}, 1, {0}, desc == 1, 0, 0, 0u};
        n = ((int64_t)1 << 22) + 3;
        make_zero_case(&keys, n, desc ? ZM_RANDOM : ZM_ALL_MIXED, 81u + (uint64_t)desc, host);
        check_sort(&keys, n, n, host, 1);
        free(host[0]);
    }
}
END_TEST

/* Which descriptions take CUB's float sort: full-width f32 and f64 keys of the shapes above,
 * with 32-bit row counts, and nothing else (bits ranges, other columns, other types, several
 * keys and 2^31 rows or more keep the images). */
START_TEST(test_float_strategies) {
    const struct {
        int ncols;
        sluice_type types[3];
        int nkeys;
        int lo, hi;
        int64_t rows;
        bool native;
        sl_cuda_sort_strategy strategy;
    } r[] = {
        {1, {SLUICE_F32}, 1, 0, 32, 1000, true, SL_CUDA_SORT_KEYS},
        {1, {SLUICE_F32}, 1, 0, 0, 1000, true, SL_CUDA_SORT_KEYS}, /* bits 0, 0: full width */
        {2, {SLUICE_F32, SLUICE_I32}, 1, 0, 32, 1000, true, SL_CUDA_SORT_PAIRS},
        {1, {SLUICE_F64}, 1, 0, 64, 1000, true, SL_CUDA_SORT_KEYS},
        {1, {SLUICE_F32}, 1, 0, 32, INT32_MAX, true, SL_CUDA_SORT_KEYS},
        {1, {SLUICE_F32}, 1, 0, 31, 1000, false, SL_CUDA_SORT_KEYS},
        {1, {SLUICE_F32}, 1, 1, 32, 1000, false, SL_CUDA_SORT_KEYS},
        {1, {SLUICE_F64}, 1, 8, 40, 1000, false, SL_CUDA_SORT_PERMUTE},
        {2, {SLUICE_F32, SLUICE_U8}, 1, 0, 32, 1000, false, SL_CUDA_SORT_PERMUTE},
        {3, {SLUICE_F32, SLUICE_U32, SLUICE_U32}, 1, 0, 32, 1000, false, SL_CUDA_SORT_PERMUTE},
        {2, {SLUICE_F64, SLUICE_U32}, 1, 0, 64, 1000, false, SL_CUDA_SORT_PERMUTE},
        {2, {SLUICE_F32, SLUICE_F32}, 2, 0, 0, 1000, false, SL_CUDA_SORT_PERMUTE},
        {1, {SLUICE_F16}, 1, 0, 16, 1000, false, SL_CUDA_SORT_KEYS},
        {2, {SLUICE_F32, SLUICE_U32}, 1, 0, 32, (int64_t)INT32_MAX + 1, false, SL_CUDA_SORT_PAIRS},
        {1, {SLUICE_F64}, 1, 0, 64, (int64_t)INT32_MAX + 1, false, SL_CUDA_SORT_PERMUTE},
    };
    for (size_t i = 0; i < NELEM(r); i++) {
        sl_cuda_sort_desc d;
        memset(&d, 0, sizeof d);
        d.ncolumns = r[i].ncols;
        d.types = r[i].types;
        d.nkeys = r[i].nkeys;
        d.keys[1] = 1;
        d.bits_lo = r[i].lo;
        d.bits_hi = r[i].hi;
        for (int desc = 0; desc < 2; desc++) {
            d.descending = desc;
            sl_cuda_sort s;
            ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, r[i].rows), SLUICE_OK);
            ck_assert_msg(s.native_float == r[i].native && s.strategy == r[i].strategy,
                          "description %zu: CUB's float sort %d, strategy %d", i,
                          (int)s.native_float, (int)s.strategy);
        }
    }
}
END_TEST

/* 2^31 + 1000 rows: past 32-bit row counts (CUB's 64-bit offsets, u32 row indices). Needs
 * about 40 GB of device memory; skipped (with a note) where there is less. */
START_TEST(test_past_2_31_rows) {
    const int64_t n = ((int64_t)1 << 31) + 1000;
    size_t free_b = 0, total_b = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    if (free_b < ((size_t)48 << 30)) {
        fprintf(stderr, "test_past_2_31_rows: skipped, %zu GB free on the device\n", free_b >> 30);
        return;
    }
    sluice_type types[2] = {SLUICE_U32, SLUICE_U8};
    sl_cuda_sort_desc d;
    memset(&d, 0, sizeof d);
    d.ncolumns = 2;
    d.types = types;
    d.nkeys = 1;
    d.bits_hi = 32;
    sl_cuda_sort s;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, n), SLUICE_OK);
    uint32_t *keys = malloc((size_t)n * 4);
    uint8_t *tags = malloc((size_t)n);
    ck_assert_ptr_nonnull(keys);
    ck_assert_ptr_nonnull(tags);
    tu_rng rng;
    tu_rng_seed(&rng, 31);
    uint64_t sum_in = 0;
    for (int64_t i = 0; i < n; i++) {
        keys[i] = (uint32_t)tu_rng_next(&rng);
        tags[i] = (uint8_t)(keys[i] * 2654435761u >> 24); /* a function of the key */
        sum_in += keys[i];
    }
    void *din[2], *dout[2], *scratch;
    CUDA_OK(cudaMalloc(&din[0], (size_t)n * 4));
    CUDA_OK(cudaMalloc(&din[1], (size_t)n));
    CUDA_OK(cudaMalloc(&dout[0], (size_t)n * 4));
    CUDA_OK(cudaMalloc(&dout[1], (size_t)n));
    CUDA_OK(cudaMalloc(&scratch, s.scratch_bytes));
    CUDA_OK(cudaMemcpy(din[0], keys, (size_t)n * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(din[1], tags, (size_t)n, cudaMemcpyHostToDevice));
    CUDA_OK(sl_cuda_sort_run(&s, scratch, n, types, (const void *const *)din, dout, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(keys, dout[0], (size_t)n * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(tags, dout[1], (size_t)n, cudaMemcpyDeviceToHost));
    uint64_t sum_out = keys[0];
    for (int64_t i = 1; i < n; i++) {
        if (keys[i - 1] > keys[i]) ck_abort_msg("not sorted at row %lld", (long long)i);
        sum_out += keys[i];
    }
    for (int64_t i = 0; i < n; i++)
        if (tags[i] != (uint8_t)(keys[i] * 2654435761u >> 24))
            ck_abort_msg("value column did not follow its key at row %lld", (long long)i);
    ck_assert_uint_eq(sum_in, sum_out);
    for (int i = 0; i < 2; i++) {
        cudaFree(din[i]);
        cudaFree(dout[i]);
    }
    cudaFree(scratch);
    free(keys);
    free(tags);
}
END_TEST

START_TEST(test_bad_descriptions) {
    sluice_type t[2] = {SLUICE_U32, SLUICE_U32};
    sl_cuda_sort s;
    sl_cuda_sort_desc d;
    memset(&d, 0, sizeof d);
    d.ncolumns = 2;
    d.types = t;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, 10), SLUICE_ERR_INVALID_ARGUMENT); /* no key */
    d.nkeys = 1;
    d.keys[0] = 2;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, 10), SLUICE_ERR_INVALID_ARGUMENT); /* out of range */
    d.keys[0] = 0;
    d.bits_lo = 8;
    d.bits_hi = 40;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, 10), SLUICE_ERR_INVALID_ARGUMENT); /* past width */
    d.bits_hi = 16;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, SL_CUDA_SORT_MAX_ROWS + 1), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, 10), SLUICE_OK);
}
END_TEST

/* ---- per-key orders: the CUDA backend against the CPU backend ------------------------------ */

#define PIPE_MAX_COLS 6

/* Runs `yaml` on `backend` over the columns, pushed in the pieces `cuts` (lengths summing to
 * n, each at most max_rows), pulling after every push and after the flush; returns the
 * outputs concatenated (out[c]: n rows of 8 bytes room) and their count. */
static int64_t run_backend(sluice_context *ctx, const char *yaml, sluice_backend backend,
                           const sluice_column *in, int nin, const int64_t *cuts, int ncuts,
                           int64_t max_rows, void **out, sluice_type *out_types, size_t *nout) {
    sluice_pipeline *p = tu_load(ctx, yaml);
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = backend;
    o.max_batch_rows = max_rows;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    int64_t at = 0, rows = 0;
    for (int piece = 0; piece <= ncuts; piece++) {
        if (piece < ncuts) {
            sluice_column c[PIPE_MAX_COLS];
            for (int i = 0; i < nin; i++) {
                c[i] = in[i];
                c[i].data = (const char *)in[i].data + (size_t)at * sluice_type_size(in[i].type);
                c[i].length = cuts[piece];
            }
            ck_assert_int_eq(sluice_session_push(s, c, (size_t)nin), SLUICE_OK);
            at += cuts[piece];
        } else {
            ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        }
        sluice_batch *b;
        while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
            *nout = sluice_batch_column_count(b);
            ck_assert_uint_le(*nout, PIPE_MAX_COLS);
            for (size_t c = 0; c < *nout; c++) {
                sluice_column col;
                ck_assert_int_eq(sluice_batch_column(b, c, &col), SLUICE_OK);
                out_types[c] = col.type;
                size_t w = sluice_type_size(col.type);
                memcpy((char *)out[c] + (size_t)rows * w, col.data, (size_t)col.length * w);
            }
            rows += sluice_batch_rows(b);
            sluice_batch_free(b);
        }
    }
    sluice_session_close(s);
    sluice_pipeline_free(p);
    return rows;
}

/* The pipeline's inputs are named and typed by names/types; random bits (some columns
 * masked to few values, so ties, both zeros and NaNs of both signs are common). */
static void cpu_vs_gpu_columns(const char *yaml, const sluice_column *in, int nin, int64_t n,
                               tu_rng *cut_rng);

static void cpu_vs_gpu(const char *yaml, int nin, const char *const *names,
                       const sluice_type *types, int64_t n, uint64_t seed) {
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    sluice_column in[PIPE_MAX_COLS];
    for (int i = 0; i < nin; i++) {
        size_t bytes = (size_t)n * sluice_type_size(types[i]) + 8;
        uint8_t *h = malloc(bytes);
        ck_assert_ptr_nonnull(h);
        for (size_t b = 0; b < bytes; b++) h[b] = (uint8_t)tu_rng_next(&rng);
        if ((seed + (uint64_t)i) % 2 == 0)
            for (size_t b = 0; b < bytes; b++) h[b] &= 0x81;
        if (types[i] == SLUICE_BOOL)
            for (size_t b = 0; b < bytes; b++) h[b] &= 1;
        in[i] = (sluice_column){names[i], types[i], h, n};
    }
    cpu_vs_gpu_columns(yaml, in, nin, n, &rng);
    for (int i = 0; i < nin; i++) free((void *)in[i].data);
}

/* `yaml` over the columns in[] (n rows each) on both backends, pushed in pieces of random
 * lengths up to 4096 rows (drawn from cut_rng), compared bit for bit. */
static void cpu_vs_gpu_columns(const char *yaml, const sluice_column *in, int nin, int64_t n,
                               tu_rng *cut_rng) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng = *cut_rng;
    const int64_t max_rows = 4096;
    int64_t *cuts = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int ncuts = 0;
    for (int64_t at = 0; at < n;) {
        int64_t len = tu_rng_range(&rng, 0, max_rows);
        if (len > n - at) len = n - at;
        cuts[ncuts++] = len;
        at += len;
    }
    void *ref[PIPE_MAX_COLS], *got[PIPE_MAX_COLS];
    for (int c = 0; c < PIPE_MAX_COLS; c++) {
        ref[c] = malloc(8 * (size_t)n + 8);
        got[c] = malloc(8 * (size_t)n + 8);
    }
    sluice_type ref_types[PIPE_MAX_COLS], got_types[PIPE_MAX_COLS];
    size_t nref = 0, ngot = 0;
    int64_t ref_rows = run_backend(ctx, yaml, SLUICE_BACKEND_CPU, in, nin, cuts, ncuts, max_rows,
                                   ref, ref_types, &nref);
    int64_t got_rows = run_backend(ctx, yaml, SLUICE_BACKEND_CUDA, in, nin, cuts, ncuts, max_rows,
                                   got, got_types, &ngot);
    ck_assert_int_eq(got_rows, ref_rows);
    ck_assert_uint_eq(ngot, nref);
    for (size_t c = 0; c < nref; c++) {
        ck_assert_int_eq(got_types[c], ref_types[c]);
        size_t w = sluice_type_size(ref_types[c]);
        for (int64_t r = 0; r < ref_rows; r++)
            if (memcmp((char *)got[c] + (size_t)r * w, (char *)ref[c] + (size_t)r * w, w) != 0) {
                uint64_t gv = 0, rv = 0; /* the differing values' bits, for the message */
                memcpy(&gv, (char *)got[c] + (size_t)r * w, w);
                memcpy(&rv, (char *)ref[c] + (size_t)r * w, w);
                ck_abort_msg("%lld rows, output column %zu differs at row %lld: GPU 0x%llx, CPU "
                             "0x%llx (first batch %lld rows):\n%s",
                             (long long)n, c, (long long)r, (unsigned long long)gv,
                             (unsigned long long)rv, (long long)cuts[0], yaml);
            }
    }
    for (int c = 0; c < PIPE_MAX_COLS; c++) {
        free(ref[c]);
        free(got[c]);
    }
    free(cuts);
    sluice_context_destroy(ctx);
}

/* Two keys in both mixed orders, the first of type all_types[_i + 1] (every type but bool,
 * which is not a sort key type in pipelines), per stream and per batch. */
START_TEST(test_orders_per_key_cpu_vs_gpu) {
    sluice_type t = all_types[_i + 1];
    static const char *const names[3] = {"a", "b", "v"};
    sluice_type types[3] = {t, SLUICE_F32, SLUICE_U32};
    static const char *const orders[] = {"[descending, ascending]", "[ascending, descending]"};
    char yaml[512];
    for (int o = 0; o < 2; o++) {
        for (int per_batch = 0; per_batch < 2; per_batch++) {
            for (int swap = 0; swap < 2; swap++) {
                snprintf(yaml, sizeof yaml,
                         "sluice: 1\nname: orders\ninput: {a: %s, b: f32, v: u32}\nstages:\n"
                         "  - sort: {keys: [%s], order: %s, per: %s}\noutput: [a, b, v]\n",
                         sluice_type_name(t), swap ? "b, a" : "a, b", orders[o],
                         per_batch ? "batch" : "stream");
                uint64_t seed = 900 + 16 * (uint64_t)_i + 4 * (uint64_t)o +
                                2 * (uint64_t)per_batch + (uint64_t)swap;
                cpu_vs_gpu(yaml, 3, names, types, 33, seed);
                cpu_vs_gpu(yaml, 3, names, types, getenv("SLUICE_TEST_SMALL") ? 4097 : 30001,
                           seed + 1);
            }
        }
    }
}
END_TEST

/* Three keys over several packed images with `values`; one key with a one-entry list and
 * `bits`; a map before the sort and a scan after it. The map negates only numbers: the bits
 * of a NaN that arithmetic produces are unspecified (EXPRESSIONS.md; CUDA's negation makes
 * a canonical NaN, the CPU's flips the sign), so a computed NaN key may sort differently on
 * the two backends, while input NaNs keep their bits. */
START_TEST(test_orders_per_key_shapes_cpu_vs_gpu) {
    static const char *const names4[4] = {"c", "a", "d", "v"};
    sluice_type types4[4] = {SLUICE_U8, SLUICE_U64, SLUICE_F64, SLUICE_I32};
    static const char *const names2[2] = {"k", "x"};
    sluice_type types2[2] = {SLUICE_U32, SLUICE_F32};
    int64_t big = getenv("SLUICE_TEST_SMALL") ? 4097 : 50000;
    for (int per_batch = 0; per_batch < 2; per_batch++) {
        char yaml[512];
        const char *per = per_batch ? "batch" : "stream";
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: three\ninput: {c: u8, a: u64, d: f64, v: i32}\nstages:\n"
                 "  - sort: {keys: [c, a, d], order: [descending, ascending, descending], "
                 "values: [v], per: %s}\n", per);
        cpu_vs_gpu(yaml, 4, names4, types4, big, 31 + (uint64_t)per_batch);
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: bits\ninput: {k: u32, x: f32}\nstages:\n"
                 "  - sort: {key: k, order: [descending], bits: [4, 12], per: %s}\n", per);
        cpu_vs_gpu(yaml, 2, names2, types2, big, 41 + (uint64_t)per_batch);
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: fused\ninput: {k: u32, x: f32}\nstages:\n"
                 "  - map: {g: k %% 7, m: 'isnan(x) ? x : -x'}\n"
                 "  - sort: {keys: [g, m], order: [ascending, descending], per: %s}\n"
                 "  - scan: {of: g, op: sum, into: s}\noutput: [g, m, k, s]\n", per);
        cpu_vs_gpu(yaml, 2, names2, types2, big, 51 + (uint64_t)per_batch);
    }
}
END_TEST

/* Float keys that take CUB's float sort, through sessions on both backends: an f32 key alone
 * or with a u32 value, an f64 key alone, each order, per batch and per stream, over keys full
 * of zeros of both signs beside NaNs of both signs (zero_mix), the values their rows' arrival
 * indices. */
START_TEST(test_float_keys_cpu_vs_gpu) {
    static const char *const shapes[][2] = {
        {"{k: f32}", "[k]"}, {"{k: f32, v: u32}", "[k, v]"}, {"{k: f64}", "[k]"}};
    static const zero_mix mixes[] = {ZM_NEIGHBOURS, ZM_RANDOM, ZM_ALL_MIXED};
    const int64_t n = getenv("SLUICE_TEST_SMALL") ? 4097 : 30001;
    for (size_t sh = 0; sh < NELEM(shapes); sh++) {
        for (int desc = 0; desc < 2; desc++) {
            for (int per_batch = 0; per_batch < 2; per_batch++) {
                char yaml[512];
                snprintf(yaml, sizeof yaml,
                         "sluice: 1\nname: zeros\ninput: %s\nstages:\n"
                         "  - sort: {key: k, order: [%s], per: %s}\noutput: %s\n",
                         shapes[sh][0], desc ? "descending" : "ascending",
                         per_batch ? "batch" : "stream", shapes[sh][1]);
                const zero_mix mix = mixes[(sh + (size_t)desc + (size_t)per_batch) % NELEM(mixes)];
                sort_case c = {sh == 1 ? 2 : 1, {sh == 2 ? SLUICE_F64 : SLUICE_F32, SLUICE_U32},
                               1, {0}, false, 0, 0, 0u};
                void *host[6] = {NULL};
                uint64_t seed = 300u + 8u * sh + 2u * (uint64_t)desc + (uint64_t)per_batch;
                make_zero_case(&c, n, mix, seed, host);
                sluice_column in[2] = {{"k", c.types[0], host[0], n}, {"v", SLUICE_U32, host[1], n}};
                tu_rng cuts;
                tu_rng_seed(&cuts, seed);
                cpu_vs_gpu_columns(yaml, in, c.ncols, n, &cuts);
                for (int i = 0; i < c.ncols; i++) free(host[i]);
            }
        }
    }
}
END_TEST

/* Four test cases, so a slow tool (compute-sanitizer racecheck) can run them side by side
 * with CK_RUN_CASE=types|ranges|zeros|large. */
static Suite *gpu_sort_suite(void) {
    Suite *s = suite_create("gpu_sort");
    TCase *types = tcase_create("types");
    tcase_add_test(types, test_bad_descriptions);
    tcase_add_loop_test(types, test_every_key_type, 0, (int)NELEM(all_types));
    TCase *ranges = tcase_create("ranges");
    tcase_add_test(ranges, test_bits_ranges);
    tcase_add_test(ranges, test_several_keys);
    tcase_add_loop_test(ranges, test_orders_per_key_cpu_vs_gpu, 0, (int)NELEM(all_types) - 1);
    tcase_add_test(ranges, test_orders_per_key_shapes_cpu_vs_gpu);
    TCase *zeros = tcase_create("zeros");
    tcase_add_test(zeros, test_float_strategies);
    tcase_add_loop_test(zeros, test_zero_runs, 0, (int)NELEM(float_shapes));
    tcase_add_test(zeros, test_float_keys_cpu_vs_gpu);
    TCase *large = tcase_create("large");
    if (!getenv("SLUICE_TEST_SMALL")) {
        tcase_add_test(large, test_large);
        tcase_add_test(large, test_zero_run_large);
        tcase_add_test(large, test_past_2_31_rows);
    }
    TCase *all[] = {types, ranges, zeros, large};
    for (size_t i = 0; i < NELEM(all); i++) {
        tcase_set_timeout(all[i], 900);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

int main(void) {
    /* CUDA does not survive fork(): run the tests in this process. */
    setenv("CK_FORK", "no", 1);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "gpu_sort: no GPU, skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_sort_suite());
}
