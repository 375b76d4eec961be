/* test_exec.c — the physical plan (core/plan/plan.h) and the shared executor (core/runtime/exec.h) on the
 * CPU backend: the plan's liveness, carry levels, group columns and cut kinds on pipelines
 * built to exercise them; the documented semantics of batches larger than max_batch_rows
 * (sluice.h) — cut anywhere, between segments of an offsets input, or run whole — each
 * checked against the same batch under a large max_batch_rows; the bound on result batch
 * sizes that cutting gives; the transaction rule when an allocation fails in the middle
 * of a cut batch; and that once a session has taken its first push, pushes allocate nothing
 * but the result batches they queue. tests/gpu_backend.c checks the same semantics on the
 * GPU. */
#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testutil.h"

#include "common/context.h"
#include "plan/plan.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int column_id(const sluice_pipeline *p, const char *name) {
    for (int c = 0; c < p->ncolumns; c++)
        if (strcmp(p->columns[c].name, name) == 0) return c;
    ck_abort_msg("no column %s", name);
    return -1;
}

static bool lists(const sluice_pipeline *p, const int *ids, int n, const char *name) {
    int c = column_id(p, name);
    for (int i = 0; i < n; i++)
        if (ids[i] == c) return true;
    return false;
}

/* ---- the plan --------------------------------------------------------------------------- */

START_TEST(plan_liveness_is_per_entry) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: dead\ninput: {x: f32, y: f32, k: i32}\nstages:\n"
        "  - sort: {key: k}\n  - map: {a: x + 1.0, b: y * 2.0, c: b * 3.0, d: a}\n"
        "output: [c]\n");
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan), SLUICE_OK);
    ck_assert_int_eq(plan.ngroups, 2);
    /* c needs b; a and d are dead, so x is not needed after the sort and is not moved */
    const bool *live = plan.map_entry_live[1];
    ck_assert(!live[0] && live[1] && live[2] && !live[3]);
    const sl_group *sort = &plan.groups[0];
    ck_assert(lists(p, sort->in, sort->nin, "y") && lists(p, sort->in, sort->nin, "k"));
    ck_assert(!lists(p, sort->in, sort->nin, "x"));
    ck_assert(lists(p, sort->out, sort->nout, "y") && !lists(p, sort->out, sort->nout, "k"));
    const sl_group *map = &plan.groups[1];
    ck_assert_int_eq(map->nin, 1);
    ck_assert(lists(p, map->in, map->nin, "y"));
    ck_assert_int_eq(map->nout, 1);
    ck_assert(lists(p, map->out, map->nout, "c"));
    ck_assert_int_eq(map->phases, 0);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(plan_carry_levels_and_pass_through) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: levels\ninput: {x: i32, id: u64}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\n"       /* stage 0: reads level 0 -> s at 1 */
        "  - map: {t: s * 2, u: x + 1}\n"              /* stage 1: t at 1, u at 0 */
        "  - scan: {of: t, op: max, into: m}\n"        /* stage 2: reads 1 -> m at 2 */
        "output: [id, m, u]\n");
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan), SLUICE_OK);
    ck_assert_int_eq(plan.ngroups, 1);
    ck_assert_int_eq(plan.level[column_id(p, "s")], 1);
    ck_assert_int_eq(plan.level[column_id(p, "t")], 1);
    ck_assert_int_eq(plan.level[column_id(p, "u")], 0);
    ck_assert_int_eq(plan.level[column_id(p, "m")], 2);
    ck_assert_int_eq(plan.reads_level[0], 0);
    ck_assert_int_eq(plan.reads_level[1], 1);
    ck_assert_int_eq(plan.reads_level[2], 1);
    ck_assert_int_eq(plan.stage_phase[0], 1);
    ck_assert_int_eq(plan.stage_phase[1], 0);
    ck_assert_int_eq(plan.stage_phase[2], 2);
    const sl_group *g = &plan.groups[0];
    ck_assert_int_eq(g->phases, 2);
    ck_assert(!g->compacts);
    /* id is needed after the group and unchanged: passed through, not written */
    ck_assert(lists(p, g->pass, g->npass, "id") && !lists(p, g->out, g->nout, "id"));
    ck_assert(lists(p, g->out, g->nout, "m") && lists(p, g->out, g->nout, "u"));
    ck_assert(!lists(p, g->out, g->nout, "s"));
    ck_assert_int_eq(g->cut, SL_CUT_ANYWHERE);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);

    /* a compaction by a carried flag: the kept count is one phase later; id moves */
    p = tu_load(ctx,
        "sluice: 1\nname: compact-levels\ninput: {x: i32, id: u64}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\n  - filter: s > 3\noutput: [id]\n");
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan), SLUICE_OK);
    g = &plan.groups[0];
    ck_assert(g->compacts);
    ck_assert_int_eq(g->phases, 2);
    ck_assert(lists(p, g->out, g->nout, "id") && g->npass == 0);
    ck_assert(lists(p, g->in, g->nin, "id") && lists(p, g->in, g->nin, "x"));
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(plan_cut_kinds) {
    static const struct {
        const char *yaml;
        sl_cut cut[3];
    } cases[] = {
        {"sluice: 1\nname: a\ninput: {x: i32}\nstages:\n  - scan: {of: x, op: sum, into: s}\n"
         "  - sort: {key: s}\n  - filter: s > 0\n",
         {SL_CUT_ANYWHERE, SL_CUT_ANYWHERE, SL_CUT_ANYWHERE}},
        {"sluice: 1\nname: b\ninput:\n  o: {type: i64, role: offsets}\n  x: i32\nstages:\n"
         "  - segmented_scan: {of: x, op: sum, segments: o, into: s}\n  - sort: {key: s}\n"
         "  - filter: s > 0\n",
         {SL_CUT_SEGMENTS, SL_CUT_ANYWHERE, SL_CUT_ANYWHERE}},
        {"sluice: 1\nname: c\ninput: {x: i32}\nstages:\n  - filter: x > 0\n  - sort: {key: x}\n"
         "  - scan: {of: x, op: sum, into: s, reset: batch}\n",
         {SL_CUT_NEVER, SL_CUT_NEVER, SL_CUT_NEVER}},
        {"sluice: 1\nname: d\ninput: {x: i32}\nstages:\n  - filter: x > 0\n"
         "  - sort: {key: x, per: batch}\n  - sort: {key: x}\n",
         {SL_CUT_NEVER, SL_CUT_NEVER, SL_CUT_ANYWHERE}},
    };
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    for (size_t i = 0; i < NELEM(cases); i++) {
        sluice_pipeline *p = tu_load(ctx, cases[i].yaml);
        sl_plan plan;
        ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan), SLUICE_OK);
        ck_assert_int_eq(plan.ngroups, 3);
        for (int g = 0; g < 3; g++)
            ck_assert_msg(plan.groups[g].cut == cases[i].cut[g], "case %zu group %d: cut %d",
                          i, g, (int)plan.groups[g].cut);
        sl_plan_free(ctx, &plan);
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- batches over max_batch_rows ---------------------------------------------------------- */

