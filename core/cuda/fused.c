/* fused.c — a fused plan group on the GPU: generate its kernel, get the cubin through the
 * kernel cache, load it with the runtime's library API (cudaLibraryLoadData, so the library
 * never links libcuda itself), and launch it per batch. Contract in fused.h. */
#include "cuda/fused.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "../../kernels/sl_scratch.h"
#include "cuda/codegen.h"
#include "cuda/kcache.h"

struct sl_cuda_group {
    sl_codegen cg;
    sl_cuda_group_layout layout;
    cudaLibrary_t library;
    cudaKernel_t kernel, segindex, close, empties; /* close, empties: a reduce's (codegen.h) */
    cudaKernel_t small; /* SL_CG_SMALL_KERNEL, when the group has one (codegen.h) */
    unsigned max_grid;  /* blocks of the persistent kernel that fit on the device at once */
    unsigned max_grid_small;
    bool programmatic;  /* sm_90+: launched with programmatic stream serialization (below) */
};

/* ---- prepare ------------------------------------------------------------------------- */

static sluice_status cuda_failure(sluice_context *ctx, cudaError_t e, const char *what) {
    return sl_error(ctx, e == cudaErrorMemoryAllocation ? SLUICE_ERR_NO_MEMORY : SLUICE_ERR_CUDA,
                    "%s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The kernel is persistent: its grid is what resides on the device at once (more blocks
 * would only queue behind the first wave; fewer would leave SMs idle). Asks for the dynamic
 * shared memory of its input stages. */
static sluice_status size_grid(sluice_context *ctx, sl_cuda_group *g, cudaKernel_t kernel,
                               unsigned *max_grid) {
    const void *k = (const void *)kernel;
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)g->cg.dynamic_smem);
    int device = 0, sms = 0, per_sm = 0;
    if (e == cudaSuccess) e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, g->cg.block_threads,
                                                          g->cg.dynamic_smem);
    if (e != cudaSuccess) return cuda_failure(ctx, e, "sizing a generated kernel's grid");
    if (per_sm < 1)
        return sl_error(ctx, SLUICE_ERR_CUDA,
                        "a generated kernel (%d threads, %zu bytes of shared memory) cannot run "
                        "on this GPU: no block fits on a multiprocessor",
                        g->cg.block_threads, g->cg.dynamic_smem);
    *max_grid = (unsigned)per_sm * (unsigned)sms;
    return SLUICE_OK;
}

sluice_status sl_cuda_group_prepare(sluice_context *ctx, const sluice_pipeline *p,
                                    const sl_plan *plan, int group, int arch,
                                    sl_cuda_group **out) {
    *out = NULL;
    sl_cuda_group *g = sl_calloc(ctx, 1, sizeof *g);
    if (!g) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory preparing a GPU kernel");
    sluice_status st = sl_cuda_codegen(ctx, p, plan, group, arch, &g->cg);
    void *cubin = NULL;
    size_t size = 0;
    if (st == SLUICE_OK) {
        char name[64];
        snprintf(name, sizeof name, "sluice_group%d.cu", group);
        st = sl_cuda_kcache_get(ctx, g->cg.source, name, arch, g->cg.fit_blocks,
                                g->cg.fit_spill_bytes, &cubin, &size, NULL);
    }
    if (st == SLUICE_OK) {
        cudaError_t e = cudaLibraryLoadData(&g->library, cubin, NULL, NULL, 0, NULL, NULL, 0);
        if (e != cudaSuccess) {
            st = cuda_failure(ctx, e, "loading a generated kernel (cudaLibraryLoadData)");
        } else {
            e = cudaLibraryGetKernel(&g->kernel, g->library, SL_CG_KERNEL);
            if (e == cudaSuccess && g->cg.small_kernel)
                e = cudaLibraryGetKernel(&g->small, g->library, SL_CG_SMALL_KERNEL);
            if (e == cudaSuccess && g->cg.has_offsets)
                e = cudaLibraryGetKernel(&g->segindex, g->library, SL_CG_SEGINDEX_KERNEL);
            if (e == cudaSuccess && g->cg.reduces)
                e = cudaLibraryGetKernel(&g->close, g->library, SL_CG_CLOSE_KERNEL);
            if (e == cudaSuccess && g->cg.reduce_offsets)
                e = cudaLibraryGetKernel(&g->empties, g->library, SL_CG_EMPTIES_KERNEL);
            if (e != cudaSuccess) {
                st = cuda_failure(ctx, e, "finding a generated kernel (cudaLibraryGetKernel)");
                cudaLibraryUnload(g->library);
                g->library = NULL;
            }
        }
    }
    sl_free(ctx, cubin);
    if (st == SLUICE_OK) st = size_grid(ctx, g, g->kernel, &g->max_grid);
    if (st == SLUICE_OK && g->small) st = size_grid(ctx, g, g->small, &g->max_grid_small);
    g->programmatic = arch >= 90;
    if (st != SLUICE_OK) {
        if (g->library) cudaLibraryUnload(g->library);
        sl_cuda_codegen_free(ctx, &g->cg);
        sl_free(ctx, g);
        return st;
    }
    g->layout = (sl_cuda_group_layout){
        .ninputs = g->cg.ninputs, .inputs = g->cg.inputs,
        .noutputs = g->cg.noutputs, .outputs = g->cg.outputs,
        .npassthrough = g->cg.npassthrough, .passthrough = g->cg.passthrough,
        .compacts = g->cg.compacts, .reduces = g->cg.reduces, .carry_bytes = g->cg.carry_bytes,
        .phases = g->cg.phases};
    *out = g;
    return SLUICE_OK;
}

