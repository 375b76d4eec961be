/* gpu_determinism.c — `determinism: run_to_run` on a real GPU: every pipeline here runs
 * the same 2^26-row stream several times, cut into batches the same way each time, and
 * every output must have the same bits in every run (compared by a 64-bit checksum of each
 * output column). The stream is large so that thousands of tiles race through the
 * look-back at once: that is where an association that depends on timing shows (at 2^28
 * rows a float sum differed in every run before the ordered look-back). Covered: every
 * scan operator, f16 -> f32, f32, f64 and integer accumulators, an integer input summed in
 * f64, segments by offsets, head flag and key, declared operators, chained look-backs, a
 * compaction beside a float scan, per-batch resets; two batch cuttings (one batch; three
 * batches, two of them cut at rows that are not 16-byte aligned).
 * Only the public API is used (sluice.h, sluice_cuda.h). Values are checked against the CPU
 * elsewhere (gpu_fused); this suite checks only that runs agree. Exits 77 (skipped) where
 * no GPU is present. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>

#include "sluice_cuda.h"

#define CK_CUDA(x)                                                                          \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #x, cudaGetErrorString(e_));            \
    } while (0)

/* Rows of the stream (SLUICE_TEST_SMALL, under compute-sanitizer: 2^20). */
static int64_t stream_rows(void) { return getenv("SLUICE_TEST_SMALL") ? (1 << 20) : (1 << 26); }

#define RUNS 3

/* Every pipeline asks for run_to_run. The operators that round (float sum, prod, linrec,
 * declared) are the ones a timing-dependent association changes; the exact ones (integer,
 * min/max, bitwise, count) are here so that any other race would show too. */
/* Factors stay near 1 (x has mean 0.1, so x * 0.001 + 0.9999 has mean 1), so products
 * and recurrences neither vanish nor overflow: every tile's aggregate still matters. */
