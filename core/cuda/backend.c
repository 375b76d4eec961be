/* backend.c — the CUDA backend's host side: the sl_backend_ops table, sessions on streams,
 * device memory (scratch, column buffers, carries) sized when a session opens, host batches
 * staged through a ring of pinned buffers on a copy stream, sorts through kernels/sort.cu,
 * stream-wide sorts accumulated on the device until flush, and the public sluice_cuda.h.
 *
 * How a batch runs. cur[c] is the device pointer of pipeline column c's latest version.
 * Inputs point at the caller's device memory or at the session's input buffers (host
 * batches, copied in). Each plan group then runs in order on the session's stream: a fused
 * group (core/cuda/fused.h) reads cur[] and writes its own buffers; a sort group moves the
 * columns still needed. Rows only change at a compaction, whose kept count is the one thing
 * the host waits for. A per-stream sort appends the rows to device buffers and the groups
 * after it run at flush, over the sorted rows cut into max_batch_rows pieces.
 *
 * Transactions (core/session.h): every fused group has two carries; a push writes the
 * spare one and the push commits by flipping which one is live. Rows appended to a
 * stream sort and batches emitted count only once the push commits. */
#include <string.h>

#include <cuda_runtime_api.h>

#include "context.h"
#include "cuda/fused.h"
#include "cuda/host.h"
#include "cuda/offsets_check.h"
#include "cuda/sort.h"
#include "session.h"
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
    bool touched;      /* written in the current (uncommitted) push */
    void **out_buf;    /* per layout output: device buffer for max_batch_rows rows */
    /* sort */
    const sl_sort *sort;
    int ncols;
    int *cols;          /* pipeline column ids moved by the sort (keys included) */
    sluice_type *types;
    sl_cuda_sort prepared;  /* per-batch sorts: sized for max_batch_rows */
    void **sort_out;        /* per moved column: max_batch_rows rows (per-batch sorts) */
    /* stream-wide sort: rows accumulated on the device until flush */
    bool per_stream;
    void **acc;
    int64_t acc_rows, acc_pending, acc_cap;
} group_state;

typedef struct cuda_session {
    int device, arch;
    cudaStream_t stream, copy;
    bool own_stream;
    cudaEvent_t slot_free[STAGING_SLOTS], inputs_ready, computed;
    void *pinned[STAGING_SLOTS];
    size_t staging_bytes;   /* per slot */
    int64_t *pinned_small;  /* counts read back: [0] kept rows, [1] verdict, [2] last offset */
    void *dev_small;        /* device: kept-row count and offsets verdict */
    void *scratch;
    size_t scratch_bytes;
    void **in_buf;          /* per pipeline input: device buffer for host batches */
    const void **cur;       /* per pipeline column */
    int ngroups;
    group_state *groups;
    int *final_group;       /* per pipeline column: last group writing it, -1 none */
    int offsets_input;      /* pipeline column id of the offsets input, -1 none */
    int64_t offsets_cap;    /* entries in in_buf[offsets_input] */
    bool cut_invariant;     /* output independent of where batches are cut */
    cudaMemPool_t pool;     /* device outputs and stream-sort buffers */
    sluice_status sticky;   /* a sticky CUDA error seen: every later call fails */
} cuda_session;

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

