/* codegen.c — plan group → CUDA source of one single-pass kernel (see codegen.h for the
 * kernel's shape). Three steps: analyse the group (which columns it reads, makes and must
 * write; which look-back phase every scan and the compaction count belong to), lay out each
 * phase's state tuple (the same layout on the host, for the carry's identity bytes, and on
 * the device, checked by static_assert), then print what is the group's own: the state
 * structs, their combines (kernels/sl_monoid.h) and traits, a Tile struct whose member
 * functions load, compute and store the group's columns, and the instantiation of the tile
 * loop, which is code in kernels/sl_tile.cuh. */
#include "cuda/codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/sl_scratch.h"
#include "../../kernels/tuning.h"
#include "expr/expr.h"
#include "stages/kind.h"

/* ---- analysis ------------------------------------------------------------------------ */

typedef enum slot_kind {
    SLOT_SCAN,  /* one scan stage's state, or one value of a reduce (its value fields, plus
                   segment fields) */
    SLOT_COUNT, /* the compaction's kept-row count (i64) */
    SLOT_REDUCE /* a reduce's rows: which rows close a segment and where its row goes */
} slot_kind;

/* A state field inside a phase's tuple. */
typedef struct cg_field {
    sluice_type type;
    /* the type the state holds it in: `type`, or the 4-byte integer a narrow scan value is
       widened to (widen_narrow_fields) */
    sluice_type held;
    size_t offset;
    int id; /* printed as f<id> */
    /* the same in every prefix inside a batch (no element or combine changes it): kept out
       of the look-back's payload and taken from the carry after it (Phase::batch_constants) */
    bool batch_constant;
} cg_field;

typedef struct cg_slot {
    slot_kind kind;
    int stage;          /* scan or reduce stage index (SLOT_SCAN, SLOT_REDUCE) */
    const sl_scan *sc;  /* SLOT_SCAN: the scan, or the reduce's value */
    int phase;          /* 1-based */
    int value_field[SL_MAX_FIELDS]; /* ids of the value fields */
    int flag_field;     /* segmented by head flag / offsets: the flag; key: "has" */
    int interior_field; /* key segments: a segment starts strictly inside the span */
    int first_field, last_field; /* key segments: the first and last key of the span */
    int count_field;    /* SLOT_COUNT; SLOT_REDUCE: segments closed in the batch */
    int total_field;    /* SLOT_REDUCE: segments closed in the stream (the index) */
    int restart_field;  /* SLOT_REDUCE (segmented): the values restart inside the span */
    /* SLOT_SCAN, a count of exactly the rows the group's compaction keeps (derive_counts):
       inside a batch its prefix is the compaction's count, so its value field is a batch
       constant (the carry's count) and its outputs add the two */
    bool from_count;
} cg_slot;

typedef struct cg {
    sluice_context *ctx;
    const sluice_pipeline *p;
    const sl_plan *plan; /* liveness and the live map entries come from it */
    int first, last;    /* stages */
    const sl_tuning *tuning;
    sl_tuning override;      /* SLUICE_CUDA_TUNING, when set */
    int forced_min_blocks;   /* its third number (or two: narrow_scan_rounds), 0 when not given */
    bool max_items_set;      /* SLUICE_CUDA_MAX_ITEMS took effect (max_items_override) */
    int items;
    int rounds;              /* a tile is this many rounds of items x threads rows (rounds_of) */

    int *level;         /* per column: 0 = available before any look-back, k = after phase k */
    bool *in_group;     /* per column: used in registers by the kernel */
    bool *read_by_stages; /* per column: an expression, flag, scan or key of the group reads it
                             (an input the group only writes out is not) */
    bool *made;         /* per column: produced by a stage of the group */
    bool *needed_after; /* per column */

    cg_slot *slots;
    int nslots;
    int phases;
    int final_alive_level;
    const sl_reduce *reduce; /* the reduce ending the group, or NULL */
    int reduce_stage, reduce_slot;

    cg_field *fields;   /* all fields of all phases */
    int nfields;
    int *field_phase;
    size_t state_size[SL_CG_MAX_PHASES + 1]; /* [phase] */
    size_t payload_size[SL_CG_MAX_PHASES + 1]; /* [phase]: the end of its last field that is
                                                  not a batch constant */
    size_t carry_offset[SL_CG_MAX_PHASES + 1];

    /* shared-memory stages (kernels/sl_pipe.cuh): per input, whether the copy engine brings
       it in and where it lands in a stage; a stage's size (BUF) */
    bool *staged;
    size_t *stage_offset;
    bool overlapped; /* one look-back phase on sm_90+: emit_overlapped_kernel's shape */
    /* which states of the default mode take the chunked look-back (phase_chunks); set by
       SLUICE_CUDA_CHUNKS for measurements: 0 none, all every state */
    enum { CHUNKS_NARROW, CHUNKS_NONE, CHUNKS_ALL } chunks;
    /* the kernels are compiled at the most resident blocks, resident_blocks' or fewer, whose
       spill stores stay within the tuning row's spill_bytes (out->fit_blocks); off with
       SLUICE_CUDA_FIT=0, for measurements against the blocks asked */
    bool fit;
    /* SLUICE_CUDA_STORE=direct: each thread stores its own rows of the outputs (store_blocked)
       in place of the block's store transposed through shared memory, which costs two block
       barriers a store (a tile in four rounds: eight); a tile of rounds then needs no store
       buffer after its stages. For measurements against the default. */
    bool direct_stores;
    /* 1- and 2-byte columns packed in a thread's registers (sl::items, crosses_memory); off with
       SLUICE_CUDA_PACK=0, for measurements against the packing */
    bool pack;
    /* a max or min scan of a packed 2-byte column works two rows a word (emit_pairs): on
       sm_90 and later, where the 16x2 picks are instructions; SLUICE_CUDA_PAIRS=0 turns it
       off, for measurements against a row at a time */
    bool pairs;
    bool aggregate;  /* a whole-stream reduce and nothing else to scan: sl::aggregate_loop */
    bool commutative; /* aggregate, and every value's operator may take rows in any order */
    size_t staged_bytes, buf_bytes;

    sl_strbuf sb;
    sl_codegen *out;
} cg;

typedef struct level_visit {
    const cg *g;
    int max_level;
    bool *used;
} level_visit;

static void visit_level(void *payload, int column) {
    level_visit *v = payload;
    if (v->g->level[column] > v->max_level) v->max_level = v->g->level[column];
    if (v->used) v->used[column] = true;
}

static int expr_level(const cg *g, const sl_expr *e, bool *used) {
    level_visit v = {g, 0, used};
    if (e) sl_expr_visit_columns(e, visit_level, &v);
    return v.max_level;
}

static int column_level(const cg *g, int column, bool *used) {
    if (column < 0) return 0;
    if (used) used[column] = true;
    return g->level[column];
}

static int new_field(cg *g, int phase, sluice_type t) {
    cg_field *f = sl_realloc(g->ctx, g->fields, (size_t)(g->nfields + 1) * sizeof *f);
    int *fp = sl_realloc(g->ctx, g->field_phase, (size_t)(g->nfields + 1) * sizeof *fp);
    if (f) g->fields = f;
    if (fp) g->field_phase = fp;
    if (!f || !fp) return -1;
    g->fields[g->nfields] = (cg_field){t, t, 0, g->nfields, false};
    g->field_phase[g->nfields] = phase;
    return g->nfields++;
}

static sluice_status add_slot(cg *g, cg_slot slot) {
    cg_slot *s = sl_realloc(g->ctx, g->slots, (size_t)(g->nslots + 1) * sizeof *s);
    if (!s) return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    g->slots = s;
    g->slots[g->nslots++] = slot;
    return SLUICE_OK;
}

/* ---- per stage kind: what a stage adds to the kernel's analysis --------------------------- */

typedef struct analysis {
    bool any_compact;  /* the group compacts */
    int compact_level; /* highest carry level a compaction's flag reads */
} analysis;

static sluice_status analyse_map(cg *g, int s, analysis *a) {
    (void)a;
    const sl_stage *st = &g->p->stages[s];
    for (int k = 0; k < st->map.count; k++) {
        if (!g->plan->map_entry_live[s][k]) continue; /* nothing needs it */
        int c = st->map.columns[k];
        (void)expr_level(g, st->map.exprs[k], g->in_group); /* marks what it reads */
        g->level[c] = g->plan->level[c]; /* the plan's carry analysis */
        g->made[c] = true;
        g->in_group[c] = true;
    }
    return SLUICE_OK;
}

static sluice_status analyse_compact(cg *g, int s, analysis *a) {
    const sl_stage *st = &g->p->stages[s];
    a->any_compact = true;
    (void)column_level(g, st->compact.by, g->in_group);
    if (g->plan->reads_level[s] > a->compact_level) a->compact_level = g->plan->reads_level[s];
    return SLUICE_OK;
}

/* One slot of scan state: a scan stage's, or (reduce) one of a reduce's values, at look-back
 * phase `phase`. A reduce's value has its value fields only: where its segments start is
 * the reduce's own state (SLOT_REDUCE), one copy for all its values (analyse_reduce). */
static sluice_status add_scan_slot(cg *g, int s, const sl_scan *sc, int phase, bool reduce_value) {
    const sluice_pipeline *p = g->p;
    for (int f = 0; f < sc->nfields; f++) (void)expr_level(g, sc->of[f], g->in_group);
    if (sc->segments == SL_SEGMENTS_HEADFLAG || sc->segments == SL_SEGMENTS_KEY)
        (void)column_level(g, sc->segment_column, g->in_group);
    if (phase > SL_CG_MAX_PHASES)
        return sl_error(g->ctx, SLUICE_ERR_LIMIT,
                        "stage %d: more than %d scans depend on each other in one pass; "
                        "put a sort between them or simplify the pipeline",
                        s + 1, SL_CG_MAX_PHASES);
    if (phase > g->phases) g->phases = phase;
    cg_slot slot = {.kind = SLOT_SCAN, .stage = s, .sc = sc, .phase = phase, .flag_field = -1,
                    .interior_field = -1, .first_field = -1, .last_field = -1,
                    .count_field = -1, .total_field = -1, .restart_field = -1};
    for (int f = 0; f < sc->nfields; f++) {
        if ((slot.value_field[f] = new_field(g, phase, sc->acc[f])) < 0)
            return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
        if (sc->into[f] >= 0) {
            g->level[sc->into[f]] = phase;
            g->made[sc->into[f]] = true;
            g->in_group[sc->into[f]] = true;
        }
    }
    if (sc->segments != SL_SEGMENTS_NONE && !reduce_value) {
        slot.flag_field = new_field(g, phase, SLUICE_BOOL);
        if (sc->segments == SL_SEGMENTS_KEY) {
            sluice_type kt = p->columns[sc->segment_column].type;
            slot.interior_field = new_field(g, phase, SLUICE_BOOL);
            slot.first_field = new_field(g, phase, kt);
            slot.last_field = new_field(g, phase, kt);
        }
        if (slot.flag_field < 0 || slot.interior_field < -1 || slot.first_field < -1 ||
            slot.last_field < -1 ||
            (sc->segments == SL_SEGMENTS_KEY && slot.last_field < 0))
            return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    }
    return add_slot(g, slot);
}

static sluice_status analyse_scan(cg *g, int s, analysis *a) {
    (void)a;
    /* One look-back after what it reads and the compactions before it: the plan's
     * carry analysis (core/plan/plan.h). */
    return add_scan_slot(g, s, &g->p->stages[s].scan, g->plan->stage_phase[s], false);
}

static sluice_status analyse_sort(cg *g, int s, analysis *a) {
    (void)s;
    (void)a;
    return sl_error(g->ctx, SLUICE_ERR_INVALID_ARGUMENT,
                    "internal: a sort stage inside a fused group");
}

/* A reduce (always the group's last stage): each value is a scan slot, and one more slot
 * (SLOT_REDUCE) says which rows close a segment and where the segment's row goes. They all
 * sit in the group's last phase, after every scan and compaction before them: the outputs
 * of that phase are the reduce's rows (kernels/sl_tile.cuh, "reduce"), and the key column's
 * registers, overwritten with the closed segments' keys there, are not read again. Its
 * state (fields in order):
 *   seen      a row reached the reduce in the span
 *   fh        head flags: the span's first row carries a head flag
 *   fk, lk    keys: the span's first and last key
 *   cb, ct    segments closed inside the span: cb starts from 0 at each batch (the row's
 *             place in the batch's output), ct never (the segment index)
 *   rs        the values restart in the span (segmented reduces): head flags and offsets, a
 *             row of the span starts a segment (its first row included); keys, a key
 *             boundary lies between two rows of the span
 * A segment closes at a row that starts a new one after an earlier row (a head flag, or a
 * key unlike the last one); the closed segment's values are the values' states before that
 * row. Offsets segments close at their last row (and the empty ones in the close kernel).
 * What stays open at a batch's end or at flush is the carry; the close kernel emits it.
 * The values hold their value fields only and restart where this one state says
 * (emit_reduce_value_take): segment fields of their own, as a segmented scan has, would be
 * a copy per value (a dozen values by an i16 key: 168 bytes of state instead of 96, which
 * ptxas kept only by spilling about 1 KB per thread). */
static sluice_status analyse_reduce(cg *g, int s, analysis *a) {
    const sluice_pipeline *p = g->p;
    const sl_reduce *r = &p->stages[s].reduce;
    int phase = g->plan->stage_phase[s];
    if (phase < g->phases) phase = g->phases;
    if (a->any_compact && phase < a->compact_level + 1) phase = a->compact_level + 1;
    if (phase < 1) phase = 1;
    g->reduce = r;
    g->reduce_stage = s;
    for (int j = 0; j < r->nvalues; j++) SL_TRY(add_scan_slot(g, s, &r->values[j], phase, true));
    cg_slot slot = {.kind = SLOT_REDUCE, .stage = s, .phase = phase, .flag_field = -1,
                    .interior_field = -1, .first_field = -1, .last_field = -1,
                    .count_field = -1, .total_field = -1, .restart_field = -1};
    slot.flag_field = new_field(g, phase, SLUICE_BOOL);
    slot.count_field = new_field(g, phase, SLUICE_I64);
    slot.total_field = new_field(g, phase, SLUICE_I64);
    if (r->segments != SL_SEGMENTS_NONE) {
        slot.restart_field = new_field(g, phase, SLUICE_BOOL);
        if (slot.restart_field < 0)
            return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    }
    /* Offsets segments never join (a segment closes at its own last row), so inside a batch
       every prefix holds the carry's two counts: they stay out of the look-back. */
    if (r->segments == SL_SEGMENTS_OFFSETS && slot.count_field >= 0 && slot.total_field >= 0)
        g->fields[slot.count_field].batch_constant = g->fields[slot.total_field].batch_constant = true;
    if (r->segments == SL_SEGMENTS_HEADFLAG) slot.interior_field = new_field(g, phase, SLUICE_BOOL);
    if (r->segments == SL_SEGMENTS_KEY) {
        sluice_type kt = p->columns[r->segment_column].type;
        slot.first_field = new_field(g, phase, kt);
        slot.last_field = new_field(g, phase, kt);
    }
    if (slot.flag_field < 0 || slot.count_field < 0 || slot.total_field < 0 ||
        slot.interior_field < -1 || slot.first_field < -1 || slot.last_field < -1 ||
        (r->segments == SL_SEGMENTS_HEADFLAG && slot.interior_field < 0) ||
        (r->segments == SL_SEGMENTS_KEY && slot.last_field < 0))
        return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    if (r->segments == SL_SEGMENTS_HEADFLAG || r->segments == SL_SEGMENTS_KEY)
        (void)column_level(g, r->segment_column, g->in_group);
    /* the key column keeps its id and holds each segment's key after the stage */
    if (r->index_column >= 0) {
        g->made[r->index_column] = true;
        g->in_group[r->index_column] = true;
        g->level[r->index_column] = phase;
    }
    g->reduce_slot = g->nslots;
    return add_slot(g, slot);
}

static sluice_status (*const analyse_stage[])(cg *g, int s, analysis *a) = {
    [SL_STAGE_MAP] = analyse_map,
    [SL_STAGE_COMPACT] = analyse_compact,
    [SL_STAGE_SCAN] = analyse_scan,
    [SL_STAGE_SORT] = analyse_sort,
    [SL_STAGE_REDUCE] = analyse_reduce,
};

/* A count scan of the rows the compaction keeps (not segmented, not reset per batch, in the
 * compaction count's phase, with no compaction after it in the group) counts the same rows as
 * that count: inside a batch both prefixes are equal, and the scan's is the count's plus the
 * scan's carry. So its value field stays out of the look-back (a batch constant: the carry's
 * value, set after the look-back), its rows contribute nothing to it, its outputs add the
 * count's prefix (emit_outputs) and the carry written after the batch adds the batch's count
 * (Phase::close_carry). The cull's `compact` then `scan: {op: count}` (its slots) moves one
 * 8-byte count through the look-back instead of two. */
static int compactions_before(const cg *g, int stage);
static void derive_counts(cg *g, const cg_slot *count) {
    for (int si = 0; si < g->nslots; si++) {
        cg_slot *slot = &g->slots[si];
        if (slot->kind != SLOT_SCAN || slot->phase != count->phase) continue;
        const sl_scan *sc = slot->sc;
        if (sc->op != SL_SCAN_COUNT || sc->nfields != 1 || sc->acc[0] != SLUICE_I64 ||
            sc->segments != SL_SEGMENTS_NONE || sc->reset_per_batch ||
            compactions_before(g, slot->stage) != compactions_before(g, g->last))
            continue;
        slot->from_count = true;
        g->fields[slot->value_field[0]].batch_constant = true;
    }
}

/* The field of the compaction's count in phase `phase` (derive_counts' scans read it). */
static int count_field_of(const cg *g, int phase) {
    for (int si = 0; si < g->nslots; si++)
        if (g->slots[si].kind == SLOT_COUNT && g->slots[si].phase == phase)
            return g->slots[si].count_field;
    return -1;
}

