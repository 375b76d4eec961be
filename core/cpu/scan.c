/* scan.c — per-tile scan loops (see scan.h). One loop per (operator, acc type) so the state
 * lives in a register; the loop is chosen once per tile, outside the rows. The combines are
 * kernels/sl_monoid.h's (see "element operations"). */
#include "cpu/scan.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sl_monoid.h"

/* ---- element operations ------------------------------------------------------------------
 * Every combine below is kernels/sl_monoid.h's, the one definition that core/ir/monoid.c's
 * generic path and the generated GPU kernels call too, so a fast loop, the generic path and a
 * GPU kernel give the same bits. They are inline functions: each loop keeps its state in a
 * register, and the carry loops vectorise. The loops do not restate the rules (NaN, -0/+0,
 * wrapping); sl_monoid.h does. */

/* f16 states exist only for callers that bypass the loader (sl_monoid_acc_allowed refuses an
 * f16 accumulator): f32's combine, rounded back to f16 after every step as core/ir/monoid.c
 * does (exact: float has more than 2·11+2 bits, so the double rounding is innocuous). Min and
 * max of f16 values are f16 values, so they need no rounding. */
static inline float round_f16(float v) { return sl_f16_to_f32(sl_f32_to_f16(v)); }
static inline float mon_sum_f16(float l, float r) { return round_f16(sl_mon_sum_f32(l, r)); }
static inline float mon_prod_f16(float l, float r) { return round_f16(sl_mon_prod_f32(l, r)); }

#define LOAD_ID(v) (v)
#define LOAD_F16(v) sl_f16_to_f32(v)
#define STORE_F16(v) sl_f32_to_f16(v)

/* The row loop: ST storage type, CT compute type, COMBINE(state, value). y NULL: the state
 * only (the condition is invariant, so the compiler unswitches it out of the loop). */
#define SCAN_LOOP(ST, CT, LOAD, STORE, COMBINE, STATE, IDENT)                                           \
    do {                                                                                 \
        const ST *x_ = x;                                                                \
        ST *y_ = y;                                                                      \
        CT s_ = (CT) * (STATE), id_ = (CT)(IDENT);                                                  \
        if (!head) {                                                                     \
            if (exclusive) {                                                             \
                for (int64_t i = 0; i < n; i++) {                                        \
                    CT v_ = LOAD(x_[i]);                                                 \
                    if (y_) y_[i] = (ST)STORE(s_);                                       \
                    s_ = COMBINE(s_, v_);                                                \
                }                                                                        \
            } else {                                                                     \
                for (int64_t i = 0; i < n; i++) {                                        \
                    s_ = COMBINE(s_, LOAD(x_[i]));                                       \
                    if (y_) y_[i] = (ST)STORE(s_);                                       \
                }                                                                        \
            }                                                                            \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) {                                            \
                CT v_ = LOAD(x_[i]);                                                     \
                if (head[i]) s_ = id_;                                                   \
                if (y_ && exclusive) y_[i] = (ST)STORE(s_);                              \
                s_ = COMBINE(s_, v_);                                                    \
                if (y_ && !exclusive) y_[i] = (ST)STORE(s_);                             \
            }                                                                            \
        }                                                                                \
        *(STATE) = s_;                                                                   \
    } while (0)

/* The carry loop: y[i] = carry ⊕ y[i]. */
#define CARRY_LOOP(ST, CT, LOAD, STORE, COMBINE, CARRY)                                          \
    do {                                                                                 \
        ST *y_ = y;                                                                      \
        CT c_ = (CARRY);                                                                 \
        for (int64_t i = 0; i < n; i++) y_[i] = (ST)STORE(COMBINE(c_, LOAD(y_[i])));      \
    } while (0)

/* Loops for one acc type, NAME its sl_monoid.h suffix: integer families get the bitwise
 * operators, float families min/max and no bitwise ones, bool min/max and the bitwise ones.
 * Each returns false when the (op, type) pair has no fast loop. */
