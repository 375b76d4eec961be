/* sortkey.c — bulk key ⇄ image conversion for the CPU radix sort (kernels/sl_sortkey.h
 * defines the image; sortkey.h says how images are stored). */
#include "sortkey.h"

/* Keys are read as unsigned integers of their width (BT), as the image works on bits. KIND
 * and W are constants at every use, so sl_sortkey_image folds into a few operations on IT.
 * One loop per (type, permuted or not). */
#define SL_IMAGE_LOOP(BT, IT, KIND, W)                                                   \
    do {                                                                                 \
        const BT *k_ = keys;                                                             \
        IT *o_ = out;                                                                    \
        const IT flip_ = (IT)sl_sortkey_flip(W, descending);                             \
        if (!perm) {                                                                     \
            for (int64_t i = 0; i < n; i++)                                              \
                o_[i] = (IT)sl_sortkey_image(KIND, W, k_[i]) ^ flip_;                    \
        } else if (perm_wide) {                                                          \
            const uint64_t *p_ = perm;                                                   \
            for (int64_t i = 0; i < n; i++)                                              \
                o_[i] = (IT)sl_sortkey_image(KIND, W, k_[p_[i]]) ^ flip_;                \
        } else {                                                                         \
            const uint32_t *p_ = perm;                                                   \
            for (int64_t i = 0; i < n; i++)                                              \
                o_[i] = (IT)sl_sortkey_image(KIND, W, k_[p_[i]]) ^ flip_;                \
        }                                                                                \
    } while (0)

void sl_sortkey_images(sluice_type t, const void *keys, const void *perm, bool perm_wide,
                       int64_t n, bool descending, void *out) {
    switch (t) {
    case SLUICE_BOOL:
    case SLUICE_U8: SL_IMAGE_LOOP(uint8_t, uint32_t, SL_SORTKEY_UNSIGNED, 8); break;
    case SLUICE_U16: SL_IMAGE_LOOP(uint16_t, uint32_t, SL_SORTKEY_UNSIGNED, 16); break;
    case SLUICE_U32: SL_IMAGE_LOOP(uint32_t, uint32_t, SL_SORTKEY_UNSIGNED, 32); break;
    case SLUICE_U64: SL_IMAGE_LOOP(uint64_t, uint64_t, SL_SORTKEY_UNSIGNED, 64); break;
    case SLUICE_I8: SL_IMAGE_LOOP(uint8_t, uint32_t, SL_SORTKEY_SIGNED, 8); break;
    case SLUICE_I16: SL_IMAGE_LOOP(uint16_t, uint32_t, SL_SORTKEY_SIGNED, 16); break;
    case SLUICE_I32: SL_IMAGE_LOOP(uint32_t, uint32_t, SL_SORTKEY_SIGNED, 32); break;
    case SLUICE_I64: SL_IMAGE_LOOP(uint64_t, uint64_t, SL_SORTKEY_SIGNED, 64); break;
    case SLUICE_F16: SL_IMAGE_LOOP(uint16_t, uint32_t, SL_SORTKEY_FLOAT, 16); break;
    case SLUICE_F32: SL_IMAGE_LOOP(uint32_t, uint32_t, SL_SORTKEY_FLOAT, 32); break;
    case SLUICE_F64: SL_IMAGE_LOOP(uint64_t, uint64_t, SL_SORTKEY_FLOAT, 64); break;
    default: break;
    }
}

#define SL_VALUE_LOOP(BT, IT, KIND, W)                                                   \
    do {                                                                                 \
        const IT *m_ = images;                                                           \
        BT *o_ = out;                                                                    \
        const IT flip_ = (IT)sl_sortkey_flip(W, descending);                             \
        for (int64_t i = 0; i < n; i++)                                                  \
            o_[i] = (BT)sl_sortkey_key(KIND, W, (IT)(m_[i] ^ flip_));                    \
    } while (0)

void sl_sortkey_values(sluice_type t, const void *images, int64_t n, bool descending, void *out) {
    switch (t) {
    case SLUICE_BOOL:
    case SLUICE_U8: SL_VALUE_LOOP(uint8_t, uint32_t, SL_SORTKEY_UNSIGNED, 8); break;
    case SLUICE_U16: SL_VALUE_LOOP(uint16_t, uint32_t, SL_SORTKEY_UNSIGNED, 16); break;
    case SLUICE_U32: SL_VALUE_LOOP(uint32_t, uint32_t, SL_SORTKEY_UNSIGNED, 32); break;
    case SLUICE_U64: SL_VALUE_LOOP(uint64_t, uint64_t, SL_SORTKEY_UNSIGNED, 64); break;
    case SLUICE_I8: SL_VALUE_LOOP(uint8_t, uint32_t, SL_SORTKEY_SIGNED, 8); break;
    case SLUICE_I16: SL_VALUE_LOOP(uint16_t, uint32_t, SL_SORTKEY_SIGNED, 16); break;
    case SLUICE_I32: SL_VALUE_LOOP(uint32_t, uint32_t, SL_SORTKEY_SIGNED, 32); break;
    case SLUICE_I64: SL_VALUE_LOOP(uint64_t, uint64_t, SL_SORTKEY_SIGNED, 64); break;
    case SLUICE_F16: SL_VALUE_LOOP(uint16_t, uint32_t, SL_SORTKEY_FLOAT, 16); break;
    case SLUICE_F32: SL_VALUE_LOOP(uint32_t, uint32_t, SL_SORTKEY_FLOAT, 32); break;
    case SLUICE_F64: SL_VALUE_LOOP(uint64_t, uint64_t, SL_SORTKEY_FLOAT, 64); break;
    default: break;
    }
}
