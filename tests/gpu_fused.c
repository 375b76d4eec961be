/* gpu_fused.c — the fused single-pass kernels on a real GPU, driven directly through
 * core/cuda/fused.h (no CUDA backend in between), compared with the CPU backend on the same
 * stream cut into the same batches: every stage kind, builtin operators over several types,
 * linrec, a declared operator, segments by offsets / head flag / key, chained look-backs,
 * the six-stage pipeline; sizes 0, 1, 31, 32, 33, a tile ±1 and large; carries across
 * batches; each pipeline again under `determinism: run_to_run`. Integers must match
 * exactly, floats within a relative tolerance.
 * Exits 77 (skipped) where no GPU is present. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>

#include "common/context.h"
#include "cuda/fused.h"
#include "plan/plan.h"

static int device_arch(void) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major * 10 + minor;
}

#define CK_CUDA(x)                                                                          \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #x, cudaGetErrorString(e_));            \
    } while (0)

/* A stream of batches: host columns for every pipeline input, batch by batch. */
typedef struct stream_data {
    int nbatches;
    int64_t rows[8];
    void *cols[8][16];     /* [batch][input] */
    int64_t nseg[8];
} stream_data;

static void fill_random(tu_rng *r, sluice_type t, void *data, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case SLUICE_BOOL: ((uint8_t *)data)[i] = (uint8_t)(tu_rng_next(r) % 3 == 0); break;
        case SLUICE_I8: ((int8_t *)data)[i] = (int8_t)tu_rng_range(r, -4, 4); break;
        case SLUICE_I16: ((int16_t *)data)[i] = (int16_t)tu_rng_range(r, -100, 100); break;
        case SLUICE_I32: ((int32_t *)data)[i] = (int32_t)tu_rng_range(r, -1000, 1000); break;
        case SLUICE_I64: ((int64_t *)data)[i] = tu_rng_range(r, -100000, 100000); break;
        case SLUICE_U8: ((uint8_t *)data)[i] = (uint8_t)tu_rng_range(r, 0, 3); break;
        case SLUICE_U16: ((uint16_t *)data)[i] = (uint16_t)tu_rng_range(r, 0, 3); break;
        case SLUICE_U32: ((uint32_t *)data)[i] = (uint32_t)tu_rng_next(r); break;
        case SLUICE_U64: ((uint64_t *)data)[i] = tu_rng_next(r); break;
        case SLUICE_F16: ((uint16_t *)data)[i] = (uint16_t)(0x3800 + tu_rng_range(r, 0, 0x400)); break;
        case SLUICE_F32: ((float *)data)[i] = (float)(tu_rng_uniform(r) * 2.0 - 0.9); break;
        case SLUICE_F64: ((double *)data)[i] = tu_rng_uniform(r) * 2.0 - 0.9; break;
        default: break;
        }
    }
}

static void make_stream(tu_rng *r, const sluice_pipeline *p, const int64_t *cuts, int nbatches,
                        stream_data *sd) {
    memset(sd, 0, sizeof *sd);
    sd->nbatches = nbatches;
    for (int b = 0; b < nbatches; b++) {
        int64_t n = cuts[b];
        sd->rows[b] = n;
        for (int c = 0; c < p->ninputs; c++) {
            const sl_column *col = &p->columns[c];
            if (col->role == SLUICE_ROLE_OFFSETS) {
                /* segments of 1..12 rows, some empty */
                int64_t *o = malloc((size_t)(n + 2) * sizeof *o);
                int64_t k = 0, at = 0;
                o[k++] = 0;
                while (at < n) {
                    int64_t len = tu_rng_range(r, 0, 12);
                    at = at + len > n ? n : at + len;
                    o[k++] = at;
                }
                if (n == 0) o[k++] = 0; /* one empty segment */
                sd->nseg[b] = k - 1;
                sd->cols[b][c] = o;
            } else {
                void *d = malloc((size_t)(n ? n : 1) * sluice_type_size(col->type));
                fill_random(r, col->type, d, n);
                sd->cols[b][c] = d;
            }
        }
    }
}

static void free_stream(const sluice_pipeline *p, stream_data *sd) {
    for (int b = 0; b < sd->nbatches; b++)
        for (int c = 0; c < p->ninputs; c++) free(sd->cols[b][c]);
}

/* Host result: per pipeline output, the concatenated column. */
typedef struct result {
    int64_t rows;
    void *cols[32];
} result;

