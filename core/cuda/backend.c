/* backend.c — the CUDA backend's operations for the shared executor (core/exec.h), and the
 * public sluice_cuda.h: sessions on streams, device memory (scratch, column buffers,
 * carries) sized when a session opens and grown for a batch that cannot be cut, host
 * batches staged through a ring of pinned buffers on a copy stream (by several threads for
 * large chunks) or read by DMA where the caller's memory is pinned (sluice_cuda_host_alloc,
 * sluice_cuda_host_register), sorts through kernels/sort.cu, result batches copied by DMA
 * into pinned memory from the context's pool, or left on the device.
 *
 * How a piece runs. piece->cols[c] is the device pointer of pipeline column c's latest
 * version. Inputs point at the caller's device memory or at the session's input buffers
 * (host batches, copied in by `load`). Each plan group then runs on the session's stream: a
 * fused group (core/cuda/fused.h) reads the columns the plan lists and writes its own
 * buffers (or, as the last writer of an output column kept on the device, the result batch
 * in place); a sort moves the plan's columns. Rows only change at a compaction, whose kept
 * count is the one thing the host waits for. A stream-wide sort at flush sorts the
 * executor's device buffer into temporaries from the session's pool, freed when the flush
 * settles.
 *
 * Transactions (core/session.h): every fused group has two carries; a call writes the spare
 * one and commit flips which one is live, so a rollback has nothing to undo. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "context.h"
#include "cuda/codegen.h"
#include "cuda/fused.h"
#include "cuda/nvrtc.h"
#include "cuda/offsets_check.h"
#include "cuda/sort.h"
#include "exec.h"
#include "sluice_cuda.h"

/* Pinned staging ring for host batches: two slots, so the CPU fills one while the copy
 * engine drains the other. */
#define STAGING_SLOTS 2
#define STAGING_BYTES ((size_t)8 << 20)

typedef struct group_state {
    sl_group_kind kind;
    /* fused */
    sl_cuda_group *fused;
    const sl_cuda_group_layout *layout;
    void *carry[2];    /* device; carry[live] holds the committed state */
    int live;
    bool touched;      /* written in the current (uncommitted) call */
    void **out_buf;    /* per layout output: device buffer for cap_rows rows */
    /* sort */
    const sl_sort *sort;
    bool per_stream;
    int ncols;
    const int *cols;        /* the plan group's columns (keys included), moved together */
    sluice_type *types;
    sl_cuda_sort prepared;  /* per-batch sorts: sized for cap_rows */
    void **sort_out;        /* per moved column: cap_rows rows (per-batch sorts) */
} group_state;

typedef struct copier copier;

typedef struct cuda_session {
    int device, arch;
    cudaStream_t stream, copy;
    bool own_stream;
    cudaEvent_t slot_free[STAGING_SLOTS], inputs_ready, computed;
    cudaEvent_t copied_out; /* a piece's results copied out: its buffers may be written again */
    void *pinned[STAGING_SLOTS];
    size_t staging_bytes;   /* per slot */
    int64_t *pinned_small;  /* counts read back: [0] kept rows, [1] verdict, [2] last offset */
    void *dev_small;        /* device: kept-row count and offsets verdict */
    void *scratch;
    size_t scratch_bytes;
    int64_t cap_rows;       /* rows the per-batch buffers hold: max_batch_rows, or more after
                               a batch that could not be cut */
    void **in_buf;          /* per pipeline input: device buffer for host batches */
    int ngroups;
    group_state *groups;
    int *final_group;       /* per pipeline column: last group writing it, -1 none */
    int offsets_input;      /* pipeline column id of the offsets input, -1 none */
    int64_t offsets_cap;    /* entries in in_buf[offsets_input] */
    cudaMemPool_t pool;     /* device outputs, stream-sort buffers and flush temporaries */
    void **temps;           /* pool memory of the current call, freed when it settles */
    int ntemps, temps_cap;
    copier *copier;         /* staging copy threads, started on the first large copy */
    bool copier_tried;
    bool direct_pending;    /* DMA to or from the caller's pinned memory issued on `copy` in
                               this call: the call waits for it before returning */
} cuda_session;

static void copier_stop(sluice_context *ctx, copier *c);

/* ---- errors ------------------------------------------------------------------------------ */

static sluice_status cuda_status(sluice_context *ctx, cudaError_t e, const char *what) {
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY,
                        "out of device memory while %s: free GPU memory or lower "
                        "max_batch_rows", what);
    }
    cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    return sl_error(ctx, SLUICE_ERR_CUDA, "CUDA error while %s: %s (%s)", what,
                    cudaGetErrorName(e), cudaGetErrorString(e));
}
#define CUDA_TRY(ctx, call, what)                                                          \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) return cuda_status((ctx), e_, (what));                     \
    } while (0)

static sluice_status device_alloc(sluice_context *ctx, void **out, size_t bytes, const char *what) {
    *out = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY,
                        "out of device memory: %zu bytes for %s; lower max_batch_rows or free "
                        "GPU memory", bytes, what);
    }
    if (e != cudaSuccess) return cuda_status(ctx, e, what);
    return SLUICE_OK;
}

static sluice_status pool_alloc(sluice_context *ctx, cuda_session *cs, void **out, size_t bytes,
                                const char *what) {
    *out = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t e = cudaMallocFromPoolAsync(out, bytes, cs->pool, cs->stream);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of device memory: %zu bytes for %s",
                        bytes, what);
    }
    if (e != cudaSuccess) return cuda_status(ctx, e, what);
    return SLUICE_OK;
}

/* ---- availability ------------------------------------------------------------------------ */

