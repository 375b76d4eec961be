/* threads.c — the fixed worker pool of threads.h: workers sleep on a condition variable
 * between tasks; a task is published with a generation number so each worker runs it once. */
#include "cpu/threads.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "common/context.h"

#define SL_CPU_MAX_THREADS 256

struct sl_cpu_pool {
    sluice_context *ctx;
    int nthreads;          /* workers including the caller (worker 0) */
    pthread_t *threads;    /* nthreads - 1 started threads */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    uint64_t generation;   /* bumped for every task */
    sl_cpu_task task;
    void *arg;
    int active;            /* workers taking part in the current task */
    int pending;           /* started threads still running the current task */
    bool stopping;
};

typedef struct worker_start {
    sl_cpu_pool *pool;
    int index;
} worker_start;

static void *worker_main(void *p) {
    sl_cpu_pool *pool = ((worker_start *)p)->pool;
    int index = ((worker_start *)p)->index;
    sl_free(pool->ctx, p);
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stopping && pool->generation == seen) pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->stopping) break;
        seen = pool->generation;
        sl_cpu_task task = pool->task;
        void *arg = pool->arg;
        bool takes_part = index < pool->active;
        pthread_mutex_unlock(&pool->lock);
        if (takes_part) task(arg, index);
        pthread_mutex_lock(&pool->lock);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

static int online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

sluice_status sl_cpu_pool_create(sluice_context *ctx, int nthreads, sl_cpu_pool **out) {
    *out = NULL;
    if (nthreads <= 0) nthreads = online_cores();
    if (nthreads > SL_CPU_MAX_THREADS) nthreads = SL_CPU_MAX_THREADS;
    sl_cpu_pool *pool = sl_calloc(ctx, 1, sizeof *pool);
    if (!pool) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory creating CPU worker threads");
    pool->ctx = ctx;
    pool->nthreads = 1;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    if (nthreads > 1) {
        pool->threads = sl_calloc(ctx, (size_t)nthreads - 1, sizeof *pool->threads);
        if (!pool->threads) {
            sl_cpu_pool_destroy(pool);
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory creating CPU worker threads");
        }
    }
    for (int i = 1; i < nthreads; i++) {
        worker_start *ws = sl_alloc(ctx, sizeof *ws);
        if (!ws) {
            sl_cpu_pool_destroy(pool);
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory creating CPU worker threads");
        }
        ws->pool = pool;
        ws->index = i;
        if (pthread_create(&pool->threads[i - 1], NULL, worker_main, ws) != 0) {
            sl_free(ctx, ws);
            sl_cpu_pool_destroy(pool);
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY,
                            "cannot start CPU worker thread %d of %d (set cpu_threads lower)", i,
                            nthreads);
        }
        pool->nthreads++;
    }
    *out = pool;
    return SLUICE_OK;
}

void sl_cpu_pool_destroy(sl_cpu_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i < pool->nthreads; i++) pthread_join(pool->threads[i - 1], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    sl_free(pool->ctx, pool->threads);
    sl_free(pool->ctx, pool);
}

int sl_cpu_pool_size(const sl_cpu_pool *pool) { return pool->nthreads; }

void sl_cpu_pool_run(sl_cpu_pool *pool, sl_cpu_task task, void *arg, int nworkers) {
    if (nworkers > pool->nthreads) nworkers = pool->nthreads;
    if (nworkers <= 1) {
        task(arg, 0);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->task = task;
    pool->arg = arg;
    pool->active = nworkers;
    pool->pending = pool->nthreads - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    task(arg, 0);
    pthread_mutex_lock(&pool->lock);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
}

void sl_cpu_relax(unsigned *spins) {
    if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

typedef struct slice_job {
    sl_cpu_slice_fn fn;
    void *arg;
    int64_t n;
    int nworkers;
} slice_job;

static void slice_task(void *arg, int w) {
    slice_job *j = arg;
    int64_t b = j->n * w / j->nworkers, e = j->n * (w + 1) / j->nworkers;
    if (e > b) j->fn(j->arg, b, e);
}

void sl_cpu_parallel_slices(sl_cpu_pool *pool, int64_t n, int64_t min_rows, sl_cpu_slice_fn fn,
                            void *arg) {
    if (n <= 0) return;
    int64_t by_size = min_rows > 0 ? n / min_rows : n;
    int nworkers = pool ? pool->nthreads : 1;
    if (by_size < nworkers) nworkers = by_size < 1 ? 1 : (int)by_size;
    if (nworkers <= 1) {
        fn(arg, 0, n);
        return;
    }
    slice_job j = {fn, arg, n, nworkers};
    sl_cpu_pool_run(pool, slice_task, &j, nworkers);
}
