/* gpu_stream.c — CUDA sessions with batches in flight (sluice.h, "Batches in flight" and
 * "Errors with batches in flight"): results at every depth equal the synchronous path's
 * (depth 1) bit for bit, for every pipeline shape, cut, memory placement and way of pulling;
 * pushes return while the compute stream is held back, and pull never hands out a batch
 * whose work is not done; a fault found on the device in the middle of a deep pipeline
 * rejects exactly that push and the ones after it, keeps what came before, and the stream
 * continues as if the rejected pushes had never been made. Exits 77 without a GPU.
 *
 * SLUICE_TEST_SMALL=1 (compute-sanitizer runs) keeps to small sizes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "runtime/session.h"
#include "sluice_cuda.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define CUDA_OK(call) ck_assert_int_eq((int)(call), (int)cudaSuccess)
#define MAXCOLS 8

static bool g_small;

/* Pipelines whose every result is exact (integer operations, or a float scan under
 * run_to_run), so any depth must give the same bits. Inputs: x f32, k i32 (few values),
 * id u64, and rows: offsets where the pipeline declares them. */
static const char *const PIPELINES[] = {
    /* one fused group: scans of every carry kind */
    "sluice: 1\nname: scans\ninput: {k: i32, id: u64}\nstages:\n"
    "  - scan: {of: k, op: sum, kind: exclusive, into: s}\n"
    "  - scan: {of: k, op: max, into: m}\n"
    "  - segmented_scan: {of: k, op: sum, segments: {key: k}, into: run}\n"
    "output: [id, s, m, run]\n",
    /* a float scan, fixed order */
    "sluice: 1\nname: fsum\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x, op: sum, into: s}\noutput: [x, s]\n",
    /* a compaction in the last group (its count read late), a scan after it */
    "sluice: 1\nname: cull\ninput: {x: f32, k: i32, id: u64}\nstages:\n"
    "  - map: {r2: x * x}\n  - flag: {keep: r2 < 1.0 && k != 3}\n  - compact: {by: keep}\n"
    "  - scan: {op: count, kind: exclusive, into: slot}\noutput: [id, r2, slot]\n",
    /* a filter that often keeps nothing */
    "sluice: 1\nname: rare\ninput: {x: f32, id: u64}\nstages:\n"
    "  - filter: x > 1.9\noutput: [id, x]\n",
    /* a compaction before a per-batch sort (its count needed at once) */
    "sluice: 1\nname: filtsort\ninput: {x: f32, k: i32, id: u64}\nstages:\n"
    "  - filter: x > 0.0\n  - sort: {key: k, per: batch}\noutput: [k, id]\n",
    /* a stream-wide sort, then a scan over the sorted rows at flush */
    "sluice: 1\nname: streamsort\ninput: {k: i32, id: u64}\nstages:\n"
    "  - sort: {key: k}\n  - scan: {op: count, into: rank}\noutput: [k, id, rank]\n",
    /* ragged batches: offsets, cut between segments */
    "sluice: 1\nname: ragged\ninput:\n  rows: {type: i64, role: offsets}\n  k: i32\nstages:\n"
    "  - segmented_scan: {of: k, op: sum, segments: rows, into: s}\noutput: [k, s]\n",
};

/* ---- data ---------------------------------------------------------------------------- */

typedef struct stream_data {
    int64_t rows;
    float *x;
    int32_t *k;
    uint64_t *id;
    int64_t *off;        /* segment offsets over all rows */
    int64_t nseg;
} stream_data;

static void make_data(stream_data *d, int64_t rows, uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    d->rows = rows;
    d->x = malloc((size_t)rows * 4 + 8);
    d->k = malloc((size_t)rows * 4 + 8);
    d->id = malloc((size_t)rows * 8 + 8);
    d->off = malloc((size_t)(rows + 2) * 8);
    for (int64_t i = 0; i < rows; i++) {
        d->x[i] = (float)(tu_rng_uniform(&r) * 4.0 - 2.0);
        d->k[i] = (int32_t)tu_rng_range(&r, 0, 7);
        d->id[i] = (uint64_t)i * 2654435761u;
    }
    int64_t n = 0, at = 0;
    d->off[n++] = 0;
    while (at < rows) {
        at += tu_rng_range(&r, 0, 40); /* empty segments too */
        if (at > rows) at = rows;
        d->off[n++] = at;
    }
    d->nseg = n - 1;
}

