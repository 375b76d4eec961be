/* sl_tile.cuh — the persistent tile loop of the generated fused kernels, as templates: take a
 * tile, bring its inputs in (kernels/sl_pipe.cuh), compute the stages' expressions, reduce
 * each look-back phase's states, find the tile's prefix by decoupled look-back
 * (kernels/sl_lookback.cuh), compute the per-row outputs and store them. core/cuda/codegen.c
 * emits only what differs between groups (codegen.h describes the kernel's shape):
 *
 *   struct SlArgs           the kernel's one parameter (slots as codegen.h lists them)
 *   S<k>, Op<k>, Phase<k>   each look-back phase's state tuple, its combine, and its traits:
 *                             typedef S, Op; ORDERED (the ordered look-back), CHUNKS (the
 *                             same look-back in the large overlapped kernel), CHUNK_TOTALS
 *                             (that look-back folds the chunks' published totals), CARRY_OFFSET,
 *                             COUNTS (it holds the compaction's kept-row count, read by
 *                             count(s)); identity(); reset(carry) (per-batch resets)
 *   struct Params           the pipeline's params, loaded once per block from SlArgs
 *   struct Tile : Params    one thread's rows of a tile: the column registers and, as member
 *                           functions, load_inputs, maps(level), element<FULL>(S<k> &, i) and
 *                           outputs(a, i, before, run, e, tile_excl) per phase, store<BAR>;
 *                           PAIRS (then pairs_fold() and pairs_outputs(run) take a whole
 *                           tile's rows two a word); sl::tile_rows supplies rows/tile/first
 *                           and head_bit(i)
 *   struct Kernel           the instantiation: block, items, tile, buf and stages; phases,
 *                           the loop's shape (overlapped, aggregate, commutative, runs),
 *                           compacts, offsets and offsets_input; the phase_list; and
 *                           issue_loads (thread 0 starts a tile's input copies into a stage)
 *   sl_fused / sl_fused_segindex   one-line kernels calling fused_kernel<Kernel> and
 *                           segment_index<Kernel>
 *
 * A group ending in a reduce (core/cuda/codegen.c, analyse_reduce) is the same loop: its
 * last phase's outputs write each row that closes a segment straight to its place (store<BAR>
 * is empty); a kernel of its own (sl_reduce_close, generated) then writes what the batch's
 * end or the flush closes, except after the aggregate loop, whose last block does it
 * (Kernel::closes).
 *
 * Two loop shapes with look-back: two_stage_loop (any number of chained look-back phases, two
 * shared-memory stages) and overlapped_loop (one phase on sm_90+: a look-back warp beside the
 * row-owning threads; why and how, below). Three without, for a group that is a reduce and
 * nothing else: aggregate_loop (no segments), segments_warp_loop (offsets segments) and
 * runs_warp_loop (runs of keys), the last two with a tile per warp. Everything is inline, so
 * each kernel is one function after instantiation, as if written out by hand. */
#ifndef SL_TILE_CUH
#define SL_TILE_CUH

#include "sl_lookback.cuh"
#include "sl_pipe.cuh"
#include "sl_trace.cuh"

namespace sl {

template <class... P> struct phase_list {};

/* A tile index from the atomic counter at the start of scratch (kernels/sl_scratch.h). */
__device__ __forceinline__ long long take_tile(unsigned char *scratch) {
    return (long long)atomicAdd((unsigned long long *)scratch, 1ull);
}

/* The offsets-segment index in scratch, after the tile counter (kernels/sl_scratch.h): entry
 * t is the first offsets entry at or after tile t's first row, for t in [0, ntiles]
 * (segment_index writes it). */
__device__ __forceinline__ unsigned long long *segment_index_entries(unsigned char *scratch) {
    return reinterpret_cast<unsigned long long *>(scratch + SL_SCRATCH_ALIGN);
}

/* What a thread knows of the tile it works on; the generated Tile derives from it. */
template <int ITEMS> struct tile_rows {
    /* head bits (offsets segments, runs of keys) take ITEMS + 1 bits of one 64-bit word; a
       group without them may take more items (the checks below fire only where used) */
    static constexpr bool HEADS_FIT = ITEMS < 64;
    long long rows = 0, tile = 0, tile_first = 0, first = 0, tile_len = 0;
    /* offsets segments: bit j says whether the thread's row j starts a segment, for j in
       [0, ITEMS] (bit ITEMS: the next thread's first row, 0 past the tile), read once from
       the bitmap by use_heads: the per-row tests are then a shift, not a shared load */
    unsigned long long head_window = 0;
    /* offsets segments: the offsets, their segment count, and the entries [seg_lo, seg_hi)
       that fall inside the tile (sl_fused_segindex) */
    const long long *offs = nullptr;
    long long nseg = 0, seg_lo = 0, seg_hi = 0;
    /* whether the thread's item i (0 <= i <= ITEMS) starts a segment (offsets segments) */
    __device__ __forceinline__ bool head_bit(int i) const { return (head_window >> i) & 1ull; }
    /* This thread's window of the tile's head bitmap `h` (built by build_heads). */
    __device__ __forceinline__ void use_heads(const uint32_t *h) {
        static_assert(HEADS_FIT, "a thread's head bits and the next row's fit one 64-bit word");
        const int r0 = slot * ITEMS, w0 = r0 >> 5, shift = r0 & 31;
        const int words = (int)(tile_len >> 5);
        const unsigned long long lo = h[w0];
        const unsigned long long mid = w0 + 1 < words ? h[w0 + 1] : 0u;
        unsigned long long window = (lo | (mid << 32)) >> shift;
        if (shift > 0 && w0 + 2 < words) window |= (unsigned long long)h[w0 + 2] << (64 - shift);
        head_window = window;
    }
    /* the batch's rows from the thread's first item on, capped at ITEMS + 1: item i is in the
       batch when i < live_items and is its last row when i == live_items - 1, so the per-row
       tests compare a small int, not 64-bit row numbers */
    int live_items = 0;
    /* the thread's place among the threads sharing the tile: its rows start ITEMS * slot rows
       into the tile (threadIdx.x where a block shares a tile, the lane where a warp has its
       own: segments_warp_loop) */
    int slot = 0;
    __device__ __forceinline__ void at(long long rows_, long long tile_, long long tile_rows_) {
        at(rows_, tile_, tile_rows_, (int)threadIdx.x);
    }
    __device__ __forceinline__ void at(long long rows_, long long tile_, long long tile_rows_,
                                       int slot_) {
        place(rows_, tile_, slot_, tile_ * tile_rows_, tile_rows_, 0);
    }
    /* A tile of several rounds (Kernel::rounds, overlapped_loop): the block's threads take
       the round_rows rows from round * round_rows on in the tile as if they were a tile of
       their own (tile_first, tile_len and the stores are the round's), reading the staged
       columns round_first rows into the stage. */
    int round_first = 0;
    __device__ __forceinline__ void at_round(long long rows_, long long tile_, long long tile_rows_,
                                             int round, long long round_rows) {
        const int skip = (int)(round * round_rows);
        place(rows_, tile_, (int)threadIdx.x, tile_ * tile_rows_ + skip, round_rows, skip);
    }
    /* the thread's rows: slot_'s ITEMS of the len_ rows from first_of_tile on, which are
       round_first_ rows into tile tile_'s stage */
    __device__ __forceinline__ void place(long long rows_, long long tile_, int slot_,
                                          long long first_of_tile, long long len_, int round_first_) {
        rows = rows_;
        tile = tile_;
        tile_len = len_;
        tile_first = first_of_tile;
        slot = slot_;
        round_first = round_first_;
        first = tile_first + (long long)slot_ * ITEMS;
        const long long left = rows_ - first;
        live_items = left <= 0 ? 0 : left <= ITEMS ? (int)left : ITEMS + 1;
    }
    /* offsets segments: bit i says whether the thread's item i ends its segment (set by
       segments_at): the next row starts one (the next row's head bit, or for the tile's last
       row the next tile's first offsets entry) or the row ends the batch */
    unsigned long long ending = 0;
    /* offsets segments: where the tile's segments are (after build_heads' index is known),
       and which of the thread's items end one (after use_heads) */
    template <class A>
    __device__ __forceinline__ void segments_at(const A &a, int offsets_input) {
        const unsigned long long *segidx = segment_index_entries(a.scratch);
        segments_at(a, offsets_input, (long long)segidx[tile], (long long)segidx[tile + 1]);
    }
    /* ... given the tile's offsets entries [lo, hi) (the segment index at the tile and the
       next one) */
    template <class A>
    __device__ __forceinline__ void segments_at(const A &a, int offsets_input, long long lo,
                                                long long hi) {
        static_assert(HEADS_FIT, "a thread's head bits and the next row's fit one 64-bit word");
        offs = (const long long *)a.in[offsets_input];
        nseg = a.nsegments;
        seg_lo = lo;
        seg_hi = hi;
        constexpr unsigned long long ALL = (1ull << ITEMS) - 1;
        unsigned long long m = (head_window >> 1) & ALL;
        if (slot * ITEMS + ITEMS >= (int)tile_len) {
            m &= ~(1ull << (ITEMS - 1));
            if (seg_hi < nseg && offs[seg_hi] == first + ITEMS) m |= 1ull << (ITEMS - 1);
        }
        if (live_items <= 0) m = 0;
        else if (live_items <= ITEMS) m = (m & ((1ull << live_items) - 1)) | (1ull << (live_items - 1));
        ending = m;
    }
    /* runs of keys (run_heads): head_window bit i (0 <= i <= ITEMS) says whether the thread's
       row i starts a run after a row of another key (a key change, which closes the run
       before it), `ending` which items end a run that a later row of the batch closes, and
       run_base the key changes before the thread's first row in the batch (set by the loop) */
    long long run_base = 0;
    __device__ __forceinline__ int run_changes() const {
        static_assert(HEADS_FIT, "a thread's head bits and the next row's fit one 64-bit word");
        return __popcll(head_window & ((1ull << ITEMS) - 1));
    }
    /* The place of the run whose last row is item i: the key changes up to and including the
       row after it, which closes it (the carry's open run, closed by row 0, is place 0). */
    __device__ __forceinline__ long long run_of(int i) const {
        return run_base + __popcll(head_window & ((2ull << i) - 1));
    }
    /* A reduce over offsets segments: the segment whose last row is the thread's item i, or
     * -1 (a bit test for a row inside a segment, the common case). */
    __device__ __forceinline__ long long segment_ending(int i) const {
        return (ending >> i) & 1ull ? segment_of(i) : -1;
    }
    /* offsets segments, where the tile's offsets entries are all different (no empty segment
       starts inside it) and the loop ranked them (rank_segments): the entry before the
       thread's first row, so that an item's segment is it plus the thread's heads up to the
       item, as a run's place is (run_of) */
    bool ranked = false;
    long long seg_base = 0;
    __device__ __forceinline__ void rank_segments(long long base) {
        ranked = true;
        seg_base = base;
    }
    /* The segment the thread's item i (in the batch) belongs to: the last one starting at or
     * before its row (empty segments start there too but end before it): counted from the
     * heads where the tile is ranked, else by binary search among the tile's offsets
     * entries. */
    __device__ __forceinline__ long long segment_of(int i) const {
        if (ranked) return seg_base + __popcll(head_window & ((2ull << i) - 1));
        const long long r = first + i;
        long long lo = seg_lo > 0 ? seg_lo - 1 : 0, hi = seg_hi < nseg ? seg_hi : nseg;
        while (hi - lo > 1) { /* offs[lo] <= r: the last k in [lo, hi) with offs[k] <= r */
            const long long mid = lo + (hi - lo) / 2;
            if (offs[mid] <= r) lo = mid;
            else hi = mid;
        }
        return lo;
    }
};

/* The offsets-segment index (helper kernel sl_fused_segindex): for every tile t in [0,
 * ntiles], the first offsets entry at or after the tile's first row, by binary search, into
 * scratch after the tile counter. The main kernel then reads only the offsets inside a tile. */
template <class K> __device__ __forceinline__ void segment_index(const typename K::Args &a) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t > a.ntiles) return;
    const long long *offs = (const long long *)a.in[K::offsets_input];
    const long long target = t * (long long)K::tile;
    long long lo = 0, hi = a.nsegments;
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (offs[mid] < target) lo = mid + 1;
        else hi = mid;
    }
    segment_index_entries(a.scratch)[t] = (unsigned long long)lo;
}