static bool cuda_available(void) {
    int n = 0;
    /* cudart loads the driver lazily: without one this returns an error, never crashes. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return n > 0;
}

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

static void free_group(sluice_context *ctx, cuda_session *cs, group_state *g) {
    if (g->fused) sl_cuda_group_free(ctx, g->fused);
    for (int i = 0; i < 2; i++)
        if (g->carry[i]) cudaFree(g->carry[i]);
    if (g->out_buf) {
        for (int i = 0; g->layout && i < g->layout->noutputs; i++)
            if (g->out_buf[i]) cudaFree(g->out_buf[i]);
        sl_free(ctx, g->out_buf);
    }
    if (g->sort_out) {
        for (int i = 0; i < g->ncols; i++)
            if (g->sort_out[i]) cudaFree(g->sort_out[i]);
        sl_free(ctx, g->sort_out);
    }
    if (g->acc) {
        for (int i = 0; i < g->ncols; i++)
            if (g->acc[i]) cudaFreeAsync(g->acc[i], cs->stream);
        sl_free(ctx, g->acc);
    }
    sl_free(ctx, g->cols);
    sl_free(ctx, g->types);
}

static void cuda_close(sluice_session *s) {
    cuda_session *cs = s->impl;
    if (!cs) return;
    sluice_context *ctx = s->ctx;
    int prev = cs->stream ? enter_device(cs) : -1;
    if (cs->stream) cudaStreamSynchronize(cs->stream);
    for (int i = 0; cs->groups && i < cs->ngroups; i++) free_group(ctx, cs, &cs->groups[i]);
    if (cs->stream) cudaStreamSynchronize(cs->stream);
    sl_free(ctx, cs->groups);
    if (cs->in_buf) {
        for (int i = 0; i < s->pipeline->ninputs; i++)
            if (cs->in_buf[i]) cudaFree(cs->in_buf[i]);
        sl_free(ctx, cs->in_buf);
    }
    sl_free(ctx, (void *)cs->cur);
    sl_free(ctx, cs->final_group);
    if (cs->scratch) cudaFree(cs->scratch);
    if (cs->dev_small) cudaFree(cs->dev_small);
    for (int i = 0; i < STAGING_SLOTS; i++) {
        if (cs->pinned[i]) cudaFreeHost(cs->pinned[i]);
        if (cs->slot_free[i]) cudaEventDestroy(cs->slot_free[i]);
    }
    if (cs->pinned_small) cudaFreeHost(cs->pinned_small);
    if (cs->inputs_ready) cudaEventDestroy(cs->inputs_ready);
    if (cs->computed) cudaEventDestroy(cs->computed);
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

void sl_cuda_sort_moves(const sluice_pipeline *p, int stage, bool *moved) {
    sl_cuda_columns_needed_from(p, stage + 1, moved);
    const sl_sort *so = &p->stages[stage].sort;
    const bool *live = p->stages[stage].live_after;
    for (int c = 0; c < p->ncolumns; c++) moved[c] = moved[c] && live[c];
    for (int k = 0; k < so->nkeys; k++) moved[so->keys[k]] = true;
    for (int c = 0; c < p->ncolumns; c++)
        if (p->columns[c].role == SLUICE_ROLE_OFFSETS) moved[c] = false;
}

/* The sort's moved columns (core/cuda/host.h) as a list, with their types. */
static sluice_status sort_columns(sluice_context *ctx, const sluice_pipeline *p, int stage,
                                  group_state *g) {
    bool *moved = sl_calloc(ctx, (size_t)p->ncolumns + 1, sizeof *moved);
    g->cols = sl_calloc(ctx, (size_t)p->ncolumns + 1, sizeof *g->cols);
    g->types = sl_calloc(ctx, (size_t)p->ncolumns + 1, sizeof *g->types);
    if (!moved || !g->cols || !g->types) {
        sl_free(ctx, moved);
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    }
    sl_cuda_sort_moves(p, stage, moved);
    for (int c = 0; c < p->ncolumns; c++) {
        if (!moved[c]) continue;
        g->types[g->ncols] = p->columns[c].type;
        g->cols[g->ncols++] = c;
    }
    sl_free(ctx, moved);
    return SLUICE_OK;
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
    d->bits_lo = g->sort->bits_lo;
    d->bits_hi = g->sort->bits_hi;
    return SLUICE_OK;
}

static sluice_status open_group(sluice_session *s, cuda_session *cs, int gi, size_t *scratch) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    const sl_group *pg = &s->plan.groups[gi];
    group_state *g = &cs->groups[gi];
    size_t rows = (size_t)s->max_batch_rows;
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
        for (int i = 0; i < g->layout->noutputs; i++) {
            int c = g->layout->outputs[i];
            SL_TRY(device_alloc(ctx, &g->out_buf[i], rows * type_size(p, c), "a column buffer"));
            cs->final_group[c] = gi;
        }
        size_t need = sl_cuda_group_scratch_size(g->fused, s->max_batch_rows);
        if (need > *scratch) *scratch = need;
        return SLUICE_OK;
    }
    g->sort = &p->stages[pg->first].sort;
    g->per_stream = !g->sort->per_batch;
    SL_TRY(sort_columns(ctx, p, pg->first, g));
    sl_cuda_sort_desc d;
    if (sort_desc(g, &d) != SLUICE_OK)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sort keys are not live at the sort");
    for (int c = 0; c < g->ncols; c++) cs->final_group[g->cols[c]] = gi;
    if (g->per_stream) {
        g->acc = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *g->acc);
        if (!g->acc) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
        return SLUICE_OK;
    }
    sluice_status st = sl_cuda_sort_prepare(&g->prepared, &d, s->max_batch_rows);
    if (st != SLUICE_OK)
        return sl_error(ctx, st, "cannot prepare the GPU sort for %lld rows (at most %lld)",
                        (long long)s->max_batch_rows, (long long)SL_CUDA_SORT_MAX_ROWS);
    if (g->prepared.scratch_bytes > *scratch) *scratch = g->prepared.scratch_bytes;
    g->sort_out = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *g->sort_out);
    if (!g->sort_out) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    for (int c = 0; c < g->ncols; c++)
        SL_TRY(device_alloc(ctx, &g->sort_out[c], rows * sluice_type_size(g->types[c]),
                            "a sorted column"));
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
    cs->cur = sl_calloc(ctx, ncol, sizeof *cs->cur);
    cs->final_group = sl_calloc(ctx, ncol, sizeof *cs->final_group);
    cs->in_buf = sl_calloc(ctx, (size_t)p->ninputs + 1, sizeof *cs->in_buf);
    cs->groups = sl_calloc(ctx, (size_t)s->plan.ngroups + 1, sizeof *cs->groups);
    if (!cs->cur || !cs->final_group || !cs->in_buf || !cs->groups)
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    cs->ngroups = s->plan.ngroups;
    for (int c = 0; c < p->ncolumns; c++) cs->final_group[c] = -1;

    /* Batch cutting keeps the output the same unless a batch boundary means something. */
    cs->offsets_input = -1;
    cs->cut_invariant = true;
    for (int i = 0; i < p->ninputs; i++)
        if (p->columns[i].role == SLUICE_ROLE_OFFSETS) cs->offsets_input = i, cs->cut_invariant = false;
    for (int i = 0; i < p->nstages; i++) {
        const sl_stage *st = &p->stages[i];
        if (st->kind == SL_STAGE_SCAN && st->scan.reset_per_batch) cs->cut_invariant = false;
        if (st->kind == SL_STAGE_SORT && st->sort.per_batch) cs->cut_invariant = false;
    }

    size_t rows = (size_t)s->max_batch_rows;
    for (int i = 0; i < p->ninputs; i++) {
        size_t n = p->columns[i].role == SLUICE_ROLE_OFFSETS ? rows + 1 : rows;
        if (p->columns[i].role == SLUICE_ROLE_OFFSETS) cs->offsets_cap = (int64_t)n;
        SL_TRY(device_alloc(ctx, &cs->in_buf[i], n * type_size(p, i), "an input buffer"));
    }
    size_t scratch = 256;
    for (int gi = 0; gi < cs->ngroups; gi++) SL_TRY(open_group(s, cs, gi, &scratch));
    cs->scratch_bytes = scratch;
    SL_TRY(device_alloc(ctx, &cs->scratch, scratch, "scratch"));
    CUDA_TRY(ctx, cudaDeviceSynchronize(), "opening a session");
    return SLUICE_OK;
}

