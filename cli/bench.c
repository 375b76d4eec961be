/* bench.c — `sluice bench`: the throughput of a pipeline on an in-memory stream, beside the
 * baselines that bound it (a memcpy of the same input bytes on the host), measured in the same
 * run: one warm-up, then the median of R timed runs of each.
 *
 * Bytes are counted as memory traffic: the input read plus the output written. A memcpy of
 * the input therefore moves 2 × the input bytes. A backend adds its own baseline (e.g. a
 * device-to-device copy) as one more entry of `baselines` below. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gen.h"
#include "input.h"

/* Rows per pushed batch unless --batch-rows says otherwise: a stream, as `sluice run` pushes it
 * (and the library's default max_batch_rows). */
#define DEFAULT_BENCH_BATCH_ROWS (INT64_C(1) << 22)

/* The stream the benchmark pushes: every input column, whole, in memory. */
typedef struct bench_data {
    size_t ncols;
    sluice_column *cols;
    void **owned;      /* generated buffers (NULL entries when read from --in) */
    int64_t rows;
    uint64_t in_bytes;
    sl_input *input;   /* keeps --in's mapping alive */
    long offsets_col;  /* the offsets input, or -1 */
    int64_t *rebased;  /* a batch's offsets, rebased to 0 (offsets streams) */
    sluice_column *window; /* the columns of the batch being pushed */
} bench_data;

/* ---- baselines ------------------------------------------------------------------------- */

typedef struct baseline {
    const char *name;
    const char *what;
    /* Allocates what a run needs; returns NULL when the baseline cannot run here. */
    void *(*prepare)(const bench_data *d, sluice_backend backend);
    void (*run)(void *state, const bench_data *d);
    uint64_t (*bytes)(const bench_data *d); /* memory traffic of one run */
    void (*release)(void *state);
} baseline;

static void *memcpy_prepare(const bench_data *d, sluice_backend backend) {
    (void)backend;
    unsigned char *dst = malloc(d->in_bytes ? d->in_bytes : 1);
    if (dst) memset(dst, 0, d->in_bytes); /* fault the pages in before timing */
    return dst;
}
static void memcpy_run(void *state, const bench_data *d) {
    unsigned char *dst = state;
    for (size_t i = 0; i < d->ncols; i++) {
        size_t n = (size_t)d->cols[i].length * sluice_type_size(d->cols[i].type);
        memcpy(dst, d->cols[i].data, n);
        dst += n;
    }
}
static uint64_t memcpy_bytes(const bench_data *d) { return 2 * d->in_bytes; }

static const baseline baselines[] = {
    {"memcpy", "host memcpy of the input bytes", memcpy_prepare, memcpy_run, memcpy_bytes, free},
};

/* ---- the stream ------------------------------------------------------------------------ */

static void bench_data_free(bench_data *d) {
    for (size_t i = 0; i < d->ncols; i++)
        if (d->owned) free(d->owned[i]);
    free(d->owned);
    free(d->cols);
    free(d->rebased);
    free(d->window);
    sl_input_close(d->input);
}

