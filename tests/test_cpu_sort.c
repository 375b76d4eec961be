/* test_cpu_sort.c — the CPU radix sort: the float total order (-NaN < -inf < … < -0.0 < +0.0
 * < … < +inf < +NaN) and its reverse, the key images themselves (kernels/sl_sortkey.h),
 * every key type against a stable comparison sort, stability, several keys, each with its
 * own order (`order: [descending, ascending]`), `bits`, per-batch and per-stream sorts,
 * columns moving with the keys, and a stream sort that does not depend on how the stream
 * was cut. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/sort.h"
#include "cpu/threads.h"
#include "runtime/sortkey.h"
#include "testutil.h"
#include "common/types.h"

#define EXPECT(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                          \
    } while (0)

static const sluice_type key_types[] = {SLUICE_I8,  SLUICE_I16, SLUICE_I32, SLUICE_I64,
                                        SLUICE_U8,  SLUICE_U16, SLUICE_U32, SLUICE_U64,
                                        SLUICE_F16, SLUICE_F32, SLUICE_F64};

/* ---- an independent oracle: comparison by value ------------------------------------------ */

static double as_double(sluice_type t, const void *d, int64_t i) {
    switch (t) {
    case SLUICE_F16: return sl_f16_to_f32(((const uint16_t *)d)[i]);
    case SLUICE_F32: return ((const float *)d)[i];
    default: return ((const double *)d)[i];
    }
}

/* -1, 0, 1: a before b in ascending order. Floats: NaNs by sign at the ends, -0 before +0. */
static int compare_keys(sluice_type t, const void *d, int64_t a, int64_t b) {
    if (sl_type_is_float(t)) {
        double x = as_double(t, d, a), y = as_double(t, d, b);
        int rx = isnan(x) ? (signbit(x) ? 0 : 2) : 1, ry = isnan(y) ? (signbit(y) ? 0 : 2) : 1;
        if (rx != ry) return rx < ry ? -1 : 1;
        if (rx != 1) return 0;
        if (x != y) return x < y ? -1 : 1;
        if (signbit(x) != signbit(y)) return signbit(x) ? -1 : 1;
        return 0;
    }
    size_t sz = sluice_type_size(t);
    uint64_t ux = 0, uy = 0;
    memcpy(&ux, (const char *)d + (size_t)a * sz, sz);
    memcpy(&uy, (const char *)d + (size_t)b * sz, sz);
    if (sl_type_is_signed(t)) {
        int sh = 64 - (int)sz * 8;
        int64_t sx = (int64_t)(ux << sh) >> sh, sy = (int64_t)(uy << sh) >> sh;
        return sx < sy ? -1 : sx > sy;
    }
    return ux < uy ? -1 : ux > uy;
}

typedef struct oracle_keys {
    int nkeys;
    sluice_type type[4];
    const void *data[4];
    bool descending;    /* every key */
    unsigned desc_mask; /* bit k: key k descending */
} oracle_keys;
static const oracle_keys *g_keys;

static int oracle_cmp(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    for (int k = 0; k < g_keys->nkeys; k++) {
        int c = compare_keys(g_keys->type[k], g_keys->data[k], a, b);
        bool desc = g_keys->descending || ((g_keys->desc_mask >> k) & 1u);
        if (c) return desc ? -c : c;
    }
    return a < b ? -1 : a > b; /* stable */
}

/* Sorts rows [first, first + n) alone (their indices are global). */
static void oracle_sort_range(const oracle_keys *k, int64_t *idx, int64_t first, int64_t n) {
    for (int64_t i = 0; i < n; i++) idx[i] = first + i;
    g_keys = k;
    qsort(idx, (size_t)n, sizeof *idx, oracle_cmp);
}

static int64_t *oracle_order(const oracle_keys *k, int64_t n) {
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n + 8);
    oracle_sort_range(k, idx, 0, n);
    return idx;
}

static void *random_keys(tu_rng *r, sluice_type t, int64_t n, int distinct) {
    size_t sz = sluice_type_size(t);
    void *d = malloc((size_t)n * sz + 8);
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = tu_rng_next(r);
        if (distinct) v = (uint64_t)tu_rng_range(r, -distinct, distinct);
        if (sl_type_is_float(t)) {
            double f = distinct ? (double)(int64_t)v * 0.5 : tu_rng_normal(r) * 1e3;
            int special = (int)tu_rng_range(r, 0, 40);
            if (special == 0) f = NAN;
            if (special == 1) f = -NAN;
            if (special == 2) f = INFINITY;
            if (special == 3) f = -INFINITY;
            if (special == 4) f = -0.0;
            if (special == 5) f = 0.0;
            if (t == SLUICE_F16) ((uint16_t *)d)[i] = sl_f32_to_f16((float)f);
            else if (t == SLUICE_F32) ((float *)d)[i] = (float)f;
            else ((double *)d)[i] = f;
        } else {
            memcpy((char *)d + (size_t)i * sz, &v, sz);
        }
    }
    return d;
}

