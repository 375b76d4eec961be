/* sl_ops.h — the one definition of every expression operation: arithmetic, comparisons,
 * bitwise ops and shifts, calls, casts, f16 conversion (and typed sort-key images, defined in
 * sl_sortkey.h), as small inline functions that compile as C99 (the CPU evaluator,
 * core/expr/expr_eval.c) and as CUDA C++ under nvcc or NVRTC (generated kernels, which include this
 * file as text).
 *
 * Why one file: the CPU and the GPU must give the same result for every input, including the
 * inputs C leaves undefined. Every rule lives here once, so both sides agree by construction:
 *   - integer + - * and unary - wrap (two's complement);
 *   - x / 0 == 0 and x % 0 == x for integers (so a == (a/b)*b + a%b still holds);
 *     INT_MIN / -1 == INT_MIN and INT_MIN % -1 == 0;
 *   - shifts: a count < 0 or >= the width gives 0 for << and for >> of unsigned values, and
 *     the sign fill (0 or -1) for >> of signed values;
 *   - float -> integer casts truncate toward zero and saturate; NaN -> 0;
 *   - integer -> float casts and f64 -> f32 round to nearest even; conversions to f16 round
 *     to nearest even from f32 (an f64 or integer goes to f32 first);
 *   - a bool is one byte; any non-zero byte reads as true; results are 0 or 1;
 *   - float arithmetic is IEEE with no contraction: in device code each operation is an explicit
 *     round-to-nearest intrinsic so nvcc/NVRTC never fuse a*b+c into an FMA. The C side
 *     must not be built with -ffp-contract=fast plus FMA hardware, nor with -ffast-math.
 *     exp and log are the platform's (glibc / CUDA libdevice): they agree within 2 ulp,
 *     every other operation bit for bit.
 * The language these serve is documented in pipelines/EXPRESSIONS.md. */
#ifndef SL_OPS_H
#define SL_OPS_H

#include "sl_sortkey.h"
#include "sl_stdint.h"
#if !defined(__CUDACC_RTC__)
#include <math.h>
#endif

#if defined(__CUDACC__)
#define SL_OPS_FN static __host__ __device__ __forceinline__
#else
#define SL_OPS_FN static inline
#endif

typedef uint8_t sl_bool;  /* a bool column element: 0 false, anything else true */
typedef uint16_t sl_half; /* IEEE binary16, as its bits */

#define SL_I8_MIN (-127 - 1)
#define SL_I16_MIN (-32767 - 1)
#define SL_I32_MIN (-2147483647 - 1)
#define SL_I64_MIN (-9223372036854775807LL - 1)

/* ---- bit access --------------------------------------------------------------------------- */

SL_OPS_FN uint32_t sl_f32_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    union { float f; uint32_t u; } v;
    v.f = x;
    return v.u;
#endif
}
SL_OPS_FN float sl_f32_from_bits(uint32_t x) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(x);
#else
    union { float f; uint32_t u; } v;
    v.u = x;
    return v.f;
#endif
}
SL_OPS_FN uint64_t sl_f64_bits(double x) {
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(x);
#else
    union { double f; uint64_t u; } v;
    v.f = x;
    return v.u;
#endif
}
SL_OPS_FN double sl_f64_from_bits(uint64_t x) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)x);
#else
    union { double f; uint64_t u; } v;
    v.u = x;
    return v.f;
#endif
}

/* ---- f16 <-> f32 (software, bit exact, round to nearest even) ------------------------------ */

SL_OPS_FN float sl_half_to_f32(sl_half h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    uint32_t bits;
    if (e == 0x1fu) {
        bits = sign | 0x7f800000u | (m << 13); /* inf, NaN keeps its payload */
    } else if (e != 0) {
        bits = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        uint32_t ex = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            ex--;
        }
        bits = sign | (ex << 23) | ((m & 0x3ffu) << 13);
    }
    return sl_f32_from_bits(bits);
}

