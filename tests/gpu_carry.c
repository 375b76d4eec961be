/* gpu_carry.c — the CUDA backend's scan carries read and seeded from outside
 * (core/runtime/carry.h: what a distributed session moves between ranks). A CUDA session's
 * carries after a prefix of a stream equal the CPU backend's after the same prefix, field by
 * field; seeded into a fresh CUDA session and a fresh CPU session they make both continue the
 * stream exactly as one uninterrupted CPU run does, and so do the carries a seeded CUDA
 * session hands out after a middle part (seeded with a key this time). Every pipeline here
 * is exact (integer operations, min/max), so results compare bit for bit. Exits 77 without a
 * GPU.
 *
 * SLUICE_TEST_SMALL=1 (compute-sanitizer runs) keeps to small sizes. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "runtime/carry.h"
#include "sluice_cuda.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAXCOLS 8
#define MAXGROUPS 8
#define MAXSCANS 8

static bool g_small;

typedef struct carry_case {
    const char *yaml;
    /* has_first of scans without a key is whether rows entered the scan's group on the GPU
     * (carry_get_impl in core/cuda/backend.c): exact unless a compaction before the scan in
     * the same group kept none of them, so it is compared only where nothing compacts. */
    bool has_first_exact;
} carry_case;

/* Inputs: k i32 (values 0..7, runs of equal values), x f32, id u64. */
static const carry_case CASES[] = {
    /* every carry kind of one phase: plain, key segments (an i32 key), a count */
    {"sluice: 1\nname: scans\ninput: {k: i32, id: u64}\nstages:\n"
     "  - scan: {of: k, op: sum, kind: exclusive, into: s}\n"
     "  - scan: {of: k, op: max, into: m}\n"
     "  - segmented_scan: {of: k, op: sum, segments: {key: k}, into: run}\n"
     "  - scan: {op: count, into: n}\n"
     "output: [id, s, m, run, n]\n",
     true},
    /* head-flag segments, and a bool key (its bits are its truth value) */
    {"sluice: 1\nname: heads\ninput: {k: i32, id: u64}\nstages:\n"
     "  - map: {h: k == 0, b: k > 3}\n"
     "  - segmented_scan: {of: k, op: sum, segments: h, into: hs}\n"
     "  - segmented_scan: {of: id, op: min, segments: {key: b}, into: bm}\n"
     "output: [id, hs, bm]\n",
     true},
    /* two carry phases in one group: a key made from a running sum, a scan of it */
    {"sluice: 1\nname: chain\ninput: {k: i32, id: u64}\nstages:\n"
     "  - scan: {of: k, op: sum, into: s}\n"
     "  - map: {t: (s / 16) % 4}\n"
     "  - segmented_scan: {of: k, op: max, segments: {key: t}, into: q}\n"
     "  - scan: {of: t, op: min, kind: exclusive, into: u}\n"
     "output: [id, s, q, u]\n",
     true},
    /* a compaction before the scans of its group */
    {"sluice: 1\nname: filtered\ninput: {k: i32, x: f32, id: u64}\nstages:\n"
     "  - filter: x > 0.5\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n"
     "  - segmented_scan: {of: k, op: sum, segments: {key: k}, into: run}\n"
     "output: [id, slot, run]\n",
     false},
    /* a per-batch sort between two fused groups, each with carries (f64 key segments after) */
    {"sluice: 1\nname: batchsort\ninput: {k: i32, x: f32, id: u64}\nstages:\n"
     "  - scan: {of: k, op: sum, into: s}\n"
     "  - map: {kd: f64(k % 3)}\n"
     "  - sort: {key: k, per: batch}\n"
     "  - segmented_scan: {of: id, op: max, segments: {key: kd}, into: top}\n"
     "  - scan: {op: count, into: n}\n"
     "output: [k, id, s, top, n]\n",
     true},
};

/* ---- data and output ------------------------------------------------------------------- */

typedef struct stream_data {
    int64_t rows;
    float *x;
    int32_t *k;
    uint64_t *id;
} stream_data;

static void make_data(stream_data *d, int64_t rows, uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    d->rows = rows;
    d->x = malloc((size_t)rows * 4 + 8);
    d->k = malloc((size_t)rows * 4 + 8);
    d->id = malloc((size_t)rows * 8 + 8);
    int32_t k = 0;
    for (int64_t i = 0; i < rows; i++) {
        if (tu_rng_range(&r, 0, 3) == 0) k = (int32_t)tu_rng_range(&r, 0, 7); /* runs */
        d->x[i] = (float)(tu_rng_uniform(&r) * 4.0 - 2.0);
        d->k[i] = k;
        d->id[i] = (uint64_t)i * 2654435761u;
    }
}

