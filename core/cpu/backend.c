/* backend.c — the CPU backend's operations for the shared executor (core/runtime/exec.h): run a
 * fused group (core/cpu/fused.h) or a radix sort over a piece, in host memory, save and
 * restore the groups' carries, and make result batches. The executor does the rest (cutting,
 * walking the groups, stream-wide sort buffers, transactions).
 *
 * Each group reads the columns the previous one wrote (indexed by column id) and writes the
 * columns still needed after it: into the piece's result batch when it is the last group,
 * into its own scratch otherwise (grown when a piece is larger than max_batch_rows). A
 * result batch that is never handed out (its piece kept no rows, or its rows moved to a
 * smaller batch) is kept as the session's spare and written by the next piece, so a push
 * allocates only the batches it queues. */
#include <string.h>
#include <sys/mman.h>

#include "common/context.h"
#include "cpu/fused.h"
#include "cpu/sort.h"
#include "cpu/threads.h"
#include "runtime/exec.h"
#include "runtime/sortkey.h"

typedef struct cpu_group {
    sl_group_kind kind;
    /* FUSED */
    sl_cpu_fused *fused;
    sl_cpu_carry *carries, *saved;
    /* SORT */
    const sl_sort *sort;
    int nmove;
    const int *move;       /* columns it moves (needed after it): the plan's */
    /* output scratch when not the last group: per column id */
    void **scratch;
    int64_t scratch_cap;
    int nout;
    const int *out;
} cpu_group;

typedef struct cpu_impl {
    sl_cpu_pool *pool;
    int ngroups;
    cpu_group *groups;
    /* radix sort scratch: two image buffers (8 bytes a row), two permutations */
    void *img[2], *perm[2];
    int64_t sort_cap;
    int64_t *radix_counts;
    /* column table (per column id), made at open so a push allocates nothing but its result */
    void **dest;
    /* a result batch no piece handed out, with room for spare_room rows (<= max_batch_rows),
     * or NULL */
    sluice_batch *spare;
    int64_t spare_room;
} cpu_impl;

static sluice_status oom(sluice_context *ctx, const char *what, int64_t rows) {
    return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: %s for %lld rows", what,
                    (long long)rows);
}

/* Large column buffers ask for transparent huge pages before they are first touched: on
 * virtual machines a 4 KiB page fault costs tens of microseconds, which made first-touch of a
 * fresh 256 MiB result cost 20× the copy itself. Advice only; failure changes nothing. */
static void prefer_huge_pages(void *ptr, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (!ptr || bytes < 2 * huge) return;
    uintptr_t begin = ((uintptr_t)ptr + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)ptr + bytes) & ~(huge - 1);
    if (end > begin) (void)madvise((void *)begin, end - begin, MADV_HUGEPAGE);
#else
    (void)ptr;
    (void)bytes;
#endif
}

static void *alloc_big(sluice_context *ctx, size_t bytes) {
    void *b = sl_alloc_aligned(ctx, bytes ? bytes : 1);
    prefer_huge_pages(b, bytes);
    return b;
}

/* ---- open / close --------------------------------------------------------------------------- */

static void cpu_close(sluice_session *s);

static sluice_status grow_columns(sluice_context *ctx, const sluice_pipeline *p, void **cols,
                                  const int *ids, int n, int64_t keep_rows, int64_t *cap,
                                  int64_t want) {
    if (want <= *cap) return SLUICE_OK;
    int64_t new_cap = *cap * 2 > want ? *cap * 2 : want;
    for (int j = 0; j < n; j++) {
        int c = ids[j];
        size_t sz = sluice_type_size(p->columns[c].type), bytes;
        if (sl_mul_overflows((size_t)new_cap, sz, &bytes)) return oom(ctx, "column buffers", want);
        void *b = alloc_big(ctx, bytes);
        if (!b) return oom(ctx, "column buffers", want);
        if (cols[c] && keep_rows > 0) memcpy(b, cols[c], (size_t)keep_rows * sz);
        sl_free_aligned(ctx, cols[c]);
        cols[c] = b;
    }
    *cap = new_cap;
    return SLUICE_OK;
}