SL_OPS_FN sl_half sl_f32_to_half(float f) {
    uint32_t x = sl_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf stays inf; NaN stays a (quiet) NaN with its top payload */
        return (sl_half)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) return (sl_half)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                  /* below 2^-14: subnormal or 0 */
        if (ax < 0x33000000u) return (sl_half)sign;          /* <= 2^-25 (a tie) rounds to 0 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* units of 2^-24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (sl_half)(sign | r);
    }
    uint32_t r = (ax >> 13) - (112u << 10); /* rebias the exponent from 127 to 15 */
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++; /* a carry may reach inf: right */
    return (sl_half)(sign | r);
}

/* ---- sort keys: typed forms of kernels/sl_sortkey.h, the one definition of a key's image ---- */

SL_OPS_FN uint16_t sl_sortkey_f16(sl_half h) {
    return (uint16_t)sl_sortkey_image(SL_SORTKEY_FLOAT, 16, h);
}
SL_OPS_FN uint32_t sl_sortkey_f32(float x) {
    return (uint32_t)sl_sortkey_image(SL_SORTKEY_FLOAT, 32, sl_f32_bits(x));
}
SL_OPS_FN uint64_t sl_sortkey_f64(double x) {
    return sl_sortkey_image(SL_SORTKEY_FLOAT, 64, sl_f64_bits(x));
}
SL_OPS_FN sl_half sl_sortkey_f16_inverse(uint16_t k) {
    return (sl_half)sl_sortkey_key(SL_SORTKEY_FLOAT, 16, k);
}
SL_OPS_FN float sl_sortkey_f32_inverse(uint32_t k) {
    return sl_f32_from_bits((uint32_t)sl_sortkey_key(SL_SORTKEY_FLOAT, 32, k));
}
SL_OPS_FN double sl_sortkey_f64_inverse(uint64_t k) {
    return sl_f64_from_bits(sl_sortkey_key(SL_SORTKEY_FLOAT, 64, k));
}
SL_OPS_FN uint8_t sl_sortkey_i8(int8_t x) {
    return (uint8_t)sl_sortkey_image(SL_SORTKEY_SIGNED, 8, (uint8_t)x);
}
SL_OPS_FN uint16_t sl_sortkey_i16(int16_t x) {
    return (uint16_t)sl_sortkey_image(SL_SORTKEY_SIGNED, 16, (uint16_t)x);
}
SL_OPS_FN uint32_t sl_sortkey_i32(int32_t x) {
    return (uint32_t)sl_sortkey_image(SL_SORTKEY_SIGNED, 32, (uint32_t)x);
}
SL_OPS_FN uint64_t sl_sortkey_i64(int64_t x) {
    return sl_sortkey_image(SL_SORTKEY_SIGNED, 64, (uint64_t)x);
}

/* ---- float arithmetic: explicit rounding on CUDA so nothing is contracted into an FMA ----- */

#if defined(__CUDA_ARCH__)
#define SL_FADD_(a, b) __fadd_rn(a, b)
#define SL_FSUB_(a, b) __fsub_rn(a, b)
#define SL_FMUL_(a, b) __fmul_rn(a, b)
#define SL_FDIV_(a, b) __fdiv_rn(a, b)
#define SL_FSQRT_(a) __fsqrt_rn(a)
#define SL_DADD_(a, b) __dadd_rn(a, b)
#define SL_DSUB_(a, b) __dsub_rn(a, b)
#define SL_DMUL_(a, b) __dmul_rn(a, b)
#define SL_DDIV_(a, b) __ddiv_rn(a, b)
#define SL_DSQRT_(a) __dsqrt_rn(a)
#else
#define SL_FADD_(a, b) ((a) + (b))
#define SL_FSUB_(a, b) ((a) - (b))
#define SL_FMUL_(a, b) ((a) * (b))
#define SL_FDIV_(a, b) ((a) / (b))
#define SL_FSQRT_(a) sqrtf(a)
#define SL_DADD_(a, b) ((a) + (b))
#define SL_DSUB_(a, b) ((a) - (b))
#define SL_DMUL_(a, b) ((a) * (b))
#define SL_DDIV_(a, b) ((a) / (b))
#define SL_DSQRT_(a) sqrt(a)
#endif

