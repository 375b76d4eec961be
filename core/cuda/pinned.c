/* pinned.c — the CUDA backend's memory that belongs to the context (see pinned.h): the public
 * sluice_cuda_host_alloc/free/register/unregister, the context's table of pinned ranges, the
 * pool of pinned blocks that host result batches are made of, the threaded staging copy for
 * pageable memory, and the context's device memory pools (device result batches).
 *
 * Why a table. The copy engine reads and writes pinned memory at the bus's speed; pageable
 * memory costs a CPU copy through a staging buffer. CUDA's pointer attributes say whether an
 * address is pinned but not where its pinned range ends, and a column may start inside a
 * block and run past it; so the context records every range it pinned, sorted by address,
 * and a column qualifies only when all its bytes lie in one range. All memory is pinned with
 * the portable flag, so it is pinned for every device's context. A context is used by one
 * thread at a time (sluice.h), so the table needs no lock. */
#include "cuda/pinned.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cuda_runtime_api.h>

#include "common/context.h"
#include "sluice_cuda.h"

/* ---- the table of pinned ranges ------------------------------------------------------------ */

enum { PINNED_ALLOC, PINNED_REGISTERED, PINNED_POOL };

typedef struct pinned_range {
    char *base;
    size_t bytes;
    int kind;
    bool in_use; /* PINNED_POOL: held by a result batch (else free for the next one) */
    size_t mapped; /* PINNED_ALLOC and PINNED_POOL: bytes of our own mapping (pin_new), 0 for
                      cudaHostAlloc's memory */
} pinned_range;

/* The pool keeps freed result blocks for the context's next batches, at most this many blocks
 * and bytes together (the bound of the pageable block cache, context.h); a block returned
 * beyond either goes back to CUDA at once. Block sizes are rounded up to a size class (four
 * per power of two, at least POOL_GRAIN), so that batches of about the same size share
 * blocks; a request takes the smallest free block that holds it and is at most twice its
 * class. */
#define POOL_MAX_FREE_BLOCKS 64
#define POOL_MAX_FREE_BYTES ((size_t)1 << 30)
#define POOL_GRAIN ((size_t)64 << 10)

#define MAX_POOL_DEVICES 64

typedef struct cuda_ctx_state {
    pinned_range *ranges; /* sorted by base, never overlapping */
    size_t n, cap;
    size_t free_bytes;    /* pool blocks not in use */
    int free_blocks;
    /* per device, created by its first session: device result batches, stream-sort buffers
       and flush temporaries (sl_cuda_device_pool) */
    cudaMemPool_t device_pool[MAX_POOL_DEVICES];
} cuda_ctx_state;

/* ---- pinning: our own pages, faulted in by several threads, then registered ------------ */

/* cudaHostAlloc pins at 1.8-2.6 GB/s on the H200's host (the driver faults in and zeroes
 * every page on one thread), and cudaFreeHost gives 192 MiB back in 19-33 ms. Anonymous pages
 * on transparent huge pages, faulted in by 8 threads and then registered with CUDA, pinned at
 * 13-15 GB/s there, and unregistering and unmapping them took 4.7 ms for the same 192 MiB;
 * without huge pages 5.4 GB/s, and with one thread touching 3.3-5.7 GB/s (bench/RESULTS.md,
 * seventeenth session, run 2). Blocks below PIN_OWN_MIN keep cudaHostAlloc (a few
 * milliseconds at most); a block is faulted in by one thread per PIN_TOUCH_PER_THREAD bytes,
 * at most PIN_TOUCH_THREADS and the cores online. */
#define PIN_OWN_MIN ((size_t)4 << 20)
#define PIN_TOUCH_PER_THREAD ((size_t)2 << 20)
#define PIN_TOUCH_THREADS 8

typedef struct touch_part {
    volatile char *at;
    size_t bytes;
} touch_part;

/* One write a page: the kernel maps (and zeroes) the page; a read would map the shared zero
 * page and leave the work to the registration. */
static void *touch_pages(void *arg) {
    const touch_part *t = arg;
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < t->bytes; i += (size_t)page) t->at[i] = 0;
    return NULL;
}