typedef struct result {
    int64_t rows;
    int ncols;
    int64_t *data[8]; /* every output widened to i64 bits */
    int64_t batches, largest;
} result;

static void result_free(result *r) {
    for (int i = 0; i < r->ncols; i++) free(r->data[i]);
    memset(r, 0, sizeof *r);
}

static void take(result *r, sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    r->ncols = (int)sluice_batch_column_count(b);
    ck_assert_int_le(r->ncols, 8);
    for (int c = 0; c < r->ncols; c++) {
        sluice_column col;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)c, &col), SLUICE_OK);
        r->data[c] = realloc(r->data[c], (size_t)(r->rows + n + 1) * sizeof(int64_t));
        size_t w = sluice_type_size(col.type);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = 0;
            memcpy(&v, (const char *)col.data + i * (int64_t)w, w);
            r->data[c][r->rows + i] = v;
        }
    }
    r->rows += n;
    r->batches++;
    if (n > r->largest) r->largest = n;
}

static void drain(sluice_session *s, result *r) {
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        take(r, b);
        sluice_batch_free(b);
    }
}

/* Input: x (i32) and k (i16), and for offsets pipelines offsets o with empty segments, short
 * ones and one longer than any max_batch_rows used here. */
typedef struct input {
    int64_t rows, nseg;
    int32_t *x;
    int16_t *k;
    int64_t *off;
} input;

static void make_input(input *in, int64_t rows, uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    in->rows = rows;
    in->x = malloc((size_t)rows * sizeof *in->x + 1);
    in->k = malloc((size_t)rows * sizeof *in->k + 1);
    for (int64_t i = 0; i < rows; i++) {
        in->x[i] = (int32_t)tu_rng_range(&r, -50, 100);
        in->k[i] = (int16_t)tu_rng_range(&r, 0, 9);
    }
    in->off = malloc((size_t)(rows + 2) * sizeof *in->off * 2);
    in->nseg = 0;
    in->off[0] = 0;
    int64_t at = 0;
    while (at < rows) {
        int64_t len;
        switch (tu_rng_range(&r, 0, 5)) {
        case 0: len = 0; break;                          /* empty */
        case 1: len = tu_rng_range(&r, 40, 90); break;   /* longer than max_batch_rows */
        default: len = tu_rng_range(&r, 1, 6); break;
        }
        if (at + len > rows) len = rows - at;
        at += len;
        in->off[++in->nseg] = at;
    }
    in->off[++in->nseg] = rows; /* and an empty last segment */
}

