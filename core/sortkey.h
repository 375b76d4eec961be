/* sortkey.h — sort keys as unsigned integers that order the same way: the "image" of a key.
 * A radix sort (CPU here, CUB on the GPU) then only ever sorts unsigned bits.
 *
 *   unsigned  the bits themselves
 *   signed    the sign bit flipped (two's complement order → unsigned order)
 *   float     negative values all bits flipped, others the sign bit set: the total order
 *             -NaN < -inf < … < -0.0 < +0.0 < … < +inf < +NaN of DESIGN §3
 *   bool      0 < 1 (one byte)
 *   descending  the image inverted (~): the same order reversed; a stable sort of inverted
 *               images keeps equal keys in arrival order.
 *
 * Images of types up to 32 bits are held in uint32_t, of 64-bit types in uint64_t. The
 * per-element transforms are kernels/sl_ops.h's sl_sortkey_* (shared with generated GPU
 * code); this file applies them to whole columns. */
#ifndef SL_SORTKEY_H
#define SL_SORTKEY_H

#include "types.h"

/* Width of a type's image in bits (= the type's width; bool: 8). */
static inline int sl_sortkey_bits(sluice_type t) { return sl_type_bits(t); }
/* True when the image needs a uint64_t. */
static inline bool sl_sortkey_is_wide(sluice_type t) { return sluice_type_size(t) == 8; }

/* Writes the images of n keys of type t. When perm is not NULL, image i is that of key
 * perm[i] (perm holds uint32_t indices when perm_wide is false, uint64_t otherwise).
 * out is uint32_t[n] for narrow types, uint64_t[n] for wide ones (sl_sortkey_is_wide). */
void sl_sortkey_images(sluice_type t, const void *keys, const void *perm, bool perm_wide,
                       int64_t n, bool descending, void *out);
/* The inverse of sl_sortkey_images without perm: writes n keys of type t from their images. */
void sl_sortkey_values(sluice_type t, const void *images, int64_t n, bool descending, void *out);

#endif