/* The segment heads of a tile (offsets segments): a bitmap of TILE bits in shared memory set
 * from the offsets inside the tile. BAR is the barrier among the row-owning threads (0:
 * __syncthreads). */
template <class K, int BAR>
__device__ __forceinline__ void build_heads(uint32_t *heads, const typename K::Args &a,
                                            long long tile_first, long long j0, long long j1) {
    for (int w = threadIdx.x; w < K::tile / 32; w += K::block) heads[w] = 0;
    block_sync<BAR, K::block>();
    {
        const long long *offs = (const long long *)a.in[K::offsets_input];
        for (long long j = j0 + threadIdx.x; j < j1; j += K::block) {
            const long long r = offs[j] - tile_first;
            if (r >= 0 && r < K::tile) atomicOr(&heads[r >> 5], 1u << (r & 31));
        }
    }
    block_sync<BAR, K::block>();
}

/* The tile's offsets entries [j0, j1) from the segment index (sl_fused_segindex). */
template <class K>
__device__ __forceinline__ void tile_segments(const typename K::Args &a, long long tile,
                                              long long &j0, long long &j1) {
    const unsigned long long *segidx = segment_index_entries(a.scratch);
    j0 = (long long)segidx[tile];
    j1 = (long long)segidx[tile + 1];
}

template <class K, int BAR>
__device__ __forceinline__ void build_heads(uint32_t *heads, const typename K::Args &a, long long tile,
                                            long long tile_first) {
    long long j0, j1;
    tile_segments<K>(a, tile, j0, j1);
    build_heads<K, BAR>(heads, a, tile_first, j0, j1);
}

/* A stage's copy of its tile's segment index entries (issue_tile): the 32 bytes on a 16-byte
 * boundary that hold entries `tile` and `tile` + 1, as a bulk copy needs them. */
struct __align__(16) staged_index {
    long long entry[4];
};

/* Thread 0, once it has taken `tile` into stage `s`: the copies of its inputs (the generated
 * issue_loads) and, for offsets segments, of its segment index entries (tile_segments) into
 * `segs` (the index is 16-byte aligned in scratch, and scratch goes on past its last entry),
 * counted on the same stage barrier, armed for them first so that the phase cannot complete
 * without them. So no thread waits on a read of the index between the tile's barriers: the
 * entries arrive with the tile (staged_segments). */
template <class K, int STAGES>
__device__ __forceinline__ void issue_tile(tile_queue<STAGES> &queue, const typename K::Args &a,
                                           uint4 *smem, long long tile, int s, staged_index &segs) {
    if constexpr (K::offsets) {
        queue_expect_more(queue, s, 32u);
        K::issue_loads(queue, a, smem, tile, s);
        bulk_load(queue, s, segs.entry, segment_index_entries(a.scratch) + (tile & ~1ll), 32u);
    } else {
        (void)segs;
        K::issue_loads(queue, a, smem, tile, s);
    }
}

/* The tile's offsets entries [j0, j1) from its stage's copy of the index (issue_tile). */
__device__ __forceinline__ void staged_segments(const staged_index &segs, long long tile,
                                                long long &j0, long long &j1) {
    const int at = (int)(tile & 1);
    j0 = segs.entry[at];
    j1 = segs.entry[at + 1];
}

/* What a warp's edge lanes need from outside the warp: the inputs that make the key
 * (RunKeys::row_t) at lane 0's row before its first and lane 31's row after its last (the
 * tile's edges). Loaded with the tile's rows, a tile ahead (runs_warp_loop), and made into
 * keys (RunKeys::make) only when the tile is worked on: a key made at the load waited there
 * for its bytes, a round trip to memory every tile. */
template <class KY> struct run_edges {
    typename KY::row_t before, after;
};

template <class KY, int ITEMS, class A>
__device__ __forceinline__ run_edges<KY> run_edge_rows(const A &a, long long rows, long long tile_first,
                                                       int slot) {
    run_edges<KY> e = {};
    const int lane = (int)(threadIdx.x & 31);
    const long long first = tile_first + (long long)slot * ITEMS;
    if (lane == 0 && first > 0 && first < rows) e.before = KY::load(a, first - 1);
    if (lane == 31 && first + ITEMS < rows) e.after = KY::load(a, first + ITEMS);
    return e;
}

/* Runs of keys (runs_warp_loop): the lane's head bits and ending items (tile_rows) from its
 * keys `c` and the keys of the rows around them: the row before its first and the row after
 * its last, from the neighbouring lanes by shuffles (every lane shuffles) and at the warp's
 * edges `edge_before` and `edge_after` (made from run_edge_rows' loads); for the batch's row
 * 0 the carry's open run. KY is the generated RunKeys: the key's type and its change test as
 * the state's combine makes it; `c` the key column's items (sl_items.cuh). */
template <class KY, int ITEMS, class S, class Keys>
__device__ __forceinline__ void run_heads(tile_rows<ITEMS> &t, const Keys &c, const S &carry,
                                          typename KY::key_t edge_before,
                                          typename KY::key_t edge_after) {
    static_assert(tile_rows<ITEMS>::HEADS_FIT, "a thread's head bits and the next row's fit one 64-bit word");
    typedef typename KY::key_t T;
    const int live = t.live_items, lane = (int)(threadIdx.x & 31);
    T before = shfl_up<T, words_of<T>::value>(c[ITEMS - 1], 1);
    T after = shfl_idx<T>(c[0], (lane + 1) & 31);
    if (lane == 0) before = edge_before;
    if (lane == 31) after = edge_after;
    unsigned long long h = 0;
    if (live > 0) {
        if (t.first == 0) h = KY::carry_differs(carry, c[0]);
        else h = KY::differs(before, c[0]);
#pragma unroll
        for (int i = 1; i < ITEMS; i++) h |= (unsigned long long)KY::differs(c[i - 1], c[i]) << i;
        if (live > ITEMS) h |= (unsigned long long)KY::differs(c[ITEMS - 1], after) << ITEMS;
        else h &= (1ull << live) - 1; /* rows past the batch change nothing */
    }
    t.head_window = h;
    t.ending = h >> 1; /* the batch's last run stays open: the close kernel writes it */
}

/* Whether the thread's tile (its round, in a tile of several) lies wholly inside the batch:
 * then the generated element<true> knows every row is there, and the fields an element sets
 * to constants fold into the combines (a reduce by key's row: 6 of its 7 fields). Only the
 * batch's last tile is partial, so the two instantiations cost code size, not divergence. */
template <class K> __device__ __forceinline__ bool whole_tile(const typename K::Tile &t) {
    return t.tile_first + K::round_rows <= t.rows;
}

/* Each thread's items of phase P folded onto FOLDS states, item i onto folds[i % FOLDS] (more
 * than one only where the operators do not care about the order of rows: independent chains
 * of combines). */
template <class K, class P, bool FULL, int FOLDS>
__device__ __forceinline__ void fold_items_into(const typename K::Tile &t, typename P::S (&folds)[FOLDS]) {
    const typename P::Op op;
#pragma unroll
    for (int i = 0; i < K::items; i++) {
        typename P::S e = P::identity();
        t.template element<FULL>(e, i);
        folds[i % FOLDS] = op(folds[i % FOLDS], e);
    }
}

/* Each thread's fold of its items of phase P, onto `acc` (a whole tile's rows of a group
 * whose Tile works two rows a word, Tile::PAIRS, by Tile::pairs_fold). */
template <class K, class P, bool FULL>
__device__ __forceinline__ typename P::S fold_items(const typename K::Tile &t, typename P::S acc) {
    if constexpr (FULL && K::Tile::PAIRS) return typename P::Op()(acc, t.pairs_fold());
    typename P::S folds[1] = {acc};
    fold_items_into<K, P, FULL, 1>(t, folds);
    return folds[0];
}

template <class K, class P>
__device__ __forceinline__ typename P::S fold_items(const typename K::Tile &t, typename P::S acc) {
    return whole_tile<K>(t) ? fold_items<K, P, true>(t, acc) : fold_items<K, P, false>(t, acc);
}

/* The block scan of thread folds from the identity: no row sets a batch constant, so those
 * fields are the identity's in every fold and only the payload moves (sl_block.cuh). */
template <class K, class P, int BAR>
__device__ __forceinline__ void scan_thread_folds(block_scan_storage<typename P::S, K::block> &storage,
                                                  const typename P::S &agg,
                                                  typename P::S &thread_excl,
                                                  typename P::S &block_agg) {
    typedef typename P::S S;
    block_exclusive_scan<S, K::block, BAR, typename P::Op, payload_words_of<S>::value>(
        storage, agg, P::identity(), typename P::Op(), thread_excl, block_agg);
}

/* The tile's reduction of phase P: each thread folds its items, the block scans the thread
 * totals (barrier BAR). */
template <class K, class P, int BAR>
__device__ __forceinline__ void tile_reduce(const typename K::Tile &t,
                                            block_scan_storage<typename P::S, K::block> &storage,
                                            typename P::S &thread_excl, typename P::S &block_agg) {
    scan_thread_folds<K, P, BAR>(storage, fold_items<K, P>(t, P::identity()), thread_excl,
                                 block_agg);
}

/* The identity, or where `cond` holds (tile 0's publishing thread) the state carried from the
 * previous batch with the per-batch resets applied. */
template <class K, class P>
__device__ __forceinline__ typename P::S carry_in(const typename K::Args &a, bool cond) {
    typename P::S carry = P::identity();
    if (cond) {
        memcpy(&carry, a.carry_in + P::CARRY_OFFSET, sizeof carry);
        P::reset(carry);
    }
    return carry;
}

/* Each item's outputs from the running state, starting at the thread's exclusive prefix
 * (Tile::pairs_outputs for a whole tile's rows where the Tile works two rows a word). */
template <class K, class P, bool FULL>
__device__ __forceinline__ void item_outputs(typename K::Tile &t, const typename K::Args &a,
                                             typename P::S run, const typename P::S &tile_excl) {
    if constexpr (FULL && K::Tile::PAIRS) {
        t.pairs_outputs(run);
        return;
    }
    const typename P::Op op;
#pragma unroll
    for (int i = 0; i < K::items; i++) {
        typename P::S e = P::identity();
        t.template element<FULL>(e, i);
        const typename P::S before = run;
        run = op(run, e);
        t.outputs(a, i, before, run, e, tile_excl);
    }
}

/* The same for whichever tile the thread has (whole_tile picks the instantiation). A
 * reduce's phase writes rows only where its items close segments: a thread of a whole tile
 * whose items close none (the generated Tile::quiet; most threads when segments are long)
 * skips them. */
template <class K, class P>
__device__ __forceinline__ void item_outputs(typename K::Tile &t, const typename K::Args &a,
                                             const typename P::S &run,
                                             const typename P::S &tile_excl) {
    if (whole_tile<K>(t)) {
        if constexpr (P::REDUCES)
            if (t.quiet(run)) return;
        item_outputs<K, P, true>(t, a, run, tile_excl);
    } else {
        item_outputs<K, P, false>(t, a, run, tile_excl);
    }
}

/* With the tile's exclusive prefix known: the last tile writes the batch's carry (and
 * kept-row count), and each row's outputs follow from the running state. */
template <class K, class P>
__device__ __forceinline__ void tile_epilogue(typename K::Tile &t, const typename K::Args &a,
                                              long long ntiles, const typename P::S &tile_excl,
                                              const typename P::S &thread_excl,
                                              const typename P::S &block_agg) {
    typedef typename P::S S;
    const typename P::Op op;
    if (t.tile == ntiles - 1 && threadIdx.x == 0) {
        const S total = op(tile_excl, block_agg);
        S carry = total;
        P::close_carry(carry);
        memcpy(a.carry_out + P::CARRY_OFFSET, &carry, sizeof carry);
        if constexpr (P::COUNTS) *a.out_rows = P::count(total);
    }
    if constexpr (P::COUNTS) {
        t.out_base = P::count(tile_excl);
        t.tile_kept = (int)P::count(block_agg);
    }
    item_outputs<K, P>(t, a, op(tile_excl, thread_excl), tile_excl);
}

