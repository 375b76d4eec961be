/* test_cpu_scan.c — the CPU backend's fused groups against plain sequential oracles: scans of
 * every operator × type (inclusive, exclusive, reset per batch), segmented scans from offsets,
 * head flags and keys, compaction, the primer's worked examples, batch-cutting invariance,
 * thread-count independence, and transactional pushes under allocation failure. Pipelines
 * go through YAML and the public API; the f16 accumulator stall is shown on the kernel
 * directly because the loader refuses `acc: f16`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/fused.h"
#include "cpu/scan.h"
#include "testutil.h"
#include "common/types.h"

#define TILE SL_CPU_TILE_ROWS

/* Per-row checks: Check logs every passing ck_assert, far too slow for millions of rows. */
#define EXPECT(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                          \
    } while (0)

/* ---- running pipelines ------------------------------------------------------------------- */

#define MAX_OUT 8
typedef struct result {
    int64_t rows;
    int ncols;
    sluice_type type[MAX_OUT];
    void *data[MAX_OUT];
} result;

static void result_free(result *r) {
    for (int i = 0; i < r->ncols; i++) free(r->data[i]);
    memset(r, 0, sizeof *r);
}

static void append_batch(result *r, sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    r->ncols = (int)sluice_batch_column_count(b);
    ck_assert_int_le(r->ncols, MAX_OUT);
    for (int i = 0; i < r->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
        ck_assert_int_eq(c.length, n);
        size_t sz = sluice_type_size(c.type);
        r->type[i] = c.type;
        r->data[i] = realloc(r->data[i], (size_t)(r->rows + n) * sz + 1);
        if (n) memcpy((char *)r->data[i] + (size_t)r->rows * sz, c.data, (size_t)n * sz);
    }
    r->rows += n;
}

/* Pushes rows [0, rows) of cols cut at the sorted positions cuts[0..ncuts), flushes and
 * collects every output. offsets_col >= 0 names an offsets input whose entries cuts[] index
 * (cuts then count segments, and each batch gets its own rebased offsets). */
static void run_cut(sluice_context *ctx, sluice_pipeline *p, const sluice_column *cols, int ncols,
                    int64_t rows, const int64_t *cuts, int ncuts, int offsets_col, result *out) {
    memset(out, 0, sizeof *out);
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = 10000;
    sluice_session *s;
    sluice_status st = sluice_session_open(p, &o, &s);
    if (st) tu_print_diags(ctx);
    ck_assert_int_eq(st, SLUICE_OK);
    const int64_t *off = offsets_col >= 0 ? cols[offsets_col].data : NULL;
    int64_t nseg = offsets_col >= 0 ? cols[offsets_col].length - 1 : 0;
    int64_t prev = 0;
    for (int k = 0; k <= ncuts; k++) {
        int64_t end = k < ncuts ? cuts[k] : (off ? nseg : rows);
        sluice_column part[8];
        int64_t r0 = off ? off[prev] : prev, r1 = off ? off[end] : end;
        int64_t *rebased = NULL;
        for (int c = 0; c < ncols; c++) {
            part[c] = cols[c];
            if (c == offsets_col) {
                rebased = malloc(sizeof(int64_t) * (size_t)(end - prev + 1));
                for (int64_t j = prev; j <= end; j++) rebased[j - prev] = off[j] - r0;
                part[c].data = rebased;
                part[c].length = end - prev + 1;
            } else {
                part[c].data = (const char *)cols[c].data + (size_t)r0 * sluice_type_size(cols[c].type);
                part[c].length = r1 - r0;
            }
        }
        st = sluice_session_push(s, part, (size_t)ncols);
        if (st) tu_print_diags(ctx);
        ck_assert_int_eq(st, SLUICE_OK);
        free(rebased);
        prev = end;
    }
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        append_batch(out, b);
        sluice_batch_free(b);
    }
    sluice_session_close(s);
}

static void run_whole(sluice_context *ctx, sluice_pipeline *p, const sluice_column *cols, int ncols,
                      int64_t rows, result *out) {
    run_cut(ctx, p, cols, ncols, rows, NULL, 0, -1, out);
}

static int random_cuts(tu_rng *r, int64_t rows, int64_t *cuts, int max) {
    if (rows < 2) return 0;
    int n = (int)tu_rng_range(r, 1, max);
    for (int i = 0; i < n; i++) cuts[i] = tu_rng_range(r, 0, rows);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cuts[j] < cuts[j - 1]; j--) {
            int64_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    return n;
}

static void assert_same(const result *a, const result *b) {
    ck_assert_int_eq(a->rows, b->rows);
    ck_assert_int_eq(a->ncols, b->ncols);
    for (int i = 0; i < a->ncols; i++)
        ck_assert_msg(a->rows == 0 || memcmp(a->data[i], b->data[i],
                                             (size_t)a->rows * sluice_type_size(a->type[i])) == 0,
                      "output column %d differs", i);
}

/* ---- typed values for oracles ------------------------------------------------------------ */

static const sluice_type all_types[] = {SLUICE_BOOL, SLUICE_I8,  SLUICE_I16, SLUICE_I32,
                                        SLUICE_I64,  SLUICE_U8,  SLUICE_U16, SLUICE_U32,
                                        SLUICE_U64,  SLUICE_F16, SLUICE_F32, SLUICE_F64};

static double load_f(sluice_type t, const void *d, int64_t i) {
    switch (t) {
    case SLUICE_F16: return sl_f16_to_f32(((const uint16_t *)d)[i]);
    case SLUICE_F32: return ((const float *)d)[i];
    default: return ((const double *)d)[i];
    }
}

static uint64_t load_u(sluice_type t, const void *d, int64_t i) {
    switch (t) {
    case SLUICE_BOOL:
    case SLUICE_U8: return ((const uint8_t *)d)[i];
    case SLUICE_I8: return (uint64_t)(int64_t)((const int8_t *)d)[i];
    case SLUICE_U16: return ((const uint16_t *)d)[i];
    case SLUICE_I16: return (uint64_t)(int64_t)((const int16_t *)d)[i];
    case SLUICE_U32: return ((const uint32_t *)d)[i];
    case SLUICE_I32: return (uint64_t)(int64_t)((const int32_t *)d)[i];
    default: return ((const uint64_t *)d)[i];
    }
}

