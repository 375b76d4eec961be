/* gpu_pinned.c — pinned host memory on the CUDA backend (sluice_cuda.h, "Pinned host memory"):
 * every call of sluice_cuda_host_alloc/free/register/unregister and its errors; results of
 * scan, filter, compaction, per-batch and stream-wide sorts and an offsets input identical
 * whether the input is ordinary malloc memory (staged by one thread, or by several),
 * memory from sluice_cuda_host_alloc, or columns in the middle of a registered block, with
 * the input overwritten as soon as each push returns (the reuse rule); host result batches
 * in pinned memory, reused through the pool across many batches, held in numbers beyond
 * the pool's bound. Exits 77 without a GPU. SLUICE_TEST_SMALL=1 (compute-sanitizer runs)
 * keeps to small sizes. Rows are compared in plain loops with one assertion after each: every
 * Check assertion that passes records its place (a write to Check's log), which for millions
 * of rows took most of the suite's time. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "sluice_cuda.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAXCOLS 4

static bool g_small;

/* Whether CUDA reports p as page-locked host memory. */
static bool cuda_says_pinned(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* ---- the API and its errors ------------------------------------------------------------- */

START_TEST(test_alloc_free) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    void *p = (void *)1;
    ck_assert_int_eq(sluice_cuda_host_alloc(NULL, 64, &p), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(sluice_cuda_host_alloc(ctx, 64, NULL), SLUICE_ERR_INVALID_ARGUMENT);
    p = (void *)1;
    ck_assert_int_eq(sluice_cuda_host_alloc(ctx, 0, &p), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);

    const size_t bytes = (size_t)3 << 20;
    ck_assert_int_eq(sluice_cuda_host_alloc(ctx, bytes, &p), SLUICE_OK);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    ck_assert(cuda_says_pinned(p));
    ck_assert(cuda_says_pinned((char *)p + bytes - 1));
    memset(p, 0xab, bytes); /* all of it is writable */

    /* Wrong pointers are errors, never undefined behaviour. */
    ck_assert_int_eq(sluice_cuda_host_free(NULL, p), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, (char *)p + 64), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, p), SLUICE_ERR_INVALID_ARGUMENT);
    void *heap = malloc(4096);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, heap), SLUICE_ERR_INVALID_ARGUMENT);
    free(heap);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, NULL), SLUICE_OK);

    /* Another context does not own it. */
    sluice_context *other;
    ck_assert_int_eq(sluice_context_create(&other, NULL), SLUICE_OK);
    ck_assert_int_eq(sluice_cuda_host_free(other, p), SLUICE_ERR_INVALID_ARGUMENT);
    sluice_context_destroy(other);

    ck_assert_int_eq(sluice_cuda_host_free(ctx, p), SLUICE_OK);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, p), SLUICE_ERR_INVALID_ARGUMENT); /* double free */

    /* A block of 4 MiB or more is the context's own pages, registered with CUDA
       (core/cuda/pinned.c): the same rules, a size that is no multiple of a page, and the
       copy engine reads and writes all of it. */
    const size_t big = ((size_t)9 << 20) + 123;
    void *q = NULL, *dev = NULL;
    ck_assert_int_eq(sluice_cuda_host_alloc(ctx, big, &q), SLUICE_OK);
    ck_assert_ptr_nonnull(q);
    ck_assert(cuda_says_pinned(q));
    ck_assert(cuda_says_pinned((char *)q + big - 1));
    memset(q, 0x5a, big);
    ck_assert_int_eq(cudaMalloc(&dev, big), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dev, q, big, cudaMemcpyHostToDevice), cudaSuccess);
    memset(q, 0, big);
    ck_assert_int_eq(cudaMemcpy(q, dev, big, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaFree(dev), cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 0; i < big; i++) wrong += ((unsigned char *)q)[i] != 0x5a;
    ck_assert_uint_eq(wrong, 0);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, (char *)q + 4096), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, q), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, q), SLUICE_OK);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, q), SLUICE_ERR_INVALID_ARGUMENT);

    /* Left allocated, a small block and a large one: freed by sluice_context_destroy. */
    ck_assert_int_eq(sluice_cuda_host_alloc(ctx, 1000, &p), SLUICE_OK);
    ck_assert_int_eq(sluice_cuda_host_alloc(ctx, big, &q), SLUICE_OK);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(test_register_unregister) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    const size_t bytes = (size_t)4 << 20;
    char *block = aligned_alloc(4096, bytes);
    ck_assert_ptr_nonnull(block);

    ck_assert_int_eq(sluice_cuda_host_register(NULL, block, bytes), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, NULL, bytes), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, 0), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, (void *)(UINTPTR_MAX - 16), 4096),
                     SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert(!cuda_says_pinned(block));

    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, bytes), SLUICE_OK);
    ck_assert(cuda_says_pinned(block + bytes / 2));
    /* Overlaps: the same range, a sub-range, one reaching into it. */
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, bytes), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block + 8192, 4096), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block + bytes - 4096, 8192),
                     SLUICE_ERR_INVALID_ARGUMENT);

    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, block + 4096), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_free(ctx, block), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, NULL), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_unregister(NULL, block), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, block), SLUICE_OK);
    ck_assert(!cuda_says_pinned(block));
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, block), SLUICE_ERR_INVALID_ARGUMENT);
    char *unknown = malloc(64);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, unknown), SLUICE_ERR_INVALID_ARGUMENT);
    free(unknown);

    /* Registered again, then left to sluice_context_destroy, which unpins it: CUDA can pin
     * it afresh afterwards. */
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, bytes), SLUICE_OK);
    sluice_context_destroy(ctx);
    ck_assert(!cuda_says_pinned(block));
    ck_assert_int_eq((int)cudaHostRegister(block, bytes, cudaHostRegisterDefault), (int)cudaSuccess);
    ck_assert_int_eq((int)cudaHostUnregister(block), (int)cudaSuccess);
    free(block);
}
END_TEST

