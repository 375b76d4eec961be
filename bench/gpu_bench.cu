// gpu_bench.cu — the GPU benchmark of issue 3: each sluice figure beside a device-to-device
// copy and the CUB call doing the same job, all measured in the same run, as ratios.
//
// Usage: gpu_bench [log2_rows=28] [reps=20]
// Prints one line per measurement and a table last. Times are medians of `reps` runs timed
// with CUDA events after two warm-ups; data is random and far larger than L2 (x holds a
// few thousand +0.0s at 2^28 rows: the float sorts' zero run).
// "job bytes" are the bytes the job must move at least: each input read once, each output
// written once. "% copy" is (job bytes / time) over the copy's bandwidth (bytes read +
// written / time), so 100% means the job ran at copy speed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/iterator/transform_iterator.h>

#include "cuda/sort.h"
#include "sluice.h"
#include "sluice_cuda.h"
#include "cuda_check.h"

static int g_reps = 20;
static cudaStream_t g_stream;

// Median time in ms of fn() queued on g_stream, two warm-ups first: the GPU's span from an
// event queued before fn() to one queued after it. `after`, when given, runs once the end
// event is queued and before it is waited for (the host's part of a step whose GPU work fn()
// queued: time_sluice_ms).
static double time_ms(const std::function<void()> &fn, const std::function<void()> &after = nullptr) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 2; i++) {
        fn();
        if (after) after();
    }
    CK(cudaStreamSynchronize(g_stream));
    std::vector<float> t;
    for (int i = 0; i < g_reps; i++) {
        CK(cudaEventRecord(a, g_stream));
        fn();
        CK(cudaEventRecord(b, g_stream));
        if (after) after();
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// ---- data ------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}
// The reduce-by-key job's made key (k + 1), for CUB's transform iterator.
struct plus_one {
    __host__ __device__ int operator()(int k) const { return k + 1; }
};
__global__ void fill_normalish(float *x, int64_t n, uint64_t seed) {  // sum of 4 uniforms, centred
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = mix(i * 0x9e3779b97f4a7c15ull + seed);
        float s = 0;
        for (int k = 0; k < 4; k++) s += (float)((h >> (16 * k)) & 0xffff) / 65536.0f;
        x[i] = s - 2.0f;
    }
}
__global__ void fill_f64(double *x, int64_t n, uint64_t seed) {  // uniform in [-2, 2), 53 random bits
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = (double)(mix(i + seed) >> 11) * 0x1p-51 - 2.0;
}
__global__ void fill_u32(uint32_t *x, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = (uint32_t)mix(i + seed);
}
// Small integers of `bytes` each (1, 2, 4 or 8; signed in [-1000, 1000], or 0/1 for bools):
// sums of 2^28 of them stay far from any type's overflow.
__global__ void fill_small_int(unsigned char *x, int bytes, bool boolean, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t v = boolean ? (int64_t)(mix(i + seed) & 1) : (int64_t)(mix(i + seed) % 2001) - 1000;
        for (int k = 0; k < bytes; k++) x[i * bytes + k] = (unsigned char)((uint64_t)v >> (8 * k));
    }
}
__global__ void fill_f16(uint16_t *x, int64_t n, uint64_t seed) {  // halves in [-2, 2)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = __half_as_ushort(__float2half((float)(mix(i + seed) & 0xffff) / 16384.0f - 2.0f));
}
__global__ void fill_decay(float *a, int64_t n, uint64_t seed) {  // a in [0.5, 1): stays bounded
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        a[i] = 0.5f + (float)(mix(i + seed) & 0xffff) / 131072.0f;
}
// The segment length mixes the segmented jobs run over: uniform lengths 1 .. 2*avg-1 (mean
// avg), and a heavy-tailed mix, lengths floor(U^(-1/1.2)) for U uniform in (0, 1] (a Pareto
// law of shape 1.2: most segments one to three rows, a few of 10^5 rows and more, which span
// many tiles), as issue 12 asks of segmented groups.
struct segment_mix {
    const char *name; // in the job's row: "avg 1000", "Pareto"
    int avg;          // uniform mix: the mean length; 0 for the Pareto mix
};
static const segment_mix k_segment_mixes[] = {{"avg 1000", 1000}, {"avg 8", 8}, {"Pareto", 0}};

// Segment keys (the segment's number at each row) and offsets for n rows of a mix.
static void make_segments(int64_t n, const segment_mix &mix, std::vector<int64_t> &offsets,
                          std::vector<int> &keys) {
    offsets.clear();
    keys.resize(n);
    uint64_t s = 12345;
    int64_t at = 0;
    int k = 0;
    offsets.push_back(0);
    while (at < n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int64_t len;
        if (mix.avg > 0) {
            len = 1 + (int64_t)((s >> 33) % (uint64_t)(2 * mix.avg - 1));
        } else {
            const double u = ((double)(s >> 11) + 1.0) / 9007199254740992.0; // (0, 1]
            const double l = std::pow(u, -1.0 / 1.2);
            len = l >= (double)n ? n : (int64_t)l;
        }
        if (at + len > n) len = n - at;
        for (int64_t i = 0; i < len; i++) keys[at + i] = k;
        at += len;
        k++;
        offsets.push_back(at);
    }
    if (mix.avg == 0) {
        int64_t longest = 0;
        for (size_t j = 1; j < offsets.size(); j++) longest = std::max(longest, offsets[j] - offsets[j - 1]);
        printf("(segments %s: %lld of mean %.2f rows, the longest %lld)\n", mix.name,
               (long long)(offsets.size() - 1), (double)n / (double)(offsets.size() - 1), (long long)longest);
    }
}
static unsigned grid(int64_t n) { return (unsigned)std::min<int64_t>((n + 255) / 256, 65536); }

// ---- helpers for CUB compositions -------------------------------------------------------
struct Positive {
    __host__ __device__ bool operator()(float v) const { return v > 0.0f; }
};
struct TwicePlusOne {
    __host__ __device__ float operator()(float v) const { return v * 2.0f + 1.0f; }
};
struct AboveOne {
    __host__ __device__ bool operator()(float v) const { return v > 1.0f; }
};
// slot[i] = i for the *count kept rows (the cull's exclusive count, done the CUB way)
__global__ void k_iota(int64_t *slot, const int64_t *count) {
    int64_t n = *count;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        slot[i] = i;
}
struct Affine {  // (a1, b1) then (a2, b2) = (a1*a2, a2*b1 + b2)
    __host__ __device__ float2 operator()(float2 l, float2 r) const {
        return make_float2(l.x * r.x, r.x * l.y + r.y);
    }
};
__global__ void k_r2(const float *x, const float *y, float *r2, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        r2[i] = x[i] * x[i] + y[i] * y[i];
}
__global__ void k_flag_lt(const float *r2, float lim, char *keep, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        keep[i] = r2[i] < lim;
}
__global__ void k_z(const float *x, const float *before, const int64_t *count, float *z) {
    int64_t n = *count;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        z[i] = x[i] * 2.0f + before[i];
}
__global__ void k_flag_pos(const float *x, const int64_t *count, char *keep) {
    int64_t n = *count;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        keep[i] = x[i] > 0.0f;
}
__global__ void k_pack2(const float *a, const float *b, float2 *ab, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        ab[i] = make_float2(a[i], b[i]);
}