/* Runs the pipeline (inputs k and i: u32 row numbers) and returns the output columns. */
static sluice_batch *run_sort_pipeline(sluice_context *ctx, const char *yaml,
                                       const sluice_column *cols, size_t ncols) {
    sluice_pipeline *p = tu_load(ctx, yaml);
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = 5000;
    sluice_batch *b = NULL;
    sluice_status st = sluice_run(p, &o, cols, ncols, &b);
    if (st) tu_print_diags(ctx);
    ck_assert_int_eq(st, SLUICE_OK);
    sluice_pipeline_free(p);
    return b;
}

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(float_total_order) {
    float special[8] = {-NAN, -INFINITY, -1.5f, -0.0f, 0.0f, 2.0f, INFINITY, NAN};
    int shuffle[8] = {5, 0, 7, 3, 1, 6, 4, 2};
    float x[8];
    for (int i = 0; i < 8; i++) x[i] = special[shuffle[i]];
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_column c = {"x", SLUICE_F32, x, 8};
    for (int desc = 0; desc < 2; desc++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "sluice: 1\nname: t\ninput: {x: f32}\nstages:\n"
                 "  - sort: {key: x, order: %s}\n", desc ? "descending" : "ascending");
        sluice_batch *b = run_sort_pipeline(ctx, yaml, &c, 1);
        sluice_column o;
        ck_assert_int_eq(sluice_batch_column(b, 0, &o), SLUICE_OK);
        for (int i = 0; i < 8; i++) {
            uint32_t got, want;
            memcpy(&got, &((const float *)o.data)[i], 4);
            memcpy(&want, &special[desc ? 7 - i : i], 4);
            ck_assert_msg(got == want, "position %d: bits %08x, want %08x", i, got, want);
        }
        sluice_batch_free(b);
    }
    /* The images themselves: strictly increasing along the order. */
    uint32_t img[8];
    sl_sortkey_images(SLUICE_F32, special, NULL, false, 8, false, img);
    for (int i = 1; i < 8; i++) ck_assert_uint_lt(img[i - 1], img[i]);
    float back[8];
    sl_sortkey_values(SLUICE_F32, img, 8, false, back);
    ck_assert_int_eq(memcmp(back, special, sizeof back), 0);
    sluice_context_destroy(ctx);
}
END_TEST

/* Every key type, ascending and descending, per batch and per stream, with a value column:
 * the same order as a stable comparison sort (so also stable). */
