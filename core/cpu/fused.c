/* fused.c — a fused group on the CPU (see fused.h).
 *
 * A tile of rows goes through the group's stages in order, column at a time: a map evaluates
 * its expressions into tile buffers, a compaction packs the kept rows of every column still
 * needed, a scan runs its monoid over the rows that reach it. Tiles are
 * taken in order from an atomic counter by the workers; tile t needs the carry of tile t-1
 * (the scans' states, the open segment, the output row count) and publishes its own.
 *
 * The hand-off is "chained" with early publication: a tile runs its scans from the identity
 * (local prefixes), then waits for its predecessor's carry, combines it with its local
 * aggregates, publishes the result at once, and only then fixes up its prefixes
 * (carry ⊕ local) and writes its rows at their offset. The serial chain is one combine per
 * tile; reading, computing and writing run on all workers. A stage that reads a value which
 * depends on the carry (a map of a scan's output, a compaction by such a flag, a scan of a
 * scan) makes the tile wait for the carry before that stage and run from then on with true
 * states; it then publishes after its last stage. Tiles, not threads, fix the order of
 * combination, so results are bitwise the same for any number of threads. */
#include "cpu/fused.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SL_HAVE_AVX512_COMPACT 1
#endif

#include "common/context.h"
#include "cpu/scan.h"
#include "stages/kind.h"

#define T SL_CPU_TILE_ROWS

typedef struct fstage {
    const sl_stage *st;
    bool needs_carry;
    /* map: the defined columns that are needed, with their programs */
    int nmap;
    int *map_cols;
    sl_expr_program **map_progs;
    /* compact: columns gathered (ids; the segment-id pseudo column included when needed) */
    int ngather;
    int *gather;
    /* scan, or one value of a reduce (reduce_value: its prefixes stay in the worker's ybuf,
       and a reduce without segments writes none; the rows the reduce gives are written once
       the tile's carry is known) */
    const sl_scan *sc;
    bool reduce_value;
    int slot;
    sl_expr_program *of_prog[SL_MAX_FIELDS];
    int of_col[SL_MAX_FIELDS]; /* >= 0: `of` is that column as is, no evaluation */
    int key_col;               /* HEADFLAG/KEY: the column; OFFSETS: the pseudo column */
    bool key_is_bool;          /* KEY of a bool column: keys are compared as 0 or 1 */
    sl_cpu_combine combine;    /* declared operators: the combine, vectorised */
} fstage;

/* Per tile, per scan: what the local pass learnt, for the carry and the fix-up. */
typedef struct scan_tile {
    bool ran, with_carry, pending; /* pending: local prefixes still need carry ⊕ */
    int64_t nrows;                 /* rows that reached the scan */
    int64_t fix_n;                 /* leading rows (in current numbering) before the first head */
    bool head0;                    /* the first row starts a segment (known at finalize) */
    bool has_head;                 /* a segment starts at some row after the first */
    uint64_t first_key, last_key;
    sl_value tail[SL_MAX_FIELDS];
    void *y[SL_MAX_FIELDS];        /* where each field's prefixes are now */
} scan_tile;

typedef struct worker {
    void *block;
    void **buf;       /* per column id: tile buffer or NULL */
    void **xbuf;      /* [slot * SL_MAX_FIELDS + f]: evaluated `of` values */
    void **ybuf;      /* [slot * SL_MAX_FIELDS + f]: prefixes of fields not kept as columns */
    uint8_t *head;
    int32_t *pos;     /* a reduce: the tile's rows whose states its rows take */
    void *expr_scratch;
    scan_tile *tiles; /* nscans */
    const void **view;
    sl_cpu_combine_scratch *combine; /* per scan slot (declared operators only) */
} worker;

typedef struct tile_status {
    int64_t ready;    /* == the run's generation once published */
    int64_t out_rows; /* rows output by this tile and all before it in the batch */
    sl_cpu_carry carries[];
} tile_status;

struct sl_cpu_fused {
    sluice_context *ctx;
    const sluice_pipeline *p;
    int first, nstages;  /* the plan's stages */
    int nsteps;          /* steps of the tile loop: one per stage, one per value of a reduce */
    fstage *stages;      /* nsteps */
    int nscans;
    const sl_scan **scans;
    const sl_cpu_combine **combines; /* per scan slot */
    int nout, *out;
    int nstart, *start;  /* columns live at the group's start */
    int ncols;           /* p->ncolumns + 1: the last id is the segment-id pseudo column */
    int seg_id;
    bool has_seg;
    const sl_reduce *reduce; /* a reduce ending the group, or NULL */
    int reduce_slot;         /* its first value's scan slot (its values are slots from here) */
    bool reduce_key_bool;    /* a bool key: compared and written as 0 or 1 */
    size_t *col_size;
    int nworkers;
    worker *workers;
    size_t expr_scratch;
    size_t status_stride;
    int64_t status_cap;
    unsigned char *status;
    tile_status *start_status;
    int64_t generation;
};

static tile_status *status_at(const sl_cpu_fused *g, int64_t t) {
    if (t < 0) return g->start_status;
    return (tile_status *)(g->status + (size_t)t * g->status_stride);
}

/* ---- building ---------------------------------------------------------------------------- */

static sluice_status oom(sluice_context *ctx) {
    return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory preparing the CPU backend");
}

static sluice_status grow_status(sl_cpu_fused *g, int64_t ntiles) {
    if (ntiles <= g->status_cap) return SLUICE_OK;
    size_t bytes;
    if (sl_mul_overflows((size_t)ntiles, g->status_stride, &bytes)) return oom(g->ctx);
    unsigned char *s = sl_alloc_aligned(g->ctx, bytes);
    if (!s) return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY,
                            "out of memory: tile bookkeeping for a batch of %lld tiles",
                            (long long)ntiles);
    memset(s, 0, bytes);
    sl_free_aligned(g->ctx, g->status);
    g->status = s;
    g->status_cap = ntiles;
    return SLUICE_OK;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* A scan step: a scan stage, or one value of a reduce (reduce_value), whose prefixes are no
 * column of the tile (the reduce writes the rows it gives itself). */
static sluice_status setup_scan(sl_cpu_fused *g, fstage *fs, const sl_scan *sc, bool reduce_value,
                                bool *materialized, size_t *max_expr) {
    sluice_context *ctx = g->ctx;
    fs->sc = sc;
    fs->reduce_value = reduce_value;
    fs->slot = g->nscans;
    g->combines[g->nscans] = &fs->combine;
    g->scans[g->nscans++] = sc;
    SL_TRY(sl_cpu_combine_compile(ctx, sc, T, &fs->combine));
    for (int f = 0; f < sc->nfields; f++) {
        const sl_expr *e = sc->of[f];
        fs->of_col[f] = -1;
        if (!e) continue;
        /* A bool column is evaluated, not read as it is: it reads as 0 or 1. */
        if (e->kind == SL_EXPR_COLUMN && e->type == sc->acc[f] && e->type != SLUICE_BOOL) {
            fs->of_col[f] = e->index;
            continue;
        }
        SL_TRY(sl_expr_compile(ctx, e, T, &fs->of_prog[f]));
        size_t sz = sl_expr_program_scratch_size(fs->of_prog[f]);
        if (sz > *max_expr) *max_expr = sz;
    }
    fs->key_col = -1;
    if (sc->segments == SL_SEGMENTS_HEADFLAG || sc->segments == SL_SEGMENTS_KEY) {
        fs->key_col = sc->segment_column;
        fs->key_is_bool = sc->segments == SL_SEGMENTS_KEY &&
                          g->p->columns[fs->key_col].type == SLUICE_BOOL;
    } else if (sc->segments == SL_SEGMENTS_OFFSETS) {
        fs->key_col = g->seg_id;
    }
    for (int f = 0; f < sc->nfields && !reduce_value; f++)
        if (sc->into[f] >= 0) materialized[sc->into[f]] = true;
    return SLUICE_OK;
}

