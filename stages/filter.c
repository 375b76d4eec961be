/* filter.c — the `filter` stage, shorthand for a flag then a compact: lowered to a MAP of one
 * hidden bool column (named "filter.N", which no user column can be called) followed by a
 * COMPACT by it. Both IR stages carry kind_name "filter" and the filter's position. */
#include <stdio.h>

#include "stages/registry.h"

void sl_stage_parse_filter(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    if (body->kind != LD_SCALAR) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, body->loc,
                 "the filter stage takes one predicate (e.g. `- filter: x > 0`), not %s",
                 ld_shape(body));
        return;
    }
    sl_expr *e = ld_expr(L, body, NULL);
    if (e && e->type != SLUICE_BOOL) {
        ld_error(L, SLUICE_ERR_TYPE, body->loc,
                 "a filter keeps the rows where its predicate is true, so it must be bool; this "
                 "expression is %s (compare it, e.g. `... != 0`)", sluice_type_name(e->type));
        sl_expr_free(L->ctx, e);
        e = NULL;
    }
    if (!ld_add_stage(L, SL_STAGE_MAP, "filter", kind_loc)) {
        if (e) sl_expr_free(L->ctx, e);
        return;
    }
    int si = L->p->nstages - 1;
    char name[32];
    snprintf(name, sizeof name, "filter.%d", ++L->filters);
    int c = ld_define_column(L, body, name, SLUICE_BOOL, true, e == NULL);
    sl_map *map = &L->p->stages[si].map;
    if (c >= 0 && e) {
        map->columns = sl_calloc(L->ctx, 1, sizeof *map->columns);
        map->exprs = sl_calloc(L->ctx, 1, sizeof *map->exprs);
        if (!map->columns || !map->exprs) {
            sl_expr_free(L->ctx, e);
            ld_oom(L);
            return;
        }
        map->columns[0] = c;
        map->exprs[0] = e;
        map->count = 1;
    } else if (e) {
        sl_expr_free(L->ctx, e);
    }
    ld_snapshot_live(L);
    sl_stage_add_compact(L, "filter", kind_loc, c, NULL);
}