void sl_cuda_group_free(sluice_context *ctx, sl_cuda_group *g) {
    if (!g) return;
    if (g->library) cudaLibraryUnload(g->library);
    sl_cuda_codegen_free(ctx, &g->cg);
    sl_free(ctx, g);
}

const sl_cuda_group_layout *sl_cuda_group_layout_of(const sl_cuda_group *g) { return &g->layout; }

const void *sl_cuda_group_carry_identity(const sl_cuda_group *g) { return g->cg.carry_identity; }

const sl_cg_scan_carry *sl_cuda_group_scan_carries(const sl_cuda_group *g, int *count) {
    *count = g->cg.nscans;
    return g->cg.scan_carry;
}

size_t sl_cuda_group_scratch_size(const sl_cuda_group *g, int64_t rows) {
    return sl_cuda_codegen_scratch_size(&g->cg, rows);
}

/* ---- run ----------------------------------------------------------------------------- */

/* The argument block (layout in codegen.h; at most 4096 bytes, checked by codegen) of a run
 * over io with `ntiles` tiles (the close kernel's flush mode: -1). */
static void fill_args(const sl_codegen *c, const sl_cuda_group_io *io, int64_t ntiles,
                      uint64_t *slots) {
    memset(slots, 0, c->arg_slots * sizeof slots[0]);
    slots[0] = (uint64_t)io->rows;
    slots[1] = (uint64_t)io->nsegments;
    slots[2] = (uint64_t)ntiles;
    slots[3] = (uint64_t)(uintptr_t)io->scratch;
    slots[4] = (uint64_t)(uintptr_t)io->carry_in;
    slots[5] = (uint64_t)(uintptr_t)io->carry_out;
    slots[6] = (uint64_t)(uintptr_t)io->out_rows;
    size_t at = SL_CG_FIXED_SLOTS;
    for (int k = 0; k < c->ninputs; k++)
        slots[at + (size_t)k] = io->inputs ? (uint64_t)(uintptr_t)io->inputs[k] : 0;
    at += (size_t)(c->ninputs ? c->ninputs : 1);
    for (int k = 0; k < c->noutputs; k++)
        slots[at + (size_t)k] = io->outputs ? (uint64_t)(uintptr_t)io->outputs[k] : 0;
    at += (size_t)(c->noutputs ? c->noutputs : 1);
    for (int k = 0; k < c->nparams; k++)
        sl_value_store(io->params[k].type, &slots[at + (size_t)k], 0, io->params[k]);
}

/* The carry is never updated in place (fused.h): a block may read carry_in after the batch's
 * last tile has written carry_out. */
static sluice_status check_carries(sluice_context *ctx, const sl_cuda_group_io *io) {
    if (io->carry_out != io->carry_in) return SLUICE_OK;
    return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                    "internal: a fused GPU group was given one buffer as its carry in and out");
}