/* Random column of type t; `op` shapes the values (products stay near 1). */
static void *random_column(tu_rng *r, sluice_type t, int64_t n, const char *op) {
    size_t sz = sluice_type_size(t);
    void *d = malloc((size_t)n * sz + 1);
    bool prod = strcmp(op, "prod") == 0;
    for (int64_t i = 0; i < n; i++) {
        if (sl_type_is_float(t)) {
            double v = prod ? 0.95 + 0.1 * tu_rng_uniform(r) : tu_rng_normal(r) * 10;
            if (t == SLUICE_F16) ((uint16_t *)d)[i] = sl_f32_to_f16((float)v);
            else if (t == SLUICE_F32) ((float *)d)[i] = (float)v;
            else ((double *)d)[i] = v;
        } else {
            uint64_t v = tu_rng_next(r);
            if (t == SLUICE_BOOL) v = (v >> 7) & 1;
            else if (prod) v = (uint64_t)tu_rng_range(r, -3, 3);
            memcpy((char *)d + (size_t)i * sz, &v, sz); /* little-endian low bytes */
        }
    }
    return d;
}

static uint64_t truncate_to(sluice_type t, uint64_t v) {
    int w = sl_type_bits(t);
    if (t == SLUICE_BOOL) return v & 1;
    if (w == 64) return v;
    v &= (UINT64_C(1) << w) - 1;
    if (sl_type_is_signed(t) && (v >> (w - 1))) v |= ~((UINT64_C(1) << w) - 1);
    return v;
}

/* The primer's definition: y[i] = x[0] ⊕ … ⊕ x[i] (inclusive) or the same up to i-1,
 * from the identity (exclusive), in the accumulator type, checked row by row. */
static void check_scan_oracle(const char *op, sluice_type in, const void *x, int64_t n,
                              bool exclusive, const result *res) {
    ck_assert_int_eq(res->rows, n);
    sluice_type acc = res->type[0];
    const void *y = res->data[0];
    if (sl_type_is_float(acc)) {
        double s = 0, scale = 0;
        bool is_min = strcmp(op, "min") == 0, is_max = strcmp(op, "max") == 0;
        bool is_prod = strcmp(op, "prod") == 0;
        s = is_min ? INFINITY : is_max ? -INFINITY : is_prod ? 1 : 0;
        for (int64_t i = 0; i < n; i++) {
            double v = load_f(in, x, i);
            double before = s;
            if (is_min) s = v < s ? v : s;
            else if (is_max) s = v > s ? v : s;
            else if (is_prod) s *= v;
            else s += v;
            scale += fabs(v);
            double want = exclusive ? before : s, got = load_f(acc, y, i);
            double tol = (is_min || is_max) ? 0 : 1e-4 * (is_prod ? fabs(want) + 1e-30 : scale + 1);
            EXPECT(got == want || fabs(got - want) <= tol, "%s %s row %lld: got %.9g want %.9g", op,
                          sluice_type_name(in), (long long)i, got, want);
        }
        return;
    }
    uint64_t s;
    bool sgn = sl_type_is_signed(acc);
    int w = acc == SLUICE_BOOL ? 1 : sl_type_bits(acc);
    uint64_t top = sgn ? (UINT64_C(1) << (w - 1)) - 1 : w == 64 ? UINT64_MAX : (UINT64_C(1) << w) - 1;
    if (!strcmp(op, "min")) s = top;
    else if (!strcmp(op, "max")) s = sgn ? ~top : 0;
    else if (!strcmp(op, "prod")) s = 1;
    else if (!strcmp(op, "and")) s = UINT64_MAX;
    else s = 0;
    s = truncate_to(acc, s);
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = sl_type_is_float(in) ? 0 : load_u(in, x, i), before = s;
        if (!strcmp(op, "sum")) s = s + v;
        else if (!strcmp(op, "count")) s = s + 1;
        else if (!strcmp(op, "prod")) s = s * v;
        else if (!strcmp(op, "and")) s = s & v;
        else if (!strcmp(op, "or")) s = s | v;
        else if (!strcmp(op, "xor")) s = s ^ v;
        else if (!strcmp(op, "min")) s = sgn ? ((int64_t)v < (int64_t)s ? v : s) : (v < s ? v : s);
        else if (!strcmp(op, "max")) s = sgn ? ((int64_t)v > (int64_t)s ? v : s) : (v > s ? v : s);
        s = truncate_to(acc, s);
        uint64_t want = exclusive ? before : s, got = load_u(acc, y, i);
        EXPECT(got == want, "%s %s row %lld: got %llu want %llu", op,
                      sluice_type_name(in), (long long)i, (unsigned long long)got,
                      (unsigned long long)want);
    }
}

static sluice_pipeline *scan_pipeline(sluice_context *ctx, const char *op, sluice_type t,
                                      bool exclusive, const char *extra) {
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: scan\ninput: {x: %s}\nstages:\n"
             "  - scan: {%s%s, op: %s, kind: %s, into: y%s}\noutput: [y]\n",
             sluice_type_name(t), strcmp(op, "count") ? "of: x" : "", strcmp(op, "count") ? "" : "",
             op, exclusive ? "exclusive" : "inclusive", extra);
    if (!strcmp(op, "count"))
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: scan\ninput: {x: %s}\nstages:\n"
                 "  - scan: {op: count, kind: %s, into: y%s}\noutput: [y]\n",
                 sluice_type_name(t), exclusive ? "exclusive" : "inclusive", extra);
    return tu_load(ctx, yaml);
}

