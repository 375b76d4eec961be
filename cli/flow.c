/* flow.c — reader threads ahead of the session and writer threads behind it (see flow.h).
 *
 * What reading ahead means. A batch of column files is a window of their mappings: the
 * readers read its pages in (MADV_POPULATE_READ), so that pushing it costs the session no
 * page faults, and hand back the pages of batches the caller is done with. Where a window
 * cannot be pushed as it is (a .npy header that misaligns the data), and for CSV values and
 * rebased offsets, the batch is read into the slot's own page-aligned buffers. From
 * /dev/shm, reading pages in costs about 40% of reading them into buffers (pread copies),
 * and a CPU session reads the same bytes either way. A device session is different: it
 * copies pageable memory through a staging buffer, a CPU copy on the session's thread, but
 * reads its pinned memory by DMA; so for it the readers pread into pinned slot buffers
 * (sl_reader_memory) and that one copy is spread over the readers, ahead of the session.
 *
 * The reader ring. Batches are numbered in stream order. Slots [released, published) hold
 * batches the caller has not handed back yet (the one it is pushing included); the next
 * batch, number `published`, may be read once a slot is free. One reader at a time decides
 * the next batch's place (`planning`: the input's cursor and the CSV parser are sequential);
 * a batch of column files is then cut into chunks of about CHUNK_BYTES that every reader
 * takes from (pread, in parallel), and whoever finishes its last chunk publishes it. An error
 * is published in the batch's place, so the caller meets it after every batch before it,
 * exactly where a sequential run would, and no batch is read after it.
 *
 * The writer queue. Result batches [freed, written) are written and wait to be freed by the
 * caller (only its thread may call the library); [written, queued) wait to be written, in
 * chunks that the writer threads take in stream order (next_batch, next_col, next_at) and
 * write where sl_output_place put them when the batch was queued; a batch counts as written
 * once its last chunk is, and batches are written in stream order. Lock order: a failing
 * writer calls its callback (sl_reader_interrupt) under its own lock, so the writer's lock
 * comes before the reader's; the caller never holds both. */
#include "cli.h"
#include "flow.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errbuf.h"

/* What one reader reads at a time: large enough that a read costs little more than its
 * copy, small enough that several readers share a batch evenly. */
#define CHUNK_BYTES ((int64_t)4 << 20)

/* Stack of a reader or writer thread: they only copy and parse, and a run may start a dozen
 * of them (the default 8 MiB each would take a tight address-space limit). */
#define THREAD_STACK_BYTES ((size_t)512 << 10)