static sluice_status grow_sort_scratch(sluice_context *ctx, cpu_impl *im, int64_t rows) {
    if (rows <= im->sort_cap) return SLUICE_OK;
    size_t bytes;
    if (sl_mul_overflows((size_t)rows, 8, &bytes)) return oom(ctx, "sort scratch", rows);
    for (int i = 0; i < 2; i++) {
        sl_free_aligned(ctx, im->img[i]);
        sl_free_aligned(ctx, im->perm[i]);
        im->img[i] = alloc_big(ctx, bytes);
        im->perm[i] = alloc_big(ctx, bytes);
    }
    if (!im->img[0] || !im->img[1] || !im->perm[0] || !im->perm[1]) {
        for (int i = 0; i < 2; i++) {
            sl_free_aligned(ctx, im->img[i]);
            sl_free_aligned(ctx, im->perm[i]);
            im->img[i] = im->perm[i] = NULL;
        }
        im->sort_cap = 0;
        return oom(ctx, "sort scratch", rows);
    }
    im->sort_cap = rows;
    return SLUICE_OK;
}

static sluice_status cpu_open(sluice_session *s) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    cpu_impl *im = sl_calloc(ctx, 1, sizeof *im);
    if (!im) return oom(ctx, "CPU backend state", 0);
    s->impl = im;
    sluice_status st = sl_cpu_pool_create(ctx, ctx->cpu_threads, &im->pool);
    if (st == SLUICE_OK) {
        im->radix_counts = sl_calloc(ctx, sl_cpu_radix_counts(im->pool), sizeof(int64_t));
        if (!im->radix_counts) st = oom(ctx, "CPU backend state", 0);
    }
    if (st == SLUICE_OK) {
        im->dest = sl_calloc(ctx, (size_t)p->ncolumns + 1, sizeof(void *));
        if (!im->dest) st = oom(ctx, "CPU backend state", 0);
    }
    if (st == SLUICE_OK) {
        im->groups = sl_calloc(ctx, (size_t)s->plan.ngroups + 1, sizeof *im->groups);
        if (!im->groups) st = oom(ctx, "CPU backend state", 0);
    }
    int64_t max_rows = s->max_batch_rows;
    for (int gi = 0; st == SLUICE_OK && gi < s->plan.ngroups; gi++) {
        const sl_group *pg = &s->plan.groups[gi];
        cpu_group *g = &im->groups[gi];
        im->ngroups = gi + 1;
        g->kind = pg->kind;
        g->scratch = sl_calloc(ctx, (size_t)p->ncolumns + 1, sizeof(void *));
        if (!g->scratch) { st = oom(ctx, "CPU backend state", 0); break; }
        if (pg->kind == SL_GROUP_FUSED) {
            st = sl_cpu_fused_create(ctx, p, &s->plan, gi, sl_cpu_pool_size(im->pool), max_rows,
                                     &g->fused);
            if (st != SLUICE_OK) break;
            int n = sl_cpu_fused_nscans(g->fused);
            g->carries = sl_calloc(ctx, (size_t)n + 1, sizeof(sl_cpu_carry));
            g->saved = sl_calloc(ctx, (size_t)n + 1, sizeof(sl_cpu_carry));
            if (!g->carries || !g->saved) { st = oom(ctx, "CPU backend state", 0); break; }
            sl_cpu_fused_initial_carries(g->fused, g->carries);
            g->out = sl_cpu_fused_outputs(g->fused, &g->nout);
        } else {
            const sl_stage *stage = &p->stages[pg->first];
            g->sort = &stage->sort;
            g->nmove = pg->nout;
            g->move = pg->out;
            g->out = g->move;
            g->nout = g->nmove;
        }
    }
    /* Scratch sized for max_batch_rows now, so pushes up to that size never allocate. */
    for (int gi = 0; st == SLUICE_OK && gi + 1 < im->ngroups; gi++) {
        cpu_group *g = &im->groups[gi];
        st = grow_columns(ctx, p, g->scratch, g->out, g->nout, 0, &g->scratch_cap, max_rows);
    }
    for (int gi = 0; st == SLUICE_OK && gi < im->ngroups; gi++)
        if (im->groups[gi].kind == SL_GROUP_SORT && im->groups[gi].sort->per_batch)
            st = grow_sort_scratch(ctx, im, max_rows);
    if (st != SLUICE_OK) {
        cpu_close(s);
        return st;
    }
    return SLUICE_OK;
}