START_TEST(every_type_vs_oracle) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 21);
    static const int64_t sizes[] = {0, 1, 31, 33, 4097, 20000};
    for (size_t ti = 0; ti < SL_ARRAY_LEN(key_types); ti++) {
        sluice_type t = key_types[ti];
        for (size_t si = 0; si < SL_ARRAY_LEN(sizes); si++) {
            for (int variant = 0; variant < 4; variant++) {
                int64_t n = sizes[si];
                bool desc = variant & 1, per_batch = variant & 2;
                void *k = random_keys(&rng, t, n, si % 2 ? 20 : 0); /* many ties half the time */
                uint32_t *iv = malloc(4 * (size_t)n + 4);
                for (int64_t i = 0; i < n; i++) iv[i] = (uint32_t)i;
                sluice_column cols[2] = {{"k", t, k, n}, {"i", SLUICE_U32, iv, n}};
                char yaml[512];
                snprintf(yaml, sizeof yaml,
                         "sluice: 1\nname: t\ninput: {k: %s, i: u32}\nstages:\n"
                         "  - sort: {key: k, order: %s, per: %s}\noutput: [k, i]\n",
                         sluice_type_name(t), desc ? "descending" : "ascending",
                         per_batch ? "batch" : "stream");
                sluice_batch *b = run_sort_pipeline(ctx, yaml, cols, 2);
                ck_assert_int_eq(sluice_batch_rows(b), n);
                oracle_keys ok = {1, {t}, {k}, desc, 0};
                int64_t *want = oracle_order(&ok, n);
                sluice_column ko, io;
                sluice_batch_column(b, 0, &ko);
                sluice_batch_column(b, 1, &io);
                size_t sz = sluice_type_size(t);
                for (int64_t r = 0; r < n; r++) {
                    EXPECT(((const uint32_t *)io.data)[r] == (uint32_t)want[r],
                           "%s %s n=%lld row %lld: row %u, want %lld", sluice_type_name(t),
                           desc ? "desc" : "asc", (long long)n, (long long)r,
                           ((const uint32_t *)io.data)[r], (long long)want[r]);
                    EXPECT(memcmp((const char *)ko.data + (size_t)r * sz,
                                  (const char *)k + (size_t)want[r] * sz, sz) == 0,
                           "key bits moved wrongly at row %lld", (long long)r);
                }
                free(want);
                free(k);
                free(iv);
                sluice_batch_free(b);
            }
        }
    }
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(several_keys_and_bits) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 4);
    int64_t n = 30000;
    uint8_t *a = random_keys(&rng, SLUICE_U8, n, 0);
    float *f = random_keys(&rng, SLUICE_F32, n, 3);
    uint16_t *h = random_keys(&rng, SLUICE_U16, n, 0);
    for (int64_t i = 0; i < n; i++) a[i] &= 3;
    sluice_column cols[3] = {{"a", SLUICE_U8, a, n}, {"f", SLUICE_F32, f, n}, {"h", SLUICE_U16, h, n}};
    for (int desc = 0; desc < 2; desc++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: t\ninput: {a: u8, f: f32, h: u16}\nstages:\n"
                 "  - sort: {keys: [a, f], order: %s}\noutput: [a, f, h]\n",
                 desc ? "descending" : "ascending");
        sluice_batch *b = run_sort_pipeline(ctx, yaml, cols, 3);
        oracle_keys ok = {2, {SLUICE_U8, SLUICE_F32}, {a, f}, desc, 0};
        int64_t *want = oracle_order(&ok, n);
        sluice_column hc;
        sluice_batch_column(b, 2, &hc);
        for (int64_t r = 0; r < n; r++)
            EXPECT(((const uint16_t *)hc.data)[r] == h[want[r]], "row %lld", (long long)r);
        free(want);
        sluice_batch_free(b);
    }
    /* bits: [4, 12] of a u16 key: stable by (h >> 4) & 0xff only. */
    sluice_batch *b = run_sort_pipeline(ctx,
        "sluice: 1\nname: t\ninput: {a: u8, f: f32, h: u16}\nstages:\n"
        "  - sort: {key: h, bits: [4, 12]}\noutput: [h, a]\n", cols, 3);
    uint16_t *mid = malloc(2 * (size_t)n);
    for (int64_t i = 0; i < n; i++) mid[i] = (uint16_t)((h[i] >> 4) & 0xff);
    oracle_keys ok = {1, {SLUICE_U16}, {mid}, false, 0};
    int64_t *want = oracle_order(&ok, n);
    sluice_column hc;
    sluice_batch_column(b, 0, &hc);
    for (int64_t r = 0; r < n; r++)
        EXPECT(((const uint16_t *)hc.data)[r] == h[want[r]], "bits: row %lld", (long long)r);
    free(want);
    free(mid);
    sluice_batch_free(b);
    free(a);
    free(f);
    free(h);
    sluice_context_destroy(ctx);
}
END_TEST

/* A stream sort over batches cut anywhere equals the sort of the whole; the groups after it
 * (a segmented scan keyed by the sort key) run at flush. */
START_TEST(stream_sort_cutting) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: t\ninput: {k: u32, v: i64}\nstages:\n"
        "  - filter: v != 0\n  - sort: {key: k}\n"
        "  - segmented_scan: {of: v, op: sum, segments: {key: k}, into: s}\noutput: [k, v, s]\n");
    tu_rng rng;
    tu_rng_seed(&rng, 9);
    int64_t n = 25000;
    uint32_t *k = malloc(4 * (size_t)n);
    int64_t *v = malloc(8 * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        k[i] = (uint32_t)tu_rng_range(&rng, 0, 300);
        v[i] = tu_rng_range(&rng, -5, 5);
    }
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = 4000;
    int64_t *first_s = NULL, rows_first = 0;
    for (int trial = 0; trial < 3; trial++) {
        sluice_session *s;
        ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
        int64_t at = 0;
        while (at < n) {
            int64_t len = trial == 0 ? n : tu_rng_range(&rng, 0, 7000);
            if (len > n - at) len = n - at;
            sluice_column c[2] = {{"k", SLUICE_U32, k + at, len}, {"v", SLUICE_I64, v + at, len}};
            ck_assert_int_eq(sluice_session_push(s, c, 2), SLUICE_OK);
            sluice_batch *none;
            ck_assert_int_eq(sluice_session_pull(s, &none), SLUICE_OK);
            ck_assert_ptr_null(none); /* a stream sort emits nothing before flush */
            at += len;
        }
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        sluice_batch *b;
        ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
        ck_assert_ptr_nonnull(b);
        sluice_column kc, vc, sc;
        sluice_batch_column(b, 0, &kc);
        sluice_batch_column(b, 1, &vc);
        sluice_batch_column(b, 2, &sc);
        int64_t rows = sluice_batch_rows(b);
        /* Oracle: sorted keys non-decreasing, s is the running sum per key. */
        int64_t acc = 0;
        for (int64_t r = 0; r < rows; r++) {
            const uint32_t *kk = kc.data;
            if (r == 0 || kk[r] != kk[r - 1]) acc = 0;
            EXPECT(r == 0 || kk[r - 1] <= kk[r], "not sorted at %lld", (long long)r);
            acc += ((const int64_t *)vc.data)[r];
            EXPECT(((const int64_t *)sc.data)[r] == acc, "running sum at %lld", (long long)r);
        }
        if (trial == 0) {
            rows_first = rows;
            first_s = malloc(8 * (size_t)rows + 8);
            memcpy(first_s, sc.data, 8 * (size_t)rows);
        } else {
            ck_assert_int_eq(rows, rows_first);
            ck_assert_int_eq(memcmp(first_s, sc.data, 8 * (size_t)rows), 0);
        }
        sluice_batch_free(b);
        sluice_session_close(s);
    }
    free(first_s);
    free(k);
    free(v);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A per-batch sort between fused groups: each batch sorted alone, the scan after it carries
 * across batches, the filter after that drops rows. */
