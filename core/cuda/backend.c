/* backend.c — the CUDA backend's operations for the shared executor (core/runtime/exec.h), and the
 * public sluice_cuda.h: sessions on streams, device memory (scratch, column buffers,
 * carries) sized when a session opens and grown for a batch that cannot be cut, host
 * batches staged through a ring of pinned buffers on a copy stream, sorts through
 * core/cuda/sort.cu, result batches copied out or left on the device.
 *
 * How a piece runs. piece->cols[c] is the device pointer of pipeline column c's latest
 * version. Inputs point at the caller's device memory or at the session's input buffers
 * (host batches, copied in by `load`). Each plan group then runs on the session's stream: a
 * fused group (core/cuda/fused.h) reads the columns the plan lists and writes its own
 * buffers (or, as the last writer of an output column kept on the device, the result batch
 * in place); a sort moves the plan's columns. Rows only change at a compaction, whose kept
 * count is read back when the host needs it. A stream-wide sort at flush sorts the
 * executor's device buffer into temporaries from the session's pool, freed when the flush
 * settles.
 *
 * Batches in flight (core/runtime/exec.h, "Pieces in flight"). The session has `depth` lanes,
 * each a full set of per-batch buffers (inputs, group outputs, per-batch sorts' outputs) and
 * three events; piece seq uses lane seq % depth, free because the executor waited for piece
 * seq - depth. Host inputs are copied in on the `copy` stream (event `loaded`), groups run
 * on `stream` (event `computed` at the piece's end), host results go out on `copy_out`
 * (event `copied`), so batch i+1's copy in, batch i's kernels and batch i-1's copy out
 * overlap. Nothing waits on the host for a piece until `progress` asks: a compaction in the
 * last group leaves its kept-row count on the device, copied into the lane's pinned word
 * after the kernel, and the result batch holds room for every row until then; a pinned
 * result batch is copied into by DMA when its count is known (at once without a
 * compaction), a pageable one through the staging ring when the piece is complete. The
 * scratch is shared: kernels run one after another on `stream`.
 *
 * Transactions (core/runtime/session.h): every fused group has a ring of depth + 2 carries;
 * a call reads the committed one (generation gen) and writes generation gen + 1, and commit
 * advances gen, so a rollback has nothing to undo. The ring keeps the carries from before
 * every call still in flight: a failure found in flight goes back to one of them
 * (ops->restore). */
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "common/context.h"
#include "cuda/carry_bytes.h"
#include "cuda/codegen.h"
#include "cuda/fused.h"
#include "cuda/nvrtc.h"
#include "cuda/offsets_check.h"
#include "cuda/pinned.h"
#include "cuda/sort.h"
#include "runtime/carry.h"
#include "runtime/exec.h"
#include "sluice_cuda.h"

/* Pinned staging ring for pageable host batches: the CPU fills a slot while the copy engine
 * drains those filled before. Each chunk of a push costs a hand-off to the copier threads, a
 * DMA and an event, so slots are large (a 256 MiB batch is 8 chunks, not 32 of the 8 MB
 * slots before) and several, so the copying runs ahead of the DMA instead of waiting for the
 * slot it just filled. SLUICE_CUDA_STAGING_SLOTS and SLUICE_CUDA_STAGING_MB set them
 * (sluice_cuda.h, Environment); a session whose max_batch_rows is small gets smaller slots,
 * and a slot is pinned when first used, so sessions that never stage pin nothing. */
#define STAGING_MAX_SLOTS 16
#define STAGING_DEFAULT_SLOTS 4
#define STAGING_DEFAULT_MB 32

/* A piece whose last kernel writes its kept-row count into the lane's mapped word starts
 * with this there (count_unwritten): the kernel writes the count near its end, so while the
 * word still holds it the piece is certainly not complete, and a poll need not ask the
 * driver. Only for COUNT_WATCH_NS after the launch: a kernel that never gets that far (a
 * fault) is then found by the event, as every other piece's. */
#define COUNT_UNWRITTEN INT64_MIN
#define COUNT_WATCH_NS ((int64_t)1000000)

static int64_t clock_ns(void);

/* The smallest arena of zeroed scratch for fused runs (take_zeroed). */
#define ZEROED_MIN_BYTES ((size_t)4 << 20)

typedef struct group_state {
    sl_group_kind kind;
    /* fused */
    sl_cuda_group *fused;
    const sl_cuda_group_layout *layout;
    void **carry;      /* device, cs->ring of them; carry[gen % ring] holds the committed state */
    void *carry_spare; /* device: what a call's second and later runs write (carry_buffers) */
    int64_t gen;
    bool touched;      /* written in the current (uncommitted) call: generation gen + 1 */
    void **out_buf;    /* per lane and layout output ([lane * noutputs + i]): cap_rows rows */
    /* For carries read and seeded from outside (core/runtime/carry.h): per scan, what the
     * last carry_set gave (zeroed at open and reset), and whether rows reached the group
     * since, first in generation fed_gen (the device state keeps no row count). */
    sl_scan_carry *seeded;
    bool fed;
    int64_t fed_gen;
    /* sort */
    const sl_sort *sort;
    bool per_stream;
    int ncols;
    const int *cols;        /* the plan group's columns (keys included), moved together */
    sluice_type *types;
    sl_cuda_sort prepared;  /* per-batch sorts: sized for cap_rows */
    void **sort_out;        /* per lane and moved column: cap_rows rows (per-batch sorts) */
} group_state;

/* A lane: the buffers and events of one piece in flight (see the top of this file). The
 * flags below are cleared when the piece is complete or forgotten. */
typedef struct lane {
    int64_t seq;            /* the piece in flight here; -1: none */
    sluice_batch *batch;    /* its result batch (in the executor's queue), or NULL */
    int64_t *count;         /* pinned: [0] the kept-row count, [1] the fault word */
    void *dev_count;        /* device: the same two words */
    int64_t *count_mapped;  /* `count` as the device sees it (mapped), or NULL */
    bool count_pending;     /* the batch's rows become count[0] when computed */
    bool copy_pending;      /* host batch: copy out from src once computed */
    bool computed_recorded; /* `computed` already recorded for this piece (finish) */
    bool computed_seen;     /* `computed` completed (progress) */
    bool copy_issued;       /* the copy out was issued: complete at `copied` */
    bool pinned_out;        /* every column of the host batch is pinned: copied out by DMA */
    bool sized_late;        /* the host batch gets its columns when the count is known */
    bool device_input;      /* the piece reads the caller's device memory */
    bool fault_check;       /* the fault word is read back (sl_cuda_fault_at_piece) */
    bool count_watch;       /* count[0] held COUNT_UNWRITTEN at the launch (count_unwritten) */
    int64_t launched_ns;    /* ... and when (clock_ns) */
    const void **src;       /* per output: the device column the batch is copied from */
    cudaEvent_t loaded, computed, copied;
} lane;

typedef struct cuda_session {
    int device, arch;
    bool one_device;        /* the process sees no other device: enter_device has no work */
    cudaStream_t stream, copy, copy_out; /* compute, copies in, copies out */
    bool own_stream;
    cudaEvent_t slot_free[STAGING_MAX_SLOTS]; /* recorded after the last copy using the slot */
    void *pinned[STAGING_MAX_SLOTS];          /* allocated on first use (staging_slot) */
    int nslots;             /* slots in the ring */
    int next_slot;          /* the ring's next slot for a copy in */
    size_t staging_bytes;   /* per slot */
    int64_t *pinned_small;  /* counts read back: [0] kept rows, [1] verdict, [2] last offset */
    void *dev_small;        /* device: kept-row count and offsets verdict */
    void *scratch;
    size_t scratch_bytes;
    /* Fused runs' scratch, handed out zeroed (take_zeroed): slices in stream order, cleared
     * by one memset on the stream when the arena is used up, instead of one a run. */
    void *zeroed;
    size_t zeroed_bytes, zeroed_used;
    int64_t cap_rows;       /* rows the per-batch buffers hold: max_batch_rows, or more after
                               a batch that could not be cut */
    int depth;              /* lanes */
    int ring;               /* carries per fused group: depth + 2 */
    lane *lanes;
    int64_t seen_end;       /* one past the last piece ended (end_piece) */
    int64_t call_first;     /* the first piece of the current call */
    int64_t fault_piece;    /* sl_cuda_fault_at_piece; -1 */
    void **in_buf;          /* per lane and input ([lane * ninputs + i]): host batches' rows */
    int ngroups;
    group_state *groups;
    int *final_group;       /* per pipeline column: last group writing it, -1 none */
    int offsets_input;      /* pipeline column id of the offsets input, -1 none */
    int64_t offsets_cap;    /* entries in each lane's offsets buffer */
    cudaMemPool_t pool;     /* the context's (sl_cuda_device_pool): device outputs, stream-sort
                               buffers and flush temporaries */
    void **temps;           /* pool memory of the current call, freed when it settles */
    int ntemps, temps_cap;
    sl_cuda_copier *copier; /* threads of the staging copy (cuda/pinned.h) */
    bool direct_in;         /* a piece of this push read pinned caller memory by DMA, not
                               yet waited for (load_impl) */
    /* A device result block allocated after a launch for the next push's result batch, so
     * that the next push launches without a pool call first (take_spare, refill_spare):
     * spare_bytes its size, spare_want the size the last result asked for (0: none kept). */
    void *spare;
    size_t spare_bytes, spare_want;
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
static bool cuda_available(void) { return gpu_present() && sl_cuda_nvrtc_available(); }

/* ---- the session's device ---------------------------------------------------------------- */

/* Every call works on the device the session was opened on, whatever the calling thread's
 * current device is, and leaves the caller's choice as it was. In a process that sees one
 * device there is no other choice, so nothing is asked (a push and its pull made about ten
 * cudaGetDevice calls). */
static int enter_device(const cuda_session *cs) {
    if (cs->one_device) return -1;
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
        for (int i = 0; g->out_buf && g->layout && i < cs->depth * g->layout->noutputs; i++) {
            if (g->out_buf[i]) cudaFree(g->out_buf[i]);
            g->out_buf[i] = NULL;
        }
        for (int i = 0; g->sort_out && i < cs->depth * g->ncols; i++) {
            if (g->sort_out[i]) cudaFree(g->sort_out[i]);
            g->sort_out[i] = NULL;
        }
    }
    int nin = s->pipeline->ninputs;
    for (int i = 0; cs->in_buf && i < cs->depth * nin; i++) {
        if (i % nin == cs->offsets_input) continue; /* sized by segments, grown by load */
        if (cs->in_buf[i]) cudaFree(cs->in_buf[i]);
        cs->in_buf[i] = NULL;
    }
    if (cs->scratch) cudaFree(cs->scratch);
    cs->scratch = NULL;
    cs->scratch_bytes = 0;
    if (cs->zeroed) cudaFree(cs->zeroed);
    cs->zeroed = NULL;
    cs->zeroed_bytes = cs->zeroed_used = 0;
    (void)ctx;
}

