/* monoid.c — scan operators as monoids over typed values: the accumulator rules of pipelines/SCHEMA.md,
 * each operator's identity per type, and combine (left stays left: nothing here assumes
 * commutativity). Integer accumulators wrap at their width (two's complement); float ones
 * round to their format after every operation, as a GPU register of that type would.
 *
 * min/max on floats propagate NaN (the left one when both are NaN) and keep the left operand
 * on ties, so -0.0 and +0.0 keep their order of arrival. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/monoid.h"

static const char *const op_names[] = {"sum", "prod", "min", "max",  "and",
                                       "or",  "xor",  "count", "linrec"};

bool sl_scan_op_from_name(const char *name, sl_scan_op *out) {
    for (size_t i = 0; i < SL_ARRAY_LEN(op_names); i++) {
        if (strcmp(name, op_names[i]) == 0) {
            *out = (sl_scan_op)i;
            return true;
        }
    }
    return false;
}

const char *const *sl_scan_op_names(size_t *count) {
    *count = SL_ARRAY_LEN(op_names);
    return op_names;
}

const char *sl_scan_op_name(const sl_scan *scan) {
    if (scan->op == SL_SCAN_CUSTOM) return scan->custom ? scan->custom->name : "custom";
    if ((size_t)scan->op < SL_ARRAY_LEN(op_names)) return op_names[scan->op];
    return "?";
}

/* ---- accumulator rules ------------------------------------------------------------------ */

static int int_bits(sluice_type t) { return t == SLUICE_BOOL ? 1 : sl_type_bits(t); }

sluice_type sl_monoid_linrec_input(sluice_type a, sluice_type b) {
    if (a == SLUICE_F64 || b == SLUICE_F64) return SLUICE_F64;
    if (sl_type_is_float(a) || sl_type_is_float(b)) return SLUICE_F32;
    return SLUICE_I64;
}

bool sl_monoid_default_acc(sl_scan_op op, sluice_type input, sluice_type *acc, char *why,
                           size_t cap) {
    bool is_float = sl_type_is_float(input);
    switch (op) {
    case SL_SCAN_SUM:
    case SL_SCAN_PROD:
        if (is_float)
            *acc = input == SLUICE_F16 ? SLUICE_F32 : input;
        else
            *acc = sl_type_is_unsigned(input) ? SLUICE_U64 : SLUICE_I64;
        return true;
    case SL_SCAN_MIN:
    case SL_SCAN_MAX:
        *acc = input == SLUICE_F16 ? SLUICE_F32 : input;
        return true;
    case SL_SCAN_AND:
    case SL_SCAN_OR:
    case SL_SCAN_XOR:
        if (is_float) {
            snprintf(why, cap,
                     "%s is bitwise on integers and logical on bool; it is not defined on %s",
                     op_names[op], sluice_type_name(input));
            return false;
        }
        *acc = input;
        return true;
    case SL_SCAN_COUNT:
        *acc = SLUICE_I64;
        return true;
    case SL_SCAN_LINREC:
        if (input == SLUICE_BOOL) {
            snprintf(why, cap, "linrec needs numbers for a and b, not bool");
            return false;
        }
        *acc = sl_type_is_float(input) ? (input == SLUICE_F64 ? SLUICE_F64 : SLUICE_F32)
                                       : SLUICE_I64;
        return true;
    case SL_SCAN_CUSTOM:
        break;
    }
    snprintf(why, cap, "a declared operator's accumulators are its state types");
    return false;
}

