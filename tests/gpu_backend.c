/* gpu_backend.c — the CUDA backend against the CPU backend (itself checked against the
 * sequential oracles of test_cpu_*) and, for a few pipelines, against an oracle written here:
 * every stage, operator and type; edge sizes 0, 1, 31, 32, 33, tile edges ±1 and large
 * sizes; random pipelines; host and device batches, outputs on the host and the device; the
 * same stream cut at random points; no host allocation on the hot path (counted through the
 * allocator hook); a batch of 2^31 + 1000 rows on the device. Exits 77 without a GPU.
 *
 * SLUICE_GPU_TEST_SUBJECT=cpu runs the subject side on the CPU backend: the harness itself
 * can be checked on a machine without a GPU. SLUICE_TEST_SMALL=1 (compute-sanitizer runs)
 * keeps to small sizes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "sluice_cuda.h"
#include "testutil.h"
#include "common/types.h"

#include "gpu_harness.h"


static bool cuttable(const char *yaml) {
    return !strstr(yaml, "reset: batch") && !strstr(yaml, "per: batch");
}

/* The CPU on the whole stream vs the subject: whole (host), cut at random points (host and
 * device batches), at sizes `rows`. */
static void check_pipeline(const char *yaml, int64_t rows, uint64_t seed) {
    const char *dump = getenv("SLUICE_GPU_TEST_DUMP"); /* a directory: keep every pipeline */
    if (dump) {
        char path[1024];
        snprintf(path, sizeof path, "%s/p%08x.yaml", dump, (unsigned)(seed * 2654435761u));
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(yaml, f);
            fclose(f);
        }
    }
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    const char *name = sluice_pipeline_name(p);
    table in, ref, got;
    make_inputs(p, rows, seed, &in);
    int oc = offsets_col(p, &in);
    int64_t units = oc >= 0 ? in.lengths[oc] - 1 : rows;
    int64_t max_rows = rows + 1;
    run_stream(ctx, p, false, HOST_IN_HOST_OUT, &in, NULL, 0, max_rows, &ref);

    run_stream(ctx, p, true, HOST_IN_HOST_OUT, &in, NULL, 0, max_rows, &got);
    compare(name, "one host batch", &ref, &got);
    table_free(&got);
    run_stream(ctx, p, true, DEVICE_IN_DEVICE_OUT, &in, NULL, 0, max_rows, &got);
    compare(name, "one device batch", &ref, &got);
    table_free(&got);

    if (cuttable(yaml) && units > 1) {
        tu_rng r;
        tu_rng_seed(&r, seed ^ 0x5eed);
        int64_t cuts[6];
        int ncuts = 0;
        int64_t at = 0;
        while (ncuts < 5 && at < units - 1) {
            at = tu_rng_range(&r, at + 1, at + 1 + (units - at - 1) / 2);
            if (at >= units) break;
            cuts[ncuts++] = at;
        }
        run_stream(ctx, p, true, HOST_IN_HOST_OUT, &in, cuts, ncuts, max_rows, &got);
        compare(name, "cut host batches", &ref, &got);
        table_free(&got);
        run_stream(ctx, p, true, DEVICE_IN_DEVICE_OUT, &in, cuts, ncuts, max_rows, &got);
        compare(name, "cut device batches", &ref, &got);
        table_free(&got);
        /* scratch smaller than the batch: the backend cuts internally */
        if (oc < 0) {
            run_stream(ctx, p, true, HOST_IN_DEVICE_OUT, &in, NULL, 0, rows / 3 + 1, &got);
            compare(name, "batch cut by max_batch_rows", &ref, &got);
            table_free(&got);
        }
    }
    /* One batch over max_batch_rows on any pipeline (sluice.h, max_batch_rows): cut where
     * the pipeline allows (between segments of host offsets), else run whole in grown
     * buffers; the results are the whole batch's either way. */
    if (rows <= 4097 && rows > 1) {
        run_stream(ctx, p, true, HOST_IN_HOST_OUT, &in, NULL, 0, rows / 3 + 1, &got);
        compare(name, "one host batch over max_batch_rows", &ref, &got);
        table_free(&got);
        run_stream(ctx, p, true, DEVICE_IN_DEVICE_OUT, &in, NULL, 0, rows / 3 + 1, &got);
        compare(name, "one device batch over max_batch_rows", &ref, &got);
        table_free(&got);
    }
    table_free(&ref);
    table_free(&in);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

static const int64_t edge_sizes[] = {0, 1, 31, 32, 33, 1023, 1024, 1025, 4095, 4096, 4097};

static const int64_t small_sizes[] = {0, 1, 33, 4097};

static void check_sizes(const char *yaml, uint64_t seed) {
    if (g_small) { /* compute-sanitizer runs: a few sizes, still past a tile */
        for (size_t k = 0; k < NELEM(small_sizes); k++) check_pipeline(yaml, small_sizes[k], seed + k);
        return;
    }
    for (size_t k = 0; k < NELEM(edge_sizes); k++) check_pipeline(yaml, edge_sizes[k], seed + k);
    if (!g_small) {
        check_pipeline(yaml, 65537, seed + 100);
        check_pipeline(yaml, 1000003, seed + 101);
    }
}

/* ---- the pipelines ------------------------------------------------------------------------ */

