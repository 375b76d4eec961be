/* ir.c — the pipeline IR's lifetime and queries: freeing a (possibly partly built) pipeline
 * and the live column sets between stages. */
#include "ir/ir.h"
#include "stages/kind.h"

static void free_expr(sluice_context *ctx, sl_expr *e) {
    if (e) sl_expr_free(ctx, e);
}

static void free_stage(sluice_context *ctx, sl_stage *s) {
    sl_stage_kind_desc_of(s)->free(ctx, s);
    sl_free(ctx, s->live_after);
}

static void free_operator(sluice_context *ctx, sl_operator *op) {
    sl_free(ctx, op->name);
    for (int f = 0; f < SL_MAX_FIELDS; f++) {
        sl_free(ctx, op->field_names[f]);
        free_expr(ctx, op->combine[f]);
    }
}

void sl_pipeline_destroy(sluice_pipeline *p) {
    if (!p) return;
    sluice_context *ctx = p->ctx;
    for (int i = 0; i < p->nstages; i++) free_stage(ctx, &p->stages[i]);
    sl_free(ctx, p->stages);
    for (int i = 0; i < p->noperators; i++) free_operator(ctx, &p->operators[i]);
    sl_free(ctx, p->operators);
    for (int i = 0; i < p->ncolumns; i++) sl_free(ctx, p->columns[i].name);
    sl_free(ctx, p->columns);
    for (int i = 0; i < p->nparams; i++) {
        sl_free(ctx, p->params[i].name);
        sl_free(ctx, p->params[i].default_text);
    }
    sl_free(ctx, p->params);
    sl_free(ctx, p->outputs);
    sl_free(ctx, p->name);
    sl_free(ctx, p->file);
    sl_free(ctx, p);
}

const bool *sl_pipeline_live_before(const sluice_pipeline *p, int stage, const bool *inputs_live) {
    if (stage <= 0 || !p || p->nstages == 0) return inputs_live;
    if (stage > p->nstages) stage = p->nstages;
    return p->stages[stage - 1].live_after;
}