static void input_free(input *in) {
    free(in->x);
    free(in->k);
    free(in->off);
}

/* Pushes `in` as one batch (or rows [0, rows) only when no offsets) and flushes. */
static void run(sluice_pipeline *p, const input *in, int64_t max_rows, result *r) {
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = max_rows;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    memset(r, 0, sizeof *r);
    sluice_column cols[3] = {{"x", SLUICE_I32, in->x, in->rows}, {"k", SLUICE_I16, in->k, in->rows},
                             {"o", SLUICE_I64, in->off, in->nseg + 1}};
    size_t n = sluice_pipeline_input_count(p);
    for (int round = 0; round < 2; round++) { /* twice: carries cross the batches */
        sluice_status st = sluice_session_push(s, cols, n);
        if (st != SLUICE_OK) tu_print_diags(p->ctx);
        ck_assert_int_eq(st, SLUICE_OK);
        drain(s, r);
    }
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    drain(s, r);
    sluice_session_close(s);
}

static void same(const char *name, int64_t max_rows, const result *want, const result *got) {
    ck_assert_msg(want->rows == got->rows, "%s, max_batch_rows %lld: %lld rows, want %lld", name,
                  (long long)max_rows, (long long)got->rows, (long long)want->rows);
    for (int c = 0; c < want->ncols; c++)
        for (int64_t i = 0; i < want->rows; i++)
            ck_assert_msg(want->data[c][i] == got->data[c][i],
                          "%s, max_batch_rows %lld: output %d row %lld is %lld, want %lld", name,
                          (long long)max_rows, c, (long long)i, (long long)got->data[c][i],
                          (long long)want->data[c][i]);
}

static const char *const oversized[] = {
    /* cut anywhere */
    "sluice: 1\nname: anywhere\ninput: {x: i32, k: i16}\nstages:\n  - filter: x > 0\n"
    "  - scan: {of: x, op: sum, into: s, acc: i64}\n"
    "  - segmented_scan: {of: x, op: max, segments: {key: k}, into: m}\noutput: [s, m, k]\n",
    /* an offsets input: between segments */
    "sluice: 1\nname: offsets\ninput:\n  o: {type: i64, role: offsets}\n  x: i32\n  k: i16\n"
    "stages:\n  - segmented_scan: {of: x, op: sum, segments: o, into: s, acc: i64}\n"
    "  - filter: s > 10\n  - scan: {op: count, into: n}\noutput: [s, n, x]\n",
    /* offsets and reset: batch: never */
    "sluice: 1\nname: offsets-reset\ninput:\n  o: {type: i64, role: offsets}\n  x: i32\n  k: i16\n"
    "stages:\n  - segmented_scan: {of: x, op: sum, segments: o, into: s, acc: i64}\n"
    "  - scan: {of: x, op: min, into: lo, reset: batch}\noutput: [s, lo]\n",
    /* reset: batch */
    "sluice: 1\nname: reset\ninput: {x: i32, k: i16}\nstages:\n"
    "  - scan: {of: x, op: sum, into: s, reset: batch, acc: i64}\n  - filter: x != 7\n"
    "output: [s, x]\n",
    /* per: batch sort, then a scan */
    "sluice: 1\nname: per-batch\ninput: {x: i32, k: i16}\nstages:\n"
    "  - sort: {key: k, per: batch}\n  - scan: {of: x, op: sum, into: s, acc: i64}\n"
    "output: [k, x, s]\n",
    /* a stream sort, then reset: batch (the sorted stream is one batch at flush) */
    "sluice: 1\nname: stream-then-reset\ninput: {x: i32, k: i16}\nstages:\n"
    "  - sort: {key: k}\n  - scan: {of: x, op: sum, into: s, reset: batch, acc: i64}\n"
    "output: [k, s]\n",
    /* a stream sort, then cut anywhere */
    "sluice: 1\nname: stream-then-filter\ninput: {x: i32, k: i16}\nstages:\n"
    "  - sort: {key: x, values: [k]}\n  - filter: k > 3\n  - scan: {op: count, into: n}\n"
    "output: [x, n]\n",
    /* a stream sort whose columns pass through the group after it */
    "sluice: 1\nname: stream-then-map\ninput: {x: i32, k: i16}\nstages:\n"
    "  - sort: {key: k}\n  - map: {y: x * 3}\noutput: [k, x, y]\n",
    /* elementwise only */
    "sluice: 1\nname: elementwise\ninput: {x: i32, k: i16}\nstages:\n  - map: {y: x * 2}\n"
    "output: [k, y]\n",
};