static void free_data(stream_data *d) {
    free(d->x);
    free(d->k);
    free(d->id);
}

typedef struct output {
    int64_t rows;
    int ncols;
    size_t width[MAXCOLS];
    uint8_t *data[MAXCOLS];
} output;

static void out_free(output *o) {
    for (int i = 0; i < o->ncols; i++) free(o->data[i]);
    memset(o, 0, sizeof *o);
}

static void out_append(output *o, const sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    o->ncols = (int)sluice_batch_column_count(b);
    ck_assert_int_le(o->ncols, MAXCOLS);
    for (int i = 0; i < o->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
        size_t w = sluice_type_size(c.type);
        o->width[i] = w;
        o->data[i] = realloc(o->data[i], (size_t)(o->rows + n) * w + 8);
        memcpy(o->data[i] + (size_t)o->rows * w, c.data, (size_t)n * w); /* host batches */
    }
    o->rows += n;
}

/* got must equal rows [from, from + got->rows) of want, and end where want ends when `to_end`. */
static void expect_rows(const output *want, int64_t from, const output *got, bool to_end,
                        const char *what) {
    ck_assert_msg(from + got->rows <= want->rows, "%s: %lld rows from %lld, the CPU run has %lld",
                  what, (long long)got->rows, (long long)from, (long long)want->rows);
    if (to_end)
        ck_assert_msg(from + got->rows == want->rows, "%s: %lld rows from %lld, the CPU run has %lld",
                      what, (long long)got->rows, (long long)from, (long long)want->rows);
    bool same = true;
    int bad_col = -1;
    int64_t bad_row = -1;
    for (int i = 0; i < got->ncols && same; i++)
        for (int64_t r = 0; r < got->rows; r++)
            if (memcmp(want->data[i] + (size_t)(from + r) * want->width[i],
                       got->data[i] + (size_t)r * got->width[i], got->width[i]) != 0) {
                same = false;
                bad_col = i;
                bad_row = r;
                break;
            }
    ck_assert_msg(same, "%s: column %d differs from the uninterrupted CPU run first at row %lld "
                  "(stream row %lld of the output)", what, bad_col, (long long)bad_row,
                  (long long)(from + bad_row));
}

static void fail_diag(sluice_context *ctx, const char *what, sluice_status st) {
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_abort_msg("%s: %s: %s", what, sluice_status_name(st), d ? d->message : "");
}

/* ---- sessions -------------------------------------------------------------------------- */

static int64_t g_max_rows;

static sluice_session *open_on(sluice_context *ctx, sluice_pipeline *p, bool cuda) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.max_batch_rows = g_max_rows;
    sluice_session *s = NULL;
    sluice_status st;
    if (cuda) {
        st = sluice_cuda_session_open(p, &so, NULL, &s);
    } else {
        so.backend = SLUICE_BACKEND_CPU;
        st = sluice_session_open(p, &so, &s);
    }
    if (st != SLUICE_OK) fail_diag(ctx, cuda ? "open (cuda)" : "open (cpu)", st);
    return s;
}

/* Pushes rows [cuts[a], cuts[b]) of d, batch by batch, and pulls every result, waiting for
 * the pieces in flight (so the carries read next are those after these rows). */
static void feed(sluice_context *ctx, sluice_pipeline *p, sluice_session *s, const stream_data *d,
                 const int64_t *cuts, int a, int b, output *o) {
    size_t n = sluice_pipeline_input_count(p);
    for (int j = a; j < b; j++) {
        int64_t r0 = cuts[j], r1 = cuts[j + 1];
        sluice_column cols[MAXCOLS];
        for (size_t i = 0; i < n; i++) {
            sluice_column_info ci;
            ck_assert_int_eq(sluice_pipeline_input(p, i, &ci), SLUICE_OK);
            cols[i].name = ci.name;
            cols[i].type = ci.type;
            cols[i].length = r1 - r0;
            cols[i].data = !strcmp(ci.name, "x") ? (const void *)(d->x + r0)
                           : !strcmp(ci.name, "k") ? (const void *)(d->k + r0)
                                                   : (const void *)(d->id + r0);
        }
        sluice_status st = sluice_session_push(s, cols, n);
        if (st != SLUICE_OK) fail_diag(ctx, "push", st);
        for (;;) {
            sluice_batch *bt = NULL;
            st = sluice_session_pull_wait(s, &bt, -1);
            if (st != SLUICE_OK) fail_diag(ctx, "pull", st);
            if (!bt) break;
            out_append(o, bt);
            sluice_batch_free(bt);
        }
    }
}

