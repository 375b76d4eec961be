/* mpi_run.c — `mpirun -np N sluice run PIPELINE --in DIR --out OUTDIR`: the input's rows split
 * among the ranks, one distributed session (include/sluice_mpi.h), and one set of output
 * files that every rank writes its rows into at their global positions.
 *
 * The split. Rank r takes rows [N·r/P, N·(r+1)/P) of every column file (mapped, so it reads
 * only its range), or, with an offsets input, the whole segments that start in that range.
 * A CSV input cannot be split without reading it whole, so it is refused.
 *
 * Passes. The distributed session walks each rank's part once per carry phase, once to
 * count its rows out when needed, and a final time for the results (sluice_mpi.h): the rank
 * re-reads its range for each, so nothing but a batch is held.
 *
 * GPUs. With the CUDA backend (or auto) rank i of a node uses GPU i mod GPUs, unless
 * CUDA_VISIBLE_DEVICES is set already (pick_gpu).
 *
 * Outputs, all or nothing. From the start of the final pass every rank knows where its rows
 * go. Rank 0 makes OUTDIR and one temporary per output column, .COLUMN.npy.partial-PID (PID
 * rank 0's), with its final header and length; every rank then writes its rows with pwrite
 * at their place and syncs. Only when every rank succeeded does rank 0 rename the
 * temporaries into place; otherwise it removes them (and OUTDIR when it made it), and every
 * rank exits 1 with the first failing rank's reason. A job killed part-way leaves only
 * .partial files, which never look like results. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mpi_run.h"

bool sl_mpi_launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                       "PMI_RANK", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

#ifndef SLUICE_WITH_MPI

int sl_mpi_run(sluice_context *ctx, sluice_pipeline *p, const sl_mpi_run_args *a) {
    (void)ctx;
    (void)p;
    (void)a;
    return sl_fail("this sluice was built without MPI, but an MPI launcher started it: every "
                   "rank would run the whole input and write the same files. Install Open MPI "
                   "(scripts/mpi_deps.sh) and rebuild, or run it without mpirun");
}

int sl_mpi_explain(sluice_context *ctx, sluice_pipeline *p) {
    (void)ctx;
    (void)p;
    return sl_fail("--ranks: this sluice was built without MPI (scripts/mpi_deps.sh installs "
                   "Open MPI; rebuild then)");
}

#else

#include <dirent.h>
#include <mpi.h>

#include "errbuf.h"
#include "input.h"
#include "npy.h"
#include "sluice_mpi.h"

/* The one set of output files the ranks share. */
typedef struct shared_out {
    size_t ncols;
    sluice_column_info *info;
    char **tmp, **final;
    int *fd;
    int64_t first, written; /* this rank's first global row; its rows written so far */
    bool made_dir;
} shared_out;

typedef struct mpi_run {
    MPI_Comm comm;
    int rank, size;
    sluice_context *ctx;
    sluice_pipeline *p;
    const sl_mpi_run_args *a;
    sl_input *in;
    size_t nin;
    int offsets_col;        /* pipeline input index of the offsets input, -1 */
    int64_t row0, row1;     /* this rank's rows */
    int64_t seg0, seg1;     /* and segments, with an offsets input */
    int64_t *offsets;       /* all k+1 offsets, with an offsets input */
    int64_t *batch_offsets; /* a batch's rebased offsets */
    void **bufs;            /* per input: rows read when the mapping misaligns them */
    size_t *buf_cap;
    sluice_column *cols;
    sluice_mpi_session *ds;
    shared_out out;
    int64_t rows_in;
    int failed_rank;
    char err[1024];
} mpi_run;

/* Every rank says whether it failed (its reason in r->err); when one did, every rank returns
 * SL_EXIT_ERROR with the first failing rank's number in r->failed_rank and its reason in
 * r->err (printed once, at the end). Collective: every rank calls it at the same points. */