static bool gpu_present(void) {
    int n = 0;
    /* cudart loads the driver lazily: without one this returns an error, never crashes. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return n > 0;
}

/* NVRTC is loaded on first use (cuda/nvrtc.c): without it no kernel can be built. The device
 * is asked first, so that where there is none NVRTC (a large library) is never mapped. */
static bool cuda_available(void) { return gpu_present() && sl_nvrtc_available(); }

/* ---- the session's device ---------------------------------------------------------------- */

/* Every call works on the device the session was opened on, whatever the calling thread's
 * current device is, and leaves the caller's choice as it was. */
static int enter_device(const cuda_session *cs) {
    int prev = cs->device;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (prev != cs->device) cudaSetDevice(cs->device);
    return prev;
}
static void leave_device(const cuda_session *cs, int prev) {
    if (prev >= 0 && prev != cs->device) cudaSetDevice(prev);
}

/* ---- open and close ------------------------------------------------------------------ */

static size_t type_size(const sluice_pipeline *p, int column) {
    return sluice_type_size(p->columns[column].type);
}

/* Frees the per-batch buffers sized by cap_rows (reserve reallocates them). */
static void free_batch_buffers(sluice_session *s, cuda_session *cs) {
    sluice_context *ctx = s->ctx;
    for (int gi = 0; cs->groups && gi < cs->ngroups; gi++) {
        group_state *g = &cs->groups[gi];
        for (int i = 0; g->out_buf && g->layout && i < g->layout->noutputs; i++) {
            if (g->out_buf[i]) cudaFree(g->out_buf[i]);
            g->out_buf[i] = NULL;
        }
        for (int i = 0; g->sort_out && i < g->ncols; i++) {
            if (g->sort_out[i]) cudaFree(g->sort_out[i]);
            g->sort_out[i] = NULL;
        }
    }
    for (int i = 0; cs->in_buf && i < s->pipeline->ninputs; i++) {
        if (i == cs->offsets_input) continue; /* sized by segments, grown by load */
        if (cs->in_buf[i]) cudaFree(cs->in_buf[i]);
        cs->in_buf[i] = NULL;
    }
    if (cs->scratch) cudaFree(cs->scratch);
    cs->scratch = NULL;
    cs->scratch_bytes = 0;
    (void)ctx;
}

static void free_group(sluice_context *ctx, group_state *g) {
    if (g->fused) sl_cuda_group_free(ctx, g->fused);
    for (int i = 0; i < 2; i++)
        if (g->carry[i]) cudaFree(g->carry[i]);
    sl_free(ctx, g->out_buf);
    sl_free(ctx, g->sort_out);
    sl_free(ctx, g->types);
}

static void free_temps(cuda_session *cs) {
    for (int i = 0; i < cs->ntemps; i++) cudaFreeAsync(cs->temps[i], cs->stream);
    cs->ntemps = 0;
}

static void cuda_close(sluice_session *s) {
    cuda_session *cs = s->impl;
    if (!cs) return;
    sluice_context *ctx = s->ctx;
    int prev = cs->stream ? enter_device(cs) : -1;
    if (cs->stream) {
        free_temps(cs);
        cudaStreamSynchronize(cs->stream);
    }
    if (cs->copy) cudaStreamSynchronize(cs->copy);
    copier_stop(ctx, cs->copier);
    free_batch_buffers(s, cs);
    for (int i = 0; cs->groups && i < cs->ngroups; i++) free_group(ctx, &cs->groups[i]);
    sl_free(ctx, cs->groups);
    if (cs->in_buf) {
        for (int i = 0; i < s->pipeline->ninputs; i++)
            if (cs->in_buf[i]) cudaFree(cs->in_buf[i]);
        sl_free(ctx, cs->in_buf);
    }
    sl_free(ctx, cs->temps);
    sl_free(ctx, cs->final_group);
    if (cs->dev_small) cudaFree(cs->dev_small);
    for (int i = 0; i < STAGING_SLOTS; i++) {
        if (cs->pinned[i]) cudaFreeHost(cs->pinned[i]);
        if (cs->slot_free[i]) cudaEventDestroy(cs->slot_free[i]);
    }
    if (cs->pinned_small) cudaFreeHost(cs->pinned_small);
    if (cs->inputs_ready) cudaEventDestroy(cs->inputs_ready);
    if (cs->computed) cudaEventDestroy(cs->computed);
    if (cs->copied_out) cudaEventDestroy(cs->copied_out);
    if (cs->copy) cudaStreamDestroy(cs->copy);
    if (cs->own_stream && cs->stream) cudaStreamDestroy(cs->stream);
    /* The pool goes once every batch still holding its memory has been freed (CUDA frees a
     * destroyed pool's memory when the last allocation returns). */
    if (cs->pool) cudaMemPoolDestroy(cs->pool);
    cudaGetLastError();
    leave_device(cs, prev);
    sl_free(ctx, cs);
    s->impl = NULL;
}

static sluice_status sort_desc(const group_state *g, sl_cuda_sort_desc *d) {
    memset(d, 0, sizeof *d);
    d->ncolumns = g->ncols;
    d->types = g->types;
    d->nkeys = g->sort->nkeys;
    for (int k = 0; k < d->nkeys; k++) {
        d->keys[k] = -1;
        for (int c = 0; c < g->ncols; c++)
            if (g->cols[c] == g->sort->keys[k]) d->keys[k] = c;
        if (d->keys[k] < 0) return SLUICE_ERR_INVALID_ARGUMENT;
    }
    d->descending = g->sort->descending;
    for (int k = 0; k < d->nkeys; k++) d->key_descending[k] = g->sort->key_descending[k];
    d->bits_lo = g->sort->bits_lo;
    d->bits_hi = g->sort->bits_hi;
    return SLUICE_OK;
}

/* Allocates the per-batch buffers for `rows` rows: input buffers of host batches, each
 * fused group's outputs and scratch, each per-batch sort's outputs and scratch. */
static sluice_status alloc_batch_buffers(sluice_session *s, cuda_session *cs, int64_t rows) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    size_t n = (size_t)rows;
    for (int i = 0; i < p->ninputs; i++)
        if (i != cs->offsets_input)
            SL_TRY(device_alloc(ctx, &cs->in_buf[i], n * type_size(p, i), "an input buffer"));
    size_t scratch = 256;
    for (int gi = 0; gi < cs->ngroups; gi++) {
        group_state *g = &cs->groups[gi];
        if (g->kind == SL_GROUP_FUSED) {
            for (int i = 0; i < g->layout->noutputs; i++)
                SL_TRY(device_alloc(ctx, &g->out_buf[i], n * type_size(p, g->layout->outputs[i]),
                                    "a column buffer"));
            size_t need = sl_cuda_group_scratch_size(g->fused, rows);
            if (need > scratch) scratch = need;
            continue;
        }
        if (g->per_stream) continue; /* sorted at flush into temporaries */
        sl_cuda_sort_desc d;
        if (sort_desc(g, &d) != SLUICE_OK)
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "internal: sort keys are not moved by the sort");
        sluice_status st = sl_cuda_sort_prepare(&g->prepared, &d, rows);
        if (st != SLUICE_OK)
            return sl_error(ctx, st, "cannot prepare the GPU sort for %lld rows (at most %lld)",
                            (long long)rows, (long long)SL_CUDA_SORT_MAX_ROWS);
        if (g->prepared.scratch_bytes > scratch) scratch = g->prepared.scratch_bytes;
        for (int c = 0; c < g->ncols; c++)
            SL_TRY(device_alloc(ctx, &g->sort_out[c], n * sluice_type_size(g->types[c]),
                                "a sorted column"));
    }
    SL_TRY(device_alloc(ctx, &cs->scratch, scratch, "scratch"));
    cs->scratch_bytes = scratch;
    cs->cap_rows = rows;
    return SLUICE_OK;
}

static sluice_status open_group(sluice_session *s, cuda_session *cs, int gi) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    const sl_group *pg = &s->plan.groups[gi];
    group_state *g = &cs->groups[gi];
    g->kind = pg->kind;
    if (pg->kind == SL_GROUP_FUSED) {
        SL_TRY(sl_cuda_group_prepare(ctx, p, &s->plan, gi, cs->arch, &g->fused));
        g->layout = sl_cuda_group_layout_of(g->fused);
        for (int i = 0; i < 2; i++)
            SL_TRY(device_alloc(ctx, &g->carry[i], g->layout->carry_bytes, "a scan carry"));
        CUDA_TRY(ctx, cudaMemcpy(g->carry[0], sl_cuda_group_carry_identity(g->fused),
                                 g->layout->carry_bytes, cudaMemcpyHostToDevice),
                 "initialising a carry");
        g->out_buf = sl_calloc(ctx, (size_t)g->layout->noutputs + 1, sizeof *g->out_buf);
        if (!g->out_buf) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
        for (int i = 0; i < g->layout->noutputs; i++) cs->final_group[g->layout->outputs[i]] = gi;
        return SLUICE_OK;
    }
    g->sort = &p->stages[pg->first].sort;
    g->per_stream = !g->sort->per_batch;
    g->ncols = pg->nin; /* the plan's: the keys and every live column needed after it */
    g->cols = pg->in;
    g->types = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *g->types);
    g->sort_out = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *g->sort_out);
    if (!g->types || !g->sort_out)
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    for (int c = 0; c < g->ncols; c++) {
        g->types[c] = p->columns[g->cols[c]].type;
        cs->final_group[g->cols[c]] = gi;
    }
    return SLUICE_OK;
}

