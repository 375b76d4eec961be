/* types.c — typed scalar values: loading and storing column elements, the language's casts
 * (every pair of column types, a vector at a time), parsing literals, formatting values, and
 * f16 conversion; and the tables of the type list (types.h's SL_TYPE_LIST). The conversion
 * rules themselves live in kernels/sl_ops.h so that the CPU and generated GPU code share
 * them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr/expr.h"
#include "sl_ops.h"
#include "common/types.h"

/* One conversion under two names: sluice_* for users of the public API (the command line
 * among them), sl_* for the core's own code. */
float sluice_f16_to_f32(uint16_t half) { return sl_half_to_f32(half); }
uint16_t sluice_f32_to_f16(float value) { return sl_f32_to_half(value); }
float sl_f16_to_f32(uint16_t h) { return sl_half_to_f32(h); }
uint16_t sl_f32_to_f16(float f) { return sl_f32_to_half(f); }

/* ---- vector casts ------------------------------------------------------------------------ */

/* ---- the type list's tables and checks ----------------------------------------------------- */

#define SL_TYPE_INFO_(E, N, CT, BT, SIZE, CLS, NPY) [E] = {#N, #CT, NPY, SIZE, CLS},
const sl_type_info sl_type_infos[SLUICE_TYPE_COUNT_] = {SL_TYPE_LIST(SL_TYPE_INFO_)};

