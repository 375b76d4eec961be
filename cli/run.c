/* run.c — `sluice run`: streams an input (a directory of .npy/.bin columns or a CSV file)
 * through a pipeline in batches and writes every output column to OUTDIR/COLUMN.npy, all or
 * nothing: the results go to temporary files that only a successful run renames into place
 * (output.c), and SIGINT/SIGTERM/SIGHUP remove them before the process ends. Reading and
 * writing overlap the session's work (flow.c: reader threads ahead, writer threads behind);
 * --io-threads 0 --write-behind off does the three in turn on one thread. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "csv.h"
#include "errbuf.h"
#include "flow.h"
#include "input.h"
#include "mpi_run.h"
#include "output.h"
#include "progress.h"
#ifdef SLUICE_WITH_CUDA
#include "sluice_cuda.h"
#endif

#define DEFAULT_BATCH_ROWS (INT64_C(1) << 22)
/* Input batches in the reader ring (one being pushed, the others read ahead), and result
 * batches queued for or held by the writer: each result batch held is memory the session
 * allocates afresh (page faults, zeroing), so the queue is short; 1 and 2 measured alike,
 * 3 slower (bench/RESULTS.md). */
#define RING_DEPTH 3
#define WRITE_DEPTH 2
/* The most --io-threads accepted. */
#define MAX_IO_THREADS 64

typedef struct run_args {
    const char *pipeline, *in, *out;
    sluice_backend backend;
    int64_t batch_rows, threads;
    int64_t io_threads; /* -1: chosen by the machine's cores */
    int write_behind;   /* -1: auto, 0: off, 1: on */
    int64_t sort_memory; /* bytes a stream-wide sort holds before spilling; -1: auto */
    const char *spill_dir;
    sl_progress_mode progress;
    bool timings;       /* --timings: say where the time went */
    sluice_param_value *params;
    size_t param_count;
} run_args;

static const char *const run_options[] = {"in",      "out",     "param",       "backend",
                                          "batch-rows", "threads", "io-threads", "write-behind",
                                          "progress", "no-progress", "sort-memory", "spill-dir",
                                          "timings", NULL};

/* "512M", "8G", "1048576", "0": bytes, with an optional K, M, G or T (powers of 1024). */
static bool parse_bytes(const char *text, int64_t *out) {
    if (!text || !*text) return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-') return false;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v > ((unsigned long long)INT64_MAX >> shift)) return false;
    *out = (int64_t)(v << shift);
    return true;
}