static sluice_status open_impl(sluice_session *s, cuda_session *cs) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    CUDA_TRY(ctx, cudaGetDevice(&cs->device), "choosing the device");
    int major = 0, minor = 0;
    CUDA_TRY(ctx, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cs->device),
             "reading the device's compute capability");
    CUDA_TRY(ctx, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cs->device),
             "reading the device's compute capability");
    cs->arch = major * 10 + minor;
    CUDA_TRY(ctx, cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking), "creating a stream");
    cs->own_stream = true;
    /* Pinned memory is slow to allocate: small sessions get small slots. */
    cs->staging_bytes = (size_t)s->max_batch_rows * 8 + 4096;
    if (cs->staging_bytes > STAGING_BYTES) cs->staging_bytes = STAGING_BYTES;
    CUDA_TRY(ctx, cudaStreamCreateWithFlags(&cs->copy, cudaStreamNonBlocking), "creating a stream");
    for (int i = 0; i < STAGING_SLOTS; i++) {
        CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->slot_free[i], cudaEventDisableTiming), "creating an event");
        CUDA_TRY(ctx, cudaMallocHost(&cs->pinned[i], cs->staging_bytes), "allocating pinned staging memory");
    }
    CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->inputs_ready, cudaEventDisableTiming), "creating an event");
    CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->computed, cudaEventDisableTiming), "creating an event");
    CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->copied_out, cudaEventDisableTiming), "creating an event");
    CUDA_TRY(ctx, cudaMallocHost((void **)&cs->pinned_small, 64), "allocating pinned memory");
    SL_TRY(device_alloc(ctx, &cs->dev_small, 256, "counters"));

    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = cs->device;
    CUDA_TRY(ctx, cudaMemPoolCreate(&cs->pool, &props), "creating a memory pool");
    uint64_t keep = UINT64_MAX; /* keep freed memory for reuse: no OS allocation per batch */
    CUDA_TRY(ctx, cudaMemPoolSetAttribute(cs->pool, cudaMemPoolAttrReleaseThreshold, &keep),
             "configuring a memory pool");

    size_t ncol = (size_t)p->ncolumns + 1;
    cs->final_group = sl_calloc(ctx, ncol, sizeof *cs->final_group);
    cs->in_buf = sl_calloc(ctx, (size_t)p->ninputs + 1, sizeof *cs->in_buf);
    cs->groups = sl_calloc(ctx, (size_t)s->plan.ngroups + 1, sizeof *cs->groups);
    if (!cs->final_group || !cs->in_buf || !cs->groups)
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    cs->ngroups = s->plan.ngroups;
    for (int c = 0; c < p->ncolumns; c++) cs->final_group[c] = -1;
    cs->offsets_input = s->plan.offsets_input;
    if (cs->offsets_input >= 0) {
        cs->offsets_cap = s->max_batch_rows + 1;
        SL_TRY(device_alloc(ctx, &cs->in_buf[cs->offsets_input],
                            (size_t)cs->offsets_cap * sizeof(int64_t), "the offsets buffer"));
    }
    for (int gi = 0; gi < cs->ngroups; gi++) SL_TRY(open_group(s, cs, gi));
    SL_TRY(alloc_batch_buffers(s, cs, s->max_batch_rows));
    CUDA_TRY(ctx, cudaDeviceSynchronize(), "opening a session");
    return SLUICE_OK;
}

