/* codegen.h — turning one fused plan group into the CUDA source of a single-pass kernel.
 *
 * The source holds the group's own pieces only (state structs, combines, a Tile struct of its
 * columns); the loop described here is kernels/sl_tile.cuh, which the source instantiates.
 * The kernel (named "sl_fused") is persistent: each block loops over tiles, which take
 * their index from an atomic counter when a look-back links them (else block b takes tiles
 * b, b + grid, ...), and the copy engine brings the next tile's inputs into shared memory
 * while the block works on the current one (kernels/sl_pipe.cuh); launch it with
 * dynamic_smem bytes of dynamic shared memory and any grid. Each thread takes several
 * consecutive rows of every column it needs into registers, computes the stages' expressions as
 * the prologue, and the scans' and compactions' monoid states form a TUPLE that one
 * decoupled look-back carries across tiles. The per-row results (scan outputs, later maps)
 * are the epilogue; kept rows are staged through shared memory so the compacted stores are
 * contiguous. A scan whose input depends on another scan of the same group (or a compaction
 * whose flag does) needs that scan's prefix first: such states go into a second tuple with
 * its own look-back, chained in the same kernel — still one pass over memory. Offsets
 * segments need a tiny helper kernel ("sl_fused_segindex") that finds each tile's first
 * segment by binary search, so the main kernel reads only the offsets inside its tile.
 *
 * The kernel's one parameter is a struct of 8-byte slots, in this order:
 *   rows, nsegments, ntiles, scratch, carry_in, carry_out, out_rows,
 *   inputs[max(1, ninputs)], outputs[max(1, noutputs)], params[max(1, nparams)]
 * (a param's value sits in the low bytes of its slot, little-endian, as its C type). */
#ifndef SL_CUDA_CODEGEN_H
#define SL_CUDA_CODEGEN_H

#include "plan/plan.h"

#define SL_CG_MAX_PHASES 16
#define SL_CG_KERNEL "sl_fused"
#define SL_CG_SEGINDEX_KERNEL "sl_fused_segindex"
/* A group with a look-back warp in the default mode (sl_codegen.small_kernel): the same loop
 * with each block's first look-back read by the whole block, for batches of at most twice
 * as many tiles as its grid has blocks (kernels/sl_tile.cuh, overlapped_loop's SMALL). */
#define SL_CG_SMALL_KERNEL "sl_fused_small"
/* A group ending in a reduce: after the main kernel (also for an empty batch), one block of
 * this kernel writes the rows the batch closes at its end (the open segment with
 * `per: batch`, a `per: batch` whole-batch row), the batch's rows out and the
 * index count into the carry; launched with ntiles = -1 it writes instead the row held open
 * at flush from carry_in (the carry after it goes to carry_out). */
#define SL_CG_CLOSE_KERNEL "sl_reduce_close"
#define SL_CG_CLOSE_THREADS 256
/* A reduce over offsets segments: before the close kernel, a grid of this kernel writes the
 * identity rows of the batch's empty segments at their ordinals (batch mode only; blocks of
 * SL_CG_CLOSE_THREADS, any number of them). */
#define SL_CG_EMPTIES_KERNEL "sl_reduce_empties"
/* Fixed slots before the inputs in the kernel's argument block. */
#define SL_CG_FIXED_SLOTS 7
/* Shared memory: the bytes of staged input columns one stage may hold, and what one SM
 * offers (sm_90: 228 KB, of which 227 KB to one block) for the resident-blocks estimate. */
#define SL_CG_STAGE_BUDGET (48u * 1024u)
#define SL_CG_SMEM_PER_SM (227u * 1024u)

/* Where a reduce's own state sits in the carry (codegen.c analyse_reduce: one copy for all
 * its values): byte offsets from the carry's start, SIZE_MAX where the reduce has no such
 * field. The span is the rows folded into the carry since it was reset or seeded: */
typedef struct sl_cg_reduce_carry {
    size_t seen;     /* bool: a row reached the reduce and its segment is not emitted yet
                        (the close kernel clears it when it emits the open segment, at flush or
                        at a `per: batch` batch's end, and the per-batch reset does too) */
    size_t closed;   /* i64: segments closed in the current batch (restarts every batch) */
    size_t total;    /* i64: segments emitted in the stream, the next index (the close kernel
                        adds the rows it writes) */
    size_t restart;  /* bool, segmented: a row of the span restarted the values (head flags,
                        offsets: a head; keys: a key unlike the row's before it) */
    size_t head;     /* bool, head flags: the span's first row carries a head flag */
    size_t first, last; /* keys: the span's first and last key (the key column's type) */
} sl_cg_reduce_carry;

/* Where one scan's state sits in the carry: byte offsets from the carry's start, so the host
 * can read and seed it (core/cuda/backend.c's carry_get / carry_set). SIZE_MAX: the scan has
 * no such field. The group's scans in stage order: its scan stages, then the values of a
 * reduce ending it, which have value fields only (their segments are the reduce's). */