static void append(void **dst, int64_t *have, const void *src, int64_t n, size_t sz) {
    *dst = realloc(*dst, (size_t)(*have + n + 1) * sz);
    memcpy((char *)*dst + (size_t)*have * sz, src, (size_t)n * sz);
}

static void run_cpu(sluice_pipeline *p, const stream_data *sd, result *out) {
    memset(out, 0, sizeof *out);
    sluice_session_options opt = SLUICE_SESSION_OPTIONS_INIT;
    opt.backend = SLUICE_BACKEND_CPU;
    sluice_session *s = NULL;
    ck_assert_int_eq(sluice_session_open(p, &opt, &s), SLUICE_OK);
    for (int b = 0; b < sd->nbatches; b++) {
        sluice_column cols[16];
        for (int c = 0; c < p->ninputs; c++) {
            cols[c].name = p->columns[c].name;
            cols[c].type = p->columns[c].type;
            cols[c].data = sd->cols[b][c];
            cols[c].length = p->columns[c].role == SLUICE_ROLE_OFFSETS ? sd->nseg[b] + 1 : sd->rows[b];
        }
        sluice_status st = sluice_session_push(s, cols, (size_t)p->ninputs);
        if (st != SLUICE_OK) tu_print_diags(p->ctx);
        ck_assert_int_eq(st, SLUICE_OK);
    }
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        int64_t have = out->rows;
        for (int k = 0; k < p->noutputs; k++) {
            sluice_column col;
            ck_assert_int_eq(sluice_batch_column(b, (size_t)k, &col), SLUICE_OK);
            int64_t h = have;
            append(&out->cols[k], &h, col.data, col.length, sluice_type_size(col.type));
        }
        out->rows += sluice_batch_rows(b);
        sluice_batch_free(b);
    }
    sluice_session_close(s);
}

/* The same stream through the fused kernel of group 0 (the pipeline must be one group). */
static void run_gpu(sluice_pipeline *p, const stream_data *sd, result *out) {
    sluice_context *ctx = p->ctx;
    memset(out, 0, sizeof *out);
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    ck_assert_int_eq(plan.ngroups, 1);
    sl_cuda_group *g = NULL;
    sluice_status st = sl_cuda_group_prepare(ctx, p, &plan, 0, device_arch(), &g);
    if (st != SLUICE_OK) tu_print_diags(ctx);
    ck_assert_int_eq(st, SLUICE_OK);
    const sl_cuda_group_layout *L = sl_cuda_group_layout_of(g);
    int64_t max_rows = 1;
    for (int b = 0; b < sd->nbatches; b++)
        if (sd->rows[b] > max_rows) max_rows = sd->rows[b];
    /* two carries, read and written in turn: a run never updates its carry in place (fused.h) */
    void *carry[2] = {NULL, NULL}, *scratch = NULL, *count = NULL;
    CK_CUDA(cudaMalloc(&carry[0], L->carry_bytes));
    CK_CUDA(cudaMalloc(&carry[1], L->carry_bytes));
    CK_CUDA(cudaMemcpy(carry[0], sl_cuda_group_carry_identity(g), L->carry_bytes, cudaMemcpyHostToDevice));
    size_t sb = sl_cuda_group_scratch_size(g, max_rows);
    CK_CUDA(cudaMalloc(&scratch, sb ? sb : 256));
    CK_CUDA(cudaMalloc(&count, 8));
    void *din[16] = {0}, *dout[32] = {0};
    for (int k = 0; k < L->ninputs; k++)
        CK_CUDA(cudaMalloc(&din[k], (size_t)(max_rows + 2) * 8));
    for (int k = 0; k < L->noutputs; k++)
        CK_CUDA(cudaMalloc(&dout[k], (size_t)(max_rows + 1) * 8));

    for (int b = 0; b < sd->nbatches; b++) {
        int64_t n = sd->rows[b];
        for (int k = 0; k < L->ninputs; k++) {
            int c = L->inputs[k];
            size_t bytes = p->columns[c].role == SLUICE_ROLE_OFFSETS
                               ? (size_t)(sd->nseg[b] + 1) * 8
                               : (size_t)n * sluice_type_size(p->columns[c].type);
            if (bytes) CK_CUDA(cudaMemcpy(din[k], sd->cols[b][c], bytes, cudaMemcpyHostToDevice));
        }
        sl_cuda_group_io io = {n, sd->nseg[b] ? sd->nseg[b] : -1, (const void *const *)din, dout,
                               NULL, carry[b % 2], carry[(b + 1) % 2], scratch, (int64_t *)count};
        bool has_offsets = false;
        for (int c = 0; c < p->ninputs; c++) has_offsets |= p->columns[c].role == SLUICE_ROLE_OFFSETS;
        if (has_offsets) io.nsegments = sd->nseg[b];
        sl_value params[8];
        for (int k = 0; k < p->nparams && k < 8; k++) params[k] = p->params[k].default_value;
        io.params = params;
        st = sl_cuda_group_run(ctx, g, NULL, &io);
        if (st != SLUICE_OK) tu_print_diags(ctx);
        ck_assert_int_eq(st, SLUICE_OK);
        CK_CUDA(cudaDeviceSynchronize());
        int64_t kept = n;
        if (L->compacts) CK_CUDA(cudaMemcpy(&kept, count, 8, cudaMemcpyDeviceToHost));
        ck_assert_int_ge(kept, 0);
        ck_assert_int_le(kept, n);
        for (int k = 0; k < p->noutputs; k++) {
            int c = p->outputs[k];
            size_t sz = sluice_type_size(p->columns[c].type);
            void *host = malloc((size_t)(kept ? kept : 1) * sz);
            int slot = -1;
            for (int j = 0; j < L->noutputs; j++)
                if (L->outputs[j] == c) slot = j;
            if (slot >= 0) {
                if (kept) CK_CUDA(cudaMemcpy(host, dout[slot], (size_t)kept * sz, cudaMemcpyDeviceToHost));
            } else {
                bool pass = false;
                for (int j = 0; j < L->npassthrough; j++) pass |= L->passthrough[j] == c;
                ck_assert_msg(pass && c < p->ninputs, "output column %d neither written nor passed through", c);
                memcpy(host, sd->cols[b][c], (size_t)kept * sz);
            }
            int64_t have = out->rows;
            append(&out->cols[k], &have, host, kept, sz);
            free(host);
        }
        out->rows += kept;
    }
    for (int k = 0; k < L->ninputs; k++) cudaFree(din[k]);
    for (int k = 0; k < L->noutputs; k++) cudaFree(dout[k]);
    cudaFree(carry[0]);
    cudaFree(carry[1]);
    cudaFree(scratch);
    cudaFree(count);
    sl_cuda_group_free(ctx, g);
    sl_plan_free(ctx, &plan);
}

