/* sl_items.cuh — one thread's registers for one column of its rows: sl::items<T, N>, N
 * values of type T indexed as an array (c[i], read and assigned), where i is a constant once
 * the loops over a thread's items are unrolled.
 *
 * Values of 4 bytes or more are an array. Values of 1 or 2 bytes are packed four or two to a
 * 32-bit word, in the order of their bytes in memory (where N fills whole words). A register
 * array of 1-byte values holds one value a register, so moving a tile's bytes in and out of it
 * cost a shift, a truncation and an extension a read and as much again a write, twice a row in
 * a scan (its reduce and its epilogue): the i8 max scan's row threads were bound by the ALU
 * pipe at about 9 ALU instructions a row (bench/RESULTS.md, thirty-ninth session). Packed, a
 * read is a shift or two (value_of) or one `prmt` (held_value_of), a write one `prmt` into the
 * word, and the loads and stores of the tile move the words as they are.
 *
 * Either layout has the bytes of T[N] (raw()), so the tile loads and stores (sl_device.cuh,
 * sl_pipe.cuh) copy them with memcpy whatever the layout. The host emulation of the kernels
 * (tests/cuda_host, SL_HOST_EMULATION) writes the bytes with shifts and masks. */
#ifndef SL_ITEMS_CUH
#define SL_ITEMS_CUH

#include "sl_stdint.h"

namespace sl {

/* value k of the SIZE-byte values in w (byte or half k), extended to 32 bits with its sign
 * (SIGNED) or zeros. Written as shifts, not as a `prmt` with sign fill: the compiler then
 * knows the result's high bits, so the extension a caller asks for next (a column's value
 * held as a 4-byte integer, core/cuda/codegen.c widen_narrow_fields) folds away, where after
 * a `prmt` it stayed (the i8 max kernel: 9,400 against 10,400 SASS instructions, ptxas). */
template <int SIZE, bool SIGNED> __device__ __forceinline__ uint32_t value_of(uint32_t w, int k) {
    constexpr int BITS = 8 * SIZE;
    if (SIGNED) return (uint32_t)((int32_t)(w << (32 - BITS - BITS * k)) >> (32 - BITS));
    return (w >> (BITS * k)) & ((1u << BITS) - 1u);
}

/* The same for a read whose extension is the caller's result (items::held): a 1-byte value in
 * one `prmt`, a byte select with sign or zero fill (after a `prmt`, an extension would not
 * fold). A 2-byte value takes value_of's shifts, one or two either way: with `prmt` the u16 min
 * kernel grew from 5,600 to 5,952 SASS instructions (ptxas). */
template <int SIZE, bool SIGNED> __device__ __forceinline__ uint32_t held_value_of(uint32_t w, int k) {
#if defined(SL_HOST_EMULATION) || !defined(__CUDA_ARCH__)
    return value_of<SIZE, SIGNED>(w, k);
#else
    if constexpr (SIZE == 2) {
        return value_of<SIZE, SIGNED>(w, k);
    } else {
        /* selector nibble j picks result byte j: byte k itself, then k's sign (8 | k) or the
           zero byte of the second operand (4) */
        const uint32_t fill = SIGNED ? (8u | (uint32_t)k) : 4u;
        const uint32_t sel = (uint32_t)k | fill << 4 | fill << 8 | fill << 12;
        uint32_t r;
        asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(sel));
        return r;
    }
#endif
}

/* w with its SIZE-byte value at index k (byte k or half k) replaced by the low bytes of v */
template <int SIZE> __device__ __forceinline__ uint32_t with_value(uint32_t w, int k, uint32_t v) {
#if defined(SL_HOST_EMULATION) || !defined(__CUDA_ARCH__)
    const uint32_t mask = (SIZE == 1 ? 0xffu : 0xffffu) << (8 * SIZE * k);
    return (w & ~mask) | ((v << (8 * SIZE * k)) & mask);
#else
    /* selector nibble j: byte j of w (j) or byte j - SIZE*k of v (4 + that) */
    uint32_t sel = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int from_v = j - SIZE * k;
        sel |= (uint32_t)(from_v >= 0 && from_v < SIZE ? 4 + from_v : j) << (4 * j);
    }
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(w), "r"(v), "r"(sel));
    return r;
