/* fused.h — one fused plan group on the GPU: prepared once when a session opens (code
 * generation, NVRTC through the on-disk kernel cache, module load), then run once per batch
 * on a stream with device buffers the host side (core/cuda/backend.c) owns.
 *
 * Division of labour. This module never allocates device memory on the hot path and never
 * synchronises: sl_cuda_group_run only enqueues work on the caller's stream. The host side
 * owns every buffer (input and output columns, the carry, the scratch, the kept-row count)
 * and decides where data lives.
 *
 * Columns are named by pipeline column id (sluice_pipeline.columns[]). A group reads the
 * columns in layout.inputs (device pointers, `rows` elements each; for an offsets input,
 * nsegments+1 int64 values) and writes the columns in layout.outputs. Only columns alive
 * at the group's end and needed after it are written or passed through (a column a later
 * stage defines is not this group's). A column that is
 * needed after the group, exists before it and is not changed by it is listed in
 * layout.passthrough when the group does not compact: the kernel does not copy it, the host
 * keeps using the buffer it already has. When the group compacts, every column needed after
 * it is in layout.outputs (rows move) and the kernel writes the kept-row count to
 * *io.out_rows (device memory; the host copies it back when it needs the number).
 *
 * Stream-wide state (running scan totals, open segments, the last key of a key-segmented
 * scan) is the carry: layout.carry_bytes of device memory. At session open and at reset the
 * host copies sl_cuda_group_carry_identity() into it. Each run reads carry_in and writes the
 * state after the batch to carry_out, never the same buffer: a kernel's blocks may read the
 * carry after the batch's last tile has written the next one (a block's prefix takes the
 * carry's batch constants when its own look-back ends). Keeping two and swapping after a
 * successful push is how the host makes pushes transactional. */
#ifndef SL_CUDA_FUSED_H
#define SL_CUDA_FUSED_H

#include "plan/plan.h"
#include "runtime/session.h"

typedef struct sl_cuda_group sl_cuda_group;

typedef struct sl_cuda_group_layout {
    int ninputs;
    const int *inputs;       /* column ids read, in io.inputs order (includes an offsets input) */
    int noutputs;
    const int *outputs;      /* column ids written, in io.outputs order */
    int npassthrough;
    const int *passthrough;  /* needed after the group, not written (non-compacting groups) */
    bool compacts;           /* output rows are the kept rows; count in *io.out_rows */
    bool reduces;            /* ends in a reduce (compacts too): one row per segment closed,
                                count in *io.out_rows, even for an empty batch (offsets
                                segments, `per: batch`); what stays open is flushed by
                                sl_cuda_group_flush */
    size_t carry_bytes;      /* size of the stream-wide carry (> 0: at least a status word) */
    int phases;              /* chained look-backs in the one kernel (scans of scans) */
} sl_cuda_group_layout;

/* What one run reads and writes. Every pointer is device memory. */
typedef struct sl_cuda_group_io {
    int64_t rows;                 /* rows of this batch (may be 0) */
    int64_t nsegments;            /* segments of the offsets input; -1 when none */
    const void *const *inputs;    /* layout.ninputs pointers */
    void *const *outputs;         /* layout.noutputs pointers, room for `rows` elements each */
    const sl_value *params;       /* host: current value of every pipeline param */
    const void *carry_in;         /* layout.carry_bytes */
    void *carry_out;              /* layout.carry_bytes; not carry_in (see above) */
    void *scratch;                /* sl_cuda_group_scratch_size(g, rows) bytes, 256-aligned */
    int64_t *out_rows;            /* compacting groups: kept rows of this batch; else unused */
} sl_cuda_group_io;

/* Generates, compiles (through the kernel cache) and loads the kernel of plan group
 * `group` (which must be SL_GROUP_FUSED) for compute capability `arch` (major*10+minor,
 * e.g. 90). Errors: SLUICE_ERR_COMPILE (NVRTC rejected the source: the log is in the
 * diagnostic), SLUICE_ERR_CUDA (loading the module), SLUICE_ERR_NO_MEMORY. */
sluice_status sl_cuda_group_prepare(sluice_context *ctx, const sluice_pipeline *p,
                                    const sl_plan *plan, int group, int arch,
                                    sl_cuda_group **out);
void sl_cuda_group_free(sluice_context *ctx, sl_cuda_group *g);

const sl_cuda_group_layout *sl_cuda_group_layout_of(const sl_cuda_group *g);
/* The carry's initial (identity) bytes, layout.carry_bytes long, host memory. */
const void *sl_cuda_group_carry_identity(const sl_cuda_group *g);
/* Where each scan of the group (in stage order, *count of them) keeps its state in the
 * carry (codegen.h's sl_cg_scan_carry): for reading and seeding carries from the host. */
const struct sl_cg_scan_carry *sl_cuda_group_scan_carries(const sl_cuda_group *g, int *count);
/* Scratch bytes a run over `rows` rows needs (size it once for max_batch_rows). */
size_t sl_cuda_group_scratch_size(const sl_cuda_group *g, int64_t rows);

/* Enqueues the group's work for one batch on `stream` (a cudaStream_t; NULL = default
 * stream): resets the scratch, launches the kernel. Does not synchronise. Errors:
 * SLUICE_ERR_CUDA (launch failure, with cudaGetErrorString in the message),
 * SLUICE_ERR_INVALID_ARGUMENT (a NULL pointer the layout needs, carry_out == carry_in). */
sluice_status sl_cuda_group_run(sluice_context *ctx, const sl_cuda_group *g, void *stream,
                                const sl_cuda_group_io *io);
/* The same for a caller that hands io->scratch already zero (cleared in stream order before
 * this run, and used by no other run since): no memset is queued, one stream operation less
 * a batch. */
sluice_status sl_cuda_group_run_zeroed(sluice_context *ctx, const sl_cuda_group *g, void *stream,
                                       const sl_cuda_group_io *io);

/* A group ending in a reduce, at the end of the stream: enqueues the writing of the segment
 * it holds open (a whole-stream reduce's one row, an empty stream's identities included; the
 * last run of keys or head-flag segment), from carry_in, into row 0 of io.outputs, the rows
 * (0 or 1) into *io.out_rows, and the carry with that segment closed into carry_out.
 * io.rows and io.inputs are unused. Errors: SLUICE_ERR_INVALID_ARGUMENT (not a reduce
 * group, a buffer missing, carry_out == carry_in), SLUICE_ERR_CUDA (launch failure). */
sluice_status sl_cuda_group_flush(sluice_context *ctx, const sl_cuda_group *g, void *stream,
                                  const sl_cuda_group_io *io);

#endif