/* Memory pinned outside sluice cannot be registered again through it. */
START_TEST(test_register_pinned_elsewhere) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    const size_t bytes = 1 << 16;
    char *block = aligned_alloc(4096, bytes);
    ck_assert_int_eq((int)cudaHostRegister(block, bytes, cudaHostRegisterDefault), (int)cudaSuccess);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, bytes), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq((int)cudaHostUnregister(block), (int)cudaSuccess);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, bytes), SLUICE_OK);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, block), SLUICE_OK);
    free(block);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- results identical whatever memory the input is in --------------------------------- */

typedef enum {
    MEM_MALLOC_ONE_THREAD, /* the baseline: pageable, staged by the calling thread alone */
    MEM_MALLOC_THREADS,    /* pageable, staged by several threads */
    MEM_SLUICE,            /* sluice_cuda_host_alloc, one block per column */
    MEM_REGISTERED,        /* every column in the middle of one registered malloc block */
    MEM_KINDS
} mem_kind;
static const char *const mem_names[] = {"malloc (1 thread)", "malloc (3 threads)",
                                        "sluice_cuda_host_alloc", "registered (mid-block)"};

typedef struct host_input {
    int ncols;
    sluice_column cols[MAXCOLS];
    void *blocks[MAXCOLS]; /* what to free */
    void *registered;      /* MEM_REGISTERED: the block */
} host_input;

/* Copies the reference columns into memory of the given kind. */
static void input_place(sluice_context *ctx, mem_kind kind, const sluice_column *ref, int ncols,
                        host_input *out) {
    memset(out, 0, sizeof *out);
    out->ncols = ncols;
    size_t total = 0;
    for (int i = 0; i < ncols; i++)
        total += ((size_t)ref[i].length * sluice_type_size(ref[i].type) + 4096 + 63) & ~(size_t)63;
    char *reg = NULL;
    size_t at = 4096 + 192; /* columns start well inside the registered block */
    if (kind == MEM_REGISTERED) {
        reg = malloc(total + 8192);
        ck_assert_ptr_nonnull(reg);
        ck_assert_int_eq(sluice_cuda_host_register(ctx, reg, total + 8192), SLUICE_OK);
        out->registered = reg;
    }
    for (int i = 0; i < ncols; i++) {
        size_t bytes = (size_t)ref[i].length * sluice_type_size(ref[i].type);
        void *p;
        if (kind == MEM_REGISTERED) {
            p = reg + at;
            at += (bytes + 4096 + 63) & ~(size_t)63;
        } else if (kind == MEM_SLUICE) {
            ck_assert_int_eq(sluice_cuda_host_alloc(ctx, bytes + 64, &p), SLUICE_OK);
            out->blocks[i] = p;
        } else {
            p = malloc(bytes + 64);
            ck_assert_ptr_nonnull(p);
            out->blocks[i] = p;
        }
        if (bytes) memcpy(p, ref[i].data, bytes);
        out->cols[i] = ref[i];
        out->cols[i].data = p;
    }
}