START_TEST(per_batch_sort_between_groups) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: t\ninput: {x: i32}\nstages:\n  - map: {k: -x}\n"
        "  - sort: {key: k, per: batch}\n  - scan: {of: x, op: sum, into: s}\n"
        "  - filter: x % 2 == 0\noutput: [x, s]\n");
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = 3000;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 12);
    int64_t acc = 0, checked = 0;
    for (int batch = 0; batch < 5; batch++) {
        int64_t n = batch == 2 ? 7000 : tu_rng_range(&rng, 0, 2500); /* one above max_batch_rows */
        int32_t *x = malloc(4 * (size_t)n + 4);
        for (int64_t i = 0; i < n; i++) x[i] = (int32_t)tu_rng_range(&rng, -50, 50);
        sluice_column c = {"x", SLUICE_I32, x, n};
        ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
        /* Oracle: this batch sorted by -x (stable: descending x, ties in order), then the
         * running sum over the stream, then the even rows. */
        int32_t *neg = malloc(4 * (size_t)n + 4);
        for (int64_t i = 0; i < n; i++) neg[i] = -x[i];
        oracle_keys ok = {1, {SLUICE_I32}, {neg}, false, 0};
        int64_t *order = oracle_order(&ok, n);
        sluice_batch *b = NULL;
        ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
        sluice_column xc = {0}, sc = {0};
        if (b) {
            sluice_batch_column(b, 0, &xc);
            sluice_batch_column(b, 1, &sc);
        }
        int64_t row = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t v = x[order[i]];
            acc += v;
            if (v % 2 != 0) continue;
            EXPECT(b && row < sluice_batch_rows(b), "missing row");
            EXPECT(((const int32_t *)xc.data)[row] == v && ((const int64_t *)sc.data)[row] == acc,
                   "batch %d row %lld", batch, (long long)row);
            row++;
            checked++;
        }
        ck_assert_int_eq(b ? sluice_batch_rows(b) : 0, row);
        sluice_batch_free(b);
        free(order);
        free(neg);
        free(x);
    }
    ck_assert_int_gt(checked, 0);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Two stream sorts: the first's rows flow at flush through a scan into the second, which
 * then emits; pushed in random pieces. */
START_TEST(two_stream_sorts) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: t\ninput: {a: i16, b: f32, v: i32}\nstages:\n"
        "  - sort: {key: a}\n  - scan: {of: v, op: sum, into: s}\n"
        "  - sort: {key: b, order: descending}\noutput: [a, b, v, s]\n");
    tu_rng rng;
    tu_rng_seed(&rng, 31);
    int64_t n = 40000;
    int16_t *a = random_keys(&rng, SLUICE_I16, n, 50);
    float *b = random_keys(&rng, SLUICE_F32, n, 30);
    int32_t *v = malloc(4 * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)tu_rng_range(&rng, -9, 9);
    /* Oracle. */
    oracle_keys ka = {1, {SLUICE_I16}, {a}, false, 0};
    int64_t *by_a = oracle_order(&ka, n);
    float *b2 = malloc(4 * (size_t)n);
    int64_t *s2 = malloc(8 * (size_t)n), acc = 0;
    for (int64_t r = 0; r < n; r++) {
        b2[r] = b[by_a[r]];
        acc += v[by_a[r]];
        s2[r] = acc;
    }
    oracle_keys kb = {1, {SLUICE_F32}, {b2}, true, 0};
    int64_t *by_b = oracle_order(&kb, n);
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = 8192;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    for (int64_t at = 0; at < n;) {
        int64_t len = tu_rng_range(&rng, 0, 9000);
        if (len > n - at) len = n - at;
        sluice_column c[3] = {{"a", SLUICE_I16, a + at, len}, {"b", SLUICE_F32, b + at, len},
                              {"v", SLUICE_I32, v + at, len}};
        ck_assert_int_eq(sluice_session_push(s, c, 3), SLUICE_OK);
        at += len;
    }
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    sluice_batch *out;
    ck_assert_int_eq(sluice_session_pull(s, &out), SLUICE_OK);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(sluice_batch_rows(out), n);
    sluice_column sc;
    sluice_batch_column(out, 3, &sc);
    for (int64_t r = 0; r < n; r++)
        EXPECT(((const int64_t *)sc.data)[r] == s2[by_b[r]], "row %lld", (long long)r);
    sluice_batch_free(out);
    ck_assert_int_eq(sluice_session_pull(s, &out), SLUICE_OK);
    ck_assert_ptr_null(out);
    sluice_session_close(s);
    free(a);
    free(b);
    free(v);
    free(b2);
    free(s2);
    free(by_a);
    free(by_b);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* The images of kernels/sl_sortkey.h written out by hand for keys of every kind, in both
 * orders (so a change to the definition shows here, not only as a changed order), through
 * the bulk conversions of sortkey.h, permuted, and back. */