static sluice_status cuda_open(sluice_session *s) {
    cuda_session *cs = sl_calloc(s->ctx, 1, sizeof *cs);
    if (!cs) return sl_error(s->ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    s->impl = cs;
    sluice_status st = open_impl(s, cs);
    if (st != SLUICE_OK) cuda_close(s);
    return st;
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

/* ---- staging host memory through the pinned ring ---------------------------------------- */

/* Copies `bytes` from host src to device dst on the copy stream through the pinned slots. */
static sluice_status stage_in(sluice_context *ctx, cuda_session *cs, void *dst, const void *src,
                              size_t bytes, int *slot) {
    size_t slot_bytes = cs->staging_bytes;
    for (size_t at = 0; at < bytes; at += slot_bytes) {
        size_t len = bytes - at < slot_bytes ? bytes - at : slot_bytes;
        int k = *slot;
        *slot = (k + 1) % STAGING_SLOTS;
        CUDA_TRY(ctx, cudaEventSynchronize(cs->slot_free[k]), "waiting for a staging buffer");
        memcpy(cs->pinned[k], (const char *)src + at, len);
        CUDA_TRY(ctx, cudaMemcpyAsync((char *)dst + at, cs->pinned[k], len, cudaMemcpyHostToDevice,
                                      cs->copy), "copying a batch to the device");
        CUDA_TRY(ctx, cudaEventRecord(cs->slot_free[k], cs->copy), "recording an event");
    }
    return SLUICE_OK;
}

/* Copies device src to host dst through the pinned slots: the copy engine fills one slot
 * while the CPU empties the other. */
static sluice_status stage_out(sluice_context *ctx, cuda_session *cs, void *dst, const void *src,
                               size_t bytes) {
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
            memcpy((char *)dst + pending_at, cs->pinned[pending_slot], pending_len);
        }
        pending_slot = issued;
        pending_at = at;
        pending_len = len;
    }
    return SLUICE_OK;
}