static void input_release(sluice_context *ctx, mem_kind kind, host_input *in) {
    for (int i = 0; i < in->ncols; i++) {
        if (!in->blocks[i]) continue;
        if (kind == MEM_SLUICE) ck_assert_int_eq(sluice_cuda_host_free(ctx, in->blocks[i]), SLUICE_OK);
        else free(in->blocks[i]);
    }
    if (in->registered) {
        ck_assert_int_eq(sluice_cuda_host_unregister(ctx, in->registered), SLUICE_OK);
        free(in->registered);
    }
}

typedef struct result {
    int64_t rows;
    int ncols;
    size_t width[MAXCOLS];
    uint8_t *data[MAXCOLS];
} result;

static void result_free(result *r) {
    for (int i = 0; i < r->ncols; i++) free(r->data[i]);
    memset(r, 0, sizeof *r);
}

static void result_append(result *r, const sluice_batch *b) {
    int64_t n = sluice_batch_rows(b);
    ck_assert(!sluice_batch_on_device(b));
    r->ncols = (int)sluice_batch_column_count(b);
    ck_assert_int_le(r->ncols, MAXCOLS);
    for (int i = 0; i < r->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, (size_t)i, &c), SLUICE_OK);
        ck_assert_int_eq(c.length, n);
        r->width[i] = sluice_type_size(c.type);
        if (n > 0) ck_assert_msg(cuda_says_pinned(c.data), "result column %d is not pinned", i);
        r->data[i] = realloc(r->data[i], (size_t)(r->rows + n) * r->width[i] + 8);
        ck_assert_ptr_nonnull(r->data[i]);
        if (n) memcpy(r->data[i] + (size_t)r->rows * r->width[i], c.data, (size_t)n * r->width[i]);
    }
    r->rows += n;
}

/* Pushes `in` (cut into the given batches of rows unless it has an offsets column) through a
 * CUDA session, overwriting each batch's input as soon as its push returns, and collects
 * the results. */
static void run_one(sluice_context *ctx, sluice_pipeline *p, host_input *in, const int64_t *cuts, int ncuts,
                    bool has_offsets, int64_t max_batch_rows, result *out) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.max_batch_rows = max_batch_rows;
    sluice_session *s;
    ck_assert_int_eq(sluice_cuda_session_open(p, &so, NULL, &s), SLUICE_OK);
    memset(out, 0, sizeof *out);
    sluice_batch *b;
    int64_t first = 0;
    for (int k = 0; k <= (has_offsets ? 0 : ncuts); k++) {
        int64_t rows = has_offsets || k == ncuts ? in->cols[0].length - first : cuts[k] - first;
        sluice_column part[MAXCOLS];
        for (int i = 0; i < in->ncols; i++) {
            part[i] = in->cols[i];
            part[i].data = (const char *)in->cols[i].data +
                           (size_t)first * sluice_type_size(in->cols[i].type);
            part[i].length = rows;
        }
        if (has_offsets) part[1].length = in->cols[1].length; /* the value column: all rows */
        sluice_status st = sluice_session_push(s, part, (size_t)in->ncols);
        if (st != SLUICE_OK) tu_print_diags(ctx);
        ck_assert_int_eq(st, SLUICE_OK);
        /* The caller may reuse its memory once push returns. */
        for (int i = 0; i < in->ncols; i++)
            memset((void *)part[i].data, 0x5a, (size_t)part[i].length * sluice_type_size(part[i].type));
        while (sluice_session_pull_wait(s, &b, -1) == SLUICE_OK && b) {
            result_append(out, b);
            sluice_batch_free(b);
        }
        first += rows;
    }
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    while (sluice_session_pull_wait(s, &b, -1) == SLUICE_OK && b) {
        result_append(out, b);
        sluice_batch_free(b);
    }
    sluice_session_close(s);
}