static sluice_status cuda_open(sluice_session *s) {
    SL_TRY(sl_nvrtc_load(s->ctx));
    if (!gpu_present())
        return sl_error(s->ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA backend found no usable GPU (no driver or no device); use "
                        "backend cpu or auto");
    cuda_session *cs = sl_calloc(s->ctx, 1, sizeof *cs);
    if (!cs) return sl_error(s->ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    s->impl = cs;
    sluice_status st = open_impl(s, cs);
    if (st != SLUICE_OK) cuda_close(s);
    return st;
}

/* A piece larger than the per-batch buffers (a batch that cannot be cut): waits for the
 * work still using them and allocates them again for `rows` rows. They stay that size. */
static sluice_status reserve_impl(sluice_session *s, cuda_session *cs, int64_t rows) {
    if (rows <= cs->cap_rows) return SLUICE_OK;
    CUDA_TRY(s->ctx, cudaStreamSynchronize(cs->stream), "growing the session's buffers");
    CUDA_TRY(s->ctx, cudaStreamSynchronize(cs->copy), "growing the session's buffers");
    free_batch_buffers(s, cs);
    sluice_status st = alloc_batch_buffers(s, cs, rows);
    if (st != SLUICE_OK) {
        /* Back to the size the session opened with, so it stays usable. */
        free_batch_buffers(s, cs);
        if (alloc_batch_buffers(s, cs, s->max_batch_rows) != SLUICE_OK) cs->cap_rows = 0;
    }
    return st;
}

/* ---- pinned host memory: the context's registry and result pool ------------------------- */

/* Host memory the copy engine may read or write directly (cudaMemcpyAsync with no staging):
 * what sluice_cuda_host_alloc handed out, what sluice_cuda_host_register pinned, and the
 * blocks of the pool that host result batches come from. The context keeps one sorted
 * table of these ranges (ctx->cuda), so a column pointer anywhere inside a range, with its
 * whole length inside it, is recognised; CUDA's pointer attributes would say "pinned" for
 * the start of a column without saying where the pinned range ends. All memory is pinned
 * with the portable flag, so it is pinned for every device's context. A context is used by
 * one thread at a time (sluice.h), so the table needs no lock. */
enum { PINNED_ALLOC, PINNED_REGISTERED, PINNED_POOL };

typedef struct pinned_range {
    char *base;
    size_t bytes;
    int kind;
    bool in_use;       /* PINNED_POOL: held by a result batch (else on the free list) */
} pinned_range;

/* The pool keeps freed result blocks for the next batches of the context, at most this many
 * blocks and bytes together (the same bound as the pageable block cache, context.h): a
 * returned block that would exceed either is given back to CUDA at once. Blocks are
 * rounded up to POOL_GRAIN; a request reuses the smallest free block holding it that is at
 * most twice its size. */
#define POOL_MAX_FREE_BLOCKS 64
#define POOL_MAX_FREE_BYTES ((size_t)1 << 30)
#define POOL_GRAIN ((size_t)64 << 10)

typedef struct cuda_ctx_state {
    pinned_range *ranges;  /* sorted by base, never overlapping */
    size_t n, cap;
    size_t free_bytes;     /* pool blocks not in use */
    int free_blocks;
} cuda_ctx_state;

static void release_range(const pinned_range *r) {
    if (r->kind == PINNED_REGISTERED) cudaHostUnregister(r->base);
    else cudaFreeHost(r->base);
    cudaGetLastError();
}

/* ctx->cuda_free: at sluice_context_destroy, after every batch has been freed. */
static void ctx_state_free(sluice_context *ctx, void *state) {
    cuda_ctx_state *cx = state;
    for (size_t i = 0; i < cx->n; i++) release_range(&cx->ranges[i]);
    sl_free(ctx, cx->ranges);
    sl_free(ctx, cx);
}

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

/* Whether [p, p + bytes) lies inside one pinned range of ctx: then DMA reads or writes it. */
static bool pinned_covers(sluice_context *ctx, const void *p, size_t bytes) {
    pinned_range *r = range_at(ctx_state(ctx, false), p);
    return r && bytes <= r->bytes - (size_t)((const char *)p - r->base);
}

static bool range_overlaps(const cuda_ctx_state *cx, const char *p, size_t bytes) {
    size_t i = range_upper(cx, p + bytes - 1);
    if (i == 0) return false;
    const pinned_range *r = &cx->ranges[i - 1];
    return r->base + r->bytes > p;
}

static sluice_status range_add(sluice_context *ctx, cuda_ctx_state *cx, void *base, size_t bytes,
                               int kind) {
    if (cx->n == cx->cap) {
        size_t cap = cx->cap * 2;
        pinned_range *r = sl_realloc(ctx, cx->ranges, cap * sizeof *r);
        if (!r) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory recording pinned memory");
        cx->ranges = r;
        cx->cap = cap;
    }
    size_t i = range_upper(cx, base);
    memmove(&cx->ranges[i + 1], &cx->ranges[i], (cx->n - i) * sizeof *cx->ranges);
    cx->ranges[i] = (pinned_range){(char *)base, bytes, kind, kind == PINNED_POOL};
    cx->n++;
    return SLUICE_OK;
}

static void range_remove(cuda_ctx_state *cx, pinned_range *r) {
    size_t i = (size_t)(r - cx->ranges);
    memmove(&cx->ranges[i], &cx->ranges[i + 1], (cx->n - i - 1) * sizeof *cx->ranges);
    cx->n--;
}

/* A pinned block of at least `bytes` for a result column: a free pool block, or a new one.
 * NULL when pinned memory cannot be had (the caller then uses pageable memory). */
static void *pool_take(sluice_context *ctx, size_t bytes) {
    cuda_ctx_state *cx = ctx_state(ctx, true);
    if (!cx) return NULL;
    if (bytes == 0) bytes = 1;
    pinned_range *best = NULL;
    for (size_t i = 0; i < cx->n; i++) {
        pinned_range *r = &cx->ranges[i];
        if (r->kind != PINNED_POOL || r->in_use || r->bytes < bytes || r->bytes / 2 > bytes) continue;
        if (!best || r->bytes < best->bytes) best = r;
    }
    if (best) {
        best->in_use = true;
        cx->free_bytes -= best->bytes;
        cx->free_blocks--;
        return best->base;
    }
    if (bytes > SIZE_MAX - POOL_GRAIN) return NULL;
    size_t size = (bytes + POOL_GRAIN - 1) / POOL_GRAIN * POOL_GRAIN;
    void *p = NULL;
    if (cudaHostAlloc(&p, size, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (range_add(ctx, cx, p, size, PINNED_POOL) != SLUICE_OK) {
        sl_diag_clear(ctx); /* not an error of the call: it falls back to pageable memory */
        cudaFreeHost(p);
        return NULL;
    }
    return p;
}

/* sluice_batch.free_host of pooled result batches. */
static void pool_give(sluice_context *ctx, void *ptr) {
    cuda_ctx_state *cx = ctx_state(ctx, false);
    pinned_range *r = range_at(cx, ptr);
    if (!r || r->kind != PINNED_POOL || r->base != ptr || !r->in_use) return; /* not ours */
    if (cx->free_blocks < POOL_MAX_FREE_BLOCKS && r->bytes <= POOL_MAX_FREE_BYTES - cx->free_bytes) {
        r->in_use = false;
        cx->free_bytes += r->bytes;
        cx->free_blocks++;
        return;
    }
    release_range(r);
    range_remove(cx, r);
}

/* A host result batch of `rows` rows per output column in pooled pinned memory, so the
 * results are copied out by DMA; NULL when pinned memory cannot be had. */
static sluice_batch *pinned_batch_new(sluice_session *s, int64_t rows) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    sluice_batch *b = sl_calloc(ctx, 1, sizeof *b);
    if (!b) return NULL;
    b->ctx = ctx;
    b->ncolumns = (size_t)p->noutputs;
    b->columns = sl_calloc(ctx, b->ncolumns + 1, sizeof *b->columns);
    b->owned = sl_calloc(ctx, b->ncolumns + 1, sizeof *b->owned);
    b->free_host = pool_give;
    bool ok = b->columns && b->owned;
    for (size_t i = 0; ok && i < b->ncolumns; i++) {
        const sl_column *c = &p->columns[p->outputs[i]];
        b->columns[i].name = c->name;
        b->columns[i].type = c->type;
        b->columns[i].length = rows;
        b->owned[i] = pool_take(ctx, (size_t)rows * sluice_type_size(c->type));
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

/* ---- result batches ---------------------------------------------------------------------- */

static void device_batch_free(void *ptr) { cudaFreeAsync(ptr, 0); }

/* A result batch of `cap` rows per output column in the session's pool (device outputs). */
static sluice_status device_batch_new(sluice_session *s, cuda_session *cs, int64_t cap,
                                      sluice_batch **out) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    *out = NULL;
    sluice_batch *b = sl_calloc(ctx, 1, sizeof *b);
    if (b) {
        b->ctx = ctx;
        b->ncolumns = (size_t)p->noutputs;
        b->columns = sl_calloc(ctx, b->ncolumns + 1, sizeof *b->columns);
        b->owned = sl_calloc(ctx, b->ncolumns + 1, sizeof *b->owned);
        b->on_device = true;
        b->free_device = device_batch_free;
    }
    if (!b || !b->columns || !b->owned) {
        sluice_batch_free(b);
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory for a result batch");
    }
    for (size_t i = 0; i < b->ncolumns; i++) {
        const sl_column *c = &p->columns[p->outputs[i]];
        b->columns[i].name = c->name;
        b->columns[i].type = c->type;
        sluice_status st = pool_alloc(ctx, cs, &b->owned[i], (size_t)cap * sluice_type_size(c->type),
                                      "a device result column");
        if (st != SLUICE_OK) {
            sluice_batch_free(b);
            return st;
        }
        b->columns[i].data = b->owned[i];
    }
    *out = b;
    return SLUICE_OK;
}

/* ---- the staging copy: several threads for large chunks ------------------------------------ */

/* memcpy between pageable memory and a pinned staging slot is bound by one core's copy rate
 * (about 6-12 GB/s), well below the bus; a few threads, each copying a contiguous part,
 * bring it near the memory bandwidth. Chunks below COPY_SPLIT_MIN bytes are copied by the
 * calling thread alone (waking helpers costs a few microseconds); each part is at least
 * COPY_PART_MIN bytes. The helpers are the session's, started on its first large staging
 * copy and joined when it closes; SLUICE_CUDA_STAGING_THREADS sets how many threads copy in
 * all (1: the calling thread alone), by default min(4, cores online). */
#define COPY_MAX_THREADS 16
#define COPY_DEFAULT_THREADS 4
#define COPY_SPLIT_MIN ((size_t)2 << 20)
#define COPY_PART_MIN ((size_t)1 << 20)

typedef struct copier copier;
typedef struct copier_helper {
    copier *c;
    int index; /* part index: 1..nhelpers (the caller copies part 0) */
    pthread_t thread;
} copier_helper;

struct copier {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long job;      /* incremented for each job */
    int pending;            /* helpers still busy with the current job */
    bool quit;
    char *dst;
    const char *src;
    size_t len, part;       /* the job: part bytes each (the last part takes the rest) */
    int nparts;
    int nhelpers;
    copier_helper helpers[COPY_MAX_THREADS];
};

static void copy_part(const copier *c, int i) {
    size_t at = (size_t)i * c->part;
    if (i >= c->nparts || at >= c->len) return;
    size_t len = i == c->nparts - 1 || c->len - at < c->part ? c->len - at : c->part;
    memcpy(c->dst + at, c->src + at, len);
}

static void *copier_main(void *arg) {
    copier_helper *h = arg;
    copier *c = h->c;
    unsigned long seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && c->job == seen) pthread_cond_wait(&c->go, &c->mu);
        if (c->quit) break;
        seen = c->job;
        pthread_mutex_unlock(&c->mu);
        copy_part(c, h->index);
        pthread_mutex_lock(&c->mu);
        if (--c->pending == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int copy_threads_wanted(void) {
    const char *env = getenv("SLUICE_CUDA_STAGING_THREADS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end == '\0' && n >= 1) return n > COPY_MAX_THREADS ? COPY_MAX_THREADS : (int)n;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    return cores < COPY_DEFAULT_THREADS ? (int)cores : COPY_DEFAULT_THREADS;
}

/* Starts the helpers; NULL (copy on the calling thread alone) when one thread is wanted or
 * none can be started. */
static copier *copier_start(sluice_context *ctx) {
    int threads = copy_threads_wanted();
    if (threads < 2) return NULL;
    copier *c = sl_calloc(ctx, 1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->go, NULL);
    pthread_cond_init(&c->done, NULL);
    for (int i = 0; i < threads - 1; i++) {
        c->helpers[i] = (copier_helper){c, i + 1, 0};
        if (pthread_create(&c->helpers[i].thread, NULL, copier_main, &c->helpers[i]) != 0) break;
        c->nhelpers++;
    }
    return c;
}

static void copier_stop(sluice_context *ctx, copier *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->nhelpers; i++) pthread_join(c->helpers[i].thread, NULL);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->mu);
    sl_free(ctx, c);
}

/* Copies len bytes, split among the session's copy threads when it pays. */
static void staging_copy(sluice_context *ctx, cuda_session *cs, void *dst, const void *src,
                         size_t len) {
    if (len >= COPY_SPLIT_MIN && !cs->copier && !cs->copier_tried) {
        cs->copier_tried = true;
        cs->copier = copier_start(ctx);
    }
    copier *c = cs->copier;
    if (len < COPY_SPLIT_MIN || !c || c->nhelpers == 0) {
        memcpy(dst, src, len);
        return;
    }
    int parts = c->nhelpers + 1;
    if ((size_t)parts > len / COPY_PART_MIN) parts = (int)(len / COPY_PART_MIN);
    pthread_mutex_lock(&c->mu);
    c->dst = dst;
    c->src = src;
    c->len = len;
    c->nparts = parts;
    c->part = (len / (size_t)parts + 63) & ~(size_t)63;
    c->pending = c->nhelpers;
    c->job++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    copy_part(c, 0);
    pthread_mutex_lock(&c->mu);
    while (c->pending > 0) pthread_cond_wait(&c->done, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* ---- staging host memory through the pinned ring ---------------------------------------- */

/* Copies `bytes` from host src to device dst on the copy stream: by DMA straight from src
 * when it lies in pinned memory of the context, else through the pinned slots. */
static sluice_status stage_in(sluice_context *ctx, cuda_session *cs, void *dst, const void *src,
                              size_t bytes, int *slot) {
    if (bytes > 0 && pinned_covers(ctx, src, bytes)) {
        CUDA_TRY(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cs->copy),
                 "copying a batch to the device");
        cs->direct_pending = true;
        return SLUICE_OK;
    }
    size_t slot_bytes = cs->staging_bytes;
    for (size_t at = 0; at < bytes; at += slot_bytes) {
        size_t len = bytes - at < slot_bytes ? bytes - at : slot_bytes;
        int k = *slot;
        *slot = (k + 1) % STAGING_SLOTS;
        CUDA_TRY(ctx, cudaEventSynchronize(cs->slot_free[k]), "waiting for a staging buffer");
        staging_copy(ctx, cs, cs->pinned[k], (const char *)src + at, len);
        CUDA_TRY(ctx, cudaMemcpyAsync((char *)dst + at, cs->pinned[k], len, cudaMemcpyHostToDevice,
                                      cs->copy), "copying a batch to the device");
        CUDA_TRY(ctx, cudaEventRecord(cs->slot_free[k], cs->copy), "recording an event");
    }
    return SLUICE_OK;
}

/* Copies device src to host dst: by DMA straight into dst when it lies in pinned memory of
 * the context (result batches from the pool), else through the pinned slots, the copy
 * engine filling one slot while the CPU empties the other. */
static sluice_status stage_out(sluice_context *ctx, cuda_session *cs, void *dst, const void *src,
                               size_t bytes) {
    if (bytes > 0 && pinned_covers(ctx, dst, bytes)) {
        CUDA_TRY(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cs->copy),
                 "copying results to the host");
        cs->direct_pending = true;
        return SLUICE_OK;
    }
    size_t pending_at = 0, pending_len = 0;
    int pending_slot = -1, k = 0;
    size_t slot_bytes = cs->staging_bytes;
    for (size_t at = 0; at < bytes || pending_slot >= 0; at += slot_bytes) {
        int issued = -1;
        size_t len = 0;
        if (at < bytes) {
            len = bytes - at < slot_bytes ? bytes - at : slot_bytes;
            issued = k;
            k = (k + 1) % STAGING_SLOTS;
            CUDA_TRY(ctx, cudaMemcpyAsync(cs->pinned[issued], (const char *)src + at, len,
                                          cudaMemcpyDeviceToHost, cs->copy),
                     "copying results to the host");
            CUDA_TRY(ctx, cudaEventRecord(cs->slot_free[issued], cs->copy), "recording an event");
        }
        if (pending_slot >= 0) {
            CUDA_TRY(ctx, cudaEventSynchronize(cs->slot_free[pending_slot]), "copying results");
            staging_copy(ctx, cs, (char *)dst + pending_at, cs->pinned[pending_slot], pending_len);
        }
        pending_slot = issued;
        pending_at = at;
        pending_len = len;
    }
    return SLUICE_OK;
}

/* ---- running a piece ------------------------------------------------------------------ */

static sluice_status read_count(sluice_context *ctx, cuda_session *cs, const void *dev, int64_t *out) {
    CUDA_TRY(ctx, cudaMemcpyAsync(cs->pinned_small, dev, sizeof(int64_t), cudaMemcpyDeviceToHost,
                                  cs->stream), "reading a row count");
    CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "running a batch");
    *out = cs->pinned_small[0];
    return SLUICE_OK;
}

/* Where group gi writes column c: in place in the piece's result batch when it is the
 * column's last writer and outputs stay on the device, else `own`. */
static sluice_status destination(sluice_session *s, cuda_session *cs, sl_piece *piece, int gi,
                                 int c, void *own, void **out) {
    *out = own;
    if (!s->outputs_on_device || cs->final_group[c] != gi) return SLUICE_OK;
    const sluice_pipeline *p = s->pipeline;
    for (int i = 0; i < p->noutputs; i++) {
        if (p->outputs[i] != c) continue;
        if (!piece->result) {
            SL_TRY(device_batch_new(s, cs, piece->rows, &piece->result));
            piece->room = piece->rows;
        }
        *out = piece->result->owned[i];
        return SLUICE_OK;
    }
    return SLUICE_OK;
}

/* Every column a group reads must have been written by an earlier group (or be an input):
 * a mismatch between the plan and a group's layout is reported by name. */
static sluice_status check_written(sluice_session *s, const sl_piece *piece, int gi,
                                   const int *cols, int n) {
    for (int i = 0; i < n; i++)
        if (cols[i] != s->plan.offsets_input && !piece->cols[cols[i]])
            return sl_error(s->ctx, SLUICE_ERR_CUDA,
                            "internal: plan group %d of pipeline '%s' reads column '%s', which no "
                            "earlier group wrote on the GPU",
                            gi, s->pipeline->name, s->pipeline->columns[cols[i]].name);
    return SLUICE_OK;
}

static sluice_status keep_temp(sluice_session *s, cuda_session *cs, void *ptr) {
    if (cs->ntemps == cs->temps_cap) {
        int cap = cs->temps_cap ? 2 * cs->temps_cap : 16;
        void **t = sl_realloc(s->ctx, cs->temps, (size_t)cap * sizeof *t);
        if (!t) {
            cudaFreeAsync(ptr, cs->stream);
            return sl_error(s->ctx, SLUICE_ERR_NO_MEMORY, "out of memory flushing a sort");
        }
        cs->temps = t;
        cs->temps_cap = cap;
    }
    cs->temps[cs->ntemps++] = ptr;
    return SLUICE_OK;
}

static sluice_status run_fused(sluice_session *s, cuda_session *cs, sl_piece *piece) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    int gi = piece->group;
    group_state *g = &cs->groups[gi];
    const sl_cuda_group_layout *L = g->layout;
    if (piece->rows > cs->cap_rows)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a piece of %lld rows reached buffers for %lld",
                        (long long)piece->rows, (long long)cs->cap_rows);
    const void *ins[64];
    void *outs[64];
    const void **in = ins;
    void **outp = outs;
    sluice_status st = SLUICE_OK;
    if (L->ninputs > 64 || L->noutputs > 64) {
        in = sl_calloc(ctx, (size_t)L->ninputs + 1, sizeof *in);
        outp = sl_calloc(ctx, (size_t)L->noutputs + 1, sizeof *outp);
        if (!in || !outp) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory running a batch");
    }
    if (st == SLUICE_OK) st = check_written(s, piece, gi, L->inputs, L->ninputs);
    for (int i = 0; st == SLUICE_OK && i < L->ninputs; i++)
        in[i] = L->inputs[i] == s->plan.offsets_input ? (const void *)piece->offsets
                                                      : piece->cols[L->inputs[i]];
    for (int i = 0; st == SLUICE_OK && i < L->noutputs; i++)
        st = destination(s, cs, piece, gi, L->outputs[i], g->out_buf[i], &outp[i]);
    if (st == SLUICE_OK) {
        int from = g->touched ? !g->live : g->live;
        sl_cuda_group_io io = {piece->rows, piece->nsegments, in, outp, s->params, g->carry[from],
                               g->carry[!g->live], cs->scratch, (int64_t *)cs->dev_small};
        st = sl_cuda_group_run(ctx, g->fused, cs->stream, &io);
    }
    if (st == SLUICE_OK) {
        g->touched = true;
        /* After a compaction rows have moved: only what the group wrote is valid. */
        if (L->compacts)
            for (int c = 0; c <= p->ncolumns; c++) piece->cols[c] = NULL;
        for (int i = 0; i < L->noutputs; i++) piece->cols[L->outputs[i]] = outp[i];
        if (L->compacts) st = read_count(ctx, cs, cs->dev_small, &piece->rows);
    }
    if (in != ins) sl_free(ctx, (void *)in);
    if (outp != outs) sl_free(ctx, outp);
    return st;
}