START_TEST(key_images) {
    static const struct {
        sluice_type t;
        uint64_t bits;
        bool desc;
        uint64_t image;
    } cases[] = {
        {SLUICE_BOOL, 1, false, 1},
        {SLUICE_U8, 200, false, 200},
        {SLUICE_U8, 200, true, 55},
        {SLUICE_I8, 0x80 /* -128 */, false, 0},
        {SLUICE_I8, 0x7f, false, 0xff},
        {SLUICE_I8, 0x80, true, 0xff},
        {SLUICE_U16, 0x1234, true, 0xedcb},
        {SLUICE_I16, 0xffff /* -1 */, false, 0x7fff},
        {SLUICE_I32, 0, false, 0x80000000u},
        {SLUICE_I32, 0, true, 0x7fffffffu},
        {SLUICE_U32, 0xdeadbeefu, false, 0xdeadbeefu},
        {SLUICE_I64, ~0ull /* -1 */, false, 0x7fffffffffffffffull},
        {SLUICE_U64, 5, true, ~5ull},
        {SLUICE_F16, 0x8000 /* -0.0 */, false, 0x7fff},
        {SLUICE_F16, 0x0000 /* +0.0 */, false, 0x8000},
        {SLUICE_F16, 0xfe00 /* -NaN */, false, 0x01ff},
        {SLUICE_F16, 0x7c00 /* +inf */, false, 0xfc00},
        {SLUICE_F16, 0x7c00, true, 0x03ff},
        {SLUICE_F32, 0x80000000u /* -0.0 */, false, 0x7fffffffu},
        {SLUICE_F32, 0 /* +0.0 */, false, 0x80000000u},
        {SLUICE_F32, 0x3f800000u /* 1.0 */, false, 0xbf800000u},
        {SLUICE_F32, 0xbf800000u /* -1.0 */, false, 0x407fffffu},
        {SLUICE_F32, 0xffc00000u /* -NaN */, false, 0x003fffffu},
        {SLUICE_F32, 0x7fc00000u /* +NaN */, true, 0x003fffffu},
        {SLUICE_F64, 0x8000000000000000ull /* -0.0 */, false, 0x7fffffffffffffffull},
        {SLUICE_F64, 0x3ff0000000000000ull /* 1.0 */, true, 0x400fffffffffffffull},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        sluice_type t = cases[i].t;
        size_t sz = sluice_type_size(t);
        bool wide = sl_sortkey_is_wide(t);
        uint64_t key = cases[i].bits, img = 0, back = 0;
        uint32_t img32 = 0;
        void *out = wide ? (void *)&img : (void *)&img32;
        sl_sortkey_images(t, &key, NULL, false, 1, cases[i].desc, out);
        if (!wide) img = img32;
        EXPECT(img == cases[i].image, "%s %llx %s: image %llx, want %llx", sluice_type_name(t),
               (unsigned long long)key, cases[i].desc ? "desc" : "asc", (unsigned long long)img,
               (unsigned long long)cases[i].image);
        /* the shared definition itself, as the GPU kernels call it */
        int w = sl_sortkey_bits(t), kind = sl_sortkey_kind(t);
        uint64_t flip = sl_sortkey_flip(w, cases[i].desc);
        EXPECT((sl_sortkey_image(kind, w, key) ^ flip) == cases[i].image, "image, case %zu", i);
        EXPECT(sl_sortkey_key(kind, w, cases[i].image ^ flip) == key, "key, case %zu", i);
        sl_sortkey_values(t, out, 1, cases[i].desc, &back);
        EXPECT(memcmp(&back, &key, sz) == 0, "case %zu does not come back", i);
    }
    /* Permuted reads, with narrow and wide permutations, give the permuted keys' images. */
    int16_t k16[5] = {-3, 7, -32768, 0, 32767};
    double kf[5] = {-0.0, NAN, 1.5, -INFINITY, 0.0};
    uint32_t p32[5] = {4, 0, 3, 1, 2};
    uint64_t p64[5] = {4, 0, 3, 1, 2};
    for (int desc = 0; desc < 2; desc++) {
        uint32_t direct16[5], perm16[5];
        uint64_t directf[5], permf[5];
        sl_sortkey_images(SLUICE_I16, k16, NULL, false, 5, desc, direct16);
        sl_sortkey_images(SLUICE_F64, kf, NULL, false, 5, desc, directf);
        for (int wide = 0; wide < 2; wide++) {
            const void *perm = wide ? (const void *)p64 : (const void *)p32;
            sl_sortkey_images(SLUICE_I16, k16, perm, wide, 5, desc, perm16);
            sl_sortkey_images(SLUICE_F64, kf, perm, wide, 5, desc, permf);
            for (int i = 0; i < 5; i++) {
                EXPECT(perm16[i] == direct16[p32[i]], "i16 perm %d", i);
                EXPECT(permf[i] == directf[p32[i]], "f64 perm %d", i);
            }
        }
    }
}
END_TEST