static void free_group(sluice_context *ctx, cuda_session *cs, group_state *g) {
    if (g->fused) sl_cuda_group_free(ctx, g->fused);
    for (int i = 0; g->carry && i < cs->ring; i++)
        if (g->carry[i]) cudaFree(g->carry[i]);
    if (g->carry_spare) cudaFree(g->carry_spare);
    sl_free(ctx, g->carry);
    sl_free(ctx, g->seeded);
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
        if (cs->spare) cudaFreeAsync(cs->spare, cs->stream);
        cudaStreamSynchronize(cs->stream);
    }
    if (cs->copy) cudaStreamSynchronize(cs->copy);
    if (cs->copy_out) cudaStreamSynchronize(cs->copy_out);
    sl_cuda_copier_free(ctx, cs->copier);
    free_batch_buffers(s, cs);
    for (int i = 0; cs->groups && i < cs->ngroups; i++) free_group(ctx, cs, &cs->groups[i]);
    sl_free(ctx, cs->groups);
    if (cs->in_buf) {
        for (int i = 0; i < cs->depth * s->pipeline->ninputs; i++)
            if (cs->in_buf[i]) cudaFree(cs->in_buf[i]);
        sl_free(ctx, cs->in_buf);
    }
    for (int k = 0; cs->lanes && k < cs->depth; k++) {
        lane *L = &cs->lanes[k];
        if (L->loaded) cudaEventDestroy(L->loaded);
        if (L->computed) cudaEventDestroy(L->computed);
        if (L->copied) cudaEventDestroy(L->copied);
        sl_free(ctx, (void *)L->src);
    }
    if (cs->lanes && cs->lanes[0].count) cudaFreeHost(cs->lanes[0].count);
    sl_free(ctx, cs->lanes);
    sl_free(ctx, cs->temps);
    sl_free(ctx, cs->final_group);
    if (cs->dev_small) cudaFree(cs->dev_small);
    for (int i = 0; i < STAGING_MAX_SLOTS; i++) {
        if (cs->pinned[i]) cudaFreeHost(cs->pinned[i]);
        if (cs->slot_free[i]) cudaEventDestroy(cs->slot_free[i]);
    }
    if (cs->pinned_small) cudaFreeHost(cs->pinned_small);
    /* The pool is the context's (it outlives batches that outlive the session): give back
     * what this session freed and nothing holds. */
    if (cs->pool) cudaMemPoolTrimTo(cs->pool, 0);
    if (cs->copy) cudaStreamDestroy(cs->copy);
    if (cs->copy_out) cudaStreamDestroy(cs->copy_out);
    if (cs->own_stream && cs->stream) cudaStreamDestroy(cs->stream);
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
    /* Each key's own order; d->descending (every key) stays false. */
    for (int k = 0; k < d->nkeys; k++) d->key_descending[k] = g->sort->key_descending[k];
    d->bits_lo = g->sort->bits_lo;
    d->bits_hi = g->sort->bits_hi;
    return SLUICE_OK;
}

/* Allocates the per-batch buffers of every lane for `rows` rows: input buffers of host
 * batches, each fused group's outputs, each per-batch sort's outputs; and the scratch. */