#define INT_FAMILY(NAME, ST)                                                             \
    static bool NAME##_scan(sl_scan_op op, int64_t n, const void *x, const uint8_t *head,   \
                            ST *state, ST identity, void *y, bool exclusive) {           \
        switch (op) {                                                                    \
        case SL_SCAN_SUM:                                                                \
        case SL_SCAN_COUNT:                                                              \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_sum_##NAME, state, identity); return true; \
        case SL_SCAN_PROD:                                                               \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_prod_##NAME, state, identity); return true; \
        case SL_SCAN_MIN:                                                                \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_min_##NAME, state, identity); return true; \
        case SL_SCAN_MAX:                                                                \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_max_##NAME, state, identity); return true; \
        case SL_SCAN_AND:                                                                \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_and_##NAME, state, identity); return true; \
        case SL_SCAN_OR:                                                                 \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_or_##NAME, state, identity); return true; \
        case SL_SCAN_XOR:                                                                \
            SCAN_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_xor_##NAME, state, identity); return true; \
        default: return false;                                                           \
        }                                                                                \
    }                                                                                    \
    static bool NAME##_carry(sl_scan_op op, int64_t n, ST carry, void *y) {               \
        switch (op) {                                                                    \
        case SL_SCAN_SUM:                                                                \
        case SL_SCAN_COUNT: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_sum_##NAME, carry); return true; \
        case SL_SCAN_PROD: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_prod_##NAME, carry); return true; \
        case SL_SCAN_MIN: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_min_##NAME, carry); return true; \
        case SL_SCAN_MAX: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_max_##NAME, carry); return true; \
        case SL_SCAN_AND: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_and_##NAME, carry); return true; \
        case SL_SCAN_OR: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_or_##NAME, carry); return true; \
        case SL_SCAN_XOR: CARRY_LOOP(ST, ST, LOAD_ID, LOAD_ID, sl_mon_xor_##NAME, carry); return true; \
        default: return false;                                                           \
        }                                                                                \
    }

INT_FAMILY(u8, uint8_t)
INT_FAMILY(u16, uint16_t)
INT_FAMILY(u32, uint32_t)
INT_FAMILY(u64, uint64_t)
INT_FAMILY(i8, int8_t)
INT_FAMILY(i16, int16_t)
INT_FAMILY(i32, int32_t)
INT_FAMILY(i64, int64_t)

/* ST storage type, CT the type the state is computed in (f16 is computed in float). */
#define FLOAT_FAMILY(NAME, ST, CT, LOAD, STORE, SUM, PROD, MIN, MAX)                      \
    static bool NAME##_scan(sl_scan_op op, int64_t n, const void *x, const uint8_t *head,   \
                            CT *state, CT identity, void *y, bool exclusive) {           \
        switch (op) {                                                                    \
        case SL_SCAN_SUM: SCAN_LOOP(ST, CT, LOAD, STORE, SUM, state, identity); return true; \
        case SL_SCAN_PROD: SCAN_LOOP(ST, CT, LOAD, STORE, PROD, state, identity); return true; \
        case SL_SCAN_MIN: SCAN_LOOP(ST, CT, LOAD, STORE, MIN, state, identity); return true; \
        case SL_SCAN_MAX: SCAN_LOOP(ST, CT, LOAD, STORE, MAX, state, identity); return true; \
        default: return false;                                                           \
        }                                                                                \
    }                                                                                    \
    static bool NAME##_carry(sl_scan_op op, int64_t n, CT carry, void *y) {               \
        switch (op) {                                                                    \
        case SL_SCAN_SUM: CARRY_LOOP(ST, CT, LOAD, STORE, SUM, carry); return true;       \
        case SL_SCAN_PROD: CARRY_LOOP(ST, CT, LOAD, STORE, PROD, carry); return true;     \
        case SL_SCAN_MIN: CARRY_LOOP(ST, CT, LOAD, STORE, MIN, carry); return true;       \
        case SL_SCAN_MAX: CARRY_LOOP(ST, CT, LOAD, STORE, MAX, carry); return true;       \
        default: return false;                                                           \
        }                                                                                \
    }

FLOAT_FAMILY(f32, float, float, LOAD_ID, LOAD_ID, sl_mon_sum_f32, sl_mon_prod_f32, sl_mon_min_f32,
             sl_mon_max_f32)
FLOAT_FAMILY(f64, double, double, LOAD_ID, LOAD_ID, sl_mon_sum_f64, sl_mon_prod_f64, sl_mon_min_f64,
             sl_mon_max_f64)
FLOAT_FAMILY(f16, uint16_t, float, LOAD_F16, STORE_F16, mon_sum_f16, mon_prod_f16, sl_mon_min_f32,
             sl_mon_max_f32)

/* A bool state is a byte of 0 or 1 (sl_monoid.h reads any nonzero byte as true). */
static bool bool_scan(sl_scan_op op, int64_t n, const void *x, const uint8_t *head, uint8_t *state,
                      uint8_t identity, void *y, bool exclusive) {
    switch (op) {
    case SL_SCAN_MIN: SCAN_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_min_bool, state, identity); return true;
    case SL_SCAN_MAX: SCAN_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_max_bool, state, identity); return true;
    case SL_SCAN_AND: SCAN_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_and_bool, state, identity); return true;
    case SL_SCAN_OR: SCAN_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_or_bool, state, identity); return true;
    case SL_SCAN_XOR: SCAN_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_xor_bool, state, identity); return true;
    default: return false;
    }
}

