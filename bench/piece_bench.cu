// piece_bench.cu — issue 11's small batches taken apart: the GPU time of one device-resident
// piece of a pipeline by its size, with the host out of the way, beside the floors no piece
// goes under on the same GPU: an empty kernel of a piece's grid, a copy kernel over the same
// bytes, and the same launches with programmatic dependent launch (PDL, as sluice's fused
// kernels are launched on sm_90+: core/cuda/fused.c).
//
//   piece_bench [LOG2_FROM=16] [LOG2_TO=22] [PIECES=48]
//
// A piece's time: PIECES pushes (sluice_cuda_session_push_device, device outputs, depth 64)
// queued behind a gate (a host function holding the session's stream until every push is
// queued), events around them; the median over five rounds of the elapsed time / PIECES.
// So it is what the GPU spends on a piece, launches and gaps included, and nothing of the
// host's push. A benchmark, not a test: the GPU suites check the results (stream_bench also
// checks its streams' rows). Run with SLUICE_CACHE_DIR set so that kernels compile once.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "cuda_check.h"
#include "sluice.h"
#include "sluice_cuda.h"

// ---- the gate and the timing -------------------------------------------------------------

// A host function queued on the stream spins until released, so the launches queued meanwhile
// run back to back. It lets itself go after 5 s (should the host ever wait on the stream while
// holding it: the figure is then void, not a hang).
static int g_gate;
static void CUDART_CB gate_hold(void *) {
    const double until = now_ms() + 5000;
    while (!__atomic_load_n(&g_gate, __ATOMIC_ACQUIRE) && now_ms() < until) {
    }
}

// Microseconds a call of `queue(k)` takes on the GPU: n of them behind the gate, median of 5.
template <class F> static double gated_us(cudaStream_t s, int n, F queue) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double t[5];
    for (int r = 0; r < 5; r++) {
        __atomic_store_n(&g_gate, 0, __ATOMIC_RELEASE);
        CK(cudaLaunchHostFunc(s, gate_hold, nullptr));
        CK(cudaEventRecord(a, s));
        for (int k = 0; k < n; k++) queue(k);
        CK(cudaEventRecord(b, s));
        __atomic_store_n(&g_gate, 1, __ATOMIC_RELEASE);
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[r] = ms * 1e3 / n;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return bench_median(t, 5);
}

// ---- floors ------------------------------------------------------------------------------

// The kernels a piece cannot beat: nothing, a wait for the stream (as a fused kernel starts),
// a spin of `cycles`, and a vectorised copy.
__global__ void empty_kernel(int *never) {
    if (never && threadIdx.x == 1u << 30) *never = 1;
}
__global__ void waiting_kernel(long long cycles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
__global__ void copy_kernel(const float4 *in, float4 *out, long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = in[i];
}

static void launch_waiting(cudaStream_t s, int grid, long long cycles, bool pdl) {
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)grid);
    config.blockDim = dim3(256);
    config.stream = s;
    config.attrs = pdl ? &attr : nullptr;
    config.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&config, waiting_kernel, cycles));
}

static void floors(int lg_from, int lg_to, int n) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int sms = 0, major = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    printf("floors, each of %d queued back to back (us a launch):\n", n);
    for (int grid : {1, 128, 512, 2 * sms})
        printf("  empty kernel, %4d blocks of 256: %.2f\n", grid,
               gated_us(s, n, [&](int) { empty_kernel<<<grid, 256, 0, s>>>(nullptr); }));
    void *word;
    CK(cudaMalloc(&word, 256));
    printf("  8-byte memset: %.2f\n", gated_us(s, n, [&](int) { CK(cudaMemsetAsync(word, 0, 8, s)); }));
    if (major >= 9) {
        cudaEvent_t ev;
        CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        for (long long cycles : {0LL, 4000LL})
            for (int grid : {128, 512}) {
                const double plain = gated_us(s, n, [&](int) { launch_waiting(s, grid, cycles, false); });
                const double pdl = gated_us(s, n, [&](int) { launch_waiting(s, grid, cycles, true); });
                const double pdl_event = gated_us(s, n, [&](int) {
                    launch_waiting(s, grid, cycles, true);
                    CK(cudaEventRecord(ev, s));
                });
                const double memset_pdl = gated_us(s, n, [&](int) {
                    CK(cudaMemsetAsync(word, 0, 8, s));
                    launch_waiting(s, grid, cycles, true);
                });
                printf("  kernel of %3d blocks spinning %4lld cycles: %.2f, with PDL %.2f, with PDL "
                       "and an event record after each %.2f, a memset and a PDL launch %.2f\n",
                       grid, cycles, plain, pdl, pdl_event, memset_pdl);
            }
        CK(cudaEventDestroy(ev));
    }
    float *a, *b;
    const size_t bytes = (size_t)4 << lg_to;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    for (int lg = lg_from; lg <= lg_to; lg += 2) {
        const long long n4 = (1LL << lg) / 4;
        printf("  copy kernel over 2^%d f32 (%.1f MB read and written): %.2f\n", lg,
               (double)(8LL << lg) / 1e6,
               gated_us(s, n, [&](int) { copy_kernel<<<2 * sms, 256, 0, s>>>((const float4 *)a, (float4 *)b, n4); }));
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(word));
    CK(cudaStreamDestroy(s));
}

