/* stream_bench.c — issue 11's streaming figures: host-resident batches through a CUDA
 * session with batches in flight, beside the bus limit measured in the same run.
 *
 * Usage: stream_bench [log2_rows=26] [batches=8] [reps=3] [staging]
 *
 * Jobs (each the median of `reps` timed runs after one warm-up; wall-clock time from the
 * first push to the last result pulled, results freed as they come):
 *   - `batches` host batches of 2^log2_rows f32 through an exclusive sum scan, and through
 *     `filter: x > 0` (about half kept), from malloc memory, from pinned memory the session
 *     does not know about (cudaMallocHost: staged like malloc memory) and from
 *     sluice_cuda_host_alloc memory (read by DMA), at depth 1 (the synchronous path) and at
 *     the default depth, each push one piece (max_batch_rows = the batch); then at the
 *     default depth with the default max_batch_rows, each push cut into pieces in flight;
 *     malloc memory once more with SLUICE_CUDA_STAGING_THREADS=8;
 *   - the bus limit: pinned H2D and D2H of the same bytes issued at once on two streams
 *     (the scan's bar), and pinned H2D of the input alone (the filter's bar);
 *   - 2^20- against 2^26-row batches over the same 2^28 rows: device-resident (map, filter
 *     and count scan, outputs left on the device) and host-resident (the scan, from
 *     sluice_cuda_host_alloc memory), with the host time of one push; for the device-resident
 *     small batches also where that time goes: how many batches were in flight when each
 *     push began (a push finding the default depth of 3 waits for the GPU), the host time of
 *     each call with the GPU idle (push; a pull while the piece just pushed runs; a pull of
 *     a complete batch; sluice_batch_free), and the GPU's own time a piece, measured with
 *     the pieces queued back to back behind a gate on the session's stream (so the host
 *     cannot be what it waits for);
 * Every result is verified, outside the timings: after a job's timed runs (and after the gated
 * GPU-time pushes), one more stream through the same session, pushed and pulled as the timed
 * ones, has each result batch checked as it is pulled, in stream order, against a reference
 * the host computes from the bytes pushed (device outputs are first copied back with
 * cudaMemcpy, 4M rows at a time; the reference keeps a running carry, nothing output-sized).
 * The scans are per stream (a scan's `reset` is `never` by default), so the sum's carry and
 * the count's slot run on across batches and pieces. The filter's rows and the map's y and
 * the count slot are exact and compared bit for bit; the f32 sum's association on the GPU is
 * not the host's, so it is compared within bounds derived from the data that still fail for
 * a row out of place (check_scan). Every input row must be accounted for. A wrong value
 * prints the job, the result batch and row, the input row, expected and got, and exits 3
 * before that job's figure or the table is printed. Each check prints a `checked` line (for
 * the scan, its largest error as a fraction of each bound). host_costs' calls are not
 * checked themselves; they run on the session the 2^20-row batches were checked on.
 * With `staging` last, only the bus limit and the malloc rows at the default depth (one piece
 * a push) run, labelled with the staging settings of the environment, for a sweep from a
 * shell loop over SLUICE_CUDA_STAGING_THREADS / _SLOTS / _MB / _NT (sluice_cuda.h). With
 * `small` last, only the device-resident small-against-large batches run (for a profiler),
 * with the GPU time a piece of the same pipeline at 2^18 and 2^22 rows and of the scan and the
 * filter alone at 2^20 rows (what of a small piece's time is fixed cost, what is look-back).
 * Prints one line per measurement and a table last. Benchmarks are programs, never timed
 * tests (ARCHITECTURE.md §8); figures go to bench/RESULTS.md. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "sluice.h"
#include "sluice_cuda.h"
#include "bench_time.h"
#include "cuda_check.h"

static int g_reps = 3;
static int g_staging_only; /* the `staging` argument */
static int g_small_only;   /* the `small` argument */

static void fail_session(sluice_context *ctx, sluice_status st, const char *what) {
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    fprintf(stderr, "stream_bench: %s: %s: %s\n", what, sluice_status_name(st), d ? d->message : "");
    exit(1);
}

/* ---- the bus limit -------------------------------------------------------------------- */

/* Pinned H2D of `bytes` (alone), and H2D with D2H of the same bytes at once on two
 * streams, in chunks of `chunk` bytes, medians in ms. */
static void bus_limit(size_t bytes, size_t chunk, double *h2d_ms, double *duplex_ms) {
    void *hin, *hout, *din, *dout;
    CK(cudaMallocHost(&hin, chunk));
    CK(cudaMallocHost(&hout, chunk));
    CK(cudaMalloc(&din, chunk));
    CK(cudaMalloc(&dout, chunk));
    memset(hin, 1, chunk);
    CK(cudaMemset(dout, 2, chunk));
    cudaStream_t a, b;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    double t1[16], t2[16];
    for (int r = 0; r <= g_reps; r++) {
        double t0 = now_ms();
        for (size_t at = 0; at < bytes; at += chunk)
            CK(cudaMemcpyAsync(din, hin, chunk, cudaMemcpyHostToDevice, a));
        CK(cudaStreamSynchronize(a));
        double t = now_ms();
        for (size_t at = 0; at < bytes; at += chunk) {
            CK(cudaMemcpyAsync(din, hin, chunk, cudaMemcpyHostToDevice, a));
            CK(cudaMemcpyAsync(hout, dout, chunk, cudaMemcpyDeviceToHost, b));
        }
        CK(cudaStreamSynchronize(a));
        CK(cudaStreamSynchronize(b));
        if (r > 0) { /* the first is the warm-up */
            t1[r - 1] = t - t0;
            t2[r - 1] = now_ms() - t;
        }
    }
    *h2d_ms = bench_median(t1, g_reps);
    *duplex_ms = bench_median(t2, g_reps);
    CK(cudaStreamDestroy(a));
    CK(cudaStreamDestroy(b));
    CK(cudaFreeHost(hin));
    CK(cudaFreeHost(hout));
    CK(cudaFree(din));
    CK(cudaFree(dout));
}