/* A reduce (always the group's last stage, plan.h): one scan step per value, from fs on. */
static sluice_status setup_reduce(sl_cpu_fused *g, fstage *fs, const sl_stage *s, int *step,
                                  bool *materialized, size_t *max_expr) {
    const sl_reduce *r = &s->reduce;
    g->reduce = r;
    g->reduce_slot = g->nscans;
    g->reduce_key_bool = r->segments == SL_SEGMENTS_KEY &&
                         g->p->columns[r->segment_column].type == SLUICE_BOOL;
    for (int v = 0; v < r->nvalues; v++) {
        fstage *vs = v == 0 ? fs : &g->stages[(*step)++];
        vs->st = s;
        vs->needs_carry = fs->needs_carry;
        SL_TRY(setup_scan(g, vs, &r->values[v], true, materialized, max_expr));
    }
    return SLUICE_OK;
}

sluice_status sl_cpu_fused_create(sluice_context *ctx, const sluice_pipeline *p,
                                  const sl_plan *plan, int group, int nworkers, int64_t max_rows,
                                  sl_cpu_fused **out) {
    *out = NULL;
    int first = plan->groups[group].first, last = plan->groups[group].last;
    bool *const *need_after = plan->need_after;
    sl_cpu_fused *g = sl_calloc(ctx, 1, sizeof *g);
    if (!g) return oom(ctx);
    g->ctx = ctx;
    g->p = p;
    g->first = first;
    g->nstages = last - first;
    g->ncols = p->ncolumns + 1;
    g->seg_id = p->ncolumns;
    g->nworkers = nworkers < 1 ? 1 : nworkers;
    sluice_status st = SLUICE_OK;
    bool *materialized = sl_calloc(ctx, (size_t)g->ncols, sizeof(bool));
    for (int i = 0; i < g->nstages; i++) {
        const sl_stage *s = &p->stages[first + i];
        g->nsteps += s->kind == SL_STAGE_REDUCE ? s->reduce.nvalues : 1;
    }
    g->stages = sl_calloc(ctx, (size_t)g->nsteps + 1, sizeof *g->stages);
    g->scans = sl_calloc(ctx, (size_t)g->nsteps + 1, sizeof *g->scans);
    g->combines = sl_calloc(ctx, (size_t)g->nsteps + 1, sizeof *g->combines);
    g->col_size = sl_calloc(ctx, (size_t)g->ncols, sizeof *g->col_size);
    g->out = sl_calloc(ctx, (size_t)g->ncols, sizeof *g->out);
    g->start = sl_calloc(ctx, (size_t)g->ncols, sizeof *g->start);
    if (!materialized || !g->stages || !g->scans || !g->combines ||
        !g->col_size || !g->out || !g->start) {
        st = oom(ctx);
        goto done;
    }
    for (int c = 0; c < p->ncolumns; c++) g->col_size[c] = sluice_type_size(p->columns[c].type);
    g->col_size[g->seg_id] = sizeof(int64_t);

    /* Live columns at the start. */
    for (int c = 0; c < p->ncolumns; c++) {
        bool live = first == 0 ? (c < p->ninputs && p->columns[c].role == SLUICE_ROLE_DATA)
                               : p->stages[first - 1].live_after[c];
        if (live) g->start[g->nstart++] = c;
    }
    for (int i = 0; i < g->nstages; i++) {
        const sl_stage *s = &p->stages[first + i];
        if (sl_stage_kind_desc_of(s)->offsets_column(s) >= 0) {
            if (first != 0) {
                st = sl_diag(ctx, SLUICE_ERR_TYPE, s->loc,
                             "a segmented_scan with segments from an offsets input must come "
                             "before any sort (after a sort, rows no longer follow the "
                             "offsets); use a head-flag or {key: COLUMN} segments instead");
                goto done;
            }
            g->has_seg = true;
        }
    }

    size_t max_expr = 0;
    int step = 0;
    for (int i = 0; i < g->nstages; i++) {
        fstage *fs = &g->stages[step++];
        const sl_stage *s = &p->stages[first + i];
        const bool *need = need_after[first + i];
        fs->st = s;
        /* The plan's carry analysis: the stage reads a value that depends on the carry (a
           scan's output, or something computed from one), so the tile waits for it. */
        fs->needs_carry = plan->reads_level[first + i] > 0;
        if (s->kind == SL_STAGE_MAP) {
            fs->map_cols = sl_calloc(ctx, (size_t)s->map.count + 1, sizeof(int));
            fs->map_progs = sl_calloc(ctx, (size_t)s->map.count + 1, sizeof(sl_expr_program *));
            if (!fs->map_cols || !fs->map_progs) { st = oom(ctx); goto done; }
            /* The plan's liveness: an entry is computed when it is needed after the stage or
               read by a computed later entry of the same map (`b: a * 2` with only b kept
               needs a too). */
            for (int k = 0; k < s->map.count; k++) {
                int c = s->map.columns[k];
                if (!plan->map_entry_live[first + i][k]) continue;
                st = sl_expr_compile(ctx, s->map.exprs[k], T, &fs->map_progs[fs->nmap]);
                if (st != SLUICE_OK) goto done;
                size_t sz = sl_expr_program_scratch_size(fs->map_progs[fs->nmap]);
                if (sz > max_expr) max_expr = sz;
                fs->map_cols[fs->nmap++] = c;
                materialized[c] = true;
            }
        } else if (s->kind == SL_STAGE_COMPACT) {
            fs->gather = sl_calloc(ctx, (size_t)g->ncols, sizeof(int));
            if (!fs->gather) { st = oom(ctx); goto done; }
            for (int c = 0; c < p->ncolumns; c++) {
                if (s->live_after[c] && need[c]) {
                    fs->gather[fs->ngather++] = c;
                    materialized[c] = true;
                }
            }
            bool seg_later = false;
            for (int j = i + 1; j < g->nstages; j++) {
                const sl_stage *l = &p->stages[first + j];
                if (sl_stage_kind_desc_of(l)->offsets_column(l) >= 0) seg_later = true;
            }
            if (seg_later) {
                fs->gather[fs->ngather++] = g->seg_id;
                materialized[g->seg_id] = true;
            }
        } else if (s->kind == SL_STAGE_SCAN) {
            st = setup_scan(g, fs, &s->scan, false, materialized, &max_expr);
            if (st != SLUICE_OK) goto done;
        } else if (s->kind == SL_STAGE_REDUCE) {
            st = setup_reduce(g, fs, s, &step, materialized, &max_expr);
            if (st != SLUICE_OK) goto done;
        } else {
            st = sl_diag(ctx, SLUICE_ERR_TYPE, s->loc, "internal: a sort inside a fused group");
            goto done;
        }
    }
    if (g->has_seg) materialized[g->seg_id] = true;
    {
        const bool *need = need_after[first + g->nstages - 1];
        const bool *live = p->stages[first + g->nstages - 1].live_after;
        for (int c = 0; c < p->ncolumns; c++)
            if (need[c] && live[c]) g->out[g->nout++] = c;
    }
    g->expr_scratch = max_expr;

    /* Worker scratch: one block each. */
    g->workers = sl_calloc(ctx, (size_t)g->nworkers, sizeof *g->workers);
    if (!g->workers) { st = oom(ctx); goto done; }
    for (int w = 0; w < g->nworkers; w++) {
        worker *wk = &g->workers[w];
        size_t bytes = 0;
        for (int c = 0; c < g->ncols; c++)
            if (materialized[c]) bytes += align64(g->col_size[c] * T);
        for (int k = 0; k < g->nscans; k++)
            for (int f = 0; f < g->scans[k]->nfields; f++)
                bytes += 2 * align64(sluice_type_size(g->scans[k]->acc[f]) * T);
        for (int k = 0; k < g->nscans; k++)
            if (g->combines[k]->prog[0])
                bytes += 3 * (size_t)g->scans[k]->nfields * align64(8 * T) +
                         align64(g->combines[k]->scratch);
        bytes += align64(T) + align64(max_expr);
        if (g->reduce) bytes += align64(sizeof(int32_t) * T);
        wk->block = sl_alloc_aligned(ctx, bytes);
        wk->buf = sl_calloc(ctx, (size_t)g->ncols, sizeof(void *));
        wk->xbuf = sl_calloc(ctx, (size_t)g->nscans * SL_MAX_FIELDS + 1, sizeof(void *));
        wk->ybuf = sl_calloc(ctx, (size_t)g->nscans * SL_MAX_FIELDS + 1, sizeof(void *));
        wk->tiles = sl_calloc(ctx, (size_t)g->nscans + 1, sizeof(scan_tile));
        wk->view = sl_calloc(ctx, (size_t)g->ncols, sizeof(void *));
        wk->combine = sl_calloc(ctx, (size_t)g->nscans + 1, sizeof *wk->combine);
        if (!wk->block || !wk->buf || !wk->xbuf || !wk->ybuf || !wk->tiles || !wk->view ||
            !wk->combine) {
            st = oom(ctx);
            goto done;
        }
        unsigned char *at = wk->block;
        for (int c = 0; c < g->ncols; c++) {
            if (!materialized[c]) continue;
            wk->buf[c] = at;
            at += align64(g->col_size[c] * T);
        }
        for (int k = 0; k < g->nscans; k++) {
            for (int f = 0; f < g->scans[k]->nfields; f++) {
                size_t sz = align64(sluice_type_size(g->scans[k]->acc[f]) * T);
                wk->xbuf[k * SL_MAX_FIELDS + f] = at;
                at += sz;
                wk->ybuf[k * SL_MAX_FIELDS + f] = at;
                at += sz;
            }
        }
        for (int k = 0; k < g->nscans; k++) {
            if (!g->combines[k]->prog[0]) continue;
            for (int b = 0; b < 3; b++)
                for (int f = 0; f < g->scans[k]->nfields; f++) {
                    wk->combine[k].buf[b][f] = at;
                    at += align64(8 * T);
                }
            wk->combine[k].expr = at;
            at += align64(g->combines[k]->scratch);
        }
        wk->head = at;
        at += align64(T);
        if (g->reduce) {
            wk->pos = (int32_t *)at;
            at += align64(sizeof(int32_t) * T);
        }
        wk->expr_scratch = at;
    }
    g->status_stride = align64(sizeof(tile_status) + sizeof(sl_cpu_carry) * (size_t)g->nscans);
    g->start_status = sl_alloc_aligned(ctx, g->status_stride);
    if (!g->start_status) { st = oom(ctx); goto done; }
    memset(g->start_status, 0, g->status_stride);
    st = grow_status(g, (max_rows + T - 1) / T + 1);

done:
    sl_free(ctx, materialized);
    if (st != SLUICE_OK) {
        sl_cpu_fused_destroy(g);
        return st;
    }
    *out = g;
    return SLUICE_OK;
}