static void assert_same(const result *want, const result *got, const char *what) {
    ck_assert_msg(got->rows == want->rows, "%s: %lld rows, the pageable path gave %lld", what,
                  (long long)got->rows, (long long)want->rows);
    ck_assert_int_eq(got->ncols, want->ncols);
    for (int i = 0; i < want->ncols; i++)
        ck_assert_msg(want->rows == 0 ||
                          memcmp(want->data[i], got->data[i], (size_t)want->rows * want->width[i]) == 0,
                      "%s: output column %d differs from the pageable path", what, i);
}

static const char *const pipelines[] = {
    /* 0: integer scan (exact), a float column passed through */
    "sluice: 1\nname: scan\ninput: {k: i32, x: f32}\nstages:\n"
    "  - scan: {of: k, op: sum, kind: inclusive, into: s}\noutput: [s, x]\n",
    /* 1: filter */
    "sluice: 1\nname: filt\ninput: {k: i32, x: f32}\nstages:\n  - filter: x > 0\noutput: [x, k]\n",
    /* 2: compaction, then a scan over the kept rows */
    "sluice: 1\nname: compact\ninput: {k: i32, x: f32}\nstages:\n"
    "  - map: {y: x * 2.0}\n  - filter: y > 0.5\n"
    "  - scan: {of: k, op: max, kind: exclusive, into: m}\noutput: [y, m, k]\n",
    /* 3: per-batch sort */
    "sluice: 1\nname: sortb\ninput: {k: i32, x: f32}\nstages:\n"
    "  - sort: {key: k, per: batch}\noutput: [k, x]\n",
    /* 4: stream-wide sort: pushes return no batches, inputs are only held on the device */
    "sluice: 1\nname: sorts\ninput: {k: i32, x: f32}\nstages:\n"
    "  - sort: {key: k, per: stream}\noutput: [k, x]\n",
    /* 5: an offsets input */
    "sluice: 1\nname: seg\ninput:\n  rows: {type: i64, role: offsets}\n  x: i32\nstages:\n"
    "  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\noutput: [s, x]\n",
};

/* Reference inputs for pipeline pi: n rows (k: i32 in a small range, x: f32 around 0), or
 * for the offsets pipeline random segments (some empty) over n values. */
static int make_ref(int pi, int64_t n, uint64_t seed, sluice_column *ref) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    if (pi == 5) {
        int64_t *off = malloc(((size_t)n + 2) * 8);
        int32_t *x = malloc((size_t)n * 4 + 4);
        int64_t nseg = 0;
        off[0] = 0;
        while (off[nseg] < n) {
            int64_t len = tu_rng_range(&r, 0, 3000);
            off[nseg + 1] = off[nseg] + len > n ? n : off[nseg] + len;
            nseg++;
        }
        for (int64_t i = 0; i < n; i++) x[i] = (int32_t)tu_rng_range(&r, -1000, 1000);
        ref[0] = (sluice_column){"rows", SLUICE_I64, off, nseg + 1};
        ref[1] = (sluice_column){"x", SLUICE_I32, x, n};
        return 2;
    }
    int32_t *k = malloc((size_t)n * 4 + 4);
    float *x = malloc((size_t)n * 4 + 4);
    for (int64_t i = 0; i < n; i++) {
        k[i] = (int32_t)tu_rng_range(&r, -100000, 100000);
        x[i] = (float)(tu_rng_uniform(&r) * 2.0 - 1.0);
    }
    ref[0] = (sluice_column){"k", SLUICE_I32, k, n};
    ref[1] = (sluice_column){"x", SLUICE_F32, x, n};
    return 2;
}