static int parse_args(const sl_command *self, int argc, char **argv, run_args *a) {
    const char *value;
    for (int i = 1; i < argc;) {
        int got;
        if (sl_flag(argv, &i, "progress")) {
            a->progress = SL_PROGRESS_ALWAYS;
        } else if (sl_flag(argv, &i, "no-progress")) {
            a->progress = SL_PROGRESS_NEVER;
        } else if (sl_flag(argv, &i, "timings")) {
            a->timings = true;
        } else if ((got = sl_option(self, argc, argv, &i, "in", &a->in)) != 0) {
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
        } else if ((got = sl_option(self, argc, argv, &i, "threads", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 0, SL_MAX_THREADS, &a->threads))
                return sl_usage_error(self, "--threads needs an integer in 0..%d, not '%s'",
                                      SL_MAX_THREADS, value);
        } else if ((got = sl_option(self, argc, argv, &i, "io-threads", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 0, MAX_IO_THREADS, &a->io_threads))
                return sl_usage_error(self, "--io-threads needs an integer in 0..%d, not '%s'",
                                      MAX_IO_THREADS, value);
        } else if ((got = sl_option(self, argc, argv, &i, "write-behind", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!strcmp(value, "auto")) a->write_behind = -1;
            else if (!strcmp(value, "on")) a->write_behind = 1;
            else if (!strcmp(value, "off")) a->write_behind = 0;
            else
                return sl_usage_error(self, "--write-behind is auto, on or off, not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "sort-memory", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!parse_bytes(value, &a->sort_memory))
                return sl_usage_error(self, "--sort-memory needs a size such as 512M, 8G or 0 "
                                      "(no limit), not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "spill-dir", &a->spill_dir)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
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
    /* An output column named like an input column would replace the input file. */
    char in_real[PATH_MAX], out_real[PATH_MAX];
    if (realpath(a->in, in_real) && realpath(a->out, out_real) && strcmp(in_real, out_real) == 0)
        return sl_usage_error(self, "--out must not be the input directory ('%s')", a->in);
    return SL_EXIT_OK;
}

/* ---- a bad --param, named ---------------------------------------------------------------- */

/* The session refused the params (unknown name, or a value its type does not take). Finds
 * which one by setting them one at a time on a throwaway CPU session, and says what is wrong
 * with it: the library's own reason for an unknown name (with its did-you-mean), the param's
 * type and why the value is not one of it otherwise. */
static int explain_bad_param(const sl_command *self, sluice_context *ctx, sluice_pipeline *p,
                             const run_args *a) {
    sluice_session_options probe_opts = SLUICE_SESSION_OPTIONS_INIT;
    probe_opts.backend = SLUICE_BACKEND_CPU;
    probe_opts.max_batch_rows = 1;
    sluice_session *probe = NULL;
    if (sluice_session_open(p, &probe_opts, &probe) != SLUICE_OK) {
        sl_print_diagnostics(ctx);
        return sl_usage_error(self, "bad --param");
    }
    int rc = SL_EXIT_USAGE;
    for (size_t i = 0; i < a->param_count; i++) {
        const sluice_param_value *pv = &a->params[i];
        sluice_status st = sluice_session_set_param(probe, pv->name, pv->text);
        if (st == SLUICE_OK) continue;
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
        if (st != SLUICE_ERR_BAD_VALUE) {
            rc = sl_usage_error(self, "bad --param %s=%s: %s", pv->name, pv->text,
                                d ? d->message : sluice_strerror(st));
            break;
        }
        sluice_type type = SLUICE_F64;
        for (size_t k = 0; k < sluice_pipeline_param_count(p); k++) {
            sluice_param_info info;
            if (sluice_pipeline_param(p, k, &info) == SLUICE_OK && !strcmp(info.name, pv->name))
                type = info.type;
        }
        /* The CSV reader's reason tells a number out of the type's range from text that is
         * not a number; the library's parser is the judge, so a value the reader would take
         * (bool 1/0, which params do not) gets the library's rule instead. */
        char why[256];
        unsigned char scratch[8];
        if (type == SLUICE_BOOL)
            snprintf(why, sizeof why, "a bool param takes true or false");
        else if (sl_csv_parse_value(pv->text, type, scratch, why, sizeof why) == 0 || !*pv->text)
            snprintf(why, sizeof why, "'%s' is not a valid %s", pv->text,
                     sluice_type_name(type));
        const char *tname = sluice_type_name(type);
        rc = sl_usage_error(self, "bad --param %s=%s: '%s' is %s %s param, and %s", pv->name,
                            pv->text, pv->name, tname[0] == 'u' || tname[0] == 'b' ? "a" : "an",
                            tname, why);
        break;
    }
    sluice_session_close(probe);
    return rc;
}

/* ---- memory for a batch ------------------------------------------------------------------ */

/* Memory the system can give without swapping: MemAvailable, else the free pages. */
static uint64_t available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (uint64_t)kb * 1024;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* Batches are held whole: the input's columns (RING_DEPTH of them when reading ahead), and
 * the result batches (WRITE_DEPTH queued for the writer, and the session's). Warns when
 * --batch-rows asks for more of that than the memory available (a file input smaller than a
 * batch makes the batch smaller, and the only one: that is taken into account). Not capped:
 * where batches are cut changes the results of per-batch stages, so only the user may change
 * it. */
static void warn_batch_memory(const sluice_pipeline *p, const sl_input *in, int64_t batch_rows,
                              bool csv, bool overlap) {
    int64_t rows = batch_rows, total = sl_input_total_rows(in);
    bool one_batch = total >= 0 && total <= rows;
    if (one_batch) rows = total;
    uint64_t in_copies = overlap && !one_batch ? RING_DEPTH : 1;
    uint64_t out_copies = overlap && !one_batch ? WRITE_DEPTH + 1 : 1;
    uint64_t row_bytes = 0;
    for (size_t i = 0; i < sluice_pipeline_input_count(p); i++) {
        sluice_column_info info;
        if (sluice_pipeline_input(p, i, &info) == SLUICE_OK)
            row_bytes += in_copies * sluice_type_size(info.type);
    }
    for (size_t i = 0; i < sluice_pipeline_output_count(p); i++) {
        sluice_column_info info;
        if (sluice_pipeline_output(p, i, &info) == SLUICE_OK)
            row_bytes += out_copies * sluice_type_size(info.type);
    }
    /* A CSV row takes at least one byte per input column (commas and newline). */
    int64_t csv_bytes = sl_input_total_bytes(in);
    size_t ncols = sluice_pipeline_input_count(p) ? sluice_pipeline_input_count(p) : 1;
    if (csv && csv_bytes >= 0 && csv_bytes / (int64_t)ncols < rows)
        rows = csv_bytes / (int64_t)ncols;
    uint64_t avail = available_memory();
    double need = (double)rows * (double)row_bytes;
    if (avail == 0 || row_bytes == 0 || need <= 0.5 * (double)avail) return;
    int64_t fits = (int64_t)(0.25 * (double)avail / (double)row_bytes);
    fprintf(stderr,
            "sluice run: warning: --batch-rows %" PRId64 " holds up to %" PRId64
            " rows of %" PRIu64 " bytes in memory at once (%.3g GB), but only %.3g GB are "
            "available; the run may fail for lack of memory (--batch-rows %" PRId64
            " would fit)\n",
            batch_rows, rows, row_bytes, need / 1e9, (double)avail / 1e9, fits > 0 ? fits : 1);
}

/* ---- signals ----------------------------------------------------------------------------- */

/* A signal that arrived while the outputs were being renamed into place: raised again once
 * they are. */
static atomic_int pending_signal;

static void on_signal(int sig) {
    if (!sl_output_discard_from_signal()) {
        atomic_store(&pending_signal, sig);
        return;
    }
    static const char msg[] = "\nsluice run: interrupted; the partial outputs were removed and "
                              "the output directory is as it was\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    /* Ends the process by the signal itself, so that the parent sees which (status 128+N). */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal_handlers(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&sa.sa_mask, sigs[i]);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* A signal ignored by whoever started the run (nohup) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ---- the run ----------------------------------------------------------------------------- */

/* Where a run's time went, in seconds (--timings). The streaming loop's three parts are the
 * run's thread waiting for the readers, in sluice_session_push, and pulling results and
 * handing them to the writers (waiting for room in their queue included). */
typedef struct run_times {
    double open, start, wait_input, push, pull, flush, final_write, commit, close;
} run_times;

/* Where a run is: what the summary and the progress line report. */
typedef struct run_state {
    sluice_session *session;
    sluice_context *ctx;
    sl_output *out;
    sl_progress *pg;
    sl_input *in;
    bool in_abandoned; /* a reader thread still uses in: it must not be closed */
    int64_t rows_in, bytes_in;
    int64_t rows_handed; /* result rows written or handed to the writers */
    sl_writer *writer; /* when writing behind */
    run_times t;
} run_state;

/* Ends the progress line, so that a message starts on a line of its own. */
static void end_progress(run_state *r) {
    sl_progress_finish(r->pg);
    r->pg = NULL;
}

static int64_t rows_written(const run_state *r) {
    return r->writer ? sl_writer_rows(r->writer) : sl_output_rows(r->out);
}

static void show_progress(void *arg) {
    run_state *r = arg;
    sl_progress_update(r->pg, r->rows_in, r->bytes_in, rows_written(r));
}

/* Writes result batch b here, or hands it to the writer threads; takes b. */
static int write_batch(run_state *r, sluice_batch *b, sluice_column *outcols) {
    char err[1024];
    int64_t rows = sluice_batch_rows(b);
    int rc;
    if (r->writer) {
        rc = sl_output_columns(r->out, b, outcols, err, sizeof err);
        if (rc == 0) rc = sl_writer_put(r->writer, b, outcols, err, sizeof err);
        if (rc != 0) sluice_batch_free(b); /* else the writer has it */
    } else {
        rc = sl_output_append(r->out, b, err, sizeof err);
        sluice_batch_free(b);
    }
    if (rc != 0) {
        end_progress(r);
        return sl_fail("%s", err);
    }
    r->rows_handed += rows;
    show_progress(r);
    return SL_EXIT_OK;
}

static int pull_failed(run_state *r, sluice_status st) {
    end_progress(r);
    sl_print_diagnostics(r->ctx);
    return sl_fail("pulling results failed: %s", sluice_strerror(st));
}

/* Pulls every ready result batch and writes it (write_batch). */
static int write_ready(run_state *r, sluice_column *outcols) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = sluice_session_pull(r->session, &b);
        if (st != SLUICE_OK) return pull_failed(r, st);
        if (!b) return SL_EXIT_OK;
        int rc = write_batch(r, b, outcols);
        if (rc != SL_EXIT_OK) return rc;
    }
}

/* After a successful flush every result is ready (sluice.h): all of it is pulled first (it is
 * in memory already), so that the progress line knows how many rows the final write has to
 * go, then written in order. */
static int write_rest(run_state *r, sluice_column *outcols) {
    sluice_batch **all = NULL;
    size_t n = 0, cap = 0;
    int64_t rows = 0;
    int rc = SL_EXIT_OK;
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = sluice_session_pull(r->session, &b);
        if (st != SLUICE_OK) {
            rc = pull_failed(r, st);
            break;
        }
        if (!b) break;
        if (n == cap) {
            size_t grown_cap = cap ? 2 * cap : 64;
            sluice_batch **grown = realloc(all, grown_cap * sizeof *grown);
            if (!grown) {
                sluice_batch_free(b);
                end_progress(r);
                rc = sl_fail("out of memory");
                break;
            }
            all = grown;
            cap = grown_cap;
        }
        all[n++] = b;
        rows += sluice_batch_rows(b);
    }
    if (rc == SL_EXIT_OK)
        sl_progress_phase_rows(r->pg, "writing the outputs", r->rows_handed + rows);
    size_t i = 0;
    for (; rc == SL_EXIT_OK && i < n; i++) rc = write_batch(r, all[i], outcols);
    for (; i < n; i++) sluice_batch_free(all[i]); /* after a failure: not written */
    free(all);
    return rc;
}

/* True when the plan has a stream-wide sort, whose rows all leave at flush: the progress line
 * then names the long flush for what it is. Read from explain's text (the public API says no
 * more about a plan); a plan that words it otherwise only gets the generic phase name. */
static bool sorts_whole_stream(const sluice_pipeline *p, sluice_context *ctx,
                               sluice_backend backend) {
    char *plan = NULL;
    bool found = false;
    if (sluice_pipeline_explain(p, backend, &plan, NULL) == SLUICE_OK && plan)
        found = strstr(plan, "rows leave at flush") != NULL;
    sluice_free_text(ctx, plan);
    return found;
}

/* Reader threads for column files when --io-threads does not say. A CPU session: a quarter
 * of the cores (the session's workers want the rest), 1 to 4; reading pages in from the page
 * cache runs at about 12 GB/s a thread. A device session leaves the cores to the I/O, and its
 * readers copy every byte into pinned memory (a few GB/s a thread from the page cache, where
 * the bus takes about 50 GB/s): half the cores, 1 to 8. A CSV is parsed by one. */
static int auto_io_threads(const sluice_session *s) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    bool device = sluice_session_backend(s) != SLUICE_BACKEND_CPU;
    long n = device ? cores / 2 : cores / 4;
    long most = device ? 8 : 4;
    return n < 1 ? 1 : n > most ? (int)most : (int)n;
}

/* Writer threads behind the session (with a writer at all): as many as the readers (writing
 * to the page cache costs about what reading from it does), at least one. */
static int writer_threads(const run_args *a, const sluice_session *s) {
    int n = a->io_threads < 0 ? auto_io_threads(s) : (int)a->io_threads;
    return n < 1 ? 1 : n;
}

#ifdef SLUICE_WITH_CUDA
/* The readers' slot buffers of a CUDA session: pinned, so the device reads them by DMA. */
static void *pinned_alloc(void *ctx, size_t bytes) {
    void *p = NULL;
    return sluice_cuda_host_alloc(ctx, bytes, &p) == SLUICE_OK ? p : NULL;
}
static void pinned_release(void *ctx, void *p) { sluice_cuda_host_free(ctx, p); }
#endif

/* The memory the readers read into: pinned for a CUDA session, else none of their own. */
static const sl_reader_memory *reader_memory(const run_state *r, sl_reader_memory *mem) {
#ifdef SLUICE_WITH_CUDA
    if (sluice_session_backend(r->session) == SLUICE_BACKEND_CUDA) {
        *mem = (sl_reader_memory){pinned_alloc, pinned_release, r->ctx};
        return mem;
    }
#endif
    (void)r;
    (void)mem;
    return NULL;
}

/* Whether results are written by a thread of their own. Auto: yes, unless the session runs
 * on the CPU backend of a machine of at most 2 cores, where the run was slower for it, with
 * one worker as with two (bench/RESULTS.md): the writer's copies compete with the workers
 * for the cores and read the results from another core's cache. A GPU session leaves the
 * host's cores free for it. */
static bool use_writer_thread(const run_args *a, const sluice_session *s) {
    if (a->write_behind >= 0) return a->write_behind == 1;
    return !(sluice_session_backend(s) == SLUICE_BACKEND_CPU &&
             sysconf(_SC_NPROCESSORS_ONLN) <= 2);
}

static void interrupt_reader(void *reader) { sl_reader_interrupt(reader); }

/* The batches themselves: read ahead by reader threads or in turn (--io-threads 0), written
 * behind by the writer thread or in turn. Returns the exit status. */
static int push_batches(run_state *r, const sluice_pipeline *p, const run_args *a,
                        sluice_column *cols, sluice_column *outcols) {
    char err[1024];
    size_t ninputs = sluice_pipeline_input_count(p);
    sl_reader *reader = NULL;
    int threads = a->io_threads < 0 ? auto_io_threads(r->session) : (int)a->io_threads;
    sl_reader_memory mem;
    double t = sl_now();
    if (threads > 0 || use_writer_thread(a, r->session)) {
        /* A failed write interrupts a wait for the readers (which may be reading a pipe
         * that delivers nothing for a long while): the run ends at once, as in turn. */
        if ((threads > 0 && sl_reader_start(&reader, r->in, a->batch_rows, threads, RING_DEPTH,
                                            reader_memory(r, &mem), err, sizeof err) != 0) ||
            (use_writer_thread(a, r->session) &&
             sl_writer_start(&r->writer, r->out, WRITE_DEPTH, writer_threads(a, r->session),
                             reader ? interrupt_reader : NULL, reader, err, sizeof err) != 0)) {
            end_progress(r);
            if (!sl_reader_stop(reader)) r->in_abandoned = true;
            return sl_fail("%s", err);
        }
    }
    int rc = SL_EXIT_OK;
    r->t.start = sl_now() - t;
    /* The first row of every push, so that a failure the session finds in an earlier push
     * still in flight (sluice.h, "Errors with batches in flight") names that batch's rows. */
    int64_t *starts = NULL;
    size_t npushes = 0, starts_cap = 0;
    for (;;) {
        int64_t rows = 0, bytes = -1;
        t = sl_now();
        int got = reader ? sl_reader_next(reader, cols, &rows, &bytes, err, sizeof err)
                         : sl_input_next(r->in, a->batch_rows, cols, &rows, err, sizeof err);
        r->t.wait_input += sl_now() - t;
        if (got == -2 && sl_writer_check(r->writer, err, sizeof err) == 0)
            sl_errf(err, sizeof err, "internal: the reader was interrupted, the writer is fine");
        if (got < 0) {
            end_progress(r);
            rc = sl_fail("%s", err);
            break;
        }
        if (got == 0) break;
        if (!reader) bytes = sl_input_bytes_read(r->in);
        if (npushes == starts_cap) {
            size_t cap = starts_cap ? 2 * starts_cap : 64;
            int64_t *grown = realloc(starts, cap * sizeof *starts);
            if (!grown) {
                end_progress(r);
                rc = sl_fail("out of memory");
                break;
            }
            starts = grown;
            starts_cap = cap;
        }
        starts[npushes++] = r->rows_in;
        t = sl_now();
        sluice_status st = sluice_session_push(r->session, cols, ninputs);
        r->t.push += sl_now() - t;
        if (st != SLUICE_OK) {
            end_progress(r);
            sl_print_diagnostics(r->ctx);
            /* The first push that does not stand failed: this one, or one still in flight. */
            int64_t f = sluice_session_push_count(r->session);
            if (f < 0 || (size_t)f >= npushes) f = (int64_t)npushes - 1;
            int64_t end = (size_t)f + 1 < npushes ? starts[f + 1] : r->rows_in + rows;
            rc = sl_fail("%s: the batch of rows %" PRId64 "..%" PRId64 " was rejected: %s",
                         a->in, starts[f], end, sluice_strerror(st));
            break;
        }
        r->rows_in += rows;
        r->bytes_in = bytes;
        t = sl_now();
        rc = write_ready(r, outcols);
        r->t.pull += sl_now() - t;
        if (rc != SL_EXIT_OK) break;
        show_progress(r);
    }
    free(starts);
    /* At the end of the input the readers have ended already; after a failure they stop. */
    if (r->writer) sl_writer_on_fail(r->writer, NULL, NULL);
    if (!sl_reader_stop(reader)) r->in_abandoned = true;
    return rc;
}

/* Streams the input through the session into the output files; returns the exit status. */
static int stream(run_state *r, const sluice_pipeline *p, const run_args *a, bool stream_sort) {
    char err[1024];
    size_t ninputs = sluice_pipeline_input_count(p), noutputs = sl_output_column_count(r->out);
    sluice_column *cols = calloc(ninputs + 1, sizeof *cols);
    sluice_column *outcols = calloc(noutputs + 1, sizeof *outcols);
    int rc = cols && outcols ? push_batches(r, p, a, cols, outcols) : sl_fail("out of memory");
    if (rc == SL_EXIT_OK) {
        /* The flush reports nothing until it returns: a stream-wide sort orders every row
         * here. */
        sl_progress_phase(r->pg, stream_sort ? "sorting the whole stream" : "finishing the stream");
        double t = sl_now();
        sluice_status st = sluice_session_flush(r->session);
        r->t.flush = sl_now() - t;
        if (st != SLUICE_OK) {
            end_progress(r);
            sl_print_diagnostics(r->ctx);
            rc = sl_fail("finishing the stream failed: %s", sluice_strerror(st));
        }
    }
    double t = sl_now();
    if (rc == SL_EXIT_OK) rc = write_rest(r, outcols);
    if (r->writer) {
        /* The output's rows are read from it once the writer has ended. */
        sl_writer *w = r->writer;
        r->writer = NULL;
        if (rc == SL_EXIT_OK && sl_writer_finish(w, show_progress, r, err, sizeof err) != 0) {
            end_progress(r);
            rc = sl_fail("%s", err);
        } else if (rc != SL_EXIT_OK) {
            sl_writer_abort(w);
        }
    }
    r->t.final_write = sl_now() - t;
    free(cols);
    free(outcols);
    return rc;
}

/* --timings: one line on stderr after the summary. */
static void print_timings(const run_times *t) {
    fprintf(stderr,
            "sluice run: timings: session open %.3f s, readers and writers started %.3f s, "
            "streaming %.3f s (waiting for input %.3f s, pushing %.3f s, pulling and queueing "
            "results %.3f s), flush %.3f s, final write %.3f s, commit %.3f s, session close "
            "%.3f s\n",
            t->open, t->start, t->wait_input + t->push + t->pull, t->wait_input, t->push,
            t->pull, t->flush, t->final_write, t->commit, t->close);
}

/* The whole run once the arguments are parsed and the pipeline is loaded. */
static int run_pipeline(const sl_command *self, sluice_context *ctx, sluice_pipeline *p,
                        const run_args *a) {
    double t0 = sl_now();
    sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
    opts.backend = a->backend;
    /* The session sizes its scratch for this many rows; a larger push is cut inside the
     * library, so a huge --batch-rows must not turn into a huge allocation. */
    opts.max_batch_rows = a->batch_rows < DEFAULT_BATCH_ROWS ? a->batch_rows : DEFAULT_BATCH_ROWS;
    opts.params = a->params;
    opts.param_count = a->param_count;
    /* A stream-wide sort spills sorted runs to disk past this budget: by default half the
     * memory available when the run starts, so an input larger than memory still sorts. */
    opts.sort_memory_bytes =
        a->sort_memory >= 0 ? a->sort_memory : (int64_t)(available_memory() / 2);
    opts.spill_dir = a->spill_dir;
    run_state r = {.ctx = ctx};
    sluice_status st = sluice_session_open(p, &opts, &r.session);
    r.t.open = sl_now() - t0;
    if (st != SLUICE_OK) {
        if (st == SLUICE_ERR_UNKNOWN_PARAM || st == SLUICE_ERR_BAD_VALUE)
            return explain_bad_param(self, ctx, p, a);
        sl_print_diagnostics(ctx);
        return sl_fail("cannot open a session: %s", sluice_strerror(st));
    }
    char err[1024];
    int rc = SL_EXIT_OK;
    if (sl_input_open(&r.in, p, a->in, err, sizeof err) != 0) rc = sl_fail("%s", err);
    bool csv = r.in && sl_input_total_rows(r.in) < 0;
    if (rc == SL_EXIT_OK)
        warn_batch_memory(p, r.in, a->batch_rows, csv, a->io_threads != 0 || a->write_behind != 0);
    bool stream_sort = sorts_whole_stream(p, ctx, sluice_session_backend(r.session));
    if (rc == SL_EXIT_OK) {
        install_signal_handlers();
        if (sl_output_open(&r.out, p, a->out, err, sizeof err) != 0) rc = sl_fail("%s", err);
    }
    if (rc == SL_EXIT_OK) {
        r.pg = sl_progress_start(a->progress, sl_input_total_rows(r.in),
                                 sl_input_total_bytes(r.in));
        rc = stream(&r, p, a, stream_sort);
    }
    int64_t rows_out = 0;
    bool commit_failed = false;
    if (rc == SL_EXIT_OK) {
        rows_out = sl_output_rows(r.out);
        sl_progress_phase(r.pg, "syncing the outputs to disk");
        double t = sl_now();
        commit_failed = sl_output_commit(r.out, err, sizeof err) != 0;
        r.t.commit = sl_now() - t;
        r.out = NULL;
        end_progress(&r);
        if (commit_failed) rc = sl_fail("%s", err);
    }
    end_progress(&r);
    sl_output_discard(r.out); /* a failed run: the temporaries go, OUTDIR stays as it was */
    double seconds = sl_now() - t0;
    if (rc == SL_EXIT_OK) {
        char rate[32];
        sl_format_count(rate, sizeof rate, seconds > 0 ? (double)r.rows_in / seconds : 0,
                        "rows/s");
        fprintf(stderr,
                "sluice run: %s: %" PRId64 " rows in, %" PRId64 " rows out to %s in %.3f s "
                "(%s)\n",
                a->pipeline, r.rows_in, rows_out, a->out, seconds, rate);
    }
    else
        fprintf(stderr, "sluice run: %s: failed after %" PRId64 " rows in (%.3f s)%s%s%s\n",
                a->pipeline, r.rows_in, seconds, commit_failed ? "" : "; ",
                commit_failed ? "" : a->out, commit_failed ? "" : " is as it was");
    if (!r.in_abandoned) sl_input_close(r.in);
    double t = sl_now();
    sluice_session_close(r.session);
    r.t.close = sl_now() - t;
    if (a->timings) print_timings(&r.t);
    int sig = atomic_load(&pending_signal);
    if (sig) {
        /* Interrupted while the outputs were being put in place: they are complete. */
        fprintf(stderr, "sluice run: interrupted (signal %d) once the outputs were complete\n",
                sig);
        signal(sig, SIG_DFL);
        raise(sig);
    }
    return rc;
}

static int run_main(const sl_command *self, int argc, char **argv) {
    run_args a = {.backend = SLUICE_BACKEND_AUTO, .batch_rows = DEFAULT_BATCH_ROWS,
                  .io_threads = -1, .write_behind = -1, .sort_memory = -1,
                  .progress = SL_PROGRESS_AUTO};
    int rc = parse_args(self, argc, argv, &a);
    if (rc == SL_EXIT_OK) {
        sluice_context *ctx = sl_context_new((int)a.threads);
        sluice_pipeline *p = ctx ? sl_load_pipeline(ctx, a.pipeline) : NULL;
        if (p && sl_mpi_launched()) { /* mpirun -np N sluice run …: cli/mpi_run.c */
            sl_mpi_run_args m = {a.pipeline, a.in,         a.out,         a.backend,
                                 a.batch_rows, a.params, a.param_count};
            rc = sl_mpi_run(ctx, p, &m);
        } else {
            rc = p ? run_pipeline(self, ctx, p, &a) : SL_EXIT_ERROR;
        }
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
    "[--batch-rows N] [--threads N] [--io-threads N] [--write-behind auto|on|off] "
    "[--sort-memory SIZE] [--spill-dir DIR] [--progress | --no-progress] [--timings]",
    "Run a pipeline over an input stream and write each output column to OUTDIR/COLUMN.npy.",
    "INPUT is one of:\n"
    "  a directory of COLUMN.npy files, one per input column (1-D, little-endian, the type\n"
    "    the pipeline declares; an offsets input is its own file of k+1 int64 entries);\n"
    "  a directory of raw little-endian COLUMN.bin files typed by the pipeline;\n"
    "  a CSV file (or a pipe, e.g. <(zcat in.csv.gz)) whose header row names the input\n"
    "    columns; extra columns are ignored; an empty field is NaN in a float column and an\n"
    "    error in an integer or bool one.\n"
    "The input streams through in batches, so it may be larger than memory; a stream-wide\n"
    "sort holds its rows until the end, spilling sorted runs to disk past --sort-memory and\n"
    "merging them at the end. With an offsets input each batch takes whole segments.\n\n"
    "Outputs are all or nothing: each column is written to a temporary file in OUTDIR\n"
    "(.COLUMN.npy.partial-PID) and renamed to COLUMN.npy only when the whole run succeeded.\n"
    "A run that fails (bad data, a full disk, an unwritable OUTDIR) or is interrupted (SIGINT,\n"
    "SIGTERM, SIGHUP) removes its temporaries and leaves OUTDIR as it was, earlier results\n"
    "included; an OUTDIR the run created is removed again. (SIGKILL leaves no chance to\n"
    "clean up: the .COLUMN.npy.partial-PID files of a killed run are safe to delete.)\n\n"
    "options:\n"
    "  --in INPUT          the input stream (required)\n"
    "  --out OUTDIR        where OUTDIR/COLUMN.npy are written, created if missing (required)\n"
    "  --param NAME=VALUE  override a param of the file (repeatable)\n"
    "  --backend B         auto (default: CUDA when available), cpu or cuda\n"
    "  --batch-rows N      rows per batch pushed (default 4194304). Outputs do not depend on\n"
    "                      it, except where the pipeline works per batch: a `reset: batch`\n"
    "                      scan and a `per: batch` sort restart at each batch, and a\n"
    "                      `per: batch` reduce ends its segments there (without `segments`:\n"
    "                      one row per batch). With an offsets input N is a budget of whole\n"
    "                      segments (at least one), so a segmented scan or a reduce over\n"
    "                      those segments gives the same rows whatever N.\n"
    "                      A warning says when N rows would not fit in the memory available.\n"
    "  --threads N         CPU backend worker threads (default 0: one per core)\n"
    "  --io-threads N      threads reading column files ahead of the pipeline, up to 2\n"
    "                      batches ahead, and writing results behind it (default: a quarter\n"
    "                      of the cores, 1 to 4; on the CUDA backend half the cores, 1 to 8,\n"
    "                      reading into pinned memory the GPU copies directly; a CSV is\n"
    "                      read by one); 0: each batch is read when it is pushed\n"
    "  --write-behind W    on: threads write the results while the pipeline works on the\n"
    "                      next batch (up to 2 result batches wait); off: each batch is\n"
    "                      written when it is ready; auto (default): on, except for the\n"
    "                      CPU backend on a machine of at most 2 cores, where it is slower.\n"
    "                      Outputs are the same whatever these say.\n"
    "  --sort-memory SIZE  memory a stream-wide sort may hold (e.g. 512M, 8G; K/M/G/T are\n"
    "                      powers of 1024) before it writes its rows as a sorted run to disk\n"
    "                      (default: half the memory available at start; 0: no limit)\n"
    "  --spill-dir DIR     where those runs go (default: $TMPDIR, else /tmp); the files are\n"
    "                      unlinked at once, so nothing is left behind\n"
    "  --progress          show the progress line even when stderr is not a terminal\n"
    "  --no-progress       never show it (default: shown on a terminal once a run takes 1 s:\n"
    "                      rows and bytes read, rows/s, rows written, the share done and an\n"
    "                      ETA when the input's size is known, and the sort or write phase\n"
    "                      with the share of the final write done and its ETA)\n"
    "  --timings           after the summary, a line saying where the time went: opening\n"
    "                      the session, starting the readers and writers, waiting for input,\n"
    "                      pushing, pulling results, the flush, the final write, the commit\n"
    "A summary line (rows in, rows out, seconds, rows/s) ends every run on stderr (with\n"
    "--timings, the timings line follows it).\n\n"
    "exit status:\n"
    "  0    success: every output is complete\n"
    "  1    an error in the pipeline or the data, or an I/O error (diagnostics on stderr);\n"
    "       OUTDIR is as it was\n"
    "  2    a usage error (a message and the usage on stderr)\n"
    "  128+N (from a shell) killed by signal N, e.g. 130 for SIGINT, 143 for SIGTERM; OUTDIR\n"
    "       is as it was\n",
    run_main, run_options};