static const int64_t sizes[] = {0, 1, 31, 32, 33, TILE - 1, TILE, TILE + 1, 3 * TILE + 7, 50000};

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(primer_scans) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: primer\ninput: {x: f32}\nstages:\n"
        "  - scan: {of: x, op: sum, into: inc}\n"
        "  - scan: {of: x, op: sum, kind: exclusive, into: exc}\noutput: [inc, exc]\n");
    float x[8] = {3, 1, 7, 0, 4, 1, 6, 3};
    sluice_column c = {"x", SLUICE_F32, x, 8};
    result r;
    run_whole(ctx, p, &c, 1, 8, &r);
    const float inc[8] = {3, 4, 11, 11, 15, 16, 22, 25}, exc[8] = {0, 3, 4, 11, 11, 15, 16, 22};
    ck_assert_int_eq(r.rows, 8);
    for (int i = 0; i < 8; i++) {
        ck_assert_float_eq(((float *)r.data[0])[i], inc[i]);
        ck_assert_float_eq(((float *)r.data[1])[i], exc[i]);
    }
    /* Blelloch's total: the last inclusive value, also last exclusive + last input. */
    ck_assert_float_eq(((float *)r.data[1])[7] + x[7], 25);
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(primer_compaction) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: compaction\ninput: {x: f32}\nstages:\n"
        "  - flag: {keep: x > 0}\n"
        "  - scan: {of: i64(keep), op: sum, kind: exclusive, into: offset}\n"
        "  - compact: {by: keep}\noutput: [x, offset]\n");
    float x[8] = {5, -2, 9, 0, -7, 3, 8, -1};
    sluice_column c = {"x", SLUICE_F32, x, 8};
    result r;
    run_whole(ctx, p, &c, 1, 8, &r);
    ck_assert_int_eq(r.rows, 4);
    const float kept[4] = {5, 9, 3, 8};
    const int64_t offsets_kept[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++) {
        ck_assert_float_eq(((float *)r.data[0])[i], kept[i]);
        ck_assert_int_eq(((int64_t *)r.data[1])[i], offsets_kept[i]);
    }
    result_free(&r);
    sluice_pipeline_free(p);
    /* All offsets [0,1,1,2,2,2,3,4] before compaction. */
    p = tu_load(ctx, "sluice: 1\nname: offsets\ninput: {x: f32}\nstages:\n"
                     "  - scan: {of: i64(x > 0), op: sum, kind: exclusive, into: offset}\n"
                     "output: [offset]\n");
    run_whole(ctx, p, &c, 1, 8, &r);
    const int64_t offs[8] = {0, 1, 1, 2, 2, 2, 3, 4};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int64_t *)r.data[0])[i], offs[i]);
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(primer_recurrence) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: linrec\ninput: {a: f32, b: f32}\nstages:\n"
        "  - scan: {op: linrec, a: a, b: b, into: h}\noutput: [h]\n");
    float a[4] = {0.5f, 0.9f, 0.1f, 1.0f}, b[4] = {1, 2, 3, 4};
    sluice_column c[2] = {{"a", SLUICE_F32, a, 4}, {"b", SLUICE_F32, b, 4}};
    result r;
    run_whole(ctx, p, c, 2, 4, &r);
    const double want[4] = {1.0, 2.9, 3.29, 7.29};
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(((float *)r.data[0])[i], want[i], 1e-5);
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(primer_f16_stall) {
    /* Through the pipeline: f16 input accumulates in f32 by default → 409.5. */
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: f16\ninput: {x: f16}\nstages:\n"
                                      "  - scan: {of: x, op: sum, into: s}\noutput: [s]\n");
    uint16_t x[4096];
    for (int i = 0; i < 4096; i++) x[i] = sl_f32_to_f16(0.1f);
    sluice_column c = {"x", SLUICE_F16, x, 4096};
    result r;
    run_whole(ctx, p, &c, 1, 4096, &r);
    ck_assert_int_eq(r.type[0], SLUICE_F32);
    ck_assert_double_eq_tol(((float *)r.data[0])[4095], 409.5, 0.1);
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    /* The kernel with an f16 accumulator (which the loader refuses) stalls at 256. */
    sl_scan scan;
    memset(&scan, 0, sizeof scan);
    scan.op = SL_SCAN_SUM;
    scan.nfields = 1;
    scan.acc[0] = SLUICE_F16;
    scan.identity[0].type = SLUICE_F16;
    scan.identity[0].f = 0;
    uint16_t y[4096];
    const void *xs[1] = {x};
    void *ys[1] = {y};
    sl_value state = scan.identity[0];
    sl_cpu_scan_rows(&scan, 4096, xs, NULL, &state, ys);
    ck_assert_float_eq(sl_f16_to_f32(y[4095]), 256.0f);
    ck_assert_double_eq(state.f, 256.0);
}
END_TEST