/* ---- sessions ------------------------------------------------------------------------- */

static const char *SCAN =
    "sluice: 1\nname: bench-scan\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x, op: sum, kind: exclusive, into: s}\noutput: [s]\n";
static const char *FILTER =
    "sluice: 1\nname: bench-filter\ninput: {x: f32}\nstages:\n"
    "  - filter: x > 0\noutput: [x]\n";
static const char *MFC =
    "sluice: 1\nname: bench-map-filter-count\ninput: {x: f32}\nstages:\n"
    "  - map: {y: x * 2.0 + 1.0}\n  - filter: y > 1.0\n"
    "  - scan: {op: count, kind: exclusive, into: slot}\noutput: [y, slot]\n";

enum { JOB_SCAN, JOB_FILTER, JOB_MFC };

typedef struct job {
    sluice_context *ctx;
    sluice_pipeline *p;
    sluice_session *s;
    int64_t rows_out;
    int kind; /* JOB_SCAN, JOB_FILTER or JOB_MFC: what verify_stream checks */
} job;

static void job_open(job *j, const char *yaml, int64_t max_rows, int depth, int device_out) {
    memset(j, 0, sizeof *j);
    j->kind = yaml == SCAN ? JOB_SCAN : yaml == FILTER ? JOB_FILTER : JOB_MFC;
    if (sluice_context_create(&j->ctx, NULL) != SLUICE_OK) exit(1);
    sluice_status st = sluice_pipeline_load_string(j->ctx, yaml, strlen(yaml), "bench", &j->p);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "loading the pipeline");
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CUDA;
    so.max_batch_rows = max_rows;
    so.pipeline_depth = depth;
    sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
    co.outputs_on_device = device_out;
    st = sluice_cuda_session_open(j->p, &so, &co, &j->s);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "opening the session");
}

static void job_close(job *j) {
    sluice_session_close(j->s);
    sluice_pipeline_free(j->p);
    sluice_context_destroy(j->ctx);
}

/* Frees every result ready now (wait: every result still to come). */
static void drain(job *j, int wait) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = wait ? sluice_session_pull_wait(j->s, &b, -1) : sluice_session_pull(j->s, &b);
        if (st != SLUICE_OK) fail_session(j->ctx, st, "pulling");
        if (!b) return;
        j->rows_out += sluice_batch_rows(b);
        sluice_batch_free(b);
    }
}

/* One stream: `nb` pushes of `rows` rows from cols (host or device), each batch at
 * src + k * stride rows, then flush and every result pulled. Returns ms; *push_us the mean
 * host time of one push call. */
static int64_t g_began_with[5]; /* pushes by the batches in flight when they began: 0..3, 4+ */

static double run_stream(job *j, const float *src, int64_t stride, int64_t rows, int nb,
                         int on_device, double *push_us) {
    double t0 = now_ms(), in_push = 0;
    j->rows_out = 0;
    for (int k = 0; k < nb; k++) {
        sluice_column c = {"x", SLUICE_F32, src + (size_t)k * (size_t)stride, rows};
        int64_t f = sluice_session_in_flight(j->s); /* no poll: as the last call left it */
        g_began_with[f < 4 ? f : 4]++;
        double a = now_ms();
        sluice_status st = on_device ? sluice_cuda_session_push_device(j->s, &c, 1)
                                     : sluice_session_push(j->s, &c, 1);
        in_push += now_ms() - a;
        if (st != SLUICE_OK) fail_session(j->ctx, st, "pushing");
        drain(j, 0);
    }
    sluice_status st = sluice_session_flush(j->s);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "flushing");
    drain(j, 1);
    double t = now_ms() - t0;
    st = sluice_session_reset(j->s);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "resetting");
    if (push_us) *push_us = in_push * 1e3 / nb;
    return t;
}

/* ---- verification ----------------------------------------------------------------------
 * After a job's timed runs, one more stream with the same session (time_stream) is pushed the
 * same way and every result batch is checked as it is pulled, in stream order, against a host
 * reference computed from the bytes pushed; the first wrong value ends the program (exit 3),
 * since a fast wrong answer is no figure. The timed runs themselves check nothing (drain).
 * The reference runs incrementally over the stream, so nothing the size of the output is held:
 * SCAN's carry and MFC's count slot continue across batches as a session's scans do (SCHEMA.md:
 * a scan's `reset` is `never` by default, and results do not depend on how the stream is cut). */

#define CHECK_CHUNK ((int64_t)1 << 22) /* rows of a device column copied back at a time */
#define SCAN_WINDOW ((int64_t)1 << 17) /* rows behind a row whose sums the step bound covers */
#define U_F32 0x1p-24                  /* f32's unit roundoff: half an ulp of 1 */
#define TINY 0x1p-40

