/* fused.h — one fused group (a run of map/flag/compact/scan/segmented-scan stages between
 * sorts) executed on the CPU in a single sweep: tiles of SL_CPU_TILE_ROWS rows, expressions a
 * column at a time, compaction inside the tile, scans carrying their monoid state from tile to
 * tile through a chained hand-off (each tile publishes its inclusive carry as soon as its
 * predecessor's is known, before writing its rows). */
#ifndef SL_CPU_FUSED_H
#define SL_CPU_FUSED_H

#include "cpu/threads.h"
#include "plan/plan.h"

/* The tile: large enough to amortise the hand-off, small enough that a tile's columns stay
 * in L2. Measured on the shared 2-core VM: 16384 rows halved the two-thread time of 4096
 * (fewer hand-offs for a preempted neighbour to stall) at no single-thread cost. The only
 * place this constant lives; results do not depend on the number of threads because tiles,
 * not threads, fix the order of combination. */
#define SL_CPU_TILE_ROWS 16384

/* What one scan carries from row to row, tile to tile and batch to batch. */
typedef struct sl_cpu_carry {
    sl_value v[SL_MAX_FIELDS]; /* the state after the last row */
    uint64_t last_key;         /* key / offsets segments: the last row's key bits */
    bool has_key;              /* false before the first row (and at each batch for offsets) */
    /* Since the carry was set from outside (sl_scan_carry in core/runtime/session.h, for a
     * distributed session) or the stream began: whether a row reached the scan and the
     * first one's key, and whether the data started a segment. */
    bool has_first;
    uint64_t first_key;
    bool headed;
    /* A reduce ending the group keeps its own state in the carry of its first value: the
     * segments it emitted so far in the stream (the next index), and whether rows of a
     * segment not emitted yet were seen (the open segment). */
    int64_t segments;
    bool open;
    bool continues; /* set from outside only: flush emits nothing (sl_scan_carry) */
} sl_cpu_carry;

typedef struct sl_cpu_fused sl_cpu_fused;

/* Prepares fused plan group `group` of p, computing what the plan's liveness says is needed
 * and waiting for the carry where its carry analysis says a stage reads carried state (both
 * in core/plan/plan.h). SLUICE_ERR_NO_MEMORY, or SLUICE_ERR_TYPE for a construct the CPU backend
 * cannot run (with a diagnostic at the stage). */
sluice_status sl_cpu_fused_create(sluice_context *ctx, const sluice_pipeline *p,
                                  const sl_plan *plan, int group, int nworkers, int64_t max_rows,
                                  sl_cpu_fused **out);
void sl_cpu_fused_destroy(sl_cpu_fused *g);

/* Scans of the group, in stage order (the carries array is indexed the same way). */
int sl_cpu_fused_nscans(const sl_cpu_fused *g);
/* Carries of a fresh stream: every state at its identity, no key seen. */
void sl_cpu_fused_initial_carries(const sl_cpu_fused *g, sl_cpu_carry *carries);
/* At the start of each pushed batch: `reset: batch` scans and offsets segments restart. */
void sl_cpu_fused_begin_batch(const sl_cpu_fused *g, sl_cpu_carry *carries);
/* The column ids the group writes to its destination, in increasing id order. */
const int *sl_cpu_fused_outputs(const sl_cpu_fused *g, int *count);

/* Runs the group over rows rows. src[c]: first row of every column live at the group's start
 * (indexed by column id); offsets/nsegments: the batch's offsets input (NULL when none);
 * carries: in/out; dest[c]: room for rows rows of each output column (for a group ending in
 * a reduce, for sl_plan_rows_out rows). *rows_out receives the rows written. Fails only with SLUICE_ERR_NO_MEMORY (batch larger than max_rows and its
 * bookkeeping cannot grow), leaving carries untouched. */
sluice_status sl_cpu_fused_run(sl_cpu_fused *g, sl_cpu_pool *pool, const sl_value *params,
                               const void *const *src, int64_t rows, const int64_t *offsets,
                               int64_t nsegments, sl_cpu_carry *carries, void *const *dest,
                               int64_t *rows_out);

/* End of stream for a group ending in a reduce whose segments carry over batches: writes
 * its open segment (the whole stream's, even empty, without segments) as row 0 of dest and
 * sets *rows_out to the rows written (0 or 1); the reduce then holds nothing. */
void sl_cpu_fused_flush(sl_cpu_fused *g, sl_cpu_carry *carries, void *const *dest,
                        int64_t *rows_out);

#endif