static sluice_status analyse(cg *g) {
    const sluice_pipeline *p = g->p;
    int n = p->ncolumns;
    g->level = sl_calloc(g->ctx, (size_t)n, sizeof *g->level);
    g->in_group = sl_calloc(g->ctx, (size_t)n, sizeof *g->in_group);
    g->read_by_stages = sl_calloc(g->ctx, (size_t)n, sizeof *g->read_by_stages);
    g->made = sl_calloc(g->ctx, (size_t)n, sizeof *g->made);
    g->needed_after = sl_calloc(g->ctx, (size_t)n, sizeof *g->needed_after);
    if (!g->level || !g->in_group || !g->read_by_stages || !g->made || !g->needed_after)
        return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    memcpy(g->needed_after, g->plan->need_after[g->last - 1], (size_t)n * sizeof *g->needed_after);

    analysis a = {false, 0};
    for (int s = g->first; s < g->last; s++) SL_TRY(analyse_stage[p->stages[s].kind](g, s, &a));
    bool any_compact = a.any_compact;
    int compact_level = a.compact_level;
    /* A reduce's rows are the group's rows out: it counts them itself (SLOT_REDUCE), and
     * every column needed after it is written like a compaction's (rows move). */
    if (any_compact && g->reduce) {
        g->final_alive_level = compact_level;
    } else if (any_compact) {
        int phase = compact_level + 1;
        if (phase > SL_CG_MAX_PHASES)
            return sl_error(g->ctx, SLUICE_ERR_LIMIT,
                            "a compaction depends on too many chained scans (more than %d)",
                            SL_CG_MAX_PHASES);
        if (phase > g->phases) g->phases = phase;
        g->final_alive_level = compact_level;
        cg_slot slot = {.kind = SLOT_COUNT, .stage = -1, .phase = phase, .flag_field = -1,
                        .interior_field = -1, .first_field = -1, .last_field = -1,
                        .total_field = -1, .restart_field = -1};
        if ((slot.count_field = new_field(g, phase, SLUICE_I64)) < 0)
            return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
        SL_TRY(add_slot(g, slot));
        derive_counts(g, &g->slots[g->nslots - 1]);
    }

    /* Columns the kernel holds in registers: those it reads or makes, and those it must
     * write. An offsets input is read through its pointer, never into registers. */
    sl_codegen *o = g->out;
    if (g->reduce) any_compact = true;
    o->compacts = any_compact;
    o->reduces = g->reduce != NULL;
    int cap = n ? n : 1;
    o->inputs = sl_calloc(g->ctx, (size_t)cap, sizeof *o->inputs);
    o->outputs = sl_calloc(g->ctx, (size_t)cap, sizeof *o->outputs);
    o->passthrough = sl_calloc(g->ctx, (size_t)cap, sizeof *o->passthrough);
    if (!o->inputs || !o->outputs || !o->passthrough)
        return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    o->offsets_input = -1;
    /* what the stages read or make, before the columns written out join it */
    memcpy(g->read_by_stages, g->in_group, (size_t)n * sizeof *g->read_by_stages);
    /* Needed later *and* existing at the group's end: a column a later stage defines is not
     * this group's to write (it has no data yet). */
    const bool *live_at_end = p->stages[g->last - 1].live_after;
    for (int c = 0; c < n; c++) {
        bool offsets = p->columns[c].role == SLUICE_ROLE_OFFSETS;
        if (g->needed_after[c] && !offsets && live_at_end[c]) {
            if (g->made[c] || any_compact) {
                o->outputs[o->noutputs++] = c;
                g->in_group[c] = true;
            } else {
                o->passthrough[o->npassthrough++] = c;
            }
        }
    }
    for (int s = g->first; s < g->last; s++) {
        const sl_stage *st = &p->stages[s];
        int c = sl_stage_kind_desc_of(st)->offsets_column(st);
        if (c >= 0) {
            if (o->offsets_input < 0) {
                o->offsets_input = o->ninputs;
                o->inputs[o->ninputs++] = c;
            } else if (o->inputs[o->offsets_input] != c) {
                return sl_error(g->ctx, SLUICE_ERR_LIMIT,
                                "stage %d: two different offsets inputs in one pass are not "
                                "supported on the GPU",
                                s + 1);
            }
            o->has_offsets = true;
        }
    }
    for (int c = 0; c < n; c++)
        if (g->in_group[c] && !g->made[c] && p->columns[c].role != SLUICE_ROLE_OFFSETS)
            o->inputs[o->ninputs++] = c;
    return SLUICE_OK;
}

/* ---- state layout -------------------------------------------------------------------- */

/* Whether environment variable `name` is set to `value` (the measurement switches, read
 * whenever a group is generated: they change its source, hence its cache entry). */
static bool env_is(const char *name, const char *value) {
    const char *set = getenv(name);
    return set && strcmp(set, value) == 0;
}

/* Fields of a phase sorted by size, largest first, so the struct has no inner padding;
 * the device struct is printed in the same order and checked with static_assert. */
/* The order of phase `phase`'s fields in its state: the fields the look-back moves first,
 * then the batch constants; each part by size, largest first, then by field id. */
static void phase_order(const cg *g, int phase, int *order, int *count) {
    *count = 0;
    for (int constant = 0; constant < 2; constant++)
        for (size_t sz = 8; sz >= 1; sz /= 2)
            for (int f = 0; f < g->nfields; f++)
                if (g->field_phase[f] == phase && sluice_type_size(g->fields[f].held) == sz &&
                    g->fields[f].batch_constant == (constant != 0))
                    order[(*count)++] = f;
}

static void layout_phase(cg *g, int phase, int *order, int *count) {
    phase_order(g, phase, order, count);
    size_t off = 0, align = 4, payload = 0;
    for (int k = 0; k < *count; k++) {
        cg_field *f = &g->fields[order[k]];
        size_t sz = sluice_type_size(f->held);
        if (sz > align) align = sz;
        off = (off + sz - 1) / sz * sz;
        f->offset = off;
        off += sz;
        if (!f->batch_constant) payload = off;
    }
    if (off == 0) off = 4;
    g->state_size[phase] = (off + align - 1) / align * align;
    g->payload_size[phase] = payload;
}

/* The kernels/sl_monoid.h name of a builtin operator's combine. */
static const char *monoid_fn(sl_scan_op op) {
    switch (op) {
    case SL_SCAN_SUM:
    case SL_SCAN_COUNT: return "sum";
    case SL_SCAN_PROD: return "prod";
    case SL_SCAN_MIN: return "min";
    case SL_SCAN_MAX: return "max";
    case SL_SCAN_AND: return "and";
    case SL_SCAN_OR: return "or";
    case SL_SCAN_XOR: return "xor";
    default: return NULL;
    }
}

/* The 4-byte integer a narrow integer or bool accumulator may be held in: its sign or zero
 * extension (a bool's 0 or 1); `t` itself for the others. */
static sluice_type widened_type(sluice_type t) {
    switch (t) {
    case SLUICE_I8:
    case SLUICE_I16: return SLUICE_I32;
    case SLUICE_U8:
    case SLUICE_U16:
    case SLUICE_BOOL: return SLUICE_U32;
    default: return t;
    }
}

/* Narrow scan values held in 4-byte integers. PTX has no 8- or 16-bit arithmetic: every
 * combine of an i8 max extends both operands and narrows the result, which in a kernel of 64
 * rows a thread came to 1,041 conversions against the i16 scan's 95 (bench/RESULTS.md,
 * thirty-seventh session). Held as its extension, a value is extended once, where a row
 * makes it (emit_element), and narrowed once, where an output column stores it (the
 * assignment's conversion). Exact for the operators taken: a wrapping sum or product of the
 * extensions has the narrow result's low bits (outputs and the host's carry read only
 * those: little-endian, carry_bytes.c); min, max, and, or and xor of canonical extensions
 * give the canonical extension of the narrow result. A scan stage's builtin operators only:
 * not a reduce's values (its run states hold them as the acc type), declared operators (their
 * combines are expressions of the narrow type) or linrec. Only where the phase's state
 * stays the same size, so the look-back moves no more bytes (an i8 or i16 value alone, or
 * beside 4-byte fields). SLUICE_CUDA_WIDEN=0 keeps every field narrow, for measurements. */
static void widen_narrow_fields(cg *g, int phase, int *order) {
    if (env_is("SLUICE_CUDA_WIDEN", "0")) return;
    int count = 0;
    layout_phase(g, phase, order, &count);
    const size_t narrow_size = g->state_size[phase];
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase || slot->kind != SLOT_SCAN || slot->from_count ||
            (g->reduce && slot->stage == g->reduce_stage))
            continue;
        if (!monoid_fn(slot->sc->op)) continue; /* linrec, a declared operator */
        for (int f = 0; f < slot->sc->nfields; f++) {
            cg_field *fd = &g->fields[slot->value_field[f]];
            if (widened_type(fd->type) == fd->type) continue;
            fd->held = widened_type(fd->type);
            layout_phase(g, phase, order, &count);
            if (g->state_size[phase] != narrow_size) fd->held = fd->type;
        }
    }
}

/* A fused kernel's static shared memory (scan storages, hand-over slots, the tile queue), about:
 * what a block needs beside its stages. */
#define STATIC_SMEM_ALLOWANCE 3072u

/* Blocks a multiprocessor holds by shared memory, with `dynamic_smem` bytes of stages each
 * (one at least: a launch never asks for less). */
static int blocks_by_smem(size_t dynamic_smem) {
    const int n = (int)(SL_CG_SMEM_PER_SM / (dynamic_smem + STATIC_SMEM_ALLOWANCE));
    return n < 1 ? 1 : n;
}

/* Registers a thread may hold so that `blocks` blocks of `threads` threads reside on one
 * multiprocessor (sm_70 to sm_90): its 65536 registers lie in four partitions of 16384, each
 * warp takes its registers from one partition (the warps spread over the four) in units of
 * 256, so the partition with the most warps decides, not the total: two blocks of 288
 * threads (18 warps, 5 in two partitions) fit at 96 a thread, not at the 112 that 65536 / 576
 * would suggest. ptxas reckons __launch_bounds__' minimum blocks the same way. */
static int registers_for_blocks(int threads, int blocks) {
    const int warps = blocks * ((threads + 31) / 32), per_partition = (warps + 3) / 4;
    return 16384 / per_partition / 256 * 256 / 32;
}

/* Shared-memory stages of BUF bytes: three for the kernel with a look-back warp (one tile
 * finishing, one reduced, one arriving) and for the aggregate loop (tiles arriving while one
 * is reduced), two otherwise. */
static int stages_of(const cg *g) { return g->overlapped || g->aggregate ? 3 : 2; }

/* Whether the reduce's values may fold rows in any order: built-in operators whose result
 * does not depend on it (integer ones; float sums and products, whose rounding the contract
 * leaves to the backend, as the CPU's summing lanes do). Float min and max are not: the
 * order picks between -0.0 and +0.0 and between NaN payloads. Declared operators and linrec
 * never. The reduce's own fields (a flag and counts) are an or and sums. */
static bool reduce_commutative(const sl_reduce *r) {
    for (int j = 0; j < r->nvalues; j++) {
        const sl_scan *v = &r->values[j];
        bool exact = true;
        for (int f = 0; f < v->nfields; f++) exact = exact && !sl_type_is_float(v->acc[f]);
        switch (v->op) {
        case SL_SCAN_SUM: case SL_SCAN_PROD: case SL_SCAN_AND: case SL_SCAN_OR:
        case SL_SCAN_XOR: case SL_SCAN_COUNT:
            break;
        case SL_SCAN_MIN: case SL_SCAN_MAX:
            if (!exact) return false;
            break;
        default:
            return false;
        }
    }
    return true;
}

static int input_of(const cg *g, int column);

/* The live map entry of the group (before its reduce) that makes column c: its stage and
 * index, or false when no map of the group makes it. */
static bool map_making(const cg *g, int c, int *stage, int *entry) {
    for (int s = g->first; s < g->last && s < g->reduce_stage; s++) {
        const sl_stage *st = &g->p->stages[s];
        if (st->kind != SL_STAGE_MAP) continue;
        for (int k = 0; k < st->map.count; k++)
            if (st->map.columns[k] == c && g->plan->map_entry_live[s][k]) {
                *stage = s;
                *entry = k;
                return true;
            }
    }
    return false;
}

typedef struct row_visit {
    const cg *g;
    bool *needed; /* the columns a row's key reads, inputs and maps (may be NULL) */
    int depth;
    bool ok;
} row_visit;

static void visit_row_column(void *payload, int column);

/* Whether column c at a row is computable from the kernel's inputs at that row alone: an
 * input, or made by a map of the group from such columns (a scan's or a flag's column is
 * not). Marks what it reads in v->needed. */
static bool row_computable(row_visit *v, int c) {
    if (v->needed && v->needed[c]) return true;
    if (input_of(v->g, c) >= 0) {
        if (v->needed) v->needed[c] = true;
        return true;
    }
    int s, k;
    if (v->depth > 64 || !map_making(v->g, c, &s, &k)) return false;
    v->depth++;
    sl_expr_visit_columns(v->g->p->stages[s].map.exprs[k], visit_row_column, v);
    v->depth--;
    if (v->ok && v->needed) v->needed[c] = true;
    return v->ok;
}

static void visit_row_column(void *payload, int column) {
    row_visit *v = payload;
    if (v->ok && !row_computable(v, column)) v->ok = false;
}

/* Whether a reduce over runs of keys can run without look-back (sl_tile.cuh
 * runs_warp_loop): each warp counts the key changes in its rows before anything else,
 * so every row must count (no compaction before the reduce in the group) and the key must be
 * readable or computable at any row from the kernel's inputs at that row: an input, or made
 * by the group's maps from inputs (RunKeys::at computes it). */
static bool runs_countable(const cg *g) {
    const sl_reduce *r = g->reduce;
    if (r->segments != SL_SEGMENTS_KEY || compactions_before(g, g->last) != 0) return false;
    row_visit v = {g, NULL, 0, true};
    return row_computable(&v, r->segment_column);
}

/* Whether the group is a reduce over rows that nothing else scans, without segments, over
 * offsets segments or over countable runs of keys: then no row's output depends on an earlier
 * tile (an offsets segment's place is its ordinal, a run's the key changes before it, which
 * each warp counts first), only the batch's total and the segments crossing blocks or warps
 * do, and the kernel is kernels/sl_tile.cuh's aggregate_loop, segments_warp_loop or
 * runs_warp_loop (no look-back). */
static bool aggregate_only(const cg *g) {
    if (!g->reduce || g->phases != 1) return false;
    if (g->reduce->segments != SL_SEGMENTS_NONE && g->reduce->segments != SL_SEGMENTS_OFFSETS &&
        !runs_countable(g))
        return false;
    for (int i = 0; i < g->nslots; i++)
        if (g->slots[i].stage != g->reduce_stage) return false;
    return true;
}

/* Whether the kernel is sl_tile.cuh's segments_warp_loop (an aggregate loop over offsets
 * segments): its Tile has no outputs(); its Kernel writes a segment's row from a state
 * (write_row) and says whether a state saw a head (restarted). */
static bool segments_aggregate(const cg *g) {
    return g->aggregate && g->reduce && g->reduce->segments == SL_SEGMENTS_OFFSETS;
}

/* Whether the kernel is sl_tile.cuh's runs_warp_loop (an aggregate loop over runs of
 * keys): as segments_aggregate, and its Kernel names the key column (RunKeys). */
static bool runs_aggregate(const cg *g) {
    return g->aggregate && g->reduce && g->reduce->segments == SL_SEGMENTS_KEY;
}

/* Either loop over segments without look-back: rows written by Kernel::write_row, warps
 * leaving records in scratch. */
static bool block_records_loop(const cg *g) { return segments_aggregate(g) || runs_aggregate(g); }

/* The threads that share a tile: the block's, or in the loops over segments without
 * look-back (sl_tile.cuh segments_warp_loop, runs_warp_loop) a warp's. */
static bool warp_tiles(const cg *g) { return block_records_loop(g); }
/* Whether the group's loop streams its tiles through shared-memory stages (the copy engine's
 * queue, sl_pipe.cuh): every loop but the commutative aggregate loop and the warp loops,
 * which read their rows from global memory. Only these have a stage (BUF), staged columns and
 * Kernel::issue_loads. */
static bool stages_tiles(const cg *g) { return !g->commutative && !warp_tiles(g); }
static int tile_threads(const cg *g) { return warp_tiles(g) ? 32 : g->tuning->block_threads; }

/* Whether phase `phase` is the one whose Tile::outputs writes the reduce's rows (and nothing
 * else anything reads: the reduce ends the group, and it is in its last phase), so a thread
 * whose items close no segment may skip them (Tile::quiet). */
static bool reduce_outputs_phase(const cg *g, int phase) {
    return g->reduce && !block_records_loop(g) && g->slots[g->reduce_slot].phase == phase &&
           phase == g->phases;
}

/* ---- printing helpers ---------------------------------------------------------------- */

static const char *ctype(sluice_type t) { return sl_expr_c_type_name(t); }

static void emit_value(sl_strbuf *sb, sluice_type t, sl_value v) {
    v = sl_value_cast(v, t);
    switch (t) {
    case SLUICE_F32: {
        float f = (float)v.f;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        sl_strbuf_printf(sb, "sl_f32_from_bits(0x%08xu)", bits);
        break;
    }
    case SLUICE_F64: {
        uint64_t bits;
        memcpy(&bits, &v.f, 8);
        sl_strbuf_printf(sb, "sl_f64_from_bits(0x%016llxull)", (unsigned long long)bits);
        break;
    }
    case SLUICE_F16:
        sl_strbuf_printf(sb, "((sl_half)0x%04xu)", (unsigned)sl_f32_to_f16((float)v.f));
        break;
    case SLUICE_BOOL: sl_strbuf_printf(sb, "((sl_bool)%u)", v.u ? 1u : 0u); break;
    default:
        sl_strbuf_printf(sb, "((%s)0x%llxull)", ctype(t), (unsigned long long)v.u);
        break;
    }
}

static void name_column(void *payload, int column, sl_strbuf *sb) {
    (void)payload;
    sl_strbuf_printf(sb, "c%d[i]", column);
}
static void name_param(void *payload, int param, sl_strbuf *sb) {
    (void)payload;
    sl_strbuf_printf(sb, "p%d", param);
}
static void name_field(void *payload, int side, int field, sl_strbuf *sb) {
    (void)payload;
    sl_strbuf_printf(sb, "%s_%d", side == 0 ? "l" : "r", field);
}
static const sl_emit_names row_names = {name_column, name_param, name_field, NULL};

static void emit_expr(sl_strbuf *sb, const sl_expr *e) { sl_expr_emit_c(e, &row_names, sb); }

/* The number of compactions of the group before stage `stage` (all of them for stage ==
 * last): element() names "row in the batch and kept by the first k compactions" alive<k>. */
static int compactions_before(const cg *g, int stage) {
    int k = 0;
    for (int s = g->first; s < stage; s++) k += g->p->stages[s].kind == SL_STAGE_COMPACT;
    return k;
}

static const char *type_name(sluice_type t) { return sl_type_info_of(t)->name; }

/* The combine of one value field: prints an expression of l.f<id>/r.f<id> fields through
 * kernels/sl_monoid.h, the definition core/ir/monoid.c calls on the CPU. */
static void emit_value_combine(cg *g, const sl_scan *sc, const cg_slot *slot, int f) {
    sl_strbuf *sb = &g->sb;
    if (sc->op == SL_SCAN_LINREC) {
        /* both fields accumulate in one type (the loader gives a and b the same acc) */
        int a = slot->value_field[0], b = slot->value_field[1];
        const char *t = type_name(sc->acc[f]);
        if (f == 0)
            sl_strbuf_printf(sb, "sl_mon_linrec_a_%s(l.f%d, r.f%d)", t, a, a);
        else
            sl_strbuf_printf(sb, "sl_mon_linrec_b_%s(l.f%d, r.f%d, r.f%d)", t, b, a, b);
        return;
    }
    if (sc->op == SL_SCAN_CUSTOM) {
        const sl_operator *op = sc->custom;
        sl_strbuf_append(sb, "[&]() {");
        for (int k = 0; k < op->nfields; k++)
            sl_strbuf_printf(sb, " const %s l_%d = l.f%d, r_%d = r.f%d;",
                             ctype(op->field_types[k]), k, slot->value_field[k], k,
                             slot->value_field[k]);
        sl_strbuf_printf(sb, " return (%s)(", ctype(op->field_types[f]));
        emit_expr(sb, op->combine[f]);
        sl_strbuf_append(sb, "); }()");
        return;
    }
    int id = slot->value_field[f];
    sl_strbuf_printf(sb, "sl_mon_%s_%s(l.f%d, r.f%d)", monoid_fn(sc->op),
                     type_name(g->fields[id].held), id, id);
}

static bool slot_resets(const cg *g, const cg_slot *slot) {
    return slot->kind == SLOT_COUNT || slot->kind == SLOT_REDUCE || slot->sc->reset_per_batch;
}

/* Whether phase `phase` takes the ordered look-back (kernels/sl_lookback.cuh): only under
 * `determinism: run_to_run`, and only when one of its combines gives different bits in
 * another association: a float sum, product or recurrence, or a declared operator (its
 * associativity is only sampled). Integer, bool, min/max, bitwise and count combines are
 * exact, so the fast look-back already gives the same bits every run. */
static bool phase_ordered(const cg *g, int phase) {
    if (g->p->determinism != SL_DETERMINISM_RUN_TO_RUN) return false;
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase || slot->kind != SLOT_SCAN) continue;
        const sl_scan *sc = slot->sc;
        if (sc->op == SL_SCAN_CUSTOM) return true;
        if (sc->op != SL_SCAN_SUM && sc->op != SL_SCAN_PROD && sc->op != SL_SCAN_LINREC) continue;
        for (int f = 0; f < sc->nfields; f++)
            if (sl_type_is_float(sc->acc[f])) return true;
    }
    return false;
}

