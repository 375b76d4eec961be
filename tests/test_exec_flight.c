/* test_exec_flight.c — the shared executor's pieces in flight (core/runtime/exec.h) on a
 * machine without a GPU: the CPU backend's operations wrapped into a backend that completes
 * pieces only when the test lets it (ops->progress), so every rule of sluice.h's "Batches in
 * flight" and "Errors with batches in flight" that does not depend on CUDA is checked in CI:
 * results are held back until their push is complete and come out in stream order, equal to
 * the synchronous run's; pull never waits and pull_wait times out; depth bounds what is in
 * flight; flush and reset wait; a failure in piece f rejects that push and every later one,
 * keeps what came before, and the stream goes on as if the rejected pushes had never been
 * made (scan carries, open key segments, rows held by a stream-wide sort). The same rules on
 * the GPU are tests/gpu_stream.c's. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "common/context.h"
#include "runtime/carry.h"
#include "runtime/exec.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a backend whose pieces complete when the test says ---------------------------------- */

static sl_backend_ops g_fake; /* the CPU backend's operations, plus pieces in flight */
static int64_t g_release;     /* a poll completes the pieces below this */
static int64_t g_fault;       /* this piece fails when it would complete; -1: none */
static int64_t g_seen;        /* pieces ended (end_piece) */
static int g_waits;           /* progress calls that waited */

/* Waiting (timeout < 0) stands for the device finishing: everything up to `until` completes.
 * A poll or a timed wait completes only what the test released. */
static sluice_status fake_progress(sluice_session *s, int64_t until, int64_t timeout_ns,
                                   int64_t *done) {
    int64_t target = timeout_ns < 0 ? until + 1 : g_release;
    if (timeout_ns < 0) g_waits++;
    if (target > g_seen) target = g_seen;
    for (int64_t p = *done; p < target; p++)
        if (p == g_fault) {
            g_fault = -1;
            *done = p;
            return sl_error(s->ctx, SLUICE_ERR_CUDA, "a fault in piece %lld (the test's)", (long long)p);
        }
    if (target > *done) *done = target;
    return SLUICE_OK;
}

static void fake_end_piece(sluice_session *s, const sl_piece *piece, sluice_batch *batch) {
    (void)s;
    (void)batch;
    g_seen = piece->seq + 1;
}

/* The mark: every fused group's scan carries, through the CPU backend's carry operations. */
static size_t fake_mark_bytes(const sluice_session *s) {
    size_t n = 0;
    for (int gi = 0; gi < s->plan.ngroups; gi++) n += (size_t)sl_carry_group_scans(s, gi);
    return (n + 1) * sizeof(sl_scan_carry);
}

static void fake_mark(sluice_session *s, void *out) {
    sl_scan_carry *c = out;
    for (int gi = 0; gi < s->plan.ngroups; gi++) {
        int n = sl_carry_group_scans(s, gi);
        if (n > 0) ck_assert_int_eq(sl_carry_get(s, gi, c), SLUICE_OK);
        c += n;
    }
}

static void fake_restore(sluice_session *s, const void *mark) {
    const sl_scan_carry *c = mark;
    for (int gi = 0; gi < s->plan.ngroups; gi++) {
        int n = sl_carry_group_scans(s, gi);
        if (n > 0) ck_assert_int_eq(sl_carry_set(s, gi, c), SLUICE_OK);
        c += n;
    }
}

/* A CPU session whose executor runs with `depth` pieces in flight on the fake backend. */
static sluice_session *open_flight(sluice_pipeline *p, int depth, int64_t max_rows) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = max_rows;
    sluice_session *s = NULL;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
    g_fake = sl_cpu_backend;
    g_fake.progress = fake_progress;
    g_fake.end_piece = fake_end_piece;
    g_fake.mark_bytes = fake_mark_bytes;
    g_fake.mark = fake_mark;
    g_fake.restore = fake_restore;
    g_release = g_seen = 0;
    g_fault = -1;
    g_waits = 0;
    sl_exec_close(s); /* again, sized for the depth */
    s->backend = &g_fake;
    s->depth = depth;
    ck_assert_int_eq(sl_exec_open(s), SLUICE_OK);
    return s;
}