static void cpu_close(sluice_session *s) {
    cpu_impl *im = s->impl;
    if (!im) return;
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    for (int gi = 0; gi < im->ngroups; gi++) {
        cpu_group *g = &im->groups[gi];
        sl_cpu_fused_destroy(g->fused);
        sl_free(ctx, g->carries);
        sl_free(ctx, g->saved);
        if (g->scratch)
            for (int c = 0; c <= p->ncolumns; c++) sl_free_aligned(ctx, g->scratch[c]);
        sl_free(ctx, g->scratch);
    }
    sl_free(ctx, im->groups);
    for (int i = 0; i < 2; i++) {
        sl_free_aligned(ctx, im->img[i]);
        sl_free_aligned(ctx, im->perm[i]);
    }
    sl_cpu_pool_destroy(im->pool);
    sluice_batch_free(im->spare);
    sl_free(ctx, im->radix_counts);
    sl_free(ctx, im->dest);
    sl_free(ctx, im);
    s->impl = NULL;
}

/* ---- sort --------------------------------------------------------------------------------- */

typedef struct image_job {
    sluice_type type;
    const void *keys;
    const void *perm;
    bool perm_wide, descending, to_values;
    void *out;
} image_job;

static void image_slice(void *arg, int64_t b, int64_t e) {
    image_job *j = arg;
    size_t isz = sl_sortkey_is_wide(j->type) ? 8 : 4, ksz = sluice_type_size(j->type);
    if (j->to_values) {
        sl_sortkey_values(j->type, (const char *)j->keys + (size_t)b * isz, e - b, j->descending,
                          (char *)j->out + (size_t)b * ksz);
        return;
    }
    const void *keys = j->perm ? j->keys : (const char *)j->keys + (size_t)b * ksz;
    const void *perm = j->perm ? (const char *)j->perm + (size_t)b * (j->perm_wide ? 8 : 4) : NULL;
    sl_sortkey_images(j->type, keys, perm, j->perm_wide, e - b, j->descending,
                      (char *)j->out + (size_t)b * isz);
}

typedef struct gather_job {
    const void *from;
    void *to;
    size_t size;
    const void *perm;
    bool perm_wide;
    bool iota; /* write the identity permutation into `to` instead */
} gather_job;

#define GATHER_LOOP(VT, PT)                                                              \
    do {                                                                                 \
        const VT *f_ = j->from;                                                          \
        VT *t_ = j->to;                                                                  \
        const PT *p_ = j->perm;                                                          \
        for (int64_t i = b; i < e; i++) t_[i] = f_[p_[i]];                               \
    } while (0)

static void gather_slice(void *arg, int64_t b, int64_t e) {
    gather_job *j = arg;
    if (j->iota) {
        if (j->perm_wide) for (int64_t i = b; i < e; i++) ((uint64_t *)j->to)[i] = (uint64_t)i;
        else for (int64_t i = b; i < e; i++) ((uint32_t *)j->to)[i] = (uint32_t)i;
        return;
    }
    switch (j->size) {
    case 1: if (j->perm_wide) GATHER_LOOP(uint8_t, uint64_t); else GATHER_LOOP(uint8_t, uint32_t); break;
    case 2: if (j->perm_wide) GATHER_LOOP(uint16_t, uint64_t); else GATHER_LOOP(uint16_t, uint32_t); break;
    case 4: if (j->perm_wide) GATHER_LOOP(uint32_t, uint64_t); else GATHER_LOOP(uint32_t, uint32_t); break;
    default: if (j->perm_wide) GATHER_LOOP(uint64_t, uint64_t); else GATHER_LOOP(uint64_t, uint32_t); break;
    }
}

