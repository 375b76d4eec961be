/* gpu_sort.c — the GPU radix sort (kernels/sort.cu through core/cuda/sort.h) against a plain
 * stable sort on the host: every key type, ascending and descending, bits ranges, several
 * keys (packed and in several passes), each strategy (keys only, one 4-byte value, a
 * permutation with gathers), sizes 0, 1, 31, 32, 33, tile edges ±1, large sizes, and a
 * batch of 2^31 + 1000 rows where the device has the memory. Random bit patterns, so floats
 * include NaNs of both signs, infinities and both zeros. Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda/sort.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define CUDA_OK(call) ck_assert_int_eq((int)(call), (int)cudaSuccess)

static const sluice_type all_types[] = {SLUICE_BOOL, SLUICE_I8, SLUICE_I16, SLUICE_I32,
                                        SLUICE_I64, SLUICE_U8, SLUICE_U16, SLUICE_U32,
                                        SLUICE_U64, SLUICE_F16, SLUICE_F32, SLUICE_F64};

/* The oracle's key image, written from DESIGN §3 independently of the library. */
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
    bool descending;
    int lo, hi; /* 0, 0: full width */
} sort_case;

static const sort_case *g_case;
static void *const *g_cols;

static uint64_t case_key(const sort_case *c, int k, int64_t row) {
    sluice_type t = c->types[c->keys[k]];
    int w = (int)sluice_type_size(t) * 8;
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    uint64_t u = oracle_image(t, g_cols[c->keys[k]], row);
    if (c->descending) u = ~u & mask;
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

static void run_case(const sort_case *c, int64_t n, uint64_t seed) {
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    void *host[6], *sorted[6], *dev_in[6], *dev_out[6];
    for (int i = 0; i < c->ncols; i++) {
        size_t bytes = (size_t)n * sluice_type_size(c->types[i]) + 8;
        host[i] = malloc(bytes);
        sorted[i] = malloc(bytes);
        ck_assert_ptr_nonnull(host[i]);
        uint8_t *h = host[i];
        /* Few distinct values in some columns, so ties (and stability) matter. */
        bool narrow = (seed + (uint64_t)i) % 3 == 0;
        for (size_t b = 0; b < bytes; b++) h[b] = (uint8_t)tu_rng_next(&rng);
        if (narrow)
            for (size_t b = 0; b < bytes; b++) h[b] &= 0x81;
        if (c->types[i] == SLUICE_BOOL)
            for (size_t b = 0; b < bytes; b++) h[b] &= 1;
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
    d.bits_lo = c->lo;
    d.bits_hi = c->hi ? c->hi : (int)sluice_type_size(c->types[c->keys[0]]) * 8;
    sl_cuda_sort s;
    ck_assert_int_eq(sl_cuda_sort_prepare(&s, &d, n + 7), SLUICE_OK);
    void *scratch;
    CUDA_OK(cudaMalloc(&scratch, s.scratch_bytes));
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
                ck_abort_msg("strategy %d, %lld rows: column %d (%s) differs at row %lld "
                             "(keys %d, descending %d, bits %d..%d)",
                             (int)s.strategy, (long long)n, i, sluice_type_name(c->types[i]),
                             (long long)r, c->nkeys, c->descending, d.bits_lo, d.bits_hi);
        }
    }
    free(order);
    cudaFree(scratch);
    for (int i = 0; i < c->ncols; i++) {
        free(host[i]);
        free(sorted[i]);
        cudaFree(dev_in[i]);
        cudaFree(dev_out[i]);
    }
}

static const int64_t sizes[] = {0, 1, 31, 32, 33, 255, 256, 257, 4095, 4096, 4097, 100003};
/* SLUICE_TEST_SMALL (compute-sanitizer runs): the edge sizes only. */
static size_t nsizes(void) { return getenv("SLUICE_TEST_SMALL") ? NELEM(sizes) - 1 : NELEM(sizes); }

/* One key of type all_types[_i]: alone (KEYS), with a u32 (PAIRS), with u8 + f64 (PERMUTE). */
START_TEST(test_every_key_type) {
    sluice_type t = all_types[_i];
    for (int shape = 0; shape < 3; shape++) {
        for (int desc = 0; desc < 2; desc++) {
            sort_case c = {0};
            c.types[0] = t;
            c.ncols = 1 + (shape == 1 ? 1 : shape == 2 ? 2 : 0);
            if (shape == 1) c.types[1] = SLUICE_U32;
            if (shape == 2) c.types[1] = SLUICE_U8, c.types[2] = SLUICE_F64;
            c.nkeys = 1;
            c.descending = desc;
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
            for (int desc = 0; desc < 2; desc++) {
                sort_case c = {0};
                c.types[0] = r[i].t;
                c.ncols = 1 + with_value;
                c.types[1] = SLUICE_U32;
                c.types[2] = SLUICE_I16;
                c.nkeys = 1;
                c.descending = desc;
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
        {3, {SLUICE_I16, SLUICE_F32, SLUICE_U32}, 2, {0, 1}, false, 0, 0},
        {3, {SLUICE_I16, SLUICE_F32, SLUICE_U32}, 2, {1, 0}, true, 0, 0},
        /* three keys over 64 bits: two packs, two stable passes */
        {4, {SLUICE_U64, SLUICE_I64, SLUICE_U8, SLUICE_F16}, 3, {0, 1, 2}, false, 0, 0},
        {4, {SLUICE_U64, SLUICE_I64, SLUICE_U8, SLUICE_F16}, 3, {2, 0, 1}, true, 0, 0},
        /* key columns that are not first, bool keys */
        {3, {SLUICE_F64, SLUICE_BOOL, SLUICE_I8}, 2, {1, 2}, false, 0, 0},
        {5, {SLUICE_F16, SLUICE_F16, SLUICE_F16, SLUICE_F16, SLUICE_F16}, 4, {3, 2, 1, 0}, false, 0, 0},
    };
    for (size_t i = 0; i < NELEM(cases); i++)
        for (size_t k = 0; k < nsizes(); k++) run_case(&cases[i], sizes[k], 77 + i * 31 + k);
}
END_TEST

START_TEST(test_large) {
    sort_case pairs = {2, {SLUICE_U32, SLUICE_U32}, 1, {0}, false, 0, 0};
    run_case(&pairs, (1 << 22) + 3, 5);
    sort_case f = {2, {SLUICE_F32, SLUICE_I64}, 1, {0}, true, 0, 0};
    run_case(&f, (1 << 21) - 1, 6);
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

/* Three test cases, so a slow tool (compute-sanitizer racecheck) can run them side by side
 * with CK_RUN_CASE=types|ranges|large. */
static Suite *gpu_sort_suite(void) {
    Suite *s = suite_create("gpu_sort");
    TCase *types = tcase_create("types");
    tcase_add_test(types, test_bad_descriptions);
    tcase_add_loop_test(types, test_every_key_type, 0, (int)NELEM(all_types));
    TCase *ranges = tcase_create("ranges");
    tcase_add_test(ranges, test_bits_ranges);
    tcase_add_test(ranges, test_several_keys);
    TCase *large = tcase_create("large");
    if (!getenv("SLUICE_TEST_SMALL")) {
        tcase_add_test(large, test_large);
        tcase_add_test(large, test_past_2_31_rows);
    }
    TCase *all[] = {types, ranges, large};
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