START_TEST(oversized_batches_keep_their_results) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    input in;
    make_input(&in, 1000, 7);
    static const int64_t maxes[] = {1, 3, 17, 64, 999};
    for (size_t i = 0; i < NELEM(oversized); i++) {
        sluice_pipeline *p = tu_load(ctx, oversized[i]);
        const char *name = sluice_pipeline_name(p);
        bool offsets = strstr(oversized[i], "role: offsets") != NULL;
        bool whole = strstr(oversized[i], "reset: batch") || strstr(oversized[i], "per: batch");
        result want, got;
        run(p, &in, 1 << 20, &want);
        ck_assert_int_gt(want.rows, 0);
        for (size_t m = 0; m < NELEM(maxes); m++) {
            run(p, &in, maxes[m], &got);
            same(name, maxes[m], &want, &got);
            /* Cutting bounds result batches: a piece is at most max_batch_rows rows, or one
             * segment when a segment alone is longer. Only uncuttable pipelines exceed it. */
            int64_t longest = 0;
            for (int64_t k = 0; k < in.nseg; k++)
                if (in.off[k + 1] - in.off[k] > longest) longest = in.off[k + 1] - in.off[k];
            int64_t bound = offsets && longest > maxes[m] ? longest : maxes[m];
            if (!whole && !strstr(name, "stream-then-reset"))
                ck_assert_msg(got.largest <= bound, "%s, max_batch_rows %lld: a batch of %lld rows",
                              name, (long long)maxes[m], (long long)got.largest);
            result_free(&got);
        }
        result_free(&want);
        sluice_pipeline_free(p);
    }
    input_free(&in);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- transactions across the pieces of a cut batch ----------------------------------------- */

/* A context whose memory comes from `a`; cpu_threads 0 is the default pool, 1 runs every piece
 * on the calling thread (counts of allocations are then not racy). */
static sluice_context *context_with(sluice_allocator *a, int cpu_threads) {
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.allocator = a;
    co.cpu_threads = cpu_threads;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_OK);
    return ctx;
}

START_TEST(failed_piece_undoes_the_whole_batch) {
    tu_failing f = {-1};
    sluice_allocator a = tu_failing_allocator(&f);
    sluice_context *ctx = context_with(&a, 0);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: txn\ninput: {x: i32, k: i16}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s, acc: i64}\n  - sort: {key: k}\n"
        "  - scan: {op: count, into: n}\noutput: [k, s, n]\n");
    input in;
    make_input(&in, 300, 11);
    sluice_column cols[2] = {{"x", SLUICE_I32, in.x, in.rows}, {"k", SLUICE_I16, in.k, in.rows}};
    result want;
    memset(&want, 0, sizeof want);
    {
        sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
        o.backend = SLUICE_BACKEND_CPU;
        o.max_batch_rows = 50;
        sluice_session *s;
        ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
        ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
        ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        drain(s, &want);
        sluice_session_close(s);
    }
    /* Fail the k-th allocation of the second push (its sort buffer grows while the six
     * pieces append) or of the flush; the call must change nothing, so repeating it once
     * allocations work again gives the same stream. */
    int failures = 0;
    for (long k = 0; k < 40; k++) {
        for (int phase = 0; phase < 2; phase++) {
            sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
            o.backend = SLUICE_BACKEND_CPU;
            o.max_batch_rows = 50;
            sluice_session *s;
            ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
            ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
            if (phase == 1) ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
            f.budget = k;
            sluice_status st = phase == 0 ? sluice_session_push(s, cols, 2) : sluice_session_flush(s);
            f.budget = -1;
            if (st != SLUICE_OK) {
                ck_assert_int_eq(st, SLUICE_ERR_NO_MEMORY);
                failures++;
                sluice_batch *b;
                ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
                ck_assert_ptr_null(b); /* nothing emitted by the failed call */
                st = phase == 0 ? sluice_session_push(s, cols, 2) : sluice_session_flush(s);
                ck_assert_int_eq(st, SLUICE_OK);
            }
            if (phase == 0) ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
            result got;
            memset(&got, 0, sizeof got);
            drain(s, &got);
            same("txn", 50, &want, &got);
            result_free(&got);
            sluice_session_close(s);
        }
    }
    ck_assert_int_gt(failures, 0);
    result_free(&want);
    input_free(&in);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- steady state: a session allocates nothing but its results ----------------------------- */

/* Counts the context allocator's calls (from one thread: the test's contexts run with
 * cpu_threads 1, since a worker frees its start record whenever it first runs). */
typedef struct counting {
    long allocs, frees;
} counting;

static void *count_alloc(size_t size, void *opaque) {
    ((counting *)opaque)->allocs++;
    return malloc(size);
}
static void *count_realloc(void *ptr, size_t size, void *opaque) {
    ((counting *)opaque)->allocs++;
    return realloc(ptr, size);
}
static void count_free(void *ptr, void *opaque) {
    ((counting *)opaque)->frees++;
    free(ptr);
}