typedef struct verifier {
    const char *what; /* the job, for messages */
    int kind;
    const float *ref; /* input row r of the stream is ref[r % period] */
    int64_t period, pos, lag_pos;
    int64_t in_rows, push_rows;
    int64_t at;       /* input rows matched so far */
    int64_t batch;    /* result batches checked */
    int64_t out_rows;
    double sum, abs_sum, win; /* SCAN: sum and |sum| of the rows before `at`; win: |sum| of
                                 the SCAN_WINDOW rows before it */
    float prev_got, prev_x;   /* SCAN: the row before `at` */
    double worst_abs, worst_step; /* SCAN: largest error / bound seen */
    int64_t kept;             /* FILTER, MFC: rows kept before `at` */
    float *hf;                /* host copies of a chunk of device columns */
    int64_t *hi;
} verifier;

static double absd(double a) { return a < 0 ? -a : a; }

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* row: the row of result batch v->batch (-1: after the last result batch); in_row: the
 * input row of the stream it stands for (-1: none). */
__attribute__((format(printf, 4, 5), noreturn)) static void verify_fail(const verifier *v, int64_t row,
                                                               int64_t in_row, const char *fmt, ...) {
    fprintf(stderr, "stream_bench: WRONG RESULT: %s: ", v->what);
    if (row >= 0)
        fprintf(stderr, "result batch %lld, row %lld", (long long)v->batch, (long long)row);
    else
        fprintf(stderr, "after %lld result batches", (long long)v->batch);
    if (in_row >= 0)
        fprintf(stderr, " (input row %lld of the stream: push %lld, row %lld)", (long long)in_row,
                (long long)(in_row / v->push_rows), (long long)(in_row % v->push_rows));
    fprintf(stderr, ": ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nstream_bench: stopped; no figure of this run is valid\n");
    exit(3);
}

static float next_x(verifier *v) {
    float x = v->ref[v->pos];
    if (++v->pos == v->period) v->pos = 0;
    v->at++;
    return x;
}

static void get_column(const verifier *v, const sluice_batch *b, const char *name, sluice_type t,
                       int64_t rows, sluice_column *c) {
    sluice_status st = sluice_batch_column_by_name(b, name, c);
    if (st != SLUICE_OK)
        verify_fail(v, -1, -1, "result batch %lld has no column %s (%s)", (long long)v->batch,
                    name, sluice_status_name(st));
    if (c->type != t || c->length != rows || (rows > 0 && !c->data))
        verify_fail(v, -1, -1, "result batch %lld: column %s is %s of %lld rows, expected %s of "
                    "%lld", (long long)v->batch, name, sluice_type_name(c->type),
                    (long long)c->length, sluice_type_name(t), (long long)rows);
}

/* SCAN, `s` = the exclusive f32 sum of x. The reference (v->sum, in double) is exact: every
 * input is a multiple of 2^-20 below 8 in magnitude (main), so a prefix of up to 2^30 rows
 * fits a double's 53 bits. The GPU adds in f32 in an association of its own (a thread's rows
 * in order, a tree over the block's threads, 4096-row tiles chained by look-back, pieces and
 * batches by the session's carry) that no sequential host sum reproduces, so `s` is compared
 * within bounds, not bit for bit. Each f32 rounding is at most 2^-24 of the partial sum it
 * rounds, and a partial sum is at most the sum of |x| of the rows it covers; two bounds
 * follow, each catching what the other cannot:
 *  - absolute: |got - sum| <= 4 * 2^-24 * (sum of |x| over the prefix). The actual error is
 *    far smaller (roundings of either sign, of partial sums that are random walks ~sqrt(n),
 *    not ~n): a host model of the GPU's association over 2^29 rows of this input reached an
 *    eighth of the bound in the first hundred rows and under 1/200 of it past row 2^14. It
 *    catches a dropped or doubled batch (off by that batch's sum, ~4.6 sqrt(rows):
 *    ~38000 for 2^26 rows, against a bound of at most ~512 at row 2^29), but it alone cannot
 *    fail for one row's worth late in a long stream, as one x is below 8.
 *  - step: consecutive outputs, across result batches too, differ by the row between them:
 *    |(got[r] - got[r-1]) - x[r-1]| <= 16 * 2^-24 * (|got[r]| + |got[r-1]|)
 *                                      + 4 * 2^-24 * (sum of |x| over the 2^17 rows before r).
 *    The errors both rows share (the carry from further back) cancel; what is left is the
 *    rounding of the running value between them (first term) and of the tile sums and
 *    look-back windows that may separate them (second term: 2^17 rows, 32 tiles). The same
 *    model's step errors reached 0.18 of this bound. The bound is 0.125 plus 2^-19 |s|:
 *    ~0.3 where |s| is ~10^5, as at the end of a 2^29-row stream, while neighbouring rows
 *    differ by 5.3 on average (x uniform in [-8, 8)). A shifted row, a carry off by a row,
 *    an output row dropped or repeated fails here except where the two values it mixes up
 *    happen to be within the bound (4 to 9 in 100 for bounds of 0.3 to 0.7), so one that
 *    persists over a few rows, or recurs at every batch's carry, cannot pass. */
