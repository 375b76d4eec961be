/* tile_states_test.cc — the look-back's tile states (kernels/sl_lookback.cuh, tile_states) on
 * the host, for every way a state travels with its status (8- and 16-byte words, tagged
 * words, separate arrays) and for states whose payload is shorter than their size:
 *   - an unpublished state reads as such; an aggregate and then an inclusive prefix read
 *     back with their values;
 *   - every tile's state lies inside the bytes the host reserves for it
 *     (sl_tile_states_bytes, kernels/sl_scratch.h): guard bytes after them stay untouched;
 *   - a tagged state whose words carry different statuses (an inclusive prefix half written
 *     over an aggregate) reads as unpublished, never as a mix of the two;
 *   - with a writer publishing while readers read the tiles it is at (host threads;
 *     host_device.h makes the state words host atomics, indivisible one 8-byte word at a time
 *     as on the device), a reader sees a tile unpublished, or its whole aggregate, or its
 *     whole inclusive prefix;
 *   - the look-back itself (lookback_exclusive; and a block's first look-back,
 *     lookback_window_block over three warps, then lookback_exclusive_from), run by 32 host
 *     threads as one warp (96 as a block) while other threads publish the predecessors'
 *     aggregates and some inclusive prefixes in random order and timing, returns exactly the
 *     left fold of the predecessors, for targets inside the first window, at window edges
 *     and several windows back;
 *   - the ordered look-back (lookback_exclusive_ordered, determinism: run_to_run), the same
 *     way with every predecessor's aggregate and some chunks' prefixes published, returns
 *     exactly the association it defines (computed here plainly: chunks of 32 scanned as
 *     Kogge-Stone's tree, chunk prefixes folded from the carry), and a chunk's last tile its
 *     chunk prefix; again with chunk totals (CHUNK_TOTALS: every chunk's last tile publishes
 *     its chunk's total, and a closing target publishes its own). The states are affine maps (exact
 *     modular arithmetic, associative, not commutative), so a state combined out of order or
 *     a window folded twice or skipped shows; and a segmented sum with its flag, whose states
 *     with the flag set absorb what lies left of them (the look-backs stop there).
 * Prints one line per state shape and exits 1 if anything failed. Needs no GPU. */
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "host_device.h"
#include "sl_lookback.cuh"