/* Starts a thread with every signal blocked. Returns 0 or an errno value. */
static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg) {
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0) return rc;
    pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(t, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

/* ---- reading ahead ------------------------------------------------------------------------ */

typedef struct read_slot {
    sl_buffer *bufs;   /* one per input column: CSV values, offsets, misaligned columns */
    sl_buffer *dma;    /* one per input column, with sl_reader_memory: the device's memory */
    const void **data; /* one per input column: its buffer, or the window of the mapping */
    sl_input_window w;
    int64_t rows, bytes_read;
    bool failed;
    char err[1024];
} read_slot;

typedef struct read_chunk {
    size_t col;
    int64_t first, count; /* elements of the file */
    unsigned char *dst;   /* where they go; NULL: the window of the mapping, whose pages are
                             read in */
} read_chunk;

struct sl_reader {
    sl_input *in;
    sl_reader_memory mem; /* alloc NULL: none */
    size_t ncols;
    int64_t batch_rows;
    bool csv, may_block;
    int depth;
    read_slot *slots;
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* readers wait here: for a free slot, for the planner */
    pthread_cond_t ready; /* the caller waits here: for a batch, for the readers to end */
    atomic_int stop;
    /* Under lock: */
    uint64_t published, taken, released;
    bool holding;  /* the caller holds batch taken - 1 */
    bool planning; /* a reader is deciding batch `published` */
    bool eof;      /* no batch after the published ones */
    bool interrupted;
    int running;   /* reader threads not yet ended */
    /* The chunks of batch `published` (written by its planner before chunk_total is set). */
    read_chunk *chunks;
    size_t chunk_cap, chunk_total, chunk_next, chunk_done;
};

/* A reader stuck in a read that never returns is left behind with its memory, reachable
 * from here (the process is ending). */
static sl_reader *abandoned_reader;

/* Batch `published` is complete (or failed): the caller may take it. Lock held. */
static void publish(sl_reader *r, const read_slot *s) {
    r->chunk_total = r->chunk_next = r->chunk_done = 0;
    r->published++;
    if (s->failed) r->eof = true;
    pthread_cond_broadcast(&r->ready);
    pthread_cond_broadcast(&r->work);
}

static int add_chunk(sl_reader *r, size_t *n, read_chunk c) {
    if (*n == r->chunk_cap) {
        size_t cap = r->chunk_cap ? r->chunk_cap * 2 : 64;
        read_chunk *grown = realloc(r->chunks, cap * sizeof *grown);
        if (!grown) return -1;
        r->chunks = grown;
        r->chunk_cap = cap;
    }
    r->chunks[(*n)++] = c;
    return 0;
}

/* Decides the next batch into slot s, without the lock (only the planner touches the input's
 * cursor, s and the chunk list); the mapped pages before row keep_from (the oldest batch the
 * caller still holds; -1: the new batch) are handed back. Returns 1 with *nchunks chunks left
 * to read, 0 at the end of the input, -1 with s failed. */
static int plan(sl_reader *r, read_slot *s, int64_t keep_from, size_t *nchunks) {
    s->failed = false;
    *nchunks = 0;
    if (r->csv) {
        int got = sl_input_next_csv(r->in, r->batch_rows, s->bufs, &s->rows, &r->stop, s->err,
                                    sizeof s->err);
        if (got < 0) s->failed = true;
        s->bytes_read = sl_input_bytes_read(r->in);
        for (size_t i = 0; i < r->ncols; i++) s->data[i] = s->bufs[i].data;
        return got;
    }
    if (sl_input_next_window(r->in, r->batch_rows, &s->w) == 0) return 0;
    sl_input_release(r->in, keep_from >= 0 ? keep_from : s->w.first_row);
    s->rows = s->w.rows;
    s->bytes_read = sl_input_bytes_at(r->in, s->w.first_row + s->w.rows);
    for (size_t i = 0; i < r->ncols; i++) {
        const sluice_column_info *info = sl_input_column(r->in, i);
        bool offsets = info->role == SLUICE_ROLE_OFFSETS;
        int64_t n = offsets ? s->w.segs + 1 : s->w.rows;
        size_t elem = sluice_type_size(info->type);
        /* Into the slot's device memory when there is some and the batch fits (the device
         * then copies it by DMA); else pushed from the mapping where the file allows it (no
         * copy: the readers only read its pages in); else read into the slot's buffer. */
        bool dma = !offsets && s->dma && s->dma[i].data && (size_t)n * elem <= s->dma[i].cap;
        s->data[i] = offsets || dma ? NULL : sl_input_mapped(r->in, i, s->w.first_row);
        bool in_place = s->data[i] != NULL;
        if (!in_place && !dma && sl_buffer_reserve(&s->bufs[i], (size_t)n * elem, 0) != 0) {
            s->failed = true;
            sl_errf(s->err, sizeof s->err, "out of memory for a batch of %" PRId64 " rows",
                    s->w.rows);
            return -1;
        }
        unsigned char *dst = in_place ? NULL : dma ? s->dma[i].data : s->bufs[i].data;
        if (!in_place) s->data[i] = dst;
        if (offsets) {
            sl_input_window_offsets(r->in, &s->w, s->bufs[i].data);
            continue;
        }
        int64_t per = CHUNK_BYTES / (int64_t)elem;
        for (int64_t at = 0; at < n; at += per) {
            read_chunk c = {i, s->w.first_row + at, n - at < per ? n - at : per,
                            dst ? dst + (size_t)at * elem : NULL};
            if (add_chunk(r, nchunks, c) != 0) {
                s->failed = true;
                sl_errf(s->err, sizeof s->err, "out of memory");
                return -1;
            }
        }
    }
    return 1;
}

static void *reader_main(void *arg) {
    sl_reader *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        if (atomic_load(&r->stop)) break;
        read_slot *s = &r->slots[r->published % (uint64_t)r->depth];
        if (r->chunk_next < r->chunk_total) {
            read_chunk c = r->chunks[r->chunk_next++];
            pthread_mutex_unlock(&r->lock);
            char err[sizeof s->err];
            int rc = c.dst ? sl_input_read_rows(r->in, c.col, c.first, c.count, c.dst, err,
                                                sizeof err)
                           : sl_input_populate(r->in, c.col, c.first, c.count, err, sizeof err);
            pthread_mutex_lock(&r->lock);
            if (rc != 0 && !s->failed) {
                s->failed = true;
                memcpy(s->err, err, sizeof err);
            }
            if (++r->chunk_done == r->chunk_total) publish(r, s);
            continue;
        }
        if (r->eof) break;
        /* Another reader is planning, or finishing the last chunks, or the ring is full. */
        if (r->planning || r->chunk_total > 0 || r->published - r->released >= (uint64_t)r->depth) {
            pthread_cond_wait(&r->work, &r->lock);
            continue;
        }
        r->planning = true;
        int64_t keep_from = r->released < r->published
                                ? r->slots[r->released % (uint64_t)r->depth].w.first_row
                                : -1;
        pthread_mutex_unlock(&r->lock);
        size_t nchunks = 0;
        int got = plan(r, s, keep_from, &nchunks);
        pthread_mutex_lock(&r->lock);
        r->planning = false;
        if (got == 0) {
            r->eof = true;
            pthread_cond_broadcast(&r->ready);
            pthread_cond_broadcast(&r->work);
        } else if (got < 0 || nchunks == 0) {
            publish(r, s);
        } else {
            r->chunk_total = nchunks;
            r->chunk_next = r->chunk_done = 0;
            pthread_cond_broadcast(&r->work);
        }
    }
    r->running--;
    pthread_cond_broadcast(&r->ready);
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static void free_reader(sl_reader *r) {
    for (int k = 0; r->slots && k < r->depth; k++) {
        for (size_t i = 0; r->slots[k].bufs && i < r->ncols; i++)
            sl_buffer_free(&r->slots[k].bufs[i]);
        for (size_t i = 0; r->slots[k].dma && i < r->ncols; i++)
            if (r->slots[k].dma[i].data) r->mem.release(r->mem.arg, r->slots[k].dma[i].data);
        free(r->slots[k].bufs);
        free(r->slots[k].dma);
        free(r->slots[k].data);
    }
    free(r->slots);
    free(r->chunks);
    free(r->threads);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->work);
    pthread_cond_destroy(&r->ready);
    free(r);
}