/* ---- running the groups ----------------------------------------------------------------- */

/* The batch being built by one run: created when the first final producer of an output
 * column runs (device outputs), so that group writes the result in place. */
typedef struct run_out {
    sluice_batch *batch;
} run_out;

static sluice_status read_count(sluice_context *ctx, cuda_session *cs, const void *dev, int64_t *out) {
    CUDA_TRY(ctx, cudaMemcpyAsync(cs->pinned_small, dev, sizeof(int64_t), cudaMemcpyDeviceToHost,
                                  cs->stream), "reading a row count");
    CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "running a batch");
    *out = cs->pinned_small[0];
    return SLUICE_OK;
}

/* Where group gi writes column c: in place in the result batch when it is the column's
 * last writer and outputs stay on the device, else `own`. */
static sluice_status destination(sluice_session *s, cuda_session *cs, run_out *ro, int gi, int c,
                                 int64_t rows, void *own, void **out) {
    *out = own;
    if (!s->outputs_on_device || cs->final_group[c] != gi) return SLUICE_OK;
    const sluice_pipeline *p = s->pipeline;
    for (int i = 0; i < p->noutputs; i++) {
        if (p->outputs[i] != c) continue;
        if (!ro->batch) SL_TRY(device_batch_new(s, cs, rows, &ro->batch));
        *out = ro->batch->owned[i];
        return SLUICE_OK;
    }
    return SLUICE_OK;
}

static sluice_status append_stream_rows(sluice_session *s, cuda_session *cs, group_state *g,
                                        int64_t rows) {
    sluice_context *ctx = s->ctx;
    int64_t need = g->acc_pending + rows;
    if (need > SL_CUDA_SORT_MAX_ROWS)
        return sl_error(ctx, SLUICE_ERR_LIMIT,
                        "a stream-wide sort holds at most %lld rows; this stream reached %lld "
                        "(use per: batch or shorter streams)",
                        (long long)SL_CUDA_SORT_MAX_ROWS, (long long)need);
    if (need > g->acc_cap) {
        /* Growth is geometric: a stream of N rows reallocates O(log N) times in all. */
        int64_t cap = g->acc_cap ? g->acc_cap * 2 : s->max_batch_rows;
        if (cap < need) cap = need;
        for (int c = 0; c < g->ncols; c++) {
            size_t w = sluice_type_size(g->types[c]);
            void *grown;
            SL_TRY(pool_alloc(ctx, cs, &grown, (size_t)cap * w, "rows held for a stream-wide sort"));
            if (g->acc[c]) {
                CUDA_TRY(ctx, cudaMemcpyAsync(grown, g->acc[c], (size_t)g->acc_pending * w,
                                              cudaMemcpyDeviceToDevice, cs->stream),
                         "growing a stream-wide sort");
                cudaFreeAsync(g->acc[c], cs->stream);
            }
            g->acc[c] = grown;
        }
        g->acc_cap = cap;
    }
    for (int c = 0; c < g->ncols; c++) {
        size_t w = sluice_type_size(g->types[c]);
        if (rows)
            CUDA_TRY(ctx, cudaMemcpyAsync((char *)g->acc[c] + (size_t)g->acc_pending * w,
                                          cs->cur[g->cols[c]], (size_t)rows * w,
                                          cudaMemcpyDeviceToDevice, cs->stream),
                     "holding rows for a stream-wide sort");
    }
    g->acc_pending = need;
    return SLUICE_OK;
}