static sluice_status alloc_batch_buffers(sluice_session *s, cuda_session *cs, int64_t rows) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    size_t n = (size_t)rows;
    for (int i = 0; i < cs->depth * p->ninputs; i++)
        if (i % p->ninputs != cs->offsets_input)
            SL_TRY(device_alloc(ctx, &cs->in_buf[i], n * type_size(p, i % p->ninputs),
                                "an input buffer"));
    size_t scratch = 256, fused_scratch = 0;
    for (int gi = 0; gi < cs->ngroups; gi++) {
        group_state *g = &cs->groups[gi];
        if (g->kind == SL_GROUP_FUSED) {
            int no = g->layout->noutputs;
            /* a reduce's batch may give one row more than it has (an empty batch's row) */
            size_t rows_out = g->layout->reduces ? n + 1 : n;
            for (int i = 0; i < cs->depth * no; i++)
                SL_TRY(device_alloc(ctx, &g->out_buf[i], rows_out * type_size(p, g->layout->outputs[i % no]),
                                    "a column buffer"));
            size_t need = sl_cuda_group_scratch_size(g->fused, rows);
            if (need > scratch) scratch = need;
            if (need > fused_scratch) fused_scratch = need;
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
        for (int c = 0; c < cs->depth * g->ncols; c++)
            SL_TRY(device_alloc(ctx, &g->sort_out[c], n * sluice_type_size(g->types[c % g->ncols]),
                                "a sorted column"));
    }
    SL_TRY(device_alloc(ctx, &cs->scratch, scratch, "scratch"));
    cs->scratch_bytes = scratch;
    if (fused_scratch > 0) {
        /* Room for at least 8 runs at the largest size between two clears (a 2^20-row run
         * of a one-look-back group needs a few kilobytes: hundreds fit). */
        size_t arena = ZEROED_MIN_BYTES;
        if (fused_scratch <= SIZE_MAX / 16 && 8 * (fused_scratch + 256) > arena)
            arena = 8 * (fused_scratch + 256);
        SL_TRY(device_alloc(ctx, &cs->zeroed, arena, "scratch"));
        CUDA_TRY(ctx, cudaMemsetAsync(cs->zeroed, 0, arena, cs->stream), "clearing scratch");
        cs->zeroed_bytes = arena;
        cs->zeroed_used = 0;
    }
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
        g->carry = sl_calloc(ctx, (size_t)cs->ring, sizeof *g->carry);
        if (!g->carry) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
        for (int i = 0; i < cs->ring; i++)
            SL_TRY(device_alloc(ctx, &g->carry[i], g->layout->carry_bytes, "a scan carry"));
        SL_TRY(device_alloc(ctx, &g->carry_spare, g->layout->carry_bytes, "a scan carry"));
        int nscans = 0;
        (void)sl_cuda_group_scan_carries(g->fused, &nscans);
        g->seeded = sl_calloc(ctx, (size_t)nscans + 1, sizeof *g->seeded);
        if (!g->seeded) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
        CUDA_TRY(ctx, cudaMemcpy(g->carry[0], sl_cuda_group_carry_identity(g->fused),
                                 g->layout->carry_bytes, cudaMemcpyHostToDevice),
                 "initialising a carry");
        g->out_buf = sl_calloc(ctx, (size_t)cs->depth * (size_t)g->layout->noutputs + 1,
                               sizeof *g->out_buf);
        if (!g->out_buf) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
        for (int i = 0; i < g->layout->noutputs; i++) cs->final_group[g->layout->outputs[i]] = gi;
        return SLUICE_OK;
    }
    g->sort = &p->stages[pg->first].sort;
    g->per_stream = !g->sort->per_batch;
    g->ncols = pg->nin; /* the plan's: the keys and every live column needed after it */
    g->cols = pg->in;
    g->types = sl_calloc(ctx, (size_t)g->ncols + 1, sizeof *g->types);
    g->sort_out = sl_calloc(ctx, (size_t)cs->depth * (size_t)g->ncols + 1, sizeof *g->sort_out);
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
    int ndevices = 0;
    CUDA_TRY(ctx, cudaGetDeviceCount(&ndevices), "counting the devices");
    int major = 0, minor = 0;
    CUDA_TRY(ctx, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cs->device),
             "reading the device's compute capability");
    CUDA_TRY(ctx, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cs->device),
             "reading the device's compute capability");
    cs->arch = major * 10 + minor;
    cs->one_device = ndevices == 1;
    CUDA_TRY(ctx, cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking), "creating a stream");
    cs->own_stream = true;
    /* Pinned memory is slow to allocate: small sessions get small slots. */
    cs->nslots = sl_cuda_env_int("SLUICE_CUDA_STAGING_SLOTS", 2, STAGING_MAX_SLOTS,
                                 STAGING_DEFAULT_SLOTS);
    size_t slot_mb = (size_t)sl_cuda_env_int("SLUICE_CUDA_STAGING_MB", 1, 1024, STAGING_DEFAULT_MB);
    cs->staging_bytes = (size_t)s->max_batch_rows * 8 + 4096;
    if (cs->staging_bytes > slot_mb << 20) cs->staging_bytes = slot_mb << 20;
    CUDA_TRY(ctx, cudaStreamCreateWithFlags(&cs->copy, cudaStreamNonBlocking), "creating a stream");
    CUDA_TRY(ctx, cudaStreamCreateWithFlags(&cs->copy_out, cudaStreamNonBlocking), "creating a stream");
    for (int i = 0; i < cs->nslots; i++)
        CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->slot_free[i], cudaEventDisableTiming), "creating an event");
    CUDA_TRY(ctx, cudaMallocHost((void **)&cs->pinned_small, 64), "allocating pinned memory");
    /* Per lane 64 bytes of device words (the kernel's count, the fault word); 256 more for
     * the offsets check's verdict (check_device_offsets). */
    SL_TRY(device_alloc(ctx, &cs->dev_small, 256 + 64 * (size_t)cs->depth, "counters"));
    cs->lanes = sl_calloc(ctx, (size_t)cs->depth, sizeof *cs->lanes);
    if (!cs->lanes) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    /* Mapped, so the last kernel of a piece writes its kept-row count straight into host
     * memory, with no copy queued after it (where mapping fails, a copy does it). */
    int64_t *words = NULL, *mapped = NULL;
    CUDA_TRY(ctx, cudaHostAlloc((void **)&words, 64 * (size_t)cs->depth, cudaHostAllocMapped),
             "allocating pinned memory");
    memset(words, 0, 64 * (size_t)cs->depth);
    if (cudaHostGetDevicePointer((void **)&mapped, words, 0) != cudaSuccess) {
        cudaGetLastError();
        mapped = NULL;
    }
    for (int k = 0; k < cs->depth; k++) {
        lane *L = &cs->lanes[k];
        L->seq = -1;
        L->count = words + 8 * k;
        L->dev_count = (char *)cs->dev_small + 256 + 64 * k;
        L->count_mapped = mapped ? mapped + 8 * k : NULL;
        L->src = sl_calloc(ctx, (size_t)p->noutputs + 1, sizeof *L->src);
        if (!L->src) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
        CUDA_TRY(ctx, cudaEventCreateWithFlags(&L->loaded, cudaEventDisableTiming), "creating an event");
        CUDA_TRY(ctx, cudaEventCreateWithFlags(&L->computed, cudaEventDisableTiming), "creating an event");
        CUDA_TRY(ctx, cudaEventCreateWithFlags(&L->copied, cudaEventDisableTiming), "creating an event");
    }

    SL_TRY(sl_cuda_device_pool(ctx, cs->device, &cs->pool));

    size_t ncol = (size_t)p->ncolumns + 1;
    cs->final_group = sl_calloc(ctx, ncol, sizeof *cs->final_group);
    cs->in_buf = sl_calloc(ctx, (size_t)cs->depth * (size_t)p->ninputs + 1, sizeof *cs->in_buf);
    cs->groups = sl_calloc(ctx, (size_t)s->plan.ngroups + 1, sizeof *cs->groups);
    if (!cs->final_group || !cs->in_buf || !cs->groups)
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    cs->ngroups = s->plan.ngroups;
    for (int c = 0; c < p->ncolumns; c++) cs->final_group[c] = -1;
    cs->offsets_input = s->plan.offsets_input;
    if (cs->offsets_input >= 0) {
        cs->offsets_cap = s->max_batch_rows + 1;
        for (int k = 0; k < cs->depth; k++)
            SL_TRY(device_alloc(ctx, &cs->in_buf[k * p->ninputs + cs->offsets_input],
                                (size_t)cs->offsets_cap * sizeof(int64_t), "the offsets buffer"));
    }
    for (int gi = 0; gi < cs->ngroups; gi++) SL_TRY(open_group(s, cs, gi));
    SL_TRY(alloc_batch_buffers(s, cs, s->max_batch_rows));
    CUDA_TRY(ctx, cudaDeviceSynchronize(), "opening a session");
    return SLUICE_OK;
}

static sluice_status cuda_open(sluice_session *s) {
    SL_TRY(sl_cuda_nvrtc_load(s->ctx));
    if (!gpu_present())
        return sl_error(s->ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA backend found no usable GPU (no driver or no device); use "
                        "backend cpu or auto");
    cuda_session *cs = sl_calloc(s->ctx, 1, sizeof *cs);
    if (!cs) return sl_error(s->ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a CUDA session");
    s->impl = cs;
    cs->depth = s->depth;
    cs->ring = s->depth + 2;
    cs->fault_piece = -1;
    sluice_status st = open_impl(s, cs);
    if (st != SLUICE_OK) cuda_close(s);
    return st;
}

/* A piece larger than the per-batch buffers (a batch that cannot be cut): waits for the
 * work still using them and allocates them again for `rows` rows. They stay that size. */
static sluice_status reserve_impl(sluice_session *s, cuda_session *cs, int64_t rows) {
    if (rows <= cs->cap_rows) return SLUICE_OK;
    /* The executor waited for every piece in flight; the streams too, to be sure. */
    CUDA_TRY(s->ctx, cudaStreamSynchronize(cs->stream), "growing the session's buffers");
    CUDA_TRY(s->ctx, cudaStreamSynchronize(cs->copy), "growing the session's buffers");
    CUDA_TRY(s->ctx, cudaStreamSynchronize(cs->copy_out), "growing the session's buffers");
    free_batch_buffers(s, cs);
    sluice_status st = alloc_batch_buffers(s, cs, rows);
    if (st != SLUICE_OK) {
        /* Back to the size the session opened with, so it stays usable. */
        free_batch_buffers(s, cs);
        if (alloc_batch_buffers(s, cs, s->max_batch_rows) != SLUICE_OK) cs->cap_rows = 0;
    }
    return st;
}

/* ---- result batches ---------------------------------------------------------------------- */

static void device_batch_free(void *ptr) { cudaFreeAsync(ptr, 0); }

/* Result blocks of at most this many bytes are kept one ahead (a larger result's pool call
 * is a small part of its push, and a spare would hold that much more device memory). */
#define SPARE_MAX_BYTES ((size_t)16 << 20)

/* The spare result block when it fits `bytes` without wasting more than half of it (it is
 * the caller's then), else NULL. Remembers `bytes` for refill_spare. */
static void *take_spare(cuda_session *cs, size_t bytes) {
    cs->spare_want = bytes <= SPARE_MAX_BYTES ? bytes : 0;
    if (!cs->spare || cs->spare_bytes < bytes || cs->spare_bytes / 2 > bytes) return NULL;
    void *block = cs->spare;
    cs->spare = NULL;
    return block;
}

/* After a launch, off the next push's path: a spare block of the size the last result
 * asked for, allocated on the session's stream (so any later work on it may use it). A
 * spare of another size is given back first. A failure only leaves no spare. */
static void refill_spare(cuda_session *cs) {
    if (cs->spare && cs->spare_bytes == cs->spare_want) return;
    if (cs->spare) cudaFreeAsync(cs->spare, cs->stream);
    cs->spare = NULL;
    if (cs->spare_want == 0) return;
    if (cudaMallocFromPoolAsync(&cs->spare, cs->spare_want, cs->pool, cs->stream) != cudaSuccess) {
        cudaGetLastError();
        cs->spare = NULL;
        return;
    }
    cs->spare_bytes = cs->spare_want;
}

/* A result batch of `cap` rows per output column in the session's pool (device outputs):
 * one allocation for all its columns (owned[0]; each column 256-byte aligned in it), so a
 * push and a free cost one pool call each, not one per column. Columns are written through
 * columns[i].data. */
static sluice_status device_batch_new(sluice_session *s, cuda_session *cs, int64_t cap,
                                      sluice_batch **out) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    *out = NULL;
    size_t total = 0;
    for (int i = 0; i < p->noutputs; i++) {
        size_t bytes = (size_t)cap * type_size(p, p->outputs[i]);
        if (bytes > SIZE_MAX / 2 - total)
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of device memory for a result batch "
                            "of %lld rows", (long long)cap);
        total += (bytes + 255) & ~(size_t)255;
    }
    sluice_batch *b = sl_batch_shell(ctx, p);
    if (!b) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory for a result batch");
    b->on_device = true;
    b->free_device = device_batch_free;
    if (b->ncolumns > 0 && (b->owned[0] = take_spare(cs, total)) == NULL) {
        sluice_status st = pool_alloc(ctx, cs, &b->owned[0], total, "a device result batch");
        if (st != SLUICE_OK) {
            sluice_batch_free(b);
            return st;
        }
    }
    size_t at = 0;
    for (size_t i = 0; i < b->ncolumns; i++) {
        b->columns[i].data = (char *)b->owned[0] + at;
        at += ((size_t)cap * sluice_type_size(b->columns[i].type) + 255) & ~(size_t)255;
    }
    *out = b;
    return SLUICE_OK;
}

