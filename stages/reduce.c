/* reduce.c — the `reduce` stage: one row per segment instead of one per row. Each of its
 * `values` is a reduction written like a scan (op, of, a, b, into, acc; parsed by the scan's
 * own parser in stages/scan.c, so types, accumulators and errors are the scan's); a
 * segment's value is what an inclusive scan over the segment gives at its last row, the
 * identity for an empty one. Segments are the whole stream (absent), an offsets input, a bool
 * head-flag column or runs of equal keys ({key: COLUMN}), as for segmented_scan; `per: batch`
 * also ends them at each batch's end; `index` adds the segment's index. After the stage only
 * the key column, the index and the values' into columns are live. The contract is
 * pipelines/SCHEMA.md, "reduce".
 *
 * The IR (sl_reduce, core/ir/ir.h), for the backends:
 *  - values[0, nvalues): each an sl_scan exactly as a scan stage holds one (op, custom,
 *    nfields, acc, identity, `of` already cast to acc, into[f] the output column of state
 *    field f or -1), inclusive, with the reduce's segments copied in (segments,
 *    segment_column) and reset_per_batch = per_batch. A backend may run each value as the
 *    segmented scan it is and keep the state at each segment's last row.
 *  - segments, segment_column: NONE (-1), OFFSETS (the offsets input; every segment of the
 *    batch gives a row, empty ones the identities; nothing carried between batches), HEADFLAG
 *    (a bool column: a segment starts at each nonzero byte and at the stream's first row) or
 *    KEY (runs of equal bits; a bool key by truth value).
 *  - key_column: for KEY the key column itself, -1 otherwise. It keeps its column id: after
 *    the stage it holds each segment's key (a bool key as 0/1).
 *  - index_column: the i64 column of segment indices over the whole stream (from 0, per
 *    batch too), -1 when not asked for.
 *  - per_batch: segments also end at each batch's end (NONE: one row per batch, an empty
 *    batch included); otherwise the open segment is carried to the next batch and emitted
 *    when the next segment starts, or at flush (NONE: one row at flush, an empty stream
 *    included).
 * In the plan (core/plan/plan.h) the kind's shape SL_SHAPE_REDUCE ends its fused group: the
 * stages before the reduce and the reduce are one pass (g->reduces); the stages after it
 * are a new group over the reduced rows. The group's `out` columns are those of the key,
 * index and into columns needed later (`in` has the key); its values join carry phase
 * plan->stage_phase[stage] like scans; sl_plan_rows_out bounds the rows a piece gives (with
 * an offsets input's empty segments, more than it brings). At flush the executor calls the
 * backend's flush_group (core/runtime/session.h) for each group with emits_at_flush, which
 * gives the open segment's row, and runs it through the groups after. The CPU's piece is
 * the reduce section of core/cpu/fused.c. */
#include <string.h>

#include "stages/kind.h"
#include "stages/registry.h"

/* At most this many reductions in one stage (each is carried state on every backend). */
#define SL_MAX_REDUCE_VALUES 32

static const char *const value_keys[] = {"op", "of", "a", "b", "into", "acc", "kind", "reset"};

/* The scan keys a reduction does not take get a message saying why (they are in value_keys
 * only so that ld_check_keys does not report them a second time). */
static bool reject_scan_only_keys(sl_loader *L, const ld_node *v) {
    bool ok = true;
    for (int k = 0; k < v->count; k++) {
        const char *key = ld_key(v, k)->text;
        if (strcmp(key, "kind") == 0)
            ok = ld_error(L, SLUICE_ERR_UNKNOWN_KEY, ld_key(v, k)->loc,
                          "key 'kind' does not apply to a reduction: its value is the inclusive "
                          "scan's at each segment's last row (for running values use a "
                          "segmented_scan)");
        else if (strcmp(key, "reset") == 0)
            ok = ld_error(L, SLUICE_ERR_UNKNOWN_KEY, ld_key(v, k)->loc,
                          "key 'reset' does not apply to a reduction: the reduce's segments say "
                          "where it restarts (write `per: batch` on the reduce to end segments "
                          "at each batch)");
    }
    return ok;
}

/* The reduce's outputs are its own rows, not columns the values may read: while the values
 * are parsed, the into columns defined so far are hidden (a later value naming one gets
 * "unknown column"), and shown again at the end. */
static void set_visible(sl_loader *L, const sl_scan *v, bool visible) {
    for (int f = 0; f < SL_MAX_FIELDS; f++)
        if (v->into[f] >= 0) L->live[v->into[f]] = visible;
}

