/* types.h — facts about sluice's column types (size, class, range), typed scalar values,
 * and the f16 <-> f32 conversions the CPU side uses. */
#ifndef SL_TYPES_H
#define SL_TYPES_H

#include "base.h"

static inline bool sl_type_is_float(sluice_type t) {
    return t == SLUICE_F16 || t == SLUICE_F32 || t == SLUICE_F64;
}
static inline bool sl_type_is_signed(sluice_type t) {
    return t == SLUICE_I8 || t == SLUICE_I16 || t == SLUICE_I32 || t == SLUICE_I64;
}
static inline bool sl_type_is_unsigned(sluice_type t) {
    return t == SLUICE_U8 || t == SLUICE_U16 || t == SLUICE_U32 || t == SLUICE_U64;
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

/* Reads element `index` of a column of type t into a value / writes a value (converted with
 * the language's cast rules, see core/expr.c) to element `index`. */
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