static sluice_status run_sort(sluice_session *s, cuda_session *cs, sl_piece *piece) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    int gi = piece->group;
    group_state *g = &cs->groups[gi];
    int64_t n = piece->rows;
    SL_TRY(check_written(s, piece, gi, g->cols, g->ncols));
    const sl_cuda_sort *prepared = &g->prepared;
    sl_cuda_sort flush_sort;
    void *scratch = cs->scratch;
    if (g->per_stream) {
        /* At flush, over the whole stream: sized now; its scratch and sorted columns come
         * from the pool and are freed when the flush settles. */
        sl_cuda_sort_desc d;
        if (sort_desc(g, &d) != SLUICE_OK)
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "internal: sort keys are not moved by the sort");
        sluice_status st = sl_cuda_sort_prepare(&flush_sort, &d, n);
        if (st != SLUICE_OK)
            return sl_error(ctx, st, "cannot prepare the GPU sort for %lld rows", (long long)n);
        prepared = &flush_sort;
        SL_TRY(pool_alloc(ctx, cs, &scratch, flush_sort.scratch_bytes, "a stream-wide sort's scratch"));
        SL_TRY(keep_temp(s, cs, scratch));
    } else if (n > cs->cap_rows) {
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a piece of %lld rows reached buffers for %lld",
                        (long long)n, (long long)cs->cap_rows);
    }
    const void *ins[64];
    void *outs[64];
    const void **in = ins;
    void **outp = outs;
    sluice_status st = SLUICE_OK;
    if (g->ncols > 64) {
        in = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *in);
        outp = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *outp);
        if (!in || !outp) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory running a batch");
    }
    for (int c = 0; st == SLUICE_OK && c < g->ncols; c++) {
        in[c] = piece->cols[g->cols[c]];
        void *own = g->per_stream ? NULL : g->sort_out[c];
        if (g->per_stream) {
            st = pool_alloc(ctx, cs, &own, (size_t)n * sluice_type_size(g->types[c]),
                            "a stream-wide sort's output");
            if (st == SLUICE_OK) st = keep_temp(s, cs, own);
        }
        /* In place in the result only when no groups follow: after a stream-wide sort they
         * run over pieces of the sorted rows, each with a result batch of its own. */
        if (st == SLUICE_OK && g->per_stream && gi + 1 < cs->ngroups) outp[c] = own;
        else if (st == SLUICE_OK) st = destination(s, cs, piece, gi, g->cols[c], own, &outp[c]);
    }
    if (st == SLUICE_OK) {
        cudaError_t e = (cudaError_t)sl_cuda_sort_run(prepared, scratch, n, g->types, in, outp,
                                                      cs->stream);
        if (e != cudaSuccess) st = cuda_status(ctx, e, "sorting");
    }
    if (st == SLUICE_OK) {
        /* Rows have moved: only the sorted columns are valid. */
        for (int c = 0; c <= p->ncolumns; c++) piece->cols[c] = NULL;
        for (int c = 0; c < g->ncols; c++) piece->cols[g->cols[c]] = outp[c];
    }
    if (in != ins) sl_free(ctx, (void *)in);
    if (outp != outs) sl_free(ctx, outp);
    return st;
}