/* Several keys, each with its own order, sorted as the CPU backend does it (one stable radix
 * sort per key, least significant key first, carrying the row permutation), straight on
 * sortkey.h and the radix sort: every pair of key types, both mixed orders, many ties. */
START_TEST(per_key_orders_direct) {
    tu_rng rng;
    tu_rng_seed(&rng, 77);
    const int64_t n = 3000;
    int64_t *counts = calloc(sl_cpu_radix_counts(NULL), sizeof(int64_t));
    uint64_t *img = malloc(8 * (size_t)n), *img_tmp = malloc(8 * (size_t)n);
    uint32_t *perm = malloc(4 * (size_t)n), *perm_tmp = malloc(4 * (size_t)n);
    for (size_t i1 = 0; i1 < SL_ARRAY_LEN(key_types); i1++) {
        for (size_t i2 = 0; i2 < SL_ARRAY_LEN(key_types); i2++) {
            sluice_type t[2] = {key_types[i1], key_types[i2]};
            void *k[2] = {random_keys(&rng, t[0], n, 4),
                          random_keys(&rng, t[1], n, i2 % 2 ? 40 : 0)};
            for (unsigned mask = 1; mask <= 2; mask++) {
                uint32_t *p = perm, *pt = perm_tmp;
                for (int64_t i = 0; i < n; i++) p[i] = (uint32_t)i;
                for (int key = 1; key >= 0; key--) {
                    bool desc = (mask >> key) & 1u;
                    sl_sortkey_images(t[key], k[key], p, false, n, desc, img);
                    if (sl_cpu_radix_sort(NULL, counts, img, img_tmp, sl_sortkey_is_wide(t[key]), p,
                                           pt, false, n, 0, sl_sortkey_bits(t[key]))) {
                        uint32_t *x = p;
                        p = pt;
                        pt = x;
                    }
                }
                oracle_keys ok = {2, {t[0], t[1]}, {k[0], k[1]}, false, mask};
                int64_t *want = oracle_order(&ok, n);
                for (int64_t r = 0; r < n; r++)
                    EXPECT(p[r] == (uint32_t)want[r],
                           "%s, %s, order mask %u: row %lld is %u, want %lld",
                           sluice_type_name(t[0]), sluice_type_name(t[1]), mask, (long long)r,
                           p[r], (long long)want[r]);
                free(want);
            }
            free(k[0]);
            free(k[1]);
        }
    }
    free(counts);
    free(img);
    free(img_tmp);
    free(perm);
    free(perm_tmp);
}
END_TEST

/* Appends rows [0, b's rows) of column `col` of b (element size sz) to *dst at *at. */
static void append_column(const sluice_batch *b, size_t col, size_t sz, void *dst, int64_t at) {
    sluice_column c;
    ck_assert_int_eq(sluice_batch_column(b, col, &c), SLUICE_OK);
    memcpy((char *)dst + (size_t)at * sz, c.data, (size_t)c.length * sz);
}

/* `order: [..]`, one per key, through the whole CPU backend: the first key of every type,
 * the second of four, every mix of orders, per stream (the oracle sorts the whole stream)
 * and per batch (each pushed piece alone), the stream pushed in random pieces. */
