/* sluice_cuda.h — CUDA extras of the public API: sessions on the caller's CUDA stream,
 * batches whose columns are device pointers, and results left in device memory.
 *
 * Everything in sluice.h applies; this header adds what only a GPU program needs. These
 * functions exist only in builds with the CUDA backend (SLUICE_WITH_CUDA); in other builds
 * the header still compiles but linking fails, so test sluice_backend_available first.
 *
 * Streams and ordering
 *   A CUDA session queues all its GPU work on one stream: the caller's (see
 *   sluice_cuda_options.stream) or, when none is given, a non-blocking stream the session
 *   creates and destroys. Work the caller queued on that stream before a push is ordered
 *   before the push's work; work on other streams is not — make the session's stream wait
 *   on an event (cudaStreamWaitEvent) first. Sessions on different streams run concurrently
 *   (one context per thread, as sluice.h's thread-safety rule says).
 *
 * When device memory may be reused
 *   - Device input (sluice_cuda_session_push_device): the columns are read by work queued
 *     on the session's stream. Overwrite or free them only after that work is done: queue
 *     the overwrite on the same stream, or synchronise with it (cudaStreamSynchronize, or an
 *     event recorded on the stream after the push). A push that must know its output row
 *     count on the host (a compact or filter stage; host outputs) returns only after its
 *     work is complete, so its input is free when it returns.
 *   - Host input (sluice_session_push): copied through the session's ring of two pinned
 *     staging buffers on a copy stream (the CPU fills one while the copy engine drains the
 *     other; the compute waits on an event); results return the same way. The caller's
 *     memory is free again when push returns, as sluice.h says. A push of host batches
 *     returns when its results are on the host, so consecutive pushes do not overlap.
 *   - Device outputs (sluice_cuda_options.outputs_on_device): a pulled batch's columns
 *     (sluice_batch_column) are device pointers, valid for work queued on the session's stream
 *     after the pull (other streams: wait on an event recorded on it). sluice_batch_free
 *     returns them to the device's memory pool in stream order on the legacy default stream;
 *     if work on a non-blocking stream still reads them, synchronise that stream first.
 *   - Nothing is allocated with cudaMalloc on the hot path: a session's scratch, carries
 *     and staging buffers are allocated when it opens, sized for max_batch_rows (a bigger
 *     batch is cut, or, when it cannot be, the buffers grow once for it: sluice.h,
 *     max_batch_rows); device outputs come from the stream-ordered memory pool.
 *
 * Performance
 *   Each fused group is one persistent kernel: as many blocks as fit on the GPU at once,
 *   each looping over tiles. On sm_90 and later a tile's input columns reach shared memory
 *   through the copy engine while the block is still busy with the previous tile; this
 *   needs whole tiles and columns whose device pointers are 16-byte aligned. A device batch
 *   cut at a row that breaks the alignment (or an unaligned pointer of yours) is read
 *   directly from global memory instead: correct, and slower. bench/RESULTS.md has the
 *   measured figures.
 *
 * Determinism (pipelines/SCHEMA.md, "Determinism", says what each mode promises)
 *   A scan's tiles are combined as their results arrive from the blocks that run at once, so
 *   by default a float sum, product or recurrence (or a declared operator) may differ in its
 *   last bits from run to run; integer, bool, min/max, bitwise and count results never do.
 *   With `determinism: run_to_run` such scans combine the tiles in one fixed order (each
 *   tile's running state is its predecessor's combined with its own total), so every output
 *   has the same bits in every run on the same GPU model with the same batch cutting and
 *   settings. The fixed order costs speed (H200, 2^28 rows: an f32 sum or linrec scan at
 *   about 90% of the default mode's speed, segmented sums and scans beside a compaction at
 *   60-68%; bench/RESULTS.md); pipelines without such scans run the same kernels in both
 *   modes.
 *
 * Environment (read when a session opens; for measurement and debugging)
 *   SLUICE_CACHE_DIR         where compiled kernels are kept when the context's options name
 *                            no folder (then $XDG_CACHE_HOME/sluice, ~/.cache/sluice); a
 *                            corrupt or stale entry is rebuilt, never trusted.
 *   SLUICE_CUDA_TUNING       "THREADS:ITEMS[:MIN_BLOCKS]": another launch shape.
 *   SLUICE_CUDA_OVERLAP=0    single-look-back groups use the kernel without a look-back warp.
 *   SLUICE_NVRTC_LINEINFO=1  kernels carry line information (compute-sanitizer, Nsight).
 *   Each changes the generated source or options, hence the cache entry; results are the
 *   same under every setting, except that SLUICE_CUDA_TUNING changes the tile size and with
 *   it how a float scan's operations are grouped (its last bits, in either mode).
 *
 * Errors
 *   CUDA failures are SLUICE_ERR_CUDA with the CUDA error's name and text in the diagnostic;
 *   device memory exhaustion is SLUICE_ERR_NO_MEMORY with the number of bytes asked for. A
 *   failed push leaves the session as it was before the push (sluice.h). After a sticky
 *   CUDA error (an illegal address, say) the device is unusable for the process, as CUDA
 *   defines: every later call returns SLUICE_ERR_CUDA.
 */
#ifndef SLUICE_CUDA_H
#define SLUICE_CUDA_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without requiring the CUDA headers (the same type driver_types.h declares). */
#ifndef __DRIVER_TYPES_H__
typedef struct CUstream_st *cudaStream_t;
#endif

#define SLUICE_CUDA_OPTIONS_VERSION 1
typedef struct sluice_cuda_options {
    unsigned version;       /* SLUICE_CUDA_OPTIONS_VERSION */
    cudaStream_t stream;    /* the session's stream; NULL: the session makes its own */
    int outputs_on_device;  /* nonzero: result batches hold device pointers */
} sluice_cuda_options;
#define SLUICE_CUDA_OPTIONS_INIT {SLUICE_CUDA_OPTIONS_VERSION, NULL, 0}

/* Opens a session on the CUDA backend (options->backend must be AUTO or CUDA; it runs on
 * CUDA either way) with the stream and output placement in `cuda` (NULL: defaults). The
 * session runs on the caller's current device (cudaSetDevice) at this call, and later calls
 * work there whatever device is current then (the caller's current device is restored). A
 * caller's stream must belong to that device.
 * Errors: those of sluice_session_open; SLUICE_ERR_BACKEND_UNAVAILABLE when no GPU is usable;
 * SLUICE_ERR_INVALID_ARGUMENT for an unknown options version or backend CPU. */
SLUICE_API sluice_status sluice_cuda_session_open(sluice_pipeline *pipeline,
                                                  const sluice_session_options *options,
                                                  const sluice_cuda_options *cuda,
                                                  sluice_session **out);

/* sluice_session_push for columns in device memory (each data pointer is a device pointer,
 * for an offsets input too). Validated as sluice_session_push does; offsets are checked on
 * the device. Memory reuse: see "When device memory may be reused" above.
 * Errors: as sluice_session_push; SLUICE_ERR_MISUSE on a session that is not CUDA. */
SLUICE_API sluice_status sluice_cuda_session_push_device(sluice_session *session,
                                                         const sluice_column *columns,
                                                         size_t count);

/* The stream the session queues its work on (never NULL for a CUDA session; NULL for a
 * session of another backend). */
SLUICE_API cudaStream_t sluice_cuda_session_stream(const sluice_session *session);

/* Whether a batch's columns are device pointers. */
SLUICE_API int sluice_batch_on_device(const sluice_batch *batch);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_CUDA_H */
