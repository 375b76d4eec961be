/* sort.h — the `sort` stage on the GPU: key columns mapped to unsigned images that order
 * the same way, CUB's DeviceRadixSort (compiled once by nvcc in core/cuda/sort.cu), and the
 * other columns moved with the keys.
 *
 * Key images are kernels/sl_sortkey.h's, the ones the CPU backend sorts by (unsigned: the
 * value; signed: the sign bit flipped; float: -NaN < -inf < … < -0.0 < +0.0 < … < +inf <
 * +NaN; bool: the stored byte); each key has its own order, a descending key's image being
 * inverted within the key's width, so ties keep stream order. bits: [lo, hi) keeps only
 * those bits of the image (one key only). Several keys are packed into one image, most
 * significant key in the high bits, while they fit in 64 bits; more keys than that are
 * sorted pack by pack, least significant pack first, each pass stable, carrying a row
 * permutation.
 *
 * Strategies (picked by sl_cuda_sort_prepare, fastest first):
 *   KEYS     one key of at most 32 image bits and no other column: sort the images alone
 *            and map them back to key values (u32 ascending: CUB reads and writes the
 *            columns directly — exactly one DeviceRadixSort::SortKeys call);
 *   PAIRS    the same plus exactly one other 4-byte column, carried as CUB's values;
 *   PERMUTE  anything else: sort (image, row index) pairs, then gather every column.
 *
 * Float keys at CUB's float-sort speed (native_float): one f32 key alone (KEYS) or with one
 * 4-byte column (PAIRS), or one f64 key alone (KEYS), at full width (no bits range), either
 * order, with 32-bit row counts, are sorted by CUB's own float sort straight from the input
 * columns into the output columns: no image pass before it and no inverse pass after it (the
 * two passes held the f32 key sort at 0.78x of CUB's float sort). CUB orders float bits by
 * the same twiddle as sluice's image, NaNs included, except that it ranks -0.0 as +0.0
 * (ProcessFloatMinusZero in cub/block/radix_rank_sort_operations.cuh; the bits stored are
 * kept), where pipelines/SCHEMA.md and the CPU backend put -0.0 first. As CUB's sort is
 * stable, its output is then in sluice's order except inside the one run of zeros, where -0.0
 * and +0.0 rows are interleaved in arrival order. A zero-run fix-up restores the order on the
 * device (three launches of fixed grids, the run's bounds held in scratch, nothing read back):
 * a one-block search for the run's bounds, then a count of the run's rows that go first
 * (-0.0 ascending, +0.0 descending) and a rewrite of the run: its keys by position (the
 * first group's, then the other's) and, for PAIRS, its values by a stable partition (chunk
 * counts, their prefix, a scatter from a copy of the run's values and flags). With no zero
 * the count and the rewrite return at once; at worst they make one pass over the run. The
 * f64 key alone was a PERMUTE (about 240 bytes a row moved: image and row index written,
 * eight 12-byte pair passes, a gather) and is now CUB's 8-byte key sort (about 136).
 *
 * Eleven CUB instantiations exist (nvcc takes tens of seconds for each): SortKeys<u32>,
 * SortPairs<u32,u32>, SortPairs<u64,u32> with 32-bit row counts, the two SortPairs with
 * 64-bit row counts for batches past 2^31 rows (KEYS switches to PERMUTE there, native_float
 * to the images), and the float sorts SortKeys<float>, SortKeys<double>, SortPairs<float,u32>,
 * each ascending and descending (one instantiation per order: CUB fixes the order at compile
 * time, and a descending sort built from an ascending one would cost a pass).
 *
 * Nothing here allocates: sl_cuda_sort_prepare sizes one scratch block for up to max_rows
 * rows (the caller allocates it once, at session open) and sl_cuda_sort_run only launches
 * work on the given stream. Row indices are 32-bit, so a sort holds at most 2^32 - 1 rows. */
