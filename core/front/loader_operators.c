/* loader_operators.c — operators declared under `operators:` (state fields, identity,
 * combine), and their load-time check: combine must be associative and identity an identity
 * on sampled values, or the file is rejected with a counterexample.
 *
 * The check evaluates combine on 64 triples of states drawn from a fixed-seed generator
 * (edge values such as 0, ±1, the type's extremes first, then random ones), so a file is
 * accepted or rejected the same way on every machine. Integer and bool fields must agree
 * exactly; float fields within a relative tolerance of their format (1e-4 for f32, 2e-2 for
 * f16, 1e-9 for f64) of the largest magnitude involved, because float rounding alone makes
 * (a⊕b)⊕c and a⊕(b⊕c) differ in the last bits. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "front/loader_operators.h"
#include "ir/monoid.h"

#define CHECK_TRIALS 64

/* Relative tolerance of a float field: a few rounding errors of its format, well below what
 * a non-associative operator (subtraction, averaging) gets wrong. */
static double float_tolerance(sluice_type t) {
    return t == SLUICE_F16 ? 2e-2 : t == SLUICE_F32 ? 1e-4 : 1e-9;
}

const sl_operator *ld_find_operator(const sl_loader *L, const char *name) {
    for (int i = 0; i < L->p->noperators; i++)
        if (L->p->operators[i].name && strcmp(L->p->operators[i].name, name) == 0)
            return &L->p->operators[i];
    return NULL;
}

/* ---- sampling ------------------------------------------------------------------------------ */

