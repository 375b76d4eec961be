/* output.c — streaming the result batches of a session into .npy files, all or nothing (see
 * output.h).
 *
 * A signal may arrive at any point of a run, so what a handler needs (the temporaries' paths,
 * the directory the run created) is kept in memory that stays valid and unchanged while the
 * handler may read it, and one atomic state decides who ends the output: the run (commit or
 * discard) or the handler (discard). Whoever moves the state away from WRITING first does
 * it; the other leaves the files alone. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"
#include "npy.h"

typedef struct output_column {
    sluice_column_info info;
    sl_npy_writer writer;
    char *final_path; /* DIR/NAME.npy */
    char *temp_path;  /* DIR/.NAME.npy.partial-PID[-K]: what the handler removes */
} output_column;

struct sl_output {
    size_t ncols;
    output_column *cols;
    char *dir;
    char *created_dir; /* the directory open made, removed again on failure; NULL otherwise */
};

/* Who ends the open output. IDLE: none is open. */
enum { OUT_IDLE, OUT_WRITING, OUT_COMMITTING, OUT_DISCARDING };
static atomic_int out_state = OUT_IDLE;
/* The open output, for the signal handler: its temporaries are published one by one (the
 * count grows only after the path is written) and stay valid until the state leaves
 * WRITING. */
static sl_output *volatile out_current;
static atomic_size_t out_published;

/* The signals `sluice run` handles, blocked while files are created so that none is left
 * behind unpublished. */
static void block_signals(sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

static char *join(const char *dir, const char *a, const char *b, const char *c) {
    size_t n = strlen(dir) + strlen(a) + strlen(b) + strlen(c) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s%s", dir, a, b, c);
    return p;
}

/* Removes the temporaries and the created directory. Async-signal-safe: unlink and rmdir
 * only, over memory that does not change while the state is WRITING. */
static void remove_files(const sl_output *o, size_t published) {
    for (size_t i = 0; i < published && i < o->ncols; i++)
        if (o->cols[i].temp_path) unlink(o->cols[i].temp_path);
    if (o->created_dir) rmdir(o->created_dir); /* fails, harmlessly, unless empty */
}

static void free_output(sl_output *o) {
    for (size_t i = 0; i < o->ncols; i++) {
        sl_npy_writer_close(&o->cols[i].writer, NULL, 0);
        free(o->cols[i].final_path);
        free(o->cols[i].temp_path);
    }
    free(o->cols);
    free(o->dir);
    free(o->created_dir);
    free(o);
}

/* Creates the temporary file of column c: O_EXCL, so that a leftover of another process is
 * never written over; a name taken already gets a counter. */
static int create_temp(output_column *c, const char *dir, size_t index, char *err,
                       size_t errcap) {
    /* A long column name would make the temporary's name too long for the file system. */
    char short_stem[32];
    const char *stem = c->info.name;
    if (strlen(stem) > 200) {
        snprintf(short_stem, sizeof short_stem, "column%zu", index);
        stem = short_stem;
    }
    for (int k = 0; k < 100; k++) {
        char suffix[64];
        if (k == 0)
            snprintf(suffix, sizeof suffix, ".npy.partial-%ld", (long)getpid());
        else
            snprintf(suffix, sizeof suffix, ".npy.partial-%ld-%d", (long)getpid(), k);
        char *path = join(dir, ".", stem, suffix);
        if (!path) return sl_errf(err, errcap, "out of memory");
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) {
            free(path);
            continue;
        }
        if (fd < 0) {
            int e = errno;
            sl_errf(err, errcap, "%s: cannot write the output '%s' there: %s", dir,
                    c->info.name, strerror(e));
            free(path);
            return -1;
        }
        c->temp_path = path;
        return sl_npy_writer_open_fd(&c->writer, fd, path, c->info.type, err, errcap);
    }
    return sl_errf(err, errcap, "%s: cannot find a free temporary name for '%s'", dir,
                   c->info.name);
}

