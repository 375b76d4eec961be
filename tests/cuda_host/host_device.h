/* host_device.h — what the device headers (kernels/) need from CUDA, for running them on the
 * host: with SL_HOST_EMULATION the kernels' volatile accesses become host atomics
 * (sl_lookback.cuh), their dynamic shared memory comes from here (sl_device.cuh), and so do
 * the mbarriers and bulk copies of the tile queue (sl_pipe.cuh; below). One host thread per
 * GPU thread plays a block (g_block): __syncthreads is a barrier over the block, a shuffle or
 * ballot an exchange between the 32 threads of a warp between two barriers of the warp, a
 * named barrier one over its threads, __shared__ variables are statics. Included before the
 * device headers by reduce_emulate.cc (the generated kernels of reduce groups) and
 * tile_states_test.cc (the look-back's tile states). */
#ifndef SL_HOST_DEVICE_H
#define SL_HOST_DEVICE_H

#include <pthread.h>
#include <sched.h>

#include <bitset>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#define SL_HOST_EMULATION 1
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __global__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct uint4 {
    unsigned x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
struct sl_dim3 {
    unsigned x, y, z;
};
inline thread_local sl_dim3 threadIdx, blockDim;
/* The block being run and the grid's size: the blocks of a grid run one after another
 * (launch_grid), so every thread of a block reads the same values. */
inline sl_dim3 blockIdx = {0, 0, 0}, gridDim = {1, 1, 1};

/* A bulk copy started on an mbarrier and not landed yet (see "the copy engine" below). */
struct host_bulk_copy {
    void *dst;
    const void *src;
    unsigned bytes;
};
/* What the emulation keeps beside an mbarrier's word, for the protocol checks below. */
struct host_mbarrier {
    unsigned long long *word;
    std::vector<host_bulk_copy> in_flight; /* started in the current phase */
    unsigned long long claimed;            /* their bytes */
    bool unwaited;                         /* the last phase completed and no thread waited on it yet */
    int unfenced;                          /* threads that waited on it without fence.proxy.async since */
};
struct host_block;
inline void sl_host_mbarriers_at_end(const host_block &b);

/* A named hardware barrier (`bar.sync` / `bar.arrive` with a thread count): an instance
 * completes when `threads` threads have arrived, and a thread that syncs waits for the
 * completion of the instance it arrived in. The emulation checks what the device cannot: all
 * arrivals of an instance name the same count, and no thread arrives twice in one instance
 * (a producer a lap ahead of its consumers, whose second arrival the device would count as
 * theirs). */
struct host_named_barrier {
    std::mutex m;
    std::condition_variable done;
    int threads = 0, arrived = 0;
    unsigned long long generation = 0;
    std::bitset<1024> in_instance;
};

/* The block being run: its barriers (__syncthreads, the named ones, each warp's), the warps'
 * exchange slots, its dynamic shared memory, its mbarriers (under `pipe`). A block must not
 * end with a copy in flight (on the device the copy engine would write into the next block's
 * shared memory) nor with a tile issued that no thread waited for. */
struct host_block {
    pthread_barrier_t all;
    host_named_barrier named[16];
    pthread_barrier_t warp[32];
    unsigned slot[32][32];
    std::unique_ptr<unsigned char[]> smem;
    std::mutex pipe;
    std::vector<host_mbarrier> mbarriers;
    ~host_block() { sl_host_mbarriers_at_end(*this); }
};
inline host_block *g_block;

static inline void __syncthreads() { pthread_barrier_wait(&g_block->all); }
/* The calling thread arrives at named barrier `bar` of `threads` threads and, when `wait`
 * (bar.sync, not bar.arrive), waits for the instance to complete. */
static inline void sl_host_named_barrier(int bar, int threads, bool wait) {
    if (bar < 1 || bar > 15 || threads < 32 || threads % 32 != 0) {
        fprintf(stderr, "host emulation: named barrier %d over %d threads is not one the device has\n",
                bar, threads);
        abort();
    }
    host_named_barrier &b = g_block->named[bar];
    std::unique_lock<std::mutex> lock(b.m);
    if (b.arrived == 0) b.threads = threads;
    if (b.threads != threads || b.in_instance.test(threadIdx.x)) {
        fprintf(stderr, "host emulation: thread %u at named barrier %d over %d threads: %s\n", threadIdx.x, bar,
                threads, b.threads != threads ? "the instance's other arrivals named another count"
                                              : "arrived twice before the barrier completed");
        abort();
    }
    b.in_instance.set(threadIdx.x);
    const unsigned long long generation = b.generation;
    if (++b.arrived == threads) {
        b.arrived = 0;
        b.in_instance.reset();
        b.generation++;
        b.done.notify_all();
        return;
    }
    if (wait) b.done.wait(lock, [&] { return b.generation != generation; });
}
static inline void __syncwarp(unsigned = 0xffffffffu) { pthread_barrier_wait(&g_block->warp[threadIdx.x / 32]); }
/* every lane of the warp puts v and takes lane `from`'s */
static inline unsigned warp_exchange(unsigned v, unsigned from) {
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    g_block->slot[w][lane] = v;
    __syncwarp();
    const unsigned got = g_block->slot[w][from & 31u];
    __syncwarp();
    return got;
}
static inline unsigned __shfl_sync(unsigned, unsigned v, int lane) { return warp_exchange(v, (unsigned)lane); }
static inline unsigned __shfl_up_sync(unsigned, unsigned v, int d) {
    const unsigned lane = threadIdx.x % 32;
    return warp_exchange(v, lane >= (unsigned)d ? lane - (unsigned)d : lane);
}
static inline unsigned __ballot_sync(unsigned, int pred) {
    unsigned bits = 0;
    for (unsigned l = 0; l < 32; l++) bits |= (warp_exchange(pred != 0, l) ? 1u : 0u) << l;
    return bits;
}
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline void __nanosleep(unsigned) { sched_yield(); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T __ldg(const T *p) { return *p; }
static inline size_t __cvta_generic_to_shared(const void *p) { return (size_t)p; }
static inline void *sl_host_dynamic_smem() { return g_block->smem.get(); }

/* ---- the copy engine and its mbarriers (kernels/sl_pipe.cuh) ---------------------------------
 * Without them the tile queue's stages would never hold a tile on the host (the consumers
 * would load every tile from global memory), and a loop that filled the wrong stage, filled
 * one twice or waited with the wrong parity would pass here and fail only on a GPU.
 *
 * PTX semantics: an mbarrier's 8-byte word holds its current phase's parity (bit 63), its
 * expected arrival count (bits 37-52), the arrivals still pending (bits 21-36) and the
 * transaction bytes still outstanding (bits 0-20; the device's limit is 2^20 - 1).
 * arrive.expect_tx adds the bytes, then counts the arrival; a bulk copy's bytes complete
 * against it when the copy lands; once no arrival and no byte is outstanding the phase
 * completes: the parity flips and the arrivals are expected again. try_wait.parity(p)
 * succeeds once the phase of parity p has completed, i.e. while the current parity is not p.
 *
 * A bulk copy lands late, as it may on the device: its destination is filled with a poison
 * byte when it is started, and its bytes arrive only when a thread waits on its barrier's
 * phase. So a stage read before its wait, or refilled while a thread still reads it, gives
 * rows the tests see are wrong.
 *
 * What PTX leaves undefined or sl_pipe.cuh's protocol forbids aborts with a message: a
 * barrier used before mbarrier.init (in this block); an arrival on a phase that has no
 * arrival pending (a stage issued twice); more transaction bytes than the limit; a bulk copy
 * not 16-byte aligned or not a multiple of 16 bytes, or of more bytes than its phase still
 * expects (a copy into a stage not armed for it); a phase completing while no thread has
 * waited on the one before (a stage refilled before its tile was consumed); a bulk copy into
 * a stage that a thread waited on and has not fenced the async proxy since (every reader
 * fences before the end-of-tile barrier); a wait not satisfied within SL_HOST_WAIT_SECONDS;
 * and (~host_block) a block ending with copies in flight or a tile nobody waited for. */

#ifndef SL_HOST_WAIT_SECONDS
#define SL_HOST_WAIT_SECONDS 20
#endif
#define SL_HOST_MBAR_TX_MAX ((1ull << 20) - 1)

struct host_mbarrier_state {
    unsigned phase, expected, pending;
    unsigned long long tx;
};
static inline host_mbarrier_state sl_host_mbarrier_unpack(unsigned long long w) {
    return {(unsigned)(w >> 63), (unsigned)(w >> 37) & 0xffffu, (unsigned)(w >> 21) & 0xffffu,
            w & 0x1fffffull};
}
static inline unsigned long long sl_host_mbarrier_pack(host_mbarrier_state s) {
    return (unsigned long long)s.phase << 63 | (unsigned long long)s.expected << 37 |
           (unsigned long long)s.pending << 21 | s.tx;
}

inline void sl_host_mbarrier_abort(const host_mbarrier &m, const char *what) {
    const host_mbarrier_state st = sl_host_mbarrier_unpack(*m.word);
    fprintf(stderr,
            "host emulation: %s (block %u, thread %u; mbarrier %p: phase parity %u, %u of %u arrivals "
            "pending, %llu bytes outstanding, %zu copies in flight)\n",
            what, blockIdx.x, threadIdx.x, (void *)m.word, st.phase, st.pending, st.expected, st.tx,
            m.in_flight.size());
    abort();
}

inline void sl_host_mbarriers_at_end(const host_block &b) {
    for (const host_mbarrier &m : b.mbarriers) {
        if (!m.in_flight.empty() || sl_host_mbarrier_unpack(*m.word).tx != 0)
            sl_host_mbarrier_abort(m, "the block ended with a stage's bulk copies in flight or expected");
        if (m.unwaited)
            sl_host_mbarrier_abort(m, "the block ended with a tile issued into a stage no thread waited for");
    }
}

/* The emulation's record of `bar` (g_block->pipe held). */
static inline host_mbarrier &sl_host_mbarrier_of(unsigned long long *bar) {
    for (host_mbarrier &m : g_block->mbarriers)
        if (m.word == bar) return m;
    fprintf(stderr, "host emulation: mbarrier %p used before mbarrier.init in block %u\n", (void *)bar,
            blockIdx.x);
    abort();
}

/* Completes the current phase when nothing is outstanding (g_block->pipe held). */
static inline void sl_host_mbarrier_settle(host_mbarrier &m) {
    host_mbarrier_state st = sl_host_mbarrier_unpack(*m.word);
    if (st.pending != 0 || st.tx != 0) return;
    if (m.unwaited)
        sl_host_mbarrier_abort(m, "a stage's phase completed while no thread had waited on its previous "
                                  "one (a stage refilled before its tile was consumed)");
    st.phase ^= 1u;
    st.pending = st.expected;
    *m.word = sl_host_mbarrier_pack(st);
    m.unwaited = true;
}

/* mbarrier.init with `count` expected arrivals. */
static inline void sl_host_mbarrier_init(unsigned long long *bar, unsigned count) {
    std::lock_guard<std::mutex> lock(g_block->pipe);
    host_mbarrier *m = nullptr;
    for (host_mbarrier &e : g_block->mbarriers)
        if (e.word == bar) m = &e;
    if (!m) {
        g_block->mbarriers.push_back(host_mbarrier{bar, {}, 0, false, 0});
        m = &g_block->mbarriers.back();
    } else if (!m->in_flight.empty()) {
        sl_host_mbarrier_abort(*m, "mbarrier.init with bulk copies in flight");
    }
    if (count == 0 || count > 0xffffu) {
        fprintf(stderr, "host emulation: mbarrier.init with count %u\n", count);
        abort();
    }
    m->claimed = 0;
    m->unwaited = false;
    m->unfenced = 0;
    *bar = sl_host_mbarrier_pack({0, count, count, 0});
}

/* `bar`'s state with `bytes` more transaction bytes in its current phase, which must still
 * await an arrival (`no_arrival` says what it means if not; g_block->pipe held). */
static inline host_mbarrier_state sl_host_mbarrier_add_tx(host_mbarrier &m, unsigned long long *bar,
                                                          unsigned bytes, const char *no_arrival) {
    host_mbarrier_state st = sl_host_mbarrier_unpack(*bar);
    if (st.pending == 0) sl_host_mbarrier_abort(m, no_arrival);
    if (st.tx + bytes > SL_HOST_MBAR_TX_MAX)
        sl_host_mbarrier_abort(m, "expect_tx past the transaction count's limit");
    st.tx += bytes;
    return st;
}

/* mbarrier.arrive.expect_tx (`bytes` 0: mbarrier.arrive). */
static inline void sl_host_mbarrier_arrive_expect_tx(unsigned long long *bar, unsigned bytes) {
    std::lock_guard<std::mutex> lock(g_block->pipe);
    host_mbarrier &m = sl_host_mbarrier_of(bar);
    host_mbarrier_state st = sl_host_mbarrier_add_tx(
        m, bar, bytes, "an arrival on a phase with no arrival pending (a stage issued twice)");
    st.pending--;
    *bar = sl_host_mbarrier_pack(st);
    sl_host_mbarrier_settle(m);
}

/* mbarrier.expect_tx: more transaction bytes for the current phase, no arrival. */
static inline void sl_host_mbarrier_expect_tx(unsigned long long *bar, unsigned bytes) {
    std::lock_guard<std::mutex> lock(g_block->pipe);
    host_mbarrier &m = sl_host_mbarrier_of(bar);
    *bar = sl_host_mbarrier_pack(sl_host_mbarrier_add_tx(
        m, bar, bytes, "expect_tx on a phase with no arrival pending (after its arrival)"));
}

/* cp.async.bulk global -> shared completing on `bar`: poisons the destination and lands
 * when the phase is waited on (above). */
static inline void sl_host_bulk_copy(void *dst, const void *src, unsigned bytes, unsigned long long *bar) {
    std::lock_guard<std::mutex> lock(g_block->pipe);
    host_mbarrier &m = sl_host_mbarrier_of(bar);
    if (((size_t)dst | (size_t)src | bytes) % 16 != 0 || bytes == 0)
        sl_host_mbarrier_abort(m, "a bulk copy not 16-byte aligned or not a positive multiple of 16 bytes");
    if (m.claimed + bytes > sl_host_mbarrier_unpack(*bar).tx)
        sl_host_mbarrier_abort(m, "a bulk copy of more bytes than the stage's phase still expects "
                                  "(expect_tx first, then the copies)");
    if (m.unfenced != 0)
        sl_host_mbarrier_abort(m, "a bulk copy into a stage that a thread waited on and has not "
                                  "fenced the async proxy since (fence_async_proxy)");
    memset(dst, 0xa5, bytes);
    m.in_flight.push_back({dst, src, bytes});
    m.claimed += bytes;
}

/* The stages this thread waited on since its last fence.proxy.async. */
inline thread_local unsigned long long *sl_host_unfenced[8];
inline thread_local int sl_host_nunfenced;

/* mbarrier.try_wait.parity; lands the phase's copies first when it is the current one. */
static inline bool sl_host_mbarrier_try_wait_parity(unsigned long long *bar, unsigned parity) {
    std::lock_guard<std::mutex> lock(g_block->pipe);
    host_mbarrier &m = sl_host_mbarrier_of(bar);
    if (sl_host_mbarrier_unpack(*bar).phase == (parity & 1u) && !m.in_flight.empty()) {
        host_mbarrier_state st = sl_host_mbarrier_unpack(*bar);
        for (const host_bulk_copy &c : m.in_flight) {
            memcpy(c.dst, c.src, c.bytes);
            st.tx -= c.bytes;
        }
        m.in_flight.clear();
        m.claimed = 0;
        *bar = sl_host_mbarrier_pack(st);
        sl_host_mbarrier_settle(m);
    }
    if (sl_host_mbarrier_unpack(*bar).phase == (parity & 1u)) return false;
    m.unwaited = false;
    for (int k = 0; k < sl_host_nunfenced; k++)
        if (sl_host_unfenced[k] == bar) return true;
    if (sl_host_nunfenced == 8) {
        fprintf(stderr, "host emulation: a thread waited on more than 8 stages without a fence\n");
        abort();
    }
    sl_host_unfenced[sl_host_nunfenced++] = bar;
    m.unfenced++;
    return true;
}

/* A wait that cannot be satisfied would hang the test: give up after SL_HOST_WAIT_SECONDS. */
static inline void sl_host_mbarrier_wait_parity(unsigned long long *bar, unsigned parity) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(SL_HOST_WAIT_SECONDS);
    while (!sl_host_mbarrier_try_wait_parity(bar, parity)) {
        if (std::chrono::steady_clock::now() > give_up) {
            std::lock_guard<std::mutex> lock(g_block->pipe);
            char what[160];
            snprintf(what, sizeof what, "waited %d s on parity %u in vain (a wrong parity or stage?)",
                     SL_HOST_WAIT_SECONDS, parity & 1u);
            sl_host_mbarrier_abort(sl_host_mbarrier_of(bar), what);
        }
        sched_yield();
    }
}

/* fence.proxy.async: the thread's reads of the stages it waited on are ordered before later
 * copies into them. */
static inline void sl_host_fence_proxy_async() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (sl_host_nunfenced == 0) return;
    std::lock_guard<std::mutex> lock(g_block->pipe);
    for (int k = 0; k < sl_host_nunfenced; k++) {
        host_mbarrier &m = sl_host_mbarrier_of(sl_host_unfenced[k]);
        if (m.unfenced > 0) m.unfenced--; /* (0 when mbarrier.init came between) */
    }
    sl_host_nunfenced = 0;
}

#endif