static uint64_t next_random(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static sl_value sample(sluice_type t, uint64_t *rng, int trial) {
    sl_value v;
    v.type = t;
    uint64_t r = next_random(rng);
    if (sl_type_is_float(t)) {
        static const double edges[] = {0.0, 1.0, -1.0, 0.5, 2.0, -3.0};
        if (trial < 8 && (r & 1))
            v.f = edges[(r >> 8) % SL_ARRAY_LEN(edges)];
        else
            v.f = ((double)(r >> 11) * 0x1.0p-53) * 8.0 - 4.0;
        return sl_monoid_normalize(t, v);
    }
    if (t == SLUICE_BOOL) {
        v.u = r & 1;
        return v;
    }
    int w = sl_type_bits(t);
    bool is_signed = sl_type_is_signed(t);
    if (trial < 8 && (r & 1)) {
        static const int64_t small_edges[] = {0, 1, -1, 2};
        int pick = (int)((r >> 8) % 6);
        if (pick < 4) {
            v.i = is_signed ? small_edges[pick] : (small_edges[pick] < 0 ? 0 : small_edges[pick]);
        } else if (pick == 4) { /* greatest */
            v.u = is_signed ? (UINT64_C(1) << (w - 1)) - 1 : ~UINT64_C(0);
        } else { /* lowest */
            v.u = is_signed ? ~((UINT64_C(1) << (w - 1)) - 1) : 0;
        }
    } else if (r & 2) {
        v.i = is_signed ? (int64_t)((r >> 8) % 201) - 100 : (int64_t)((r >> 8) % 201);
    } else {
        v.u = next_random(rng);
    }
    return sl_monoid_normalize(t, v);
}

/* ---- comparing states ----------------------------------------------------------------------- */

static double magnitude(const sl_value *v, int n) {
    double m = 0;
    for (int f = 0; f < n; f++)
        if (sl_type_is_float(v[f].type) && isfinite(v[f].f) && fabs(v[f].f) > m) m = fabs(v[f].f);
    return m;
}

static bool same_state(const sl_operator *op, const sl_value *x, const sl_value *y, double scale) {
    for (int f = 0; f < op->nfields; f++) {
        if (!sl_type_is_float(op->field_types[f])) {
            if (x[f].u != y[f].u) return false;
            continue;
        }
        double a = x[f].f, b = y[f].f;
        if (isnan(a) || isnan(b)) {
            if (!(isnan(a) && isnan(b))) return false;
            continue;
        }
        if (a == b) continue;
        if (!isfinite(a) || !isfinite(b)) return false;
        if (fabs(a - b) > float_tolerance(op->field_types[f]) * scale) return false;
    }
    return true;
}

static const char *format_state(const sl_operator *op, const sl_value *v, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    for (int f = 0; f < op->nfields && used < cap; f++) {
        char num[64];
        sl_value_format(v[f], num, sizeof num);
        int n = snprintf(buf + used, cap - used, "%s%s: %s", f ? ", " : "{", op->field_names[f],
                         num);
        if (n < 0) break;
        used += (size_t)n;
    }
    if (used < cap) snprintf(buf + used, cap - used, "}");
    return buf;
}

static void check_operator(sl_loader *L, const sl_operator *op, sl_srcloc identity_loc) {
    sl_scan scan = {.op = SL_SCAN_CUSTOM, .custom = op, .nfields = op->nfields};
    for (int f = 0; f < op->nfields; f++) scan.acc[f] = op->field_types[f];
    uint64_t rng = 0x5EED5EED12345678ull;
    bool assoc_reported = false, identity_reported = false;
    char sa[256], sb[256], sc[256], s1[256], s2[256];
    for (int t = 0; t < CHECK_TRIALS; t++) {
        sl_value a[SL_MAX_FIELDS], b[SL_MAX_FIELDS], c[SL_MAX_FIELDS];
        for (int f = 0; f < op->nfields; f++) {
            a[f] = sample(op->field_types[f], &rng, t);
            b[f] = sample(op->field_types[f], &rng, t);
            c[f] = sample(op->field_types[f], &rng, t);
        }
        if (!assoc_reported) {
            sl_value ab[SL_MAX_FIELDS], left[SL_MAX_FIELDS], bc[SL_MAX_FIELDS],
                right[SL_MAX_FIELDS];
            sl_monoid_combine(&scan, a, b, ab);
            sl_monoid_combine(&scan, ab, c, left);
            sl_monoid_combine(&scan, b, c, bc);
            sl_monoid_combine(&scan, a, bc, right);
            double scale = fmax(fmax(magnitude(a, op->nfields), magnitude(b, op->nfields)),
                                fmax(magnitude(c, op->nfields),
                                     fmax(magnitude(left, op->nfields),
                                          magnitude(right, op->nfields))));
            scale = fmax(scale, fmax(magnitude(ab, op->nfields), magnitude(bc, op->nfields)));
            if (!same_state(op, left, right, scale)) {
                ld_error(L, SLUICE_ERR_NOT_ASSOCIATIVE, op->loc,
                         "operator '%s' is not associative, so a parallel scan would give "
                         "order-dependent results: with a = %s, b = %s, c = %s, (a op b) op c "
                         "= %s but a op (b op c) = %s",
                         op->name, format_state(op, a, sa, sizeof sa),
                         format_state(op, b, sb, sizeof sb), format_state(op, c, sc, sizeof sc),
                         format_state(op, left, s1, sizeof s1),
                         format_state(op, right, s2, sizeof s2));
                assoc_reported = true;
            }
        }
        if (!identity_reported) {
            sl_value el[SL_MAX_FIELDS], er[SL_MAX_FIELDS];
            sl_monoid_combine(&scan, op->identity, a, el);
            sl_monoid_combine(&scan, a, op->identity, er);
            double scale = fmax(magnitude(a, op->nfields),
                                fmax(magnitude(el, op->nfields), magnitude(er, op->nfields)));
            bool left_ok = same_state(op, el, a, scale), right_ok = same_state(op, er, a, scale);
            if (!left_ok || !right_ok) {
                format_state(op, op->identity, sa, sizeof sa);
                format_state(op, a, sb, sizeof sb);
                format_state(op, left_ok ? er : el, s1, sizeof s1);
                ld_error(L, SLUICE_ERR_BAD_IDENTITY, identity_loc,
                         "identity %s of operator '%s' is not an identity: %s gives %s instead "
                         "of %s",
                         sa, op->name, left_ok ? "a op identity" : "identity op a", s1, sb);
                identity_reported = true;
            }
        }
        if (assoc_reported && identity_reported) break;
    }
}

/* ---- parsing ------------------------------------------------------------------------------ */

int ld_operator_field(const sl_operator *op, const char *name) {
    for (int f = 0; f < op->nfields; f++)
        if (strcmp(op->field_names[f], name) == 0) return f;
    return -1;
}

bool ld_check_fields(sl_loader *L, const sl_operator *op, const ld_node *m, const char *what,
                     bool require_all) {
    bool ok = true;
    for (int i = 0; i < m->count; i++) {
        const ld_node *k = ld_key(m, i);
        if (ld_operator_field(op, k->text) >= 0) continue;
        const char *s = sl_suggest(k->text, (const char *const *)op->field_names,
                                   (size_t)op->nfields);
        char hint[96] = "";
        if (s) snprintf(hint, sizeof hint, "; did you mean '%s'?", s);
        ok = ld_error(L, SLUICE_ERR_UNKNOWN_KEY, k->loc,
                      "'%s' in %s is not one of the state fields of operator '%s'%s", k->text,
                      what, op->name, hint);
    }
    for (int f = 0; require_all && f < op->nfields; f++)
        if (!ld_get(m, op->field_names[f]))
            ok = ld_error(L, SLUICE_ERR_MISSING_KEY, m->loc,
                          "%s needs a value for state field '%s' of operator '%s'", what,
                          op->field_names[f], op->name);
    return ok;
}

static bool parse_state(sl_loader *L, sl_operator *op, const ld_node *state) {
    if (state->kind != LD_MAPPING || state->count == 0)
        return ld_error(L, SLUICE_ERR_BAD_VALUE, state->loc,
                        "state of operator '%s' must be a mapping FIELD: TYPE (e.g. {a: f32}), "
                        "not %s", op->name, ld_shape(state));
    if (state->count > SL_MAX_FIELDS)
        return ld_error(L, SLUICE_ERR_LIMIT, state->loc,
                        "operator '%s' has %d state fields; at most %d", op->name, state->count,
                        SL_MAX_FIELDS);
    bool ok = true;
    for (int i = 0; i < state->count; i++) {
        const ld_node *k = ld_key(state, i), *v = ld_val(state, i);
        if (!ld_is_identifier(k->text)) {
            ok = ld_error(L, SLUICE_ERR_BAD_VALUE, k->loc,
                          "'%s' is not a valid state field name", k->text);
            continue;
        }
        sluice_type t;
        if (!ld_type(L, v, &t)) {
            ok = false;
            continue;
        }
        if (!(op->field_names[op->nfields] = sl_strdup(L->ctx, k->text))) return ld_oom(L);
        op->field_types[op->nfields++] = t;
    }
    return ok;
}

static bool parse_identity(sl_loader *L, sl_operator *op, const ld_node *identity) {
    if (identity->kind != LD_MAPPING)
        return ld_error(L, SLUICE_ERR_BAD_VALUE, identity->loc,
                        "identity of operator '%s' must be a mapping FIELD: VALUE, not %s",
                        op->name, ld_shape(identity));
    bool ok = ld_check_fields(L, op, identity, "the identity", true);
    for (int f = 0; f < op->nfields; f++) {
        const ld_node *v = ld_get(identity, op->field_names[f]);
        if (!v) continue;
        const char *text = ld_scalar(L, v, "an identity value");
        if (!text) {
            ok = false;
        } else if (!sl_value_parse(text, op->field_types[f], &op->identity[f])) {
            ok = ld_error(L, SLUICE_ERR_BAD_VALUE, v->loc,
                          "identity value '%s' of field '%s' is not a valid %s", text,
                          op->field_names[f], sluice_type_name(op->field_types[f]));
        } else {
            op->identity[f] = sl_monoid_normalize(op->field_types[f], op->identity[f]);
        }
    }
    return ok;
}

static bool parse_combine(sl_loader *L, sl_operator *op, const ld_node *combine) {
    if (combine->kind != LD_MAPPING)
        return ld_error(L, SLUICE_ERR_BAD_VALUE, combine->loc,
                        "combine of operator '%s' must be a mapping FIELD: EXPRESSION over l. "
                        "and r., not %s", op->name, ld_shape(combine));
    bool ok = ld_check_fields(L, op, combine, "combine", true);
    /* expressions see only l.<field> and r.<field> */
    for (int f = 0; f < op->nfields; f++) {
        snprintf(L->scope_field_text[2 * f], sizeof L->scope_field_text[0], "l.%s",
                 op->field_names[f]);
        snprintf(L->scope_field_text[2 * f + 1], sizeof L->scope_field_text[0], "r.%s",
                 op->field_names[f]);
        L->scope_field_names[2 * f] = L->scope_field_text[2 * f];
        L->scope_field_names[2 * f + 1] = L->scope_field_text[2 * f + 1];
    }
    L->scope_operator = op;
    for (int f = 0; f < op->nfields && !L->stop; f++) {
        const ld_node *v = ld_get(combine, op->field_names[f]);
        if (!v) continue;
        sl_expr *e = ld_expr(L, v, NULL);
        if (!e) {
            ok = false;
            continue;
        }
        if (!(op->combine[f] = sl_expr_cast_to(L->ctx, e, op->field_types[f]))) {
            L->scope_operator = NULL;
            return ld_oom(L);
        }
    }
    L->scope_operator = NULL;
    return ok && !L->oom;
}

void ld_parse_operators(sl_loader *L, const ld_node *ops) {
    if (ops->kind != LD_MAPPING) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, ops->loc,
                 "operators must be a mapping NAME: {state, identity, combine}, not %s",
                 ld_shape(ops));
        return;
    }
    if (ops->count > SL_MAX_OPERATORS) {
        ld_error(L, SLUICE_ERR_LIMIT, ops->loc, "%d operators; a pipeline declares at most %d",
                 ops->count, SL_MAX_OPERATORS);
        return;
    }
    sluice_pipeline *p = L->p;
    p->operators = sl_calloc(L->ctx, (size_t)(ops->count ? ops->count : 1), sizeof *p->operators);
    if (!p->operators) {
        ld_oom(L);
        return;
    }
    static const char *const keys[] = {"state", "identity", "combine"};
    for (int i = 0; i < ops->count && !L->stop; i++) {
        const ld_node *k = ld_key(ops, i), *v = ld_val(ops, i);
        sl_scan_op builtin;
        if (!ld_is_identifier(k->text)) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, k->loc, "'%s' is not a valid operator name", k->text);
            continue;
        }
        if (sl_monoid_op_from_name(k->text, &builtin)) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, k->loc,
                     "'%s' is a builtin operator; give the declared one another name", k->text);
            continue;
        }
        if (v->kind != LD_MAPPING) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, v->loc,
                     "operator '%s' must be a mapping {state, identity, combine}, not %s",
                     k->text, ld_shape(v));
            continue;
        }
        sl_operator *op = &p->operators[p->noperators++];
        op->loc = k->loc;
        if (!(op->name = sl_strdup(L->ctx, k->text))) {
            ld_oom(L);
            return;
        }
        char where[96];
        snprintf(where, sizeof where, "operator '%s'", k->text);
        bool ok = ld_check_keys(L, v, keys, SL_ARRAY_LEN(keys), where);
        const ld_node *state = ld_require(L, v, k->loc, "state", where);
        const ld_node *identity = ld_require(L, v, k->loc, "identity", where);
        const ld_node *combine = ld_require(L, v, k->loc, "combine", where);
        if (!state || !parse_state(L, op, state)) ok = false;
        if (ok && identity && !parse_identity(L, op, identity)) ok = false;
        if (ok && combine && !parse_combine(L, op, combine)) ok = false;
        if (ok && identity && combine) {
            check_operator(L, op, identity->loc);
        } else {
            /* A negative count marks a declaration that failed (already reported): scans
             * that use it stay silent. Such a pipeline never finishes loading. */
            op->nfields = -op->nfields - 1;
        }
    }
}