#define SL_FLOAT_OPS_(s, T, ADD, SUB, MUL, DIV, SQRT, FMOD, EXP, LOG, FLOOR, CEIL, BITS, SIGNBIT, \
                      EXPMASK, MANTMASK)                                                          \
    SL_OPS_FN T sl_add_##s(T a, T b) { return ADD(a, b); }                                        \
    SL_OPS_FN T sl_sub_##s(T a, T b) { return SUB(a, b); }                                        \
    SL_OPS_FN T sl_mul_##s(T a, T b) { return MUL(a, b); }                                        \
    SL_OPS_FN T sl_div_##s(T a, T b) { return DIV(a, b); }                                        \
    SL_OPS_FN T sl_mod_##s(T a, T b) { return FMOD(a, b); }                                       \
    SL_OPS_FN T sl_neg_##s(T a) { return -a; }                                                    \
    SL_OPS_FN sl_bool sl_lt_##s(T a, T b) { return (sl_bool)(a < b); }                            \
    SL_OPS_FN sl_bool sl_le_##s(T a, T b) { return (sl_bool)(a <= b); }                           \
    SL_OPS_FN sl_bool sl_gt_##s(T a, T b) { return (sl_bool)(a > b); }                            \
    SL_OPS_FN sl_bool sl_ge_##s(T a, T b) { return (sl_bool)(a >= b); }                           \
    SL_OPS_FN sl_bool sl_eq_##s(T a, T b) { return (sl_bool)(a == b); }                           \
    SL_OPS_FN sl_bool sl_ne_##s(T a, T b) { return (sl_bool)(a != b); }                           \
    /* min/max: a NaN operand loses to a number; equal operands (-0, +0) give the first */       \
    SL_OPS_FN T sl_min_##s(T a, T b) { return (b < a || a != a) ? b : a; }                        \
    SL_OPS_FN T sl_max_##s(T a, T b) { return (b > a || a != a) ? b : a; }                        \
    SL_OPS_FN T sl_abs_##s(T a) { return sl_##s##_from_bits(BITS(a) & ~SIGNBIT); }                \
    SL_OPS_FN T sl_sqrt_##s(T a) { return SQRT(a); }                                              \
    SL_OPS_FN T sl_exp_##s(T a) { return EXP(a); }                                                \
    SL_OPS_FN T sl_log_##s(T a) { return LOG(a); }                                                \
    SL_OPS_FN T sl_floor_##s(T a) { return FLOOR(a); }                                            \
    SL_OPS_FN T sl_ceil_##s(T a) { return CEIL(a); }                                              \
    SL_OPS_FN sl_bool sl_isnan_##s(T a) {                                                         \
        return (sl_bool)((BITS(a) & EXPMASK) == EXPMASK && (BITS(a) & MANTMASK) != 0);            \
    }                                                                                             \
    SL_OPS_FN sl_bool sl_isinf_##s(T a) { return (sl_bool)((BITS(a) & ~SIGNBIT) == EXPMASK); }

SL_FLOAT_OPS_(f32, float, SL_FADD_, SL_FSUB_, SL_FMUL_, SL_FDIV_, SL_FSQRT_, fmodf, expf, logf,
              floorf, ceilf, sl_f32_bits, 0x80000000u, 0x7f800000u, 0x007fffffu)
SL_FLOAT_OPS_(f64, double, SL_DADD_, SL_DSUB_, SL_DMUL_, SL_DDIV_, SL_DSQRT_, fmod, exp, log,
              floor, ceil, sl_f64_bits, 0x8000000000000000ull, 0x7ff0000000000000ull,
              0x000fffffffffffffull)

/* ---- integer arithmetic: wrapping, with the defined division and shift results ------------ */