bool sl_monoid_acc_allowed(sl_scan_op op, sluice_type input, sluice_type acc, char *why,
                           size_t cap) {
    const char *in = sluice_type_name(input), *ac = sluice_type_name(acc);
    if (acc == SLUICE_F16) {
        snprintf(why, cap, "accumulators are never narrower than f32 (an f16 running sum "
                           "stalls: at 256 it can no longer add 0.1); use acc: f32");
        return false;
    }
    if (op == SL_SCAN_COUNT) {
        if (acc == SLUICE_I64 || acc == SLUICE_U64) return true;
        snprintf(why, cap, "count is a 64-bit row count; acc may be i64 or u64, not %s", ac);
        return false;
    }
    bool bitwise = op == SL_SCAN_AND || op == SL_SCAN_OR || op == SL_SCAN_XOR;
    if (bitwise && sl_type_is_float(acc)) {
        snprintf(why, cap, "%s cannot accumulate in a float type (%s)", op_names[op], ac);
        return false;
    }
    if (sl_type_is_float(input)) {
        if (!sl_type_is_float(acc)) {
            snprintf(why, cap, "%s values cannot accumulate in %s: fractions and range would be "
                               "lost; use a float acc", in, ac);
            return false;
        }
        if (sluice_type_size(acc) < sluice_type_size(input)) {
            snprintf(why, cap, "acc %s is narrower than the %s input", ac, in);
            return false;
        }
        return true;
    }
    /* integer or bool input */
    if (sl_type_is_float(acc)) {
        /* f32 holds every 16-bit integer exactly, f64 every 32-bit one */
        if (int_bits(input) <= (acc == SLUICE_F32 ? 16 : 32)) return true;
        snprintf(why, cap, "%s cannot hold every %s value exactly; use %s", ac, in,
                 acc == SLUICE_F32 ? "f64 or an integer acc" : "an integer acc");
        return false;
    }
    if (acc == SLUICE_BOOL) {
        if (input == SLUICE_BOOL && (op == SL_SCAN_MIN || op == SL_SCAN_MAX || bitwise))
            return true;
        snprintf(why, cap, "acc bool cannot hold %s results of %s; use an integer acc",
                 op == SL_SCAN_SUM || op == SL_SCAN_PROD ? "the counts in" : "the",
                 input == SLUICE_BOOL ? "bool" : in);
        return false;
    }
    if (input == SLUICE_BOOL) return true;
    if (sl_type_is_signed(input) && sl_type_is_unsigned(acc)) {
        snprintf(why, cap, "unsigned acc %s would lose the negative values of the %s input", ac,
                 in);
        return false;
    }
    int need = int_bits(input) + (sl_type_is_unsigned(input) && sl_type_is_signed(acc) ? 1 : 0);
    if (int_bits(acc) < need) {
        snprintf(why, cap, "acc %s is narrower than the %s input%s", ac, in,
                 sl_type_is_unsigned(input) && sl_type_is_signed(acc)
                     ? " (a signed acc needs one more bit)" : "");
        return false;
    }
    return true;
}

/* ---- values ----------------------------------------------------------------------------- */

sl_value sl_monoid_normalize(sluice_type t, sl_value v) {
    sl_value r = v;
    r.type = t;
    if (t == SLUICE_BOOL) {
        r.u = v.u != 0;
    } else if (sl_type_is_signed(t)) {
        int w = sl_type_bits(t);
        if (w < 64) r.i = (int64_t)(v.u << (64 - w)) >> (64 - w);
    } else if (sl_type_is_unsigned(t)) {
        int w = sl_type_bits(t);
        if (w < 64) r.u = v.u & ((UINT64_C(1) << w) - 1);
    } else if (t == SLUICE_F32) {
        r.f = (double)(float)v.f;
    } else if (t == SLUICE_F16) {
        r.f = (double)sl_f16_to_f32(sl_f32_to_f16((float)v.f));
    }
    return r;
}

static sl_value make_int(sluice_type t, uint64_t bits) {
    sl_value v;
    v.type = t;
    v.u = bits;
    return sl_monoid_normalize(t, v);
}

static sl_value make_float(sluice_type t, double f) {
    sl_value v;
    v.type = t;
    v.f = f;
    return v;
}

/* 1 as a value of t. */
static sl_value one_of(sluice_type t) {
    return sl_type_is_float(t) ? make_float(t, 1.0) : make_int(t, 1);
}

static sl_value zero_of(sluice_type t) {
    return sl_type_is_float(t) ? make_float(t, 0.0) : make_int(t, 0);
}

/* The greatest (top = true) or lowest value of t. */
static sl_value extreme_of(sluice_type t, bool top) {
    if (sl_type_is_float(t)) return make_float(t, top ? INFINITY : -INFINITY);
    if (t == SLUICE_BOOL) return make_int(t, top ? 1 : 0);
    int w = sl_type_bits(t);
    if (sl_type_is_unsigned(t)) return make_int(t, top ? ~UINT64_C(0) : 0);
    uint64_t max = (UINT64_C(1) << (w - 1)) - 1;
    return make_int(t, top ? max : ~max);
}

