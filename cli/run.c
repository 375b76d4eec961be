/* run.c — `sluice run`: streams an input (a directory of .npy/.bin columns or a CSV file)
 * through a pipeline in batches and writes every output column to OUTDIR/COLUMN.npy as the
 * result batches are pulled. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "input.h"
#include "output.h"

#define DEFAULT_BATCH_ROWS (INT64_C(1) << 22)

/* The progress line: shown on a terminal only, once the run has taken over a second. */
typedef struct progress {
    bool enabled, shown;
    double start, last;
} progress;

static void progress_update(progress *pg, int64_t rows, bool final) {
    if (!pg->enabled) return;
    double now = sl_now();
    if (now - pg->start < 1.0 || (!final && now - pg->last < 0.25)) return;
    pg->last = now;
    pg->shown = true;
    fprintf(stderr, "\r%" PRId64 " rows, %.3g M rows/s   ", rows,
            (double)rows / (now - pg->start) / 1e6);
    if (final) fputc('\n', stderr);
}

typedef struct run_args {
    const char *pipeline, *in, *out;
    sluice_backend backend;
    int64_t batch_rows;
    sluice_param_value *params;
    size_t param_count;
} run_args;

static int parse_args(const sl_command *self, int argc, char **argv, run_args *a) {
    const char *value;
    for (int i = 1; i < argc;) {
        int got;
        if ((got = sl_option(self, argc, argv, &i, "in", &a->in)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
        } else if ((got = sl_option(self, argc, argv, &i, "out", &a->out)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
        } else if ((got = sl_option(self, argc, argv, &i, "backend", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_backend(value, &a->backend))
                return sl_usage_error(self, "--backend is auto, cpu or cuda, not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "batch-rows", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 1, INT64_MAX, &a->batch_rows))
                return sl_usage_error(self, "--batch-rows needs a positive integer, not '%s'",
                                      value);
        } else if ((got = sl_option(self, argc, argv, &i, "param", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            const char *eq = strchr(value, '=');
            if (!eq || eq == value)
                return sl_usage_error(self, "--param takes NAME=VALUE, not '%s'", value);
            /* Split a copy of NAME=VALUE; argv itself stays untouched. */
            char *name = strndup(value, (size_t)(eq - value));
            sluice_param_value *grown =
                realloc(a->params, (a->param_count + 1) * sizeof *a->params);
            if (!name || !grown) {
                free(name);
                if (grown) a->params = grown;
                return sl_fail("out of memory");
            }
            a->params = grown;
            a->params[a->param_count++] = (sluice_param_value){name, eq + 1};
        } else if (sl_take_pipeline_arg(self, argv, &i, &a->pipeline) != SL_EXIT_OK) {
            return SL_EXIT_USAGE;
        }
    }
    if (!a->pipeline) return sl_usage_error(self, "which pipeline file?");
    if (!a->in) return sl_usage_error(self, "--in INPUT is required");
    if (!a->out) return sl_usage_error(self, "--out OUTDIR is required");
    /* Writing into the input directory would truncate column files while they are mapped. */
    char in_real[PATH_MAX], out_real[PATH_MAX];
    if (realpath(a->in, in_real) && realpath(a->out, out_real) && strcmp(in_real, out_real) == 0)
        return sl_usage_error(self, "--out must not be the input directory ('%s')", a->in);
    return SL_EXIT_OK;
}

/* Appends a result batch to the output files. */
static int write_batch(const sluice_batch *b, void *payload) {
    char err[512];
    if (sl_output_append(payload, b, err, sizeof err) != 0) return sl_fail("%s", err);
    return SL_EXIT_OK;
}

/* The whole run once the arguments are parsed and the pipeline is loaded. */
static int run_pipeline(const sl_command *self, sluice_context *ctx, sluice_pipeline *p,
                        const run_args *a) {
    sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
    opts.backend = a->backend;
    /* The session sizes its scratch for this many rows; a larger push is cut inside the
     * library, so a huge --batch-rows must not turn into a huge allocation. */
    opts.max_batch_rows = a->batch_rows < DEFAULT_BATCH_ROWS ? a->batch_rows : DEFAULT_BATCH_ROWS;
    opts.params = a->params;
    opts.param_count = a->param_count;
    sluice_session *s = NULL;
    sluice_status st = sluice_session_open(p, &opts, &s);
    if (st != SLUICE_OK) {
        sl_print_diagnostics(ctx);
        if (st == SLUICE_ERR_UNKNOWN_PARAM || st == SLUICE_ERR_BAD_VALUE)
            return sl_usage_error(self, "bad --param: %s", sluice_strerror(st));
        return sl_fail("cannot open a session: %s", sluice_strerror(st));
    }
    char err[1024];
    sl_input *in = NULL;
    sl_output *out = NULL;
    sluice_column *cols = calloc(sluice_pipeline_input_count(p) + 1, sizeof *cols);
    int rc = SL_EXIT_OK;
    if (!cols) rc = sl_fail("out of memory");
    else if (sl_input_open(&in, p, a->in, err, sizeof err) != 0) rc = sl_fail("%s", err);
    else if (sl_output_open(&out, p, a->out, err, sizeof err) != 0) rc = sl_fail("%s", err);

    progress pg = {isatty(STDERR_FILENO) != 0, false, sl_now(), 0};
    int64_t rows_in = 0;
    while (rc == SL_EXIT_OK) {
        int64_t rows = 0;
        int got = sl_input_next(in, a->batch_rows, cols, &rows, err, sizeof err);
        if (got < 0) {
            rc = sl_fail("%s", err);
            break;
        }
        if (got == 0) break;
        st = sluice_session_push(s, cols, sluice_pipeline_input_count(p));
        if (st != SLUICE_OK) {
            sl_print_diagnostics(ctx);
            rc = sl_fail("%s: the batch of rows %" PRId64 "..%" PRId64 " was rejected: %s",
                         a->in, rows_in, rows_in + rows, sluice_strerror(st));
            break;
        }
        rows_in += rows;
        rc = sl_pull_ready(s, ctx, write_batch, out);
        progress_update(&pg, rows_in, false);
    }
    if (rc == SL_EXIT_OK) {
        st = sluice_session_flush(s);
        if (st != SLUICE_OK) {
            sl_print_diagnostics(ctx);
            rc = sl_fail("finishing the stream failed: %s", sluice_strerror(st));
        } else {
            rc = sl_pull_ready(s, ctx, write_batch, out);
        }
    }
    if (pg.shown || (rc == SL_EXIT_OK && pg.enabled && sl_now() - pg.start >= 1.0))
        progress_update(&pg, rows_in, true);
    int64_t rows_out = out ? sl_output_rows(out) : 0;
    if (out && sl_output_close(out, err, sizeof err) != 0 && rc == SL_EXIT_OK)
        rc = sl_fail("%s", err);
    if (rc == SL_EXIT_OK)
        printf("%s: %" PRId64 " rows in, %" PRId64 " rows out to %s/\n", a->pipeline, rows_in,
               rows_out, a->out);
    sl_input_close(in);
    free(cols);
    sluice_session_close(s);
    return rc;
}

static int run_main(const sl_command *self, int argc, char **argv) {
    run_args a = {.backend = SLUICE_BACKEND_AUTO, .batch_rows = DEFAULT_BATCH_ROWS};
    int rc = parse_args(self, argc, argv, &a);
    if (rc == SL_EXIT_OK) {
        sluice_context *ctx = sl_context_new();
        sluice_pipeline *p = ctx ? sl_load_pipeline(ctx, a.pipeline) : NULL;
        rc = p ? run_pipeline(self, ctx, p, &a) : SL_EXIT_ERROR;
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
    for (size_t i = 0; i < a.param_count; i++) free((char *)a.params[i].name);
    free(a.params);
    return rc;
}

const sl_command sl_command_run = {
    "run",
    "PIPELINE --in INPUT --out OUTDIR [--param NAME=VALUE]... [--backend auto|cpu|cuda] "
    "[--batch-rows N]",
    "Run a pipeline over an input stream and write each output column to OUTDIR/COLUMN.npy.",
    "INPUT is one of:\n"
    "  a directory of COLUMN.npy files, one per input column (1-D, little-endian, the type\n"
    "    the pipeline declares; an offsets input is its own file of k+1 int64 entries);\n"
    "  a directory of raw little-endian COLUMN.bin files typed by the pipeline;\n"
    "  a CSV file whose header row names the input columns (extra columns are ignored).\n"
    "The input streams through in batches, so it may be larger than memory; with an offsets\n"
    "input each batch takes whole segments.\n\n"
    "options:\n"
    "  --in INPUT          the input stream (required)\n"
    "  --out OUTDIR        where OUTDIR/COLUMN.npy are written, created if missing (required)\n"
    "  --param NAME=VALUE  override a param of the file (repeatable)\n"
    "  --backend B         auto (default: CUDA when available), cpu or cuda\n"
    "  --batch-rows N      rows per batch pushed (default 4194304); outputs do not depend on it\n",
    run_main};