static const char *const num_types[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32",
                                        "u64", "f16", "f32", "f64"};
static const char *const int_types[] = {"bool", "i8", "i32", "i64", "u8", "u16", "u64"};

static char g_yaml[8192];

START_TEST(test_map_flag_compact_every_type) {
    if (g_small && _i >= 3) return; /* sanitizer runs: three types are enough */
    const char *t = num_types[_i];
    snprintf(g_yaml, sizeof g_yaml,
             "sluice: 1\nname: mfc-%s\ninput: {x: %s, y: %s, id: u32}\nstages:\n"
             "  - map: {s: x + y, d: x * y - x, q: x / y, m: 'max(x, y)'}\n"
             "  - flag: {keep: x > y || id %% 7 == 0}\n"
             "  - compact: {by: keep}\n"
             "  - filter: id %% 3 != 1\n"
             "output: [id, s, d, q, m, x]\n", t, t, t);
    check_sizes(g_yaml, 10 + (uint64_t)_i);
}
END_TEST

/* Every arithmetic operator and both kinds, several scans in one group (one look-back over
 * their tuple of states). */
START_TEST(test_scan_arith_every_type) {
    if (g_small && _i >= 3) return; /* sanitizer runs: three types are enough */
    const char *t = num_types[_i];
    for (int flip = 0; flip < 2; flip++) {
        const char *k1 = flip ? "exclusive" : "inclusive", *k2 = flip ? "inclusive" : "exclusive";
        snprintf(g_yaml, sizeof g_yaml,
                 "sluice: 1\nname: scan-%s-%d\ninput: {x: %s}\nstages:\n"
                 "  - scan: {of: x, op: sum, kind: %s, into: s}\n"
                 "  - scan: {of: x, op: prod, kind: %s, into: p}\n"
                 "  - scan: {of: x, op: min, kind: %s, into: lo}\n"
                 "  - scan: {of: x, op: max, kind: %s, into: hi}\n"
                 "  - scan: {op: count, kind: %s, into: n}\noutput: [s, p, lo, hi, n]\n",
                 t, flip, t, k1, k2, k1, k2, k1);
        check_sizes(g_yaml, 100 + 10 * (uint64_t)_i + (uint64_t)flip);
    }
}
END_TEST

START_TEST(test_scan_bitwise_every_type) {
    if (g_small && _i >= 3) return; /* sanitizer runs: three types are enough */
    const char *t = int_types[_i];
    snprintf(g_yaml, sizeof g_yaml,
             "sluice: 1\nname: bits-%s\ninput: {x: %s}\nstages:\n"
             "  - scan: {of: x, op: and, into: a}\n"
             "  - scan: {of: x, op: or, kind: exclusive, into: o}\n"
             "  - scan: {of: x, op: xor, into: e}\noutput: [a, o, e]\n", t, t);
    check_sizes(g_yaml, 200 + 10 * (uint64_t)_i);
}
END_TEST

START_TEST(test_linrec_and_declared) {
    const char *y[] = {
        "sluice: 1\nname: linrec32\ninput: {a: f32, b: f32}\nstages:\n"
        "  - map: {d: abs(a) * 0.5}\n  - scan: {op: linrec, a: d, b: b, into: h}\noutput: [h]\n",
        "sluice: 1\nname: linrec64\ninput: {a: f64, b: f64}\nstages:\n"
        "  - map: {d: abs(a) * 0.5}\n  - scan: {op: linrec, a: d, b: b, into: h, kind: exclusive}\noutput: [h]\n",
        "sluice: 1\nname: linrec-int\ninput: {a: i32, b: i32}\nstages:\n"
        "  - scan: {op: linrec, a: a, b: b, into: h}\noutput: [h]\n",
        "sluice: 1\nname: affine\ninput: {a: f32, u: f32}\n"
        "operators:\n  affine:\n    state: {a: f32, b: f32}\n    identity: {a: 1.0, b: 0.0}\n"
        "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"
        "stages:\n  - map: {decay: abs(a) * 0.5}\n"
        "  - scan: {op: affine, of: {a: decay, b: u}, kind: inclusive, into: {b: h}}\noutput: [h]\n",
        "sluice: 1\nname: maxpair\ninput: {k: i32, v: i64}\n"
        "operators:\n  best:\n    state: {k: i32, v: i64}\n    identity: {k: -2147483648, v: 0}\n"
        "    combine: {k: 'r.k >= l.k ? r.k : l.k', v: 'r.k >= l.k ? r.v : l.v'}\n"
        "stages:\n  - scan: {op: best, of: {k: k, v: v}, kind: exclusive, into: {k: bk, v: bv}}\n"
        "output: [bk, bv]\n",
        "sluice: 1\nname: reset-batch\ninput: {x: i32}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s, reset: batch}\n  - scan: {of: x, op: max, into: m}\noutput: [s, m]\n",
    };
    for (size_t i = 0; i < NELEM(y); i++) check_sizes(y[i], 300 + 10 * i);
}
END_TEST