static void touch_parallel(char *base, size_t bytes) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = bytes / PIN_TOUCH_PER_THREAD;
    if (n > PIN_TOUCH_THREADS) n = PIN_TOUCH_THREADS;
    if (cores > 0 && n > (size_t)cores) n = (size_t)cores;
    if (n < 1) n = 1;
    size_t share = (bytes / n + 4095) & ~(size_t)4095;
    pthread_t threads[PIN_TOUCH_THREADS];
    touch_part parts[PIN_TOUCH_THREADS];
    bool started[PIN_TOUCH_THREADS] = {false};
    for (size_t i = 0; i < n; i++) {
        size_t at = i * share < bytes ? i * share : bytes;
        parts[i] = (touch_part){base + at, bytes - at < share ? bytes - at : share};
    }
    /* part 0, and any part whose thread did not start, is the caller's */
    for (size_t i = 1; i < n; i++)
        started[i] = pthread_create(&threads[i], NULL, touch_pages, &parts[i]) == 0;
    for (size_t i = 0; i < n; i++)
        if (!started[i]) touch_pages(&parts[i]);
    for (size_t i = 1; i < n; i++)
        if (started[i]) pthread_join(threads[i], NULL);
}

/* `bytes` of pinned host memory in *out; *mapped: the bytes of our own mapping to unmap at
 * release (0: cudaHostAlloc's memory). Never a child process's: the pages are not inherited
 * across fork, so a child's writes cannot move a page the copy engine uses. */
static cudaError_t pin_new(size_t bytes, void **out, size_t *mapped) {
    *out = NULL;
    *mapped = 0;
    if (bytes >= PIN_OWN_MIN) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t len = (bytes + page - 1) & ~(page - 1);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            (void)madvise(p, len, MADV_DONTFORK);
            (void)madvise(p, len, MADV_HUGEPAGE); /* fewer faults and registrations */
            touch_parallel(p, len);
            if (cudaHostRegister(p, len, cudaHostRegisterPortable) == cudaSuccess) {
                *out = p;
                *mapped = len;
                return cudaSuccess;
            }
            cudaGetLastError();
            munmap(p, len);
        }
    }
    return cudaHostAlloc(out, bytes, cudaHostAllocPortable);
}

/* Gives back what pin_new gave: cudaFreeHost's status, or success for our own mapping (its
 * unregistering and unmapping report nothing a caller could act on). */
static cudaError_t pin_release(void *p, size_t mapped) {
    if (!mapped) return cudaFreeHost(p);
    cudaHostUnregister(p);
    cudaGetLastError();
    munmap(p, mapped);
    return cudaSuccess;
}

static void release_range(const pinned_range *r) {
    if (r->kind == PINNED_REGISTERED) cudaHostUnregister(r->base);
    else (void)pin_release(r->base, r->mapped);
    cudaGetLastError();
}

/* ctx->cuda_free: at sluice_context_destroy, after every batch has been freed. */
static void ctx_state_free(sluice_context *ctx, void *state) {
    cuda_ctx_state *cx = state;
    for (size_t i = 0; i < cx->n; i++) release_range(&cx->ranges[i]);
    for (int d = 0; d < MAX_POOL_DEVICES; d++)
        if (cx->device_pool[d]) cudaMemPoolDestroy(cx->device_pool[d]);
    cudaGetLastError();
    sl_free(ctx, cx->ranges);
    sl_free(ctx, cx);
}

/* The context's table; created on first use when `create`. NULL when it does not exist (or
 * cannot be allocated). */
static cuda_ctx_state *ctx_state(sluice_context *ctx, bool create) {
    if (ctx->cuda) return ctx->cuda_free == ctx_state_free ? ctx->cuda : NULL;
    if (!create) return NULL;
    cuda_ctx_state *cx = sl_calloc(ctx, 1, sizeof *cx);
    if (!cx) return NULL;
    cx->cap = 64; /* room for a steady stream's blocks: no growth on the hot path */
    cx->ranges = sl_calloc(ctx, cx->cap, sizeof *cx->ranges);
    if (!cx->ranges) {
        sl_free(ctx, cx);
        return NULL;
    }
    ctx->cuda = cx;
    ctx->cuda_free = ctx_state_free;
    return cx;
}