/* The list is in the enum's order, each size is its C type's, and the bits type is as wide. */
enum {
#define SL_TYPE_ORDER_(E, N, CT, BT, SIZE, CLS, NPY) sl_type_order_##N,
    SL_TYPE_LIST(SL_TYPE_ORDER_) sl_type_order_count_
};
#define SL_TYPE_CHECK_(E, N, CT, BT, SIZE, CLS, NPY)                                            \
    _Static_assert((int)E == (int)sl_type_order_##N,                                            \
                   "SL_TYPE_LIST is out of sluice_type's order");                               \
    _Static_assert(sizeof(CT) == SIZE && sizeof(BT) == SIZE, "SL_TYPE_LIST: wrong size for " #N);
SL_TYPE_LIST(SL_TYPE_CHECK_)
_Static_assert((int)sl_type_order_count_ == (int)SLUICE_TYPE_COUNT_, "SL_TYPE_LIST misses a type");

/* ---- vector casts ------------------------------------------------------------------------ */

/* The cast table is a switch over the source type around a switch over the destination. The
 * preprocessor cannot expand SL_TYPE_LIST inside its own expansion, so the inner switch walks
 * a second copy of the list, held to the first one by the checks below (each (enum, name)
 * pair exists in SL_TYPE_LIST with the same size). The outer one pastes the sl_ops.h prefix
 * itself, as `bool` is a macro. */
#define SL_TYPE_PAIR_SIZE_(E, N, CT, BT, SIZE, CLS, NPY) sl_type_pair_##E##_##N = SIZE,
enum { SL_TYPE_LIST(SL_TYPE_PAIR_SIZE_) sl_type_pair_end_ };
#define SL_TYPES_INNER_(X, fs, FT)                                                              \
    X(fs, FT, SLUICE_BOOL, bool, sl_bool) X(fs, FT, SLUICE_I8, i8, int8_t)                        \
    X(fs, FT, SLUICE_I16, i16, int16_t) X(fs, FT, SLUICE_I32, i32, int32_t)                       \
    X(fs, FT, SLUICE_I64, i64, int64_t) X(fs, FT, SLUICE_U8, u8, uint8_t)                         \
    X(fs, FT, SLUICE_U16, u16, uint16_t) X(fs, FT, SLUICE_U32, u32, uint32_t)                     \
    X(fs, FT, SLUICE_U64, u64, uint64_t) X(fs, FT, SLUICE_F16, f16, sl_half)                      \
    X(fs, FT, SLUICE_F32, f32, float) X(fs, FT, SLUICE_F64, f64, double)
#define SL_TYPES_INNER_CHECK_(fs, FT, TE, ts, TT)                                               \
    _Static_assert(sizeof(TT) == (size_t)sl_type_pair_##TE##_##ts,                              \
                   "SL_TYPES_INNER_ disagrees with SL_TYPE_LIST");
SL_TYPES_INNER_(SL_TYPES_INNER_CHECK_, unused, unused)

#define SL_CAST_CASE_TO_(fs, FT, TE, ts, TT)                                                    \
    case TE: {                                                                                  \
        const FT *restrict s_ = src;                                                            \
        TT *restrict d_ = dst;                                                                  \
        for (int64_t i = 0; i < n; i++) d_[i] = fs##ts(s_[i]);                                   \
        return;                                                                                 \
    }
#define SL_CAST_CASE_FROM_(FE, N, FT, BT, SIZE, CLS, NPY)                                       \
    case FE:                                                                                    \
        switch (to) {                                                                           \
            SL_TYPES_INNER_(SL_CAST_CASE_TO_, sl_cvt_##N##_, FT)                                \
        default: return;                                                                        \
        }

void sl_value_cast_rows(sluice_type from, const void *src, sluice_type to, void *dst, int64_t n) {
    switch (from) {
        SL_TYPE_LIST(SL_CAST_CASE_FROM_)
    default: return;
    }
}

/* ---- values ------------------------------------------------------------------------------ */

/* A value keeps its float in a double (types.h). Converting a signalling NaN between float formats
 * with the processor's instructions quiets it, so a NaN travelling through a value (a scan's
 * carry from one batch to the next, a param) would come back with other bits than it went in
 * with, and results would depend on where the stream was cut. NaNs are therefore widened and
 * narrowed by their bits: sign kept, payload (quiet bit included) moved to the top of the
 * wider mantissa and back. */
double sl_f32_widen(float f) {
    if (f == f) return f;
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    uint64_t d = ((uint64_t)(b >> 31) << 63) | ((uint64_t)0x7ff << 52) |
                 ((uint64_t)(b & 0x7fffffu) << 29);
    double r;
    memcpy(&r, &d, sizeof r);
    return r;
}

/* The f32 bits of a NaN held as a double by sl_f32_widen (a NaN whose payload lies below
 * the f32 mantissa's reach keeps only its sign and comes back quiet). */
static uint32_t narrow_nan_bits(double v) {
    uint64_t d;
    memcpy(&d, &v, sizeof d);
    uint32_t mant = (uint32_t)((d >> 29) & 0x7fffffu);
    if (!mant) mant = 0x400000u;
    return ((uint32_t)(d >> 63) << 31) | 0x7f800000u | mant;
}

float sl_f32_narrow(double v) {
    if (v == v) return (float)v;
    uint32_t b = narrow_nan_bits(v);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

sl_value sl_value_from_raw(sluice_type t, const void *raw) {
    sl_value v;
    memset(&v, 0, sizeof v);
    v.type = t;
    const sl_raw *r = raw;
    switch (t) {
    case SLUICE_BOOL: v.u = r->b != 0; break;
    case SLUICE_I8: v.i = r->i8; break;
    case SLUICE_I16: v.i = r->i16; break;
    case SLUICE_I32: v.i = r->i32; break;
    case SLUICE_I64: v.i = r->i64; break;
    case SLUICE_U8: v.u = r->u8; break;
    case SLUICE_U16: v.u = r->u16; break;
    case SLUICE_U32: v.u = r->u32; break;
    case SLUICE_U64: v.u = r->u64; break;
    case SLUICE_F16: v.f = sl_f32_widen(sl_half_to_f32(r->f16)); break;
    case SLUICE_F32: v.f = sl_f32_widen(r->f32); break;
    case SLUICE_F64: v.f = r->f64; break;
    default: break;
    }
    return v;
}

/* The value's own type; a value whose double does not fit its float type converts with the
 * f64 rules (round to nearest even). */
void sl_value_to_raw(sl_value v, sl_raw *out) {
    memset(out, 0, sizeof *out);
    switch (v.type) {
    case SLUICE_BOOL: out->b = v.u != 0; break;
    case SLUICE_I8: out->i8 = (int8_t)v.i; break;
    case SLUICE_I16: out->i16 = (int16_t)v.i; break;
    case SLUICE_I32: out->i32 = (int32_t)v.i; break;
    case SLUICE_I64: out->i64 = v.i; break;
    case SLUICE_U8: out->u8 = (uint8_t)v.u; break;
    case SLUICE_U16: out->u16 = (uint16_t)v.u; break;
    case SLUICE_U32: out->u32 = (uint32_t)v.u; break;
    case SLUICE_U64: out->u64 = v.u; break;
    case SLUICE_F16:
        if (v.f != v.f) {
            uint32_t b = narrow_nan_bits(v.f); /* f32 bits, then the top of the payload */
            uint16_t mant = (uint16_t)((b >> 13) & 0x3ffu);
            out->f16 = (uint16_t)(((b >> 31) << 15) | 0x7c00u | (mant ? mant : 0x200u));
        } else {
            out->f16 = sl_cvt_f64_f16(v.f);
        }
        break;
    case SLUICE_F32:
        if (v.f != v.f) {
            uint32_t b = narrow_nan_bits(v.f);
            memcpy(&out->f32, &b, sizeof b);
        } else {
            out->f32 = sl_cvt_f64_f32(v.f);
        }
        break;
    case SLUICE_F64: out->f64 = v.f; break;
    default: break;
    }
}

sl_value sl_value_load(sluice_type t, const void *data, int64_t index) {
    size_t size = sluice_type_size(t);
    sl_raw r;
    memset(&r, 0, sizeof r);
    if (size) memcpy(&r, (const char *)data + (size_t)index * size, size);
    return sl_value_from_raw(t, &r);
}

sl_value sl_value_cast(sl_value v, sluice_type t) {
    sl_raw in, out;
    sl_value_to_raw(v, &in);
    memset(&out, 0, sizeof out);
    if ((unsigned)v.type < SLUICE_TYPE_COUNT_) sl_value_cast_rows(v.type, &in, t, &out, 1);
    return sl_value_from_raw(t, &out);
}

void sl_value_store(sluice_type t, void *data, int64_t index, sl_value v) {
    size_t size = sluice_type_size(t);
    if (!size) return;
    sl_value c = sl_value_cast(v, t);
    sl_raw r;
    sl_value_to_raw(c, &r);
    memcpy((char *)data + (size_t)index * size, &r, size);
}

/* ---- parsing literals -------------------------------------------------------------------- */

/* An integer literal: optional sign, decimal digits or 0x hex digits, nothing else. */
static bool parse_integer(const char *s, bool *negative, uint64_t *magnitude) {
    *negative = false;
    if (*s == '+' || *s == '-') *negative = *s++ == '-';
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (!*s) return false;
    uint64_t m = 0;
    for (; *s; s++) {
        int d;
        if (*s >= '0' && *s <= '9') d = *s - '0';
        else if (base == 16 && *s >= 'a' && *s <= 'f') d = *s - 'a' + 10;
        else if (base == 16 && *s >= 'A' && *s <= 'F') d = *s - 'A' + 10;
        else return false;
        if (m > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        m = m * (uint64_t)base + (uint64_t)d;
    }
    *magnitude = m;
    return true;
}

/* A decimal float: [+-] (digits [. digits] | . digits) [e [+-] digits], or inf / nan. */
static bool parse_float(const char *s, double *out) {
    const char *p = s;
    bool negative = false;
    if (*p == '+' || *p == '-') negative = *p++ == '-';
    if (!strcmp(p, "inf") || !strcmp(p, "infinity")) {
        *out = negative ? -INFINITY : INFINITY;
        return true;
    }
    if (!strcmp(p, "nan")) {
        *out = negative ? -NAN : NAN;
        return true;
    }
    bool ok_int, neg_int;
    uint64_t mag;
    ok_int = parse_integer(s, &neg_int, &mag);
    if (ok_int) {
        *out = neg_int ? -(double)mag : (double)mag;
        return true;
    }
    size_t digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return false;
    errno = 0;
    double d = strtod(s, NULL);
    if (errno == ERANGE && isinf(d)) return false; /* overflow; underflow to 0 is fine */
    *out = d;
    return true;
}

bool sl_value_parse(const char *text, sluice_type t, sl_value *out) {
    if (!text || !out) return false;
    sl_value v;
    memset(&v, 0, sizeof v);
    v.type = t;
    if (t == SLUICE_BOOL) {
        if (!strcmp(text, "true")) v.u = 1;
        else if (strcmp(text, "false")) return false;
        *out = v;
        return true;
    }
    if (sl_type_is_integer(t)) {
        bool negative;
        uint64_t m;
        if (!parse_integer(text, &negative, &m)) return false;
        int bits = sl_type_bits(t);
        if (sl_type_is_signed(t)) {
            uint64_t limit = (uint64_t)1 << (bits - 1); /* |min|; max is limit - 1 */
            if (negative ? m > limit : m >= limit) return false;
            v.i = negative ? (int64_t)(0 - m) : (int64_t)m;
        } else {
            if (negative && m != 0) return false;
            if (bits < 64 && m >> bits) return false;
            v.u = m;
        }
        *out = v;
        return true;
    }
    if (sl_type_is_float(t)) {
        double d;
        if (!parse_float(text, &d)) return false;
        v.type = SLUICE_F64;
        v.f = d;
        sl_value c = sl_value_cast(v, t);
        if (isinf(c.f) && !isinf(d)) return false; /* out of the type's range */
        *out = c;
        return true;
    }
    return false;
}

/* ---- formatting -------------------------------------------------------------------------- */

char *sl_value_format(sl_value v, char *buf, size_t cap) {
    if (!buf || !cap) return buf;
    if (v.type == SLUICE_BOOL) {
        snprintf(buf, cap, "%s", v.u ? "true" : "false");
    } else if (sl_type_is_signed(v.type)) {
        snprintf(buf, cap, "%lld", (long long)v.i);
    } else if (sl_type_is_unsigned(v.type)) {
        snprintf(buf, cap, "%llu", (unsigned long long)v.u);
    } else if (sl_type_is_float(v.type)) {
        if (isnan(v.f)) {
            snprintf(buf, cap, "%snan", signbit(v.f) ? "-" : "");
        } else if (isinf(v.f)) {
            snprintf(buf, cap, "%sinf", v.f < 0 ? "-" : "");
        } else {
            /* the shortest text that reads back as the same value of the type */
            char tmp[40];
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(tmp, sizeof tmp, "%.*g", prec, v.f);
                double back = strtod(tmp, NULL);
                bool same = v.type == SLUICE_F64   ? back == v.f
                            : v.type == SLUICE_F32 ? (float)back == (float)v.f
                                                   : sl_f32_to_half((float)back) ==
                                                         sl_f32_to_half((float)v.f);
                if (same) break;
            }
            snprintf(buf, cap, "%s", tmp);
        }
    } else {
        snprintf(buf, cap, "?");
    }
    return buf;
}
