/* exec.c — the shared executor (see exec.h): cutting, the walk of a piece through the plan
 * groups, stream-wide sort buffers and their spilled runs, transactions and result batches,
 * on top of the backend operations of core/runtime/session.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/context.h"
#include "runtime/exec.h"
#include "runtime/sortkey.h"

/* A sorted run a stream-wide sort wrote to disk (sort_memory_bytes): rows of fixed-size
 * records, in sorted order. level: 0 for a run spilled from memory, k + 1 for a run merged
 * from SPILL_FANIN runs of level k (merge_tail). */
typedef struct spill_run {
    FILE *f;
    int64_t rows;
    int level;
} spill_run;

/* A stream-wide sort's buffer: the columns reaching the sort (the plan group's `in`),
 * appended piece after piece in backend memory until flush, and the runs spilled so far
 * (older rows, in stream order: run 0 first, then the buffer). */
typedef struct sort_buffer {
    void **cols;            /* per column id */
    int64_t rows, cap;
    spill_run *runs;
    int nruns, runs_cap;
} sort_buffer;

/* What undoing a push or flush needs (exec.h, "Pieces in flight"): taken when the call
 * begins, kept until every piece of the call is complete. */
typedef struct push_mark {
    bool is_push;
    int64_t push;           /* pushes standing before the call */
    int64_t first_piece, end_piece; /* the call's pieces: [first_piece, end_piece) */
    int64_t queued, queued_end;     /* batches queued since open, before and after the call */
    int64_t rows_in, rows_out;
    int64_t *sort_rows;     /* per group: rows a stream-wide sort held */
    void *backend;          /* ops->mark_bytes: the backend's carries as they were */
} push_mark;

struct sl_exec {
    sort_buffer *buffers;   /* per group; used by stream-wide sort groups */
    /* Pieces in flight: marks of the calls whose pieces are not all complete (a ring, oldest
     * first), and the current call's. Counters are since open, never reset. */
    push_mark *marks;
    int mcap, mfirst, mcount;
    push_mark cur;
    int64_t pieces;         /* pieces started */
    int64_t done;           /* pieces below this are complete */
    int64_t failed;         /* a failure in flight found in this piece, not yet handled; -1 */
    sluice_status failed_st; /* ... and its status */
    int64_t queued;         /* batches queued (less those a rollback dropped) */
    int64_t ready;          /* batches below this are complete: pullable */
    int64_t pushes;         /* pushes standing (sluice_session_push_count) */
    const void **cols[2];   /* piece column tables: [0] pushed pieces and sorted rows, [1] the
                               pieces cut from sorted rows */
    int64_t *offsets;       /* host: a segment-aligned piece's offsets, rebased to 0 */
    int64_t offsets_cap;
};

static void drop_runs(sort_buffer *b) {
    for (int r = 0; r < b->nruns; r++)
        if (b->runs[r].f) fclose(b->runs[r].f);
    b->nruns = 0;
}

static sluice_status oom(sluice_context *ctx, const char *what) {
    return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: %s", what);
}

static bool stream_sort(const sluice_session *s, int gi) {
    const sl_group *g = &s->plan.groups[gi];
    return g->kind == SL_GROUP_SORT && !s->pipeline->stages[g->first].sort.per_batch;
}

static size_t column_size(const sluice_session *s, int c) {
    return sluice_type_size(s->pipeline->columns[c].type);
}

/* ---- open / close ----------------------------------------------------------------------- */

static bool mark_init(sluice_session *s, push_mark *m) {
    size_t bytes = s->backend->mark_bytes ? s->backend->mark_bytes(s) : 0;
    m->sort_rows = sl_calloc(s->ctx, (size_t)s->plan.ngroups + 1, sizeof *m->sort_rows);
    m->backend = bytes ? sl_calloc(s->ctx, 1, bytes) : NULL;
    return m->sort_rows && (!bytes || m->backend);
}

static void mark_free(sluice_session *s, push_mark *m) {
    sl_free(s->ctx, m->sort_rows);
    sl_free(s->ctx, m->backend);
}

sluice_status sl_exec_open(sluice_session *s) {
    sluice_context *ctx = s->ctx;
    size_t ncol = (size_t)s->pipeline->ncolumns + 1;
    sl_exec *ex = sl_calloc(ctx, 1, sizeof *ex);
    if (!ex) return oom(ctx, "opening a session");
    s->exec = ex;
    ex->buffers = sl_calloc(ctx, (size_t)s->plan.ngroups + 1, sizeof *ex->buffers);
    ex->cols[0] = sl_calloc(ctx, ncol, sizeof(void *));
    ex->cols[1] = sl_calloc(ctx, ncol, sizeof(void *));
    bool ok = ex->buffers && ex->cols[0] && ex->cols[1];
    for (int gi = 0; ok && gi < s->plan.ngroups; gi++) {
        if (!stream_sort(s, gi)) continue;
        ex->buffers[gi].cols = sl_calloc(ctx, ncol, sizeof(void *));
        ok = ex->buffers[gi].cols != NULL;
    }
    /* At most depth pieces are in flight and every push has at least one, so depth + 2
     * marks (those in flight and the current call's) always suffice. */
    ex->failed = -1;
    ex->mcap = s->depth + 2;
    ex->marks = ok ? sl_calloc(ctx, (size_t)ex->mcap, sizeof *ex->marks) : NULL;
    ok = ok && ex->marks && mark_init(s, &ex->cur);
    for (int i = 0; ok && i < ex->mcap; i++) ok = mark_init(s, &ex->marks[i]);
    if (!ok) {
        sl_exec_close(s);
        return oom(ctx, "opening a session");
    }
    return SLUICE_OK;
}

void sl_exec_close(sluice_session *s) {
    sl_exec *ex = s->exec;
    if (!ex) return;
    sluice_context *ctx = s->ctx;
    for (int gi = 0; ex->buffers && gi < s->plan.ngroups; gi++) {
        sort_buffer *b = &ex->buffers[gi];
        drop_runs(b);
        sl_free(ctx, b->runs);
        if (!b->cols) continue;
        for (int c = 0; c <= s->pipeline->ncolumns; c++)
            if (b->cols[c]) s->backend->free(s, b->cols[c]);
        sl_free(ctx, b->cols);
    }
    sl_free(ctx, ex->buffers);
    for (int i = 0; ex->marks && i < ex->mcap; i++) mark_free(s, &ex->marks[i]);
    sl_free(ctx, ex->marks);
    mark_free(s, &ex->cur);
    sl_free(ctx, (void *)ex->cols[0]);
    sl_free(ctx, (void *)ex->cols[1]);
    sl_free(ctx, ex->offsets);
    sl_free(ctx, ex);
    s->exec = NULL;
}