/* s: suffix, T: type, U: its unsigned twin, W: width in bits, MIN: T's minimum (signed) */
#define SL_INT_COMMON_OPS_(s, T, U, W)                                                            \
    SL_OPS_FN T sl_add_##s(T a, T b) { return (T)((U)a + (U)b); }                                 \
    SL_OPS_FN T sl_sub_##s(T a, T b) { return (T)((U)a - (U)b); }                                 \
    SL_OPS_FN T sl_mul_##s(T a, T b) { return (T)((U)a * (U)b); }                                 \
    SL_OPS_FN T sl_neg_##s(T a) { return (T)((U)0 - (U)a); }                                      \
    SL_OPS_FN sl_bool sl_lt_##s(T a, T b) { return (sl_bool)(a < b); }                            \
    SL_OPS_FN sl_bool sl_le_##s(T a, T b) { return (sl_bool)(a <= b); }                           \
    SL_OPS_FN sl_bool sl_gt_##s(T a, T b) { return (sl_bool)(a > b); }                            \
    SL_OPS_FN sl_bool sl_ge_##s(T a, T b) { return (sl_bool)(a >= b); }                           \
    SL_OPS_FN sl_bool sl_eq_##s(T a, T b) { return (sl_bool)(a == b); }                           \
    SL_OPS_FN sl_bool sl_ne_##s(T a, T b) { return (sl_bool)(a != b); }                           \
    SL_OPS_FN T sl_min_##s(T a, T b) { return b < a ? b : a; }                                    \
    SL_OPS_FN T sl_max_##s(T a, T b) { return b > a ? b : a; }                                    \
    SL_OPS_FN T sl_bitand_##s(T a, T b) { return (T)(a & b); }                                    \
    SL_OPS_FN T sl_bitor_##s(T a, T b) { return (T)(a | b); }                                     \
    SL_OPS_FN T sl_bitxor_##s(T a, T b) { return (T)(a ^ b); }                                    \
    SL_OPS_FN T sl_bitnot_##s(T a) { return (T)~a; }                                              \
    SL_OPS_FN T sl_shl_##s(T a, int64_t n) {                                                      \
        return (n < 0 || n >= (W)) ? (T)0 : (T)((U)a << n);                                       \
    }

#define SL_SIGNED_OPS_(s, T, U, W, MIN)                                                           \
    SL_INT_COMMON_OPS_(s, T, U, W)                                                                \
    SL_OPS_FN T sl_div_##s(T a, T b) {                                                            \
        return b == 0 ? (T)0 : b == -1 ? sl_neg_##s(a) : (T)(a / b);                              \
    }                                                                                             \
    SL_OPS_FN T sl_mod_##s(T a, T b) { return b == 0 ? a : b == -1 ? (T)0 : (T)(a % b); }         \
    SL_OPS_FN T sl_shr_##s(T a, int64_t n) {                                                      \
        return (n < 0 || n >= (W)) ? (T)(a < 0 ? -1 : 0) : (T)(a >> n);                           \
    }                                                                                             \
    SL_OPS_FN T sl_abs_##s(T a) { return a < 0 ? sl_neg_##s(a) : a; }

#define SL_UNSIGNED_OPS_(s, T, W)                                                                 \
    SL_INT_COMMON_OPS_(s, T, T, W)                                                                \
    SL_OPS_FN T sl_div_##s(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }                       \
    SL_OPS_FN T sl_mod_##s(T a, T b) { return b == 0 ? a : (T)(a % b); }                          \
    SL_OPS_FN T sl_shr_##s(T a, int64_t n) { return (n < 0 || n >= (W)) ? (T)0 : (T)(a >> n); }   \
    SL_OPS_FN T sl_abs_##s(T a) { return a; }

SL_SIGNED_OPS_(i32, int32_t, uint32_t, 32, SL_I32_MIN)
SL_SIGNED_OPS_(i64, int64_t, uint64_t, 64, SL_I64_MIN)
SL_UNSIGNED_OPS_(u32, uint32_t, 32)
SL_UNSIGNED_OPS_(u64, uint64_t, 64)

/* ---- bool: logical ops over normalised bytes ---------------------------------------------- */

SL_OPS_FN sl_bool sl_not_bool(sl_bool a) { return (sl_bool)(a == 0); }
SL_OPS_FN sl_bool sl_land_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) & (b != 0)); }
SL_OPS_FN sl_bool sl_lor_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) | (b != 0)); }
SL_OPS_FN sl_bool sl_bitand_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) & (b != 0)); }
SL_OPS_FN sl_bool sl_bitor_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) | (b != 0)); }
SL_OPS_FN sl_bool sl_bitxor_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) ^ (b != 0)); }
SL_OPS_FN sl_bool sl_eq_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) == (b != 0)); }
SL_OPS_FN sl_bool sl_ne_bool(sl_bool a, sl_bool b) { return (sl_bool)((a != 0) != (b != 0)); }