static const char *const pipelines[] = {
    "sluice: 1\nname: f32-sum\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x, op: sum, into: s}\n",
    "sluice: 1\nname: f32-sum-exclusive\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x, op: sum, kind: exclusive, into: s}\n",
    "sluice: 1\nname: f32-prod\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x * 0.001 + 0.9999, op: prod, into: p}\n",
    "sluice: 1\nname: f16-sum\ndeterminism: run_to_run\ninput: {h: f16}\nstages:\n"
    "  - scan: {of: h, op: sum, into: s}\n",
    "sluice: 1\nname: f32-linrec\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {op: linrec, a: x * 0.0001 + 0.99999, b: x, into: h}\n",
    "sluice: 1\nname: f64-sum\ndeterminism: run_to_run\ninput: {d: f64}\nstages:\n"
    "  - scan: {of: d, op: sum, into: s}\n",
    "sluice: 1\nname: f64-prod-exclusive\ndeterminism: run_to_run\ninput: {d: f64}\nstages:\n"
    "  - scan: {of: d * 0.001 + 0.9999, op: prod, kind: exclusive, into: p}\n",
    "sluice: 1\nname: f64-linrec\ndeterminism: run_to_run\ninput: {d: f64}\nstages:\n"
    "  - scan: {op: linrec, a: d * 0.0001 + 0.99999, b: d, into: h}\n",
    "sluice: 1\nname: u32-sum-in-f64\ndeterminism: run_to_run\ninput: {u: u32}\nstages:\n"
    "  - scan: {of: u, op: sum, acc: f64, into: s}\n",
    "sluice: 1\nname: exact-ops\ndeterminism: run_to_run\ninput: {x: f32, i: i32, u: u32}\n"
    "stages:\n"
    "  - scan: {of: i, op: sum, into: s}\n  - scan: {of: i, op: prod, kind: exclusive, into: p}\n"
    "  - scan: {of: x, op: min, into: mn}\n  - scan: {of: x, op: max, kind: exclusive, into: mx}\n"
    "  - scan: {of: u, op: and, into: a}\n  - scan: {of: u, op: or, into: o}\n"
    "  - scan: {of: u, op: xor, into: xo}\n  - scan: {op: count, into: c}\n",
    "sluice: 1\nname: segments-offsets\ndeterminism: run_to_run\n"
    "input:\n  rows: {type: i64, role: offsets}\n  x: f32\n  d: f64\nstages:\n"
    "  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\n"
    "  - segmented_scan: {of: d, op: sum, segments: rows, kind: exclusive, into: e}\n",
    "sluice: 1\nname: segments-flags\ndeterminism: run_to_run\ninput: {x: f32, g: bool}\n"
    "stages:\n"
    "  - segmented_scan: {of: x, op: sum, segments: g, into: s}\n"
    "  - segmented_scan: {op: linrec, a: x * 0.0001 + 0.99999, b: x, segments: g, into: h}\n",
    "sluice: 1\nname: segments-key\ndeterminism: run_to_run\ninput: {x: f32, k: u32}\nstages:\n"
    "  - segmented_scan: {of: x, op: sum, segments: {key: k}, into: s}\n",
    "sluice: 1\nname: declared-f32\ndeterminism: run_to_run\ninput: {x: f32}\n"
    "operators:\n  affine:\n    state: {a: f32, b: f32}\n    identity: {a: 1.0, b: 0.0}\n"
    "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\nstages:\n"
    "  - scan: {op: affine, of: {a: x * 0.0001 + 0.99999, b: x}, into: {b: h}}\n",
    "sluice: 1\nname: declared-f64\ndeterminism: run_to_run\ninput: {d: f64, g: bool}\n"
    "operators:\n  tally:\n    state: {n: i64, s: f64}\n    identity: {n: 0, s: 0.0}\n"
    "    combine: {n: l.n + r.n, s: l.s + r.s}\nstages:\n"
    "  - scan: {op: tally, of: {n: 1, s: d}, into: {n: n, s: s}}\n"
    "  - segmented_scan: {op: tally, of: {n: 1, s: d}, segments: g, kind: exclusive, into: "
    "{s: gs}}\n",
    /* the pipeline of issue 9 (g: k / 1000 over keys in long runs) */
    "sluice: 1\nname: issue-9\ndeterminism: run_to_run\ninput: {x: f32, k: u32}\nstages:\n"
    "  - map: {g: k / 1000}\n  - scan: {of: x, op: sum, into: s}\n"
    "  - segmented_scan: {of: x, op: sum, segments: {key: g}, into: t}\noutput: [s, t]\n",
    /* two chained look-backs (the kernel without a look-back warp) */
    "sluice: 1\nname: chained\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x, op: sum, into: s}\n  - scan: {of: s * 0.001, op: sum, into: ss}\n",
    "sluice: 1\nname: filter-then-sum\ndeterminism: run_to_run\ninput: {x: f32, d: f64}\n"
    "stages:\n  - filter: x > 0\n  - scan: {of: d, op: sum, into: s}\n",
    "sluice: 1\nname: reset-per-batch\ndeterminism: run_to_run\ninput: {x: f32}\nstages:\n"
    "  - scan: {of: x, op: sum, reset: batch, into: s}\n",
};
#define NPIPELINES ((int)(sizeof pipelines / sizeof pipelines[0]))

/* ---- the stream: every input column any pipeline reads, on the device ------------------- */

typedef struct input_column {
    const char *name;
    sluice_type type;
    void *device;
} input_column;

static input_column g_columns[] = {
    {"x", SLUICE_F32, NULL}, {"d", SLUICE_F64, NULL}, {"h", SLUICE_F16, NULL},
    {"i", SLUICE_I32, NULL}, {"u", SLUICE_U32, NULL}, {"g", SLUICE_BOOL, NULL},
    {"k", SLUICE_U32, NULL},
};
#define NCOLUMNS ((int)(sizeof g_columns / sizeof g_columns[0]))

/* Segment starts of the whole stream (row indices, ascending; 0 first): runs of 1 to
 * 50,000 rows, so most segments span several tiles and their sums cross look-backs. The
 * head flags g and the keys k describe the same runs; an offsets input takes the starts
 * inside its batch. */
static int64_t *g_starts;
static int64_t g_nstarts;

/* Batch cuttings of the stream: {rows}; the second is cut at rows that are not multiples of
 * 4 (so the batches after the first are read without the copy engine). */
#define MAX_CUTS 4
typedef struct cutting {
    int nbatches;
    int64_t rows[MAX_CUTS];
} cutting;
static cutting g_cuttings[2];

static bool g_ready;