/* With r->mem: every slot's memory for the columns read into it, batch_rows rows each (at
 * most the input's rows). A column that gets none is read as without it. */
static bool alloc_dma(sl_reader *r) {
    int64_t rows = r->batch_rows, total = sl_input_total_rows(r->in);
    if (total >= 0 && total < rows) rows = total;
    for (int k = 0; k < r->depth; k++) {
        read_slot *s = &r->slots[k];
        s->dma = calloc(r->ncols ? r->ncols : 1, sizeof *s->dma);
        if (!s->dma) return false;
        for (size_t i = 0; i < r->ncols && rows > 0; i++) {
            const sluice_column_info *info = sl_input_column(r->in, i);
            if (info->role == SLUICE_ROLE_OFFSETS) continue;
            size_t bytes = (size_t)rows * sluice_type_size(info->type);
            s->dma[i].data = r->mem.alloc(r->mem.arg, bytes);
            s->dma[i].cap = s->dma[i].data ? bytes : 0;
        }
    }
    return true;
}

int sl_reader_start(sl_reader **out, sl_input *in, int64_t batch_rows, int threads, int depth,
                    const sl_reader_memory *mem, char *err, size_t errcap) {
    *out = NULL;
    sl_reader *r = calloc(1, sizeof *r);
    if (!r) return sl_errf(err, errcap, "out of memory");
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->work, NULL);
    pthread_cond_init(&r->ready, NULL);
    r->in = in;
    r->ncols = sl_input_column_count(in);
    r->batch_rows = batch_rows < 1 ? 1 : batch_rows;
    r->csv = sl_input_is_csv(in);
    /* A CSV from a pipe may wait for its writer forever; a file never does. */
    r->may_block = r->csv && sl_input_total_bytes(in) < 0;
    r->depth = depth < 2 ? 2 : depth;
    r->nthreads = r->csv || threads < 1 ? 1 : threads;
    r->slots = calloc((size_t)r->depth, sizeof *r->slots);
    r->threads = calloc((size_t)r->nthreads, sizeof *r->threads);
    bool ok = r->slots && r->threads;
    for (int k = 0; ok && k < r->depth; k++) {
        r->slots[k].bufs = calloc(r->ncols ? r->ncols : 1, sizeof *r->slots[k].bufs);
        r->slots[k].data = calloc(r->ncols ? r->ncols : 1, sizeof *r->slots[k].data);
        ok = r->slots[k].bufs && r->slots[k].data;
    }
    if (ok && mem && mem->alloc && !r->csv) {
        r->mem = *mem;
        ok = alloc_dma(r);
    }
    if (!ok) {
        free_reader(r);
        return sl_errf(err, errcap, "out of memory");
    }
    r->running = r->nthreads;
    for (int t = 0; t < r->nthreads; t++) {
        int rc = start_thread(&r->threads[t], reader_main, r);
        if (rc != 0) {
            sl_errf(err, errcap, "cannot start a reader thread: %s", strerror(rc));
            pthread_mutex_lock(&r->lock);
            r->running -= r->nthreads - t;
            pthread_mutex_unlock(&r->lock);
            r->nthreads = t;
            r->may_block = false; /* wait for the ones started: they are in no read yet */
            sl_reader_stop(r);
            return -1;
        }
    }
    *out = r;
    return 0;
}