static void free_data(stream_data *d) {
    free(d->x);
    free(d->k);
    free(d->id);
    free(d->off);
}

/* ---- running ------------------------------------------------------------------------- */

/* A stream's output, every column's bytes appended batch after batch. */
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
    ck_assert_int_gt(n, 0); /* empty results are never handed out */
    o->ncols = (int)sluice_batch_column_count(b);
    for (int i = 0; i < o->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
        ck_assert_int_eq(c.length, n);
        size_t w = sluice_type_size(c.type);
        o->width[i] = w;
        o->data[i] = realloc(o->data[i], (size_t)(o->rows + n) * w);
        if (sluice_batch_on_device(b))
            CUDA_OK(cudaMemcpy(o->data[i] + (size_t)o->rows * w, c.data, (size_t)n * w,
                               cudaMemcpyDeviceToHost));
        else
            memcpy(o->data[i] + (size_t)o->rows * w, c.data, (size_t)n * w);
    }
    o->rows += n;
}

static void expect_same(const output *want, const output *got, const char *what) {
    ck_assert_msg(want->rows == got->rows, "%s: %lld rows, the synchronous path gave %lld", what,
                  (long long)got->rows, (long long)want->rows);
    for (int i = 0; i < want->ncols && want->rows > 0; i++)
        for (int64_t r = 0; r < want->rows; r++)
            if (memcmp(want->data[i] + (size_t)r * want->width[i],
                       got->data[i] + (size_t)r * want->width[i], want->width[i]) != 0)
                ck_abort_msg("%s: column %d differs first at row %lld", what, i, (long long)r);
}

static void fail_diag(sluice_context *ctx, const char *what, sluice_status st) {
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_abort_msg("%s: %s: %s", what, sluice_status_name(st), d ? d->message : "");
}

/* Pulls what is ready (wait: everything, waiting for it) into o. */
static void drain(sluice_context *ctx, sluice_session *s, output *o, bool wait) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = wait ? sluice_session_pull_wait(s, &b, -1) : sluice_session_pull(s, &b);
        if (st != SLUICE_OK) fail_diag(ctx, "pull", st);
        if (!b) return;
        out_append(o, b);
        sluice_batch_free(b);
    }
}

typedef struct cfg {
    int depth;
    bool device_in, device_out;
    int pull;          /* 0: after every push; 1: only at the end; 2: pull_wait after each */
    int64_t max_rows;  /* the session's max_batch_rows */
} cfg;

static sluice_session *open_cfg(sluice_context *ctx, sluice_pipeline *p, const cfg *c) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.max_batch_rows = c->max_rows;
    so.pipeline_depth = c->depth;
    sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
    co.outputs_on_device = c->device_out;
    sluice_session *s = NULL;
    sluice_status st = sluice_cuda_session_open(p, &so, &co, &s);
    if (st != SLUICE_OK) fail_diag(ctx, "open", st);
    return s;
}

/* The columns of batch [b0, b1) (rows; segments for a ragged pipeline) of d for p, in host
 * memory or copied to the device (dev[] to free). */