/* ---- transactions ----------------------------------------------------------------------- */

static push_mark *mark_at(sl_exec *ex, int k) { return &ex->marks[(ex->mfirst + k) % ex->mcap]; }

/* Puts the executor's state back to mark m (the backend's carries are the caller's to
 * restore): stream-sort rows, the queue (batches queued since dropped), counters. */
static void restore_mark(sluice_session *s, const push_mark *m) {
    sl_exec *ex = s->exec;
    for (int gi = 0; gi < s->plan.ngroups; gi++) ex->buffers[gi].rows = m->sort_rows[gi];
    while (ex->queued > m->queued && s->queue_len > 0) {
        sluice_batch_free(s->queue[s->queue_head + s->queue_len - 1]);
        s->queue_len--;
        ex->queued--;
    }
    s->rows_in = m->rows_in;
    s->rows_out = m->rows_out;
    ex->pushes = m->push;
}

/* Makes pullable the batches of every call, oldest first, whose pieces are all complete. */
static void retire(sl_exec *ex) {
    while (ex->mcount > 0 && mark_at(ex, 0)->end_piece <= ex->done) {
        ex->ready = mark_at(ex, 0)->queued_end;
        ex->mfirst = (ex->mfirst + 1) % ex->mcap;
        ex->mcount--;
    }
}

/* Asks the backend to complete the pieces up to `until`, waiting at most timeout_ns (< 0: as
 * long as it takes). A failure it reports is kept in ex->failed for reject_failed, which the
 * calls run once nothing of theirs is left to undo. */
static sluice_status wait_pieces(sluice_session *s, int64_t until, int64_t timeout_ns) {
    sl_exec *ex = s->exec;
    sluice_status st = SLUICE_OK;
    if (!s->backend->progress) {
        ex->done = ex->pieces; /* complete when each operation returns */
    } else if (ex->failed >= 0) {
        return ex->failed_st; /* not handled yet: nothing goes on before it is */
    } else if (ex->done < ex->pieces) {
        int64_t done = ex->done;
        st = s->backend->progress(s, until, timeout_ns, &done);
        ex->done = done;
        if (st != SLUICE_OK) {
            ex->failed = done;
            ex->failed_st = st;
        }
    }
    retire(ex);
    return st;
}

/* After a failure found in flight in piece ex->failed: the call holding it and every later
 * one are rejected, the session going back to that call's mark (sluice.h, "Errors with
 * batches in flight"). Returns st. */
static sluice_status reject_failed(sluice_session *s, sluice_status st) {
    sl_exec *ex = s->exec;
    if (ex->failed < 0) return st;
    int64_t f = ex->failed;
    if (st == SLUICE_OK) st = ex->failed_st;
    ex->failed = -1;
    ex->done = ex->pieces; /* the backend forgot every piece from f on */
    int k = 0;
    while (k < ex->mcount && mark_at(ex, k)->end_piece <= f) k++;
    if (k == ex->mcount) return st; /* in the current call, which its rollback undid */
    push_mark *m = mark_at(ex, k);
    int64_t later = ex->pushes - m->push - 1;
    restore_mark(s, m);
    if (s->backend->restore) s->backend->restore(s, m->backend);
    ex->mcount = k;
    if (m->is_push)
        sl_error(s->ctx, st, "push %lld failed on the device (above) and was rejected, with the "
                 "%lld push%s after it: %lld pushes stand; the results of those are kept",
                 (long long)m->push, (long long)later, later == 1 ? "" : "es", (long long)ex->pushes);
    else
        sl_error(s->ctx, st, "the flush failed on the device (above) and was rejected: the "
                 "session is as it was before it (%lld pushes stand)", (long long)ex->pushes);
    return st;
}

static void txn_begin(sluice_session *s) {
    sl_exec *ex = s->exec;
    push_mark *m = &ex->cur;
    for (int gi = 0; gi < s->plan.ngroups; gi++) m->sort_rows[gi] = ex->buffers[gi].rows;
    m->push = ex->pushes;
    m->first_piece = ex->pieces;
    m->queued = ex->queued;
    m->rows_in = s->rows_in;
    m->rows_out = s->rows_out;
    if (s->backend->mark) s->backend->mark(s, m->backend);
    s->backend->begin(s);
}

/* Settles the call's work and commits it, or undoes everything the call did. A committed
 * call's mark joins those in flight until its pieces are complete. */
static sluice_status txn_end(sluice_session *s, sluice_status st, bool is_push) {
    sl_exec *ex = s->exec;
    if (st == SLUICE_OK) st = s->backend->settle(s);
    if (st != SLUICE_OK) {
        s->backend->rollback(s);
        restore_mark(s, &ex->cur);
        return st;
    }
    s->backend->commit(s);
    if (ex->mcount == ex->mcap) wait_pieces(s, mark_at(ex, 0)->end_piece - 1, -1); /* see open */
    push_mark *m = mark_at(ex, ex->mcount), t = *m;
    *m = ex->cur;
    ex->cur = t; /* the arrays swap owners */
    m->is_push = is_push;
    m->end_piece = ex->pieces;
    m->queued_end = ex->queued;
    ex->mcount++;
    if (is_push) ex->pushes++;
    /* Depth 1: the call's pieces complete before it returns. Deeper: one poll a call (this
     * one; none before the call's work, so a failure found here rejects this call too, as
     * reject_failed does for any call after the failed one), up to the calls before this
     * one: pieces it issued a moment ago are not asked about (a query of work just launched
     * costs host time and never finds it done; a backend may still look at them, the CUDA
     * one where that issues a copy out: core/cuda/backend.c, progress_impl). */
    return wait_pieces(s, s->depth == 1 ? ex->pieces - 1 : m->first_piece - 1,
                       s->depth == 1 ? -1 : 0);
}

/* ---- stream-wide sort buffers ----------------------------------------------------------- */