int sl_reader_next(sl_reader *r, sluice_column *cols, int64_t *rows, int64_t *bytes_read,
                   char *err, size_t errcap) {
    pthread_mutex_lock(&r->lock);
    if (r->holding) {
        r->released++;
        r->holding = false;
        pthread_cond_broadcast(&r->work);
    }
    while (r->taken == r->published && !r->eof && !r->interrupted)
        pthread_cond_wait(&r->ready, &r->lock);
    if (r->interrupted) {
        pthread_mutex_unlock(&r->lock);
        return -2;
    }
    if (r->taken == r->published) {
        pthread_mutex_unlock(&r->lock);
        return 0;
    }
    const read_slot *s = &r->slots[r->taken % (uint64_t)r->depth];
    r->taken++;
    r->holding = true;
    pthread_mutex_unlock(&r->lock);
    if (s->failed) return sl_errf(err, errcap, "%s", s->err);
    for (size_t i = 0; i < r->ncols; i++) {
        const sluice_column_info *info = sl_input_column(r->in, i);
        int64_t n = info->role == SLUICE_ROLE_OFFSETS ? s->w.segs + 1 : s->rows;
        cols[i] = (sluice_column){info->name, info->type, s->data[i], n};
    }
    *rows = s->rows;
    *bytes_read = s->bytes_read;
    return 1;
}

void sl_reader_interrupt(sl_reader *r) {
    pthread_mutex_lock(&r->lock);
    r->interrupted = true;
    pthread_cond_broadcast(&r->ready);
    pthread_mutex_unlock(&r->lock);
}

bool sl_reader_stop(sl_reader *r) {
    if (!r) return true;
    atomic_store(&r->stop, 1);
    pthread_mutex_lock(&r->lock);
    pthread_cond_broadcast(&r->work);
    struct timespec until = sl_deadline_in(500);
    while (r->running > 0) {
        if (!r->may_block) {
            pthread_cond_wait(&r->ready, &r->lock);
        } else if (pthread_cond_timedwait(&r->ready, &r->lock, &until) == ETIMEDOUT &&
                   r->running > 0) {
            pthread_mutex_unlock(&r->lock);
            abandoned_reader = r;
            return false;
        }
    }
    pthread_mutex_unlock(&r->lock);
    for (int t = 0; t < r->nthreads; t++) pthread_join(r->threads[t], NULL);
    free_reader(r);
    return true;
}

/* ---- writing behind ----------------------------------------------------------------------- */

/* A batch's columns are written in chunks of at most this many bytes, each by whichever
 * writer thread takes it, at the place sl_output_place gave it in its file. */
#define WRITE_CHUNK_BYTES ((size_t)4 << 20)

typedef struct write_entry {
    sluice_batch *batch;
    sluice_column *cols; /* one per output column */
    uint64_t *pos;       /* one per output column: where it goes in its file */
    size_t chunks_left;  /* chunks not yet written */
} write_entry;