#define SLICE_ROWS 65536

/* Sorts n rows of src by the sort's keys and writes the moved columns to dest. */
static sluice_status run_sort(sluice_session *s, cpu_impl *im, const cpu_group *g,
                              const void *const *src, int64_t n, void *const *dest) {
    const sluice_pipeline *p = s->pipeline;
    const sl_sort *so = g->sort;
    if (n == 0) return SLUICE_OK;
    SL_TRY(grow_sort_scratch(s->ctx, im, n));
    bool perm_wide = n > (int64_t)UINT32_MAX;
    int key0 = so->keys[0];
    sluice_type t0 = p->columns[key0].type;
    /* Only the key moves: sort the images themselves and turn them back into keys. */
    if (so->nkeys == 1 && (g->nmove == 0 || (g->nmove == 1 && g->move[0] == key0))) {
        image_job ij = {t0, src[key0], NULL, false, so->key_descending[0], false, im->img[0]};
        sl_cpu_parallel_slices(im->pool, n, SLICE_ROWS, image_slice, &ij);
        bool in_tmp = sl_cpu_radix_sort(im->pool, im->radix_counts, im->img[0], im->img[1],
                                        sl_sortkey_is_wide(t0), NULL, NULL, false, n, so->bits_lo,
                                        so->bits_hi);
        if (g->nmove == 1) {
            image_job vj = {t0, in_tmp ? im->img[1] : im->img[0], NULL, false, so->key_descending[0], true,
                            dest[key0]};
            sl_cpu_parallel_slices(im->pool, n, SLICE_ROWS, image_slice, &vj);
        }
        return SLUICE_OK;
    }
    /* Otherwise sort a permutation, least significant key first (LSD over keys too). */
    void *perm = im->perm[0], *perm_tmp = im->perm[1];
    bool have_perm = false;
    for (int k = so->nkeys - 1; k >= 0; k--) {
        int key = so->keys[k];
        sluice_type t = p->columns[key].type;
        image_job ij = {t, src[key], have_perm ? perm : NULL, perm_wide, so->key_descending[k], false,
                        im->img[0]};
        sl_cpu_parallel_slices(im->pool, n, SLICE_ROWS, image_slice, &ij);
        if (!have_perm) {
            gather_job gj = {NULL, perm, 0, NULL, perm_wide, true};
            sl_cpu_parallel_slices(im->pool, n, SLICE_ROWS, gather_slice, &gj);
            have_perm = true;
        }
        int lo = 0, hi = sl_sortkey_bits(t);
        if (so->nkeys == 1) {
            lo = so->bits_lo;
            hi = so->bits_hi;
        }
        bool in_tmp = sl_cpu_radix_sort(im->pool, im->radix_counts, im->img[0], im->img[1],
                                        sl_sortkey_is_wide(t), perm, perm_tmp, perm_wide, n, lo, hi);
        if (in_tmp) {
            void *x = perm;
            perm = perm_tmp;
            perm_tmp = x;
        }
    }
    for (int j = 0; j < g->nmove; j++) {
        int c = g->move[j];
        gather_job gj = {src[c], dest[c], sluice_type_size(p->columns[c].type), perm, perm_wide,
                         false};
        sl_cpu_parallel_slices(im->pool, n, SLICE_ROWS, gather_slice, &gj);
    }
    return SLUICE_OK;
}

/* ---- running the groups ------------------------------------------------------------------- */

/* Where group gi writes, with room for `rows` rows: the piece's result batch (allocated
 * here) when it is the last group, its scratch otherwise. */