static sluice_status buffer_append(sluice_session *s, int gi, const sl_piece *piece) {
    const sl_group *g = &s->plan.groups[gi];
    sort_buffer *b = &s->exec->buffers[gi];
    const sl_backend_ops *be = s->backend;
    if (piece->rows == 0) return SLUICE_OK;
    int64_t want = b->rows + piece->rows;
    if (be->max_sort_rows > 0 && want > be->max_sort_rows)
        return sl_error(s->ctx, SLUICE_ERR_LIMIT,
                        "a stream-wide sort holds at most %lld rows on the %s backend; this "
                        "stream reached %lld (set the session's sort_memory_bytes to spill "
                        "sorted runs to disk, or use per: batch)",
                        (long long)be->max_sort_rows, be->name, (long long)want);
    for (int j = 0; j < g->nin; j++)
        if (!piece->cols[g->in[j]])
            return sl_error(s->ctx, SLUICE_ERR_INVALID_ARGUMENT,
                            "internal: the stream-wide sort of pipeline '%s' takes column '%s', "
                            "which no earlier group wrote", s->pipeline->name,
                            s->pipeline->columns[g->in[j]].name);
    if (want > b->cap) {
        /* Geometric growth: a stream of N rows reallocates O(log N) times in all. Rows
         * appended by an uncommitted call are copied too (a rollback only lowers rows). */
        int64_t cap = b->cap ? b->cap * 2 : s->max_batch_rows;
        if (cap < want) cap = want;
        for (int j = 0; j < g->nin; j++) {
            int c = g->in[j];
            size_t bytes;
            if (sl_mul_overflows((size_t)cap, column_size(s, c), &bytes))
                return oom(s->ctx, "rows held for a stream-wide sort");
            void *grown = NULL;
            SL_TRY(be->alloc(s, bytes, &grown));
            sluice_status st = SLUICE_OK;
            if (b->cols[c] && b->rows > 0)
                st = be->copy(s, grown, b->cols[c], (size_t)b->rows * column_size(s, c));
            if (st != SLUICE_OK) {
                be->free(s, grown);
                return st;
            }
            if (b->cols[c]) be->free(s, b->cols[c]);
            b->cols[c] = grown;
        }
        b->cap = cap;
    }
    for (int j = 0; j < g->nin; j++) {
        int c = g->in[j];
        size_t w = column_size(s, c);
        SL_TRY(be->copy(s, (char *)b->cols[c] + (size_t)b->rows * w, piece->cols[c],
                        (size_t)piece->rows * w));
    }
    b->rows = want;
    return SLUICE_OK;
}

/* ---- spilling a stream-wide sort (sort_memory_bytes) ----------------------------------- */

/* A stream-wide sort whose held rows reach the session's budget writes them to an unlinked
 * temporary file as one sorted run of records: the row's key images (8 bytes a key, most
 * significant first, `bits:` applied: kernels/sl_sortkey.h, the order both backends sort
 * by), then the columns needed after the sort. At flush what is still held becomes the last
 * run and the runs are merged, ties going to the older run, which keeps the sort stable.
 * Rows are spilled only between calls (before a push), so a spill never has to be undone:
 * the rows are the same committed rows in another place. */

static const sl_sort *sort_of(const sluice_session *s, int gi) {
    return &s->pipeline->stages[s->plan.groups[gi].first].sort;
}

static size_t record_bytes(const sluice_session *s, int gi) {
    const sl_group *g = &s->plan.groups[gi];
    size_t r = (size_t)sort_of(s, gi)->nkeys * 8;
    for (int j = 0; j < g->nout; j++) r += column_size(s, g->out[j]);
    return (r + 7) & ~(size_t)7; /* whole 8-byte words: every record's images stay aligned */
}