void sl_cpu_fused_destroy(sl_cpu_fused *g) {
    if (!g) return;
    sluice_context *ctx = g->ctx;
    if (g->stages) {
        for (int i = 0; i < g->nsteps; i++) {
            fstage *fs = &g->stages[i];
            for (int k = 0; k < fs->nmap; k++) sl_expr_program_free(ctx, fs->map_progs[k]);
            for (int f = 0; f < SL_MAX_FIELDS; f++)
                if (fs->of_prog[f]) sl_expr_program_free(ctx, fs->of_prog[f]);
            sl_cpu_combine_free(ctx, &fs->combine);
            sl_free(ctx, fs->map_cols);
            sl_free(ctx, fs->map_progs);
            sl_free(ctx, fs->gather);
        }
    }
    if (g->workers) {
        for (int w = 0; w < g->nworkers; w++) {
            worker *wk = &g->workers[w];
            sl_free_aligned(ctx, wk->block);
            sl_free(ctx, wk->buf);
            sl_free(ctx, wk->xbuf);
            sl_free(ctx, wk->ybuf);
            sl_free(ctx, wk->tiles);
            sl_free(ctx, wk->view);
            sl_free(ctx, wk->combine);
        }
    }
    sl_free(ctx, g->workers);
    sl_free(ctx, g->stages);
    sl_free(ctx, g->scans);
    sl_free(ctx, g->combines);
    sl_free(ctx, g->col_size);
    sl_free(ctx, g->out);
    sl_free(ctx, g->start);
    sl_free_aligned(ctx, g->status);
    sl_free_aligned(ctx, g->start_status);
    sl_free(ctx, g);
}

int sl_cpu_fused_nscans(const sl_cpu_fused *g) { return g->nscans; }

void sl_cpu_fused_initial_carries(const sl_cpu_fused *g, sl_cpu_carry *carries) {
    for (int k = 0; k < g->nscans; k++) {
        memset(&carries[k], 0, sizeof carries[k]);
        memcpy(carries[k].v, g->scans[k]->identity, sizeof(sl_value) * (size_t)g->scans[k]->nfields);
    }
}

