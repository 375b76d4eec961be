/* test_mpi_session.c — the distributed session (include/sluice_mpi.h) against one process, run
 * under mpirun with any number of ranks (CTest runs it at 1, 2, 3 and 4).
 *
 * Random cuts. For every case and seed, every rank draws the same global stream, the same
 * split among the ranks (parts may be empty; whole segments with an offsets input) and the
 * same cut of each part into batches. Each rank pushes its part through a distributed
 * session, pass after pass; rank 0 also pushes all the ranks' batches in order through one
 * local session, the reference. The ranks' results, gathered in rank order, must equal the
 * reference: byte for byte for exact pipelines (integers, min/max, counts, compaction,
 * sorts, segments), within a relative 1e-4 (f32) for float sums and recurrences, whose
 * grouping differs at rank boundaries (sluice_mpi.h, Numerics). Each rank's output range
 * must be its place in the result.
 *
 *   test_mpi_session [cases [SEEDS [cpu|cuda]]]
 *                               the cases above, SEEDS seeds each (6), on the given backend
 *                               (cpu; the reference is always one CPU process); every case
 *                               must run and match on either backend (both carry scan state
 *                               between ranks: core/runtime/carry.h)
 *   test_mpi_session fail       one rank pushes a bad batch: every rank's flush fails with
 *                               that rank's status and a diagnostic naming it; then ranks
 *                               that opened different pipelines all fail to open
 *   test_mpi_session transport  SLUICE_MPI_TRANSPORT's choice on the CPU backend: auto falls
 *                               back to MPI saying why (NCCL absent, not NCCL, the CPU
 *                               backend), mpi is MPI, nccl is refused on every rank with a
 *                               clear diagnostic, a bad or differing value too; explain
 *                               names the knob for a stream-wide sort
 *   test_mpi_session die        the last rank dies mid-pass (SIGKILL): the job must end
 *                               (tests/mpi/expect_death.sh checks it ends, non-zero)
 *
 * Exit status 0 on every rank when all checks pass, 1 otherwise. No Check: its forking
 * does not mix with MPI. */
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "sluice.h"
#include "sluice_mpi.h"

static int g_rank, g_size, g_failures;
static int g_carried; /* runs whose scans carried state between ranks, compared */
static int g_reduced; /* runs of a pipeline with a reduce, compared */
static sluice_backend g_backend = SLUICE_BACKEND_CPU;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: FAIL: ", g_rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_failures++;
}

static void print_diags(sluice_context *ctx) {
    char msg[1024];
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++) {
        sluice_diagnostic_format(sluice_context_diagnostic(ctx, i), msg, sizeof msg);
        fprintf(stderr, "rank %d:   %s", g_rank, msg);
    }
}

/* ---- deterministic data ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int64_t rng_range(uint64_t *s, int64_t lo, int64_t hi) { /* [lo, hi] */
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* A column's values, by its name: `run*` runs of equal keys (segments that span ranks),
 * `head*` sparse head flags, anything else small random values (many ties for sorts), with
 * NaNs, infinities and signed zeros among floats. */
static void fill_column(const char *name, sluice_type t, void *data, int64_t n, uint64_t *s) {
    int64_t runlen = rng_range(s, 1, 400), key = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (!strncmp(name, "run", 3)) {
            if (i % runlen == 0 && rng_range(s, 0, 2) != 0) key = rng_range(s, 0, 4);
            v = key;
        } else if (!strncmp(name, "head", 4)) {
            v = rng_range(s, 0, 60) == 0;
        } else {
            v = rng_range(s, -40, 40);
        }
        switch (t) {
        case SLUICE_BOOL: ((uint8_t *)data)[i] = (uint8_t)(v != 0); break;
        case SLUICE_I8: ((int8_t *)data)[i] = (int8_t)v; break;
        case SLUICE_I16: ((int16_t *)data)[i] = (int16_t)v; break;
        case SLUICE_I32: ((int32_t *)data)[i] = (int32_t)(v * 1000003); break;
        case SLUICE_I64: ((int64_t *)data)[i] = v * 7919; break;
        case SLUICE_U8: ((uint8_t *)data)[i] = (uint8_t)(v + 40); break;
        case SLUICE_U16: ((uint16_t *)data)[i] = (uint16_t)(v + 40); break;
        case SLUICE_U32: ((uint32_t *)data)[i] = (uint32_t)(v + 40) * 2654435761u; break;
        case SLUICE_U64: ((uint64_t *)data)[i] = (uint64_t)(v + 40) << 40; break;
        case SLUICE_F32:
        case SLUICE_F64: {
            double d = (double)v / 8.0;
            int64_t odd = rng_range(s, 0, 200);
            if (odd == 0) d = NAN;
            else if (odd == 1) d = -NAN;
            else if (odd == 2) d = -0.0;
            else if (odd == 3) d = INFINITY;
            if (t == SLUICE_F32) ((float *)data)[i] = (float)d;
            else ((double *)data)[i] = d;
            break;
        }
        default: break;
        }
    }
}

/* ---- the cases --------------------------------------------------------------------------- */