namespace {

/* A state of N words whose first PAYLOAD bytes carry data (all of them when PAYLOAD is 0). */
template <int N, int PAYLOAD = 0> struct state {
    uint32_t w[N];
};
template <int N, int P> struct with_payload : state<N> {
    static constexpr int PAYLOAD_BYTES = P;
};

int g_failures = 0;

void fail(const char *what, int bytes, long long tile, const char *why) {
    fprintf(stderr, "tile_states_test: %s (%d-byte state), tile %lld: %s\n", what, bytes, tile, why);
    g_failures++;
}

/* The value a tile publishes: distinct per tile, status and word. */
uint32_t word_of(long long tile, uint32_t status, int k) {
    uint64_t x = (uint64_t)tile * 0x9e3779b97f4a7c15ull + status * 0x632be59bd9b4e019ull + (uint64_t)k;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(x >> 32) | 1u; /* never 0: a zeroed word is not a value */
}

template <class S> S value_of(long long tile, uint32_t status) {
    S v;
    memset(&v, 0, sizeof v);
    const int pw = (sl::payload_of<S>::value + 3) / 4;
    for (int k = 0; k < pw; k++) v.w[k] = word_of(tile, status, k);
    return v;
}

template <class S> bool same_payload(const S &a, const S &b) {
    return memcmp(&a, &b, (size_t)sl::payload_of<S>::value) == 0;
}

template <class S> void check_shape(const char *what) {
    typedef sl::tile_states<S> states_t;
    const long long ntiles = 1000;
    const int bytes = (int)sizeof(S);
    const size_t region = (size_t)sl_tile_states_bytes(sizeof(S), (unsigned long long)ntiles);
    const size_t guard = 256;
    /* 16-byte aligned, as the scratch is (256-byte aligned on the device) */
    std::vector<uint4> mem((region + guard + 15) / 16);
    unsigned char *base = reinterpret_cast<unsigned char *>(mem.data());
    memset(base, 0, region);
    memset(base + region, 0xab, guard);
    const states_t states = {base, ntiles};

    /* one thread: unpublished, aggregate, inclusive prefix */
    for (long long t = 0; t < ntiles; t++) {
        uint32_t status = 99;
        S v;
        states.read(t, status, v);
        if (status != SL_STATUS_INVALID) fail(what, bytes, t, "an unpublished state reads as published");
        states.publish(t, SL_STATUS_AGGREGATE, value_of<S>(t, SL_STATUS_AGGREGATE));
        states.read(t, status, v);
        if (status != SL_STATUS_AGGREGATE || !same_payload(v, value_of<S>(t, SL_STATUS_AGGREGATE)))
            fail(what, bytes, t, "the aggregate does not read back");
    }
    for (long long t = 0; t < ntiles; t++) {
        states.publish(t, SL_STATUS_INCLUSIVE, value_of<S>(t, SL_STATUS_INCLUSIVE));
        uint32_t status;
        S v;
        states.read(t, status, v);
        if (status != SL_STATUS_INCLUSIVE || !same_payload(v, value_of<S>(t, SL_STATUS_INCLUSIVE)))
            fail(what, bytes, t, "the inclusive prefix does not read back");
    }
    for (size_t i = 0; i < guard; i++)
        if (base[region + i] != 0xab) {
            fail(what, bytes, ntiles - 1, "a state was written past the bytes the host reserves");
            break;
        }

    /* a tagged state half written over: its first word says inclusive, the rest aggregate */
    if constexpr (states_t::PACKING == 32) {
        memset(base, 0, region);
        const long long t = 7;
        states.publish(t, SL_STATUS_AGGREGATE, value_of<S>(t, SL_STATUS_AGGREGATE));
        uint64_t *word0 = reinterpret_cast<uint64_t *>(base) + (long long)states_t::TW * t;
        *word0 = ((uint64_t)SL_STATUS_INCLUSIVE << 32) | word_of(t, SL_STATUS_INCLUSIVE, 0);
        uint32_t status;
        S v;
        states.read(t, status, v);
        if (status != SL_STATUS_INVALID) fail(what, bytes, t, "a half-written tagged state is taken");
    }

    /* a writer publishing while readers read the tiles it is at (a fresh region each round:
       the device never clears states while a kernel reads them) */
    std::atomic<long long> seen_aggregate{0}, seen_inclusive{0};
    for (int round = 0; round < 30; round++) {
        memset(base, 0, region);
        std::atomic<bool> done{false};
        std::atomic<long long> cursor{0};
        std::vector<std::thread> readers;
        for (int r = 0; r < 3; r++)
            readers.emplace_back([&, r] {
                uint64_t x = 0x1234567ull + (uint64_t)(round * 3 + r);
                while (!done.load(std::memory_order_acquire)) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    long long t = cursor.load(std::memory_order_relaxed) - (long long)((x >> 33) % 3);
                    if (t < 0) t = 0;
                    uint32_t status;
                    S v;
                    states.read(t, status, v);
                    if (status == SL_STATUS_INVALID) continue;
                    if (status != SL_STATUS_AGGREGATE && status != SL_STATUS_INCLUSIVE)
                        fail(what, bytes, t, "a status that was never published");
                    else if (!same_payload(v, value_of<S>(t, status)))
                        fail(what, bytes, t, "a state read with words of another status or tile");
                    else
                        (status == SL_STATUS_AGGREGATE ? seen_aggregate : seen_inclusive)++;
                }
            });
        for (long long t = 0; t < ntiles; t++) {
            cursor.store(t, std::memory_order_relaxed);
            states.publish(t, SL_STATUS_AGGREGATE, value_of<S>(t, SL_STATUS_AGGREGATE));
            for (volatile int spin = 0; spin < 50; spin++) {
            }
            states.publish(t, SL_STATUS_INCLUSIVE, value_of<S>(t, SL_STATUS_INCLUSIVE));
        }
        done.store(true, std::memory_order_release);
        for (auto &th : readers) th.join();
    }
    printf("%-40s %2d bytes, payload %2d, packing %2d: %lld aggregates and %lld inclusive prefixes read while written\n",
           what, bytes, sl::payload_of<S>::value, states_t::PACKING, seen_aggregate.load(),
           seen_inclusive.load());
}

/* ---- the look-back against racing publishers -------------------------------------------- */

/* The states the look-backs are checked with, each a "kind": its type S, combine, identity
 * and a random value. affine<N>: word pairs (a, b) are the map x -> a*x + b mod 2^32,
 * combined left then right; an odd last word is a sum. */