/* A reduce's outputs are written by the close kernel even for an empty batch. */
static sluice_status check_outputs(sluice_context *ctx, const sl_codegen *c,
                                   const sl_cuda_group_io *io) {
    for (int k = 0; k < c->noutputs; k++)
        if (!io->outputs || !io->outputs[k])
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                            "internal: output %d of a fused GPU group is NULL", k);
    return SLUICE_OK;
}

static sluice_status launch_close(sluice_context *ctx, const sl_cuda_group *g, cudaStream_t stream,
                                  const sl_cuda_group_io *io, bool flush) {
    const sl_codegen *c = &g->cg;
    if (c->reduce_offsets && !flush && (!io->inputs || !io->inputs[c->offsets_input]))
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a reduce over offsets was run without its offsets");
    uint64_t slots[512];
    fill_args(c, io, flush ? -1 : sl_cuda_codegen_tiles(c, io->rows), slots);
    void *args[1] = {slots};
    cudaError_t e = cudaSuccess;
    if (c->reduce_offsets && !flush && io->nsegments > 0) {
        /* the empty segments' rows, a thread per segment up to a grid the device holds */
        int64_t blocks = (io->nsegments + SL_CG_CLOSE_THREADS - 1) / SL_CG_CLOSE_THREADS;
        if (blocks > 8192) blocks = 8192;
        e = cudaLaunchKernel((const void *)g->empties, (dim3){(unsigned)blocks, 1, 1},
                             (dim3){SL_CG_CLOSE_THREADS, 1, 1}, args, 0, stream);
        if (e != cudaSuccess) return cuda_failure(ctx, e, "launching a reduce's empty-segments kernel");
    }
    e = cudaLaunchKernel((const void *)g->close, (dim3){1, 1, 1},
                         (dim3){SL_CG_CLOSE_THREADS, 1, 1}, args, 0, stream);
    return e == cudaSuccess ? SLUICE_OK : cuda_failure(ctx, e, "launching a reduce's close kernel");
}

