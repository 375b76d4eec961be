/* scan.c — the `scan` stage (and the body of `segmented_scan` and of each `reduce` value):
 * a prefix scan of a row expression under a builtin operator (sum prod min max and or xor
 * count), the linear recurrence linrec (a, b), or an operator declared in the file. Types
 * each state field's accumulator by the rules of pipelines/SCHEMA.md (core/ir/monoid.c),
 * checks `acc` overrides, casts `of` to the accumulator, and defines the `into` column(s)
 * with the accumulator's type. */
#include <stdio.h>
#include <string.h>

#include "ir/monoid.h"
#include "stages/kind.h"
#include "stages/registry.h"

typedef struct scan_parse {
    sl_loader *L;
    const ld_node *body;
    sl_srcloc loc;
    int si;       /* stage index */
    bool ok;      /* typing succeeded: into columns are real, not poisoned */
    sl_scan *target; /* where the scan goes: a reduce's value; NULL: stage si's own scan */
} scan_parse;

static sl_scan *scan_of(scan_parse *s) {
    return s->target ? s->target : &s->L->p->stages[s->si].scan;
}

/* Resolves `op`: builtin, declared, or UNKNOWN_OPERATOR with did-you-mean over both. */
static bool resolve_op(scan_parse *s, const ld_node *n, sl_scan_op *op,
                       const sl_operator **custom) {
    const char *name = ld_scalar(s->L, n, "op");
    if (!name) return false;
    if (sl_monoid_op_from_name(name, op)) return true;
    const sl_operator *declared = ld_find_operator(s->L, name);
    if (declared) {
        *op = SL_SCAN_CUSTOM;
        *custom = declared;
        return true;
    }
    size_t nbuiltin;
    const char *const *builtin = sl_monoid_op_names(&nbuiltin);
    const char *names[16 + SL_MAX_OPERATORS];
    size_t n_names = 0;
    for (size_t i = 0; i < nbuiltin; i++) names[n_names++] = builtin[i];
    for (int i = 0; i < s->L->p->noperators; i++)
        if (s->L->p->operators[i].name) names[n_names++] = s->L->p->operators[i].name;
    const char *hint = sl_suggest(name, names, n_names);
    char buf[96] = "";
    if (hint) snprintf(buf, sizeof buf, "; did you mean '%s'?", hint);
    return ld_error(s->L, SLUICE_ERR_UNKNOWN_OPERATOR, n->loc,
                    "unknown scan operator '%s'%s (builtin: sum prod min max and or xor count "
                    "linrec; or declare it under operators:)", name, buf);
}

/* Keys that do not apply to this operator are reported as unknown, with the reason. */
static bool reject_keys(scan_parse *s, const char *op_name, const char *const *keys, size_t n,
                        const char *why) {
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        const ld_node *v = ld_get(s->body, keys[i]);
        if (!v) continue;
        for (int k = 0; k < s->body->count; k++) {
            if (ld_val(s->body, k) != v) continue;
            ok = ld_error(s->L, SLUICE_ERR_UNKNOWN_KEY, ld_key(s->body, k)->loc,
                          "key '%s' does not apply to op %s: %s", keys[i], op_name, why);
        }
    }
    return ok;
}

/* The accumulator type: the default for `input`, or the `acc` override when it is safe. */
static bool choose_acc(scan_parse *s, sl_scan_op op, const char *op_name, sluice_type input,
                       const ld_node *at, sluice_type *acc) {
    char why[256];
    if (!sl_monoid_default_acc(op, input, acc, why, sizeof why))
        return ld_error(s->L, SLUICE_ERR_TYPE, at->loc, "cannot scan with %s here: %s", op_name,
                        why);
    const ld_node *acc_node = ld_get(s->body, "acc");
    if (!acc_node) return true;
    sluice_type want;
    if (!ld_type(s->L, acc_node, &want)) return false;
    if (!sl_monoid_acc_allowed(op, input, want, why, sizeof why))
        return ld_error(s->L, SLUICE_ERR_TYPE, acc_node->loc, "acc %s is unsafe for %s over %s: %s",
                        sluice_type_name(want), op_name, sluice_type_name(input), why);
    *acc = want;
    return true;
}

