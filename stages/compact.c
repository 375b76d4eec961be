/* compact.c — the `compact` stage: keep the rows whose `by` column is true, in order, with no
 * gaps. `columns` (optional) lists the live columns kept after the stage; by default every
 * live column stays. Also the shared tail of `filter`. */
#include "stages/kind.h"
#include "stages/registry.h"

void sl_stage_add_compact(sl_loader *L, const char *kind_name, sl_srcloc loc, int by,
                          const bool *keep) {
    if (!ld_add_stage(L, SL_STAGE_COMPACT, kind_name, loc)) return;
    int si = L->p->nstages - 1;
    L->p->stages[si].compact.by = by;
    L->rows_changed_stage = si;
    for (int c = 0; c < L->p->ncolumns; c++) {
        /* a filter's hidden flag is all true after its compact: nothing reads it again */
        if (L->p->columns[c].hidden || (keep && !keep[c])) ld_drop_column(L, c, loc);
    }
}

/* Reads `columns:` into keep[] (one flag per column). False when it is malformed. */
static bool parse_kept_columns(sl_loader *L, const ld_node *list, bool *keep, const char *what) {
    if (list->kind != LD_SEQUENCE || list->count == 0)
        return ld_error(L, SLUICE_ERR_BAD_VALUE, list->loc,
                        "%s must be a non-empty list of column names, not %s", what,
                        ld_shape(list));
    bool ok = true;
    for (int i = 0; i < list->count; i++) {
        int c = ld_live_column(L, list->items[i], what);
        if (c < 0) {
            ok = false;
            continue;
        }
        if (keep[c])
            ok = ld_error(L, SLUICE_ERR_BAD_VALUE, list->items[i]->loc,
                          "column '%s' is listed twice in %s", L->p->columns[c].name, what);
        keep[c] = true;
    }
    return ok;
}

void sl_stage_parse_compact(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    const ld_node *by_node = ld_require(L, body, kind_loc, "by", "the compact stage");
    int by = -1;
    if (by_node) {
        by = ld_live_column(L, by_node, "compact's by");
        if (by >= 0 && L->p->columns[by].type != SLUICE_BOOL) {
            ld_error(L, SLUICE_ERR_TYPE, by_node->loc,
                     "compact keeps the rows where 'by' is true, so it must be a bool column; "
                     "'%s' is %s (make a bool one with a flag stage)", L->p->columns[by].name,
                     sluice_type_name(L->p->columns[by].type));
            by = -1;
        }
    }
    const ld_node *columns = ld_get(body, "columns");
    bool *keep = NULL;
    if (columns) {
        keep = sl_calloc(L->ctx, (size_t)(L->p->ncolumns ? L->p->ncolumns : 1), sizeof *keep);
        if (!keep) {
            ld_oom(L);
            return;
        }
        if (!parse_kept_columns(L, columns, keep, "compact's columns")) {
            sl_free(L->ctx, keep);
            keep = NULL;
        }
    }
    sl_stage_add_compact(L, "compact", kind_loc, by < 0 ? -1 : by, keep);
    sl_free(L->ctx, keep);
}

/* ---- the kind's descriptor (stages/kind.h) ---------------------------------------------- */

static sluice_status compact_need_before(sluice_context *ctx, const sl_stage *s, bool *need,
                                         bool **def_live) {
    (void)ctx;
    (void)def_live;
    need[s->compact.by] = true;
    return SLUICE_OK;
}

/* The row's survival is at the level of the flag: later per-row results wait for it. */
static int compact_carry_levels(const sl_stage *s, sl_level_walk *w, int *phase) {
    (void)phase;
    w->compacts = true;
    w->read[s->compact.by] = true;
    int reads = w->level[s->compact.by];
    if (reads > w->alive) w->alive = reads;
    return reads;
}

static int compact_offsets_column(const sl_stage *s) {
    (void)s;
    return -1;
}

static bool compact_batch_bound(const sl_stage *s) {
    (void)s;
    return false;
}

static void compact_explain(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s) {
    const sl_column *by = &p->columns[s->compact.by];
    sl_strbuf_printf(sb, "keep rows where %s", by->hidden ? "the filter holds" : by->name);
}

static void compact_free(sluice_context *ctx, sl_stage *s) {
    (void)ctx;
    (void)s;
}

const sl_stage_kind_desc sl_stage_kind_compact = {
    "compact", SL_SHAPE_COMPACT, compact_need_before, compact_carry_levels,
    compact_offsets_column, compact_batch_bound, compact_explain, compact_free, NULL,
};
