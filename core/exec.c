/* exec.c — the shared executor (see exec.h): cutting, the walk of a piece through the plan
 * groups, stream-wide sort buffers, transactions and result batches, on top of the backend
 * operations of core/session.h. */
#include <string.h>

#include "context.h"
#include "exec.h"

/* A stream-wide sort's buffer: the columns reaching the sort (the plan group's `in`),
 * appended piece after piece in backend memory until flush. */
typedef struct sort_buffer {
    void **cols;            /* per column id */
    int64_t rows, cap;
    int64_t saved_rows;     /* rows when the current call began (transactions) */
} sort_buffer;

struct sl_exec {
    sort_buffer *buffers;   /* per group; used by stream-wide sort groups */
    const void **cols[2];   /* piece column tables: [0] pushed pieces and sorted rows, [1] the
                               pieces cut from sorted rows */
    int64_t *offsets;       /* host: a segment-aligned piece's offsets, rebased to 0 */
    int64_t offsets_cap;
    size_t saved_queue_len; /* transactions */
    int64_t saved_rows_out;
};

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
        if (!b->cols) continue;
        for (int c = 0; c <= s->pipeline->ncolumns; c++)
            if (b->cols[c]) s->backend->free(s, b->cols[c]);
        sl_free(ctx, b->cols);
    }
    sl_free(ctx, ex->buffers);
    sl_free(ctx, (void *)ex->cols[0]);
    sl_free(ctx, (void *)ex->cols[1]);
    sl_free(ctx, ex->offsets);
    sl_free(ctx, ex);
    s->exec = NULL;
}

int64_t sl_exec_sort_rows(const sluice_session *s) {
    int64_t rows = 0;
    for (int gi = 0; s->exec && gi < s->plan.ngroups; gi++) rows += s->exec->buffers[gi].rows;
    return rows;
}

/* ---- transactions ----------------------------------------------------------------------- */

static void txn_begin(sluice_session *s) {
    sl_exec *ex = s->exec;
    for (int gi = 0; gi < s->plan.ngroups; gi++) ex->buffers[gi].saved_rows = ex->buffers[gi].rows;
    ex->saved_queue_len = s->queue_len;
    ex->saved_rows_out = s->rows_out;
    s->backend->begin(s);
}

/* Settles the call's work and commits it, or undoes everything the call did. */
static sluice_status txn_end(sluice_session *s, sluice_status st) {
    sl_exec *ex = s->exec;
    if (st == SLUICE_OK) st = s->backend->settle(s);
    if (st == SLUICE_OK) {
        s->backend->commit(s);
        return SLUICE_OK;
    }
    s->backend->rollback(s);
    for (int gi = 0; gi < s->plan.ngroups; gi++) ex->buffers[gi].rows = ex->buffers[gi].saved_rows;
    while (s->queue_len > ex->saved_queue_len) {
        sluice_batch_free(s->queue[s->queue_head + s->queue_len - 1]);
        s->queue_len--;
    }
    s->rows_out = ex->saved_rows_out;
    return st;
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
                        "stream reached %lld (use per: batch or shorter streams)",
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

/* ---- a piece's journey ------------------------------------------------------------------ */

/* Queues a piece's result batch (none for an empty piece). */
static sluice_status emit(sluice_session *s, sl_piece *piece) {
    if (piece->rows == 0) {
        sluice_batch_free(piece->result);
        piece->result = NULL;
        return SLUICE_OK;
    }
    sluice_batch *b = NULL;
    sluice_status st = s->backend->finish(s, piece, &b);
    piece->result = NULL; /* the backend's finish owns it now */
    if (st != SLUICE_OK) return st;
    return sl_session_emit(s, b);
}

/* Runs groups from piece->group on: stops at a stream-wide sort (its rows are buffered) or
 * at the end (the result is queued). */
static sluice_status advance(sluice_session *s, sl_piece *piece) {
    sluice_status st = SLUICE_OK;
    while (st == SLUICE_OK && piece->group < s->plan.ngroups) {
        if (stream_sort(s, piece->group)) {
            st = buffer_append(s, piece->group, piece);
            sluice_batch_free(piece->result);
            piece->result = NULL;
            return st;
        }
        st = s->backend->run_group(s, piece);
        piece->group++;
        piece->offsets = NULL; /* only group 0 reads the offsets */
        piece->nsegments = -1;
    }
    if (st == SLUICE_OK) return emit(s, piece);
    sluice_batch_free(piece->result);
    piece->result = NULL;
    return st;
}

/* ---- cutting ---------------------------------------------------------------------------- */

static sluice_status reserve(sluice_session *s, int64_t rows, int64_t nsegments) {
    if (rows <= s->max_batch_rows && nsegments <= s->max_batch_rows) return SLUICE_OK;
    return s->backend->reserve ? s->backend->reserve(s, rows, nsegments) : SLUICE_OK;
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
        sl_piece piece = {gi, n, NULL, -1, ex->cols[1], NULL, 0};
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
    sl_piece piece = {0, rows, offsets, nsegments, s->exec->cols[0], NULL, 0};
    for (int c = 0; c <= s->pipeline->ncolumns; c++) piece.cols[c] = NULL;
    SL_TRY(s->backend->load(s, in, first, &piece));
    return advance(s, &piece);
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

/* ---- the calls -------------------------------------------------------------------------- */

sluice_status sl_exec_push(sluice_session *s, const sl_input *input) {
    sl_input in = *input;
    if (s->backend->check_input) SL_TRY(s->backend->check_input(s, &in));
    txn_begin(s);
    return txn_end(s, push_impl(s, &in));
}

static sluice_status flush_impl(sluice_session *s) {
    sl_exec *ex = s->exec;
    for (int gi = 0; gi < s->plan.ngroups; gi++) {
        sort_buffer *b = &ex->buffers[gi];
        if (!stream_sort(s, gi) || b->rows == 0) continue;
        int64_t n = b->rows;
        b->rows = 0; /* consumed (restored by a rollback) */
        sl_piece piece = {gi, n, NULL, -1, ex->cols[0], NULL, 0};
        for (int c = 0; c <= s->pipeline->ncolumns; c++) piece.cols[c] = b->cols[c];
        /* The sort itself is the backend's to size (it holds the whole stream). */
        sluice_status st = s->backend->run_group(s, &piece);
        if (st != SLUICE_OK || gi + 1 < s->plan.ngroups) {
            sluice_batch_free(piece.result);
            piece.result = NULL;
        }
        SL_TRY(st);
        if (gi + 1 == s->plan.ngroups) SL_TRY(emit(s, &piece));
        else SL_TRY(run_sorted(s, gi + 1, piece.cols, piece.rows));
    }
    return SLUICE_OK;
}

sluice_status sl_exec_flush(sluice_session *s) {
    txn_begin(s);
    return txn_end(s, flush_impl(s));
}

sluice_status sl_exec_reset(sluice_session *s) {
    SL_TRY(s->backend->reset(s));
    for (int gi = 0; gi < s->plan.ngroups; gi++) s->exec->buffers[gi].rows = 0;
    return SLUICE_OK;
}