/* Index of the first range whose base is above p. */
static size_t range_upper(const cuda_ctx_state *cx, const void *p) {
    size_t lo = 0, hi = cx->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((const char *)cx->ranges[mid].base <= (const char *)p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The range holding address p, or NULL. */
static pinned_range *range_at(cuda_ctx_state *cx, const void *p) {
    if (!cx || !p) return NULL;
    size_t i = range_upper(cx, p);
    if (i == 0) return NULL;
    pinned_range *r = &cx->ranges[i - 1];
    return (size_t)((const char *)p - r->base) < r->bytes ? r : NULL;
}

bool sl_cuda_pinned_covers(sluice_context *ctx, const void *p, size_t bytes) {
    if (bytes == 0) return false;
    pinned_range *r = range_at(ctx_state(ctx, false), p);
    return r && bytes <= r->bytes - (size_t)((const char *)p - r->base);
}

/* Whether [p, p + bytes) overlaps a recorded range (bytes > 0, no wrap-around). */
static bool range_overlaps(const cuda_ctx_state *cx, const char *p, size_t bytes) {
    size_t i = range_upper(cx, p + bytes - 1);
    if (i == 0) return false;
    const pinned_range *r = &cx->ranges[i - 1];
    return r->base + r->bytes > p;
}

static sluice_status range_add(sluice_context *ctx, cuda_ctx_state *cx, void *base, size_t bytes,
                               int kind, size_t mapped) {
    if (cx->n == cx->cap) {
        size_t cap = cx->cap * 2;
        pinned_range *r = sl_realloc(ctx, cx->ranges, cap * sizeof *r);
        if (!r) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory recording pinned memory");
        cx->ranges = r;
        cx->cap = cap;
    }
    size_t i = range_upper(cx, base);
    memmove(&cx->ranges[i + 1], &cx->ranges[i], (cx->n - i) * sizeof *cx->ranges);
    cx->ranges[i] = (pinned_range){(char *)base, bytes, kind, kind == PINNED_POOL, mapped};
    cx->n++;
    return SLUICE_OK;
}

static void range_remove(cuda_ctx_state *cx, pinned_range *r) {
    size_t i = (size_t)(r - cx->ranges);
    memmove(&cx->ranges[i], &cx->ranges[i + 1], (cx->n - i - 1) * sizeof *cx->ranges);
    cx->n--;
}

/* ---- the pool of result blocks ------------------------------------------------------------- */

/* The size class of a request: a multiple of a quarter of its highest power of two. */
static size_t pool_class(size_t bytes) {
    if (bytes <= POOL_GRAIN) return POOL_GRAIN;
    int top = 63 - __builtin_clzll((unsigned long long)bytes);
    size_t step = (size_t)1 << (top - 2);
    if (bytes > SIZE_MAX - step) return 0;
    return (bytes + step - 1) & ~(step - 1);
}

/* A pinned block of at least `bytes`: a free pool block, or a new one. NULL when pinned
 * memory cannot be had. */
static void *pool_take(sluice_context *ctx, size_t bytes) {
    cuda_ctx_state *cx = ctx_state(ctx, true);
    size_t size = pool_class(bytes);
    if (!cx || size == 0) return NULL;
    pinned_range *best = NULL;
    for (size_t i = 0; i < cx->n; i++) {
        pinned_range *r = &cx->ranges[i];
        if (r->kind != PINNED_POOL || r->in_use || r->bytes < size || r->bytes / 2 > size) continue;
        if (!best || r->bytes < best->bytes) best = r;
    }
    if (best) {
        best->in_use = true;
        cx->free_bytes -= best->bytes;
        cx->free_blocks--;
        return best->base;
    }
    void *p = NULL;
    size_t mapped = 0;
    if (pin_new(size, &p, &mapped) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (range_add(ctx, cx, p, size, PINNED_POOL, mapped) != SLUICE_OK) {
        sl_diag_clear(ctx); /* not the call's error: the batch falls back to pageable memory */
        (void)pin_release(p, mapped);
        cudaGetLastError();
        return NULL;
    }
    return p;
}

/* sluice_batch.free_host of pooled result batches: the block is free for the next batch, or
 * goes back to CUDA when the pool holds enough. */
static void pool_give(sluice_context *ctx, void *ptr) {
    cuda_ctx_state *cx = ctx_state(ctx, false);
    pinned_range *r = range_at(cx, ptr);
    /* Only blocks pool_take handed out reach here (the hook is set on pooled batches alone). */
    if (!r || r->kind != PINNED_POOL || r->base != ptr || !r->in_use) return;
    if (cx->free_blocks < POOL_MAX_FREE_BLOCKS && r->bytes <= POOL_MAX_FREE_BYTES - cx->free_bytes) {
        r->in_use = false;
        cx->free_bytes += r->bytes;
        cx->free_blocks++;
        return;
    }
    release_range(r);
    range_remove(cx, r);
}

sluice_batch *sl_cuda_pinned_batch_new(sluice_session *s, int64_t rows) {
    sluice_context *ctx = s->ctx;
    if (rows < 0) return NULL;
    sluice_batch *b = sl_batch_shell(ctx, s->pipeline);
    if (!b) return NULL;
    b->free_host = pool_give;
    bool ok = true;
    for (size_t i = 0; ok && i < b->ncolumns; i++) {
        size_t bytes;
        ok = !sl_mul_overflows((size_t)rows, sluice_type_size(b->columns[i].type), &bytes);
        b->columns[i].length = rows;
        b->owned[i] = ok ? pool_take(ctx, bytes) : NULL;
        b->columns[i].data = b->owned[i];
        ok = b->owned[i] != NULL;
    }
    if (!ok) {
        sluice_batch_free(b);
        return NULL;
    }
    b->rows = rows;
    return b;
}

/* ---- sluice_cuda.h: pinned host memory ------------------------------------------------------ */

/* A failed pin: no memory, no usable device, or another CUDA error. */
static sluice_status pin_error(sluice_context *ctx, cudaError_t e, size_t bytes, const char *what) {
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "cannot pin %zu bytes of host memory", bytes);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
        return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "%s needs a usable GPU (%s: %s)", what, cudaGetErrorName(e),
                        cudaGetErrorString(e));
    return sl_error(ctx, SLUICE_ERR_CUDA, "CUDA error while %s: %s (%s)", what,
                    cudaGetErrorName(e), cudaGetErrorString(e));
}

SLUICE_API sluice_status sluice_cuda_host_alloc(sluice_context *ctx, size_t bytes, void **out) {
    if (out) *out = NULL;
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!out) return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_alloc: out is NULL");
    if (bytes == 0)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_alloc: zero bytes asked for");
    cuda_ctx_state *cx = ctx_state(ctx, true);
    if (!cx) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory recording pinned memory");
    void *p = NULL;
    size_t mapped = 0;
    cudaError_t e = pin_new(bytes, &p, &mapped);
    if (e != cudaSuccess) return pin_error(ctx, e, bytes, "allocating pinned host memory");
    sluice_status st = range_add(ctx, cx, p, bytes, PINNED_ALLOC, mapped);
    if (st != SLUICE_OK) {
        (void)pin_release(p, mapped);
        cudaGetLastError();
        return st;
    }
    *out = p;
    return SLUICE_OK;
}

