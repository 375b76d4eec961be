/* types.h — facts about sluice's column types, from one list (SL_TYPE_LIST: name, C type,
 * size, class, NumPy dtype), typed scalar values, and the f16 <-> f32 conversions the CPU
 * side uses. */
#ifndef SL_TYPES_H
#define SL_TYPES_H

#include "common/base.h"

/* Every column type once, in sluice_type's order (types.c checks the order and sizes at
 * compile time). Columns:
 *   E      the enum constant
 *   N      the name in YAML, expressions and messages, and the suffix of its kernels/sl_ops.h
 *          helpers (sl_cvt_i16_f32); a bare token, so use it only with # or ## (`bool` is a
 *          macro before C23)
 *   CT     the C element type the CPU code and the generated CUDA code use (kernels/sl_ops.h)
 *   BT     the unsigned type of the same width: the element's bits (sort-key images)
 *   SIZE   bytes per element
 *   CLASS  SL_TYPE_BOOL, SL_TYPE_SIGNED, SL_TYPE_UNSIGNED or SL_TYPE_FLOAT
 *   NPY    the NumPy dtype string of the column (little-endian)
 * Add a type here and in sluice.h's enum, then follow the compiler: switches that still name
 * types one by one do different things per type (conversions, literal parsing). */
#define SL_TYPE_LIST(X)                                                                     \
    X(SLUICE_BOOL, bool, sl_bool, uint8_t, 1, SL_TYPE_BOOL, "|b1")                          \
    X(SLUICE_I8, i8, int8_t, uint8_t, 1, SL_TYPE_SIGNED, "|i1")                             \
    X(SLUICE_I16, i16, int16_t, uint16_t, 2, SL_TYPE_SIGNED, "<i2")                         \
    X(SLUICE_I32, i32, int32_t, uint32_t, 4, SL_TYPE_SIGNED, "<i4")                         \
    X(SLUICE_I64, i64, int64_t, uint64_t, 8, SL_TYPE_SIGNED, "<i8")                         \
    X(SLUICE_U8, u8, uint8_t, uint8_t, 1, SL_TYPE_UNSIGNED, "|u1")                          \
    X(SLUICE_U16, u16, uint16_t, uint16_t, 2, SL_TYPE_UNSIGNED, "<u2")                      \
    X(SLUICE_U32, u32, uint32_t, uint32_t, 4, SL_TYPE_UNSIGNED, "<u4")                      \
    X(SLUICE_U64, u64, uint64_t, uint64_t, 8, SL_TYPE_UNSIGNED, "<u8")                      \
    X(SLUICE_F16, f16, sl_half, uint16_t, 2, SL_TYPE_FLOAT, "<f2")                          \
    X(SLUICE_F32, f32, float, uint32_t, 4, SL_TYPE_FLOAT, "<f4")                            \
    X(SLUICE_F64, f64, double, uint64_t, 8, SL_TYPE_FLOAT, "<f8")

typedef enum sl_type_class {
    SL_TYPE_BOOL,
    SL_TYPE_SIGNED,
    SL_TYPE_UNSIGNED,
    SL_TYPE_FLOAT
} sl_type_class;

/* The facts of the list as tables indexed by sluice_type (types.c). */
typedef struct sl_type_info {
    const char *name;  /* "i16" */
    const char *ctype; /* "int16_t" */
    const char *npy;   /* "<i2" */
    size_t size;
    sl_type_class cls;
} sl_type_info;
extern const sl_type_info sl_type_infos[SLUICE_TYPE_COUNT_];

/* The type's facts; NULL for a value outside the enum. */
static inline const sl_type_info *sl_type_info_of(sluice_type t) {
    return (unsigned)t < SLUICE_TYPE_COUNT_ ? &sl_type_infos[t] : NULL;
}
static inline bool sl_type_is_class(sluice_type t, sl_type_class c) {
    return (unsigned)t < SLUICE_TYPE_COUNT_ && sl_type_infos[t].cls == c;
}
static inline bool sl_type_is_float(sluice_type t) { return sl_type_is_class(t, SL_TYPE_FLOAT); }
static inline bool sl_type_is_signed(sluice_type t) { return sl_type_is_class(t, SL_TYPE_SIGNED); }
static inline bool sl_type_is_unsigned(sluice_type t) {
    return sl_type_is_class(t, SL_TYPE_UNSIGNED);
}
static inline bool sl_type_is_integer(sluice_type t) {
    return sl_type_is_signed(t) || sl_type_is_unsigned(t);
}
/* Width in bits (bool: 8, as stored). */
static inline int sl_type_bits(sluice_type t) { return (int)sluice_type_size(t) * 8; }

/* A typed scalar: integers widened to 64 bits (sign- or zero-extended), floats as double,
 * bool as u = 0/1. */
typedef struct sl_value {
    sluice_type type;
    union {
        int64_t i;
        uint64_t u;
        double f;
    };
} sl_value;

/* An f32 (or f16's f32) in a value's double and back, NaNs by their bits: the processor's
 * conversions quiet a signalling NaN, which would make a NaN carried in a value differ from
 * the same NaN carried inside a batch. Non-NaN values convert exactly as C does. */
double sl_f32_widen(float f);
float sl_f32_narrow(double v);

/* Reads element `index` of a column of type t into a value / writes a value (converted with
 * the language's cast rules, see core/expr/expr.c) to element `index`. */
sl_value sl_value_load(sluice_type t, const void *data, int64_t index);
void sl_value_store(sluice_type t, void *data, int64_t index, sl_value v);
/* Converts v to type t with the cast rules of the expression language. */
sl_value sl_value_cast(sl_value v, sluice_type t);
/* Parses text as a value of type t ("true"/"false" for bool; decimal, 0x hex, floats with
 * exponent, inf, nan). Returns false when the text is not a valid literal of the type or is
 * out of its range. */
bool sl_value_parse(const char *text, sluice_type t, sl_value *out);
/* Formats a value (shortest round-trip text for floats) into buf; returns buf. */
char *sl_value_format(sl_value v, char *buf, size_t cap);

/* IEEE binary16 conversion, round-to-nearest-even, NaN and inf preserved. */
float sl_f16_to_f32(uint16_t h);
uint16_t sl_f32_to_f16(float f);

#endif