/* Every builtin operator × every input type against the oracle, at the edge sizes. */
START_TEST(scan_ops_types) {
    static const char *ops[] = {"sum", "prod", "min", "max", "and", "or", "xor", "count"};
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 7);
    for (size_t oi = 0; oi < SL_ARRAY_LEN(ops); oi++) {
        for (size_t ti = 0; ti < SL_ARRAY_LEN(all_types); ti++) {
            sluice_type t = all_types[ti];
            bool bitwise = !strcmp(ops[oi], "and") || !strcmp(ops[oi], "or") || !strcmp(ops[oi], "xor");
            if (bitwise && sl_type_is_float(t)) continue;
            for (int ex = 0; ex < 2; ex++) {
                sluice_pipeline *p = scan_pipeline(ctx, ops[oi], t, ex, "");
                for (size_t si = 0; si < SL_ARRAY_LEN(sizes); si++) {
                    int64_t n = sizes[si];
                    void *x = random_column(&rng, t, n, ops[oi]);
                    sluice_column c = {"x", t, x, n};
                    result r;
                    run_whole(ctx, p, &c, 1, n, &r);
                    check_scan_oracle(ops[oi], t, x, n, ex, &r);
                    result_free(&r);
                    free(x);
                }
                sluice_pipeline_free(p);
            }
        }
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* Accumulators narrower than the default (wrapping sums) and wider floats, exact rows. */
START_TEST(narrow_accumulators) {
    static const struct { sluice_type in; const char *acc; } cases[] = {
        {SLUICE_I16, "i16"}, {SLUICE_I8, "i32"}, {SLUICE_U8, "u16"}, {SLUICE_U32, "u32"},
        {SLUICE_I32, "i32"}, {SLUICE_F32, "f64"}};
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 77);
    for (size_t ci = 0; ci < SL_ARRAY_LEN(cases); ci++) {
        for (int ex = 0; ex < 2; ex++) {
            char extra[64];
            snprintf(extra, sizeof extra, ", acc: %s", cases[ci].acc);
            sluice_pipeline *p = scan_pipeline(ctx, "sum", cases[ci].in, ex, extra);
            for (size_t si = 0; si < SL_ARRAY_LEN(sizes); si++) {
                int64_t n = sizes[si];
                void *x = random_column(&rng, cases[ci].in, n, "sum");
                sluice_column c = {"x", cases[ci].in, x, n};
                result r;
                run_whole(ctx, p, &c, 1, n, &r);
                check_scan_oracle("sum", cases[ci].in, x, n, ex, &r);
                result_free(&r);
                free(x);
            }
            sluice_pipeline_free(p);
        }
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* The same stream cut at random points gives the same bits, for every stateful stage. */
START_TEST(cutting_invariance) {
    static const char *pipelines[] = {
        "sluice: 1\nname: a\ninput: {x: i32}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\n  - scan: {of: x, op: max, kind: exclusive, into: m}\n"
        "output: [s, m]\n",
        "sluice: 1\nname: b\ninput: {x: i32}\nstages:\n  - filter: x % 3 != 0\n"
        "  - scan: {op: count, kind: exclusive, into: n}\n  - map: {y: x * 2}\n"
        "  - filter: y > 0\noutput: [x, n, y]\n",
        "sluice: 1\nname: c\ninput: {x: i32}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\n  - flag: {big: s > 0}\n  - compact: {by: big}\n"
        "  - scan: {of: s, op: xor, into: t}\noutput: [x, s, t]\n",
        "sluice: 1\nname: d\ninput: {x: i32}\nstages:\n"
        "  - map: {k: x % 4 == 0}\n"
        "  - segmented_scan: {of: x, op: sum, segments: k, into: s}\n"
        "  - map: {key: i32(x > 1000000)}\n"
        "  - segmented_scan: {of: i64(1), op: sum, kind: exclusive, segments: {key: key}, into: r}\n"
        "output: [s, r]\n",
        "sluice: 1\nname: e\ninput: {a: f64, b: f64}\nstages:\n"
        "  - scan: {op: linrec, a: a, b: b, into: h}\noutput: [h]\n",
    };
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 11);
    for (size_t pi = 0; pi < SL_ARRAY_LEN(pipelines); pi++) {
        sluice_pipeline *p = tu_load(ctx, pipelines[pi]);
        bool pair = pi == 4;
        for (int trial = 0; trial < 6; trial++) {
            int64_t n = trial == 0 ? 1 : tu_rng_range(&rng, 2, 5 * TILE);
            int32_t *x = malloc(sizeof(int32_t) * (size_t)n + 1);
            double *a = malloc(sizeof(double) * (size_t)n + 1), *b = malloc(sizeof(double) * (size_t)n + 1);
            for (int64_t i = 0; i < n; i++) {
                x[i] = (int32_t)tu_rng_range(&rng, -1000, 1000);
                if (i % 97 == 0) x[i] = 2000000; /* key runs */
                a[i] = 0.5 + 0.5 * tu_rng_uniform(&rng);
                b[i] = tu_rng_normal(&rng);
            }
            sluice_column c1 = {"x", SLUICE_I32, x, n};
            sluice_column c2[2] = {{"a", SLUICE_F64, a, n}, {"b", SLUICE_F64, b, n}};
            result whole, cut;
            run_whole(ctx, p, pair ? c2 : &c1, pair ? 2 : 1, n, &whole);
            int64_t cuts[16];
            int ncuts = random_cuts(&rng, n, cuts, 16);
            run_cut(ctx, p, pair ? c2 : &c1, pair ? 2 : 1, n, cuts, ncuts, -1, &cut);
            if (pair) {
                /* Floats: the combination order follows the tiles of each batch, so compare
                 * with a tolerance against the sequential loop. */
                double h = 0;
                ck_assert_int_eq(cut.rows, n);
                for (int64_t i = 0; i < n; i++) {
                    h = a[i] * h + b[i];
                    EXPECT(fabs(((double *)cut.data[0])[i] - h) <= 1e-9 * (fabs(h) + 1), "row %lld", (long long)i);
                    EXPECT(fabs(((double *)whole.data[0])[i] - h) <= 1e-9 * (fabs(h) + 1), "row %lld", (long long)i);
                }
            } else {
                assert_same(&whole, &cut);
            }
            result_free(&whole);
            result_free(&cut);
            free(x);
            free(a);
            free(b);
        }
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* Segmented scans against a sequential oracle, with segments from offsets (cut at segment
 * boundaries), from head flags and from keys (both continuing across batches). */
START_TEST(segmented_oracle) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 5);
    sluice_pipeline *po = tu_load(ctx,
        "sluice: 1\nname: off\ninput: {x: i64, rows: {type: i64, role: offsets}}\nstages:\n"
        "  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\n"
        "  - segmented_scan: {of: x, op: sum, kind: exclusive, segments: rows, into: e}\n"
        "output: [s, e]\n");
    sluice_pipeline *ph = tu_load(ctx,
        "sluice: 1\nname: head\ninput: {x: i64, h: bool}\nstages:\n"
        "  - segmented_scan: {of: x, op: sum, segments: h, into: s}\n"
        "  - segmented_scan: {of: x, op: sum, kind: exclusive, segments: h, into: e}\n"
        "output: [s, e]\n");
    sluice_pipeline *pk = tu_load(ctx,
        "sluice: 1\nname: key\ninput: {x: i64, k: u16}\nstages:\n"
        "  - segmented_scan: {of: x, op: sum, segments: {key: k}, into: s}\n"
        "  - segmented_scan: {of: x, op: sum, kind: exclusive, segments: {key: k}, into: e}\n"
        "output: [s, e]\n");
    for (int trial = 0; trial < 12; trial++) {
        int64_t n = trial < 2 ? trial : tu_rng_range(&rng, 2, 4 * TILE);
        int64_t *x = malloc(8 * (size_t)n + 8), *off = malloc(8 * (size_t)n + 16);
        uint8_t *h = malloc((size_t)n + 1);
        uint16_t *k = malloc(2 * (size_t)n + 2);
        int64_t nseg = 0;
        off[0] = 0;
        uint16_t key = 0;
        int64_t avg = trial % 2 ? 3 : 700;
        for (int64_t i = 0; i < n; i++) {
            x[i] = tu_rng_range(&rng, -100, 100);
            h[i] = tu_rng_range(&rng, 0, avg) == 0;
            if (h[i]) key = (uint16_t)(key + 1 + tu_rng_range(&rng, 0, 1) * 7);
            k[i] = key;
            if (i > 0 && h[i]) off[++nseg] = i;
            if (tu_rng_range(&rng, 0, 50) == 0) off[++nseg] = i; /* an empty segment */
        }
        off[++nseg] = n;
        /* Oracles. */
        int64_t *ws = malloc(8 * (size_t)n + 8), *we = malloc(8 * (size_t)n + 8);
        for (int mode = 0; mode < 3; mode++) {
            int64_t seg = 0, acc = 0;
            for (int64_t i = 0; i < n; i++) {
                bool head;
                if (mode == 0) {
                    while (seg < nseg && off[seg + 1] <= i) seg++;
                    head = off[seg] == i;
                } else if (mode == 1) {
                    head = h[i];
                } else {
                    head = i == 0 || k[i] != k[i - 1];
                }
                if (head) acc = 0;
                we[i] = acc;
                acc += x[i];
                ws[i] = acc;
            }
            sluice_column cols[2] = {{"x", SLUICE_I64, x, n}, {NULL, SLUICE_I64, NULL, 0}};
            sluice_pipeline *p = mode == 0 ? po : mode == 1 ? ph : pk;
            if (mode == 0) cols[1] = (sluice_column){"rows", SLUICE_I64, off, nseg + 1};
            if (mode == 1) cols[1] = (sluice_column){"h", SLUICE_BOOL, h, n};
            if (mode == 2) cols[1] = (sluice_column){"k", SLUICE_U16, k, n};
            int64_t cuts[12];
            int ncuts = random_cuts(&rng, mode == 0 ? nseg : n, cuts, 12);
            result r;
            run_cut(ctx, p, cols, 2, n, cuts, ncuts, mode == 0 ? 1 : -1, &r);
            ck_assert_int_eq(r.rows, n);
            for (int64_t i = 0; i < n; i++) {
                EXPECT(((int64_t *)r.data[0])[i] == ws[i] && ((int64_t *)r.data[1])[i] == we[i],
                              "mode %d row %lld: got %lld/%lld want %lld/%lld", mode, (long long)i,
                              (long long)((int64_t *)r.data[0])[i], (long long)((int64_t *)r.data[1])[i],
                              (long long)ws[i], (long long)we[i]);
            }
            result_free(&r);
        }
        free(ws);
        free(we);
        free(x);
        free(off);
        free(h);
        free(k);
    }
    sluice_pipeline_free(po);
    sluice_pipeline_free(ph);
    sluice_pipeline_free(pk);
    sluice_context_destroy(ctx);
}
END_TEST

/* A declared operator (the affine pair of pipelines/SCHEMA.md) gives the recurrence's loop, whole and
 * cut, inclusive and exclusive; and segmented by a key. */
START_TEST(declared_operator) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: affine\ninput: {decay: f64, u: f64, k: i32, hf: bool}\n"
        "operators:\n  affine:\n    state: {a: f64, b: f64}\n    identity: {a: 1.0, b: 0.0}\n"
        "    combine:\n      a: l.a * r.a\n      b: r.a * l.b + r.b\n"
        "stages:\n  - scan: {op: affine, of: {a: decay, b: u}, kind: inclusive, into: {b: h}}\n"
        "  - scan: {op: affine, of: {a: decay, b: u}, kind: exclusive, into: {b: e}}\n"
        "  - segmented_scan: {op: affine, of: {a: decay, b: u}, segments: {key: k}, into: {b: g}}\n"
        "  - segmented_scan: {op: affine, of: {a: decay, b: u}, kind: exclusive, segments: hf,"
        " into: {a: qa, b: q}}\n"
        "output: [h, e, g, q, qa]\n");
    tu_rng rng;
    tu_rng_seed(&rng, 17);
    int64_t n = 3 * TILE + 123;
    double *a = malloc(8 * (size_t)n), *u = malloc(8 * (size_t)n);
    int32_t *k = malloc(4 * (size_t)n);
    uint8_t *hf = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        a[i] = 0.5 + 0.5 * tu_rng_uniform(&rng);
        u[i] = tu_rng_normal(&rng);
        k[i] = (int32_t)(i / 1000);
        hf[i] = tu_rng_range(&rng, 0, 30) == 0;
    }
    sluice_column c[4] = {{"decay", SLUICE_F64, a, n}, {"u", SLUICE_F64, u, n}, {"k", SLUICE_I32, k, n},
                          {"hf", SLUICE_BOOL, hf, n}};
    int64_t cuts[3] = {1, 5000, 5001};
    result r;
    run_cut(ctx, p, c, 4, n, cuts, 3, -1, &r);
    ck_assert_int_eq(r.rows, n);
    double h = 0, g = 0, qa = 1, qb = 0;
    for (int64_t i = 0; i < n; i++) {
        double before = h;
        h = a[i] * h + u[i];
        if (i % 1000 == 0) g = 0;
        g = a[i] * g + u[i];
        if (hf[i]) {
            qa = 1;
            qb = 0;
        }
        EXPECT(fabs(((double *)r.data[3])[i] - qb) <= 1e-9 * (fabs(qb) + 1), "q row %lld", (long long)i);
        EXPECT(fabs(((double *)r.data[4])[i] - qa) <= 1e-9, "qa row %lld", (long long)i);
        qb = a[i] * qb + u[i];
        qa = qa * a[i];
        EXPECT(fabs(((double *)r.data[0])[i] - h) <= 1e-9 * (fabs(h) + 1), "h row %lld", (long long)i);
        EXPECT(fabs(((double *)r.data[1])[i] - before) <= 1e-9 * (fabs(before) + 1), "e row %lld", (long long)i);
        EXPECT(fabs(((double *)r.data[2])[i] - g) <= 1e-9 * (fabs(g) + 1), "g row %lld", (long long)i);
    }
    result_free(&r);
    free(a);
    free(u);
    free(k);
    free(hf);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* reset: batch restarts every pushed batch. */