/* ---- staging host memory through the pinned ring ---------------------------------------- */

static void issue_ready_copies(sluice_session *s, cuda_session *cs);

/* Staging slot k, pinned on its first use (SLUICE_ERR_NO_MEMORY when it cannot be). */
static sluice_status staging_slot(sluice_context *ctx, cuda_session *cs, int k) {
    if (cs->pinned[k]) return SLUICE_OK;
    cudaError_t e = cudaMallocHost(&cs->pinned[k], cs->staging_bytes);
    if (e == cudaSuccess) return SLUICE_OK;
    cs->pinned[k] = NULL;
    cudaGetLastError();
    return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "cannot pin %zu bytes of host memory for a staging "
                    "buffer (%s); lower SLUICE_CUDA_STAGING_MB or SLUICE_CUDA_STAGING_SLOTS",
                    cs->staging_bytes, cudaGetErrorString(e));
}

/* The DMA of a full staging slot k to dst, and the slot's event after it. */
static sluice_status stage_in_chunk(sluice_context *ctx, cuda_session *cs, void *dst, int k,
                                    size_t len) {
    CUDA_TRY(ctx, cudaMemcpyAsync(dst, cs->pinned[k], len, cudaMemcpyHostToDevice, cs->copy),
             "copying a batch to the device");
    CUDA_TRY(ctx, cudaEventRecord(cs->slot_free[k], cs->copy), "recording an event");
    return SLUICE_OK;
}

/* Copies `bytes` from host src to device dst on the copy stream: by DMA straight from src
 * when it lies in pinned memory of the context (cuda/pinned.h), else chunk by chunk through
 * the ring of pinned slots. Once chunk i is handed to the copier threads, the host issues
 * chunk i - 1's DMA (its slot is full) and sends results ready to go out
 * (issue_ready_copies) while they copy, then joins them: the copier fills the next slots
 * while the copy engine drains the full ones, and the threads do not wait for those CUDA
 * calls. The ring's position carries over from push to push, so a push's first chunk does
 * not wait for the slot the last push just filled. */
static sluice_status stage_in(sluice_session *s, cuda_session *cs, void *dst, const void *src,
                              size_t bytes) {
    sluice_context *ctx = s->ctx;
    if (sl_cuda_pinned_covers(ctx, src, bytes)) {
        CUDA_TRY(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cs->copy),
                 "copying a batch to the device");
        cs->direct_in = true;
        return SLUICE_OK;
    }
    size_t slot_bytes = cs->staging_bytes, prev_at = 0, prev_len = 0;
    int prev = -1; /* the slot filled last, its DMA not yet issued */
    for (size_t at = 0; at < bytes; at += slot_bytes) {
        size_t len = bytes - at < slot_bytes ? bytes - at : slot_bytes;
        int k = cs->next_slot;
        SL_TRY(staging_slot(ctx, cs, k));
        cs->next_slot = (k + 1) % cs->nslots;
        /* Slot k is free once its last DMA (nslots chunks ago) is done. */
        CUDA_TRY(ctx, cudaEventSynchronize(cs->slot_free[k]), "waiting for a staging buffer");
        sl_cuda_staging_start(ctx, &cs->copier, cs->pinned[k], (const char *)src + at, len, true);
        sluice_status st = SLUICE_OK;
        if (prev >= 0) st = stage_in_chunk(ctx, cs, (char *)dst + prev_at, prev, prev_len);
        if (st == SLUICE_OK) issue_ready_copies(s, cs);
        sl_cuda_staging_finish(cs->copier); /* before anything returns: src is the caller's */
        SL_TRY(st);
        prev = k;
        prev_at = at;
        prev_len = len;
    }
    if (prev >= 0) SL_TRY(stage_in_chunk(ctx, cs, (char *)dst + prev_at, prev, prev_len));
    return SLUICE_OK;
}

/* Issues chunk i of a copy out (stage_out) into slot i % nslots on the copy-out stream. */
static sluice_status stage_out_chunk(sluice_context *ctx, cuda_session *cs, const void *src,
                                     size_t bytes, size_t i) {
    size_t at = i * cs->staging_bytes;
    size_t len = bytes - at < cs->staging_bytes ? bytes - at : cs->staging_bytes;
    int k = (int)(i % (size_t)cs->nslots);
    SL_TRY(staging_slot(ctx, cs, k));
    /* The slot may still be read by a copy in on the other stream (stage_in). */
    CUDA_TRY(ctx, cudaStreamWaitEvent(cs->copy_out, cs->slot_free[k], 0), "ordering the result copy");
    CUDA_TRY(ctx, cudaMemcpyAsync(cs->pinned[k], (const char *)src + at, len, cudaMemcpyDeviceToHost,
                                  cs->copy_out), "copying results to the host");
    CUDA_TRY(ctx, cudaEventRecord(cs->slot_free[k], cs->copy_out), "recording an event");
    return SLUICE_OK;
}

/* Copies device src to pageable host dst through the pinned slots on the copy-out stream:
 * the DMA of the first nslots chunks is issued at once, and each slot, once the CPU has
 * emptied it, takes the chunk nslots further on, so the copy engine fills slots while the
 * copier empties others; complete on return. */