static sluice_status emit_rows(sluice_session *s, cuda_session *cs, run_out *ro, int64_t rows);

/* Every column a group reads must have been written by an earlier group (or be an input):
 * a mismatch between the planner's liveness and a group's layout is reported by name. */
static sluice_status check_written(sluice_session *s, cuda_session *cs, int gi, const int *cols,
                                   int n) {
    for (int i = 0; i < n; i++)
        if (!cs->cur[cols[i]])
            return sl_error(s->ctx, SLUICE_ERR_CUDA,
                            "internal: plan group %d of pipeline '%s' reads column '%s', which no "
                            "earlier group wrote on the GPU",
                            gi, s->pipeline->name, s->pipeline->columns[cols[i]].name);
    return SLUICE_OK;
}

/* Runs groups [g0, ngroups) over `rows` rows whose columns are in cs->cur, emitting the
 * result batch (if the run reaches the end and produced rows). */
static sluice_status run_from(sluice_session *s, cuda_session *cs, int g0, int64_t rows,
                              int64_t nsegments) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    run_out ro = {NULL};
    sluice_status st = SLUICE_OK;
    for (int gi = g0; gi < cs->ngroups && st == SLUICE_OK; gi++) {
        group_state *g = &cs->groups[gi];
        if (g->kind == SL_GROUP_FUSED) {
            const sl_cuda_group_layout *L = g->layout;
            const void *ins[64];
            void *outs[64];
            const void **in = ins;
            void **outp = outs;
            if (L->ninputs > 64 || L->noutputs > 64) {
                in = sl_calloc(ctx, (size_t)L->ninputs + 1, sizeof *in);
                outp = sl_calloc(ctx, (size_t)L->noutputs + 1, sizeof *outp);
                if (!in || !outp) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory running a batch");
            }
            if (st == SLUICE_OK) st = check_written(s, cs, gi, L->inputs, L->ninputs);
            for (int i = 0; st == SLUICE_OK && i < L->ninputs; i++) in[i] = cs->cur[L->inputs[i]];
            for (int i = 0; st == SLUICE_OK && i < L->noutputs; i++)
                st = destination(s, cs, &ro, gi, L->outputs[i], rows, g->out_buf[i], &outp[i]);
            if (st == SLUICE_OK) {
                int from = g->touched ? !g->live : g->live;
                sl_cuda_group_io io = {rows, nsegments, in, outp, s->params, g->carry[from],
                                       g->carry[!g->live], cs->scratch, (int64_t *)cs->dev_small};
                st = sl_cuda_group_run(ctx, g->fused, cs->stream, &io);
                if (st == SLUICE_OK) {
                    g->touched = true;
                    /* After a compaction rows have moved: only what the group wrote is valid. */
                    if (L->compacts)
                        for (int c = 0; c < p->ncolumns; c++) cs->cur[c] = NULL;
                    for (int i = 0; i < L->noutputs; i++) cs->cur[L->outputs[i]] = outp[i];
                    if (L->compacts) st = read_count(ctx, cs, cs->dev_small, &rows);
                }
            }
            if (in != ins) sl_free(ctx, (void *)in);
            if (outp != outs) sl_free(ctx, outp);
            continue;
        }
        st = check_written(s, cs, gi, g->cols, g->ncols);
        if (st == SLUICE_OK && g->per_stream) {
            st = append_stream_rows(s, cs, g, rows);
            if (ro.batch) sluice_batch_free(ro.batch);
            return st; /* the rest runs at flush */
        }
        /* per-batch sort */
        const void *ins[64];
        void *outs[64];
        const void **in = ins;
        void **outp = outs;
        if (g->ncols > 64) {
            in = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *in);
            outp = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *outp);
            if (!in || !outp) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory running a batch");
        }
        for (int c = 0; st == SLUICE_OK && c < g->ncols; c++) {
            in[c] = cs->cur[g->cols[c]];
            st = destination(s, cs, &ro, gi, g->cols[c], rows, g->sort_out[c], &outp[c]);
        }
        if (st == SLUICE_OK) {
            cudaError_t e = (cudaError_t)sl_cuda_sort_run(&g->prepared, cs->scratch, rows, g->types,
                                                          in, outp, cs->stream);
            if (e != cudaSuccess) st = cuda_status(ctx, e, "sorting");
            /* Rows have moved: only the sorted columns are valid. */
            if (st == SLUICE_OK)
                for (int c = 0; c < p->ncolumns; c++) cs->cur[c] = NULL;
            for (int c = 0; st == SLUICE_OK && c < g->ncols; c++) cs->cur[g->cols[c]] = outp[c];
        }
        if (in != ins) sl_free(ctx, (void *)in);
        if (outp != outs) sl_free(ctx, outp);
    }
    if (st != SLUICE_OK) {
        if (ro.batch) sluice_batch_free(ro.batch);
        return st;
    }
    return emit_rows(s, cs, &ro, rows);
}