static void check_scan(verifier *v, const float *s, int64_t lo, int64_t m) {
    if (m > v->in_rows - v->at)
        verify_fail(v, lo + (v->in_rows - v->at), -1, "s = %.9g: more rows than the %lld pushed",
                    s[v->in_rows - v->at], (long long)v->in_rows);
    /* the state in locals: stores through v would alias the float loads every row */
    const float *ref = v->ref;
    int64_t period = v->period, pos = v->pos, lag_pos = v->lag_pos, r = v->at;
    double sum = v->sum, abs_sum = v->abs_sum, win = v->win;
    double worst_abs = v->worst_abs, worst_step = v->worst_step;
    float prev_got = v->prev_got, prev_x = v->prev_x;
    for (int64_t i = 0; i < m; i++, r++) {
        float x = ref[pos], got = s[i];
        if (++pos == period) pos = 0;
        double err = absd((double)got - sum), tol = 4 * U_F32 * abs_sum + TINY;
        if (!(err <= tol))
            verify_fail(v, lo + i, r, "s: expected %.17g (the exact sum of the rows before it), "
                        "got %.9g: off by %.3g, bound %.3g", sum, got, err, tol);
        if (err > worst_abs * tol) worst_abs = err / tol; /* no division a row */
        if (r > 0) {
            double step = (double)got - (double)prev_got;
            double serr = absd(step - (double)prev_x);
            double stol = 16 * U_F32 * (absd(got) + absd(prev_got)) + 4 * U_F32 * win + TINY;
            if (!(serr <= stol))
                verify_fail(v, lo + i, r, "s: %.9g after %.9g on the row before, a step of "
                            "%.9g, expected that row's x = %.9g: off by %.3g, bound %.3g", got,
                            prev_got, step, prev_x, serr, stol);
            if (serr > worst_step * stol) worst_step = serr / stol;
        }
        prev_got = got;
        prev_x = x;
        sum += x;
        abs_sum += absd(x);
        win += absd(x);
        if (r >= SCAN_WINDOW) {
            win -= absd(ref[lag_pos]);
            if (++lag_pos == period) lag_pos = 0;
        }
    }
    v->pos = pos;
    v->lag_pos = lag_pos;
    v->at = r;
    v->sum = sum;
    v->abs_sum = abs_sum;
    v->win = win;
    v->worst_abs = worst_abs;
    v->worst_step = worst_step;
    v->prev_got = prev_got;
    v->prev_x = prev_x;
}

/* FILTER and MFC: whether input x makes an output row, and that row's value in *out (FILTER:
 * x itself, kept when x > 0; MFC: y = x * 2 + 1 in f32, kept when y > 1). x * 2 is exact, so
 * contracting the host's x * 2.0f + 1.0f into an FMA cannot change its bits: it equals the
 * GPU's separately rounded multiply and add. */
static bool kept_value(int kind, float x, float *out) {
    if (kind == JOB_FILTER) {
        *out = x;
        return x > 0;
    }
    *out = x * 2.0f + 1.0f;
    return *out > 1.0f;
}

/* The value of the next input row the job keeps, for output row `row` of the batch (`got`
 * its value, for the message); *r: that input row. Fails when no input row is left. */
static float next_kept(verifier *v, int64_t row, float got, int64_t *r) {
    float want;
    for (;;) {
        if (v->at == v->in_rows)
            verify_fail(v, row, -1, "%.9g: more rows out than the job keeps of the %lld pushed",
                        got, (long long)v->in_rows);
        *r = v->at;
        if (kept_value(v->kind, next_x(v), &want)) return want;
    }
}

/* FILTER's x and MFC's y bit for bit (kept_value); MFC's slot = how many rows the stream kept
 * before. */
static void check_kept(verifier *v, const float *got, const int64_t *slot, int64_t lo, int64_t m) {
    const char *name = v->kind == JOB_FILTER ? "x" : "y";
    for (int64_t i = 0; i < m; i++) {
        int64_t r;
        const float want = next_kept(v, lo + i, got[i], &r);
        if (f32_bits(got[i]) != f32_bits(want))
            verify_fail(v, lo + i, r, "%s: expected %.9g (0x%08x), got %.9g (0x%08x)", name, want,
                        f32_bits(want), got[i], f32_bits(got[i]));
        if (slot && slot[i] != v->kept)
            verify_fail(v, lo + i, r, "slot: expected %lld (rows kept before it in the stream), "
                        "got %lld", (long long)v->kept, (long long)slot[i]);
        v->kept++;
    }
}

/* Checks one result batch, the next in stream order. Device columns (outputs_on_device) are
 * complete when pulled; they are copied back a chunk at a time. */
static void check_batch(verifier *v, const sluice_batch *b) {
    int64_t rows = sluice_batch_rows(b);
    sluice_column c0, c1 = {0};
    get_column(v, b, v->kind == JOB_SCAN ? "s" : v->kind == JOB_FILTER ? "x" : "y", SLUICE_F32,
               rows, &c0);
    if (v->kind == JOB_MFC) get_column(v, b, "slot", SLUICE_I64, rows, &c1);
    int dev = sluice_batch_on_device(b);
    if (dev && rows > 0 && !v->hf) {
        v->hf = malloc((size_t)CHECK_CHUNK * sizeof *v->hf);
        v->hi = malloc((size_t)CHECK_CHUNK * sizeof *v->hi);
        if (!v->hf || !v->hi) {
            fprintf(stderr, "stream_bench: out of memory for verification\n");
            exit(1);
        }
    }
    for (int64_t lo = 0; lo < rows; lo += CHECK_CHUNK) {
        int64_t m = rows - lo < CHECK_CHUNK ? rows - lo : CHECK_CHUNK;
        const float *f = (const float *)c0.data + lo;
        const int64_t *sl = v->kind == JOB_MFC ? (const int64_t *)c1.data + lo : NULL;
        if (dev) {
            CK(cudaMemcpy(v->hf, f, (size_t)m * sizeof *f, cudaMemcpyDeviceToHost));
            f = v->hf;
            if (sl) {
                CK(cudaMemcpy(v->hi, sl, (size_t)m * sizeof *sl, cudaMemcpyDeviceToHost));
                sl = v->hi;
            }
        }
        if (v->kind == JOB_SCAN) check_scan(v, f, lo, m);
        else check_kept(v, f, sl, lo, m);
    }
    v->out_rows += rows;
    v->batch++;
}

