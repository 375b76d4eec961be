/* map.c — the `map` stage: new columns from expressions, one per key, elementwise. Also the
 * shared parser of NAME: EXPRESSION definitions that `flag` reuses. A later key of the same
 * map may read an earlier one. */
#include "stages/kind.h"
#include "stages/registry.h"

void sl_stage_parse_definitions(sl_loader *L, const ld_node *body, sl_srcloc kind_loc,
                                const char *kind_name, bool predicates) {
    if (body->kind != LD_MAPPING || body->count == 0) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, body->kind == LD_SCALAR ? body->loc : kind_loc,
                 "the %s stage takes NAME: %s pairs (e.g. `%s: {%s}`), not %s", kind_name,
                 predicates ? "PREDICATE" : "EXPRESSION", kind_name,
                 predicates ? "keep: x > 0" : "r2: x*x + y*y", ld_shape(body));
        return;
    }
    if (!ld_add_stage(L, SL_STAGE_MAP, kind_name, kind_loc)) return;
    int si = L->p->nstages - 1;
    sl_map *map = &L->p->stages[si].map;
    map->columns = sl_calloc(L->ctx, (size_t)body->count, sizeof *map->columns);
    map->exprs = sl_calloc(L->ctx, (size_t)body->count, sizeof *map->exprs);
    if (!map->columns || !map->exprs) {
        ld_oom(L);
        return;
    }
    for (int i = 0; i < body->count && !L->stop; i++) {
        const ld_node *name = ld_key(body, i), *value = ld_val(body, i);
        sl_expr *e = ld_expr(L, value, NULL);
        if (e && predicates && e->type != SLUICE_BOOL) {
            ld_error(L, SLUICE_ERR_TYPE, value->loc,
                     "flag '%s' must be a predicate (bool), but this expression is %s; compare "
                     "it (e.g. `... != 0`) or use a map stage", name->text,
                     sluice_type_name(e->type));
            sl_expr_free(L->ctx, e);
            e = NULL;
        }
        sluice_type t = e ? e->type : (predicates ? SLUICE_BOOL : SLUICE_F64);
        int c = ld_define_column(L, name, name->text, t, false, e == NULL);
        if (c < 0 || !e) {
            if (e) sl_expr_free(L->ctx, e);
            continue;
        }
        map = &L->p->stages[si].map;
        map->columns[map->count] = c;
        map->exprs[map->count] = e;
        map->count++;
    }
}

void sl_stage_parse_map(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    sl_stage_parse_definitions(L, body, kind_loc, "map", false);
}

/* ---- the kind's descriptor (stages/kind.h) ---------------------------------------------- */

static void mark_read(void *payload, int column) { ((bool *)payload)[column] = true; }

/* Only the needed definitions are computed; last entry first, as an entry may read the
 * entries before it (b: a * 2). */
static sluice_status map_need_before(sluice_context *ctx, const sl_stage *s, bool *need,
                                     bool **def_live) {
    bool *live = sl_calloc(ctx, (size_t)s->map.count + 1, sizeof(bool));
    if (!live) return SLUICE_ERR_NO_MEMORY;
    for (int k = s->map.count - 1; k >= 0; k--) {
        int c = s->map.columns[k];
        if (!need[c]) continue;
        live[k] = true;
        need[c] = false;
        sl_expr_visit_columns(s->map.exprs[k], mark_read, need);
    }
    *def_live = live;
    return SLUICE_OK;
}

/* Each needed definition is at the level of what it reads. */
static int map_carry_levels(const sl_stage *s, sl_level_walk *w, int *phase) {
    (void)phase;
    int reads = 0;
    for (int k = 0; k < s->map.count; k++) {
        if (!w->def_live[k]) continue;
        int c = s->map.columns[k];
        w->level[c] = sl_stage_level_of_expr(w, s->map.exprs[k]);
        if (w->level[c] > reads) reads = w->level[c];
        w->made[c] = true;
    }
    return reads;
}

static int no_offsets(const sl_stage *s) {
    (void)s;
    return -1;
}

static bool map_batch_bound(const sl_stage *s) {
    (void)s;
    return false;
}

static void map_explain(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s) {
    for (int i = 0; i < s->map.count; i++) {
        const sl_column *c = &p->columns[s->map.columns[i]];
        sl_strbuf_printf(sb, "%s%s: %s", i ? ", " : "", c->hidden ? "(flag)" : c->name,
                         sluice_type_name(c->type));
    }
}

static void map_free(sluice_context *ctx, sl_stage *s) {
    for (int i = 0; i < s->map.count; i++)
        if (s->map.exprs[i]) sl_expr_free(ctx, s->map.exprs[i]);
    sl_free(ctx, s->map.columns);
    sl_free(ctx, s->map.exprs);
}

const sl_stage_kind_desc sl_stage_kind_map = {
    "map", SL_SHAPE_ELEMENTWISE, map_need_before, map_carry_levels, no_offsets, map_batch_bound,
    map_explain, map_free, NULL,
};