static bool bool_carry(sl_scan_op op, int64_t n, uint8_t carry, void *y) {
    switch (op) {
    case SL_SCAN_MIN: CARRY_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_min_bool, carry); return true;
    case SL_SCAN_MAX: CARRY_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_max_bool, carry); return true;
    case SL_SCAN_AND: CARRY_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_and_bool, carry); return true;
    case SL_SCAN_OR: CARRY_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_or_bool, carry); return true;
    case SL_SCAN_XOR: CARRY_LOOP(uint8_t, uint8_t, LOAD_ID, LOAD_ID, sl_mon_xor_bool, carry); return true;
    default: return false;
    }
}

/* ---- sums without segments: eight interleaved chains ----------------------------------
 * A running sum is one long chain of dependent adds (4 cycles each for floats), slower than
 * memory. The tile is split into eight contiguous lanes scanned side by side (eight
 * independent chains), then each lane gets the total of the lanes before it added — one
 * vectorisable pass in L1. Floats round differently from the row-by-row loop (as any
 * parallel scan does) but always the same way for the same tile. */
#define SUM_LANES 8
/* Lanes are SUM_LANE_SKEW bytes shorter than an even split (the last lane takes the rest):
 * at an even split of a 16384-row tile the lanes start a multiple of 4 KiB apart, so each
 * lane's load aliased the store the lane before it had just made (the same address bits
 * 0-11) and the loop ran several times slower. */
#define SUM_LANE_SKEW 64
#define SUM_LANES_LOOP(ST, CT, SUM, STATE)                                                \
    do {                                                                                 \
        const ST *x_ = x;                                                                \
        ST *y_ = y;                                                                      \
        int64_t m_ = n / SUM_LANES - SUM_LANE_SKEW / (int64_t)sizeof(ST);                \
        if (m_ < 1) m_ = n / SUM_LANES;                                                  \
        CT s_[SUM_LANES] = {0};                                                          \
        if (exclusive) {                                                                 \
            for (int64_t j = 0; j < m_; j++)                                             \
                for (int q = 0; q < SUM_LANES; q++) {                                    \
                    CT v_ = (CT)x_[q * m_ + j];                                          \
                    if (y_) y_[q * m_ + j] = (ST)s_[q];                                  \
                    s_[q] = SUM(s_[q], v_);                                              \
                }                                                                        \
            for (int64_t i = SUM_LANES * m_; i < n; i++) {                               \
                CT v_ = (CT)x_[i];                                                       \
                if (y_) y_[i] = (ST)s_[SUM_LANES - 1];                                   \
                s_[SUM_LANES - 1] = SUM(s_[SUM_LANES - 1], v_);                          \
            }                                                                            \
        } else {                                                                         \
            for (int64_t j = 0; j < m_; j++)                                             \
                for (int q = 0; q < SUM_LANES; q++) {                                    \
                    s_[q] = SUM(s_[q], (CT)x_[q * m_ + j]);                              \
                    if (y_) y_[q * m_ + j] = (ST)s_[q];                                  \
                }                                                                        \
            for (int64_t i = SUM_LANES * m_; i < n; i++) {                               \
                s_[SUM_LANES - 1] = SUM(s_[SUM_LANES - 1], (CT)x_[i]);                   \
                if (y_) y_[i] = (ST)s_[SUM_LANES - 1];                                   \
            }                                                                            \
        }                                                                                \
        CT off_ = (CT)(STATE);                                                           \
        for (int q = 0; q < SUM_LANES; q++) {                                            \
            int64_t b_ = q * m_, e_ = q == SUM_LANES - 1 ? n : b_ + m_;                  \
            for (int64_t i = b_; i < e_ && y_; i++) y_[i] = (ST)SUM(off_, (CT)y_[i]);    \
            off_ = SUM(off_, s_[q]);                                                     \
        }                                                                                \
        (STATE) = off_;                                                                  \
    } while (0)

#if defined(__SSE2__)
/* The SSE2 sums below are sl_mon_sum's in vector registers: one IEEE add per step, rounded
 * once (the lanes of _mm_add_ps/_pd), or a wrapping 64-bit add (_mm_add_epi64); their tails
 * call sl_mon_sum. */

/* f32 sums, four rows a step: an in-register prefix (two shifted adds) plus the running
 * carry broadcast from the previous step's last element. The loop is one add and one shuffle
 * of latency per four rows and reads memory in order. */