#endif
}

/* The bytes of a and b (a's bytes 0-3, b's 4-7) that sel's nibbles name, low byte first: one
 * `prmt` (its default mode, no sign fill). */
__device__ __forceinline__ uint32_t permute(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(SL_HOST_EMULATION) || !defined(__CUDA_ARCH__)
    const unsigned long long x = (unsigned long long)b << 32 | a;
    uint32_t r = 0;
    for (int j = 0; j < 4; j++) r |= (uint32_t)((x >> (8 * ((sel >> (4 * j)) & 7u))) & 0xffu) << (8 * j);
    return r;
#else
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
#endif
}

/* ---- two 16-bit values a word at once ----
 * A max or min scan of a packed 2-byte column works a word, two rows, at a time
 * (core/cuda/codegen.c, emit_pairs): sm_90's max/min.{s16x2,u16x2} pick in both halves in one
 * instruction, where a value at a time costs a read, a combine and a write a row. */

/* each half of a and b, the larger (MAX) or smaller, as signed or unsigned 16-bit values */
template <bool SIGNED, bool MAX> __device__ __forceinline__ uint32_t pick2(uint32_t a, uint32_t b) {
#if !defined(SL_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t r;
    if constexpr (SIGNED && MAX) asm("max.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else if constexpr (SIGNED) asm("min.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else if constexpr (MAX) asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else asm("min.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    uint32_t r = 0;
    for (int k = 0; k < 2; k++) {
        const uint32_t x = value_of<2, SIGNED>(a, k), y = value_of<2, SIGNED>(b, k);
        const bool x_first = SIGNED ? (MAX ? (int32_t)x > (int32_t)y : (int32_t)x < (int32_t)y)
                                    : (MAX ? x > y : x < y);
        r |= ((x_first ? x : y) & 0xffffu) << (16 * k);
    }
    return r;
#endif
}

/* The pick of all 2 x W values in w, extended to 32 bits (with its sign where SIGNED): four
 * independent chains, then the two halves. */
template <bool SIGNED, bool MAX, int W> __device__ __forceinline__ uint32_t pairs_fold(const uint32_t (&w)[W]) {
    constexpr int CHAINS = W < 4 ? W : 4;
    uint32_t m[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; k++) m[k] = w[k];
#pragma unroll
    for (int k = CHAINS; k < W; k++) m[k % CHAINS] = pick2<SIGNED, MAX>(m[k % CHAINS], w[k]);
#pragma unroll
    for (int k = 1; k < CHAINS; k++) m[0] = pick2<SIGNED, MAX>(m[0], m[k]);
    m[0] = pick2<SIGNED, MAX>(m[0], permute(m[0], 0u, 0x3232u)); /* the high half onto the low */
    return value_of<2, SIGNED>(m[0], 0);
}

/* The running pick over w's 2 x W values in memory order (low half first), from `run` (a held
 * value: its low 16 bits), into out: inclusive, or EXCLUSIVE (each row's state before it).
 * Within a word the pair's own pick (a, pick(a, b)) does not wait on the run; the chain from
 * word to word is one pick and one `prmt`. IDENTITY is the operator's identity as 16 bits. */
template <bool SIGNED, bool MAX, bool EXCLUSIVE, int W>
__device__ __forceinline__ void pairs_scan(const uint32_t (&w)[W], uint32_t run, uint32_t (&out)[W]) {
    constexpr uint32_t IDENTITY = MAX ? (SIGNED ? 0x8000u : 0u) : (SIGNED ? 0x7fffu : 0xffffu);
    uint32_t r = permute(run, 0u, 0x1010u); /* the run in both halves */
#pragma unroll
    for (int k = 0; k < W; k++) {
        /* (identity, a): bytes 4-5 of the identity, then bytes 0-1 of the word */
        const uint32_t shifted = permute(w[k], IDENTITY, 0x1054u);
        const uint32_t inclusive = pick2<SIGNED, MAX>(pick2<SIGNED, MAX>(w[k], shifted), r);
        /* exclusive: (run, the inclusive low half) */
        out[k] = EXCLUSIVE ? permute(r, inclusive, 0x5410u) : inclusive;
        r = permute(inclusive, 0u, 0x3232u);
    }
}

/* whether N values of T fill whole words of 1- or 2-byte values */
template <typename T, int N> struct packs {
    static constexpr bool value = (sizeof(T) == 1 || sizeof(T) == 2) && N % (4 / (int)sizeof(T)) == 0;
};

template <typename T, int N, bool PACKED = packs<T, N>::value> struct items;

/* 4 bytes or more (or too few values to fill a word): an array */
template <typename T, int N> struct items<T, N, false> {
    T v[N];
    __device__ __forceinline__ T &operator[](int i) { return v[i]; }
    __device__ __forceinline__ const T &operator[](int i) const { return v[i]; }
    /* value i extended to 32 bits, with its sign where T has one (T of 4 bytes at most) */
    __device__ __forceinline__ uint32_t held(int i) const {
        static_assert(sizeof(T) <= 4, "held: values of 4 bytes at most");
        return (uint32_t)(int32_t)v[i];
    }
    __device__ __forceinline__ void *raw() { return &v[0]; }
    __device__ __forceinline__ const void *raw() const { return &v[0]; }
};

/* 1 or 2 bytes: PER values a word */
template <typename T, int N> struct items<T, N, true> {
    static constexpr int PER = 4 / (int)sizeof(T);
    static_assert(N % PER == 0, "a thread's packed items fill whole words");
    static constexpr bool SIGNED = (T)-1 < (T)0;
    uint32_t w[N / PER];

    __device__ __forceinline__ T get(int i) const {
        return (T)value_of<(int)sizeof(T), SIGNED>(w[i / PER], i % PER);
    }
    __device__ __forceinline__ uint32_t held(int i) const {
        return held_value_of<(int)sizeof(T), SIGNED>(w[i / PER], i % PER);
    }
    __device__ __forceinline__ void set(int i, T x) {
        w[i / PER] = with_value<(int)sizeof(T)>(w[i / PER], i % PER, (uint32_t)x);
    }
    /* c[i] on the left of an assignment */
    struct ref {
        items &of;
        int i;
        __device__ __forceinline__ operator T() const { return of.get(i); }
        __device__ __forceinline__ ref &operator=(T x) {
            of.set(i, x);
            return *this;
        }
        __device__ __forceinline__ ref &operator=(const ref &r) { return *this = (T)r; }
    };
    __device__ __forceinline__ ref operator[](int i) { return ref{*this, i}; }
    __device__ __forceinline__ T operator[](int i) const { return get(i); }
    __device__ __forceinline__ void *raw() { return &w[0]; }
    __device__ __forceinline__ const void *raw() const { return &w[0]; }
};

/* the bytes of a plain array, for the loads and stores that take either */
template <typename T, int N> __device__ __forceinline__ void *raw_of(T (&v)[N]) { return &v[0]; }
template <typename T, int N> __device__ __forceinline__ const void *raw_of(const T (&v)[N]) { return &v[0]; }
template <typename T, int N, bool P> __device__ __forceinline__ void *raw_of(items<T, N, P> &v) { return v.raw(); }
template <typename T, int N, bool P>
__device__ __forceinline__ const void *raw_of(const items<T, N, P> &v) {
    return v.raw();
}

} /* namespace sl */

#endif