static sluice_status stage_out(sluice_context *ctx, cuda_session *cs, void *dst, const void *src,
                               size_t bytes) {
    size_t slot_bytes = cs->staging_bytes, nchunks = (bytes + slot_bytes - 1) / slot_bytes;
    size_t ahead = (size_t)cs->nslots;
    for (size_t i = 0; i < nchunks && i < ahead; i++) SL_TRY(stage_out_chunk(ctx, cs, src, bytes, i));
    for (size_t i = 0; i < nchunks; i++) {
        int k = (int)(i % ahead);
        size_t at = i * slot_bytes, len = bytes - at < slot_bytes ? bytes - at : slot_bytes;
        CUDA_TRY(ctx, cudaEventSynchronize(cs->slot_free[k]), "copying results");
        sl_cuda_staging_copy(ctx, &cs->copier, (char *)dst + at, cs->pinned[k], len, false);
        if (i + ahead < nchunks) SL_TRY(stage_out_chunk(ctx, cs, src, bytes, i + ahead));
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
 * column's last writer and outputs stay on the device, else `own`. A piece with no room
 * gives no rows: it gets no result batch, because the executor drops such a piece's batch at
 * once (emit), and that free (device_batch_free, on the legacy stream) would not be ordered
 * after the pool allocation still queued on the session's stream, which the stream-ordered
 * allocator does not allow. */
static sluice_status destination(sluice_session *s, cuda_session *cs, sl_piece *piece, int gi,
                                 int c, int64_t room, void *own, void **out) {
    *out = own;
    if (!s->outputs_on_device || cs->final_group[c] != gi || room <= 0) return SLUICE_OK;
    const sluice_pipeline *p = s->pipeline;
    for (int i = 0; i < p->noutputs; i++) {
        if (p->outputs[i] != c) continue;
        if (!piece->result) {
            SL_TRY(device_batch_new(s, cs, room, &piece->result));
            piece->room = room;
        }
        *out = (void *)piece->result->columns[i].data;
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

/* The carries of a fused group's next run: it reads the committed generation (the call's
 * first run) or what the call's last run wrote, and writes generation gen + 1. Never in place
 * (core/cuda/fused.h): a run after the first in a call (a batch cut into pieces, a flush after
 * a push) writes the group's spare buffer, which carry_written swaps into the ring. The
 * buffer it leaves as the spare is read by that run's kernel only, which every later kernel
 * on the stream waits for before it touches memory. */
static void carry_buffers(const cuda_session *cs, const group_state *g, const void **from, void **to) {
    void *next = g->carry[(g->gen + 1) % cs->ring];
    *from = g->touched ? next : g->carry[g->gen % cs->ring];
    *to = g->touched ? g->carry_spare : next;
}

/* After a run queued with carry_buffers' buffers: `to` holds generation gen + 1. */
static void carry_written(const cuda_session *cs, group_state *g, void *to) {
    void **next = &g->carry[(g->gen + 1) % cs->ring];
    if (to == *next) return;
    g->carry_spare = *next;
    *next = to;
}

/* `need` bytes of zeroed scratch for a fused run on the stream (*zeroed true), the next
 * slice of the arena: when the arena is used up, the part handed out since the last clear is
 * cleared by one memset queued on the stream, after every kernel that used it (the slices are
 * handed out and used in stream order, and never twice between clears). A need larger than
 * the arena (never, by its sizing) gets the shared scratch, cleared by the run itself. */
static sluice_status take_zeroed(sluice_context *ctx, cuda_session *cs, size_t need, void **out,
                                 bool *zeroed) {
    size_t n = (need + 255) & ~(size_t)255;
    *out = cs->scratch;
    *zeroed = false;
    if (!cs->zeroed || n < need || n > cs->zeroed_bytes) return SLUICE_OK;
    if (n > cs->zeroed_bytes - cs->zeroed_used) {
        CUDA_TRY(ctx, cudaMemsetAsync(cs->zeroed, 0, cs->zeroed_used, cs->stream), "clearing scratch");
        cs->zeroed_used = 0;
    }
    *out = (char *)cs->zeroed + cs->zeroed_used;
    cs->zeroed_used += n;
    *zeroed = true;
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
    /* A reduce gives at most a row per row, or per segment of an offsets input (empty ones
     * too), one per batch, or none before the flush: its result holds that many. */
    int64_t room = piece->rows;
    if (L->reduces) {
        room = sl_plan_rows_out(p, &s->plan, gi, piece->rows, piece->nsegments, false);
        if (room > cs->cap_rows + 1 && st == SLUICE_OK)
            st = sl_error(ctx, SLUICE_ERR_LIMIT,
                          "a batch of %lld rows in %lld segments gives more reduced rows than "
                          "the GPU session's buffers hold (%lld): push batches with fewer "
                          "empty segments or raise max_batch_rows",
                          (long long)piece->rows, (long long)piece->nsegments,
                          (long long)cs->cap_rows + 1);
    }
    for (int i = 0; st == SLUICE_OK && i < L->noutputs; i++)
        st = destination(s, cs, piece, gi, L->outputs[i], room,
                         g->out_buf[(piece->seq % cs->depth) * L->noutputs + i], &outp[i]);
    lane *ln = &cs->lanes[piece->seq % cs->depth];
    /* The last group's kept-row count waits until the piece is complete (written into the
     * lane's mapped host word); an earlier group's is read now, for the next group. */
    bool defer = L->compacts && gi + 1 == cs->ngroups;
    int64_t *out_rows = defer && ln->count_mapped && piece->rows > 0 ? ln->count_mapped
                                                                      : (int64_t *)ln->dev_count;
    if (out_rows == ln->count_mapped) {
        /* The lane's last piece is complete (the executor waited for it): nothing writes the
         * word until this piece's kernel does. */
        *(volatile int64_t *)&ln->count[0] = COUNT_UNWRITTEN;
        ln->count_watch = true;
        ln->launched_ns = clock_ns();
    }
    if (st == SLUICE_OK) {
        /* Generation gen + 1 of the carry, never in place (carry_buffers). */
        const void *from;
        void *to;
        carry_buffers(cs, g, &from, &to);
        void *scratch = cs->scratch;
        bool zeroed = false;
        size_t need = piece->rows > 0 ? sl_cuda_group_scratch_size(g->fused, piece->rows) : 0;
        if (need > 0) st = take_zeroed(ctx, cs, need, &scratch, &zeroed);
        sl_cuda_group_io io = {piece->rows, piece->nsegments, in, outp, s->params, from, to,
                               scratch, out_rows};
        if (st == SLUICE_OK)
            st = zeroed ? sl_cuda_group_run_zeroed(ctx, g->fused, cs->stream, &io)
                        : sl_cuda_group_run(ctx, g->fused, cs->stream, &io);
        if (st == SLUICE_OK) carry_written(cs, g, to);
        if (st == SLUICE_OK && piece->result) refill_spare(cs);
    }
    if (st == SLUICE_OK) {
        g->touched = true;
        if (piece->rows > 0 && !g->fed) {
            g->fed = true;
            g->fed_gen = g->gen + 1;
        }
        /* After a compaction rows have moved: only what the group wrote is valid. */
        if (L->compacts)
            for (int c = 0; c <= p->ncolumns; c++) piece->cols[c] = NULL;
        for (int i = 0; i < L->noutputs; i++) piece->cols[L->outputs[i]] = outp[i];
    }
    if (st == SLUICE_OK && L->compacts) {
        if (defer) {
            /* piece->rows becomes the room the result needs. */
            piece->rows = room;
            if (out_rows != ln->count_mapped) {
                cudaError_t e = cudaMemcpyAsync(ln->count, ln->dev_count, sizeof(int64_t),
                                                cudaMemcpyDeviceToHost, cs->stream);
                if (e != cudaSuccess) st = cuda_status(ctx, e, "reading a row count");
            }
            ln->count_pending = true;
        } else {
            st = read_count(ctx, cs, ln->dev_count, &piece->rows); /* the next group's rows */
        }
    }
    if (in != ins) sl_free(ctx, (void *)in);
    if (outp != outs) sl_free(ctx, outp);
    return st;
}

static bool reduce_held(const group_state *g);

/* At flush, a group ending in a reduce writes the segment it holds open (core/cuda/fused.h
 * sl_cuda_group_flush) into the lane's buffers, as run_fused would; its row count is read
 * at once (once per stream). The carry's next generation has the segment closed. Unless a
 * distributed session's seed said another part of the stream emits it (reduce_held): then
 * no rows and the carry as it was. */
static sluice_status flush_group_impl(sluice_session *s, cuda_session *cs, sl_piece *piece) {
    sluice_context *ctx = s->ctx;
    int gi = piece->group;
    group_state *g = &cs->groups[gi];
    const sl_cuda_group_layout *L = g->layout;
    if (g->kind != SL_GROUP_FUSED || !L->reduces)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: plan group %d holds no rows for the flush", gi);
    void *outs[64];
    void **outp = L->noutputs > 64 ? sl_calloc(ctx, (size_t)L->noutputs + 1, sizeof *outp) : outs;
    if (!outp) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory flushing a reduce");
    sluice_status st = SLUICE_OK;
    for (int i = 0; st == SLUICE_OK && i < L->noutputs; i++)
        st = destination(s, cs, piece, gi, L->outputs[i], 1,
                         g->out_buf[(piece->seq % cs->depth) * L->noutputs + i], &outp[i]);
    lane *ln = &cs->lanes[piece->seq % cs->depth];
    bool held = reduce_held(g);
    if (st == SLUICE_OK && !held) {
        const void *from;
        void *to;
        carry_buffers(cs, g, &from, &to);
        sl_cuda_group_io io = {0, -1, NULL, outp, s->params, from, to, cs->scratch,
                               (int64_t *)ln->dev_count};
        st = sl_cuda_group_flush(ctx, g->fused, cs->stream, &io);
        if (st == SLUICE_OK) carry_written(cs, g, to);
    }
    if (st == SLUICE_OK) {
        g->touched = g->touched || !held;
        for (int c = 0; c <= s->pipeline->ncolumns; c++) piece->cols[c] = NULL;
        for (int i = 0; i < L->noutputs; i++) piece->cols[L->outputs[i]] = outp[i];
        if (held) piece->rows = 0;
        else st = read_count(ctx, cs, ln->dev_count, &piece->rows);
    }
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
        void *own = g->per_stream ? NULL : g->sort_out[(piece->seq % cs->depth) * g->ncols + c];
        if (g->per_stream) {
            st = pool_alloc(ctx, cs, &own, (size_t)n * sluice_type_size(g->types[c]),
                            "a stream-wide sort's output");
            if (st == SLUICE_OK) st = keep_temp(s, cs, own);
        }
        /* In place in the result only when no groups follow: after a stream-wide sort they
         * run over pieces of the sorted rows, each with a result batch of its own. */
        if (st == SLUICE_OK && g->per_stream && gi + 1 < cs->ngroups) outp[c] = own;
        else if (st == SLUICE_OK) st = destination(s, cs, piece, gi, g->cols[c], piece->rows, own, &outp[c]);
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

/* Copies the piece's results in lane ln into its host batch: by DMA on the copy-out stream
 * into pinned columns (complete at `copied`), through the staging ring into pageable ones
 * (complete on return). The copy-out stream first waits for the piece's compute. */
static sluice_status copy_out(sluice_session *s, cuda_session *cs, lane *ln) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    sluice_batch *b = ln->batch;
    CUDA_TRY(ctx, cudaStreamWaitEvent(cs->copy_out, ln->computed, 0), "ordering the result copy");
    for (int i = 0; i < p->noutputs; i++) {
        size_t bytes = (size_t)b->rows * type_size(p, p->outputs[i]);
        if (bytes == 0) continue;
        if (sl_cuda_pinned_covers(ctx, b->owned[i], bytes))
            CUDA_TRY(ctx, cudaMemcpyAsync(b->owned[i], ln->src[i], bytes, cudaMemcpyDeviceToHost,
                                          cs->copy_out), "copying results to the host");
        else
            SL_TRY(stage_out(ctx, cs, b->owned[i], ln->src[i], bytes));
    }
    CUDA_TRY(ctx, cudaEventRecord(ln->copied, cs->copy_out), "recording an event");
    ln->copy_issued = true;
    return SLUICE_OK;
}

/* Whether lane ln's piece is certainly not complete without asking the driver: its kernel
 * has not written its kept-row count yet, and it was launched less than COUNT_WATCH_NS ago
 * (see COUNT_UNWRITTEN). Polls use it; waits never do. */
static bool count_unwritten(const lane *ln) {
    return ln->count_watch && ln->count_pending &&
           *(const volatile int64_t *)&ln->count[0] == COUNT_UNWRITTEN &&
           clock_ns() - ln->launched_ns < COUNT_WATCH_NS;
}

/* Sets a result batch's row count (the kept rows of a compaction, known late). */
static void set_rows(sluice_batch *b, int64_t rows) {
    b->rows = rows;
    for (size_t i = 0; i < b->ncolumns; i++) b->columns[i].length = rows;
}

/* Gives lane ln's host batch, made without room while its kept-row count was unknown,
 * columns of exactly `rows` rows: pinned from the pool (pageable when none is had), swapped
 * into the batch the executor already queued. False, with nothing changed and nothing
 * reported, when no memory is had. */
static bool size_late(sluice_session *s, lane *ln, int64_t rows) {
    const sluice_pipeline *p = s->pipeline;
    sluice_batch *b = ln->batch, *nb = rows > 0 ? sl_cuda_pinned_batch_new(s, rows) : NULL;
    if (!nb) nb = sl_batch_new_host(s->ctx, p, rows > 0 ? rows : 1);
    if (!nb) return false;
    /* Entry by entry: a batch's tables live in its own allocation (sl_batch_shell). Both
     * batches have the pipeline's outputs, so names and types already agree. */
    for (size_t i = 0; i < b->ncolumns; i++) {
        void *owned = b->owned[i];
        const void *data = b->columns[i].data;
        b->owned[i] = nb->owned[i];
        b->columns[i].data = nb->columns[i].data;
        nb->owned[i] = owned;
        nb->columns[i].data = data;
    }
    void (*free_host)(sluice_context *, void *) = b->free_host;
    b->free_host = nb->free_host;
    nb->free_host = free_host;
    sluice_batch_free(nb); /* the stand-in columns */
    set_rows(b, rows);
    bool pinned = true;
    for (int i = 0; i < p->noutputs; i++)
        pinned = pinned && sl_cuda_pinned_covers(s->ctx, b->owned[i],
                                                 (size_t)rows * type_size(p, p->outputs[i]));
    ln->pinned_out = pinned;
    ln->sized_late = false;
    return true;
}

/* Issues the copy out of every piece in flight whose kernels are done and whose pinned
 * batch waited for its kept-row count, without waiting for anything, so the copy engine
 * works while the host waits elsewhere (a push's own copy in). What cannot be issued now
 * (an error, a fault to check) is left as it was for progress_impl to handle and report;
 * this reports nothing. */
static void issue_ready_copies(sluice_session *s, cuda_session *cs) {
    const sluice_pipeline *p = s->pipeline;
    for (int k = 0; k < cs->depth; k++) {
        lane *ln = &cs->lanes[k];
        if (ln->seq < 0 || ln->computed_seen || !ln->copy_pending ||
            (!ln->pinned_out && !ln->sized_late) || !ln->batch || ln->fault_check ||
            count_unwritten(ln) || cudaEventQuery(ln->computed) != cudaSuccess)
            continue;
        sluice_batch *b = ln->batch;
        if (ln->sized_late && !size_late(s, ln, ln->count[0])) continue;
        if (!ln->pinned_out) continue; /* pageable after all: progress_impl stages it */
        if (ln->count_pending) set_rows(b, ln->count[0]);
        cudaError_t e = cudaStreamWaitEvent(cs->copy_out, ln->computed, 0);
        for (int i = 0; i < p->noutputs && e == cudaSuccess; i++) {
            size_t bytes = (size_t)b->rows * type_size(p, p->outputs[i]);
            if (bytes > 0)
                e = cudaMemcpyAsync(b->owned[i], ln->src[i], bytes, cudaMemcpyDeviceToHost,
                                    cs->copy_out);
        }
        if (e == cudaSuccess) e = cudaEventRecord(ln->copied, cs->copy_out);
        if (e != cudaSuccess) {
            /* Leave it to progress_impl, which copies again and reports what fails. */
            cudaGetLastError();
            continue;
        }
        ln->computed_seen = ln->copy_issued = true;
        ln->copy_pending = ln->count_pending = false;
    }
}

static sluice_status finish_impl(sluice_session *s, cuda_session *cs, sl_piece *piece,
                                 sluice_batch **out) {
    sluice_context *ctx = s->ctx;
    const sluice_pipeline *p = s->pipeline;
    lane *ln = &cs->lanes[piece->seq % cs->depth];
    int64_t rows = piece->rows; /* the room: the kept rows when count_pending */
    sluice_status st = SLUICE_OK;
    sluice_batch *b = piece->result;
    piece->result = NULL;
    /* Copies that must be complete when this returns: a flush's (its sorted rows are
     * temporaries freed when it settles) and a device input's (the caller's memory is free
     * once the session's stream is past the push, sluice_cuda.h). */
    bool now = cs->ntemps > 0 || (ln->device_input && !s->outputs_on_device);
    if (now && ln->count_pending) {
        CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "reading a row count");
        rows = ln->count[0];
        ln->count_pending = false;
    }
    if (s->outputs_on_device) {
        if (!b) SL_TRY(device_batch_new(s, cs, rows, &b));
        for (int i = 0; i < p->noutputs && st == SLUICE_OK; i++) {
            int c = p->outputs[i];
            size_t bytes = (size_t)rows * type_size(p, c);
            if (piece->cols[c] != b->columns[i].data) {
                cudaError_t e = cudaMemcpyAsync((void *)b->columns[i].data, piece->cols[c], bytes,
                                                cudaMemcpyDeviceToDevice, cs->stream);
                if (e != cudaSuccess) st = cuda_status(ctx, e, "writing a result column");
            }
        }
        if (st == SLUICE_OK) set_rows(b, rows);
    } else {
        /* Pinned from the context's pool (copied out by DMA); pageable when none is had. A
         * batch whose kept-row count is still on the device gets its columns when the count
         * is known (size_late), so it never holds room for rows a filter dropped. */
        ln->sized_late = ln->count_pending && !now;
        b = ln->sized_late ? NULL : sl_cuda_pinned_batch_new(s, rows);
        if (!b) b = sl_batch_new_host(ctx, p, ln->sized_late ? 1 : rows);
        if (!b) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory for a result batch of %lld rows",
                                (long long)rows);
        set_rows(b, ln->sized_late ? 0 : rows);
        for (int i = 0; i < p->noutputs; i++) ln->src[i] = piece->cols[p->outputs[i]];
        ln->batch = b;
        cudaError_t e = cudaEventRecord(ln->computed, cs->stream);
        if (e != cudaSuccess) st = cuda_status(ctx, e, "recording an event");
        ln->computed_recorded = true;
        bool pinned = !ln->sized_late;
        for (int i = 0; pinned && i < p->noutputs; i++)
            pinned = sl_cuda_pinned_covers(ctx, b->owned[i], (size_t)rows * type_size(p, p->outputs[i]));
        ln->pinned_out = pinned;
        if (st == SLUICE_OK && (now || (pinned && !ln->count_pending))) {
            st = copy_out(s, cs, ln); /* DMA issued now, ordered after the compute */
            if (st == SLUICE_OK && now) {
                e = cudaEventSynchronize(ln->copied);
                if (e != cudaSuccess) st = cuda_status(ctx, e, "copying results to the host");
            }
        } else {
            ln->copy_pending = true; /* when the piece is computed (progress_impl) */
        }
        ln->batch = NULL; /* end_piece records it */
    }
    if (st != SLUICE_OK) {
        sluice_batch_free(b);
        return st;
    }
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
    bool staged = false;
    int k = (int)(piece->seq % cs->depth);
    lane *ln = &cs->lanes[k];
    void **buf = &cs->in_buf[k * p->ninputs];
    ln->device_input = in->on_device;
    if (rows > cs->cap_rows) SL_TRY(reserve_impl(s, cs, rows));
    /* The lane's buffers are free: the executor waited for the piece that had them. */
    for (int i = 0; i < p->ninputs; i++) {
        size_t w = type_size(p, i);
        if (i == cs->offsets_input) {
            if (in->on_device) continue; /* piece->offsets: the caller's device offsets */
            int64_t count = piece->nsegments + 1;
            if (count > cs->offsets_cap) {
                /* Empty segments can outnumber rows: grow every lane's (rare, geometric;
                 * waits for the streams). */
                int64_t cap = 2 * count;
                CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "growing the offsets buffer");
                CUDA_TRY(ctx, cudaStreamSynchronize(cs->copy), "growing the offsets buffer");
                cs->offsets_cap = 0;
                for (int j = 0; j < cs->depth; j++) {
                    void **o = &cs->in_buf[j * p->ninputs + i];
                    cudaFree(*o);
                    *o = NULL;
                }
                for (int j = 0; j < cs->depth; j++)
                    SL_TRY(device_alloc(ctx, &cs->in_buf[j * p->ninputs + i], (size_t)cap * w,
                                        "the offsets buffer"));
                cs->offsets_cap = cap;
            }
            SL_TRY(stage_in(s, cs, buf[i], piece->offsets, (size_t)count * w));
            piece->offsets = buf[i];
            staged = true;
            continue;
        }
        const char *src = (const char *)in->data[i] + (size_t)first * w;
        if (in->on_device) {
            piece->cols[i] = src;
            continue;
        }
        SL_TRY(stage_in(s, cs, buf[i], src, (size_t)rows * w));
        piece->cols[i] = buf[i];
        staged = true;
    }
    if (staged) {
        CUDA_TRY(ctx, cudaEventRecord(ln->loaded, cs->copy), "recording an event");
        CUDA_TRY(ctx, cudaStreamWaitEvent(cs->stream, ln->loaded, 0), "ordering the input copy");
    }
    if (cs->direct_in && first + rows >= in->rows) {
        /* The caller may reuse pinned input once push returns (sluice_cuda.h): the push's
         * last piece waits for its DMA, and so for every earlier piece's (one copy stream,
         * in order). Earlier pieces of a push cut into pieces do not wait, so the copy
         * engine goes from one piece's copy in to the next without a gap for the host's
         * round trip (a rollback waits for what they left in flight: rollback_impl).
         * Earlier pieces' compute and copies out still run, and a copy out that waited for
         * a kept-row count is issued as soon as it can be, so it shares the bus with this
         * copy in. */
        cs->direct_in = false;
        for (;;) {
            cudaError_t e = cudaEventQuery(ln->loaded);
            if (e == cudaSuccess) break;
            if (e != cudaErrorNotReady) return cuda_status(ctx, e, "copying a batch to the device");
            issue_ready_copies(s, cs);
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
        }
    }
    return SLUICE_OK;
}

/* ---- transactions and reset ----------------------------------------------------------- */

static void begin_impl(cuda_session *cs) {
    for (int i = 0; i < cs->ngroups; i++) cs->groups[i].touched = false;
    cs->call_first = cs->seen_end;
}

static sluice_status settle_impl(sluice_session *s, cuda_session *cs) {
    cudaError_t e = cudaSuccess;
    if (cs->ntemps > 0) {
        /* A flush sorted into temporaries: free them after the work that reads them, and
         * wait for it, so a fault in it is this call's. */
        free_temps(cs);
        e = cudaStreamSynchronize(cs->stream);
    }
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(s->ctx, e, "running a batch");
    return SLUICE_OK;
}

static void commit_impl(cuda_session *cs) {
    for (int i = 0; i < cs->ngroups; i++) {
        group_state *g = &cs->groups[i];
        if (g->touched) g->gen++;
        g->touched = false;
    }
}

static void lane_clear(lane *L) {
    L->seq = -1;
    L->batch = NULL;
    L->count_pending = L->copy_pending = L->computed_recorded = false;
    L->computed_seen = L->copy_issued = L->device_input = L->fault_check = false;
    L->pinned_out = L->sized_late = L->count_watch = false;
}

/* Waits until the device no longer works for pieces from `first` on, and forgets them: the
 * executor frees their result batches next, which copies must not be writing into. */
static void forget_from(cuda_session *cs, int64_t first) {
    cudaStreamSynchronize(cs->stream);
    cudaStreamSynchronize(cs->copy);
    cudaStreamSynchronize(cs->copy_out);
    cudaGetLastError();
    for (int k = 0; k < cs->depth; k++) {
        lane *L = &cs->lanes[k];
        if (L->seq < 0 || L->seq < first) continue;
        lane_clear(L);
    }
}

/* After a rollback or restore: rows that reached a group only in generations undone no
 * longer count. */
static void unfeed(group_state *g) {
    if (g->fed && g->fed_gen > g->gen) g->fed = false;
}

static void rollback_impl(cuda_session *cs) {
    free_temps(cs);
    /* A push that failed between its pieces may leave DMA from the caller's pinned memory
     * in flight (load_impl): done before the call returns. */
    if (cs->direct_in) cudaStreamSynchronize(cs->copy);
    cs->direct_in = false;
    if (cs->seen_end > cs->call_first) forget_from(cs, cs->call_first);
    for (int i = 0; i < cs->ngroups; i++) {
        cs->groups[i].touched = false; /* generation gen stays */
        unfeed(&cs->groups[i]);
    }
}

/* ---- pieces in flight (core/runtime/session.h) ----------------------------------------- */

static void end_piece_impl(sluice_session *s, cuda_session *cs, const sl_piece *piece,
                           sluice_batch *batch) {
    lane *ln = &cs->lanes[piece->seq % cs->depth];
    cudaError_t e = cudaSuccess;
    ln->fault_check = piece->seq == cs->fault_piece;
    if (ln->fault_check) {
        /* The test hook: a word the device writes, read back as a device-side check's
         * verdict would be (sl_cuda_fault_at_piece). */
        e = cudaMemsetAsync((int64_t *)ln->dev_count + 1, 0xff, sizeof(int64_t), cs->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(ln->count + 1, (int64_t *)ln->dev_count + 1, sizeof(int64_t),
                                cudaMemcpyDeviceToHost, cs->stream);
        ln->computed_recorded = false;
    }
    if (e == cudaSuccess && !ln->computed_recorded) e = cudaEventRecord(ln->computed, cs->stream);
    /* A failure to record is found when the piece is waited for: the event then reports
     * the stream's state, or the record is redone below from a synchronised stream. */
    if (e != cudaSuccess) {
        cudaGetLastError();
        cudaStreamSynchronize(cs->stream);
        cudaEventRecord(ln->computed, cs->stream);
    }
    ln->seq = piece->seq;
    ln->batch = batch;
    ln->computed_recorded = false;
    if (!batch) ln->count_pending = ln->copy_pending = false;
    cs->seen_end = piece->seq + 1;
    (void)s;
}

static int64_t clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Waits for an event until deadline (clock_ns; < 0: as long as it takes); *ready whether it
 * completed. A CUDA error found is returned. */
static cudaError_t wait_event(cudaEvent_t ev, int64_t deadline, bool *ready) {
    *ready = false;
    if (deadline < 0) {
        cudaError_t e = cudaEventSynchronize(ev);
        *ready = e == cudaSuccess;
        return e;
    }
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) {
            *ready = true;
            return e;
        }
        if (e != cudaErrorNotReady) return e;
        if (deadline == 0 || clock_ns() >= deadline) return cudaSuccess; /* 0: only look */
        struct timespec pause = {0, 20000}; /* 20 us: a small batch's time on the GPU */
        nanosleep(&pause, NULL);
    }
}