static sluice_status emit_rows(sluice_session *s, cuda_session *cs, run_out *ro, int64_t rows) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    sluice_status st = SLUICE_OK;
    if (rows == 0) {
        if (ro->batch) sluice_batch_free(ro->batch);
        return SLUICE_OK;
    }
    sluice_batch *b = ro->batch;
    if (s->outputs_on_device) {
        if (!b) SL_TRY(device_batch_new(s, cs, rows, &b));
        for (int i = 0; i < p->noutputs && st == SLUICE_OK; i++) {
            int c = p->outputs[i];
            size_t bytes = (size_t)rows * type_size(p, c);
            if (cs->cur[c] != b->owned[i]) {
                cudaError_t e = cudaMemcpyAsync(b->owned[i], cs->cur[c], bytes,
                                                cudaMemcpyDeviceToDevice, cs->stream);
                if (e != cudaSuccess) st = cuda_status(ctx, e, "writing a result column");
            }
        }
    } else {
        b = sl_batch_new_host(ctx, p, rows);
        if (!b) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory for a result batch of %lld rows",
                                (long long)rows);
        cudaError_t e = cudaEventRecord(cs->computed, cs->stream);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(cs->copy, cs->computed, 0);
        if (e != cudaSuccess) st = cuda_status(ctx, e, "ordering the result copy");
        for (int i = 0; i < p->noutputs && st == SLUICE_OK; i++) {
            int c = p->outputs[i];
            st = stage_out(ctx, cs, b->owned[i], cs->cur[c], (size_t)rows * type_size(p, c));
        }
    }
    if (st != SLUICE_OK) {
        sluice_batch_free(b);
        return st;
    }
    b->rows = rows;
    for (size_t i = 0; i < b->ncolumns; i++) b->columns[i].length = rows;
    return sl_session_emit(s, b);
}

/* ---- transactions ------------------------------------------------------------------------ */

typedef struct txn {
    size_t queue_len;
    int64_t rows_out;
} txn;

static txn txn_begin(sluice_session *s, cuda_session *cs) {
    for (int i = 0; i < cs->ngroups; i++) {
        cs->groups[i].touched = false;
        cs->groups[i].acc_pending = cs->groups[i].acc_rows;
    }
    txn t = {s->queue_len, s->rows_out};
    return t;
}

static sluice_status txn_end(sluice_session *s, cuda_session *cs, txn t, sluice_status st) {
    if (st == SLUICE_OK) {
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = cuda_status(s->ctx, e, "running a batch");
    }
    for (int i = 0; i < cs->ngroups; i++) {
        group_state *g = &cs->groups[i];
        if (st == SLUICE_OK) {
            if (g->touched) g->live = !g->live;
            g->acc_rows = g->acc_pending;
        }
        g->touched = false;
        g->acc_pending = g->acc_rows;
    }
    if (st != SLUICE_OK) {
        /* Drop what this call emitted: the session is as it was before the call. */
        while (s->queue_len > t.queue_len) {
            sluice_batch_free(s->queue[s->queue_head + s->queue_len - 1]);
            s->queue_len--;
        }
        s->rows_out = t.rows_out;
    }
    return st;
}

