/* kinds.c — the table from IR stage kinds to their descriptors, and the helper their carry
 * level steps share (see kind.h). */
#include "stages/kind.h"

static const sl_stage_kind_desc *const kinds[] = {
    [SL_STAGE_MAP] = &sl_stage_kind_map,
    [SL_STAGE_COMPACT] = &sl_stage_kind_compact,
    [SL_STAGE_SCAN] = &sl_stage_kind_scan,
    [SL_STAGE_SORT] = &sl_stage_kind_sort,
    [SL_STAGE_REDUCE] = &sl_stage_kind_reduce,
};

typedef struct level_visit {
    sl_level_walk *w;
    int max;
} level_visit;

static void visit_level(void *payload, int column) {
    level_visit *v = payload;
    if (v->w->level[column] > v->max) v->max = v->w->level[column];
    v->w->read[column] = true;
}

int sl_stage_level_of_expr(sl_level_walk *w, const sl_expr *e) {
    level_visit v = {w, 0};
    if (e) sl_expr_visit_columns(e, visit_level, &v);
    return v.max;
}

const sl_stage_kind_desc *sl_stage_kind_desc_of(const sl_stage *s) { return kinds[s->kind]; }