static double as_double(sluice_type t, const void *d, int64_t i) {
    switch (t) {
    case SLUICE_F32: return ((const float *)d)[i];
    case SLUICE_F64: return ((const double *)d)[i];
    default: return 0;
    }
}

static void compare(const sluice_pipeline *p, const result *cpu, const result *gpu, const char *what) {
    ck_assert_msg(cpu->rows == gpu->rows, "%s: %lld rows on the CPU, %lld on the GPU", what,
                  (long long)cpu->rows, (long long)gpu->rows);
    for (int k = 0; k < p->noutputs; k++) {
        const sl_column *col = &p->columns[p->outputs[k]];
        size_t sz = sluice_type_size(col->type);
        int bad = 0;
        for (int64_t i = 0; i < cpu->rows && bad < 5; i++) {
            const char *a = (const char *)cpu->cols[k] + (size_t)i * sz;
            const char *b = (const char *)gpu->cols[k] + (size_t)i * sz;
            bool same;
            if (col->type == SLUICE_F32 || col->type == SLUICE_F64) {
                double x = as_double(col->type, cpu->cols[k], i), y = as_double(col->type, gpu->cols[k], i);
                double tol = (col->type == SLUICE_F32 ? 2e-3 : 1e-9) * (1.0 + fabs(x)) +
                             (col->type == SLUICE_F32 ? 1e-6 : 1e-12) * (double)i;
                same = (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= tol;
                if (!same)
                    fprintf(stderr, "%s: column %s row %lld: cpu %.9g gpu %.9g\n", what, col->name,
                            (long long)i, x, y);
            } else {
                same = memcmp(a, b, sz) == 0;
                if (!same) {
                    uint64_t x = 0, y = 0;
                    memcpy(&x, a, sz);
                    memcpy(&y, b, sz);
                    fprintf(stderr, "%s: column %s row %lld: cpu 0x%llx gpu 0x%llx\n", what, col->name,
                            (long long)i, (unsigned long long)x, (unsigned long long)y);
                }
            }
            bad += !same;
        }
        ck_assert_msg(bad == 0, "%s: column %s differs between CPU and GPU", what, col->name);
    }
}

static void free_result(result *r) {
    for (int k = 0; k < 32; k++) free(r->cols[k]);
}

static bool have_gpu(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* Runs the pipeline over batch cuts `cuts` on both sides and compares. */
static void check_pipeline(const char *yaml, const int64_t *cuts, int nbatches, uint64_t seed) {
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    tu_rng r;
    tu_rng_seed(&r, seed);
    stream_data sd;
    make_stream(&r, p, cuts, nbatches, &sd);
    result cpu, gpu;
    run_cpu(p, &sd, &cpu);
    run_gpu(p, &sd, &gpu);
    char what[256];
    snprintf(what, sizeof what, "%s (batches of %lld%s)", sluice_pipeline_name(p), (long long)cuts[0],
             nbatches > 1 ? ", …" : "");
    compare(p, &cpu, &gpu, what);
    free_result(&cpu);
    free_result(&gpu);
    free_stream(p, &sd);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

static const char *const pipelines[] = {
    "sluice: 1\nname: excl-sum\ninput:\n  x: f32\nstages:\n"
    "  - scan: {of: x, op: sum, kind: exclusive, into: y}\n",
    "sluice: 1\nname: filter\ninput:\n  x: f32\n  id: u32\nstages:\n  - filter: x > 0\n",
    "sluice: 1\nname: linrec\ninput:\n  a: f32\n  b: f32\nstages:\n"
    "  - scan: {op: linrec, a: a * 0.5 + 0.5, b: b, into: h}\n",
    "sluice: 1\nname: ragged\ninput:\n  v: f32\n  rows: {type: i64, role: offsets}\nstages:\n"
    "  - segmented_scan: {of: v, op: sum, segments: rows, into: c}\n"
    "  - segmented_scan: {of: v, op: max, segments: rows, kind: exclusive, into: m}\n",
    "sluice: 1\nname: six\ninput:\n  x: f32\n  y: f32\nstages:\n"
    "  - map: {r2: x*x + y*y}\n  - flag: {near: r2 < 0.5}\n  - compact: {by: near}\n"
    "  - scan: {op: count, kind: exclusive, into: acc}\n  - map: {z: acc % 3}\n"
    "  - filter: z != 1\n",
    "sluice: 1\nname: int-ops\ninput:\n  x: i32\n  u: u8\n  k: u16\n  h: bool\nstages:\n"
    "  - scan: {of: x, op: sum, into: s}\n  - scan: {of: x, op: prod, kind: exclusive, into: p}\n"
    "  - scan: {of: x, op: min, into: mn}\n  - scan: {of: x, op: max, kind: exclusive, into: mx}\n"
    "  - scan: {of: u, op: and, into: a}\n  - scan: {of: u, op: or, into: o}\n"
    "  - scan: {of: x, op: xor, reset: batch, into: xo}\n"
    "  - segmented_scan: {of: x, op: sum, segments: h, kind: exclusive, into: hs}\n"
    "  - segmented_scan: {of: x, op: max, segments: {key: k}, into: ks}\n"
    "  - segmented_scan: {op: count, segments: {key: k}, kind: exclusive, into: kc}\n"
    "  - scan: {of: h, op: or, into: hb}\n",
    "sluice: 1\nname: f64-ops\ninput:\n  x: f64\n  h: f16\nstages:\n"
    "  - scan: {of: x, op: sum, into: s}\n  - scan: {of: x, op: min, kind: exclusive, into: mn}\n"
    "  - scan: {of: h, op: sum, into: hs}\n  - scan: {of: x, op: max, into: mx}\n",
    "sluice: 1\nname: chained\ninput:\n  x: i64\nstages:\n"
    "  - scan: {of: x, op: sum, into: s}\n  - scan: {of: s, op: max, into: m}\n"
    "  - filter: m - s < 50000\n  - scan: {op: count, into: c}\n",
    "sluice: 1\nname: affine\ninput:\n  d: f32\n  u: f32\n  g: bool\n"
    "operators:\n  affine:\n    state: {a: f32, b: f32}\n    identity: {a: 1.0, b: 0.0}\n"
    "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\nstages:\n"
    "  - scan: {op: affine, of: {a: d * 0.5 + 0.5, b: u}, into: {b: h}}\n"
    "  - segmented_scan: {op: affine, of: {a: d * 0.25 + 0.75, b: u}, segments: g, kind: exclusive, "
    "into: {a: pa, b: pb}}\n",
    "sluice: 1\nname: params\nparams:\n  lim: {type: f32, default: 0.25}\n  k: {type: i32, default: -3}\n"
    "  h: {type: f16, default: 1.5}\n  b: {type: bool, default: true}\n  w: {type: u8, default: 200}\n"
    "input:\n  x: f32\n  id: u32\nstages:\n"
    "  - map: {y: i64(id % 1000) * i64(k) + i64(w), z: f32(h) * x, c: b && x < lim}\n"
    "  - filter: x > -lim\n  - scan: {of: y, op: sum, into: ys}\n",
    "sluice: 1\nname: siblings\ninput:\n  x: f32\nstages:\n"
    "  - map: {a: x + 1, c: a * a, b: c - a}\n  - scan: {of: b, op: sum, into: s}\noutput: [s]\n",
    /* counts of the kept rows (codegen.c derive_counts: the compaction's count plus the
       carry's), exclusive and inclusive, beside a float sum in their phase */
    "sluice: 1\nname: cull\ninput:\n  x: f32\n  y: f32\n  id: u64\nstages:\n"
    "  - map: {r2: x*x + y*y}\n  - flag: {visible: r2 <= 0.7}\n  - compact: {by: visible}\n"
    "  - scan: {op: count, kind: exclusive, into: slot}\n  - scan: {op: count, into: n}\n"
    "  - scan: {of: r2, op: sum, into: area}\n",
    /* a count before the compactions and one between them (not derived), one after both */
    "sluice: 1\nname: counts\ninput:\n  x: i32\n  k: u16\nstages:\n"
    "  - scan: {op: count, into: all}\n  - filter: x % 3 != 0\n  - scan: {op: count, into: mid}\n"
    "  - filter: (k & 1) == 0\n  - scan: {op: count, kind: exclusive, into: slot}\n",
    /* one plain scan over 1- and 2-byte columns: tiles in rounds (codegen.c rounds_of: 4 for
       1-byte rows, 2 for 2-byte ones or an f32 made from 1-byte ones), values held widened
       (widen_narrow_fields: a wrapping i16 sum holds more than its bits) */
    "sluice: 1\nname: i8-max\ninput:\n  x: i8\nstages:\n  - scan: {of: x, op: max, into: m}\n",
    "sluice: 1\nname: bool-xor\ninput:\n  h: bool\nstages:\n"
    "  - scan: {of: h, op: xor, kind: exclusive, into: e}\n",
    "sluice: 1\nname: u16-min\ninput:\n  k: u16\nstages:\n"
    "  - scan: {of: k, op: min, kind: exclusive, into: lo}\n",
    "sluice: 1\nname: i16-sum\ninput:\n  x: i16\nstages:\n  - scan: {of: x, op: sum, acc: i16, into: s}\n",
    "sluice: 1\nname: i8-f32\ninput:\n  x: i8\nstages:\n  - map: {y: f32(x) * 0.5}\n"
    "  - scan: {of: y, op: sum, into: s}\n",
    /* packed 1- and 2-byte items (kernels/sl_items.cuh): a u8 read with zero fill, i16 with
       sign, u8 and i16 columns side by side in one thread's registers */
    "sluice: 1\nname: u8-max\ninput:\n  u: u8\nstages:\n  - scan: {of: u, op: max, into: m}\n",
    "sluice: 1\nname: i16-u8\ninput:\n  x: i16\n  u: u8\nstages:\n"
    "  - scan: {of: x, op: min, into: lo}\n  - scan: {of: u, op: sum, acc: u8, kind: exclusive, into: us}\n"
    "  - map: {d: x - i16(u)}\n",
};
#define NPIPELINES ((int)(sizeof pipelines / sizeof pipelines[0]))

/* Sizes: 0, 1, warp edges, tile edges (4096 rows for 4-byte columns, 2048 for 8-byte), large */
static const int64_t sizes[] = {0, 1, 31, 32, 33, 2047, 2048, 2049, 4095, 4096, 4097, 100003, 1 << 22};

/* Under compute-sanitizer (SLUICE_TEST_SMALL set) the large sizes are skipped. */
static bool small_only(void) { return getenv("SLUICE_TEST_SMALL") != NULL; }

START_TEST(one_batch_every_size) {
    if (!have_gpu()) return;
    if (small_only() && sizes[_i] > 5000) return;
    for (int p = 0; p < NPIPELINES; p++) check_pipeline(pipelines[p], &sizes[_i], 1, 1000u + (uint64_t)_i);
}
END_TEST

START_TEST(batches_carry_state) {
    if (!have_gpu()) return;
    int64_t cuts[] = {5000, 1, 0, 33, 70001, 4096};
    if (small_only()) cuts[4] = 700;
    for (int p = 0; p < NPIPELINES; p++) check_pipeline(pipelines[p], cuts, 6, 77u + (uint64_t)p);
}
END_TEST

/* One large batch (100003 rows under SLUICE_TEST_SMALL, else 2^22), then batches cut at
 * edges with the carries across them, against the CPU. */
static void check_large_and_cut(const char *yaml, uint64_t seed) {
    const int64_t one[] = {small_only() ? 100003 : 1 << 22};
    int64_t cuts[] = {5000, 1, 0, 33, 70001, 4096};
    if (small_only()) cuts[4] = 700;
    check_pipeline(yaml, one, 1, seed);
    check_pipeline(yaml, cuts, 6, seed + 100);
}

/* The same pipelines under `determinism: run_to_run` (the ordered look-back for rounding
 * combines, kernels/sl_lookback.cuh): the same comparison with the CPU, one large batch and
 * the carries across batches. gpu_determinism checks that such runs agree bit for bit. */
static void check_run_to_run(const char *yaml, uint64_t seed) {
    const char *after = strstr(yaml, "\n");
    ck_assert_ptr_nonnull(after);
    size_t head = (size_t)(after + 1 - yaml);
    char text[4096];
    ck_assert_uint_lt(strlen(yaml) + 32, sizeof text);
    snprintf(text, sizeof text, "%.*sdeterminism: run_to_run\n%s", (int)head, yaml, yaml + head);
    check_large_and_cut(text, seed);
}

START_TEST(run_to_run_matches_cpu) {
    if (!have_gpu()) return;
    check_run_to_run(pipelines[_i], 500u + (uint64_t)_i);
}
END_TEST

/* Bool bytes other than 0 and 1 (issue 9, part 3; added by the CPU/expression engineer): the
 * GPU reads any byte other than 0 as true in keys, head flags, compaction flags, expressions
 * and scans, and computes bools as 0 or 1, as the CPU does; b reaches the output with its own
 * bytes. The stream's true bytes become 1, 2 or 255 before both sides run. */
START_TEST(bool_bytes_match_cpu) {
    if (!have_gpu()) return;
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: bool-bytes\ninput:\n  b: bool\n  x: i32\nstages:\n"
        "  - map: {m: b, t: 'x > 0 ? b : false'}\n"
        "  - segmented_scan: {of: x, op: sum, segments: {key: b}, into: s}\n"
        "  - segmented_scan: {op: count, segments: b, into: h}\n"
        "  - scan: {of: b, op: xor, into: xo}\n  - compact: {by: b}\n");
    const int64_t cuts[] = {5000, 1, 0, 33, 70001};
    tu_rng r;
    tu_rng_seed(&r, 77);
    stream_data sd;
    make_stream(&r, p, cuts, 5, &sd);
    static const uint8_t truthy[3] = {1, 2, 255};
    for (int b = 0; b < sd.nbatches; b++)
        for (int64_t i = 0; i < sd.rows[b]; i++)
            if (((uint8_t *)sd.cols[b][0])[i]) ((uint8_t *)sd.cols[b][0])[i] = truthy[tu_rng_next(&r) % 3];
    result cpu, gpu;
    run_cpu(p, &sd, &cpu);
    run_gpu(p, &sd, &gpu);
    compare(p, &cpu, &gpu, "bool-bytes");
    free_result(&cpu);
    free_result(&gpu);
    free_stream(p, &sd);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A run never updates its carry in place (core/cuda/fused.h: blocks may read the carry after
 * the last tile wrote the next one): one buffer as carry_in and carry_out is refused before
 * anything is queued, for a batch with rows and an empty one. */
START_TEST(carry_in_place_is_refused) {
    if (!have_gpu()) return;
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, pipelines[NPIPELINES - 2]); /* cull */
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    sl_cuda_group *g = NULL;
    ck_assert_int_eq(sl_cuda_group_prepare(ctx, p, &plan, 0, device_arch(), &g), SLUICE_OK);
    const sl_cuda_group_layout *L = sl_cuda_group_layout_of(g);
    void *carry = NULL, *scratch = NULL, *count = NULL, *din[16] = {0}, *dout[32] = {0};
    CK_CUDA(cudaMalloc(&carry, L->carry_bytes));
    CK_CUDA(cudaMalloc(&scratch, sl_cuda_group_scratch_size(g, 64) + 256));
    CK_CUDA(cudaMalloc(&count, 8));
    for (int k = 0; k < L->ninputs; k++) CK_CUDA(cudaMalloc(&din[k], 64 * 8));
    for (int k = 0; k < L->noutputs; k++) CK_CUDA(cudaMalloc(&dout[k], 64 * 8));
    for (int64_t rows = 0; rows <= 64; rows += 64) {
        sl_cuda_group_io io = {rows, -1, (const void *const *)din, dout, NULL, carry, carry,
                               scratch, (int64_t *)count};
        ck_assert_int_eq(sl_cuda_group_run(ctx, g, NULL, &io), SLUICE_ERR_INVALID_ARGUMENT);
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
        ck_assert_ptr_nonnull(d);
        ck_assert_ptr_nonnull(strstr(d->message, "carry in and out"));
    }
    CK_CUDA(cudaDeviceSynchronize());
    for (int k = 0; k < L->ninputs; k++) cudaFree(din[k]);
    for (int k = 0; k < L->noutputs; k++) cudaFree(dout[k]);
    cudaFree(carry);
    cudaFree(scratch);
    cudaFree(count);
    sl_cuda_group_free(ctx, g);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* i16 and u16 max and min scans, which on sm_90 take a whole tile's rows two a word (sm_90's
 * 16x2 max and min; core/cuda/codegen.c emit_pairs), against the CPU, one large batch and the
 * carries across batches: by default, then under SLUICE_CUDA_PAIRS=0 (a row at a time, the
 * path of older GPUs). Its own case, run last: a failure leaves the setting on. */
static const char *const pairs_pipelines[] = {
    "sluice: 1\nname: i16-max\ninput:\n  x: i16\nstages:\n  - scan: {of: x, op: max, into: m}\n",
    "sluice: 1\nname: u16-min\ninput:\n  k: u16\nstages:\n"
    "  - scan: {of: k, op: min, kind: exclusive, into: lo}\n",
    "sluice: 1\nname: u16-max\ninput:\n  k: u16\nstages:\n  - scan: {of: k, op: max, into: m}\n",
    "sluice: 1\nname: i16-min\ninput:\n  x: i16\nstages:\n"
    "  - scan: {of: x, op: min, kind: exclusive, into: lo}\n",
};

START_TEST(pairs_match_cpu) {
    if (!have_gpu()) return;
    check_large_and_cut(pairs_pipelines[_i], 900u + (uint64_t)_i);
    setenv("SLUICE_CUDA_PAIRS", "0", 1);
    check_large_and_cut(pairs_pipelines[_i], 950u + (uint64_t)_i);
    unsetenv("SLUICE_CUDA_PAIRS");
}
END_TEST

int main(void) {
    /* CUDA does not survive fork(): run the cases in this process (Check forks by default). */
    setenv("CK_FORK", "no", 1);
    if (!have_gpu()) {
        printf("gpu_fused: no GPU, skipped\n");
        return 77;
    }
    Suite *s = suite_create("gpu_fused");
    TCase *tc = tcase_create("fused");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, one_batch_every_size, 0, (int)(sizeof sizes / sizeof sizes[0]));
    tcase_add_test(tc, batches_carry_state);
    suite_add_tcase(s, tc);
    tc = tcase_create("run_to_run"); /* runnable alone: CK_RUN_CASE=run_to_run */
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, run_to_run_matches_cpu, 0, NPIPELINES);
    suite_add_tcase(s, tc);
    tc = tcase_create("bool_bytes");
    tcase_add_test(tc, bool_bytes_match_cpu);
    tcase_add_test(tc, carry_in_place_is_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("pairs"); /* runnable alone: CK_RUN_CASE=pairs */
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, pairs_match_cpu, 0, (int)(sizeof pairs_pipelines / sizeof pairs_pipelines[0]));
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

#else
int main(void) {
    printf("gpu_fused: built without CUDA, skipped\n");
    return 77;
}
#endif
