/* expr_tree.c — the typed expression tree's own utilities (core/expr/expr.h), used by the
 * parser, the evaluator, the emitter and the loader alike: making literals and casts, freeing,
 * and the queries over a tree (is it constant, which columns does it read). */
#include "common/context.h"
#include "expr/expr.h"

void sl_expr_free(sluice_context *ctx, sl_expr *e) {
    if (!e) return;
    sl_expr_free(ctx, e->a);
    sl_expr_free(ctx, e->b);
    sl_expr_free(ctx, e->c);
    sl_free(ctx, e);
}

sl_expr *sl_expr_new_literal(sluice_context *ctx, sl_value v) {
    sl_expr *e = sl_calloc(ctx, 1, sizeof *e);
    if (!e) return NULL;
    e->kind = SL_EXPR_LITERAL;
    e->type = v.type;
    e->value = v;
    e->index = -1;
    return e;
}

sl_expr *sl_expr_as_type(sluice_context *ctx, sl_expr *e, sluice_type t) {
    if (e->type == t) return e;
    if (e->kind == SL_EXPR_LITERAL) { /* fold: a literal of the new type */
        e->value = sl_value_cast(e->value, t);
        e->type = t;
        return e;
    }
    sl_expr *c = sl_calloc(ctx, 1, sizeof *c);
    if (!c) return NULL;
    c->kind = SL_EXPR_CAST;
    c->type = t;
    c->a = e;
    c->loc = e->loc;
    c->index = -1;
    return c;
}

sl_expr *sl_expr_cast_to(sluice_context *ctx, sl_expr *e, sluice_type t) {
    if (!e) return NULL;
    sl_expr *c = sl_expr_as_type(ctx, e, t);
    if (!c) sl_expr_free(ctx, e);
    return c;
}

bool sl_expr_is_constant(const sl_expr *e) {
    if (!e) return true;
    if (e->kind == SL_EXPR_COLUMN || e->kind == SL_EXPR_FIELD) return false;
    return sl_expr_is_constant(e->a) && sl_expr_is_constant(e->b) && sl_expr_is_constant(e->c);
}

void sl_expr_visit_columns(const sl_expr *e, void (*fn)(void *payload, int column),
                           void *payload) {
    if (!e) return;
    if (e->kind == SL_EXPR_COLUMN) fn(payload, e->index);
    sl_expr_visit_columns(e->a, fn, payload);
    sl_expr_visit_columns(e->b, fn, payload);
    sl_expr_visit_columns(e->c, fn, payload);
}

