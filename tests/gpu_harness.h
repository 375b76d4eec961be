/* gpu_harness.h — the harness the CPU-against-CUDA suites share (gpu_backend.c, gpu_reduce.c):
 * random input tables for a pipeline, a stream cut into pushed pieces on the host or the
 * device, and the switches SLUICE_GPU_TEST_SUBJECT=cpu and SLUICE_TEST_SMALL. Each suite is
 * one translation unit that includes it once. */
#ifndef SLUICE_GPU_HARNESS_H
#define SLUICE_GPU_HARNESS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "sluice_cuda.h"
#include "testutil.h"
#include "common/types.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define CUDA_OK(call) ck_assert_int_eq((int)(call), (int)cudaSuccess)
#define MAXCOLS 24

static bool g_subject_cpu; /* harness check without a GPU */
static bool g_small;

/* ---- host tables ------------------------------------------------------------------------- */

typedef struct table {
    int64_t rows;
    int ncols;
    char *names[MAXCOLS];
    sluice_type types[MAXCOLS];
    uint8_t *data[MAXCOLS];
    int64_t lengths[MAXCOLS]; /* inputs: an offsets column has nsegments + 1 */
} table;

static void table_free(table *t) {
    for (int i = 0; i < t->ncols; i++) {
        free(t->names[i]);
        free(t->data[i]);
    }
    memset(t, 0, sizeof *t);
}

/* Appends a batch's rows (host or device memory) to t. */
static void table_append(table *t, const sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    if (t->ncols == 0) {
        t->ncols = (int)sluice_batch_column_count(b);
        for (int i = 0; i < t->ncols; i++) {
            sluice_column c;
            ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
            t->names[i] = strdup(c.name);
            t->types[i] = c.type;
        }
    }
    ck_assert_int_eq((int)sluice_batch_column_count(b), t->ncols);
    for (int i = 0; i < t->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
        ck_assert_int_eq(c.length, n);
        size_t w = sluice_type_size(c.type);
        t->data[i] = realloc(t->data[i], (size_t)(t->rows + n) * w + 8);
        ck_assert_ptr_nonnull(t->data[i]);
        if (n == 0) continue;
        if (sluice_batch_on_device(b))
            CUDA_OK(cudaMemcpy(t->data[i] + (size_t)t->rows * w, c.data, (size_t)n * w,
                               cudaMemcpyDeviceToHost));
        else
            memcpy(t->data[i] + (size_t)t->rows * w, c.data, (size_t)n * w);
    }
    t->rows += n;
}

/* ---- random inputs ------------------------------------------------------------------------ */

static void fill_random(tu_rng *r, sluice_type t, void *out, int64_t n, int flavour) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = tu_rng_next(r);
        double f = tu_rng_uniform(r) * 4.0 - 2.0;
        if (flavour == 1) u &= 7, f = (double)(int)(f * 2); /* few values: ties, segments */
        sl_value v;
        switch (t) {
        case SLUICE_BOOL: v.type = t, v.u = u & 1; break;
        case SLUICE_F16: case SLUICE_F32: case SLUICE_F64: v.type = SLUICE_F64, v.f = f; break;
        default:
            v.type = t;
            v.u = u;
            if (sl_type_is_signed(t)) v.i = (int64_t)u; /* stores truncate: any bits are fine */
            break;
        }
        if (sl_type_is_float(t)) {
            v = sl_value_cast(v, t);
        }
        sl_value_store(t, out, i, v);
    }
}

/* Inputs for pipeline p with `rows` rows; an offsets input gets random segments. */
static void make_inputs(const sluice_pipeline *p, int64_t rows, uint64_t seed, table *in) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    memset(in, 0, sizeof *in);
    in->rows = rows;
    in->ncols = (int)sluice_pipeline_input_count(p);
    for (int i = 0; i < in->ncols; i++) {
        sluice_column_info ci;
        ck_assert_int_eq(sluice_pipeline_input(p, (size_t)i, &ci), SLUICE_OK);
        in->names[i] = strdup(ci.name);
        in->types[i] = ci.type;
        if (ci.role == SLUICE_ROLE_OFFSETS) {
            int64_t cap = 2 * rows + 4;
            int64_t *off = malloc((size_t)cap * 8);
            int64_t k = 0, at = 0;
            off[k++] = 0;
            int avg = (int)(seed % 3 == 0 ? 1 : seed % 3 == 1 ? 8 : 300);
            while (at < rows) { /* empty segments too */
                int64_t len = tu_rng_range(&r, 0, 2 * avg);
                at = at + len > rows || k == cap - 1 ? rows : at + len;
                off[k++] = at;
            }
            in->data[i] = (uint8_t *)off;
            in->lengths[i] = k;
            continue;
        }
        in->data[i] = malloc((size_t)rows * sluice_type_size(ci.type) + 8);
        fill_random(&r, ci.type, in->data[i], rows, (int)((seed + (uint64_t)i) % 4 == 0));
        in->lengths[i] = rows;
    }
}