/* Stores `e` cast to the field's accumulator as of[f]. */
static bool set_of(scan_parse *s, int f, sl_expr *e) {
    sl_scan *scan = scan_of(s);
    scan->of[f] = sl_expr_cast_to(s->L->ctx, e, scan->acc[f]);
    if (!scan->of[f]) return ld_oom(s->L);
    return true;
}

static void parse_builtin(scan_parse *s, sl_scan_op op, const char *op_name) {
    sl_loader *L = s->L;
    static const char *const pair_keys[] = {"a", "b"};
    s->ok = reject_keys(s, op_name, pair_keys, 2, "a and b are linrec's");
    sl_scan *scan = scan_of(s);
    scan->nfields = 1;
    sl_expr *e = NULL;
    sluice_type input = SLUICE_I64;
    if (op == SL_SCAN_COUNT) {
        static const char *const of_key[] = {"of"};
        s->ok = reject_keys(s, op_name, of_key, 1, "count counts rows and reads no value") && s->ok;
        e = sl_expr_new_literal(L->ctx, (sl_value){.type = SLUICE_I64, .i = 1});
        if (!e) {
            ld_oom(L);
            return;
        }
    } else {
        const ld_node *of = ld_require(L, s->body, s->loc, "of", "this scan");
        if (!of) {
            s->ok = false;
            return;
        }
        e = ld_expr(L, of, NULL);
        if (!e) {
            s->ok = false;
            return;
        }
        input = e->type;
    }
    sluice_type acc;
    const ld_node *at = ld_get(s->body, "of") ? ld_get(s->body, "of") : ld_get(s->body, "op");
    if (!choose_acc(s, op, op_name, input, at, &acc)) {
        sl_expr_free(L->ctx, e);
        s->ok = false;
        return;
    }
    scan = scan_of(s);
    scan->acc[0] = acc;
    scan->identity[0] = sl_monoid_identity(op, 0, acc);
    if (!set_of(s, 0, e)) s->ok = false;
}

static void parse_linrec(scan_parse *s) {
    sl_loader *L = s->L;
    static const char *const of_key[] = {"of"};
    s->ok = reject_keys(s, "linrec", of_key, 1,
                        "linrec reads a (the factor) and b (the term) of h[t] = a[t]*h[t-1] + b[t]");
    sl_scan *scan = scan_of(s);
    scan->nfields = 2;
    const ld_node *an = ld_require(L, s->body, s->loc, "a", "a linrec scan");
    const ld_node *bn = ld_require(L, s->body, s->loc, "b", "a linrec scan");
    sl_expr *a = an ? ld_expr(L, an, NULL) : NULL;
    sl_expr *b = bn ? ld_expr(L, bn, NULL) : NULL;
    bool ok = a && b;
    if (a && a->type == SLUICE_BOOL)
        ok = ld_error(L, SLUICE_ERR_TYPE, an->loc, "linrec needs numbers; a is bool");
    if (b && b->type == SLUICE_BOOL)
        ok = ld_error(L, SLUICE_ERR_TYPE, bn->loc, "linrec needs numbers; b is bool");
    sluice_type acc;
    if (ok && !choose_acc(s, SL_SCAN_LINREC, "linrec", sl_monoid_linrec_input(a->type, b->type),
                          an, &acc))
        ok = false;
    if (!ok) {
        if (a) sl_expr_free(L->ctx, a);
        if (b) sl_expr_free(L->ctx, b);
        s->ok = false;
        return;
    }
    scan = scan_of(s);
    for (int f = 0; f < 2; f++) {
        scan->acc[f] = acc;
        scan->identity[f] = sl_monoid_identity(SL_SCAN_LINREC, f, acc);
    }
    if (!set_of(s, 0, a)) {
        sl_expr_free(L->ctx, b);
        s->ok = false;
        return;
    }
    if (!set_of(s, 1, b)) s->ok = false;
}