START_TEST(test_segmented) {
    const char *y[] = {
        "sluice: 1\nname: seg-offsets\ninput:\n  rows: {type: i64, role: offsets}\n  x: f32\n"
        "stages:\n  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\noutput: [s, x]\n",
        "sluice: 1\nname: seg-offsets-excl\ninput:\n  rows: {type: i64, role: offsets}\n  x: i32\n"
        "stages:\n  - segmented_scan: {of: x, op: max, kind: exclusive, segments: rows, into: s}\n"
        "  - segmented_scan: {op: count, segments: rows, into: c}\noutput: [s, c]\n",
        "sluice: 1\nname: seg-head\ninput: {h: bool, x: i64}\nstages:\n"
        "  - segmented_scan: {of: x, op: sum, segments: h, into: s}\noutput: [s]\n",
        "sluice: 1\nname: seg-key\ninput: {k: u8, x: f64}\nstages:\n"
        "  - map: {k2: k / 4}\n"
        "  - segmented_scan: {of: x, op: sum, kind: exclusive, segments: {key: k2}, into: s}\noutput: [s, k2]\n",
        "sluice: 1\nname: seg-key-linrec\ninput: {k: i16, a: f32, b: f32}\nstages:\n"
        "  - segmented_scan: {op: linrec, a: a, b: b, segments: {key: k}, into: h}\noutput: [h]\n",
    };
    for (size_t i = 0; i < NELEM(y); i++) check_sizes(y[i], 400 + 10 * i);
}
END_TEST

static const char *const key_types[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32",
                                        "u64", "f16", "f32", "f64"};

START_TEST(test_sort_every_key_type) {
    if (g_small && _i >= 3) return; /* sanitizer runs: three types are enough */
    const char *t = key_types[_i];
    for (int desc = 0; desc < 2; desc++) {
        for (int per_batch = 0; per_batch < 2; per_batch++) {
            snprintf(g_yaml, sizeof g_yaml,
                     "sluice: 1\nname: sort-%s-%d-%d\ninput: {k: %s, v: u32, w: f64}\nstages:\n"
                     "  - sort: {key: k, order: %s, per: %s}\noutput: [k, v, w]\n",
                     t, desc, per_batch, t, desc ? "descending" : "ascending",
                     per_batch ? "batch" : "stream");
            check_sizes(g_yaml, 500 + 10 * (uint64_t)_i + (uint64_t)desc);
            snprintf(g_yaml, sizeof g_yaml,
                     "sluice: 1\nname: sort1-%s-%d-%d\ninput: {k: %s, v: u32}\nstages:\n"
                     "  - sort: {key: k, order: %s, per: %s}\noutput: [k, v]\n",
                     t, desc, per_batch, t, desc ? "descending" : "ascending",
                     per_batch ? "batch" : "stream");
            check_sizes(g_yaml, 600 + 10 * (uint64_t)_i + (uint64_t)desc);
        }
    }
}
END_TEST

START_TEST(test_sort_keys_bits_and_fusion) {
    const char *y[] = {
        "sluice: 1\nname: sort-keys\ninput: {a: i16, b: f32, c: u64, d: u8}\nstages:\n"
        "  - sort: {keys: [a, b], values: [c]}\noutput: [a, b, c]\n",
        "sluice: 1\nname: sort-keys3\ninput: {a: u64, b: i64, c: u8, v: f32}\nstages:\n"
        "  - sort: {keys: [c, a, b], order: descending}\noutput: [a, b, c, v]\n",
        "sluice: 1\nname: sort-bits\ninput: {k: u32, v: i32}\nstages:\n"
        "  - sort: {key: k, bits: [4, 12]}\noutput: [k, v]\n",
        "sluice: 1\nname: sort-computed\ninput: {x: f32, y: f32}\nstages:\n"
        "  - map: {r2: x*x + y*y}\n  - filter: x > -1.0\n  - sort: {key: r2, per: batch}\n"
        "  - scan: {of: r2, op: sum, kind: exclusive, into: before, acc: f64}\n"
        "  - filter: before < 1000.0\noutput: [x, r2, before]\n",
        "sluice: 1\nname: sort-stream-then-scan\ninput: {k: i32, x: i64}\nstages:\n"
        "  - sort: {key: k}\n  - scan: {of: x, op: sum, into: s}\n  - sort: {key: x, order: descending}\n"
        "output: [k, x, s]\n",
        /* a stream sort whose columns pass through the group after it: at flush the sorted
           rows go on in max_batch_rows pieces, so the sort must not write them in place into
           one result batch (device outputs) */
        "sluice: 1\nname: sort-stream-pass-through\ninput: {k: u16, x: f64, v: i32}\nstages:\n"
        "  - sort: {key: k}\n  - map: {w: v * 3}\noutput: [k, x, v, w]\n",
    };
    for (size_t i = 0; i < NELEM(y); i++) check_sizes(y[i], 700 + 10 * i);
}
END_TEST

/* A stream-wide sort over a tiny sort_memory_bytes spills a sorted run before every push
 * (copied to the host) and merges them at flush (copied back): the CPU's whole-stream result,
 * host and device outputs. */