static void fill_stream(void) {
    if (g_ready) return;
    const int64_t n = stream_rows();
    tu_rng r;
    tu_rng_seed(&r, 9);
    g_starts = malloc((size_t)(n + 1) * sizeof *g_starts);
    ck_assert_ptr_nonnull(g_starts);
    g_nstarts = 0;
    for (int64_t at = 0; at < n; at += tu_rng_range(&r, 1, 50000)) g_starts[g_nstarts++] = at;
    for (int c = 0; c < NCOLUMNS; c++) {
        size_t sz = sluice_type_size(g_columns[c].type);
        unsigned char *host = malloc((size_t)n * sz);
        ck_assert_ptr_nonnull(host);
        int64_t seg = 0;
        for (int64_t i = 0; i < n; i++) {
            while (seg + 1 < g_nstarts && g_starts[seg + 1] <= i) seg++;
            switch (g_columns[c].type) {
            case SLUICE_F32: { /* mean 0.1: running sums grow, so their rounding matters */
                float v = (float)(tu_rng_uniform(&r) * 2.0 - 0.9);
                memcpy(host + (size_t)i * 4, &v, 4);
                break;
            }
            case SLUICE_F64: {
                double v = tu_rng_uniform(&r) * 2.0 - 0.9;
                memcpy(host + (size_t)i * 8, &v, 8);
                break;
            }
            case SLUICE_F16: {
                uint16_t v = sluice_f32_to_f16((float)(tu_rng_uniform(&r) * 2.0 - 0.9));
                memcpy(host + (size_t)i * 2, &v, 2);
                break;
            }
            case SLUICE_I32: {
                int32_t v = (int32_t)tu_rng_range(&r, -1000000, 1000000);
                memcpy(host + (size_t)i * 4, &v, 4);
                break;
            }
            case SLUICE_U32: {
                /* k: the run's number times 211 (k / 1000 joins about five runs) */
                uint32_t v = strcmp(g_columns[c].name, "k") == 0 ? (uint32_t)seg * 211u
                                                                  : (uint32_t)tu_rng_next(&r);
                memcpy(host + (size_t)i * 4, &v, 4);
                break;
            }
            case SLUICE_BOOL: host[i] = g_starts[seg] == i; break;
            default: ck_abort_msg("no generator for a column type");
            }
        }
        CK_CUDA(cudaMalloc(&g_columns[c].device, (size_t)n * sz));
        CK_CUDA(cudaMemcpy(g_columns[c].device, host, (size_t)n * sz, cudaMemcpyHostToDevice));
        free(host);
    }
    g_cuttings[0] = (cutting){1, {n}};
    g_cuttings[1] = (cutting){3, {n / 2 + 4099, 3, n - (n / 2 + 4099) - 3}};
    g_ready = true;
}

static void free_stream(void) {
    for (int c = 0; c < NCOLUMNS; c++) cudaFree(g_columns[c].device);
    free(g_starts);
}

static const input_column *column_named(const char *name) {
    for (int c = 0; c < NCOLUMNS; c++)
        if (strcmp(g_columns[c].name, name) == 0) return &g_columns[c];
    ck_abort_msg("the test stream has no column %s", name);
    return NULL;
}

/* The batch's offsets (device): 0, the segment starts strictly inside [first, first + n)
 * relative to first, n. */
static int64_t *batch_offsets(int64_t first, int64_t n, int64_t *count) {
    int64_t *host = malloc((size_t)(g_nstarts + 2) * sizeof *host);
    ck_assert_ptr_nonnull(host);
    int64_t k = 0;
    host[k++] = 0;
    for (int64_t s = 0; s < g_nstarts; s++)
        if (g_starts[s] > first && g_starts[s] < first + n) host[k++] = g_starts[s] - first;
    host[k++] = n;
    int64_t *dev = NULL;
    CK_CUDA(cudaMalloc((void **)&dev, (size_t)k * sizeof *dev));
    CK_CUDA(cudaMemcpy(dev, host, (size_t)k * sizeof *dev, cudaMemcpyHostToDevice));
    /* A pageable cudaMemcpy may return before its DMA lands, and the session's non-blocking
     * stream is not ordered after the legacy stream (sluice_cuda.h): wait before the push. */
    CK_CUDA(cudaDeviceSynchronize());
    free(host);
    *count = k;
    return dev;
}

/* ---- one run: the checksum of every output column --------------------------------------- */

/* A 64-bit checksum of a byte stream, fed in pieces: four interleaved multiply-xor lanes
 * over 8-byte words (fast enough for gigabytes), the tail bytes and the length folded in. */
typedef struct checksum {
    uint64_t lane[4];
    uint64_t bytes;
    unsigned char tail[32];
    int ntail;
} checksum;