/* Whether the large kernel of the loop with a look-back warp takes the chunked look-back
 * (kernels/sl_lookback.cuh, lookback_exclusive_ordered) for phase `phase` although its
 * association may change from run to run: for look-back states of at most 4 bytes (one
 * packed 8-byte word with the status: a 4-byte sum, min, max, ...), where it measured faster
 * than the fast look-back on the H200 (bench/RESULTS.md, nineteenth session: the f32 scan
 * 67% -> 76.5% of copy); wider states lost or held there (before chunk totals existed). The
 * small kernel, the two-stage loop and phase_ordered's phases are unaffected.
 * SLUICE_CUDA_CHUNKS=all gives every state the chunked look-back, with chunk totals over 4
 * bytes: the look-back run_to_run's float states take, which measured faster than the fast
 * look-back on an H100 for the f32 recurrence and the segmented sums (bench/RESULTS.md,
 * thirty-third session), for the A/B on the H200 that decides the default. */
static bool phase_chunks(const cg *g, int phase) {
    if (phase_ordered(g, phase)) return false;
    switch (g->chunks) {
    case CHUNKS_NONE: return false;
    case CHUNKS_ALL: return true;
    default: return g->payload_size[phase] <= 4;
    }
}

/* Whether the ordered look-back of phase `phase` (in the loop with a look-back warp) folds the
 * totals that each chunk's last tile publishes (kernels/sl_lookback.cuh, chunk_prefix_totals)
 * rather than the chunk's tiles: for chunked states wider than 4 bytes (run_to_run's, and
 * phase_chunks' under SLUICE_CUDA_CHUNKS=all); for run_to_run's, where it
 * measured faster on the H200 (bench/RESULTS.md, twenty-ninth session: the six-stage group
 * 4.74x -> 5.14x, the Pareto segmented sum 55.8% -> 57.2%, the f32 recurrence level); the
 * f32 sum's 4-byte states lost 4-5% with them, in both modes, so phase_chunks' never take
 * them. */
static bool phase_chunk_totals(const cg *g, int phase) {
    return (phase_ordered(g, phase) || phase_chunks(g, phase)) && g->payload_size[phase] > 4;
}

/* Whether every state of phase `phase` whose span holds a segment head absorbs what lies
 * left of it (kernels/sl_lookback.cuh, absorbs): each of its slots is a scan segmented by
 * head flags or offsets, whose combine takes the right side's values and sets the flag
 * where the right side's flag is set. A count, a reduce, key segments (whose right side
 * still compares its first key with the left side's last) or a plain scan in the phase
 * absorb nothing. */
static bool phase_absorbs(const cg *g, int phase) {
    bool any = false;
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase) continue;
        if (slot->kind != SLOT_SCAN || slot->from_count || slot->flag_field < 0) return false;
        const sl_scan *sc = slot->sc;
        if (sc->segments != SL_SEGMENTS_HEADFLAG && sc->segments != SL_SEGMENTS_OFFSETS)
            return false;
        if (g->reduce && slot->stage == g->reduce_stage) return false;
        any = true;
    }
    return any;
}

/* The widest column of the group, in bytes (the offsets, read a few a tile, do not count): a
 * shared-memory stage holds at least its tile, for the stores staged through it. */
static size_t widest_group_column(const cg *g) {
    const sluice_pipeline *p = g->p;
    size_t widest = 1;
    for (int c = 0; c < p->ncolumns; c++)
        if (g->in_group[c] && p->columns[c].role != SLUICE_ROLE_OFFSETS &&
            sluice_type_size(p->columns[c].type) > widest)
            widest = sluice_type_size(p->columns[c].type);
    return widest;
}

/* Whether the loop with a look-back warp is bound by look-backs that a larger tile makes
 * fewer (tuning.h, lookback_block_threads): its phase takes the fast look-back (not the
 * chunked one: phase_chunks, phase_ordered) over a state of 5 to 8 bytes, and its states
 * never end a look-back early (phase_absorbs: a segmented scan's do at the nearest head).
 * Not a compacting group whose stages at that block would leave room for one block a
 * multiprocessor: alone there it cannot hide its compaction's barriers (the cull, an f32
 * filter with an i64 count column, lost 3.5% at 512 threads where the f32 filter, two blocks
 * a multiprocessor, gained 10%: bench/RESULTS.md, twenty-second session, run 4). */
static bool lookback_bound(const cg *g) {
    if (g->phases != 1 || phase_chunks(g, 1) || phase_ordered(g, 1) || phase_absorbs(g, 1) ||
        g->payload_size[1] <= 4 || g->payload_size[1] > 8)
        return false;
    const size_t stage = (size_t)g->tuning->lookback_block_threads * (size_t)g->items *
                         widest_group_column(g);
    return !(g->out->compacts && blocks_by_smem((size_t)stages_of(g) * stage) < 2);
}

static sluice_status plan_stages(cg *g);

/* Whether plan_stages, at the group's present items, leaves an input that the group's stages
 * read (read_by_stages) out of the stages. An input the group only writes out does not
 * count: read straight from global memory, it delays no expression, flag or look-back (and
 * the larger tile it leaves measured faster: items_to_stage_inputs). */
static sluice_status read_input_unstaged(cg *g, bool *unstaged) {
    *unstaged = false;
    if (!stages_tiles(g)) return SLUICE_OK;
    SL_TRY(plan_stages(g));
    const sl_codegen *o = g->out;
    for (int k = 0; k < o->ninputs; k++)
        if (k != o->offsets_input && !g->staged[k] && g->read_by_stages[o->inputs[k]]) *unstaged = true;
    return SLUICE_OK;
}

/* Items a thread halved while a tile would leave an input that the stages read out of the
 * stages (read_input_unstaged): plan_stages reads a column that does not fit straight from
 * global memory, outside the bulk-copy ring. Taken by every loop with a look-back warp, the
 * look-back-bound block (lookback_bound, whose doubled tile brings it there most) included.
 * Measured on an H100 against the table's items (bench/RESULTS.md, forty-first and
 * forty-second sessions): an f32 recurrence (a and b) at 512 threads of 16 items staged a
 * alone and ran at 75% of copy, at 8 items both and 86%; the f64 filter 72% at 8 items (y
 * unstaged), 77% at 4; eight input columns, two compactions and two scans 69% at 256 row
 * threads of 8 items (two columns unstaged), 80% at 288 of 4. An input only written out does
 * not count: cull-visible's u64 id, unstaged at 8 items, ran at 81.5-82.4% there and at
 * 76.6-77.0% at 4 (66% at 4 items and one block); the same cull with id read by its flag ran
 * 77% both ways.
 * SLUICE_CUDA_STAGE_ITEMS=table keeps the table's items, for measurements. */
static sluice_status items_to_stage_inputs(cg *g) {
    bool unstaged;
    while (g->items > g->tuning->min_items) {
        SL_TRY(read_input_unstaged(g, &unstaged));
        if (!unstaged) break;
        g->items /= 2;
    }
    g->out->items_per_thread = g->items;
    return SLUICE_OK;
}

/* Op<phase>::ABSORBS and absorbs(s): every segment flag of the state set. */
static void emit_absorbs(cg *g, int phase) {
    if (!phase_absorbs(g, phase)) return;
    sl_strbuf *sb = &g->sb;
    sl_strbuf_printf(sb,
                     "    static constexpr bool ABSORBS = true;\n"
                     "    __device__ static __forceinline__ bool absorbs(const S%d &s) {\n"
                     "        return true",
                     phase);
    for (int si = 0; si < g->nslots; si++)
        if (g->slots[si].phase == phase) sl_strbuf_printf(sb, " && s.f%d", g->slots[si].flag_field);
    sl_strbuf_append(sb, ";\n    }\n");
}

/* A key column's value as segments compare it: a bool key is its truth value (keys 1, 2, 2,
 * 0 are two segments). */
static const char *key_read(const cg *g, int column) {
    return g->p->columns[column].type == SLUICE_BOOL ? "sl_cvt_bool_bool" : "";
}

/* The combine of a reduce's SLOT_REDUCE fields (analyse_reduce lists them): a segment
 * closes where the right span's first row starts one after a row of the left span. */
static void emit_reduce_combine(cg *g, const cg_slot *slot) {
    sl_strbuf *sb = &g->sb;
    const sl_reduce *r = g->reduce;
    int seen = slot->flag_field, cb = slot->count_field, ct = slot->total_field;
    sl_strbuf_append(sb, "        {\n            const bool join = ");
    if (r->segments == SL_SEGMENTS_HEADFLAG)
        sl_strbuf_printf(sb, "l.f%d && r.f%d && r.f%d", seen, seen, slot->interior_field);
    else if (r->segments == SL_SEGMENTS_KEY)
        sl_strbuf_printf(sb, "l.f%d && r.f%d && !sl_key_same_%s(l.f%d, r.f%d)", seen, seen,
                         type_name(g->p->columns[r->segment_column].type), slot->last_field,
                         slot->first_field);
    else
        sl_strbuf_append(sb, "false");
    sl_strbuf_printf(sb,
                     ";\n            o.f%d = l.f%d + r.f%d + (join ? 1 : 0);\n"
                     "            o.f%d = l.f%d + r.f%d + (join ? 1 : 0);\n"
                     "            o.f%d = (sl_bool)(l.f%d | r.f%d);\n",
                     cb, cb, cb, ct, ct, ct, seen, seen, seen);
    if (slot->interior_field >= 0)
        sl_strbuf_printf(sb, "            o.f%d = l.f%d ? l.f%d : r.f%d;\n", slot->interior_field,
                         seen, slot->interior_field, slot->interior_field);
    int rs = slot->restart_field;
    if (r->segments == SL_SEGMENTS_KEY) /* a boundary inside either span, or between them */
        sl_strbuf_printf(sb,
                         "            o.f%d = (sl_bool)(join || (l.f%d && l.f%d) || (r.f%d && r.f%d));\n",
                         rs, seen, rs, seen, rs);
    else if (rs >= 0)
        sl_strbuf_printf(sb, "            o.f%d = (sl_bool)(l.f%d | r.f%d);\n", rs, rs, rs);
    if (slot->first_field >= 0)
        sl_strbuf_printf(sb,
                         "            o.f%d = l.f%d ? l.f%d : r.f%d;\n"
                         "            o.f%d = r.f%d ? r.f%d : l.f%d;\n",
                         slot->first_field, seen, slot->first_field, slot->first_field,
                         slot->last_field, seen, slot->last_field, slot->last_field);
    sl_strbuf_append(sb, "        }\n");
}

/* The start of a combine of the reduce's phase: when each value of a segmented reduce takes
 * the right span's state (take_r: the left span is empty, or the right one restarts: a head
 * in it, a key boundary in it or between the spans) and when it keeps the left one's (keep_l:
 * the right span is empty, keys). Otherwise it combines both: the choices a segmented
 * scan's combine makes from its own segment fields (emit_struct). */
static void emit_reduce_value_take(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_reduce *r = g->reduce;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    int seen = rs->flag_field, restart = rs->restart_field;
    if (r->segments == SL_SEGMENTS_KEY)
        sl_strbuf_printf(sb,
                         "        const bool take_r = !l.f%d || (r.f%d && (r.f%d || "
                         "!sl_key_same_%s(l.f%d, r.f%d)));\n"
                         "        const bool keep_l = l.f%d && !r.f%d;\n",
                         seen, seen, restart, type_name(g->p->columns[r->segment_column].type),
                         rs->last_field, rs->first_field, seen, seen);
    else if (r->segments != SL_SEGMENTS_NONE)
        sl_strbuf_printf(sb, "        const bool take_r = r.f%d != 0;\n", restart);
}

/* Phase `phase`'s state S<phase>, its identity s<phase>_identity(), its combine Op<phase>,
 * and its traits Phase<phase> for kernels/sl_tile.cuh. */
static void emit_struct(cg *g, int phase) {
    sl_strbuf *sb = &g->sb;
    sl_strbuf_printf(sb, "struct __align__(%d) S%d {\n", g->state_size[phase] % 8 == 0 ? 8 : 4,
                     phase);
    /* layout_phase's order; padding between fields is the compiler's, as there */
    int *order = sl_calloc(g->ctx, (size_t)(g->nfields ? g->nfields : 1), sizeof *order), count = 0;
    size_t end = 0;
    if (order) phase_order(g, phase, order, &count);
    else g->sb.failed = true; /* reported as out of memory with the source */
    for (int k = 0; k < count; k++) {
        const cg_field *fd = &g->fields[order[k]];
        sl_strbuf_printf(sb, "    %s f%d;\n", ctype(fd->held), fd->id);
        end = fd->offset + sluice_type_size(fd->held);
    }
    sl_free(g->ctx, order);
    if (g->state_size[phase] > end)
        sl_strbuf_printf(sb, "    unsigned char pad[%zu];\n", g->state_size[phase] - end);
    /* the look-back moves only the data bytes before the batch constants
       (kernels/sl_lookback.cuh payload_of) */
    if (g->state_size[phase] > g->payload_size[phase])
        sl_strbuf_printf(sb, "    static constexpr int PAYLOAD_BYTES = %zu;\n", g->payload_size[phase]);
    sl_strbuf_printf(sb, "};\nstatic_assert(sizeof(S%d) == %zu, \"state layout\");\n", phase,
                     g->state_size[phase]);

    /* identity */
    sl_strbuf_printf(sb, "__device__ __forceinline__ S%d s%d_identity() {\n    S%d s = {};\n",
                     phase, phase, phase);
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase || slot->kind != SLOT_SCAN) continue;
        const sl_scan *sc = slot->sc;
        for (int f = 0; f < sc->nfields; f++) {
            sl_strbuf_printf(sb, "    s.f%d = ", slot->value_field[f]);
            emit_value(sb, sc->acc[f], sc->identity[f]);
            sl_strbuf_append(sb, ";\n");
        }
    }
    sl_strbuf_append(sb, "    return s;\n}\n");

    /* combine */
    sl_strbuf_printf(sb,
                     "struct Op%d {\n    __device__ __forceinline__ S%d operator()(const S%d &l, "
                     "const S%d &r) const {\n        S%d o = {};\n",
                     phase, phase, phase, phase, phase);
    if (g->reduce && g->slots[g->reduce_slot].phase == phase) emit_reduce_value_take(g);
    int count_field = -1;
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase) continue;
        if (slot->kind == SLOT_COUNT) {
            count_field = slot->count_field;
            sl_strbuf_printf(sb, "        o.f%d = sl_mon_sum_i64(l.f%d, r.f%d);\n",
                             slot->count_field, slot->count_field, slot->count_field);
            continue;
        }
        if (slot->kind == SLOT_REDUCE) {
            emit_reduce_combine(g, slot);
            continue;
        }
        const sl_scan *sc = slot->sc;
        sl_strbuf_append(sb, "        {\n");
        for (int f = 0; f < sc->nfields; f++) {
            sl_strbuf_printf(sb, "            const %s v%d = ",
                             ctype(g->fields[slot->value_field[f]].held), f);
            emit_value_combine(g, sc, slot, f);
            sl_strbuf_append(sb, ";\n");
        }
        if (g->reduce && slot->stage == g->reduce_stage && sc->segments != SL_SEGMENTS_NONE) {
            /* a reduce's value: restarts where the reduce's state says (emit_reduce_value_take) */
            bool key = sc->segments == SL_SEGMENTS_KEY;
            for (int f = 0; f < sc->nfields; f++) {
                int vf = slot->value_field[f];
                if (key)
                    sl_strbuf_printf(sb, "            o.f%d = take_r ? r.f%d : keep_l ? l.f%d : v%d;\n",
                                     vf, vf, vf, f);
                else
                    sl_strbuf_printf(sb, "            o.f%d = take_r ? r.f%d : v%d;\n", vf, vf, f);
            }
        } else if (sc->segments == SL_SEGMENTS_NONE) {
            for (int f = 0; f < sc->nfields; f++)
                sl_strbuf_printf(sb, "            o.f%d = v%d;\n", slot->value_field[f], f);
        } else if (sc->segments != SL_SEGMENTS_KEY) {
            int fl = slot->flag_field;
            sl_strbuf_printf(sb, "            o.f%d = (sl_bool)(l.f%d | r.f%d);\n", fl, fl, fl);
            for (int f = 0; f < sc->nfields; f++)
                sl_strbuf_printf(sb, "            o.f%d = r.f%d ? r.f%d : v%d;\n",
                                 slot->value_field[f], fl, slot->value_field[f], f);
        } else {
            int h = slot->flag_field, in = slot->interior_field, fi = slot->first_field,
                la = slot->last_field;
            sl_strbuf_printf(sb,
                             "            if (!l.f%d) { o.f%d = r.f%d; o.f%d = r.f%d; o.f%d = "
                             "r.f%d; o.f%d = r.f%d;",
                             h, h, h, in, in, fi, fi, la, la);
            for (int f = 0; f < sc->nfields; f++)
                sl_strbuf_printf(sb, " o.f%d = r.f%d;", slot->value_field[f], slot->value_field[f]);
            sl_strbuf_printf(sb,
                             " }\n            else if (!r.f%d) { o.f%d = l.f%d; o.f%d = l.f%d; "
                             "o.f%d = l.f%d; o.f%d = l.f%d;",
                             h, h, h, in, in, fi, fi, la, la);
            for (int f = 0; f < sc->nfields; f++)
                sl_strbuf_printf(sb, " o.f%d = l.f%d;", slot->value_field[f], slot->value_field[f]);
            sl_strbuf_printf(sb,
                             " }\n            else {\n                const bool join = "
                             "!sl_key_same_%s(l.f%d, r.f%d);\n                o.f%d = 1; o.f%d = "
                             "l.f%d; o.f%d = r.f%d;\n                o.f%d = (sl_bool)(l.f%d || "
                             "join || r.f%d);\n                const bool restart = join || "
                             "r.f%d;\n",
                             type_name(g->p->columns[sc->segment_column].type), la, fi, h, fi, fi,
                             la, la, in, in, in, in);
            for (int f = 0; f < sc->nfields; f++)
                sl_strbuf_printf(sb, "                o.f%d = restart ? r.f%d : v%d;\n",
                                 slot->value_field[f], slot->value_field[f], f);
            sl_strbuf_append(sb, "            }\n");
        }
        sl_strbuf_append(sb, "        }\n");
    }
    sl_strbuf_append(sb, "        return o;\n    }\n");
    emit_absorbs(g, phase);
    sl_strbuf_append(sb, "};\n");

    /* traits: the look-back, where the phase sits in the carry, the kept-row count, the
       per-batch resets (reset: batch, and the compaction's count, start every batch from
       the identity) */
    char count_expr[32];
    if (count_field >= 0) snprintf(count_expr, sizeof count_expr, "s.f%d", count_field);
    else snprintf(count_expr, sizeof count_expr, "((void)s, 0ll)");
    sl_strbuf_printf(sb,
                     "struct Phase%d {\n    typedef S%d S;\n    typedef Op%d Op;\n"
                     "    static constexpr bool ORDERED = %s, CHUNKS = %s, CHUNK_TOTALS = %s;\n"
                     "    static constexpr unsigned long long CARRY_OFFSET = %zu;\n"
                     "    static constexpr bool COUNTS = %s;\n"
                     "    static constexpr bool REDUCES = %s;\n"
                     "    __device__ static __forceinline__ S identity() { return s%d_identity(); }\n"
                     "    __device__ static __forceinline__ long long count(const S &s) { return %s; }\n"
                     "    __device__ static __forceinline__ void reset(S &carry) {\n",
                     phase, phase, phase, phase_ordered(g, phase) ? "true" : "false",
                     phase_chunks(g, phase) ? "true" : "false",
                     phase_chunk_totals(g, phase) ? "true" : "false",
                     g->carry_offset[phase],
                     count_field >= 0 ? "true" : "false",
                     reduce_outputs_phase(g, phase) ? "true" : "false", phase, count_expr);
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase || !slot_resets(g, slot)) continue;
        if (slot->kind == SLOT_COUNT) {
            sl_strbuf_printf(sb, "        carry.f%d = 0;\n", slot->count_field);
        } else {
            sl_strbuf_printf(sb, "        { const S%d id = s%d_identity(); (void)id;", phase, phase);
            if (slot->kind == SLOT_REDUCE) {
                sl_strbuf_printf(sb, " carry.f%d = 0;", slot->count_field);
                if (g->reduce->per_batch)
                    sl_strbuf_printf(sb, " carry.f%d = 0;", slot->flag_field);
                if (g->reduce->per_batch && slot->restart_field >= 0)
                    sl_strbuf_printf(sb, " carry.f%d = 0;", slot->restart_field);
                sl_strbuf_append(sb, " }\n");
                continue;
            }
            const sl_scan *sc = slot->sc;
            for (int f = 0; f < sc->nfields; f++)
                sl_strbuf_printf(sb, " carry.f%d = id.f%d;", slot->value_field[f],
                                 slot->value_field[f]);
            if (slot->flag_field >= 0) sl_strbuf_printf(sb, " carry.f%d = 0;", slot->flag_field);
            if (slot->interior_field >= 0)
                sl_strbuf_printf(sb, " carry.f%d = 0;", slot->interior_field);
            sl_strbuf_append(sb, " }\n");
        }
    }
    sl_strbuf_append(sb, "        (void)carry;\n    }\n");
    /* the batch constants of a prefix that came through the look-back: the carry's */
    bool constants = false;
    for (int f = 0; f < g->nfields; f++) constants = constants || (g->field_phase[f] == phase &&
                                                                  g->fields[f].batch_constant);
    sl_strbuf_printf(sb,
                     "    static constexpr bool BATCH_CONSTANTS = %s;\n"
                     "    __device__ static __forceinline__ void batch_constants(S &s, const S &carry) {\n",
                     constants ? "true" : "false");
    for (int f = 0; f < g->nfields; f++)
        if (g->field_phase[f] == phase && g->fields[f].batch_constant)
            sl_strbuf_printf(sb, "        s.f%d = carry.f%d;\n", g->fields[f].id, g->fields[f].id);
    sl_strbuf_append(sb, "        (void)s; (void)carry;\n    }\n");
    /* the carry a batch leaves: derive_counts' scans take in the batch's count */
    sl_strbuf_append(sb, "    __device__ static __forceinline__ void close_carry(S &s) {\n");
    for (int si = 0; si < g->nslots; si++)
        if (g->slots[si].phase == phase && g->slots[si].kind == SLOT_SCAN && g->slots[si].from_count)
            sl_strbuf_printf(sb, "        s.f%d += s.f%d;\n", g->slots[si].value_field[0],
                             count_field);
    sl_strbuf_append(sb, "        (void)s;\n    }\n};\n");
}

