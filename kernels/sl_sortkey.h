/* sl_sortkey.h — the one definition of a sort key's image: the unsigned integer whose order
 * is the key's order, so that a radix sort only ever sorts unsigned bits. The CPU applies it
 * to whole columns (core/runtime/sortkey.c), the GPU sort's kernels per row (core/cuda/sort.cu), and
 * kernels/sl_ops.h gives typed forms of it; keeping the rule in one place is what makes the
 * two backends order every key, NaNs and zeros included, the same way. Plain C99 that also
 * compiles as CUDA C++ under nvcc and NVRTC (sl_ops.h, which generated kernels include, pulls
 * it in), so it includes nothing but sl_stdint.h.
 *
 * A key of W bits (8, 16, 32 or 64; a bool is its one stored byte) has the ascending image
 *   unsigned, bool  its bits;
 *   signed          its bits with the sign bit flipped (two's complement order → unsigned);
 *   float           sign bit clear: its bits with the sign bit set; sign bit set: all W bits
 *                   inverted. That is the total order -NaN < -inf < … < -0.0 < +0.0 < … <
 *                   +inf < +NaN of pipelines/SCHEMA.md (not CUB's float order, which makes
 *                   -0.0 and +0.0 equal).
 * A descending key's image is the ascending one with its W bits inverted (XOR with
 * sl_sortkey_flip): the order reversed, and since equal keys still have equal images, a stable
 * sort keeps them in arrival order. Each key of a sort has its own order. Images are held in
 * uint64_t here (the bits above W are 0); callers store those of keys up to 32 bits in
 * uint32_t. How several keys combine (sorted one by one, least significant first, or packed
 * into one image, most significant key highest) is the sorts' business, not the image's. */
#ifndef SL_SORTKEY_IMAGE_H
#define SL_SORTKEY_IMAGE_H

#include "sl_stdint.h"

#if defined(__CUDACC__)
#define SL_SORTKEY_FN static __host__ __device__ __forceinline__
#else
#define SL_SORTKEY_FN static inline
#endif

/* The kinds of key, by how their bits become an image. */
#define SL_SORTKEY_UNSIGNED 0 /* unsigned integers and bool */
#define SL_SORTKEY_SIGNED 1   /* two's complement integers */
#define SL_SORTKEY_FLOAT 2    /* IEEE binary16, binary32, binary64 */

/* The low `width` bits set (1 <= width <= 64). */
SL_SORTKEY_FN uint64_t sl_sortkey_mask(int width) {
    return width >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << width) - 1u);
}

/* The ascending image of a key of `kind` and `width` bits whose bits, zero-extended, are
 * `bits`. */
SL_SORTKEY_FN uint64_t sl_sortkey_image(int kind, int width, uint64_t bits) {
    uint64_t sign = (uint64_t)1 << (width - 1);
    if (kind == SL_SORTKEY_SIGNED) return bits ^ sign;
    if (kind == SL_SORTKEY_FLOAT) {
        /* negative: all bits flipped; otherwise the sign bit. Branch-free: keys arrive in no
         * order, and the branch the compiler may otherwise emit mispredicts half the time. */
        uint64_t negative = (bits >> (width - 1)) & 1u;
        return bits ^ (sign | (sl_sortkey_mask(width) & (0u - negative)));
    }
    return bits;
}

/* The inverse of sl_sortkey_image: the bits (zero-extended) of the key whose ascending image
 * is `image`. */
SL_SORTKEY_FN uint64_t sl_sortkey_key(int kind, int width, uint64_t image) {
    uint64_t sign = (uint64_t)1 << (width - 1);
    if (kind == SL_SORTKEY_SIGNED) return image ^ sign;
    if (kind == SL_SORTKEY_FLOAT) {
        /* top bit set: the key was not negative, only its sign bit was set; else all flipped */
        uint64_t positive = (image >> (width - 1)) & 1u;
        return image ^ (sign | (sl_sortkey_mask(width) & (positive - 1u)));
    }
    return image;
}

/* What a key's ascending image is XORed with to give its image in the key's order: the key's
 * `width` bits when descending is non-zero, else 0. The same XOR turns it back. */
SL_SORTKEY_FN uint64_t sl_sortkey_flip(int width, int descending) {
    return descending ? sl_sortkey_mask(width) : (uint64_t)0;
}

#endif