/* After the last result: every input row was accounted for. */
static void check_end(verifier *v) {
    if (v->kind == JOB_SCAN) {
        if (v->at != v->in_rows)
            verify_fail(v, -1, v->at, "%lld rows out, %lld pushed", (long long)v->out_rows,
                        (long long)v->in_rows);
        return;
    }
    while (v->at < v->in_rows) {
        int64_t r = v->at;
        float x = next_x(v), want;
        if (kept_value(v->kind, x, &want))
            verify_fail(v, -1, r, "no output row for x = %.9g, which the job keeps", x);
    }
}

/* Frees every result ready now (wait: every result still to come), checking each first. */
static void drain_checked(job *j, int wait, verifier *v) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = wait ? sluice_session_pull_wait(j->s, &b, -1) : sluice_session_pull(j->s, &b);
        if (st != SLUICE_OK) fail_session(j->ctx, st, "pulling (verified stream)");
        if (!b) return;
        j->rows_out += sluice_batch_rows(b);
        check_batch(v, b);
        sluice_batch_free(b);
    }
}

/* One untimed stream as run_stream pushes it, every result checked. `ref` and `period`: the
 * host bytes of the input, row r of the stream at ref[r % period] (the batches are
 * contiguous: src + k * rows). */
static void verify_stream(job *j, const float *src, int64_t stride, int64_t rows, int nb,
                          int on_device, const float *ref, int64_t period, const char *what) {
    if (stride != rows) {
        fprintf(stderr, "stream_bench: %s: verification needs contiguous batches\n", what);
        exit(1);
    }
    verifier v;
    memset(&v, 0, sizeof v);
    v.what = what;
    v.kind = j->kind;
    v.ref = ref;
    v.period = period;
    v.in_rows = rows * nb;
    v.push_rows = rows > 0 ? rows : 1;
    j->rows_out = 0;
    for (int k = 0; k < nb; k++) {
        sluice_column c = {"x", SLUICE_F32, src + (size_t)k * (size_t)stride, rows};
        sluice_status st = on_device ? sluice_cuda_session_push_device(j->s, &c, 1)
                                     : sluice_session_push(j->s, &c, 1);
        if (st != SLUICE_OK) fail_session(j->ctx, st, "pushing (verified stream)");
        drain_checked(j, 0, &v);
    }
    sluice_status st = sluice_session_flush(j->s);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "flushing (verified stream)");
    drain_checked(j, 1, &v);
    check_end(&v);
    st = sluice_session_reset(j->s);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "resetting");
    free(v.hf);
    free(v.hi);
    if (v.kind == JOB_SCAN)
        printf("checked %s: %lld rows out in %lld result batches, largest error %.2g of the "
               "absolute bound and %.2g of the step bound\n", what, (long long)v.out_rows,
               (long long)v.batch, v.worst_abs, v.worst_step);
    else
        printf("checked %s: %lld rows out of %lld in %lld result batches, bit for bit\n", what,
               (long long)v.out_rows, (long long)v.in_rows, (long long)v.batch);
}

/* Median of g_reps timed streams after one warm-up (which also compiles the kernel), then
 * one more stream, untimed, whose results are checked (verify_stream; ref, period, what are
 * its arguments). */
static double time_stream(job *j, const float *src, int64_t stride, int64_t rows, int nb,
                          int on_device, double *push_us, const float *ref, int64_t period,
                          const char *what) {
    double t[16], pu[16];
    run_stream(j, src, stride, rows, nb, on_device, NULL);
    for (int r = 0; r < g_reps; r++) t[r] = run_stream(j, src, stride, rows, nb, on_device, &pu[r]);
    verify_stream(j, src, stride, rows, nb, on_device, ref, period, what);
    if (push_us) *push_us = bench_median(pu, g_reps);
    return bench_median(t, g_reps);
}

/* ---- where a small device push's time goes --------------------------------------------- */

/* One sluice_session_pull; frees what it gives (NULL: nothing was ready). */
static void pull_one(job *j) {
    sluice_batch *b = NULL;
    sluice_status st = sluice_session_pull(j->s, &b);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "pulling");
    sluice_batch_free(b);
}

/* Host time of each call with the GPU idle, medians in us over n pushes of `rows` device
 * rows: [0] the push, [1] a pull while that piece runs (it polls the piece and finds it not
 * done, unless the GPU was quicker), [2] a pull once the stream is synchronised (the batch is
 * complete), [3] sluice_batch_free of that batch. The stream is synchronised (not timed)
 * before each push, so no call waits for the GPU's earlier work. */