void sl_stage_parse_reduce(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    static const char *const pers[] = {"stream", "batch"};
    if (!ld_add_stage(L, SL_STAGE_REDUCE, "reduce", kind_loc)) return;
    int si = L->p->nstages - 1;
    /* No stage is added while this one is parsed, so the pointer stays valid. */
    sl_reduce *r = &L->p->stages[si].reduce;
    r->segment_column = r->key_column = r->index_column = -1;

    /* The columns live before the stage: the values read them, and all but the key go. */
    bool *before = sl_calloc(L->ctx, (size_t)(L->p->ncolumns ? L->p->ncolumns : 1), 1);
    if (!before) {
        ld_oom(L);
        return;
    }
    int nbefore = L->p->ncolumns;
    memcpy(before, L->live, (size_t)nbefore);

    const ld_node *seg = ld_get(body, "segments");
    sl_scan parsed = {.segment_column = -1};
    if (seg && sl_stage_parse_segments(L, seg, &parsed)) {
        r->segments = parsed.segments;
        r->segment_column = parsed.segment_column;
        if (r->segments == SL_SEGMENTS_KEY) r->key_column = r->segment_column;
    }
    const ld_node *per = ld_get(body, "per");
    if (per) r->per_batch = ld_enum(L, per, "per", pers, 2) == 1;

    /* The index first: it comes before the values' columns. Hidden until the end too. */
    const ld_node *index = ld_get(body, "index");
    if (index) {
        const char *name = ld_scalar(L, index, "index");
        if (name) {
            r->index_column = ld_define_column(L, index, name, SLUICE_I64, false, false);
            if (r->index_column >= 0) L->live[r->index_column] = false;
        }
    }

    const ld_node *values = ld_require(L, body, kind_loc, "values", "a reduce");
    if (values && (values->kind != LD_SEQUENCE || values->count == 0 ||
                   values->count > SL_MAX_REDUCE_VALUES)) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, values->loc,
                 "values must be a list of 1 to %d reductions, each a mapping like a scan's "
                 "(e.g. `- {op: sum, of: x, into: total}`), not %s", SL_MAX_REDUCE_VALUES,
                 values->kind == LD_SEQUENCE ? "a list of that length" : ld_shape(values));
        values = NULL;
    }
    if (values) {
        r->values = sl_calloc(L->ctx, (size_t)values->count, sizeof *r->values);
        if (!r->values) {
            sl_free(L->ctx, before);
            ld_oom(L);
            return;
        }
    }
    for (int i = 0; values && i < values->count && !L->stop; i++) {
        const ld_node *v = values->items[i];
        sl_scan *sc = &r->values[r->nvalues++];
        for (int f = 0; f < SL_MAX_FIELDS; f++) sc->into[f] = -1;
        sc->segment_column = -1;
        if (v->kind != LD_MAPPING) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, v->loc,
                     "each reduction is a mapping like a scan's (e.g. `{op: max, of: x, into: "
                     "top}`), not %s", ld_shape(v));
            continue;
        }
        reject_scan_only_keys(L, v);
        ld_check_keys(L, v, value_keys, SL_ARRAY_LEN(value_keys), "a reduction");
        sl_stage_parse_scan_value(L, v, v->loc, sc);
        sc->segments = r->segments;
        sc->segment_column = r->segment_column;
        sc->reset_per_batch = r->per_batch;
        set_visible(L, sc, false);
    }

    /* After the stage: the key (for {key:}), the index, the values' columns; nothing else. */
    for (int c = 0; c < nbefore; c++)
        if (before[c] && c != r->key_column) ld_drop_column(L, c, kind_loc);
    if (r->index_column >= 0) L->live[r->index_column] = true;
    for (int i = 0; i < r->nvalues; i++) set_visible(L, &r->values[i], true);
    L->rows_changed_stage = si;
    sl_free(L->ctx, before);
}

/* ---- the kind's descriptor (stages/kind.h) ---------------------------------------------- */

static void mark_read(void *payload, int column) { ((bool *)payload)[column] = true; }

static bool reads_segment_column(const sl_reduce *r) {
    return r->segments == SL_SEGMENTS_HEADFLAG || r->segments == SL_SEGMENTS_KEY;
}

static sluice_status reduce_need_before(sluice_context *ctx, const sl_stage *s, bool *need,
                                        bool **def_live) {
    (void)ctx;
    (void)def_live;
    const sl_reduce *r = &s->reduce;
    if (r->index_column >= 0) need[r->index_column] = false;
    for (int i = 0; i < r->nvalues; i++)
        for (int f = 0; f < r->values[i].nfields; f++)
            if (r->values[i].into[f] >= 0) need[r->values[i].into[f]] = false;
    for (int i = 0; i < r->nvalues; i++)
        for (int f = 0; f < r->values[i].nfields; f++)
            if (r->values[i].of[f]) sl_expr_visit_columns(r->values[i].of[f], mark_read, need);
    if (reads_segment_column(r)) need[r->segment_column] = true;
    return SLUICE_OK;
}