START_TEST(test_same_results_every_memory) {
    int pi = _i;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, pipelines[pi]);
    /* Several pieces per batch, chunks of megabytes (so several staging threads copy). */
    const int64_t n = g_small ? 100003 : (3 << 20) + 12345;
    const int64_t max_batch_rows = g_small ? 1 << 15 : 1 << 20;
    const int64_t cuts[] = {n / 5, n / 5 + 1, n / 2 + 7}; /* one batch of a single row */
    sluice_column ref[MAXCOLS];
    int ncols = make_ref(pi, n, 1000 + (uint64_t)pi, ref);
    bool has_offsets = pi == 5;
    result want = {0};
    for (int kind = 0; kind < MEM_KINDS; kind++) {
        setenv("SLUICE_CUDA_STAGING_THREADS", kind == MEM_MALLOC_ONE_THREAD ? "1" : "3", 1);
        host_input in;
        input_place(ctx, (mem_kind)kind, ref, ncols, &in);
        result got;
        run_one(ctx, p, &in, cuts, (int)NELEM(cuts), has_offsets, max_batch_rows, &got);
        input_release(ctx, (mem_kind)kind, &in);
        if (kind == MEM_MALLOC_ONE_THREAD) {
            want = got;
            ck_assert_int_gt(want.rows, 0);
            continue;
        }
        char what[128];
        snprintf(what, sizeof what, "pipeline %d, input in %s memory", pi, mem_names[kind]);
        assert_same(&want, &got, what);
        result_free(&got);
    }
    unsetenv("SLUICE_CUDA_STAGING_THREADS");

    /* Two pipelines checked against the inputs themselves, so the baseline is right too.
     * A sum of i32 accumulates in i64 (SCHEMA.md), so the scan's column is i64. */
    if (pi == 0) {
        const int32_t *k = ref[0].data;
        const int64_t *s = (const int64_t *)want.data[0];
        ck_assert_uint_eq(want.width[0], 8);
        int64_t acc = 0, bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++) {
            acc += k[i];
            if (s[i] != acc) bad = i;
        }
        ck_assert_msg(bad < 0, "scan row %lld: %lld, want %lld", (long long)bad,
                      bad < 0 ? 0LL : (long long)s[bad], (long long)acc);
        ck_assert_int_eq(memcmp(want.data[1], ref[1].data, (size_t)n * 4), 0);
    } else if (pi == 1) {
        const float *x = ref[1].data;
        const int32_t *k = ref[0].data;
        int64_t kept = 0, bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++) {
            if (!(x[i] > 0)) continue;
            if (kept >= want.rows || memcmp(want.data[0] + kept * 4, &x[i], 4) != 0 ||
                memcmp(want.data[1] + kept * 4, &k[i], 4) != 0)
                bad = i;
            kept++;
        }
        ck_assert_msg(bad < 0, "filter: input row %lld is not kept row %lld", (long long)bad,
                      (long long)kept - 1);
        ck_assert_int_eq(kept, want.rows);
    }
    result_free(&want);
    for (int i = 0; i < ncols; i++) free((void *)ref[i].data);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A column that starts inside a registered range and runs past its end is not all pinned:
 * it must be staged (not read by DMA from unpinned pages), and give the same results; a
 * batch rejected on the host leaves a session reading registered memory usable. */
START_TEST(test_partly_registered) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: part\ninput: {k: i32}\nstages:\n"
        "  - scan: {of: k, op: sum, kind: inclusive, into: s}\noutput: [s]\n");
    const size_t half = (size_t)8 << 20;
    char *block = aligned_alloc(4096, 2 * half);
    ck_assert_ptr_nonnull(block);
    ck_assert_int_eq(sluice_cuda_host_register(ctx, block, half), SLUICE_OK);
    const int64_t n = (int64_t)(half / 4); /* starts at half / 2: its second half is unpinned */
    int32_t *col = (int32_t *)(block + half / 2);
    int32_t *copy = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) col[i] = copy[i] = (int32_t)(i % 2001) - 1000;
    result r[2];
    for (int t = 0; t < 2; t++) {
        sluice_session *s;
        ck_assert_int_eq(sluice_cuda_session_open(p, NULL, NULL, &s), SLUICE_OK);
        sluice_column c = {"k", SLUICE_I32, t == 0 ? copy : col, n};
        sluice_column wrong = {"k", SLUICE_F32, col, n};
        ck_assert_int_eq(sluice_session_push(s, &wrong, 1), SLUICE_ERR_BATCH_TYPE);
        ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
        memset(&r[t], 0, sizeof r[t]);
        sluice_batch *out;
        while (sluice_session_pull_wait(s, &out, -1) == SLUICE_OK && out) {
            result_append(&r[t], out);
            sluice_batch_free(out);
        }
        sluice_session_close(s);
    }
    assert_same(&r[0], &r[1], "a column running past the end of a registered range");
    const int64_t *got = (const int64_t *)r[1].data[0]; /* an i32 sum accumulates in i64 */
    ck_assert_uint_eq(r[1].width[0], 8);
    int64_t acc = 0, bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        acc += copy[i];
        if (got[i] != acc) bad = i;
    }
    ck_assert_msg(bad < 0, "row %lld: %lld, want %lld", (long long)bad,
                  bad < 0 ? 0LL : (long long)got[bad], (long long)acc);
    result_free(&r[0]);
    result_free(&r[1]);
    ck_assert_int_eq(sluice_cuda_host_unregister(ctx, block), SLUICE_OK);
    free(block);
    free(copy);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- the result pool ----------------------------------------------------------------------- */