static int compare_images(const uint64_t *a, const uint64_t *b, int nkeys) {
    for (int k = 0; k < nkeys; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

/* Stable bottom-up merge sort of idx[0, n) by the rows' images (nkeys a row). */
static void sort_indices(int64_t *idx, int64_t *tmp, int64_t n, const uint64_t *img, int nkeys) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = compare_images(img + idx[j] * nkeys, img + idx[i] * nkeys, nkeys) < 0
                               ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

static sluice_status io_error(sluice_session *s, const char *what) {
    const char *dir = s->spill_dir ? s->spill_dir : getenv("TMPDIR");
    return sl_error(s->ctx, SLUICE_ERR_IO, "%s for a stream-wide sort's spilled rows in '%s': %s",
                    what, dir && *dir ? dir : "/tmp", strerror(errno));
}

/* A new temporary file for a run in *out: SLUICE_ERR_NO_MEMORY or SLUICE_ERR_IO (naming the
 * directory) when it cannot be had. */
static sluice_status open_spill_file(sluice_session *s, FILE **out) {
    *out = NULL;
    const char *dir = s->spill_dir ? s->spill_dir : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t len = strlen(dir) + 32;
    char *path = sl_alloc(s->ctx, len);
    if (!path) return oom(s->ctx, "spilling a stream-wide sort");
    snprintf(path, len, "%s/sluice-sort-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd >= 0) {
        unlink(path); /* gone from the directory now; freed when closed, even on a crash */
        *out = fdopen(fd, "w+b");
        if (!*out) close(fd);
    }
    sl_free(s->ctx, path);
    return *out ? SLUICE_OK : io_error(s, "cannot create a file");
}

#define SPILL_CHUNK 4096 /* records written or read at a time */
/* Runs merged into one at a time: when SPILL_FANIN runs of one level are the newest, they
 * become one run of the next level, so a long stream holds O(SPILL_FANIN x log(runs)) open
 * files and the flush's merge that many read buffers, and each row is rewritten
 * log_SPILL_FANIN(runs) times, instead of one file per spill (a process's file limit) and a
 * flush reading them all at once. */
#define SPILL_FANIN 16

static int tail_to_merge(const sort_buffer *b);
static sluice_status merge_tail(sluice_session *s, int gi, int count);

/* Writes the rows group gi holds as a sorted run; on success it holds none. */
static sluice_status spill(sluice_session *s, int gi) {
    sluice_context *ctx = s->ctx;
    sort_buffer *b = &s->exec->buffers[gi];
    const sl_group *g = &s->plan.groups[gi];
    const sl_sort *so = sort_of(s, gi);
    const sl_backend_ops *be = s->backend;
    int64_t n = b->rows;
    if (n == 0) return SLUICE_OK;
    int nk = so->nkeys;
    size_t rec = record_bytes(s, gi), ncol = (size_t)s->pipeline->ncolumns + 1;
    if (b->nruns == b->runs_cap) {
        int cap = b->runs_cap ? 2 * b->runs_cap : 8;
        spill_run *r = sl_realloc(ctx, b->runs, (size_t)cap * sizeof *r);
        if (!r) return oom(ctx, "spilling a stream-wide sort");
        b->runs = r;
        b->runs_cap = cap;
    }
    const void **host = sl_calloc(ctx, ncol, sizeof *host);
    void **owned = sl_calloc(ctx, ncol, sizeof *owned);
    uint64_t *img = sl_alloc(ctx, (size_t)n * (size_t)nk * sizeof *img);
    void *kimg = sl_alloc(ctx, (size_t)n * 8);
    int64_t *idx = sl_alloc(ctx, (size_t)n * sizeof *idx), *tmp = sl_alloc(ctx, (size_t)n * sizeof *tmp);
    unsigned char *out = sl_alloc(ctx, SPILL_CHUNK * rec);
    sluice_status st = SLUICE_OK;
    if (!host || !owned || !img || !kimg || !idx || !tmp || !out) st = oom(ctx, "spilling a stream-wide sort");
    for (int j = 0; st == SLUICE_OK && j < g->nin; j++) {
        int c = g->in[j];
        size_t bytes = (size_t)n * column_size(s, c);
        if (!be->to_host) {
            host[c] = b->cols[c];
            continue;
        }
        owned[c] = sl_alloc(ctx, bytes);
        if (!owned[c]) st = oom(ctx, "spilling a stream-wide sort");
        else st = be->to_host(s, owned[c], b->cols[c], bytes);
        host[c] = owned[c];
    }
    for (int k = 0; st == SLUICE_OK && k < nk; k++) {
        sluice_type t = s->pipeline->columns[so->keys[k]].type;
        sl_sortkey_images(t, host[so->keys[k]], NULL, false, n, so->key_descending[k], kimg);
        bool wide = sl_sortkey_is_wide(t);
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = wide ? ((const uint64_t *)kimg)[i] : ((const uint32_t *)kimg)[i];
            if (nk == 1) v = (v >> so->bits_lo) & sl_sortkey_mask(so->bits_hi - so->bits_lo);
            img[i * nk + k] = v;
        }
    }
    FILE *f = NULL;
    if (st == SLUICE_OK) {
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        sort_indices(idx, tmp, n, img, nk);
        st = open_spill_file(s, &f);
    }
    for (int64_t at = 0; st == SLUICE_OK && at < n; at += SPILL_CHUNK) {
        int64_t m = n - at < SPILL_CHUNK ? n - at : SPILL_CHUNK;
        memset(out, 0, (size_t)m * rec); /* the padding too */
        for (int64_t i = 0; i < m; i++) {
            int64_t r = idx[at + i];
            unsigned char *o = out + (size_t)i * rec;
            memcpy(o, img + r * nk, (size_t)nk * 8);
            o += (size_t)nk * 8;
            for (int j = 0; j < g->nout; j++) {
                size_t w = column_size(s, g->out[j]);
                memcpy(o, (const char *)host[g->out[j]] + (size_t)r * w, w);
                o += w;
            }
        }
        if (fwrite(out, rec, (size_t)m, f) != (size_t)m) st = io_error(s, "cannot write");
    }
    if (st == SLUICE_OK && fflush(f) != 0) st = io_error(s, "cannot write");
    if (st == SLUICE_OK) {
        b->runs[b->nruns++] = (spill_run){f, n, 0};
        b->rows = 0;
    } else if (f) {
        fclose(f);
    }
    for (size_t c = 0; owned && c < ncol; c++) sl_free(ctx, owned[c]);
    sl_free(ctx, owned);
    sl_free(ctx, (void *)host);
    sl_free(ctx, img);
    sl_free(ctx, kimg);
    sl_free(ctx, idx);
    sl_free(ctx, tmp);
    sl_free(ctx, out);
    return st;
}

/* Before a push: every stream-wide sort holding sort_memory_bytes or more spills. */
static sluice_status spill_over_budget(sluice_session *s) {
    if (s->sort_memory_bytes <= 0) return SLUICE_OK;
    for (int gi = 0; gi < s->plan.ngroups; gi++) {
        if (!stream_sort(s, gi)) continue;
        const sl_group *g = &s->plan.groups[gi];
        size_t row = 0;
        for (int j = 0; j < g->nin; j++) row += column_size(s, g->in[j]);
        if ((double)s->exec->buffers[gi].rows * (double)row < (double)s->sort_memory_bytes)
            continue;
        /* Only rows of complete pushes are spilled: no later failure can take them back. */
        SL_TRY(wait_pieces(s, s->exec->pieces - 1, -1));
        SL_TRY(spill(s, gi));
        /* Bound the runs (their content is the same either way; a failure here leaves them
         * as they were, the rows spilled). */
        sort_buffer *b = &s->exec->buffers[gi];
        for (int k; (k = tail_to_merge(b)) > 0;) SL_TRY(merge_tail(s, gi, k));
    }
    return SLUICE_OK;
}

/* ---- a piece's journey ------------------------------------------------------------------ */

/* Numbers a piece; when depth pieces are in flight, first waits for the oldest, whose
 * buffers this piece gets (exec.h). Every started piece is ended with end_piece. */
static sluice_status start_piece(sluice_session *s, sl_piece *piece) {
    sl_exec *ex = s->exec;
    if (ex->pieces - ex->done >= s->depth) SL_TRY(wait_pieces(s, ex->pieces - s->depth, -1));
    piece->seq = ex->pieces++;
    return SLUICE_OK;
}

static void end_piece(sluice_session *s, const sl_piece *piece, sluice_batch *queued) {
    if (s->backend->end_piece) s->backend->end_piece(s, piece, queued);
}

/* Queues a piece's result batch (none for an empty piece); *queued: the batch queued. */
static sluice_status emit(sluice_session *s, sl_piece *piece, sluice_batch **queued) {
    *queued = NULL;
    if (piece->rows == 0) {
        if (s->backend->recycle) s->backend->recycle(s, piece);
        else sluice_batch_free(piece->result);
        piece->result = NULL;
        return SLUICE_OK;
    }
    sluice_batch *b = NULL;
    sluice_status st = s->backend->finish(s, piece, &b);
    piece->result = NULL; /* the backend's finish owns it now */
    if (st != SLUICE_OK) return st;
    SL_TRY(sl_batch_emit(s, b));
    s->exec->queued++;
    *queued = b;
    return SLUICE_OK;
}

/* Runs groups from piece->group on: stops at a stream-wide sort (its rows are buffered) or
 * at the end (the result is queued). Ends the piece. */
static sluice_status advance(sluice_session *s, sl_piece *piece) {
    sluice_status st = SLUICE_OK;
    sluice_batch *queued = NULL;
    while (st == SLUICE_OK && piece->group < s->plan.ngroups) {
        if (stream_sort(s, piece->group)) {
            st = buffer_append(s, piece->group, piece);
            sluice_batch_free(piece->result);
            piece->result = NULL;
            end_piece(s, piece, NULL);
            return st;
        }
        st = s->backend->run_group(s, piece);
        piece->group++;
        piece->offsets = NULL; /* only group 0 reads the offsets */
        piece->nsegments = -1;
    }
    if (st == SLUICE_OK) {
        st = emit(s, piece, &queued);
    } else {
        sluice_batch_free(piece->result);
        piece->result = NULL;
    }
    end_piece(s, piece, queued);
    return st;
}

/* ---- cutting ---------------------------------------------------------------------------- */

static sluice_status reserve(sluice_session *s, int64_t rows, int64_t nsegments) {
    if (rows <= s->max_batch_rows && nsegments <= s->max_batch_rows) return SLUICE_OK;
    if (!s->backend->reserve) return SLUICE_OK;
    SL_TRY(wait_pieces(s, s->exec->pieces - 1, -1)); /* the buffers are reallocated */
    return s->backend->reserve(s, rows, nsegments);
}

/* Runs rows of a sort's output (cols, rows) through groups gi.. in pieces as the plan allows. */
static sluice_status run_sorted(sluice_session *s, int gi, const void *const *cols, int64_t rows) {
    const sl_group *g = &s->plan.groups[gi];
    sl_exec *ex = s->exec;
    int64_t step = g->cut == SL_CUT_ANYWHERE ? s->max_batch_rows : rows;
    if (step < rows) SL_TRY(reserve(s, step, -1));
    else SL_TRY(reserve(s, rows, -1));
    for (int64_t at = 0; at < rows; at += step) {
        int64_t n = rows - at < step ? rows - at : step;
        for (int c = 0; c <= s->pipeline->ncolumns; c++)
            ex->cols[1][c] = cols[c] ? (const char *)cols[c] + (size_t)at * column_size(s, c) : NULL;
        sl_piece piece = {gi, n, NULL, -1, ex->cols[1], NULL, 0, 0};
        SL_TRY(start_piece(s, &piece));
        SL_TRY(advance(s, &piece));
    }
    return SLUICE_OK;
}

/* The end of the piece of segment-aligned cutting that starts at segment k0: as many whole
 * segments as fit in max_batch_rows rows and segments (at least one). */
static int64_t segments_that_fit(const int64_t *off, int64_t nsegments, int64_t k0, int64_t max) {
    int64_t k1 = k0 + 1;
    while (k1 < nsegments && off[k1 + 1] - off[k0] <= max && k1 + 1 - k0 <= max) k1++;
    return k1;
}

static sluice_status push_piece(sluice_session *s, const sl_input *in, int64_t first,
                                int64_t rows, const int64_t *offsets, int64_t nsegments) {
    sl_piece piece = {0, rows, offsets, nsegments, s->exec->cols[0], NULL, 0, 0};
    for (int c = 0; c <= s->pipeline->ncolumns; c++) piece.cols[c] = NULL;
    SL_TRY(start_piece(s, &piece));
    sluice_status st = s->backend->load(s, in, first, &piece);
    if (st == SLUICE_OK) return advance(s, &piece);
    end_piece(s, &piece, NULL);
    return st;
}

static sluice_status push_impl(sluice_session *s, sl_input *in) {
    sl_exec *ex = s->exec;
    int64_t max = s->max_batch_rows;
    sl_cut cut = s->plan.ngroups ? s->plan.groups[0].cut : SL_CUT_ANYWHERE;
    int oc = s->plan.offsets_input;
    const int64_t *off = oc >= 0 ? in->data[oc] : NULL;
    if (oc >= 0 && in->on_device) cut = SL_CUT_NEVER; /* offsets the host cannot read */
    if (in->rows <= max && in->nsegments <= max) cut = SL_CUT_NEVER; /* fits: one piece */

    if (cut == SL_CUT_ANYWHERE) {
        for (int64_t first = 0; first < in->rows; first += max) {
            int64_t n = in->rows - first < max ? in->rows - first : max;
            SL_TRY(push_piece(s, in, first, n, NULL, -1));
        }
        return SLUICE_OK;
    }
    if (cut == SL_CUT_SEGMENTS) {
        /* Between segments: each piece starts a segment, as each batch does. */
        int64_t largest = 0;
        for (int64_t k0 = 0; k0 < in->nsegments;) {
            int64_t k1 = segments_that_fit(off, in->nsegments, k0, max);
            if (off[k1] - off[k0] > largest) largest = off[k1] - off[k0];
            k0 = k1;
        }
        if (largest > max) SL_TRY(reserve(s, largest, max));
        if (ex->offsets_cap < max + 1) {
            int64_t *o = sl_alloc(s->ctx, (size_t)(max + 1) * sizeof *o);
            if (!o) return oom(s->ctx, "cutting a batch between its segments");
            sl_free(s->ctx, ex->offsets);
            ex->offsets = o;
            ex->offsets_cap = max + 1;
        }
        for (int64_t k0 = 0; k0 < in->nsegments;) {
            int64_t k1 = segments_that_fit(off, in->nsegments, k0, max);
            for (int64_t k = k0; k <= k1; k++) ex->offsets[k - k0] = off[k] - off[k0];
            SL_TRY(push_piece(s, in, off[k0], off[k1] - off[k0], ex->offsets, k1 - k0));
            k0 = k1;
        }
        return SLUICE_OK;
    }
    /* One piece: the whole batch (grown into when it is larger than max_batch_rows). */
    SL_TRY(reserve(s, in->rows, in->nsegments));
    return push_piece(s, in, 0, in->rows, off, in->nsegments);
}

/* ---- merging spilled runs: as they come (merge_tail) and at flush (merge_runs) ----------
 * run_merge walks runs [0, n) of an array in sorted order: merge_peek gives the next record
 * (valid until merge_pop), merge_pop moves past it. Ties go to the older run, so merging
 * runs kept in stream order is stable. */
typedef struct run_reader {
    unsigned char *buf;
    int64_t have, at, left; /* records in buf, the next one, records not yet read */
} run_reader;

typedef struct run_merge {
    spill_run *runs;
    run_reader *rd;
    int *heap;
    int n, nheap, nk;
    size_t rec;
} run_merge;

static bool reader_less(const run_reader *rd, int a, int b, size_t rec, int nk) {
    int c = compare_images((const uint64_t *)(rd[a].buf + (size_t)rd[a].at * rec),
                           (const uint64_t *)(rd[b].buf + (size_t)rd[b].at * rec), nk);
    return c < 0 || (c == 0 && a < b); /* ties: the older run first (stability) */
}

static void heap_down(int *heap, int n, int i, const run_reader *rd, size_t rec, int nk) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && reader_less(rd, heap[l], heap[m], rec, nk)) m = l;
        if (r < n && reader_less(rd, heap[r], heap[m], rec, nk)) m = r;
        if (m == i) return;
        int t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