struct sl_writer {
    sl_output *out;
    size_t ncols;
    int depth;
    write_entry *ring;
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* the writers wait here for a chunk */
    pthread_cond_t space; /* the caller waits here for room, or for the queue to empty */
    atomic_int_least64_t rows;
    /* Under lock: */
    void (*on_fail)(void *arg);
    void *on_fail_arg;
    uint64_t freed, written, queued;
    /* The next chunk to hand out: batch next_batch (in [written, queued]), column next_col,
     * from byte next_at. */
    uint64_t next_batch;
    size_t next_col, next_at;
    bool closing, aborting, failed;
    char err[1024];
};

/* Batches whose every chunk is written, in stream order, count as written. Lock held. */
static void advance_written(sl_writer *w) {
    bool moved = false;
    while (w->written < w->queued && w->ring[w->written % (uint64_t)w->depth].chunks_left == 0) {
        const write_entry *e = &w->ring[w->written % (uint64_t)w->depth];
        atomic_fetch_add(&w->rows, w->ncols ? e->cols[0].length : 0);
        w->written++;
        moved = true;
    }
    if (moved) pthread_cond_broadcast(&w->space);
}

/* Takes the next chunk to write, if any. Lock held. */
static bool take_chunk(sl_writer *w, write_entry **entry, size_t *col, size_t *at, size_t *len) {
    while (w->next_batch < w->queued) {
        write_entry *e = &w->ring[w->next_batch % (uint64_t)w->depth];
        while (w->next_col < w->ncols) {
            const sluice_column *c = &e->cols[w->next_col];
            size_t bytes = (size_t)c->length * sluice_type_size(c->type);
            if (w->next_at < bytes) {
                *entry = e;
                *col = w->next_col;
                *at = w->next_at;
                *len = bytes - w->next_at < WRITE_CHUNK_BYTES ? bytes - w->next_at
                                                              : WRITE_CHUNK_BYTES;
                w->next_at += *len;
                return true;
            }
            w->next_col++;
            w->next_at = 0;
        }
        w->next_batch++;
        w->next_col = 0;
        w->next_at = 0;
    }
    return false;
}

static void *writer_main(void *arg) {
    sl_writer *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        write_entry *e;
        size_t col, at, len;
        if (w->aborting || w->failed) break;
        if (!take_chunk(w, &e, &col, &at, &len)) {
            if (w->closing) break; /* nothing more will come; the others finish their own */
            pthread_cond_wait(&w->work, &w->lock);
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        char err[sizeof w->err];
        int rc = sl_output_write_at(w->out, col, e->pos[col] + at,
                                    (const char *)e->cols[col].data + at, len, err, sizeof err);
        pthread_mutex_lock(&w->lock);
        if (rc != 0) {
            if (!w->failed) {
                w->failed = true;
                memcpy(w->err, err, sizeof err);
                pthread_cond_broadcast(&w->space);
                pthread_cond_broadcast(&w->work);
                /* Under the lock, so that sl_writer_on_fail can retire the callback. */
                if (w->on_fail) w->on_fail(w->on_fail_arg);
            }
            break;
        }
        e->chunks_left--;
        advance_written(w);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Frees the batches written so far, on the caller's thread. Lock held; dropped meanwhile. */
static void release_written(sl_writer *w) {
    while (w->freed < w->written) {
        write_entry *e = &w->ring[w->freed % (uint64_t)w->depth];
        sluice_batch *b = e->batch;
        e->batch = NULL;
        w->freed++;
        pthread_mutex_unlock(&w->lock);
        sluice_batch_free(b);
        pthread_mutex_lock(&w->lock);
    }
}

static void free_writer(sl_writer *w) {
    for (int k = 0; w->ring && k < w->depth; k++) {
        sluice_batch_free(w->ring[k].batch);
        free(w->ring[k].cols);
        free(w->ring[k].pos);
    }
    free(w->ring);
    free(w->threads);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->space);
    free(w);
}

/* Ends the threads (after what they were told to do) and frees everything. Returns the
 * writer's error state. */
static bool end_writer(sl_writer *w, char *err, size_t errcap) {
    for (int t = 0; t < w->nthreads; t++) pthread_join(w->threads[t], NULL);
    bool failed = w->failed;
    if (failed) sl_errf(err, errcap, "%s", w->err);
    free_writer(w);
    return failed;
}

int sl_writer_start(sl_writer **out, sl_output *o, int depth, int threads,
                    void (*on_fail)(void *arg), void *arg, char *err, size_t errcap) {
    *out = NULL;
    sl_writer *w = calloc(1, sizeof *w);
    if (!w) return sl_errf(err, errcap, "out of memory");
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->space, NULL);
    w->out = o;
    w->on_fail = on_fail;
    w->on_fail_arg = arg;
    w->ncols = sl_output_column_count(o);
    w->depth = depth < 1 ? 1 : depth;
    w->ring = calloc((size_t)w->depth, sizeof *w->ring);
    w->threads = calloc(threads < 1 ? 1 : (size_t)threads, sizeof *w->threads);
    bool ok = w->ring && w->threads;
    for (int k = 0; ok && k < w->depth; k++) {
        w->ring[k].cols = calloc(w->ncols ? w->ncols : 1, sizeof *w->ring[k].cols);
        w->ring[k].pos = calloc(w->ncols ? w->ncols : 1, sizeof *w->ring[k].pos);
        ok = w->ring[k].cols && w->ring[k].pos;
    }
    if (!ok) {
        free_writer(w);
        return sl_errf(err, errcap, "out of memory");
    }
    for (int t = 0; t < (threads < 1 ? 1 : threads); t++) {
        int rc = start_thread(&w->threads[t], writer_main, w);
        if (rc != 0) {
            sl_errf(err, errcap, "cannot start a writer thread: %s", strerror(rc));
            pthread_mutex_lock(&w->lock);
            w->aborting = true;
            pthread_cond_broadcast(&w->work);
            pthread_mutex_unlock(&w->lock);
            end_writer(w, NULL, 0);
            return -1;
        }
        w->nthreads++;
    }
    *out = w;
    return 0;
}