static size_t batch_columns(const sluice_pipeline *p, const stream_data *d, int64_t b0, int64_t b1,
                            bool device, sluice_column *cols, void **dev, int64_t *offbuf) {
    size_t n = sluice_pipeline_input_count(p);
    int64_t r0 = b0, r1 = b1;
    for (size_t i = 0; i < n; i++) {
        sluice_column_info ci;
        ck_assert_int_eq(sluice_pipeline_input(p, i, &ci), SLUICE_OK);
        if (ci.role == SLUICE_ROLE_OFFSETS) r0 = d->off[b0], r1 = d->off[b1];
    }
    for (size_t i = 0; i < n; i++) {
        sluice_column_info ci;
        sluice_pipeline_input(p, i, &ci);
        sluice_column *c = &cols[i];
        c->name = ci.name;
        c->type = ci.type;
        c->length = r1 - r0;
        if (ci.role == SLUICE_ROLE_OFFSETS) {
            for (int64_t k = b0; k <= b1; k++) offbuf[k - b0] = d->off[k] - d->off[b0];
            c->data = offbuf;
            c->length = b1 - b0 + 1;
        } else if (!strcmp(ci.name, "x")) {
            c->data = d->x + r0;
        } else if (!strcmp(ci.name, "k")) {
            c->data = d->k + r0;
        } else {
            c->data = d->id + r0;
        }
        dev[i] = NULL;
        if (device) {
            size_t bytes = (size_t)c->length * sluice_type_size(c->type);
            CUDA_OK(cudaMalloc(&dev[i], bytes + 8));
            CUDA_OK(cudaMemcpy(dev[i], c->data, bytes, cudaMemcpyHostToDevice));
            c->data = dev[i];
        }
    }
    if (device) CUDA_OK(cudaDeviceSynchronize()); /* before the session's stream reads them */
    return n;
}

static bool is_ragged(const sluice_pipeline *p) {
    sluice_column_info ci;
    sluice_pipeline_input(p, 0, &ci);
    return ci.role == SLUICE_ROLE_OFFSETS;
}

/* Pushes batches [cuts[j], cuts[j+1]) of d through s (the caller's session), pulling as c
 * says, then flushes (unless !flush) and pulls the rest. */
static void run_ex(sluice_context *ctx, sluice_pipeline *p, sluice_session *s, const cfg *c,
                   const stream_data *d, const int64_t *cuts, int ncuts, output *o, bool flush) {
    int64_t *offbuf = malloc((size_t)(d->nseg + 2) * 8);
    void **devs = calloc(64 * (size_t)(ncuts + 1), sizeof(void *));
    for (int j = 0; j + 1 < ncuts; j++) {
        sluice_column cols[MAXCOLS];
        size_t n = batch_columns(p, d, cuts[j], cuts[j + 1], c->device_in, cols, devs + 8 * j, offbuf);
        sluice_status st = c->device_in ? sluice_cuda_session_push_device(s, cols, n)
                                        : sluice_session_push(s, cols, n);
        if (st != SLUICE_OK) fail_diag(ctx, "push", st);
        if (c->pull == 0) drain(ctx, s, o, false);
        if (c->pull == 2) {
            sluice_batch *b = NULL;
            st = sluice_session_pull_wait(s, &b, 1);
            if (st != SLUICE_OK) fail_diag(ctx, "pull_wait", st);
            if (b) out_append(o, b);
            sluice_batch_free(b);
        }
    }
    if (flush) {
        sluice_status st = sluice_session_flush(s);
        if (st != SLUICE_OK) fail_diag(ctx, "flush", st);
        ck_assert_int_eq(sluice_session_in_flight(s), 0);
        drain(ctx, s, o, false); /* after a flush everything is ready: pull alone gets it */
        ck_assert_int_eq(sluice_session_in_flight(s), 0);
    } else {
        drain(ctx, s, o, true);
    }
    /* Device inputs may be freed once the session's stream has run past them. */
    CUDA_OK(cudaStreamSynchronize(sluice_cuda_session_stream(s)));
    for (int j = 0; j < 64 * (ncuts + 1); j++)
        if (devs[j]) cudaFree(devs[j]);
    free(devs);
    free(offbuf);
}

static void run(sluice_context *ctx, sluice_pipeline *p, sluice_session *s, const cfg *c,
                const stream_data *d, const int64_t *cuts, int ncuts, output *o) {
    run_ex(ctx, p, s, c, d, cuts, ncuts, o, true);
}

/* Random cuts of [0, total): empty batches, small ones, ones over max_rows (cut again). */
static int make_cuts(tu_rng *r, int64_t total, int64_t max_rows, int64_t *cuts, int cap) {
    int n = 0;
    int64_t at = 0;
    cuts[n++] = 0;
    while (at < total && n < cap - 1) {
        int64_t kind = tu_rng_range(r, 0, 9), len;
        if (kind == 0) len = 0;
        else if (kind <= 5) len = tu_rng_range(r, 1, max_rows);
        else if (kind <= 8) len = tu_rng_range(r, 1, 300);
        else len = tu_rng_range(r, max_rows, 3 * max_rows);
        at = at + len > total ? total : at + len;
        cuts[n++] = at;
    }
    cuts[n - 1] = total;
    return n;
}