#define SUM_F32_PREFETCH 1024 /* rows: 4 KiB ahead */
static void sum_f32_sse(int64_t n, const float *x, float *y, float *state, bool exclusive) {
    __m128 carry = _mm_set1_ps(*state);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        /* The rows come from memory (a tile is read once); hardware prefetchers stop at
         * 4 KiB pages, so ask for the line SUM_F32_PREFETCH rows ahead, once per line. */
        if ((i & 15) == 0) _mm_prefetch((const char *)(x + i + SUM_F32_PREFETCH), _MM_HINT_T0);
        __m128 v = _mm_loadu_ps(x + i);
        v = _mm_add_ps(v, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(v), 4)));
        v = _mm_add_ps(v, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(v), 8)));
        v = _mm_add_ps(v, carry);
        if (y && exclusive)
            _mm_storeu_ps(y + i, _mm_move_ss(_mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(v), 4)), carry));
        else if (y)
            _mm_storeu_ps(y + i, v);
        carry = _mm_shuffle_ps(v, v, _MM_SHUFFLE(3, 3, 3, 3));
    }
    float s = _mm_cvtss_f32(carry);
    for (; i < n; i++) {
        float v = x[i];
        if (y && exclusive) y[i] = s;
        s = sl_mon_sum_f32(s, v);
        if (y && !exclusive) y[i] = s;
    }
    *state = s;
}

/* f64 and 64-bit integer sums, two rows a step, the same way. */
static void sum_f64_sse(int64_t n, const double *x, double *y, double *state, bool exclusive) {
    __m128d carry = _mm_set1_pd(*state);
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        __m128d v = _mm_loadu_pd(x + i);
        v = _mm_add_pd(v, _mm_castsi128_pd(_mm_slli_si128(_mm_castpd_si128(v), 8)));
        v = _mm_add_pd(v, carry);
        if (y && exclusive) _mm_storeu_pd(y + i, _mm_shuffle_pd(carry, v, 0)); /* [carry, v0] */
        else if (y) _mm_storeu_pd(y + i, v);
        carry = _mm_unpackhi_pd(v, v);
    }
    double s = _mm_cvtsd_f64(carry);
    for (; i < n; i++) {
        double v = x[i];
        if (y && exclusive) y[i] = s;
        s = sl_mon_sum_f64(s, v);
        if (y && !exclusive) y[i] = s;
    }
    *state = s;
}

static void sum_u64_sse(int64_t n, const uint64_t *x, uint64_t *y, uint64_t *state, bool exclusive) {
    __m128i carry = _mm_set1_epi64x((long long)*state);
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        __m128i v = _mm_loadu_si128((const __m128i *)(x + i));
        v = _mm_add_epi64(v, _mm_slli_si128(v, 8));
        v = _mm_add_epi64(v, carry);
        if (y && exclusive) _mm_storeu_si128((__m128i *)(y + i), _mm_unpacklo_epi64(carry, v));
        else if (y) _mm_storeu_si128((__m128i *)(y + i), v);
        carry = _mm_unpackhi_epi64(v, v);
    }
    uint64_t s = (uint64_t)_mm_cvtsi128_si64(carry);
    for (; i < n; i++) {
        uint64_t v = x[i];
        if (y && exclusive) y[i] = s;
        s = sl_mon_sum_u64(s, v);
        if (y && !exclusive) y[i] = s;
    }
    *state = s;
}
#endif