START_TEST(per_key_orders_vs_oracle) {
    static const sluice_type seconds[] = {SLUICE_U8, SLUICE_F32, SLUICE_I64, SLUICE_F16};
    static const char *const lists[] = {"[ascending, descending]", "[descending, ascending]",
                                        "[descending, descending]", "[ascending, ascending]"};
    static const unsigned masks[] = {2, 1, 3, 0};
    sluice_type t1 = key_types[_i];
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 300 + (uint64_t)_i);
    const int64_t n = 9000, max_rows = 4096;
    int64_t *want = malloc(sizeof(int64_t) * (size_t)n);
    uint32_t *got_i = malloc(4 * (size_t)n);
    void *got_a = malloc(8 * (size_t)n), *got_b = malloc(8 * (size_t)n);
    for (size_t si = 0; si < SL_ARRAY_LEN(seconds); si++) {
        sluice_type t2 = seconds[si];
        for (size_t li = 0; li < SL_ARRAY_LEN(lists); li++) {
            for (int per_batch = 0; per_batch < 2; per_batch++) {
                void *a = random_keys(&rng, t1, n, 6);
                void *b = random_keys(&rng, t2, n, li % 2 ? 0 : 40);
                uint32_t *iv = malloc(4 * (size_t)n);
                for (int64_t i = 0; i < n; i++) iv[i] = (uint32_t)i;
                char yaml[512];
                snprintf(yaml, sizeof yaml,
                         "sluice: 1\nname: t\ninput: {a: %s, b: %s, i: u32}\nstages:\n"
                         "  - sort: {keys: [a, b], order: %s, per: %s}\noutput: [a, b, i]\n",
                         sluice_type_name(t1), sluice_type_name(t2), lists[li],
                         per_batch ? "batch" : "stream");
                sluice_pipeline *p = tu_load(ctx, yaml);
                sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
                o.backend = SLUICE_BACKEND_CPU;
                o.max_batch_rows = max_rows;
                sluice_session *s;
                ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
                oracle_keys ok = {2, {t1, t2}, {a, b}, false, masks[li]};
                size_t sa = sluice_type_size(t1), sb = sluice_type_size(t2);
                int64_t at = 0, rows = 0;
                for (bool flushed = false; !flushed;) {
                    if (at < n) {
                        int64_t len = tu_rng_range(&rng, 0, max_rows);
                        if (len > n - at) len = n - at;
                        sluice_column c[3] = {{"a", t1, (char *)a + (size_t)at * sa, len},
                                              {"b", t2, (char *)b + (size_t)at * sb, len},
                                              {"i", SLUICE_U32, iv + at, len}};
                        ck_assert_int_eq(sluice_session_push(s, c, 3), SLUICE_OK);
                        if (per_batch) oracle_sort_range(&ok, want + at, at, len);
                        at += len;
                    } else {
                        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
                        flushed = true;
                    }
                    sluice_batch *out;
                    while (sluice_session_pull(s, &out) == SLUICE_OK && out) {
                        int64_t m = sluice_batch_rows(out);
                        ck_assert_int_le(rows + m, n);
                        append_column(out, 0, sa, got_a, rows);
                        append_column(out, 1, sb, got_b, rows);
                        append_column(out, 2, 4, got_i, rows);
                        rows += m;
                        sluice_batch_free(out);
                    }
                }
                ck_assert_int_eq(rows, n);
                if (!per_batch) oracle_sort_range(&ok, want, 0, n);
                for (int64_t r = 0; r < n; r++) {
                    EXPECT(got_i[r] == (uint32_t)want[r],
                           "keys [%s, %s], order %s, per %s: row %lld is %u, want %lld",
                           sluice_type_name(t1), sluice_type_name(t2), lists[li],
                           per_batch ? "batch" : "stream", (long long)r, got_i[r],
                           (long long)want[r]);
                    size_t w = (size_t)want[r];
                    EXPECT(memcmp((char *)got_a + (size_t)r * sa, (char *)a + w * sa, sa) == 0 &&
                               memcmp((char *)got_b + (size_t)r * sb, (char *)b + w * sb, sb) == 0,
                           "key bits moved wrongly at row %lld", (long long)r);
                }
                sluice_session_close(s);
                sluice_pipeline_free(p);
                free(a);
                free(b);
                free(iv);
            }
        }
    }
    free(want);
    free(got_i);
    free(got_a);
    free(got_b);
    sluice_context_destroy(ctx);
}
END_TEST