template <int N> struct affine {
    typedef state<N> S;
    S operator()(const S &l, const S &r) const {
        S o;
        for (int k = 0; k + 1 < N; k += 2) {
            o.w[k] = l.w[k] * r.w[k];
            o.w[k + 1] = r.w[k] * l.w[k + 1] + r.w[k + 1];
        }
        if (N % 2) o.w[N - 1] = l.w[N - 1] + r.w[N - 1];
        return o;
    }
    static S identity() {
        S v;
        for (int k = 0; k < N; k++) v.w[k] = (k % 2 == 0 && k + 1 < N) ? 1u : 0u;
        return v;
    }
    template <class R> static S random(R next) {
        S v;
        for (int k = 0; k < N; k++) v.w[k] = next() | (k % 2 == 0 ? 1u : 0u);
        return v;
    }
};

/* A segmented u32 sum with its segment flag, laid out as the generator does (value, flag,
 * padding: 5 of 8 bytes travel; PACKING 16): not commutative; a state with its flag set
 * absorbs what lies left of it (sl_lookback.cuh, absorbs), so the look-backs stop there. */
struct flagged_state {
    uint32_t v;
    uint8_t flag, pad[3];
    static constexpr int PAYLOAD_BYTES = 5;
};
struct flagged_sum {
    typedef flagged_state S;
    S operator()(const S &l, const S &r) const {
        return {r.flag ? r.v : l.v + r.v, (uint8_t)(l.flag | r.flag), {0, 0, 0}};
    }
    static constexpr bool ABSORBS = true;
    static bool absorbs(const S &s) { return s.flag != 0; }
    static S identity() { return {0, 0, {0, 0, 0}}; }
    template <class R> static S random(R next) {
        const uint32_t x = next();
        return {x, (uint8_t)(x % 5u == 0), {0, 0, 0}};
    }
};

/* Runs `body` as the NT threads of one block, NT / 32 warps (host_device.h's exchange and
 * barriers). */
template <int NT = 32, class F> void run_block(F body) {
    static_assert(NT % 32 == 0 && NT <= 1024, "whole warps");
    host_block b;
    pthread_barrier_init(&b.all, nullptr, NT);
    for (int w = 0; w < NT / 32; w++) pthread_barrier_init(&b.warp[w], nullptr, 32);
    g_block = &b;
    std::vector<std::thread> ts;
    for (int x = 0; x < NT; x++)
        ts.emplace_back([&body, x] {
            threadIdx = {(unsigned)x, 0, 0};
            blockDim = {(unsigned)NT, 1, 1};
            body();
        });
    for (std::thread &t : ts) t.join();
    g_block = nullptr;
    pthread_barrier_destroy(&b.all);
    for (int w = 0; w < NT / 32; w++) pthread_barrier_destroy(&b.warp[w]);
}

template <class F> void run_warp(F warp) { run_block<32>(warp); }

/* A stream of random words (an LCG's high halves) and, drawn from it first, `ntiles` random
 * tile aggregates of KIND with their inclusive prefixes (the left fold). */
template <class KIND> struct random_tiles {
    typedef typename KIND::S S;
    uint64_t x;
    std::vector<S> agg, prefix;
    uint32_t next() {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return (uint32_t)(x >> 32);
    }
    S draw() {
        return KIND::random([this] { return next(); });
    }
    random_tiles(long long ntiles, uint64_t seed) : x(seed), agg((size_t)ntiles), prefix((size_t)ntiles) {
        const KIND op;
        for (size_t j = 0; j < agg.size(); j++) {
            agg[j] = draw();
            prefix[j] = j == 0 ? agg[0] : op(prefix[j - 1], agg[j]);
        }
    }
};

/* The tile states of `ntiles` tiles over bytes of their own (sl_tile_states_bytes). */
template <class S> struct states_region {
    size_t bytes;
    std::vector<uint4> mem;
    sl::tile_states<S> states;
    explicit states_region(long long ntiles)
        : bytes((size_t)sl_tile_states_bytes(sizeof(S), (unsigned long long)ntiles)),
          mem((bytes + 15) / 16), states{reinterpret_cast<unsigned char *>(mem.data()), ntiles} {}
    void clear() { memset(states.base, 0, bytes); } /* every state unpublished */
};

/* How check_lookback's targets find their prefix: a warp's look-back (lookback_exclusive or,
 * ORDERED, lookback_exclusive_ordered), or a block's first one as the overlapped loop does it
 * (lookback_window_block by BLOCK_NT threads, then lookback_exclusive_from left of its window
 * when it held no inclusive state). */
enum class finder { warp, ordered, ordered_totals, block };
constexpr int BLOCK_NT = 96;