/* Tile::element(S<phase> &e, int i): the per-row element state of the thread's item i. */
static void emit_element(cg *g, int phase, bool run_state) {
    sl_strbuf *sb = &g->sb;
    sl_strbuf_printf(sb, "    template <bool FULL> __device__ __forceinline__ void element(%c%d &e, "
                         "int i) const {\n",
                     run_state ? 'R' : 'S', phase);
    /* each alive<k> once, from the one before: written out per use, the compiler evaluated
       the shared conditions twice and kept more registers (six-stage bench: 95 against 80).
       FULL: the tile has no row past the batch's end, so every row is in it and the element's
       constant fields fold into the combines (sl_tile.cuh, whole_tile). */
    sl_strbuf_append(sb, "        const bool alive0 = FULL || i < live_items;\n");
    int k = 0;
    for (int s = g->first; s < g->last; s++) {
        const sl_stage *st = &g->p->stages[s];
        if (st->kind != SL_STAGE_COMPACT) continue;
        k++;
        sl_strbuf_printf(sb, "        const bool alive%d = alive%d && c%d[i] != 0;\n", k, k - 1,
                         st->compact.by);
    }
    for (int j = 0; j <= k; j++) sl_strbuf_printf(sb, "        (void)alive%d;\n", j);
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase) continue;
        if (slot->kind == SLOT_COUNT) {
            sl_strbuf_printf(sb, "        e.f%d = alive%d ? 1 : 0;\n", slot->count_field,
                             compactions_before(g, g->last));
            continue;
        }
        if (slot->kind == SLOT_REDUCE) {
            const sl_reduce *r = g->reduce;
            sl_strbuf_printf(sb, "        if (alive%d) {\n            e.f%d = 1;\n",
                             compactions_before(g, g->last), slot->flag_field);
            if (r->segments == SL_SEGMENTS_HEADFLAG)
                sl_strbuf_printf(sb, "            e.f%d = (sl_bool)(c%d[i] != 0); e.f%d = e.f%d;\n",
                                 slot->interior_field, r->segment_column, slot->restart_field,
                                 slot->interior_field);
            if (r->segments == SL_SEGMENTS_OFFSETS)
                sl_strbuf_printf(sb, "            e.f%d = (sl_bool)head_bit(i);\n",
                                 slot->restart_field);
            if (r->segments == SL_SEGMENTS_KEY && run_state) /* the change is a head bit */
                sl_strbuf_printf(sb, "            e.f%d = (sl_bool)head_bit(i); e.f%d = %s(c%d[i]);\n",
                                 slot->restart_field, slot->last_field,
                                 key_read(g, r->segment_column), r->segment_column);
            else if (r->segments == SL_SEGMENTS_KEY) {
                const char *kr = key_read(g, r->segment_column);
                sl_strbuf_printf(sb, "            e.f%d = %s(c%d[i]); e.f%d = %s(c%d[i]);\n",
                                 slot->first_field, kr, r->segment_column, slot->last_field, kr,
                                 r->segment_column);
            }
            sl_strbuf_append(sb, "        }\n");
            continue;
        }
        if (slot->from_count) continue; /* its rows add nothing: a batch constant */
        const sl_scan *sc = slot->sc;
        sl_strbuf_printf(sb, "        {\n            const bool alive = alive%d;\n            if (alive) {\n",
                         compactions_before(g, slot->stage));
        for (int f = 0; f < sc->nfields; f++) {
            /* a widened field holds the value's extension (a bool's 0 or 1) */
            const sluice_type held = g->fields[slot->value_field[f]].held;
            sl_strbuf_printf(sb, "                e.f%d = ", slot->value_field[f]);
            const sl_expr *of = sc->of[f];
            if (held != sc->acc[f] && sc->acc[f] != SLUICE_BOOL && of->kind == SL_EXPR_COLUMN &&
                g->p->columns[of->index].type == sc->acc[f]) {
                /* a column's value as it is, extended in one read (sl::items::held) */
                sl_strbuf_printf(sb, "(%s)c%d.held(i);\n", ctype(held), of->index);
                continue;
            }
            if (held != sc->acc[f]) sl_strbuf_printf(sb, "(%s)(", ctype(held));
            sl_strbuf_printf(sb, "(%s)(", ctype(sc->acc[f]));
            emit_expr(sb, sc->of[f]);
            sl_strbuf_append(sb, held == sc->acc[f]        ? ");\n"
                                 : sc->acc[f] == SLUICE_BOOL ? ") != 0);\n"
                                                             : "));\n");
        }
        /* a reduce's value: its segments are the reduce's state (SLOT_REDUCE) */
        bool own_segments = !(g->reduce && slot->stage == g->reduce_stage);
        switch (own_segments ? sc->segments : SL_SEGMENTS_NONE) {
        case SL_SEGMENTS_NONE: break;
        case SL_SEGMENTS_HEADFLAG:
            sl_strbuf_printf(sb, "                e.f%d = (sl_bool)(c%d[i] != 0);\n",
                             slot->flag_field, sc->segment_column);
            break;
        case SL_SEGMENTS_OFFSETS:
            sl_strbuf_printf(sb, "                e.f%d = (sl_bool)head_bit(i);\n",
                             slot->flag_field);
            break;
        case SL_SEGMENTS_KEY: {
            const char *kr = key_read(g, sc->segment_column);
            sl_strbuf_printf(sb,
                             "                e.f%d = 1; e.f%d = 0; e.f%d = %s(c%d[i]); "
                             "e.f%d = %s(c%d[i]);\n",
                             slot->flag_field, slot->interior_field, slot->first_field, kr,
                             sc->segment_column, slot->last_field, kr, sc->segment_column);
            break;
        }
        }
        sl_strbuf_append(sb, "            }\n        }\n");
    }
    sl_strbuf_append(sb, "    }\n");
}

/* The reduce's part of Tile::outputs: whether item i gives a row (keep_i) and where (pos_i,
 * in the batch's output), its key and index. Offsets: the row that ends a segment gives the
 * segment's row at the segment's ordinal (tile_rows::segment_ending). */
static void emit_reduce_outputs(cg *g, const cg_slot *slot) {
    sl_strbuf *sb = &g->sb;
    const sl_reduce *r = g->reduce;
    int cb = slot->count_field, ct = slot->total_field;
    switch (r->segments) {
    case SL_SEGMENTS_NONE:
        break;
    case SL_SEGMENTS_OFFSETS:
        sl_strbuf_printf(sb,
                         "        {\n            const long long k = segment_ending(i);\n"
                         "            keep_i = k >= 0; pos_i = k;\n");
        if (r->index_column >= 0)
            sl_strbuf_printf(sb, "            c%d[i] = run.f%d + k;\n", r->index_column, ct);
        sl_strbuf_append(sb, "        }\n");
        break;
    default:
        sl_strbuf_printf(sb, "        keep_i = run.f%d != before.f%d; pos_i = before.f%d;\n",
                         cb, cb, cb);
        if (r->index_column >= 0)
            sl_strbuf_printf(sb, "        c%d[i] = before.f%d;\n", r->index_column, ct);
        if (r->segments == SL_SEGMENTS_KEY)
            sl_strbuf_printf(sb, "        c%d[i] = before.f%d;\n", r->key_column,
                             slot->last_field);
        break;
    }
}

/* Tile::quiet(run), for a group whose reduce's rows Tile::outputs writes: whether none of the
 * thread's items (a whole tile's) closes a segment, given `run`, the state before its first
 * item; sl_tile.cuh's item_outputs then skips the items. Conservative: rows a compaction drops
 * count as if kept (a key or head flag of theirs makes the thread not quiet). */
static void emit_reduce_quiet(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_reduce *r = g->reduce;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    sl_strbuf_printf(sb, "    __device__ __forceinline__ bool quiet(const S%d &run) const {\n"
                         "        (void)run;\n",
                     rs->phase);
    switch (r->segments) {
    case SL_SEGMENTS_NONE: /* a whole-stream or per-batch reduce writes at close only */
        sl_strbuf_append(sb, "        return true;\n");
        break;
    case SL_SEGMENTS_OFFSETS:
        sl_strbuf_append(sb, "        return ending == 0;\n");
        break;
    case SL_SEGMENTS_HEADFLAG:
        sl_strbuf_printf(sb, "        bool head = false;\n#pragma unroll\n"
                             "        for (int i = 0; i < ITEMS; i++) head |= c%d[i] != 0;\n"
                             "        return !head;\n",
                         r->segment_column);
        break;
    case SL_SEGMENTS_KEY: {
        const char *kr = key_read(g, r->segment_column);
        const char *tn = type_name(g->p->columns[r->segment_column].type);
        sl_strbuf_printf(sb,
                         "        const auto k0 = %s(c%d[0]);\n"
                         "        bool same = !run.f%d || sl_key_same_%s(run.f%d, k0);\n#pragma unroll\n"
                         "        for (int i = 1; i < ITEMS; i++) same &= sl_key_same_%s(k0, %s(c%d[i]));\n"
                         "        return same;\n",
                         kr, r->segment_column, rs->flag_field, tn, rs->last_field, tn, kr,
                         r->segment_column);
        break;
    }
    }
    sl_strbuf_append(sb, "    }\n");
}

/* A reduce's rows go straight to their places from Tile::outputs, as each is found: few rows
 * a tile, offsets segments' places have gaps where the empty ones go, and holding a flag, a
 * place and a value per item until Tile::store cost registers that ptxas spilled. */
static void emit_reduce_stores(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    sl_strbuf_append(sb, "        if (keep_i) {\n");
    for (int k = 0; k < o->noutputs; k++) {
        const char *t = ctype(g->p->columns[o->outputs[k]].type);
        sl_strbuf_printf(sb, "            ((%s *)a.out[%d])[pos_i] = (%s)c%d[i];\n", t, k, t,
                         o->outputs[k]);
    }
    sl_strbuf_append(sb, "        }\n");
}

/* Tile::outputs(a, i, before, run, e, tile_excl): item i's outputs of phase `phase` from
 * `before` (the prefix excluding the row), `run` (including it) and `e` (its own element);
 * a reduce's phase also writes the row item i closes (emit_reduce_stores). */
static void emit_outputs(cg *g, int phase) {
    sl_strbuf *sb = &g->sb;
    bool reduce_phase = g->reduce && g->slots[g->reduce_slot].phase == phase;
    sl_strbuf_printf(sb,
                     "    __device__ __forceinline__ void outputs(const SlArgs &a, int i, const S%d "
                     "&before, const S%d &run, const S%d &e, const S%d &tile_excl) {\n"
                     "        (void)a; (void)before; (void)run; (void)e; (void)tile_excl;\n",
                     phase, phase, phase, phase);
    if (reduce_phase) sl_strbuf_append(sb, "        bool keep_i = false; long long pos_i = 0;\n");
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != phase) continue;
        if (slot->kind == SLOT_COUNT) {
            sl_strbuf_printf(sb,
                             "        if (i == 0) {\n            keep_bits = 0;\n"
                             "            first_pos = (int)(before.f%d - tile_excl.f%d);\n        }\n"
                             "        if (e.f%d != 0) keep_bits |= (KeepBits)1 << i;\n",
                             slot->count_field, slot->count_field, slot->count_field);
            continue;
        }
        if (slot->kind == SLOT_REDUCE) {
            emit_reduce_outputs(g, slot);
            continue;
        }
        const sl_scan *sc = slot->sc;
        if (slot->from_count) { /* the carry's count plus the compaction's within the batch */
            int vf = slot->value_field[0], cf = count_field_of(g, phase);
            const char *at = sc->exclusive ? "before" : "run";
            if (sc->into[0] >= 0)
                sl_strbuf_printf(sb, "        c%d[i] = %s.f%d + %s.f%d;\n", sc->into[0], at, vf,
                                 at, cf);
            continue;
        }
        for (int f = 0; f < sc->nfields; f++) {
            int into = sc->into[f];
            if (into < 0) continue;
            int vf = slot->value_field[f];
            if (slot->stage == g->reduce_stage && g->reduce) {
                /* a reduce's value: the closed segment's state is the one before the row
                   that closes it; an offsets segment closes at its own last row */
                if (g->reduce->segments == SL_SEGMENTS_OFFSETS)
                    sl_strbuf_printf(sb, "        c%d[i] = run.f%d;\n", into, vf);
                else if (g->reduce->segments != SL_SEGMENTS_NONE)
                    sl_strbuf_printf(sb, "        c%d[i] = before.f%d;\n", into, vf);
                continue;
            }
            if (!sc->exclusive) {
                sl_strbuf_printf(sb, "        c%d[i] = run.f%d;\n", into, vf);
                continue;
            }
            switch (sc->segments) {
            case SL_SEGMENTS_NONE:
                sl_strbuf_printf(sb, "        c%d[i] = before.f%d;\n", into, vf);
                break;
            case SL_SEGMENTS_HEADFLAG:
            case SL_SEGMENTS_OFFSETS:
                sl_strbuf_printf(sb, "        c%d[i] = e.f%d ? ", into, slot->flag_field);
                emit_value(sb, sc->acc[f], sc->identity[f]);
                sl_strbuf_printf(sb, " : before.f%d;\n", vf);
                break;
            case SL_SEGMENTS_KEY:
                sl_strbuf_printf(sb,
                                 "        c%d[i] = (before.f%d && sl_key_same_%s(before.f%d, "
                                 "%s(c%d[i]))) ? before.f%d : ",
                                 into, slot->flag_field,
                                 type_name(g->p->columns[sc->segment_column].type),
                                 slot->last_field, key_read(g, sc->segment_column),
                                 sc->segment_column, vf);
                emit_value(sb, sc->acc[f], sc->identity[f]);
                sl_strbuf_append(sb, ";\n");
                break;
            }
        }
    }
    if (reduce_phase) emit_reduce_stores(g);
    sl_strbuf_append(sb, "    }\n");
}

/* Tile::maps(level): the map entries whose values are known after look-back phase `level`
 * (0: before any). Called with constants, so each call keeps one branch. */
static void emit_maps(cg *g) {
    sl_strbuf *sb = &g->sb;
    sl_strbuf_append(sb, "    __device__ __forceinline__ void maps(int level) {\n        (void)level;\n");
    for (int level = 0; level <= g->phases; level++) {
        bool any = false;
        for (int s = g->first; s < g->last; s++) {
            const sl_stage *st = &g->p->stages[s];
            if (st->kind != SL_STAGE_MAP) continue;
            for (int k = 0; k < st->map.count; k++) {
                int c = st->map.columns[k];
                if (!g->plan->map_entry_live[s][k] || g->level[c] != level) continue;
                if (!any)
                    sl_strbuf_printf(sb, "        if (level == %d) {\n#pragma unroll\n"
                                         "            for (int i = 0; i < ITEMS; i++) {\n", level);
                any = true;
                sl_strbuf_printf(sb, "                c%d[i] = (%s)(", c,
                                 ctype(g->p->columns[c].type));
                emit_expr(sb, st->map.exprs[k]);
                sl_strbuf_append(sb, ");\n");
            }
        }
        if (any) sl_strbuf_append(sb, "            }\n        }\n");
    }
    sl_strbuf_append(sb, "    }\n");
}

/* Tile::striped_ok and Tile::load_striped, for the commutative aggregate loop: a whole tile's
 * rows in chunks striped over the block (kernels/sl_device.cuh load_striped), every column
 * with the same chunk of rows so that item i is one row in all of them. The chunk is the
 * rows of the widest input in 16 bytes (at most ITEMS). */
static void emit_striped_loads(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    const sluice_pipeline *p = g->p;
    size_t widest = 1;
    for (int k = 0; k < o->ninputs; k++)
        if (k != o->offsets_input && sluice_type_size(p->columns[o->inputs[k]].type) > widest)
            widest = sluice_type_size(p->columns[o->inputs[k]].type);
    int chunk = (int)(16 / widest);
    if (chunk > g->items) chunk = g->items;
    sl_strbuf_printf(sb, "    static constexpr int STRIPE = %d;\n"
                         "    __device__ static __forceinline__ bool striped_ok(const SlArgs &a) {\n"
                         "        (void)a;\n        return true",
                     chunk);
    for (int k = 0; k < o->ninputs; k++) {
        if (k == o->offsets_input) continue;
        const char *t = ctype(p->columns[o->inputs[k]].type);
        sl_strbuf_printf(sb, " &&\n            sl::striped_aligned<%s, STRIPE>((const %s *)a.in[%d])", t, t, k);
    }
    sl_strbuf_append(sb, ";\n    }\n    __device__ __forceinline__ void load_striped(const SlArgs &a) {\n"
                         "        (void)a;\n");
    for (int k = 0; k < o->ninputs; k++) {
        if (k == o->offsets_input) continue;
        int c = o->inputs[k];
        const char *t = ctype(p->columns[c].type);
        sl_strbuf_printf(sb, "        sl::load_striped<%s, ITEMS, STRIPE>((const %s *)a.in[%d], tile_first, slot, BLOCK, c%d);\n",
                         t, t, k, c);
    }
    sl_strbuf_append(sb, "    }\n");
}

