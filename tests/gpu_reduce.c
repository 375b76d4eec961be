/* gpu_reduce.c — the `reduce` stage on the CUDA backend against the CPU backend (itself
 * checked against sequential oracles in test_reduce): every segment kind (whole stream,
 * offsets with empty segments, head flags, runs of keys of several types, a bool key; runs
 * of an input key of each type from one row to the whole stream long), per
 * stream and per batch, the index column, every operator (sum prod min max and or xor count
 * linrec, a declared one), several values, a filter and scans fused before the reduce and
 * stages after it; edge sizes (0, 1, tile ± 1, many tiles, more tiles than blocks); the
 * same stream pushed whole and cut at random points (the CPU gets the same pushes:
 * per-batch segments depend on them), host and device batches and outputs, pipeline_depth 1
 * and 3, and batches over max_batch_rows. Exact operators must match bit for bit; float
 * values within the tolerance of compare() (the GPU associates sums in another order).
 *
 * The harness is gpu_backend.c's (tables, inputs, pushes, compare). SLUICE_GPU_TEST_SUBJECT=cpu
 * runs the subject on the CPU backend too (checks the harness without a GPU);
 * SLUICE_TEST_SMALL=1 keeps to small sizes; SLUICE_GPU_TEST_DUMP=DIR writes each pipeline's
 * YAML there. Exits 77 without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "sluice_cuda.h"
#include "testutil.h"
#include "common/types.h"
#include "reduce_cases.h"

#include "gpu_harness.h"


/* Random cut points of a stream of `units` rows (segments for an offsets input). */
static int random_cuts(uint64_t seed, int64_t units, int64_t *cuts) {
    tu_rng r;
    tu_rng_seed(&r, seed ^ 0x5eed);
    int ncuts = 0;
    int64_t at = 0;
    while (ncuts < 5 && at < units - 1) {
        at = tu_rng_range(&r, at + 1, at + 1 + (units - at - 1) / 2);
        if (at >= units) break;
        cuts[ncuts++] = at;
    }
    return ncuts;
}

/* The CPU and the subject given the same pushes (cuts, max_rows) in mode m. */
static void check_run(sluice_context *ctx, sluice_pipeline *p, const table *in, const int64_t *cuts,
                      int ncuts, int64_t max_rows, mode m, const char *what) {
    table ref, got;
    char label[128];
    snprintf(label, sizeof label, "%s, %lld rows, depth %d", what, (long long)in->rows, g_depth);
    run_stream(ctx, p, false, HOST_IN_HOST_OUT, in, cuts, ncuts, max_rows, &ref);
    run_stream(ctx, p, true, m, in, cuts, ncuts, max_rows, &got);
    compare(sluice_pipeline_name(p), label, &ref, &got);
    table_free(&got);
    table_free(&ref);
}

/* Rewrites the generated inputs before a run (NULL: as generated). */
typedef void (*input_shape)(table *in, uint64_t seed);
static input_shape g_shape;

static void check_pipeline(const char *yaml, int64_t rows, uint64_t seed) {
    sluice_context *ctx;
    const char *dump = getenv("SLUICE_GPU_TEST_DUMP"); /* a directory: keep every pipeline */
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    if (dump) { /* by name: one file per pipeline (kernel caches are filled from them) */
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.yaml", dump, sluice_pipeline_name(p));
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(yaml, f);
            fclose(f);
        }
    }
    table in;
    make_inputs(p, rows, seed, &in);
    if (g_shape) g_shape(&in, seed);
    int oc = offsets_col(p, &in);
    int64_t units = oc >= 0 ? in.lengths[oc] - 1 : rows;
    int64_t max_rows = rows + 1;
    static const int depths[] = {1, 3};
    for (size_t d = 0; d < NELEM(depths); d++) {
        g_depth = depths[d];
        check_run(ctx, p, &in, NULL, 0, max_rows, HOST_IN_HOST_OUT, "one host batch");
        check_run(ctx, p, &in, NULL, 0, max_rows, DEVICE_IN_DEVICE_OUT, "one device batch");
        if (units > 1) {
            int64_t cuts[6];
            int ncuts = random_cuts(seed + (uint64_t)d, units, cuts);
            check_run(ctx, p, &in, cuts, ncuts, max_rows, HOST_IN_HOST_OUT, "cut host batches");
            check_run(ctx, p, &in, cuts, ncuts, max_rows, DEVICE_IN_DEVICE_OUT,
                      "cut device batches");
            check_run(ctx, p, &in, cuts, ncuts, max_rows, HOST_IN_DEVICE_OUT,
                      "cut host batches, device outputs");
        }
        /* more rows than max_batch_rows: cut by the session (or, for offsets, between
           segments), the same way on both backends */
        if (rows > 1 && rows <= 70000)
            check_run(ctx, p, &in, NULL, 0, rows / 3 + 1, HOST_IN_HOST_OUT,
                      "one batch over max_batch_rows");
    }
    g_depth = 0;
    table_free(&in);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