START_TEST(reset_per_batch) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: r\ninput: {x: i32}\nstages:\n"
                                      "  - scan: {of: x, op: sum, reset: batch, into: s}\noutput: [s]\n");
    int32_t x[10000];
    for (int i = 0; i < 10000; i++) x[i] = i % 7 - 3;
    sluice_column c = {"x", SLUICE_I32, x, 10000};
    int64_t cuts[3] = {17, 5000, 9999};
    result r;
    run_cut(ctx, p, &c, 1, 10000, cuts, 3, -1, &r);
    ck_assert_int_eq(r.rows, 10000);
    int64_t acc = 0;
    for (int i = 0; i < 10000; i++) {
        if (i == 0 || i == 17 || i == 5000 || i == 9999) acc = 0;
        acc += x[i];
        EXPECT(((int64_t *)r.data[0])[i] == acc, "row %d", i);
    }
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A few million rows: filter + scan against the loop; the same bits with 1, 2 and 3 threads
 * (determinism does not depend on the thread count). */
START_TEST(large_and_thread_independent) {
    int64_t n = 3000000 + 17;
    float *x = malloc(sizeof(float) * (size_t)n);
    tu_rng rng;
    tu_rng_seed(&rng, 3);
    for (int64_t i = 0; i < n; i++) x[i] = (float)tu_rng_normal(&rng);
    const char *yaml = "sluice: 1\nname: big\ninput: {x: f32}\n"
                       "stages:\n  - filter: x > 0\n  - scan: {of: x, op: sum, acc: f64, into: s}\n"
                       "  - scan: {of: x, op: sum, into: t}\noutput: [x, s, t]\n";
    result first;
    memset(&first, 0, sizeof first);
    for (int threads = 1; threads <= 3; threads++) {
        sluice_context_options o = SLUICE_CONTEXT_OPTIONS_INIT;
        o.cpu_threads = threads;
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, &o), SLUICE_OK);
        sluice_pipeline *p = tu_load(ctx, yaml);
        sluice_column c = {"x", SLUICE_F32, x, n};
        result r;
        run_whole(ctx, p, &c, 1, n, &r);
        if (threads == 1) {
            double s = 0;
            int64_t k = 0;
            for (int64_t i = 0; i < n; i++) {
                if (!(x[i] > 0)) continue;
                s += x[i];
                EXPECT(((float *)r.data[0])[k] == x[i], "row %lld", (long long)k);
                EXPECT(fabs(((double *)r.data[1])[k] - s) <= 1e-9 * s, "row %lld", (long long)k);
                EXPECT(fabs(((float *)r.data[2])[k] - s) <= 1e-4 * s, "row %lld", (long long)k);
                k++;
            }
            ck_assert_int_eq(r.rows, k);
            first = r;
        } else {
            assert_same(&first, &r);
            result_free(&r);
        }
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
    result_free(&first);
    free(x);
}
END_TEST

