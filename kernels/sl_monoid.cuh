/* sl_monoid.cuh — the builtin scan operators' combines on the device, with exactly the
 * results core/ir/monoid.c gives on the CPU: integer accumulators wrap at their width, float
 * ones round once per operation (explicit _rn intrinsics, never contracted into an FMA),
 * min/max propagate NaN (the left one when both are NaN) and keep the left operand on ties.
 * Generated kernels call these from their state's combine; declared operators are emitted
 * from their expressions instead (kernels/sl_ops.h). */
#ifndef SL_MONOID_CUH
#define SL_MONOID_CUH

#include "sl_device.cuh"

namespace sl {

template <typename T> struct unsigned_of { typedef T type; };
template <> struct unsigned_of<int8_t> { typedef uint8_t type; };
template <> struct unsigned_of<int16_t> { typedef uint16_t type; };
template <> struct unsigned_of<int32_t> { typedef uint32_t type; };
template <> struct unsigned_of<int64_t> { typedef uint64_t type; };

template <typename T> __device__ __forceinline__ T mon_add(T l, T r) {
    typedef typename unsigned_of<T>::type U;
    return (T)(U)((U)l + (U)r);
}
template <> __device__ __forceinline__ float mon_add<float>(float l, float r) { return __fadd_rn(l, r); }
template <> __device__ __forceinline__ double mon_add<double>(double l, double r) { return __dadd_rn(l, r); }

template <typename T> __device__ __forceinline__ T mon_mul(T l, T r) {
    typedef typename unsigned_of<T>::type U;
    /* widen before multiplying: u16*u16 would otherwise promote to a signed int and overflow */
    return (T)(U)((unsigned long long)(U)l * (unsigned long long)(U)r);
}
template <> __device__ __forceinline__ float mon_mul<float>(float l, float r) { return __fmul_rn(l, r); }
template <> __device__ __forceinline__ double mon_mul<double>(double l, double r) { return __dmul_rn(l, r); }

template <typename T> __device__ __forceinline__ bool is_nan(T) { return false; }
template <> __device__ __forceinline__ bool is_nan<float>(float x) { return x != x; }
template <> __device__ __forceinline__ bool is_nan<double>(double x) { return x != x; }

template <typename T> __device__ __forceinline__ T mon_min(T l, T r) {
    if (is_nan(l)) return l;
    if (is_nan(r)) return r;
    return r < l ? r : l;
}
template <typename T> __device__ __forceinline__ T mon_max(T l, T r) {
    if (is_nan(l)) return l;
    if (is_nan(r)) return r;
    return l < r ? r : l;
}
template <typename T> __device__ __forceinline__ T mon_and(T l, T r) { return (T)(l & r); }
template <typename T> __device__ __forceinline__ T mon_or(T l, T r) { return (T)(l | r); }
template <typename T> __device__ __forceinline__ T mon_xor(T l, T r) { return (T)(l ^ r); }

/* Equality of segment keys: the stored bits (so a run of NaNs with one payload is one
 * segment, and -0.0 and +0.0 are different keys). */
template <typename T> __device__ __forceinline__ bool same_key(T a, T b) {
    uint32_t wa[words_of<T>::value], wb[words_of<T>::value];
    to_words(a, wa);
    to_words(b, wb);
    bool same = true;
#pragma unroll
    for (int k = 0; k < words_of<T>::value; k++) same = same && wa[k] == wb[k];
    return same;
}

} /* namespace sl */

#endif