/* Tile::load_inputs: the thread's rows of every input column into registers, from the tile's
 * stage when the copy engine brought it, else from global memory. Called at the top of the
 * tile and again after each look-back (kernels/sl_tile.cuh says why). */
static void emit_input_loads(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    const sluice_pipeline *p = g->p;
    sl_strbuf_append(sb, "    __device__ __forceinline__ void load_inputs(const SlArgs &a, bool staged, "
                         "const uint4 *tile_buf) {\n        (void)staged; (void)tile_buf; (void)a;\n");
    for (int k = 0; k < o->ninputs; k++) {
        if (k == o->offsets_input) continue;
        int c = o->inputs[k];
        const char *t = ctype(p->columns[c].type);
        if (g->staged[k])
            sl_strbuf_printf(sb,
                             "        if (staged) sl::load_staged<%s, ITEMS>((const %s *)((const unsigned char *)tile_buf + %zu) + round_first, c%d);\n"
                             "        else sl::load_blocked<%s, ITEMS>((const %s *)a.in[%d], first, rows, c%d);\n",
                             t, t, g->stage_offset[k], c, t, t, k, c);
        else
            sl_strbuf_printf(sb, "        sl::load_blocked<%s, ITEMS>((const %s *)a.in[%d], first, rows, c%d);\n",
                             t, t, k, c);
    }
    sl_strbuf_append(sb, "    }\n");
    if (g->commutative) emit_striped_loads(g);
}

/* Kernel::issue_loads: thread 0 starts tile t's input copies into stage s
 * (kernels/sl_pipe.cuh): bulk copies of every staged column when the tile is whole and the
 * columns 16-byte aligned, else a plain arrival (the block then loads that tile from global
 * memory). */
static void emit_issue_loads(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    const sluice_pipeline *p = g->p;
    sl_strbuf_append(sb, "    __device__ static __forceinline__ void issue_loads(sl::tile_queue<STAGES> &queue, "
                         "const SlArgs &a, uint4 *sl_smem, long long t, int s) {\n"
                         "        const long long tf = t * (long long)TILE;\n"
                         "        const bool bulk = sl::bulk_tile(tf, a.rows, TILE)");
    for (int k = 0; k < o->ninputs; k++)
        if (g->staged[k]) sl_strbuf_printf(sb, " && sl::aligned16(a.in[%d])", k);
    sl_strbuf_append(sb, ";\n        queue.bulk[s] = bulk;\n        if (bulk) {\n"
                         "            unsigned char *stage = (unsigned char *)(sl_smem + s * (BUF / 16));\n"
                         "            (void)stage;\n");
    sl_strbuf_printf(sb, "            sl::queue_expect(queue, s, %zuu);\n", g->staged_bytes);
    for (int k = 0; k < o->ninputs; k++) {
        if (!g->staged[k]) continue;
        size_t w = sluice_type_size(p->columns[o->inputs[k]].type);
        sl_strbuf_printf(sb,
                         "            sl::bulk_load(queue, s, stage + %zu, (const unsigned char *)a.in[%d] + tf * %zu, "
                         "(unsigned)(TILE * %zu));\n",
                         g->stage_offset[k], k, w, w);
    }
    sl_strbuf_append(sb, "        } else {\n            sl::queue_arrive(queue, s);\n        }\n    }\n");
}

/* The staged input column whose warp slices are the widest (-1: none is staged): where a
 * compacting store packs each warp's kept rows (emit_compacted_stores). */
static int widest_staged_input(const cg *g) {
    const sl_codegen *o = g->out;
    int best = -1;
    for (int k = 0; k < o->ninputs; k++)
        if (g->staged[k] && (best < 0 || sluice_type_size(g->p->columns[o->inputs[k]].type) >
                                             sluice_type_size(g->p->columns[o->inputs[best]].type)))
            best = k;
    return best;
}

/* A compacting Tile::store without block barriers. A warp's rows are consecutive in the tile
 * (thread t holds rows t * ITEMS ...), so its kept rows are consecutive in each output, from
 * warp_first (lane 0's first_pos) on. Each warp packs them into its own slice of a staged
 * input column's region of the stage — bytes only this warp's lanes read (load_staged reads a
 * thread's own rows), so a __syncwarp orders them — and writes them out with coalesced
 * stores. An output wider than that column's elements goes through the slice in passes of CAP
 * rows. The stage is refilled only after the loop's end-of-tile barrier, as before. Measured
 * against the block-staged store (bench/RESULTS.md, twenty-sixth session): the filter 1.69x ->
 * 1.63x its floor, the six-stage group's run_to_run 1.458 -> 1.393 ms, 8-byte outputs level. */
static void emit_compacted_stores(cg *g, int slice_input) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    const sluice_pipeline *p = g->p;
    const size_t slice_size = sluice_type_size(p->columns[o->inputs[slice_input]].type);
    /* three values live across the columns (warp_kept, own_first, warp_out), as the
       block-staged store's tile_kept, first_pos and out_base; the copy-outs are unrolled
       rounds of the warp's 32 lanes (a run-time loop's counter and bound spilled at the f64
       filter's register cap) */
    sl_strbuf_append(sb,
                     "        const int warp_first = __shfl_sync(0xffffffffu, first_pos, 0);\n"
                     "        const int warp_kept = __shfl_sync(0xffffffffu, first_pos + "
                     "sl::popcount(keep_bits), 31) - warp_first;\n"
                     "        const int own_first = first_pos - warp_first;\n"
                     "        const long long warp_out = out_base + warp_first;\n");
    for (int k = 0; k < o->noutputs; k++) {
        int c = o->outputs[k];
        const char *t = ctype(p->columns[c].type);
        const size_t size = sluice_type_size(p->columns[c].type);
        /* sizes are powers of two: the slice holds a warp's rows of this output in `passes` */
        const size_t passes = size > slice_size ? size / slice_size : 1;
        sl_strbuf_printf(sb,
                         "        {\n            %s *const stage = (%s *)((unsigned char *)tile_buf + %zu + "
                         "(threadIdx.x / 32) * (32 * ITEMS * %zu));\n"
                         "            %s *const dst = (%s *)a.out[%d] + warp_out;\n"
                         "            constexpr int CAP = 32 * ITEMS / %zu; /* rows the slice holds */\n"
                         "#pragma unroll\n            for (int q = 0; q < %zu; q++) {\n"
                         "                if (q > 0 && q * CAP >= warp_kept) break; /* the warp's own count */\n"
                         "                __syncwarp();\n"
                         "                int at = own_first - q * CAP;\n"
                         "#pragma unroll\n                for (int i = 0; i < ITEMS; i++) if ((keep_bits >> i) & 1) {\n",
                         t, t, g->stage_offset[slice_input], slice_size, t, t, k, passes, passes);
        /* in one pass every row the warp keeps has its place in the slice */
        if (passes == 1) sl_strbuf_printf(sb, "                    stage[at] = c%d[i];\n", c);
        else sl_strbuf_printf(sb, "                    if ((unsigned)at < (unsigned)CAP) stage[at] = c%d[i];\n", c);
        sl_strbuf_append(sb, "                    at++;\n"
                             "                }\n"
                             "                __syncwarp();\n"
                             "#pragma unroll\n                for (int r = 0; r < (CAP + 31) / 32; r++) {\n"
                             "                    const int j = r * 32 + (int)(threadIdx.x & 31u);\n"
                             "                    if (j < CAP && j < warp_kept - q * CAP) dst[q * CAP + j] = stage[j];\n"
                             "                }\n"
                             "            }\n        }\n");
    }
}

/* Tile::store<BAR>: the tile's outputs, staged through its stage `tile_buf` (its inputs are
 * in registers by then): whole tiles transposed to coalesced 16-byte stores, kept rows packed
 * warp by warp (emit_compacted_stores) or, where no input is staged, by the block before
 * they are written at out_base. BAR is the barrier among the row-owning threads (0:
 * __syncthreads). */
static void emit_stores(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    const sluice_pipeline *p = g->p;
    sl_strbuf_append(sb, "    template <int BAR> __device__ __forceinline__ void store(const SlArgs &a, "
                         "uint4 *tile_buf) {\n        (void)a; (void)tile_buf;\n");
    const int slice_input = widest_staged_input(g);
    if (o->compacts && !o->reduces && slice_input >= 0) {
        emit_compacted_stores(g, slice_input);
        sl_strbuf_append(sb, "    }\n");
        return;
    }
    for (int k = 0; k < o->noutputs; k++) {
        int c = o->outputs[k];
        const char *t = ctype(p->columns[c].type);
        if (o->reduces) continue; /* written by Tile::outputs (emit_reduce_stores) */
        if (!o->compacts && g->direct_stores)
            sl_strbuf_printf(sb, "        sl::store_blocked<%s, ITEMS>((%s *)a.out[%d], first, rows, c%d);\n", t,
                             t, k, c);
        else if (!o->compacts)
            sl_strbuf_printf(sb,
                             "        sl::store_tile<%s, ITEMS, BLOCK, BAR>((%s *)a.out[%d], tile_first, rows, "
                             "c%d, tile_buf);\n",
                             t, t, k, c);
        else
            sl_strbuf_printf(sb,
                             "        {\n            %s *stage = (%s *)tile_buf;\n"
                             "            sl::block_sync<BAR, BLOCK>();\n"
                             "            int at = first_pos;\n"
                             "#pragma unroll\n            for (int i = 0; i < ITEMS; i++) if ((keep_bits >> i) & 1) "
                             "stage[at++] = c%d[i];\n"
                             "            sl::block_sync<BAR, BLOCK>();\n"
                             "            %s *dst = (%s *)a.out[%d] + out_base;\n"
                             "            for (int j = threadIdx.x; j < tile_kept; j += BLOCK) dst[j] = "
                             "stage[j];\n        }\n",
                             t, t, c, t, t, k);
    }
    sl_strbuf_append(sb, "    }\n");
}

/* GroupParams: the pipeline's params, read once per block. */
static void emit_params(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sluice_pipeline *p = g->p;
    sl_strbuf_append(sb, "struct GroupParams {\n");
    for (int k = 0; k < p->nparams; k++)
        sl_strbuf_printf(sb, "    %s p%d;\n", ctype(p->params[k].type), k);
    sl_strbuf_append(sb, "    __device__ __forceinline__ explicit GroupParams(const SlArgs &a) {\n"
                         "        (void)a;\n");
    for (int k = 0; k < p->nparams; k++)
        sl_strbuf_printf(sb, "        memcpy(&p%d, &a.params[%d], sizeof p%d);\n", k, k, k);
    sl_strbuf_append(sb, "    }\n};\n");
}

/* Whether the group loads column c or stores it. Only those are packed (sl::items): a column
 * made and used in registers alone (a filter's flag) would pay a pack and an unpack a row that
 * its register a value never does (the six-stage group's kernel: 4,832 against 5,128 SASS
 * instructions, ptxas). */
static bool crosses_memory(const cg *g, int column) {
    if (input_of(g, column) >= 0) return true;
    for (int k = 0; k < g->out->noutputs; k++)
        if (g->out->outputs[k] == column) return true;
    return false;
}

/* Whether column c is packed in a thread's registers (sl::items' words): 1- and 2-byte columns
 * that cross memory, unless SLUICE_CUDA_PACK=0. */
static bool packed(const cg *g, int column) { return g->pack && crosses_memory(g, column); }

/* Whether the group is one max or min scan of a 2-byte integer column straight into a column of
 * its type, both packed (crosses_memory), with nothing else to write a row: then a whole
 * tile's rows go two a word through sm_90's 16x2 picks (kernels/sl_items.cuh, pairs_fold and
 * pairs_scan; Tile::PAIRS in kernels/sl_tile.cuh). A value at a time, each row costs a read,
 * a combine and a write in the epilogue and a read and a combine in the reduce; two a word,
 * a word costs two picks and two `prmt`s in the epilogue (one pick and one `prmt` of them on
 * the chain from word to word) and one pick in the reduce. The slot's scan, or NULL. */
static const sl_scan *pairs_scan_of(const cg *g) {
    if (!g->pairs || g->items % 2 != 0 || g->phases != 1 || g->nslots != 1 ||
        g->out->compacts || g->reduce)
        return NULL;
    const cg_slot *slot = &g->slots[0];
    if (slot->kind != SLOT_SCAN || slot->from_count) return NULL;
    const sl_scan *sc = slot->sc;
    if (sc->segments != SL_SEGMENTS_NONE || sc->nfields != 1 ||
        (sc->op != SL_SCAN_MAX && sc->op != SL_SCAN_MIN))
        return NULL;
    const sluice_type t = sc->acc[0];
    const sl_expr *of = sc->of[0];
    if ((t != SLUICE_I16 && t != SLUICE_U16) || of->kind != SL_EXPR_COLUMN || sc->into[0] < 0)
        return NULL;
    const int in = of->index, into = sc->into[0];
    if (g->p->columns[in].type != t || g->p->columns[into].type != t || input_of(g, in) < 0 ||
        !packed(g, in) || !packed(g, into) || g->fields[slot->value_field[0]].held == t)
        return NULL;
    return sc;
}

/* Tile::PAIRS, and where it holds pairs_fold and pairs_outputs (pairs_scan_of). */
static void emit_pairs(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_scan *sc = pairs_scan_of(g);
    sl_strbuf_printf(sb, "    static constexpr bool PAIRS = %s;\n", sc ? "true" : "false");
    if (!sc) return;
    const int vf = g->slots[0].value_field[0];
    const char *sign = sc->acc[0] == SLUICE_I16 ? "true" : "false";
    const char *max = sc->op == SL_SCAN_MAX ? "true" : "false";
    sl_strbuf_printf(sb,
                     "    __device__ __forceinline__ S1 pairs_fold() const {\n"
                     "        S1 s = s1_identity();\n"
                     "        s.f%d = (int32_t)sl::pairs_fold<%s, %s>(c%d.w);\n"
                     "        return s;\n    }\n"
                     "    __device__ __forceinline__ void pairs_outputs(const S1 &run) {\n"
                     "        sl::pairs_scan<%s, %s, %s>(c%d.w, (uint32_t)run.f%d, c%d.w);\n    }\n",
                     vf, sign, max, sc->of[0]->index, sign, max, sc->exclusive ? "true" : "false",
                     sc->of[0]->index, vf, sc->into[0]);
}

/* GroupTile: one thread's rows of a tile: its registers for each column the kernel reads, makes
 * or writes (sl::items: 1- and 2-byte values packed in words, kernels/sl_items.cuh), and the
 * per-group pieces of the tile loop as member functions. */
static void emit_tile(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sluice_pipeline *p = g->p;
    sl_strbuf_append(sb, "struct GroupTile : GroupParams, sl::tile_rows<ITEMS> {\n");
    for (int c = 0; c < p->ncolumns; c++)
        if (g->in_group[c])
            sl_strbuf_printf(sb, "    sl::items<%s, ITEMS%s> c%d = {};\n", ctype(p->columns[c].type),
                             packed(g, c) ? "" : ", false", c);
    emit_pairs(g);
    if (g->out->reduces) /* Phase::COUNTS' tile_epilogue sets them; a reduce writes at pos_i */
        sl_strbuf_append(sb, "    long long out_base = 0;\n    int tile_kept = 0;\n");
    else if (g->out->compacts)
        sl_strbuf_printf(sb, "    typedef %s KeepBits;\n"
                             "    KeepBits keep_bits = 0; /* bit i: the compaction keeps item i */\n"
                             "    int first_pos = 0; /* the thread's first item's place among the tile's kept rows */\n"
                             "    long long out_base = 0;\n    int tile_kept = 0;\n",
                         g->items > 32 ? "unsigned long long" : "unsigned");
    sl_strbuf_append(sb, "    __device__ __forceinline__ explicit GroupTile(const GroupParams &p) "
                         ": GroupParams(p) {}\n");
    emit_input_loads(g);
    emit_maps(g);
    if (runs_aggregate(g))
        sl_strbuf_printf(sb,
                         "    template <class S> __device__ __forceinline__ void runs_at(const S &carry, "
                         "const sl::run_edges<RunKeys> &edges) {\n"
                         "        sl::run_heads<RunKeys>(*this, c%d, carry, RunKeys::make(*this, edges.before), "
                         "RunKeys::make(*this, edges.after));\n    }\n",
                         g->reduce->segment_column);
    for (int ph = 1; ph <= g->phases; ph++) {
        emit_element(g, ph, false);
        if (runs_aggregate(g) && ph == g->slots[g->reduce_slot].phase) emit_element(g, ph, true);
        /* the loops over segments without look-back write rows through Kernel::write_row */
        if (!block_records_loop(g)) emit_outputs(g, ph);
        if (reduce_outputs_phase(g, ph)) emit_reduce_quiet(g);
    }
    emit_stores(g);
    sl_strbuf_append(sb, "};\n");
}

/* The blocks a multiprocessor is asked to hold (__launch_bounds__' second number) at the
 * group's current block, items and stages (g->out->dynamic_smem: plan_stages first). */
static int resident_blocks(const cg *g) {
    const sluice_pipeline *p = g->p;
    const sl_codegen *o = g->out;
    const int block = g->tuning->block_threads, items = g->items;
    int live = 0;
    for (int c = 0; c < p->ncolumns; c++) live += g->in_group[c];
    /* Only small groups ask for more resident blocks: they fit in the registers that leaves;
     * capping a larger group's registers made ptxas spill hundreds of bytes per thread. */
    int min_blocks = live * items <= 32   ? g->tuning->min_blocks
                     : live * items <= 48 ? g->tuning->min_blocks - 1
                                          : 1;
    /* The warp-tile loops keep nothing in shared memory, so registers alone decide how many
     * warps reside: at most 128 a thread (4 blocks of 128 threads), whatever the group's
     * columns. Left uncapped, a key that maps make took 165 and ran at 3 blocks: 37% of copy
     * where 128 gave 43% (bench/RESULTS.md, thirteenth session); a tighter cap (102) made the
     * input key's loop slower. */
    if (warp_tiles(g) && min_blocks < 512 / block) min_blocks = 512 / block;
    /* A phase state is held in about eight copies at once around the look-back (element,
     * thread fold, warp scan, block aggregate, carry, tile prefix, running state, before):
     * one of more than 32 bytes alone fills the 64 registers a cap of 4 blocks leaves, so
     * ptxas spills hundreds of bytes (trades-vwap's keyed scans: 484 B). The only wrong
     * results the H200 has shown came from such a kernel (int-ops forced to 256:4:4, 700 B
     * spilled; the same PTX without the cap was right): no cap for these. */
    size_t widest_state = 0;
    for (int ph = 1; ph <= g->phases; ph++)
        if (g->state_size[ph] > widest_state) widest_state = g->state_size[ph];
    if (widest_state > 32) min_blocks = 1;
    /* no more blocks than the stages let reside */
    const int by_smem = blocks_by_smem(o->dynamic_smem);
    const int threads = block + (g->overlapped ? 32 : 0);
    /* ...and a larger group, left to one, still asks for two where the stages let two reside
     * and that leaves a thread 96 registers or more: unbounded, ptxas may take a few registers
     * more than two blocks' share and lose the second block (run_to_run's six-stage group took
     * 110 registers, so one block of 288 threads a multiprocessor, and ran at 0.74 of the fast
     * mode's speed; held to 96 it ran two, at 0.91: bench/RESULTS.md, twenty-third session) */
    if (min_blocks == 1 && widest_state <= 32 && by_smem >= 2 && registers_for_blocks(threads, 2) >= 96)
        min_blocks = 2;
    if (min_blocks > by_smem) min_blocks = by_smem;
    if (g->forced_min_blocks) min_blocks = g->forced_min_blocks;
    if (min_blocks < 1 || (long long)min_blocks * threads > 2048) min_blocks = 1;
    return min_blocks;
}