static void parse_custom(scan_parse *s, const sl_operator *op) {
    sl_loader *L = s->L;
    static const char *const not_custom[] = {"a", "b", "acc"};
    s->ok = reject_keys(s, op->name, not_custom, 3,
                        "a declared operator reads `of: {FIELD: EXPR}` and accumulates in its "
                        "state types");
    sl_scan *scan = scan_of(s);
    scan->op = SL_SCAN_CUSTOM;
    scan->custom = op;
    if (op->nfields <= 0) { /* its declaration failed and was reported */
        s->ok = false;
        return;
    }
    scan->nfields = op->nfields;
    for (int f = 0; f < op->nfields; f++) {
        scan->acc[f] = op->field_types[f];
        scan->identity[f] = op->identity[f];
    }
    const ld_node *of = ld_require(L, s->body, s->loc, "of", "this scan");
    if (!of) {
        s->ok = false;
        return;
    }
    if (of->kind != LD_MAPPING) {
        s->ok = ld_error(L, SLUICE_ERR_BAD_VALUE, of->loc,
                         "with declared operator '%s', of maps each state field to an "
                         "expression (e.g. {%s: …}), not %s", op->name, op->field_names[0],
                         ld_shape(of));
        return;
    }
    if (!ld_check_fields(L, op, of, "of", true)) s->ok = false;
    for (int f = 0; f < op->nfields && !L->stop; f++) {
        const ld_node *v = ld_get(of, op->field_names[f]);
        if (!v) continue;
        sl_expr *e = ld_expr(L, v, NULL);
        if (!e || !set_of(s, f, e)) s->ok = false;
    }
}

/* Defines the `into` column(s). For builtins and linrec `into` is one name (linrec keeps b:
 * the h column); for a declared operator a mapping FIELD: COLUMN of the fields it keeps. */
static void define_into(scan_parse *s, const ld_node *into) {
    sl_loader *L = s->L;
    sl_scan *scan = scan_of(s);
    for (int f = 0; f < SL_MAX_FIELDS; f++) scan->into[f] = -1;
    if (!s->ok) {
        /* the scan failed and was reported: define its outputs poisoned, whatever their
         * shape, so later stages that read them stay quiet */
        if (into->kind == LD_SCALAR && !ld_is_null(into)) {
            ld_define_column(L, into, into->text, SLUICE_F64, false, true);
        } else if (into->kind == LD_MAPPING) {
            for (int i = 0; i < into->count; i++) {
                const ld_node *v = ld_val(into, i);
                if (v->kind == LD_SCALAR && !ld_is_null(v))
                    ld_define_column(L, v, v->text, SLUICE_F64, false, true);
            }
        }
        return;
    }
    if (scan->op == SL_SCAN_CUSTOM) {
        const sl_operator *op = scan->custom;
        if (into->kind != LD_MAPPING || into->count == 0) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, into->loc,
                     "with a declared operator, into maps the state fields to keep to new "
                     "columns (e.g. {%s: out}), not %s",
                     op->nfields > 0 ? op->field_names[0] : "field", ld_shape(into));
            return;
        }
        ld_check_fields(L, op, into, "into", false);
        for (int i = 0; i < into->count; i++) {
            int f = ld_operator_field(op, ld_key(into, i)->text);
            const ld_node *v = ld_val(into, i);
            const char *name = ld_scalar(L, v, "an into column");
            if (f < 0 || !name) continue;
            int c = ld_define_column(L, v, name, op->field_types[f], false, false);
            scan_of(s)->into[f] = c;
        }
        return;
    }
    const char *name = ld_scalar(L, into, "into");
    if (!name) return;
    int field = scan->op == SL_SCAN_LINREC ? 1 : 0;
    int c = ld_define_column(L, into, name, scan->acc[field], false, false);
    scan_of(s)->into[field] = c;
}