static int open_files(sl_output *o, const sluice_pipeline *pipeline, const char *dir,
                      char *err, size_t errcap) {
    o->dir = strdup(dir);
    if (!o->dir) return sl_errf(err, errcap, "out of memory");
    if (mkdir(dir, 0777) == 0) {
        o->created_dir = strdup(dir);
        if (!o->created_dir) {
            rmdir(dir);
            return sl_errf(err, errcap, "out of memory");
        }
    } else if (errno != EEXIST) {
        return sl_errf(err, errcap, "%s: cannot create the output directory: %s", dir,
                       strerror(errno));
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sl_errf(err, errcap, "%s: exists and is not a directory", dir);
    size_t n = sluice_pipeline_output_count(pipeline);
    o->cols = calloc(n ? n : 1, sizeof *o->cols);
    if (!o->cols) return sl_errf(err, errcap, "out of memory");
    o->ncols = n;
    out_current = o;
    atomic_store(&out_published, 0);
    atomic_store(&out_state, OUT_WRITING);
    for (size_t i = 0; i < n; i++) {
        output_column *c = &o->cols[i];
        if (sluice_pipeline_output(pipeline, i, &c->info) != SLUICE_OK)
            return sl_errf(err, errcap, "cannot read the pipeline's output %zu", i);
        c->final_path = join(dir, c->info.name, ".npy", "");
        if (!c->final_path) return sl_errf(err, errcap, "out of memory");
        int rc = create_temp(c, dir, i, err, errcap);
        if (c->temp_path) atomic_store(&out_published, i + 1);
        if (rc != 0) return -1;
    }
    return 0;
}

int sl_output_open(sl_output **out, const sluice_pipeline *pipeline, const char *dir, char *err,
                   size_t errcap) {
    *out = NULL;
    sl_output *o = calloc(1, sizeof *o);
    if (!o) return sl_errf(err, errcap, "out of memory");
    sigset_t old;
    block_signals(&old);
    int rc = open_files(o, pipeline, dir, err, errcap);
    if (rc != 0) {
        atomic_store(&out_state, OUT_IDLE);
        out_current = NULL;
        remove_files(o, o->ncols);
        free_output(o);
    } else {
        *out = o;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

size_t sl_output_column_count(const sl_output *o) { return o->ncols; }

int sl_output_columns(const sl_output *o, const sluice_batch *batch, sluice_column *cols,
                      char *err, size_t errcap) {
    for (size_t i = 0; i < o->ncols; i++) {
        const output_column *c = &o->cols[i];
        sluice_status st = sluice_batch_column_by_name(batch, c->info.name, &cols[i]);
        if (st != SLUICE_OK)
            return sl_errf(err, errcap, "result batch lacks output column '%s': %s",
                           c->info.name, sluice_strerror(st));
        if (cols[i].type != c->info.type)
            return sl_errf(err, errcap, "result column '%s' is %s, the pipeline said %s",
                           c->info.name, sluice_type_name(cols[i].type),
                           sluice_type_name(c->info.type));
    }
    return 0;
}

void sl_output_place(sl_output *o, const sluice_column *cols, uint64_t *pos) {
    for (size_t i = 0; i < o->ncols; i++)
        pos[i] = sl_npy_writer_place(&o->cols[i].writer, cols[i].length);
}

int sl_output_write_at(sl_output *o, size_t col, uint64_t pos, const void *data, size_t bytes,
                       char *err, size_t errcap) {
    return sl_npy_writer_write_at(&o->cols[col].writer, pos, data, bytes, err, errcap);
}

int sl_output_append(sl_output *o, const sluice_batch *batch, char *err, size_t errcap) {
    sluice_column small[16];
    sluice_column *cols = o->ncols <= 16 ? small : malloc(o->ncols * sizeof *cols);
    if (!cols) return sl_errf(err, errcap, "out of memory");
    int rc = sl_output_columns(o, batch, cols, err, errcap);
    for (size_t i = 0; rc == 0 && i < o->ncols; i++)
        rc = sl_npy_writer_append(&o->cols[i].writer, cols[i].data, cols[i].length, err, errcap);
    if (cols != small) free(cols);
    return rc;
}

int64_t sl_output_rows(const sl_output *o) {
    return o->ncols > 0 ? o->cols[0].writer.length : 0;
}

uint64_t sl_output_bytes(const sl_output *o) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < o->ncols; i++)
        bytes += (uint64_t)o->cols[i].writer.length * sluice_type_size(o->cols[i].info.type);
    return bytes;
}

/* Makes the renames themselves durable. A file system that cannot sync a directory is not
 * an error: the files are complete either way. */
static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

/* The renames, with the state COMMITTING (a signal waits for them). Returns 0 or -1. */
static int rename_all(sl_output *o, char *err, size_t errcap) {
    /* A directory in the way would fail its rename after others succeeded: refuse first. */
    for (size_t i = 0; i < o->ncols; i++) {
        struct stat st;
        if (lstat(o->cols[i].final_path, &st) == 0 && S_ISDIR(st.st_mode))
            return sl_errf(err, errcap, "%s is a directory: the output column '%s' cannot "
                           "replace it; nothing was written", o->cols[i].final_path,
                           o->cols[i].info.name);
    }
    for (size_t i = 0; i < o->ncols; i++) {
        output_column *c = &o->cols[i];
        if (rename(c->temp_path, c->final_path) != 0) {
            int e = errno;
            if (i == 0)
                return sl_errf(err, errcap, "%s: cannot put the result in place: %s; nothing "
                               "was written", c->final_path, strerror(e));
            return sl_errf(err, errcap, "%s: cannot put the result in place: %s; the %zu "
                           "column(s) before it in the output list were already replaced",
                           c->final_path, strerror(e), i);
        }
        free(c->temp_path);
        c->temp_path = NULL; /* renamed: no longer ours to remove */
    }
    return 0;
}

int sl_output_commit(sl_output *o, char *err, size_t errcap) {
    int rc = 0;
    /* Finishing the files (and the fsyncs, which may take a while) happens while a signal may
     * still discard them: closing a removed file is harmless. */
    for (size_t i = 0; i < o->ncols; i++) {
        o->cols[i].writer.sync = 1;
        if (sl_npy_writer_close(&o->cols[i].writer, rc == 0 ? err : NULL, errcap) != 0) rc = -1;
    }
    int expected = OUT_WRITING;
    if (!atomic_compare_exchange_strong(&out_state, &expected, OUT_COMMITTING)) {
        /* A signal handler is removing the files and ends the process: leave them to it. */
        return sl_errf(err, errcap, "interrupted");
    }
    if (rc == 0) rc = rename_all(o, err, errcap);
    if (rc != 0) remove_files(o, o->ncols);
    else sync_dir(o->dir);
    out_current = NULL;
    atomic_store(&out_state, OUT_IDLE);
    free_output(o);
    return rc;
}

void sl_output_discard(sl_output *o) {
    if (!o) return;
    int expected = OUT_WRITING;
    if (!atomic_compare_exchange_strong(&out_state, &expected, OUT_DISCARDING))
        return; /* a signal handler is removing the files and ends the process */
    remove_files(o, o->ncols);
    out_current = NULL;
    atomic_store(&out_state, OUT_IDLE);
    free_output(o);
}

bool sl_output_discard_from_signal(void) {
    int expected = OUT_WRITING;
    if (atomic_compare_exchange_strong(&out_state, &expected, OUT_DISCARDING)) {
        const sl_output *o = out_current;
        if (o) remove_files(o, atomic_load(&out_published));
        return true;
    }
    return expected != OUT_COMMITTING;
}