static int agree(mpi_run *r, int rc) {
    int mine = rc == SL_EXIT_OK ? r->size : r->rank, first = r->size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, r->comm);
    if (first == r->size) return SL_EXIT_OK;
    MPI_Bcast(r->err, (int)sizeof r->err, MPI_CHAR, first, r->comm);
    r->err[sizeof r->err - 1] = '\0';
    r->failed_rank = first;
    return SL_EXIT_ERROR;
}

/* A library failure on this rank, as one line for agree: the status and the first
 * diagnostic. */
static int lib_fail(mpi_run *r, sluice_status st, const char *what) {
    const sluice_diagnostic *d = sluice_context_diagnostic(r->ctx, 0);
    snprintf(r->err, sizeof r->err, "%s: %s%s%s", what, sluice_strerror(st), d ? ": " : "",
             d ? d->message : "");
    return SL_EXIT_ERROR;
}

/* ---- the split ---------------------------------------------------------------------------- */

static int64_t lower_bound(const int64_t *v, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int split_input(mpi_run *r) {
    int64_t n = sl_input_total_rows(r->in);
    if (n < 0 || sl_input_is_csv(r->in))
        return sl_errf(r->err, sizeof r->err,
                       "mpirun needs column files (--in DIR of COLUMN.npy or COLUMN.bin): a CSV "
                       "stream cannot be split among ranks without reading it whole");
    r->nin = sl_input_column_count(r->in);
    r->offsets_col = -1;
    for (size_t i = 0; i < r->nin; i++)
        if (sl_input_column(r->in, i)->role == SLUICE_ROLE_OFFSETS) r->offsets_col = (int)i;
    r->row0 = (int64_t)((__int128)n * r->rank / r->size);
    r->row1 = (int64_t)((__int128)n * (r->rank + 1) / r->size);
    if (r->offsets_col >= 0) {
        /* All the offsets (k+1 entries): one window over the whole input says k. */
        sl_input_window all;
        int64_t k = 0;
        if (sl_input_next_window(r->in, INT64_MAX, &all) == 1) k = all.segs;
        r->offsets = calloc((size_t)k + 1, sizeof(int64_t));
        if (!r->offsets) return sl_errf(r->err, sizeof r->err, "out of memory");
        if (k > 0) sl_input_window_offsets(r->in, &all, r->offsets);
        /* Whole segments: those starting in [row0, row1), the last rank's up to k. */
        r->seg0 = r->rank == 0 ? 0 : lower_bound(r->offsets, k, r->row0);
        r->seg1 = r->rank == r->size - 1 ? k : lower_bound(r->offsets, k, r->row1);
        if (r->seg1 < r->seg0) r->seg1 = r->seg0;
        r->row0 = r->offsets[r->seg0];
        r->row1 = r->offsets[r->seg1];
        int64_t most = r->a->batch_rows < k ? r->a->batch_rows : k;
        r->batch_offsets = calloc((size_t)most + 2, sizeof(int64_t));
        if (!r->batch_offsets) return sl_errf(r->err, sizeof r->err, "out of memory");
    }
    r->bufs = calloc(r->nin + 1, sizeof(void *));
    r->buf_cap = calloc(r->nin + 1, sizeof(size_t));
    r->cols = calloc(r->nin + 1, sizeof(sluice_column));
    if (!r->bufs || !r->buf_cap || !r->cols) return sl_errf(r->err, sizeof r->err, "out of memory");
    return 0;
}

/* The batch of rows [first, first + rows) (segments [s, s + segs) with offsets) in r->cols. */
static int load_batch(mpi_run *r, int64_t first, int64_t rows, int64_t s, int64_t segs) {
    for (size_t i = 0; i < r->nin; i++) {
        const sluice_column_info *info = sl_input_column(r->in, i);
        if ((int)i == r->offsets_col) {
            sl_input_window w = {first, rows, s, segs};
            sl_input_window_offsets(r->in, &w, r->batch_offsets);
            r->cols[i] = (sluice_column){info->name, info->type, r->batch_offsets, segs + 1};
            continue;
        }
        const void *data = sl_input_mapped(r->in, i, first);
        if (!data) {
            size_t bytes = (size_t)rows * sluice_type_size(info->type);
            if (bytes > r->buf_cap[i]) {
                void *b = realloc(r->bufs[i], bytes);
                if (!b) return sl_errf(r->err, sizeof r->err, "out of memory");
                r->bufs[i] = b;
                r->buf_cap[i] = bytes;
            }
            if (sl_input_read_rows(r->in, i, first, rows, r->bufs[i], r->err, sizeof r->err) != 0)
                return -1;
            data = r->bufs[i];
        }
        r->cols[i] = (sluice_column){info->name, info->type, data, rows};
    }
    return 0;
}

/* ---- the shared outputs ------------------------------------------------------------------- */

static char *join(const char *dir, const char *a, const char *b, const char *c) {
    size_t n = strlen(dir) + strlen(a) + strlen(b) + strlen(c) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s%s%s", dir, a, b, c);
    return s;
}

/* The output columns and the temporaries' names (rank 0's PID in them), on every rank. */
static int name_outputs(mpi_run *r) {
    shared_out *o = &r->out;
    long pid = (long)getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, r->comm);
    o->ncols = sluice_pipeline_output_count(r->p);
    o->info = calloc(o->ncols + 1, sizeof *o->info);
    o->tmp = calloc(o->ncols + 1, sizeof(char *));
    o->final = calloc(o->ncols + 1, sizeof(char *));
    o->fd = malloc((o->ncols + 1) * sizeof(int));
    if (!o->info || !o->tmp || !o->final || !o->fd)
        return sl_errf(r->err, sizeof r->err, "out of memory");
    for (size_t j = 0; j <= o->ncols; j++) o->fd[j] = -1;
    char suffix[48];
    snprintf(suffix, sizeof suffix, ".npy.partial-%ld", pid);
    for (size_t j = 0; j < o->ncols; j++) {
        if (sluice_pipeline_output(r->p, j, &o->info[j]) != SLUICE_OK)
            return sl_errf(r->err, sizeof r->err, "cannot read output column %zu", j);
        o->tmp[j] = join(r->a->out, ".", o->info[j].name, suffix);
        o->final[j] = join(r->a->out, "", o->info[j].name, ".npy");
        if (!o->tmp[j] || !o->final[j]) return sl_errf(r->err, sizeof r->err, "out of memory");
    }
    return 0;
}