static void finish(sluice_context *ctx, sluice_session *s, output *o) {
    sluice_status st = sluice_session_flush(s);
    if (st != SLUICE_OK) fail_diag(ctx, "flush", st);
    for (;;) {
        sluice_batch *bt = NULL;
        st = sluice_session_pull(s, &bt);
        if (st != SLUICE_OK) fail_diag(ctx, "pull", st);
        if (!bt) break;
        out_append(o, bt);
        sluice_batch_free(bt);
    }
}

/* Every plan group's carries. */
typedef struct carries {
    int ngroups;
    int nscans[MAXGROUPS];
    sl_scan_carry c[MAXGROUPS][MAXSCANS];
} carries;

static void get_all(sluice_context *ctx, sluice_session *s, carries *out) {
    memset(out, 0, sizeof *out);
    out->ngroups = s->plan.ngroups;
    ck_assert_int_le(out->ngroups, MAXGROUPS);
    for (int gi = 0; gi < out->ngroups; gi++) {
        out->nscans[gi] = sl_carry_group_scans(s, gi);
        ck_assert_int_le(out->nscans[gi], MAXSCANS);
        sluice_status st = sl_carry_get(s, gi, out->c[gi]);
        if (st != SLUICE_OK) fail_diag(ctx, "carry_get", st);
    }
}

static void set_all(sluice_context *ctx, sluice_session *s, const carries *in) {
    ck_assert_int_eq(s->plan.ngroups, in->ngroups);
    for (int gi = 0; gi < in->ngroups; gi++) {
        ck_assert_int_eq(sl_carry_group_scans(s, gi), in->nscans[gi]);
        sluice_status st = sl_carry_set(s, gi, in->c[gi]);
        if (st != SLUICE_OK) fail_diag(ctx, "carry_set", st);
    }
}

static const sl_scan *scan_of(const sluice_session *s, int gi, int k) {
    const sl_group *g = &s->plan.groups[gi];
    for (int st = g->first; st < g->last; st++)
        if (s->pipeline->stages[st].kind == SL_STAGE_SCAN && k-- == 0)
            return &s->pipeline->stages[st].scan;
    ck_abort_msg("no scan %d in group %d", k, gi);
    return NULL;
}

/* The CUDA session's carries (got) against the CPU's (want) after the same rows from the
 * same seeds. `seeded_key`: the scans were seeded with a key, so first_key is documented as
 * exact only where headed is false. */
static void expect_carries(const sluice_session *s, const carries *want, const carries *got,
                           bool has_first_exact, bool seeded_key, const char *what) {
    ck_assert_int_eq(want->ngroups, got->ngroups);
    for (int gi = 0; gi < want->ngroups; gi++) {
        ck_assert_int_eq(want->nscans[gi], got->nscans[gi]);
        for (int k = 0; k < want->nscans[gi]; k++) {
            const sl_scan *sc = scan_of(s, gi, k);
            const sl_scan_carry *w = &want->c[gi][k], *g = &got->c[gi][k];
            for (int f = 0; f < sc->nfields; f++) {
                uint64_t wb = 0, gb = 0;
                sl_value_store(sc->acc[f], &wb, 0, w->v[f]);
                sl_value_store(sc->acc[f], &gb, 0, g->v[f]);
                ck_assert_msg(wb == gb, "%s: group %d scan %d field %d: state %llx, the CPU's %llx",
                              what, gi, k, f, (unsigned long long)gb, (unsigned long long)wb);
            }
            if (sc->segments == SL_SEGMENTS_KEY) {
                ck_assert_msg(w->has_key == g->has_key, "%s: group %d scan %d: has_key", what, gi, k);
                if (w->has_key)
                    ck_assert_msg(w->last_key == g->last_key, "%s: group %d scan %d: last_key %llx, "
                                  "the CPU's %llx", what, gi, k, (unsigned long long)g->last_key,
                                  (unsigned long long)w->last_key);
                /* Seeded with a key, has_first is whether rows entered the group, as above. */
                if (has_first_exact || !seeded_key)
                    ck_assert_msg(w->has_first == g->has_first, "%s: group %d scan %d: has_first",
                                  what, gi, k);
                if (w->has_first && (!seeded_key || !w->headed))
                    ck_assert_msg(w->first_key == g->first_key, "%s: group %d scan %d: first_key "
                                  "%llx, the CPU's %llx", what, gi, k,
                                  (unsigned long long)g->first_key, (unsigned long long)w->first_key);
            } else if (has_first_exact) {
                ck_assert_msg(w->has_first == g->has_first, "%s: group %d scan %d: has_first %d, "
                              "the CPU's %d", what, gi, k, g->has_first, w->has_first);
            }
            if (sc->segments == SL_SEGMENTS_KEY || sc->segments == SL_SEGMENTS_HEADFLAG)
                ck_assert_msg(w->headed == g->headed, "%s: group %d scan %d: headed %d, the CPU's %d",
                              what, gi, k, g->headed, w->headed);
        }
    }
}