static int offsets_col(const sluice_pipeline *p, const table *in) {
    for (int i = 0; i < in->ncols; i++) {
        sluice_column_info ci;
        sluice_pipeline_input(p, (size_t)i, &ci);
        if (ci.role == SLUICE_ROLE_OFFSETS) return i;
    }
    return -1;
}

/* Columns of rows [r0, r1) of `in` (segments [s0, s1) for an offsets input, rebased to 0).
 * dev: device copies (caller frees with free_piece). */
typedef struct piece {
    sluice_column cols[MAXCOLS];
    void *owned[MAXCOLS];
    int n;
} piece;

static void make_piece(const sluice_pipeline *p, const table *in, int64_t r0, int64_t r1,
                       int64_t s0, int64_t s1, bool dev, piece *pc) {
    int oc = offsets_col(p, in);
    memset(pc, 0, sizeof *pc);
    pc->n = in->ncols;
    for (int i = 0; i < in->ncols; i++) {
        sluice_column *c = &pc->cols[i];
        c->name = in->names[i];
        c->type = in->types[i];
        size_t w = sluice_type_size(c->type);
        const void *src;
        size_t bytes;
        if (i == oc) {
            int64_t *off = malloc((size_t)(s1 - s0 + 1) * 8);
            const int64_t *all = (const int64_t *)in->data[i];
            for (int64_t k = s0; k <= s1; k++) off[k - s0] = all[k] - all[s0];
            pc->owned[i] = off;
            c->length = s1 - s0 + 1;
            src = off;
            bytes = (size_t)c->length * 8;
        } else {
            c->length = r1 - r0;
            src = in->data[i] + (size_t)r0 * w;
            bytes = (size_t)c->length * w;
        }
        c->data = src;
        if (dev) {
            void *d;
            CUDA_OK(cudaMalloc(&d, bytes + 8));
            CUDA_OK(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice));
            /* A pageable host-to-device cudaMemcpy may return before its DMA lands, and the
             * session's non-blocking stream is not ordered after the legacy stream: wait, as
             * sluice_cuda.h asks of work on other streams. */
            CUDA_OK(cudaDeviceSynchronize());
            free(pc->owned[i]);
            pc->owned[i] = d;
            c->data = d;
        }
    }
}

static void free_piece(piece *pc, bool dev) {
    for (int i = 0; i < pc->n; i++) {
        if (!pc->owned[i]) continue;
        if (dev) cudaFree(pc->owned[i]);
        else free(pc->owned[i]);
    }
}

/* ---- running a pipeline ------------------------------------------------------------------- */

typedef enum mode { HOST_IN_HOST_OUT, DEVICE_IN_DEVICE_OUT, HOST_IN_DEVICE_OUT } mode;

/* The subject session's sort_memory_bytes and pipeline_depth (0: the backend's default). */
static int64_t g_sort_budget;
static int g_depth;

static sluice_status open_session(sluice_pipeline *p, bool subject, mode m, int64_t max_rows,
                                  sluice_session **s) {
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.max_batch_rows = max_rows;
    if (subject) o.sort_memory_bytes = g_sort_budget;
    if (subject) o.pipeline_depth = g_depth;
    if (!subject || g_subject_cpu) {
        o.backend = SLUICE_BACKEND_CPU;
        return sluice_session_open(p, &o, s);
    }
    sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
    co.outputs_on_device = m != HOST_IN_HOST_OUT;
    return sluice_cuda_session_open(p, &o, &co, s);
}

static void fail_with_diag(sluice_context *ctx, const char *what, const char *name, sluice_status st) {
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_abort_msg("%s (pipeline %s): %s: %s", what, name, sluice_status_name(st), d ? d->message : "");
}

/* Runs the stream `in` through p cut into the pieces that start at cuts[0..ncuts) (rows;
 * for an offsets pipeline, segment indices), pulling after every push. */