static sluice_status finish_impl(sluice_session *s, cuda_session *cs, sl_piece *piece,
                                 sluice_batch **out) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    int64_t rows = piece->rows;
    sluice_status st = SLUICE_OK;
    sluice_batch *b = piece->result;
    piece->result = NULL;
    if (s->outputs_on_device) {
        if (!b) SL_TRY(device_batch_new(s, cs, rows, &b));
        for (int i = 0; i < p->noutputs && st == SLUICE_OK; i++) {
            int c = p->outputs[i];
            size_t bytes = (size_t)rows * type_size(p, c);
            if (piece->cols[c] != b->owned[i]) {
                cudaError_t e = cudaMemcpyAsync(b->owned[i], piece->cols[c], bytes,
                                                cudaMemcpyDeviceToDevice, cs->stream);
                if (e != cudaSuccess) st = cuda_status(ctx, e, "writing a result column");
            }
        }
    } else {
        /* Pinned from the pool (copied out by DMA); pageable when pinned memory runs out. */
        b = pinned_batch_new(s, rows);
        if (!b) b = sl_batch_new_host(ctx, p, rows);
        if (!b) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory for a result batch of %lld rows",
                                (long long)rows);
        cudaError_t e = cudaEventRecord(cs->computed, cs->stream);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(cs->copy, cs->computed, 0);
        if (e != cudaSuccess) st = cuda_status(ctx, e, "ordering the result copy");
        for (int i = 0; i < p->noutputs && st == SLUICE_OK; i++) {
            int c = p->outputs[i];
            st = stage_out(ctx, cs, b->owned[i], piece->cols[c], (size_t)rows * type_size(p, c));
        }
        /* A DMA into pinned results may still be reading the buffers when this returns: the
         * next piece's work on the stream must not overwrite them before it is done. */
        if (st == SLUICE_OK && cs->direct_pending) {
            e = cudaEventRecord(cs->copied_out, cs->copy);
            if (e == cudaSuccess) e = cudaStreamWaitEvent(cs->stream, cs->copied_out, 0);
            if (e != cudaSuccess) st = cuda_status(ctx, e, "ordering the result copy");
        }
    }
    if (st != SLUICE_OK) {
        sluice_batch_free(b);
        return st;
    }
    b->rows = rows;
    for (size_t i = 0; i < b->ncolumns; i++) b->columns[i].length = rows;
    *out = b;
    return SLUICE_OK;
}

/* ---- input ---------------------------------------------------------------------------- */