/* Moves lane ln's piece on as far as it can by deadline; *complete when nothing of it is
 * left on the device and its batch is final. */
static sluice_status lane_advance(sluice_session *s, cuda_session *cs, lane *ln, int64_t deadline,
                                  bool *complete) {
    sluice_context *ctx = s->ctx;
    bool ready;
    *complete = false;
    if (!ln->computed_seen) {
        if (deadline == 0 && count_unwritten(ln)) return SLUICE_OK; /* a poll: not yet */
        cudaError_t e = wait_event(ln->computed, deadline, &ready);
        if (e != cudaSuccess) return cuda_status(ctx, e, "running a batch");
        if (!ready) return SLUICE_OK;
        ln->computed_seen = true;
        if (ln->fault_check && ln->count[1] != 0) {
            ln->count[1] = 0;
            return sl_error(ctx, SLUICE_ERR_CUDA, "a device-side check failed in piece %lld "
                            "(a fault injected for testing)", (long long)ln->seq);
        }
        if (ln->sized_late && ln->batch && !size_late(s, ln, ln->count[0]))
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory for a result batch of %lld "
                            "rows", (long long)ln->count[0]);
        if (ln->count_pending && ln->batch) set_rows(ln->batch, ln->count[0]);
        if (ln->copy_pending && ln->batch) {
            ln->copy_pending = false;
            SL_TRY(copy_out(s, cs, ln)); /* pageable: complete already; pinned: DMA issued */
        }
    }
    if (ln->copy_issued) {
        cudaError_t e = wait_event(ln->copied, deadline, &ready);
        if (e != cudaSuccess) return cuda_status(ctx, e, "copying results to the host");
        if (!ready) return SLUICE_OK;
    }
    lane_clear(ln);
    *complete = true;
    return SLUICE_OK;
}

