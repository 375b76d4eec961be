/* monoid.c — scan operators as monoids over typed values: the accumulator rules of pipelines/SCHEMA.md,
 * each operator's identity per type, and combine (left stays left: nothing here assumes
 * commutativity). Integer accumulators wrap at their width (two's complement); float ones
 * round to their format after every operation, as a GPU register of that type would.
 *
 * min/max on floats propagate NaN (the left one when both are NaN) and keep the left operand
 * on ties, so -0.0 and +0.0 keep their order of arrival. The builtin combines themselves are
 * kernels/sl_monoid.h, which the generated GPU kernels call too. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/monoid.h"

#include "sl_monoid.h"

static const char *const op_names[] = {"sum", "prod", "min", "max",  "and",
                                       "or",  "xor",  "count", "linrec"};

bool sl_monoid_op_from_name(const char *name, sl_scan_op *out) {
    for (size_t i = 0; i < SL_ARRAY_LEN(op_names); i++) {
        if (strcmp(name, op_names[i]) == 0) {
            *out = (sl_scan_op)i;
            return true;
        }
    }
    return false;
}

const char *const *sl_monoid_op_names(size_t *count) {
    *count = SL_ARRAY_LEN(op_names);
    return op_names;
}

const char *sl_monoid_op_name(const sl_scan *scan) {
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

/* The builtin combines are kernels/sl_monoid.h's, the definition the generated GPU kernels
 * call too: a value goes in as its accumulator's C type and comes back out as an sl_value
 * (floats held as double are exactly their f32 values, so nothing is rounded twice). */

/* One builtin operator over one C type: suffix s of sl_monoid.h, C type T, the sl_value
 * member M the type lives in; BITS adds the bitwise operators (integers only). */
#define MONOID_BITS_(s, M)                                                                        \
    case SL_SCAN_AND: r.M = sl_mon_and_##s(l_, r_); break;                                        \
    case SL_SCAN_OR: r.M = sl_mon_or_##s(l_, r_); break;                                          \
    case SL_SCAN_XOR: r.M = sl_mon_xor_##s(l_, r_); break;
#define MONOID_NO_BITS_(s, M)
#define MONOID_CASE_(s, T, M, BITS)                                                               \
    do {                                                                                          \
        T l_ = (T)x.M, r_ = (T)y.M;                                                               \
        switch (op) {                                                                             \
        case SL_SCAN_SUM:                                                                         \
        case SL_SCAN_COUNT: r.M = sl_mon_sum_##s(l_, r_); break;                                  \
        case SL_SCAN_PROD: r.M = sl_mon_prod_##s(l_, r_); break;                                  \
        case SL_SCAN_MIN: r.M = sl_mon_min_##s(l_, r_); break;                                    \
        case SL_SCAN_MAX: r.M = sl_mon_max_##s(l_, r_); break;                                    \
        BITS(s, M)                                                                                \
        default: return x;                                                                        \
        }                                                                                         \
    } while (0)

static sl_value combine_builtin(sl_scan_op op, sluice_type t, sl_value x, sl_value y) {
    sl_value r;
    r.type = t;
    r.u = 0;
    switch (t) {
    case SLUICE_I8: MONOID_CASE_(i8, int8_t, i, MONOID_BITS_); break;
    case SLUICE_I16: MONOID_CASE_(i16, int16_t, i, MONOID_BITS_); break;
    case SLUICE_I32: MONOID_CASE_(i32, int32_t, i, MONOID_BITS_); break;
    case SLUICE_I64: MONOID_CASE_(i64, int64_t, i, MONOID_BITS_); break;
    case SLUICE_U8: MONOID_CASE_(u8, uint8_t, u, MONOID_BITS_); break;
    case SLUICE_U16: MONOID_CASE_(u16, uint16_t, u, MONOID_BITS_); break;
    case SLUICE_U32: MONOID_CASE_(u32, uint32_t, u, MONOID_BITS_); break;
    case SLUICE_U64: MONOID_CASE_(u64, uint64_t, u, MONOID_BITS_); break;
    case SLUICE_F32: MONOID_CASE_(f32, float, f, MONOID_NO_BITS_); break;
    case SLUICE_F64: MONOID_CASE_(f64, double, f, MONOID_NO_BITS_); break;
    case SLUICE_BOOL:
        switch (op) {
        case SL_SCAN_MIN: r.u = sl_mon_min_bool((sl_bool)x.u, (sl_bool)y.u); break;
        case SL_SCAN_MAX: r.u = sl_mon_max_bool((sl_bool)x.u, (sl_bool)y.u); break;
        case SL_SCAN_AND: r.u = sl_mon_and_bool((sl_bool)x.u, (sl_bool)y.u); break;
        case SL_SCAN_OR: r.u = sl_mon_or_bool((sl_bool)x.u, (sl_bool)y.u); break;
        case SL_SCAN_XOR: r.u = sl_mon_xor_bool((sl_bool)x.u, (sl_bool)y.u); break;
        default: return x; /* sum/prod never accumulate in bool (sl_monoid_acc_allowed) */
        }
        break;
    case SLUICE_F16:
        /* pipelines never accumulate in f16 (sl_monoid_acc_allowed); a caller that does gets
           f32 arithmetic rounded back to f16 after every step */
        MONOID_CASE_(f32, float, f, MONOID_NO_BITS_);
        return sl_monoid_normalize(t, r);
    default: return x;
    }
    return r;
}

/* linrec's (a1, b1) then (a2, b2) = (a1*a2, a2*b1 + b2), both fields in type t. */
static void combine_linrec(sluice_type t, const sl_value *l, const sl_value *r, sl_value *out) {
    sl_value a = {.type = t}, b = {.type = t};
    switch (t) {
    case SLUICE_I64:
        a.i = sl_mon_linrec_a_i64(l[0].i, r[0].i);
        b.i = sl_mon_linrec_b_i64(l[1].i, r[0].i, r[1].i);
        break;
    case SLUICE_U64:
        a.u = sl_mon_linrec_a_u64(l[0].u, r[0].u);
        b.u = sl_mon_linrec_b_u64(l[1].u, r[0].u, r[1].u);
        break;
    case SLUICE_F32:
        a.f = sl_mon_linrec_a_f32((float)l[0].f, (float)r[0].f);
        b.f = sl_mon_linrec_b_f32((float)l[1].f, (float)r[0].f, (float)r[1].f);
        break;
    case SLUICE_F64:
        a.f = sl_mon_linrec_a_f64(l[0].f, r[0].f);
        b.f = sl_mon_linrec_b_f64(l[1].f, r[0].f, r[1].f);
        break;
    default: /* the loader gives linrec an i64, u64, f32 or f64 accumulator */
        a = l[0];
        b = l[1];
        break;
    }
    out[0] = a;
    out[1] = b;
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
        combine_linrec(scan->acc[1], a, b, out);
        return;
    }
    for (int f = 0; f < scan->nfields; f++)
        out[f] = combine_builtin(scan->op, scan->acc[f], a[f], b[f]);
}
