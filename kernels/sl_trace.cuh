/* sl_trace.cuh — step clocks for finding where a tile loop's warps wait, compiled in only when
 * NVRTC is given -DSL_TRACE (SLUICE_NVRTC_TRACE=1, core/cuda/nvrtc.c); otherwise every call
 * here is empty and the kernels are unchanged to the byte.
 *
 * A loop names its steps by number and marks the end of each (mark<K>()): the cycles since the
 * previous mark go to step K, summed over the warp's tiles in registers. At the loop's end lane
 * 0 of every warp of the first SL_TRACE_BLOCKS blocks prints one line, the sums divided by the
 * tiles it counted, so a line reads as the average cycles of each step of one iteration:
 *
 *   sl_trace <loop> block <b> warp <w> tiles <n>: <cycles of step 0> <step 1> ...
 *
 * (device printf: the lines reach the host's stdout at the next synchronisation). For
 * measurement only: printing from a kernel costs far more than the loop it measures. */
#ifndef SL_TRACE_CUH
#define SL_TRACE_CUH

namespace sl {

#ifndef SL_TRACE_BLOCKS
#define SL_TRACE_BLOCKS 4
#endif

/* Eight steps at most, so that one printf holds a warp's line. */
enum { TRACE_STEPS = 8 };

#ifdef SL_TRACE
struct step_clock {
    unsigned long long sum[TRACE_STEPS];
    long long last;
    unsigned tiles;
    __device__ __forceinline__ step_clock() : last(clock64()), tiles(0) {
#pragma unroll
        for (int k = 0; k < TRACE_STEPS; k++) sum[k] = 0;
    }
    /* the cycles since the last mark go to step K (a constant, so sum stays in registers) */
    template <int K> __device__ __forceinline__ void mark() {
        static_assert(K >= 0 && K < TRACE_STEPS, "a trace step out of range");
        const long long now = clock64();
        sum[K] += (unsigned long long)(now - last);
        last = now;
    }
    /* mark<K> once `seen`, a word a barrier handed over, has been read: the clock read
       itself touches no memory, so nothing else keeps it from issuing ahead of a barrier's
       wait (which would put the wait in the next step); a volatile store of the word does. */
    template <int K, class T> __device__ __forceinline__ void mark_after(const T &seen) {
        volatile unsigned char sink; /* a byte: `seen` may be a state of any size */
        sink = *reinterpret_cast<const volatile unsigned char *>(&seen);
        (void)sink;
        mark<K>();
    }
    __device__ __forceinline__ void tile() { tiles++; }
    __device__ __forceinline__ unsigned count() const { return tiles; }
    __device__ __noinline__ void print(const char *loop) const {
        if (blockIdx.x >= SL_TRACE_BLOCKS || (threadIdx.x & 31) != 0) return;
        const unsigned long long n = tiles ? tiles : 1;
        printf("sl_trace %s block %u warp %u tiles %u: %llu %llu %llu %llu %llu %llu %llu %llu\n",
               loop, blockIdx.x, threadIdx.x / 32, tiles, sum[0] / n, sum[1] / n, sum[2] / n,
               sum[3] / n, sum[4] / n, sum[5] / n, sum[6] / n, sum[7] / n);
    }
};
#else
struct step_clock {
    template <int K> __device__ __forceinline__ void mark() {}
    template <int K, class T> __device__ __forceinline__ void mark_after(const T &) {}
    __device__ __forceinline__ void tile() {}
    __device__ __forceinline__ unsigned count() const { return 0; }
    __device__ __forceinline__ void print(const char *) const {}
};
#endif

/* The steps inside a function a loop calls once a tile (the ordered look-back's: its own
 * chunk, the search for a chunk prefix, the folds), whose signature must not change without
 * SL_TRACE: lane 0 of the calling warp, in the first SL_TRACE_BLOCKS blocks, adds each step's
 * cycles to a per-block sum in global memory; the loop prints them per tile beside its own
 * line (print_substeps, which clears them for the next launch):
 *
 *   sl_trace <name> block <b> tiles <n>: <cycles of sub-step 0> <1> <2> <3> */
enum { TRACE_SUBSTEPS = 4 };

#ifdef SL_TRACE
__device__ unsigned long long sl_trace_substeps[SL_TRACE_BLOCKS][TRACE_SUBSTEPS];
struct substep_clock {
    long long last;
    __device__ __forceinline__ substep_clock() : last(clock64()) {}
    template <int K> __device__ __forceinline__ void mark() {
        static_assert(K >= 0 && K < TRACE_SUBSTEPS, "a trace sub-step out of range");
        const long long now = clock64();
        if (blockIdx.x < SL_TRACE_BLOCKS && (threadIdx.x & 31) == 0)
            sl_trace_substeps[blockIdx.x][K] += (unsigned long long)(now - last);
        last = now;
    }
};
__device__ __noinline__ void print_substeps(const char *name, unsigned tiles) {
    if (blockIdx.x >= SL_TRACE_BLOCKS || (threadIdx.x & 31) != 0) return;
    unsigned long long *sum = sl_trace_substeps[blockIdx.x];
    const unsigned long long n = tiles ? tiles : 1;
    printf("sl_trace %s block %u tiles %u: %llu %llu %llu %llu\n", name, blockIdx.x, tiles,
           sum[0] / n, sum[1] / n, sum[2] / n, sum[3] / n);
    for (int k = 0; k < TRACE_SUBSTEPS; k++) sum[k] = 0;
}
#else
struct substep_clock {
    template <int K> __device__ __forceinline__ void mark() {}
};
__device__ __forceinline__ void print_substeps(const char *, unsigned) {}
#endif

} /* namespace sl */

#endif