/* ---- push, flush, reset ----------------------------------------------------------------- */

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

static sluice_status push_piece(sluice_session *s, cuda_session *cs, const sl_input *in,
                                int64_t first, int64_t rows) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    int slot = 0;
    bool staged = false;
    if (!in->on_device) {
        /* The input buffers may still be read by the previous piece's work. */
        CUDA_TRY(ctx, cudaEventRecord(cs->computed, cs->stream), "recording an event");
        CUDA_TRY(ctx, cudaStreamWaitEvent(cs->copy, cs->computed, 0), "ordering the input copy");
    }
    /* Only what this piece's groups write is valid: forget the last piece's buffers. */
    for (int c = p->ninputs; c < p->ncolumns; c++) cs->cur[c] = NULL;
    for (int i = 0; i < p->ninputs; i++) {
        bool offsets = i == cs->offsets_input;
        size_t w = type_size(p, i);
        const char *src = (const char *)in->data[i] + (offsets ? 0 : (size_t)first * w);
        if (in->on_device) {
            cs->cur[i] = src;
            continue;
        }
        size_t bytes = (offsets ? (size_t)(in->nsegments + 1) : (size_t)rows) * w;
        if (offsets && in->nsegments + 1 > cs->offsets_cap) {
            /* Empty segments can outnumber rows: grow (rare, geometric; waits for the stream). */
            int64_t cap = 2 * (in->nsegments + 1);
            CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "growing the offsets buffer");
            CUDA_TRY(ctx, cudaStreamSynchronize(cs->copy), "growing the offsets buffer");
            cudaFree(cs->in_buf[i]);
            cs->in_buf[i] = NULL;
            cs->offsets_cap = 0;
            SL_TRY(device_alloc(ctx, &cs->in_buf[i], (size_t)cap * w, "the offsets buffer"));
            cs->offsets_cap = cap;
        }
        SL_TRY(stage_in(ctx, cs, cs->in_buf[i], src, bytes, &slot));
        cs->cur[i] = cs->in_buf[i];
        staged = true;
    }
    if (staged) {
        CUDA_TRY(ctx, cudaEventRecord(cs->inputs_ready, cs->copy), "recording an event");
        CUDA_TRY(ctx, cudaStreamWaitEvent(cs->stream, cs->inputs_ready, 0), "ordering the input copy");
    }
    return run_from(s, cs, 0, rows, in->nsegments);
}

static sluice_status push_impl(sluice_session *s, const sl_input *in) {
    cuda_session *cs = s->impl;
    sluice_context *ctx = s->ctx;
    int64_t rows = in->rows;
    if (cs->offsets_input >= 0 && in->on_device) SL_TRY(check_device_offsets(s, cs, in, &rows));
    if (rows > s->max_batch_rows && !cs->cut_invariant)
        return sl_error(ctx, SLUICE_ERR_LIMIT,
                        "a batch of %lld rows exceeds the session's max_batch_rows (%lld) and this "
                        "pipeline cannot be cut (offsets input, reset: batch or per-batch sort): "
                        "open the session with max_batch_rows >= %lld",
                        (long long)rows, (long long)s->max_batch_rows, (long long)rows);
    txn t = txn_begin(s, cs);
    sluice_status st = SLUICE_OK;
    int64_t first = 0;
    do {
        int64_t n = rows - first < s->max_batch_rows ? rows - first : s->max_batch_rows;
        st = push_piece(s, cs, in, first, n);
        first += n;
    } while (st == SLUICE_OK && first < rows);
    return txn_end(s, cs, t, st);
}