void sl_cpu_fused_begin_batch(const sl_cpu_fused *g, sl_cpu_carry *carries) {
    for (int k = 0; k < g->nscans; k++) {
        const sl_scan *sc = g->scans[k];
        if (sc->reset_per_batch || sc->segments == SL_SEGMENTS_OFFSETS) {
            memcpy(carries[k].v, sc->identity, sizeof(sl_value) * (size_t)sc->nfields);
            carries[k].has_key = false;
            carries[k].last_key = 0;
        }
    }
    /* per: batch, a reduce's segments end with each batch (its values restart above) */
    if (g->reduce && g->reduce->per_batch) carries[g->reduce_slot].open = false;
}

const int *sl_cpu_fused_outputs(const sl_cpu_fused *g, int *count) {
    *count = g->nout;
    return g->out;
}

/* ---- running ----------------------------------------------------------------------------- */

typedef struct fused_run {
    sl_cpu_fused *g;
    const sl_value *params;
    const void *const *src;
    int64_t rows;
    const int64_t *offsets;
    int64_t nsegments;
    void *const *dest;
    int64_t ntiles;
    int64_t next_tile;
    int64_t generation;
    bool stream_out; /* output larger than the caches: write it with non-temporal stores */
} fused_run;

/* Above this many output bytes per batch, results bypass the caches on their way out. */
#define STREAM_OUT_BYTES ((size_t)8 << 20)

/* A copy that writes around the caches (no read-for-ownership of the destination lines):
 * a tile's results are not read again soon, and writing them through the cache costs a third
 * more memory traffic. */
static void stream_copy(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, n);
#else
    memcpy(dst, src, n);
#endif
}

static uint64_t load_bits(const void *data, size_t size, int64_t i) {
    switch (size) {
    case 1: return ((const uint8_t *)data)[i];
    case 2: return ((const uint16_t *)data)[i];
    case 4: return ((const uint32_t *)data)[i];
    default: return ((const uint64_t *)data)[i];
    }
}

/* A segment key's bits: the stored bits, except that a bool key is its truth value (keys
 * 1, 2, 2, 0 are two segments: every byte other than 0 is true). */
static uint64_t load_key(const void *data, size_t size, bool is_bool, int64_t i) {
    uint64_t b = load_bits(data, size, i);
    return is_bool ? b != 0 : b;
}

/* Stream compaction of one column inside a tile: every row is stored at the running kept
 * count, which only advances past kept rows (no branch, no selection vector; out may be
 * `from` itself since the write index never passes the read index). */
#define COMPACT_LOOP(TY)                                                                 \
    do {                                                                                 \
        TY *o_ = out;                                                                    \
        const TY *in_ = from;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                \
            TY v_ = in_[i];                                                              \
            o_[k] = v_;                                                                  \
            k += flag[i] != 0;                                                           \
        }                                                                                \
    } while (0)

#if defined(SL_HAVE_AVX512_COMPACT)
/* 4-byte rows, 16 at a time: the flags become a mask, the kept rows are packed in a register
 * (vpcompressd) and the whole register is stored at the kept count. The store runs past the
 * kept rows but never past row i+15, which was already loaded (so out may be `from`), and
 * the scalar tail overwrites the excess. A register compress, not a compress-store: the
 * memory form is microcoded and slow on AMD Zen 4. */
__attribute__((target("avx512f"))) static int64_t compact32_avx512(uint32_t *out,
                                                                   const uint8_t *flag, int64_t n,
                                                                   const uint32_t *from) {
    int64_t k = 0, i = 0;
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
        __m128i f = _mm_loadu_si128((const __m128i *)(flag + i));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(f, zero)) ^ 0xffffu;
        __m512i v = _mm512_loadu_si512((const void *)(from + i));
        _mm512_storeu_si512((void *)(out + k), _mm512_maskz_compress_epi32((__mmask16)m, v));
        k += __builtin_popcount(m);
    }
    for (; i < n; i++) {
        uint32_t v = from[i];
        out[k] = v;
        k += flag[i] != 0;
    }
    return k;
}

static bool have_avx512(void) {
    static int known = -1; /* every thread that races here computes the same answer */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx512f") ? 1 : 0;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k == 1;
}
#endif

static int64_t compact_column(void *out, size_t size, const uint8_t *flag, int64_t n,
                              const void *from) {
    int64_t k = 0;
#if defined(SL_HAVE_AVX512_COMPACT)
    if (size == 4 && have_avx512()) return compact32_avx512(out, flag, n, from);
#endif
    switch (size) {
    case 1: COMPACT_LOOP(uint8_t); break;
    case 2: COMPACT_LOOP(uint16_t); break;
    case 4: COMPACT_LOOP(uint32_t); break;
    default: COMPACT_LOOP(uint64_t); break;
    }
    return k;
}

/* Segment index (within the batch) of each row of [r0, r0+n): the k with
 * offsets[k] <= r < offsets[k+1]. */
static void segment_ids(const int64_t *offsets, int64_t nsegments, int64_t r0, int64_t n,
                        int64_t *out) {
    int64_t lo = 0, hi = nsegments; /* last k with offsets[k] <= r0 */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (offsets[mid] <= r0) lo = mid;
        else hi = mid - 1;
    }
    int64_t k = lo;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = r0 + i;
        while (k < nsegments && offsets[k + 1] <= r) k++;
        out[i] = k;
    }
}

static const tile_status *wait_for(const fused_run *r, int64_t t) {
    const tile_status *s = status_at(r->g, t);
    if (t < 0) return s;
    unsigned spins = 0;
    while (__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE) != r->generation) sl_cpu_relax(&spins);
    return s;
}

/* Applies the carry to every scan still holding local prefixes. */
static void fix_pending(const sl_cpu_fused *g, worker *wk, const sl_value *params,
                        const tile_status *cin) {
    for (int k = 0; k < g->nscans; k++) {
        scan_tile *sk = &wk->tiles[k];
        if (!sk->pending) continue;
        sk->pending = false;
        if (sk->head0 || sk->fix_n == 0) continue;
        sl_cpu_scan_apply_carry_declared(g->scans[k], g->combines[k], params, &wk->combine[k],
                                         sk->fix_n, cin->carries[k].v, sk->y);
    }
}

/* head0 for scans that ran locally: whether the tile's first row opened a segment. */
static void resolve_heads(const sl_cpu_fused *g, worker *wk, const tile_status *cin) {
    for (int k = 0; k < g->nscans; k++) {
        scan_tile *sk = &wk->tiles[k];
        const sl_scan *sc = g->scans[k];
        if (!sk->ran || sk->with_carry || sk->nrows == 0) continue;
        if (sc->segments == SL_SEGMENTS_KEY || sc->segments == SL_SEGMENTS_OFFSETS)
            sk->head0 = !cin->carries[k].has_key || cin->carries[k].last_key != sk->first_key;
    }
}