static void emit_reduce_close(cg *g);
static void emit_reduce_close_batch(cg *g);
static sluice_status emit_run_keys(cg *g);
static void emit_run_state(cg *g);
static void emit_run_carry(cg *g);
static void emit_reduce_row(cg *g, const char *st, const char *at, const char *index,
                            bool with_key, const char *indent);

static sluice_status emit_kernel(cg *g) {
    sl_strbuf *sb = &g->sb;
    sl_codegen *o = g->out;
    const sluice_pipeline *p = g->p;
    int block = g->tuning->block_threads, items = g->items;
    const int min_blocks = resident_blocks(g);
    const int threads = block + (g->overlapped ? 32 : 0);

    sl_strbuf_printf(sb,
                     "/* sluice fused kernel: pipeline '%s', stages %d..%d (generated by "
                     "core/cuda/codegen.c; the tile loop is kernels/sl_tile.cuh) */\n",
                     p->name ? p->name : "", g->first + 1, g->last);
    sl_strbuf_append(sb, "#include \"sl_ops.h\"\n#include \"sl_monoid.h\"\n#include \"sl_tile.cuh\"\n");
    sl_strbuf_printf(sb,
                     "#define BLOCK %d\n#define ITEMS %d\n#define ROUNDS %d\n#define TILE %lld\n"
                     "#ifndef MIN_BLOCKS\n#define MIN_BLOCKS %d\n#endif\n"
                     "#define BUF %zu\n#define STAGES %d\n#define THREADS %d\n"
                     "#define DYNAMIC_SMEM %zu\n",
                     block, items, g->rounds, (long long)tile_threads(g) * items * g->rounds,
                     min_blocks, g->buf_bytes, stages_of(g), threads, o->dynamic_smem);
    /* MIN_BLOCKS may come from the compile (nvrtc.h, sl_cuda_nvrtc_compile_fitted): the
       fitted sources say so, with the spill bound, so that their cache entries are not a
       plain compile's nor another bound's */
    o->min_blocks = min_blocks;
    o->fit_blocks = g->fit && min_blocks > 1 ? min_blocks : 0;
    o->fit_spill_bytes = g->tuning->spill_bytes;
    if (o->fit_blocks)
        sl_strbuf_printf(sb,
                         "/* MIN_BLOCKS: the most, up to this, whose spill stores are at most %d "
                         "bytes */\n",
                         o->fit_spill_bytes);
    sl_strbuf_printf(sb,
                     "struct SlArgs {\n    long long rows, nsegments, ntiles;\n    unsigned char "
                     "*scratch;\n    const unsigned char *carry_in;\n    unsigned char "
                     "*carry_out;\n    long long *out_rows;\n    const void *in[%d];\n    void "
                     "*out[%d];\n    unsigned long long params[%d];\n};\n",
                     o->ninputs ? o->ninputs : 1, o->noutputs ? o->noutputs : 1,
                     p->nparams ? p->nparams : 1);
    for (int ph = 1; ph <= g->phases; ph++) emit_struct(g, ph);
    emit_params(g);
    if (runs_aggregate(g)) {
        emit_run_state(g);
        SL_TRY(emit_run_keys(g));
    }
    emit_tile(g);
    if (g->reduce) emit_reduce_close_batch(g);

    /* the instantiation */
    sl_strbuf_append(sb, "struct Kernel {\n    typedef SlArgs Args;\n    typedef GroupParams Params;\n"
                         "    typedef GroupTile Tile;\n    typedef sl::phase_list<");
    for (int ph = 1; ph <= g->phases; ph++) sl_strbuf_printf(sb, "%sPhase%d", ph > 1 ? ", " : "", ph);
    sl_strbuf_printf(sb,
                     "> Phases;\n    static constexpr int block = BLOCK, items = ITEMS, stages = STAGES;\n"
                     "    static constexpr int rounds = ROUNDS;\n"
                     "    static constexpr long long tile = TILE, round_rows = TILE / ROUNDS;\n"
                     "    static constexpr unsigned buf = BUF;\n"
                     "    static constexpr int phases = %d;\n"
                     "    static constexpr bool overlapped = %s, aggregate = %s, commutative = %s, "
                     "compacts = %s, offsets = %s, runs = %s;\n"
                     "    static constexpr int offsets_input = %d;\n"
                     "    static constexpr bool closes = %s;\n",
                     g->phases, g->overlapped ? "true" : "false", g->aggregate ? "true" : "false",
                     g->commutative ? "true" : "false",
                     o->compacts ? "true" : "false",
                     o->has_offsets ? "true" : "false", runs_aggregate(g) ? "true" : "false",
                     o->offsets_input, o->closes_in_kernel ? "true" : "false");
    if (stages_tiles(g)) emit_issue_loads(g);
    if (runs_aggregate(g)) {
        sl_strbuf_printf(sb, "    typedef RunKeys Keys;\n    typedef RunPhase%d Run;\n",
                         g->slots[g->reduce_slot].phase);
        emit_run_carry(g);
    }
    if (block_records_loop(g)) {
        /* a segment's row from its whole state (the runs' loop: its run state), at ordinal k
           of the batch */
        const cg_slot *rs = &g->slots[g->reduce_slot];
        const char st = runs_aggregate(g) ? 'R' : 'S';
        char index_k[48];
        snprintf(index_k, sizeof index_k, "carry.f%d + k", rs->total_field);
        sl_strbuf_printf(sb, "    __device__ static __forceinline__ void write_row(const SlArgs &a, "
                             "const %c%d &v, const S%d &carry, long long k) {\n"
                             "        (void)a; (void)v; (void)carry; (void)k;\n",
                         st, rs->phase, rs->phase);
        emit_reduce_row(g, "v", "k", index_k, runs_aggregate(g), "        ");
        sl_strbuf_append(sb, "    }\n");
        /* whether a head was folded into a state: its segment began inside the fold */
        sl_strbuf_printf(sb, "    __device__ static __forceinline__ bool restarted(const %c%d &v) "
                             "{ return v.f%d != 0; }\n",
                         st, rs->phase, rs->restart_field);
    }
    if (o->closes_in_kernel)
        sl_strbuf_printf(sb, "    __device__ static __forceinline__ void close(const SlArgs &a, const S%d &s) "
                             "{ close_batch(a, s, false); }\n",
                         g->slots[g->reduce_slot].phase);
    sl_strbuf_append(sb, "};\n");
    sl_strbuf_append(sb, "extern \"C\" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) " SL_CG_KERNEL
                         "(const SlArgs a) {\n    sl::fused_kernel<Kernel>(a);\n}\n");
    if (o->small_kernel)
        sl_strbuf_append(sb, "extern \"C\" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) "
                             SL_CG_SMALL_KERNEL "(const SlArgs a) {\n"
                             "    sl::fused_kernel<Kernel, true>(a);\n}\n");
    if (g->reduce) emit_reduce_close(g);
    if (o->has_offsets)
        sl_strbuf_append(sb, "extern \"C\" __global__ void " SL_CG_SEGINDEX_KERNEL
                             "(const SlArgs a) {\n    sl::segment_index<Kernel>(a);\n}\n");
    return SLUICE_OK;
}

/* Index of column c among the kernel's inputs, -1 when it is not read from one. */
static int input_of(const cg *g, int column) {
    for (int k = 0; k < g->out->ninputs; k++)
        if (g->out->inputs[k] == column && k != g->out->offsets_input) return k;
    return -1;
}

/* RunKeyInputs, RunKeyRow, RunKeyStripe and RunKeys (runs_warp_loop). RunKeyRow makes the key
 * at one row from the kernel's inputs at that row (RunKeyInputs, RunKeyRow::load): the key
 * input itself, or the group's maps that make the key from inputs (runs_countable),
 * evaluated for that row alone. RunKeyStripe (a made key only): the same maps over a lane's
 * rows of striped vector loads of those inputs, for the count of key changes
 * (count_key_changes). RunKeys: the key's type, its input (-1 when maps make it: `made`), its
 * change test (the one the reduce's combine makes, emit_reduce_combine) between two rows and
 * between the carry's open run and a row, `load`, `make` and `at` (the two at once), and for
 * a made key the striped access's shape, whether the inputs are aligned for it, and
 * `striped`. */
static sluice_status emit_run_keys(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sluice_pipeline *p = g->p;
    const sl_reduce *r = g->reduce;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    const int key = r->segment_column, k = input_of(g, key);
    const sluice_type type = p->columns[key].type;
    const char *kr = key_read(g, key), *tn = type_name(type);
    bool *needed = sl_calloc(g->ctx, (size_t)p->ncolumns, sizeof *needed);
    if (!needed) return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    row_visit v = {g, needed, 0, true};
    if (!row_computable(&v, key)) {
        sl_free(g->ctx, needed);
        return sl_error(g->ctx, SLUICE_ERR_INVALID_ARGUMENT, "internal: a run key not computable per row");
    }
    /* the kernel inputs the key needs (not the offsets), in input order */
    int *key_inputs = sl_calloc(g->ctx, (size_t)g->out->ninputs + 1, sizeof *key_inputs);
    if (!key_inputs) {
        sl_free(g->ctx, needed);
        return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    }
    int nkey_inputs = 0;
    for (int in = 0; in < g->out->ninputs; in++)
        if (in != g->out->offsets_input && needed[g->out->inputs[in]]) key_inputs[nkey_inputs++] = in;
    /* a striped access: CHUNK rows of every input the key needs, in one vector of at most 16
       bytes each (sl::load_striped); a lane makes STRIPE rows at a time, about 128 bytes of
       inputs in flight (the input key's count reads as much) */
    int widest = 1, row_bytes = 0;
    for (int q = 0; q < nkey_inputs; q++) {
        const int size = (int)sluice_type_size(p->columns[g->out->inputs[key_inputs[q]]].type);
        if (size > widest) widest = size;
        row_bytes += size;
    }
    const int chunk = 16 / widest;
    int stripe = row_bytes > 0 ? 128 / row_bytes : 32;
    stripe = stripe > 32 ? 32 : stripe < chunk ? chunk : stripe / chunk * chunk;
    /* RunKeyInputs: the inputs the key needs at one row. RunKeyRow: the key made from them
       (`make`, apart from their load, so that a load a tile ahead does not wait for its
       bytes: runs_warp_loop's edge rows). RunKeyStripe: the key at a lane's STRIPE rows of a
       striped access. Both make the key by the same lines. */
    sl_strbuf_append(sb, "struct RunKeyInputs {\n");
    for (int q = 0; q < nkey_inputs; q++) {
        const int c = g->out->inputs[key_inputs[q]];
        sl_strbuf_printf(sb, "    %s c%d;\n", ctype(p->columns[c].type), c);
    }
    sl_strbuf_append(sb, "};\n");
    for (int striped = 0; striped < 2; striped++) {
        if (k >= 0 && striped) break; /* an input key is read as it is */
        if (striped)
            sl_strbuf_append(sb, "template <int N> struct RunKeyStripe : GroupParams {\n");
        else
            sl_strbuf_append(sb, "struct RunKeyRow : GroupParams {\n");
        for (int c = 0; c < p->ncolumns; c++)
            if (needed[c])
                sl_strbuf_printf(sb, "    %s c%d[%s];\n", ctype(p->columns[c].type), c, striped ? "N" : "1");
        if (striped) {
            sl_strbuf_printf(sb,
                             "    __device__ __forceinline__ explicit RunKeyStripe(const GroupParams &p) : "
                             "GroupParams(p) {}\n"
                             "    /* item q * %d + j: row base + (q * 32 + lane) * %d + j */\n"
                             "    __device__ __forceinline__ void make(const SlArgs &a, long long base, int lane, "
                             "%s (&key)[N]) {\n",
                             chunk, chunk, ctype(type));
        } else {
            sl_strbuf_append(sb, "    __device__ __forceinline__ explicit RunKeyRow(const GroupParams &p) : "
                                 "GroupParams(p) {}\n"
                                 "    __device__ static __forceinline__ RunKeyInputs load(const SlArgs &a, "
                                 "long long r) {\n        RunKeyInputs in;\n");
            for (int q = 0; q < nkey_inputs; q++) {
                const int in = key_inputs[q], c = g->out->inputs[in];
                sl_strbuf_printf(sb, "        in.c%d = ((const %s *)a.in[%d])[r];\n", c,
                                 ctype(p->columns[c].type), in);
            }
            sl_strbuf_printf(sb, "        return in;\n    }\n"
                                 "    __device__ __forceinline__ %s make(const RunKeyInputs &in) {\n"
                                 "        const int i = 0;\n        (void)i;\n",
                             ctype(type));
        }
        for (int q = 0; q < nkey_inputs; q++) {
            const int in = key_inputs[q], c = g->out->inputs[in];
            const char *t = ctype(p->columns[c].type);
            if (striped)
                sl_strbuf_printf(sb, "        sl::load_striped<%s, N, %d>((const %s *)a.in[%d], base, lane, 32, c%d);\n",
                                 t, chunk, t, in, c);
            else
                sl_strbuf_printf(sb, "        c%d[0] = in.c%d;\n", c, c);
        }
        const char *indent = striped ? "            " : "        ";
        if (striped) sl_strbuf_append(sb, "#pragma unroll\n        for (int i = 0; i < N; i++) {\n");
        for (int st = g->first; st < g->last && st < g->reduce_stage; st++) {
            const sl_stage *stage = &p->stages[st];
            if (stage->kind != SL_STAGE_MAP) continue;
            for (int e = 0; e < stage->map.count; e++) {
                const int c = stage->map.columns[e];
                int ms, me;
                if (!needed[c] || input_of(g, c) >= 0 || !map_making(g, c, &ms, &me) || ms != st ||
                    me != e)
                    continue;
                sl_strbuf_printf(sb, "%sc%d[i] = (%s)(", indent, c, ctype(p->columns[c].type));
                emit_expr(sb, stage->map.exprs[e]);
                sl_strbuf_append(sb, ");\n");
            }
        }
        if (striped)
            sl_strbuf_printf(sb, "            key[i] = c%d[i];\n        }\n    }\n};\n", key);
        else
            sl_strbuf_printf(sb, "        return c%d[0];\n    }\n};\n", key);
    }
    sl_strbuf_printf(sb,
                     "struct RunKeys {\n    typedef %s key_t;\n    static constexpr int input = %d;\n"
                     "    static constexpr bool made = %s;\n"
                     "    __device__ static __forceinline__ bool differs(key_t x, key_t y) {\n"
                     "        return !sl_key_same_%s(%s(x), %s(y));\n    }\n"
                     "    __device__ static __forceinline__ bool carry_differs(const S%d &c, key_t y) {\n"
                     "        return c.f%d && !sl_key_same_%s(c.f%d, %s(y));\n    }\n"
                     "    typedef RunKeyInputs row_t;\n"
                     "    __device__ static __forceinline__ row_t load(const SlArgs &a, long long r) {\n"
                     "        return RunKeyRow::load(a, r);\n    }\n"
                     "    __device__ static __forceinline__ key_t make(const GroupParams &p, const row_t &in) {\n"
                     "        return RunKeyRow(p).make(in);\n    }\n"
                     "    __device__ static __forceinline__ key_t at(const SlArgs &a, const GroupParams &p, "
                     "long long r) {\n        return make(p, load(a, r));\n    }\n",
                     ctype(type), k, k < 0 ? "true" : "false", tn, kr, kr, rs->phase,
                     rs->flag_field, tn, rs->last_field, kr);
    if (k < 0) {
        sl_strbuf_printf(sb,
                         "    static constexpr int chunk = %d, stripe = %d;\n"
                         "    __device__ static __forceinline__ bool striped_ok(const SlArgs &a) {\n"
                         "        return true",
                         chunk, stripe);
        for (int q = 0; q < nkey_inputs; q++) {
            const int in = key_inputs[q];
            const char *t = ctype(p->columns[g->out->inputs[in]].type);
            sl_strbuf_printf(sb, " && sl::striped_aligned<%s, %d>((const %s *)a.in[%d])", t, chunk, t, in);
        }
        sl_strbuf_append(sb, ";\n    }\n"
                             "    __device__ static __forceinline__ void striped(const SlArgs &a, const GroupParams &p, "
                             "long long base, int lane, key_t (&key)[stripe]) {\n"
                             "        RunKeyStripe<stripe>(p).make(a, base, lane, key);\n    }\n");
    }
    sl_free(g->ctx, key_inputs);
    sl_free(g->ctx, needed);
    sl_strbuf_append(sb, "};\n");
    return SLUICE_OK;
}

/* The runs' loop state R<phase> (runs_warp_loop), its identity and combine, and its
 * traits RunPhase<phase>: the reduce's values, the last key, whether a row was seen and
 * whether a run began inside (a change, known from the head bits): the key reduce's state less
 * the first key and the two counts, which the loop knows from the blocks' counts, and with the
 * combine of a head-flag reduce (the right span restarts where a change is in it) instead of
 * key comparisons. Field ids are the phase state's, so element, write_row and the value
 * combines read the same names. */
static void emit_run_state(cg *g) {
    sl_strbuf *sb = &g->sb;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    const int ph = rs->phase;
    const char *key_t = ctype(g->fields[rs->last_field].type);
    sl_strbuf_printf(sb, "struct R%d {\n", ph);
    /* widest first: no padding between them */
    for (size_t width = 8; width >= 1; width /= 2) {
        for (int si = 0; si < g->nslots; si++) {
            const cg_slot *slot = &g->slots[si];
            if (slot->phase != ph || slot->kind != SLOT_SCAN) continue;
            for (int f = 0; f < slot->sc->nfields; f++)
                if (sluice_type_size(slot->sc->acc[f]) == width)
                    sl_strbuf_printf(sb, "    %s f%d;\n", ctype(slot->sc->acc[f]),
                                     slot->value_field[f]);
        }
        if (sluice_type_size(g->fields[rs->last_field].type) == width)
            sl_strbuf_printf(sb, "    %s f%d;\n", key_t, rs->last_field);
    }
    sl_strbuf_printf(sb, "    sl_bool f%d;\n    sl_bool f%d;\n};\n", rs->flag_field,
                     rs->restart_field);
    sl_strbuf_printf(sb, "__device__ __forceinline__ R%d r%d_identity() {\n    R%d s = {};\n",
                     ph, ph, ph);
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != ph || slot->kind != SLOT_SCAN) continue;
        for (int f = 0; f < slot->sc->nfields; f++) {
            sl_strbuf_printf(sb, "    s.f%d = ", slot->value_field[f]);
            emit_value(sb, slot->sc->acc[f], slot->sc->identity[f]);
            sl_strbuf_append(sb, ";\n");
        }
    }
    sl_strbuf_append(sb, "    return s;\n}\n");
    sl_strbuf_printf(sb,
                     "struct ROp%d {\n    __device__ __forceinline__ R%d operator()(const R%d &l, "
                     "const R%d &r) const {\n        R%d o = {};\n"
                     "        const bool take_r = r.f%d != 0;\n",
                     ph, ph, ph, ph, ph, rs->restart_field);
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != ph || slot->kind != SLOT_SCAN) continue;
        sl_strbuf_append(sb, "        {\n");
        for (int f = 0; f < slot->sc->nfields; f++) {
            sl_strbuf_printf(sb, "            const %s v%d = ", ctype(slot->sc->acc[f]), f);
            emit_value_combine(g, slot->sc, slot, f);
            sl_strbuf_append(sb, ";\n");
        }
        for (int f = 0; f < slot->sc->nfields; f++)
            sl_strbuf_printf(sb, "            o.f%d = take_r ? r.f%d : v%d;\n",
                             slot->value_field[f], slot->value_field[f], f);
        sl_strbuf_append(sb, "        }\n");
    }
    int seen = rs->flag_field, restart = rs->restart_field, last = rs->last_field;
    sl_strbuf_printf(sb,
                     "        o.f%d = r.f%d ? r.f%d : l.f%d;\n"
                     "        o.f%d = (sl_bool)(l.f%d | r.f%d);\n"
                     "        o.f%d = (sl_bool)(l.f%d | r.f%d);\n"
                     "        return o;\n    }\n};\n",
                     last, seen, last, last, seen, seen, seen, restart, restart, restart);
    sl_strbuf_printf(sb,
                     "struct RunPhase%d {\n    typedef R%d S;\n    typedef ROp%d Op;\n"
                     "    static constexpr bool ORDERED = false, CHUNKS = false, CHUNK_TOTALS = false, "
                     "COUNTS = false, REDUCES = false, BATCH_CONSTANTS = false;\n"
                     "    static constexpr unsigned long long CARRY_OFFSET = Phase%d::CARRY_OFFSET;\n"
                     "    __device__ static __forceinline__ S identity() { return r%d_identity(); }\n"
                     "    __device__ static __forceinline__ long long count(const S &s) { return "
                     "((void)s, 0ll); }\n"
                     "    __device__ static __forceinline__ void batch_constants(S &s, const S &c) "
                     "{ (void)s; (void)c; }\n};\n",
                     ph, ph, ph, ph, ph);
}