/* ---- streams ----------------------------------------------------------------------------- */

static const char *const PIPELINES[] = {
    "sluice: 1\nname: scans\ninput: {k: i32, id: u64}\nstages:\n"
    "  - scan: {of: k, op: sum, kind: exclusive, into: s}\n"
    "  - segmented_scan: {of: k, op: sum, segments: {key: k}, into: run}\n"
    "output: [id, s, run]\n",
    "sluice: 1\nname: cull\ninput: {k: i32, id: u64}\nstages:\n"
    "  - filter: k != 3 && k != 5\n  - scan: {op: count, kind: exclusive, into: slot}\n"
    "output: [id, slot]\n",
    "sluice: 1\nname: streamsort\ninput: {k: i32, id: u64}\nstages:\n"
    "  - sort: {key: k}\n  - scan: {op: count, into: rank}\noutput: [k, id, rank]\n",
    "sluice: 1\nname: persort\ninput: {k: i32, id: u64}\nstages:\n"
    "  - scan: {of: k, op: max, into: m}\n  - sort: {key: k, per: batch}\noutput: [k, id, m]\n",
};

typedef struct output {
    int64_t rows;
    int ncols;
    size_t width[8];
    uint8_t *data[8];
} output;

static void out_append(output *o, const sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    ck_assert_int_gt(n, 0);
    o->ncols = (int)sluice_batch_column_count(b);
    for (int i = 0; i < o->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
        size_t w = sluice_type_size(c.type);
        o->width[i] = w;
        o->data[i] = realloc(o->data[i], (size_t)(o->rows + n) * w);
        memcpy(o->data[i] + (size_t)o->rows * w, c.data, (size_t)n * w);
    }
    o->rows += n;
}

static void out_free(output *o) {
    for (int i = 0; i < o->ncols; i++) free(o->data[i]);
    memset(o, 0, sizeof *o);
}

static void expect_same(const output *want, const output *got, const char *what) {
    ck_assert_msg(want->rows == got->rows, "%s: %lld rows, %lld expected", what,
                  (long long)got->rows, (long long)want->rows);
    for (int i = 0; i < want->ncols; i++)
        ck_assert_msg(memcmp(want->data[i], got->data[i], (size_t)want->rows * want->width[i]) == 0,
                      "%s: column %d differs", what, i);
}

static int32_t g_k[12000];
static uint64_t g_id[12000];

static void make_data(uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < NELEM(g_k); i++) {
        g_k[i] = (int32_t)tu_rng_range(&r, 0, 7);
        g_id[i] = i;
    }
}

/* Pushes batch j: rows [cuts[j], cuts[j + 1]). */
static sluice_status push_batch(sluice_session *s, const int64_t *cuts, int j) {
    sluice_column cols[2] = {{"k", SLUICE_I32, g_k + cuts[j], cuts[j + 1] - cuts[j]},
                             {"id", SLUICE_U64, g_id + cuts[j], cuts[j + 1] - cuts[j]}};
    return sluice_session_push(s, cols, 2);
}

static void drain(sluice_session *s, output *o, int64_t timeout_ms) {
    for (;;) {
        sluice_batch *b = NULL;
        ck_assert_int_eq(sluice_session_pull_wait(s, &b, timeout_ms), SLUICE_OK);
        if (!b) return;
        out_append(o, b);
        sluice_batch_free(b);
    }
}

/* The synchronous run of batches [0, nb) (flushed or not); prefix[j]: rows out after the
 * first j pushes (before a flush). */
static void reference(sluice_pipeline *p, const int64_t *cuts, int nb, bool flush, output *o,
                      int64_t *prefix) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = 512;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
    memset(o, 0, sizeof *o);
    if (prefix) prefix[0] = 0;
    for (int j = 0; j < nb; j++) {
        ck_assert_int_eq(push_batch(s, cuts, j), SLUICE_OK);
        drain(s, o, 0);
        if (prefix) prefix[j + 1] = o->rows;
    }
    if (flush) {
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        drain(s, o, 0);
    }
    sluice_session_close(s);
}