/* A push that fails for lack of memory changes nothing: the next pushes give the output of
 * a stream in which the failed batch never happened. */
START_TEST(transactional_push) {
    tu_failing f = {-1};
    sluice_allocator a = tu_failing_allocator(&f);
    sluice_context_options o = SLUICE_CONTEXT_OPTIONS_INIT;
    o.allocator = &a;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, &o), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: t\ninput: {x: i32}\nstages:\n"
                                      "  - scan: {of: x, op: sum, into: s}\n  - sort: {key: x}\n"
                                      "  - scan: {of: s, op: max, into: m}\noutput: [x, s, m]\n");
    int32_t x[3000];
    for (int i = 0; i < 3000; i++) x[i] = (i * 7919) % 1000 - 500;
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = 1000;
    /* Reference: two batches. */
    result ref;
    memset(&ref, 0, sizeof ref);
    {
        sluice_session *s;
        ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
        sluice_column c1 = {"x", SLUICE_I32, x, 1000}, c2 = {"x", SLUICE_I32, x + 1000, 2000};
        ck_assert_int_eq(sluice_session_push(s, &c1, 1), SLUICE_OK);
        ck_assert_int_eq(sluice_session_push(s, &c2, 1), SLUICE_OK);
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        sluice_batch *b;
        while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
            append_batch(&ref, b);
            sluice_batch_free(b);
        }
        sluice_session_close(s);
    }
    ck_assert_int_eq(ref.rows, 3000);
    /* Failing pushes of a third, large batch in between, at every allocation. */
    int failures = 0;
    for (long budget = 0; budget < 60; budget++) {
        sluice_session *s;
        ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
        sluice_column c1 = {"x", SLUICE_I32, x, 1000}, c2 = {"x", SLUICE_I32, x + 1000, 2000};
        sluice_column bad = {"x", SLUICE_I32, x, 2500};
        ck_assert_int_eq(sluice_session_push(s, &c1, 1), SLUICE_OK);
        f.budget = budget;
        sluice_status st = sluice_session_push(s, &bad, 1);
        f.budget = -1;
        if (st == SLUICE_OK) {
            sluice_session_close(s);
            break;
        }
        failures++;
        ck_assert_int_eq(st, SLUICE_ERR_NO_MEMORY);
        ck_assert_int_eq(sluice_session_push(s, &c2, 1), SLUICE_OK);
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        result r;
        memset(&r, 0, sizeof r);
        sluice_batch *b;
        while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
            append_batch(&r, b);
            sluice_batch_free(b);
        }
        assert_same(&ref, &r);
        result_free(&r);
        sluice_session_close(s);
    }
    ck_assert_int_gt(failures, 0);
    result_free(&ref);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A filter keeping a few rows of a large batch (the result moves into a buffer of its size). */
START_TEST(selective_filter) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: f\ninput: {x: f32, i: i64}\nstages:\n"
                                      "  - filter: x > 0.999\noutput: [i, x]\n");
    int64_t n = 1 << 20;
    float *x = malloc(sizeof(float) * (size_t)n);
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)n);
    tu_rng rng;
    tu_rng_seed(&rng, 8);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)tu_rng_uniform(&rng);
        iv[i] = i;
    }
    sluice_column c[2] = {{"x", SLUICE_F32, x, n}, {"i", SLUICE_I64, iv, n}};
    result r;
    run_whole(ctx, p, c, 2, n, &r);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!(x[i] > 0.999f)) continue;
        EXPECT(k < r.rows && ((int64_t *)r.data[0])[k] == i && ((float *)r.data[1])[k] == x[i],
               "kept row %lld", (long long)k);
        k++;
    }
    ck_assert_int_eq(r.rows, k);
    ck_assert_int_gt(k, 100);
    result_free(&r);
    sluice_pipeline_free(p);
    free(x);
    free(iv);
    sluice_context_destroy(ctx);
}
END_TEST

/* After open, a push of up to max_batch_rows rows allocates only its result batch (the batch
 * shell and one buffer per output column): scratch is the session's. */