/* Rank 0: OUTDIR and the temporaries, with their final headers and lengths. */
static int create_outputs(mpi_run *r, int64_t total) {
    shared_out *o = &r->out;
    if (mkdir(r->a->out, 0777) == 0) o->made_dir = true;
    else if (errno != EEXIST)
        return sl_errf(r->err, sizeof r->err, "cannot create %s: %s", r->a->out, strerror(errno));
    for (size_t j = 0; j < o->ncols; j++) {
        int fd = open(o->tmp[j], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0)
            return sl_errf(r->err, sizeof r->err, "cannot create %s: %s", o->tmp[j],
                           strerror(errno));
        o->fd[j] = fd;
        unsigned char hdr[SL_NPY_HEADER_SIZE];
        size_t w = sluice_type_size(o->info[j].type);
        if (sl_npy_format_header(hdr, sizeof hdr, o->info[j].type, total) != 0 ||
            pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr ||
            ftruncate(fd, (off_t)(SL_NPY_HEADER_SIZE + (uint64_t)total * w)) != 0)
            return sl_errf(r->err, sizeof r->err, "cannot write %s: %s", o->tmp[j],
                           strerror(errno));
    }
    return 0;
}

/* The other ranks open what rank 0 made. */
static int open_outputs(mpi_run *r) {
    shared_out *o = &r->out;
    for (size_t j = 0; j < o->ncols; j++) {
        if (o->fd[j] >= 0) continue;
        o->fd[j] = open(o->tmp[j], O_WRONLY | O_CLOEXEC);
        if (o->fd[j] < 0)
            return sl_errf(r->err, sizeof r->err, "cannot open %s: %s (is OUTDIR on a file "
                           "system every rank sees?)", o->tmp[j], strerror(errno));
    }
    return 0;
}