/* Returns false when the acc type has no lane loop (f16 rounds every step). */
static bool sum_lanes(sluice_type acc, int64_t n, const void *x, sl_value *state, void *y,
                      bool exclusive) {
#if defined(__SSE2__)
    if (acc == SLUICE_F32) {
        float st = (float)state->f;
        sum_f32_sse(n, x, y, &st, exclusive);
        state->f = st;
        return true;
    }
    if (acc == SLUICE_F64) {
        sum_f64_sse(n, x, y, &state->f, exclusive);
        return true;
    }
    if (acc == SLUICE_I64 || acc == SLUICE_U64) {
        sum_u64_sse(n, x, y, &state->u, exclusive);
        return true;
    }
#endif
    switch (acc) {
    case SLUICE_U8: { uint8_t st = (uint8_t)state->u; SUM_LANES_LOOP(uint8_t, uint8_t, sl_mon_sum_u8, st); state->u = st; break; }
    case SLUICE_I8: { uint8_t st = (uint8_t)state->u; SUM_LANES_LOOP(uint8_t, uint8_t, sl_mon_sum_u8, st); state->i = (int8_t)st; break; }
    case SLUICE_U16: { uint16_t st = (uint16_t)state->u; SUM_LANES_LOOP(uint16_t, uint16_t, sl_mon_sum_u16, st); state->u = st; break; }
    case SLUICE_I16: { uint16_t st = (uint16_t)state->u; SUM_LANES_LOOP(uint16_t, uint16_t, sl_mon_sum_u16, st); state->i = (int16_t)st; break; }
    case SLUICE_U32: { uint32_t st = (uint32_t)state->u; SUM_LANES_LOOP(uint32_t, uint32_t, sl_mon_sum_u32, st); state->u = st; break; }
    case SLUICE_I32: { uint32_t st = (uint32_t)state->u; SUM_LANES_LOOP(uint32_t, uint32_t, sl_mon_sum_u32, st); state->i = (int32_t)st; break; }
    case SLUICE_U64:
    case SLUICE_I64: { uint64_t st = state->u; SUM_LANES_LOOP(uint64_t, uint64_t, sl_mon_sum_u64, st); state->u = st; break; }
    case SLUICE_F32: { float st = (float)state->f; SUM_LANES_LOOP(float, float, sl_mon_sum_f32, st); state->f = st; break; }
    case SLUICE_F64: { double st = state->f; SUM_LANES_LOOP(double, double, sl_mon_sum_f64, st); state->f = st; break; }
    default: return false;
    }
    return true;
}

/* ---- single-field builtins: sl_value state <-> native registers ---------------------- */

/* The acc types with loops above: the type, its loop family, the register type the state
 * lives in, and the sl_value field that holds it between tiles. */
#define FAST_ACC_TYPES(X)                                                                \
    X(SLUICE_U8, u8, uint8_t, u) X(SLUICE_U16, u16, uint16_t, u)                         \
    X(SLUICE_U32, u32, uint32_t, u) X(SLUICE_U64, u64, uint64_t, u)                      \
    X(SLUICE_I8, i8, int8_t, i) X(SLUICE_I16, i16, int16_t, i)                           \
    X(SLUICE_I32, i32, int32_t, i) X(SLUICE_I64, i64, int64_t, i)                        \
    X(SLUICE_F16, f16, float, f) X(SLUICE_F32, f32, float, f)                            \
    X(SLUICE_F64, f64, double, f) X(SLUICE_BOOL, bool, uint8_t, u)

/* A state's field in the register type and back. Float states go through sl_f32_narrow /
 * sl_f32_widen, which keep a NaN's bits: a plain C conversion quiets a signalling NaN, so a
 * min/max carried from one batch to the next would differ from the same NaN carried inside
 * a batch, and a sort by it would depend on where the stream was cut. */
#define FROM_STATE(CT, v) _Generic((CT)0, float: sl_f32_narrow((double)(v)), default: (CT)(v))
#define TO_STATE(s) _Generic((s), float: sl_f32_widen((float)(s)), default: (s))