/* Every value is carried state of one phase, after everything the values and the segments
 * read and after the row's survival; the outputs are at that level. The key column is not
 * made here: it is read, and moved into the reduced rows like a compaction's columns. */
static int reduce_carry_levels(const sl_stage *s, sl_level_walk *w, int *phase) {
    const sl_reduce *r = &s->reduce;
    int reads = 0;
    for (int i = 0; i < r->nvalues; i++)
        for (int f = 0; f < r->values[i].nfields; f++) {
            int l = sl_stage_level_of_expr(w, r->values[i].of[f]);
            if (l > reads) reads = l;
        }
    if (reads_segment_column(r)) {
        w->read[r->segment_column] = true;
        if (w->level[r->segment_column] > reads) reads = w->level[r->segment_column];
    }
    *phase = (reads > w->alive ? reads : w->alive) + 1;
    if (r->index_column >= 0) {
        w->level[r->index_column] = *phase;
        w->made[r->index_column] = true;
    }
    for (int i = 0; i < r->nvalues; i++)
        for (int f = 0; f < r->values[i].nfields; f++) {
            int c = r->values[i].into[f];
            if (c < 0) continue;
            w->level[c] = *phase;
            w->made[c] = true;
        }
    return reads;
}

static int reduce_offsets_column(const sl_stage *s) {
    return s->reduce.segments == SL_SEGMENTS_OFFSETS ? s->reduce.segment_column : -1;
}

static bool reduce_batch_bound(const sl_stage *s) { return s->reduce.per_batch; }

/* At most: the batch's segments (offsets); the rows in (head flags, keys: each segment a
 * piece closes has a row in it, and per batch each of its segments does); one (the whole
 * batch). At the end of the stream the open segment, unless segments end at each batch. */
static int64_t reduce_rows_out(const sl_stage *s, int64_t rows, int64_t nsegments,
                               bool end_of_stream) {
    const sl_reduce *r = &s->reduce;
    if (end_of_stream) return r->per_batch || r->segments == SL_SEGMENTS_OFFSETS ? 0 : 1;
    switch (r->segments) {
    case SL_SEGMENTS_OFFSETS: return nsegments > 0 ? nsegments : 0;
    case SL_SEGMENTS_NONE: return r->per_batch ? 1 : 0;
    default: return rows;
    }
}

static void reduce_explain(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s) {
    const sl_column *cols = p->columns;
    const sl_reduce *r = &s->reduce;
    static const char *const seg_names[] = {"", "offsets", "head flags", "key"};
    if (r->segments == SL_SEGMENTS_NONE)
        sl_strbuf_append(sb, r->per_batch ? "each batch" : "the whole stream");
    else
        sl_strbuf_printf(sb, "segments by %s %s", seg_names[r->segments],
                         cols[r->segment_column].name);
    if (r->per_batch && r->segments != SL_SEGMENTS_NONE) sl_strbuf_append(sb, " per batch");
    sl_strbuf_append(sb, ", one row each");
    if (r->segments == SL_SEGMENTS_NONE && !r->per_batch) sl_strbuf_append(sb, " (at flush)");
    if (r->index_column >= 0)
        sl_strbuf_printf(sb, "; index -> %s: i64", cols[r->index_column].name);
    for (int i = 0; i < r->nvalues; i++) {
        const sl_scan *v = &r->values[i];
        sl_strbuf_printf(sb, "; %s", sl_monoid_op_name(v));
        for (int f = 0; f < v->nfields; f++)
            if (v->into[f] >= 0)
                sl_strbuf_printf(sb, " -> %s: %s", cols[v->into[f]].name,
                                 sluice_type_name(v->acc[f]));
    }
}

static void reduce_free(sluice_context *ctx, sl_stage *s) {
    sl_reduce *r = &s->reduce;
    for (int i = 0; r->values && i < r->nvalues; i++)
        for (int f = 0; f < SL_MAX_FIELDS; f++)
            if (r->values[i].of[f]) sl_expr_free(ctx, r->values[i].of[f]);
    sl_free(ctx, r->values);
}

const sl_stage_kind_desc sl_stage_kind_reduce = {
    "reduce", SL_SHAPE_REDUCE, reduce_need_before, reduce_carry_levels, reduce_offsets_column,
    reduce_batch_bound, reduce_explain, reduce_free, reduce_rows_out,
};