// GPU_BENCH_YAML=a.yaml[,b.yaml...]: also time each pipeline file over random device columns
// (yaml_job), e.g. to compare launch shapes of one group (SLUICE_CUDA_TUNING) in one run.
// GPU_BENCH_JOBS=scan,filter,...: run only the named jobs (scan, filter, linrec, widen,
// f64acc, narrow, cull, segscan, sort, sortf32, sortf32pairs, sortf64, six, host, reduce, segreduce, reducebykey); unset runs
// them all. The copy always runs: it is the yardstick.
// GPU_BENCH_ADDRS=1: each sluice job prints where its first output lies (and a pipeline file's
// inputs), to compare buffer placement between repeats that time differently.
// GPU_BENCH_MIX=Pareto (or "avg 8", ...): the segmented jobs run only the mixes whose name
// holds it (a trace of one mix: its lines name the loop, not the mix).
static bool want_mix(const segment_mix &mix) {
    const char *only = getenv("GPU_BENCH_MIX");
    return !only || !*only || strstr(mix.name, only) != nullptr;
}
static bool want(const char *job) {
    const char *list = getenv("GPU_BENCH_JOBS");
    if (!list || !*list) return true;
    size_t n = strlen(job);
    for (const char *at = list; (at = strstr(at, job)) != nullptr; at += n)
        if ((at == list || at[-1] == ',') && (at[n] == ',' || at[n] == '\0')) return true;
    return false;
}

// ---- sluice through the public API ------------------------------------------------------
struct sluice_job {
    sluice_context *ctx = nullptr;
    sluice_pipeline *p = nullptr;
    sluice_session *s = nullptr;
    std::string why;
    int64_t out_rows = 0;
    int64_t batches_pulled = 0;
    bool failed = false;
    bool addr_shown = false;
};
static int bench_depth() {
    const char *d = getenv("GPU_BENCH_DEPTH");
    return d ? atoi(d) : 0;
}
static bool sluice_open(sluice_job &j, const char *yaml, int64_t n) {
    // GPU_BENCH_ONLY_SORT=1: measure sluice's sorts only (the fused groups are not ready).
    if (getenv("GPU_BENCH_ONLY_SORT") && !strstr(yaml, "sort:")) {
        j.why = "skipped (GPU_BENCH_ONLY_SORT)";
        return false;
    }
    if (sluice_context_create(&j.ctx, nullptr) != SLUICE_OK) return false;
    // GPU_BENCH_DETERMINISM=run_to_run: every pipeline asks for that mode (to measure its cost).
    std::string text = yaml;
    if (const char *det = getenv("GPU_BENCH_DETERMINISM")) text += std::string("determinism: ") + det + "\n";
    sluice_status st = sluice_pipeline_load_string(j.ctx, text.c_str(), text.size(), "bench", &j.p);
    if (st == SLUICE_OK) {
        sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
        so.backend = SLUICE_BACKEND_CUDA;
        so.max_batch_rows = n;
        // the session's default depth, so that a push returns once its work is queued, as
        // CUB's calls do (time_sluice_ms queues the end event then; at depth 1 the push waited
        // for the kernels, and the span held the host's wake-up after them: 5-8 us a step,
        // bench/RESULTS.md, fourteenth session). Each timed step is still one whole push and
        // pull (the pull waits after the end event). GPU_BENCH_DEPTH=1 measures the
        // synchronous path.
        so.pipeline_depth = bench_depth();
        sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
        co.stream = g_stream;
        co.outputs_on_device = 1;
        st = sluice_cuda_session_open(j.p, &so, &co, &j.s);
    }
    if (st != SLUICE_OK) {
        const sluice_diagnostic *d = sluice_context_diagnostic(j.ctx, 0);
        j.why = std::string(sluice_status_name(st)) + ": " + (d ? d->message : "");
        return false;
    }
    return true;
}
static void sluice_close(sluice_job &j) {
    sluice_session_close(j.s);
    sluice_pipeline_free(j.p);
    sluice_context_destroy(j.ctx);
}
// A failed call is reported once and marks the job failed (its figure becomes n/a); the other
// measurements go on.
static void sluice_failed(sluice_job &j, sluice_status st) {
    const sluice_diagnostic *d = sluice_context_diagnostic(j.ctx, 0);
    printf("sluice push failed: %s: %s\n", sluice_status_name(st), d ? d->message : "");
    j.failed = true;
}
// One push of device columns: every kernel and copy it makes is queued on the session's
// stream, g_stream (sluice_open), before it returns.
static void sluice_push(sluice_job &j, const std::vector<sluice_column> &cols) {
    if (j.failed) return;
    sluice_status st = sluice_cuda_session_push_device(j.s, cols.data(), cols.size());
    if (st != SLUICE_OK) sluice_failed(j, st);
}
// The pull of every result of the pushes so far (waiting for them); out_rows: the rows this
// pull took, where it took any (a flushed stream-wide sort may come out in several batches).
static void sluice_drain(sluice_job &j) {
    if (j.failed) return;
    sluice_status st;
    sluice_batch *b = nullptr;
    int64_t drained = 0;
    while ((st = sluice_session_pull_wait(j.s, &b, -1)) == SLUICE_OK && b) {
        drained += sluice_batch_rows(b);
        j.out_rows = drained;
        j.batches_pulled++;
        // GPU_BENCH_ADDRS=1: where the first output column lies (once a job), to compare the
        // placement of buffers between repeats of one pipeline that time differently
        sluice_column out0;
        if (getenv("GPU_BENCH_ADDRS") && !j.addr_shown && sluice_batch_column(b, 0, &out0) == SLUICE_OK) {
            printf("  addrs: out %s at %p\n", out0.name, out0.data);
            j.addr_shown = true;
        }
        sluice_batch_free(b);
    }
    if (st != SLUICE_OK) sluice_failed(j, st);
}
// The end of the stream: a stream-wide sort's rows come out (queued as its push's work is), and
// the session is ready for a new stream once they are pulled (sluice_reset).
static void sluice_flush(sluice_job &j) {
    if (j.failed) return;
    sluice_status st = sluice_session_flush(j.s);
    if (st != SLUICE_OK) sluice_failed(j, st);
}
static void sluice_reset(sluice_job &j) {
    if (j.failed) return;
    sluice_status st = sluice_session_reset(j.s);
    if (st != SLUICE_OK) sluice_failed(j, st);
}
// sluice's time for one push of device columns, measured as CUB's calls are: the GPU's span
// from before the push (its host work before the first kernel included) to the end of the
// work it queued; the pull that hands the finished batch over waits after the end event is
// queued, as a CUB caller's own synchronisation would. Where the push itself waits (a row
// count read back before a later group), the wait is inside the span.
static double time_sluice_ms(sluice_job &j, const std::vector<sluice_column> &cols) {
    return time_ms([&] { sluice_push(j, cols); }, [&] { sluice_drain(j); });
}