static void run_scan(const fused_run *r, worker *wk, const fstage *fs, int64_t cur,
                     const tile_status *cin) {
    const sl_cpu_fused *g = r->g;
    const sl_scan *sc = fs->sc;
    int k = fs->slot;
    scan_tile *sk = &wk->tiles[k];
    /* A value of a reduce without segments needs only the tile's state, no prefix: the scan
     * runs without writing any (y NULL), and nothing is left to fix up. */
    bool state_only = fs->reduce_value && g->reduce->segments == SL_SEGMENTS_NONE;
    sk->ran = true;
    sk->with_carry = cin != NULL;
    sk->nrows = cur;
    const void *x[SL_MAX_FIELDS];
    sl_eval_env env = {wk->view, r->params, {NULL, NULL}};
    for (int f = 0; f < sc->nfields; f++) {
        void *xb = wk->xbuf[k * SL_MAX_FIELDS + f];
        if (fs->of_col[f] >= 0) {
            x[f] = wk->view[fs->of_col[f]];
        } else {
            if (cur > 0) sl_expr_run(fs->of_prog[f], &env, cur, wk->expr_scratch, xb);
            x[f] = xb;
        }
        sk->y[f] = state_only ? NULL
                   : sc->into[f] >= 0 && !fs->reduce_value ? wk->buf[sc->into[f]]
                                                           : wk->ybuf[k * SL_MAX_FIELDS + f];
    }
    const uint8_t *head = NULL;
    sk->head0 = sk->has_head = false;
    sk->fix_n = cur;
    if (sc->segments == SL_SEGMENTS_HEADFLAG) {
        head = wk->view[fs->key_col];
        int64_t i = 0;
        while (i < cur && !head[i]) i++;
        sk->fix_n = i;
        sk->head0 = cur > 0 && head[0];
        sk->has_head = i < cur;
    } else if (sc->segments == SL_SEGMENTS_KEY || sc->segments == SL_SEGMENTS_OFFSETS) {
        const void *key = wk->view[fs->key_col];
        size_t ks = g->col_size[fs->key_col];
        uint8_t *h = wk->head;
        int64_t first_head = cur;
        if (cur > 0) {
            uint64_t prev = load_key(key, ks, fs->key_is_bool, 0);
            sk->first_key = prev;
            for (int64_t i = 1; i < cur; i++) {
                uint64_t kb = load_key(key, ks, fs->key_is_bool, i);
                h[i] = kb != prev;
                if (h[i] && first_head == cur) first_head = i;
                prev = kb;
            }
            sk->last_key = prev;
            if (cin) {
                const sl_cpu_carry *c = &cin->carries[k];
                sk->head0 = !c->has_key || c->last_key != sk->first_key;
            }
            h[0] = sk->head0;
        }
        sk->fix_n = first_head;
        sk->has_head = first_head < cur;
        head = h;
    }
    if (cin) memcpy(sk->tail, cin->carries[k].v, sizeof(sl_value) * (size_t)sc->nfields);
    else memcpy(sk->tail, sc->identity, sizeof(sl_value) * (size_t)sc->nfields);
    sl_cpu_scan_rows_declared(sc, &fs->combine, r->params, &wk->combine[k], cur, x, head, sk->tail,
                              state_only ? NULL : sk->y);
    sk->pending = cin == NULL && !state_only;
    for (int f = 0; f < sc->nfields; f++)
        if (sc->into[f] >= 0 && !fs->reduce_value) wk->view[sc->into[f]] = sk->y[f];
}

/* The number of nonzero flags among n. gcc widens `k += flag[i] != 0` into 64-bit lanes
 * (a third of the filter's time at 2^26 rows); psadbw sums 16 flags per step instead. */
static int64_t count_flags(const uint8_t *flag, int64_t n) {
    int64_t k = 0, i = 0;
#if defined(__SSE2__) && defined(__x86_64__)
    const __m128i zero = _mm_setzero_si128(), one = _mm_set1_epi8(1);
    __m128i acc = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
        __m128i f = _mm_loadu_si128((const __m128i *)(flag + i));
        __m128i ones = _mm_andnot_si128(_mm_cmpeq_epi8(f, zero), one);
        acc = _mm_add_epi64(acc, _mm_sad_epu8(ones, zero));
    }
    k = _mm_cvtsi128_si64(acc) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc));
#endif
    for (; i < n; i++) k += flag[i] != 0;
    return k;
}

/* Packs the kept rows of every gathered column and of the scans still holding local
 * prefixes. Every packing reads the flags, so the `by` column itself is packed last: when it
 * sits in its own tile buffer (computed in this group, or moved there by an earlier
 * compaction) it is packed in place, and a column packed after it would read the packed
 * flags. */
/* A map stage over the tile's cur rows: its computed entries, in order. */
static void run_map(worker *wk, const fstage *fs, const sl_eval_env *env, int64_t cur) {
    for (int k = 0; k < fs->nmap; k++) {
        int c = fs->map_cols[k];
        if (cur > 0) sl_expr_run(fs->map_progs[k], env, cur, wk->expr_scratch, wk->buf[c]);
        wk->view[c] = wk->buf[c];
    }
}

static int64_t run_compact(const sl_cpu_fused *g, worker *wk, const fstage *fs, int64_t cur) {
    int by = fs->st->compact.by;
    const uint8_t *flag = wk->view[by];
    int64_t k = count_flags(flag, cur);
    /* Scans still holding local prefixes: keep their fields in step with the rows, and
     * count how many leading rows still need the carry. */
    for (int s = 0; s < g->nscans; s++) {
        scan_tile *sk = &wk->tiles[s];
        if (!sk->pending) continue;
        const sl_scan *sc = g->scans[s];
        for (int f = 0; f < sc->nfields; f++) {
            bool done = false;
            for (int j = 0; j < fs->ngather && !done; j++) done = sc->into[f] == fs->gather[j];
            if (!done) compact_column(sk->y[f], sluice_type_size(sc->acc[f]), flag, cur, sk->y[f]);
        }
        sk->fix_n = count_flags(flag, sk->fix_n);
    }
    bool by_gathered = false;
    for (int j = 0; j < fs->ngather; j++) {
        int c = fs->gather[j];
        if (c == by) {
            by_gathered = true;
            continue;
        }
        compact_column(wk->buf[c], g->col_size[c], flag, cur, wk->view[c]);
        wk->view[c] = wk->buf[c];
    }
    if (by_gathered) {
        compact_column(wk->buf[by], g->col_size[by], flag, cur, flag);
        wk->view[by] = wk->buf[by];
    }
    return k;
}

/* The f32 sum scan whose local prefixes are output column c as they stand (pending carry),
 * or -1. */
static int carry_on_write_scan(const sl_cpu_fused *g, const worker *wk, int c) {
    for (int k = 0; k < g->nscans; k++) {
        const scan_tile *sk = &wk->tiles[k];
        const sl_scan *sc = g->scans[k];
        if (sk->pending && sc->nfields == 1 && sc->op == SL_SCAN_SUM && sc->acc[0] == SLUICE_F32 &&
            sc->into[0] == c && sk->y[0] == wk->view[c])
            return k;
    }
    return -1;
}

/* to[i] = carry + y[i] for i < fix_n, y[i] after: the fix-up of sl_cpu_scan_apply_carry
 * (carry on the left) fused with the copy out, with streaming stores when `stream`. */