/* ---- tests --------------------------------------------------------------------------- */

/* Every pipeline, random cuts, every depth and placement: the same bits as depth 1. */
START_TEST(test_depths_match_synchronous) {
    const char *yaml = PIPELINES[_i];
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    int64_t rows = g_small ? 20000 : 600000, max_rows = g_small ? 3000 : 70000;
    stream_data d;
    make_data(&d, rows, 1000 + (uint64_t)_i);
    tu_rng r;
    tu_rng_seed(&r, 77 + (uint64_t)_i);
    int64_t cuts[512];
    bool ragged = is_ragged(p);
    int ncuts = make_cuts(&r, ragged ? d.nseg : rows, ragged ? max_rows / 20 : max_rows, cuts,
                          (int)NELEM(cuts));
    const cfg ref_cfg = {1, false, false, 1, max_rows};
    output ref = {0};
    sluice_session *s = open_cfg(ctx, p, &ref_cfg);
    run(ctx, p, s, &ref_cfg, &d, cuts, ncuts, &ref);
    sluice_session_close(s);
    ck_assert_int_gt(ref.rows, 0);
    const int depths[] = {2, 3, 8};
    int k = 0;
    for (size_t di = 0; di < NELEM(depths); di++)
        for (int place = 0; place < 4; place++) {
            cfg c = {depths[di], place & 1, (place >> 1) & 1, (int)((di + (size_t)place) % 3), max_rows};
            s = open_cfg(ctx, p, &c);
            /* The same session runs the stream twice (reset between): reset forgets all. */
            for (int rep = 0; rep < (k++ % 3 == 0 ? 2 : 1); rep++) {
                output got = {0};
                run(ctx, p, s, &c, &d, cuts, ncuts, &got);
                char what[160];
                snprintf(what, sizeof what, "%s, depth %d, %s in, %s out, pull %d, run %d",
                         sluice_pipeline_name(p), c.depth, c.device_in ? "device" : "host",
                         c.device_out ? "device" : "host", c.pull, rep);
                expect_same(&ref, &got, what);
                out_free(&got);
                ck_assert_int_eq(sluice_session_reset(s), SLUICE_OK);
            }
            sluice_session_close(s);
        }
    out_free(&ref);
    free_data(&d);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A host function holding the caller's stream until the test lets it go. */
static void CUDART_CB hold_stream(void *flag) {
    /* At most 10 s: were a push to wait for the stream, it then returns late and the test
     * fails on what it sees, instead of hanging. */
    for (int i = 0; i < 100000 && !atomic_load((atomic_int *)flag); i++) {
        struct timespec t = {0, 100000};
        nanosleep(&t, NULL);
    }
}

/* Pushes return while the compute stream cannot move, pull hands out nothing before the
 * work is done, pull_wait times out, and all comes out in order once it runs. */
START_TEST(test_push_returns_before_results) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, PIPELINES[2]); /* cull: a compaction, a scan */
    int64_t rows = g_small ? 9000 : 300000;
    stream_data d;
    make_data(&d, rows, 5);
    int64_t cuts[4] = {0, rows / 3, 2 * rows / 3, rows};
    output ref = {0};
    cfg c1 = {1, false, false, 1, rows};
    sluice_session *s = open_cfg(ctx, p, &c1);
    run(ctx, p, s, &c1, &d, cuts, 4, &ref);
    sluice_session_close(s);
    for (int device_out = 0; device_out < 2; device_out++) {
        cudaStream_t st;
        CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
        so.max_batch_rows = rows;
        so.pipeline_depth = 3;
        sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
        co.stream = st;
        co.outputs_on_device = device_out;
        ck_assert_int_eq(sluice_cuda_session_open(p, &so, &co, &s), SLUICE_OK);
        atomic_int go = 0;
        CUDA_OK(cudaLaunchHostFunc(st, hold_stream, &go));
        for (int j = 0; j < 3; j++) {
            sluice_column cols[MAXCOLS];
            void *dev[MAXCOLS];
            size_t n = batch_columns(p, &d, cuts[j], cuts[j + 1], false, cols, dev, NULL);
            ck_assert_int_eq(sluice_session_push(s, cols, n), SLUICE_OK);
            ck_assert_int_eq(sluice_session_in_flight(s), j + 1);
            ck_assert_int_eq(sluice_session_push_count(s), j + 1);
        }
        sluice_batch *b = (sluice_batch *)1;
        ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
        ck_assert_ptr_null(b);
        ck_assert_int_eq(sluice_session_pull_wait(s, &b, 30), SLUICE_OK);
        ck_assert_ptr_null(b); /* timed out: still in flight */
        ck_assert_int_eq(sluice_session_in_flight(s), 3);
        atomic_store(&go, 1);
        output got = {0};
        for (int j = 0; j < 3; j++) {
            ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK);
            ck_assert_ptr_nonnull(b);
            out_append(&got, b);
            sluice_batch_free(b);
        }
        ck_assert_int_eq(sluice_session_in_flight(s), 0);
        ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK); /* nothing in flight */
        ck_assert_ptr_null(b);
        expect_same(&ref, &got, device_out ? "held stream, device out" : "held stream, host out");
        out_free(&got);
        sluice_session_close(s);
        CUDA_OK(cudaStreamDestroy(st));
    }
    out_free(&ref);
    free_data(&d);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A fault found on the device in push `bad` of a deep pipeline: reported on a later call
 * naming that push; it and every push after it rejected, the results of those before kept;
 * pushing the rejected batches again gives exactly the stream's results. */