static const int64_t edge_sizes[] = {0, 1, 2, 31, 33, 1023, 1024, 1025, 4095, 4096, 4097};
static const int64_t small_sizes[] = {0, 1, 33, 4097};

static void check_sizes(const char *yaml, uint64_t seed) {
    if (g_small) {
        for (size_t k = 0; k < NELEM(small_sizes); k++) check_pipeline(yaml, small_sizes[k], seed + k);
        check_pipeline(yaml, 40000, seed + 50);
        return;
    }
    for (size_t k = 0; k < NELEM(edge_sizes); k++) check_pipeline(yaml, edge_sizes[k], seed + k);
    check_pipeline(yaml, 65537, seed + 100);
    check_pipeline(yaml, 1000003, seed + 101);
}

/* The loops without look-back (sl_tile.cuh aggregate_loop, segments_warp_loop,
 * runs_warp_loop) give each block (each warp: tiles of 512 rows) a run of tiles only when a
 * batch has more tiles than the grid has blocks or warps (a few hundred blocks, two thousand
 * warps on an H200: a million rows and more): then a running state crosses its own tiles
 * and its first segment starts warps before it. */
static void check_sizes_many_tiles(const char *yaml, uint64_t seed) {
    check_sizes(yaml, seed);
    if (!g_small) check_pipeline(yaml, ((int64_t)1 << 23) + 5, seed + 102);
}

/* ---- the pipelines ------------------------------------------------------------------------ */

/* The segment kinds; the inputs: x f32, i i32, u u16, k i16, h bool (a map derives sparse
 * head flags and keys with runs from them, so segments span tiles and batches). */
static const char *const seg_kinds[] = {
    "",                                  /* the whole stream */
    "      segments: hd\n",              /* head flags (about 1 row in 40) */
    "      segments: {key: g}\n",        /* runs of an i16 key (a few rows each) */
    "      segments: {key: big}\n",      /* a bool key: runs of truth values */
    "      segments: {key: k}\n",        /* random i16 keys (with ties in some streams) */
    "      segments: {key: fk}\n",       /* an f32 key: compared by bits */
};

static char g_yaml[8192];

/* Every builtin operator, count, linrec and a declared operator in one reduce, with the
 * index, after a filter and a scan, before a map and a filter. _i: segment kind × per. */
START_TEST(test_every_operator_every_kind) {
    const char *seg = seg_kinds[_i / 2];
    bool per_batch = _i % 2 == 1;
    snprintf(g_yaml, sizeof g_yaml,
             "sluice: 1\nname: ops-%d\ninput: {x: f32, i: i32, u: u16, k: i16, h: bool}\n"
             SL_TEST_AFFINE_OPERATOR
             "stages:\n"
             "  - map: {hd: x > 1.9, g: i16(x * 0.6), big: x > 0.5, fk: f32(i32(x))}\n"
             "  - filter: x > -1.8\n"
             "  - scan: {of: i, op: max, into: run}\n"
             "  - reduce:\n%s      index: seg\n%s" SL_TEST_TWELVE_REDUCE_VALUES
             "  - map: {mean: total / f32(n)}\n"
             "  - filter: n > 0\n",
             _i, seg, per_batch ? "      per: batch\n" : "");
    check_sizes(g_yaml, 1000 + (uint64_t)_i * 37);
}
END_TEST

/* Offsets segments (empty ones included, short and long on average by seed), per batch by
 * nature; the index over the stream. */