/* The range starting exactly at ptr, of kind `kind`, or an error naming what ptr is. */
static sluice_status own_range(sluice_context *ctx, void *ptr, int kind, const char *fn,
                               pinned_range **out) {
    pinned_range *r = range_at(ctx_state(ctx, false), ptr);
    const char *want = kind == PINNED_ALLOC ? "sluice_cuda_host_alloc" : "sluice_cuda_host_register";
    if (!r || r->kind == PINNED_POOL)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "%s: %p is not memory this context got from %s (never, or already "
                        "released)", fn, ptr, want);
    if (r->kind != kind)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "%s: %p came from %s; release it with %s",
                        fn, ptr,
                        kind == PINNED_ALLOC ? "sluice_cuda_host_register" : "sluice_cuda_host_alloc",
                        kind == PINNED_ALLOC ? "sluice_cuda_host_unregister" : "sluice_cuda_host_free");
    if (r->base != (char *)ptr)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "%s: %p is %zu bytes inside a block; pass the pointer %s gave", fn, ptr,
                        (size_t)((char *)ptr - r->base), want);
    *out = r;
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_cuda_host_free(sluice_context *ctx, void *ptr) {
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!ptr) return SLUICE_OK;
    pinned_range *r;
    SL_TRY(own_range(ctx, ptr, PINNED_ALLOC, "sluice_cuda_host_free", &r));
    cudaError_t e = pin_release(r->base, r->mapped);
    range_remove(ctx_state(ctx, false), r);
    if (e != cudaSuccess) return pin_error(ctx, e, 0, "freeing pinned host memory");
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_cuda_host_register(sluice_context *ctx, void *ptr, size_t bytes) {
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!ptr) return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_register: ptr is NULL");
    if (bytes == 0)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_register: zero bytes");
    if ((uintptr_t)ptr > UINTPTR_MAX - bytes)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_cuda_host_register: %zu bytes from %p wrap around the address space",
                        bytes, ptr);
    cuda_ctx_state *cx = ctx_state(ctx, true);
    if (!cx) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory recording pinned memory");
    if (range_overlaps(cx, ptr, bytes))
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_cuda_host_register: %zu bytes at %p overlap memory this context "
                        "already pinned (allocated or registered)", bytes, ptr);
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
        cudaGetLastError();
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_cuda_host_register: %zu bytes at %p overlap memory already pinned "
                        "outside this context", bytes, ptr);
    }
    if (e != cudaSuccess) return pin_error(ctx, e, bytes, "registering host memory");
    sluice_status st = range_add(ctx, cx, ptr, bytes, PINNED_REGISTERED, 0);
    if (st != SLUICE_OK) {
        cudaHostUnregister(ptr);
        cudaGetLastError();
        return st;
    }
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_cuda_host_unregister(sluice_context *ctx, void *ptr) {
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!ptr) return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_unregister: ptr is NULL");
    pinned_range *r;
    SL_TRY(own_range(ctx, ptr, PINNED_REGISTERED, "sluice_cuda_host_unregister", &r));
    cudaError_t e = cudaHostUnregister(r->base);
    range_remove(ctx_state(ctx, false), r);
    if (e != cudaSuccess) return pin_error(ctx, e, 0, "unregistering host memory");
    return SLUICE_OK;
}