/* Thread 0 takes the block's next tile and starts the copies of its inputs into stage `sn`
 * (free since the end-of-tile barrier): from the counter when tiles depend on each other
 * through a look-back (a block only ever waits on tiles already taken), else tile + grid. */
template <class K, int STAGES>
__device__ __forceinline__ void take_next(tile_queue<STAGES> &queue, const typename K::Args &a,
                                          uint4 *smem, long long tile, int sn) {
    if (threadIdx.x == 0) {
        const long long next = K::phases > 0 ? take_tile(a.scratch) : tile + (long long)gridDim.x;
        queue.tile[sn] = next;
        if (next < a.ntiles) K::issue_loads(queue, a, smem, next, sn);
    }
}

/* ---- the two-stage loop ------------------------------------------------------------------
 * Two shared-memory stages of BUF bytes: stage k & 1 holds the k-th tile's staged input
 * columns, then serves as the staging buffer of its stores and compaction. Chained phases
 * run one after another inside the tile, each with its own look-back. */

template <class K, int PH>
__device__ __forceinline__ void run_phases(phase_list<>, typename K::Tile &, const typename K::Args &,
                                           tile_queue<2> &, uint4 *, int, unsigned long long, uint4 *,
                                           bool) {}

template <class K, int PH, class P, class... REST>
__device__ __forceinline__ void run_phases(phase_list<P, REST...>, typename K::Tile &t,
                                           const typename K::Args &a, tile_queue<2> &queue,
                                           uint4 *smem, int s, unsigned long long offset,
                                           uint4 *tile_buf, bool staged) {
    typedef typename P::S S;
    __shared__ block_scan_storage<S, K::block> scan_storage;
    __shared__ S broadcast;
    const long long ntiles = a.ntiles;
    {
        const typename P::Op op;
        S thread_excl, block_agg;
        tile_reduce<K, P, 0>(t, scan_storage, thread_excl, block_agg);
        const tile_states<S> states = {a.scratch + offset, ntiles};
        S tile_excl = tile_exclusive_prefix<P::ORDERED, P::CHUNK_TOTALS>(
            states, t.tile, [&] { return carry_in<K, P>(a, true); }, block_agg, P::identity(), op,
            &broadcast);
        /* fields that do not travel through the look-back: the carry's (Phase::batch_constants) */
        if constexpr (P::BATCH_CONSTANTS)
            if (t.tile != 0) P::batch_constants(tile_excl, carry_in<K, P>(a, true));
        /* The last look-back is done: only now take the next tile and start its copies. A
         * tile taken earlier would publish nothing until this one is finished, and every tile
         * after it would wait for that in its look-back: on the H200 taking it at the top of
         * the loop chained the blocks together (scan at 17% of copy instead of 52%). */
        if constexpr (sizeof...(REST) == 0) take_next<K, 2>(queue, a, smem, t.tile, s ^ 1);
        /* the stage still holds the tile: reload the inputs rather than keep them in
           registers across the look-back (its wide windows want those registers) */
        t.load_inputs(a, staged, tile_buf);
        tile_epilogue<K, P>(t, a, ntiles, tile_excl, thread_excl, block_agg);
    }
    t.maps(PH);
    run_phases<K, PH + 1>(phase_list<REST...>{}, t, a, queue, smem, s,
                          offset + sl_tile_states_bytes(sizeof(S), (unsigned long long)ntiles),
                          tile_buf, staged);
}

template <class K> __device__ __forceinline__ void two_stage_loop(const typename K::Args &a) {
    static_assert(K::rounds == 1, "tiles of several rounds are overlapped_loop's");
    const long long rows = a.rows, ntiles = a.ntiles;
    const typename K::Params params(a);
    SL_DYNAMIC_SMEM(uint4, sl_smem);
    __shared__ tile_queue<2> queue;
    if (threadIdx.x == 0) {
        queue_init(queue);
        const long long t0 = K::phases > 0 ? take_tile(a.scratch) : (long long)blockIdx.x;
        queue.tile[0] = t0;
        if (t0 < ntiles) K::issue_loads(queue, a, sl_smem, t0, 0);
    }
    __syncthreads();
    for (int k = 0;; k++) {
        const int s = k & 1;
        const long long tile = queue.tile[s];
        if (tile >= ntiles) break;
        /* tiles without a look-back depend on nothing: their next tile is taken at once */
        if constexpr (K::phases == 0) take_next<K, 2>(queue, a, sl_smem, tile, s ^ 1);
        queue_wait(queue, s, (unsigned)(k >> 1) & 1u);
        const bool staged = queue.bulk[s] != 0;
        uint4 *const tile_buf = sl_smem + s * (K::buf / 16);
        typename K::Tile t(params);
        t.at(rows, tile, K::tile);
        t.load_inputs(a, staged, tile_buf);
        if constexpr (K::offsets) {
            __shared__ uint32_t heads_of_tile[K::tile / 32];
            build_heads<K, 0>(heads_of_tile, a, tile, t.tile_first);
            t.use_heads(heads_of_tile);
            t.segments_at(a, K::offsets_input);
        }
        t.maps(0);
        run_phases<K, 1>(typename K::Phases{}, t, a, queue, sl_smem, s,
                         SL_SCRATCH_ALIGN + sl_segment_index_bytes(K::offsets ? 1 : 0,
                                                                   (unsigned long long)ntiles),
                         tile_buf, staged);
        /* stores, staged through this tile's stage (its inputs are in registers by now) */
        t.template store<0>(a, tile_buf);
        /* end of tile: the stage, the scan storages and the broadcasts are reused next */
        fence_async_proxy();
        __syncthreads();
    }
}

/* ---- the overlapped loop ----------------------------------------------------------------
 * A group with one look-back phase on a GPU with the copy engine (sm_90+): BLOCK threads own
 * the rows and one more warp does nothing but look-backs, so a block never stands still
 * while a tile waits for its predecessors. The row threads, per iteration j:
 *   wait for tile j's copies (stage j % 3), reduce it, publish its aggregate at once and hand
 *   it to the look-back warp (a barrier they only arrive at);
 *   wait for tile j-1's exclusive prefix from the look-back warp;
 *   take tile j+1, start its copies (into the stage tile j-2 left) and tell the look-back
 *   warp which tile it is;
 *   finish tile j-1 with its prefix: reload its inputs from its stage, compute and store the
 *   outputs.
 * The look-back warp, per tile: look back for the tile's exclusive prefix as soon as the tile
 * is taken (the prefix needs only its predecessors, not the tile's own aggregate), so the
 * look-back runs while the rows finish the tile before and reduce this one; then wait for
 * the tile's aggregate, publish its inclusive prefix, wait for the next tile's number and
 * hand the prefix to the rows. So a tile's inclusive prefix is published about when its
 * aggregate is, later look-backs find one near, and the rows wait for a look-back only if it
 * took longer than two iterations (bench/RESULTS.md, twenty-second session). A tile is
 * taken only when nothing stands between it and its aggregate but its copies and the
 * previous tile's epilogue: the rows hold no taken, unpublished tile while they wait for a
 * prefix, else the look-backs of every later tile would wait for it and the blocks would
 * chain (bench/RESULTS.md has the measurements of the alternatives).
 *
 * The hand-overs are named barriers one side arrives at and the other syncs (block_arrive),
 * each used once a tile in alternation, which the order of the two loops guarantees: the rows
 * arrive at a tile's TILE only after their sync of the EXCL two tiles before, which the
 * look-back warp arrived at after its sync of the previous TILE; the look-back warp arrives
 * at EXCL after its TILE sync, which follows the rows' previous EXCL sync. The aggregates
 * alternate between two barriers by the tile's parity: the rows arrive at tile j's before
 * their sync of tile j-1's prefix, so at j+1's they may be before the look-back warp synced
 * j's. The block's first tile is handed over by __syncthreads, where SMALL's whole block
 * reads the window before it (lookback_window_block). compute-sanitizer racecheck reports
 * the words thread 0 hands over this way (handed_agg, queue.tile: written before the rows'
 * bar.arrive, read after the look-back warp's bar.sync of the same barrier), an order it does
 * not model, as it reported the __syncthreads hand-over before whenever the rows also used a
 * named barrier of their own (scripts/racecheck_probe.cu; bench/RESULTS.md, runs 13-18 and
 * the twenty-second session's run 3).
 *
 * In the default mode the tile states hold prefixes within the batch: tile 0 publishes its
 * aggregate as its inclusive prefix as soon as it is reduced, and the carry from the previous
 * batch (read by the look-back warp while the first tile loads) is put left of each tile's
 * look-back result. So no look-back waits for tile 0's read of the carry; the association
 * changes, which the default mode allows (sl_lookback.cuh). `determinism: run_to_run` keeps
 * the states absolute, from the carry, in the association its look-back defines
 * (lookback_exclusive_ordered: every tile publishes its aggregate, tile 0 too), and so does
 * the large kernel for phases whose generator chose that look-back for speed (CHUNKS). */

/* The overlapped loop's named barriers (1 is the row threads' own, block_sync<1, BLOCK>). */
enum overlapped_barrier { BAR_NEXT_TILE = 2, BAR_TILE_EXCL = 3, BAR_TILE_AGG = 4 /* and 5 */ };

/* The hand-over of the block's j-th tile's aggregate: the rows arrive (ARRIVE), the look-back
 * warp syncs, at BAR_TILE_AGG or the barrier after it by j's parity. */
template <bool ARRIVE, int THREADS> __device__ __forceinline__ void tile_agg_barrier(int j) {
    if (j & 1) {
        if constexpr (ARRIVE) block_arrive<BAR_TILE_AGG + 1, THREADS>();
        else block_sync<BAR_TILE_AGG + 1, THREADS>();
    } else {
        if constexpr (ARRIVE) block_arrive<BAR_TILE_AGG, THREADS>();
        else block_sync<BAR_TILE_AGG, THREADS>();
    }
}

template <class P> struct first_phase;
template <class P, class... REST> struct first_phase<phase_list<P, REST...>> {
    typedef P type;
};