/* `dst.fV = src.fV;` for every value field of phase `ph`'s reduce (the run state and the
 * phase state name them alike). */
static void emit_value_copies(cg *g, int ph, const char *dst, const char *src) {
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->phase != ph || slot->kind != SLOT_SCAN) continue;
        for (int f = 0; f < slot->sc->nfields; f++)
            sl_strbuf_printf(&g->sb, "        %s.f%d = %s.f%d;\n", dst, slot->value_field[f], src,
                             slot->value_field[f]);
    }
}

/* Kernel::run_state (the carry's open run as a run state) and Kernel::run_carry (the carry
 * after the batch: the key reduce's state from the runs' loop's total over the batch, the
 * carry before it and the batch's key changes). */
static void emit_run_carry(cg *g) {
    sl_strbuf *sb = &g->sb;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    const int ph = rs->phase;
    sl_strbuf_printf(sb, "    __device__ static __forceinline__ R%d run_state(const S%d &c) {\n"
                         "        R%d r = r%d_identity();\n",
                     ph, ph, ph, ph);
    emit_value_copies(g, ph, "r", "c");
    sl_strbuf_printf(sb, "        r.f%d = c.f%d;\n        r.f%d = c.f%d;\n        return r;\n    }\n",
                     rs->last_field, rs->last_field, rs->flag_field, rs->flag_field);
    sl_strbuf_printf(sb,
                     "    __device__ static __forceinline__ S%d run_carry(const R%d &t, const S%d &c, "
                     "long long changes, const SlArgs &a) {\n        S%d s = c;\n",
                     ph, ph, ph, ph);
    emit_value_copies(g, ph, "s", "t");
    sl_strbuf_printf(sb,
                     "        s.f%d = c.f%d + changes;\n        s.f%d = c.f%d + changes;\n"
                     "        s.f%d = (sl_bool)((c.f%d && c.f%d) || changes > 0);\n"
                     "        if (!c.f%d && a.rows > 0) s.f%d = %s(RunKeys::at(a, GroupParams(a), 0));\n"
                     "        if (t.f%d) s.f%d = t.f%d;\n        s.f%d = t.f%d;\n"
                     "        return s;\n    }\n",
                     rs->count_field, rs->count_field, rs->total_field, rs->total_field,
                     rs->restart_field, rs->flag_field, rs->restart_field, rs->flag_field,
                     rs->first_field, key_read(g, g->reduce->segment_column), rs->flag_field,
                     rs->last_field, rs->last_field, rs->flag_field, rs->flag_field);
}

/* Index of column c among the kernel's outputs, -1 when it is not written. */
static int output_index(const sl_codegen *o, int c) {
    for (int k = 0; k < o->noutputs; k++)
        if (o->outputs[k] == c) return k;
    return -1;
}

/* Writes, into the reduce's output row `at` (a C expression), every kept field of the
 * values from state `st`, the key (key segments) and the index (`index`, an expression). */
static void emit_reduce_row(cg *g, const char *st, const char *at, const char *index,
                            bool with_key, const char *indent) {
    sl_strbuf *sb = &g->sb;
    const sl_codegen *o = g->out;
    const sl_reduce *r = g->reduce;
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->kind != SLOT_SCAN || slot->stage != g->reduce_stage) continue;
        for (int f = 0; f < slot->sc->nfields; f++) {
            int k = slot->sc->into[f] >= 0 ? output_index(o, slot->sc->into[f]) : -1;
            if (k < 0) continue;
            const char *t = ctype(g->p->columns[slot->sc->into[f]].type);
            sl_strbuf_printf(sb, "%s((%s *)a.out[%d])[%s] = (%s)%s.f%d;\n", indent, t, k, at, t,
                             st, slot->value_field[f]);
        }
    }
    int ki = with_key && r->key_column >= 0 ? output_index(o, r->key_column) : -1;
    if (ki >= 0) {
        const char *t = ctype(g->p->columns[r->key_column].type);
        sl_strbuf_printf(sb, "%s((%s *)a.out[%d])[%s] = (%s)%s.f%d;\n", indent, t, ki, at, t, st,
                         g->slots[g->reduce_slot].last_field);
    }
    int ii = r->index_column >= 0 ? output_index(o, r->index_column) : -1;
    if (ii >= 0)
        sl_strbuf_printf(sb, "%s((long long *)a.out[%d])[%s] = %s;\n", indent, ii, at, index);
}

/* The empty-segments kernel of a reduce over offsets (SL_CG_EMPTIES_KERNEL, codegen.h): every
 * empty segment of the batch gives the values' identities at its ordinal, with its index
 * (`index_k`, over the carry's count `s`), grid-strided: a batch may have hundreds of
 * millions of segments. It runs before the close kernel, which advances the count in the
 * carry it reads. */
static void emit_reduce_empties(cg *g, const char *index_k) {
    sl_strbuf *sb = &g->sb;
    sl_strbuf_printf(sb,
                     "extern \"C\" __global__ void __launch_bounds__(%d) " SL_CG_EMPTIES_KERNEL
                     "(const SlArgs a) {\n"
                     "    typedef Phase%d RP;\n    typedef RP::S S;\n"
                     "    S s;\n    memcpy(&s, a.carry_out + RP::CARRY_OFFSET, sizeof s);\n"
                     "    (void)s;\n"
                     "    const long long *offs = (const long long *)a.in[%d];\n"
                     "    const S id = RP::identity();\n    (void)id;\n"
                     "    const long long step = (long long)gridDim.x * blockDim.x;\n"
                     "    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                     "k < a.nsegments; k += step) {\n"
                     "        if (offs[k] != offs[k + 1]) continue;\n",
                     SL_CG_CLOSE_THREADS, g->slots[g->reduce_slot].phase, g->out->offsets_input);
    emit_reduce_row(g, "id", "k", index_k, false, "        ");
    sl_strbuf_append(sb, "    }\n}\n");
}

/* close_batch, what closes a batch of a group ending in a reduce, from the reduce phase's
 * state `s` after the batch (flush: the carry before the flush): writes the rows the batch's
 * end closes (flush: the open segment's row, if any), the batch's rows out and the carry with
 * the index count advanced and the emitted segment closed. The close kernel runs it; the
 * aggregate loop without segments runs it in its last block instead (Kernel::closes). */
static void emit_reduce_close_batch(cg *g) {
    sl_strbuf *sb = &g->sb;
    const sl_reduce *r = g->reduce;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    int ph = rs->phase, seen = rs->flag_field, cb = rs->count_field, ct = rs->total_field;
    char index_at[32];
    snprintf(index_at, sizeof index_at, "s.f%d", ct);
    sl_strbuf_printf(sb,
                     "__device__ __forceinline__ void close_batch(const SlArgs &a, S%d s, bool flush) {\n"
                     "    typedef Phase%d RP;\n    typedef RP::S S;\n"
                     "    bool emit = false;\n    long long at = 0, n = 0;\n",
                     ph, ph);
    switch (r->segments) {
    case SL_SEGMENTS_OFFSETS:
        sl_strbuf_printf(sb, "    if (!flush) { n = a.nsegments; s.f%d += n; }\n", ct);
        break;
    case SL_SEGMENTS_NONE:
        if (r->per_batch) sl_strbuf_append(sb, "    emit = !flush; n = emit ? 1 : 0;\n");
        else sl_strbuf_append(sb, "    emit = flush; n = emit ? 1 : 0;\n");
        break;
    default:
        if (r->per_batch)
            sl_strbuf_printf(sb, "    emit = !flush && s.f%d; at = flush ? 0 : s.f%d;\n"
                                 "    n = flush ? 0 : s.f%d + (emit ? 1 : 0);\n",
                             seen, cb, cb);
        else
            sl_strbuf_printf(sb, "    emit = flush && s.f%d;\n    n = flush ? (emit ? 1 : 0) : s.f%d;\n",
                             seen, cb);
        break;
    }
    sl_strbuf_append(sb, "    if (emit) {\n");
    emit_reduce_row(g, "s", "at", index_at, true, "        ");
    sl_strbuf_printf(sb, "        s.f%d += 1;\n    }\n", ct);
    /* the emitted segment is closed: the next one starts from the identities */
    sl_strbuf_append(sb, "    if (emit || flush) {\n        const S id = RP::identity();\n        (void)id;\n");
    for (int si = 0; si < g->nslots; si++) {
        const cg_slot *slot = &g->slots[si];
        if (slot->kind != SLOT_SCAN || slot->stage != g->reduce_stage) continue;
        for (int f = 0; f < slot->sc->nfields; f++)
            sl_strbuf_printf(sb, "        s.f%d = id.f%d;\n", slot->value_field[f],
                             slot->value_field[f]);
        if (slot->flag_field >= 0) sl_strbuf_printf(sb, "        s.f%d = 0;\n", slot->flag_field);
        if (slot->interior_field >= 0)
            sl_strbuf_printf(sb, "        s.f%d = 0;\n", slot->interior_field);
    }
    if (rs->restart_field >= 0) sl_strbuf_printf(sb, "        s.f%d = 0;\n", rs->restart_field);
    sl_strbuf_printf(sb, "        s.f%d = 0;\n    }\n", seen);
    sl_strbuf_append(sb, "    *a.out_rows = n;\n"
                         "    memcpy(a.carry_out + RP::CARRY_OFFSET, &s, sizeof s);\n}\n");
}

/* The close kernel of a group ending in a reduce (SL_CG_CLOSE_KERNEL, codegen.h): one block,
 * one thread of which runs close_batch. Batch mode reads the carry the main kernel left (an
 * empty batch's, where the main kernel did not run, with the per-batch resets applied);
 * flush mode (ntiles < 0) the carry before the flush. Over offsets, the empty segments'
 * kernel too. */
static void emit_reduce_close(cg *g) {
    sl_strbuf *sb = &g->sb;
    const cg_slot *rs = &g->slots[g->reduce_slot];
    char index_k[48];
    snprintf(index_k, sizeof index_k, "s.f%d + k", rs->total_field);
    sl_strbuf_printf(sb,
                     "extern \"C\" __global__ void __launch_bounds__(%d) " SL_CG_CLOSE_KERNEL
                     "(const SlArgs a) {\n"
                     "    typedef Phase%d RP;\n"
                     "    if (threadIdx.x != 0) return;\n"
                     "    const bool flush = a.ntiles < 0;\n"
                     "    RP::S s;\n"
                     "    memcpy(&s, (flush ? a.carry_in : a.carry_out) + RP::CARRY_OFFSET, sizeof s);\n"
                     "    if (!flush && a.rows == 0) RP::reset(s);\n"
                     "    close_batch(a, s, flush);\n}\n",
                     SL_CG_CLOSE_THREADS, rs->phase);
    if (g->reduce->segments == SL_SEGMENTS_OFFSETS) emit_reduce_empties(g, index_k);
}

/* Which inputs the copy engine stages and the size of a stage (BUF). A stage holds the tile
 * of every staged input column, each at a 128-byte aligned offset, up to SL_CG_STAGE_BUDGET
 * bytes (further columns are loaded from global memory directly: two stages of the budget
 * still leave room for two blocks per SM); it must also hold the widest group column's tile,
 * for the stores and the compaction staged through it. None for a loop without stages
 * (stages_tiles). The inputs the stages read (read_by_stages) take the room first, in the
 * order listed, then those the group only writes out: an unstaged column that an expression
 * reads delays the tile, one only written out does not (items_to_stage_inputs), so a
 * written-only column listed first must not push a read one out. */