// One job through sluice: a session of `yaml` for up to n rows (sluice_open), one push of
// `cols` timed (time_sluice_ms), the session closed. The time in ms, or -1 where the session
// would not open (the reason printed, naming `what`) or a push failed; *rows, when given, the
// rows of the last pull that took any.
// With whole_stream given, a pipeline that holds its rows until the stream ends (a stream-wide
// sort) is found by a first push that gives no batch. Pushed alone, such a pipeline keeps every
// timed push's rows (until it runs out of memory: trades-vwap at 2^28 rows in the forty-second
// session), so its step is a push and a flush, timed together, and the stream is reset after
// each (*whole_stream set). A pipeline whose filter keeps no row is timed so too; its flush
// finds nothing to emit.
static double sluice_job_ms(const char *what, const char *yaml, const std::vector<sluice_column> &cols,
                            int64_t n, int64_t *rows = nullptr, bool *whole_stream = nullptr) {
    sluice_job j;
    if (!sluice_open(j, yaml, n)) {
        printf("sluice %s: %s\n", what, j.why.c_str());
        return -1;
    }
    double t = -1;
    if (whole_stream) {
        sluice_push(j, cols);
        sluice_drain(j);
        *whole_stream = !j.failed && j.batches_pulled == 0;
    }
    if (whole_stream && *whole_stream) {
        sluice_flush(j);
        sluice_drain(j);
        sluice_reset(j);
        t = time_ms([&] { sluice_push(j, cols); sluice_flush(j); }, [&] { sluice_drain(j); sluice_reset(j); });
    } else if (!j.failed) {
        t = time_sluice_ms(j, cols);
    }
    if (j.failed) t = -1;
    if (rows) *rows = j.out_rows;
    sluice_close(j);
    return t;
}

// ---- the table --------------------------------------------------------------------------
struct row {
    std::string job, sluice, cub, bar;
};
static std::vector<row> g_rows;
static char *fmt(const char *f, double v) {
    static char buf[16][64];
    static int k;
    char *b = buf[k++ % 16];
    if (v < 0) snprintf(b, 64, "n/a");
    else snprintf(b, 64, f, v);
    return b;
}

// A sort job of `n` rows, CUB's time given: through the launcher (sl_cuda_sort_run, when the
// descriptor fits the scratch) and through a session of `yaml` over `cols`; prints a line and
// adds the table's two rows (the session's beside the ">= 0.95x" bar, the launcher's alone).
static void sort_job(const char *what, const char *cub_what, double t_cub, const sl_cuda_sort_desc &desc,
                     const void *const *in, void *const *out, const char *yaml,
                     const std::vector<sluice_column> &cols, int64_t n, void *tmp, size_t tmp_bytes) {
    sl_cuda_sort s;
    double t_launch = -1;
    if (sl_cuda_sort_prepare(&s, &desc, n) == SLUICE_OK && s.scratch_bytes <= tmp_bytes)
        t_launch = time_ms([&] {
            CK((cudaError_t)sl_cuda_sort_run(&s, tmp, n, desc.types, in, out, g_stream));
        });
    const double t_sl = sluice_job_ms(what, yaml, cols, n);
    printf("%-17s sluice %8.3f ms  launcher %8.3f ms  CUB %s %8.3f ms (%.3fx / %.3fx of CUB speed)\n", what,
           t_sl, t_launch, cub_what, t_cub, t_sl < 0 ? -1 : t_cub / t_sl, t_launch < 0 ? -1 : t_cub / t_launch);
    g_rows.push_back({std::string(what) + " (speed / CUB's)", fmt("%.3fx", t_sl < 0 ? -1 : t_cub / t_sl),
                      "1.000x", ">= 0.95x"});
    g_rows.push_back({std::string(what) + ", launcher only", fmt("%.3fx", t_launch < 0 ? -1 : t_cub / t_launch),
                      "1.000x", ""});
}