template <class K, bool SMALL> __device__ __forceinline__ void overlapped_loop(const typename K::Args &a) {
    typedef typename first_phase<typename K::Phases>::type P;
    typedef typename P::S S;
    /* the chunked look-back: run_to_run's (ORDERED), and the large kernel's where the
       generator found it faster (CHUNKS); both keep the states absolute */
    constexpr bool CHUNKED = P::ORDERED || (P::CHUNKS && !SMALL);
    /* the chunked look-back's chunk totals (sl_lookback.cuh, chunk_prefix_totals) where the
       generator chose them (CHUNK_TOTALS) */
    constexpr bool TOTALS = CHUNKED && P::CHUNK_TOTALS;
    constexpr int STAGES = K::stages, BLOCK = K::block;
    const long long rows = a.rows, ntiles = a.ntiles;
    const typename K::Params params(a);
    const unsigned long long phase_offset0 =
        SL_SCRATCH_ALIGN + sl_segment_index_bytes(K::offsets ? 1 : 0, (unsigned long long)ntiles);
    /* A tile of several rounds (Kernel::rounds): the rows reduce and finish it a round at a
       time, each round BLOCK * ITEMS rows as the whole tile is otherwise, so the tile's rows
       (and the rows each look-back pays for) no longer depend on the registers a thread
       has. Only for groups whose rows need nothing of the tile but their states: no
       compaction, no reduce, no offsets segments (core/cuda/codegen.c, rounds_of). */
    constexpr int ROUNDS = K::rounds;
    static_assert(ROUNDS == 1 || (!K::compacts && !K::offsets && !K::runs),
                  "a tile of several rounds holds states only");
    static_assert(K::tile == K::round_rows * ROUNDS, "a tile is whole rounds");
    /* consecutive rounds' block scans alternate between two storages: each scan's barrier
       then orders its writes after every read of the scan two rounds before */
    __shared__ block_scan_storage<S, BLOCK> scan_storages[ROUNDS > 1 ? 2 : 1];
    __shared__ S handed_agg[STAGES];  /* block aggregate of the stage's tile */
    __shared__ S handed_excl[STAGES]; /* its exclusive prefix, from the look-back warp */
    __shared__ S batch_carry;         /* the look-back warp's: the carry, in the default mode */
    __shared__ S first_warp_vals[(BLOCK + 32) / 32]; /* lookback_window_block's, once */
    __shared__ unsigned first_warp_inclusive[(BLOCK + 32) / 32];
    SL_DYNAMIC_SMEM(uint4, sl_smem);
    __shared__ tile_queue<STAGES> queue;
    __shared__ uint32_t heads_of_stage[K::offsets ? STAGES : 1][K::offsets ? K::tile / 32 : 1];
    /* offsets segments: each stage's copy of its tile's segment index entries (issue_tile;
       one unused slot without offsets) */
    __shared__ staged_index segs_of_stage[K::offsets ? STAGES : 1];
    const typename P::Op op;
    const tile_states<S> states = {a.scratch + phase_offset0, ntiles};
    /* SL_TRACE only (sl_trace.cuh): the rows' steps are 0 the copies' wait, 1 the reduce,
       2 the wait for the previous tile's prefix, 3 the next tile's ticket and 7 its copies'
       issue (thread 0), 4 the epilogue, 5 the store, 6 the end barrier; the look-back
       warp's 0 the gate, 1 the look-back, 2 the wait for the aggregate, 3 the publication,
       4 the wait for the next tile's number, 5 the hand-over */
    step_clock trace;
    if (threadIdx.x == 0) {
        queue_init(queue);
        const long long t0 = take_tile(a.scratch);
        queue.tile[0] = t0;
        if (t0 < ntiles) issue_tile<K>(queue, a, sl_smem, t0, 0, segs_of_stage[0]);
    }
    __syncthreads();

    /* a thread's exclusive prefix within the tile at each round's first row of its own */
    struct round_prefixes {
        S of[ROUNDS];
    };
    /* the thread's rows of round r of `tile` (in stage s; staged: queue.bulk[s], read once a
       tile) loaded and mapped, with their segments; the reduce builds the stage's head bitmap
       first, the epilogue reuses it */
    auto round_rows_at = [&](typename K::Tile &t, int s, long long tile, int r, bool staged,
                             bool build_heads_first) {
        const uint4 *const tile_buf = sl_smem + s * (K::buf / 16);
        t.at_round(rows, tile, K::tile, r, K::round_rows);
        t.load_inputs(a, staged, tile_buf);
        if constexpr (K::offsets) {
            long long j0, j1;
            staged_segments(segs_of_stage[s], tile, j0, j1);
            if (build_heads_first) build_heads<K, 1>(heads_of_stage[s], a, t.tile_first, j0, j1);
            t.use_heads(heads_of_stage[s]);
            t.segments_at(a, K::offsets_input, j0, j1);
        }
        t.maps(0);
    };
    /* the rows: tile j (stage s) reduced, its aggregate published and handed over; returns
       the thread's exclusive prefixes within the tile, for its epilogue */
    auto reduce_tile = [&](int j, int s, long long tile) -> round_prefixes {
        queue_wait(queue, s, (unsigned)(j / STAGES) & 1u);
        trace.mark<0>();
        const bool staged = queue.bulk[s] != 0;
        round_prefixes held;
        S block_agg = P::identity();
#pragma unroll
        for (int r = 0; r < ROUNDS; r++) {
            typename K::Tile t(params);
            round_rows_at(t, s, tile, r, staged, true);
            S thread_excl, round_agg;
            tile_reduce<K, P, 1>(t, scan_storages[r & 1], thread_excl, round_agg);
            held.of[r] = r == 0 ? thread_excl : op(block_agg, thread_excl);
            block_agg = r == 0 ? round_agg : op(block_agg, round_agg);
        }
        if (threadIdx.x == 0) {
            /* the ordered look-back's chunk scans read tile 0's aggregate as any other */
            if (tile != 0 || CHUNKED) states.publish(tile, SL_STATUS_AGGREGATE, block_agg);
            else states.publish(0, SL_STATUS_INCLUSIVE, block_agg);
            handed_agg[s] = block_agg;
        }
        trace.mark<1>();
        return held;
    };

    /* ---- the block's first tile, handed over by __syncthreads ---- */
    const long long first_tile = queue.tile[0];
    round_prefixes held_thread_excl; /* tile j-1's, for its epilogue */
#pragma unroll
    for (int r = 0; r < ROUNDS; r++) held_thread_excl.of[r] = P::identity();
    if (threadIdx.x < BLOCK) {
        if (first_tile < ntiles) held_thread_excl = reduce_tile(0, 0, first_tile);
    } else if (!CHUNKED && threadIdx.x == BLOCK) {
        /* the look-back warp, idle until then: the carry it puts left of the prefixes
           within the batch */
        batch_carry = carry_in<K, P>(a, true);
    }
    __syncthreads();
    /* SMALL: the whole block reads the states before its first tile at once
       (lookback_window_block), the look-back warp goes on further left only if that window
       held no inclusive state. */
    S first_window = P::identity();
    bool first_found = false;
    const bool block_first = SMALL && !CHUNKED && first_tile > 0 && first_tile < ntiles;
    if constexpr (SMALL && !CHUNKED)
        if (block_first)
            first_found = lookback_window_block<BLOCK + 32>(states, first_tile, P::identity(), op,
                                                            first_warp_vals, first_warp_inclusive,
                                                            first_window);

    if (threadIdx.x >= BLOCK) { /* ---- the look-back warp ---- */
        long long tile = first_tile;
        for (int j = 0; tile < ntiles; j++) {
            const int s = j % STAGES;
            /* the prefix left of the tile, before its aggregate is known. The look-back first
               waits until the nearest predecessor has published: polled from every lane while
               the nearest tiles were still loading, the fast look-back's window cost the
               filter, cull, recurrence and wide sums 2-7%, and the ordered one run_to_run's
               segmented and wide sums 3-5%. The chunked look-back over states of one 8-byte
               word with their status (the f32 sum, in both modes) measured 1-2.5% faster
               without (bench/RESULTS.md, twenty-second session, runs 2-5). */
            S tile_excl, local = P::identity();
            ordered_chunk_close<S> close;
            constexpr bool GATED = !CHUNKED || tile_states<S>::PACKING != 8;
            if (GATED && j > 0) wait_published_before(states, tile - 1);
            trace.mark<0>();
            /* with chunk totals a tile that closes its chunk takes its aggregate first: the
               chunk's total goes out before the tile's look-back (the first tile's aggregate
               came with the __syncthreads above) */
            const bool total_first = TOTALS && tile % ORDERED_CHUNK == ORDERED_CHUNK - 1;
            if (total_first && j > 0) tile_agg_barrier<false, BLOCK + 32>(j);
            if constexpr (CHUNKED) {
                tile_excl = lookback_exclusive_ordered<TOTALS>(
                    states, tile, [&] { return carry_in<K, P>(a, true); }, P::identity(), op,
                    close, total_first ? handed_agg[s] : P::identity());
                if constexpr (P::BATCH_CONSTANTS)
                    if (tile != 0) P::batch_constants(tile_excl, carry_in<K, P>(a, true));
            } else {
                /* within the batch; tile 0 published its own when it was reduced */
                if (j == 0 && block_first)
                    local = first_found
                                ? first_window
                                : op(lookback_exclusive_from(states, before_block_window<S, BLOCK + 32>(tile),
                                                             P::identity(), op),
                                     first_window);
                else if (tile != 0)
                    local = lookback_exclusive(states, tile, P::identity(), op);
                tile_excl = batch_carry;
                if (tile != 0) {
                    tile_excl = op(batch_carry, local);
                    if constexpr (P::BATCH_CONSTANTS) P::batch_constants(tile_excl, batch_carry);
                }
            }
            trace.mark<1>();
            /* the tile's aggregate (the first tile's came with the __syncthreads above) */
            if (j > 0 && !total_first) tile_agg_barrier<false, BLOCK + 32>(j);
            trace.mark_after<2>(handed_agg[s]);
            const S block_agg = handed_agg[s];
            if constexpr (CHUNKED) {
                if (tile % ORDERED_CHUNK == ORDERED_CHUNK - 1) {
                    const S closed = ordered_chunk_inclusive(close, block_agg, op);
                    if ((threadIdx.x & 31) == 0) states.publish(tile, SL_STATUS_INCLUSIVE, closed);
                }
            } else {
                if ((threadIdx.x & 31) == 0 && tile != 0)
                    states.publish(tile, SL_STATUS_INCLUSIVE, op(local, block_agg));
            }
            trace.mark<3>();
            /* the next tile's number, then the prefix to the rows */
            block_sync<BAR_NEXT_TILE, 64>();
            trace.mark_after<4>(queue.tile[(j + 1) % STAGES]);
            tile = queue.tile[(j + 1) % STAGES];
            if ((threadIdx.x & 31) == 0) handed_excl[s] = tile_excl;
            block_arrive<BAR_TILE_EXCL, BLOCK + 32>();
            trace.mark<5>();
            trace.tile();
        }
        trace.print("overlapped look-back warp");
        if constexpr (CHUNKED) print_substeps("ordered look-back", trace.count());
        return;
    }

    /* ---- the row threads ---- */
    for (int j = 0;; j++) {
        const int s = j % STAGES, sp = (j + STAGES - 1) % STAGES;
        const long long tile_j = queue.tile[s];
        round_prefixes next_thread_excl = held_thread_excl; /* j = 0: reduced above */
        if (j > 0) {
            if (tile_j < ntiles) {
                next_thread_excl = reduce_tile(j, s, tile_j);
                tile_agg_barrier<true, BLOCK + 32>(j);
            }
            block_sync<BAR_TILE_EXCL, BLOCK + 32>(); /* tile j-1's prefix */
            trace.mark_after<2>(handed_excl[sp]);
        }
        if (tile_j < ntiles && threadIdx.x < 32) {
            /* tile j+1, taken only now (its aggregate must not wait for a look-back, see
               above), into the stage tile j-2 left */
            if (threadIdx.x == 0) {
                const int sn = (j + 1) % STAGES;
                const long long next_tile = take_tile(a.scratch);
                queue.tile[sn] = next_tile;
                trace.mark<3>();
                if (next_tile < ntiles) issue_tile<K>(queue, a, sl_smem, next_tile, sn,
                                                        segs_of_stage[K::offsets ? sn : 0]);
                trace.mark<7>();
            }
            __syncwarp();
            block_arrive<BAR_NEXT_TILE, 64>();
        }
        if (j > 0) { /* ---- finish tile j-1 ---- */
            const long long tile = queue.tile[sp];
            const bool staged = queue.bulk[sp] != 0;
            /* a tile of rounds stages its stores apart from the stage, whose later rounds
               are still to be read */
            uint4 *const store_buf = sl_smem + (ROUNDS > 1 ? STAGES : sp) * (K::buf / 16);
            const S tile_excl = handed_excl[sp], block_agg = handed_agg[sp];
#pragma unroll
            for (int r = 0; r < ROUNDS; r++) {
                typename K::Tile t(params);
                round_rows_at(t, sp, tile, r, staged, false);
                tile_epilogue<K, P>(t, a, ntiles, tile_excl, held_thread_excl.of[r], block_agg);
                trace.mark<4>();
                t.maps(1);
                t.template store<1>(a, store_buf);
                trace.mark<5>();
            }
            trace.tile();
        }
        held_thread_excl = next_thread_excl;
        if (tile_j >= ntiles) break;
        /* stage sp is free once its tile is finished and its stores read out */
        fence_async_proxy();
        block_sync<1, BLOCK>();
        trace.mark<6>();
    }
    trace.print("overlapped rows");
}