static int bench_data_make(bench_data *d, const sluice_pipeline *p, const char *in_path,
                           int64_t rows, uint64_t seed) {
    memset(d, 0, sizeof *d);
    d->ncols = sluice_pipeline_input_count(p);
    d->offsets_col = -1;
    d->cols = calloc(d->ncols + 1, sizeof *d->cols);
    d->owned = calloc(d->ncols + 1, sizeof *d->owned);
    d->window = calloc(d->ncols + 1, sizeof *d->window);
    if (!d->cols || !d->owned || !d->window) return sl_fail("out of memory");
    if (in_path) {
        char err[1024];
        if (sl_input_open(&d->input, p, in_path, err, sizeof err) != 0 ||
            sl_input_next(d->input, INT64_MAX, d->cols, &d->rows, err, sizeof err) < 0)
            return sl_fail("%s", err);
    } else {
        d->rows = rows;
        for (size_t c = 0; c < d->ncols; c++) {
            sluice_column_info info;
            if (sluice_pipeline_input(p, c, &info) != SLUICE_OK)
                return sl_fail("cannot read the pipeline's input %zu", c);
            if (info.role == SLUICE_ROLE_OFFSETS) {
                int64_t *o, k1;
                if (sl_gen_offsets(seed, c, rows, &o, &k1) != 0) return sl_fail("out of memory");
                d->owned[c] = o;
                d->cols[c] = (sluice_column){info.name, SLUICE_I64, o, k1};
                continue;
            }
            size_t bytes = (size_t)rows * sluice_type_size(info.type);
            d->owned[c] = malloc(bytes ? bytes : 1);
            if (!d->owned[c]) return sl_fail("out of memory for %" PRId64 " rows", rows);
            sl_gen_values(info.type, seed, c, 0, rows, d->owned[c]);
            d->cols[c] = (sluice_column){info.name, info.type, d->owned[c], rows};
        }
    }
    for (size_t c = 0; c < d->ncols; c++) {
        sluice_column_info info = {"", SLUICE_I64, SLUICE_ROLE_DATA};
        if (sluice_pipeline_input(p, c, &info) == SLUICE_OK && info.role == SLUICE_ROLE_OFFSETS)
            d->offsets_col = (long)c;
        if (!d->cols[c].data) { /* --in with no rows at all */
            static const uint64_t empty[1];
            d->cols[c] = (sluice_column){info.name, info.type, empty, 0};
        }
        d->in_bytes += (uint64_t)d->cols[c].length * sluice_type_size(d->cols[c].type);
    }
    if (d->offsets_col >= 0) {
        d->rebased = malloc((size_t)d->cols[d->offsets_col].length * sizeof *d->rebased + 8);
        if (!d->rebased) return sl_fail("out of memory");
    }
    return SL_EXIT_OK;
}

/* ---- timing ---------------------------------------------------------------------------- */

/* Counts the bytes of a result batch (the pipeline's output written). */
static int count_bytes(const sluice_batch *b, void *payload) {
    uint64_t *out_bytes = payload;
    for (size_t i = 0; i < sluice_batch_column_count(b); i++) {
        sluice_column col;
        if (sluice_batch_column(b, i, &col) == SLUICE_OK)
            *out_bytes += (uint64_t)col.length * sluice_type_size(col.type);
    }
    return SL_EXIT_OK;
}

/* Fills d->window with the batch after `*cursor` (a row, or a segment for offsets streams)
 * and advances it. Returns false when the stream is exhausted; an empty stream yields one
 * empty batch. */
static bool next_window(bench_data *d, int64_t *cursor, int64_t batch_rows, bool first) {
    int64_t start, n;
    if (d->offsets_col >= 0) {
        const sluice_column *oc = &d->cols[d->offsets_col];
        const int64_t *o = oc->data;
        int64_t k = oc->length - 1, s = *cursor;
        if (s >= k && !(first && k == 0)) return false;
        int64_t e = k == 0 ? 0 : sl_next_segment_cut(o, k, s, batch_rows);
        for (int64_t i = s; i <= e; i++) d->rebased[i - s] = o[i] - o[s];
        d->window[d->offsets_col] = (sluice_column){oc->name, SLUICE_I64, d->rebased, e - s + 1};
        start = o[s];
        n = o[e] - o[s];
        *cursor = k == 0 ? 1 : e;
    } else {
        if (*cursor >= d->rows && !(first && d->rows == 0)) return false;
        start = *cursor;
        n = d->rows - start < batch_rows ? d->rows - start : batch_rows;
        *cursor = d->rows == 0 ? 1 : start + n;
    }
    for (size_t c = 0; c < d->ncols; c++) {
        if ((long)c == d->offsets_col) continue;
        d->window[c] = d->cols[c];
        d->window[c].data = (const unsigned char *)d->cols[c].data +
                            (size_t)start * sluice_type_size(d->cols[c].type);
        d->window[c].length = n;
    }
    return true;
}