static void write_f32_with_carry(float *to, const float *y, int64_t fix_n, int64_t n,
                                 float carry, bool stream) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 c = _mm_set1_ps(carry);
    if (stream) {
        for (; i < fix_n && ((uintptr_t)(to + i) & 15); i++)
            _mm_store_ss(to + i, _mm_add_ss(c, _mm_load_ss(y + i)));
        for (; i + 4 <= fix_n; i += 4) _mm_stream_ps(to + i, _mm_add_ps(c, _mm_loadu_ps(y + i)));
    } else {
        for (; i + 4 <= fix_n; i += 4) _mm_storeu_ps(to + i, _mm_add_ps(c, _mm_loadu_ps(y + i)));
    }
    for (; i < fix_n; i++) _mm_store_ss(to + i, _mm_add_ss(c, _mm_load_ss(y + i)));
#else
    for (; i < fix_n; i++) to[i] = carry + y[i];
#endif
    if (n > i) {
        if (stream) stream_copy(to + i, y + i, (size_t)(n - i) * sizeof(float));
        else memcpy(to + i, y + i, (size_t)(n - i) * sizeof(float));
    }
}

/* ---- a reduce ending the group -------------------------------------------------------
 * Its values ran as inclusive segmented scans over the tile's rows (local prefixes before
 * the tile's first head unless the tile waited for the carry). Once the previous tile's
 * carry is known, the tile writes one row per segment that ends in it, at its offset in the
 * output: with head flags or keys a segment ends where the next one starts (row i > 0 of the
 * tile starting one closes the segment ending at row i-1; row 0 closes the carried one), so
 * the segment open at the end of the tile stays in the carry; with an offsets input every
 * segment whose end lies in the tile, empty ones included. What is still open at a batch's
 * end (per: batch) or at the end of the stream is written from the carries after the tiles
 * (reduce_close). */

/* Segments of the piece's offsets that end before tile t (all of them for t = ntiles): tile
 * t writes segments [before(t), before(t + 1)). */