static sluice_status refill(sluice_session *s, spill_run *run, run_reader *rd, size_t rec) {
    int64_t m = rd->left < SPILL_CHUNK ? rd->left : SPILL_CHUNK;
    if (fread(rd->buf, rec, (size_t)m, run->f) != (size_t)m) return io_error(s, "cannot read back");
    rd->have = m;
    rd->at = 0;
    rd->left -= m;
    return SLUICE_OK;
}

static void merge_close(sluice_context *ctx, run_merge *m) {
    for (int r = 0; m->rd && r < m->n; r++) sl_free(ctx, m->rd[r].buf);
    sl_free(ctx, m->rd);
    sl_free(ctx, m->heap);
    m->rd = NULL;
    m->heap = NULL;
}

/* Opens a merge of runs[0, n) (records of rec bytes, nk key words first); on failure
 * everything it had is freed. */
static sluice_status merge_open(sluice_session *s, spill_run *runs, int n, size_t rec, int nk,
                                run_merge *m) {
    sluice_context *ctx = s->ctx;
    *m = (run_merge){runs, NULL, NULL, n, 0, nk, rec};
    m->rd = sl_calloc(ctx, (size_t)n + 1, sizeof *m->rd);
    m->heap = sl_calloc(ctx, (size_t)n + 1, sizeof *m->heap);
    sluice_status st = m->rd && m->heap ? SLUICE_OK : oom(ctx, "merging a stream-wide sort's runs");
    for (int r = 0; st == SLUICE_OK && r < n; r++) {
        run_reader *rd = &m->rd[r];
        rd->buf = sl_alloc(ctx, SPILL_CHUNK * rec);
        if (!rd->buf) {
            st = oom(ctx, "merging a stream-wide sort's runs");
            break;
        }
        rd->left = runs[r].rows;
        if (fseek(runs[r].f, 0, SEEK_SET) != 0) st = io_error(s, "cannot read back");
        if (st == SLUICE_OK && rd->left > 0) st = refill(s, &runs[r], rd, rec);
        if (st == SLUICE_OK && rd->have > 0) m->heap[m->nheap++] = r;
    }
    for (int i = m->nheap / 2 - 1; st == SLUICE_OK && i >= 0; i--)
        heap_down(m->heap, m->nheap, i, m->rd, rec, nk);
    if (st != SLUICE_OK) merge_close(ctx, m);
    return st;
}