static void host_costs(job *j, const float *dx, int64_t rows, int n, double us[4]) {
    cudaStream_t stream = sluice_cuda_session_stream(j->s);
    double t[4][64];
    if (n > 64) n = 64;
    for (int k = 0; k < n; k++) {
        sluice_column c = {"x", SLUICE_F32, dx + (size_t)k * (size_t)rows, rows};
        CK(cudaStreamSynchronize(stream));
        double a = now_ms();
        sluice_status st = sluice_cuda_session_push_device(j->s, &c, 1);
        double b = now_ms();
        if (st != SLUICE_OK) fail_session(j->ctx, st, "pushing");
        pull_one(j);
        double c1 = now_ms();
        CK(cudaStreamSynchronize(stream));
        sluice_batch *out = NULL;
        double d = now_ms();
        st = sluice_session_pull(j->s, &out);
        double e = now_ms();
        if (st != SLUICE_OK) fail_session(j->ctx, st, "pulling");
        sluice_batch_free(out); /* NULL when the pull while it ran took it: then ~0 */
        double f = now_ms();
        t[0][k] = (b - a) * 1e3;
        t[1][k] = (c1 - b) * 1e3;
        t[2][k] = (e - d) * 1e3;
        t[3][k] = (f - e) * 1e3;
    }
    for (int i = 0; i < 4; i++) us[i] = bench_median(t[i], n);
    sluice_status st = sluice_session_flush(j->s);
    if (st == SLUICE_OK) st = sluice_session_reset(j->s);
    if (st != SLUICE_OK) fail_session(j->ctx, st, "flushing");
}

/* The gate: a host function queued on the session's stream holds it until released, so the
 * pieces pushed meanwhile queue behind it and then run back to back. It lets itself go after
 * 5 s, in case the host waited on the stream (the measurement is then void, not a hang). */
static int g_gate;
static void CUDART_CB gate_hold(void *arg) {
    (void)arg;
    double until = now_ms() + 5000;
    while (!__atomic_load_n(&g_gate, __ATOMIC_ACQUIRE) && now_ms() < until) {
    }
}

/* The GPU's time a piece of `rows` device rows with the host out of the way: `n` pushes
 * queued behind the gate in a session of depth 64, events around them; median over g_reps
 * of the elapsed time / n, in us. Then one stream of the same pushes, checked (verify_stream:
 * dx's rows are ref[r % period]). */