/* ---- the staging copy: several threads for large chunks ----------------------------------- */

/* One core copies pageable memory at about 6-12 GB/s, well below the bus; a few threads bring
 * a staging copy near the memory bandwidth. Chunks below COPY_SPLIT_MIN bytes are copied by
 * the calling thread alone. A larger chunk is cut into units of COPY_UNIT bytes that the
 * caller and its helpers take in turn (an atomic counter) until none is left, so a thread
 * slowed down (another process on its core, a remote memory node) takes fewer units instead
 * of holding up the chunk's DMA with a fixed share. By default every core online (at most
 * 16) copies: on the H200's 16-core host, 16 threads kept a stream of `malloc` batches at
 * 1.32-1.42x the bus limit where 8 took 1.51-1.66x (bench/RESULTS.md, tenth session).
 *
 * The hand-off. A push from pageable memory is a run of chunk copies, one per staging slot,
 * each followed by the slot's DMA, a few microseconds of CUDA calls apart. Waking sleeping
 * helpers and joining them through a condition variable for every chunk cost tens of
 * microseconds of scheduler latency each time, so helpers that finished a job poll for the
 * next job for up to COPY_SPIN_NS before they sleep, and the caller polls for the helpers'
 * parts the same way before it sleeps: within a push the hand-off is a store and a load.
 * Threads that sleep are woken through the condition variables, as before.
 *
 * Into a staging slot (a DMA source the CPU never reads back) the copy uses non-temporal
 * stores where the CPU has them (x86-64): the destination's cache lines are written without
 * being read first and without evicting the source's, one memory transfer in four saved
 * beside the copy engine's read. SLUICE_CUDA_STAGING_NT=0 turns it off for measurement. */
#define COPY_MAX_THREADS 16
#define COPY_SPLIT_MIN ((size_t)2 << 20)
#define COPY_UNIT ((size_t)512 << 10)
#define COPY_SPIN_NS 200000 /* 0.2 ms: longer than the CUDA calls between two chunks */

int sl_cuda_env_int(const char *name, int lo, int hi, int fallback) {
    const char *env = getenv(name);
    if (!env || !*env) return fallback;
    char *end;
    long n = strtol(env, &end, 10);
    if (*end != '\0' || n < lo) return fallback;
    return n > hi ? hi : (int)n;
}

typedef struct copier_helper {
    sl_cuda_copier *c;
    pthread_t thread;
} copier_helper;