/* ---- what the loops without look-back share ---------------------------------------------
 * Block b of the B blocks that have tiles (B = min(grid, ntiles)) takes the contiguous tiles
 * [ntiles*b/B, ntiles*(b+1)/B) in order through the stage queue, leaves a record in scratch,
 * and the last block to finish reads every record. */
struct block_tiles {
    long long nblocks, lo, hi;
};

/* How many of `units` (blocks or warps) that could take tiles do: one tile each at least, and
 * no more than scratch has records for (sl_scratch.h, SL_MAX_RECORDS). */
__device__ __forceinline__ long long record_units(long long units, long long ntiles) {
    const long long n = units < ntiles ? units : ntiles;
    return n < (long long)SL_MAX_RECORDS ? n : (long long)SL_MAX_RECORDS;
}

__device__ __forceinline__ block_tiles tiles_of_block(long long ntiles) {
    block_tiles bt;
    bt.nblocks = record_units((long long)gridDim.x, ntiles);
    bt.lo = ntiles * (long long)blockIdx.x / bt.nblocks;
    bt.hi = ntiles * ((long long)blockIdx.x + 1) / bt.nblocks;
    return bt;
}

/* Thread 0 sets up the queue and starts the copies of the block's first STAGES tiles; the
 * barrier after it publishes the queue. */
template <class K, int STAGES>
__device__ __forceinline__ void start_tiles(tile_queue<STAGES> &queue, const typename K::Args &a,
                                            uint4 *smem, long long lo, long long hi) {
    if (threadIdx.x == 0) {
        queue_init(queue);
        for (int s = 0; s < STAGES && lo + s < hi; s++) {
            queue.tile[s] = lo + s;
            K::issue_loads(queue, a, smem, lo + s, s);
        }
    }
    __syncthreads();
}

/* Waits for the k-th tile of the block's run (started by start_tiles or next_tile); its stage. */
template <int STAGES>
__device__ __forceinline__ int wait_tile(tile_queue<STAGES> &queue, long long k) {
    const int s = (int)(k % STAGES);
    queue_wait(queue, s, (unsigned)(k / STAGES) & 1u);
    return s;
}

/* After the block's work on `tile` (in stage s): once every thread is done with the stage,
 * thread 0 starts the copies of the tile STAGES later into it. */
template <class K, int STAGES>
__device__ __forceinline__ void next_tile(tile_queue<STAGES> &queue, const typename K::Args &a,
                                          uint4 *smem, long long tile, long long hi, int s) {
    fence_async_proxy();
    __syncthreads();
    if (threadIdx.x == 0 && tile + STAGES < hi) {
        queue.tile[s] = tile + STAGES;
        K::issue_loads(queue, a, smem, tile + STAGES, s);
    }
}

/* A state in scratch as 32-bit words, written and read past the caches' reordering. */
template <class S> __device__ __forceinline__ void store_state(uint32_t *at, const S &v) {
    uint32_t w[words_of<S>::value];
    to_words(v, w);
#pragma unroll
    for (int j = 0; j < words_of<S>::value; j++) store_relaxed_u32(at + j, w[j]);
}

template <class S> __device__ __forceinline__ S load_state(const uint32_t *at) {
    uint32_t w[words_of<S>::value];
#pragma unroll
    for (int j = 0; j < words_of<S>::value; j++) w[j] = load_relaxed_u32(at + j);
    return from_words<S>(w);
}

/* Records the last block reads at once per thread: their loads go out together, one round
 * trip for RECORDS_IN_FLIGHT records instead of one each. */
constexpr int RECORDS_IN_FLIGHT = 2;

/* In the last block: the blocks [p0, p1) this thread takes (a contiguous run, so the block
 * scan over the threads keeps block order) and its fold of their states, block b's at
 * `base` + b * `stride` bytes. */
template <class K, class P>
__device__ __forceinline__ typename P::S fold_blocks(const unsigned char *base,
                                                     unsigned long long stride, long long nblocks,
                                                     long long &p0, long long &p1) {
    typedef typename P::S S;
    constexpr int U = RECORDS_IN_FLIGHT;
    const typename P::Op op;
    p0 = nblocks * (long long)threadIdx.x / K::block;
    p1 = nblocks * ((long long)threadIdx.x + 1) / K::block;
    S fold = P::identity();
    for (long long b = p0; b < p1; b += U) {
        S v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (b + u < p1) v[u] = load_state<S>(reinterpret_cast<const uint32_t *>(base + (b + u) * stride));
#pragma unroll
        for (int u = 0; u < U; u++)
            if (b + u < p1) fold = op(fold, v[u]);
    }
    return fold;
}

/* Called by every thread once the block's record is written (by any of them): counts the
 * block done on the counter at the start of scratch. True in the last block to finish,
 * which then sees every block's record. */
__device__ __forceinline__ bool last_to_finish(unsigned char *scratch, long long nblocks) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd((unsigned long long *)scratch, 1ull) == (unsigned long long)nblocks - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
}

/* ---- the aggregate loop ------------------------------------------------------------------
 * A group that is a reduce without segments over rows nothing else scans (codegen.c,
 * aggregate_only) needs no look-back: no row's output depends on earlier tiles, only the
 * batch's total does. Block b takes the contiguous tiles [ntiles*b/B, ntiles*(b+1)/B) in
 * order (B: the blocks that have tiles), folds their aggregates left to right and writes its
 * fold to the phase's scratch; the last block to finish (a counter at the start of scratch)
 * folds the B partial folds in block order onto the carry and closes the batch itself
 * (K::closes: the generated close_batch writes the batch's row, its rows out and the carry
 * after it, so no close kernel follows the launch). So the association is fixed by the grid:
 * run to run the same bits, and no commutativity assumed. Where the generator found every
 * value's operator indifferent to the order of rows (K::commutative), each thread instead
 * folds its items of all the block's tiles, reading them from global memory directly, and
 * the block combines the threads once at the end: no barrier inside the loop. A whole tile's
 * rows then come in chunks striped over the block (sl_device.cuh load_striped: every
 * warp-wide load is contiguous, where the blocked layout's touch every sector twice: 5 us of
 * a 249 us reduce of 2^28 rows, bench/RESULTS.md), folded into four independent states a
 * thread (four chains of adds, not one sixteen long). Otherwise the tiles' inputs stream
 * through STAGES shared-memory stages, the next ones in flight while one is reduced. */
/* The block's tiles [lo, hi) folded: thread 0's fold (each tile's aggregate in turn), or
 * where the operators do not care about the order of rows each thread's fold of its items,
 * read straight from global memory (no shared-memory stages, no barrier: nothing is shared
 * between threads until the end, so the loads of many resident blocks keep the memory busy,
 * as a copy's do). */
template <class K, class P>
__device__ __forceinline__ typename P::S fold_block_tiles(const typename K::Args &a, long long lo,
                                                          long long hi,
                                                          block_scan_storage<typename P::S, K::block> &scan_storage) {
    typedef typename P::S S;
    const long long rows = a.rows;
    const typename K::Params params(a);
    S running = P::identity();
    if constexpr (K::commutative) {
        long long tile = lo;
        if (K::Tile::striped_ok(a)) {
            /* the whole tiles in chunks striped over the block (every warp-wide access
               contiguous), folded into FOLDS independent states so that a thread's adds do
               not wait on one another; nothing else of the tile is needed (no row numbers) */
            constexpr int FOLDS = K::items % 4 == 0 ? 4 : 1;
            const long long whole_hi = hi < rows / K::tile ? hi : rows / K::tile;
            typename K::Tile t(params);
            t.slot = (int)threadIdx.x;
            S folds[FOLDS];
#pragma unroll
            for (int f = 0; f < FOLDS; f++) folds[f] = P::identity();
            for (; tile < whole_hi; tile++) {
                t.tile_first = tile * K::tile;
                t.load_striped(a);
                t.maps(0);
                fold_items_into<K, P, true, FOLDS>(t, folds);
            }
            const typename P::Op op;
#pragma unroll
            for (int f = 0; f < FOLDS; f++) running = op(running, folds[f]);
        }
        for (; tile < hi; tile++) {
            typename K::Tile t(params);
            t.at(rows, tile, K::tile);
            t.load_inputs(a, false, nullptr);
            t.maps(0);
            running = fold_items<K, P>(t, running);
        }
    } else {
        constexpr int STAGES = K::stages;
        const typename P::Op op;
        __shared__ tile_queue<STAGES> queue;
        SL_DYNAMIC_SMEM(uint4, sl_smem);
        start_tiles<K, STAGES>(queue, a, sl_smem, lo, hi);
        for (long long tile = lo; tile < hi; tile++) {
            const int s = wait_tile(queue, tile - lo);
            typename K::Tile t(params);
            t.at(rows, tile, K::tile);
            t.load_inputs(a, queue.bulk[s] != 0, sl_smem + s * (K::buf / 16));
            t.maps(0);
            S thread_excl, block_agg;
            tile_reduce<K, P, 0>(t, scan_storage, thread_excl, block_agg);
            if (threadIdx.x == 0) running = op(running, block_agg);
            next_tile<K, STAGES>(queue, a, sl_smem, tile, hi, s);
        }
    }
    return running;
}

template <class K> __device__ __forceinline__ void aggregate_loop(const typename K::Args &a) {
    typedef typename first_phase<typename K::Phases>::type P;
    typedef typename P::S S;
    constexpr int W = words_of<S>::value;
    const long long ntiles = a.ntiles;
    const block_tiles bt = tiles_of_block(ntiles);
    if ((long long)blockIdx.x >= bt.nblocks) return;
    const long long nblocks = bt.nblocks, lo = bt.lo, hi = bt.hi;
    const typename P::Op op;
    uint32_t *const partials = reinterpret_cast<uint32_t *>(
        a.scratch + SL_SCRATCH_ALIGN + sl_segment_index_bytes(0, (unsigned long long)ntiles));
    __shared__ block_scan_storage<S, K::block> scan_storage;
    /* thread 0's fold of the block's tiles; commutative: each thread's fold of its items */
    S running = fold_block_tiles<K, P>(a, lo, hi, scan_storage);
    if constexpr (K::commutative) {
        S thread_excl, block_total;
        block_exclusive_scan<S, K::block, 0>(scan_storage, running, P::identity(), op, thread_excl,
                                             block_total);
        running = block_total;
    }
    if (threadIdx.x == 0) store_state(partials + (long long)W * blockIdx.x, running);
    if (!last_to_finish(a.scratch, nblocks)) return;
    /* The last block: the threads fold the partials in block order, thread 0 puts the carry
       in front. */
    long long p0, p1;
    const S fold = fold_blocks<K, P>(reinterpret_cast<const unsigned char *>(partials),
                                     sizeof(uint32_t) * W, nblocks, p0, p1);
    S thread_excl, total;
    block_exclusive_scan<S, K::block, 0>(scan_storage, fold, P::identity(), op, thread_excl, total);
    if (threadIdx.x == 0) {
        const S out = op(carry_in<K, P>(a, true), total);
        static_assert(K::closes, "a reduce without segments closes its batch in its last block");
        K::close(a, out); /* the batch's row, its rows out and the carry after it */
    }
}

/* ---- the loops over segments without look-back ------------------------------------------
 * A group that is a reduce over offsets segments, or over runs of keys, and nothing else
 * (codegen.c, aggregate_only) needs no look-back: a segment's row goes to its ordinal, known
 * from the offsets (for runs: from counting key changes first, runs_warp_loop), so only the
 * values of the segments that cross from one warp's rows into the next depend on another
 * warp. The warp is the unit that owns rows (codegen.c, tile_threads): a tile is 32 * ITEMS
 * rows, ITEMS a lane, and warp w of the W warps that have tiles takes the contiguous tiles
 * [ntiles*w/W, ntiles*(w+1)/W) in order with its own running state: the batch's first warp
 * from the carry, the others from the identity (with the carry's batch constants). A lane
 * reads its rows straight from global memory, the next tile's while one is worked on, and
 * the lanes' folds are scanned by shuffles, so nothing inside the loop waits for another
 * warp: no shared-memory stages, no block barrier. (Why not the block: with a tile per block
 * every tile held all of the block's threads at its barriers and behind its heads' loads, and
 * both loops ran 1.1-1.4x slower: bench/RESULTS.md, thirteenth session.)
 *
 * Inside a tile each lane folds its items once, from the identity: a segment that closes
 * after a head among the lane's own items is complete there and goes straight to its place
 * (close_items). Only the lane's first closing segment, begun before its items, needs what
 * comes before the lane: it is finished after the warp's scan, from the warp's running state
 * and the lane's exclusive prefix. The warp's first segment, if it started before the warp,
 * is written there partial, and its partial state and ordinal go to the warp's record
 * (hold_pending). Once a block's warps are done its first thread folds their records into
 * the block's (join_block_warps: a pending segment that an earlier warp's head closes is
 * written complete there), and the last block to finish scans the blocks' totals in block
 * order and writes each recorded segment again, complete: its prefix over the earlier blocks,
 * then its partial; then the carry. */