static sluice_status destination(sluice_session *s, cpu_impl *im, int gi, sl_piece *piece,
                                 int64_t rows, void **dest) {
    const sluice_pipeline *p = s->pipeline;
    cpu_group *g = &im->groups[gi];
    memset(dest, 0, sizeof(void *) * ((size_t)p->ncolumns + 1));
    if (gi == im->ngroups - 1) {
        sluice_batch *b = NULL;
        if (im->spare && im->spare_room >= rows) {
            b = im->spare;
            rows = im->spare_room;
            im->spare = NULL;
        } else {
            b = sl_batch_new_host(s->ctx, p, rows);
            if (!b) return oom(s->ctx, "result batch", rows);
            for (int i = 0; i < p->noutputs; i++)
                prefer_huge_pages(b->owned[i], (size_t)rows * sluice_type_size(b->columns[i].type));
        }
        for (int i = p->noutputs - 1; i >= 0; i--) dest[p->outputs[i]] = b->owned[i];
        piece->result = b;
        piece->room = rows;
        return SLUICE_OK;
    }
    SL_TRY(grow_columns(s->ctx, p, g->scratch, g->out, g->nout, 0, &g->scratch_cap, rows));
    for (int j = 0; j < g->nout; j++) dest[g->out[j]] = g->scratch[g->out[j]];
    return SLUICE_OK;
}

static sluice_status cpu_run_group(sluice_session *s, sl_piece *piece) {
    cpu_impl *im = s->impl;
    const sluice_pipeline *p = s->pipeline;
    int gi = piece->group;
    cpu_group *g = &im->groups[gi];
    void **dest = im->dest;
    /* a group ending in a reduce gives a row per segment, which may be more than rows in
       (empty segments of an offsets input) */
    int64_t room = sl_plan_rows_out(p, &s->plan, gi, piece->rows, piece->nsegments, false);
    SL_TRY(destination(s, im, gi, piece, room, dest));
    int64_t rows_out = piece->rows;
    sluice_status st;
    if (g->kind == SL_GROUP_FUSED)
        st = sl_cpu_fused_run(g->fused, im->pool, s->params, piece->cols, piece->rows,
                              piece->offsets, piece->nsegments, g->carries, dest, &rows_out);
    else
        st = run_sort(s, im, g, piece->cols, piece->rows, dest);
    if (st != SLUICE_OK) return st; /* the executor frees piece->result */
    for (int c = 0; c <= p->ncolumns; c++) piece->cols[c] = dest[c];
    piece->rows = rows_out;
    return SLUICE_OK;
}

/* At flush: a group ending in a reduce writes its open segment, the piece's rows. */
static sluice_status cpu_flush_group(sluice_session *s, sl_piece *piece) {
    cpu_impl *im = s->impl;
    const sluice_pipeline *p = s->pipeline;
    int gi = piece->group;
    cpu_group *g = &im->groups[gi];
    void **dest = im->dest;
    int64_t room = sl_plan_rows_out(p, &s->plan, gi, 0, -1, true);
    SL_TRY(destination(s, im, gi, piece, room, dest));
    int64_t rows = 0;
    if (g->fused) sl_cpu_fused_flush(g->fused, g->carries, dest, &rows);
    for (int c = 0; c <= p->ncolumns; c++) piece->cols[c] = dest[c];
    piece->rows = rows;
    return SLUICE_OK;
}

/* Result batch fix-ups: its row count, and output columns listed twice. */
static void finish_batch(const sluice_pipeline *p, sluice_batch *b, int64_t rows) {
    b->rows = rows;
    for (size_t i = 0; i < b->ncolumns; i++) {
        b->columns[i].length = rows;
        for (size_t j = 0; j < i; j++) {
            if (p->outputs[j] == p->outputs[i]) {
                memcpy(b->owned[i], b->owned[j], (size_t)rows * sluice_type_size(b->columns[i].type));
                break;
            }
        }
    }
}

/* Keeps result batch b, with room for `room` rows and never handed out, as the spare, or
 * frees it: the larger of it and the spare stays, and none past max_batch_rows (a batch
 * that could not be cut), so what a session holds stays sized for max_batch_rows. */