static sluice_status progress_impl(sluice_session *s, cuda_session *cs, int64_t until,
                                   int64_t timeout_ns, int64_t *done) {
    /* A poll (timeout 0) reads no clock: deadline 0 is "only look" (wait_event). */
    int64_t deadline = timeout_ns <= 0 ? timeout_ns : clock_ns() + timeout_ns;
    int64_t seq = *done;
    for (; seq < cs->seen_end; seq++) {
        lane *ln = &cs->lanes[seq % cs->depth];
        if (ln->seq != seq) continue; /* forgotten by a rollback: nothing in flight */
        /* Up to `until` wait as told; past it only look, and only at a piece whose copy out
         * waits for its compute (looking issues it early): any other piece just issued is
         * found complete by a later poll, and a query now would cost host time for nothing
         * (the executor polls up to the pieces before its call, exec.c txn_end). */
        if (seq > until && !(ln->copy_pending && ln->batch)) break;
        bool complete;
        sluice_status st = lane_advance(s, cs, ln, seq <= until ? deadline : 0, &complete);
        if (st != SLUICE_OK) {
            forget_from(cs, seq);
            *done = seq;
            return st;
        }
        if (!complete) break;
    }
    *done = seq;
    return SLUICE_OK;
}

static size_t mark_bytes_impl(const sluice_session *s) {
    return (size_t)s->plan.ngroups * sizeof(int64_t);
}