static const unsigned char *merge_peek(const run_merge *m) {
    if (m->nheap == 0) return NULL;
    const run_reader *rd = &m->rd[m->heap[0]];
    return rd->buf + (size_t)rd->at * m->rec;
}

static sluice_status merge_pop(sluice_session *s, run_merge *m) {
    int r = m->heap[0];
    run_reader *rd = &m->rd[r];
    if (++rd->at == rd->have) {
        if (rd->left > 0) SL_TRY(refill(s, &m->runs[r], rd, m->rec));
        else m->heap[0] = m->heap[--m->nheap];
    }
    heap_down(m->heap, m->nheap, 0, m->rd, m->rec, m->nk);
    return SLUICE_OK;
}

/* How many of the newest runs merge_tail should merge now: SPILL_FANIN when that many runs of
 * one level are the newest (levels never rise from older runs to newer ones), else 0. */
static int tail_to_merge(const sort_buffer *b) {
    if (b->nruns < SPILL_FANIN) return 0;
    int level = b->runs[b->nruns - 1].level, k = 0;
    while (k < b->nruns && b->runs[b->nruns - 1 - k].level == level) k++;
    return k >= SPILL_FANIN ? SPILL_FANIN : 0;
}

/* Merges the `count` newest runs of group gi into one run of the next level, in their place.
 * On a failure the runs are as they were. */
static sluice_status merge_tail(sluice_session *s, int gi, int count) {
    sluice_context *ctx = s->ctx;
    sort_buffer *b = &s->exec->buffers[gi];
    int first = b->nruns - count;
    size_t rec = record_bytes(s, gi);
    int64_t total = 0;
    for (int r = first; r < b->nruns; r++) total += b->runs[r].rows;
    unsigned char *out = sl_alloc(ctx, SPILL_CHUNK * rec);
    if (!out) return oom(ctx, "merging a stream-wide sort's runs");
    run_merge m;
    sluice_status st = merge_open(s, b->runs + first, count, rec, sort_of(s, gi)->nkeys, &m);
    FILE *f = NULL;
    if (st == SLUICE_OK) st = open_spill_file(s, &f);
    int64_t have = 0;
    for (const unsigned char *o; st == SLUICE_OK && (o = merge_peek(&m)) != NULL;) {
        memcpy(out + (size_t)have * rec, o, rec);
        have++;
        st = merge_pop(s, &m);
        if (st == SLUICE_OK && (have == SPILL_CHUNK || m.nheap == 0)) {
            if (fwrite(out, rec, (size_t)have, f) != (size_t)have) st = io_error(s, "cannot write");
            have = 0;
        }
    }
    if (st == SLUICE_OK && fflush(f) != 0) st = io_error(s, "cannot write");
    if (m.rd) merge_close(ctx, &m);
    sl_free(ctx, out);
    if (st != SLUICE_OK) {
        if (f) fclose(f);
        return st;
    }
    int level = b->runs[first].level + 1;
    for (int r = first; r < b->nruns; r++) fclose(b->runs[r].f);
    b->runs[first] = (spill_run){f, total, level};
    b->nruns = first + 1;
    return SLUICE_OK;
}