static double gpu_piece_us(const char *yaml, const float *dx, int64_t rows, int n,
                           const float *ref, int64_t period, const char *what) {
    job j;
    job_open(&j, yaml, rows, 64, 1);
    if (n > 48) n = 48; /* below the depth: no push waits */
    run_stream(&j, dx, rows, rows, n, 1, NULL); /* warm-up: the kernel, the pool */
    cudaStream_t stream = sluice_cuda_session_stream(j.s);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double t[16];
    for (int r = 0; r < g_reps; r++) {
        __atomic_store_n(&g_gate, 0, __ATOMIC_RELEASE);
        CK(cudaLaunchHostFunc(stream, gate_hold, NULL));
        CK(cudaEventRecord(e0, stream));
        for (int k = 0; k < n; k++) {
            sluice_column c = {"x", SLUICE_F32, dx + (size_t)k * (size_t)rows, rows};
            sluice_status st = sluice_cuda_session_push_device(j.s, &c, 1);
            if (st != SLUICE_OK) fail_session(j.ctx, st, "pushing");
        }
        CK(cudaEventRecord(e1, stream));
        __atomic_store_n(&g_gate, 1, __ATOMIC_RELEASE);
        drain(&j, 1);
        float ms = 0;
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = (double)ms * 1e3 / n;
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    sluice_status st = sluice_session_reset(j.s); /* the gated streams were never flushed */
    if (st != SLUICE_OK) fail_session(j.ctx, st, "resetting");
    verify_stream(&j, dx, rows, rows, n, 1, ref, period, what);
    job_close(&j);
    return bench_median(t, g_reps);
}

typedef struct row {
    char name[160], sluice[64], bar[64];
} row;
static row g_rows[64];
static int g_nrows;

static void add_row(const char *name, const char *sl, const char *bar) {
    row *r = &g_rows[g_nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->sluice, sizeof r->sluice, "%s", sl);
    snprintf(r->bar, sizeof r->bar, "%s", bar);
}

int main(int argc, char **argv) {
    /* each line out at once: a run stopped by a time limit still shows the jobs it did */
    setvbuf(stdout, NULL, _IOLBF, 0);
    int lg = argc > 1 ? atoi(argv[1]) : 26;
    int nb = argc > 2 ? atoi(argv[2]) : 8;
    if (argc > 3) g_reps = atoi(argv[3]);
    g_staging_only = argc > 4 && strcmp(argv[4], "staging") == 0;
    g_small_only = argc > 4 && strcmp(argv[4], "small") == 0;
    if (lg < 10 || lg > 28 || nb < 1 || nb > 64 || g_reps < 1 || g_reps > 15 ||
        (argc > 4 && !g_staging_only && !g_small_only)) {
        fprintf(stderr, "usage: stream_bench [log2_rows 10..28] [batches 1..64] [reps 1..15] "
                        "[staging | small]\n");
        return 2;
    }
    if (!sluice_backend_available(SLUICE_BACKEND_CUDA)) {
        fprintf(stderr, "stream_bench: no usable GPU\n");
        return 77;
    }
    int64_t n = (int64_t)1 << lg;
    size_t bytes = (size_t)n * 4, total = bytes * (size_t)nb;
    char job_name[160], fig[64], bar[64];

    /* Input: random signs (about half kept by x > 0), the same values in both memories. */
    float *hmalloc = malloc(total), *hpinned = NULL;
    if (!hmalloc) return 1;
    CK(cudaMallocHost((void **)&hpinned, total));
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)n * (size_t)nb; i++) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        hmalloc[i] = (float)((int64_t)(h >> 40) - (1 << 23)) / (float)(1 << 20);
    }
    memcpy(hpinned, hmalloc, total);

    if (g_small_only) goto small_batches;
    double h2d, duplex;
    bus_limit(total, bytes, &h2d, &duplex);
    printf("bus: pinned H2D %.1f ms (%.1f GB/s), H2D+D2H at once %.1f ms (%.1f GB/s each way), "
           "%d x %zu bytes\n", h2d, total / h2d / 1e6, duplex, total / duplex / 1e6, nb, bytes);
    snprintf(fig, sizeof fig, "%.1f ms", duplex);
    add_row("bus: pinned H2D and D2H of the scan's bytes at once", fig, "");
    snprintf(fig, sizeof fig, "%.1f ms", h2d);
    add_row("bus: pinned H2D of the input alone", fig, "");

    /* Host-resident streams through the scan and the filter. */
    const char *names[2] = {"exclusive scan", "filter: x > 0"};
    const char *yamls[2] = {SCAN, FILTER};
    char staging_env[160];
    const char *ev[4] = {"SLUICE_CUDA_STAGING_THREADS", "SLUICE_CUDA_STAGING_SLOTS",
                         "SLUICE_CUDA_STAGING_MB", "SLUICE_CUDA_STAGING_NT"};
    snprintf(staging_env, sizeof staging_env, "malloc, staging threads %s slots %s MB %s nt %s",
             getenv(ev[0]) ? getenv(ev[0]) : "default", getenv(ev[1]) ? getenv(ev[1]) : "default",
             getenv(ev[2]) ? getenv(ev[2]) : "default", getenv(ev[3]) ? getenv(ev[3]) : "default");
    const char *mem[4] = {g_staging_only ? staging_env : "malloc",
                          "cudaMallocHost (not known to sluice)", "sluice_cuda_host_alloc",
                          "malloc, 8 staging threads"};
    for (int pl = 0; pl < 2; pl++) {
        double limit = pl == 0 ? duplex : h2d;
        /* Three session setups: depth 1 and the default depth with max_batch_rows = the
         * batch (one piece a push), then the default depth with the default max_batch_rows
         * (2^22: a larger push is cut into pieces in flight, so the lone copy in at the
         * stream's start and the lone copy out at its end are a piece's, not a batch's). */
        for (int setup = 0; setup < 3; setup++) {
            if (g_staging_only && setup != 1) continue;
            int depth = setup == 0, pieces = setup == 2;
            int64_t max_rows = pieces ? 0 : n;
            const char *how = setup == 0 ? "1" : pieces ? "default, max_batch_rows default (pieces)"
                                                        : "default";
            job j, j8;
            job_open(&j8, yamls[pl], max_rows, depth, 0); /* for the 8-thread case */
            job_open(&j, yamls[pl], max_rows, depth, 0);
            float *own = NULL; /* pinned memory of the session's context */
            sluice_status ast = sluice_cuda_host_alloc(j.ctx, total, (void **)&own);
            if (ast != SLUICE_OK) fail_session(j.ctx, ast, "sluice_cuda_host_alloc");
            memcpy(own, hmalloc, total);
            const float *srcs[4] = {hmalloc, hpinned, own, hmalloc};
            for (int m = 0; m < (g_staging_only ? 1 : depth ? 3 : 4); m++) {
                if (m == 3) { /* read at a session's first large staging copy */
                    setenv("SLUICE_CUDA_STAGING_THREADS", "8", 1);
                    job_close(&j);
                    j = j8;
                }
                double pu;
                char what[200];
                snprintf(what, sizeof what, "%s, %d host batches of 2^%d f32 from %s, depth %s",
                         names[pl], nb, lg, mem[m], how);
                double t = time_stream(&j, srcs[m], n, n, nb, 0, &pu, srcs[m], n * nb, what);
                printf("%s, %d host batches of 2^%d f32 from %s, depth %s: %.1f ms (%.2fx the "
                       "limit), %.0f us in push, %lld rows out\n", names[pl], nb, lg, mem[m],
                       how, t, t / limit, pu, (long long)j.rows_out);
                snprintf(job_name, sizeof job_name, "%s, %d x 2^%d host f32 from %s, depth %s "
                         "(time / %s)", names[pl], nb, lg, mem[m], how,
                         pl == 0 ? "H2D+D2H at once" : "H2D alone");
                snprintf(fig, sizeof fig, "%.1f ms = %.2fx", t, t / limit);
                snprintf(bar, sizeof bar, "%s", depth ? "" : m == 0 ? "<= 1.5x" : m == 2 ? "<= 1.15x" : "");
                add_row(job_name, fig, bar);
            }
            if (!g_staging_only) unsetenv("SLUICE_CUDA_STAGING_THREADS");
            if (depth || g_staging_only) job_close(&j8); /* else j is j8 by now */
            job_close(&j); /* own goes with its context */
        }
    }

    if (g_staging_only) goto table;