static void keep_spare(sluice_session *s, sluice_batch *b, int64_t room) {
    cpu_impl *im = s->impl;
    if (!b) return;
    if (room > s->max_batch_rows || (im->spare && im->spare_room >= room)) {
        sluice_batch_free(b);
        return;
    }
    sluice_batch_free(im->spare);
    im->spare = b;
    im->spare_room = room;
}

static void cpu_recycle(sluice_session *s, sl_piece *piece) {
    keep_spare(s, piece->result, piece->room);
    piece->result = NULL;
}

/* A result far smaller than the room it was given (a selective filter: the room is the rows
 * that entered the group) moves into a buffer of its own size, so a caller holding many
 * results does not hold mostly empty memory. If that allocation fails the roomy one stays.
 * Only below a quarter of the room: the move is a whole extra pass over the result plus a
 * fresh buffer (page faults), which at half kept cost the filter ~15% of its time; at most
 * three quarters of a result's room stay empty. */
static void shrink_batch(sluice_session *s, sluice_batch **bp, int64_t capacity) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    sluice_batch *b = *bp;
    size_t row_bytes = 0;
    for (size_t i = 0; i < b->ncolumns; i++) row_bytes += sluice_type_size(b->columns[i].type);
    if (b->rows * 4 > capacity || (size_t)capacity * row_bytes < ((size_t)1 << 20)) return;
    sluice_batch *small = sl_batch_new_host(ctx, p, b->rows);
    if (!small) return;
    for (size_t i = 0; i < b->ncolumns; i++) {
        size_t bytes = (size_t)b->rows * sluice_type_size(b->columns[i].type);
        if (bytes) memcpy(small->owned[i], b->owned[i], bytes);
    }
    keep_spare(s, b, capacity);
    *bp = small;
}

static sluice_status cpu_finish(sluice_session *s, sl_piece *piece, sluice_batch **out) {
    const sluice_pipeline *p = s->pipeline;
    sluice_batch *b = piece->result;
    if (!b) {
        /* No group wrote a result (a pipeline without stages): copy the columns. */
        b = sl_batch_new_host(s->ctx, p, piece->rows);
        if (!b) return oom(s->ctx, "result batch", piece->rows);
        for (int i = 0; i < p->noutputs; i++) {
            int c = p->outputs[i];
            if (piece->rows)
                memcpy(b->owned[i], piece->cols[c], (size_t)piece->rows * sluice_type_size(p->columns[c].type));
        }
        piece->room = piece->rows;
    }
    finish_batch(p, b, piece->rows);
    shrink_batch(s, &b, piece->room);
    *out = b;
    return SLUICE_OK;
}

/* ---- input, memory, transactions ------------------------------------------------------------ */

static sluice_status cpu_load(sluice_session *s, const sl_input *in, int64_t first, sl_piece *piece) {
    cpu_impl *im = s->impl;
    const sluice_pipeline *p = s->pipeline;
    if (in->on_device)
        return sl_error(s->ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "the CPU backend takes host memory only; this batch is on the device");
    for (int c = 0; c < p->ninputs; c++)
        if (p->columns[c].role != SLUICE_ROLE_OFFSETS)
            piece->cols[c] = (const char *)in->data[c] + (size_t)first * sluice_type_size(p->columns[c].type);
    /* Each piece of a pushed batch starts one: `reset: batch` scans and offsets segments
     * restart (the executor cuts only where that changes nothing). */
    for (int gi = 0; gi < im->ngroups; gi++)
        if (im->groups[gi].fused) sl_cpu_fused_begin_batch(im->groups[gi].fused, im->groups[gi].carries);
    return SLUICE_OK;
}

static sluice_status cpu_alloc(sluice_session *s, size_t bytes, void **out) {
    *out = alloc_big(s->ctx, bytes);
    return *out ? SLUICE_OK : oom(s->ctx, "rows held for a stream-wide sort", 0);
}

static void cpu_free(sluice_session *s, void *ptr) { sl_free_aligned(s->ctx, ptr); }

static sluice_status cpu_copy(sluice_session *s, void *dst, const void *src, size_t bytes) {
    (void)s;
    if (bytes) memcpy(dst, src, bytes);
    return SLUICE_OK;
}