template <class KIND, finder HOW> void check_lookback(const char *what) {
    constexpr bool TOTALS = HOW == finder::ordered_totals;
    constexpr bool ORDERED = HOW == finder::ordered || TOTALS;
    typedef typename KIND::S S;
    typedef sl::tile_states<S> states_t;
    const KIND op;
    const S identity = KIND::identity();
    const long long ntiles = 700;
    random_tiles<KIND> r(ntiles, 0x5eed0000ull + (uint64_t)sizeof(S) * 2 + ORDERED);
    const std::vector<S> &agg = r.agg, &prefix = r.prefix;
    auto next = [&r] { return r.next(); };
    /* ORDERED: the association lookback_exclusive_ordered defines, computed here the plain
       way: chunks of 32 tiles scanned as Kogge-Stone's tree does (step d: lane l >= d takes
       lane l - d's value left of its own), chunk prefixes Q folded left to right from the
       carry; `excl` is each tile's exclusive prefix, `chunk_q` each chunk's Q. */
    const S carry = KIND::random(next);
    std::vector<S> excl((size_t)ntiles), chunk_q((size_t)(ntiles + 31) / 32),
        chunk_total((size_t)(ntiles + 31) / 32);
    for (long long c = 0; c * 32 < ntiles; c++) {
        S lanes[32];
        for (int l = 0; l < 32; l++) lanes[l] = c * 32 + l < ntiles ? agg[(size_t)(c * 32 + l)] : identity;
        for (int d = 1; d < 32; d *= 2) {
            S before[32];
            for (int l = 0; l < 32; l++) before[l] = lanes[l];
            for (int l = d; l < 32; l++) lanes[l] = op(before[l - d], before[l]);
        }
        const S q_before = c == 0 ? carry : chunk_q[(size_t)c - 1];
        for (int l = 0; l < 32 && c * 32 + l < ntiles; l++)
            excl[(size_t)(c * 32 + l)] = l == 0 ? q_before : op(q_before, lanes[l - 1]);
        chunk_q[(size_t)c] = op(q_before, lanes[31]);
        chunk_total[(size_t)c] = lanes[31];
    }
    states_region<S> region(ntiles);
    const states_t &states = region.states;
    /* in the first window, at its edge, after it, several windows back (a block's window:
       BLOCK_NT or twice that many states) */
    const long long targets[] = {1, 2, 31, 2 * 32, 2 * 32 + 1, 4 * 32, 4 * 32 + 1, 192, 193, 300, 699,
                                 0, 63, 20 * 32 + 31};
    for (int some_inclusive = 0; some_inclusive < 2; some_inclusive++)
    for (long long target : targets) {
        if (target == 0 && !ORDERED) continue; /* the fast look-back is never asked for tile 0 */
        region.clear();
        /* two publishers, each over every other predecessor in a shuffled order: an
           aggregate, then (in the second pass) for some an inclusive prefix; tile 0
           publishes its prefix only. With aggregates alone the look-back walks back window
           after window to tile 0. */
        std::vector<long long> order;
        for (long long j = 0; j < target; j++) order.push_back(j);
        for (size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[next() % i]);
        std::vector<std::thread> publishers;
        for (int p = 0; p < 2; p++)
            publishers.emplace_back([&, p] {
                uint64_t y = 0xabcdefull + (uint64_t)p + (uint64_t)target * 7;
                for (size_t i = (size_t)p; i < order.size(); i += 2) {
                    const long long j = order[i];
                    y = y * 6364136223846793005ull + 1442695040888963407ull;
                    for (volatile unsigned spin = 0; spin < (unsigned)(y >> 56); spin++) {
                    }
                    if (ORDERED) { /* every tile its aggregate, some chunks' last tiles Q */
                        states.publish(j, SL_STATUS_AGGREGATE, agg[(size_t)j]);
                        if (TOTALS && j % 32 == 31) /* and every chunk's last its total first */
                            states.publish(j, SL_STATUS_TOTAL, chunk_total[(size_t)j / 32]);
                        if (some_inclusive && j % 32 == 31 && (y >> 40) % 3 != 0)
                            states.publish(j, SL_STATUS_INCLUSIVE, chunk_q[(size_t)j / 32]);
                        continue;
                    }
                    if (j == 0) {
                        states.publish(0, SL_STATUS_INCLUSIVE, prefix[0]);
                        continue;
                    }
                    states.publish(j, SL_STATUS_AGGREGATE, agg[(size_t)j]);
                    if (some_inclusive && (y >> 40) % 3 == 0)
                        states.publish(j, SL_STATUS_INCLUSIVE, prefix[(size_t)j]);
                }
            });
        const int nt = HOW == finder::block ? BLOCK_NT : 32;
        std::vector<S> got((size_t)nt);
        if constexpr (HOW == finder::block) {
            S warp_vals[BLOCK_NT / 32];
            unsigned warp_inclusive[BLOCK_NT / 32];
            run_block<BLOCK_NT>([&] {
                S window;
                S r = identity;
                if (sl::lookback_window_block<BLOCK_NT>(states, target, identity, op, warp_vals,
                                                        warp_inclusive, window))
                    r = window;
                else if (threadIdx.x < 32) /* the look-back warp goes on alone */
                    r = op(sl::lookback_exclusive_from(
                               states, sl::before_block_window<S, BLOCK_NT>(target), identity, op),
                           window);
                else
                    r = prefix[(size_t)target - 1]; /* the other warps are done */
                got[threadIdx.x] = r;
            });
        } else if constexpr (ORDERED) {
            /* the look-back before the tile's aggregate, then the chunk's Q from it */
            std::vector<S> closed_q((size_t)nt);
            const bool last = target % 32 == 31;
            run_warp([&] {
                sl::ordered_chunk_close<S> close;
                got[threadIdx.x] = sl::lookback_exclusive_ordered<TOTALS>(
                    states, target, [&] { return carry; }, identity, op, close, agg[(size_t)target]);
                if (last) closed_q[threadIdx.x] = sl::ordered_chunk_inclusive(close, agg[(size_t)target], op);
            });
            for (int lane = 0; lane < nt; lane++) {
                if (last && memcmp(&closed_q[(size_t)lane], &chunk_q[(size_t)target / 32], sizeof(S)) != 0) {
                    fail(what, (int)sizeof(S), target, "the chunk's Q is not the fixed association's");
                    break;
                }
            }
            if (TOTALS && last) { /* the chunk's total, published by the look-back itself */
                uint32_t status;
                S total;
                states.read(target, status, total);
                const S want_total = states_t::as_read(chunk_total[(size_t)target / 32]);
                if (status != SL_STATUS_TOTAL || memcmp(&total, &want_total, sizeof(S)) != 0)
                    fail(what, (int)sizeof(S), target, "the closing tile did not publish its chunk's total");
            }
        } else {
            run_warp([&] { got[threadIdx.x] = sl::lookback_exclusive(states, target, identity, op); });
        }
        for (auto &t : publishers) t.join();
        const S &want = ORDERED ? excl[(size_t)target] : prefix[(size_t)target - 1];
        for (int lane = 0; lane < nt; lane++)
            if (memcmp(&got[(size_t)lane], &want, sizeof(S)) != 0) {
                fail(what, (int)sizeof(S), target,
                     ORDERED ? "the ordered look-back's prefix is not the fixed association's"
                             : "the look-back's prefix is not the left fold of the predecessors");
                break;
            }
    }
    printf("%-40s %2d bytes, packing %2d, %s look-back: %zu targets, twice\n", what, (int)sizeof(S),
           states_t::PACKING,
           HOW == finder::ordered          ? "ordered"
           : HOW == finder::ordered_totals ? "ordered (chunk totals)"
           : HOW == finder::block          ? "block's first"
                                           : "fast",
           sizeof targets / sizeof targets[0]);
}