static sluice_status plan_stages(cg *g) {
    const sluice_pipeline *p = g->p;
    sl_codegen *o = g->out;
    const size_t round_rows = (size_t)g->items * (size_t)tile_threads(g);
    const size_t tile = round_rows * (size_t)g->rounds;
    int n = o->ninputs ? o->ninputs : 1;
    /* planned again when the block changes (fill_register_partitions) */
    sl_free(g->ctx, g->staged);
    sl_free(g->ctx, g->stage_offset);
    g->staged = sl_calloc(g->ctx, (size_t)n, sizeof *g->staged);
    g->stage_offset = sl_calloc(g->ctx, (size_t)n, sizeof *g->stage_offset);
    if (!g->staged || !g->stage_offset)
        return sl_error(g->ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    const size_t widest = widest_group_column(g);
    size_t end = 0;
    g->staged_bytes = 0;
    g->buf_bytes = 0;
    o->dynamic_smem = 0;
    if (!stages_tiles(g)) return SLUICE_OK;
    for (int pass = 0; pass < 2; pass++) {
        const bool read_pass = pass == 0;
        for (int k = 0; k < o->ninputs; k++) {
            if (k == o->offsets_input || g->read_by_stages[o->inputs[k]] != read_pass) continue;
            size_t bytes = tile * sluice_type_size(p->columns[o->inputs[k]].type);
            /* bulk copies move multiples of 16 bytes; one stage's count stays under the
               barrier's transaction limit (2^20 - 1 bytes) */
            if (bytes % 16 != 0 || end + bytes > SL_CG_STAGE_BUDGET) continue;
            g->staged[k] = true;
            g->stage_offset[k] = end;
            end += (bytes + 127) / 128 * 128;
            g->staged_bytes += bytes;
        }
    }
    /* a tile of several rounds stages its stores in one buffer of a round's rows after the
       stages (kernels/sl_tile.cuh overlapped_loop): its stage still holds the later rounds
       (rounds hold no compaction, whose stores always stage) */
    const size_t store_bytes =
        g->rounds > 1 && !g->direct_stores ? (round_rows * widest + 127) / 128 * 128 : 0;
    size_t buf = g->rounds > 1 || tile * widest <= end ? end : tile * widest;
    g->buf_bytes = (buf + 127) / 128 * 128;
    o->dynamic_smem = (size_t)stages_of(g) * g->buf_bytes + store_bytes;
    return SLUICE_OK;
}

/* ---- entry points -------------------------------------------------------------------- */

/* Whether a thread may take `items` rows (SLUICE_CUDA_TUNING, SLUICE_CUDA_MAX_ITEMS): a power
 * of two in [1, 128]; groups with head bits take 32 at most (sl_cuda_codegen). */
static bool items_allowed(int items) {
    return items >= 1 && items <= 128 && (items & (items - 1)) == 0;
}

/* SLUICE_CUDA_TUNING="THREADS:ITEMS[:MIN_BLOCKS]" overrides the table for measurements
 * (bench runs that compare launch shapes in one go); values that are not a multiple of 32
 * threads in [32, 1024], items that items_allowed refuses and min blocks outside [1, 32] are
 * ignored. THREADS are the row threads: a kernel with a look-back warp takes 992 at most
 * (sl_cuda_codegen). */
static bool tuning_override(int *threads, int *items, int *min_blocks) {
    const char *env = getenv("SLUICE_CUDA_TUNING");
    int t = 0, i = 0, m = 0;
    int n = env ? sscanf(env, "%d:%d:%d", &t, &i, &m) : 0;
    if (n < 2) return false;
    if (t < 32 || t > 1024 || t % 32 != 0 || !items_allowed(i)) return false;
    *threads = t;
    *items = i;
    if (n == 3 && m >= 1 && m <= 32) *min_blocks = m;
    return true;
}

/* The group's loop at `threads` a block in place of its tuning row's (a row's block for one
 * kind of loop: records_block_threads, lookback_block_threads); the emitted kernel and the
 * launch shape (sl_cuda_codegen's out) read g->tuning. */
static void use_block_threads(cg *g, int threads) {
    if (g->tuning != &g->override) g->override = *g->tuning;
    g->override.block_threads = threads;
    g->tuning = &g->override;
}

/* A multiprocessor's registers lie in four partitions, each warp's in one
 * (registers_for_blocks): blocks x warps that is not a multiple of four leaves a partition a
 * warp or more short, and the busiest partition decides the registers a thread gets. So a
 * kernel with a look-back warp, at the table's block and asked to hold two or more blocks,
 * takes the extra warps of row threads that fill the partitions where they cost no register
 * a thread and the larger tiles' stages still let the blocks reside: two blocks of 256 row
 * threads and the look-back warp (9 warps each, partitions of 5, 5, 4 and 4 warps) become
 * two of 288 (10 each: 5 a partition, the same 96 registers a thread), tiles an eighth
 * larger. Measured on the H200 (bench/RESULTS.md, twenty-fifth session): the six-stage group
 * 5.00x -> 5.79x CUB, the cull 1.77x -> 1.64x its floor, two f64 scans 67% -> 76% of copy,
 * run_to_run's recurrence 65% -> 72%; 320 or more row threads, which cost the second block,
 * lost 10-30%. The look-back-bound block (tuning.h lookback_block_threads, 17 warps) is left
 * as it is: filled to 18 the filter gained 3% but the f32 recurrence lost 5% and the f64
 * filter 2%. Four blocks of 9 warps (the scans, the segmented sums) fill the partitions
 * already; three would need 12 warps, at fewer registers. */
static sluice_status fill_register_partitions(cg *g) {
    if (!g->overlapped || warp_tiles(g)) return SLUICE_OK;
    const int rows = g->tuning->block_threads, warps = rows / 32 + 1;
    const int blocks = resident_blocks(g);
    if (blocks < 2 || blocks * warps % 4 == 0) return SLUICE_OK;
    int filled = warps;
    while (blocks * filled % 4 != 0) filled++;
    if (filled * 32 > 1024 || blocks * filled * 32 > 2048 ||
        registers_for_blocks(filled * 32, blocks) < registers_for_blocks(warps * 32, blocks))
        return SLUICE_OK;
    const sl_tuning before = *g->tuning;
    use_block_threads(g, (filled - 1) * 32);
    sluice_status st = plan_stages(g);
    if (st == SLUICE_OK && resident_blocks(g) < blocks) {
        /* the larger stages cost a block: back to the table's block */
        g->override = before;
        st = plan_stages(g);
    }
    return st;
}

/* Items a thread: bytes_per_thread of the widest column the kernel loads, so that each
 * thread keeps the same bytes of loads in flight whatever the group makes from them (an i64
 * sum or count of f32 rows loads like the f32 scan, and is as bound by those loads). The
 * offsets of a segmented group are read a few per tile, not per item, so they do not count.
 * A group that loads no column (a count alone) sizes by the widest it makes. Columns it makes
 * hold at most twice bytes_per_thread a thread (an i64 sum of i8 rows keeps the i32 sum's
 * items, not twice them). Then halved while the group's live columns would hold more items
 * in registers than the budget. */
typedef struct item_bounds {
    int by_loads; /* bytes_per_thread of the widest column loaded (made, if none is) */
    int capped;   /* ... within twice bytes_per_thread of the widest made and max_items */
    int ncols;    /* the group's live columns */
    size_t widest_loaded, widest_made; /* bytes of an element (0: none loaded; made: 1 at least) */
} item_bounds;

static item_bounds bound_items(const cg *g) {
    const sl_tuning *t = g->tuning;
    item_bounds b = {0, 0, 0, 0, 1};
    for (int c = 0; c < g->p->ncolumns; c++) {
        if (!g->in_group[c]) continue;
        b.ncols++;
        if (g->p->columns[c].role == SLUICE_ROLE_OFFSETS) continue;
        size_t sz = sluice_type_size(g->p->columns[c].type);
        size_t *widest = g->made[c] ? &b.widest_made : &b.widest_loaded;
        if (sz > *widest) *widest = sz;
    }
    const size_t widest = b.widest_loaded ? b.widest_loaded : b.widest_made;
    b.by_loads = t->bytes_per_thread / (int)widest;
    b.capped = b.by_loads;
    if (b.capped > 2 * t->bytes_per_thread / (int)b.widest_made)
        b.capped = 2 * t->bytes_per_thread / (int)b.widest_made;
    if (b.capped > t->max_items) b.capped = t->max_items;
    return b;
}

static int choose_items(const cg *g) {
    const sl_tuning *t = g->tuning;
    const item_bounds b = bound_items(g);
    int items = b.capped;
    while (items > t->min_items && b.ncols * items > t->register_items) items /= 2;
    if (items < t->min_items) items = t->min_items;
    return items;
}

/* SLUICE_CUDA_MAX_ITEMS=N (items_allowed) sets the tuning row's max_items for
 * measurements of larger tiles over narrow columns against the table's (bench/RESULTS.md,
 * thirty-fifth session); anything else is ignored. */
static void max_items_override(cg *g) {
    const char *env = getenv("SLUICE_CUDA_MAX_ITEMS");
    int n = env ? atoi(env) : 0;
    if (!items_allowed(n)) return;
    g->override = *g->tuning;
    g->override.max_items = n;
    g->tuning = &g->override;
    g->max_items_set = true;
}

/* Rounds a tile: the loop with a look-back warp may take a tile in several rounds of items x
 * threads rows (kernels/sl_tile.cuh, overlapped_loop), so that a tile's rows, and the rows each
 * look-back is paid for, do not depend on the registers a thread has. Possible only where a row
 * needs nothing of the tile but its states: no compaction (its kept rows are placed by the
 * tile), no reduce (its closed segments are), no offsets segments (their head bits are the
 * tile's). Taken by default by the shape measured to gain: one plain scan (no segments, no
 * second scan) over columns of 1 or 2 bytes, whose tile then holds 128 bytes of loads a
 * thread (twice bytes_per_thread: 4 rounds of 32 i8 rows, 2 of 32 i16 rows), as long as the
 * tile's loads stay within the table block's at that rate (32 KB on sm_90, the f32 scan's
 * tile: an i16 scan into i64 at 512 threads of 16 items stops at 2 rounds); 4 rounds at most.
 * Called once the block is known (lookback_block_threads), before the stages are planned.
 * Why this shape alone (bench/RESULTS.md, §12 and the thirty-eighth and thirty-ninth
 * sessions): on an H100 the i8 max scan went 47 / 59 / 63% of copy in 1 / 2 / 4 rounds and the
 * i16 one 68 / 80 / 57%; with packed items (sl_items.cuh) an f32, i32 or i64 sum of i8 rows
 * 87 / 87 / 90% in 2 rounds and 91 / 92 / 93% in 4, an i16 sum into i64 91% in 2 and 66% in 4
 * (a 64 KB tile); a key-segmented scan, two scans side by side and every group loading 4-byte
 * columns lost in rounds (their larger stages cost resident blocks). SLUICE_CUDA_ROUNDS=N (1,
 * 2, 4 or 8) sets it for any group that may take rounds, for measurements; under
 * SLUICE_CUDA_TUNING, one unless it is set. */
static int rounds_of(const cg *g, bool tuning_overridden) {
    const sl_codegen *o = g->out;
    if (!g->overlapped || o->compacts || o->reduces || o->has_offsets) return 1;
    const char *env = getenv("SLUICE_CUDA_ROUNDS");
    if (env) {
        const int n = atoi(env);
        return n == 2 || n == 4 || n == 8 ? n : 1;
    }
    if (tuning_overridden) return 1;
    if (g->nslots != 1 || g->slots[0].kind != SLOT_SCAN || g->slots[0].sc->segments != SL_SEGMENTS_NONE)
        return 1;
    const item_bounds b = bound_items(g);
    if (b.widest_loaded == 0 || b.widest_loaded > 2) return 1;
    const size_t loads = 2 * (size_t)g->tuning->bytes_per_thread;
    const size_t tile_cap = (size_t)sl_tuning_for(g->tuning->arch)->block_threads * loads;
    const size_t round_loads = (size_t)g->items * b.widest_loaded;
    int rounds = 1;
    while (rounds < 4 && round_loads * (size_t)rounds < loads &&
           (size_t)g->tuning->block_threads * round_loads * (size_t)(2 * rounds) <= tile_cap)
        rounds *= 2;
    return rounds;
}

/* A group whose columns are all of 1 byte (an i8, u8 or bool scan into the same type) that
 * rounds_of gives four rounds of 32 items takes the same 32 KB tile in two rounds of 64: its
 * packed columns (kernels/sl_items.cuh) hold 64 rows in 16 registers, and half the rounds
 * halve the block scans and staged stores a tile pays. It asks ptxas for two blocks'
 * registers (96 a thread; 12 B of spill stores, within the fit's 16), and two do reside: 112
 * KB of stages and stores, 160 B of static shared memory (cudaOccupancy on an H100), though
 * blocks_by_smem's allowance (227 KB an SM, 3 KB a block) counts one, so resident_blocks
 * alone would ask one. At one block ptxas took 168 registers and the i8 max scan ran at
 * 62.8% of copy; at two 74.5-75.0% against 69.8-70.3% in four rounds of 32 (bool xor
 * 73.2-74.1% against 68.6-68.8%; H100, A/B three times; bench/RESULTS.md, fortieth
 * session). Groups that make wider columns (an f32 sum of i8 rows: 64 f32 items a thread)
 * keep four rounds, as does any group under SLUICE_CUDA_ROUNDS or SLUICE_CUDA_MAX_ITEMS. */
static bool one_byte_rounds(const cg *g) {
    if (g->rounds != 4 || g->items != 32) return false;
    const item_bounds b = bound_items(g);
    return b.widest_loaded == 1 && b.widest_made == 1;
}

/* A two-byte max or min scan taken two rows a word (pairs_scan_of) that rounds_of gives two
 * rounds of 32 items takes the same tile (16,384 rows at 256 row threads) in one round of 64
 * at two blocks: a packed column holds a thread's 64 rows in 32 registers, and one round
 * halves the block scans and staged stores a tile pays, as one_byte_rounds does for one-byte
 * groups. Measured on an H100 as SLUICE_CUDA_TUNING=256:64:2 against the default's two rounds
 * of 32 at one block: the i16 max scan +0.5 to +1.5 points in five of six pairs (83.8 ->
 * 85.1% of copy; bench/RESULTS.md, forty-first and forty-third sessions). Only where the
 * scan's column is the only one the group makes: a map's i16 column beside it doubles the
 * staged stores (192 KB a block) and spills at two blocks, so the fit compiles one block of
 * one round, below the two rounds it replaces. Not under the measurement overrides. */
static bool pairs_one_round(const cg *g) {
    if (g->rounds != 2 || g->items != 32) return false;
    const sl_scan *sc = pairs_scan_of(g);
    if (!sc) return false;
    for (int c = 0; c < g->p->ncolumns; c++)
        if (g->made[c] && c != sc->into[0]) return false;
    return true;
}

/* The rounds of 64 items at two blocks that a narrow scan takes by default in place of
 * rounds_of's 32 items (one_byte_rounds: 2, pairs_one_round: 1), or 0 where it keeps them,
 * as every group does under the measurement overrides (SLUICE_CUDA_MAX_ITEMS,
 * SLUICE_CUDA_ROUNDS). */
static int narrow_scan_rounds(const cg *g) {
    if (g->max_items_set || getenv("SLUICE_CUDA_ROUNDS")) return 0;
    if (one_byte_rounds(g)) return 2;
    if (pairs_one_round(g)) return 1;
    return 0;
}

sluice_status sl_cuda_codegen(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                              int group, int arch, sl_codegen *out) {
    memset(out, 0, sizeof *out);
    if (!plan || group < 0 || group >= plan->ngroups || plan->groups[group].kind != SL_GROUP_FUSED)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: plan group %d is not a fused group", group);
    cg g = {.ctx = ctx, .p = p, .plan = plan, .first = plan->groups[group].first,
            .last = plan->groups[group].last, .tuning = sl_tuning_for(arch), .rounds = 1,
            .out = out};
    sl_strbuf_init(&g.sb, ctx);
    sluice_status st = analyse(&g);
    bool overridden = false;
    if (st == SLUICE_OK) {
        max_items_override(&g);
        g.items = choose_items(&g);
        int threads, items, min_blocks = 0;
        overridden = tuning_override(&threads, &items, &min_blocks);
        if (overridden) {
            g.override = (sl_tuning){g.tuning->arch, threads, 0, 1, 32, 1 << 20, g.tuning->min_blocks,
                                     0, 0, g.tuning->spill_bytes};
            g.forced_min_blocks = min_blocks;
            g.tuning = &g.override;
            g.items = items;
        }
        /* SLUICE_CUDA_OVERLAP=0 keeps single-phase groups on the two-stage kernel (for
           measurements that compare the two shapes) */
        g.aggregate = aggregate_only(&g);
        g.commutative = g.aggregate && g.reduce->segments == SL_SEGMENTS_NONE &&
                        reduce_commutative(g.reduce);
        g.overlapped = !g.aggregate && g.phases == 1 && arch >= 90 &&
                       !env_is("SLUICE_CUDA_OVERLAP", "0");
        /* for measurements against the chunked look-back (phase_chunks): with
           SLUICE_CUDA_CHUNKS=0 the default mode's 4-byte states take the fast look-back too;
           with SLUICE_CUDA_CHUNKS=all every state takes the chunked one in the large kernel,
           with chunk totals over 4 bytes, as run_to_run's ordered look-back does */
        g.fit = !env_is("SLUICE_CUDA_FIT", "0");
        g.direct_stores = env_is("SLUICE_CUDA_STORE", "direct");
        g.pack = !env_is("SLUICE_CUDA_PACK", "0");
        g.pairs = arch >= 90 && !env_is("SLUICE_CUDA_PAIRS", "0");
        g.chunks = env_is("SLUICE_CUDA_CHUNKS", "0")     ? CHUNKS_NONE
                   : env_is("SLUICE_CUDA_CHUNKS", "all") ? CHUNKS_ALL
                                                         : CHUNKS_NARROW;
        /* a block holds 1024 threads, the look-back warp's 32 among them: SLUICE_CUDA_TUNING's
           THREADS stop at 992 where there is one */
        if (overridden && g.overlapped && g.override.block_threads > 1024 - 32)
            g.override.block_threads = 1024 - 32;
        out->lookback_warp = g.overlapped;
        out->small_kernel = g.overlapped && !phase_ordered(&g, 1);
        out->aggregate_loop = g.aggregate;
        /* the aggregate loop's last block closes the batch itself: no close kernel after it
           (a launch and its gap less a batch) */
        out->closes_in_kernel = g.aggregate && g.reduce->segments == SL_SEGMENTS_NONE;
        out->reduce_offsets = g.reduce && g.reduce->segments == SL_SEGMENTS_OFFSETS;
        out->block_records = block_records_loop(&g);
        if (out->block_records && !overridden && g.tuning->records_block_threads > 0)
            use_block_threads(&g, g.tuning->records_block_threads);
        /* a thread's head bits and the next row's share one 64-bit word (kernels/sl_tile.cuh,
           HEADS_FIT): a group over offsets segments or runs of keys takes 32 items at most,
           whatever SLUICE_CUDA_TUNING or SLUICE_CUDA_MAX_ITEMS ask */
        if (g.items > 32 && (out->has_offsets || runs_aggregate(&g))) g.items = 32;
        out->items_per_thread = g.items;
        out->phases = g.phases;
        out->nparams = p->nparams;
        out->arg_slots = SL_CG_FIXED_SLOTS + (size_t)(out->ninputs ? out->ninputs : 1) +
                         (size_t)(out->noutputs ? out->noutputs : 1) +
                         (size_t)(p->nparams ? p->nparams : 1);
        if (out->arg_slots * 8 > 4096)
            st = sl_error(ctx, SLUICE_ERR_LIMIT,
                          "stages %d..%d need %zu kernel arguments (columns and params); one GPU "
                          "pass holds at most %d: split the pipeline or drop unused columns",
                          g.first + 1, g.last, out->arg_slots, 4096 / 8);
    }
    if (st == SLUICE_OK) {
        size_t carry = 0;
        for (int ph = 1; ph <= g.phases; ph++) {
            int *ord = sl_calloc(ctx, (size_t)(g.nfields ? g.nfields : 1), sizeof *ord);
            int count = 0;
            if (!ord) {
                st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
                break;
            }
            widen_narrow_fields(&g, ph, ord);
            layout_phase(&g, ph, ord, &count);
            sl_free(ctx, ord);
            out->state_size[ph - 1] = g.state_size[ph];
            g.carry_offset[ph] = carry;
            carry += (g.state_size[ph] + 15) / 16 * 16;
        }
        out->carry_bytes = carry ? carry : 16;
        out->carry_identity = st == SLUICE_OK ? sl_calloc(ctx, out->carry_bytes, 1) : NULL;
        if (st == SLUICE_OK && !out->carry_identity)
            st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
        out->scan_carry = st == SLUICE_OK ? sl_calloc(ctx, (size_t)g.nslots + 1,
                                                      sizeof *out->scan_carry) : NULL;
        if (st == SLUICE_OK && !out->scan_carry)
            st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
        int reduce_values = 0;
        for (int si = 0; st == SLUICE_OK && si < g.nslots; si++) {
            const cg_slot *slot = &g.slots[si];
            if (slot->kind != SLOT_SCAN) continue; /* count, flags, keys: identity 0 */
            const sl_scan *sc = slot->sc;
            size_t at = g.carry_offset[slot->phase];
            unsigned char *base = out->carry_identity + at;
            /* Slots are added in stage order, so this is the group's next scan. */
            sl_cg_scan_carry *sk = &out->scan_carry[out->nscans++];
            for (int f = 0; f < SL_MAX_FIELDS; f++) sk->value[f] = SIZE_MAX;
#define FIELD_AT(id) ((id) >= 0 ? at + g.fields[id].offset : SIZE_MAX)
            sk->flag = FIELD_AT(slot->flag_field);
            sk->interior = FIELD_AT(slot->interior_field);
            sk->first = FIELD_AT(slot->first_field);
            sk->last = FIELD_AT(slot->last_field);
            /* a reduce's value: where the reduce's own state is (analyse_reduce puts it in
               its values' phase, so `at` is its phase's offset too) */
            const cg_slot *rs =
                g.reduce && slot->stage == g.reduce_stage ? &g.slots[g.reduce_slot] : NULL;
            sk->reduce_value = rs ? reduce_values++ : -1;
            sk->reduce = (sl_cg_reduce_carry){SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX,
                                              SIZE_MAX, SIZE_MAX};
            if (rs)
                sk->reduce = (sl_cg_reduce_carry){
                    FIELD_AT(rs->flag_field),     FIELD_AT(rs->count_field),
                    FIELD_AT(rs->total_field),    FIELD_AT(rs->restart_field),
                    FIELD_AT(rs->interior_field), FIELD_AT(rs->first_field),
                    FIELD_AT(rs->last_field)};
#undef FIELD_AT
            for (int f = 0; f < sc->nfields; f++) {
                const cg_field *fd = &g.fields[slot->value_field[f]];
                sl_value_store(fd->held, base + fd->offset, 0, sc->identity[f]);
                sk->held[f] = fd->held;
                sk->value[f] = at + fd->offset;
            }
        }
    }
    /* the look-back-bound loop's block (tuning.h, lookback_block_threads): known only now
       that the phase's state is laid out */
    bool lookback_block = false;
    if (st == SLUICE_OK && !overridden && g.overlapped && g.tuning->lookback_block_threads > 0 &&
        lookback_bound(&g)) {
        use_block_threads(&g, g.tuning->lookback_block_threads);
        lookback_block = true;
    }
    if (st == SLUICE_OK && !overridden && g.overlapped && !env_is("SLUICE_CUDA_STAGE_ITEMS", "table"))
        st = items_to_stage_inputs(&g);
    if (st == SLUICE_OK) g.rounds = rounds_of(&g, overridden);
    /* as measured, at the table's 256 row threads: filling the register partitions (a
       tenth warp) would spill 24 B at two blocks, so the fit would compile it at one */
    const int narrow_rounds = st == SLUICE_OK && !overridden ? narrow_scan_rounds(&g) : 0;
    if (narrow_rounds) {
        g.items = 64;
        g.rounds = narrow_rounds;
        g.forced_min_blocks = 2;
        out->items_per_thread = g.items;
    }
    if (st == SLUICE_OK) st = plan_stages(&g);
    if (st == SLUICE_OK && !overridden && !lookback_block && !narrow_rounds)
        st = fill_register_partitions(&g);
    if (st == SLUICE_OK) {
        out->block_threads = g.tuning->block_threads + (g.overlapped ? 32 : 0);
        out->tile_rows = (int64_t)g.items * tile_threads(&g) * g.rounds;
        out->rounds = g.rounds;
    }
    if (st == SLUICE_OK) st = emit_kernel(&g);
    if (st == SLUICE_OK && g.sb.failed)
        st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory generating a kernel");
    if (st == SLUICE_OK) {
        out->source = sl_strbuf_take(&g.sb);
    } else {
        sl_strbuf_free(&g.sb);
        sl_cuda_codegen_free(ctx, out);
    }
    sl_free(ctx, g.level);
    sl_free(ctx, g.in_group);
    sl_free(ctx, g.read_by_stages);
    sl_free(ctx, g.made);
    sl_free(ctx, g.needed_after);
    sl_free(ctx, g.slots);
    sl_free(ctx, g.fields);
    sl_free(ctx, g.field_phase);
    sl_free(ctx, g.staged);
    sl_free(ctx, g.stage_offset);
    return st;
}

void sl_cuda_codegen_free(sluice_context *ctx, sl_codegen *cg_out) {
    if (!cg_out) return;
    sl_free(ctx, cg_out->source);
    sl_free(ctx, cg_out->inputs);
    sl_free(ctx, cg_out->outputs);
    sl_free(ctx, cg_out->passthrough);
    sl_free(ctx, cg_out->carry_identity);
    sl_free(ctx, cg_out->scan_carry);
    memset(cg_out, 0, sizeof *cg_out);
}

int64_t sl_cuda_codegen_tiles(const sl_codegen *c, int64_t rows) {
    return rows <= 0 ? 0 : (rows + c->tile_rows - 1) / c->tile_rows;
}

size_t sl_cuda_codegen_phase_offset(const sl_codegen *c, int64_t rows, int phase) {
    unsigned long long ntiles = (unsigned long long)sl_cuda_codegen_tiles(c, rows);
    unsigned long long off = SL_SCRATCH_ALIGN + sl_segment_index_bytes(c->has_offsets, ntiles);
    for (int ph = 0; ph < phase && ph < c->phases; ph++)
        off += sl_phase_scratch_bytes(c->state_size[ph], ntiles, c->block_records);
    return (size_t)off;
}

size_t sl_cuda_codegen_scratch_size(const sl_codegen *c, int64_t rows) {
    if (c->phases == 0 && !c->has_offsets) return 0;
    return sl_cuda_codegen_phase_offset(c, rows, c->phases);
}