sluice_status sl_cuda_group_flush(sluice_context *ctx, const sl_cuda_group *g, void *stream_ptr,
                                  const sl_cuda_group_io *io) {
    cudaStream_t stream = (cudaStream_t)stream_ptr;
    const sl_codegen *c = &g->cg;
    if (!c->reduces)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a GPU group without a reduce was asked to flush");
    if (!io || !io->carry_in || !io->carry_out || !io->out_rows || (c->nparams > 0 && !io->params))
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a reduce was flushed without the buffers its layout needs");
    SL_TRY(check_carries(ctx, io));
    SL_TRY(check_outputs(ctx, c, io));
    cudaError_t e = cudaMemcpyAsync(io->carry_out, io->carry_in, c->carry_bytes,
                                    cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return cuda_failure(ctx, e, "a reduce's carry copy at flush");
    return launch_close(ctx, g, stream, io, true);
}

/* The fused kernel on `stream`. On sm_90+ with programmatic stream serialization: the launch
 * may begin while the kernel ahead of it on the stream still runs, and its blocks start on
 * the multiprocessors that kernel's finished blocks leave; the kernel waits for the work
 * ahead before it touches memory (kernels/sl_device.cuh, wait_for_stream_and_release_next),
 * so the order of everything it reads and writes is the stream's. Back to back, a 2^20-row
 * map piece took 5.8 us without it and 4.4 us with it (H200; bench/RESULTS.md, sixteenth
 * session). */
static cudaError_t launch_fused(const sl_cuda_group *g, cudaKernel_t kernel, unsigned grid,
                                void **args, cudaStream_t stream) {
    cudaLaunchAttribute attr = {.id = cudaLaunchAttributeProgrammaticStreamSerialization,
                                .val.programmaticStreamSerializationAllowed = 1};
    cudaLaunchConfig_t config = {.gridDim = {grid, 1, 1},
                                 .blockDim = {(unsigned)g->cg.block_threads, 1, 1},
                                 .dynamicSmemBytes = g->cg.dynamic_smem,
                                 .stream = stream,
                                 .attrs = g->programmatic ? &attr : NULL,
                                 .numAttrs = g->programmatic ? 1 : 0};
    return cudaLaunchKernelExC(&config, (const void *)kernel, args);
}

static sluice_status group_run(sluice_context *ctx, const sl_cuda_group *g, void *stream_ptr,
                               const sl_cuda_group_io *io, bool zeroed) {
    cudaStream_t stream = (cudaStream_t)stream_ptr;
    const sl_codegen *c = &g->cg;
    if (!io || io->rows < 0 || !io->carry_in || !io->carry_out || (c->compacts && !io->out_rows) ||
        (c->nparams > 0 && !io->params) || (c->has_offsets && io->nsegments < 0))
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a fused GPU group was run without the buffers its layout needs");
    cudaError_t e = cudaSuccess;
    SL_TRY(check_carries(ctx, io));
    if (c->reduces) SL_TRY(check_outputs(ctx, c, io));
    if (io->rows == 0) {
        e = cudaMemcpyAsync(io->carry_out, io->carry_in, c->carry_bytes, cudaMemcpyDeviceToDevice,
                            stream);
        if (e == cudaSuccess && c->compacts) e = cudaMemsetAsync(io->out_rows, 0, sizeof(int64_t), stream);
        if (e != cudaSuccess) return cuda_failure(ctx, e, "an empty batch's carry copy");
        /* a reduce still closes the batch: identities of its empty segments, its row */
        return c->reduces ? launch_close(ctx, g, stream, io, false) : SLUICE_OK;
    }
    for (int k = 0; k < c->ninputs; k++)
        if (!io->inputs || !io->inputs[k])
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                            "internal: input %d of a fused GPU group is NULL", k);
    for (int k = 0; k < c->noutputs; k++)
        if (!io->outputs || !io->outputs[k])
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                            "internal: output %d of a fused GPU group is NULL", k);
    int64_t ntiles = sl_cuda_codegen_tiles(c, io->rows);
    if (ntiles > 0x7fffffffLL)
        return sl_error(ctx, SLUICE_ERR_LIMIT,
                        "a batch of %lld rows needs more GPU tiles than one launch holds; push "
                        "smaller batches",
                        (long long)io->rows);
    size_t scratch_bytes = sl_cuda_codegen_scratch_size(c, io->rows);
    if (scratch_bytes > 0 && !io->scratch)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "internal: a fused GPU group was run without scratch");

    uint64_t slots[512];
    fill_args(c, io, ntiles, slots);
    void *args[1] = {slots};

    if (scratch_bytes > 0 && !zeroed) e = cudaMemsetAsync(io->scratch, 0, scratch_bytes, stream);
    if (e != cudaSuccess) return cuda_failure(ctx, e, "clearing a fused kernel's scratch");
    if (c->has_offsets) {
        unsigned threads = 256;
        unsigned blocks = (unsigned)((ntiles + 1 + threads - 1) / threads);
        e = cudaLaunchKernel((const void *)g->segindex, (dim3){blocks, 1, 1}, (dim3){threads, 1, 1}, args, 0, stream);
        if (e != cudaSuccess) return cuda_failure(ctx, e, "launching the segment index kernel");
    }
    /* a batch of at most two waves of tiles: the kernel with the block-wide first look-back */
    const bool small = g->small && ntiles <= 2 * (int64_t)g->max_grid_small;
    const unsigned max_grid = small ? g->max_grid_small : g->max_grid;
    unsigned grid = ntiles < (int64_t)max_grid ? (unsigned)ntiles : max_grid;
    e = launch_fused(g, small ? g->small : g->kernel, grid, args, stream);
    if (e != cudaSuccess) return cuda_failure(ctx, e, "launching a fused kernel");
    return c->reduces && !c->closes_in_kernel ? launch_close(ctx, g, stream, io, false) : SLUICE_OK;
}

sluice_status sl_cuda_group_run(sluice_context *ctx, const sl_cuda_group *g, void *stream,
                                const sl_cuda_group_io *io) {
    return group_run(ctx, g, stream, io, false);
}

sluice_status sl_cuda_group_run_zeroed(sluice_context *ctx, const sl_cuda_group *g, void *stream,
                                       const sl_cuda_group_io *io) {
    return group_run(ctx, g, stream, io, true);
}