static void checksum_init(checksum *c) {
    memset(c, 0, sizeof *c);
    for (int k = 0; k < 4; k++) c->lane[k] = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
}

static void checksum_words(checksum *c, const unsigned char *p, size_t words) {
    uint64_t l0 = c->lane[0], l1 = c->lane[1], l2 = c->lane[2], l3 = c->lane[3];
    size_t w = 0;
    for (; w + 4 <= words; w += 4) {
        uint64_t v[4];
        memcpy(v, p + w * 8, 32);
        l0 = (l0 ^ v[0]) * 0x100000001b3ull;
        l1 = (l1 ^ v[1]) * 0x100000001b3ull;
        l2 = (l2 ^ v[2]) * 0x100000001b3ull;
        l3 = (l3 ^ v[3]) * 0x100000001b3ull;
    }
    for (; w < words; w++) {
        uint64_t v;
        memcpy(&v, p + w * 8, 8);
        l0 = (l0 ^ v) * 0x100000001b3ull;
    }
    c->lane[0] = l0, c->lane[1] = l1, c->lane[2] = l2, c->lane[3] = l3;
}

static void checksum_add(checksum *c, const unsigned char *p, size_t n) {
    c->bytes += n;
    while (n > 0 && c->ntail > 0 && c->ntail < 32) { /* finish a pending 32-byte group */
        c->tail[c->ntail++] = *p++;
        n--;
        if (c->ntail == 32) {
            checksum_words(c, c->tail, 4);
            c->ntail = 0;
        }
    }
    size_t groups = n / 32;
    checksum_words(c, p, groups * 4);
    p += groups * 32;
    n -= groups * 32;
    memcpy(c->tail + c->ntail, p, n);
    c->ntail += (int)n;
}

static uint64_t checksum_end(checksum *c) {
    uint64_t h = c->bytes;
    for (int k = 0; k < c->ntail; k++) h = (h ^ c->tail[k]) * 0x100000001b3ull;
    for (int k = 0; k < 4; k++) h = (h ^ c->lane[k]) * 0x9e3779b97f4a7c15ull + (h >> 29);
    return h;
}

#define MAX_OUTPUTS 16

typedef struct run_result {
    int noutputs;
    int64_t rows;
    uint64_t sum[MAX_OUTPUTS];
} run_result;

/* The pinned host buffer outputs are copied through (one batch's column at a time). */
static unsigned char *g_pinned;
static size_t g_pinned_bytes;

static void run_once(sluice_context *ctx, sluice_pipeline *p, const cutting *cut,
                     run_result *out) {
    memset(out, 0, sizeof *out);
    const size_t nin = sluice_pipeline_input_count(p);
    out->noutputs = (int)sluice_pipeline_output_count(p);
    ck_assert_int_le(out->noutputs, MAX_OUTPUTS);
    checksum sums[MAX_OUTPUTS];
    for (int k = 0; k < out->noutputs; k++) checksum_init(&sums[k]);

    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CUDA;
    so.max_batch_rows = stream_rows(); /* every batch is one launch: the most tiles racing */
    sluice_cuda_options co = SLUICE_CUDA_OPTIONS_INIT;
    co.outputs_on_device = 1;
    sluice_session *s = NULL;
    sluice_status st = sluice_cuda_session_open(p, &so, &co, &s);
    if (st != SLUICE_OK) tu_print_diags(ctx);
    ck_assert_msg(st == SLUICE_OK, "%s: opening the CUDA session: %s", sluice_pipeline_name(p),
                  sluice_status_name(st));
    cudaStream_t stream = sluice_cuda_session_stream(s);

    int64_t first = 0;
    for (int b = 0; b <= cut->nbatches; b++) {
        if (b < cut->nbatches) {
            const int64_t n = cut->rows[b];
            sluice_column cols[16];
            int64_t *offsets = NULL;
            ck_assert_uint_le(nin, 16);
            for (size_t c = 0; c < nin; c++) {
                sluice_column_info info;
                ck_assert_int_eq(sluice_pipeline_input(p, c, &info), SLUICE_OK);
                cols[c].name = info.name;
                cols[c].type = info.type;
                if (info.role == SLUICE_ROLE_OFFSETS) {
                    int64_t count = 0;
                    offsets = batch_offsets(first, n, &count);
                    cols[c].data = offsets;
                    cols[c].length = count;
                } else {
                    const input_column *ic = column_named(info.name);
                    ck_assert_int_eq(ic->type, info.type);
                    cols[c].data = (const unsigned char *)ic->device +
                                   (size_t)first * sluice_type_size(info.type);
                    cols[c].length = n;
                }
            }
            st = sluice_cuda_session_push_device(s, cols, nin);
            if (st != SLUICE_OK) tu_print_diags(ctx);
            ck_assert_msg(st == SLUICE_OK, "%s: push: %s", sluice_pipeline_name(p),
                          sluice_status_name(st));
            first += n;
            if (offsets) {
                CK_CUDA(cudaStreamSynchronize(stream));
                cudaFree(offsets);
            }
        } else {
            ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        }
        sluice_batch *batch = NULL;
        while ((st = sluice_session_pull(s, &batch)) == SLUICE_OK && batch) {
            ck_assert_int_eq((int)sluice_batch_column_count(batch), out->noutputs);
            for (int k = 0; k < out->noutputs; k++) {
                sluice_column col;
                ck_assert_int_eq(sluice_batch_column(batch, (size_t)k, &col), SLUICE_OK);
                size_t bytes = (size_t)col.length * sluice_type_size(col.type);
                ck_assert_uint_le(bytes, g_pinned_bytes);
                if (bytes) {
                    CK_CUDA(cudaMemcpyAsync(g_pinned, col.data, bytes, cudaMemcpyDeviceToHost, stream));
                    CK_CUDA(cudaStreamSynchronize(stream));
                }
                checksum_add(&sums[k], g_pinned, bytes);
            }
            out->rows += sluice_batch_rows(batch);
            sluice_batch_free(batch);
        }
        ck_assert_int_eq(st, SLUICE_OK);
    }
    sluice_session_close(s);
    for (int k = 0; k < out->noutputs; k++) out->sum[k] = checksum_end(&sums[k]);
}