START_TEST(test_offsets) {
    snprintf(g_yaml, sizeof g_yaml,
             "sluice: 1\nname: offsets\ninput: {x: f32, i: i64, rows: {type: i64, role: offsets}}\n"
             "stages:\n"
             "  - map: {y: x * 2.0}\n"
             "  - reduce:\n      segments: rows\n      index: seg\n      values:\n"
             "        - {op: sum, of: y, into: total}\n"
             "        - {op: count, into: n}\n"
             "        - {op: min, of: i, into: lo}\n"
             "        - {op: linrec, a: x * 0.5, b: x, into: h}\n"
             "  - scan: {of: n, op: sum, into: seen}\n");
    for (uint64_t s = 0; s < 3; s++) check_sizes_many_tiles(g_yaml, 3000 + s * 10 + (uint64_t)_i);
}
END_TEST

/* Only some outputs kept (the others' fields not written), the key column kept or not, a
 * second reduce over the reduced rows (two reduce groups), and a sort after a reduce. */
START_TEST(test_stages_after) {
    static const char *const pipes[] = {
        "sluice: 1\nname: after-1\ninput: {x: f32, k: i16}\nstages:\n"
        "  - map: {g: i16(x * 0.6)}\n"
        "  - reduce:\n      segments: {key: g}\n      values:\n"
        "        - {op: sum, of: x, into: s}\n        - {op: count, into: n}\n"
        "  - reduce:\n      segments: {key: n}\n      index: j\n      values:\n"
        "        - {op: max, of: s, into: best}\n"
        "output: [n, j, best]\n",
        "sluice: 1\nname: after-2\ninput: {x: f32, k: u64}\nstages:\n"
        "  - map: {g: k & 3}\n"
        "  - reduce:\n      segments: {key: g}\n      index: j\n      values:\n"
        "        - {op: sum, of: x, into: s, acc: f64}\n"
        "  - sort: {key: j, order: descending}\n"
        "output: [j, s]\n",
        "sluice: 1\nname: after-3\ninput: {x: f32}\nstages:\n"
        "  - reduce:\n      values:\n        - {op: count, into: n}\n"
        "        - {op: sum, of: x, into: s}\n"
        "  - map: {m: s / f32(n)}\n"
        "output: [m, n]\n",
    };
    check_sizes_many_tiles(pipes[_i], 5000 + (uint64_t)_i);
}
END_TEST

/* Runs of an input key (no filter before the reduce: sl_tile.cuh runs_warp_loop, which
 * counts each warp's key changes before it writes a row). The key column `kk` is rewritten
 * into runs whose mean length the seed picks: 1 (a change at nearly every row), 8, 1000, or
 * one run over the whole stream (it spans every block of a many-tile batch, and every cut
 * batch continues the carry's run); consecutive runs take consecutive key values (wrapping),
 * so neighbours always differ. */
static void shape_key_runs(table *in, uint64_t seed) {
    static const uint64_t means[] = {1, 8, 1000, 0};
    const uint64_t mean = means[seed % 4];
    int k = 0;
    while (k < in->ncols && strcmp(in->names[k], "kk") != 0) k++;
    ck_assert_int_lt(k, in->ncols);
    tu_rng r;
    tu_rng_seed(&r, seed ^ 0x4b4bull);
    uint64_t run = tu_rng_next(&r) & 0xff;
    for (int64_t i = 0; i < in->rows; i++) {
        if (i > 0 && mean != 0 && tu_rng_next(&r) % mean == 0) run++;
        sl_value v = {.type = in->types[k]};
        if (in->types[k] == SLUICE_BOOL) v.u = run & 1;
        else if (sl_type_is_float(in->types[k])) v.type = SLUICE_F64, v.f = (double)(run % 4096);
        else v.u = run;
        if (sl_type_is_float(in->types[k])) v = sl_value_cast(v, in->types[k]);
        sl_value_store(in->types[k], in->data[k], i, v);
    }
}

/* Sums, a count, a min and a max over runs of an input key of each key type, per stream and
 * per batch, the key and the index as outputs. _i: key type × per. */