/* Many batches pulled and freed one by one: each is pinned and right, and the pool hands the
 * same few blocks out again instead of pinning new memory for every batch. */
START_TEST(test_pool_reuse) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: pool\ninput: {k: i32}\nstages:\n  - map: {d: k + 1}\noutput: [d]\n");
    sluice_session *s;
    ck_assert_int_eq(sluice_cuda_session_open(p, NULL, NULL, &s), SLUICE_OK);
    const int64_t n = g_small ? 5000 : 300000;
    int32_t *k = malloc((size_t)n * 4);
    const void *seen[8];
    int nseen = 0;
    const int rounds = g_small ? 50 : 300;
    for (int round = 0; round < rounds; round++) {
        int64_t rows = n - (round % 3) * 1000; /* a few sizes, all fitting the same blocks */
        for (int64_t i = 0; i < rows; i++) k[i] = (int32_t)(i * 7 + round);
        sluice_column c = {"k", SLUICE_I32, k, rows};
        ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
        sluice_batch *b;
        ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK);
        ck_assert_ptr_nonnull(b);
        sluice_column d;
        ck_assert_int_eq(sluice_batch_column(b, 0, &d), SLUICE_OK);
        ck_assert_int_eq(d.length, rows);
        ck_assert(cuda_says_pinned(d.data));
        const int32_t *got = d.data;
        int64_t bad = -1;
        for (int64_t i = 0; i < rows && bad < 0; i++)
            if (got[i] != (int32_t)(i * 7 + round) + 1) bad = i;
        ck_assert_msg(bad < 0, "round %d row %lld", round, (long long)bad);
        int j = 0;
        while (j < nseen && seen[j] != d.data) j++;
        if (j == nseen) {
            ck_assert_msg(nseen < (int)NELEM(seen), "round %d: a new pinned block again", round);
            seen[nseen++] = d.data;
        }
        sluice_batch_free(b);
    }
    ck_assert_int_le(nseen, 2);
    free(k);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* More batches held at once than the pool keeps when they come back: every one stays right
 * while held, those beyond the bound are released when freed, and the session goes on. */
START_TEST(test_pool_bound) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: bound\ninput: {k: i64}\nstages:\n  - filter: k % 2 == 0\noutput: [k]\n");
    sluice_session *s;
    ck_assert_int_eq(sluice_cuda_session_open(p, NULL, NULL, &s), SLUICE_OK);
    enum { HELD = 100 };
    const int64_t n = 4096;
    int64_t *k = malloc((size_t)n * 8);
    sluice_batch *held[HELD];
    for (int round = 0; round < 3; round++) {
        for (int h = 0; h < HELD; h++) {
            for (int64_t i = 0; i < n; i++) k[i] = i + h;
            sluice_column c = {"k", SLUICE_I64, k, n};
            ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
            ck_assert_int_eq(sluice_session_pull_wait(s, &held[h], -1), SLUICE_OK);
            ck_assert_ptr_nonnull(held[h]);
        }
        for (int h = 0; h < HELD; h++) {
            sluice_column d;
            ck_assert_int_eq(sluice_batch_column(held[h], 0, &d), SLUICE_OK);
            ck_assert_int_eq(d.length, n / 2);
            const int64_t *got = d.data;
            int64_t bad = -1;
            for (int64_t i = 0; i < n / 2 && bad < 0; i++)
                if (got[i] != h + h % 2 + 2 * i) bad = i;
            ck_assert_msg(bad < 0, "held batch %d row %lld", h, (long long)bad);
        }
        /* Freed in an order unlike the allocation's. */
        for (int h = 0; h < HELD; h += 2) sluice_batch_free(held[h]);
        for (int h = 1; h < HELD; h += 2) sluice_batch_free(held[h]);
    }
    free(k);
    /* A batch outliving its session is freed into the pool of the context. */
    int64_t v[4] = {0, 1, 2, 3};
    sluice_column c = {"k", SLUICE_I64, v, 4};
    ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
    sluice_batch *last;
    ck_assert_int_eq(sluice_session_pull_wait(s, &last, -1), SLUICE_OK);
    sluice_session_close(s);
    ck_assert_int_eq(sluice_batch_rows(last), 2);
    sluice_batch_free(last);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A result batch pushed as the input of another session of the context (its memory is
 * pinned, so it is read by DMA) gives the same results as a copy of it in malloc memory. */