START_TEST(runs_agree_bitwise) {
    fill_stream();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, pipelines[_i]);
    int differing = 0;
    char report[2048] = "";
    size_t used = 0;
    for (int c = 0; c < 2; c++) {
        run_result runs[RUNS];
        for (int r = 0; r < RUNS; r++) run_once(ctx, p, &g_cuttings[c], &runs[r]);
        for (int k = 0; k < runs[0].noutputs; k++) {
            sluice_column_info info;
            ck_assert_int_eq(sluice_pipeline_output(p, (size_t)k, &info), SLUICE_OK);
            bool same = true;
            for (int r = 1; r < RUNS; r++) same = same && runs[r].sum[k] == runs[0].sum[k] &&
                                                  runs[r].rows == runs[0].rows;
            printf("%-20s %s batch%s %-3s", sluice_pipeline_name(p), c == 0 ? "1" : "3",
                   c == 0 ? " " : "es", info.name);
            for (int r = 0; r < RUNS; r++) printf(" %016llx", (unsigned long long)runs[r].sum[k]);
            printf("  %s\n", same ? "same" : "DIFFER");
            if (!same) {
                differing++;
                if (used < sizeof report - 64)
                    used += (size_t)snprintf(report + used, sizeof report - used, " %s (%s)",
                                             info.name, c == 0 ? "one batch" : "three batches");
            }
        }
    }
    fflush(stdout);
    ck_assert_msg(differing == 0, "%s: run_to_run outputs differ between runs:%s",
                  sluice_pipeline_name(p), report);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

static bool have_gpu(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int main(void) {
    /* CUDA does not survive fork(): run the cases in this process (Check forks by default). */
    setenv("CK_FORK", "no", 1);
    if (!have_gpu()) {
        printf("gpu_determinism: no GPU, skipped\n");
        return 77;
    }
    g_pinned_bytes = (size_t)stream_rows() * 8;
    if (cudaMallocHost((void **)&g_pinned, g_pinned_bytes) != cudaSuccess) {
        fprintf(stderr, "gpu_determinism: cannot allocate %zu pinned bytes\n", g_pinned_bytes);
        return 1;
    }
    Suite *s = suite_create("gpu_determinism");
    TCase *tc = tcase_create("run_to_run");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, runs_agree_bitwise, 0, NPIPELINES);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    if (g_ready) free_stream();
    cudaFreeHost(g_pinned);
    return rc;
}

#else
int main(void) {
    printf("gpu_determinism: built without CUDA, skipped\n");
    return 77;
}
#endif
