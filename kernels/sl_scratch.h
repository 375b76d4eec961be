/* sl_scratch.h — the layout of a fused kernel's scratch memory, shared by the host (which
 * sizes and clears it) and the generated kernels (which carve it up), so both compute the
 * same offsets from the same code. Plain C, also compiled by NVRTC.
 *
 *   [0, 256)                     the tile counter (u64) tiles take their index from; the
 *                                loops without look-back count finished blocks there instead,
 *                                and the key-run loop takes block tickets there and counts
 *                                finished blocks in the next u64 (SL_SCRATCH_FINISHED)
 *   segment index                (ntiles + 1) u64: first offsets entry at or after each
 *                                tile's first row (only with an offsets-segmented scan)
 *   phase 1 .. phase P states    one tile-state array per chained look-back; a reduce over
 *                                offsets or runs of keys without look-back (sl_tile.cuh
 *                                segments_warp_loop, runs_warp_loop) has a record per warp
 *                                instead: one per tile at most, SL_MAX_RECORDS
 *
 * A tile state holds a status (0 = not yet published, 1 = aggregate, 2 = inclusive prefix)
 * and a monoid state. States of at most 4 bytes share one 8-byte word with the status,
 * states of at most 12 bytes one 16-byte word, so one access publishes both. States of up to
 * 32 bytes are tagged words: each 4-byte word of the state travels in an 8-byte word beside
 * a copy of the status (an even number of them, so 16-byte accesses move two at a time), and
 * a reader takes the state only when every word carries the same status: still one round
 * trip, no fence. Larger states keep the status word apart, written after the value behind
 * a memory fence. */
#ifndef SL_SCRATCH_H
#define SL_SCRATCH_H

#define SL_SCRATCH_ALIGN 256ull
#define SL_SCRATCH_FINISHED 8ull /* byte offset of the key-run loop's finished-block counter */
/* Most records a loop without look-back leaves (one per block, or per warp in the segments'
 * warp loop): scratch, cleared before every launch, holds no more, and the loops never use
 * more units than this (sl_tile.cuh, record_units). 16384 covers every resident block or
 * warp of today's GPUs (an H200: 132 SMs x 64 warps = 8448). */
#define SL_MAX_RECORDS 16384ull
#define SL_STATUS_INVALID 0u
#define SL_STATUS_AGGREGATE 1u
#define SL_STATUS_INCLUSIVE 2u
/* A chunk's last tile under the ordered look-back with chunk totals (sl_lookback.cuh,
 * chunk_prefix_totals): its chunk's total, until its inclusive state replaces it. */
#define SL_STATUS_TOTAL 3u

static inline unsigned long long sl_scratch_align(unsigned long long x) {
    return (x + SL_SCRATCH_ALIGN - 1) / SL_SCRATCH_ALIGN * SL_SCRATCH_ALIGN;
}

/* 8: status and state in one 8-byte word; 16: in one 16-byte word; 32: tagged words (8
 * bytes for each 4 of the state, an even number); 0: separate arrays. A kernel decides by
 * the bytes of its state that carry data (sl_lookback.cuh), the host by the whole state's
 * size: never fewer bytes than the kernel uses. */
static inline int sl_tile_state_packing(unsigned long long state_size) {
    return state_size <= 4 ? 8 : state_size <= 12 ? 16 : state_size <= 32 ? 32 : 0;
}

/* The tagged words of one tile's state (packing 32). */
static inline unsigned long long sl_tile_state_tagged_words(unsigned long long state_size) {
    return ((state_size + 3ull) / 4ull + 1ull) / 2ull * 2ull;
}

static inline unsigned long long sl_tile_states_bytes(unsigned long long state_size,
                                                      unsigned long long ntiles) {
    int packing = sl_tile_state_packing(state_size);
    if (packing == 32) return sl_scratch_align(ntiles * 8ull * sl_tile_state_tagged_words(state_size));
    if (packing) return sl_scratch_align(ntiles * (unsigned long long)packing);
    return sl_scratch_align(ntiles * 4ull) + 2ull * sl_scratch_align(ntiles * state_size);
}

static inline unsigned long long sl_segment_index_bytes(int has_offsets,
                                                        unsigned long long ntiles) {
    return has_offsets ? sl_scratch_align((ntiles + 1ull) * 8ull) : 0ull;
}

/* The record of one block of the loops without look-back over segments: its total state,
 * its first segment's partial state (each padded to 8 bytes), that segment's ordinal (u64), a
 * flag (u32, then 4 bytes unused) and, for runs of keys, the key changes in the block's rows
 * plus one (u64; 0: not yet counted). */
static inline unsigned long long sl_block_record_bytes(unsigned long long state_size) {
    return 2ull * ((state_size + 7ull) / 8ull * 8ull) + 24ull;
}

/* One phase's part of scratch: its tile states, or for a kernel with block records
 * (segments_warp_loop, runs_warp_loop) its records: a unit has
 * one tile at least, and there are SL_MAX_RECORDS units at most. */
static inline unsigned long long sl_phase_scratch_bytes(unsigned long long state_size,
                                                        unsigned long long ntiles,
                                                        int block_records) {
    const unsigned long long units = ntiles < SL_MAX_RECORDS ? ntiles : SL_MAX_RECORDS;
    if (block_records) return sl_scratch_align(units * sl_block_record_bytes(state_size));
    return sl_tile_states_bytes(state_size, ntiles);
}

#endif