/* Three keys with a mixed list and `values`; one key with a one-entry list and `bits`. */
START_TEST(per_key_orders_three_keys_and_bits) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 5);
    int64_t n = 20000;
    uint8_t *c = random_keys(&rng, SLUICE_U8, n, 0);
    uint64_t *a = random_keys(&rng, SLUICE_U64, n, 0);
    double *d = random_keys(&rng, SLUICE_F64, n, 5);
    uint16_t *h = random_keys(&rng, SLUICE_U16, n, 0);
    for (int64_t i = 0; i < n; i++) {
        c[i] &= 3;
        a[i] &= 7;
    }
    sluice_column cols[4] = {{"c", SLUICE_U8, c, n}, {"a", SLUICE_U64, a, n},
                             {"d", SLUICE_F64, d, n}, {"h", SLUICE_U16, h, n}};
    sluice_batch *b = run_sort_pipeline(ctx,
        "sluice: 1\nname: t\ninput: {c: u8, a: u64, d: f64, h: u16}\nstages:\n"
        "  - sort: {keys: [c, a, d], order: [descending, ascending, descending], values: [h]}\n",
        cols, 4);
    oracle_keys ok = {3, {SLUICE_U8, SLUICE_U64, SLUICE_F64}, {c, a, d}, false, 1u | 4u};
    int64_t *want = oracle_order(&ok, n);
    ck_assert_int_eq(sluice_batch_rows(b), n);
    ck_assert_int_eq((int)sluice_batch_column_count(b), 4);
    sluice_column hc;
    ck_assert_int_eq(sluice_batch_column(b, 3, &hc), SLUICE_OK); /* c, a, d, h */
    for (int64_t r = 0; r < n; r++)
        EXPECT(((const uint16_t *)hc.data)[r] == h[want[r]], "three keys: row %lld", (long long)r);
    free(want);
    sluice_batch_free(b);

    /* bits: [4, 12] of a u16 key, descending: stable by (h >> 4) & 0xff, largest first. */
    b = run_sort_pipeline(ctx,
        "sluice: 1\nname: t\ninput: {c: u8, a: u64, d: f64, h: u16}\nstages:\n"
        "  - sort: {key: h, order: [descending], bits: [4, 12]}\noutput: [h, c]\n", cols, 4);
    uint16_t *mid = malloc(2 * (size_t)n);
    for (int64_t i = 0; i < n; i++) mid[i] = (uint16_t)((h[i] >> 4) & 0xff);
    oracle_keys om = {1, {SLUICE_U16}, {mid}, false, 1u};
    want = oracle_order(&om, n);
    ck_assert_int_eq(sluice_batch_column(b, 0, &hc), SLUICE_OK);
    for (int64_t r = 0; r < n; r++)
        EXPECT(((const uint16_t *)hc.data)[r] == h[want[r]], "bits: row %lld", (long long)r);
    free(want);
    free(mid);
    sluice_batch_free(b);
    free(c);
    free(a);
    free(d);
    free(h);
    sluice_context_destroy(ctx);
}
END_TEST

/* The radix sort alone, with a pool, on sizes that make several workers and skipped passes. */
START_TEST(radix_direct) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sl_cpu_pool *pool;
    ck_assert_int_eq(sl_cpu_pool_create(ctx, 3, &pool), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 1);
    int64_t n = 400000;
    uint64_t *k = malloc(8 * (size_t)n), *kt = malloc(8 * (size_t)n);
    uint32_t *v = malloc(4 * (size_t)n), *vt = malloc(4 * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        k[i] = tu_rng_next(&rng) & 0x00ff00000000ffffull; /* middle bytes constant: skipped */
        v[i] = (uint32_t)i;
    }
    uint64_t *orig = malloc(8 * (size_t)n);
    memcpy(orig, k, 8 * (size_t)n);
    int64_t *counts = calloc(sl_cpu_radix_counts(pool), sizeof(int64_t));
    bool in_tmp = sl_cpu_radix_sort(pool, counts, k, kt, true, v, vt, false, n, 0, 64);
    free(counts);
    const uint64_t *sk = in_tmp ? kt : k;
    const uint32_t *sv = in_tmp ? vt : v;
    for (int64_t i = 0; i < n; i++) {
        EXPECT(orig[sv[i]] == sk[i], "payload at %lld", (long long)i);
        EXPECT(i == 0 || sk[i - 1] < sk[i] || (sk[i - 1] == sk[i] && sv[i - 1] < sv[i]),
               "order at %lld", (long long)i);
    }
    sl_cpu_pool_destroy(pool);
    free(k);
    free(kt);
    free(v);
    free(vt);
    free(orig);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *cpu_sort_suite(void) {
    Suite *s = suite_create("cpu_sort");
    TCase *tc = tcase_create("sort");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, float_total_order);
    tcase_add_test(tc, every_type_vs_oracle);
    tcase_add_test(tc, several_keys_and_bits);
    tcase_add_test(tc, stream_sort_cutting);
    tcase_add_test(tc, per_batch_sort_between_groups);
    tcase_add_test(tc, two_stream_sorts);
    tcase_add_test(tc, radix_direct);
    tcase_add_test(tc, key_images);
    tcase_add_test(tc, per_key_orders_direct);
    tcase_add_loop_test(tc, per_key_orders_vs_oracle, 0, (int)SL_ARRAY_LEN(key_types));
    tcase_add_test(tc, per_key_orders_three_keys_and_bits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(cpu_sort_suite()); }