/* Where segments come from: an offsets input, a bool head-flag column, or {key: COLUMN}. */
static bool parse_segments(scan_parse *s, const ld_node *seg) {
    sl_loader *L = s->L;
    sl_scan *scan = scan_of(s);
    if (seg->kind == LD_MAPPING) {
        static const char *const keys[] = {"key"};
        bool ok = ld_check_keys(L, seg, keys, 1, "segments");
        const ld_node *key = ld_require(L, seg, seg->loc, "key", "segments given as a mapping");
        if (!key) return false;
        int c = ld_live_column(L, key, "segments key");
        if (c < 0) return false;
        scan = scan_of(s);
        scan->segments = SL_SEGMENTS_KEY;
        scan->segment_column = c;
        return ok;
    }
    const char *name = ld_scalar(L, seg, "segments");
    if (!name) return false;
    int c = ld_find_column(L, name);
    if (c >= 0 && L->p->columns[c].role == SLUICE_ROLE_OFFSETS) {
        if (L->rows_changed_stage >= 0) {
            const sl_stage *st = &L->p->stages[L->rows_changed_stage];
            return ld_error(L, SLUICE_ERR_BAD_VALUE, seg->loc,
                            "segments '%s' is an offsets input: it describes the input rows, "
                            "but the %s at line %d changed the rows; segment before it, or "
                            "carry a head-flag or key column through it", name, st->kind_name,
                            st->loc.line);
        }
        scan->segments = SL_SEGMENTS_OFFSETS;
        scan->segment_column = c;
        return true;
    }
    c = ld_live_column(L, seg, "segments");
    if (c < 0) return false;
    if (L->p->columns[c].type != SLUICE_BOOL)
        return ld_error(L, SLUICE_ERR_TYPE, seg->loc,
                        "segments '%s' is %s: a head-flag column must be bool (true at each "
                        "segment's first row); for runs of equal values write "
                        "`segments: {key: %s}`", name, sluice_type_name(L->p->columns[c].type),
                        name);
    scan = scan_of(s);
    scan->segments = SL_SEGMENTS_HEADFLAG;
    scan->segment_column = c;
    return true;
}

/* op, of (or a and b), acc and into: what a scan and a reduction share. `where` names the
 * body in messages about a missing key ("a scan"). */
static void parse_value(scan_parse *s, const char *where) {
    sl_loader *L = s->L;
    const ld_node *op_node = ld_require(L, s->body, s->loc, "op", where);
    const ld_node *into = ld_require(L, s->body, s->loc, "into", where);
    sl_scan_op op = SL_SCAN_SUM;
    const sl_operator *custom = NULL;
    if (!op_node || !resolve_op(s, op_node, &op, &custom)) {
        s->ok = false;
    } else {
        scan_of(s)->op = op;
        if (op == SL_SCAN_CUSTOM)
            parse_custom(s, custom);
        else if (op == SL_SCAN_LINREC)
            parse_linrec(s);
        else
            parse_builtin(s, op, sl_monoid_op_name(scan_of(s)));
    }
    if (L->stop) return;
    if (into) define_into(s, into);
}

void sl_stage_parse_any_scan(sl_loader *L, const ld_node *body, sl_srcloc kind_loc,
                             bool segmented) {
    static const char *const kinds[] = {"inclusive", "exclusive"};
    static const char *const resets[] = {"never", "batch"};
    const char *kind_name = segmented ? "segmented_scan" : "scan";
    if (!ld_add_stage(L, SL_STAGE_SCAN, kind_name, kind_loc)) return;
    scan_parse s = {L, body, kind_loc, L->p->nstages - 1, true, NULL};
    for (int f = 0; f < SL_MAX_FIELDS; f++) scan_of(&s)->into[f] = -1;
    scan_of(&s)->segment_column = -1;

    const ld_node *kind = ld_get(body, "kind");
    if (kind) {
        int k = ld_enum(L, kind, "kind", kinds, 2);
        scan_of(&s)->exclusive = k == 1;
    }
    const ld_node *reset = ld_get(body, "reset");
    if (reset) scan_of(&s)->reset_per_batch = ld_enum(L, reset, "reset", resets, 2) == 1;
    if (segmented) {
        const ld_node *seg = ld_require(L, body, kind_loc, "segments", "a segmented_scan");
        if (seg) parse_segments(&s, seg);
    }
    parse_value(&s, "a scan");
}