static int64_t segments_before(const fused_run *r, int64_t t) {
    if (t <= 0) return 0;
    if (t >= r->ntiles) return r->nsegments;
    int64_t row = t * T, lo = 0, hi = r->nsegments; /* the first k ending after `row` */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (r->offsets[mid + 1] > row) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The rows tile t gives; for head flags and keys, marks in wk->head the rows that close a
 * segment. */
static int64_t reduce_rows(const fused_run *r, worker *wk, const tile_status *cin, int64_t t,
                           int64_t cur) {
    const sl_cpu_fused *g = r->g;
    const sl_reduce *rd = g->reduce;
    const sl_cpu_carry *c = &cin->carries[g->reduce_slot];
    if (rd->segments == SL_SEGMENTS_OFFSETS)
        return segments_before(r, t + 1) - segments_before(r, t);
    if (rd->segments == SL_SEGMENTS_NONE || cur == 0) return 0;
    uint8_t *h = wk->head;
    const void *col = wk->view[rd->segment_column];
    if (rd->segments == SL_SEGMENTS_HEADFLAG) {
        const uint8_t *flag = col;
        h[0] = c->open && flag[0];
        for (int64_t i = 1; i < cur; i++) h[i] = flag[i] != 0;
    } else {
        size_t ks = g->col_size[rd->segment_column];
        uint64_t prev = load_key(col, ks, g->reduce_key_bool, 0);
        h[0] = c->open && c->last_key != prev;
        for (int64_t i = 1; i < cur; i++) {
            uint64_t k = load_key(col, ks, g->reduce_key_bool, i);
            h[i] = k != prev;
            prev = k;
        }
    }
    return count_flags(h, cur);
}

static void store_bits(void *to, size_t size, int64_t at, uint64_t bits) {
    switch (size) {
    case 1: ((uint8_t *)to)[at] = (uint8_t)bits; break;
    case 2: ((uint16_t *)to)[at] = (uint16_t)bits; break;
    case 4: ((uint32_t *)to)[at] = (uint32_t)bits; break;
    default: ((uint64_t *)to)[at] = bits; break;
    }
}

/* Writes output row `at`: value k's state v (fields kept and needed), the key's bits, the
 * index. */
static void reduce_store(const sl_cpu_fused *g, void *const *dest, int k, const sl_value *v,
                         int64_t at) {
    const sl_scan *sc = g->scans[k];
    for (int f = 0; f < sc->nfields; f++)
        if (sc->into[f] >= 0 && dest[sc->into[f]])
            sl_value_store(sc->acc[f], dest[sc->into[f]], at, v[f]);
}

/* Writes value k's state at the tile's row i as output row `at`: the prefix's bits as they
 * are (one typed copy a kept field: a segment per row must not cost much more than a row),
 * or, for a local prefix (before the tile's first head, carry not applied), the carry ⊕ it. */
static void write_value_at(const sl_cpu_fused *g, const worker *wk, const tile_status *cin,
                           void *const *dest, int k, int64_t i, int64_t at) {
    const sl_scan *sc = g->scans[k];
    const scan_tile *sk = &wk->tiles[k];
    if (i < sk->fix_n && !sk->with_carry && !sk->head0) {
        sl_value v[SL_MAX_FIELDS];
        for (int f = 0; f < sc->nfields; f++) v[f] = sl_value_load(sc->acc[f], sk->y[f], i);
        sl_cpu_scan_combine(sc, cin->carries[k].v, v, v);
        reduce_store(g, dest, k, v, at);
        return;
    }
    for (int f = 0; f < sc->nfields; f++) {
        int c = sc->into[f];
        if (c < 0 || !dest[c]) continue;
        size_t size = g->col_size[c];
        store_bits(dest[c], size, at, load_bits(sk->y[f], size, i));
    }
}

static void reduce_store_row(const sl_cpu_fused *g, void *const *dest, int64_t at, uint64_t key,
                             int64_t index) {
    const sl_reduce *rd = g->reduce;
    if (rd->key_column >= 0 && dest[rd->key_column])
        store_bits(dest[rd->key_column], g->col_size[rd->key_column], at, key);
    if (rd->index_column >= 0 && dest[rd->index_column])
        ((int64_t *)dest[rd->index_column])[at] = index;
}

#define GATHER(T_)                                                                       \
    do {                                                                                 \
        T_ *to_ = (T_ *)to + at;                                                         \
        const T_ *from_ = from;                                                          \
        for (int64_t m = 0; m < n; m++) to_[m] = from_[idx[m]];                          \
    } while (0)

/* to[at + m] = from[idx[m]] for m < n, elements of `size` bytes; `truth`: bytes as 0 or 1
 * (a bool key). */
static void gather(void *to, int64_t at, const void *from, size_t size, const int32_t *idx,
                   int64_t n, bool truth) {
    if (truth) {
        const uint8_t *bytes = from;
        for (int64_t m = 0; m < n; m++) ((uint8_t *)to)[at + m] = bytes[idx[m]] != 0;
        return;
    }
    switch (size) {
    case 1: GATHER(uint8_t); break;
    case 2: GATHER(uint16_t); break;
    case 4: GATHER(uint32_t); break;
    default: GATHER(uint64_t); break;
    }
}
#undef GATHER

/* Writes n output rows from `at` column by column: row m takes the values' states at the
 * tile's row from[m] (non-decreasing; one typed gather per kept field) and the index
 * index + m. Only rows before the tile's first head can hold a local prefix (the carry not
 * applied yet): those few are written again the slow way. */
static void write_rows(const fused_run *r, const worker *wk, const tile_status *cin,
                       const int32_t *from, int64_t n, int64_t at, int64_t index) {
    const sl_cpu_fused *g = r->g;
    const sl_reduce *rd = g->reduce;
    int rs = g->reduce_slot;
    for (int j = 0; j < rd->nvalues; j++) {
        const sl_scan *sc = g->scans[rs + j];
        const scan_tile *sk = &wk->tiles[rs + j];
        for (int f = 0; f < sc->nfields; f++) {
            int c = sc->into[f];
            if (c >= 0 && r->dest[c])
                gather(r->dest[c], at, sk->y[f], g->col_size[c], from, n, false);
        }
        if (sk->with_carry || sk->head0) continue;
        for (int64_t m = 0; m < n && from[m] < sk->fix_n; m++)
            write_value_at(g, wk, cin, r->dest, rs + j, from[m], at + m);
    }
    if (rd->index_column >= 0 && r->dest[rd->index_column])
        for (int64_t m = 0; m < n; m++) ((int64_t *)r->dest[rd->index_column])[at + m] = index + m;
}

/* Writes the rows tile t gives (reduce_rows counted them) from output row cin->out_rows. */
static void reduce_write(const fused_run *r, worker *wk, const tile_status *cin, int64_t t,
                         int64_t cur) {
    const sl_cpu_fused *g = r->g;
    const sl_reduce *rd = g->reduce;
    int rs = g->reduce_slot;
    int64_t at = cin->out_rows, index = cin->carries[rs].segments;
    int32_t *from = wk->pos;
    if (rd->segments == SL_SEGMENTS_OFFSETS) {
        /* Segment k takes its last row; an empty one (written as the identity after) the row
         * before it, so `from` stays non-decreasing. Chunks of at most T segments: empty
         * segments can make a tile's rows out more than its rows in. */
        int64_t k1 = segments_before(r, t + 1), r0 = t * T;
        for (int64_t kb = segments_before(r, t); kb < k1; kb += T) {
            int64_t n = k1 - kb < T ? k1 - kb : T;
            int32_t last = 0;
            for (int64_t m = 0; m < n; m++) {
                int64_t first = r->offsets[kb + m], end = r->offsets[kb + m + 1];
                if (end > first) last = (int32_t)(end - 1 - r0);
                from[m] = last;
            }
            write_rows(r, wk, cin, from, n, at, index);
            for (int64_t m = 0; m < n; m++) {
                if (r->offsets[kb + m] != r->offsets[kb + m + 1]) continue;
                for (int j = 0; j < rd->nvalues; j++)
                    reduce_store(g, r->dest, rs + j, g->scans[rs + j]->identity, at + m);
            }
            at += n;
            index += n;
        }
        return;
    }
    if (rd->segments == SL_SEGMENTS_NONE || cur == 0) return;
    /* Row 0 closing the carried segment takes the carries; a head at i > 0 takes row i-1. */
    const uint8_t *h = wk->head;
    if (h[0]) {
        for (int j = 0; j < rd->nvalues; j++)
            reduce_store(g, r->dest, rs + j, cin->carries[rs + j].v, at);
        reduce_store_row(g, r->dest, at++, cin->carries[rs].last_key, index++);
    }
    int64_t n = 0;
    for (int64_t i = 1; i < cur; i++)
        if (h[i]) from[n++] = (int32_t)(i - 1);
    write_rows(r, wk, cin, from, n, at, index);
    if (rd->key_column >= 0 && r->dest[rd->key_column])
        gather(r->dest[rd->key_column], at, wk->view[rd->key_column],
               g->col_size[rd->key_column], from, n, g->reduce_key_bool);
}

/* Writes the open segment's row from the carries at output row `at` (a NONE reduce's whole
 * stream or batch, possibly empty: identities), and starts the next segment. */
static void reduce_emit_open(const sl_cpu_fused *g, sl_cpu_carry *carries, void *const *dest,
                             int64_t at) {
    int rs = g->reduce_slot;
    for (int j = 0; j < g->reduce->nvalues; j++)
        reduce_store(g, dest, rs + j, carries[rs + j].v, at);
    reduce_store_row(g, dest, at, carries[rs].last_key, carries[rs].segments);
    carries[rs].segments++;
    carries[rs].open = false;
    for (int j = 0; j < g->reduce->nvalues; j++) {
        const sl_scan *sc = g->scans[rs + j];
        memcpy(carries[rs + j].v, sc->identity, sizeof(sl_value) * (size_t)sc->nfields);
        carries[rs + j].has_key = false;
    }
}

/* After the tiles of a piece: an offsets batch without rows still gives its (empty)
 * segments; per: batch, the segment open at the batch's end (NONE: the batch) gives its
 * row. Returns the rows written from output row `at`. */
static int64_t reduce_close(const sl_cpu_fused *g, int64_t ntiles, int64_t nsegments,
                            sl_cpu_carry *carries, void *const *dest, int64_t at) {
    const sl_reduce *rd = g->reduce;
    int rs = g->reduce_slot;
    if (rd->segments == SL_SEGMENTS_OFFSETS) {
        if (ntiles > 0) return 0;
        for (int64_t k = 0; k < nsegments; k++) {
            for (int j = 0; j < rd->nvalues; j++)
                reduce_store(g, dest, rs + j, g->scans[rs + j]->identity, at + k);
            reduce_store_row(g, dest, at + k, 0, carries[rs].segments++);
        }
        return nsegments;
    }
    if (!rd->per_batch || (rd->segments != SL_SEGMENTS_NONE && !carries[rs].open)) return 0;
    reduce_emit_open(g, carries, dest, at);
    return 1;
}

static void run_tile(fused_run *r, worker *wk, int64_t t) {
    const sl_cpu_fused *g = r->g;
    int64_t r0 = t * T, n = r->rows - r0 < T ? r->rows - r0 : T;
    for (int j = 0; j < g->nstart; j++) {
        int c = g->start[j];
        /* A live column nothing reads any more is not handed over (NULL). */
        wk->view[c] = r->src[c] ? (const char *)r->src[c] + (size_t)r0 * g->col_size[c] : NULL;
    }
    if (g->has_seg) {
        segment_ids(r->offsets, r->nsegments, r0, n, wk->buf[g->seg_id]);
        wk->view[g->seg_id] = wk->buf[g->seg_id];
    }
    for (int k = 0; k < g->nscans; k++) {
        wk->tiles[k].ran = wk->tiles[k].pending = false;
        wk->tiles[k].nrows = 0;
    }
    int64_t cur = n;
    const tile_status *cin = NULL;
    sl_eval_env env = {wk->view, r->params, {NULL, NULL}};
    for (int i = 0; i < g->nsteps; i++) {
        const fstage *fs = &g->stages[i];
        if (fs->needs_carry && !cin) {
            cin = wait_for(r, t - 1);
            resolve_heads(g, wk, cin);
            fix_pending(g, wk, r->params, cin);
        }
        switch (fs->st->kind) {
        case SL_STAGE_MAP: run_map(wk, fs, &env, cur); break;
        case SL_STAGE_COMPACT: cur = run_compact(g, wk, fs, cur); break;
        case SL_STAGE_SCAN: run_scan(r, wk, fs, cur, cin); break;
        case SL_STAGE_REDUCE: run_scan(r, wk, fs, cur, cin); break; /* one of its values */
        default: break;
        }
    }
    bool waited = cin != NULL; /* then every local prefix was already fixed up */
    if (!cin) {
        cin = wait_for(r, t - 1);
        resolve_heads(g, wk, cin);
    }
    /* Publish this tile's carry: from here on the next tile can go. */
    tile_status *out = status_at(g, t);
    int64_t emitted = g->reduce ? reduce_rows(r, wk, cin, t, cur) : cur;
    out->out_rows = cin->out_rows + emitted;
    for (int k = 0; k < g->nscans; k++) {
        const scan_tile *sk = &wk->tiles[k];
        const sl_scan *sc = g->scans[k];
        const sl_cpu_carry *c = &cin->carries[k];
        sl_cpu_carry *o = &out->carries[k];
        if (!sk->ran || sk->nrows == 0) {
            *o = *c;
            continue;
        }
        if (sk->with_carry || sk->head0 || sk->has_head)
            memcpy(o->v, sk->tail, sizeof(sl_value) * (size_t)sc->nfields);
        else
            sl_cpu_scan_combine(sc, c->v, sk->tail, o->v);
        /* A first row that opened a segment only because no key was carried yet (the
         * stream's first row) is not a head the data made. */
        bool keyed = sc->segments == SL_SEGMENTS_KEY || sc->segments == SL_SEGMENTS_OFFSETS;
        o->headed = c->headed || sk->has_head || (sk->head0 && (!keyed || c->has_key));
        o->has_first = true;
        o->first_key = c->has_first ? c->first_key : keyed ? sk->first_key : 0;
        if (keyed) {
            o->last_key = sk->last_key;
            o->has_key = true;
        } else {
            o->last_key = c->last_key;
            o->has_key = c->has_key;
        }
    }
    if (g->reduce) {
        const sl_cpu_carry *c = &cin->carries[g->reduce_slot];
        sl_cpu_carry *o = &out->carries[g->reduce_slot];
        o->segments = c->segments + emitted;
        o->open = g->reduce->segments != SL_SEGMENTS_OFFSETS && (c->open || cur > 0);
        o->continues = c->continues;
    }
    __atomic_store_n(&out->ready, r->generation, __ATOMIC_RELEASE);
    if (g->reduce) { /* its rows are all it writes; no prefix is needed any more */
        reduce_write(r, wk, cin, t, cur);
        return;
    }
    /* Write the tile's rows at their offset. f32 sum scans still holding local prefixes get
     * their carry on the way out (one pass instead of a fix-up pass and a copy). Whether a
     * column goes this way depends only on the pipeline, never on threads or batch sizes. */
    int64_t at = cin->out_rows;
    uint64_t written = 0; /* bit j: output j already written */
    for (int j = 0; j < g->nout && j < 64 && !waited && cur > 0; j++) {
        int c = g->out[j];
        int k = carry_on_write_scan(g, wk, c);
        if (k < 0) continue;
        scan_tile *sk = &wk->tiles[k];
        int64_t fix_n = sk->head0 ? 0 : sk->fix_n;
        float carry = (float)cin->carries[k].v[0].f;
        write_f32_with_carry((float *)r->dest[c] + at, wk->view[c], fix_n, cur, carry,
                             r->stream_out);
        sk->pending = false;
        written |= (uint64_t)1 << j;
    }
    if (!waited) fix_pending(g, wk, r->params, cin);
    for (int j = 0; j < g->nout; j++) {
        int c = g->out[j];
        size_t sz = g->col_size[c];
        if (cur == 0 || (j < 64 && (written >> j & 1))) continue;
        char *to = (char *)r->dest[c] + (size_t)at * sz;
        if (r->stream_out) stream_copy(to, wk->view[c], (size_t)cur * sz);
        else memcpy(to, wk->view[c], (size_t)cur * sz);
    }
#if defined(__SSE2__)
    if (r->stream_out) _mm_sfence();
#endif
}

static void tile_task(void *arg, int w) {
    fused_run *r = arg;
    worker *wk = &r->g->workers[w];
    for (;;) {
        int64_t t = __atomic_fetch_add(&r->next_tile, 1, __ATOMIC_RELAXED);
        if (t >= r->ntiles) break;
        run_tile(r, wk, t);
    }
}

sluice_status sl_cpu_fused_run(sl_cpu_fused *g, sl_cpu_pool *pool, const sl_value *params,
                               const void *const *src, int64_t rows, const int64_t *offsets,
                               int64_t nsegments, sl_cpu_carry *carries, void *const *dest,
                               int64_t *rows_out) {
    int64_t ntiles = (rows + T - 1) / T;
    SL_TRY(grow_status(g, ntiles));
    tile_status *start = g->start_status;
    start->out_rows = 0;
    memcpy(start->carries, carries, sizeof(sl_cpu_carry) * (size_t)g->nscans);
    size_t row_bytes = 0;
    for (int j = 0; j < g->nout; j++) row_bytes += g->col_size[g->out[j]];
    fused_run r = {g, params, src, rows, offsets, nsegments < 0 ? 0 : nsegments, dest, ntiles, 0,
                   ++g->generation, (size_t)rows * row_bytes >= STREAM_OUT_BYTES};
    int nworkers = pool ? sl_cpu_pool_size(pool) : 1;
    if (nworkers > g->nworkers) nworkers = g->nworkers;
    if (nworkers > ntiles) nworkers = (int)ntiles;
    if (nworkers > 1) sl_cpu_pool_run(pool, tile_task, &r, nworkers);
    else if (ntiles > 0) tile_task(&r, 0);
    const tile_status *last = status_at(g, ntiles - 1);
    memcpy(carries, last->carries, sizeof(sl_cpu_carry) * (size_t)g->nscans);
    *rows_out = last->out_rows;
    if (g->reduce) *rows_out += reduce_close(g, ntiles, r.nsegments, carries, dest, *rows_out);
    return SLUICE_OK;
}

void sl_cpu_fused_flush(sl_cpu_fused *g, sl_cpu_carry *carries, void *const *dest,
                        int64_t *rows_out) {
    const sl_reduce *rd = g->reduce;
    *rows_out = 0;
    if (!rd || rd->per_batch || rd->segments == SL_SEGMENTS_OFFSETS) return;
    if (carries[g->reduce_slot].continues) return; /* a later part of the stream emits it */
    if (rd->segments != SL_SEGMENTS_NONE && !carries[g->reduce_slot].open) return;
    reduce_emit_open(g, carries, dest, 0);
    *rows_out = 1;
}