static int write_batch(mpi_run *r, const sluice_batch *b) {
    shared_out *o = &r->out;
    int64_t rows = sluice_batch_rows(b);
    for (size_t j = 0; j < o->ncols; j++) {
        sluice_column c;
        if (sluice_batch_column(b, j, &c) != SLUICE_OK)
            return sl_errf(r->err, sizeof r->err, "a result batch lacks output column %zu", j);
        size_t w = sluice_type_size(c.type);
        const char *data = c.data;
        size_t left = (size_t)rows * w;
        off_t at = (off_t)(SL_NPY_HEADER_SIZE + (uint64_t)(o->first + o->written) * w);
        while (left > 0) {
            ssize_t n = pwrite(o->fd[j], data, left, at);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0)
                return sl_errf(r->err, sizeof r->err, "cannot write %s: %s", o->tmp[j],
                               n < 0 ? strerror(errno) : "no progress");
            data += n;
            left -= (size_t)n;
            at += n;
        }
    }
    o->written += rows;
    return 0;
}

static void close_outputs(shared_out *o, bool remove_tmp) {
    for (size_t j = 0; j < o->ncols; j++) {
        if (o->fd && o->fd[j] >= 0) close(o->fd[j]);
        if (remove_tmp && o->tmp && o->tmp[j]) unlink(o->tmp[j]);
        if (o->tmp) free(o->tmp[j]);
        if (o->final) free(o->final[j]);
    }
    free(o->tmp);
    free(o->final);
    free(o->fd);
    free(o->info);
    o->tmp = o->final = NULL;
    o->fd = NULL;
    o->info = NULL;
}

/* ---- the run ------------------------------------------------------------------------------ */

static int pull_and_write(mpi_run *r) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = sluice_mpi_session_pull(r->ds, &b);
        if (st != SLUICE_OK) return lib_fail(r, st, "pulling results");
        if (!b) return SL_EXIT_OK;
        int rc = write_batch(r, b) == 0 ? SL_EXIT_OK : SL_EXIT_ERROR;
        sluice_batch_free(b);
        if (rc != SL_EXIT_OK) return rc;
    }
}

/* Pushes one batch (and, in the final pass, writes what it gave). */
static int push_one(mpi_run *r, bool final, int64_t first, int64_t rows, int64_t s, int64_t segs) {
    if (load_batch(r, first, rows, s, segs) != 0) return SL_EXIT_ERROR;
    sluice_status st = sluice_mpi_session_push(r->ds, r->cols, r->nin);
    if (st != SLUICE_OK) return lib_fail(r, st, "pushing a batch");
    if (final) r->rows_in += rows;
    sl_input_release(r->in, first + rows);
    return final ? pull_and_write(r) : SL_EXIT_OK;
}

/* One pass over this rank's part. A local failure stops its pushes, but the rank still
 * flushes (collective): every rank's flush then fails with the first failing rank's reason. */
static int one_pass(mpi_run *r, bool final) {
    int rc = SL_EXIT_OK;
    int64_t max = r->a->batch_rows;
    if (r->offsets_col >= 0) {
        for (int64_t s = r->seg0; rc == SL_EXIT_OK && s < r->seg1;) {
            int64_t e = sl_next_segment_cut(r->offsets + r->seg0, r->seg1 - r->seg0,
                                            s - r->seg0, max) + r->seg0;
            if (e - s > max) e = s + max; /* the batch offsets buffer holds max + 1 */
            rc = push_one(r, final, r->offsets[s], r->offsets[e] - r->offsets[s], s, e - s);
            s = e;
        }
    } else {
        for (int64_t first = r->row0; rc == SL_EXIT_OK && first < r->row1; first += max) {
            int64_t rows = r->row1 - first < max ? r->row1 - first : max;
            rc = push_one(r, final, first, rows, 0, 0);
        }
    }
    if (rc != SL_EXIT_OK) {
        char keep[sizeof r->err];
        memcpy(keep, r->err, sizeof keep);
        (void)sluice_mpi_session_flush(r->ds); /* fails everywhere: this rank failed */
        memcpy(r->err, keep, sizeof keep);
        return rc;
    }
    sluice_status st = sluice_mpi_session_flush(r->ds);
    if (st != SLUICE_OK) return lib_fail(r, st, "ending a pass");
    return final ? pull_and_write(r) : SL_EXIT_OK;
}