template <class S>
__device__ __forceinline__ uint32_t *block_record(unsigned char *base, long long b) {
    const unsigned long long at = (unsigned long long)b * sl_block_record_bytes(sizeof(S));
    return reinterpret_cast<uint32_t *>(base + at);
}

/* Record the partial state `run` of the block's first segment and its ordinal `k`. */
template <class S>
__device__ __forceinline__ void hold_pending(uint32_t *record, const S &run, long long k) {
    constexpr int W = words_of<S>::value;
    store_state(record + W, run);
    store_relaxed_u32(record + 2 * W, (uint32_t)(unsigned long long)k);
    store_relaxed_u32(record + 2 * W + 1, (uint32_t)((unsigned long long)k >> 32));
    store_relaxed_u32(record + 2 * W + 2, 1u);
}

/* A segment's row from its whole state `v` at ordinal k of the batch (its index: the carry's
 * segment count plus k). */
template <class K, class P, class C>
__device__ __forceinline__ void close_segment(const typename K::Args &a, const typename P::S &v,
                                              const C &carry, long long k) {
    K::write_row(a, v, carry, k);
}

/* The place of the segment or run whose last row is the thread's item i (an item that
 * `ending` marks): its ordinal in the batch. */
template <class K>
__device__ __forceinline__ long long closing_place(const typename K::Tile &t, int i) {
    if constexpr (K::runs) return t.run_of(i);
    else return t.segment_of(i);
}

/* Where a tile's closed segments go: straight to their places (close_segment), or, where the
 * loop stages them (stage non-null: the tile's closing places are consecutive, from k0), into
 * the warp's slots in shared memory, slot k - k0, for close_tile_segments to write in place
 * order. A slot holds the state's payload words (payload_words_of): the rest, batch
 * constants, the rows never set and a segment's row never reads. */
template <class P> struct closed_rows {
    typedef typename P::S S;
    static constexpr int SLOT_WORDS = payload_words_of<S>::value;
    uint32_t *stage;
    long long k0;
    template <class K, class C>
    __device__ __forceinline__ void put(const typename K::Args &a, const S &v, const C &carry,
                                        long long k) const {
        if (stage) {
            uint32_t w[words_of<S>::value];
            to_words(v, w);
            uint32_t *const slot = stage + (k - k0) * SLOT_WORDS;
#pragma unroll
            for (int j = 0; j < SLOT_WORDS; j++) slot[j] = w[j];
        } else {
            close_segment<K, P>(a, v, carry, k);
        }
    }
    /* slot q's state (its other words the identity's) */
    __device__ __forceinline__ S slot(unsigned q) const {
        uint32_t w[words_of<S>::value];
        to_words(P::identity(), w);
#pragma unroll
        for (int j = 0; j < SLOT_WORDS; j++) w[j] = stage[q * SLOT_WORDS + j];
        return from_words<S>(w);
    }
};

/* The thread's one fold of its items (from the identity; returned, for the block scan):
 * every segment closing after a head among them is written here; the first one closing
 * before any head (begun earlier) is left in `first` / `first_k` for the caller. A thread
 * none of whose items closes a segment only folds. */
template <class K, class P, bool FULL, class C>
__device__ __forceinline__ typename P::S close_items(const typename K::Tile &t,
                                                     const typename K::Args &a, const C &carry,
                                                     const closed_rows<P> &out,
                                                     typename P::S &first, long long &first_k) {
    typedef typename P::S S;
    const typename P::Op op;
    S run = P::identity();
    const unsigned long long ends = t.ending;
    if (ends == 0) {
#pragma unroll
        for (int i = 0; i < K::items; i++) {
            S e = P::identity();
            t.template element<FULL>(e, i);
            run = op(run, e);
        }
        return run;
    }
#pragma unroll
    for (int i = 0; i < K::items; i++) {
        S e = P::identity();
        t.template element<FULL>(e, i);
        run = op(run, e);
        if ((ends >> i) & 1ull) {
            const long long k = closing_place<K>(t, i);
            if (K::restarted(run)) {
                out.template put<K>(a, run, carry, k);
            } else {
                first = run;
                first_k = k;
            }
        }
    }
    return run;
}

/* The bytes of shared memory the runs' loop may give its warps' slots for closed runs
 * (close_tile_segments' stage: a slot a row of the tile, a state's payload words a slot: 6 KB
 * a warp for 12 bytes and 512-row tiles); a block whose slots would need more writes each
 * closed run straight to its place. The loop over offsets segments does not stage: its ranked
 * tiles' closed segments are consecutive too, but staged they measured 11-17% slower at avg
 * 1000, 8 and Pareto, where the runs' loop gained 10-40% (bench/RESULTS.md, thirty-first
 * session). */
#ifndef SL_CLOSED_STAGE_BYTES
#define SL_CLOSED_STAGE_BYTES 32768
#endif
template <class K, class S> constexpr bool stages_closed() {
    return 4ull * payload_words_of<S>::value * K::tile * (K::block / 32) <= SL_CLOSED_STAGE_BYTES;
}
/* How sparse a tile's closes may be and still go through the slots: a tile stages when it
 * closes a segment in every stage_rows_per_close rows or more; 0 (the offsets loop) never.
 * Both of the runs' thresholds are measured (H100, bench/RESULTS.md, forty-seventh session,
 * run 6): where the key is an input, from one in 4, since staging sparser tiles lost up to a
 * point (one in 8: avg 8 55.6 -> 55.4%, Pareto 55.9 -> 55.2%); where maps make the key, from
 * one in 16, which lifted avg 8 from 48.1 to 55.8% and Pareto from 51.7 to 55.9%. Why the
 * made key gains where the input key does not is not traced: both write the same row from
 * the same state. */
template <class K> constexpr unsigned long long stage_rows_per_close() {
    if constexpr (K::runs) return K::Keys::made ? 16ull : 4ull;
    else return 0ull;
}

/* A warp's slots, in words (one where the loop does not stage). */
template <class K, class S> constexpr int closed_stage_words() {
    return stages_closed<K, S>() ? payload_words_of<S>::value * K::tile : 1;
}

/* One tile of the loops over segments without look-back, after its inputs, maps and ending
 * items: the lane's fold writes the segments closing after a head among its items, the
 * warp's scan gives each lane its prefix and the tile's aggregate (only the folds' payload
 * words move: scan_thread_folds), the lane's first closing segment is written from it (and,
 * begun before the warp's first tile, recorded in the warp's record `mine` as pending);
 * `running`, the warp's state, moves past the tile. `first_warp`: the warp starts at the
 * batch's row 0 (its running state began from the carry, so nothing it closes is pending).
 *
 * `stage` (the same in every lane): where the tile's closing places are consecutive (the
 * runs' loop: stages_closed), the warp's slots for a tile's closed segments, and
 * `lo` a bound at or below every place closing in the tile (within a tile's rows of it).
 * A tile that closes a run in every stage_rows_per_close<K>() rows or more sends its
 * closed segments to the slots first and out in place order, a lane a segment: written
 * straight from the lanes that close them, each store instruction's lanes wrote places
 * several apart (a sector each), and the close was 70% of a tile of the reduce by key
 * (bench/RESULTS.md, twenty-ninth session, run 2). Null: straight to their places. */
template <class K, class P, class C>
__device__ __forceinline__ void close_tile_segments(const typename K::Tile &t,
                                                    const typename K::Args &a, const C &carry,
                                                    uint32_t *mine, bool first_warp,
                                                    typename P::S &running,
                                                    uint32_t *stage = nullptr, long long lo = 0) {
    typedef typename P::S S;
    constexpr int WORDS = payload_words_of<S>::value;
    const typename P::Op op;
    const int lane = (int)(threadIdx.x & 31);
    closed_rows<P> out = {nullptr, 0};
    unsigned closing = 0; /* the tile's closing segments, where the loop stages */
    if (stage) {
        const unsigned long long ends = t.ending;
        closing = warp_sum_u32((unsigned)__popcll(ends));
        /* only a tile whose closes are dense enough: there a direct store instruction's
           lanes write a sector each and the slots pay; over longer runs they cost more than
           they save (bench/RESULTS.md, thirty-first and forty-seventh sessions) */
        if (stage_rows_per_close<K>() * closing >= (unsigned long long)K::tile) {
            /* the lane's least closing place: its first ending item's */
            const unsigned least =
                ends ? (unsigned)(closing_place<K>(t, __popcll((ends & (0ull - ends)) - 1ull)) - lo) : ~0u;
            out = {stage, lo + (long long)warp_min_u32(least)};
        }
    }
    S first = P::identity();
    long long first_k = -1;
    const S agg = whole_tile<K>(t) ? close_items<K, P, true>(t, a, carry, out, first, first_k)
                                   : close_items<K, P, false>(t, a, carry, out, first, first_k);
    const S incl = warp_inclusive_scan<S, typename P::Op, WORDS>(agg, lane, op);
    S lane_excl = shfl_up<S, WORDS>(incl, 1);
    if (lane == 0) lane_excl = P::identity();
    if (first_k >= 0) {
        const S whole = op(op(running, lane_excl), first);
        /* no head since the warp's start: its first segment, begun before it */
        if (!first_warp && !K::restarted(whole)) hold_pending(mine, whole, first_k);
        out.template put<K>(a, whole, carry, first_k);
    }
    running = op(running, shfl_idx<S, WORDS>(incl, 31));
    if (out.stage) {
        __syncwarp(); /* every lane's slots written */
        for (unsigned q = (unsigned)lane; q < closing; q += 32)
            close_segment<K, P>(a, out.slot(q), carry, out.k0 + (long long)q);
        __syncwarp(); /* every slot read before the next tile's are written */
    }
}

/* In each block once its warps are done (after a barrier), its first thread: the warps'
 * records folded in warp order into the block's (its first warp's record), so that the last
 * block joins a record a block, not one a warp (each thread of it reads its share of the
 * records a few at a time: four times as many records were four times the round trips at the
 * end of every launch). A warp's pending segment that a head earlier in the block closes is
 * complete here and written again; only one that began before the block stays pending, in
 * the block's record. `nwarps`: the warps that have tiles (the last block may have fewer). */
template <class K, class P, class C>
__device__ __forceinline__ void join_block_warps(const typename K::Args &a, unsigned char *records,
                                                 long long b, long long nwarps, const C &carry) {
    typedef typename P::S S;
    constexpr int W = words_of<S>::value, WARPS = K::block / 32;
    const typename P::Op op;
    S run = P::identity(), pending = P::identity();
    long long pending_k = -1;
    for (int w = 0; w < WARPS && b * WARPS + w < nwarps; w++) {
        const uint32_t *rec = block_record<S>(records, b * WARPS + w);
        const S total = load_state<S>(rec);
        if (load_relaxed_u32(rec + 2 * W + 2) != 0u) {
            const long long k = (long long)((unsigned long long)load_relaxed_u32(rec + 2 * W) |
                                            ((unsigned long long)load_relaxed_u32(rec + 2 * W + 1) << 32));
            const S whole = op(run, load_state<S>(rec + W));
            if (K::restarted(whole)) {
                close_segment<K, P>(a, whole, carry, k);
            } else { /* no head in the block before it: it began before the block */
                pending = whole;
                pending_k = k;
            }
        }
        run = op(run, total);
    }
    uint32_t *const mine = block_record<S>(records, b * WARPS);
    store_state(mine, run);
    if (pending_k >= 0) hold_pending(mine, pending, pending_k);
    else store_relaxed_u32(mine + 2 * W + 2, 0u);
}