static sluice_status check_device_offsets(sluice_session *s, cuda_session *cs, const sl_input *in,
                                          int64_t *rows) {
    sluice_context *ctx = s->ctx;
    const int64_t *off = in->data[cs->offsets_input];
    int64_t count = in->nsegments + 1;
    bool rows_known = s->pipeline->ninputs > 1;
    unsigned *verdict = (unsigned *)((char *)cs->dev_small + 64);
    cudaError_t e = (cudaError_t)sl_cuda_offsets_check(off, count, rows_known ? *rows : -1,
                                                       verdict, cs->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&cs->pinned_small[1], verdict, sizeof(unsigned), cudaMemcpyDeviceToHost,
                            cs->stream);
    if (e == cudaSuccess && count > 0)
        e = cudaMemcpyAsync(&cs->pinned_small[2], off + count - 1, sizeof(int64_t),
                            cudaMemcpyDeviceToHost, cs->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cs->stream);
    if (e != cudaSuccess) return cuda_status(ctx, e, "checking the offsets");
    const char *name = s->pipeline->columns[cs->offsets_input].name;
    unsigned bad = (unsigned)cs->pinned_small[1];
    if (count < 1)
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS, "offsets column '%s' is empty: it needs k+1 >= 1 entries", name);
    if (bad & SL_OFFSETS_BAD_START)
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS, "offsets column '%s' must start at 0", name);
    if (bad & (SL_OFFSETS_DECREASE | SL_OFFSETS_NEGATIVE))
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS, "offsets column '%s' decreases somewhere: offsets must be non-decreasing", name);
    if (bad & SL_OFFSETS_BAD_END)
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS,
                        "offsets column '%s' ends at %lld; its last offset must equal the row count %lld",
                        name, (long long)cs->pinned_small[2], (long long)*rows);
    if (!rows_known) *rows = cs->pinned_small[2];
    return SLUICE_OK;
}

static sluice_status load_impl(sluice_session *s, cuda_session *cs, const sl_input *in,
                               int64_t first, sl_piece *piece) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    int64_t rows = piece->rows;
    int slot = 0;
    bool staged = false;
    if (rows > cs->cap_rows) SL_TRY(reserve_impl(s, cs, rows));
    if (!in->on_device) {
        /* The input buffers may still be read by the previous piece's work. */
        CUDA_TRY(ctx, cudaEventRecord(cs->computed, cs->stream), "recording an event");
        CUDA_TRY(ctx, cudaStreamWaitEvent(cs->copy, cs->computed, 0), "ordering the input copy");
    }
    for (int i = 0; i < p->ninputs; i++) {
        size_t w = type_size(p, i);
        if (i == cs->offsets_input) {
            if (in->on_device) continue; /* piece->offsets: the caller's device offsets */
            int64_t count = piece->nsegments + 1;
            if (count > cs->offsets_cap) {
                /* Empty segments can outnumber rows: grow (rare, geometric; waits for the stream). */
                int64_t cap = 2 * count;
                CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "growing the offsets buffer");
                CUDA_TRY(ctx, cudaStreamSynchronize(cs->copy), "growing the offsets buffer");
                cudaFree(cs->in_buf[i]);
                cs->in_buf[i] = NULL;
                cs->offsets_cap = 0;
                SL_TRY(device_alloc(ctx, &cs->in_buf[i], (size_t)cap * w, "the offsets buffer"));
                cs->offsets_cap = cap;
            }
            SL_TRY(stage_in(ctx, cs, cs->in_buf[i], piece->offsets, (size_t)count * w, &slot));
            piece->offsets = cs->in_buf[i];
            staged = true;
            continue;
        }
        const char *src = (const char *)in->data[i] + (size_t)first * w;
        if (in->on_device) {
            piece->cols[i] = src;
            continue;
        }
        SL_TRY(stage_in(ctx, cs, cs->in_buf[i], src, (size_t)rows * w, &slot));
        piece->cols[i] = cs->in_buf[i];
        staged = true;
    }
    if (staged) {
        CUDA_TRY(ctx, cudaEventRecord(cs->inputs_ready, cs->copy), "recording an event");
        CUDA_TRY(ctx, cudaStreamWaitEvent(cs->stream, cs->inputs_ready, 0), "ordering the input copy");
    }
    return SLUICE_OK;
}

/* ---- transactions and reset ----------------------------------------------------------- */

static void begin_impl(cuda_session *cs) {
    for (int i = 0; i < cs->ngroups; i++) cs->groups[i].touched = false;
}

static sluice_status settle_impl(sluice_session *s, cuda_session *cs) {
    cudaError_t e = cudaSuccess;
    if (cs->ntemps > 0) {
        /* A flush sorted into temporaries: free them after the work that reads them, and
         * wait for it, so a fault in it is this call's. */
        free_temps(cs);
        e = cudaStreamSynchronize(cs->stream);
    }
    if (e == cudaSuccess && cs->direct_pending) {
        /* The caller may reuse its pinned input, and read pinned results, once the call
         * returns (sluice_cuda.h): the copies from and to them must be done. */
        e = cudaStreamSynchronize(cs->copy);
        cs->direct_pending = false;
    }
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(s->ctx, e, "running a batch");
    return SLUICE_OK;
}

static void commit_impl(cuda_session *cs) {
    for (int i = 0; i < cs->ngroups; i++) {
        group_state *g = &cs->groups[i];
        if (g->touched) g->live = !g->live;
        g->touched = false;
    }
}

static void rollback_impl(cuda_session *cs) {
    free_temps(cs);
    if (cs->direct_pending) {
        /* The caller's pinned input, and result blocks the executor frees next, must not be
         * in a copy when the failed call returns. */
        cudaStreamSynchronize(cs->copy);
        cudaGetLastError();
        cs->direct_pending = false;
    }
    for (int i = 0; i < cs->ngroups; i++) cs->groups[i].touched = false; /* spare carries */
}

static sluice_status reset_impl(sluice_session *s, cuda_session *cs) {
    sluice_context *ctx = s->ctx;
    for (int gi = 0; gi < cs->ngroups; gi++) {
        group_state *g = &cs->groups[gi];
        g->touched = false;
        if (g->kind == SL_GROUP_FUSED)
            CUDA_TRY(ctx, cudaMemcpyAsync(g->carry[g->live], sl_cuda_group_carry_identity(g->fused),
                                          g->layout->carry_bytes, cudaMemcpyHostToDevice, cs->stream),
                     "resetting a carry");
    }
    CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "resetting the session");
    return SLUICE_OK;
}

/* ---- the operations, each on the session's device --------------------------------------- */

#define ON_DEVICE(s, call)                                                                 \
    do {                                                                                   \
        int prev_ = enter_device((s)->impl);                                               \
        sluice_status st_ = (call);                                                        \
        leave_device((s)->impl, prev_);                                                    \
        return st_;                                                                        \
    } while (0)

static sluice_status cuda_alloc(sluice_session *s, size_t bytes, void **out) {
    ON_DEVICE(s, pool_alloc(s->ctx, s->impl, out, bytes, "rows held for a stream-wide sort"));
}

static void cuda_free(sluice_session *s, void *ptr) {
    cuda_session *cs = s->impl;
    int prev = enter_device(cs);
    cudaFreeAsync(ptr, cs->stream);
    leave_device(cs, prev);
}

static sluice_status copy_impl(sluice_session *s, void *dst, const void *src, size_t bytes) {
    cuda_session *cs = s->impl;
    if (bytes == 0) return SLUICE_OK;
    CUDA_TRY(s->ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cs->stream),
             "holding rows for a stream-wide sort");
    return SLUICE_OK;
}

static sluice_status cuda_copy(sluice_session *s, void *dst, const void *src, size_t bytes) {
    ON_DEVICE(s, copy_impl(s, dst, src, bytes));
}

/* Host copies for spilling a stream-wide sort: in stream order, complete on return. */
static sluice_status host_copy_impl(sluice_session *s, void *dst, const void *src, size_t bytes,
                                    enum cudaMemcpyKind kind) {
    cuda_session *cs = s->impl;
    if (bytes == 0) return SLUICE_OK;
    CUDA_TRY(s->ctx, cudaMemcpyAsync(dst, src, bytes, kind, cs->stream), "spilling a stream-wide sort");
    CUDA_TRY(s->ctx, cudaStreamSynchronize(cs->stream), "spilling a stream-wide sort");
    return SLUICE_OK;
}

static sluice_status cuda_to_host(sluice_session *s, void *host, const void *src, size_t bytes) {
    ON_DEVICE(s, host_copy_impl(s, host, src, bytes, cudaMemcpyDeviceToHost));
}