// GPU_BENCH_YAML: each pipeline file over random device columns of its inputs (floats
// normal-ish, integers small, bools 0/1), its parameters at their defaults, one push of n rows
// (and a flush, where the rows wait for the stream's end: sluice_job_ms).
// Job bytes are the inputs read plus the rows pulled times the output row's width. A pipeline
// with an offsets input is left out (random offsets would not be a ragged batch).
static void yaml_jobs(int64_t n, double copy_bw) {
    auto pct = [&](double job_bytes, double ms) { return ms < 0 ? -1.0 : 100.0 * job_bytes / (ms * 1e-3) / copy_bw; };
    const char *list = getenv("GPU_BENCH_YAML");
    if (!list || !*list) return;
    std::string all = list;
    for (size_t at = 0; at <= all.size();) {
        size_t end = all.find(',', at);
        if (end == std::string::npos) end = all.size();
        const std::string path = all.substr(at, end - at);
        at = end + 1;
        if (path.empty()) continue;
        FILE *f = fopen(path.c_str(), "rb");
        if (!f) {
            printf("yaml %s: cannot open it\n", path.c_str());
            continue;
        }
        std::string text;
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
        fclose(f);
        sluice_context *ctx = nullptr;
        sluice_pipeline *p = nullptr;
        if (sluice_context_create(&ctx, nullptr) != SLUICE_OK) return;
        if (sluice_pipeline_load_string(ctx, text.c_str(), text.size(), path.c_str(), &p) != SLUICE_OK) {
            const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
            printf("yaml %s: %s\n", path.c_str(), d ? d->message : "does not load");
            sluice_context_destroy(ctx);
            continue;
        }
        std::vector<sluice_column> cols;
        std::vector<void *> bufs;
        double in_bytes = 0, out_row_bytes = 0;
        bool usable = true;
        for (size_t c = 0; c < sluice_pipeline_input_count(p); c++) {
            sluice_column_info ci;
            sluice_pipeline_input(p, c, &ci);
            if (ci.role != SLUICE_ROLE_DATA) usable = false;
            const size_t w = sluice_type_size(ci.type);
            void *d = nullptr;
            CK(cudaMalloc(&d, (size_t)n * w));
            bufs.push_back(d);
            const uint64_t seed = 100 + c;
            if (ci.type == SLUICE_F32) fill_normalish<<<grid(n), 256, 0, g_stream>>>((float *)d, n, seed);
            else if (ci.type == SLUICE_F64) fill_f64<<<grid(n), 256, 0, g_stream>>>((double *)d, n, seed);
            else if (ci.type == SLUICE_F16) fill_f16<<<grid(n), 256, 0, g_stream>>>((uint16_t *)d, n, seed);
            else fill_small_int<<<grid(n), 256, 0, g_stream>>>((unsigned char *)d, (int)w, ci.type == SLUICE_BOOL, n, seed);
            CK(cudaGetLastError());
            cols.push_back({ci.name, ci.type, d, n});
            in_bytes += (double)n * w;
        }
        for (size_t c = 0; c < sluice_pipeline_output_count(p); c++) {
            sluice_column_info ci;
            sluice_pipeline_output(p, c, &ci);
            out_row_bytes += (double)sluice_type_size(ci.type);
        }
        if (usable) {
            if (getenv("GPU_BENCH_ADDRS"))
                for (const sluice_column &c : cols) printf("  addrs: in %s at %p\n", c.name, c.data);
            int64_t rows = -1;
            bool whole_stream = false;
            const double t = sluice_job_ms(path.c_str(), text.c_str(), cols, n, &rows, &whole_stream);
            const double jb = in_bytes + (rows > 0 ? (double)rows * out_row_bytes : 0);
            const double floor_ms = jb / copy_bw * 1e3;
            printf("yaml %-30s sluice %8.3f ms (%5.1f%% copy, %5.2fx floor), %lld rows out%s\n", path.c_str(), t,
                   pct(jb, t), t < 0 ? -1 : t / floor_ms, (long long)rows,
                   whole_stream ? " (a push and a flush a step)" : "");
            g_rows.push_back({"yaml " + path + " (% of copy)", fmt("%.1f%%", pct(jb, t)), "", ""});
        } else printf("yaml %s: left out (an offsets input)\n", path.c_str());
        for (void *d : bufs) CK(cudaFree(d));
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
}

int main(int argc, char **argv) {
    int lg = argc > 1 ? atoi(argv[1]) : 28;
    if (argc > 2) g_reps = atoi(argv[2]);
    const int64_t n = (int64_t)1 << lg;
    setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out at once, so a crash shows the job it hit
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d, %d SMs, L2 %d MB), rows 2^%d, median of %d\n", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, lg, g_reps);

    float *x, *y, *out, *out2;
    uint32_t *u, *v, *uo, *vo;
    int64_t *count;
    CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&y, n * 4));
    CK(cudaMalloc(&out, n * 8)); CK(cudaMalloc(&out2, n * 8));
    CK(cudaMalloc(&u, n * 4)); CK(cudaMalloc(&v, n * 4));
    CK(cudaMalloc(&uo, n * 4)); CK(cudaMalloc(&vo, n * 4));
    CK(cudaMalloc(&count, 64));
    fill_normalish<<<grid(n), 256, 0, g_stream>>>(x, n, 1);
    fill_normalish<<<grid(n), 256, 0, g_stream>>>(y, n, 2);
    fill_u32<<<grid(n), 256, 0, g_stream>>>(u, n, 3);
    fill_u32<<<grid(n), 256, 0, g_stream>>>(v, n, 4);
    CK(cudaGetLastError());
    size_t tmp_bytes = (size_t)n * 24 + (64 << 20);  // generous for every CUB call below
    void *tmp;
    CK(cudaMalloc(&tmp, tmp_bytes));

    // Copy: the ceiling every figure is measured against.
    double t_copy = time_ms([&] { CK(cudaMemcpyAsync(out, x, n * 4, cudaMemcpyDeviceToDevice, g_stream)); });
    double copy_bw = 2.0 * n * 4 / (t_copy * 1e-3);  // bytes/s
    printf("copy            %8.3f ms  %7.1f GB/s (read+write)\n", t_copy, copy_bw / 1e9);
    auto pct = [&](double job_bytes, double ms) { return ms < 0 ? -1.0 : 100.0 * job_bytes / (ms * 1e-3) / copy_bw; };

    // 1. exclusive f32 sum scan.
    if (want("scan")) {
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] { CK(cub::DeviceScan::ExclusiveSum(tmp, b, x, out, n, g_stream)); });
        const double t_sl = sluice_job_ms("scan",
                                          "sluice: 1\nname: bench-scan\ninput: {x: f32}\nstages:\n"
                                          "  - scan: {of: x, op: sum, kind: exclusive, into: s}\noutput: [s]\n",
                                          {{"x", SLUICE_F32, x, n}}, n);
        double jb = 8.0 * n;
        printf("scan            sluice %8.3f ms (%5.1f%% copy)  CUB ExclusiveSum %8.3f ms (%5.1f%% copy)\n",
               t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({"exclusive f32 sum scan (% of copy)", fmt("%.1f%%", pct(jb, t_sl)),
                          fmt("%.1f%%", pct(jb, t_cub)), ">= 90%"});
    }
    // 2. filter x > 0 (about half kept).
    if (want("filter")) {
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] { CK(cub::DeviceSelect::If(tmp, b, x, out, count, n, Positive(), g_stream)); });
        int64_t kept;
        CK(cudaMemcpy(&kept, count, 8, cudaMemcpyDeviceToHost));
        double floor_ms = (4.0 * n + 4.0 * kept) / copy_bw * 1e3;
        int64_t rows = -1;
        const double t_sl = sluice_job_ms("filter",
                                          "sluice: 1\nname: bench-filter\ninput: {x: f32}\nstages:\n"
                                          "  - filter: x > 0\noutput: [x]\n",
                                          {{"x", SLUICE_F32, x, n}}, n, &rows);
        if (t_sl >= 0 && rows != kept) printf("sluice filter kept %lld rows, CUB %lld\n", (long long)rows, (long long)kept);
        printf("filter          sluice %8.3f ms (%5.2fx floor)  CUB Select::If %8.3f ms (%5.2fx floor), floor %.3f ms, kept %lld\n",
               t_sl, t_sl < 0 ? -1 : t_sl / floor_ms, t_cub, t_cub / floor_ms, floor_ms, (long long)kept);
        g_rows.push_back({"filter x > 0 (time / floor)", fmt("%.2fx", t_sl < 0 ? -1 : t_sl / floor_ms),
                          fmt("%.2fx", t_cub / floor_ms), "<= 1.10x"});
    }
    // 3. linear recurrence over f32 (a, b).
    if (want("linrec")) {
        float *a = y;  // reuse: a in [0.5, 1)
        fill_decay<<<grid(n), 256, 0, g_stream>>>(a, n, 5);
        float2 *ab = (float2 *)out2;
        k_pack2<<<grid(n), 256, 0, g_stream>>>(a, x, ab, n);
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] { CK(cub::DeviceScan::InclusiveScan(tmp, b, ab, (float2 *)out, Affine(), n, g_stream)); });
        const double t_sl = sluice_job_ms("linrec",
                                          "sluice: 1\nname: bench-linrec\ninput: {a: f32, b: f32}\nstages:\n"
                                          "  - scan: {op: linrec, a: a, b: b, into: h}\noutput: [h]\n",
                                          {{"a", SLUICE_F32, a, n}, {"b", SLUICE_F32, x, n}}, n);
        double jb = 12.0 * n;  // a, b read; h written
        printf("linrec          sluice %8.3f ms (%5.1f%% copy)  CUB InclusiveScan(pair) %8.3f ms (%5.1f%% copy)\n",
               t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({"linear recurrence f32 (% of copy)", fmt("%.1f%%", pct(jb, t_sl)),
                          fmt("%.1f%%", pct(jb, t_cub)), ">= 80%"});
        fill_normalish<<<grid(n), 256, 0, g_stream>>>(y, n, 2);
    }
    // 3b. scans whose accumulator is wider than their input: i32 summed in i64, f32 summed in
    // f64 (exclusive), against CUB's ExclusiveScan given an init of the wide type (which makes
    // it accumulate in that type).
    for (int f64 = 0; f64 < 2; f64++) {
        if (!want(f64 ? "f64acc" : "widen")) continue;
        size_t b = tmp_bytes;
        double t_cub = f64 ? time_ms([&] {
            CK(cub::DeviceScan::ExclusiveScan(tmp, b, x, (double *)out2, cuda::std::plus<>{}, 0.0, n, g_stream));
        }) : time_ms([&] {
            CK(cub::DeviceScan::ExclusiveScan(tmp, b, (const int32_t *)u, (int64_t *)out2, cuda::std::plus<>{},
                                              (int64_t)0, n, g_stream));
        });
        const char *yaml = f64 ? "sluice: 1\nname: bench-f64acc\ninput: {x: f32}\nstages:\n"
                                 "  - scan: {of: x, op: sum, acc: f64, kind: exclusive, into: s}\noutput: [s]\n"
                               : "sluice: 1\nname: bench-widen\ninput: {x: i32}\nstages:\n"
                                 "  - scan: {of: x, op: sum, acc: i64, kind: exclusive, into: s}\noutput: [s]\n";
        const double t_sl = sluice_job_ms(f64 ? "f64acc" : "widen", yaml,
                                          {{"x", f64 ? SLUICE_F32 : SLUICE_I32, f64 ? (void *)x : (void *)u, n}}, n);
        double jb = 12.0 * n;  // 4 bytes read, 8 written
        const char *what = f64 ? "f32 -> f64 exclusive sum (% of copy)" : "i32 -> i64 exclusive sum (% of copy)";
        printf("%-15s sluice %8.3f ms (%5.1f%% copy)  CUB ExclusiveScan %8.3f ms (%5.1f%% copy)\n",
               f64 ? "f64acc" : "widen", t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({what, fmt("%.1f%%", pct(jb, t_sl)), fmt("%.1f%%", pct(jb, t_cub)), ">= 90%"});
    }
    // 3c'. inclusive max scans over 1- and 2-byte columns (the same bar as every scan), against
    // CUB's InclusiveScan with cuda::maximum: a tile sized in rows moves a quarter or half the
    // bytes of an f32 tile, so these show what the per-tile work costs on narrow columns.
    for (int width = 1; width <= 2; width++) {
        if (!want("narrow")) break;
        size_t b = tmp_bytes;
        double t_cub = width == 1 ? time_ms([&] {
            CK(cub::DeviceScan::InclusiveScan(tmp, b, (const int8_t *)u, (int8_t *)uo, cuda::maximum<>{}, n, g_stream));
        }) : time_ms([&] {
            CK(cub::DeviceScan::InclusiveScan(tmp, b, (const int16_t *)u, (int16_t *)uo, cuda::maximum<>{}, n, g_stream));
        });
        const char *yaml = width == 1 ? "sluice: 1\nname: bench-i8max\ninput: {x: i8}\nstages:\n"
                                        "  - scan: {of: x, op: max, into: s}\noutput: [s]\n"
                                      : "sluice: 1\nname: bench-i16max\ninput: {x: i16}\nstages:\n"
                                        "  - scan: {of: x, op: max, into: s}\noutput: [s]\n";
        const double t_sl = sluice_job_ms(width == 1 ? "i8 max" : "i16 max", yaml,
                                          {{"x", width == 1 ? SLUICE_I8 : SLUICE_I16, u, n}}, n);
        double jb = 2.0 * width * n;
        printf("%-15s sluice %8.3f ms (%5.1f%% copy)  CUB InclusiveScan(max) %8.3f ms (%5.1f%% copy)\n",
               width == 1 ? "i8 max scan" : "i16 max scan", t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({width == 1 ? "i8 inclusive max scan (% of copy)" : "i16 inclusive max scan (% of copy)",
                          fmt("%.1f%%", pct(jb, t_sl)), fmt("%.1f%%", pct(jb, t_cub)), ">= 90%"});
    }
    // 3c. the cull: map, filter, and the kept rows' slots (an i64 count), against CUB's
    // Select::If over the mapped values and a kernel writing the slots, as a CUB user would.
    if (want("cull")) {
        size_t b = tmp_bytes;
        float *yo = (float *)uo;
        int64_t *slot = (int64_t *)out2;
        double t_cub = time_ms([&] {
            CK(cub::DeviceSelect::If(tmp, b, thrust::make_transform_iterator(x, TwicePlusOne()), yo, count, n,
                                     AboveOne(), g_stream));
            k_iota<<<grid(n), 256, 0, g_stream>>>(slot, count);
        });
        int64_t kept;
        CK(cudaMemcpy(&kept, count, 8, cudaMemcpyDeviceToHost));
        double floor_ms = (4.0 * n + 12.0 * kept) / copy_bw * 1e3;
        int64_t rows = -1;
        const double t_sl = sluice_job_ms("cull",
                                          "sluice: 1\nname: bench-cull\ninput: {x: f32}\nstages:\n"
                                          "  - map: {y: x * 2.0 + 1.0}\n  - filter: y > 1.0\n"
                                          "  - scan: {op: count, kind: exclusive, into: slot}\noutput: [y, slot]\n",
                                          {{"x", SLUICE_F32, x, n}}, n, &rows);
        if (t_sl >= 0 && rows != kept) printf("sluice cull kept %lld rows, CUB %lld\n", (long long)rows, (long long)kept);
        printf("cull            sluice %8.3f ms (%5.2fx floor)  CUB Select::If + slots %8.3f ms (%5.2fx floor), floor %.3f ms\n",
               t_sl, t_sl < 0 ? -1 : t_sl / floor_ms, t_cub, t_cub / floor_ms, floor_ms);
        g_rows.push_back({"cull: map, filter, i64 slots (time / floor)", fmt("%.2fx", t_sl < 0 ? -1 : t_sl / floor_ms),
                          fmt("%.2fx", t_cub / floor_ms), "<= 1.10x"});
    }
    // 4. segmented sum over offsets, each segment length mix.
    for (const segment_mix &mix : k_segment_mixes) {
        if (!want_mix(mix)) continue;
        if (!want("segscan")) break;
        std::vector<int64_t> off;
        std::vector<int> keys;
        make_segments(n, mix, off, keys);
        int *dkeys;
        int64_t *doff;
        CK(cudaMalloc(&dkeys, n * 4));
        CK(cudaMalloc(&doff, off.size() * 8));
        CK(cudaMemcpy(dkeys, keys.data(), n * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(doff, off.data(), off.size() * 8, cudaMemcpyHostToDevice));
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] { CK(cub::DeviceScan::InclusiveSumByKey(tmp, b, dkeys, x, out, n, cuda::std::equal_to<>(), g_stream)); });
        const double t_sl = sluice_job_ms(
            "segmented",
            "sluice: 1\nname: bench-segscan\ninput:\n  rows: {type: i64, role: offsets}\n  x: f32\n"
            "stages:\n  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\noutput: [s]\n",
            {{"rows", SLUICE_I64, doff, (int64_t)off.size()}, {"x", SLUICE_F32, x, n}}, n);
        double jb = 8.0 * n + 8.0 * off.size();
        printf("segscan %-8s sluice %8.3f ms (%5.1f%% copy)  CUB InclusiveSumByKey %8.3f ms (%5.1f%% copy)\n",
               mix.name, t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({std::string("segmented sum, ") + mix.name + " (% of copy)",
                          fmt("%.1f%%", pct(jb, t_sl)), fmt("%.1f%%", pct(jb, t_cub)), ">= 85%"});
        CK(cudaFree(dkeys));
        CK(cudaFree(doff));
    }
    // 5. u32 key sort and u32/u32 pair sort: the launcher and a session, against CUB direct.
    for (int with_values = 0; with_values < 2; with_values++) {
        if (!want("sort")) break;
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] {
            if (with_values) CK(cub::DeviceRadixSort::SortPairs(tmp, b, u, uo, v, vo, (int)n, 0, 32, g_stream));
            else CK(cub::DeviceRadixSort::SortKeys(tmp, b, u, uo, (int)n, 0, 32, g_stream));
        });
        sluice_type types[2] = {SLUICE_U32, SLUICE_U32};
        sl_cuda_sort_desc d = {};
        d.ncolumns = 1 + with_values;
        d.types = types;
        d.nkeys = 1;
        d.keys[0] = 0;
        d.bits_hi = 32;
        const void *in[2] = {u, v};
        void *o[2] = {uo, vo};
        std::vector<sluice_column> c = {{"k", SLUICE_U32, u, n}};
        if (with_values) c.push_back({"v", SLUICE_U32, v, n});
        sort_job(with_values ? "u32/u32 pair sort" : "u32 key sort", "DeviceRadixSort", t_cub, d, in, o,
                 with_values
                     ? "sluice: 1\nname: bench-sort-pairs\ninput: {k: u32, v: u32}\nstages:\n  - sort: {key: k, per: batch}\noutput: [k, v]\n"
                     : "sluice: 1\nname: bench-sort\ninput: {k: u32}\nstages:\n  - sort: {key: k, per: batch}\noutput: [k]\n",
                 c, n, tmp, tmp_bytes);
    }
    // 5b. f32 keys: sluice sorts them with CUB's float sort and restores -0.0 before +0.0 in
    // the run of zeros (a few tiny launches; x holds a few thousand +0.0s at 2^28 rows).
    if (want("sortf32")) {
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] { CK(cub::DeviceRadixSort::SortKeys(tmp, b, x, out, (int)n, 0, 32, g_stream)); });
        const double t_sl = sluice_job_ms(
            "sort f32", "sluice: 1\nname: bench-sort-f32\ninput: {k: f32}\nstages:\n  - sort: {key: k, per: batch}\noutput: [k]\n",
            {{"k", SLUICE_F32, x, n}}, n);
        printf("f32 key sort    sluice %8.3f ms  CUB DeviceRadixSort<float> %8.3f ms (%.3fx of CUB speed)\n",
               t_sl, t_cub, t_sl < 0 ? -1 : t_cub / t_sl);
        g_rows.push_back({"f32 key sort (speed / CUB's)", fmt("%.3fx", t_sl < 0 ? -1 : t_cub / t_sl), "1.000x", ">= 0.95x"});
    }
    // 5c. an f32 key with a u32 value (PAIRS) and an f64 key alone, each through a session
    // and through the launcher, against CUB's SortPairs<float, uint32_t> / SortKeys<double>.
    for (int job = 0; job < 2; job++) {
        const bool f64 = job == 1;
        if (!want(f64 ? "sortf64" : "sortf32pairs")) continue;
        double *d = nullptr, *dout = nullptr;
        if (f64) {
            CK(cudaMalloc(&d, n * 8));
            CK(cudaMalloc(&dout, n * 8));
            fill_f64<<<grid(n), 256, 0, g_stream>>>(d, n, 6);
            CK(cudaGetLastError());
        }
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] {
            if (f64) CK(cub::DeviceRadixSort::SortKeys(tmp, b, d, dout, (int)n, 0, 64, g_stream));
            else CK(cub::DeviceRadixSort::SortPairs(tmp, b, x, out, v, vo, (int)n, 0, 32, g_stream));
        });
        sluice_type types[2] = {f64 ? SLUICE_F64 : SLUICE_F32, SLUICE_U32};
        sl_cuda_sort_desc sd = {};
        sd.ncolumns = f64 ? 1 : 2;
        sd.types = types;
        sd.nkeys = 1;
        sd.bits_hi = f64 ? 64 : 32;
        const void *in[2] = {f64 ? (const void *)d : (const void *)x, v};
        void *o[2] = {f64 ? (void *)dout : (void *)out, vo};
        std::vector<sluice_column> c;
        if (f64) c = {{"k", SLUICE_F64, d, n}};
        else c = {{"k", SLUICE_F32, x, n}, {"v", SLUICE_U32, v, n}};
        sort_job(f64 ? "f64 key sort" : "f32/u32 pair sort",
                 f64 ? "DeviceRadixSort<double>" : "DeviceRadixSort<float,u32>", t_cub, sd, in, o,
                 f64 ? "sluice: 1\nname: bench-sort-f64\ninput: {k: f64}\nstages:\n  - sort: {key: k, per: batch}\noutput: [k]\n"
                     : "sluice: 1\nname: bench-sort-f32-pairs\ninput: {k: f32, v: u32}\nstages:\n  - sort: {key: k, per: batch}\noutput: [k, v]\n",
                 c, n, tmp, tmp_bytes);
        if (f64) {
            CK(cudaFree(d));
            CK(cudaFree(dout));
        }
    }
    // 6. six stages (map, flag, compact, scan, map, filter): one sluice pass vs CUB + kernels.
    if (want("six")) {
        float *r2 = out, *xc = out2, *r2c = out2 + n, *before = (float *)uo, *z = (float *)vo;
        char *keep = (char *)u;  // scratch flags (u's contents are not needed any more)
        float *zo = out + n, *r2o = (float *)v;
        int64_t *h_count;
        CK(cudaMallocHost(&h_count, 8));
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] {
            k_r2<<<grid(n), 256, 0, g_stream>>>(x, y, r2, n);
            k_flag_lt<<<grid(n), 256, 0, g_stream>>>(r2, 2.0f, keep, n);
            CK(cub::DeviceSelect::Flagged(tmp, b, x, keep, xc, count, n, g_stream));
            CK(cub::DeviceSelect::Flagged(tmp, b, r2, keep, r2c, count, n, g_stream));
            // As a CUB user would: read the kept count back and run the rest over those rows.
            CK(cudaMemcpyAsync(h_count, count, 8, cudaMemcpyDeviceToHost, g_stream));
            CK(cudaStreamSynchronize(g_stream));
            int64_t m = *h_count;
            CK(cub::DeviceScan::ExclusiveSum(tmp, b, r2c, before, m, g_stream));
            k_z<<<grid(m), 256, 0, g_stream>>>(xc, before, count, z);
            k_flag_pos<<<grid(m), 256, 0, g_stream>>>(xc, count, keep);
            CK(cub::DeviceSelect::Flagged(tmp, b, z, keep, zo, count + 1, m, g_stream));
            CK(cub::DeviceSelect::Flagged(tmp, b, r2c, keep, r2o, count + 2, m, g_stream));
        });
        const double t_sl = sluice_job_ms("six-stage",
                                          "sluice: 1\nname: bench-six\ninput: {x: f32, y: f32}\nstages:\n"
                                          "  - map: {r2: x*x + y*y}\n  - flag: {keep: r2 < 2.0}\n  - compact: {by: keep}\n"
                                          "  - scan: {of: r2, op: sum, kind: exclusive, into: before}\n"
                                          "  - map: {z: x * 2.0 + before}\n  - filter: x > 0\noutput: [z, r2]\n",
                                          {{"x", SLUICE_F32, x, n}, {"y", SLUICE_F32, y, n}}, n);
        printf("six-stage       sluice %8.3f ms  CUB+kernels %8.3f ms  (%.2fx faster)\n", t_sl, t_cub,
               t_sl < 0 ? -1 : t_cub / t_sl);
        g_rows.push_back({"six-stage pipeline (speed-up over CUB+kernels)", fmt("%.2fx", t_sl < 0 ? -1 : t_cub / t_sl),
                          "1.00x", ">= 6x"});
    }

    // 7. Host-resident batches: the scan with host input and host output, through the
    // session's pinned staging ring, beside pinned cudaMemcpy in and out of the same bytes.
    if (want("host")) {
        int64_t hn = n / 4;
        float *hx, *hpin;
        CK(cudaMallocHost(&hpin, hn * 4));
        hx = (float *)malloc(hn * 4);
        CK(cudaMemcpy(hx, x, hn * 4, cudaMemcpyDeviceToHost));
        double t_copy_pinned = time_ms([&] {
            CK(cudaMemcpyAsync(out, hpin, hn * 4, cudaMemcpyHostToDevice, g_stream));
            CK(cudaMemcpyAsync(hpin, out, hn * 4, cudaMemcpyDeviceToHost, g_stream));
        });
        double t_sl = -1;
        sluice_job j;
        if (!getenv("GPU_BENCH_ONLY_SORT") && sluice_context_create(&j.ctx, nullptr) == SLUICE_OK) {
            const char *yaml = "sluice: 1\nname: bench-host\ninput: {x: f32}\nstages:\n"
                               "  - scan: {of: x, op: sum, kind: exclusive, into: s}\noutput: [s]\n";
            sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
            so.backend = SLUICE_BACKEND_CUDA;
            so.max_batch_rows = hn;
            so.pipeline_depth = bench_depth();
            if (sluice_pipeline_load_string(j.ctx, yaml, strlen(yaml), "bench", &j.p) == SLUICE_OK &&
                sluice_session_open(j.p, &so, &j.s) == SLUICE_OK) {
                sluice_column c = {"x", SLUICE_F32, hx, hn};
                t_sl = time_ms([&] {
                    sluice_batch *b = nullptr;
                    if (sluice_session_push(j.s, &c, 1) != SLUICE_OK) j.failed = true;
                    while (sluice_session_pull_wait(j.s, &b, -1) == SLUICE_OK && b) sluice_batch_free(b);
                });
                if (j.failed) t_sl = -1;
            }
            sluice_close(j);
        }
        printf("host batches    sluice scan %8.3f ms  pinned copy in+out %8.3f ms (%.2fx of pinned copy time), %lld rows\n",
               t_sl, t_copy_pinned, t_sl < 0 ? -1 : t_sl / t_copy_pinned, (long long)hn);
        g_rows.push_back({std::string("host-resident scan, 2^") + std::to_string(lg - 2) + " rows (time / pinned copy in+out)",
                          fmt("%.2fx", t_sl < 0 ? -1 : t_sl / t_copy_pinned), "", ""});
        CK(cudaFreeHost(hpin));
        free(hx);
    }

    // 8. reduce (issue 10 item 6): the f32 sum of the whole batch, per offsets segment (average
    // 1000 and 8 rows) and per run of equal keys, each one sluice pass beside CUB's call.
    // `per: batch` makes every push emit its rows (a stream-wide reduce emits at flush only).
    if (want("reduce")) {
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] { CK(cub::DeviceReduce::Sum(tmp, b, x, out, n, g_stream)); });
        int64_t rows = -1;
        const double t_sl = sluice_job_ms("reduce",
                                          "sluice: 1\nname: bench-reduce\ninput: {x: f32}\nstages:\n"
                                          "  - reduce: {values: [{op: sum, of: x, into: s}], per: batch}\noutput: [s]\n",
                                          {{"x", SLUICE_F32, x, n}}, n, &rows);
        if (t_sl >= 0 && rows != 1) printf("sluice reduce gave %lld rows, want 1\n", (long long)rows);
        double jb = 4.0 * n;
        printf("reduce sum      sluice %8.3f ms (%5.1f%% copy)  CUB DeviceReduce::Sum %8.3f ms (%5.1f%% copy)\n",
               t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({"reduce: f32 sum of the batch (% of copy)", fmt("%.1f%%", pct(jb, t_sl)),
                          fmt("%.1f%%", pct(jb, t_cub)), ">= CUB"});
    }
    for (const segment_mix &mix : k_segment_mixes) {
        if (!want_mix(mix)) continue;
        if (!want("segreduce")) break;
        std::vector<int64_t> off;
        std::vector<int> keys;
        make_segments(n, mix, off, keys);
        int64_t *doff;
        const int64_t nseg = (int64_t)off.size() - 1;
        CK(cudaMalloc(&doff, off.size() * 8));
        CK(cudaMemcpy(doff, off.data(), off.size() * 8, cudaMemcpyHostToDevice));
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] {
            CK(cub::DeviceSegmentedReduce::Sum(tmp, b, x, out, nseg, doff, doff + 1, g_stream));
        });
        int64_t rows = -1;
        const double t_sl = sluice_job_ms(
            "segmented reduce",
            "sluice: 1\nname: bench-segreduce\ninput:\n  rows: {type: i64, role: offsets}\n  x: f32\n"
            "stages:\n  - reduce: {segments: rows, values: [{op: sum, of: x, into: s}]}\noutput: [s]\n",
            {{"rows", SLUICE_I64, doff, (int64_t)off.size()}, {"x", SLUICE_F32, x, n}}, n, &rows);
        if (t_sl >= 0 && rows != nseg)
            printf("sluice segmented reduce gave %lld rows, want %lld\n", (long long)rows, (long long)nseg);
        double jb = 4.0 * n + 8.0 * off.size() + 4.0 * nseg;
        printf("segreduce %-8s sluice %8.3f ms (%5.1f%% copy)  CUB DeviceSegmentedReduce::Sum %8.3f ms (%5.1f%% copy)\n",
               mix.name, t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({std::string("reduce: sum per offsets segment, ") + mix.name + " (% of copy)",
                          fmt("%.1f%%", pct(jb, t_sl)), fmt("%.1f%%", pct(jb, t_cub)), ">= CUB"});
        CK(cudaFree(doff));
    }
    for (const segment_mix &mix : k_segment_mixes) {
        if (!want_mix(mix)) continue;
        if (!want("reducebykey")) break;
        std::vector<int64_t> off;
        std::vector<int> keys;
        make_segments(n, mix, off, keys);
        int *dkeys, *ukeys;
        int64_t *nruns;
        const int64_t nseg = (int64_t)off.size() - 1;
        CK(cudaMalloc(&dkeys, n * 4));
        CK(cudaMalloc(&ukeys, n * 4));
        CK(cudaMalloc(&nruns, 8));
        CK(cudaMemcpy(dkeys, keys.data(), n * 4, cudaMemcpyHostToDevice));
        size_t b = tmp_bytes;
        double t_cub = time_ms([&] {
            CK(cub::DeviceReduce::ReduceByKey(tmp, b, dkeys, ukeys, x, out, nruns, cuda::std::plus<>(), n, g_stream));
        });
        /* sluice's time for a reduce by key over k and x; -1 when it failed or gave the wrong
           number of runs */
        auto time_sluice = [&](const char *yaml, const char *what) {
            int64_t rows = -1;
            double t = sluice_job_ms(what, yaml, {{"k", SLUICE_I32, dkeys, n}, {"x", SLUICE_F32, x, n}}, n, &rows);
            if (t >= 0 && rows != nseg) {
                printf("sluice %s gave %lld rows, want %lld\n", what, (long long)rows, (long long)nseg);
                t = -1;
            }
            return t;
        };
        const double t_sl = time_sluice("sluice: 1\nname: bench-reducebykey\ninput: {k: i32, x: f32}\nstages:\n"
                                        "  - reduce: {segments: {key: k}, values: [{op: sum, of: x, into: s}], per: batch}\n"
                                        "output: [k, s]\n", "reduce by key");
        double jb = 8.0 * n + 8.0 * nseg;
        printf("reducebykey %-8s sluice %8.3f ms (%5.1f%% copy)  CUB ReduceByKey %8.3f ms (%5.1f%% copy)\n",
               mix.name, t_sl, pct(jb, t_sl), t_cub, pct(jb, t_cub));
        g_rows.push_back({std::string("reduce: sum per run of keys, ") + mix.name + " (% of copy)",
                          fmt("%.1f%%", pct(jb, t_sl)), fmt("%.1f%%", pct(jb, t_cub)), ">= CUB"});
        /* the key made by a map in the same pass (k + 1: the same runs); CUB does the same
           work with the key made by a transform iterator as ReduceByKey reads it */
        const double t_made = time_sluice("sluice: 1\nname: bench-reducebykey-made\ninput: {k: i32, x: f32}\nstages:\n"
                                          "  - map: {g: k + 1}\n"
                                          "  - reduce: {segments: {key: g}, values: [{op: sum, of: x, into: s}], per: batch}\n"
                                          "output: [g, s]\n", "reduce by a made key");
        const auto made_keys = thrust::make_transform_iterator(dkeys, plus_one());
        b = tmp_bytes;
        double t_cub_made = time_ms([&] {
            CK(cub::DeviceReduce::ReduceByKey(tmp, b, made_keys, ukeys, x, out, nruns, cuda::std::plus<>(), n, g_stream));
        });
        printf("reducebykey made %-8s sluice %8.3f ms (%5.1f%% copy)  CUB ReduceByKey (key made by a transform iterator) %8.3f ms (keys given: %.3f ms)\n",
               mix.name, t_made, pct(jb, t_made), t_cub_made, t_cub);
        g_rows.push_back({std::string("reduce: sum per run of a key a map makes, ") + mix.name + " (% of copy)",
                          fmt("%.1f%%", pct(jb, t_made)), fmt("%.1f%%", pct(jb, t_cub_made)), ">= CUB"});
        CK(cudaFree(dkeys));
        CK(cudaFree(ukeys));
        CK(cudaFree(nruns));
    }
    yaml_jobs(n, copy_bw);

    printf("\n| job (2^%d rows) | sluice | CUB | bar |\n|---|---|---|---|\n", lg);
    printf("| device-to-device copy | | %.1f GB/s | |\n", copy_bw / 1e9);
    for (auto &r : g_rows) printf("| %s | %s | %s | %s |\n", r.job.c_str(), r.sluice.c_str(), r.cub.c_str(), r.bar.c_str());
    return 0;
}