bool sl_stage_parse_scan_value(sl_loader *L, const ld_node *body, sl_srcloc loc,
                               sl_scan *scan) {
    scan_parse s = {L, body, loc, L->p->nstages - 1, true, scan};
    parse_value(&s, "a reduction");
    return s.ok;
}

bool sl_stage_parse_segments(sl_loader *L, const ld_node *seg, sl_scan *scan) {
    scan_parse s = {L, NULL, seg->loc, L->p->nstages - 1, true, scan};
    return parse_segments(&s, seg);
}

void sl_stage_parse_scan(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    sl_stage_parse_any_scan(L, body, kind_loc, false);
}

/* ---- the kind's descriptor (stages/kind.h) ---------------------------------------------- */

static void mark_read(void *payload, int column) { ((bool *)payload)[column] = true; }

static sluice_status scan_need_before(sluice_context *ctx, const sl_stage *s, bool *need,
                                      bool **def_live) {
    (void)ctx;
    (void)def_live;
    const sl_scan *sc = &s->scan;
    for (int f = 0; f < sc->nfields; f++)
        if (sc->into[f] >= 0) need[sc->into[f]] = false;
    for (int f = 0; f < sc->nfields; f++)
        if (sc->of[f]) sl_expr_visit_columns(sc->of[f], mark_read, need);
    if (sc->segments == SL_SEGMENTS_HEADFLAG || sc->segments == SL_SEGMENTS_KEY)
        need[sc->segment_column] = true;
    return SLUICE_OK;
}

/* A scan's state joins the phase after everything it reads and after the row's survival;
 * its outputs are at that level. */
static int scan_carry_levels(const sl_stage *s, sl_level_walk *w, int *phase) {
    const sl_scan *sc = &s->scan;
    int reads = 0;
    for (int f = 0; f < sc->nfields; f++) {
        int l = sl_stage_level_of_expr(w, sc->of[f]);
        if (l > reads) reads = l;
    }
    if (sc->segments == SL_SEGMENTS_HEADFLAG || sc->segments == SL_SEGMENTS_KEY) {
        w->read[sc->segment_column] = true;
        if (w->level[sc->segment_column] > reads) reads = w->level[sc->segment_column];
    }
    *phase = (reads > w->alive ? reads : w->alive) + 1;
    for (int f = 0; f < sc->nfields; f++) {
        if (sc->into[f] < 0) continue;
        w->level[sc->into[f]] = *phase;
        w->made[sc->into[f]] = true;
    }
    return reads;
}

static int scan_offsets_column(const sl_stage *s) {
    return s->scan.segments == SL_SEGMENTS_OFFSETS ? s->scan.segment_column : -1;
}

static bool scan_batch_bound(const sl_stage *s) { return s->scan.reset_per_batch; }

static void scan_explain(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s) {
    const sl_column *cols = p->columns;
    const sl_scan *sc = &s->scan;
    sl_strbuf_printf(sb, "%s %s", sc->exclusive ? "exclusive" : "inclusive", sl_monoid_op_name(sc));
    for (int f = 0; f < sc->nfields; f++) {
        if (sc->into[f] >= 0)
            sl_strbuf_printf(sb, " -> %s: %s", cols[sc->into[f]].name,
                             sluice_type_name(sc->acc[f]));
    }
    static const char *const seg_names[] = {"", "offsets", "head flags", "key"};
    if (sc->segments != SL_SEGMENTS_NONE)
        sl_strbuf_printf(sb, ", segments by %s %s", seg_names[sc->segments],
                         cols[sc->segment_column].name);
    if (sc->reset_per_batch) sl_strbuf_append(sb, ", reset per batch");
}

static void scan_free(sluice_context *ctx, sl_stage *s) {
    for (int f = 0; f < SL_MAX_FIELDS; f++)
        if (s->scan.of[f]) sl_expr_free(ctx, s->scan.of[f]);
}

const sl_stage_kind_desc sl_stage_kind_scan = {
    "scan", SL_SHAPE_SCAN, scan_need_before, scan_carry_levels, scan_offsets_column,
    scan_batch_bound, scan_explain, scan_free, NULL,
};