/* Runs `rows` merged rows (host columns in hostcols) on from group `next`: copied into the
 * backend first when its memory is not host memory. */
static sluice_status merged_piece(sluice_session *s, int next, void **hostcols, void **devcols,
                                  int64_t rows) {
    const sl_group *g = &s->plan.groups[next - 1];
    sl_exec *ex = s->exec;
    for (int c = 0; c <= s->pipeline->ncolumns; c++) ex->cols[1][c] = NULL;
    for (int j = 0; j < g->nout; j++) {
        int c = g->out[j];
        if (s->backend->from_host) {
            SL_TRY(s->backend->from_host(s, devcols[c], hostcols[c], (size_t)rows * column_size(s, c)));
            ex->cols[1][c] = devcols[c];
        } else {
            ex->cols[1][c] = hostcols[c];
        }
    }
    sl_piece piece = {next, rows, NULL, -1, ex->cols[1], NULL, 0, 0};
    SL_TRY(start_piece(s, &piece));
    SL_TRY(advance(s, &piece));
    /* The next merged rows go into the same backend buffers: this piece must be done. */
    return wait_pieces(s, piece.seq, -1);
}

static sluice_status merge_runs(sluice_session *s, int gi) {
    sluice_context *ctx = s->ctx;
    sort_buffer *b = &s->exec->buffers[gi];
    const sl_group *g = &s->plan.groups[gi];
    const sl_backend_ops *be = s->backend;
    int nk = sort_of(s, gi)->nkeys, next = gi + 1;
    size_t rec = record_bytes(s, gi), ncol = (size_t)s->pipeline->ncolumns + 1;
    int64_t total = 0;
    for (int r = 0; r < b->nruns; r++) total += b->runs[r].rows;
    /* Pieces of max_batch_rows, unless the groups after need the sorted stream whole. */
    bool whole = next < s->plan.ngroups && s->plan.groups[next].cut == SL_CUT_NEVER;
    int64_t chunk = whole ? total : s->max_batch_rows;
    if (chunk > total) chunk = total;
    if (chunk > s->max_batch_rows) SL_TRY(reserve(s, chunk, -1));
    void **hostcols = sl_calloc(ctx, ncol, sizeof *hostcols), **devcols = sl_calloc(ctx, ncol, sizeof *devcols);
    sluice_status st = SLUICE_OK;
    if (!hostcols || !devcols) st = oom(ctx, "merging a stream-wide sort's runs");
    for (int j = 0; st == SLUICE_OK && j < g->nout; j++) {
        int c = g->out[j];
        size_t bytes = (size_t)chunk * column_size(s, c);
        hostcols[c] = sl_alloc(ctx, bytes ? bytes : 1);
        if (!hostcols[c]) st = oom(ctx, "merging a stream-wide sort's runs");
        else if (be->from_host) st = be->alloc(s, bytes ? bytes : 1, &devcols[c]);
    }
    run_merge m = {0};
    if (st == SLUICE_OK) st = merge_open(s, b->runs, b->nruns, rec, nk, &m);
    int64_t rows = 0;
    for (const unsigned char *o; st == SLUICE_OK && (o = merge_peek(&m)) != NULL;) {
        o += (size_t)nk * 8;
        for (int j = 0; j < g->nout; j++) {
            size_t w = column_size(s, g->out[j]);
            memcpy((char *)hostcols[g->out[j]] + (size_t)rows * w, o, w);
            o += w;
        }
        rows++;
        st = merge_pop(s, &m);
        if (st == SLUICE_OK && (rows == chunk || m.nheap == 0)) {
            st = merged_piece(s, next, hostcols, devcols, rows);
            rows = 0;
        }
    }
    if (m.rd) merge_close(ctx, &m);
    for (size_t c = 0; hostcols && c < ncol; c++) {
        sl_free(ctx, hostcols[c]);
        if (devcols && devcols[c]) be->free(s, devcols[c]);
    }
    sl_free(ctx, hostcols);
    sl_free(ctx, devcols);
    return st;
}

/* ---- the calls -------------------------------------------------------------------------- */

sluice_status sl_exec_push(sluice_session *s, const sl_input *input) {
    sl_input in = *input;
    /* No poll before the push's work: txn_end polls once, after it (a failure found in
     * flight then rejects this push with the failed one, reject_failed). Except before a
     * check of device offsets, which waits on the device: a failure in flight (a sticky CUDA
     * error, say) is found first and named as the earlier push's, not as this check's. */
    sluice_status st = SLUICE_OK;
    if (in.on_device && s->plan.offsets_input >= 0) st = wait_pieces(s, s->exec->pieces - 1, 0);
    if (st == SLUICE_OK && s->backend->check_input) st = s->backend->check_input(s, &in);
    if (st == SLUICE_OK) st = spill_over_budget(s); /* complete rows only: nothing to undo */
    if (st == SLUICE_OK) {
        txn_begin(s);
        st = txn_end(s, push_impl(s, &in), true);
    }
    return reject_failed(s, st);
}

/* Sorts rows (cols, rows) held for stream-wide sort group gi and runs them through the
 * groups after it (or queues them when it is the last). */
static sluice_status sort_and_go_on(sluice_session *s, int gi, void *const *cols, int64_t n) {
    sl_exec *ex = s->exec;
    sl_piece piece = {gi, n, NULL, -1, ex->cols[0], NULL, 0, 0};
    for (int c = 0; c <= s->pipeline->ncolumns; c++) piece.cols[c] = cols[c];
    SL_TRY(start_piece(s, &piece));
    /* The sort itself is the backend's to size (it holds the whole stream). */
    sluice_status st = s->backend->run_group(s, &piece);
    if (st != SLUICE_OK || gi + 1 < s->plan.ngroups) {
        sluice_batch_free(piece.result);
        piece.result = NULL;
    }
    sluice_batch *queued = NULL;
    if (st == SLUICE_OK && gi + 1 == s->plan.ngroups) st = emit(s, &piece, &queued);
    end_piece(s, &piece, queued);
    SL_TRY(st);
    if (gi + 1 == s->plan.ngroups) return SLUICE_OK;
    return run_sorted(s, gi + 1, piece.cols, piece.rows);
}

/* A session with a sort exchange (a distributed session's, core/runtime/carry.h): the held
 * rows, even none, go to the hook, which every rank's flush reaches, and the rows it hands
 * back are this session's to sort and carry on with. */
