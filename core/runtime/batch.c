/* batch.c — result batches: allocation for a pipeline's outputs, the public accessors,
 * freeing (host or device memory), and concatenation for the one-shot sluice_run. */
#include <string.h>

#include "common/context.h"
#include "runtime/session.h"

/* One allocation holds the batch, its column table and its owned table (each part rounded
 * up to 16 bytes, so the tables stay aligned): a result batch is made and freed once a push,
 * and a small push's host time is what issue 11 counts, so one allocator call each way, not
 * three. */
static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

sluice_batch *sl_batch_shell(sluice_context *ctx, const sluice_pipeline *p) {
    size_t n = (size_t)p->noutputs + 1;
    size_t at_columns = round16(sizeof(sluice_batch));
    size_t at_owned = at_columns + round16(n * sizeof(sluice_column));
    char *block = sl_calloc(ctx, 1, at_owned + n * sizeof(void *));
    if (!block) return NULL;
    sluice_batch *b = (sluice_batch *)block;
    b->ctx = ctx;
    b->ncolumns = (size_t)p->noutputs;
    b->columns = (sluice_column *)(block + at_columns);
    b->owned = (void **)(block + at_owned);
    for (size_t i = 0; i < b->ncolumns; i++) {
        const sl_column *c = &p->columns[p->outputs[i]];
        b->columns[i].name = c->name; /* the pipeline outlives its sessions' batches' use */
        b->columns[i].type = c->type;
    }
    return b;
}

sluice_batch *sl_batch_new_host(sluice_context *ctx, const sluice_pipeline *p, int64_t rows) {
    if (rows < 0) return NULL;
    sluice_batch *b = sl_batch_shell(ctx, p);
    if (!b) return NULL;
    b->rows = rows;
    for (size_t i = 0; i < b->ncolumns; i++) {
        size_t bytes;
        if (sl_mul_overflows((size_t)rows, sluice_type_size(b->columns[i].type), &bytes)) {
            sluice_batch_free(b);
            return NULL;
        }
        b->owned[i] = sl_alloc_aligned(ctx, bytes);
        if (!b->owned[i]) {
            sluice_batch_free(b);
            return NULL;
        }
        b->columns[i].data = b->owned[i];
        b->columns[i].length = rows;
    }
    return b;
}

SLUICE_API int64_t sluice_batch_rows(const sluice_batch *batch) { return batch ? batch->rows : 0; }

SLUICE_API size_t sluice_batch_column_count(const sluice_batch *batch) {
    return batch ? batch->ncolumns : 0;
}

SLUICE_API sluice_status sluice_batch_column(const sluice_batch *batch, size_t index,
                                             sluice_column *out) {
    if (!batch || !out || index >= batch->ncolumns) return SLUICE_ERR_INVALID_ARGUMENT;
    *out = batch->columns[index];
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_batch_column_by_name(const sluice_batch *batch, const char *name,
                                                     sluice_column *out) {
    if (!batch || !name || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < batch->ncolumns; i++) {
        if (strcmp(batch->columns[i].name, name) == 0) {
            *out = batch->columns[i];
            return SLUICE_OK;
        }
    }
    return SLUICE_ERR_UNKNOWN_COLUMN;
}

SLUICE_API void sluice_batch_free(sluice_batch *batch) {
    if (!batch) return;
    sluice_context *ctx = batch->ctx;
    sl_owned_remove(ctx, &batch->link);
    if (batch->owned) {
        for (size_t i = 0; i < batch->ncolumns; i++) {
            if (!batch->owned[i]) continue;
            if (batch->on_device && batch->free_device)
                batch->free_device(batch->owned[i]);
            else if (!batch->on_device && batch->free_host)
                batch->free_host(ctx, batch->owned[i]);
            else
                sl_free_aligned(ctx, batch->owned[i]);
        }
    }
    sl_free(ctx, batch); /* the tables too (sl_batch_shell) */
}

sluice_status sl_batch_emit(sluice_session *s, sluice_batch *b) {
    if (s->queue_head + s->queue_len == s->queue_cap) {
        if (s->queue_head > 0) { /* slide pulled slots away before growing */
            memmove(s->queue, s->queue + s->queue_head, s->queue_len * sizeof *s->queue);
            s->queue_head = 0;
        } else {
            size_t cap = s->queue_cap ? s->queue_cap * 2 : 16;
            sluice_batch **q = sl_realloc(s->ctx, s->queue, cap * sizeof *q);
            if (!q) {
                sluice_batch_free(b);
                return sl_error(s->ctx, SLUICE_ERR_NO_MEMORY, "out of memory queueing a result batch");
            }
            s->queue = q;
            s->queue_cap = cap;
        }
    }
    s->queue[s->queue_head + s->queue_len++] = b;
    s->rows_out += b->rows;
    return SLUICE_OK;
}

sluice_status sl_batch_concat(sluice_context *ctx, const sluice_pipeline *p, sluice_batch **parts,
                              size_t nparts, sluice_batch **out) {
    int64_t rows = 0;
    for (size_t i = 0; i < nparts; i++) rows += parts[i]->rows;
    sluice_batch *b = sl_batch_new_host(ctx, p, rows);
    if (!b) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory joining %lld result rows",
                            (long long)rows);
    for (size_t c = 0; c < b->ncolumns; c++) {
        size_t width = sluice_type_size(b->columns[c].type), at = 0;
        for (size_t i = 0; i < nparts; i++) {
            size_t bytes = (size_t)parts[i]->rows * width;
            if (bytes) memcpy((char *)b->owned[c] + at, parts[i]->columns[c].data, bytes);
            at += bytes;
        }
    }
    *out = b;
    return SLUICE_OK;
}