/* ---- casts: sl_cvt_<from>_<to> for every pair of the 12 column types ----------------------
 * Through three canonical steps: to a bool, to an integer (wrap; from floats saturating), to
 * a float (round to nearest even). f16 values travel as f32. */

SL_OPS_FN float sl_i64_to_f32_(int64_t x) {
#if defined(__CUDA_ARCH__)
    return __ll2float_rn((long long)x);
#else
    return (float)x;
#endif
}
SL_OPS_FN float sl_u64_to_f32_(uint64_t x) {
#if defined(__CUDA_ARCH__)
    return __ull2float_rn((unsigned long long)x);
#else
    return (float)x;
#endif
}
SL_OPS_FN double sl_i64_to_f64_(int64_t x) {
#if defined(__CUDA_ARCH__)
    return __ll2double_rn((long long)x);
#else
    return (double)x;
#endif
}
SL_OPS_FN double sl_u64_to_f64_(uint64_t x) {
#if defined(__CUDA_ARCH__)
    return __ull2double_rn((unsigned long long)x);
#else
    return (double)x;
#endif
}
SL_OPS_FN float sl_f64_to_f32_(double x) {
#if defined(__CUDA_ARCH__)
    return __double2float_rn(x);
#else
    return (float)x;
#endif
}
/* Saturating float -> integer: truncate toward zero, clamp, NaN -> 0. LO/HI are the exact
 * powers of two bounding the type's range (both representable in double). */
#define SL_SAT_(s, T, LO, HI, TMIN, TMAX)                                                         \
    SL_OPS_FN T sl_f64_sat_##s##_(double x) {                                                     \
        if (x != x) return (T)0;                                                                  \
        if (x <= (LO)) return (T)(TMIN);                                                          \
        if (x >= (HI)) return (T)(TMAX);                                                          \
        return (T)x;                                                                              \
    }
SL_SAT_(i8, int8_t, -128.0, 128.0, SL_I8_MIN, 127)
SL_SAT_(i16, int16_t, -32768.0, 32768.0, SL_I16_MIN, 32767)
SL_SAT_(i32, int32_t, -2147483648.0, 2147483648.0, SL_I32_MIN, 2147483647)
SL_SAT_(i64, int64_t, -9223372036854775808.0, 9223372036854775808.0, SL_I64_MIN,
        9223372036854775807LL)
SL_SAT_(u8, uint8_t, 0.0, 256.0, 0, 255u)
SL_SAT_(u16, uint16_t, 0.0, 65536.0, 0, 65535u)
SL_SAT_(u32, uint32_t, 0.0, 4294967296.0, 0, 4294967295u)
SL_SAT_(u64, uint64_t, 0.0, 18446744073709551616.0, 0, 18446744073709551615ull)

/* The integer and bool types with their C types and "is signed". */
#define SL_OPS_INT_TYPES_(X, a, b)                                                                \
    X(a, b, i8, int8_t) X(a, b, i16, int16_t) X(a, b, i32, int32_t) X(a, b, i64, int64_t)          \
    X(a, b, u8, uint8_t) X(a, b, u16, uint16_t) X(a, b, u32, uint32_t) X(a, b, u64, uint64_t)

/* integer -> integer (wrap), integer -> bool, bool -> integer */
#define SL_CVT_II_(fs, FT, ts, TT)                                                                \
    SL_OPS_FN TT sl_cvt_##fs##_##ts(FT x) { return (TT)x; }
#define SL_CVT_FROM_INT_(fs, FT)                                                                  \
    SL_OPS_INT_TYPES_(SL_CVT_II_, fs, FT)                                                         \
    SL_OPS_FN sl_bool sl_cvt_##fs##_bool(FT x) { return (sl_bool)(x != 0); }                      \
    SL_OPS_FN FT sl_cvt_bool_##fs(sl_bool x) { return (FT)(x != 0); }                             \
    SL_OPS_FN FT sl_cvt_f64_##fs(double x) { return sl_f64_sat_##fs##_(x); }                      \
    SL_OPS_FN FT sl_cvt_f32_##fs(float x) { return sl_f64_sat_##fs##_((double)x); }               \
    SL_OPS_FN FT sl_cvt_f16_##fs(sl_half x) { return sl_f64_sat_##fs##_((double)sl_half_to_f32(x)); }