static sluice_status cuda_from_host(sluice_session *s, void *dst, const void *host, size_t bytes) {
    ON_DEVICE(s, host_copy_impl(s, dst, host, bytes, cudaMemcpyHostToDevice));
}

static sluice_status cuda_check_input(sluice_session *s, sl_input *in) {
    cuda_session *cs = s->impl;
    if (cs->offsets_input < 0 || !in->on_device) return SLUICE_OK;
    ON_DEVICE(s, check_device_offsets(s, cs, in, &in->rows));
}

static sluice_status cuda_reserve(sluice_session *s, int64_t rows, int64_t nsegments) {
    (void)nsegments; /* the offsets buffer grows in load */
    ON_DEVICE(s, reserve_impl(s, s->impl, rows));
}

static sluice_status cuda_load(sluice_session *s, const sl_input *in, int64_t first, sl_piece *piece) {
    ON_DEVICE(s, load_impl(s, s->impl, in, first, piece));
}

static sluice_status cuda_run_group(sluice_session *s, sl_piece *piece) {
    cuda_session *cs = s->impl;
    bool fused = cs->groups[piece->group].kind == SL_GROUP_FUSED;
    ON_DEVICE(s, fused ? run_fused(s, cs, piece) : run_sort(s, cs, piece));
}

static sluice_status cuda_finish(sluice_session *s, sl_piece *piece, sluice_batch **out) {
    ON_DEVICE(s, finish_impl(s, s->impl, piece, out));
}

static void cuda_begin(sluice_session *s) { begin_impl(s->impl); }

static sluice_status cuda_settle(sluice_session *s) { ON_DEVICE(s, settle_impl(s, s->impl)); }

static void cuda_commit(sluice_session *s) { commit_impl(s->impl); }

static void cuda_rollback(sluice_session *s) {
    int prev = enter_device(s->impl);
    rollback_impl(s->impl);
    leave_device(s->impl, prev);
}

static sluice_status cuda_reset(sluice_session *s) { ON_DEVICE(s, reset_impl(s, s->impl)); }

static const sl_backend_ops cuda_ops = {
    .id = SLUICE_BACKEND_CUDA,
    .name = "cuda",
    .available = cuda_available,
    .caps = {.max_phases = SL_CG_MAX_PHASES, .one_offsets_per_group = true},
    .max_sort_rows = SL_CUDA_SORT_MAX_ROWS,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .check_input = cuda_check_input,
    .reserve = cuda_reserve,
    .load = cuda_load,
    .run_group = cuda_run_group,
    .finish = cuda_finish,
    .begin = cuda_begin,
    .settle = cuda_settle,
    .commit = cuda_commit,
    .rollback = cuda_rollback,
    .reset = cuda_reset,
};

const sl_backend_ops *sl_cuda_backend(void) { return &cuda_ops; }

/* ---- sluice_cuda.h ------------------------------------------------------------------------ */

SLUICE_API sluice_status sluice_cuda_session_open(sluice_pipeline *pipeline,
                                                  const sluice_session_options *options,
                                                  const sluice_cuda_options *cuda,
                                                  sluice_session **out) {
    if (out) *out = NULL;
    if (!pipeline) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_context *ctx = pipeline->ctx;
    sluice_cuda_options cuda_defaults = SLUICE_CUDA_OPTIONS_INIT;
    if (!cuda) cuda = &cuda_defaults;
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    if (options && options->version == 1) /* a version 1 struct ends before sort_memory_bytes */
        memcpy(&o, options, offsetof(sluice_session_options, sort_memory_bytes));
    else if (options)
        o = *options;
    if (cuda->version != SLUICE_CUDA_OPTIONS_VERSION) {
        sl_diag_clear(ctx);
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "CUDA options version %u is not %u: initialise with SLUICE_CUDA_OPTIONS_INIT",
                        cuda->version, SLUICE_CUDA_OPTIONS_VERSION);
    }
    if (o.version == SLUICE_SESSION_OPTIONS_VERSION && o.backend == SLUICE_BACKEND_CPU) {
        sl_diag_clear(ctx);
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_cuda_session_open opens CUDA sessions; the options ask for the CPU "
                        "backend (use sluice_session_open)");
    }
    o.backend = SLUICE_BACKEND_CUDA;
    sluice_session *s;
    SL_TRY(sluice_session_open(pipeline, &o, &s));
    cuda_session *cs = s->impl;
    if (cuda->stream) {
        /* Adopt the caller's stream: the session's own one has seen only its open. */
        cudaStreamSynchronize(cs->stream);
        cudaStreamDestroy(cs->stream);
        cs->stream = cuda->stream;
        cs->own_stream = false;
    }
    s->cuda_stream = cs->stream;
    s->outputs_on_device = cuda->outputs_on_device != 0;
    *out = s;
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_cuda_session_push_device(sluice_session *session,
                                                         const sluice_column *columns,
                                                         size_t count) {
    if (!session) return SLUICE_ERR_INVALID_ARGUMENT;
    if (session->backend != &cuda_ops) {
        sl_diag_clear(session->ctx);
        return sl_error(session->ctx, SLUICE_ERR_MISUSE,
                        "device batches need a CUDA session; this one runs on '%s'",
                        session->backend->name);
    }
    return sl_session_push(session, columns, count, true);
}

SLUICE_API cudaStream_t sluice_cuda_session_stream(const sluice_session *session) {
    if (!session || session->backend != &cuda_ops || !session->impl) return NULL;
    return ((const cuda_session *)session->impl)->stream;
}

SLUICE_API int sluice_batch_on_device(const sluice_batch *batch) {
    return batch && batch->on_device;
}

/* ---- sluice_cuda.h: pinned host memory ---------------------------------------------------- */

SLUICE_API sluice_status sluice_cuda_host_alloc(sluice_context *ctx, size_t bytes, void **out) {
    if (out) *out = NULL;
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!out) return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_alloc: out is NULL");
    if (bytes == 0)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_cuda_host_alloc: zero bytes asked for");
    if (!gpu_present())
        return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "pinned host memory needs a usable GPU (no driver or no device)");
    cuda_ctx_state *cx = ctx_state(ctx, true);
    if (!cx) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory recording pinned memory");
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "cannot pin %zu bytes of host memory", bytes);
    }
    if (e != cudaSuccess) return cuda_status(ctx, e, "allocating pinned host memory");
    sluice_status st = range_add(ctx, cx, p, bytes, PINNED_ALLOC);
    if (st != SLUICE_OK) {
        cudaFreeHost(p);
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
                        fn, ptr, kind == PINNED_ALLOC ? "sluice_cuda_host_register" : "sluice_cuda_host_alloc",
                        kind == PINNED_ALLOC ? "sluice_cuda_host_unregister" : "sluice_cuda_host_free");
    if (r->base != (char *)ptr)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "%s: %p is %zu bytes inside a block; pass the pointer %s gave",
                        fn, ptr, (size_t)((char *)ptr - r->base), want);
    *out = r;
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_cuda_host_free(sluice_context *ctx, void *ptr) {
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!ptr) return SLUICE_OK;
    pinned_range *r;
    SL_TRY(own_range(ctx, ptr, PINNED_ALLOC, "sluice_cuda_host_free", &r));
    cudaError_t e = cudaFreeHost(r->base);
    range_remove(ctx_state(ctx, false), r);
    if (e != cudaSuccess) return cuda_status(ctx, e, "freeing pinned host memory");
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
    if (!gpu_present())
        return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "registering host memory needs a usable GPU (no driver or no device)");
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
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "cannot pin %zu bytes of host memory", bytes);
    }
    if (e != cudaSuccess) return cuda_status(ctx, e, "registering host memory");
    sluice_status st = range_add(ctx, cx, ptr, bytes, PINNED_REGISTERED);
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
    if (e != cudaSuccess) return cuda_status(ctx, e, "unregistering host memory");
    return SLUICE_OK;
}