static void fault_case(const char *yaml, int depth, bool device_out, int bad, int nbatches) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    int64_t per = g_small ? 2000 : 50000, rows = per * nbatches;
    stream_data d;
    make_data(&d, rows, 9);
    int64_t cuts[64];
    for (int j = 0; j <= nbatches; j++) cuts[j] = per * j;
    cfg c1 = {1, false, device_out, 1, per};
    output ref = {0}, before = {0};
    sluice_session *s = open_cfg(ctx, p, &c1);
    run(ctx, p, s, &c1, &d, cuts, nbatches + 1, &ref);
    ck_assert_int_eq(sluice_session_reset(s), SLUICE_OK);
    run_ex(ctx, p, s, &c1, &d, cuts, bad + 1, &before, false); /* the pushes before it */
    sluice_session_close(s);

    cfg c = {depth, false, device_out, 1, per};
    s = open_cfg(ctx, p, &c);
    sl_cuda_fault_at_piece(s, bad);
    output got = {0};
    sluice_status st = SLUICE_OK;
    int j = 0;
    for (; j < nbatches && st == SLUICE_OK; j++) {
        sluice_column cols[MAXCOLS];
        void *dev[MAXCOLS];
        size_t n = batch_columns(p, &d, cuts[j], cuts[j + 1], false, cols, dev, NULL);
        st = sluice_session_push(s, cols, n);
    }
    if (st == SLUICE_OK) st = sluice_session_flush(s);
    ck_assert_int_eq(st, SLUICE_ERR_CUDA);
    /* found no later than depth pushes after it (the slot it held was needed then) */
    ck_assert_int_le(j, bad + depth + 1);
    char want[64];
    snprintf(want, sizeof want, "push %d failed on the device", bad);
    bool named = false;
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++)
        named = named || strstr(sluice_context_diagnostic(ctx, i)->message, want);
    ck_assert_msg(named, "no diagnostic says '%s'", want);
    ck_assert_int_eq(sluice_session_push_count(s), bad);
    ck_assert_int_eq(sluice_session_in_flight(s), 0);
    drain(ctx, s, &got, true); /* what was accepted is not lost */
    expect_same(&before, &got, "the pushes before the fault");
    /* The rest again: the stream goes on as if the rejected pushes had never been made. */
    sl_cuda_fault_at_piece(s, -1);
    for (j = bad; j < nbatches; j++) {
        sluice_column cols[MAXCOLS];
        void *dev[MAXCOLS];
        size_t n = batch_columns(p, &d, cuts[j], cuts[j + 1], false, cols, dev, NULL);
        st = sluice_session_push(s, cols, n);
        if (st != SLUICE_OK) fail_diag(ctx, "push again", st);
    }
    st = sluice_session_flush(s);
    if (st != SLUICE_OK) fail_diag(ctx, "flush", st);
    drain(ctx, s, &got, true);
    expect_same(&ref, &got, "the stream pushed again after the fault");
    ck_assert_int_eq(sluice_session_push_count(s), nbatches);
    sluice_session_close(s);
    out_free(&ref);
    out_free(&before);
    out_free(&got);
    free_data(&d);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