sl_value sl_monoid_identity(sl_scan_op op, int field, sluice_type acc) {
    switch (op) {
    case SL_SCAN_PROD: return one_of(acc);
    case SL_SCAN_MIN: return extreme_of(acc, true);
    case SL_SCAN_MAX: return extreme_of(acc, false);
    case SL_SCAN_AND: return make_int(acc, ~UINT64_C(0));
    case SL_SCAN_LINREC: return field == 0 ? one_of(acc) : zero_of(acc);
    default: return zero_of(acc);
    }
}

/* ---- combine ------------------------------------------------------------------------------ */

static sl_value add(sluice_type t, sl_value x, sl_value y) {
    if (sl_type_is_float(t)) return sl_monoid_normalize(t, make_float(t, x.f + y.f));
    return make_int(t, x.u + y.u);
}

static sl_value mul(sluice_type t, sl_value x, sl_value y) {
    if (sl_type_is_float(t)) return sl_monoid_normalize(t, make_float(t, x.f * y.f));
    return make_int(t, x.u * y.u); /* low bits of the two's complement product */
}

/* y is "less" than x in t's order (for min: take y only when strictly less). */
static bool less(sluice_type t, sl_value y, sl_value x) {
    if (sl_type_is_float(t)) return y.f < x.f;
    if (sl_type_is_signed(t)) return y.i < x.i;
    return y.u < x.u;
}

static sl_value pick(sluice_type t, sl_value x, sl_value y, bool want_min) {
    if (sl_type_is_float(t)) {
        if (isnan(x.f)) return x;
        if (isnan(y.f)) return y;
    }
    bool take_y = want_min ? less(t, y, x) : less(t, x, y);
    return take_y ? y : x;
}

static sl_value combine_builtin(sl_scan_op op, sluice_type t, sl_value x, sl_value y) {
    switch (op) {
    case SL_SCAN_SUM:
    case SL_SCAN_COUNT: return add(t, x, y);
    case SL_SCAN_PROD: return mul(t, x, y);
    case SL_SCAN_MIN: return pick(t, x, y, true);
    case SL_SCAN_MAX: return pick(t, x, y, false);
    case SL_SCAN_AND: return make_int(t, x.u & y.u);
    case SL_SCAN_OR: return make_int(t, x.u | y.u);
    case SL_SCAN_XOR: return make_int(t, x.u ^ y.u);
    default: return x;
    }
}

static void combine_custom(const sl_operator *op, const sl_value *a, const sl_value *b,
                           sl_value *out) {
    uint64_t storage[2][SL_MAX_FIELDS];
    const void *fields[2][SL_MAX_FIELDS];
    for (int f = 0; f < op->nfields; f++) {
        sl_value_store(op->field_types[f], &storage[0][f], 0, a[f]);
        sl_value_store(op->field_types[f], &storage[1][f], 0, b[f]);
        fields[0][f] = &storage[0][f];
        fields[1][f] = &storage[1][f];
    }
    sl_eval_env env = {.columns = NULL, .params = NULL, .fields = {fields[0], fields[1]}};
    sl_value result[SL_MAX_FIELDS];
    for (int f = 0; f < op->nfields; f++) {
        sl_value r = sl_expr_eval_scalar(op->combine[f], &env, 0);
        if (r.type != op->field_types[f]) r = sl_value_cast(r, op->field_types[f]);
        result[f] = sl_monoid_normalize(op->field_types[f], r);
    }
    memcpy(out, result, (size_t)op->nfields * sizeof *out);
}

void sl_monoid_combine(const sl_scan *scan, const sl_value *a, const sl_value *b, sl_value *out) {
    if (scan->op == SL_SCAN_CUSTOM) {
        combine_custom(scan->custom, a, b, out);
        return;
    }
    if (scan->op == SL_SCAN_LINREC) {
        /* (a1, b1) then (a2, b2) = (a1*a2, a2*b1 + b2) */
        sluice_type ta = scan->acc[0], tb = scan->acc[1];
        sl_value ra = mul(ta, a[0], b[0]);
        sl_value rb = add(tb, mul(tb, b[0], a[1]), b[1]);
        out[0] = ra;
        out[1] = rb;
        return;
    }
    for (int f = 0; f < scan->nfields; f++)
        out[f] = combine_builtin(scan->op, scan->acc[f], a[f], b[f]);
}