template <class KIND> void check_lookbacks(const char *what) {
    check_lookback<KIND, finder::warp>(what);
    check_lookback<KIND, finder::ordered>(what);
    check_lookback<KIND, finder::ordered_totals>(what);
    check_lookback<KIND, finder::block>(what);
}

} /* namespace */

int main() {
    check_shape<state<1>>("one word");
    check_shape<state<2>>("two words");
    check_shape<state<3>>("three words");
    check_shape<with_payload<2, 5>>("two words, 5 carry data");
    check_shape<with_payload<4, 12>>("four words, 12 carry data");
    check_shape<state<4>>("four words (tagged)");
    check_shape<state<5>>("five words (tagged, odd)");
    check_shape<state<8>>("eight words (tagged)");
    check_shape<with_payload<10, 28>>("ten words, 28 carry data (tagged)");
    check_shape<state<9>>("nine words (separate arrays)");
    check_shape<state<16>>("sixteen words (separate arrays)");
    check_lookbacks<affine<1>>("one word");
    check_lookbacks<flagged_sum>("a flagged sum (5 of 8 bytes)");
    check_lookbacks<affine<2>>("two words");
    check_lookbacks<affine<3>>("three words");
    check_lookbacks<affine<4>>("four words (tagged)");
    check_lookbacks<affine<5>>("five words (tagged, odd)");
    check_lookbacks<affine<8>>("eight words (tagged)");
    check_lookbacks<affine<9>>("nine words (separate arrays)");
    if (g_failures) {
        fprintf(stderr, "tile_states_test: %d failures\n", g_failures);
        return 1;
    }
    return 0;
}