/* Every pass; returns the same status on every rank. */
static int run_passes(mpi_run *r) {
    for (;;) {
        int more = 0;
        sluice_status st = sluice_mpi_session_begin_pass(r->ds, &more);
        if (st != SLUICE_OK) return agree(r, lib_fail(r, st, "starting a pass"));
        if (!more) return SL_EXIT_OK;
        bool final = sluice_mpi_session_final_pass(r->ds);
        if (final) {
            int64_t total = 0;
            st = sluice_mpi_session_output_range(r->ds, &r->out.first, NULL, &total);
            int rc = st == SLUICE_OK ? SL_EXIT_OK : lib_fail(r, st, "placing the outputs");
            if (name_outputs(r) != 0) rc = SL_EXIT_ERROR; /* collective (a broadcast): always */
            if (rc == SL_EXIT_OK && r->rank == 0 && create_outputs(r, total) != 0)
                rc = SL_EXIT_ERROR;
            if (agree(r, rc) != SL_EXIT_OK) return SL_EXIT_ERROR;
            rc = open_outputs(r) == 0 ? SL_EXIT_OK : SL_EXIT_ERROR;
            if (agree(r, rc) != SL_EXIT_OK) return SL_EXIT_ERROR;
        }
        if (agree(r, one_pass(r, final)) != SL_EXIT_OK) return SL_EXIT_ERROR;
    }
}

/* Every rank's rows are written: each makes them durable, then rank 0 renames. The same
 * status on every rank. */
static int commit_outputs(mpi_run *r) {
    int rc = SL_EXIT_OK;
    for (size_t j = 0; j < r->out.ncols && rc == SL_EXIT_OK; j++)
        if (fsync(r->out.fd[j]) != 0) {
            sl_errf(r->err, sizeof r->err, "cannot sync %s: %s", r->out.tmp[j], strerror(errno));
            rc = SL_EXIT_ERROR;
        }
    if (agree(r, rc) != SL_EXIT_OK) return SL_EXIT_ERROR;
    for (size_t j = 0; r->rank == 0 && j < r->out.ncols && rc == SL_EXIT_OK; j++)
        if (rename(r->out.tmp[j], r->out.final[j]) != 0) {
            sl_errf(r->err, sizeof r->err, "cannot rename %s to %s: %s", r->out.tmp[j],
                    r->out.final[j], strerror(errno));
            rc = SL_EXIT_ERROR;
        }
    return agree(r, rc);
}

/* One GPU per rank: rank i of a node takes GPU (i mod GPUs), by CUDA_VISIBLE_DEVICES, set
 * before the CUDA runtime starts (before MPI_Init and the session's open). Left alone when the user
 * (or the launcher) set it already, or when the launcher does not say the local rank. GPUs
 * are counted from the driver's /proc entries, which need no CUDA call. */
static void pick_gpu(void) {
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local) local = getenv("MPI_LOCALRANKID");
    if (!local) local = getenv("SLURM_LOCALID");
    if (!local || getenv("CUDA_VISIBLE_DEVICES")) return;
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return;
    int gpus = 0;
    for (struct dirent *e; (e = readdir(d));)
        gpus += e->d_name[0] != '.';
    closedir(d);
    if (gpus <= 0) return;
    char which[16];
    snprintf(which, sizeof which, "%d", atoi(local) % gpus);
    setenv("CUDA_VISIBLE_DEVICES", which, 0);
}

