/* sluice_cuda.h — CUDA extras of the public API: sessions on the caller's CUDA stream,
 * batches whose columns are device pointers, and results left in device memory.
 *
 * Everything in sluice.h applies; this header adds what only a GPU program needs. These
 * functions exist only in builds with the CUDA backend (SLUICE_WITH_CUDA); in other builds
 * the header still compiles but linking fails, so test sluice_backend_available first.
 *
 * Streams and ordering
 *   A CUDA session queues its kernels on one stream: the caller's (see
 *   sluice_cuda_options.stream) or, when none is given, a non-blocking stream the session
 *   creates and destroys. Work the caller queued on that stream before a push is ordered
 *   before the push's work; work on other streams is not — make the session's stream wait
 *   on an event (cudaStreamWaitEvent) first. Host batches are copied in on a second stream
 *   and host results out on a third, both the session's own and ordered against the
 *   kernels by events, so with batches in flight (sluice.h, "Batches in flight"; default
 *   depth 3) one batch is copied in while the one before computes and the one before that
 *   is copied out. Sessions on different streams run concurrently (one context per thread,
 *   as sluice.h's thread-safety rule says). On sm_90 and later sluice's kernels allow
 *   programmatic dependent launch: each waits for the work ahead of it on the stream before
 *   it touches memory, and lets the next kernel's launch begin early. Nothing changes for
 *   work you queue after a push unless you launch it with programmatic stream serialization
 *   yourself; then, as with any such launch, it must call cudaGridDependencySynchronize()
 *   before it reads what the push wrote.
 *
 * When device memory may be reused
 *   - Device input (sluice_cuda_session_push_device): the columns are read by work queued
 *     on the session's stream. Overwrite or free them only after that work is done: queue
 *     the overwrite on the same stream, or synchronise with it (cudaStreamSynchronize, or an
 *     event recorded on the stream after the push); a batch pulled from the session is
 *     complete, and so are the pushes before it. A push whose results go to the host, or
 *     whose compaction's kept-row count a later stage needs, returns only after the work
 *     reading its input is done, so its input is free when it returns.
 *   - Host input (sluice_session_push): a column whose rows all lie in pinned memory of the
 *     session's context (sluice_cuda_host_alloc, sluice_cuda_host_register, or a host result
 *     batch of that context; see "Pinned host memory" below) is read by the copy engine
 *     directly, with no copy on the CPU. Other host memory (malloc) is copied through the
 *     session's ring of pinned staging buffers (4 of 32 MB by default, pinned on first use)
 *     on a copy stream: the CPU fills one (several threads for chunks of megabytes:
 *     SLUICE_CUDA_STAGING_THREADS) while the copy engine drains those filled before; the
 *     compute waits on an event. The reuse rule is the same for
 *     both: the caller may overwrite or free the memory it pushed as soon as push returns,
 *     as sluice.h says, a failed push included (a push waits for the copy engine to have
 *     read pinned input before it returns). At depth 1 a push returns when its results are
 *     complete; deeper, as soon as its rows are staged, and its compute and copy out go on
 *     while the next pushes are staged.
 *   - Host outputs: a result batch's columns are pinned host memory from a pool the context
 *     keeps, written by the copy engine directly, and complete when the batch is handed out
 *     (sluice_session_pull). After a compact or filter stage only the kept rows cross the
 *     bus: the kept-row count stays on the device until the batch's kernels are done, and
 *     the copy out is then issued for exactly that many rows. sluice_batch_free gives them back to the pool for the next
 *     batches (it keeps at most 64 freed blocks, 1 GiB together; more goes back to CUDA at
 *     once); sluice_context_destroy releases the pool. When pinned memory cannot be had, a
 *     batch is ordinary memory from the context's allocator, copied out through the staging
 *     ring. A result batch may be pushed as input to a session of the same context: its
 *     columns are read by DMA.
 *   - Device outputs (sluice_cuda_options.outputs_on_device): a pulled batch's columns
 *     (sluice_batch_column) are device pointers, complete when pull hands the batch out (the
 *     work that wrote them is done). sluice_batch_free returns them to the device's memory
 *     pool in stream order on the legacy default stream; if work on a non-blocking stream
 *     still reads them, synchronise that stream first. The pool is the context's (one per
 *     device), so a batch stays valid after its session closes; closing a session gives
 *     back to the device the pool memory that no batch holds.
 *   - Nothing is allocated with cudaMalloc on the hot path: a session's scratch, carries
 *     and staging buffers are allocated when it opens (a staging buffer on its first use), sized for max_batch_rows (a bigger
 *     batch is cut, or, when it cannot be, the buffers grow once for it: sluice.h,
 *     max_batch_rows); device outputs come from the stream-ordered memory pool, and a
 *     session holds one pool block ahead for its next push's result (the last result's size,
 *     when that is at most 16 MiB), so that a push launches without a pool call first. Each
 *     batch in flight has its own input and column buffers, so a session's device memory is
 *     about pipeline_depth times that of one batch (the scratch is shared).
 *
 * Pinned host memory (sluice_cuda_host_alloc, sluice_cuda_host_register)
 *   The copy engine reads and writes pinned (page-locked) memory directly, at the bus's
 *   speed; pageable memory costs a CPU copy through a staging buffer. The context keeps a
 *   table of the memory it pinned: a column qualifies when all its bytes lie in one block (a
 *   column starting in the middle of a block is fine; one running past its end is staged).
 *   Memory is pinned for every device (CUDA's portable flag). Pinning is slow (milliseconds
 *   per hundred megabytes) and takes memory from the rest of the system: pin large,
 *   long-lived buffers once and reuse them for batch after batch. These calls use the
 *   context like every other call (one thread at a time); the memory itself is ordinary
 *   host memory that any thread may read and write, except while a push that reads it runs.
 *   A block still allocated or registered when the context is destroyed is freed or
 *   unregistered then (its pointers die with the context).
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
 *   SLUICE_CUDA_TUNING       "THREADS:ITEMS[:MIN_BLOCKS]": another launch shape (THREADS
 *                            a block's row threads, at most 992 where a look-back warp
 *                            joins them; ITEMS a power of two up to 128, 32 at most for
 *                            groups over offsets segments or runs of keys).
 *   SLUICE_CUDA_OVERLAP=0    single-look-back groups use the kernel without a look-back warp.
 *   SLUICE_CUDA_CHUNKS=0     the default mode's look-back states of 4 bytes take the fast
 *                            look-back instead of the chunked one.
 *   SLUICE_CUDA_ROUNDS=N     groups that may take a tile in rounds (no compaction, reduce or
 *                            offsets segments) take N (2, 4 or 8; another value: one) in place of
 *                            the default (one plain scan over 1- or 2-byte columns: 2 or 4;
 *                            2 of 64 items a thread where every column is of 1 byte).
 *   SLUICE_CUDA_MAX_ITEMS=N  items a thread at most (1 to 128, a power of two; default: the
 *                            architecture's row in kernels/tuning.h, 32 on sm_90, which only
 *                            a scan of 1-byte columns alone passes).
 *   SLUICE_CUDA_WIDEN=0      narrow scan values (i8, i16, u8, u16, bool) stay narrow in the
 *                            kernel's state instead of held as 4-byte integers.
 *   SLUICE_CUDA_PACK=0       a thread's 1- and 2-byte column values take a register each
 *                            instead of four or two to a register (kernels/sl_items.cuh).
 *   SLUICE_CUDA_STORE=direct each thread stores its own rows of a group's outputs, in place
 *                            of the block's store transposed through shared memory.
 *   SLUICE_CUDA_STAGE_ITEMS=table  a group with a look-back warp keeps the table's items a
 *                            thread even where an input column its stages read then passes
 *                            the shared-memory stages (default: fewer items, so that every
 *                            such column is staged).
 *   SLUICE_CUDA_PAIRS=0      a max or min scan of an i16 or u16 column into its type works a
 *                            row at a time, not two rows a register at once (the default on
 *                            sm_90 and later, which have 16x2 max and min instructions).
 *   SLUICE_NVRTC_LINEINFO=1  kernels carry line information (compute-sanitizer, Nsight).
 *   SLUICE_NVRTC_TRACE=1     the overlapped tile loop prints each warp's cycles per step
 *                            (kernels/sl_trace.cuh); slows the kernels, for measurement only.
 *   Each changes the generated source or options, hence the cache entry; results are the
 *   same under every setting, except that SLUICE_CUDA_TUNING, _ROUNDS, _MAX_ITEMS and
 *   _STAGE_ITEMS change the tile size and with it how a float scan's operations are
 *   grouped (its last bits, in either mode), and that SLUICE_CUDA_CHUNKS changes the
 *   default mode's grouping of float states across tiles (which that mode leaves to timing
 *   anyway; run_to_run's is fixed).
 *   SLUICE_CUDA_STAGING_THREADS=N  threads that copy pageable batches into and out of the
 *                            staging buffers (default: every core online, at most 16; 1:
 *                            the calling thread alone); read on a session's first large
 *                            staging copy.
 *   SLUICE_CUDA_STAGING_SLOTS=N    staging buffers in a session's ring (default 4; 2 to 16).
 *   SLUICE_CUDA_STAGING_MB=N       megabytes of each (default 32; 1 to 1024; a session whose
 *                            max_batch_rows is small gets smaller ones). Both read when a
 *                            session opens.
 *   SLUICE_CUDA_STAGING_NT=0       the staging copy into the buffers uses ordinary stores, not
 *                            non-temporal ones (x86-64); read with STAGING_THREADS.
 *   Results are the same under every staging setting; a value above its range is clamped, one
 *   below it or not a number ignored.
 *
 * Errors
 *   CUDA failures are SLUICE_ERR_CUDA with the CUDA error's name and text in the diagnostic;
 *   device memory exhaustion is SLUICE_ERR_NO_MEMORY with the number of bytes asked for. A
 *   failed push leaves the session as it was before the push (sluice.h). A failure in a
 *   batch's work found after its push returned (batches in flight) is reported by a later
 *   call and rejects that push and every push after it, exactly as sluice.h's "Errors with
 *   batches in flight" says; the session waits until the device no longer works for them
 *   before it frees their memory, then goes on from the state before the failed push.
 *   After a sticky CUDA error (an illegal address, say) the device is unusable for the
 *   process, as CUDA defines: every later call returns SLUICE_ERR_CUDA.
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

/* Allocates `bytes` of pinned host memory that ctx's sessions read and write by DMA (see
 * "Pinned host memory" and "When device memory may be reused" above). *out is page-aligned,
 * uninitialised, and the caller's until sluice_cuda_host_free, or until
 * sluice_context_destroy frees it. It does not come from the context's allocator. A child
 * process (fork) must not touch it: a block of 4 MiB or more is not mapped in the child at
 * all (so that the child's writes cannot move pages the copy engine uses), and CUDA is not
 * for use in a child anyway.
 * Errors (*out is NULL after every error): SLUICE_ERR_INVALID_ARGUMENT for a NULL ctx or out
 * or zero bytes; SLUICE_ERR_BACKEND_UNAVAILABLE without a usable GPU; SLUICE_ERR_NO_MEMORY
 * when the memory cannot be pinned; SLUICE_ERR_CUDA otherwise. */
