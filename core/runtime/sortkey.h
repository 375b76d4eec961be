/* sortkey.h — sort keys of whole columns as unsigned images that order the same way, for the
 * CPU radix sort: which kind of image a column type has, and the bulk conversions both ways.
 * The image itself (unsigned: the bits; signed: the sign bit flipped; float: the total order
 * -NaN < -inf < … < -0.0 < +0.0 < … < +inf < +NaN; descending: the key's bits inverted) is
 * defined once, for the CPU and the GPU, in kernels/sl_sortkey.h; this file only applies it.
 *
 * Images of types up to 32 bits are held in uint32_t (the bits above the key's width are 0),
 * of 64-bit types in uint64_t. Also included by core/cuda/sort.cu (C++) for sl_sortkey_kind. */
#ifndef SL_SORTKEY_H
#define SL_SORTKEY_H

#include "sl_sortkey.h"
#include "common/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Width of a type's image in bits (= the type's width; bool: 8). */
static inline int sl_sortkey_bits(sluice_type t) { return sl_type_bits(t); }
/* True when the image needs a uint64_t. */
static inline bool sl_sortkey_is_wide(sluice_type t) { return sluice_type_size(t) == 8; }
/* The kind of image of a key type (SL_SORTKEY_UNSIGNED for bool and unsigned integers). */
static inline int sl_sortkey_kind(sluice_type t) {
    return sl_type_is_float(t) ? SL_SORTKEY_FLOAT
           : sl_type_is_signed(t) ? SL_SORTKEY_SIGNED
                                  : SL_SORTKEY_UNSIGNED;
}

/* Writes the images, in the key's order (descending or not), of n keys of type t. When perm
 * is not NULL, image i is that of key perm[i] (perm holds uint32_t indices when perm_wide is
 * false, uint64_t otherwise). out is uint32_t[n] for narrow types, uint64_t[n] for wide ones
 * (sl_sortkey_is_wide). A sort by several keys calls this once per key, each with its own
 * order. */
void sl_sortkey_images(sluice_type t, const void *keys, const void *perm, bool perm_wide,
                       int64_t n, bool descending, void *out);
/* The inverse of sl_sortkey_images without perm: writes n keys of type t from their images
 * (made with the same `descending`). */
void sl_sortkey_values(sluice_type t, const void *images, int64_t n, bool descending, void *out);

#ifdef __cplusplus
}
#endif
#endif