static void run_stream(sluice_context *ctx, sluice_pipeline *p, bool subject, mode m,
                       const table *in, const int64_t *cuts, int ncuts, int64_t max_rows,
                       table *out) {
    sluice_session *s;
    sluice_status st = open_session(p, subject, m, max_rows, &s);
    if (st != SLUICE_OK) fail_with_diag(ctx, "open", sluice_pipeline_name(p), st);
    memset(out, 0, sizeof *out);
    int oc = offsets_col(p, in);
    int64_t nseg = oc >= 0 ? in->lengths[oc] - 1 : 0;
    bool dev = subject && !g_subject_cpu && m == DEVICE_IN_DEVICE_OUT;
    for (int k = 0; k <= ncuts; k++) {
        int64_t a = k == 0 ? 0 : cuts[k - 1];
        int64_t b = k == ncuts ? (oc >= 0 ? nseg : in->rows) : cuts[k];
        int64_t r0 = a, r1 = b, s0 = 0, s1 = 0;
        if (oc >= 0) {
            const int64_t *off = (const int64_t *)in->data[oc];
            s0 = a, s1 = b, r0 = off[a], r1 = off[b];
        }
        piece pc;
        make_piece(p, in, r0, r1, s0, s1, dev, &pc);
        st = dev ? sluice_cuda_session_push_device(s, pc.cols, (size_t)pc.n)
                 : sluice_session_push(s, pc.cols, (size_t)pc.n);
        /* Device input is read by work queued on the session's stream: it may be freed only
         * once that work is done (sluice_cuda.h, "When device memory may be reused"). */
        if (dev) CUDA_OK(cudaStreamSynchronize(sluice_cuda_session_stream(s)));
        free_piece(&pc, dev);
        if (st != SLUICE_OK) fail_with_diag(ctx, "push", sluice_pipeline_name(p), st);
        /* Device outputs are ready in the session stream's order (sluice_cuda.h): the copies
         * below run on another stream, so wait for it first. */
        if (subject && !g_subject_cpu && m != HOST_IN_HOST_OUT)
            CUDA_OK(cudaStreamSynchronize(sluice_cuda_session_stream(s)));
        sluice_batch *b_out;
        while ((st = sluice_session_pull(s, &b_out)) == SLUICE_OK && b_out) {
            table_append(out, b_out);
            sluice_batch_free(b_out);
        }
    }
    st = sluice_session_flush(s);
    if (st != SLUICE_OK) fail_with_diag(ctx, "flush", sluice_pipeline_name(p), st);
    if (subject && !g_subject_cpu && m != HOST_IN_HOST_OUT)
        CUDA_OK(cudaStreamSynchronize(sluice_cuda_session_stream(s)));
    sluice_batch *b_out;
    while ((st = sluice_session_pull(s, &b_out)) == SLUICE_OK && b_out) {
        table_append(out, b_out);
        sluice_batch_free(b_out);
    }
    if (out->ncols == 0) { /* no batch came out: still name the outputs */
        out->ncols = (int)sluice_pipeline_output_count(p);
        for (int i = 0; i < out->ncols; i++) {
            sluice_column_info ci;
            sluice_pipeline_output(p, (size_t)i, &ci);
            out->names[i] = strdup(ci.name);
            out->types[i] = ci.type;
        }
    }
    sluice_session_close(s);
}

/* ---- comparing -------------------------------------------------------------------------- */

/* Floats: within rel of the larger of |a|, |b| and the column's scale (scans sum in another
 * order on the GPU); NaN only where the reference has NaN. Everything else exactly. */
static void compare(const char *name, const char *what, const table *ref, const table *got) {
    ck_assert_msg(ref->rows == got->rows, "%s, %s: %lld rows, the CPU gives %lld", name, what,
                  (long long)got->rows, (long long)ref->rows);
    ck_assert_int_eq(ref->ncols, got->ncols);
    for (int c = 0; c < ref->ncols; c++) {
        sluice_type t = ref->types[c];
        ck_assert_int_eq(t, got->types[c]);
        if (!sl_type_is_float(t)) {
            size_t w = sluice_type_size(t);
            for (int64_t i = 0; i < ref->rows; i++)
                if (memcmp(ref->data[c] + i * (int64_t)w, got->data[c] + i * (int64_t)w, w) != 0) {
                    sl_value a = sl_value_load(t, ref->data[c], i), b = sl_value_load(t, got->data[c], i);
                    ck_abort_msg("%s, %s: column %s row %lld: got %lld, CPU %lld", name, what,
                                 ref->names[c], (long long)i, (long long)b.i, (long long)a.i);
                }
            continue;
        }
        double scale = 0;
        for (int64_t i = 0; i < ref->rows; i++) {
            double a = sl_value_load(t, ref->data[c], i).f;
            if (isfinite(a) && fabs(a) > scale) scale = fabs(a);
        }
        double rel = t == SLUICE_F16 ? 2e-3 : t == SLUICE_F32 ? 1e-4 : 1e-9;
        /* long float sums lose about log2(n) bits more on either side */
        if (ref->rows > 4096) rel *= 16;
        for (int64_t i = 0; i < ref->rows; i++) {
            double a = sl_value_load(t, ref->data[c], i).f, b = sl_value_load(t, got->data[c], i).f;
            if (isnan(a) && isnan(b)) continue;
            if (isinf(a) && a == b) continue;
            double tol = rel * fmax(scale, 1.0);
            if (!(fabs(a - b) <= tol))
                ck_abort_msg("%s, %s: column %s row %lld: got %.9g, CPU %.9g (tolerance %.3g)",
                             name, what, ref->names[c], (long long)i, b, a, tol);
        }
    }
}

#endif