START_TEST(test_result_as_input) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *a = tu_load(ctx,
        "sluice: 1\nname: a\ninput: {k: i32}\nstages:\n  - map: {d: k * 3}\noutput: [d]\n");
    sluice_pipeline *b = tu_load(ctx,
        "sluice: 1\nname: b\ninput: {d: i32}\nstages:\n"
        "  - scan: {of: d, op: sum, kind: exclusive, into: e}\noutput: [e]\n");
    const int64_t n = g_small ? 7000 : 1 << 20;
    int32_t *k = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) k[i] = (int32_t)(i % 1000) - 500;
    sluice_session *sa, *sb;
    ck_assert_int_eq(sluice_cuda_session_open(a, NULL, NULL, &sa), SLUICE_OK);
    ck_assert_int_eq(sluice_cuda_session_open(b, NULL, NULL, &sb), SLUICE_OK);
    sluice_column c = {"k", SLUICE_I32, k, n};
    ck_assert_int_eq(sluice_session_push(sa, &c, 1), SLUICE_OK);
    sluice_batch *mid;
    ck_assert_int_eq(sluice_session_pull_wait(sa, &mid, -1), SLUICE_OK);
    sluice_column d;
    ck_assert_int_eq(sluice_batch_column(mid, 0, &d), SLUICE_OK);
    int32_t *copy = malloc((size_t)n * 4);
    memcpy(copy, d.data, (size_t)n * 4);
    result r[2];
    for (int t = 0; t < 2; t++) {
        sluice_column in = {"d", SLUICE_I32, t == 0 ? copy : d.data, n};
        ck_assert_int_eq(sluice_session_push(sb, &in, 1), SLUICE_OK);
        memset(&r[t], 0, sizeof r[t]);
        sluice_batch *out;
        while (sluice_session_pull_wait(sb, &out, -1) == SLUICE_OK && out) {
            result_append(&r[t], out);
            sluice_batch_free(out);
        }
        ck_assert_int_eq(sluice_session_reset(sb), SLUICE_OK);
    }
    assert_same(&r[0], &r[1], "a pinned result batch as input");
    const int64_t *e = (const int64_t *)r[0].data[0]; /* an i32 sum accumulates in i64 */
    ck_assert_uint_eq(r[0].width[0], 8);
    int64_t acc = 0, bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        if (e[i] != acc) bad = i;
        acc += copy[i];
    }
    ck_assert_msg(bad < 0, "row %lld of the exclusive scan is wrong", (long long)bad);
    result_free(&r[0]);
    result_free(&r[1]);
    sluice_batch_free(mid);
    free(copy);
    free(k);
    sluice_session_close(sa);
    sluice_session_close(sb);
    sluice_pipeline_free(a);
    sluice_pipeline_free(b);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *gpu_pinned_suite(void) {
    Suite *s = suite_create("gpu_pinned");
    TCase *api = tcase_create("api");
    tcase_add_test(api, test_alloc_free);
    tcase_add_test(api, test_register_unregister);
    tcase_add_test(api, test_register_pinned_elsewhere);
    suite_add_tcase(s, api);
    TCase *same = tcase_create("same_results");
    tcase_set_timeout(same, 600);
    tcase_add_loop_test(same, test_same_results_every_memory, 0, (int)NELEM(pipelines));
    tcase_add_test(same, test_partly_registered);
    suite_add_tcase(s, same);
    TCase *pool = tcase_create("pool");
    tcase_set_timeout(pool, 300);
    tcase_add_test(pool, test_pool_reuse);
    tcase_add_test(pool, test_pool_bound);
    tcase_add_test(pool, test_result_as_input);
    suite_add_tcase(s, pool);
    return s;
}

int main(void) {
    setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
    g_small = getenv("SLUICE_TEST_SMALL") != NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "gpu_pinned: no GPU, skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_pinned_suite());
}