static int make_cuts(tu_rng *r, int64_t *cuts, int nb) {
    cuts[0] = 0;
    for (int j = 0; j < nb; j++) cuts[j + 1] = cuts[j] + tu_rng_range(r, 0, 500); /* one piece each */
    ck_assert_int_le(cuts[nb], (int64_t)NELEM(g_k));
    return nb;
}

/* ---- tests ------------------------------------------------------------------------------- */

/* Pieces complete in dribs and drabs: nothing is handed out before its push is complete,
 * order and results are the synchronous run's, depth bounds the pushes in flight. */
START_TEST(results_wait_for_completion) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, PIPELINES[_i]);
    make_data(10 + (uint64_t)_i);
    tu_rng r;
    tu_rng_seed(&r, 20 + (uint64_t)_i);
    int64_t cuts[24], prefix[24];
    int nb = make_cuts(&r, cuts, 20);
    output ref;
    reference(p, cuts, nb, true, &ref, prefix);
    const int depths[] = {1, 2, 4};
    for (size_t d = 0; d < NELEM(depths); d++) {
        sluice_session *s = open_flight(p, depths[d], 512);
        output got = {0};
        for (int j = 0; j < nb; j++) {
            ck_assert_int_eq(push_batch(s, cuts, j), SLUICE_OK);
            ck_assert_int_eq(sluice_session_push_count(s), j + 1);
            int64_t flight = sluice_session_in_flight(s);
            ck_assert_int_le(flight, depths[d]); /* a push waits when depth are in flight */
            if (depths[d] == 1) ck_assert_int_eq(flight, 0); /* the synchronous path */
            drain(s, &got, 0);
            /* Only pushes the backend completed are out (pieces and pushes coincide here). */
            ck_assert_int_eq(got.rows, prefix[j + 1 - flight]);
            g_release += tu_rng_range(&r, 0, 2);
        }
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        ck_assert_int_eq(sluice_session_in_flight(s), 0);
        drain(s, &got, 0);
        expect_same(&ref, &got, sluice_pipeline_name(p));
        out_free(&got);
        sluice_session_close(s);
    }
    out_free(&ref);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* pull never waits, pull_wait waits as long as it is told, and reset forgets what is in
 * flight. */
