/* tuning.h — launch shape of the fused single-pass kernels, one row per GPU architecture:
 * threads per block, and how many bytes of the widest column a group loads each thread keeps
 * in registers.
 * Read by the code generator on the host (plain C) and embedded for NVRTC; nothing else may
 * hard-code a block size or an items-per-thread count.
 *
 * Why these numbers: the kernels are bound by memory bandwidth, so each thread must have
 * several 16-byte loads in flight (64 bytes of the widest column it loads: 4 x 16-byte loads;
 * a wider column it only makes, an i64 sum of i32 rows, does not halve them), and a
 * tile must be large enough that the per-tile look-back and barriers are amortised over a
 * few thousand rows, yet small enough that enough tiles are resident per SM to hide the
 * look-back latency. Register pressure grows with the number of live columns, so the code
 * generator lowers items per thread when a group keeps many columns in registers. */
#ifndef SL_TUNING_H
#define SL_TUNING_H

typedef struct sl_tuning {
    int arch;                 /* compute capability major*10+minor this row is for */
    int block_threads;        /* threads per block (a multiple of 32) */
    int bytes_per_thread;     /* bytes of the widest loaded column per thread */
    int min_items, max_items; /* bounds on items per thread (powers of two) */
    int register_items;       /* budget: live columns x items per thread stays under this */
    int min_blocks;           /* resident blocks per SM asked of the register allocator for
                                 small groups (live columns x items <= 32), one fewer up to
                                 48, none for larger groups or phase states over 32 bytes
                                 (core/cuda/codegen.c), so they do not spill */
    int records_block_threads; /* threads per block of the reduce loops without look-back
                                  over segments (a tile per warp: per offsets segment, per
                                  run of keys); 0: block_threads */
    int lookback_block_threads; /* threads per block (beside the look-back warp) of the loop
                                   with a look-back warp whose phase takes the fast look-back
                                   over a state of 5 to 8 bytes that absorbs nothing (a
                                   filter's count, an i64 or f64 sum, an f32 recurrence);
                                   0: block_threads */
    int spill_bytes;          /* the minimum blocks a kernel asks of ptxas are a guess made
                                 before it compiles: a group that asks for two or more
                                 compiles at the most blocks, that many or fewer, whose spill
                                 stores (ptxas -v, over all its functions) are at most this
                                 many bytes (core/cuda/nvrtc.c, sl_cuda_nvrtc_compile_fitted) */
} sl_tuning;

/* Rows in ascending arch; the last row whose arch <= the device's is used. */
static const sl_tuning sl_tuning_table[] = {
    /* arch  threads  bytes  min  max  register budget  min blocks/SM  records' threads
       look-back-bound threads */
    {70, 256, 32, 2, 16, 96, 4, 0, 0, 16},
    {80, 256, 64, 2, 16, 128, 5, 0, 0, 16},
    /* H200: 48 registers x 256 threads keeps 5 blocks (40 warps) per SM; 256 threads x 16
       items was the fastest shape measured for the scan and linrec kernels, and a smaller
       register budget made the six-stage group slower. The loops over segments without
       look-back (a reduce per offsets segment or per run of keys) give each warp its own
       tiles, so a block only groups warps: 128 threads a block (4 resident, registers capped
       at 128 by codegen.c) matched 64 and beat 256 and 32 on gpu_bench's jobs of that kind,
       and 8 or 32 items a thread lost (the sweeps: bench/RESULTS.md, thirteenth session).
       The loop with a look-back warp is bound by its look-backs (bench/RESULTS.md,
       twenty-first session); where the look-back is the fast one over a state of 5-8 bytes
       that never ends early at a segment head, 512 threads (8192-row tiles, half the tiles
       to look back over) made the filter 8%, the f32 recurrence 3-6% and the i64 and f64
       sums of narrower inputs 11-12% faster, where it lost 1-10% on the f32 scan (the
       chunked look-back), the segmented sums (their look-backs end at the nearest head),
       the cull and the six-stage group (wider states) (twenty-second session, runs 1-2).
       Every loop with a look-back warp, this block's included, takes fewer items where an
       input column its stages read would not fit the stages (codegen.c,
       items_to_stage_inputs): the f32 recurrence at 512 x 8 ran 86% of copy on an H100
       where 512 x 16, its b column outside the stages, ran 75% (forty-first and
       forty-second sessions).
       Spills: up to 16 bytes of spill stores are kept for the blocks they buy. On an H100
       (thirty-fourth session) the f32 recurrence at two 544-thread blocks spilled 40 B and ran
       at 74.5% of copy, at one block none and 84.9%; an i16 max scan at five 288-thread
       blocks spilled 556 B (30.5%), at three 16 B (40.2%), at two none (37.5%); a bool xor
       scan 506 B at five (14.0%), 32 B at three (16.6%), none at two (18.9%).
       max_items 32: columns of 1 or 2 bytes take 32 items a thread, so their tiles pay the
       per-tile look-back over twice the rows (the f32 scan's tiles and the i8 scan's ran at
       about the same tiles a second). On an H100 (thirty-sixth session, A/B/A/B against 16):
       i8 max 18.2% -> 34.3% of copy (CUB 35.4%), i16 max 40.1% -> 67.3% (CUB 58.9%), bool xor
       18.8% -> 34.4%; 640 or 992 row threads of 32 items did no better on the whole (i8 33.6 /
       37.0%, i16 64.3 / 45.7%). A scan of 1-byte columns alone goes past the row's
       max_items: 64 items in two rounds (codegen.c, one_byte_rounds); so does an i16 or u16 max
       or min scan taken two rows a word that makes no other column: 64 items in one round
       (codegen.c, pairs_one_round). */
    {90, 256, 64, 2, 32, 128, 5, 128, 512, 16},
};

static inline const sl_tuning *sl_tuning_for(int arch) {
    const sl_tuning *t = &sl_tuning_table[0];
    for (unsigned i = 0; i < sizeof(sl_tuning_table) / sizeof(sl_tuning_table[0]); i++)
        if (sl_tuning_table[i].arch <= arch) t = &sl_tuning_table[i];
    return t;
}

#endif