/* Every plan shape a push walks without a stream-wide sort: groups cut anywhere, between
 * segments and never, scans, compactions, sorts per batch and the four kinds of reduce. */
static const char *const steady[] = {
    "sluice: 1\nname: cull\ninput: {x: i32, k: i16}\nstages:\n  - map: {y: x * 3}\n"
    "  - filter: y > -10000\n  - scan: {of: x, op: sum, into: s, acc: i64}\n"
    "  - scan: {op: count, kind: exclusive, into: n}\noutput: [y, s, n]\n",
    "sluice: 1\nname: keys\ninput: {x: i32, k: i16}\nstages:\n"
    "  - segmented_scan: {of: x, op: max, segments: {key: k}, into: m}\n"
    "  - scan: {op: linrec, a: k, b: x, into: h}\noutput: [m, h]\n",
    "sluice: 1\nname: offsets\ninput:\n  o: {type: i64, role: offsets}\n  x: i32\n  k: i16\n"
    "stages:\n  - segmented_scan: {of: x, op: sum, segments: o, into: s, acc: i64}\n"
    "  - scan: {op: count, into: n}\noutput: [s, n, x]\n",
    "sluice: 1\nname: reset\ninput: {x: i32, k: i16}\nstages:\n"
    "  - scan: {of: x, op: sum, into: s, reset: batch, acc: i64}\noutput: [s, x]\n",
    "sluice: 1\nname: per-batch-sort\ninput: {x: i32, k: i16}\nstages:\n"
    "  - scan: {of: x, op: max, into: m}\n  - sort: {keys: [k, x], per: batch}\n"
    "  - scan: {of: x, op: sum, into: s, acc: i64}\noutput: [k, m, s]\n",
    "sluice: 1\nname: reduce-per-batch\ninput: {x: i32, k: i16}\nstages:\n"
    "  - reduce:\n      per: batch\n      index: b\n      values:\n"
    "        - {op: sum, of: x, into: sx}\n        - {op: max, of: k, into: mk}\n",
    "sluice: 1\nname: reduce-offsets\ninput:\n  o: {type: i64, role: offsets}\n  x: i32\n"
    "  k: i16\nstages:\n  - reduce:\n      segments: o\n      index: seg\n      values:\n"
    "        - {op: sum, of: x, into: sx}\n        - {op: count, into: n}\n",
    "sluice: 1\nname: reduce-runs\ninput: {x: i32, k: i16}\nstages:\n  - map: {key: k / 3}\n"
    "  - reduce:\n      segments: {key: key}\n      index: run\n      values:\n"
    "        - {op: sum, of: x, into: sx}\n        - {op: count, into: n}\n"
    "  - scan: {of: n, op: sum, into: before, kind: exclusive}\n",
    "sluice: 1\nname: reduce-stream\ninput: {x: i32, k: i16}\nstages:\n"
    "  - filter: x > 0\n  - reduce:\n      values:\n        - {op: sum, of: x, into: sx}\n"
    "        - {op: min, of: k, into: lo}\n",
};

/* A session sizes its scratch once (sluice.h, max_batch_rows): after its first push, a push
 * of the same size or smaller allocates nothing but the result batches it queues (one block
 * for the batch and one per output column, sl_batch_new_host), frees nothing, and a pull
 * allocates nothing. Pieces that keep no rows (a reduce that holds its open segment, empty
 * offsets segments, a filter that keeps nothing) reuse the result batch they were given. */