START_TEST(test_input_key_runs) {
    static const char *const types[] = {"i32", "i64", "f32", "bool", "u8"};
    const char *type = types[_i / 2];
    bool per_batch = _i % 2 == 1;
    snprintf(g_yaml, sizeof g_yaml,
             "sluice: 1\nname: runs-%s%s\ninput: {x: f32, i: i32, kk: %s}\nstages:\n"
             "  - reduce:\n      segments: {key: kk}\n      index: seg\n%s      values:\n"
             "        - {op: sum, of: x, into: s}\n        - {op: count, into: n}\n"
             "        - {op: min, of: i, into: lo}\n        - {op: max, of: x, into: top}\n"
             "output: [kk, seg, s, n, lo, top]\n",
             type, per_batch ? "-batch" : "", type, per_batch ? "      per: batch\n" : "");
    g_shape = shape_key_runs;
    check_sizes_many_tiles(g_yaml, 7000 + (uint64_t)_i * 16);
    /* one run over more tiles than the grid has blocks */
    if (!g_small && _i < 2) check_pipeline(g_yaml, ((int64_t)1 << 23) + 5, 7000 + 103);
    g_shape = NULL;
}
END_TEST

/* Runs of a key that maps make from inputs (no filter before the reduce: still the runs'
 * loop, which makes each key from the inputs at its row to count the changes, RunKeys::at):
 * kk / 2 merges neighbouring runs of kk (2k and 2k + 1), kk * 0.5 keeps them (f32), per
 * stream and per batch. _i: key × per. */
START_TEST(test_made_key_runs) {
    static const char *const keys[] = {"kk / 2", "f32(kk) * 0.5", "(kk & 1) == 0"};
    const char *key = keys[_i / 2];
    bool per_batch = _i % 2 == 1;
    snprintf(g_yaml, sizeof g_yaml,
             "sluice: 1\nname: made-runs-%d\ninput: {x: f32, i: i32, kk: i32}\nstages:\n"
             "  - map: {g: '%s', y: x * 2.0}\n"
             "  - reduce:\n      segments: {key: g}\n      index: seg\n%s      values:\n"
             "        - {op: sum, of: y, into: s}\n        - {op: count, into: n}\n"
             "        - {op: min, of: i, into: lo}\n"
             "output: [g, seg, s, n, lo]\n",
             _i, key, per_batch ? "      per: batch\n" : "");
    g_shape = shape_key_runs;
    check_sizes_many_tiles(g_yaml, 9000 + (uint64_t)_i * 16);
    g_shape = NULL;
}
END_TEST

static Suite *gpu_reduce_suite(void) {
    Suite *s = suite_create("gpu_reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, test_every_operator_every_kind, 0, 2 * (int)NELEM(seg_kinds));
    tcase_add_loop_test(tc, test_offsets, 0, 1);
    tcase_add_loop_test(tc, test_stages_after, 0, 3);
    tcase_add_loop_test(tc, test_input_key_runs, 0, 10);
    tcase_add_loop_test(tc, test_made_key_runs, 0, 6);
    suite_add_tcase(s, tc);
    return s;
}

/* Whether the CUDA backend accepts a reduce (its capability switch is on). */
static bool cuda_runs_reduce(void) {
    sluice_context *ctx;
    if (sluice_context_create(&ctx, NULL) != SLUICE_OK) return false;
    const char *yaml = "sluice: 1\nname: probe\ninput: {x: i32}\nstages:\n"
                       "  - reduce: {values: [{op: sum, of: x, into: s}]}\noutput: [s]\n";
    sluice_pipeline *p = NULL;
    sluice_session *s = NULL;
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    bool ok = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "probe", &p) == SLUICE_OK &&
              sluice_cuda_session_open(p, &so, NULL, &s) == SLUICE_OK;
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return ok;
}

int main(void) {
    setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
    g_small = getenv("SLUICE_TEST_SMALL") != NULL;
    const char *subj = getenv("SLUICE_GPU_TEST_SUBJECT");
    g_subject_cpu = subj && strcmp(subj, "cpu") == 0;
    int n = 0;
    if (!g_subject_cpu && (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)) {
        fprintf(stderr, "gpu_reduce: no GPU, skipped\n");
        return 77;
    }
    if (!g_subject_cpu && !cuda_runs_reduce()) {
        fprintf(stderr, "gpu_reduce: the CUDA backend's reduce is switched off (build option "
                        "SLUICE_CUDA_REDUCE), skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_reduce_suite());
}