/* Sorts the rows a stream-wide sort group holds and runs the groups after it over them. */
static sluice_status flush_sort(sluice_session *s, cuda_session *cs, int gi) {
    sluice_context *ctx = s->ctx;
    group_state *g = &cs->groups[gi];
    int64_t n = g->acc_pending;
    if (n == 0) return SLUICE_OK;
    sl_cuda_sort_desc d;
    sl_cuda_sort prepared;
    if (sort_desc(g, &d) != SLUICE_OK) return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "bad sort");
    sluice_status st = sl_cuda_sort_prepare(&prepared, &d, n);
    if (st != SLUICE_OK) return sl_error(ctx, st, "cannot prepare the GPU sort for %lld rows", (long long)n);
    /* Flush is not the hot path: the sorted copy and its scratch come from the pool. */
    void **sorted = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *sorted);
    void *scratch = NULL;
    if (!sorted) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory flushing a sort");
    st = pool_alloc(ctx, cs, &scratch, prepared.scratch_bytes, "a stream-wide sort's scratch");
    for (int c = 0; c < g->ncols && st == SLUICE_OK; c++)
        st = pool_alloc(ctx, cs, &sorted[c], (size_t)n * sluice_type_size(g->types[c]),
                        "a stream-wide sort's output");
    if (st == SLUICE_OK) {
        cudaError_t e = (cudaError_t)sl_cuda_sort_run(&prepared, scratch, n, g->types,
                                                      (const void *const *)g->acc, sorted, cs->stream);
        if (e != cudaSuccess) st = cuda_status(ctx, e, "sorting the stream");
    }
    for (int64_t at = 0; st == SLUICE_OK && at < n; at += s->max_batch_rows) {
        int64_t len = n - at < s->max_batch_rows ? n - at : s->max_batch_rows;
        for (int c = 0; c < s->pipeline->ncolumns; c++) cs->cur[c] = NULL;
        for (int c = 0; c < g->ncols; c++)
            cs->cur[g->cols[c]] = (char *)sorted[c] + (size_t)at * sluice_type_size(g->types[c]);
        st = run_from(s, cs, gi + 1, len, -1);
    }
    /* Results are in emitted batches (copied out of `sorted`) once the stream gets here. */
    if (scratch) cudaFreeAsync(scratch, cs->stream);
    for (int c = 0; c < g->ncols; c++)
        if (sorted[c]) cudaFreeAsync(sorted[c], cs->stream);
    sl_free(ctx, sorted);
    if (st == SLUICE_OK) g->acc_pending = 0;
    return st;
}

static sluice_status cuda_push(sluice_session *s, const sl_input *in) {
    int prev = enter_device(s->impl);
    sluice_status st = push_impl(s, in);
    leave_device(s->impl, prev);
    return st;
}

static sluice_status flush_impl(sluice_session *s) {
    cuda_session *cs = s->impl;
    txn t = txn_begin(s, cs);
    sluice_status st = SLUICE_OK;
    for (int gi = 0; gi < cs->ngroups && st == SLUICE_OK; gi++)
        if (cs->groups[gi].kind == SL_GROUP_SORT && cs->groups[gi].per_stream)
            st = flush_sort(s, cs, gi);
    if (st == SLUICE_OK) {
        cudaError_t e = cudaStreamSynchronize(cs->stream);
        if (e != cudaSuccess) st = cuda_status(s->ctx, e, "flushing the stream");
    }
    return txn_end(s, cs, t, st);
}

static sluice_status cuda_flush(sluice_session *s) {
    int prev = enter_device(s->impl);
    sluice_status st = flush_impl(s);
    leave_device(s->impl, prev);
    return st;
}

static sluice_status reset_impl(sluice_session *s) {
    cuda_session *cs = s->impl;
    sluice_context *ctx = s->ctx;
    for (int gi = 0; gi < cs->ngroups; gi++) {
        group_state *g = &cs->groups[gi];
        g->acc_rows = g->acc_pending = 0;
        g->touched = false;
        if (g->kind == SL_GROUP_FUSED)
            CUDA_TRY(ctx, cudaMemcpyAsync(g->carry[g->live], sl_cuda_group_carry_identity(g->fused),
                                          g->layout->carry_bytes, cudaMemcpyHostToDevice, cs->stream),
                     "resetting a carry");
    }
    CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "resetting the session");
    return SLUICE_OK;
}

static sluice_status cuda_reset(sluice_session *s) {
    int prev = enter_device(s->impl);
    sluice_status st = reset_impl(s);
    leave_device(s->impl, prev);
    return st;
}

static const sl_backend_ops cuda_ops = {
    SLUICE_BACKEND_CUDA, "cuda", cuda_available, cuda_open, cuda_push, cuda_flush, cuda_reset,
    cuda_close,
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
    if (options) o = *options;
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