/* The last block to finish, in the loops over segments without look-back: the `nrecords`
 * units' exclusive prefixes in order (each thread a contiguous run of records, the block scan
 * over the threads), each recorded segment written again, complete. Unit u's record is
 * record u * `stride` (the blocks' records: their first warps'). Returns the fold of every
 * unit's state (the batch's, from the first unit's start), in every thread. `carry` is the
 * phase state's (the index base); P may be another state's traits (the runs' loop). */
template <class K, class P, class C>
__device__ __forceinline__ typename P::S join_records(const typename K::Args &a,
                                                      unsigned char *records, long long stride,
                                                      long long nrecords, const C &carry,
                                                      block_scan_storage<typename P::S, K::block> &storage) {
    typedef typename P::S S;
    constexpr int W = words_of<S>::value;
    const typename P::Op op;
    long long p0, p1;
    const S fold = fold_blocks<K, P>(records, sl_block_record_bytes(sizeof(S)) * (unsigned long long)stride,
                                     nrecords, p0, p1);
    S thread_excl, total;
    block_exclusive_scan<S, K::block, 0>(storage, fold, P::identity(), op, thread_excl, total);
    constexpr int U = RECORDS_IN_FLIGHT;
    S prefix = thread_excl;
    for (long long b0 = p0; b0 < p1; b0 += U) {
        /* U records' totals, flags, ordinals and partial states, loaded together */
        S agg[U], partial[U];
        uint32_t held[U], k_lo[U], k_hi[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (b0 + u >= p1) break;
            const uint32_t *rec = block_record<S>(records, (b0 + u) * stride);
            agg[u] = load_state<S>(rec);
            held[u] = load_relaxed_u32(rec + 2 * W + 2);
            k_lo[u] = load_relaxed_u32(rec + 2 * W);
            k_hi[u] = load_relaxed_u32(rec + 2 * W + 1);
            partial[u] = load_state<S>(rec + W);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (b0 + u >= p1) break;
            if (held[u] != 0u)
                close_segment<K, P>(a, op(prefix, partial[u]), carry,
                                    (long long)((unsigned long long)k_lo[u] |
                                                ((unsigned long long)k_hi[u] << 32)));
            prefix = op(prefix, agg[u]);
        }
    }
    return total;
}

/* counts' sums (a tile's heads in 32 bits: at most the tile's rows) */
template <class T> struct plus_of {
    __device__ __forceinline__ T operator()(T x, T y) const { return x + y; }
};

/* ---- the offsets segments' loop ----------------------------------------------------------
 * A warp builds its tile's heads in its own corner of shared memory, and only where the tile
 * has an offsets entry (most tiles have none when segments are long). */

/* The heads of a warp's tile: a bitmap of TILE bits in the warp's `heads`, set from the tile's
 * offsets entries [j0, j1). Returns whether two of them are equal (an empty segment starts
 * inside the tile: then the heads do not count the segments, segment_of). The warp's lanes
 * only: __syncwarp orders them. */
template <class K>
__device__ __forceinline__ bool warp_heads(uint32_t *heads, const typename K::Args &a,
                                           long long tile_first, long long j0, long long j1) {
    const int lane = (int)(threadIdx.x & 31);
    __syncwarp(); /* every lane has read the previous tile's heads */
    for (int w = lane; w < (int)(K::tile / 32); w += 32) heads[w] = 0;
    __syncwarp();
    const long long *offs = (const long long *)a.in[K::offsets_input];
    unsigned equal = 0;
    int last_row = -1; /* the previous batch's last entry's row (lane 31's) */
    for (long long jb = j0; jb < j1; jb += 32) { /* the same in every lane */
        const long long j = jb + lane;
        const int r = j < j1 ? (int)(offs[j] - tile_first) : -1; /* [j0, j1) lie inside the tile */
        if (r >= 0) atomicOr(&heads[r >> 5], 1u << (r & 31));
        int before = (int)__shfl_up_sync(FULL_MASK, (unsigned)r, 1);
        if (lane == 0) before = last_row;
        equal |= __ballot_sync(FULL_MASK, r >= 0 && r == before);
        last_row = (int)__shfl_sync(FULL_MASK, (unsigned)r, 31);
    }
    __syncwarp();
    return equal != 0;
}

template <class K> __device__ __forceinline__ void segments_warp_loop(const typename K::Args &a) {
    typedef typename first_phase<typename K::Phases>::type P;
    typedef typename P::S S;
    constexpr int WARPS = K::block / 32;
    static_assert(K::tile == 32 * K::items, "the warp loop's tile is a warp's rows");
    const long long rows = a.rows, ntiles = a.ntiles;
    const long long nwarps = record_units((long long)gridDim.x * WARPS, ntiles);
    const long long nblocks = (nwarps + WARPS - 1) / WARPS;
    if ((long long)blockIdx.x >= nblocks) return;
    const int lane = (int)(threadIdx.x & 31), warp_in_block = (int)(threadIdx.x >> 5);
    const long long warp = (long long)blockIdx.x * WARPS + warp_in_block;
    unsigned char *const records =
        a.scratch + SL_SCRATCH_ALIGN + sl_segment_index_bytes(1, (unsigned long long)ntiles);
    const unsigned long long *segidx = segment_index_entries(a.scratch);
    __shared__ block_scan_storage<S, K::block> scan_storage; /* the records' join */
    __shared__ uint32_t heads[WARPS][K::tile / 32];
    const S carry = carry_in<K, P>(a, true);
    if (warp < nwarps) {
        const long long lo = ntiles * warp / nwarps, hi = ntiles * (warp + 1) / nwarps;
        const typename K::Params params(a);
        uint32_t *const mine = block_record<S>(records, warp);
        /* the warp's running state: every lane holds the same one */
        S running = P::identity();
        if (lo == 0) running = carry;
        else if constexpr (P::BATCH_CONSTANTS) P::batch_constants(running, carry);
        /* the next tile's rows and segment index are loaded before this tile is worked on,
           so a warp always has a tile's bytes in flight */
        typename K::Tile next(params);
        next.at(rows, lo, K::tile, lane);
        next.load_inputs(a, false, nullptr);
        long long j0 = (long long)segidx[lo], j1 = (long long)segidx[lo + 1];
        /* SL_TRACE only (sl_trace.cuh): per tile 0 the heads and ending bits, 1 the ranking's
           scan, 2 the close (the folds, the closed segments' stores) */
        step_clock trace;
        for (long long tile = lo; tile < hi; tile++) {
            typename K::Tile t = next;
            const long long tj0 = j0, tj1 = j1;
            if (tile + 1 < hi) {
                next.at(rows, tile + 1, K::tile, lane);
                next.load_inputs(a, false, nullptr);
                j0 = j1;
                j1 = (long long)segidx[tile + 2];
            }
            /* the tile's offsets entries (the same in every lane): a tile without one lies in
               segment tj0 - 1, which segment_of finds without a search */
            bool distinct = false;
            if (tj0 < tj1) {
                distinct = !warp_heads<K>(heads[warp_in_block], a, t.tile_first, tj0, tj1);
                t.use_heads(heads[warp_in_block]);
            }
            t.segments_at(a, K::offsets_input, tj0, tj1);
            trace.mark_after<0>(t.ending);
            if (distinct) { /* each segment a head: its ordinal from the heads before it */
                const int mine_heads = __popcll(t.head_window & ((1ull << K::items) - 1));
                const int incl = warp_inclusive_scan<int>(mine_heads, lane, plus_of<int>());
                t.rank_segments(tj0 - 1 + (long long)(incl - mine_heads));
            }
            trace.mark_after<1>(t.seg_base);
            t.maps(0);
            close_tile_segments<K, P>(t, a, carry, mine, lo == 0, running);
            trace.mark_after<2>(running);
            trace.tile();
        }
        trace.print("segments: tiles");
        if (lane == 0) store_state(mine, running);
    }
    __syncthreads(); /* every warp's record written (hold_pending's too) */
    if (threadIdx.x == 0) join_block_warps<K, P>(a, records, (long long)blockIdx.x, nwarps, carry);
    if (!last_to_finish(a.scratch, nblocks)) return;
    S out = join_records<K, P>(a, records, WARPS, nblocks, carry, scan_storage);
    if (threadIdx.x == 0) {
        if constexpr (P::BATCH_CONSTANTS) P::batch_constants(out, carry);
        memcpy(a.carry_out + P::CARRY_OFFSET, &out, sizeof out);
        if constexpr (P::COUNTS) *a.out_rows = P::count(out);
    }
}

/* ---- the runs' loop ----------------------------------------------------------------------
 * Over runs of equal keys (codegen.c, runs_aggregate: a key that is one of the kernel's
 * inputs or that its maps make from inputs, no compaction before the reduce) a run's place is
 * the number of key changes before the row that closes it, so each warp first counts the key
 * changes in its rows (the key column alone, read twice in all: the price of never waiting
 * for another warp's tiles). The block scans its warps' counts once (each warp's place in the
 * block), publishes its total in its first warp's record and adds up the totals of the blocks
 * before it. Blocks take their place in the order they start (a ticket from the counter at
 * the start of scratch), so a block only ever waits for blocks already running, which wait
 * for nobody. Then each warp runs its tiles as the offsets loop does, each tile's key changes
 * (run_heads: a bit per row, the neighbours' keys by shuffles) scanned over the lanes for the
 * places; row 0's change (the carry's open run of another key) closes the carry's run at
 * place 0, written by the batch's first warp. */

/* The key changes among the batch's rows [r0, r1), the share of thread `thread` of the
 * `threads` counting them (a block's or a warp's; a made key's count needs a whole warp:
 * the lane and 32): rows r >= 1 whose
 * key differs from row r - 1's, and row 0 when the carry's open run has another key. An input
 * key column is read in 16-byte vectors, each thread a vector in turn (coalesced), eight in
 * flight; the key before each vector is a second, cached load. A key that maps make is made
 * from its inputs' striped vectors (RunKeys::striped) where they are aligned, else from the
 * inputs at each row (RunKeys::at), rows a warp apart in each lane; the key before a row or
 * a chunk comes by a shuffle. */