/* As a distributed session seeds a rank's incoming state: nothing seen since. */
static void as_incoming(carries *c) {
    for (int gi = 0; gi < c->ngroups; gi++)
        for (int k = 0; k < c->nscans[gi]; k++) c->c[gi][k].has_first = c->c[gi][k].headed = false;
}

/* Random batch lengths over [from, to), appended to cuts (which holds `from` last). */
static int cut_range(tu_rng *r, int64_t from, int64_t to, int64_t *cuts, int n, int cap) {
    int64_t at = from;
    while (at < to && n < cap - 1) {
        int64_t kind = tu_rng_range(r, 0, 9), len;
        if (kind == 0) len = 0;
        else if (kind <= 5) len = tu_rng_range(r, 1, g_max_rows);
        else if (kind <= 8) len = tu_rng_range(r, 1, 300);
        else len = tu_rng_range(r, g_max_rows, 2 * g_max_rows);
        at = at + len > to ? to : at + len;
        cuts[n++] = at;
    }
    cuts[n - 1] = to;
    return n;
}

/* ---- the test ---------------------------------------------------------------------------- */

/* For each split of the stream into [0, P) [P, Q) [Q, end):
 *   the CPU alone, uninterrupted (the reference);
 *   CUDA over [0, P): its carries equal a CPU session's over [0, P);
 *   those carries (as a rank's incoming state, or as handed out) seeded into a fresh CUDA
 *   and a fresh CPU session, each over [P, Q): results equal the reference's rows there, and
 *   the CUDA session's carries then equal the CPU's;
 *   the seeded CUDA session's carries seeded into a fresh CUDA and a fresh CPU session, each
 *   over [Q, end) and flushed: the reference's last rows. */