START_TEST(steady_pushes_allocate_only_results) {
    counting n = {0, 0};
    sluice_allocator a = {count_alloc, count_realloc, count_free, &n};
    sluice_context *ctx = context_with(&a, 1);
    input big, small;
    make_input(&big, 1000, 5);
    make_input(&small, 300, 6);
    static const int64_t maxes[] = {1, 7, 64, 1 << 20};
    for (size_t i = 0; i < NELEM(steady); i++) {
        sluice_pipeline *p = tu_load(ctx, steady[i]);
        size_t nin = sluice_pipeline_input_count(p);
        long per_batch = 1 + (long)sluice_pipeline_output_count(p); /* sl_batch_new_host */
        for (size_t m = 0; m < NELEM(maxes); m++) {
            sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
            o.backend = SLUICE_BACKEND_CPU;
            o.max_batch_rows = maxes[m];
            sluice_session *s;
            ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
            for (int round = 0; round < 8; round++) {
                const input *in = round % 3 == 2 ? &small : &big;
                sluice_column cols[3] = {{"x", SLUICE_I32, in->x, in->rows},
                                         {"k", SLUICE_I16, in->k, in->rows},
                                         {"o", SLUICE_I64, in->off, in->nseg + 1}};
                long a0 = n.allocs, f0 = n.frees;
                ck_assert_int_eq(sluice_session_push(s, cols, nin), SLUICE_OK);
                long pushed = n.allocs - a0, freed = n.frees - f0, batches = 0, pulled = 0;
                for (;;) {
                    sluice_batch *b;
                    a0 = n.allocs;
                    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
                    pulled += n.allocs - a0;
                    if (!b) break;
                    batches++;
                    sluice_batch_free(b);
                }
                if (round == 0) continue; /* sizes what it keeps */
                ck_assert_msg(freed == 0 && pushed <= batches * per_batch && pulled == 0,
                              "%s, max_batch_rows %lld, push %d of %lld rows: %ld allocations "
                              "(%ld result batches of %ld blocks), %ld frees; pulls: %ld "
                              "allocations",
                              sluice_pipeline_name(p), (long long)maxes[m], round,
                              (long long)in->rows, pushed, batches, per_batch, freed, pulled);
            }
            ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
            sluice_batch *b;
            while (sluice_session_pull(s, &b) == SLUICE_OK && b) sluice_batch_free(b);
            sluice_session_close(s);
        }
        sluice_pipeline_free(p);
    }
    input_free(&big);
    input_free(&small);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- stream-wide sorts over a memory budget -------------------------------------------- */

static const char *const spilled[] = {
    /* mixed orders over two keys; the sorted rows go on through a scan and a filter */
    "sluice: 1\nname: two-keys\ninput: {x: i32, k: i16}\nstages:\n"
    "  - map: {f: f32(x) * 0.5}\n"
    "  - sort: {keys: [k, f], order: [descending, ascending]}\n"
    "  - scan: {of: x, op: sum, into: s, acc: i64}\n  - filter: s != 5\noutput: [k, x, s]\n",
    /* one key, some of its bits: equal images keep arrival order */
    "sluice: 1\nname: bits\ninput: {x: i32, k: i16}\nstages:\n"
    "  - sort: {key: x, bits: [2, 5]}\noutput: [x, k]\n",
    /* float keys with NaN, infinities and both zeros, then a sort of the sorted stream */
    "sluice: 1\nname: floats\ninput: {x: i32, k: i16}\nstages:\n"
    "  - map: {f: 'x == 7 ? f32(0.0) / f32(0.0) : x == 8 ? -f32(0.0) : x == 9 ? f32(1.0) / "
    "f32(0.0) : f32(x) / f32(k + 1)'}\n"
    "  - sort: {key: f, order: descending}\n  - sort: {key: k}\noutput: [f, k, x]\n",
    /* the groups after need the sorted stream whole (reset: batch) */
    "sluice: 1\nname: then-reset\ninput: {x: i32, k: i16}\nstages:\n"
    "  - sort: {key: k}\n  - scan: {of: x, op: sum, into: s, reset: batch, acc: i64}\n"
    "output: [k, s]\n",
};

/* Open files (the spilled runs are unlinked files): /proc/self/fd's entries. */
static int open_files(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* Pushes `in` in batches of `step` rows under a sort budget and flushes; *peak_files (when
 * not NULL): the most files open after a push. */
/* A CPU session of 64-row pieces under a sort budget, spilling into dir (NULL: $TMPDIR). */
static sluice_session *open_budget(sluice_pipeline *p, int64_t budget, const char *dir) {
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = 64;
    o.sort_memory_bytes = budget;
    o.spill_dir = dir;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    return s;
}

static sluice_status run_budget_files(sluice_pipeline *p, const input *in, int64_t step,
                                      int64_t budget, const char *dir, result *r, int *peak_files) {
    sluice_session *s = open_budget(p, budget, dir);
    memset(r, 0, sizeof *r);
    sluice_status st = SLUICE_OK;
    for (int64_t at = 0; at < in->rows && st == SLUICE_OK; at += step) {
        int64_t n = in->rows - at < step ? in->rows - at : step;
        sluice_column cols[2] = {{"x", SLUICE_I32, in->x + at, n}, {"k", SLUICE_I16, in->k + at, n}};
        st = sluice_session_push(s, cols, 2);
        drain(s, r);
        if (peak_files && open_files() > *peak_files) *peak_files = open_files();
    }
    if (st == SLUICE_OK) st = sluice_session_flush(s);
    drain(s, r);
    sluice_session_close(s);
    return st;
}

static sluice_status run_budget(sluice_pipeline *p, const input *in, int64_t step, int64_t budget,
                                const char *dir, result *r) {
    return run_budget_files(p, in, step, budget, dir, r, NULL);
}

START_TEST(stream_sort_spills_and_merges) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    input in;
    make_input(&in, 3000, 23);
    for (size_t i = 0; i < NELEM(spilled); i++) {
        sluice_pipeline *p = tu_load(ctx, spilled[i]);
        const char *name = sluice_pipeline_name(p);
        result want, got;
        ck_assert_int_eq(run_budget(p, &in, 3000, 0, NULL, &want), SLUICE_OK);
        ck_assert_int_gt(want.rows, 0);
        /* budgets from a few rows to more than the stream; batches of several sizes */
        static const int64_t budgets[] = {1, 600, 5000, 1 << 20};
        static const int64_t steps[] = {1000, 77, 3000};
        for (size_t b = 0; b < NELEM(budgets); b++) {
            for (size_t k = 0; k < NELEM(steps); k++) {
                ck_assert_int_eq(run_budget(p, &in, steps[k], budgets[b], NULL, &got), SLUICE_OK);
                same(name, budgets[b], &want, &got);
                result_free(&got);
            }
        }
        /* A long stream under a tiny budget spills before every push: 3000 rows in pushes of
         * 5 make about 600 runs. They merge as they come (16 of one level into one of the
         * next, at 16 and at 256), so few files are open: levels 0 and 1 below 16 runs each,
         * level 2 two runs, at most 32 more files than before. */
        int before = open_files(), most = 0;
        ck_assert_int_eq(run_budget_files(p, &in, 5, 1, NULL, &got, &most), SLUICE_OK);
        ck_assert_msg(before >= 0 && most - before <= 2 * 16,
                      "%s: %d files open while spilling (%d before)", name, most, before);
        ck_assert_int_eq(open_files(), before);
        same(name, 1, &want, &got);
        result_free(&got);
        result_free(&want);
        sluice_pipeline_free(p);
    }
    input_free(&in);
    sluice_context_destroy(ctx);
}
END_TEST

/* An allocator that fails its `fail_at`-th call from when it is armed (test_alloc_fail.c has
 * the whole-job version). */
typedef struct flaky_allocator {
    long calls, fail_at; /* fail_at 0: never */
    bool hit;
} flaky_allocator;
static void *flaky_alloc(size_t size, void *opaque) {
    flaky_allocator *a = opaque;
    if (a->fail_at && ++a->calls == a->fail_at) {
        a->hit = true;
        return NULL;
    }
    return malloc(size);
}
static void *flaky_realloc(void *ptr, size_t size, void *opaque) {
    flaky_allocator *a = opaque;
    if (!ptr) return flaky_alloc(size, opaque);
    if (a->fail_at && ++a->calls == a->fail_at) {
        a->hit = true;
        return NULL;
    }
    return realloc(ptr, size);
}
static void flaky_free(void *ptr, void *opaque) {
    (void)opaque;
    free(ptr);
}

/* A flush that fails part-way (here: out of memory at each of its allocations in turn) after
 * writing the held rows as the last run changes nothing a retry could see twice: the retried
 * flush gives exactly the rows of a flush that never failed. */
START_TEST(failed_flush_of_spilled_sort_retries_cleanly) {
    flaky_allocator fa = {0, 0, false};
    sluice_allocator hooks = {flaky_alloc, flaky_realloc, flaky_free, &fa};
    sluice_context *ctx = context_with(&hooks, 1);
    input in;
    make_input(&in, 700, 17);
    sluice_pipeline *p = tu_load(ctx, spilled[0]);
    result want;
    ck_assert_int_eq(run_budget(p, &in, 700, 0, NULL, &want), SLUICE_OK);
    bool failed_once = false;
    for (long k = 1; k < 400; k++) {
        sluice_session *s = open_budget(p, 1, NULL);
        for (int64_t at = 0; at < in.rows; at += 100) {
            sluice_column cols[2] = {{"x", SLUICE_I32, in.x + at, 100}, {"k", SLUICE_I16, in.k + at, 100}};
            ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
        }
        fa.calls = 0;
        fa.fail_at = k;
        fa.hit = false;
        sluice_status st = sluice_session_flush(s);
        fa.fail_at = 0;
        bool hit = fa.hit;
        if (st != SLUICE_OK) {
            ck_assert_int_eq(st, SLUICE_ERR_NO_MEMORY);
            failed_once = true;
            ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        }
        result got;
        memset(&got, 0, sizeof got);
        drain(s, &got);
        sluice_session_close(s);
        same("failed flush, retried", k, &want, &got);
        result_free(&got);
        if (!hit) break; /* the flush made fewer than k allocations: every one was tried */
    }
    ck_assert(failed_once);
    result_free(&want);
    sluice_pipeline_free(p);
    input_free(&in);
    sluice_context_destroy(ctx);
}
END_TEST

/* Spill files that cannot be written (the file-size limit, RLIMIT_FSIZE, below a run or a
 * merged run): the push or flush that hit it fails with SLUICE_ERR_IO, and the same call
 * retried with the limit lifted succeeds; the stream's result is the one of a run that never
 * failed. 300 pushes of 10 rows, each spilled (records of about 24 bytes): limits below a
 * run (about 240 bytes), between a run and one merged from 16 (about 3.8 KB), and between
 * that and one merged twice (about 61 KB, at the 256th run). */
START_TEST(spill_write_failures_retry_cleanly) {
    struct rlimit saved;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, spilled[0]);
    input in;
    make_input(&in, 3000, 29);
    result want;
    ck_assert_int_eq(run_budget(p, &in, 3000, 0, NULL, &want), SLUICE_OK);
    static const rlim_t limits[] = {128, 1 << 10, 16 << 10};
    for (size_t li = 0; li < NELEM(limits); li++) {
        struct rlimit low = {limits[li], saved.rlim_max};
        sluice_session *s = open_budget(p, 1, NULL);
        result got;
        memset(&got, 0, sizeof got);
        int failures = 0;
        for (int64_t at = 0; at <= in.rows; at += 10) {
            bool flush = at == in.rows;
            int64_t n = in.rows - at < 10 ? in.rows - at : 10;
            sluice_column cols[2] = {{"x", SLUICE_I32, in.x + at, n}, {"k", SLUICE_I16, in.k + at, n}};
            ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &low), 0);
            sluice_status st = flush ? sluice_session_flush(s) : sluice_session_push(s, cols, 2);
            ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
            if (st != SLUICE_OK) {
                ck_assert_int_eq(st, SLUICE_ERR_IO);
                failures++;
                st = flush ? sluice_session_flush(s) : sluice_session_push(s, cols, 2);
                ck_assert_msg(st == SLUICE_OK, "limit %lu: the retried call failed: %s",
                              (unsigned long)limits[li], sluice_context_diagnostic(ctx, 0)->message);
            }
            drain(s, &got);
        }
        sluice_session_close(s);
        ck_assert_msg(failures > 0, "limit %lu: no write failed", (unsigned long)limits[li]);
        same("spill write failures", (int64_t)limits[li], &want, &got);
        result_free(&got);
    }
    signal(SIGXFSZ, SIG_DFL);
    result_free(&want);
    sluice_pipeline_free(p);
    input_free(&in);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(spill_failure_changes_nothing) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, spilled[0]);
    input in;
    make_input(&in, 500, 5);
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.sort_memory_bytes = 100;
    o.spill_dir = "/nonexistent/sluice-spill";
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    sluice_column cols[2] = {{"x", SLUICE_I32, in.x, in.rows}, {"k", SLUICE_I16, in.k, in.rows}};
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK); /* held; spilled before the next */
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_ERR_IO);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "/nonexistent/sluice-spill"));
    /* the rows of the first push are still there: flushing sorts them */
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    result got, want;
    memset(&got, 0, sizeof got);
    drain(s, &got);
    sluice_session_close(s);
    ck_assert_int_eq(run_budget(p, &in, 500, 0, NULL, &want), SLUICE_OK);
    same("spill failure", 0, &want, &got);
    result_free(&got);
    result_free(&want);
    o.sort_memory_bytes = -1;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_ERR_INVALID_ARGUMENT);
    /* A version 1 caller's options end before sort_memory_bytes: only that much is read
     * (ASan checks it: the struct is allocated at exactly that size). */
    size_t v1 = offsetof(sluice_session_options, sort_memory_bytes);
    unsigned char *old = malloc(v1);
    unsigned one = 1;
    memcpy(old, &o, v1);
    memcpy(old + offsetof(sluice_session_options, version), &one, sizeof one);
    ck_assert_int_eq(sluice_session_open(p, (const sluice_session_options *)(void *)old, &s),
                     SLUICE_OK);
    sluice_session_close(s);
    free(old);
    input_free(&in);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *exec_suite(void) {
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, plan_liveness_is_per_entry);
    tcase_add_test(tc, plan_carry_levels_and_pass_through);
    tcase_add_test(tc, plan_cut_kinds);
    suite_add_tcase(s, tc);
    tc = tcase_create("executor");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, oversized_batches_keep_their_results);
    tcase_add_test(tc, failed_piece_undoes_the_whole_batch);
    tcase_add_test(tc, steady_pushes_allocate_only_results);
    tcase_add_test(tc, stream_sort_spills_and_merges);
    tcase_add_test(tc, failed_flush_of_spilled_sort_retries_cleanly);
    tcase_add_test(tc, spill_write_failures_retry_cleanly);
    tcase_add_test(tc, spill_failure_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(exec_suite()); }