START_TEST(no_allocation_on_the_hot_path) {
    static const char *pipelines[] = {
        "sluice: 1\nname: a\ninput: {x: f32}\nstages:\n  - filter: x > 0\n"
        "  - scan: {of: x, op: sum, into: s}\noutput: [x, s]\n",
        "sluice: 1\nname: b\ninput: {x: f32}\nstages:\n  - map: {k: -x}\n"
        "  - sort: {key: k, per: batch}\n  - scan: {of: x, op: max, into: m}\noutput: [x, m]\n",
    };
    tu_failing f = {-1};
    long count = 0;
    sluice_allocator a = tu_failing_allocator(&f);
    sluice_context_options o = SLUICE_CONTEXT_OPTIONS_INIT;
    o.allocator = &a;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, &o), SLUICE_OK);
    float x[20000];
    for (int i = 0; i < 20000; i++) x[i] = (float)((i * 37) % 101) - 50.0f;
    for (size_t pi = 0; pi < SL_ARRAY_LEN(pipelines); pi++) {
        sluice_pipeline *p = tu_load(ctx, pipelines[pi]);
        sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
        so.backend = SLUICE_BACKEND_CPU;
        so.max_batch_rows = 20000;
        sluice_session *s;
        ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
        for (int round = 0; round < 4; round++) {
            sluice_column c = {"x", SLUICE_F32, x, round == 0 ? 20000 : 5000 * round};
            f.budget = 1000000;
            ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
            count = 1000000 - f.budget;
            f.budget = -1;
            sluice_batch *b;
            while (sluice_session_pull(s, &b) == SLUICE_OK && b) sluice_batch_free(b);
            /* round 0 may grow the session's output queue once */
            if (round > 0)
                ck_assert_msg(count <= 3 + 2, "pipeline %zu: a push made %ld allocations", pi, count);
        }
        sluice_session_close(s);
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- compaction by a column that stays live ---------------------------------------------- */

/* Checks that the result has `rows` rows and that output column `col` (bool, i32, i64, or
 * f32 holding integers) holds want[0..rows). */
static void expect_i64_column(const result *r, int col, const int64_t *want, int64_t rows) {
    ck_assert_int_eq(r->rows, rows);
    for (int64_t i = 0; i < rows; i++) {
        int64_t got = r->type[col] == SLUICE_I32    ? ((const int32_t *)r->data[col])[i]
                      : r->type[col] == SLUICE_BOOL ? ((const uint8_t *)r->data[col])[i]
                      : r->type[col] == SLUICE_F32  ? (int64_t)((const float *)r->data[col])[i]
                                                    : ((const int64_t *)r->data[col])[i];
        ck_assert_msg(got == want[i], "output column %d row %lld: %lld, want %lld", col,
                      (long long)i, (long long)got, (long long)want[i]);
    }
}

/* Issue 9, part 1: a compaction whose `by` column is still live afterwards and sits in a tile
 * buffer packed it in place before the columns after it were gathered, so they (and the
 * local prefixes of pending scans, and the flags of a later compaction, hence its row count)
 * were packed by already-packed flags. */
START_TEST(compact_by_a_live_flag) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    int32_t x[5] = {10, 20, 30, 40, 50};
    sluice_column cx = {"x", SLUICE_I32, x, 5};
    result r;
    /* The flag is computed in the group; y is gathered after it. */
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: compact-kept-flag\ninput: {x: i32}\n"
                                      "stages:\n  - map: {k: 'x > 25'}\n  - map: {y: 'x + 1'}\n"
                                      "  - compact: {by: k}\noutput: [x, k, y]\n");
    run_whole(ctx, p, &cx, 1, 5, &r);
    expect_i64_column(&r, 0, (const int64_t[]){30, 40, 50}, 3);
    expect_i64_column(&r, 1, (const int64_t[]){1, 1, 1}, 3);
    expect_i64_column(&r, 2, (const int64_t[]){31, 41, 51}, 3);
    result_free(&r);
    sluice_pipeline_free(p);
    /* A scan's local prefixes (still waiting for the carry) are packed by the same flags. */
    p = tu_load(ctx, "sluice: 1\nname: kept-flag-scan\ninput: {x: i32}\nstages:\n"
                     "  - flag: {k: 'x > 25'}\n  - scan: {of: x, op: sum, into: s}\n"
                     "  - scan: {op: count, kind: exclusive, into: n}\n"
                     "  - scan: {of: f32(x), op: sum, into: f}\n"
                     "  - compact: {by: k}\noutput: [s, n, f]\n");
    run_whole(ctx, p, &cx, 1, 5, &r);
    expect_i64_column(&r, 0, (const int64_t[]){60, 100, 150}, 3);
    expect_i64_column(&r, 1, (const int64_t[]){2, 3, 4}, 3);
    expect_i64_column(&r, 2, (const int64_t[]){60, 100, 150}, 3);
    result_free(&r);
    sluice_pipeline_free(p);
    /* The flag is an input, moved into a tile buffer by the filter before it. */
    uint8_t b[5] = {0, 0, 1, 1, 1};
    int32_t y[5] = {1, 2, 3, 4, 5};
    sluice_column cb[2] = {{"b", SLUICE_BOOL, b, 5}, {"y", SLUICE_I32, y, 5}};
    p = tu_load(ctx, "sluice: 1\nname: moved-flag\ninput: {b: bool, y: i32}\nstages:\n"
                     "  - filter: 'y > 0'\n  - compact: {by: b}\noutput: [b, y]\n");
    run_whole(ctx, p, cb, 2, 5, &r);
    expect_i64_column(&r, 0, (const int64_t[]){1, 1, 1}, 3);
    expect_i64_column(&r, 1, (const int64_t[]){3, 4, 5}, 3);
    result_free(&r);
    sluice_pipeline_free(p);
    /* `columns:` keeping the flag and a column after it; and two compactions in one group, the
     * second by a flag the first one moved. */
    p = tu_load(ctx, "sluice: 1\nname: listed\ninput: {x: i32}\nstages:\n"
                     "  - map: {k: 'x > 25', y: 'x * 2'}\n  - compact: {by: k, columns: [k, y]}\n"
                     "output: [y, k]\n");
    run_whole(ctx, p, &cx, 1, 5, &r);
    expect_i64_column(&r, 0, (const int64_t[]){60, 80, 100}, 3);
    result_free(&r);
    sluice_pipeline_free(p);
    p = tu_load(ctx, "sluice: 1\nname: two\ninput: {x: i32}\nstages:\n"
                     "  - map: {a: 'x != 20', k: 'x > 25', y: 'x + 1'}\n"
                     "  - compact: {by: a}\n  - compact: {by: k}\noutput: [x, y, a, k]\n");
    run_whole(ctx, p, &cx, 1, 5, &r);
    expect_i64_column(&r, 0, (const int64_t[]){30, 40, 50}, 3);
    expect_i64_column(&r, 1, (const int64_t[]){31, 41, 51}, 3);
    expect_i64_column(&r, 2, (const int64_t[]){1, 1, 1}, 3);
    expect_i64_column(&r, 3, (const int64_t[]){1, 1, 1}, 3);
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Several compactions in one group, each by a flag that stays live and whose column id comes
 * before columns gathered with it (a computed flag, one computed after a compaction, a
 * filter, an input moved by them), with pending scans, against a sequential oracle over
 * many tiles, whole and cut into batches, on 1 and 3 threads. */