int sl_writer_put(sl_writer *w, sluice_batch *b, const sluice_column *cols, char *err,
                  size_t errcap) {
    pthread_mutex_lock(&w->lock);
    for (;;) {
        release_written(w);
        if (w->failed) {
            sl_errf(err, errcap, "%s", w->err);
            pthread_mutex_unlock(&w->lock);
            return -1;
        }
        if (w->queued - w->freed < (uint64_t)w->depth) break;
        pthread_cond_wait(&w->space, &w->lock);
    }
    write_entry *e = &w->ring[w->queued % (uint64_t)w->depth];
    e->batch = b;
    e->chunks_left = 0;
    if (w->ncols) memcpy(e->cols, cols, w->ncols * sizeof *cols);
    for (size_t i = 0; i < w->ncols; i++) {
        size_t bytes = (size_t)cols[i].length * sluice_type_size(cols[i].type);
        e->chunks_left += (bytes + WRITE_CHUNK_BYTES - 1) / WRITE_CHUNK_BYTES;
    }
    /* Only this thread places batches, in stream order: the files' layout is fixed here. */
    sl_output_place(w->out, cols, e->pos);
    w->queued++;
    advance_written(w); /* a batch of empty columns has nothing to write */
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

void sl_writer_on_fail(sl_writer *w, void (*on_fail)(void *arg), void *arg) {
    pthread_mutex_lock(&w->lock);
    w->on_fail = on_fail;
    w->on_fail_arg = arg;
    pthread_mutex_unlock(&w->lock);
}

int sl_writer_check(sl_writer *w, char *err, size_t errcap) {
    pthread_mutex_lock(&w->lock);
    release_written(w);
    bool failed = w->failed;
    if (failed) sl_errf(err, errcap, "%s", w->err);
    pthread_mutex_unlock(&w->lock);
    return failed ? -1 : 0;
}

int64_t sl_writer_rows(const sl_writer *w) {
    return atomic_load(&w->rows);
}

int sl_writer_finish(sl_writer *w, void (*progress)(void *arg), void *arg, char *err,
                     size_t errcap) {
    pthread_mutex_lock(&w->lock);
    w->closing = true;
    pthread_cond_broadcast(&w->work);
    while (!w->failed && w->written < w->queued) {
        uint64_t before = w->written;
        pthread_cond_wait(&w->space, &w->lock);
        release_written(w);
        if (progress && w->written != before) {
            pthread_mutex_unlock(&w->lock);
            progress(arg);
            pthread_mutex_lock(&w->lock);
        }
    }
    pthread_mutex_unlock(&w->lock);
    return end_writer(w, err, errcap) ? -1 : 0;
}

void sl_writer_abort(sl_writer *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->aborting = true;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->lock);
    end_writer(w, NULL, 0);
}