struct sl_cuda_copier {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_ulong job;   /* incremented for each job, after its fields are written */
    atomic_int pending; /* helpers still busy with the current job */
    atomic_bool quit;
    int sleepers;       /* helpers waiting on `go` (under mu) */
    bool nt;            /* non-temporal stores allowed (SLUICE_CUDA_STAGING_NT) */
    /* The current job, written before `job` changes: */
    char *dst;
    const char *src;
    size_t len;
    atomic_size_t next; /* the next unit (COPY_UNIT bytes) to take */
    bool stream;        /* into a staging slot: non-temporal stores when nt */
    bool started;       /* a job handed out by sl_cuda_staging_start, not yet finished */
    int nhelpers;
    copier_helper helpers[COPY_MAX_THREADS];
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t copier_clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* memcpy with non-temporal stores of whole aligned 64-byte lines (SSE2, every x86-64), the
 * unaligned head and tail by memcpy; the fence makes the stores visible before the part is
 * reported done (and so before its DMA is issued). Elsewhere plain memcpy. */
static void copy_streaming(char *dst, const char *src, size_t len) {
#if defined(__SSE2__)
    size_t head = (size_t)(-(uintptr_t)dst & 63);
    if (head > len) head = len;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    len -= head;
    size_t body = len & ~(size_t)63;
    for (size_t i = 0; i < body; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    memcpy(dst + body, src + body, len - body);
    _mm_sfence();
#else
    memcpy(dst, src, len);
#endif
}

static void copy_bytes(bool stream, char *dst, const char *src, size_t len) {
    if (stream) copy_streaming(dst, src, len);
    else memcpy(dst, src, len);
}

/* Copies units of the current job until none is left. */
static void copy_units(sl_cuda_copier *c) {
    size_t units = (c->len + COPY_UNIT - 1) / COPY_UNIT;
    for (;;) {
        size_t u = atomic_fetch_add(&c->next, 1);
        if (u >= units) return;
        size_t at = u * COPY_UNIT, len = c->len - at < COPY_UNIT ? c->len - at : COPY_UNIT;
        copy_bytes(c->stream && c->nt, c->dst + at, c->src + at, len);
    }
}

/* The next job after `seen` (or quit): polled for COPY_SPIN_NS, then waited for on `go`. */
static unsigned long next_job(sl_cuda_copier *c, unsigned long seen) {
    int64_t until = 0;
    for (unsigned i = 1;; i++) {
        unsigned long j = atomic_load(&c->job);
        if (j != seen || atomic_load(&c->quit)) return j;
        if (i % 64 == 0) {
            int64_t now = copier_clock_ns();
            if (until == 0) until = now + COPY_SPIN_NS;
            else if (now >= until) break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&c->mu);
    c->sleepers++;
    unsigned long j;
    while ((j = atomic_load(&c->job)) == seen && !atomic_load(&c->quit))
        pthread_cond_wait(&c->go, &c->mu);
    c->sleepers--;
    pthread_mutex_unlock(&c->mu);
    return j;
}

static void *copier_main(void *arg) {
    copier_helper *h = arg;
    sl_cuda_copier *c = h->c;
    unsigned long seen = 0;
    for (;;) {
        seen = next_job(c, seen);
        if (atomic_load(&c->quit)) break;
        copy_units(c);
        if (atomic_fetch_sub(&c->pending, 1) == 1) {
            /* the last helper done: wake the caller if it stopped polling (under mu, so the wake
             * cannot fall between its test and its wait) */
            pthread_mutex_lock(&c->mu);
            pthread_cond_signal(&c->done);
            pthread_mutex_unlock(&c->mu);
        }
    }
    return NULL;
}

static int copy_threads_wanted(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    int fallback = cores < COPY_MAX_THREADS ? (int)cores : COPY_MAX_THREADS;
    return sl_cuda_env_int("SLUICE_CUDA_STAGING_THREADS", 1, COPY_MAX_THREADS, fallback);
}

/* A copier with its helpers started (none when one thread is wanted or none can start);
 * NULL when out of memory. The helpers take no signals: those are the application's. */
static sl_cuda_copier *copier_start(sluice_context *ctx) {
    int threads = copy_threads_wanted();
    sl_cuda_copier *c = sl_calloc(ctx, 1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->go, NULL);
    pthread_cond_init(&c->done, NULL);
    atomic_init(&c->job, 0);
    atomic_init(&c->pending, 0);
    atomic_init(&c->quit, false);
    atomic_init(&c->next, 0);
    c->nt = sl_cuda_env_int("SLUICE_CUDA_STAGING_NT", 0, 1, 1) != 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < threads - 1; i++) {
        c->helpers[i] = (copier_helper){c, 0};
        if (pthread_create(&c->helpers[i].thread, NULL, copier_main, &c->helpers[i]) != 0) break;
        c->nhelpers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return c;
}

void sl_cuda_copier_free(sluice_context *ctx, sl_cuda_copier *c) {
    if (!c) return;
    sl_cuda_staging_finish(c); /* a copy still being made is completed first */
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->quit, true);
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->nhelpers; i++) pthread_join(c->helpers[i].thread, NULL);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->mu);
    sl_free(ctx, c);
}

