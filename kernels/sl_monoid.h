/* sl_monoid.h — the one definition of the builtin scan operators' combines and of segment-key
 * equality, as small inline functions that compile as C99 (core/ir/monoid.c, the CPU's
 * generic combine) and as CUDA C++ under nvcc or NVRTC (the generated kernels, which include
 * this file as text). Both sides call these, so a combine gives the same bits everywhere.
 *
 * The rules (pipelines/SCHEMA.md, "scan"):
 *   - integer accumulators wrap at their width (two's complement, computed unsigned; products
 *     are widened to 64 bits first, so u16*u16 never overflows a promoted int);
 *   - float accumulators round once per operation (sl_ops.h's arithmetic: explicit _rn
 *     intrinsics on the device, never contracted into an FMA);
 *   - float min/max propagate NaN (the left one when both are NaN) and keep the left operand
 *     on ties, so -0.0 and +0.0 keep their order of arrival (unlike the expression
 *     functions min()/max() in sl_ops.h, where a NaN loses to a number);
 *   - bool accumulators (min, max, and, or, xor of bools) read any nonzero byte as true and
 *     give 0 or 1;
 *   - linrec's state (a, b) combines as (a1, b1) then (a2, b2) = (a1*a2, a2*b1 + b2).
 * Nothing here assumes commutativity: l is always the earlier operand.
 *
 * Names: sl_mon_<op>_<type> for op in sum prod min max and or xor (count is sum in i64 or
 * u64), sl_mon_linrec_a_<type> and sl_mon_linrec_b_<type> for linrec's two fields, and
 * sl_key_same_<type> for segment keys. <type> is the type's name as in SL_TYPE_LIST
 * (core/common/types.h). f16 is never an accumulator. */
#ifndef SL_MONOID_OPS_H
#define SL_MONOID_OPS_H

#include "sl_ops.h"

#define SL_MON_INT_(s, T, U)                                                                      \
    SL_OPS_FN T sl_mon_sum_##s(T l, T r) { return (T)(U)((U)l + (U)r); }                          \
    SL_OPS_FN T sl_mon_prod_##s(T l, T r) {                                                       \
        return (T)(U)((uint64_t)(U)l * (uint64_t)(U)r);                                           \
    }                                                                                             \
    SL_OPS_FN T sl_mon_min_##s(T l, T r) { return r < l ? r : l; }                                \
    SL_OPS_FN T sl_mon_max_##s(T l, T r) { return l < r ? r : l; }                                \
    SL_OPS_FN T sl_mon_and_##s(T l, T r) { return (T)(l & r); }                                   \
    SL_OPS_FN T sl_mon_or_##s(T l, T r) { return (T)(l | r); }                                    \
    SL_OPS_FN T sl_mon_xor_##s(T l, T r) { return (T)(l ^ r); }                                   \
    SL_OPS_FN T sl_mon_linrec_a_##s(T l_a, T r_a) { return sl_mon_prod_##s(l_a, r_a); }           \
    SL_OPS_FN T sl_mon_linrec_b_##s(T l_b, T r_a, T r_b) {                                        \
        return sl_mon_sum_##s(sl_mon_prod_##s(r_a, l_b), r_b);                                    \
    }                                                                                             \
    SL_OPS_FN sl_bool sl_key_same_##s(T a, T b) { return (sl_bool)(a == b); }

SL_MON_INT_(i8, int8_t, uint8_t)
SL_MON_INT_(i16, int16_t, uint16_t)
SL_MON_INT_(i32, int32_t, uint32_t)
SL_MON_INT_(i64, int64_t, uint64_t)
SL_MON_INT_(u8, uint8_t, uint8_t)
SL_MON_INT_(u16, uint16_t, uint16_t)
SL_MON_INT_(u32, uint32_t, uint32_t)
SL_MON_INT_(u64, uint64_t, uint64_t)

/* ADD/MUL: sl_ops.h's rounding arithmetic; BITS: the value's bits (keys compare by bits, so a
 * run of NaNs with one payload is one segment and -0.0 and +0.0 are different keys). */
#define SL_MON_FLOAT_(s, T, ADD, MUL, BITS)                                                       \
    SL_OPS_FN T sl_mon_sum_##s(T l, T r) { return ADD(l, r); }                                    \
    SL_OPS_FN T sl_mon_prod_##s(T l, T r) { return MUL(l, r); }                                   \
    SL_OPS_FN T sl_mon_min_##s(T l, T r) { return l != l ? l : r != r ? r : r < l ? r : l; }      \
    SL_OPS_FN T sl_mon_max_##s(T l, T r) { return l != l ? l : r != r ? r : l < r ? r : l; }      \
    SL_OPS_FN T sl_mon_linrec_a_##s(T l_a, T r_a) { return MUL(l_a, r_a); }                       \
    SL_OPS_FN T sl_mon_linrec_b_##s(T l_b, T r_a, T r_b) { return ADD(MUL(r_a, l_b), r_b); }      \
    SL_OPS_FN sl_bool sl_key_same_##s(T a, T b) { return (sl_bool)(BITS(a) == BITS(b)); }

SL_MON_FLOAT_(f32, float, SL_FADD_, SL_FMUL_, sl_f32_bits)
SL_MON_FLOAT_(f64, double, SL_DADD_, SL_DMUL_, sl_f64_bits)

/* bool: false < true, so min is and, max is or */
SL_OPS_FN sl_bool sl_mon_min_bool(sl_bool l, sl_bool r) { return sl_bitand_bool(l, r); }
SL_OPS_FN sl_bool sl_mon_max_bool(sl_bool l, sl_bool r) { return sl_bitor_bool(l, r); }
SL_OPS_FN sl_bool sl_mon_and_bool(sl_bool l, sl_bool r) { return sl_bitand_bool(l, r); }
SL_OPS_FN sl_bool sl_mon_or_bool(sl_bool l, sl_bool r) { return sl_bitor_bool(l, r); }
SL_OPS_FN sl_bool sl_mon_xor_bool(sl_bool l, sl_bool r) { return sl_bitxor_bool(l, r); }
SL_OPS_FN sl_bool sl_key_same_bool(sl_bool a, sl_bool b) { return sl_eq_bool(a, b); }
/* an f16 key is its bits */
SL_OPS_FN sl_bool sl_key_same_f16(sl_half a, sl_half b) { return (sl_bool)(a == b); }

#endif