START_TEST(test_fault_in_flight) {
    /* scans carried across batches; a compaction's count read late; a stream-wide sort's
     * held rows; depth 1 (the push itself reports it) to 6, at the start, middle and end */
    fault_case(PIPELINES[0], 4, false, 5, 10);
    fault_case(PIPELINES[0], 6, true, 3, 10);
    fault_case(PIPELINES[2], 4, false, 6, 10);
    fault_case(PIPELINES[2], 3, true, 0, 6);
    fault_case(PIPELINES[5], 4, false, 5, 10);
    fault_case(PIPELINES[1], 1, false, 4, 8);
    fault_case(PIPELINES[0], 3, false, 9, 10); /* the last push: found by the flush */
}
END_TEST

/* The API around it: options, the counters, the CPU backend (no flight at all). */
START_TEST(test_api) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, PIPELINES[0]);
    sluice_session *s = NULL;
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    ck_assert_int_eq(so.pipeline_depth, 0);
    so.pipeline_depth = -1;
    ck_assert_int_eq(sluice_cuda_session_open(p, &so, NULL, &s), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "pipeline_depth"));
    so.pipeline_depth = 65;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_ERR_INVALID_ARGUMENT);
    /* A version 2 caller's struct (no pipeline_depth) still opens, at the default depth. */
    struct v2 {
        unsigned version;
        sluice_backend backend;
        int64_t max_batch_rows;
        const sluice_param_value *params;
        size_t param_count;
        int64_t sort_memory_bytes;
        const char *spill_dir;
    } old = {2, SLUICE_BACKEND_CUDA, 0, NULL, 0, 0, NULL};
    ck_assert_int_eq(sluice_session_open(p, (const sluice_session_options *)&old, &s), SLUICE_OK);
    ck_assert_int_eq(s->depth, 3);
    sluice_session_close(s);
    ck_assert_int_eq(sluice_session_in_flight(NULL), -1);
    ck_assert_int_eq(sluice_session_push_count(NULL), -1);
    sluice_batch *b = (sluice_batch *)1;
    ck_assert_int_eq(sluice_session_pull_wait(NULL, &b, 0), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(b);

    /* The CPU backend completes every push before it returns. */
    so = (sluice_session_options)SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.pipeline_depth = 8;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
    int32_t k[5] = {1, 2, 2, 3, 0};
    uint64_t id[5] = {1, 2, 3, 4, 5};
    sluice_column cols[2] = {{"k", SLUICE_I32, k, 5}, {"id", SLUICE_U64, id, 5}};
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
    ck_assert_int_eq(sluice_session_in_flight(s), 0);
    ck_assert_int_eq(sluice_session_push_count(s), 1);
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, 0), SLUICE_OK);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(sluice_batch_rows(b), 5);
    sluice_batch_free(b);
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(sluice_session_reset(s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_push_count(s), 0);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *gpu_stream_suite(void) {
    Suite *s = suite_create("gpu_stream");
    TCase *depths = tcase_create("depths");
    tcase_add_loop_test(depths, test_depths_match_synchronous, 0, (int)NELEM(PIPELINES));
    TCase *flight = tcase_create("flight");
    tcase_add_test(flight, test_api);
    tcase_add_test(flight, test_push_returns_before_results);
    tcase_add_test(flight, test_fault_in_flight);
    TCase *all[] = {depths, flight};
    for (size_t i = 0; i < NELEM(all); i++) {
        tcase_set_timeout(all[i], 1200);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

int main(void) {
    setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
    g_small = getenv("SLUICE_TEST_SMALL") != NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "gpu_stream: no GPU, skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_stream_suite());
}
