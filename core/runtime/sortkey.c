/* sortkey.c — bulk key ⇄ image conversion for the CPU radix sort (kernels/sl_sortkey.h
 * defines the image; sortkey.h says how images are stored). */
#include "runtime/sortkey.h"

/* Keys are read as unsigned integers of their width (BT), as the image works on bits. KIND
 * and W are constants at every use, so sl_sortkey_image folds into a few operations on IT.
 * One loop per (type, permuted or not), one case per entry of the type list: images of
 * types up to 4 bytes are uint32_t, of 8-byte types uint64_t (sortkey.h); bool sorts as an
 * unsigned byte. */
#define SL_IMAGE_T_1 uint32_t
#define SL_IMAGE_T_2 uint32_t
#define SL_IMAGE_T_4 uint32_t
#define SL_IMAGE_T_8 uint64_t
#define SL_KIND_SL_TYPE_BOOL SL_SORTKEY_UNSIGNED
#define SL_KIND_SL_TYPE_UNSIGNED SL_SORTKEY_UNSIGNED
#define SL_KIND_SL_TYPE_SIGNED SL_SORTKEY_SIGNED
#define SL_KIND_SL_TYPE_FLOAT SL_SORTKEY_FLOAT
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

#define SL_IMAGE_CASE_(E, N, CT, BT, SIZE, CLS, NPY)                                     \
    case E: SL_IMAGE_LOOP(BT, SL_IMAGE_T_##SIZE, SL_KIND_##CLS, SIZE * 8); break;

void sl_sortkey_images(sluice_type t, const void *keys, const void *perm, bool perm_wide,
                       int64_t n, bool descending, void *out) {
    switch (t) {
        SL_TYPE_LIST(SL_IMAGE_CASE_)
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

#define SL_VALUE_CASE_(E, N, CT, BT, SIZE, CLS, NPY)                                     \
    case E: SL_VALUE_LOOP(BT, SL_IMAGE_T_##SIZE, SL_KIND_##CLS, SIZE * 8); break;

void sl_sortkey_values(sluice_type t, const void *images, int64_t n, bool descending, void *out) {
    switch (t) {
        SL_TYPE_LIST(SL_VALUE_CASE_)
    default: break;
    }
}
