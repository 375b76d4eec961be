/* pinned.h — pinned (page-locked) host memory for the CUDA backend (core/cuda/pinned.c):
 * the context's table of pinned ranges that the backend asks before every host copy (memory
 * from sluice_cuda_host_alloc, memory registered with sluice_cuda_host_register, and the
 * blocks of the result pool), so a column lying in one is copied by DMA with no staging copy;
 * host result batches whose columns are pooled pinned blocks that sluice_batch_free gives
 * back; the staging copy of pageable memory, split among a few threads; and the context's
 * device memory pools.
 *
 * Threading: the table and the pool belong to the context and are used under its rule (one
 * thread at a time, sluice.h). A copier belongs to one session. */
#ifndef SL_CUDA_PINNED_H
#define SL_CUDA_PINNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "runtime/session.h"

/* Whether all of [p, p + bytes) lies inside one pinned range of ctx, so the copy engine may
 * read or write it directly. False for bytes == 0 and for memory ctx did not pin. */
bool sl_cuda_pinned_covers(sluice_context *ctx, const void *p, size_t bytes);

/* A host result batch of `rows` rows per output column of s's pipeline, each column a pinned
 * block from the context's pool (sluice_batch_free gives it back there). NULL, with no
 * diagnostic, when pinned memory cannot be had: the caller falls back to sl_batch_new_host. */
sluice_batch *sl_cuda_pinned_batch_new(sluice_session *s, int64_t rows);

/* The staging copy: memcpy between pageable memory and a pinned staging buffer, bound by one
 * core's copy rate, is split among a few threads for chunks of megabytes. *c is the session's
 * copier: NULL at first, started on the first large copy (SLUICE_CUDA_STAGING_THREADS, read
 * then, says how many threads copy in all; SLUICE_CUDA_STAGING_NT=0 turns off the
 * non-temporal stores); when threads cannot be started the calling thread copies alone.
 * into_slot: dst is a staging slot that only the copy engine reads next (non-temporal stores
 * where the CPU has them). Complete on return. Results never depend on the thread count. */
typedef struct sl_cuda_copier sl_cuda_copier;
void sl_cuda_staging_copy(sluice_context *ctx, sl_cuda_copier **c, void *dst, const void *src,
                          size_t len, bool into_slot);
/* The same in two calls, so the caller can issue CUDA work while the helpers copy: _start
 * hands the copy to the helpers and returns at once (a copy too small to split, or without
 * helpers, is made before it returns); _finish copies what is left on the calling thread and
 * returns when the copy is complete. Each _start is followed by one _finish before the
 * copier is used again or freed (freeing it finishes an unfinished copy first); dst and src
 * must stay valid until then. c may be NULL in _finish. */
void sl_cuda_staging_start(sluice_context *ctx, sl_cuda_copier **c, void *dst, const void *src,
                           size_t len, bool into_slot);
void sl_cuda_staging_finish(sl_cuda_copier *c);
/* Joins the copier's threads and frees it; NULL is harmless. */
void sl_cuda_copier_free(sluice_context *ctx, sl_cuda_copier *c);

/* The integer in environment variable `name`, clamped to at most hi; `fallback` when it is
 * unset, not a whole number, or below lo (the staging knobs: sluice_cuda.h, Environment). */
int sl_cuda_env_int(const char *name, int lo, int hi, int fallback);

/* The context's stream-ordered memory pool on `device`, created on first use and destroyed
 * with the context, after every batch has been freed. Sessions allocate their device result
 * batches and temporaries from it; a batch may outlive its session (sluice.h), so the pool
 * must too: a pool destroyed at a session's close with batches still to be freed into it
 * crashed the driver when a later session's pool was destroyed (H200, 2026-12-01). It keeps
 * freed memory for reuse; a session's close trims what is unused. Errors:
 * SLUICE_ERR_BACKEND_UNAVAILABLE when CUDA refuses a pool, SLUICE_ERR_LIMIT for a device
 * number past the table, SLUICE_ERR_NO_MEMORY. */
sluice_status sl_cuda_device_pool(sluice_context *ctx, int device, cudaMemPool_t *out);

#endif