void sl_cuda_staging_start(sluice_context *ctx, sl_cuda_copier **cp, void *dst, const void *src,
                           size_t len, bool into_slot) {
    if (len >= COPY_SPLIT_MIN && !*cp) *cp = copier_start(ctx);
    sl_cuda_copier *c = *cp;
    if (len < COPY_SPLIT_MIN || !c || c->nhelpers == 0) {
        copy_bytes(into_slot && c && c->nt && len >= COPY_SPLIT_MIN, dst, src, len);
        return;
    }
    c->dst = dst;
    c->src = src;
    c->len = len;
    c->stream = into_slot;
    c->started = true;
    atomic_store(&c->next, 0);
    atomic_store(&c->pending, c->nhelpers);
    atomic_fetch_add(&c->job, 1); /* publishes the fields above to the helpers */
    pthread_mutex_lock(&c->mu);
    if (c->sleepers > 0) pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
}

void sl_cuda_staging_finish(sl_cuda_copier *c) {
    if (!c || !c->started) return;
    c->started = false;
    copy_units(c);
    /* The helpers are each finishing their last unit. Poll (yielding, in case a helper
     * waits for this core), then sleep. */
    int64_t until = 0;
    for (unsigned i = 1; atomic_load(&c->pending) > 0; i++) {
        if (i % 64 != 0) {
            cpu_relax();
            continue;
        }
        int64_t now = copier_clock_ns();
        if (until == 0) until = now + COPY_SPIN_NS;
        else if (now >= until) break;
        sched_yield();
    }
    if (atomic_load(&c->pending) > 0) {
        pthread_mutex_lock(&c->mu);
        while (atomic_load(&c->pending) > 0) pthread_cond_wait(&c->done, &c->mu);
        pthread_mutex_unlock(&c->mu);
    }
}

void sl_cuda_staging_copy(sluice_context *ctx, sl_cuda_copier **cp, void *dst, const void *src,
                          size_t len, bool into_slot) {
    sl_cuda_staging_start(ctx, cp, dst, src, len, into_slot);
    sl_cuda_staging_finish(*cp);
}

/* ---- the context's device memory pools ----------------------------------------------------- */

sluice_status sl_cuda_device_pool(sluice_context *ctx, int device, cudaMemPool_t *out) {
    *out = NULL;
    if (device < 0 || device >= MAX_POOL_DEVICES)
        return sl_error(ctx, SLUICE_ERR_LIMIT, "CUDA device %d: sluice pools memory for devices 0..%d",
                        device, MAX_POOL_DEVICES - 1);
    cuda_ctx_state *cx = ctx_state(ctx, true);
    if (!cx) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    if (!cx->device_pool[device]) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        cudaMemPool_t pool;
        cudaError_t e = cudaMemPoolCreate(&pool, &props);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE, "creating a CUDA memory pool: %s",
                            cudaGetErrorString(e));
        }
        uint64_t keep = UINT64_MAX; /* keep freed memory for reuse: no OS allocation per batch */
        e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        if (e != cudaSuccess) {
            cudaGetLastError();
            cudaMemPoolDestroy(pool);
            return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE, "configuring a CUDA memory pool: %s",
                            cudaGetErrorString(e));
        }
        cx->device_pool[device] = pool;
    }
    *out = cx->device_pool[device];
    return SLUICE_OK;
}