/* One pass of the whole stream through the session; *seconds is its wall time. */
static int run_stream(sluice_session *s, sluice_context *ctx, bench_data *d, int64_t batch_rows,
                      double *seconds, uint64_t *out_bytes) {
    sluice_status st = sluice_session_reset(s);
    double t0 = sl_now();
    *out_bytes = 0;
    int rc = SL_EXIT_OK;
    int64_t cursor = 0;
    for (bool first = true; st == SLUICE_OK && rc == SL_EXIT_OK &&
                            next_window(d, &cursor, batch_rows, first);
         first = false) {
        st = sluice_session_push(s, d->window, d->ncols);
        if (st == SLUICE_OK) rc = sl_pull_ready(s, ctx, count_bytes, out_bytes);
    }
    if (st == SLUICE_OK && rc == SL_EXIT_OK) st = sluice_session_flush(s);
    if (st == SLUICE_OK && rc == SL_EXIT_OK) rc = sl_pull_ready(s, ctx, count_bytes, out_bytes);
    *seconds = sl_now() - t0;
    if (st != SLUICE_OK) {
        sl_print_diagnostics(ctx);
        return sl_fail("the benchmark stream was rejected: %s", sluice_strerror(st));
    }
    return rc;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print_figure(const char *name, double seconds, int64_t rows, uint64_t bytes,
                         const char *note) {
    printf("  %-8s median %.6f s  %10.2f Mrows/s  %8.3f GB/s  (%s)\n", name, seconds,
           seconds > 0 ? (double)rows / seconds / 1e6 : 0.0,
           seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0, note);
}

typedef struct bench_args {
    const char *pipeline, *in;
    int64_t rows, repeat, seed, batch_rows, threads;
    sluice_backend backend;
} bench_args;

static int bench_run(sluice_context *ctx, sluice_pipeline *p, const bench_args *a) {
    bench_data d;
    int rc = bench_data_make(&d, p, a->in, a->rows, (uint64_t)a->seed);
    /* Times of nothing are noise, and ratios of them meaningless. */
    if (rc == SL_EXIT_OK && d.rows == 0)
        rc = sl_fail("%s has no rows: there is nothing to measure", a->in);
    sluice_session *s = NULL;
    double *times = calloc((size_t)a->repeat, sizeof *times);
    if (rc == SL_EXIT_OK && !times) rc = sl_fail("out of memory");
    if (rc == SL_EXIT_OK) {
        sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
        opts.backend = a->backend;
        /* Scratch for at most the default batch; larger pushes are cut inside the library. */
        opts.max_batch_rows =
            a->batch_rows < DEFAULT_BENCH_BATCH_ROWS ? a->batch_rows : DEFAULT_BENCH_BATCH_ROWS;
        sluice_status st = sluice_session_open(p, &opts, &s);
        if (st != SLUICE_OK) {
            sl_print_diagnostics(ctx);
            rc = sl_fail("cannot open a session: %s", sluice_strerror(st));
        }
    }
    uint64_t out_bytes = 0;
    double warm;
    if (rc == SL_EXIT_OK) rc = run_stream(s, ctx, &d, a->batch_rows, &warm, &out_bytes);
    for (int r = 0; rc == SL_EXIT_OK && r < a->repeat; r++)
        rc = run_stream(s, ctx, &d, a->batch_rows, &times[r], &out_bytes);
    if (rc == SL_EXIT_OK) {
        double t = median(times, (int)a->repeat);
        /* The plan's predicted passes over memory: the floor the GB/s figure is read against. */
        char *plan = NULL;
        int passes = 0;
        sluice_backend used = sluice_session_backend(s);
        if (sluice_pipeline_explain(p, used, &plan, &passes) != SLUICE_OK) passes = 0;
        sluice_free_text(ctx, plan);
        printf("sluice bench: %s (pipeline '%s') backend=%s rows=%" PRId64 " repeat=%" PRId64
               " passes=%d\n",
               a->pipeline, sluice_pipeline_name(p), sluice_backend_name(used), d.rows, a->repeat,
               passes);
        char note[128];
        snprintf(note, sizeof note, "read %" PRIu64 " B + wrote %" PRIu64 " B", d.in_bytes,
                 out_bytes);
        print_figure("sluice", t, d.rows, d.in_bytes + out_bytes, note);
        double sluice_gbs = t > 0 ? (double)(d.in_bytes + out_bytes) / t : 0;
        for (size_t b = 0; b < sizeof baselines / sizeof baselines[0]; b++) {
            const baseline *bl = &baselines[b];
            void *state = bl->prepare(&d, sluice_session_backend(s));
            if (!state) {
                printf("  %-8s (not available here)\n", bl->name);
                continue;
            }
            bl->run(state, &d); /* warm-up */
            for (int r = 0; r < a->repeat; r++) {
                double t0 = sl_now();
                bl->run(state, &d);
                times[r] = sl_now() - t0;
            }
            bl->release(state);
            double tb = median(times, (int)a->repeat);
            uint64_t bytes = bl->bytes(&d);
            print_figure(bl->name, tb, d.rows, bytes, bl->what);
            double base_gbs = tb > 0 ? (double)bytes / tb : 0;
            printf("  sluice / %s bandwidth = %.3f, time = %.3f\n", bl->name,
                   base_gbs > 0 ? sluice_gbs / base_gbs : 0.0, tb > 0 ? t / tb : 0.0);
        }
    }
    sluice_session_close(s);
    free(times);
    bench_data_free(&d);
    return rc;
}

static int bench_main(const sl_command *self, int argc, char **argv) {
    bench_args a = {NULL, NULL, -1, 5, 1, DEFAULT_BENCH_BATCH_ROWS, 0, SLUICE_BACKEND_AUTO};
    const char *value;
    for (int i = 1; i < argc;) {
        int got;
        if ((got = sl_option(self, argc, argv, &i, "rows", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 1, INT64_C(1) << 40, &a.rows))
                return sl_usage_error(self, "--rows needs a positive integer (or 2^K), not '%s'%s",
                                      value,
                                      strcmp(value, "0") == 0
                                          ? ": there is nothing to measure in 0 rows"
                                          : "");
        } else if ((got = sl_option(self, argc, argv, &i, "repeat", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 1, 1000, &a.repeat))
                return sl_usage_error(self, "--repeat needs an integer in 1..1000, not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "seed", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 0, INT64_MAX, &a.seed))
                return sl_usage_error(self, "--seed needs a non-negative integer, not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "batch-rows", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 1, INT64_MAX, &a.batch_rows))
                return sl_usage_error(self, "--batch-rows needs a positive integer, not '%s'",
                                      value);
        } else if ((got = sl_option(self, argc, argv, &i, "backend", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_backend(value, &a.backend))
                return sl_usage_error(self, "--backend is auto, cpu or cuda, not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "in", &a.in)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
        } else if ((got = sl_option(self, argc, argv, &i, "threads", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 0, SL_MAX_THREADS, &a.threads))
                return sl_usage_error(self, "--threads needs an integer in 0..%d, not '%s'",
                                      SL_MAX_THREADS, value);
        } else if (sl_take_pipeline_arg(self, argv, &i, &a.pipeline) != SL_EXIT_OK) {
            return SL_EXIT_USAGE;
        }
    }
    if (!a.pipeline) return sl_usage_error(self, "which pipeline file?");
    if ((a.rows < 0) == (a.in == NULL))
        return sl_usage_error(self, "give either --rows N (generated data) or --in INPUT%s",
                              a.in ? ", not both" : "");
    sluice_context *ctx = sl_context_new((int)a.threads);
    sluice_pipeline *p = ctx ? sl_load_pipeline(ctx, a.pipeline) : NULL;
    int rc = p ? bench_run(ctx, p, &a) : SL_EXIT_ERROR;
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return rc;
}

const sl_command sl_command_bench = {
    "bench", "PIPELINE (--rows N | --in INPUT) [--backend auto|cpu|cuda] [--repeat R] "
             "[--seed S] [--batch-rows N] [--threads N]",
    "Measure a pipeline's throughput on an in-memory stream beside a memcpy of its input.",
    "The stream is generated as `sluice gen` would (--rows N), or read whole from --in INPUT\n"
    "(any input `sluice run` accepts); give one of the two. After one warm-up, each figure is\n"
    "the median of R runs (default 5): rows/s and GB/s, counting the input read plus the\n"
    "output written, then the same for a memcpy of the input bytes in the same run, and the\n"
    "ratio of the two.\n\n"
    "options:\n"
    "  --rows N         rows to generate, at least 1 (2^K accepted)\n"
    "  --in INPUT       benchmark this input instead of generated data\n"
    "  --repeat R       timed runs per figure (default 5)\n"
    "  --seed S         generator seed (default 1)\n"
    "  --batch-rows N   push the stream in batches of N rows (default 4194304; whole\n"
    "                   segments for a stream with an offsets input)\n"
    "  --backend B      auto, cpu or cuda\n"
    "  --threads N      CPU backend worker threads (default 0: one per core)\n",
    bench_main,
    (const char *const[]){"rows", "in", "repeat", "seed", "batch-rows", "backend", "threads",
                          NULL}};