START_TEST(test_stream_sort_spills) {
    const char *y[] = {
        "sluice: 1\nname: spill-two-keys\ninput: {k: i16, x: f32, v: i64}\nstages:\n"
        "  - sort: {keys: [k, x], order: [descending, ascending]}\n"
        "  - scan: {of: v, op: sum, into: s}\noutput: [k, x, s]\n",
        "sluice: 1\nname: spill-last\ninput: {k: u32, v: i32}\nstages:\n"
        "  - sort: {key: k, bits: [3, 9]}\noutput: [k, v]\n",
    };
    for (size_t i = 0; i < NELEM(y); i++) {
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
        sluice_pipeline *p = tu_load(ctx, y[i]);
        table in, ref, got;
        make_inputs(p, 5000, 77 + i, &in);
        run_stream(ctx, p, false, HOST_IN_HOST_OUT, &in, NULL, 0, 5001, &ref);
        int64_t cuts[4] = {700, 1900, 2000, 4100};
        g_sort_budget = 1;
        for (int m = 0; m < 2; m++) {
            run_stream(ctx, p, true, m ? DEVICE_IN_DEVICE_OUT : HOST_IN_HOST_OUT, &in, cuts, 4,
                       1000, &got);
            compare(sluice_pipeline_name(p), m ? "spilled, device" : "spilled, host", &ref, &got);
            table_free(&got);
        }
        g_sort_budget = 0;
        table_free(&ref);
        table_free(&in);
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
}
END_TEST

/* Every shipped pipeline, on random inputs. */
START_TEST(test_shipped_pipelines) {
    const char *files[] = {"cull-visible", "linrec", "output-offsets", "ragged-cumsum",
                           "sort-by-depth", "trades-vwap"};
    for (size_t i = 0; i < NELEM(files); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pipelines/%s.yaml", SLUICE_SOURCE_DIR, files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue; /* renamed or not shipped yet */
        size_t n = fread(g_yaml, 1, sizeof g_yaml - 1, f);
        fclose(f);
        g_yaml[n] = 0;
        check_pipeline(g_yaml, 33, 800 + i);
        check_pipeline(g_yaml, 4097, 810 + i);
        if (!g_small) check_pipeline(g_yaml, 300001, 820 + i);
    }
}
END_TEST

/* Random pipelines: maps, flags, compacts, filters, scans and sorts in random order over
 * columns of random types (casts keep the expressions well typed). */
static void random_pipeline(tu_rng *r, int id, char *out, size_t cap) {
    const char *ty[] = {"i8", "i32", "i64", "u16", "u64", "f32", "f64"};
    const char *t0 = ty[tu_rng_range(r, 0, 6)], *t1 = ty[tu_rng_range(r, 0, 6)];
    int n = snprintf(out, cap, "sluice: 1\nname: random-%d\ninput: {a: %s, b: %s, c: f32}\nstages:\n",
                     id, t0, t1);
    char live_num[16][16] = {"a", "b", "c"};
    int nlive = 3, ncol = 0, nstages = (int)tu_rng_range(r, 2, 6);
    for (int s = 0; s < nstages; s++) {
        const char *x = live_num[tu_rng_range(r, 0, nlive - 1)];
        const char *y = live_num[tu_rng_range(r, 0, nlive - 1)];
        char name[16];
        snprintf(name, sizeof name, "c%d", ncol++);
        switch (tu_rng_range(r, 0, 6)) {
        case 0:
            n += snprintf(out + n, cap - (size_t)n, "  - map: {%s: f64(%s) * 0.5 + f64(%s)}\n", name, x, y);
            break;
        case 1:
            n += snprintf(out + n, cap - (size_t)n, "  - map: {%s: i64(%s) ^ (i64(%s) << 3)}\n", name, x, y);
            break;
        case 2:
            n += snprintf(out + n, cap - (size_t)n, "  - filter: f64(%s) > f64(%s)\n", x, y);
            continue;
        case 3:
            n += snprintf(out + n, cap - (size_t)n,
                          "  - flag: {%s: f64(%s) < 0.5}\n  - compact: {by: %s}\n", name, x, name);
            continue;
        case 4: {
            const char *op = (const char *[]){"sum", "min", "max", "xor"}[tu_rng_range(r, 0, 3)];
            const char *of = strcmp(op, "xor") == 0 ? "i64" : "f64";
            n += snprintf(out + n, cap - (size_t)n, "  - scan: {of: %s(%s), op: %s, kind: %s, into: %s}\n",
                          of, x, op, tu_rng_range(r, 0, 1) ? "exclusive" : "inclusive", name);
            break;
        }
        case 5:
            n += snprintf(out + n, cap - (size_t)n, "  - sort: {key: %s, per: %s}\n", x,
                          tu_rng_range(r, 0, 1) ? "batch" : "stream");
            continue;
        default:
            n += snprintf(out + n, cap - (size_t)n,
                          "  - segmented_scan: {of: f64(%s), op: sum, segments: {key: %s}, into: %s}\n",
                          y, x, name);
            break;
        }
        if (nlive < 16) snprintf(live_num[nlive++], 16, "%s", name);
    }
}

START_TEST(test_random_pipelines) {
    tu_rng r;
    tu_rng_seed(&r, 4242);
    for (int i = 0; i < (g_small ? 4 : 24); i++) {
        random_pipeline(&r, i, g_yaml, sizeof g_yaml);
        check_pipeline(g_yaml, (int64_t)tu_rng_range(&r, 0, g_small ? 3000 : 200000), 900 + (uint64_t)i);
    }
}
END_TEST

/* A sequential oracle for the primer's examples, independent of the CPU backend. */
START_TEST(test_primer_examples_on_gpu) {
    if (g_subject_cpu) return;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: primer\ninput: {a: f32, b: f32, x: i32}\nstages:\n"
        "  - scan: {op: linrec, a: a, b: b, into: h}\n"
        "  - scan: {of: x, op: sum, kind: exclusive, into: ex}\n"
        "  - flag: {keep: x > 2}\n  - compact: {by: keep}\noutput: [h, ex, x]\n");
    float a[] = {0.5f, 0.9f, 0.1f, 1.0f}, b[] = {1, 2, 3, 4};
    int32_t x[] = {3, 1, 7, 0};
    sluice_column cols[] = {{"a", SLUICE_F32, a, 4}, {"b", SLUICE_F32, b, 4}, {"x", SLUICE_I32, x, 4}};
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    /* auto picks the GPU when there is one */
    ck_assert(sluice_backend_available(SLUICE_BACKEND_CUDA));
    sluice_session *auto_s;
    ck_assert_int_eq(sluice_session_open(p, &o, &auto_s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_backend(auto_s), SLUICE_BACKEND_CUDA);
    sluice_session_close(auto_s);
    o.backend = SLUICE_BACKEND_CUDA;
    sluice_batch *out;
    ck_assert_int_eq(sluice_run(p, &o, cols, 3, &out), SLUICE_OK);
    ck_assert_int_eq(sluice_batch_rows(out), 2); /* rows 0 and 2 keep */
    sluice_column h, ex, xo;
    sluice_batch_column_by_name(out, "h", &h);
    sluice_batch_column_by_name(out, "ex", &ex);
    sluice_batch_column_by_name(out, "x", &xo);
    const float *hv = h.data;
    ck_assert_float_eq_tol(hv[0], 1.0f, 1e-6f);  /* h = [1.0, 2.9, 3.29, 7.29] */
    ck_assert_float_eq_tol(hv[1], 3.29f, 1e-5f);
    ck_assert_int_eq(((const int64_t *)ex.data)[0], 0);
    ck_assert_int_eq(((const int64_t *)ex.data)[1], 4);
    ck_assert_int_eq(((const int32_t *)xo.data)[1], 7);
    sluice_batch_free(out);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- no host allocation on the hot path ----------------------------------------------------- */

static long g_allocs;
static void *count_alloc(size_t n, void *o) { (void)o; g_allocs++; return malloc(n); }
static void *count_realloc(void *p, size_t n, void *o) { (void)o; g_allocs++; return realloc(p, n); }
static void count_free(void *p, void *o) { (void)o; free(p); }

START_TEST(test_no_allocation_on_hot_path) {
    if (g_subject_cpu) return;
    sluice_allocator al = {count_alloc, count_realloc, count_free, NULL};
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.allocator = &al;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: hot\ninput: {x: f32, y: f32}\nstages:\n"
        "  - map: {r2: x*x + y*y}\n  - filter: r2 < 1.0\n"
        "  - scan: {of: r2, op: sum, kind: exclusive, into: before}\n  - sort: {key: r2, per: batch}\n"
        "output: [r2, before]\n");
    const int64_t n = 1 << 20;
    table in;
    make_inputs(p, n, 77, &in);
    piece pc;
    make_piece(p, &in, 0, n, 0, 0, true, &pc);
    for (int dev_out = 0; dev_out < 2; dev_out++) {
        sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
        so.max_batch_rows = n;
        sluice_cuda_options cu = SLUICE_CUDA_OPTIONS_INIT;
        cu.outputs_on_device = dev_out;
        sluice_session *s;
        ck_assert_int_eq(sluice_cuda_session_open(p, &so, &cu, &s), SLUICE_OK);
        long per_push[6];
        for (int k = 0; k < 6; k++) {
            /* batches of different sizes: allocations must not depend on rows */
            pc.cols[0].length = pc.cols[1].length = n >> (k % 3);
            long before = g_allocs;
            ck_assert_int_eq(sluice_cuda_session_push_device(s, pc.cols, 2), SLUICE_OK);
            per_push[k] = g_allocs - before;
            sluice_batch *b;
            while (sluice_session_pull(s, &b) == SLUICE_OK && b) sluice_batch_free(b);
        }
        /* The result batch itself is the only host allocation a push makes: its struct with
         * its column and ownership tables, one block (core/runtime/batch.c sl_batch_shell).
         * Host outputs' column blocks come from the CUDA backend's pinned pool, not the
         * allocator hooks. */
        long batch_allocs = 1;
        for (int k = 1; k < 6; k++)
            ck_assert_msg(per_push[k] == batch_allocs,
                          "push %d (outputs on %s) made %ld host allocations, expected %ld", k,
                          dev_out ? "device" : "host", per_push[k], batch_allocs);
        sluice_session_close(s);
    }
    free_piece(&pc, true);
    table_free(&in);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- errors -------------------------------------------------------------------------------- */

START_TEST(test_bad_device_batches) {
    if (g_subject_cpu) return;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: seg\ninput:\n  rows: {type: i64, role: offsets}\n  x: i32\n"
        "stages:\n  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\noutput: [s]\n");
    sluice_cuda_options cu = SLUICE_CUDA_OPTIONS_INIT;
    cu.outputs_on_device = 1;
    sluice_session *s;
    ck_assert_int_eq(sluice_cuda_session_open(p, NULL, &cu, &s), SLUICE_OK);
    ck_assert_ptr_nonnull(sluice_cuda_session_stream(s));
    int32_t x[6] = {1, 2, 3, 4, 5, 6};
    int64_t good[3] = {0, 2, 6}, bad_start[3] = {1, 2, 6}, bad_order[3] = {0, 4, 2},
            bad_end[3] = {0, 2, 5};
    int64_t *offs[4] = {good, bad_start, bad_order, bad_end};
    sluice_status want[4] = {SLUICE_OK, SLUICE_ERR_BAD_OFFSETS, SLUICE_ERR_BAD_OFFSETS,
                             SLUICE_ERR_BAD_OFFSETS};
    void *dx, *doff;
    CUDA_OK(cudaMalloc(&dx, sizeof x));
    CUDA_OK(cudaMalloc(&doff, 24));
    CUDA_OK(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize()); /* pageable copies may still be landing (make_piece) */
    for (int k = 0; k < 4; k++) {
        CUDA_OK(cudaMemcpy(doff, offs[k], 24, cudaMemcpyHostToDevice));
        CUDA_OK(cudaDeviceSynchronize()); /* see make_piece: order it before the push */
        sluice_column cols[2] = {{"rows", SLUICE_I64, doff, 3}, {"x", SLUICE_I32, dx, 6}};
        sluice_status st = sluice_cuda_session_push_device(s, cols, 2);
        /* the next case overwrites doff: wait for this push's reads of it (sluice_cuda.h) */
        CUDA_OK(cudaStreamSynchronize(sluice_cuda_session_stream(s)));
        ck_assert_msg(st == want[k], "offsets case %d: %s", k, sluice_status_name(st));
        if (st != SLUICE_OK)
            ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "rows"));
    }
    /* the failed pushes changed nothing: one batch, from the good push (in flight, maybe:
     * pull_wait waits for it) */
    sluice_batch *b;
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK);
    ck_assert_ptr_nonnull(b);
    ck_assert(sluice_batch_on_device(b));
    int64_t sums[6];
    sluice_column sc;
    sluice_batch_column(b, 0, &sc);
    CUDA_OK(cudaMemcpy(sums, sc.data, sizeof sums, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(sums[1], 3);
    ck_assert_int_eq(sums[5], 18);
    sluice_batch_free(b);
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_null(b);
    sluice_session_close(s);

    /* a batch bigger than max_batch_rows with an offsets input (sluice.h): cut between its
     * segments on the host ([0,2) then [2,6), a segment of 4 rows), run whole in grown
     * buffers when the offsets are on the device; the sums are the whole batch's */
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.max_batch_rows = 3;
    const int64_t want_s[6] = {1, 3, 3, 7, 12, 18};
    for (int dev = 0; dev < 2; dev++) {
        ck_assert_int_eq(sluice_cuda_session_open(p, &so, NULL, &s), SLUICE_OK);
        sluice_column hc[2] = {{"rows", SLUICE_I64, good, 3}, {"x", SLUICE_I32, x, 6}};
        if (dev) {
            CUDA_OK(cudaMemcpy(doff, good, 24, cudaMemcpyHostToDevice));
            CUDA_OK(cudaDeviceSynchronize());
            hc[0].data = doff;
            hc[1].data = dx;
            ck_assert_int_eq(sluice_cuda_session_push_device(s, hc, 2), SLUICE_OK);
        } else {
            ck_assert_int_eq(sluice_session_push(s, hc, 2), SLUICE_OK);
        }
        int64_t got_s[6], n = 0;
        while (sluice_session_pull_wait(s, &b, -1) == SLUICE_OK && b) {
            sluice_column oc;
            sluice_batch_column(b, 0, &oc);
            ck_assert_int_le(n + oc.length, 6);
            memcpy(got_s + n, oc.data, (size_t)oc.length * sizeof(int64_t));
            n += oc.length;
            sluice_batch_free(b);
        }
        ck_assert_int_eq(n, 6);
        for (int i = 0; i < 6; i++) ck_assert_int_eq(got_s[i], want_s[i]);
        sluice_session_close(s);
    }
    cudaFree(dx);
    cudaFree(doff);

    /* device pushes on a CPU session, CPU backend through the CUDA opener */
    sluice_session_options cpu = SLUICE_SESSION_OPTIONS_INIT;
    cpu.backend = SLUICE_BACKEND_CPU;
    ck_assert_int_eq(sluice_cuda_session_open(p, &cpu, NULL, &s), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_session_open(p, &cpu, &s), SLUICE_OK);
    sluice_column hc[2] = {{"rows", SLUICE_I64, good, 3}, {"x", SLUICE_I32, x, 6}};
    ck_assert_int_eq(sluice_cuda_session_push_device(s, hc, 2), SLUICE_ERR_MISUSE);
    ck_assert_ptr_null(sluice_cuda_session_stream(s));
    sluice_session_close(s);
    sluice_cuda_options badv = {99, NULL, 0};
    ck_assert_int_eq(sluice_cuda_session_open(p, NULL, &badv, &s), SLUICE_ERR_INVALID_ARGUMENT);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Device memory exhaustion at open is a status with a message; the context stays usable. */
START_TEST(test_out_of_device_memory) {
    if (g_subject_cpu) return;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: oom\ninput: {x: f64}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\noutput: [s]\n");
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.max_batch_rows = (int64_t)1 << 40; /* 8 TiB a column */
    sluice_session *s;
    sluice_status st = sluice_cuda_session_open(p, &so, NULL, &s);
    ck_assert_int_eq(st, SLUICE_ERR_NO_MEMORY);
    ck_assert_ptr_null(s);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(strstr(d->message, "device memory"));
    so.max_batch_rows = 1000;
    ck_assert_int_eq(sluice_cuda_session_open(p, &so, NULL, &s), SLUICE_OK);
    double x[3] = {1, 2, 3};
    sluice_column c = {"x", SLUICE_F64, x, 3};
    ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
    sluice_batch *b;
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK);
    ck_assert_ptr_nonnull(b);
    sluice_column out;
    sluice_batch_column(b, 0, &out);
    ck_assert(((const double *)out.data)[2] == 6.0);
    sluice_batch_free(b);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Device result batches outlive their session (sluice.h): one pulled and kept past its
 * session's close keeps its data, batches left unpulled in flight are freed by the close, and
 * sessions opened and closed after that work (a pool destroyed under such frees once crashed
 * the driver at the next pool's destroy: bench/RESULTS.md, seventh session). */
START_TEST(test_batches_outlive_session) {
    if (g_subject_cpu) return;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: outlive\ninput: {x: i32}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\n  - sort: {key: s, per: batch}\noutput: [s]\n");
    const int64_t n = 1 << 16;
    int32_t *x = malloc(n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)(i % 7);
    sluice_column c = {"x", SLUICE_I32, x, n};
    sluice_batch *kept = NULL;
    for (int round = 0; round < 3; round++) {
        sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
        so.max_batch_rows = n;
        sluice_cuda_options cu = SLUICE_CUDA_OPTIONS_INIT;
        cu.outputs_on_device = 1;
        sluice_session *s;
        ck_assert_int_eq(sluice_cuda_session_open(p, &so, &cu, &s), SLUICE_OK);
        for (int k = 0; k < 4; k++) ck_assert_int_eq(sluice_session_push(s, &c, 1), SLUICE_OK);
        if (round == 0) { /* the first batch is kept past the close; the rest stay queued */
            ck_assert_int_eq(sluice_session_pull_wait(s, &kept, -1), SLUICE_OK);
            ck_assert_ptr_nonnull(kept);
        }
        sluice_session_close(s);
    }
    /* the kept batch: the first batch's running sums, sorted (they rise already) */
    sluice_column sc;
    ck_assert_int_eq(sluice_batch_column(kept, 0, &sc), SLUICE_OK);
    ck_assert_int_eq(sc.length, n);
    int64_t *got = malloc(n * 8);
    CUDA_OK(cudaMemcpy(got, sc.data, (size_t)n * 8, cudaMemcpyDeviceToHost));
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += x[i];
        ck_assert_msg(got[i] == sum, "row %lld: %lld, expected %lld", (long long)i, (long long)got[i],
                      (long long)sum);
    }
    sluice_batch_free(kept);
    free(got);
    free(x);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Sessions on two caller streams at once give the same results as one at a time. */
START_TEST(test_two_streams) {
    if (g_subject_cpu) return;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: two\ninput: {x: i32}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\noutput: [s]\n");
    cudaStream_t st[2];
    sluice_session *s[2];
    const int64_t n = 1 << 20;
    int32_t *x = malloc(n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)(i % 13) - 6;
    void *dx;
    CUDA_OK(cudaMalloc(&dx, n * 4));
    CUDA_OK(cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize()); /* pageable copies may still be landing (make_piece) */
    for (int k = 0; k < 2; k++) {
        CUDA_OK(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
        sluice_cuda_options cu = SLUICE_CUDA_OPTIONS_INIT;
        cu.stream = st[k];
        cu.outputs_on_device = 1;
        ck_assert_int_eq(sluice_cuda_session_open(p, NULL, &cu, &s[k]), SLUICE_OK);
        ck_assert_ptr_eq(sluice_cuda_session_stream(s[k]), st[k]);
    }
    sluice_column c = {"x", SLUICE_I32, dx, n};
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < 2; k++) ck_assert_int_eq(sluice_cuda_session_push_device(s[k], &c, 1), SLUICE_OK);
    for (int k = 0; k < 2; k++) {
        CUDA_OK(cudaStreamSynchronize(st[k]));
        int64_t expect = 0, last = 0;
        for (int64_t i = 0; i < n; i++) expect += x[i];
        for (int rep = 0; rep < 3; rep++) {
            sluice_batch *b;
            ck_assert_int_eq(sluice_session_pull(s[k], &b), SLUICE_OK);
            ck_assert_ptr_nonnull(b);
            sluice_column sc;
            sluice_batch_column(b, 0, &sc);
            CUDA_OK(cudaMemcpyAsync(&last, (const int64_t *)sc.data + n - 1, 8, cudaMemcpyDeviceToHost, st[k]));
            CUDA_OK(cudaStreamSynchronize(st[k]));
            ck_assert_int_eq(last, expect * (rep + 1));
            sluice_batch_free(b);
        }
        sluice_session_close(s[k]);
        cudaStreamDestroy(st[k]);
    }
    cudaFree(dx);
    free(x);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* 2^31 + 1000 rows in one device batch: 64-bit row counts and offsets all the way. */
START_TEST(test_past_2_31_rows) {
    if (g_subject_cpu) return;
    const int64_t n = ((int64_t)1 << 31) + 1000;
    size_t free_b = 0, total_b = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    if (free_b < ((size_t)90 << 30)) {
        fprintf(stderr, "test_past_2_31_rows: skipped, %zu GB free on the device\n", free_b >> 30);
        return;
    }
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: huge\ninput: {x: u8}\nstages:\n"
        "  - scan: {of: x, op: sum, into: s}\n  - filter: x == 7\noutput: [s]\n");
    uint8_t *x = malloc((size_t)n);
    tu_rng r;
    tu_rng_seed(&r, 2);
    for (int64_t i = 0; i < n; i += 8) {
        uint64_t u = tu_rng_next(&r);
        memcpy(x + i, &u, (size_t)(n - i < 8 ? n - i : 8));
    }
    void *dx;
    CUDA_OK(cudaMalloc(&dx, (size_t)n));
    CUDA_OK(cudaMemcpy(dx, x, (size_t)n, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize()); /* pageable copies may still be landing (make_piece) */
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.max_batch_rows = n;
    sluice_cuda_options cu = SLUICE_CUDA_OPTIONS_INIT;
    cu.outputs_on_device = 1;
    sluice_session *s;
    sluice_status st = sluice_cuda_session_open(p, &so, &cu, &s);
    if (st != SLUICE_OK) fail_with_diag(ctx, "open", "huge", st);
    sluice_column c = {"x", SLUICE_U8, dx, n};
    st = sluice_cuda_session_push_device(s, &c, 1);
    if (st != SLUICE_OK) fail_with_diag(ctx, "push", "huge", st);
    sluice_batch *b;
    ck_assert_int_eq(sluice_session_pull_wait(s, &b, -1), SLUICE_OK);
    ck_assert_ptr_nonnull(b);
    int64_t kept = sluice_batch_rows(b);
    uint64_t *got = malloc((size_t)kept * 8 + 8);
    sluice_column sc;
    sluice_batch_column(b, 0, &sc);
    CUDA_OK(cudaMemcpy(got, sc.data, (size_t)kept * 8, cudaMemcpyDeviceToHost));
    uint64_t sum = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += x[i];
        if (x[i] == 7) {
            ck_assert_msg(k < kept && got[k] == sum, "kept row %lld (row %lld): got %llu, expected %llu",
                          (long long)k, (long long)i, (unsigned long long)(k < kept ? got[k] : 0),
                          (unsigned long long)sum);
            k++;
        }
    }
    ck_assert_int_eq(k, kept);
    sluice_batch_free(b);
    sluice_session_close(s);
    cudaFree(dx);
    free(got);
    free(x);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Four test cases, so a slow tool (compute-sanitizer racecheck) can run them side by side
 * with CK_RUN_CASE=api|stages|sort|pipelines. */
static Suite *gpu_backend_suite(void) {
    Suite *s = suite_create("gpu_backend");
    TCase *api = tcase_create("api");
    tcase_add_test(api, test_primer_examples_on_gpu);
    tcase_add_test(api, test_bad_device_batches);
    tcase_add_test(api, test_two_streams);
    tcase_add_test(api, test_out_of_device_memory);
    tcase_add_test(api, test_no_allocation_on_hot_path);
    tcase_add_test(api, test_batches_outlive_session);
    TCase *stages = tcase_create("stages");
    tcase_add_loop_test(stages, test_map_flag_compact_every_type, 0, (int)NELEM(num_types));
    tcase_add_loop_test(stages, test_scan_arith_every_type, 0, (int)NELEM(num_types));
    tcase_add_loop_test(stages, test_scan_bitwise_every_type, 0, (int)NELEM(int_types));
    tcase_add_test(stages, test_linrec_and_declared);
    tcase_add_test(stages, test_segmented);
    TCase *sort = tcase_create("sort");
    tcase_add_loop_test(sort, test_sort_every_key_type, 0, (int)NELEM(key_types));
    tcase_add_test(sort, test_sort_keys_bits_and_fusion);
    tcase_add_test(sort, test_stream_sort_spills);
    TCase *pipelines = tcase_create("pipelines");
    tcase_add_test(pipelines, test_shipped_pipelines);
    tcase_add_test(pipelines, test_random_pipelines);
    if (!g_small) tcase_add_test(pipelines, test_past_2_31_rows);
    TCase *all[] = {api, stages, sort, pipelines};
    for (size_t i = 0; i < NELEM(all); i++) {
        tcase_set_timeout(all[i], 1200);
        suite_add_tcase(s, all[i]);
    }
    return s;
}

int main(void) {
    setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
    g_small = getenv("SLUICE_TEST_SMALL") != NULL;
    const char *subj = getenv("SLUICE_GPU_TEST_SUBJECT");
    g_subject_cpu = subj && strcmp(subj, "cpu") == 0;
    int n = 0;
    if (!g_subject_cpu && (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)) {
        fprintf(stderr, "gpu_backend: no GPU, skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_backend_suite());
}