static sluice_status flush_exchanged(sluice_session *s, int gi) {
    sort_buffer *b = &s->exec->buffers[gi];
    int64_t n = b->rows;
    b->rows = 0; /* consumed (restored by a rollback) */
    void **got = sl_calloc(s->ctx, (size_t)s->pipeline->ncolumns + 1, sizeof *got);
    if (!got) return oom(s->ctx, "a stream-wide sort's exchange");
    int64_t rows = 0;
    sluice_status st = s->sort_exchange(s->sort_exchange_arg, s, gi, (void *const *)b->cols, n,
                                        got, &rows);
    if (st == SLUICE_OK && rows > 0) st = sort_and_go_on(s, gi, got, rows);
    for (int c = 0; c <= s->pipeline->ncolumns; c++)
        if (got[c]) s->backend->free(s, got[c]);
    sl_free(s->ctx, got);
    return st;
}

/* A group holding rows back until the end of the stream (a reduce's open segment) hands
 * them over, and they go on through the groups after it, before those flush in turn. */
static sluice_status flush_held(sluice_session *s, int gi) {
    sl_piece piece = {.group = gi, .rows = 0, .nsegments = -1, .cols = s->exec->cols[0]};
    for (int c = 0; c <= s->pipeline->ncolumns; c++) piece.cols[c] = NULL;
    SL_TRY(start_piece(s, &piece));
    sluice_status st = s->backend->flush_group(s, &piece);
    if (st != SLUICE_OK) {
        sluice_batch_free(piece.result);
        piece.result = NULL;
        end_piece(s, &piece, NULL);
        return st;
    }
    piece.group++;
    return advance(s, &piece);
}

static sluice_status flush_impl(sluice_session *s) {
    sl_exec *ex = s->exec;
    for (int gi = 0; gi < s->plan.ngroups; gi++) {
        sort_buffer *b = &ex->buffers[gi];
        if (s->plan.groups[gi].emits_at_flush) SL_TRY(flush_held(s, gi));
        if (!stream_sort(s, gi)) continue;
        if (b->nruns > 0) {
            /* Spilled before: what is held joins the runs, which merge in sorted order. Once
             * in a run the rows are held there, also if the flush fails after: its undo must
             * not hold them in memory again too (a retried flush would give them twice). */
            SL_TRY(spill(s, gi));
            ex->cur.sort_rows[gi] = 0;
            SL_TRY(merge_runs(s, gi));
            continue;
        }
        if (s->sort_exchange) {
            SL_TRY(flush_exchanged(s, gi));
            continue;
        }
        if (b->rows == 0) continue;
        int64_t n = b->rows;
        b->rows = 0; /* consumed (restored by a rollback) */
        SL_TRY(sort_and_go_on(s, gi, (void *const *)b->cols, n));
    }
    return SLUICE_OK;
}

sluice_status sl_exec_flush(sluice_session *s) {
    sl_exec *ex = s->exec;
    /* Every push first (a failure in flight rejects it before the flush begins), then the
     * flush's own pieces: after a flush every result is ready. */
    sluice_status st = wait_pieces(s, ex->pieces - 1, -1);
    if (st == SLUICE_OK) {
        txn_begin(s);
        st = txn_end(s, flush_impl(s), false);
    }
    if (st == SLUICE_OK) st = wait_pieces(s, ex->pieces - 1, -1);
    SL_TRY(reject_failed(s, st));
    for (int gi = 0; gi < s->plan.ngroups; gi++) drop_runs(&ex->buffers[gi]); /* consumed */
    return SLUICE_OK;
}

sluice_status sl_exec_reset(sluice_session *s) {
    sl_exec *ex = s->exec;
    /* The work in flight ends first; a failure in it no longer matters: all is dropped. */
    if (wait_pieces(s, ex->pieces - 1, -1) != SLUICE_OK) {
        ex->failed = -1;
        sl_diag_clear(s->ctx);
    }
    ex->mcount = 0;
    ex->done = ex->pieces;
    ex->pushes = 0;
    ex->ready = ex->queued; /* the session drops the queue */
    SL_TRY(s->backend->reset(s));
    for (int gi = 0; gi < s->plan.ngroups; gi++) {
        s->exec->buffers[gi].rows = 0;
        drop_runs(&s->exec->buffers[gi]);
    }
    return SLUICE_OK;
}

/* ---- results in flight ------------------------------------------------------------------ */

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Batches at the head of the queue that are complete. */
static int64_t ready_count(const sluice_session *s) {
    const sl_exec *ex = s->exec;
    int64_t pulled = ex->queued - (int64_t)s->queue_len;
    return ex->ready - pulled;
}

sluice_status sl_exec_next(sluice_session *s, int64_t timeout_ns, sluice_batch **out) {
    sl_exec *ex = s->exec;
    *out = NULL;
    /* A pull (timeout 0) reads no clock: one poll, then it returns. A deadline past the
     * clock's range is none (-1). */
    int64_t deadline = timeout_ns;
    if (timeout_ns > 0) {
        int64_t now = now_ns();
        deadline = timeout_ns > INT64_MAX - now ? -1 : now + timeout_ns;
    }
    for (;;) {
        while (ready_count(s) > 0) {
            sluice_batch *b = s->queue[s->queue_head];
            if (b->rows > 0) {
                *out = b;
                return SLUICE_OK;
            }
            /* Every row fell away (a compaction's count, read only at completion): no result. */
            sl_exec_take(s);
            sluice_batch_free(b);
        }
        if (ex->mcount == 0) return SLUICE_OK; /* nothing in flight */
        int64_t left = deadline;
        if (deadline > 0) {
            left = deadline - now_ns();
            if (left < 0) left = 0;
        }
        sluice_status st = wait_pieces(s, mark_at(ex, 0)->end_piece - 1, left);
        if (st != SLUICE_OK) return reject_failed(s, st);
        if (ready_count(s) == 0 && (deadline == 0 || (deadline > 0 && now_ns() >= deadline)))
            return SLUICE_OK;
    }
}

void sl_exec_take(sluice_session *s) {
    s->queue_head++;
    if (--s->queue_len == 0) s->queue_head = 0;
}

int64_t sl_exec_in_flight(const sluice_session *s) { return s->exec->mcount; }

int64_t sl_exec_push_count(const sluice_session *s) { return s->exec->pushes; }