static void mark_impl(cuda_session *cs, int64_t *gens) {
    for (int i = 0; i < cs->ngroups; i++) gens[i] = cs->groups[i].gen;
}

static void restore_impl(cuda_session *cs, const int64_t *gens) {
    for (int i = 0; i < cs->ngroups; i++) {
        cs->groups[i].gen = gens[i];
        cs->groups[i].touched = false;
        unfeed(&cs->groups[i]);
    }
}

static sluice_status reset_impl(sluice_session *s, cuda_session *cs) {
    sluice_context *ctx = s->ctx;
    for (int gi = 0; gi < cs->ngroups; gi++) {
        group_state *g = &cs->groups[gi];
        g->touched = false;
        g->fed = false;
        int nscans = 0;
        if (g->kind == SL_GROUP_FUSED) (void)sl_cuda_group_scan_carries(g->fused, &nscans);
        if (nscans > 0) memset(g->seeded, 0, (size_t)nscans * sizeof *g->seeded);
        if (g->kind == SL_GROUP_FUSED)
            CUDA_TRY(ctx, cudaMemcpyAsync(g->carry[g->gen % cs->ring], sl_cuda_group_carry_identity(g->fused),
                                          g->layout->carry_bytes, cudaMemcpyHostToDevice, cs->stream),
                     "resetting a carry");
    }
    CUDA_TRY(ctx, cudaStreamSynchronize(cs->stream), "resetting the session");
    return SLUICE_OK;
}

/* ---- carries seen from outside (core/runtime/carry.h) ------------------------------------ */

/* Whether group g's reduce holds its open segment at flush (the seed said another part of
 * the stream emits it: carry_bytes.h, sl_cuda_carry_held); the seeds are zero at open and
 * reset: not held. */
static bool reduce_held(const group_state *g) {
    int n = 0;
    const sl_cg_scan_carry *lay = g->fused ? sl_cuda_group_scan_carries(g->fused, &n) : NULL;
    return lay && sl_cuda_carry_held(lay, n, g->seeded);
}

/* Reads the committed carry once the work on the compute stream (every piece issued so far)
 * is done, and turns it into the records the CPU keeps (core/cuda/carry_bytes.c), with what
 * the device state does not hold from the last seed and whether rows entered the group
 * since. */
static sluice_status carry_get_impl(sluice_session *s, cuda_session *cs, int gi,
                                    sl_scan_carry *out) {
    sluice_context *ctx = s->ctx;
    group_state *g = &cs->groups[gi];
    int n = 0;
    const sl_cg_scan_carry *lay = sl_cuda_group_scan_carries(g->fused, &n);
    SL_TRY(sl_cuda_carry_check(ctx, s->pipeline, &s->plan, gi, lay, n));
    size_t bytes = g->layout->carry_bytes;
    unsigned char *host = sl_calloc(ctx, bytes, 1);
    if (!host) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory reading scan carries");
    cudaError_t e = cudaMemcpyAsync(host, g->carry[g->gen % cs->ring], bytes,
                                    cudaMemcpyDeviceToHost, cs->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cs->stream);
    if (e != cudaSuccess) {
        sl_free(ctx, host);
        return cuda_status(ctx, e, "reading scan carries");
    }
    bool fed = g->fed && g->gen >= g->fed_gen;
    sl_cuda_carry_decode(s->pipeline, &s->plan, gi, lay, n, host, g->seeded, fed, out);
    sl_free(ctx, host);
    return SLUICE_OK;
}

/* Writes the records into a fresh carry (the identity's bytes: the compaction's count
 * restarts every batch anyway) and makes it the committed generation; keeps them as the
 * seed carry_get and the flush read. */
static sluice_status carry_set_impl(sluice_session *s, cuda_session *cs, int gi,
                                    const sl_scan_carry *in) {
    sluice_context *ctx = s->ctx;
    group_state *g = &cs->groups[gi];
    int n = 0;
    const sl_cg_scan_carry *lay = sl_cuda_group_scan_carries(g->fused, &n);
    SL_TRY(sl_cuda_carry_check(ctx, s->pipeline, &s->plan, gi, lay, n));
    size_t bytes = g->layout->carry_bytes;
    unsigned char *host = sl_calloc(ctx, bytes, 1);
    if (!host) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory seeding scan carries");
    memcpy(host, sl_cuda_group_carry_identity(g->fused), bytes);
    sl_cuda_carry_encode(s->pipeline, &s->plan, gi, lay, n, in, host);
    /* Synchronous: the host buffer goes next, and the stream's earlier work (which wrote
     * the generation overwritten here) is done first. */
    cudaError_t e = cudaMemcpyAsync(g->carry[g->gen % cs->ring], host, bytes,
                                    cudaMemcpyHostToDevice, cs->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cs->stream);
    sl_free(ctx, host);
    if (e != cudaSuccess) return cuda_status(ctx, e, "seeding scan carries");
    memcpy(g->seeded, in, (size_t)n * sizeof *in);
    g->fed = false;
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
    /* The offsets buffer grows in load; a reduce over offsets gives a row per segment, so
     * its outputs (the per-batch buffers) must hold nsegments rows too. */
    bool reduces = false;
    for (int gi = 0; gi < s->plan.ngroups; gi++) reduces |= s->plan.groups[gi].reduces;
    if (reduces && nsegments > rows) rows = nsegments;
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

static sluice_status cuda_flush_group(sluice_session *s, sl_piece *piece) {
    ON_DEVICE(s, flush_group_impl(s, s->impl, piece));
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

static sluice_status cuda_progress(sluice_session *s, int64_t until, int64_t timeout_ns,
                                   int64_t *done) {
    ON_DEVICE(s, progress_impl(s, s->impl, until, timeout_ns, done));
}

static void cuda_end_piece(sluice_session *s, const sl_piece *piece, sluice_batch *batch) {
    int prev = enter_device(s->impl);
    end_piece_impl(s, s->impl, piece, batch);
    leave_device(s->impl, prev);
}

static void cuda_mark(sluice_session *s, void *out) { mark_impl(s->impl, out); }

static sluice_status cuda_carry_get(sluice_session *s, int gi, sl_scan_carry *out) {
    ON_DEVICE(s, carry_get_impl(s, s->impl, gi, out));
}

static sluice_status cuda_carry_set(sluice_session *s, int gi, const sl_scan_carry *in) {
    ON_DEVICE(s, carry_set_impl(s, s->impl, gi, in));
}

static void cuda_restore(sluice_session *s, const void *mark) { restore_impl(s->impl, mark); }

#ifndef SLUICE_CUDA_REDUCE
#define SLUICE_CUDA_REDUCE 1 /* the build option of that name (CMakeLists.txt) */
#endif

static const sl_backend_ops cuda_ops = {
    .id = SLUICE_BACKEND_CUDA,
    .name = "cuda",
    .available = cuda_available,
    /* .reduce: the one switch of the GPU reduce (core/cuda/codegen.c analyse_reduce), the
     * build option SLUICE_CUDA_REDUCE (CMakeLists.txt), on by default. Built with it off, a
     * reduce pipeline is refused here with a clear status and `auto` runs it on the CPU. */
    .caps = {.max_phases = SL_CG_MAX_PHASES, .one_offsets_per_group = true,
             .reduce = SLUICE_CUDA_REDUCE != 0},
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
    .flush_group = cuda_flush_group,
    .finish = cuda_finish,
    .begin = cuda_begin,
    .settle = cuda_settle,
    .commit = cuda_commit,
    .rollback = cuda_rollback,
    .reset = cuda_reset,
    .default_depth = 3,
    .progress = cuda_progress,
    .end_piece = cuda_end_piece,
    .mark_bytes = mark_bytes_impl,
    .mark = cuda_mark,
    .restore = cuda_restore,
    .carry_get = cuda_carry_get,
    .carry_set = cuda_carry_set,
};

const sl_backend_ops *sl_cuda_backend(void) { return &cuda_ops; }

void sl_cuda_fault_at_piece(sluice_session *s, int64_t seq) {
    if (s && s->backend == &cuda_ops && s->impl) ((cuda_session *)s->impl)->fault_piece = seq;
}

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
    else if (options && options->version == 2) /* ... a version 2 one before pipeline_depth */
        memcpy(&o, options, offsetof(sluice_session_options, pipeline_depth));
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