START_TEST(test_carries_continue_the_stream) {
    const carry_case *cc = &CASES[_i];
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, cc->yaml);
    int64_t rows = g_small ? 30000 : 400000;
    g_max_rows = g_small ? 4000 : 60000;
    stream_data d;
    make_data(&d, rows, 500 + (uint64_t)_i);
    tu_rng r;
    tu_rng_seed(&r, 90 + (uint64_t)_i);
    int64_t splits[][2] = {{0, 1}, {1, rows / 3}, {4097, 4098}, {rows / 2, rows - 1}, {rows, rows},
                           {0, 0}, {0, 0}};
    for (int t = 5; t < 7; t++) {
        splits[t][0] = tu_rng_range(&r, 1, rows - 1);
        splits[t][1] = tu_rng_range(&r, splits[t][0], rows);
    }
    for (size_t t = 0; t < NELEM(splits); t++) {
        int64_t P = splits[t][0], Q = splits[t][1];
        int64_t cuts[600];
        int n = 1;
        cuts[0] = 0;
        n = cut_range(&r, 0, P, cuts, n, 200);
        int iP = n - 1;
        n = cut_range(&r, P, Q, cuts, n, 400);
        int iQ = n - 1;
        n = cut_range(&r, Q, rows, cuts, n, 600);
        int iE = n - 1;
        char what[200];
        snprintf(what, sizeof what, "%s, split at %lld and %lld", sluice_pipeline_name(p),
                 (long long)P, (long long)Q);

        /* The reference, with the same batches (a per-batch sort depends on them). */
        output ref = {0};
        sluice_session *cpu = open_on(ctx, p, false);
        feed(ctx, p, cpu, &d, cuts, 0, iP, &ref);
        int64_t outP = ref.rows;
        feed(ctx, p, cpu, &d, cuts, iP, iQ, &ref);
        int64_t outQ = ref.rows;
        feed(ctx, p, cpu, &d, cuts, iQ, iE, &ref);
        finish(ctx, cpu, &ref);
        sluice_session_close(cpu);

        /* [0, P) on both backends. */
        output a = {0}, a_cpu = {0};
        sluice_session *gpu = open_on(ctx, p, true);
        cpu = open_on(ctx, p, false);
        feed(ctx, p, gpu, &d, cuts, 0, iP, &a);
        feed(ctx, p, cpu, &d, cuts, 0, iP, &a_cpu);
        expect_rows(&ref, 0, &a, false, what);
        ck_assert_int_eq(a.rows, outP);
        carries ca, ca_cpu;
        get_all(ctx, gpu, &ca);
        get_all(ctx, cpu, &ca_cpu);
        expect_carries(gpu, &ca_cpu, &ca, cc->has_first_exact, false, what);
        sluice_session_close(gpu);
        sluice_session_close(cpu);
        out_free(&a);
        out_free(&a_cpu);

        /* [P, Q) from the CUDA session's carries, on both backends. */
        if (t % 2 == 0) as_incoming(&ca);
        output b = {0}, b_cpu = {0};
        gpu = open_on(ctx, p, true);
        cpu = open_on(ctx, p, false);
        set_all(ctx, gpu, &ca);
        set_all(ctx, cpu, &ca);
        feed(ctx, p, gpu, &d, cuts, iP, iQ, &b);
        feed(ctx, p, cpu, &d, cuts, iP, iQ, &b_cpu);
        expect_rows(&ref, outP, &b, false, what);
        expect_rows(&ref, outP, &b_cpu, false, what);
        ck_assert_int_eq(b.rows, outQ - outP);
        carries cb, cb_cpu;
        get_all(ctx, gpu, &cb);
        get_all(ctx, cpu, &cb_cpu);
        expect_carries(gpu, &cb_cpu, &cb, cc->has_first_exact, true, what);
        /* ... and on to the end, as one stream. */
        feed(ctx, p, gpu, &d, cuts, iQ, iE, &b);
        feed(ctx, p, cpu, &d, cuts, iQ, iE, &b_cpu);
        finish(ctx, gpu, &b);
        finish(ctx, cpu, &b_cpu);
        expect_rows(&ref, outP, &b, true, what);
        expect_rows(&ref, outP, &b_cpu, true, what);
        sluice_session_close(gpu);
        sluice_session_close(cpu);
        out_free(&b);
        out_free(&b_cpu);

        /* [Q, end) from the seeded CUDA session's carries. */
        if (t % 2 == 1) as_incoming(&cb);
        output c = {0}, c_cpu = {0};
        gpu = open_on(ctx, p, true);
        cpu = open_on(ctx, p, false);
        set_all(ctx, gpu, &cb);
        set_all(ctx, cpu, &cb);
        feed(ctx, p, gpu, &d, cuts, iQ, iE, &c);
        feed(ctx, p, cpu, &d, cuts, iQ, iE, &c_cpu);
        finish(ctx, gpu, &c);
        finish(ctx, cpu, &c_cpu);
        expect_rows(&ref, outQ, &c, true, what);
        expect_rows(&ref, outQ, &c_cpu, true, what);
        sluice_session_close(gpu);
        sluice_session_close(cpu);
        out_free(&c);
        out_free(&c_cpu);
        out_free(&ref);
    }
    free_data(&d);
    sluice_context_destroy(ctx);
}
END_TEST

/* A reset forgets seeded carries: the stream starts again from the identities. */
START_TEST(test_reset_forgets_seeds) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, CASES[0].yaml);
    g_max_rows = 5000;
    stream_data d;
    make_data(&d, 20000, 7);
    int64_t cuts[] = {0, 9000, 20000};
    output ref = {0}, got = {0}, first = {0};
    sluice_session *cpu = open_on(ctx, p, false);
    feed(ctx, p, cpu, &d, cuts, 0, 2, &ref);
    finish(ctx, cpu, &ref);
    sluice_session_close(cpu);
    sluice_session *gpu = open_on(ctx, p, true);
    feed(ctx, p, gpu, &d, cuts, 0, 1, &first);
    carries c;
    get_all(ctx, gpu, &c);
    ck_assert_int_eq(sluice_session_reset(gpu), SLUICE_OK);
    set_all(ctx, gpu, &c);
    ck_assert_int_eq(sluice_session_reset(gpu), SLUICE_OK);
    feed(ctx, p, gpu, &d, cuts, 0, 2, &got);
    finish(ctx, gpu, &got);
    expect_rows(&ref, 0, &got, true, "reset after a seed");
    carries after;
    get_all(ctx, gpu, &after);
    ck_assert(after.c[0][2].has_first && after.c[0][2].has_key);
    sluice_session_close(gpu);
    out_free(&ref);
    out_free(&got);
    out_free(&first);
    free_data(&d);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *gpu_carry_suite(void) {
    Suite *s = suite_create("gpu_carry");
    TCase *tc = tcase_create("carry");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, test_carries_continue_the_stream, 0, (int)NELEM(CASES));
    tcase_add_test(tc, test_reset_forgets_seeds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
    g_small = getenv("SLUICE_TEST_SMALL") != NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "gpu_carry: no GPU, skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_carry_suite());
}