START_TEST(pull_and_pull_wait) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, PIPELINES[0]);
    make_data(3);
    int64_t cuts[4] = {0, 100, 250, 300};
    output ref;
    reference(p, cuts, 3, true, &ref, NULL);
    sluice_session *s = open_flight(p, 3, 512);
    for (int j = 0; j < 3; j++) ck_assert_int_eq(push_batch(s, cuts, j), SLUICE_OK);
    ck_assert_int_eq(sluice_session_in_flight(s), 3);
    sluice_batch *b = (sluice_batch *)1;
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_null(b);
    int waits = g_waits;
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, 2), SLUICE_OK);
    ck_assert_ptr_null(b); /* timed out */
    ck_assert_int_eq(g_waits, waits); /* a timed wait never waits without bound */
    ck_assert_int_eq(sluice_session_in_flight(s), 3);
    output got = {0};
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK); /* the first push */
    ck_assert_ptr_nonnull(b);
    out_append(&got, b);
    sluice_batch_free(b);
    ck_assert_int_eq(sluice_session_in_flight(s), 2);
    g_release = 3;
    drain(s, &got, 0);
    ck_assert_int_eq(sluice_session_in_flight(s), 0);
    expect_same(&ref, &got, "pull_wait");
    /* Reset with pushes in flight: they are dropped, and the stream starts again. */
    ck_assert_int_eq(push_batch(s, cuts, 0), SLUICE_OK);
    ck_assert_int_eq(push_batch(s, cuts, 1), SLUICE_OK);
    ck_assert_int_eq(sluice_session_reset(s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_in_flight(s), 0);
    ck_assert_int_eq(sluice_session_push_count(s), 0);
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_null(b);
    out_free(&got);
    for (int j = 0; j < 3; j++) ck_assert_int_eq(push_batch(s, cuts, j), SLUICE_OK);
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    drain(s, &got, 0);
    expect_same(&ref, &got, "after a reset in flight");
    out_free(&got);
    out_free(&ref);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A failure in piece `bad` (push `bad`): found by a later call, it rejects that push and
 * every one after it; what came before is kept; pushing the rest again gives the stream. */
START_TEST(failure_in_flight) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, PIPELINES[_i % NELEM(PIPELINES)]);
    make_data(40 + (uint64_t)_i);
    tu_rng r;
    tu_rng_seed(&r, 50 + (uint64_t)_i);
    int64_t cuts[16];
    const int nb = 12, depth = 1 + _i % 5, bad = (int)tu_rng_range(&r, 0, nb - 1);
    make_cuts(&r, cuts, nb);
    output ref, before;
    reference(p, cuts, nb, true, &ref, NULL);
    reference(p, cuts, bad, false, &before, NULL);
    sluice_session *s = open_flight(p, depth, 512);
    g_fault = bad;
    output got = {0};
    sluice_status st = SLUICE_OK;
    int j = 0;
    for (; j < nb && st == SLUICE_OK; j++) {
        st = push_batch(s, cuts, j);
        if (st == SLUICE_OK && tu_rng_range(&r, 0, 1)) {
            sluice_batch *b = NULL;
            st = sluice_session_pull(s, &b); /* pulls may find the failure too */
            if (b) out_append(&got, b);
            sluice_batch_free(b);
        }
    }
    if (st == SLUICE_OK) st = sluice_session_flush(s);
    ck_assert_int_eq(st, SLUICE_ERR_CUDA);
    ck_assert_int_le(j, bad + depth + 1); /* found once its slot was needed, at the latest */
    ck_assert_int_eq(sluice_session_push_count(s), bad);
    ck_assert_int_eq(sluice_session_in_flight(s), 0);
    char want[64];
    snprintf(want, sizeof want, "push %d failed on the device", bad);
    bool named = false;
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++)
        named = named || strstr(sluice_context_diagnostic(ctx, i)->message, want);
    ck_assert_msg(named, "no diagnostic says '%s' (depth %d)", want, depth);
    drain(s, &got, -1);
    expect_same(&before, &got, "what came before the failure");
    for (j = bad; j < nb; j++) ck_assert_int_eq(push_batch(s, cuts, j), SLUICE_OK);
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    drain(s, &got, 0);
    expect_same(&ref, &got, "the stream pushed again");
    ck_assert_int_eq(sluice_session_push_count(s), nb);
    out_free(&got);
    out_free(&ref);
    out_free(&before);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* The flush's own pieces fail: the flush is rejected and can be made again. */
START_TEST(failure_in_flush) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, PIPELINES[2]); /* a stream-wide sort: pieces at flush */
    make_data(7);
    int64_t cuts[5] = {0, 300, 600, 900, 1200};
    output ref;
    reference(p, cuts, 4, true, &ref, NULL);
    sluice_session *s = open_flight(p, 3, 512);
    for (int j = 0; j < 4; j++) ck_assert_int_eq(push_batch(s, cuts, j), SLUICE_OK);
    g_fault = 5; /* the flush's second piece: 4 pushes, then the sort and its pieces */
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_ERR_CUDA);
    ck_assert_int_eq(sluice_session_push_count(s), 4);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 1)->message, "flush"));
    sluice_batch *b = (sluice_batch *)1;
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_null(b); /* nothing of the rejected flush */
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    output got = {0};
    drain(s, &got, 0);
    expect_same(&ref, &got, "the flush made again");
    out_free(&got);
    out_free(&ref);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *exec_flight_suite(void) {
    Suite *s = suite_create("exec_flight");
    TCase *tc = tcase_create("flight");
    tcase_add_loop_test(tc, results_wait_for_completion, 0, (int)NELEM(PIPELINES));
    tcase_add_test(tc, pull_and_pull_wait);
    tcase_add_loop_test(tc, failure_in_flight, 0, 20);
    tcase_add_test(tc, failure_in_flush);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(exec_flight_suite()); }