template <class K, class C>
__device__ __forceinline__ long long count_key_changes(const typename K::Args &a,
                                                       const typename K::Params &params,
                                                       long long r0, long long r1, const C &carry,
                                                       int thread, int threads) {
    typedef typename K::Keys KY;
    typedef typename KY::key_t T;
    constexpr int V = 16 / (int)sizeof(T), U = 8;
    long long n = 0;
    if (r0 == 0) {
        if (thread == 0 && r1 > 0 && KY::carry_differs(carry, KY::at(a, params, 0))) n = 1;
        r0 = 1;
    }
    if (r0 >= r1) return n;
    if constexpr (KY::made) {
        /* keys made by maps, by a whole warp (thread: the lane, threads: 32). Where every input
           the key needs is aligned for it, the rows from the first multiple of KY::chunk are
           made KY::stripe a lane at a time from striped loads (sl::load_striped: each
           warp-wide access reads 32 chunks of KY::chunk consecutive rows, one vector a lane,
           as the input key's count reads its 16-byte vectors); a chunk's first row's left
           neighbour is the lane to the left's last row (lane 0's: lane 31's of the chunk
           before, the first one made at that row). The rest (an unaligned input, the rows
           before the first chunk and after the last whole stripe) are made one row a lane,
           rows a warp apart, UM a lane in flight. Each thread making a run of consecutive
           rows one load a row instead spread a warp's loads over 32 sectors, and the whole
           reduce ran at two thirds of the input key's speed (bench/RESULTS.md, fifteenth
           session). */
        constexpr int UM = 32; /* rows a lane in flight: for 4-byte inputs the bytes of the
                                  input key's U 16-byte vectors */
        constexpr int CH = KY::chunk, N = KY::stripe;
        static_assert(N % CH == 0, "a lane's stripe is whole chunks");
        const int lane = thread;
        /* rows [lo, hi) one a lane, `before` the key at row lo - 1 */
        auto rows_by_lanes = [&](long long lo, long long hi, T before) {
            for (long long base = lo; base < hi; base += (long long)UM * 32) {
                T x[UM];
#pragma unroll
                for (int u = 0; u < UM; u++) {
                    const long long r = base + u * 32 + lane;
                    x[u] = r < hi ? KY::at(a, params, r) : T();
                }
#pragma unroll
                for (int u = 0; u < UM; u++) {
                    const T shifted = shfl_up(x[u], 1); /* every lane: a full-warp shuffle */
                    const T left = lane == 0 ? before : shifted;
                    if (base + u * 32 + lane < hi) n += KY::differs(left, x[u]);
                    before = shfl_idx(x[u], 31);
                }
            }
        };
        long long striped_end = r0; /* the striped rows are [first chunk, striped_end) */
        if (KY::striped_ok(a)) {
            const long long first = (r0 + CH - 1) / CH * CH;
            const long long stripes = first < r1 ? (r1 - first) / ((long long)N * 32) : 0;
            if (stripes > 0) {
                rows_by_lanes(r0, first, KY::at(a, params, r0 - 1));
                /* made again, not taken from rows_by_lanes: its last step's lane 31 may lie
                   past `first` (a partial step), so its `before` is not this row's key */
                T before = KY::at(a, params, first - 1);
                for (long long base = first; base < first + stripes * N * 32; base += (long long)N * 32) {
                    T x[N];
                    KY::striped(a, params, base, lane, x);
#pragma unroll
                    for (int k = 0; k < N / CH; k++) {
                        const T shifted = shfl_up(x[k * CH + CH - 1], 1);
                        int d = KY::differs(lane == 0 ? before : shifted, x[k * CH]);
#pragma unroll
                        for (int j = 1; j < CH; j++) d += KY::differs(x[k * CH + j - 1], x[k * CH + j]);
                        n += d;
                        before = shfl_idx(x[k * CH + CH - 1], 31);
                    }
                }
                striped_end = first + stripes * N * 32;
            }
        }
        if (striped_end < r1) rows_by_lanes(striped_end, r1, KY::at(a, params, striped_end - 1));
        return n;
    } else {
        const T *col = static_cast<const T *>(a.in[KY::input]);
        /* rows before the first 16-byte boundary, one a thread (all of them for a column not
           aligned to its type) */
        const unsigned long long addr = (unsigned long long)(uintptr_t)(col + r0);
        long long head =
            addr % sizeof(T) != 0 ? r1 - r0 : (long long)((16 - addr % 16) % 16 / sizeof(T));
        if (head > r1 - r0) head = r1 - r0;
        const long long v0 = r0 + head, nvec = (r1 - v0) / V;
        for (long long r = r0 + thread; r < v0; r += threads) n += KY::differs(col[r - 1], col[r]);
        const uint4 *vec = reinterpret_cast<const uint4 *>(col + v0);
        for (long long j0 = thread; j0 < nvec; j0 += (long long)U * threads) {
            uint4 v[U];
            T before[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const long long j = j0 + (long long)u * threads;
                if (j < nvec) {
                    v[u] = __ldg(vec + j);
                    before[u] = col[v0 + j * V - 1];
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (j0 + (long long)u * threads >= nvec) break;
                T x[V];
                memcpy(&x[0], &v[u], sizeof x);
                int d = KY::differs(before[u], x[0]);
#pragma unroll
                for (int k = 1; k < V; k++) d += KY::differs(x[k - 1], x[k]);
                n += d;
            }
        }
        for (long long r = v0 + nvec * V + thread; r < r1; r += threads)
            n += KY::differs(col[r - 1], col[r]);
        return n;
    }
}

/* Block p's key changes from its record, once it has published them. */
template <class S>
__device__ __forceinline__ long long block_changes(unsigned char *records, long long p) {
    constexpr int W = words_of<S>::value;
    const uint64_t *slot = reinterpret_cast<const uint64_t *>(block_record<S>(records, p) + 2 * W + 4);
    unsigned long long v;
    while ((v = load_relaxed_u64(slot)) == 0ull) __nanosleep(64);
    return (long long)(v - 1ull);
}

template <class K> __device__ __forceinline__ void runs_warp_loop(const typename K::Args &a) {
    typedef typename first_phase<typename K::Phases>::type P; /* the carry's state */
    typedef typename K::Run R;                                  /* the loop's (run state) */
    typedef typename R::S S;
    constexpr int W = words_of<S>::value, WARPS = K::block / 32;
    static_assert(K::tile == 32 * K::items, "the warp loop's tile is a warp's rows");
    const long long rows = a.rows, ntiles = a.ntiles;
    const long long nwarps = record_units((long long)gridDim.x * WARPS, ntiles);
    const long long nblocks = (nwarps + WARPS - 1) / WARPS;
    __shared__ long long ticket;
    if (threadIdx.x == 0) ticket = take_tile(a.scratch);
    __syncthreads();
    const long long b = ticket;
    if (b >= nblocks) return;
    const int lane = (int)(threadIdx.x & 31);
    const long long warp = b * WARPS + (long long)(threadIdx.x >> 5);
    const bool working = warp < nwarps; /* the last block may have warps without tiles */
    const long long lo = working ? ntiles * warp / nwarps : 0;
    const long long hi = working ? ntiles * (warp + 1) / nwarps : 0;
    const typename K::Params params(a);
    unsigned char *const records = a.scratch + SL_SCRATCH_ALIGN;
    /* a block's key changes live in its first warp's record */
    uint32_t *const block_first = block_record<S>(records, b * WARPS);
    __shared__ block_scan_storage<S, K::block> scan_storage;
    __shared__ block_scan_storage<long long, K::block> count_storage;
    constexpr bool STAGE = stages_closed<K, S>(); /* close_tile_segments' slots */
    __shared__ uint32_t closed_stage[STAGE ? WARPS : 1][closed_stage_words<K, S>()];
    const typename P::S carry = carry_in<K, P>(a, true);
    const plus_of<long long> plus;
    /* SL_TRACE only (sl_trace.cuh): `before` times the steps before the tiles, once a warp:
       0 the count of the warp's key changes, 1 the block's scan of the counts, 2 the wait for
       the earlier blocks' counts; `trace` the tiles': 0 the maps and the head bits, 1 the
       places' scan, 2 the close (the folds, the closed runs' stores) */
    step_clock before_tiles;
    /* the key changes in each warp's rows: the warp's place in the block (its first lane's
       prefix), the block's total published (plus one: zero is "not yet") */
    long long base;
    {
        long long n = 0, excl, changes;
        if (working) {
            const long long r1 = hi * K::tile < rows ? hi * K::tile : rows;
            n = count_key_changes<K>(a, params, lo * K::tile, r1, carry, lane, 32);
        }
        before_tiles.mark_after<0>(n);
        block_exclusive_scan<long long, K::block, 0>(count_storage, n, 0ll, plus, excl, changes);
        base = shfl_idx<long long>(excl, 0);
        if (threadIdx.x == 0)
            store_relaxed_u64(reinterpret_cast<uint64_t *>(block_first + 2 * W + 4),
                               (unsigned long long)changes + 1ull);
        before_tiles.mark_after<1>(changes);
    }
    /* the changes before the block: every earlier block's count */
    {
        long long before = 0, excl, all_before;
        for (long long p = threadIdx.x; p < b; p += K::block)
            before += block_changes<S>(records, p * WARPS);
        __syncthreads(); /* count_storage is read by the scan above until here */
        block_exclusive_scan<long long, K::block, 0>(count_storage, before, 0ll, plus, excl, all_before);
        base += all_before;
        before_tiles.mark_after<2>(all_before);
        before_tiles.tile();
        before_tiles.print(K::Keys::made ? "runs (made key): before the tiles" : "runs: before the tiles");
    }
    if (working) {
        uint32_t *const mine = block_record<S>(records, warp);
        const S carry_run = K::run_state(carry);
        S running = R::identity();
        if (lo == 0) {
            running = carry_run;
            /* row 0 of another key closes the carry's open run: place 0 */
            if (lane == 0 && rows > 0 && K::Keys::carry_differs(carry, K::Keys::at(a, params, 0)))
                close_segment<K, R>(a, carry_run, carry, 0);
        }
        /* the next tile's rows (and its edge rows' key inputs) are loaded before this tile
           is worked on, so a warp always has a tile's bytes in flight */
        typename K::Tile next(params);
        next.at(rows, lo, K::tile, lane);
        next.load_inputs(a, false, nullptr);
        run_edges<typename K::Keys> next_edges =
            run_edge_rows<typename K::Keys, K::items>(a, rows, lo * K::tile, lane);
        step_clock trace;
        for (long long tile = lo; tile < hi; tile++) {
            typename K::Tile t = next;
            const run_edges<typename K::Keys> edges = next_edges;
            if (tile + 1 < hi) {
                next.at(rows, tile + 1, K::tile, lane);
                next.load_inputs(a, false, nullptr);
                next_edges = run_edge_rows<typename K::Keys, K::items>(a, rows, (tile + 1) * K::tile, lane);
            }
            t.maps(0);
            t.runs_at(carry, edges);
            const long long c = (long long)t.run_changes();
            trace.mark_after<0>(c);
            const long long incl = warp_inclusive_scan<long long>(c, lane, plus);
            t.run_base = base + incl - c;
            const long long tile_base = base; /* every run closing in the tile is after it */
            base += shfl_idx<long long>(incl, 31);
            trace.mark_after<1>(base);
            close_tile_segments<K, R>(t, a, carry, mine, lo == 0, running,
                                      STAGE ? closed_stage[threadIdx.x >> 5] : nullptr, tile_base);
            trace.mark_after<2>(running);
            trace.tile();
        }
        trace.print(K::Keys::made ? "runs (made key): tiles" : "runs: tiles");
        if (lane == 0) store_state(mine, running);
    }
    __syncthreads(); /* every warp's record written (hold_pending's too) */
    if (threadIdx.x == 0) join_block_warps<K, R>(a, records, b, nwarps, carry);
    if (!last_to_finish(a.scratch + SL_SCRATCH_FINISHED, nblocks)) return;
    const S total = join_records<K, R>(a, records, WARPS, nblocks, carry, scan_storage);
    /* the batch's key changes: every block's count */
    long long all = 0, excl, batch_changes;
    for (long long p = threadIdx.x; p < nblocks; p += K::block) all += block_changes<S>(records, p * WARPS);
    block_exclusive_scan<long long, K::block, 0>(count_storage, all, 0ll, plus, excl, batch_changes);
    if (threadIdx.x == 0) {
        const typename P::S out = K::run_carry(total, carry, batch_changes, a);
        memcpy(a.carry_out + P::CARRY_OFFSET, &out, sizeof out);
    }
}

/* The kernel body: the aggregate loop or the overlapped loop when the generator asked for it
 * (K::aggregate, K::overlapped), else the two-stage loop. SMALL: the overlapped loop with
 * each block's first look-back read by the whole block, the generated SL_CG_SMALL_KERNEL's
 * (core/cuda/codegen.h), which the host launches for batches of at most twice as many tiles
 * as its grid has blocks. It is a kernel of its own because with that code in the loop the
 * 2^28-row f32 scan measured 20% slower (the filter 10% faster; why is not traced:
 * bench/RESULTS.md, sixteenth session). */
template <class K, bool SMALL = false>
__device__ __forceinline__ void fused_kernel(const typename K::Args &a) {
    wait_for_stream_and_release_next();
    if constexpr (K::aggregate && K::offsets) segments_warp_loop<K>(a);
    else if constexpr (K::aggregate && K::runs) runs_warp_loop<K>(a);
    else if constexpr (K::aggregate) aggregate_loop<K>(a);
    else if constexpr (K::overlapped) overlapped_loop<K, SMALL>(a);
    else two_stage_loop<K>(a);
}

} /* namespace sl */

#endif