typedef struct sl_cg_scan_carry {
    size_t value[SL_MAX_FIELDS]; /* the value fields: the acc type's bytes at the offset */
    sluice_type held[SL_MAX_FIELDS]; /* ... held as this type: the acc type, or the 4-byte
                                        integer a narrow one is widened to (its sign or zero
                                        extension, a bool's 0 or 1; the acc's bytes are its
                                        low ones, little-endian) */
    size_t flag;     /* head flag / offsets: a segment starts in the span; key: a row was seen */
    size_t interior; /* key: a segment starts after the span's first row */
    size_t first, last; /* key: the span's first and last key (the key column's type) */
    int reduce_value;   /* -1: a scan stage; else the index of this value among the reduce's */
    sl_cg_reduce_carry reduce; /* a reduce's value: the reduce's state (every field SIZE_MAX
                                  for a scan stage) */
} sl_cg_scan_carry;

typedef struct sl_codegen {
    char *source;            /* the CUDA source (NUL-terminated) */
    int block_threads;       /* threads a block is launched with */
    int items_per_thread;
    bool lookback_warp;      /* the last warp only does look-backs (emit_overlapped_kernel) */
    bool small_kernel;       /* ... and SL_CG_SMALL_KERNEL exists (not under the ordered
                                look-back of determinism: run_to_run) */
    bool aggregate_loop;     /* a reduce without look-back (sl_tile.cuh aggregate_loop,
                                segments_warp_loop or runs_warp_loop) */
    bool closes_in_kernel;   /* the main kernel closes a batch that has rows (the aggregate
                                loop without segments: its last block runs close_batch); the
                                close kernel runs only for empty batches and the flush */
    bool block_records;      /* ... over offsets segments or runs of keys: the phase's scratch
                                holds a record per warp (kernels/sl_scratch.h) */
    int64_t tile_rows;       /* rows per tile = items_per_thread * the threads sharing a tile
                                (block_threads, less 32 with a look-back warp; 32 when
                                block_records: a tile per warp) * rounds */
    int rounds;              /* the rows take a tile in this many rounds (lookback_warp only;
                                1 otherwise) */
    size_t dynamic_smem;     /* dynamic shared memory per block: the input stages (and, for
                                a tile of rounds, the buffer its stores are staged in) */
    int min_blocks;          /* resident blocks a multiprocessor the kernels ask of ptxas
                                (__launch_bounds__; MIN_BLOCKS in the source) */
    int fit_blocks;          /* > 1: compile with sl_cuda_nvrtc_compile_fitted from this many
                                blocks (0: as the source says; SLUICE_CUDA_FIT=0) ... */
    int fit_spill_bytes;     /* ... keeping at most this many bytes of spill stores */

    int ninputs, *inputs;    /* column ids, kernel argument order */
    int noutputs, *outputs;
    int npassthrough, *passthrough;
    bool compacts;           /* rows out differ from rows in: a compaction or a reduce */
    bool reduces;            /* ends in a reduce: launch the close kernel after the main one */
    bool has_offsets;        /* an offsets-segmented scan: launch the segindex kernel first */
    bool reduce_offsets;     /* the reduce is over the offsets' segments: the empty-segments
                                kernel (SL_CG_EMPTIES_KERNEL) runs before the close kernel */
    int offsets_input;       /* index into inputs of the offsets column, -1 if none */

    int phases;              /* chained look-backs (0: a purely elementwise group) */
    size_t state_size[SL_CG_MAX_PHASES];
    size_t carry_bytes;
    unsigned char *carry_identity; /* carry_bytes, host */
    int nscans;
    sl_cg_scan_carry *scan_carry; /* per scan stage of the group, in stage order */

    int nparams;
    size_t arg_slots;        /* 8-byte slots in the argument block */
} sl_codegen;

/* Generates the kernel of plan group `group` for compute capability `arch`. Errors:
 * SLUICE_ERR_LIMIT (more columns/params than one kernel's arguments hold, or too many
 * chained phases), SLUICE_ERR_INVALID_ARGUMENT (not a fused group), SLUICE_ERR_NO_MEMORY. */
sluice_status sl_cuda_codegen(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                              int group, int arch, sl_codegen *out);
void sl_cuda_codegen_free(sluice_context *ctx, sl_codegen *cg);

/* Tiles for a batch of `rows` rows; scratch bytes for it (see kernels/sl_scratch.h). */
int64_t sl_cuda_codegen_tiles(const sl_codegen *cg, int64_t rows);
size_t sl_cuda_codegen_scratch_size(const sl_codegen *cg, int64_t rows);
/* Byte offset of phase `phase`'s tile states inside scratch for `rows` rows. */
size_t sl_cuda_codegen_phase_offset(const sl_codegen *cg, int64_t rows, int phase);

#endif