#ifndef SL_CUDA_SORT_H
#define SL_CUDA_SORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_CUDA_SORT_MAX_KEYS 8
#define SL_CUDA_SORT_MAX_PACKS SL_CUDA_SORT_MAX_KEYS
/* Rows one sort can order: row indices are u32. */
#define SL_CUDA_SORT_MAX_ROWS ((int64_t)UINT32_MAX)

typedef enum sl_cuda_sort_strategy {
    SL_CUDA_SORT_KEYS,
    SL_CUDA_SORT_PAIRS,
    SL_CUDA_SORT_PERMUTE
} sl_cuda_sort_strategy;

/* What to sort: ncolumns columns move together; keys[] index them, most significant first. */
typedef struct sl_cuda_sort_desc {
    int ncolumns;
    const sluice_type *types;    /* ncolumns entries; read during prepare only */
    int nkeys;
    int keys[SL_CUDA_SORT_MAX_KEYS];
    /* Key k sorts descending when `descending` (every key) or key_descending[k] is set. */
    bool descending;
    bool key_descending[SL_CUDA_SORT_MAX_KEYS];
    int bits_lo, bits_hi;        /* one key: image bit range; otherwise 0 and the width */
} sl_cuda_sort_desc;

/* One image: keys [first, first + count) of desc.keys packed into `bits` bits. */
typedef struct sl_cuda_sort_pack {
    int first, count;
    int bits;
} sl_cuda_sort_pack;

/* A prepared sort: strategy and scratch layout for up to max_rows rows. Plain data. */
typedef struct sl_cuda_sort {
    sl_cuda_sort_strategy strategy;
    int64_t max_rows;
    int ncolumns, nkeys;
    int keys[SL_CUDA_SORT_MAX_KEYS];
    sluice_type key_types[SL_CUDA_SORT_MAX_KEYS];
    bool descending[SL_CUDA_SORT_MAX_KEYS]; /* per key, as keys[] */
    int bits_lo, bits_hi;
    int value_column;            /* PAIRS: the carried column; -1 otherwise */
    bool identity_image;         /* KEYS/PAIRS: key is u32 ascending, full width */
    bool native_float;           /* KEYS/PAIRS: CUB's float sort and the zero-run fix-up */
    int fix_blocks;              /* native_float: the fix-up's grid (its chunks of the run) */
    int npacks;                  /* packs, least significant first */
    sl_cuda_sort_pack packs[SL_CUDA_SORT_MAX_PACKS];
    size_t scratch_bytes;        /* total device scratch run needs */
    size_t off_img_in, off_img_out, off_perm_in, off_perm_out, off_cub; /* inside scratch */
    /* native_float: the fix-up's scratch (run bounds and chunk counts; PAIRS: the run's flags
     * and values) starts at off_cub, over CUB's temporary storage, which is free once CUB's
     * kernels are done: the fix-up runs after them on the same stream. */
    size_t fix_bytes;
    size_t cub_bytes;
} sl_cuda_sort;

/* Checks the description and sizes the scratch for max_rows rows (asks CUB how much
 * temporary storage it needs). Returns SLUICE_ERR_INVALID_ARGUMENT for an impossible
 * description (no key, a key index out of range, max_rows past SL_CUDA_SORT_MAX_ROWS),
 * SLUICE_ERR_CUDA when CUB's size query fails. */
sluice_status sl_cuda_sort_prepare(sl_cuda_sort *s, const sl_cuda_sort_desc *desc,
                                   int64_t max_rows);

/* Sorts rows (<= s->max_rows) rows: types[c] is column c's type (as in the description),
 * in[c] the device columns (read only), out[c] the device columns that receive them in
 * sorted order (distinct from in[c]); scratch holds
 * s->scratch_bytes bytes of device memory. Work is queued on stream; nothing allocates and
 * nothing waits. Returns the first CUDA error met while queueing (as cudaError_t's int). */
int sl_cuda_sort_run(const sl_cuda_sort *s, void *scratch, int64_t rows,
                     const sluice_type *types, const void *const *in, void *const *out,
                     void *stream);

#ifdef __cplusplus
}
#endif
#endif
