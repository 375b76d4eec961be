/* threads.h — the CPU backend's small fixed thread pool: a session starts its workers once
 * and every parallel step (a fused group's tiles, a radix pass) runs one task on all of them. */
#ifndef SL_CPU_THREADS_H
#define SL_CPU_THREADS_H

#include "common/base.h"

typedef struct sl_cpu_pool sl_cpu_pool;

/* task(arg, worker) runs once on each worker in [0, nworkers); the calling thread is
 * worker 0, so a pool of one thread starts no thread at all. */
typedef void (*sl_cpu_task)(void *arg, int worker);

/* nthreads <= 0: one per online core. SLUICE_ERR_NO_MEMORY when memory or threads run out. */
sluice_status sl_cpu_pool_create(sluice_context *ctx, int nthreads, sl_cpu_pool **out);
void sl_cpu_pool_destroy(sl_cpu_pool *pool);
int sl_cpu_pool_size(const sl_cpu_pool *pool);
/* Runs task on min(nworkers, pool size) workers (at least one) and waits for all of them. */
void sl_cpu_pool_run(sl_cpu_pool *pool, sl_cpu_task task, void *arg, int nworkers);

/* Polite spinning for the tile-to-tile hand-off: yields the core after a while so that
 * oversubscribed machines (more workers than cores) still make progress. */
void sl_cpu_relax(unsigned *spins);



/* Splits [0, n) into one contiguous slice per worker (fewer when a slice would hold fewer
 * than min_rows rows) and runs fn(arg, begin, end) on each in parallel. */
typedef void (*sl_cpu_slice_fn)(void *arg, int64_t begin, int64_t end);
void sl_cpu_parallel_slices(sl_cpu_pool *pool, int64_t n, int64_t min_rows, sl_cpu_slice_fn fn,
                            void *arg);

#endif