small_batches:;
    /* Small against large batches over the same 2^28 rows (fewer when memory is short). */
    int64_t all = (int64_t)1 << 28, small = (int64_t)1 << 20, large = (int64_t)1 << 26;
    float *dx;
    CK(cudaMalloc((void **)&dx, (size_t)all * 4));
    for (int64_t at = 0; at < all; at += n) {
        int64_t m = all - at < n ? all - at : n;
        CK(cudaMemcpy(dx + at, hmalloc, (size_t)m * 4, cudaMemcpyHostToDevice));
    }
    double t_small, t_large, pu_small, pu_large, idle_us[4];
    {
        job j;
        job_open(&j, MFC, large, 0, 1);
        /* dx holds hmalloc's first n rows over and over: row r is hmalloc[r % n] */
        t_large = time_stream(&j, dx, large, large, (int)(all / large), 1, &pu_large, hmalloc, n,
                              "device-resident map+filter+count, 2^26-row batches");
        memset(g_began_with, 0, sizeof g_began_with);
        t_small = time_stream(&j, dx, small, small, (int)(all / small), 1, &pu_small, hmalloc, n,
                              "device-resident map+filter+count, 2^20-row batches");
        host_costs(&j, dx, small, 64, idle_us);
        job_close(&j);
    }
    int64_t pushes = 0, began[5]; /* before gpu_piece_us's own pushes */
    for (int i = 0; i < 5; i++) pushes += began[i] = g_began_with[i];
    double gpu_us = gpu_piece_us(MFC, dx, small, 48, hmalloc, n,
                                 "device-resident map+filter+count, 2^20-row batches at depth 64");
    printf("device-resident map+filter+count scan, 2^28 rows: 2^26-row batches %.2f ms (%.1f us "
           "a push), 2^20-row batches %.2f ms (%.1f us a push): %.2f of the throughput\n",
           t_large, pu_large, t_small, pu_small, t_large / t_small);
    printf("  2^20-row pushes (warm-up and timed runs) that began with 0/1/2/3/4+ batches in "
           "flight: %lld/%lld/%lld/%lld/%lld of %lld (3 at the default depth: the push first waits "
           "for the oldest)\n", (long long)began[0], (long long)began[1], (long long)began[2],
           (long long)began[3], (long long)began[4], (long long)pushes);
    printf("  host time with the GPU idle (median of 64): push %.1f us, pull while it runs %.1f "
           "us, pull of the complete batch %.1f us, sluice_batch_free %.1f us\n", idle_us[0],
           idle_us[1], idle_us[2], idle_us[3]);
    printf("  GPU time a 2^20-row piece, 48 queued back to back behind a gate: %.1f us\n", gpu_us);
    snprintf(fig, sizeof fig, "%.2f (%.1f us a push)", t_large / t_small, pu_small);
    add_row("device-resident map+filter+count, 2^20-row batches / 2^26-row throughput", fig, ">= 0.5");
    snprintf(fig, sizeof fig, "%.1f + %.1f + %.1f + %.1f us", idle_us[0], idle_us[1], idle_us[2],
             idle_us[3]);
    add_row("  2^20-row device push, host time with the GPU idle: push + pull (running) + pull "
            "(complete) + free", fig, "");
    snprintf(fig, sizeof fig, "%.1f us", gpu_us);
    add_row("  2^20-row device piece, GPU time back to back", fig, "");
    /* What a piece's GPU time is made of: the same pipeline at a quarter and four times the
     * rows (the part that does not grow with the rows is the fixed cost of a launch and its
     * look-back), and pipelines with one look-back each (the scan's f32 sum, the filter's
     * kept-row count) at 2^20 rows. */
    {
        const struct { const char *yaml, *name; int64_t rows; } more[] = {
            {MFC, "map+filter+count", small / 4}, {MFC, "map+filter+count", small * 4},
            {SCAN, "exclusive f32 sum scan", small}, {FILTER, "filter x > 0", small}};
        for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
            char what[128];
            snprintf(what, sizeof what, "device-resident %s, 2^%d-row pieces at depth 64",
                     more[i].name, more[i].rows == small / 4 ? 18 : more[i].rows == small ? 20 : 22);
            double us = gpu_piece_us(more[i].yaml, dx, more[i].rows, 48, hmalloc, n, what);
            printf("  GPU time a piece, 48 queued back to back behind a gate: %s: %.1f us\n", what, us);
            snprintf(fig, sizeof fig, "%.1f us", us);
            add_row(what, fig, "");
        }
    }
    CK(cudaFree(dx));
    if (g_small_only) goto table;

    /* Host-resident: the scan over as many rows as the input holds, from pinned memory of
     * the session's context (read by DMA: the bus, not a CPU copy, is what is shared). */
    int64_t hall = (int64_t)total / 4;
    if (hall >= large) {
        hall = hall / large * large;
        job j;
        job_open(&j, SCAN, large, 0, 0);
        float *own = NULL;
        sluice_status ast = sluice_cuda_host_alloc(j.ctx, (size_t)hall * 4, (void **)&own);
        if (ast != SLUICE_OK) fail_session(j.ctx, ast, "sluice_cuda_host_alloc");
        memcpy(own, hmalloc, (size_t)hall * 4);
        t_large = time_stream(&j, own, large, large, (int)(hall / large), 0, &pu_large, own, hall,
                              "host-resident scan from sluice_cuda_host_alloc, 2^26-row batches");
        t_small = time_stream(&j, own, small, small, (int)(hall / small), 0, &pu_small, own, hall,
                              "host-resident scan from sluice_cuda_host_alloc, 2^20-row batches");
        job_close(&j);
        printf("host-resident scan, %lld pinned rows: 2^26-row batches %.2f ms (%.1f us a push), "
               "2^20-row batches %.2f ms (%.1f us a push): %.2f of the throughput\n",
               (long long)hall, t_large, pu_large, t_small, pu_small, t_large / t_small);
        snprintf(fig, sizeof fig, "%.2f (%.1f us a push)", t_large / t_small, pu_small);
        add_row("host-resident scan, 2^20-row batches / 2^26-row throughput", fig, ">= 0.5");
    }

table:
    printf("\n| job (H200, one run) | sluice | bar |\n|---|---|---|\n");
    for (int i = 0; i < g_nrows; i++)
        printf("| %s | %s | %s |\n", g_rows[i].name, g_rows[i].sluice, g_rows[i].bar);
    CK(cudaFreeHost(hpinned));
    free(hmalloc);
    return 0;
}