static void cpu_begin(sluice_session *s) {
    cpu_impl *im = s->impl;
    for (int gi = 0; gi < im->ngroups; gi++) {
        cpu_group *g = &im->groups[gi];
        if (g->fused)
            memcpy(g->saved, g->carries, sizeof(sl_cpu_carry) * (size_t)sl_cpu_fused_nscans(g->fused));
    }
}

static sluice_status cpu_settle(sluice_session *s) {
    (void)s; /* everything ran on the calling thread's pool already */
    return SLUICE_OK;
}

static void cpu_commit(sluice_session *s) { (void)s; }

static void cpu_rollback(sluice_session *s) {
    cpu_impl *im = s->impl;
    for (int gi = 0; gi < im->ngroups; gi++) {
        cpu_group *g = &im->groups[gi];
        if (g->fused)
            memcpy(g->carries, g->saved, sizeof(sl_cpu_carry) * (size_t)sl_cpu_fused_nscans(g->fused));
    }
}

static sluice_status cpu_reset(sluice_session *s) {
    cpu_impl *im = s->impl;
    for (int gi = 0; gi < im->ngroups; gi++) {
        cpu_group *g = &im->groups[gi];
        if (g->fused) sl_cpu_fused_initial_carries(g->fused, g->carries);
    }
    return SLUICE_OK;
}

/* The distributed session's view of the carries (core/runtime/carry.h). */
static sluice_status cpu_carry_get(sluice_session *s, int gi, sl_scan_carry *out) {
    const cpu_group *g = &((cpu_impl *)s->impl)->groups[gi];
    int n = g->fused ? sl_cpu_fused_nscans(g->fused) : 0;
    for (int k = 0; k < n; k++) {
        const sl_cpu_carry *c = &g->carries[k];
        memcpy(out[k].v, c->v, sizeof c->v);
        out[k].last_key = c->last_key;
        out[k].has_key = c->has_key;
        out[k].has_first = c->has_first;
        out[k].first_key = c->first_key;
        out[k].headed = c->headed;
        out[k].segments = c->segments;
        out[k].open = c->open;
        out[k].continues = c->continues;
    }
    return SLUICE_OK;
}

static sluice_status cpu_carry_set(sluice_session *s, int gi, const sl_scan_carry *in) {
    cpu_group *g = &((cpu_impl *)s->impl)->groups[gi];
    int n = g->fused ? sl_cpu_fused_nscans(g->fused) : 0;
    for (int k = 0; k < n; k++) {
        sl_cpu_carry *c = &g->carries[k];
        memcpy(c->v, in[k].v, sizeof c->v);
        c->last_key = in[k].last_key;
        c->has_key = in[k].has_key;
        c->has_first = in[k].has_first;
        c->first_key = in[k].first_key;
        c->headed = in[k].headed;
        c->segments = in[k].segments;
        c->open = in[k].open;
        c->continues = in[k].continues;
    }
    return SLUICE_OK;
}

static bool cpu_available(void) { return true; }

const sl_backend_ops sl_cpu_backend = {
    .id = SLUICE_BACKEND_CPU,
    .name = "cpu",
    .available = cpu_available,
    .caps = {.max_phases = 0, .one_offsets_per_group = false, .reduce = true},
    .max_sort_rows = 0,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .to_host = NULL, /* its memory is host memory */
    .from_host = NULL,
    .check_input = NULL,
    .reserve = NULL, /* scratch grows on demand (destination, run_sort, the fused group) */
    .load = cpu_load,
    .run_group = cpu_run_group,
    .flush_group = cpu_flush_group,
    .finish = cpu_finish,
    .recycle = cpu_recycle,
    .begin = cpu_begin,
    .settle = cpu_settle,
    .commit = cpu_commit,
    .rollback = cpu_rollback,
    .reset = cpu_reset,
    .carry_get = cpu_carry_get,
    .carry_set = cpu_carry_set,
};