// ---- pieces ------------------------------------------------------------------------------

struct pipeline {
    const char *name, *yaml;
};
static const pipeline k_pipelines[] = {
    {"map y = x*2+1", "sluice: 1\nname: map\ninput: {x: f32}\nstages:\n  - map: {y: x * 2.0 + 1.0}\noutput: [y]\n"},
    {"exclusive f32 sum scan",
     "sluice: 1\nname: scan\ninput: {x: f32}\nstages:\n  - scan: {of: x, op: sum, kind: exclusive, into: s}\noutput: [s]\n"},
    {"filter x > 0", "sluice: 1\nname: filter\ninput: {x: f32}\nstages:\n  - filter: x > 0\noutput: [x]\n"},
    {"map + filter + count scan (stream_bench's)",
     "sluice: 1\nname: mfc\ninput: {x: f32}\nstages:\n  - map: {y: x * 2.0 + 1.0}\n  - filter: y > 1.0\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\noutput: [y, slot]\n"},
    {"f32 sum of the batch (reduce)",
     "sluice: 1\nname: reduce\ninput: {x: f32}\nstages:\n"
     "  - reduce: {values: [{op: sum, of: x, into: s}], per: batch}\noutput: [s]\n"},
};

[[noreturn]] static void fail(sluice_context *ctx, sluice_status st, const char *what) {
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    fprintf(stderr, "piece_bench: %s: %s: %s\n", what, sluice_status_name(st), d ? d->message : "");
    exit(1);
}

// us a piece of `rows` rows of `pl`, pieces n distinct device batches of dx.
static double piece_us(const pipeline &pl, const float *dx, long long rows, int n) {
    sluice_context *ctx;
    if (sluice_context_create(&ctx, nullptr) != SLUICE_OK) exit(1);
    sluice_pipeline *p;
    sluice_status st = sluice_pipeline_load_string(ctx, pl.yaml, strlen(pl.yaml), "piece_bench", &p);
    if (st != SLUICE_OK) fail(ctx, st, "loading a pipeline");
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CUDA;
    so.max_batch_rows = rows;
    so.pipeline_depth = 64; /* above PIECES: no push waits for an earlier one */
    sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
    co.outputs_on_device = 1;
    sluice_session *s;
    st = sluice_cuda_session_open(p, &so, &co, &s);
    if (st != SLUICE_OK) fail(ctx, st, "opening a session");
    cudaStream_t stream = sluice_cuda_session_stream(s);
    auto drain = [&] {
        CK(cudaStreamSynchronize(stream));
        for (;;) {
            sluice_batch *b = nullptr;
            sluice_status ps = sluice_session_pull(s, &b);
            if (ps != SLUICE_OK) fail(ctx, ps, "pulling");
            if (!b) break;
            sluice_batch_free(b);
        }
    };
    double us = 0;
    for (int round = 0; round < 2; round++) { /* the first: the kernels load, the pool fills */
        us = gated_us(stream, n, [&](int k) {
            sluice_column c = {"x", SLUICE_F32, dx + (size_t)k * (size_t)rows, rows};
            sluice_status ps = sluice_cuda_session_push_device(s, &c, 1);
            if (ps != SLUICE_OK) fail(ctx, ps, "pushing");
        });
        drain();
    }
    st = sluice_session_flush(s);
    if (st != SLUICE_OK) fail(ctx, st, "flushing");
    drain();
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return us;
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const int lg_from = argc > 1 ? atoi(argv[1]) : 16, lg_to = argc > 2 ? atoi(argv[2]) : 22;
    const int n = argc > 3 ? atoi(argv[3]) : 48;
    if (lg_from < 10 || lg_to > 26 || lg_from > lg_to || n < 1 || n > 60) {
        fprintf(stderr, "usage: piece_bench [LOG2_FROM=16] [LOG2_TO=22 (<= 26)] [PIECES=48 (<= 60)]\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    floors(lg_from, lg_to, n);

    /* n pieces of the largest size, each its own rows: x in [-1, 1) */
    const long long most = 1LL << lg_to;
    float *dx;
    CK(cudaMalloc(&dx, (size_t)most * 4 * n));
    {
        float *h = (float *)malloc((size_t)most * 4);
        if (!h) return 1;
        for (long long i = 0; i < most; i++) h[i] = (float)((i * 2654435761ull) % 2001) / 1000.0f - 1.0f;
        for (int k = 0; k < n; k++) CK(cudaMemcpy(dx + (size_t)k * most, h, (size_t)most * 4, cudaMemcpyHostToDevice));
        free(h);
    }
    printf("\n| pipeline, GPU us a device piece (%d back to back) |", n);
    for (int lg = lg_from; lg <= lg_to; lg += 2) printf(" 2^%d rows |", lg);
    printf("\n|---|");
    for (int lg = lg_from; lg <= lg_to; lg += 2) printf("---|");
    printf("\n");
    for (const pipeline &pl : k_pipelines) {
        printf("| %s |", pl.name);
        for (int lg = lg_from; lg <= lg_to; lg += 2) printf(" %.2f |", piece_us(pl, dx, 1LL << lg, n));
        printf("\n");
    }
    CK(cudaFree(dx));
    return 0;
}