typedef struct test_case {
    const char *name;
    const char *yaml;
    bool exact;      /* every output byte-identical to one process */
    int64_t max_batch_rows; /* the sessions' (0: default) */
    bool carries;    /* a scan carries state between ranks (not reset: batch / offsets) */
    int passes;      /* over each rank's part (sluice_mpi.h, Passes), worked out by hand */
    bool reduce;     /* has a reduce stage: counted apart (on CUDA, the reduce's carries) */
} test_case;

#define HDR "sluice: 1\nname: "
static const test_case cases[] = {
    {"scans", HDR "scans\ninput: {x: i32, u: u8, f: f32}\nstages:\n"
     "  - scan: {of: x, op: sum, into: sx}\n"
     "  - scan: {of: u, op: xor, into: ux}\n"
     "  - scan: {of: x, op: min, kind: exclusive, into: mn}\n"
     "  - scan: {of: f, op: max, into: fm}\n"
     "  - scan: {op: count, kind: exclusive, into: c}\n", true, 1000, true, 2, false},
    {"linrec-int", HDR "li\ninput: {a: i32, b: i32}\nstages:\n"
     "  - scan: {op: linrec, a: a, b: b, into: h}\n", true, 0, true, 2, false},
    {"declared", HDR "decl\ninput: {a: i64, b: i64}\noperators:\n  affine:\n"
     "    state: {a: i64, b: i64}\n    identity: {a: 1, b: 0}\n"
     "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\nstages:\n"
     "  - scan: {op: affine, of: {a: a, b: b}, into: {a: ha, b: hb}}\n", true, 777, true, 2, false},
    {"head-flags", HDR "hf\ninput: {x: i32, head: bool}\nstages:\n"
     "  - segmented_scan: {of: x, op: sum, segments: head, into: s}\n"
     "  - segmented_scan: {of: x, op: max, kind: exclusive, segments: head, into: m}\n",
     true, 0, true, 2, false},
    {"key-segments", HDR "ks\ninput: {run: i16, x: i64}\nstages:\n"
     "  - segmented_scan: {of: x, op: sum, segments: {key: run}, into: s}\n"
     "  - segmented_scan: {op: count, kind: exclusive, segments: {key: run}, into: c}\n",
     true, 500, true, 2, false},
    {"filter-positions", HDR "fp\ninput: {x: f32, id: u32}\nstages:\n"
     "  - filter: x > 0\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n", true, 0, true, 2, false},
    {"two-phases", HDR "tp\ninput: {x: i32}\nstages:\n"
     "  - scan: {of: x, op: sum, into: s1}\n"
     "  - scan: {of: s1, op: max, into: m}\n"
     "  - filter: m - s1 > 2000000\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n", true, 900, true, 4, false},
    {"sort-u32", HDR "su\ninput: {k: u32, v: i32}\nstages:\n"
     "  - sort: {key: k}\n"
     "  - scan: {of: v, op: sum, into: sv}\n", true, 0, true, 2, false},
    {"sort-keys", HDR "sk\ninput: {a: i16, b: f64, id: u32}\nstages:\n"
     "  - sort: {keys: [a, b], order: [ascending, descending]}\n", true, 0, false, 2, false},
    {"sort-bits", HDR "sb\ninput: {k: u32, id: u32}\nstages:\n"
     "  - sort: {key: k, bits: [0, 4], order: descending}\n", true, 0, false, 2, false},
    {"per-batch", HDR "pb\ninput: {x: i32}\nstages:\n"
     "  - scan: {of: x, op: sum, reset: batch, into: s}\n"
     "  - sort: {key: x, per: batch}\n", true, 0, false, 2, false},
    {"offsets", HDR "of\ninput: {v: i32, rows: {type: i64, role: offsets}}\nstages:\n"
     "  - segmented_scan: {of: v, op: sum, segments: rows, into: cs}\n", true, 0, false, 2, false},
    {"filter-sort-segments", HDR "fss\ninput: {x: i32, run: u16}\nstages:\n"
     "  - filter: x % 3 != 0\n"
     "  - sort: {key: run, order: descending}\n"
     "  - scan: {op: count, kind: exclusive, into: pos}\n"
     "  - segmented_scan: {of: x, op: sum, segments: {key: run}, into: ks}\n",
     true, 0, true, 2, false},
    {"map-only", HDR "mo\ninput: {x: f64}\nstages:\n"
     "  - map: {y: x * 2.0 + 1.0}\n", true, 0, false, 2, false},
    {"float-sums", HDR "fs\ninput: {f: f32, fa: f32, fb: f32}\nstages:\n"
     "  - map: {g: 'isnan(f) || isinf(f) ? 0.5 : f', a: 'isnan(fa) || isinf(fa) ? 0.5 : fa / 8.0',"
     " b: 'isnan(fb) || isinf(fb) ? 0.0 : fb'}\n"
     "  - scan: {of: g, op: sum, into: s}\n"
     "  - scan: {op: linrec, a: a, b: b, into: h}\n", false, 0, true, 2, false},
    /* reduce: a segment spanning ranks is emitted once, by the rank where it ends; the index
     * and the rows after the reduce are global. Carried reduces: rows exact from pass 2 (who
     * emits the open segment is known after pass 1), so 3 passes; a scan after one, 4; a
     * second carried reduce after one, 5. */
    {"reduce-key", HDR "rk\ninput: {run: i16, x: i64}\nstages:\n"
     "  - reduce:\n      segments: {key: run}\n      index: seg\n      values:\n"
     "        - {op: sum, of: x, into: s}\n        - {op: count, into: n}\n"
     "        - {op: min, of: x, into: mn}\n", true, 500, true, 3, true},
    {"reduce-key-after", HDR "rka\ninput: {run: u8, x: i32}\nstages:\n"
     "  - reduce: {segments: {key: run}, index: seg, values: [{op: sum, of: x, into: s},"
     " {op: count, into: n}]}\n"
     "  - filter: n > 2\n"
     "  - scan: {of: s, op: sum, into: cum}\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n", true, 0, true, 4, true},
    {"reduce-head", HDR "rh\ninput: {x: i32, head: bool}\nstages:\n"
     "  - reduce: {segments: head, index: i, values: [{op: sum, of: x, into: s},"
     " {op: max, of: x, into: m}]}\n", true, 700, true, 3, true},
    {"reduce-bool-key", HDR "rbk\ninput: {x: i32, head: bool}\nstages:\n"
     "  - reduce: {segments: {key: head}, values: [{op: xor, of: x, into: s}]}\n"
     "  - map: {t: s + 1}\n", true, 0, true, 3, true},
    {"reduce-stream", HDR "rs\ninput: {x: i32, a: i32, b: i32}\nstages:\n"
     "  - reduce: {index: i, values: [{op: sum, of: x, into: s}, {op: count, into: n},"
     " {op: min, of: x, into: mn}, {op: linrec, a: a, b: b, into: h}]}\n"
     "  - map: {t: s * 2}\n", true, 900, true, 3, true},
    {"reduce-per-batch", HDR "rpb\ninput: {run: i32, x: i32}\nstages:\n"
     "  - reduce: {segments: {key: run}, index: seg, per: batch, values: [{op: sum, of: x,"
     " into: s}]}\n"
     "  - scan: {of: s, op: max, into: best}\n", true, 0, true, 3, true},
    {"reduce-stream-per-batch", HDR "rspb\ninput: {x: i64}\nstages:\n"
     "  - reduce: {index: i, per: batch, values: [{op: sum, of: x, into: s},"
     " {op: count, into: n}]}\n", true, 0, false, 2, true},
    {"reduce-offsets", HDR "ro\ninput: {v: i32, rows: {type: i64, role: offsets}}\nstages:\n"
     "  - reduce: {segments: rows, index: k, values: [{op: sum, of: v, into: s},"
     " {op: count, into: n}]}\n", true, 0, false, 2, true},
    {"filter-reduce", HDR "fr\ninput: {x: i32, run: u16}\nstages:\n"
     "  - filter: x % 3 != 0\n"
     "  - reduce: {segments: {key: run}, index: seg, values: [{op: sum, of: x, into: s}]}\n",
     true, 0, true, 3, true},
    {"scan-reduce", HDR "sr\ninput: {x: i32, run: i16}\nstages:\n"
     "  - scan: {of: x, op: sum, into: s1}\n"
     "  - reduce: {segments: {key: run}, values: [{op: max, of: s1, into: m}]}\n",
     true, 0, true, 4, true},
    {"sort-reduce", HDR "sre\ninput: {run: u16, x: i32}\nstages:\n"
     "  - sort: {key: run}\n"
     "  - reduce: {segments: {key: run}, index: seg, values: [{op: sum, of: x, into: s}]}\n",
     true, 0, true, 3, true},
    {"reduce-reduce", HDR "rr\ninput: {run: i16, x: i32}\nstages:\n"
     "  - reduce: {segments: {key: run}, values: [{op: sum, of: x, into: s}]}\n"
     "  - reduce: {index: i, values: [{op: max, of: s, into: best}, {op: count, into: runs}]}\n",
     true, 0, true, 5, true},
    {"reduce-float", HDR "rf\ninput: {f: f64, run: i32}\nstages:\n"
     "  - map: {g: 'isnan(f) || isinf(f) ? 0.5 : f'}\n"
     "  - reduce: {segments: {key: run}, values: [{op: sum, of: g, into: s}]}\n",
     false, 0, true, 3, true},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* ---- one run ----------------------------------------------------------------------------- */

typedef struct stream {
    int64_t n;                /* rows */
    int64_t k;                /* segments (offsets input), else 0 */
    int ncols;
    sluice_column_info *info; /* pipeline inputs */
    void **data;              /* per input: n values, or k+1 offsets */
    int64_t *part;            /* size+1 boundaries: rows, or segments with offsets */
    int64_t *cuts;            /* per rank, 4 batch ends inside its part (unit as part) */
    int offsets_col;
} stream;

static void stream_free(stream *s) {
    for (int i = 0; i < s->ncols; i++) free(s->data[i]);
    free(s->data);
    free(s->info);
    free(s->part);
    free(s->cuts);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void make_stream(const sluice_pipeline *p, uint64_t seed, stream *s) {
    memset(s, 0, sizeof *s);
    uint64_t r = seed;
    s->n = rng_range(&r, 0, 9) == 0 ? rng_range(&r, 0, 3) : rng_range(&r, 1, 40000);
    s->ncols = (int)sluice_pipeline_input_count(p);
    s->info = calloc((size_t)s->ncols, sizeof *s->info);
    s->data = calloc((size_t)s->ncols, sizeof *s->data);
    s->offsets_col = -1;
    for (int i = 0; i < s->ncols; i++) {
        sluice_pipeline_input(p, (size_t)i, &s->info[i]);
        if (s->info[i].role == SLUICE_ROLE_OFFSETS) s->offsets_col = i;
    }
    if (s->offsets_col >= 0) {
        /* Segments of 0 to 60 rows. */
        int64_t *off = malloc(sizeof(int64_t) * ((size_t)s->n + 2));
        off[0] = 0;
        int64_t k = 0;
        while (off[k] < s->n) {
            int64_t len = rng_range(&r, 0, 60);
            off[k + 1] = off[k] + len > s->n ? s->n : off[k] + len;
            k++;
        }
        s->k = k;
        s->data[s->offsets_col] = off;
    }
    for (int i = 0; i < s->ncols; i++) {
        if (i == s->offsets_col) continue;
        s->data[i] = malloc(sluice_type_size(s->info[i].type) * ((size_t)s->n + 1));
        fill_column(s->info[i].name, s->info[i].type, s->data[i], s->n, &r);
    }
    int64_t units = s->offsets_col >= 0 ? s->k : s->n;
    s->part = calloc((size_t)(g_size > 0 ? g_size : 1) + 1, sizeof(int64_t));
    for (int q = 1; q < g_size; q++) s->part[q] = rng_range(&r, 0, units);
    s->part[g_size] = units;
    qsort(s->part + 1, (size_t)(g_size > 1 ? g_size - 1 : 0), sizeof(int64_t), cmp_i64);
    if (rng_range(&r, 0, 3) == 0) /* even parts, sometimes */
        for (int q = 0; q <= g_size; q++) s->part[q] = units * q / g_size;
    s->cuts = calloc((size_t)(g_size > 0 ? g_size : 1) * 4, sizeof(int64_t));
    for (int q = 0; q < g_size; q++) {
        int64_t *c = s->cuts + q * 4;
        for (int j = 0; j < 3; j++) c[j] = rng_range(&r, s->part[q], s->part[q + 1]);
        c[3] = s->part[q + 1];
        qsort(c, 3, sizeof(int64_t), cmp_i64);
    }
}

/* The columns of batch [u0, u1) (rows, or segments with an offsets input) into cols; offs is
 * room for the rebased offsets. */
static void batch_columns(const stream *s, int64_t u0, int64_t u1, sluice_column *cols,
                          int64_t *offs) {
    int64_t r0 = u0, r1 = u1;
    if (s->offsets_col >= 0) {
        const int64_t *off = s->data[s->offsets_col];
        r0 = off[u0];
        r1 = off[u1];
        for (int64_t j = u0; j <= u1; j++) offs[j - u0] = off[j] - r0;
    }
    for (int i = 0; i < s->ncols; i++) {
        if (i == s->offsets_col) {
            cols[i] = (sluice_column){s->info[i].name, SLUICE_I64, offs, u1 - u0 + 1};
            continue;
        }
        size_t w = sluice_type_size(s->info[i].type);
        cols[i] = (sluice_column){s->info[i].name, s->info[i].type,
                                  (const char *)s->data[i] + (size_t)r0 * w, r1 - r0};
    }
}

/* Gathered results: per output column, the rows in order. */
typedef struct result {
    int ncols;
    sluice_type *type;
    char **data;
    int64_t rows, cap;
} result;

static void result_init(result *res, const sluice_pipeline *p) {
    memset(res, 0, sizeof *res);
    res->ncols = (int)sluice_pipeline_output_count(p);
    res->type = calloc((size_t)res->ncols + 1, sizeof *res->type);
    res->data = calloc((size_t)res->ncols + 1, sizeof *res->data);
    for (int j = 0; j < res->ncols; j++) {
        sluice_column_info info;
        sluice_pipeline_output(p, (size_t)j, &info);
        res->type[j] = info.type;
    }
}

static void result_append(result *res, const sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    if (res->rows + n > res->cap) {
        res->cap = (res->rows + n) * 2 + 16;
        for (int j = 0; j < res->ncols; j++)
            res->data[j] = realloc(res->data[j], (size_t)res->cap * sluice_type_size(res->type[j]));
    }
    for (int j = 0; j < res->ncols; j++) {
        sluice_column c;
        sluice_batch_column(b, (size_t)j, &c);
        size_t w = sluice_type_size(res->type[j]);
        memcpy(res->data[j] + (size_t)res->rows * w, c.data, (size_t)n * w);
    }
    res->rows += n;
}

static void result_free(result *res) {
    for (int j = 0; j < res->ncols; j++) free(res->data[j]);
    free(res->data);
    free(res->type);
}

static int64_t max_units(const stream *s) {
    int64_t most = 1;
    for (int q = 0; q < g_size; q++)
        for (int j = 0; j < 4; j++) {
            int64_t from = j == 0 ? s->part[q] : s->cuts[q * 4 + j - 1];
            if (s->cuts[q * 4 + j] - from + 2 > most) most = s->cuts[q * 4 + j] - from + 2;
        }
    return most;
}

/* One process over every rank's batches in order. */
static sluice_status reference(sluice_pipeline *p, const test_case *tc, const stream *s,
                               result *ref) {
    sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
    opts.backend = SLUICE_BACKEND_CPU;
    opts.max_batch_rows = tc->max_batch_rows;
    sluice_session *ss = NULL;
    sluice_status st = sluice_session_open(p, &opts, &ss);
    sluice_column *cols = calloc((size_t)s->ncols + 1, sizeof *cols);
    int64_t *offs = calloc((size_t)max_units(s) + 1, sizeof(int64_t));
    for (int q = 0; st == SLUICE_OK && q < g_size; q++)
        for (int j = 0; st == SLUICE_OK && j < 4; j++) {
            int64_t from = j == 0 ? s->part[q] : s->cuts[q * 4 + j - 1];
            batch_columns(s, from, s->cuts[q * 4 + j], cols, offs);
            st = sluice_session_push(ss, cols, (size_t)s->ncols);
        }
    if (st == SLUICE_OK) st = sluice_session_flush(ss);
    while (st == SLUICE_OK) {
        sluice_batch *b = NULL;
        st = sluice_session_pull(ss, &b);
        if (!b) break;
        result_append(ref, b);
        sluice_batch_free(b);
    }
    free(cols);
    free(offs);
    sluice_session_close(ss);
    return st;
}

/* This rank's part through the distributed session. */
static sluice_status distributed(sluice_context *ctx, sluice_pipeline *p, const test_case *tc,
                                 const stream *s, result *mine, int64_t *first, int64_t *total) {
    sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
    opts.backend = g_backend;
    opts.max_batch_rows = tc->max_batch_rows;
    sluice_mpi_session *ds = NULL;
    sluice_status st = sluice_mpi_session_open(p, &opts, MPI_COMM_WORLD, &ds);
    if (st != SLUICE_OK) return st;
    /* The passes, as the session and `explain --ranks` say them. */
    char *text = NULL, want[64];
    snprintf(want, sizeof want, "passes over each rank's part: %d ", tc->passes);
    if (sluice_mpi_session_passes(ds) != tc->passes)
        fail("%s: %d passes, not %d", tc->name, sluice_mpi_session_passes(ds), tc->passes);
    if (sluice_mpi_explain(p, &text) != SLUICE_OK || !strstr(text, want))
        fail("%s: explain --ranks does not say '%s':\n%s", tc->name, want, text ? text : "");
    sluice_free_text(ctx, text);
    sluice_column *cols = calloc((size_t)s->ncols + 1, sizeof *cols);
    int64_t *offs = calloc((size_t)max_units(s) + 1, sizeof(int64_t));
    int more = 0;
    while (st == SLUICE_OK && (st = sluice_mpi_session_begin_pass(ds, &more)) == SLUICE_OK && more) {
        bool final = sluice_mpi_session_final_pass(ds);
        if (final) {
            int64_t rows = 0;
            st = sluice_mpi_session_output_range(ds, first, &rows, total);
            if (st != SLUICE_OK) break;
        }
        for (int j = 0; st == SLUICE_OK && j < 4; j++) {
            int64_t from = j == 0 ? s->part[g_rank] : s->cuts[g_rank * 4 + j - 1];
            batch_columns(s, from, s->cuts[g_rank * 4 + j], cols, offs);
            st = sluice_mpi_session_push(ds, cols, (size_t)s->ncols);
            for (sluice_batch *b = NULL; st == SLUICE_OK;) {
                st = sluice_mpi_session_pull(ds, &b);
                if (!b) break;
                if (!final) fail("a batch came out before the final pass");
                result_append(mine, b);
                sluice_batch_free(b);
            }
        }
        sluice_status fst = sluice_mpi_session_flush(ds);
        if (st == SLUICE_OK) st = fst;
        for (sluice_batch *b = NULL; st == SLUICE_OK;) {
            st = sluice_mpi_session_pull(ds, &b);
            if (!b) break;
            result_append(mine, b);
            sluice_batch_free(b);
        }
    }
    free(cols);
    free(offs);
    sluice_mpi_session_close(ds);
    return st;
}

static bool close_enough(sluice_type t, const char *a, const char *b, int64_t i) {
    double x = t == SLUICE_F32 ? ((const float *)a)[i] : ((const double *)a)[i];
    double y = t == SLUICE_F32 ? ((const float *)b)[i] : ((const double *)b)[i];
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
    double tol = (t == SLUICE_F32 ? 1e-4 : 1e-9) * fmax(1.0, fmax(fabs(x), fabs(y)));
    return fabs(x - y) <= tol;
}

/* Gathers every rank's rows to rank 0 and compares them with the reference. */
static void compare(const test_case *tc, uint64_t seed, const result *ref, const result *mine,
                    int64_t first, int64_t total) {
    int64_t *rows = calloc((size_t)g_size, sizeof(int64_t));
    MPI_Allgather(&mine->rows, 1, MPI_INT64_T, rows, 1, MPI_INT64_T, MPI_COMM_WORLD);
    int64_t before = 0, all = 0;
    for (int q = 0; q < g_size; q++) {
        if (q < g_rank) before += rows[q];
        all += rows[q];
    }
    if (first != before || total != all)
        fail("%s seed %llu: output range says first %lld of %lld, the rows say %lld of %lld",
             tc->name, (unsigned long long)seed, (long long)first, (long long)total,
             (long long)before, (long long)all);
    int *counts = calloc((size_t)g_size, sizeof(int)), *displs = calloc((size_t)g_size, sizeof(int));
    for (int j = 0; j < mine->ncols; j++) {
        int w = (int)sluice_type_size(mine->type[j]);
        for (int q = 0; q < g_size; q++) {
            counts[q] = (int)rows[q] * w;
            displs[q] = q ? displs[q - 1] + counts[q - 1] : 0;
        }
        char *got = g_rank == 0 ? malloc((size_t)all * (size_t)w + 1) : NULL;
        MPI_Gatherv(mine->data[j], (int)mine->rows * w, MPI_BYTE, got, counts, displs, MPI_BYTE, 0,
                    MPI_COMM_WORLD);
        if (g_rank == 0) {
            if (all != ref->rows) {
                if (j == 0)
                    fail("%s seed %llu: %lld rows from %d ranks, %lld from one process", tc->name,
                         (unsigned long long)seed, (long long)all, g_size, (long long)ref->rows);
            } else {
                bool flt = mine->type[j] == SLUICE_F32 || mine->type[j] == SLUICE_F64;
                for (int64_t i = 0; i < all; i++) {
                    bool same = !memcmp(got + i * w, ref->data[j] + i * w, (size_t)w);
                    if (same || (!tc->exact && flt && close_enough(mine->type[j], got, ref->data[j], i)))
                        continue;
                    fail("%s seed %llu: output column %d row %lld differs from one process "
                         "(%d ranks)", tc->name, (unsigned long long)seed, j, (long long)i, g_size);
                    break;
                }
            }
        }
        free(got);
    }
    free(counts);
    free(displs);
    free(rows);
}

static void run_cases(int seeds) {
    sluice_context *ctx = NULL;
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.cpu_threads = 1;
    if (sluice_context_create(&ctx, &co) != SLUICE_OK) {
        fail("no context");
        return;
    }
    for (int c = 0; c < NCASES; c++) {
        const test_case *tc = &cases[c];
        sluice_pipeline *p = NULL;
        if (sluice_pipeline_load_string(ctx, tc->yaml, strlen(tc->yaml), tc->name, &p) != SLUICE_OK) {
            fail("%s: the pipeline does not load", tc->name);
            print_diags(ctx);
            continue;
        }
        for (int k = 0; k < seeds; k++) {
            uint64_t seed = 1000003u * (uint64_t)(c + 1) + (uint64_t)k;
            stream s;
            make_stream(p, seed, &s);
            result ref, mine;
            result_init(&ref, p);
            result_init(&mine, p);
            if (g_rank == 0 && reference(p, tc, &s, &ref) != SLUICE_OK) {
                fail("%s seed %llu: the reference failed", tc->name, (unsigned long long)seed);
                print_diags(ctx);
            }
            int64_t first = -1, total = -1;
            sluice_status st = distributed(ctx, p, tc, &s, &mine, &first, &total);
            if (st != SLUICE_OK) {
                fail("%s seed %llu: the distributed session failed: %s", tc->name,
                     (unsigned long long)seed, sluice_status_name(st));
                print_diags(ctx);
            } else {
                compare(tc, seed, &ref, &mine, first, total);
                g_carried += tc->carries;
                g_reduced += tc->reduce;
            }
            result_free(&ref);
            result_free(&mine);
            stream_free(&s);
        }
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}

/* ---- failures ---------------------------------------------------------------------------- */

/* A context and the first case's pipeline, which the failure and death runs use. */
static sluice_pipeline *first_case(sluice_context **ctx) {
    *ctx = NULL;
    sluice_context_create(ctx, NULL);
    sluice_pipeline *p = NULL;
    sluice_pipeline_load_string(*ctx, cases[0].yaml, strlen(cases[0].yaml), cases[0].name, &p);
    return p;
}

static void run_failures(void) {
    sluice_context *ctx;
    sluice_pipeline *p = first_case(&ctx);
    sluice_mpi_session *ds = NULL;
    sluice_status st = sluice_mpi_session_open(p, NULL, MPI_COMM_WORLD, &ds);
    if (st != SLUICE_OK) {
        fail("open: %s", sluice_status_name(st));
        print_diags(ctx);
        return;
    }
    int bad = g_size - 1, more = 0;
    int32_t x[4] = {1, 2, 3, 4};
    uint8_t u[4] = {1, 2, 3, 4};
    float f[4] = {1, 2, 3, 4};
    sluice_column good[3] = {{"x", SLUICE_I32, x, 4}, {"u", SLUICE_U8, u, 4}, {"f", SLUICE_F32, f, 4}};
    sluice_column wrong[3] = {{"x", SLUICE_F32, f, 4}, {"u", SLUICE_U8, u, 4}, {"f", SLUICE_F32, f, 4}};
    st = sluice_mpi_session_begin_pass(ds, &more);
    if (st != SLUICE_OK || !more) fail("begin_pass: %s", sluice_status_name(st));
    st = sluice_mpi_session_push(ds, g_rank == bad ? wrong : good, 3);
    if (g_rank == bad && st != SLUICE_ERR_BATCH_TYPE)
        fail("the bad batch was not refused: %s", sluice_status_name(st));
    if (g_rank != bad && st != SLUICE_OK) fail("a good batch was refused: %s", sluice_status_name(st));
    st = sluice_mpi_session_flush(ds);
    if (st != SLUICE_ERR_BATCH_TYPE)
        fail("flush after rank %d's bad batch gave %s, not SLUICE_ERR_BATCH_TYPE", bad,
             sluice_status_name(st));
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    char want[32];
    snprintf(want, sizeof want, "rank %d", bad);
    if (g_rank != bad && (!d || !strstr(d->message, want)))
        fail("the diagnostic does not name %s: %s", want, d ? d->message : "(none)");
    /* The session stays failed: pushing again is refused, the next pass fails everywhere. */
    if (sluice_mpi_session_push(ds, good, 3) == SLUICE_OK) fail("a push after the failure passed");
    if (sluice_mpi_session_begin_pass(ds, &more) == SLUICE_OK) fail("a pass after the failure began");
    sluice_mpi_session_close(ds);

    /* Different pipelines on different ranks: every open fails. */
    if (g_size > 1) {
        const char *other = HDR "other\ninput: {x: i32}\nstages:\n  - map: {y: x + 1}\n";
        sluice_pipeline *q = NULL;
        sluice_pipeline_load_string(ctx, other, strlen(other), "other", &q);
        st = sluice_mpi_session_open(g_rank == 0 ? q : p, NULL, MPI_COMM_WORLD, &ds);
        if (st == SLUICE_OK) {
            fail("ranks with different pipelines opened a session");
            sluice_mpi_session_close(ds);
        }
        sluice_pipeline_free(q);
    }
    /* Misuse: a push outside a pass. */
    st = sluice_mpi_session_open(p, NULL, MPI_COMM_WORLD, &ds);
    if (st == SLUICE_OK && sluice_mpi_session_push(ds, good, 3) != SLUICE_ERR_MISUSE)
        fail("a push outside a pass was not SLUICE_ERR_MISUSE");
    sluice_mpi_session_close(ds);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

/* Opens a distributed session on p under SLUICE_MPI_TRANSPORT=value (NULL: unset) and
 * SLUICE_NCCL_LIBRARY=lib (NULL: unset), every rank alike unless only_rank0_value; returns
 * the status, the session left in *ds (NULL on failure). */
static sluice_status open_with(sluice_pipeline *p, const char *value, const char *lib,
                               bool only_rank0_value, sluice_mpi_session **ds) {
    if (value && (!only_rank0_value || g_rank == 0)) setenv("SLUICE_MPI_TRANSPORT", value, 1);
    else unsetenv("SLUICE_MPI_TRANSPORT");
    if (lib) setenv("SLUICE_NCCL_LIBRARY", lib, 1);
    else unsetenv("SLUICE_NCCL_LIBRARY");
    sluice_status st = sluice_mpi_session_open(p, NULL, MPI_COMM_WORLD, ds);
    unsetenv("SLUICE_MPI_TRANSPORT");
    unsetenv("SLUICE_NCCL_LIBRARY");
    return st;
}

/* An open that must fail on every rank with `want` and a diagnostic holding both texts. */
static void expect_refusal(sluice_context *ctx, sluice_pipeline *p, const char *value,
                           const char *lib, bool only_rank0_value, sluice_status want,
                           const char *text1, const char *text2) {
    sluice_mpi_session *ds = NULL;
    sluice_status st = open_with(p, value, lib, only_rank0_value, &ds);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    const char *msg = d ? d->message : "(none)";
    if (st != want || ds)
        fail("SLUICE_MPI_TRANSPORT=%s (library %s): open gave %s, not %s", value,
             lib ? lib : "default", sluice_status_name(st), sluice_status_name(want));
    else if (!strstr(msg, text1) || (text2 && !strstr(msg, text2)))
        fail("SLUICE_MPI_TRANSPORT=%s (library %s): the diagnostic lacks '%s'%s%s: %s", value,
             lib ? lib : "default", text1, text2 ? " or " : "", text2 ? text2 : "", msg);
    sluice_mpi_session_close(ds);
}

/* An open that must succeed with a transport whose description starts with `prefix`. */
static void expect_transport(sluice_context *ctx, sluice_pipeline *p, const char *value,
                             const char *lib, const char *prefix) {
    sluice_mpi_session *ds = NULL;
    sluice_status st = open_with(p, value, lib, false, &ds);
    if (st != SLUICE_OK) {
        fail("SLUICE_MPI_TRANSPORT=%s (library %s): open failed: %s", value ? value : "(unset)",
             lib ? lib : "default", sluice_status_name(st));
        print_diags(ctx);
        return;
    }
    const char *t = sluice_mpi_session_transport(ds);
    if (strncmp(t, prefix, strlen(prefix)) != 0)
        fail("SLUICE_MPI_TRANSPORT=%s (library %s): transport '%s', expected '%s...'",
             value ? value : "(unset)", lib ? lib : "default", t, prefix);
    sluice_mpi_session_close(ds);
}

/* The row transport's choice (dist/nccl.c) on the CPU backend, where NCCL can never move
 * rows: what auto falls back to and why, and every way `nccl` is refused on every rank. The
 * NCCL data path itself needs a GPU per rank and is not run here. */
static void run_transport(void) {
    sluice_context *ctx;
    sluice_pipeline *plain = first_case(&ctx);
    /* Only a stream-wide sort moves rows: the choice is made for it alone. */
    const char *sorted = HDR "sorted\ninput: {k: u32}\nstages:\n  - sort: {key: k}\n";
    sluice_pipeline *p = NULL;
    if (sluice_pipeline_load_string(ctx, sorted, strlen(sorted), "sorted", &p) != SLUICE_OK) {
        fail("the sort pipeline does not load");
        print_diags(ctx);
        sluice_pipeline_free(plain);
        sluice_context_destroy(ctx);
        return;
    }
    expect_transport(ctx, plain, "nccl", NULL, "none: no stage moves rows");
    const char *absent = "/nonexistent/sluice-test/libnccl.so.2";
    /* A library that loads but is not NCCL. */
    const char *not_nccl = "libm.so.6";
    expect_transport(ctx, p, NULL, absent, "mpi: not NCCL, since rank 0: NCCL (/nonexistent");
    expect_transport(ctx, p, "auto", absent, "mpi: not NCCL, since rank 0: NCCL (");
    expect_transport(ctx, p, "mpi", NULL, "mpi: SLUICE_MPI_TRANSPORT=mpi");
    expect_transport(ctx, p, "auto", not_nccl, "mpi: not NCCL, since rank 0: NCCL (libm.so.6) lacks");
    expect_refusal(ctx, p, "nccl", absent, false, SLUICE_ERR_BACKEND_UNAVAILABLE,
                   "SLUICE_MPI_TRANSPORT=nccl, but NCCL cannot move", "cannot be loaded");
    expect_refusal(ctx, p, "nccl", not_nccl, false, SLUICE_ERR_BACKEND_UNAVAILABLE,
                   "lacks ncclGetVersion", NULL);
    expect_refusal(ctx, p, "gloo", NULL, false, SLUICE_ERR_INVALID_ARGUMENT,
                   "SLUICE_MPI_TRANSPORT='gloo' is not one of auto, mpi, nccl", NULL);
    if (g_size > 1)
        expect_refusal(ctx, p, "mpi", NULL, true, SLUICE_ERR_MISUSE,
                       "the ranks' SLUICE_MPI_TRANSPORT differ", NULL);
    /* The machine's own NCCL, if it has one: it loads, and the CPU backend is the reason. */
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    const char *why = lib ? "the session runs on the cpu backend" : "cannot be loaded";
    if (lib) dlclose(lib);
    expect_refusal(ctx, p, "nccl", NULL, false, SLUICE_ERR_BACKEND_UNAVAILABLE,
                   "SLUICE_MPI_TRANSPORT=nccl, but NCCL cannot move", why);
    expect_transport(ctx, p, NULL, NULL, "mpi: not NCCL, since rank 0: ");

    /* explain names the knob for a pipeline whose sort moves rows, and not for one without. */
    char *text = NULL;
    if (sluice_mpi_explain(p, &text) != SLUICE_OK) fail("explain of a stream-wide sort failed");
    else if (!strstr(text, "moves between ranks: SLUICE_MPI_TRANSPORT=auto"))
        fail("explain does not say what moves a sort's rows: %s", text);
    sluice_free_text(ctx, text);
    text = NULL;
    if (sluice_mpi_explain(plain, &text) != SLUICE_OK) fail("explain failed");
    else if (strstr(text, "SLUICE_MPI_TRANSPORT")) fail("explain names a transport without a sort");
    sluice_free_text(ctx, text);
    sluice_pipeline_free(plain);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

/* The last rank dies in the middle of a pass; the others are left in its flush. */
static void run_death(void) {
    sluice_context *ctx;
    sluice_pipeline *p = first_case(&ctx);
    sluice_mpi_session *ds = NULL;
    if (sluice_mpi_session_open(p, NULL, MPI_COMM_WORLD, &ds) != SLUICE_OK) return;
    int more = 0;
    sluice_mpi_session_begin_pass(ds, &more);
    if (g_rank == g_size - 1) {
        fprintf(stderr, "rank %d: dying now\n", g_rank);
        raise(SIGKILL);
    }
    sluice_mpi_session_flush(ds);
    sluice_mpi_session_close(ds);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const char *mode = argc > 1 ? argv[1] : "cases";
    if (!strcmp(mode, "fail")) run_failures();
    else if (!strcmp(mode, "die")) run_death();
    else if (!strcmp(mode, "transport")) run_transport();
    else {
        if (argc > 3 && !strcmp(argv[3], "cuda")) g_backend = SLUICE_BACKEND_CUDA;
        if (sluice_backend_available(g_backend)) run_cases(argc > 2 ? atoi(argv[2]) : 6);
        else if (g_rank == 0) printf("the %s backend is not available here: nothing run\n",
                                     sluice_backend_name(g_backend));
    }
    int any = 0;
    MPI_Allreduce(&g_failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_session %s on %d ranks (%s backend): %s (%d failures; %d runs carried "
               "scan state between ranks; %d runs of reduce cases compared)\n", mode,
               g_size, sluice_backend_name(g_backend), any ? "FAILED" : "ok", any, g_carried,
               g_reduced);
    MPI_Finalize();
    return any ? 1 : 0;
}