int sl_mpi_explain(sluice_context *ctx, sluice_pipeline *p) {
    char *text = NULL;
    sluice_status st = sluice_mpi_explain(p, &text);
    if (st != SLUICE_OK) {
        sl_print_diagnostics(ctx);
        return sl_fail("cannot explain the distributed run: %s", sluice_strerror(st));
    }
    fputs(text, stdout);
    sluice_free_text(ctx, text);
    return SL_EXIT_OK;
}

int sl_mpi_run(sluice_context *ctx, sluice_pipeline *p, const sl_mpi_run_args *a) {
    /* Before MPI_Init: a CUDA-aware MPI may start the CUDA runtime there. */
    if (a->backend != SLUICE_BACKEND_CPU) pick_gpu();
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return sl_fail("MPI_Init_thread failed");
    double t0 = MPI_Wtime();
    mpi_run r = {.comm = MPI_COMM_WORLD, .ctx = ctx, .p = p, .a = a};
    MPI_Comm_rank(r.comm, &r.rank);
    MPI_Comm_size(r.comm, &r.size);
    int rc = SL_EXIT_OK;
    if (sl_input_open(&r.in, p, a->in, r.err, sizeof r.err) != 0) rc = SL_EXIT_ERROR;
    if (rc == SL_EXIT_OK && split_input(&r) != 0) rc = SL_EXIT_ERROR;
    rc = agree(&r, rc);
    if (rc == SL_EXIT_OK) {
        sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
        opts.backend = a->backend;
        opts.max_batch_rows = a->batch_rows < (INT64_C(1) << 22) ? a->batch_rows : INT64_C(1) << 22;
        opts.params = a->params;
        opts.param_count = a->param_count;
        sluice_status st = sluice_mpi_session_open(p, &opts, r.comm, &r.ds);
        /* Open is collective: every rank fails together, each with its own diagnostic. */
        if (st != SLUICE_OK) rc = agree(&r, lib_fail(&r, st, "cannot open a distributed session"));
    }
    if (rc == SL_EXIT_OK) rc = run_passes(&r);
    if (rc == SL_EXIT_OK) rc = commit_outputs(&r);
    if (rc != SL_EXIT_OK) {
        /* One write a line: the ranks' lines reach the launcher's terminal whole. */
        if (r.rank == r.failed_rank)
            fprintf(stderr, "sluice: error: rank %d of %d: %s\n", r.rank, r.size, r.err);
        else
            fprintf(stderr, "sluice: error: rank %d of %d stops: rank %d failed: %s\n", r.rank,
                    r.size, r.failed_rank, r.err);
    }
    if (r.rank == 0 && rc != SL_EXIT_OK) {
        close_outputs(&r.out, true);
        if (r.out.made_dir) rmdir(a->out);
    } else {
        close_outputs(&r.out, false);
    }
    int64_t rows_in = 0, rows_out = 0, mine_out = r.out.written;
    MPI_Reduce(&r.rows_in, &rows_in, 1, MPI_INT64_T, MPI_SUM, 0, r.comm);
    MPI_Reduce(&mine_out, &rows_out, 1, MPI_INT64_T, MPI_SUM, 0, r.comm);
    if (r.rank == 0) {
        if (rc == SL_EXIT_OK)
            fprintf(stderr, "sluice run: %s: %" PRId64 " rows in, %" PRId64 " rows out to %s "
                    "in %.3f s on %d ranks (%d passes; rows between ranks: %s)\n", a->pipeline,
                    rows_in, rows_out, a->out, MPI_Wtime() - t0, r.size,
                    sluice_mpi_session_passes(r.ds), sluice_mpi_session_transport(r.ds));
        else
            fprintf(stderr, "sluice run: %s: failed on %d ranks; %s is as it was\n",
                    a->pipeline, r.size, a->out);
    }
    sluice_mpi_session_close(r.ds);
    if (r.in) sl_input_close(r.in);
    free(r.offsets);
    free(r.batch_offsets);
    for (size_t i = 0; r.bufs && i < r.nin; i++) free(r.bufs[i]);
    free(r.bufs);
    free(r.buf_cap);
    free(r.cols);
    MPI_Finalize();
    return rc;
}

#endif
