/* sortkey.c — bulk key ⇄ image conversion for the radix sort (see sortkey.h for the order). */
#include "sortkey.h"

#include "sl_ops.h"

/* One loop per (type, permuted or not); the image expression differs per type. */
#define SL_IMAGE_LOOP(CT, IT, EXPR)                                                      \
    do {                                                                                 \
        const CT *k_ = keys;                                                             \
        IT *o_ = out;                                                                    \
        IT inv_ = descending ? (IT)~(IT)0 : (IT)0;                                       \
        if (!perm) {                                                                     \
            for (int64_t i = 0; i < n; i++) {                                            \
                CT v = k_[i];                                                            \
                o_[i] = (IT)((EXPR) ^ inv_);                                             \
            }                                                                            \
        } else if (perm_wide) {                                                          \
            const uint64_t *p_ = perm;                                                   \
            for (int64_t i = 0; i < n; i++) {                                            \
                CT v = k_[p_[i]];                                                        \
                o_[i] = (IT)((EXPR) ^ inv_);                                             \
            }                                                                            \
        } else {                                                                         \
            const uint32_t *p_ = perm;                                                   \
            for (int64_t i = 0; i < n; i++) {                                            \
                CT v = k_[p_[i]];                                                        \
                o_[i] = (IT)((EXPR) ^ inv_);                                             \
            }                                                                            \
        }                                                                                \
    } while (0)

void sl_sortkey_images(sluice_type t, const void *keys, const void *perm, bool perm_wide,
                       int64_t n, bool descending, void *out) {
    switch (t) {
    case SLUICE_BOOL:
    case SLUICE_U8: SL_IMAGE_LOOP(uint8_t, uint32_t, (uint32_t)v); break;
    case SLUICE_U16: SL_IMAGE_LOOP(uint16_t, uint32_t, (uint32_t)v); break;
    case SLUICE_U32: SL_IMAGE_LOOP(uint32_t, uint32_t, v); break;
    case SLUICE_U64: SL_IMAGE_LOOP(uint64_t, uint64_t, v); break;
    case SLUICE_I8: SL_IMAGE_LOOP(int8_t, uint32_t, sl_sortkey_i8(v)); break;
    case SLUICE_I16: SL_IMAGE_LOOP(int16_t, uint32_t, sl_sortkey_i16(v)); break;
    case SLUICE_I32: SL_IMAGE_LOOP(int32_t, uint32_t, sl_sortkey_i32(v)); break;
    case SLUICE_I64: SL_IMAGE_LOOP(int64_t, uint64_t, sl_sortkey_i64(v)); break;
    case SLUICE_F16: SL_IMAGE_LOOP(sl_half, uint32_t, sl_sortkey_f16(v)); break;
    case SLUICE_F32: SL_IMAGE_LOOP(float, uint32_t, sl_sortkey_f32(v)); break;
    case SLUICE_F64: SL_IMAGE_LOOP(double, uint64_t, sl_sortkey_f64(v)); break;
    default: break;
    }
}

#define SL_VALUE_LOOP(CT, IT, EXPR)                                                      \
    do {                                                                                 \
        const IT *m_ = images;                                                           \
        CT *o_ = out;                                                                    \
        IT inv_ = descending ? (IT)~(IT)0 : (IT)0;                                       \
        for (int64_t i = 0; i < n; i++) {                                                \
            IT v = (IT)(m_[i] ^ inv_);                                                   \
            o_[i] = (CT)(EXPR);                                                          \
        }                                                                                \
    } while (0)

void sl_sortkey_values(sluice_type t, const void *images, int64_t n, bool descending, void *out) {
    switch (t) {
    case SLUICE_BOOL:
    case SLUICE_U8: SL_VALUE_LOOP(uint8_t, uint32_t, v); break;
    case SLUICE_U16: SL_VALUE_LOOP(uint16_t, uint32_t, v); break;
    case SLUICE_U32: SL_VALUE_LOOP(uint32_t, uint32_t, v); break;
    case SLUICE_U64: SL_VALUE_LOOP(uint64_t, uint64_t, v); break;
    /* signed: the sign bit flipped back (the image's inverse is the same flip) */
    case SLUICE_I8: SL_VALUE_LOOP(uint8_t, uint32_t, v ^ 0x80u); break;
    case SLUICE_I16: SL_VALUE_LOOP(uint16_t, uint32_t, v ^ 0x8000u); break;
    case SLUICE_I32: SL_VALUE_LOOP(uint32_t, uint32_t, v ^ 0x80000000u); break;
    case SLUICE_I64: SL_VALUE_LOOP(uint64_t, uint64_t, v ^ 0x8000000000000000ull); break;
    case SLUICE_F16: SL_VALUE_LOOP(sl_half, uint32_t, sl_sortkey_f16_inverse((uint16_t)v)); break;
    case SLUICE_F32: SL_VALUE_LOOP(float, uint32_t, sl_sortkey_f32_inverse(v)); break;
    case SLUICE_F64: SL_VALUE_LOOP(double, uint64_t, sl_sortkey_f64_inverse(v)); break;
    default: break;
    }
}