#define SL_OPS_INT_TYPES1_(X)                                                                     \
    X(i8, int8_t) X(i16, int16_t) X(i32, int32_t) X(i64, int64_t)                                 \
    X(u8, uint8_t) X(u16, uint16_t) X(u32, uint32_t) X(u64, uint64_t)
SL_OPS_INT_TYPES1_(SL_CVT_FROM_INT_)

/* integer -> float: signed through i64, unsigned through u64 (both exact widenings) */
#define SL_CVT_INT_FLOAT_(fs, FT, WIDE)                                                           \
    SL_OPS_FN float sl_cvt_##fs##_f32(FT x) { return sl_##WIDE##_to_f32_((WIDE##_t_)x); }        \
    SL_OPS_FN double sl_cvt_##fs##_f64(FT x) { return sl_##WIDE##_to_f64_((WIDE##_t_)x); }       \
    SL_OPS_FN sl_half sl_cvt_##fs##_f16(FT x) { return sl_f32_to_half(sl_cvt_##fs##_f32(x)); }
typedef int64_t i64_t_;
typedef uint64_t u64_t_;
SL_CVT_INT_FLOAT_(i8, int8_t, i64)
SL_CVT_INT_FLOAT_(i16, int16_t, i64)
SL_CVT_INT_FLOAT_(i32, int32_t, i64)
SL_CVT_INT_FLOAT_(i64, int64_t, i64)
SL_CVT_INT_FLOAT_(u8, uint8_t, u64)
SL_CVT_INT_FLOAT_(u16, uint16_t, u64)
SL_CVT_INT_FLOAT_(u32, uint32_t, u64)
SL_CVT_INT_FLOAT_(u64, uint64_t, u64)

/* bool <-> bool and bool <-> float */
SL_OPS_FN sl_bool sl_cvt_bool_bool(sl_bool x) { return (sl_bool)(x != 0); }
SL_OPS_FN float sl_cvt_bool_f32(sl_bool x) { return x != 0 ? 1.0f : 0.0f; }
SL_OPS_FN double sl_cvt_bool_f64(sl_bool x) { return x != 0 ? 1.0 : 0.0; }
SL_OPS_FN sl_half sl_cvt_bool_f16(sl_bool x) { return (sl_half)(x != 0 ? 0x3c00u : 0u); }
/* a float is true when it is not zero (NaN is true, as in C) */
SL_OPS_FN sl_bool sl_cvt_f32_bool(float x) { return (sl_bool)(x != 0.0f); }
SL_OPS_FN sl_bool sl_cvt_f64_bool(double x) { return (sl_bool)(x != 0.0); }
SL_OPS_FN sl_bool sl_cvt_f16_bool(sl_half x) { return (sl_bool)((x & 0x7fffu) != 0); }

/* float <-> float */
SL_OPS_FN float sl_cvt_f32_f32(float x) { return x; }
SL_OPS_FN double sl_cvt_f32_f64(float x) { return (double)x; }
SL_OPS_FN sl_half sl_cvt_f32_f16(float x) { return sl_f32_to_half(x); }
SL_OPS_FN float sl_cvt_f64_f32(double x) { return sl_f64_to_f32_(x); }
SL_OPS_FN double sl_cvt_f64_f64(double x) { return x; }
SL_OPS_FN sl_half sl_cvt_f64_f16(double x) { return sl_f32_to_half(sl_f64_to_f32_(x)); }
SL_OPS_FN float sl_cvt_f16_f32(sl_half x) { return sl_half_to_f32(x); }
SL_OPS_FN double sl_cvt_f16_f64(sl_half x) { return (double)sl_half_to_f32(x); }
SL_OPS_FN sl_half sl_cvt_f16_f16(sl_half x) { return x; }

#endif