static bool fast_single(const sl_scan *scan, int64_t n, const void *x, const uint8_t *head,
                        sl_value *state, void *y) {
    sl_scan_op op = scan->op;
    bool ex = scan->exclusive;
    sl_value id = scan->identity[0];
    if (!head && n >= 16 * SUM_LANES && (op == SL_SCAN_SUM || op == SL_SCAN_COUNT) &&
        sum_lanes(scan->acc[0], n, x, state, y, ex))
        return true;
    switch (scan->acc[0]) {
#define SCAN_CASE(T, NAME, CT, FIELD)                                                    \
    case T: {                                                                            \
        CT s = FROM_STATE(CT, state->FIELD);                                             \
        if (!NAME##_scan(op, n, x, head, &s, FROM_STATE(CT, id.FIELD), y, ex)) return false; \
        state->FIELD = TO_STATE(s);                                                      \
        return true;                                                                     \
    }
        FAST_ACC_TYPES(SCAN_CASE)
#undef SCAN_CASE
    default: return false;
    }
}

static bool fast_single_carry(const sl_scan *scan, int64_t n, const sl_value *carry, void *y) {
    sl_scan_op op = scan->op;
    switch (scan->acc[0]) {
#define CARRY_CASE(T, NAME, CT, FIELD)                                                   \
    case T: return NAME##_carry(op, n, FROM_STATE(CT, carry->FIELD), y);
        FAST_ACC_TYPES(CARRY_CASE)
#undef CARRY_CASE
    default: return false;
    }
}

/* ---- linear recurrence: state (a, b), (a1,b1)·(a2,b2) = (a1*a2, a2*b1 + b2) ------------- */

#define LINREC_LOOP(T, S)                                                                \
    do {                                                                                 \
        const T *xa = x[0], *xb = x[1];                                                  \
        T *ya = y ? y[0] : NULL, *yb = y ? y[1] : NULL;                                  \
        T sa = (T)state[0].f, sb = (T)state[1].f;                                        \
        for (int64_t i = 0; i < n; i++) {                                                \
            T a = xa[i], b = xb[i];                                                      \
            if (head && head[i]) { sa = 1; sb = 0; }                                     \
            if (ya && ex) { ya[i] = sa; yb[i] = sb; }                                    \
            sb = sl_mon_linrec_b_##S(sb, a, b);                                          \
            sa = sl_mon_linrec_a_##S(sa, a);                                             \
            if (ya && !ex) { ya[i] = sa; yb[i] = sb; }                                   \
        }                                                                                \
        state[0].f = sa;                                                                 \
        state[1].f = sb;                                                                 \
    } while (0)

#define LINREC_CARRY(T, S)                                                               \
    do {                                                                                 \
        T *ya = y[0], *yb = y[1];                                                        \
        T ca = (T)carry[0].f, cb = (T)carry[1].f;                                        \
        for (int64_t i = 0; i < n; i++) {                                                \
            T a = ya[i];                                                                 \
            yb[i] = sl_mon_linrec_b_##S(cb, a, yb[i]);                                   \
            ya[i] = sl_mon_linrec_a_##S(ca, a);                                          \
        }                                                                                \
    } while (0)

static bool linrec_fast(const sl_scan *scan) {
    return scan->op == SL_SCAN_LINREC && scan->nfields == 2 && scan->acc[0] == scan->acc[1] &&
           (scan->acc[0] == SLUICE_F32 || scan->acc[0] == SLUICE_F64);
}

/* ---- the generic path: sl_monoid_combine per row ---------------------------------------- */

static void round_state(const sl_scan *scan, sl_value *s) {
    for (int f = 0; f < scan->nfields; f++) s[f] = sl_value_cast(s[f], scan->acc[f]);
}

static void generic_rows(const sl_scan *scan, int64_t n, const void *const *x, const uint8_t *head,
                         sl_value *state, void *const *y) {
    int nf = scan->nfields;
    sl_value s[SL_MAX_FIELDS], v[SL_MAX_FIELDS];
    memcpy(s, state, sizeof(sl_value) * (size_t)nf);
    for (int64_t i = 0; i < n; i++) {
        for (int f = 0; f < nf; f++) v[f] = sl_value_load(scan->acc[f], x[f], i);
        if (head && head[i]) memcpy(s, scan->identity, sizeof(sl_value) * (size_t)nf);
        if (y && scan->exclusive)
            for (int f = 0; f < nf; f++) sl_value_store(scan->acc[f], y[f], i, s[f]);
        sl_monoid_combine(scan, s, v, s);
        round_state(scan, s);
        if (y && !scan->exclusive)
            for (int f = 0; f < nf; f++) sl_value_store(scan->acc[f], y[f], i, s[f]);
    }
    memcpy(state, s, sizeof(sl_value) * (size_t)nf);
}

void sl_cpu_scan_rows(const sl_scan *scan, int64_t n, const void *const *x, const uint8_t *head,
                      sl_value *state, void *const *y) {
    if (n <= 0) return;
    if (scan->nfields == 1 && scan->op != SL_SCAN_CUSTOM && scan->op != SL_SCAN_LINREC &&
        fast_single(scan, n, x[0], head, state, y ? y[0] : NULL))
        return;
    if (linrec_fast(scan)) {
        bool ex = scan->exclusive;
        if (scan->acc[0] == SLUICE_F32) LINREC_LOOP(float, f32);
        else LINREC_LOOP(double, f64);
        return;
    }
    generic_rows(scan, n, x, head, state, y);
}

void sl_cpu_scan_apply_carry(const sl_scan *scan, int64_t n, const sl_value *carry,
                             void *const *y) {
    if (n <= 0) return;
    if (scan->nfields == 1 && scan->op != SL_SCAN_CUSTOM && scan->op != SL_SCAN_LINREC &&
        fast_single_carry(scan, n, carry, y[0]))
        return;
    if (linrec_fast(scan)) {
        if (scan->acc[0] == SLUICE_F32) LINREC_CARRY(float, f32);
        else LINREC_CARRY(double, f64);
        return;
    }
    int nf = scan->nfields;
    sl_value v[SL_MAX_FIELDS];
    for (int64_t i = 0; i < n; i++) {
        for (int f = 0; f < nf; f++) v[f] = sl_value_load(scan->acc[f], y[f], i);
        sl_monoid_combine(scan, carry, v, v);
        round_state(scan, v);
        for (int f = 0; f < nf; f++) sl_value_store(scan->acc[f], y[f], i, v[f]);
    }
}

void sl_cpu_scan_combine(const sl_scan *scan, const sl_value *a, const sl_value *b, sl_value *out) {
    /* One row through the same loops as the tiles, so carries round exactly like rows. */
    uint64_t xs[SL_MAX_FIELDS], ys[SL_MAX_FIELDS];
    const void *x[SL_MAX_FIELDS];
    void *y[SL_MAX_FIELDS];
    sl_value s[SL_MAX_FIELDS];
    for (int f = 0; f < scan->nfields; f++) {
        sl_value_store(scan->acc[f], &xs[f], 0, b[f]);
        x[f] = &xs[f];
        y[f] = &ys[f];
        s[f] = a[f];
    }
    sl_scan inclusive = *scan;
    inclusive.exclusive = false;
    sl_cpu_scan_rows(&inclusive, 1, x, NULL, s, y);
    memcpy(out, s, sizeof(sl_value) * (size_t)scan->nfields);
}

/* ---- declared operators, vectorised (see scan.h) ------------------------------------------ */

sluice_status sl_cpu_combine_compile(sluice_context *ctx, const sl_scan *scan, int64_t max_rows,
                                     sl_cpu_combine *c) {
    memset(c, 0, sizeof *c);
    if (scan->op != SL_SCAN_CUSTOM || !scan->custom) return SLUICE_OK;
    for (int f = 0; f < scan->nfields; f++)
        if (!scan->custom->combine[f] || scan->custom->combine[f]->type != scan->acc[f]) return SLUICE_OK;
    for (int f = 0; f < scan->nfields; f++) {
        sluice_status st = sl_expr_compile(ctx, scan->custom->combine[f], max_rows, &c->prog[f]);
        if (st != SLUICE_OK) {
            sl_cpu_combine_free(ctx, c);
            return st;
        }
        size_t sz = sl_expr_program_scratch_size(c->prog[f]);
        if (sz > c->scratch) c->scratch = sz;
    }
    return SLUICE_OK;
}

void sl_cpu_combine_free(sluice_context *ctx, sl_cpu_combine *c) {
    for (int f = 0; f < SL_MAX_FIELDS; f++) {
        if (c->prog[f]) sl_expr_program_free(ctx, c->prog[f]);
        c->prog[f] = NULL;
    }
}

/* One element of sz bytes (a call to memcpy per element would dominate the lane loops). */
static inline void copy_elem(void *dst, const void *src, size_t sz) {
    switch (sz) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* out[f][i] = (left[i] ⊕ right[i]).f for i < n, every field from the old values. */
static void combine_arrays(const sl_scan *scan, const sl_cpu_combine *c, const sl_value *params,
                           void *scratch, int64_t n, const void *const *left,
                           const void *const *right, void *const *out) {
    sl_eval_env env = {NULL, params, {left, right}};
    for (int f = 0; f < scan->nfields; f++) sl_expr_run(c->prog[f], &env, n, scratch, out[f]);
}

/* y[i] = p ⊕ y[i] for i in [b, e): p broadcast into buf[0], results through buf[1]. */
static void fix_range(const sl_scan *scan, const sl_cpu_combine *c, const sl_value *params,
                      sl_cpu_combine_scratch *s, int64_t b, int64_t e, const sl_value *p,
                      void *const *y) {
    if (e <= b) return;
    int nf = scan->nfields;
    /* Zeroed: gcc -O2 with the sanitizers cannot see that nf >= 1 fills them. */
    const void *left[SL_MAX_FIELDS] = {0}, *right[SL_MAX_FIELDS] = {0};
    void *out[SL_MAX_FIELDS] = {0};
    for (int f = 0; f < nf; f++) {
        size_t sz = sluice_type_size(scan->acc[f]);
        sl_value_store(scan->acc[f], s->buf[0][f], 0, p[f]);
        for (int64_t i = 1; i < e - b; i++)
            copy_elem((char *)s->buf[0][f] + (size_t)i * sz, s->buf[0][f], sz);
        left[f] = s->buf[0][f];
        right[f] = (const char *)y[f] + (size_t)b * sz;
        out[f] = s->buf[1][f];
    }
    combine_arrays(scan, c, params, s->expr, e - b, left, right, out);
    for (int f = 0; f < nf; f++) {
        size_t sz = sluice_type_size(scan->acc[f]);
        memcpy((char *)y[f] + (size_t)b * sz, out[f], (size_t)(e - b) * sz);
    }
}

void sl_cpu_scan_apply_carry_declared(const sl_scan *scan, const sl_cpu_combine *c,
                                      const sl_value *params, sl_cpu_combine_scratch *s, int64_t n,
                                      const sl_value *carry, void *const *y) {
    if (!c->prog[0]) {
        sl_cpu_scan_apply_carry(scan, n, carry, y);
        return;
    }
    fix_range(scan, c, params, s, 0, n, carry, y);
}

void sl_cpu_scan_rows_declared(const sl_scan *scan, const sl_cpu_combine *c, const sl_value *params,
                               sl_cpu_combine_scratch *s, int64_t n, const void *const *x,
                               const uint8_t *head, sl_value *state, void *const *y) {
    const int L = SL_CPU_COMBINE_LANES;
    if (!c->prog[0] || n < 4 * L) {
        sl_cpu_scan_rows(scan, n, x, head, state, y);
        return;
    }
    int nf = scan->nfields;
    int64_t m = n / L;
    size_t sz[SL_MAX_FIELDS];
    /* Lane states: cur (buf[0]) and next (buf[1]); the lanes' values of one step in buf[2]. */
    void *cur[SL_MAX_FIELDS], *next[SL_MAX_FIELDS], *step[SL_MAX_FIELDS];
    for (int f = 0; f < nf; f++) {
        sz[f] = sluice_type_size(scan->acc[f]);
        cur[f] = s->buf[0][f];
        next[f] = s->buf[1][f];
        step[f] = s->buf[2][f];
        for (int q = 0; q < L; q++) sl_value_store(scan->acc[f], cur[f], q, q == 0 ? state[f] : scan->identity[f]);
    }
    for (int64_t j = 0; j < m; j++) {
        for (int q = 0; q < L; q++) {
            int64_t row = q * m + j;
            bool restart = head && head[row];
            for (int f = 0; f < nf; f++) {
                if (restart) sl_value_store(scan->acc[f], cur[f], q, scan->identity[f]);
                copy_elem((char *)step[f] + (size_t)q * sz[f], (const char *)x[f] + (size_t)row * sz[f], sz[f]);
                if (y && scan->exclusive)
                    copy_elem((char *)y[f] + (size_t)row * sz[f], (char *)cur[f] + (size_t)q * sz[f], sz[f]);
            }
        }
        combine_arrays(scan, c, params, s->expr, L, (const void *const *)cur,
                       (const void *const *)step, next);
        for (int f = 0; f < nf; f++) {
            if (y && !scan->exclusive)
                for (int q = 0; q < L; q++)
                    copy_elem((char *)y[f] + (size_t)(q * m + j) * sz[f], (char *)next[f] + (size_t)q * sz[f], sz[f]);
            void *t = cur[f];
            cur[f] = next[f];
            next[f] = t;
        }
    }
    /* Lane totals; the last lane also takes the rows left over. */
    sl_value tails[SL_CPU_COMBINE_LANES][SL_MAX_FIELDS];
    for (int q = 0; q < L; q++)
        for (int f = 0; f < nf; f++) tails[q][f] = sl_value_load(scan->acc[f], cur[f], q);
    if (L * m < n) {
        const void *xr[SL_MAX_FIELDS];
        void *yr[SL_MAX_FIELDS];
        for (int f = 0; f < nf; f++) {
            xr[f] = (const char *)x[f] + (size_t)(L * m) * sz[f];
            yr[f] = y ? (char *)y[f] + (size_t)(L * m) * sz[f] : NULL;
        }
        sl_cpu_scan_rows(scan, n - L * m, xr, head ? head + L * m : NULL, tails[L - 1], y ? yr : NULL);
    }
    /* Prefix over lanes, then each lane's leading rows (before its first head) get it. */
    sl_value prefix[SL_MAX_FIELDS];
    memcpy(prefix, tails[0], sizeof(sl_value) * (size_t)nf);
    for (int q = 1; q < L; q++) {
        int64_t b = q * m, e = q == L - 1 ? n : b + m, first = b;
        while (head && first < e && !head[first]) first++;
        if (!head) first = e;
        if (y) fix_range(scan, c, params, s, b, first, prefix, y);
        if (first < e) memcpy(prefix, tails[q], sizeof(sl_value) * (size_t)nf);
        else sl_cpu_scan_combine(scan, prefix, tails[q], prefix);
    }
    memcpy(state, prefix, sizeof(sl_value) * (size_t)nf);
}