SLUICE_API sluice_status sluice_cuda_host_alloc(sluice_context *ctx, size_t bytes, void **out);

/* Frees memory from sluice_cuda_host_alloc on the same context. NULL ptr: nothing, SLUICE_OK.
 * Errors: SLUICE_ERR_INVALID_ARGUMENT for a NULL ctx, a pointer this context did not
 * allocate or already freed (a double free is caught, not undefined), a pointer inside a
 * block instead of its start, or registered memory (use sluice_cuda_host_unregister). */
SLUICE_API sluice_status sluice_cuda_host_free(sluice_context *ctx, void *ptr);

/* Pins `bytes` of the caller's host memory from ptr (malloc, mmap of anonymous memory, ...)
 * so ctx's sessions read and write it by DMA. The memory stays the caller's: sluice never
 * frees it; the caller unregisters it (or destroys the context) before freeing or unmapping
 * it. CUDA pins whole pages, so a range that is not page-aligned pins the pages around it.
 * Errors: SLUICE_ERR_INVALID_ARGUMENT for a NULL ctx or ptr, zero bytes, a range that wraps
 * around the address space, or one overlapping memory already pinned (by this context or,
 * through CUDA, elsewhere in the process); SLUICE_ERR_BACKEND_UNAVAILABLE without a usable
 * GPU; SLUICE_ERR_NO_MEMORY when it cannot be pinned; SLUICE_ERR_CUDA otherwise (memory
 * CUDA cannot pin, such as some file mappings). */
SLUICE_API sluice_status sluice_cuda_host_register(sluice_context *ctx, void *ptr, size_t bytes);

/* Unpins memory registered on ctx with sluice_cuda_host_register; ptr is the pointer given
 * there. Pushes after this copy the memory through the staging buffers again.
 * Errors: SLUICE_ERR_INVALID_ARGUMENT for a NULL ctx or ptr, memory this context did not
 * register (or already unregistered), a pointer inside the range instead of its start, or
 * memory from sluice_cuda_host_alloc (use sluice_cuda_host_free). */
SLUICE_API sluice_status sluice_cuda_host_unregister(sluice_context *ctx, void *ptr);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_CUDA_H */