START_TEST(compact_oracle) {
    const char *yaml = "sluice: 1\nname: compacts\ninput: {x: i32, b: bool}\nstages:\n"
                       "  - flag: {k: x % 3 != 0}\n"
                       "  - scan: {of: x, op: sum, into: s}\n"
                       "  - scan: {op: count, kind: exclusive, into: n}\n"
                       "  - compact: {by: k}\n"
                       "  - map: {y: x + 1}\n"
                       "  - flag: {j: y % 4 != 0}\n"
                       "  - scan: {of: y, op: max, into: m}\n"
                       "  - compact: {by: j}\n"
                       "  - filter: x % 5 != 0\n"
                       "  - compact: {by: b}\n"
                       "output: [x, b, k, s, n, y, j, m]\n";
    tu_rng rng;
    tu_rng_seed(&rng, 91);
    int64_t n = 4 * TILE + 123;
    int32_t *x = malloc(sizeof(int32_t) * (size_t)n);
    uint8_t *b = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (int32_t)tu_rng_range(&rng, -100000, 100000);
        b[i] = tu_rng_range(&rng, 0, 3) != 0;
    }
    /* The oracle: rows surviving all four compactions, with their scan values. */
    int64_t *want[8];
    for (int c = 0; c < 8; c++) want[c] = malloc(sizeof(int64_t) * (size_t)n);
    int64_t kept = 0, s = 0, cnt = 0, m = INT32_MIN;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        int64_t ni = cnt++;
        if (x[i] % 3 == 0) continue;
        int32_t y = x[i] + 1;
        if (y > m) m = y;
        if (y % 4 == 0) continue;
        if (x[i] % 5 == 0 || !b[i]) continue;
        const int64_t row[8] = {x[i], 1, 1, s, ni, y, 1, m};
        for (int c = 0; c < 8; c++) want[c][kept] = row[c];
        kept++;
    }
    for (int threads = 1; threads <= 3; threads += 2) {
        sluice_context_options o = SLUICE_CONTEXT_OPTIONS_INIT;
        o.cpu_threads = threads;
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, &o), SLUICE_OK);
        sluice_pipeline *p = tu_load(ctx, yaml);
        sluice_column cols[2] = {{"x", SLUICE_I32, x, n}, {"b", SLUICE_BOOL, b, n}};
        for (int trial = 0; trial < 3; trial++) {
            int64_t cuts[16];
            int ncuts = trial == 0 ? 0 : random_cuts(&rng, n, cuts, 16);
            result r;
            run_cut(ctx, p, cols, 2, n, cuts, ncuts, -1, &r);
            ck_assert_int_eq(r.ncols, 8);
            for (int c = 0; c < 8; c++) expect_i64_column(&r, c, want[c], kept);
            result_free(&r);
        }
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
    for (int c = 0; c < 8; c++) free(want[c]);
    free(x);
    free(b);
}
END_TEST

/* Issue 9, part 3: a bool byte other than 0 is true wherever sluice interprets a bool (key and
 * head-flag segments, compaction flags, expressions, scans of bools), every bool column it
 * computes holds 0 or 1 (a plain copy `m: b` included), and an input passed through keeps its
 * bytes. Keys 1 2 2 0 are two segments; the key carries across the batch cut at row 2. */
START_TEST(bool_bytes) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: bools\ninput: {b: bool, x: i32}\nstages:\n"
        "  - map: {m: b, t: 'x > 0 ? b : false'}\n"
        "  - segmented_scan: {of: x, op: sum, segments: {key: b}, into: s}\n"
        "  - segmented_scan: {op: count, segments: b, into: h}\n"
        "  - scan: {of: b, op: xor, into: xo}\n"
        "  - compact: {by: b}\noutput: [b, m, t, s, h, xo]\n");
    uint8_t b[8] = {1, 2, 2, 0, 2, 1, 0, 3};
    int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    sluice_column c[2] = {{"b", SLUICE_BOOL, b, 8}, {"x", SLUICE_I32, x, 8}};
    /* kept rows 0 1 2 4 5 7; segments by truth value: rows 0-2, 3, 4-5, 6, 7 */
    static const int64_t want_b[6] = {1, 2, 2, 2, 1, 3}, want_m[6] = {1, 1, 1, 1, 1, 1},
                         want_s[6] = {1, 3, 6, 5, 11, 8}, want_h[6] = {1, 1, 1, 1, 1, 1},
                         want_xo[6] = {1, 0, 1, 0, 1, 0};
    for (int cut = 0; cut < 2; cut++) {
        const int64_t cuts[2] = {2, 5};
        result r;
        run_cut(ctx, p, c, 2, 8, cuts, cut ? 2 : 0, -1, &r);
        expect_i64_column(&r, 0, want_b, 6); /* passed through: its own bytes */
        expect_i64_column(&r, 1, want_m, 6);
        expect_i64_column(&r, 2, want_m, 6);
        expect_i64_column(&r, 3, want_s, 6);
        expect_i64_column(&r, 4, want_h, 6);
        expect_i64_column(&r, 5, want_xo, 6);
        result_free(&r);
    }
    sluice_pipeline_free(p);
    /* A head flag computed from the bytes: `!b` is false for a byte of 2 as for 1. */
    p = tu_load(ctx, "sluice: 1\nname: heads\ninput: {b: bool, x: i32}\nstages:\n"
                     "  - map: {n: '!b'}\n"
                     "  - segmented_scan: {of: x, op: sum, segments: n, into: s}\noutput: [s]\n");
    result r;
    run_whole(ctx, p, c, 2, 8, &r);
    /* heads (b == 0) at rows 3 and 6; rows 0-2 continue the stream's first segment */
    expect_i64_column(&r, 0, (const int64_t[]){1, 3, 6, 4, 9, 15, 7, 15}, 8);
    result_free(&r);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *cpu_scan_suite(void) {
    Suite *s = suite_create("cpu_scan");
    TCase *tc = tcase_create("primer");
    tcase_add_test(tc, primer_scans);
    tcase_add_test(tc, primer_compaction);
    tcase_add_test(tc, primer_recurrence);
    tcase_add_test(tc, primer_f16_stall);
    suite_add_tcase(s, tc);
    tc = tcase_create("compaction");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, compact_by_a_live_flag);
    tcase_add_test(tc, compact_oracle);
    tcase_add_test(tc, bool_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("oracle");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, scan_ops_types);
    tcase_add_test(tc, narrow_accumulators);
    tcase_add_test(tc, segmented_oracle);
    tcase_add_test(tc, reset_per_batch);
    tcase_add_test(tc, declared_operator);
    tcase_add_test(tc, large_and_thread_independent);
    suite_add_tcase(s, tc);
    tc = tcase_create("stream");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, cutting_invariance);
    tcase_add_test(tc, transactional_push);
    tcase_add_test(tc, no_allocation_on_the_hot_path);
    tcase_add_test(tc, selective_filter);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(cpu_scan_suite()); }
