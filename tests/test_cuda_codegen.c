/* test_cuda_codegen.c — the CUDA code generator without a GPU: generates and NVRTC-compiles
 * for sm_90 the kernel of every fused group of every shipped pipeline (the .yaml files of pipelines/),
 * of pipelines covering every stage, operator, segment kind and type, and of random
 * pipelines; checks the group layouts the host relies on; runs the generated code of reduce
 * groups on the host under sanitizers against the CPU backend (tests/cuda_host); and checks
 * that the on-disk kernel cache hits, and rebuilds an entry that is corrupt, truncated or
 * stale.
 * Skips (77) in builds without CUDA. */
#include <dirent.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "reduce_cases.h"

#if __has_include(<nvrtc.h>)
#include "common/context.h"
#include "cuda/codegen.h"
#include "cuda/kcache.h"
#include "cuda/nvrtc.h"
#include "tuning.h"
#include "plan/plan.h"
#include "cuda_host/emulator.h"

#define ARCH 90

/* Generates and compiles every fused group of the pipeline for compute capability `arch`;
 * returns the number of groups. */
static int compile_all_groups_for(sluice_context *ctx, sluice_pipeline *p, const char *what, int arch) {
    sl_plan plan;
    sluice_status st = sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan);
    if (st != SLUICE_OK) tu_print_diags(ctx);
    ck_assert_int_eq(st, SLUICE_OK);
    int compiled = 0;
    for (int gi = 0; gi < plan.ngroups; gi++) {
        if (plan.groups[gi].kind != SL_GROUP_FUSED) continue;
        sl_codegen cg;
        st = sl_cuda_codegen(ctx, p, &plan, gi, arch, &cg);
        if (st != SLUICE_OK) {
            tu_print_diags(ctx);
            ck_abort_msg("%s: codegen of group %d failed", what, gi);
        }
        void *cubin = NULL;
        size_t size = 0;
        st = sl_cuda_nvrtc_compile(ctx, cg.source, "test.cu", arch, &cubin, &size);
        if (st != SLUICE_OK) {
            fprintf(stderr, "---- %s group %d source ----\n%s\n", what, gi, cg.source);
            tu_print_diags(ctx);
            ck_abort_msg("%s: NVRTC rejected group %d", what, gi);
        }
        ck_assert_uint_gt(size, 0);
        sl_free(ctx, cubin);
        sl_cuda_codegen_free(ctx, &cg);
        compiled++;
    }
    sl_plan_free(ctx, &plan);
    return compiled;
}

static int compile_all_groups(sluice_context *ctx, sluice_pipeline *p, const char *what) {
    return compile_all_groups_for(ctx, p, what, ARCH);
}

static sluice_context *new_ctx(void) {
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    return ctx;
}

/* ---- shipped pipelines --------------------------------------------------------------- */

/* Every shipped pipeline for sm_90 (copy-engine stages, the look-back warp) and for sm_80
 * (no copy engine: the same persistent loop loads its tiles from global memory). */
START_TEST(shipped_pipelines_compile) {
    const int arch = _i == 0 ? ARCH : 80;
    sluice_context *ctx = new_ctx();
    DIR *d = opendir(SLUICE_SOURCE_DIR "/pipelines");
    ck_assert_ptr_nonnull(d);
    struct dirent *ent;
    int files = 0;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (n < 6 || strcmp(ent->d_name + n - 5, ".yaml") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, SLUICE_SOURCE_DIR "/pipelines/%s", ent->d_name);
        sluice_pipeline *p = NULL;
        if (sluice_pipeline_load_file(ctx, path, &p) != SLUICE_OK) tu_print_diags(ctx);
        ck_assert_ptr_nonnull(p);
        compile_all_groups_for(ctx, p, ent->d_name, arch);
        sluice_pipeline_free(p);
        files++;
    }
    closedir(d);
    ck_assert_int_gt(files, 0);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- every operator, type and segment kind ------------------------------------------- */

static const char *const type_names[] = {"bool", "i8",  "i16", "i32", "i64", "u8",
                                         "u16",  "u32", "u64", "f16", "f32", "f64"};

static void compile_yaml(const char *yaml, const char *what) {
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p = tu_load(ctx, yaml);
    ck_assert_int_ge(compile_all_groups(ctx, p, what), 1);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

/* One kernel per input type holding a scan of every applicable builtin operator (kinds and
 * resets alternate), a segmented scan of each segment kind, count and linrec. */
START_TEST(every_operator_over_each_type) {
    const char *t = type_names[_i];
    bool is_float = strcmp(t, "f16") == 0 || strcmp(t, "f32") == 0 || strcmp(t, "f64") == 0;
    bool is_bool = strcmp(t, "bool") == 0;
    char yaml[8192];
    int n = snprintf(yaml, sizeof yaml,
                     "sluice: 1\nname: ops-%s\ninput:\n  x: %s\n  k: u16\n  h: bool\n"
                     "  rows: {type: i64, role: offsets}\nstages:\n",
                     t, t);
    const char *ops[] = {"sum", "prod", "min", "max", "and", "or", "xor"};
    for (size_t o = 0; o < SL_ARRAY_LEN(ops); o++) {
        if (o >= 4 && is_float) continue;
        n += snprintf(yaml + n, sizeof yaml - (size_t)n, "  - scan: {of: x, op: %s, kind: %s, into: s%zu%s}\n",
                      ops[o], o % 2 ? "exclusive" : "inclusive", o, o % 3 == 1 ? ", reset: batch" : "");
    }
    n += snprintf(yaml + n, sizeof yaml - (size_t)n,
                  "  - segmented_scan: {of: x, op: sum, kind: exclusive, segments: h, into: g1}\n"
                  "  - segmented_scan: {of: x, op: min, segments: {key: k}, into: g2}\n"
                  "  - segmented_scan: {of: x, op: max, kind: exclusive, segments: rows, into: g3}\n"
                  "  - scan: {op: count, into: cnt}\n"
                  "  - segmented_scan: {op: count, segments: {key: x}, kind: exclusive, into: kcnt}\n");
    if (!is_bool)
        n += snprintf(yaml + n, sizeof yaml - (size_t)n,
                      "  - scan: {op: linrec, a: x, b: x, into: lr}\n"
                      "  - segmented_scan: {op: linrec, a: x, b: x, segments: h, kind: exclusive, "
                      "into: slr}\n");
    ck_assert_int_lt(n, (int)sizeof yaml);
    compile_yaml(yaml, t);
}
END_TEST

START_TEST(maps_of_every_type_and_compaction) {
    const char *t = type_names[_i];
    bool is_bool = strcmp(t, "bool") == 0;
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: maps-%s\nparams:\n  lim: {type: %s, default: %s}\ninput:\n  x: %s\n"
             "  y: f32\nstages:\n"
             "  - map: {a: x, b: f64(x) * 2.5 + f64(y), c: %s(y)}\n"
             "  - flag: {keep: b > f64(lim) || isnan(y)}\n"
             "  - compact: {by: keep}\n"
             "  - scan: {of: b, op: sum, kind: exclusive, into: before}\n"
             "  - filter: before < 100.0\n",
             t, t, is_bool ? "true" : "1", t, t);
    compile_yaml(yaml, t);
}
END_TEST

/* Map entries that read earlier entries of the same map, kept or not (b: c - a). */
START_TEST(map_entries_read_earlier_entries) {
    compile_yaml("sluice: 1\nname: siblings\ninput:\n  x: f32\nstages:\n"
                 "  - map: {a: x + 1, c: a * a, b: c - a}\n"
                 "  - scan: {of: b, op: sum, into: s}\noutput: [s]\n",
                 "siblings");
}
END_TEST

START_TEST(declared_operator_and_chained_phases) {
    compile_yaml("sluice: 1\nname: affine\ninput:\n  decay: f32\n  u: f32\n  g: bool\n"
                 "operators:\n  affine:\n    state: {a: f32, b: f32}\n"
                 "    identity: {a: 1.0, b: 0.0}\n"
                 "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"
                 "stages:\n"
                 "  - scan: {op: affine, of: {a: decay, b: u}, kind: inclusive, into: {b: h}}\n"
                 "  - scan: {of: h, op: max, into: hmax}\n"
                 "  - filter: h > hmax * 0.5\n"
                 "  - segmented_scan: {op: affine, of: {a: decay, b: h}, segments: g, "
                 "kind: exclusive, into: {a: pa, b: pb}}\n",
                 "affine");
}
END_TEST

/* A reduce of every segment kind, per stream and per batch, with its index and several
 * values (builtin, linrec, declared), after a filter and a scan (one kernel with them, its
 * close kernel) and with stages after it (a second group over the reduced rows). */
START_TEST(reduce_of_every_segment_kind) {
    static const char *const segs[] = {"", "segments: h\n      ", "segments: {key: k}\n      ",
                                       "segments: {key: h}\n      ", "segments: rows\n      "};
    const char *seg = segs[_i / 2];
    bool per_batch = _i % 2 == 1;
    bool offsets = _i / 2 == 4;
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: reduce-%d\ninput:\n  x: f32\n  k: i16\n  h: bool\n%s"
             "operators:\n  affine:\n    state: {a: f32, b: f32}\n"
             "    identity: {a: 1.0, b: 0.0}\n"
             "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"
             "stages:\n%s"
             "  - scan: {of: x, op: sum, into: run}\n"
             "  - reduce:\n      %sindex: seg\n%s      values:\n"
             "        - {op: sum, of: x, into: total}\n"
             "        - {op: count, into: n}\n"
             "        - {op: max, of: run, into: top, acc: f64}\n"
             "        - {op: linrec, a: x, b: x, into: h_last}\n"
             "        - {op: affine, of: {a: x, b: x}, into: {a: pa, b: pb}}\n"
             "  - map: {mean: total / f32(n)}\n"
             "  - filter: n > 1\n",
             _i, offsets ? "  rows: {type: i64, role: offsets}\n" : "",
             offsets ? "" : "  - filter: x > -5.0\n", seg,
             per_batch ? "      per: batch\n" : "");
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p = tu_load(ctx, yaml);
    ck_assert_int_ge(compile_all_groups(ctx, p, yaml), 2);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* The largest local-memory frame (bytes per thread: spilled registers and stack arrays) of
 * any function of a cubin, from its .nv.info section: attributes of 4-byte format, code and
 * size, then the value; EIATTR_FRAME_SIZE (0x11) holds a function's symbol and its frame. */
static uint32_t max_frame_bytes(const void *cubin, size_t size) {
    const unsigned char *b = cubin;
    ck_assert_uint_ge(size, sizeof(Elf64_Ehdr));
    const Elf64_Ehdr *eh = cubin;
    ck_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64);
    ck_assert_uint_le(eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    const char *names = (const char *)b + sh[eh->e_shstrndx].sh_offset;
    uint32_t max = 0;
    bool found = false;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (strcmp(names + sh[i].sh_name, ".nv.info") != 0) continue;
        const unsigned char *a = b + sh[i].sh_offset, *end = a + sh[i].sh_size;
        ck_assert_uint_le(sh[i].sh_offset + sh[i].sh_size, size);
        while (a + 4 <= end) {
            uint8_t format = a[0], code = a[1];
            if (format != 0x04) { /* a value of two bytes (0x03) or none (0x01) */
                a += format == 0x03 ? 4 : 2;
                continue;
            }
            uint16_t n;
            memcpy(&n, a + 2, 2);
            if (code == 0x11 && n == 8) {
                uint32_t frame;
                memcpy(&frame, a + 8, 4);
                if (frame > max) max = frame;
                found = true;
            }
            a += 4 + n;
        }
    }
    ck_assert_msg(found, "no frame size in the cubin's .nv.info");
    return max;
}

/* ptxas keeps a reduce's state in registers: gpu_reduce's reduce of twelve values by an i16
 * key after a filter and a scan (its test_every_operator_every_kind) compiles without spilling.
 * With a copy of the segment fields per value its state was 168 bytes and the kernel kept a
 * 3.6 KB frame per thread (~1 KB of spills), and those kernels gave wrong rows on the H200
 * (bench/RESULTS.md, the fifth session). The frame of a kernel that spills nothing is tens of
 * bytes; 512 leaves room for a ptxas that allocates differently. */
START_TEST(reduce_state_stays_in_registers) {
    static const char *const segs[] = {"      segments: {key: g}\n", "      segments: {key: big}\n",
                                       "      segments: {key: fk}\n"};
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: wide-%d\ninput: {x: f32, i: i32, u: u16}\n"
             SL_TEST_AFFINE_OPERATOR
             "stages:\n"
             "  - map: {g: i16(x * 0.6), big: x > 0.5, fk: f32(i32(x))}\n"
             "  - filter: x > -1.8\n"
             "  - scan: {of: i, op: max, into: run}\n"
             "  - reduce:\n%s      index: seg\n" SL_TEST_TWELVE_REDUCE_VALUES,
             _i, segs[_i]);
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p = tu_load(ctx, yaml);
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    sl_codegen cg;
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, &plan, 0, ARCH, &cg), SLUICE_OK);
    ck_assert(cg.reduces);
    void *cubin = NULL;
    size_t size = 0;
    ck_assert_int_eq(sl_cuda_nvrtc_compile(ctx, cg.source, "wide.cu", ARCH, &cubin, &size), SLUICE_OK);
    uint32_t frame = max_frame_bytes(cubin, size);
    ck_assert_msg(frame <= 512, "%s: a %zu-byte reduce state keeps a %u-byte frame per thread",
                  sluice_pipeline_name(p), cg.state_size[cg.phases - 1], frame);
    sl_free(ctx, cubin);
    sl_cuda_codegen_free(ctx, &cg);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(six_stage_pipeline) {
    compile_yaml("sluice: 1\nname: six\ninput:\n  x: f32\n  y: f32\nstages:\n"
                 "  - map: {r2: x*x + y*y}\n"
                 "  - flag: {near: r2 < 4.0}\n"
                 "  - compact: {by: near}\n"
                 "  - scan: {of: r2, op: sum, kind: exclusive, into: acc}\n"
                 "  - map: {z: acc * 0.5}\n"
                 "  - filter: z > 1.0\n",
                 "six");
}
END_TEST

/* ---- random pipelines ---------------------------------------------------------------- */

/* A random pipeline over random input types: maps, flags, compacts, filters, scans of every
 * operator (plain and segmented), linrec, sorts. Expressions cast to f64 or i64 so every
 * combination types. */
static void random_yaml(tu_rng *r, char *yaml, size_t cap) {
    int ncols = (int)tu_rng_range(r, 1, 4);
    int n = snprintf(yaml, cap, "sluice: 1\nname: random\ninput:\n");
    char names[64][16];
    int types[64];
    int count = 0;
    for (int c = 0; c < ncols; c++) {
        types[count] = (int)tu_rng_range(r, 0, 11);
        snprintf(names[count], 16, "x%d", c);
        n += snprintf(yaml + n, cap - (size_t)n, "  %s: %s\n", names[count], type_names[types[count]]);
        count++;
    }
    bool offsets = tu_rng_range(r, 0, 2) == 0;
    if (offsets) n += snprintf(yaml + n, cap - (size_t)n, "  rows: {type: i64, role: offsets}\n");
    n += snprintf(yaml + n, cap - (size_t)n, "stages:\n");
    int nstages = (int)tu_rng_range(r, 1, 7);
    bool compacted = false;
    for (int s = 0; s < nstages && count < 60; s++) {
        const char *a = names[tu_rng_range(r, 0, count - 1)];
        const char *b = names[tu_rng_range(r, 0, count - 1)];
        int kind = (int)tu_rng_range(r, 0, 7);
        char name[16];
        snprintf(name, sizeof name, "s%d", s);
        switch (kind) {
        case 0: /* map */
            n += snprintf(yaml + n, cap - (size_t)n, "  - map: {%s: f64(%s) * 1.5 - f64(%s)}\n", name, a, b);
            types[count] = 11;
            break;
        case 1: /* flag + compact */
            n += snprintf(yaml + n, cap - (size_t)n,
                          "  - flag: {%s: f64(%s) < f64(%s) + 0.5}\n  - compact: {by: %s}\n", name, a,
                          b, name);
            compacted = true;
            continue;
        case 2:
            n += snprintf(yaml + n, cap - (size_t)n, "  - filter: i64(%s) != 3\n", a);
            compacted = true;
            continue;
        case 3: { /* scan of a numeric op */
            const char *ops[] = {"sum", "prod", "min", "max"};
            n += snprintf(yaml + n, cap - (size_t)n, "  - scan: {of: f64(%s), op: %s, kind: %s, into: %s}\n",
                          a, ops[tu_rng_range(r, 0, 3)], tu_rng_range(r, 0, 1) ? "exclusive" : "inclusive",
                          name);
            types[count] = 11;
            break;
        }
        case 4: { /* bitwise scan on an integer image */
            const char *ops[] = {"and", "or", "xor"};
            n += snprintf(yaml + n, cap - (size_t)n, "  - scan: {of: i64(%s), op: %s, into: %s}\n", a,
                          ops[tu_rng_range(r, 0, 2)], name);
            types[count] = 4;
            break;
        }
        case 5: /* segmented by key or by offsets */
            if (offsets && !compacted && tu_rng_range(r, 0, 1))
                n += snprintf(yaml + n, cap - (size_t)n,
                              "  - segmented_scan: {of: i64(%s), op: sum, segments: rows, into: %s}\n", a,
                              name);
            else
                n += snprintf(yaml + n, cap - (size_t)n,
                              "  - segmented_scan: {of: f64(%s), op: max, segments: {key: %s}, kind: "
                              "exclusive, into: %s}\n",
                              a, b, name);
            types[count] = tu_rng_range(r, 0, 1) ? 4 : 11;
            break;
        case 6:
            n += snprintf(yaml + n, cap - (size_t)n, "  - scan: {op: linrec, a: f32(%s), b: f32(%s), into: %s}\n",
                          a, b, name);
            types[count] = 10;
            break;
        case 7:
            if (types[0] == 0) continue; /* bool is not a sort key */
            n += snprintf(yaml + n, cap - (size_t)n, "  - sort: {key: %s}\n", names[0]);
            compacted = true;
            continue;
        }
        snprintf(names[count], 16, "%s", name);
        count++;
    }
    if (nstages == 0 || n == 0) n += snprintf(yaml + n, cap - (size_t)n, "  - map: {z: 1}\n");
    (void)types;
}

START_TEST(random_pipelines_compile) {
    tu_rng r;
    tu_rng_seed(&r, 0x5eed0000u + (uint64_t)_i);
    sluice_context *ctx = new_ctx();
    for (int k = 0; k < 3; k++) {
        char yaml[8192];
        random_yaml(&r, yaml, sizeof yaml);
        sluice_pipeline *p = NULL;
        if (sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "random", &p) != SLUICE_OK) {
            /* The generator may combine stages the loader rejects (e.g. a scan over a column
               a compact dropped); those say nothing about the code generator. */
            continue;
        }
        compile_all_groups(ctx, p, yaml);
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- layouts the host side relies on ------------------------------------------------- */

static sl_codegen generate_for(sluice_context *ctx, const char *yaml, sluice_pipeline **pp,
                               int group, int arch) {
    sluice_pipeline *p = tu_load(ctx, yaml);
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    sl_codegen cg;
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, &plan, group, arch, &cg), SLUICE_OK);
    sl_plan_free(ctx, &plan);
    *pp = p;
    return cg;
}

/* generate_for group 0 with the environment variable `name` set to `value` (none when value
 * is NULL) while the kernel is made, for the settings codegen reads from the environment. */
static sl_codegen generate_under(sluice_context *ctx, const char *yaml, sluice_pipeline **pp, int arch,
                                 const char *name, const char *value) {
    if (value) setenv(name, value, 1);
    sl_codegen cg = generate_for(ctx, yaml, pp, 0, arch);
    unsetenv(name);
    return cg;
}

/* NVRTC takes cg's source for `arch`; then cg, p and ctx are freed (the shape tests' end). */
static void compiles_then_free(sluice_context *ctx, sl_codegen *cg, sluice_pipeline *p, int arch,
                               const char *name) {
    void *cubin = NULL;
    size_t size = 0;
    ck_assert_int_eq(sl_cuda_nvrtc_compile(ctx, cg->source, name, arch, &cubin, &size), SLUICE_OK);
    sl_free(ctx, cubin);
    sl_cuda_codegen_free(ctx, cg);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

static sl_codegen generate(sluice_context *ctx, const char *yaml, sluice_pipeline **pp, int group) {
    return generate_for(ctx, yaml, pp, group, ARCH);
}

/* The row threads a group with a look-back warp gets from the table's block (256 rows and the
 * look-back warp: 9 warps): the table's, or, asked to hold two blocks (18 warps, partitions of
 * 5, 5, 4 and 4), 288, whose 10 warps a block fill the four register partitions at the same
 * 96 registers a thread (codegen.c fill_register_partitions). At 3 blocks 9-warp blocks fill
 * the partitions only at 12 warps, which costs registers; at 4 they already fill them. */
static int table_rows_filled(const sl_codegen *cg, const sl_tuning *t) {
    const char *at = strstr(cg->source, "#define MIN_BLOCKS ");
    const int blocks = at ? atoi(at + strlen("#define MIN_BLOCKS ")) : 1;
    if (!cg->lookback_warp) return t->block_threads;
    return blocks == 2 && t->block_threads == 256 ? 288 : t->block_threads;
}

/* Which kernel shape a group gets, and the shared memory it asks for. */
START_TEST(kernel_shapes) {
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p;
    const char *scan = "sluice: 1\nname: s\ninput:\n  x: f32\nstages:\n"
                       "  - scan: {of: x, op: sum, kind: exclusive, into: y}\noutput: [y]\n";
    /* one look-back phase on sm_90: a look-back warp beside the row-owning threads, three
       stages, each big enough for the tile of x and of y */
    sl_codegen cg = generate_for(ctx, scan, &p, 0, 90);
    ck_assert(cg.lookback_warp);
    ck_assert_int_eq((cg.block_threads - 32) * cg.items_per_thread, (int)cg.tile_rows);
    ck_assert_uint_ge(cg.dynamic_smem, 3 * (size_t)cg.tile_rows * 4);
    ck_assert_uint_le(cg.dynamic_smem, SL_CG_SMEM_PER_SM);
    ck_assert_ptr_nonnull(strstr(cg.source, "sl::bulk_load("));
    ck_assert_ptr_nonnull(strstr(cg.source, "overlapped = true"));
    /* the tile loop is kernels/sl_tile.cuh's: the source holds the group's own pieces only
       (no loop, no tile counter, no look-back, no barrier of its own) */
    ck_assert_ptr_nonnull(strstr(cg.source, "sl::fused_kernel<Kernel>(a)"));
    ck_assert_ptr_null(strstr(cg.source, "atomicAdd"));
    ck_assert_ptr_null(strstr(cg.source, "lookback"));
    ck_assert_ptr_null(strstr(cg.source, "__syncthreads"));
    ck_assert_ptr_null(strstr(cg.source, "for (int k = 0;"));
    /* and the loop again as the kernel for batches of about one wave of tiles, whose blocks
       read their first look-back's window together */
    ck_assert(cg.small_kernel);
    ck_assert_ptr_nonnull(strstr(cg.source, SL_CG_SMALL_KERNEL "(const SlArgs a)"));
    ck_assert_ptr_nonnull(strstr(cg.source, "sl::fused_kernel<Kernel, true>(a)"));
    /* the f32 sum's 4-byte state takes the chunked look-back: the table's block */
    ck_assert_int_eq(cg.block_threads, sl_tuning_for(90)->block_threads + 32);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* the fast look-back over a 5-8-byte state that absorbs nothing gets the look-back-bound
       block (tuning.h lookback_block_threads), its tile as many rows larger, in the fast mode
       only; a segmented sum (absorbs at heads), a wider state, a compaction that would fit
       one such block an SM, sm_80 and SLUICE_CUDA_TUNING keep the table's block */
    static const struct {
        const char *input, *stages, *determinism;
        int arch;
        bool bound;
    } lookback_shapes[] = {
        {"{x: f32}", "  - filter: x > 0\n", "", 90, true},
        {"{i: i32}", "  - scan: {of: i, op: sum, acc: i64, into: y}\n", "", 90, true},
        {"{x: f32}", "  - scan: {op: linrec, a: x, b: x, into: y}\n", "", 90, true},
        {"{d: f64}", "  - scan: {of: d, op: sum, into: y}\n", "", 90, true},
        {"{d: f64}", "  - scan: {of: d, op: sum, into: y}\n", "determinism: run_to_run\n", 90, false},
        {"{i: i64}", "  - scan: {of: i, op: max, into: y}\n", "determinism: run_to_run\n", 90, true},
        {"{x: f32, g: bool}", "  - segmented_scan: {of: x, op: sum, segments: g, into: y}\n", "", 90,
         false},
        {"{x: f32}", "  - filter: x > 0\n  - scan: {of: x, op: sum, into: y}\n", "", 90, false},
        /* a compaction whose i64 column leaves room for one 512-thread block an SM */
        {"{x: f32}", "  - filter: x > 0\n  - scan: {op: count, kind: exclusive, into: y}\n", "", 90, false},
        {"{x: f32}", "  - filter: x > 0\n", "", 80, false},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(lookback_shapes); i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "sluice: 1\nname: b\n%sinput: %s\nstages:\n%soutput: [%s]\n",
                 lookback_shapes[i].determinism, lookback_shapes[i].input, lookback_shapes[i].stages,
                 strstr(lookback_shapes[i].stages, "into: y") ? "y" : "x");
        const sl_tuning *t = sl_tuning_for(lookback_shapes[i].arch);
        for (int env = 0; env < 2; env++) {
            if (env) setenv("SLUICE_CUDA_TUNING", "256:16", 1);
            cg = generate_for(ctx, yaml, &p, 0, lookback_shapes[i].arch);
            if (env) unsetenv("SLUICE_CUDA_TUNING");
            const bool bound = lookback_shapes[i].bound && !env;
            const int threads = env ? 256 : bound ? t->lookback_block_threads : table_rows_filled(&cg, t);
            ck_assert_msg(cg.block_threads == threads + (cg.lookback_warp ? 32 : 0),
                          "case %zu%s: %d threads a block", i, env ? " (SLUICE_CUDA_TUNING)" : "",
                          cg.block_threads);
            ck_assert_int_eq((int)cg.tile_rows, threads * cg.items_per_thread);
            ck_assert_ptr_nonnull(strstr(cg.source, "#define THREADS "));
            ck_assert_uint_le(cg.dynamic_smem, SL_CG_SMEM_PER_SM);
            sl_cuda_codegen_free(ctx, &cg);
            sluice_pipeline_free(p);
        }
    }
    /* a group too large for the small groups' block counts still asks for the two blocks its
       stages let reside, in either mode: left at one, run_to_run's six-stage kernel took 110
       registers and lost its second block (codegen.c registers_for_blocks); and its blocks are
       10 warps, not 9, filling the four register partitions at the same 96 registers a thread
       (codegen.c fill_register_partitions) */
    for (int det = 0; det < 2; det++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: six\n%sinput: {x: f32, y: f32}\nstages:\n"
                 "  - map: {r2: x*x + y*y}\n  - flag: {keep: r2 < 2.0}\n  - compact: {by: keep}\n"
                 "  - scan: {of: r2, op: sum, kind: exclusive, into: before}\n"
                 "  - map: {z: x * 2.0 + before}\n  - filter: x > 0\noutput: [z, r2]\n",
                 det ? "determinism: run_to_run\n" : "");
        cg = generate_for(ctx, yaml, &p, 0, 90);
        ck_assert(cg.lookback_warp);
        ck_assert_int_eq(cg.block_threads, 320);
        ck_assert_int_eq((int)cg.tile_rows, 288 * cg.items_per_thread);
        ck_assert_msg(strstr(cg.source, "#define MIN_BLOCKS 2\n") != NULL, "%s: not two blocks",
                      det ? "run_to_run" : "fast");
        ck_assert_uint_le(2 * (cg.dynamic_smem + 3072), SL_CG_SMEM_PER_SM);
        sl_cuda_codegen_free(ctx, &cg);
        sluice_pipeline_free(p);
    }
    /* so are two f64 scans' (a 16-byte state, two blocks by their stages); the scan of one f32
       column, four blocks of 9 warps, already fills the partitions and keeps the table's
       block (asserted above) */
    cg = generate_for(ctx,
                      "sluice: 1\nname: two\ninput: {x: f64, y: f64}\nstages:\n"
                      "  - scan: {of: x, op: sum, into: sx}\n  - scan: {of: y, op: max, into: my}\n"
                      "output: [sx, my]\n",
                      &p, 0, 90);
    ck_assert(cg.lookback_warp);
    ck_assert_int_eq(cg.block_threads, 320);
    ck_assert(strstr(cg.source, "#define MIN_BLOCKS 2\n") != NULL);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* not under determinism: run_to_run, whose float sum takes the ordered look-back */
    const char *ordered = "sluice: 1\nname: s\ndeterminism: run_to_run\ninput:\n  x: f32\nstages:\n"
                          "  - scan: {of: x, op: sum, kind: exclusive, into: y}\noutput: [y]\n";
    cg = generate_for(ctx, ordered, &p, 0, 90);
    ck_assert(cg.lookback_warp);
    ck_assert(!cg.small_kernel);
    ck_assert_ptr_null(strstr(cg.source, SL_CG_SMALL_KERNEL));
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* the same group on sm_80: the two-stage loop, no look-back warp */
    cg = generate_for(ctx, scan, &p, 0, 80);
    ck_assert(!cg.lookback_warp);
    ck_assert(!cg.small_kernel);
    ck_assert_ptr_nonnull(strstr(cg.source, "overlapped = false"));
    ck_assert_int_eq(cg.block_threads * cg.items_per_thread, (int)cg.tile_rows);
    ck_assert_uint_ge(cg.dynamic_smem, 2 * (size_t)cg.tile_rows * 4);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* SLUICE_CUDA_OVERLAP=0 asks for the two-stage loop on sm_90 too */
    setenv("SLUICE_CUDA_OVERLAP", "0", 1);
    cg = generate_for(ctx, scan, &p, 0, 90);
    unsetenv("SLUICE_CUDA_OVERLAP");
    ck_assert(!cg.lookback_warp);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* chained look-backs (a scan of a scan) keep the two-stage loop */
    cg = generate_for(ctx,
                      "sluice: 1\nname: c\ninput:\n  x: f32\nstages:\n"
                      "  - scan: {of: x, op: sum, into: a}\n  - scan: {of: a, op: max, into: b}\n"
                      "output: [b]\n",
                      &p, 0, 90);
    ck_assert_int_eq(cg.phases, 2);
    ck_assert(!cg.lookback_warp);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* many wide inputs: the stages stay within one SM's shared memory (columns past the
       stage budget are read from global memory directly) */
    char yaml[2048];
    int n = snprintf(yaml, sizeof yaml, "sluice: 1\nname: w\ninput:\n");
    for (int c = 0; c < 12; c++) n += snprintf(yaml + n, sizeof yaml - (size_t)n, "  x%d: f64\n", c);
    n += snprintf(yaml + n, sizeof yaml - (size_t)n, "stages:\n  - scan: {of: x0");
    for (int c = 1; c < 12; c++) n += snprintf(yaml + n, sizeof yaml - (size_t)n, " + x%d", c);
    snprintf(yaml + n, sizeof yaml - (size_t)n, ", op: sum, into: y}\noutput: [y]\n");
    cg = generate_for(ctx, yaml, &p, 0, 90);
    ck_assert(cg.lookback_warp);
    ck_assert_uint_le(cg.dynamic_smem, 3 * (SL_CG_STAGE_BUDGET + 128));
    ck_assert_uint_le(cg.dynamic_smem, SL_CG_SMEM_PER_SM);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* a whole-batch sum: the commutative aggregate loop reads global memory, no stages */
    cg = generate_for(ctx,
                      "sluice: 1\nname: r\ninput:\n  x: f32\nstages:\n"
                      "  - reduce: {values: [{op: sum, of: x, into: s}]}\noutput: [s]\n",
                      &p, 0, 90);
    ck_assert(cg.aggregate_loop && !cg.block_records && !cg.lookback_warp);
    ck_assert_uint_eq(cg.dynamic_smem, 0);
    ck_assert_ptr_nonnull(strstr(cg.source, "commutative = true"));
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* runs of an input key, or of a key maps make from inputs: the runs' loop (block
       records, a run state, the key's change test, RunKeys::at making the key at a row);
       after a filter: the loop with a look-back warp */
    static const char *const keyed[] = {
        "sluice: 1\nname: k1\ninput:\n  x: f32\n  k: i32\nstages:\n"
        "  - map: {y: x * 2.0}\n"
        "  - reduce: {segments: {key: k}, values: [{op: sum, of: y, into: s}]}\n"
        "output: [k, s]\n",
        "sluice: 1\nname: k2\ninput:\n  x: f32\n  k: i32\nstages:\n"
        "  - map: {g: k / 2}\n"
        "  - reduce: {segments: {key: g}, values: [{op: sum, of: x, into: s}]}\n"
        "output: [g, s]\n",
        "sluice: 1\nname: k3\ninput:\n  x: f32\n  k: i32\nstages:\n"
        "  - filter: x > 0.0\n"
        "  - reduce: {segments: {key: k}, values: [{op: sum, of: x, into: s}]}\n"
        "output: [k, s]\n",
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(keyed); i++) {
        cg = generate_for(ctx, keyed[i], &p, 0, 90);
        const bool runs = i != 2;
        ck_assert_msg(cg.block_records == runs, "%s", keyed[i]);
        ck_assert(cg.aggregate_loop == runs);
        ck_assert(cg.lookback_warp == !runs);
        ck_assert((strstr(cg.source, "struct RunKeys") != NULL) == runs);
        if (runs)
            ck_assert(strstr(cg.source, i == 1 ? "made = true" : "made = false") != NULL);
        /* a made key's count reads its i32 input in striped 16-byte vectors, 32 rows a lane */
        ck_assert((strstr(cg.source, "static constexpr int chunk = 4, stripe = 32;") != NULL) == (i == 1));
        /* the block-record loops take their own block size from the tuning table */
        const sl_tuning *tu = sl_tuning_for(90);
        ck_assert_int_eq(cg.block_threads, runs ? tu->records_block_threads : table_rows_filled(&cg, tu) + 32);
        /* a tile per warp in the runs' loop (runs_warp_loop), a block's rows otherwise; the
           warp loop asks for registers for 4 blocks of 128 threads */
        ck_assert_int_eq((runs ? 32 : cg.block_threads - (cg.lookback_warp ? 32 : 0)) *
                             cg.items_per_thread,
                         (int)cg.tile_rows);
        if (runs) {
            ck_assert_int_eq((int)cg.dynamic_smem, 0);
            ck_assert(strstr(cg.source, "#define MIN_BLOCKS 4\n") != NULL);
        }
        if (i + 1 < SL_ARRAY_LEN(keyed)) {
            sl_cuda_codegen_free(ctx, &cg);
            sluice_pipeline_free(p);
        }
    }
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* an offsets reduce: block records at the table's block size on sm_90, the general one on
       sm_80 (no row of its own there), and SLUICE_CUDA_TUNING's when that is set; a tile per
       warp (segments_warp_loop: 32 threads' rows) and no shared-memory stages */
    const char *offsets_reduce = "sluice: 1\nname: o\ninput:\n  rows: {type: i64, role: offsets}\n"
                                 "  x: f32\nstages:\n"
                                 "  - reduce: {segments: rows, values: [{op: sum, of: x, into: s}]}\n"
                                 "output: [s]\n";
    cg = generate_for(ctx, offsets_reduce, &p, 0, 90);
    ck_assert(cg.block_records);
    ck_assert_int_eq(cg.block_threads, sl_tuning_for(90)->records_block_threads);
    ck_assert_int_eq(32 * cg.items_per_thread, (int)cg.tile_rows);
    ck_assert_int_eq((int)cg.dynamic_smem, 0);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    cg = generate_for(ctx, offsets_reduce, &p, 0, 80);
    ck_assert(cg.block_records);
    ck_assert_int_eq(cg.block_threads, sl_tuning_for(80)->block_threads);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    setenv("SLUICE_CUDA_TUNING", "256:16", 1);
    cg = generate_for(ctx, offsets_reduce, &p, 0, 90);
    unsetenv("SLUICE_CUDA_TUNING");
    ck_assert_int_eq(cg.block_threads, 256);
    ck_assert_int_eq((int)cg.tile_rows, 32 * 16);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    /* 1024 row threads and the look-back warp would not make one block: 992 of them */
    setenv("SLUICE_CUDA_TUNING", "1024:16:1", 1);
    cg = generate_for(ctx, "sluice: 1\nname: wide-block\ninput: {x: f32}\nstages:\n  - filter: x > 0\n"
                           "output: [x]\n", &p, 0, 90);
    unsetenv("SLUICE_CUDA_TUNING");
    ck_assert(cg.lookback_warp);
    ck_assert_int_eq(cg.block_threads, 1024);
    ck_assert_int_eq((int)cg.tile_rows, 992 * 16);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Items a thread (codegen.c choose_items): 64 bytes of the widest column a group loads, up to
 * the row's max_items (32 on sm_90, so a tile of 1- or 2-byte rows is not a quarter or half
 * of an f32 tile; SLUICE_CUDA_MAX_ITEMS sets it for measurements, up to 128); a column the
 * group makes holds at most 128 bytes a thread. A scan of 1-byte columns alone then takes 64
 * in two rounds (codegen.c one_byte_rounds), unless the cap is set. Each compiles. */
static const struct {
    const char *input, *stages;
    int arch, items;
    const char *max_items; /* SLUICE_CUDA_MAX_ITEMS while the group is generated, or NULL */
} item_cases[] = {
    {"{x: f32}", "  - scan: {of: x, op: max, into: y}\n", 90, 16, NULL},
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 90, 64, NULL},
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 90, 16, "16"},
    {"{x: f64}", "  - scan: {of: x, op: max, into: y}\n", 90, 8, NULL},
    {"{x: f32}", "  - scan: {of: x, op: max, into: y}\n", 90, 16, "32"},
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 90, 32, "32"},
    {"{x: i16}", "  - scan: {of: x, op: max, into: y}\n", 90, 32, "32"},
    {"{x: bool}", "  - scan: {of: x, op: xor, into: y}\n", 90, 32, "32"},
    {"{x: f16}", "  - scan: {of: x, op: max, into: y}\n", 90, 32, "32"},
    {"{x: i8}", "  - scan: {of: x, op: sum, acc: i32, into: y}\n", 90, 32, "32"},
    {"{x: i8}", "  - scan: {of: x, op: sum, acc: i64, into: y}\n", 90, 16, "32"},
    {"{x: i8, y: i32}", "  - map: {w: x + i8(y)}\n  - scan: {of: w, op: max, into: z}\n", 90, 16, "32"},
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 90, 64, "64"},
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 90, 64, "128"}, /* 64 bytes of loads */
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 90, 64, "256"}, /* ignored: the default's */
    /* head bits fit one 64-bit word: offsets segments and runs of keys take 32 at most */
    {"{rows: {type: i64, role: offsets}, x: i8}",
     "  - segmented_scan: {of: x, op: max, segments: rows, into: y}\n", 90, 32, "128"},
    {"{k: u8, x: i8}", "  - reduce: {segments: {key: k}, values: [{of: x, op: max, into: y}]}\n", 90, 32,
     "64"},
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", 80, 8, "8"},
};

START_TEST(items_follow_the_widest_column) {
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p;
    char yaml[512];
    const char *out = strstr(item_cases[_i].stages, "into: z") ? "z" : "y";
    snprintf(yaml, sizeof yaml, "sluice: 1\nname: items\ninput: %s\nstages:\n%soutput: [%s]\n",
             item_cases[_i].input, item_cases[_i].stages, out);
    if (item_cases[_i].max_items) setenv("SLUICE_CUDA_MAX_ITEMS", item_cases[_i].max_items, 1);
    sl_codegen cg = generate_for(ctx, yaml, &p, 0, item_cases[_i].arch);
    unsetenv("SLUICE_CUDA_MAX_ITEMS");
    ck_assert_msg(cg.items_per_thread == item_cases[_i].items, "%s%s (max %s): %d items",
                  item_cases[_i].input, item_cases[_i].stages,
                  item_cases[_i].max_items ? item_cases[_i].max_items : "the row's", cg.items_per_thread);
    compiles_then_free(ctx, &cg, p, item_cases[_i].arch, "items.cu");
}
END_TEST

/* `determinism: run_to_run` (kernels/sl_lookback.cuh): a phase whose combine rounds (float
 * sum, prod, linrec, a declared operator) gets the ordered look-back, in the kernel with a
 * look-back warp (sm_90) and in the two-stage loop (sm_80, chained phases); exact combines
 * keep the fast one, so their kernels are byte for byte those of the default mode. Every
 * state width (one word with its status, 16 bytes, wider) compiles. */
static const struct {
    const char *name, *input, *stages;
    bool rounds;
} determinism_cases[] = {
    {"f32-sum", "{x: f32}", "  - scan: {of: x, op: sum, kind: exclusive, into: y}\n", true},
    {"f16-prod", "{h: f16}", "  - scan: {of: h, op: prod, into: y}\n", true},
    {"f64-sum", "{d: f64}", "  - scan: {of: d, op: sum, into: y}\n", true},
    {"u32-in-f64", "{u: u32}", "  - scan: {of: u, op: sum, acc: f64, into: y}\n", true},
    {"f32-linrec", "{x: f32}", "  - scan: {op: linrec, a: x, b: x, into: y}\n", true},
    {"f64-key", "{d: f64, k: u64}",
     "  - segmented_scan: {of: d, op: sum, segments: {key: k}, into: y}\n", true},
    {"filter-f32", "{x: f32}", "  - filter: x > 0\n  - scan: {of: x, op: sum, into: y}\n", true},
    {"chained", "{x: f32}",
     "  - scan: {of: x, op: sum, into: a}\n  - scan: {of: a, op: sum, into: y}\n", true},
    {"i32-sum", "{i: i32}", "  - scan: {of: i, op: sum, into: y}\n", false},
    {"exact-mix", "{x: f32, i: i64, g: bool}",
     "  - scan: {of: x, op: min, into: y}\n  - scan: {of: i, op: prod, into: p}\n"
     "  - segmented_scan: {of: i, op: xor, segments: g, into: q}\n  - scan: {op: count, into: c}\n",
     false},
};

START_TEST(run_to_run_orders_rounding_lookbacks) {
    const int arch = _i % 2 ? 80 : ARCH;
    const int k = _i / 2;
    sluice_context *ctx = new_ctx();
    char fast_yaml[1024], det_yaml[1024];
    snprintf(fast_yaml, sizeof fast_yaml, "sluice: 1\nname: %s\ninput: %s\nstages:\n%s",
             determinism_cases[k].name, determinism_cases[k].input, determinism_cases[k].stages);
    snprintf(det_yaml, sizeof det_yaml,
             "sluice: 1\nname: %s\ndeterminism: run_to_run\ninput: %s\nstages:\n%s",
             determinism_cases[k].name, determinism_cases[k].input, determinism_cases[k].stages);
    sluice_pipeline *pf, *pd;
    sl_codegen fast = generate_for(ctx, fast_yaml, &pf, 0, arch);
    sl_codegen det = generate_for(ctx, det_yaml, &pd, 0, arch);
    ck_assert_ptr_null(strstr(fast.source, "ORDERED = true"));
    if (determinism_cases[k].rounds) {
        /* kernels/sl_tile.cuh takes the ordered look-back for a phase whose traits say so, in
           the kernel with a look-back warp and in the two-stage loop alike */
        ck_assert_ptr_nonnull(strstr(det.source, "ORDERED = true"));
        void *cubin = NULL;
        size_t size = 0;
        sluice_status st = sl_cuda_nvrtc_compile(ctx, det.source, "det.cu", arch, &cubin, &size);
        if (st != SLUICE_OK) {
            fprintf(stderr, "---- %s ----\n%s\n", determinism_cases[k].name, det.source);
            tu_print_diags(ctx);
        }
        ck_assert_int_eq(st, SLUICE_OK);
        sl_free(ctx, cubin);
    } else {
        ck_assert_str_eq(det.source, fast.source);
    }
    sl_cuda_codegen_free(ctx, &fast);
    sl_cuda_codegen_free(ctx, &det);
    sluice_pipeline_free(pf);
    sluice_pipeline_free(pd);
    sluice_context_destroy(ctx);
}
END_TEST

/* What the host relies on of a reduce group's layout: its rows move (compacts), the close
 * kernel is there, its outputs are the key, the index and the values' needed into columns
 * (no input passes through), and with a filter before it everything is one phase after the
 * filter's (no kept-row count of its own). */
START_TEST(reduce_layouts) {
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p;
    sl_codegen cg = generate(ctx,
                             "sluice: 1\nname: r\ninput: {x: f32, k: u16, y: f64}\nstages:\n"
                             "  - filter: x > 0\n"
                             "  - reduce:\n      segments: {key: k}\n      index: j\n"
                             "      values:\n        - {op: sum, of: x, into: s}\n"
                             "        - {op: count, into: n}\n"
                             "output: [k, j, s]\n",
                             &p, 0);
    ck_assert(cg.compacts);
    ck_assert(cg.reduces);
    ck_assert_int_eq(cg.phases, 1);
    ck_assert_int_eq(cg.npassthrough, 0);
    ck_assert_int_eq(cg.noutputs, 3);
    bool k = false, j = false, s = false;
    for (int i = 0; i < cg.noutputs; i++) {
        const char *name = p->columns[cg.outputs[i]].name;
        k |= strcmp(name, "k") == 0;
        j |= strcmp(name, "j") == 0;
        s |= strcmp(name, "s") == 0;
    }
    ck_assert(k && j && s);
    ck_assert_ptr_nonnull(strstr(cg.source, SL_CG_CLOSE_KERNEL));
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);

    /* no reduce: no close kernel */
    cg = generate(ctx, "sluice: 1\nname: f\ninput: {x: f32}\nstages:\n  - filter: x > 0\n", &p, 0);
    ck_assert(!cg.reduces);
    ck_assert_ptr_null(strstr(cg.source, SL_CG_CLOSE_KERNEL));
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- a reduce group's generated code run on the host --------------------------------- */

/* The reduce pipelines reduce_on_host runs: exact operators only (the CPU associates
 * differently), a filter fused before the reduce (but over offsets, which a filter would
 * invalidate) and a scan (two look-back phases: the two-stage loop) or none (one phase: the
 * loop with a look-back warp; without segments the aggregate loop, over offsets the
 * segments' aggregate loop and, with no filter, over runs of an input key the runs'
 * aggregate loop, which have no look-back), each segment kind, per stream and per batch. Keys
 * and head flags come from k's low bits: runs of a few rows; offsets segments (`rows`) from
 * reduce_emulate.cc's offsets_lengths, which host_offsets repeats. */
static const struct host_case {
    const char *segments;
    bool scan;
    bool narrow; /* one i32 sum: a state narrow enough for one 16-byte word in the look-back */
    bool plain;  /* no filter, and the inputs kb (bool) and kf (f32): over runs of an input
                    key, or of a key the map makes from inputs (g, big), the runs' aggregate
                    loop (long runs of kb: a byte is 0 one time in 256; kf: random bits, NaNs
                    and negative zeros among them) */
    bool scan_rows; /* the scan over offsets segments (`rows`), the reduce over its own: the
                       segment index kernel runs, the empty-segments kernel does not */
} host_cases[] = {
    {"      segments: {key: g}\n", true, false, false, false},
    {"      segments: {key: big}\n", true, false, false, false},
    {"      segments: hd\n", true, false, false, false},
    {"", true, false, false, false},
    {"      segments: {key: g}\n      per: batch\n", true, false, false, false},
    {"      segments: hd\n      per: batch\n", true, false, false, false},
    {"      per: batch\n", true, false, false, false},
    {"      segments: {key: g}\n", false, false, false, false},
    {"      segments: hd\n      per: batch\n", false, false, false, false},
    {"", false, false, false, false},
    {"      per: batch\n", false, false, false, false},
    {"      segments: rows\n", false, false, false, false},
    {"      segments: rows\n", true, false, false, false},
    {"      segments: rows\n", false, true, false, false},
    {"      segments: rows\n", true, true, false, false},
    {"      segments: {key: kb}\n", false, false, true, false},
    {"      segments: {key: kb}\n      per: batch\n", false, false, true, false},
    {"      segments: {key: k}\n", false, false, true, false},
    {"      segments: {key: kb}\n", true, false, true, false},
    {"      segments: {key: kf}\n", false, false, true, false},
    {"      segments: {key: g}\n", false, false, true, false},   /* keys made by the map: */
    {"      segments: {key: big}\n", false, false, true, false}, /* RunKeys::at (bool: big) */
    {"      segments: {key: g}\n", true, false, false, true},
    {"      segments: hd\n      per: batch\n", true, false, false, true},
    /* one sum over runs: a run state small enough for the warps' slots (sl_tile.cuh,
       stages_closed), so tiles of closed runs go out in place order; an input key, a made
       one (the kb cases' long runs close too few a tile for the slots: they write straight) */
    {"      segments: {key: k}\n", false, true, true, false},
    {"      segments: {key: g}\n", false, true, true, false},
    /* a key that changes at about one row in four (mix: 5/32 of rows true), so that about a
       quarter of the tiles close too few runs for the slots and write them straight, the
       others through the slots, the two kinds interleaved in every warp's tiles */
    {"      segments: {key: mix}\n", false, true, true, false},
    /* a key made from two inputs of two widths (k: i16, kb: bool): its count's striped loads
       (RunKeys::striped) read 8 rows of each at a time, 40 a lane, a stripe of 1280 rows */
    {"      segments: {key: gkb}\n", false, false, true, false},
};

/* The generated kernels of a reduce group, with kernels/sl_tile.cuh's loop and the templates
 * under it, compiled for the host with address and undefined behaviour sanitizers and run by
 * host threads playing a block (tests/cuda_host/reduce_emulate.cc) over random batches: the
 * rows must be the CPU backend's bit for bit, and (per stream) the same with the batch cut
 * in three. An out-of-bounds access, a misaligned one or signed overflow in the generated
 * code or the templates stops the run. Skipped where no host C++ compiler is found. */
START_TEST(reduce_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    const bool offsets =
        strstr(host_cases[_i].segments, "segments: rows") != NULL || host_cases[_i].scan_rows;
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: host-%d\ninput:\n%s  x: i32\n  k: i16\n%sstages:\n"
             "  - map: {g: k & 3, hd: (k & 15) == 0, big: (k & 4) != 0, mix: (k & 31) < 5%s}\n"
             "%s"
             "%s"
             "  - reduce:\n%s      index: seg\n      values:\n"
             "        - {op: sum, of: %s, into: s}\n"
             "%s",
             _i, offsets ? "  rows: {type: i64, role: offsets}\n" : "",
             host_cases[_i].plain ? "  kb: bool\n  kf: f32\n" : "",
             host_cases[_i].plain ? ", gkb: 'kb ? (k & 3) : (k & 3) + 4'" : "",
             offsets || host_cases[_i].plain ? "" : "  - filter: x % 5 != 0\n",
             host_cases[_i].scan_rows ? "  - segmented_scan: {of: x, op: max, segments: rows, into: run}\n"
             : host_cases[_i].scan    ? "  - scan: {of: x, op: max, into: run}\n"
                                      : "",
             host_cases[_i].segments,
             host_cases[_i].narrow && host_cases[_i].scan ? "run" : "x",
             host_cases[_i].narrow ? "output: [seg, s]\n"
             : host_cases[_i].scan ? "        - {op: min, of: x, into: lo}\n"
                                     "        - {op: max, of: run, into: top}\n"
                                     "        - {op: xor, of: x, into: bx}\n"
                                     "        - {op: and, of: k, into: ba}\n"
                                     "        - {op: count, into: n}\n"
                                     "output: [seg, s, lo, top, bx, ba, n]\n"
                                   : "        - {op: min, of: x, into: lo}\n"
                                     "        - {op: max, of: x, into: top}\n"
                                     "        - {op: xor, of: x, into: bx}\n"
                                     "        - {op: and, of: k, into: ba}\n"
                                     "        - {op: count, into: n}\n"
                                     "output: [seg, s, lo, top, bx, ba, n]\n");
    sl_plan plan;
    sl_codegen cg;
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg);
    bool per_batch = strstr(host_cases[_i].segments, "per: batch") != NULL;
    ck_assert(cg.reduces);
    /* every loop of sl_tile.cuh */
    bool whole = strstr(host_cases[_i].segments, "segments") == NULL;
    bool loop_free = whole || offsets || host_cases[_i].plain; /* of look-back, without a scan */
    ck_assert(cg.aggregate_loop == (loop_free && !host_cases[_i].scan));
    ck_assert(cg.block_records == ((offsets || host_cases[_i].plain) && !host_cases[_i].scan));
    ck_assert(cg.lookback_warp == (!loop_free && !host_cases[_i].scan));

    char dir[] = "/tmp/sluice-reduce-host-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    emu_build(p, &cg, dir);

    /* rows; with offsets, segments (of about 130 rows on average: up to 15 tiles, so the
     * segments' aggregate loop gives each of the three emulated blocks several). 9000,
     * 25000 and 70000 rows, three, seven and eighteen tiles, only for the loops without
     * look-back: the blocks' partials joined across the emulated grid (an offsets case gets 0
     * segments there: an empty batch). Cut at 8333 and 14583, the 25000 rows make batches
     * that hold whole tiles and whose columns start off their 16-byte alignment, where the
     * commutative fold's striped loads must give way to the blocked ones (a misaligned access
     * stops the run). 70000 rows give each emulated block six tiles, the last block's last one
     * partial (cut at 23333 and 40833: batches of six, five and eight tiles). */
    static const int64_t sizes[] = {0, 1, 2, 33, 1500, 2600, 9000, 25000, 70000},
                         segments[] = {0, 1, 2, 33, 150, 400, 0, 0, 0};
    for (size_t z = 0; z < SL_ARRAY_LEN(sizes); z++) {
        if (z >= SL_ARRAY_LEN(sizes) - 3 && !cg.aggregate_loop) continue;
        if (z >= SL_ARRAY_LEN(sizes) - 2 && offsets) continue; /* the same empty batch again */
        int64_t rows = offsets ? segments[z] : sizes[z];
        uint64_t seed = 977 + (uint64_t)_i * 31 + z;
        host_batch_matches_cpu(p, &cg, dir, offsets, per_batch, seed, rows);
    }
    emu_finish(ctx, p, &plan, &cg, dir);
}
END_TEST

/* Counts of the rows a compaction keeps (core/cuda/codegen.c derive_counts): such a scan's
 * value stays out of the look-back and is the compaction's count plus the carry's, and the
 * carry after a batch takes in the batch's count. Each group here runs on the host (one
 * batch, and cut in three: the count goes on across the cuts, except where it is reset
 * every batch) against the CPU backend:
 * exclusive and inclusive counts beside another scan in their phase, a count before the
 * compaction and one between two (neither derived), a count in a later phase (the
 * two-stage loop), and one a map reads after it. The last two have other inputs: outputs
 * four and two times as wide as the widest input (a compacting store packs each warp's kept
 * rows through that input's slice of the stage, in passes: codegen emit_compacted_stores),
 * and 8-byte outputs four and eight times as wide as the inputs; that again at two items a
 * thread, where an 8-byte output's pass is 8 rows, less than a warp's round; and a tile of
 * 8-byte rows too large for the stage budget, so no input is staged and the kept rows go
 * through the block-staged store. */
static const struct {
    const char *stages;
    int derived; /* count scans derive_counts takes */
    const char *input; /* NULL: x: i32, k: i16 */
    const char *tuning; /* SLUICE_CUDA_TUNING while the group is generated, or NULL */
} count_cases[] = {
    {"  - filter: x % 5 != 0\n  - scan: {op: count, kind: exclusive, into: slot}\n", 1, NULL, NULL},
    {"  - map: {w: i64(k)}\n  - filter: (x & 3) != 0\n  - scan: {op: count, into: n}\n"
     "  - scan: {of: w, op: sum, into: s}\n  - scan: {op: count, kind: exclusive, into: e}\n", 2, NULL, NULL},
    {"  - scan: {op: count, into: all}\n  - filter: x % 3 == 0\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n", 1, NULL, NULL},
    {"  - filter: x % 3 != 0\n  - scan: {op: count, into: mid}\n  - filter: (k & 1) == 0\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n", 1, NULL, NULL},
    {"  - scan: {of: k, op: max, into: m}\n  - filter: m - k < 20000\n"
     "  - scan: {op: count, kind: exclusive, into: slot}\n", 1, NULL, NULL},
    {"  - filter: x % 7 != 0\n  - scan: {op: count, kind: exclusive, reset: batch, into: slot}\n", 0, NULL, NULL},
    {"  - scan: {of: x, op: sum, acc: i64, into: s}\n  - scan: {of: s, op: max, into: m}\n"
     "  - filter: m - s < 50000\n  - scan: {op: count, into: c}\n", 1, NULL, NULL},
    {"  - filter: x % 5 != 0\n  - scan: {op: count, kind: exclusive, into: slot}\n"
     "  - map: {z: slot * 3 + i64(k)}\n", 1, NULL, NULL},
    {"  - filter: b % 3 != 0\n  - map: {w: f32(b) * 0.5, h: i16(b) - 7}\noutput: [b, w, h]\n", 0,
     "  b: u8\n", NULL},
    {"  - map: {d: f64(x) + f64(b)}\n  - filter: d > 100.0\n"
     "  - scan: {of: x, op: sum, into: s}\n", 0, "  x: i16\n  b: u8\n", NULL},
    {"  - filter: b % 3 != 0\n  - map: {d: f64(b) * 0.25, w: i32(b) - 9}\noutput: [b, d, w]\n", 0,
     "  b: u8\n", "64:2"},
    {"  - filter: v % 3 != 0\n  - scan: {op: count, kind: exclusive, into: slot}\n", 1, "  v: i64\n",
     "512:16"},
};

START_TEST(compaction_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "sluice: 1\nname: count-%d\ninput:\n%sstages:\n%s", _i,
             count_cases[_i].input ? count_cases[_i].input : "  x: i32\n  k: i16\n",
             count_cases[_i].stages);
    sl_plan plan;
    sl_codegen cg;
    if (count_cases[_i].tuning) setenv("SLUICE_CUDA_TUNING", count_cases[_i].tuning, 1);
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg);
    if (count_cases[_i].tuning) unsetenv("SLUICE_CUDA_TUNING");
    /* which store the group's kept rows take: warp by warp unless no input is staged */
    const bool block_staged = strstr(cg.source, "sl::block_sync<BAR, BLOCK>") != NULL;
    ck_assert_int_eq(block_staged, _i == (int)SL_ARRAY_LEN(count_cases) - 1);
    if (_i == (int)SL_ARRAY_LEN(count_cases) - 2) ck_assert_ptr_nonnull(strstr(cg.source, "#define ITEMS 2\n"));
    ck_assert(cg.compacts && !cg.reduces);
    /* a derived count adds the phase's count to its value in the carry a batch leaves */
    int derived = 0;
    for (const char *at = cg.source; (at = strstr(at, " += s.f")) != NULL; at++) derived++;
    ck_assert_int_eq(derived, count_cases[_i].derived);
    /* up to eighteen tiles over the three emulated blocks, the last one partial */
    static const int64_t sizes[] = {0, 1, 2, 33, 2600, 9000, 70000, 100003};
    host_sizes_match_cpu(ctx, p, &plan, &cg, false, strstr(yaml, "reset: batch") != NULL,
                         1313 + (uint64_t)_i * 31, sizes, SL_ARRAY_LEN(sizes));
}
END_TEST

/* The chunked look-back on the host (kernels/sl_lookback.cuh, lookback_exclusive_ordered:
 * chunks of 32 tiles): under `determinism: run_to_run` in the loop with a look-back warp (one
 * phase: a sum, a segmented sum whose state is a sum beside its flags) and in the two-stage
 * loop (a second phase after it), and in the fast mode where the large kernel takes it for a
 * state of 4 bytes (CHUNKS: an f32 sum, an i32 maximum), against the CPU, one batch and cut in
 * three, over batches of up to 66 tiles, so that chunks close, publish their prefixes and are
 * read back by the emulated blocks. The values are small integers, whose sums are exact in
 * every association, so the CPU's left fold and the kernels' fixed tree agree to the bit; the
 * association itself is tile_states_test's. run_to_run's states wider than 4 bytes (the
 * generator's phase_chunk_totals) publish their chunks' totals and fold them: `totals`; so do
 * the fast mode's wider states under SLUICE_CUDA_CHUNKS=all (`chunks`), the variant measured
 * against the fast look-back. */
static const struct {
    const char *stages;
    bool run_to_run;
    int phases;
    bool totals;
    const char *chunks; /* SLUICE_CUDA_CHUNKS while the group is generated (NULL: unset) */
} ordered_cases[] = {
    {"  - map: {xf: f32(x & 15)}\n  - scan: {of: xf, op: sum, into: s}\noutput: [s]\n", true, 1, false, NULL},
    {"  - map: {xf: f32(x & 15), g: k & 3}\n"
     "  - segmented_scan: {of: xf, op: sum, segments: {key: g}, kind: exclusive, into: s}\n"
     "output: [s]\n",
     true, 1, true, NULL},
    {"  - map: {xf: f32(x & 15)}\n  - scan: {of: xf, op: sum, into: s}\n"
     "  - scan: {of: s, op: max, kind: exclusive, into: m}\noutput: [s, m]\n",
     true, 2, false, NULL},
    {"  - map: {xf: f32(x & 15)}\n  - scan: {of: xf, op: sum, kind: exclusive, into: s}\noutput: [s]\n",
     false, 1, false, NULL},
    {"  - scan: {of: x, op: max, kind: exclusive, into: m}\noutput: [m]\n", false, 1, false, NULL},
    /* an 8-byte state that never ends a look-back early: h = a h + b with a in {0, 1}, so
       every value is a sum of small integers */
    {"  - map: {a: f32(x & 1), b: f32(k & 7)}\n  - scan: {op: linrec, a: a, b: b, into: h}\n"
     "output: [h]\n",
     true, 1, true, NULL},
    /* head-flag segments, a head in about 40% of the tiles: the ordered look-back ends at a
       head before the tile in its chunk where there is one (kernels/sl_lookback.cuh absorbs)
       and takes the chunk prefix where there is none */
    {"  - map: {xf: f32(x & 15), h: (x & 8191) == 0}\n"
     "  - segmented_scan: {of: xf, op: sum, segments: h, into: s}\noutput: [s]\n",
     true, 1, true, NULL},
    /* SLUICE_CUDA_CHUNKS=all: the default mode's wider states take the same chunked look-back
       and its chunk totals, without the ordering (key segments, the recurrence, head flags,
       an i64 sum of i32 rows) */
    {"  - map: {xf: f32(x & 15), g: k & 3}\n"
     "  - segmented_scan: {of: xf, op: sum, segments: {key: g}, kind: exclusive, into: s}\n"
     "output: [s]\n",
     false, 1, true, "all"},
    {"  - map: {a: f32(x & 1), b: f32(k & 7)}\n  - scan: {op: linrec, a: a, b: b, into: h}\n"
     "output: [h]\n",
     false, 1, true, "all"},
    {"  - map: {xf: f32(x & 15), h: (x & 8191) == 0}\n"
     "  - segmented_scan: {of: xf, op: sum, segments: h, into: s}\noutput: [s]\n",
     false, 1, true, "all"},
    {"  - map: {w: i64(x)}\n  - scan: {of: w, op: sum, into: s}\noutput: [s]\n", false, 1, true, "all"},
};

START_TEST(ordered_on_host) {
    const int i = _i;
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "sluice: 1\nname: ordered-%d\n%sinput:\n  x: i32\n  k: i16\nstages:\n%s", i,
             ordered_cases[i].run_to_run ? "determinism: run_to_run\n" : "", ordered_cases[i].stages);
    sl_plan plan;
    sl_codegen cg;
    if (ordered_cases[i].chunks) setenv("SLUICE_CUDA_CHUNKS", ordered_cases[i].chunks, 1);
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg);
    unsetenv("SLUICE_CUDA_CHUNKS");
    ck_assert_ptr_nonnull(strstr(cg.source, ordered_cases[i].run_to_run ? "ORDERED = true, CHUNKS = false"
                                                                        : "ORDERED = false, CHUNKS = true"));
    ck_assert(!!strstr(cg.source, "CHUNK_TOTALS = true") == ordered_cases[i].totals);
    ck_assert_int_eq(cg.phases, ordered_cases[i].phases);
    ck_assert(cg.lookback_warp == (ordered_cases[i].phases == 1));
    const int64_t tile = cg.tile_rows;
    const int64_t sizes[] = {0, 1, 33, 9000, 32 * tile, 32 * tile + 1, 66 * tile - 5};
    host_sizes_match_cpu(ctx, p, &plan, &cg, false, false, 4242 + (uint64_t)i * 31, sizes, SL_ARRAY_LEN(sizes));
}
END_TEST

/* An offsets-segmented scan alone (one phase: the loop with a look-back warp), in the fast
 * mode and under run_to_run, on the host: each tile's segment index entries come by bulk copy
 * with its inputs (kernels/sl_tile.cuh issue_tile), so the emulator poisons them until the
 * stage's barrier completes and checks that barrier's transaction bytes; a read of them
 * before the wait, or a phase armed without them, fails the run. Segments of about 130 rows
 * (up to 2000: some 64 tiles), batches cut in three. */
START_TEST(offsets_scan_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: offsets-scan-%d\n%sinput:\n  rows: {type: i64, role: offsets}\n"
             "  x: i32\nstages:\n  - map: {xf: f32(x & 15)}\n"
             "  - segmented_scan: {of: xf, op: sum, segments: rows, into: s}\noutput: [s]\n",
             _i, _i == 1 ? "determinism: run_to_run\n" : "");
    sl_plan plan;
    sl_codegen cg;
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg);
    ck_assert_int_eq(cg.phases, 1);
    ck_assert(cg.lookback_warp);
    ck_assert_int_ge(cg.offsets_input, 0);
    const int64_t segments[] = {0, 1, 2, 33, 150, 400, 2000};
    host_sizes_match_cpu(ctx, p, &plan, &cg, true, false, 5151 + (uint64_t)_i * 31, segments,
                         SL_ARRAY_LEN(segments));
}
END_TEST

/* Tiles in rounds (codegen.c rounds_of, kernels/sl_tile.cuh overlapped_loop): under
 * SLUICE_CUDA_ROUNDS the rows take a tile of the loop with a look-back warp in that many
 * rounds of items x threads rows, each round's stores staged apart from the stage its later
 * rounds are still in. On the host, against the CPU backend: batches that end inside a round,
 * on a round's edge and past whole tiles, cut in three; 1- to 8-byte inputs, an f32 sum, an
 * 8-byte recurrence, key and head-flag segments, run_to_run's ordered look-back, stores by each
 * thread (SLUICE_CUDA_STORE=direct), 64 and 128 items a thread (SLUICE_CUDA_TUNING). */
static const struct {
    const char *input, *stages;
    const char *rounds; /* SLUICE_CUDA_ROUNDS, or NULL: the default's */
    bool run_to_run;
    const char *store;  /* SLUICE_CUDA_STORE, or NULL */
    const char *tuning; /* SLUICE_CUDA_TUNING, or NULL */
} rounds_cases[] = {
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "2", false, NULL, NULL},
    {"{x: bool}", "  - scan: {of: x, op: xor, into: y}\noutput: [y]\n", "4", false, NULL, NULL},
    {"{x: i16}", "  - map: {xf: f32(x & 15)}\n  - scan: {of: xf, op: sum, kind: exclusive, into: s}\n"
                 "output: [s]\n", "2", false, NULL, NULL},
    {"{x: i32, k: i16}", "  - map: {a: f32(x & 1), b: f32(k & 7)}\n  - scan: {op: linrec, a: a, b: b, into: h}\n"
                         "output: [h]\n", "4", true, NULL, NULL},
    {"{x: i32, k: i16}", "  - map: {xf: f32(x & 15), g: k & 3}\n"
                         "  - segmented_scan: {of: xf, op: sum, segments: {key: g}, into: s}\noutput: [s]\n",
     "2", false, NULL, NULL},
    {"{x: f64}", "  - map: {h: x > 0.9}\n  - segmented_scan: {of: x, op: max, segments: h, into: s}\n"
                 "output: [s]\n", "2", true, NULL, NULL},
    /* the defaults' four rounds of sums of i8 rows (rounds_of): an f32 made in registers (one
       block, its 32 KB tile beside a round's stores) and an i64 at 512 threads of 16 items */
    {"{x: i8}", "  - map: {y: f32(x & 15)}\n  - scan: {of: y, op: sum, into: s}\noutput: [s]\n", "4", false, NULL, NULL},
    {"{x: i8}", "  - scan: {of: x, op: sum, acc: i64, kind: exclusive, into: s}\noutput: [s]\n", "4", false, NULL, NULL},
    /* each thread storing its own rows (SLUICE_CUDA_STORE=direct) */
    {"{x: i8}", "  - scan: {of: x, op: max, kind: exclusive, into: y}\noutput: [y]\n", "4", false, "direct", NULL},
    {"{x: i16}", "  - map: {y: f32(x & 15)}\n  - scan: {of: y, op: sum, into: s}\noutput: [s, y]\n", "2", false,
     "direct", NULL},
    /* the stage holds two of the three columns; the third is read from global memory */
    {"{x: i8, y: i8, z: u8}", "  - scan: {of: x + y, op: max, into: a}\n  - scan: {of: z, op: xor, into: b}\n"
                              "output: [a, b]\n", "2", false, NULL, NULL},
    /* no column fits the stage: every round reads global memory */
    {"{x: i8, y: i16}", "  - scan: {of: x, op: max, into: a}\n  - scan: {of: y, op: sum, acc: i16, into: b}\n"
                        "output: [a, b]\n", "8", false, NULL, NULL},
    /* more than 32 items a thread (SLUICE_CUDA_TUNING): packed columns of 64 and 128 rows a
       thread, more than a 64-bit word of head bits would hold */
    {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "2", false, NULL, "256:64"},
    {"{x: bool}", "  - scan: {of: x, op: xor, kind: exclusive, into: y}\noutput: [y]\n", "1", false, NULL,
     "256:128"},
    {"{x: i16}", "  - scan: {of: x, op: min, into: y}\noutput: [y]\n", "1", false, "direct", "256:64"},
    /* the default's two rounds of 64 for 1-byte columns alone (codegen.c one_byte_rounds; no
       SLUICE_CUDA_ROUNDS) */
    {"{x: u8}", "  - scan: {of: x, op: max, kind: exclusive, into: y}\noutput: [y]\n", NULL, false, NULL, NULL},
};

START_TEST(rounds_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "sluice: 1\nname: rounds-%d\n%sinput: %s\nstages:\n%s", _i,
             rounds_cases[_i].run_to_run ? "determinism: run_to_run\n" : "", rounds_cases[_i].input,
             rounds_cases[_i].stages);
    sl_plan plan;
    sl_codegen cg;
    if (rounds_cases[_i].rounds) setenv("SLUICE_CUDA_ROUNDS", rounds_cases[_i].rounds, 1);
    if (rounds_cases[_i].store) setenv("SLUICE_CUDA_STORE", rounds_cases[_i].store, 1);
    if (rounds_cases[_i].tuning) setenv("SLUICE_CUDA_TUNING", rounds_cases[_i].tuning, 1);
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg);
    unsetenv("SLUICE_CUDA_ROUNDS");
    unsetenv("SLUICE_CUDA_STORE");
    unsetenv("SLUICE_CUDA_TUNING");
    if (rounds_cases[_i].tuning) ck_assert_int_eq(cg.items_per_thread, atoi(rounds_cases[_i].tuning + 4));
    if (rounds_cases[_i].store) ck_assert(strstr(cg.source, "sl::store_blocked<"));
    ck_assert(cg.lookback_warp);
    ck_assert_int_eq(cg.rounds, rounds_cases[_i].rounds ? atoi(rounds_cases[_i].rounds) : 2);
    if (!rounds_cases[_i].rounds) ck_assert_int_eq(cg.items_per_thread, 64);
    const int64_t round = (int64_t)cg.items_per_thread * (cg.block_threads - 32);
    ck_assert_int_eq(cg.tile_rows, round * cg.rounds);
    const int64_t tile = cg.tile_rows;
    const int64_t sizes[] = {0, 1, 33, round - 1, round, round + 7, tile + 1, 9 * tile - 5};
    host_sizes_match_cpu(ctx, p, &plan, &cg, false, false, 6161 + (uint64_t)_i * 31, sizes, SL_ARRAY_LEN(sizes));
}
END_TEST

/* The bytes the tile's bulk copies expect (sl::queue_expect): its staged input columns. */
static size_t staged_bytes_of(const sl_codegen *cg) {
    const char *at = strstr(cg->source, "sl::queue_expect(queue, s, ");
    ck_assert_ptr_nonnull(at);
    return (size_t)strtoull(at + strlen("sl::queue_expect(queue, s, "), NULL, 10);
}

/* bench/shapes/wide-two-compactions.yaml: eight input columns, two compactions, two scans */
#define WIDE_INPUT "{a: f32, b: f32, c: f32, d: f32, e: f32, f: f32, g: i32, h: i32}"
#define WIDE_STAGES                                                                           \
    "  - map: {u: a * b + c, v: d - e * f}\n  - flag: {k1: u > 0}\n  - compact: {by: k1}\n" \
    "  - scan: {of: v, op: sum, into: sv}\n  - flag: {k2: g > h}\n  - compact: {by: k2}\n"   \
    "  - scan: {of: u, op: max, into: mu}\n"
#define WIDE_OUTPUT "[a, b, c, d, e, f, g, h, u, v, sv, mu]"

/* cull-visible's shape: x and y read, the u64 id only written out; with READ, id read too */
#define CULL_INPUT "{x: f32, y: f32, id: u64}"
#define CULL_STAGES(READ)                                                               \
    "  - map: {r2: x * x + y * y}\n  - filter: r2 <= 1.0" READ "\n"                      \
    "  - scan: {op: count, kind: exclusive, into: slot}\n"
#define CULL_OUTPUT "[id, x, y, r2, slot]"
/* the same columns with the written-only id listed first (plan_stages stages read ones first) */
#define CULL_INPUT_ID_FIRST "{id: u64, x: f32, y: f32}"

/* A loop with a look-back warp takes the items a thread at which every input column its stages
 * read fits the stages (codegen.c items_to_stage_inputs): an f32 recurrence at the look-back-
 * bound block (8 bytes a row) 8, two f64 columns 4, one f32 column the table's 16, eight input
 * columns at the table's block 4. An input only written out does not count: the cull keeps 8
 * items and leaves id unstaged, and takes 4 where its filter reads id, whether id is listed
 * first or last (plan_stages stages the columns the stages read first). Under
 * SLUICE_CUDA_STAGE_ITEMS=table the table's items stay (the recurrence stages a alone, the
 * eight columns leave two out). Each compiles. */
START_TEST(stages_hold_every_read_input) {
    static const struct {
        const char *input, *stages, *output, *env, *value;
        int items;
        size_t staged_row_bytes; /* of a row's input bytes, those the stages hold */
    } cases[] = {
        {"{a: f32, b: f32}", "  - scan: {op: linrec, a: a, b: b, into: h}\n", "[h]", NULL, NULL, 8, 8},
        {"{a: f32, b: f32}", "  - scan: {op: linrec, a: a, b: b, into: h}\n", "[h]", "SLUICE_CUDA_STAGE_ITEMS",
         "table", 16, 4},
        {"{x: f64, y: f64}", "  - filter: x > y\n", "[x, y]", NULL, NULL, 4, 16},
        {"{x: f32}", "  - filter: x > 0\n", "[x]", NULL, NULL, 16, 4},
        {WIDE_INPUT, WIDE_STAGES, WIDE_OUTPUT, NULL, NULL, 4, 32},
        {WIDE_INPUT, WIDE_STAGES, WIDE_OUTPUT, "SLUICE_CUDA_STAGE_ITEMS", "table", 8, 24},
        {CULL_INPUT, CULL_STAGES(""), CULL_OUTPUT, NULL, NULL, 8, 8}, /* x and y, not id */
        {CULL_INPUT, CULL_STAGES(" && id != 7"), CULL_OUTPUT, NULL, NULL, 4, 16},
        {CULL_INPUT_ID_FIRST, CULL_STAGES(""), CULL_OUTPUT, NULL, NULL, 8, 8}, /* still x and y */
        {CULL_INPUT_ID_FIRST, CULL_STAGES(" && id != 7"), CULL_OUTPUT, NULL, NULL, 4, 16},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        sluice_context *ctx = new_ctx();
        sluice_pipeline *p;
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "sluice: 1\nname: staged\ninput: %s\nstages:\n%soutput: %s\n",
                 cases[i].input, cases[i].stages, cases[i].output);
        if (cases[i].env) setenv(cases[i].env, cases[i].value, 1);
        sl_codegen cg = generate_for(ctx, yaml, &p, 0, 90);
        if (cases[i].env) unsetenv(cases[i].env);
        const size_t staged = (size_t)cg.tile_rows * cases[i].staged_row_bytes;
        ck_assert_msg(cg.items_per_thread == cases[i].items && staged_bytes_of(&cg) == staged,
                      "case %zu: %d items, %zu input bytes of a tile staged (expected %d items, %zu)", i,
                      cg.items_per_thread, staged_bytes_of(&cg), cases[i].items, staged);
        compiles_then_free(ctx, &cg, p, 90, "staged.cu");
    }
}
END_TEST

/* ... and its rows on the host against the CPU at those items, bit for bit: an f32 recurrence
 * of two 4-byte columns (8 items; small whole numbers, so that the cut batches' grouping
 * rounds nothing), two f64 columns filtered (4), and the cull (8 items, id read straight
 * from global memory, outside the stages, listed last or first; 4 where its filter reads id),
 * batches ending inside a thread's rows and past several tiles. */
static const struct {
    const char *body;
    int items;
} staged_on_host_cases[] = {
    {"input: {a: u32, b: u32}\nstages:\n  - map: {p: f32(a & 1), q: f32(b & 7)}\n"
     "  - scan: {op: linrec, a: p, b: q, into: h}\noutput: [h]\n",
     8},
    {"input: {x: f64, y: f64}\nstages:\n  - filter: x > y\noutput: [x, y]\n", 4},
    {"input: " CULL_INPUT "\nstages:\n" CULL_STAGES("") "output: " CULL_OUTPUT "\n", 8},
    {"input: " CULL_INPUT "\nstages:\n" CULL_STAGES(" && id != 7") "output: " CULL_OUTPUT "\n", 4},
    {"input: " CULL_INPUT_ID_FIRST "\nstages:\n" CULL_STAGES("") "output: " CULL_OUTPUT "\n", 8},
};

START_TEST(staged_items_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "sluice: 1\nname: staged-%d\n%s", _i, staged_on_host_cases[_i].body);
    sl_plan plan;
    sl_codegen cg;
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg); /* made for sm_90 */
    ck_assert_int_eq(cg.items_per_thread, staged_on_host_cases[_i].items);
    const int64_t tile = cg.tile_rows;
    const int64_t sizes[] = {0, 1, cg.items_per_thread - 1, tile + 3, 5 * tile - 7};
    host_sizes_match_cpu(ctx, p, &plan, &cg, false, false, 6161 + (uint64_t)_i * 41, sizes, SL_ARRAY_LEN(sizes));
}
END_TEST

/* By default on sm_90 (codegen.c emit_pairs) a max or min scan of an i16 or u16 column into
 * its type works a whole tile's rows two a word (sl_items.cuh pairs_fold, pairs_scan; the
 * host's 16x2 picks are shifts). On the host against the CPU, with each operator, signedness
 * and kind, batches ending inside a thread's rows, a round and a tile; a scan of a map, a sum
 * and an f16 column keep the row-at-a-time path, as every group does under
 * SLUICE_CUDA_PAIRS=0 and on sm_80 (no 16x2 picks). Each compiles for sm_90 (max/min.s16x2). */
static const struct {
    const char *input, *stages;
    bool pairs, one_round; /* one_round: 64 items in one round at two blocks (pairs_one_round) */
} pairs_cases[] = {
    {"{x: i16}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", true, true},
    {"{x: u16}", "  - scan: {of: x, op: min, kind: exclusive, into: y}\noutput: [y]\n", true, true},
    /* a map's column written beside the scan's: two rounds of 32 */
    {"{x: i16}", "  - map: {z: x ^ 3}\n  - scan: {of: x, op: min, kind: exclusive, into: y}\noutput: [y, z]\n",
     true, false},
    {"{x: u16}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", true, true},
    {"{x: i16}", "  - map: {z: x + 1}\n  - scan: {of: z, op: max, into: y}\noutput: [y]\n", false, false},
    {"{x: i16}", "  - scan: {of: x, op: sum, acc: i16, into: y}\noutput: [y]\n", false, false},
    {"{x: f16}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", false, false},
};

START_TEST(pairs_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = new_ctx();
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "sluice: 1\nname: pairs-%d\ninput: %s\nstages:\n%s", _i,
             pairs_cases[_i].input, pairs_cases[_i].stages);
    sl_plan plan;
    sl_codegen cg;
    sluice_pipeline *p = host_group(ctx, yaml, &plan, &cg); /* made for sm_90 */
    const char *want = pairs_cases[_i].pairs ? "PAIRS = true" : "PAIRS = false";
    ck_assert_msg(strstr(cg.source, want), "%s%s: no '%s'", pairs_cases[_i].input, pairs_cases[_i].stages,
                  want);
    const bool one_round = cg.items_per_thread == 64 && cg.rounds == 1;
    ck_assert_msg(one_round == pairs_cases[_i].one_round, "%s%s: %d items x %d rounds", pairs_cases[_i].input,
                  pairs_cases[_i].stages, cg.items_per_thread, cg.rounds);
    for (int off = 0; off < 2; off++) { /* SLUICE_CUDA_PAIRS=0 on sm_90; sm_80 */
        sluice_pipeline *q;
        if (off == 0) setenv("SLUICE_CUDA_PAIRS", "0", 1);
        sl_codegen row_at_a_time = generate_for(ctx, yaml, &q, 0, off == 0 ? 90 : 80);
        unsetenv("SLUICE_CUDA_PAIRS");
        ck_assert_msg(strstr(row_at_a_time.source, "PAIRS = false"), "%s%s (%s): pairs", pairs_cases[_i].input,
                      pairs_cases[_i].stages, off == 0 ? "SLUICE_CUDA_PAIRS=0" : "sm_80");
        sl_cuda_codegen_free(ctx, &row_at_a_time);
        sluice_pipeline_free(q);
    }
    void *cubin = NULL;
    size_t size = 0;
    ck_assert_int_eq(sl_cuda_nvrtc_compile(ctx, cg.source, "pairs.cu", 90, &cubin, &size), SLUICE_OK);
    sl_free(ctx, cubin);
    const int64_t round = (int64_t)cg.items_per_thread * (cg.block_threads - (cg.lookback_warp ? 32 : 0));
    const int64_t tile = cg.tile_rows;
    const int64_t sizes[] = {0, 1, 33, round - 1, round + 7, tile + 1, 5 * tile - 3};
    host_sizes_match_cpu(ctx, p, &plan, &cg, false, false, 7171 + (uint64_t)_i * 37, sizes, SL_ARRAY_LEN(sizes));
}
END_TEST

/* ... and only where a row needs nothing of its tile but the states: a compaction, a reduce or
 * offsets segments keep one round under SLUICE_CUDA_ROUNDS, as does the two-stage loop
 * (sm_80); other values of it are ignored. Unset, one plain scan over 1- or 2-byte columns
 * takes the rounds that give its tile 128 bytes of loads a thread (i8 or bool rows: 4 of 32
 * items, or 2 of 64 where every column is of 1 byte (one_byte_rounds; 4 again under
 * SLUICE_CUDA_ROUNDS=4); i16: 2, or 1 of 64 for a max or min scan two rows a word that makes
 * nothing else (pairs_one_round; 2 again under SLUICE_CUDA_ROUNDS=2)), fewer where the
 * tile's loads would pass the table block's at that rate (an i16 sum into i64, 512 threads of 16 items: 2); segments, a second scan or
 * 4-byte loads keep one, as does SLUICE_CUDA_TUNING. Each compiles. */
START_TEST(rounds_only_where_rows_need_states_alone) {
    static const struct {
        const char *input, *stages, *rounds, *tuning;
        int arch, expect;
    } cases[] = {
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", NULL, NULL, 90, 2},
        {"{x: bool}", "  - scan: {of: x, op: xor, into: y}\noutput: [y]\n", NULL, NULL, 90, 2},
        {"{x: bool}", "  - scan: {of: x, op: xor, into: y}\noutput: [y]\n", "4", NULL, 90, 4},
        /* two rows a word, nothing else made: one round of 64 (codegen.c pairs_one_round) */
        {"{x: i16}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", NULL, NULL, 90, 1},
        {"{x: i16}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "2", NULL, 90, 2},
        /* input columns written out beside it (the runtime's, not the kernel's) */
        {"{x: i16, w: i16}", "  - scan: {of: x, op: max, into: y}\noutput: [y, w, x]\n", NULL, NULL, 90, 1},
        {"{x: i16}", "  - map: {z: x ^ 3}\n  - scan: {of: x, op: min, into: y}\noutput: [y, z]\n", NULL,
         NULL, 90, 2},
        {"{x: i16}", "  - map: {y: f32(x) * 0.5}\n  - scan: {of: y, op: sum, into: s}\noutput: [s]\n", NULL,
         NULL, 90, 2},
        {"{x: i16}", "  - scan: {of: x, op: sum, acc: i64, into: y}\noutput: [y]\n", NULL, NULL, 90, 2},
        {"{k: u8, x: i16}", "  - segmented_scan: {of: x, op: max, segments: {key: k}, into: s}\noutput: [s]\n",
         NULL, NULL, 90, 1},
        {"{x: i8, y: i16}", "  - scan: {of: x, op: max, into: a}\n  - scan: {of: y, op: sum, acc: i16, into: b}\n"
                            "output: [a, b]\n", NULL, NULL, 90, 1},
        {"{x: f32}", "  - scan: {of: x, op: sum, into: y}\noutput: [y]\n", NULL, NULL, 90, 1},
        {"{x: i32}", "  - scan: {of: x, op: sum, acc: i64, into: y}\noutput: [y]\n", NULL, NULL, 90, 1},
        {"{x: i8}", "  - map: {y: f32(x) * 0.5}\n  - scan: {of: y, op: sum, into: s}\noutput: [s]\n", NULL,
         NULL, 90, 4},
        {"{x: i8}", "  - scan: {of: x, op: sum, acc: i64, into: y}\noutput: [y]\n", NULL, NULL, 90, 4},
        {"{x: i8}", "  - scan: {of: x, op: sum, acc: i32, into: y}\noutput: [y]\n", NULL, NULL, 90, 4},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", NULL, "256:32", 90, 1},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "1", NULL, 90, 1},
        {"{x: i8}", "  - filter: x > 0\noutput: [x]\n", NULL, NULL, 90, 1},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "8", NULL, 90, 8},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "3", NULL, 90, 1},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", "2", NULL, 80, 1},
        {"{x: f32}", "  - filter: x > 0\noutput: [x]\n", "2", NULL, 90, 1},
        {"{x: f32}", "  - reduce: {values: [{of: x, op: sum, into: t}]}\noutput: [t]\n", "2", NULL, 90, 1},
        {"{rows: {type: i64, role: offsets}, x: f32}",
         "  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\noutput: [s]\n", "2", NULL, 90, 1},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        sluice_context *ctx = new_ctx();
        sluice_pipeline *p;
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "sluice: 1\nname: rounds\ninput: %s\nstages:\n%s", cases[i].input,
                 cases[i].stages);
        if (cases[i].rounds) setenv("SLUICE_CUDA_ROUNDS", cases[i].rounds, 1);
        if (cases[i].tuning) setenv("SLUICE_CUDA_TUNING", cases[i].tuning, 1);
        sl_codegen cg = generate_for(ctx, yaml, &p, 0, cases[i].arch);
        unsetenv("SLUICE_CUDA_ROUNDS");
        unsetenv("SLUICE_CUDA_TUNING");
        ck_assert_msg(cg.rounds == cases[i].expect, "%s%s (ROUNDS=%s, TUNING=%s, sm_%d): %d rounds",
                      cases[i].input, cases[i].stages, cases[i].rounds ? cases[i].rounds : "unset",
                      cases[i].tuning ? cases[i].tuning : "unset", cases[i].arch, cg.rounds);
        compiles_then_free(ctx, &cg, p, cases[i].arch, "rounds.cu");
    }
}
END_TEST

/* Which scan values the state holds widened (codegen.c, widen_narrow_fields): a scan stage's
 * builtin operator over i8, i16, u8, u16 or bool, held as i32 or u32, only where the phase's
 * state keeps its size; never a reduce's value or a declared operator's field; under
 * SLUICE_CUDA_WIDEN=0 none. The identity's bytes are the held type's (the extension). Each
 * compiles, for the loop with a look-back warp (sm_90) and the two-stage loop (sm_80). */
START_TEST(narrow_values_held_widened) {
    static const struct {
        const char *input, *stages;
        int scan;           /* the carried record looked at */
        sluice_type held;   /* its first value field's held type */
        long long identity; /* the held type's identity, read from the carry's bytes */
        const char *widen;  /* SLUICE_CUDA_WIDEN, or NULL */
    } cases[] = {
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", 0, SLUICE_I32, -128, NULL},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\noutput: [y]\n", 0, SLUICE_I8, -128, "0"},
        {"{x: bool}", "  - scan: {of: x, op: and, into: y}\noutput: [y]\n", 0, SLUICE_U32, 1, NULL},
        {"{x: u16}", "  - scan: {of: x, op: min, into: y}\noutput: [y]\n", 0, SLUICE_U32, 65535, NULL},
        {"{x: i16}", "  - scan: {of: x, op: prod, acc: i16, into: y}\noutput: [y]\n", 0, SLUICE_I32, 1, NULL},
        {"{x: i8}", "  - scan: {of: x, op: sum, acc: i8, into: y}\noutput: [y]\n", 0, SLUICE_I32, 0, NULL},
        {"{x: u8}", "  - map: {h: x > 200}\n  - segmented_scan: {of: x, op: or, segments: h, into: y}\n"
                    "output: [y]\n", 0, SLUICE_U8, 0, NULL},
        /* two 1-byte values fill a 4-byte state; widened, either would take 8 */
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n  - scan: {of: x, op: min, into: z}\n"
                    "output: [y, z]\n", 1, SLUICE_I8, 127, NULL},
        /* beside an i32 value the i16's padding holds the widening */
        {"{x: i16, w: i32}", "  - scan: {of: w, op: sum, into: y}\n  - scan: {of: x, op: min, into: z}\n"
                             "output: [y, z]\n", 1, SLUICE_I32, 32767, NULL},
        {"{x: i8}", "  - reduce: {values: [{of: x, op: max, into: t}]}\noutput: [t]\n", 0, SLUICE_I8, -128, NULL},
        {"{x: i16}", "  - scan: {op: smax, of: {m: x}, into: {m: y}}\noutput: [y]\n", 0, SLUICE_I16, -32768, NULL},
    };
    for (int arch = 80; arch <= 90; arch += 10)
        for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
            sluice_context *ctx = new_ctx();
            sluice_pipeline *p;
            char yaml[1024];
            snprintf(yaml, sizeof yaml,
                     "sluice: 1\nname: widen\ninput: %s\noperators:\n  smax:\n    state: {m: i16}\n"
                     "    identity: {m: -32768}\n    combine: {m: \"l.m < r.m ? r.m : l.m\"}\n"
                     "stages:\n%s",
                     cases[i].input, cases[i].stages);
            sl_codegen cg = generate_under(ctx, yaml, &p, arch, "SLUICE_CUDA_WIDEN", cases[i].widen);
            ck_assert_int_gt(cg.nscans, cases[i].scan);
            const sl_cg_scan_carry *sk = &cg.scan_carry[cases[i].scan];
            ck_assert_msg(sk->held[0] == cases[i].held, "%s%s (sm_%d): held as type %d, not %d",
                          cases[i].input, cases[i].stages, arch, (int)sk->held[0], (int)cases[i].held);
            const sl_value id = sl_value_load(sk->held[0], cg.carry_identity + sk->value[0], 0);
            const long long got = sl_type_is_signed(sk->held[0]) ? (long long)id.i : (long long)id.u;
            ck_assert_msg(got == cases[i].identity, "%s%s (sm_%d): identity %lld, not %lld",
                          cases[i].input, cases[i].stages, arch, got, cases[i].identity);
            compiles_then_free(ctx, &cg, p, arch, "widen.cu");
        }
}
END_TEST

/* A thread's registers for 1- and 2-byte columns (kernels/sl_items.cuh): packed four or two to
 * a word where the group loads or stores the column; a widened scan value read straight from
 * its column in one extending read (items::held); SLUICE_CUDA_PACK=0 one register a value.
 * Each compiles (sm_90 and sm_80). */
START_TEST(narrow_columns_packed) {
    static const struct {
        const char *input, *stages;
        const char *pack;               /* SLUICE_CUDA_PACK, or NULL */
        const char *has[3], *lacks[2]; /* what the source holds and does not */
    } cases[] = {
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", NULL,
         {"sl::items<int8_t, ITEMS> c0 = {};", "e.f0 = (int32_t)c0.held(i);", NULL}, {", false>", NULL}},
        {"{x: i8}", "  - scan: {of: x, op: max, into: y}\n", "0",
         {"sl::items<int8_t, ITEMS, false> c0 = {};", "e.f0 = (int32_t)c0.held(i);", NULL}, {NULL}},
        /* a value made by an expression reads its column as a value, then extends */
        {"{u: u16}", "  - scan: {of: u + 1, op: min, into: y}\n", NULL,
         {"sl::items<uint16_t, ITEMS> c0 = {};", NULL}, {"held(i)", NULL}},
        /* a flag made and used in registers alone is not packed (crosses_memory) */
        {"{x: f32}", "  - flag: {k: x > 0}\n  - compact: {by: k}\n  - scan: {of: x, op: sum, into: y}\n"
                     "output: [y]\n",
         NULL, {"sl::items<sl_bool, ITEMS, false> c", NULL}, {"sl::items<sl_bool, ITEMS> c", NULL}},
        /* a bool is tested, not extended; an f32 column stays an array of floats */
        {"{h: bool, x: f32}", "  - scan: {of: h, op: xor, into: y}\n  - scan: {of: x, op: sum, into: z}\n",
         NULL, {"sl::items<sl_bool, ITEMS> c0 = {};", "sl::items<float, ITEMS> c1 = {};", NULL}, {"held(i)", NULL}},
    };
    for (int arch = 80; arch <= 90; arch += 10)
        for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
            sluice_context *ctx = new_ctx();
            sluice_pipeline *p;
            char yaml[1024];
            snprintf(yaml, sizeof yaml, "sluice: 1\nname: packed\ninput: %s\nstages:\n%s", cases[i].input,
                     cases[i].stages);
            sl_codegen cg = generate_under(ctx, yaml, &p, arch, "SLUICE_CUDA_PACK", cases[i].pack);
            for (int k = 0; k < 3 && cases[i].has[k]; k++)
                ck_assert_msg(strstr(cg.source, cases[i].has[k]), "%s%s (sm_%d): no '%s' in the source",
                              cases[i].input, cases[i].stages, arch, cases[i].has[k]);
            for (int k = 0; k < 2 && cases[i].lacks[k]; k++)
                ck_assert_msg(!strstr(cg.source, cases[i].lacks[k]), "%s%s (sm_%d): '%s' in the source",
                              cases[i].input, cases[i].stages, arch, cases[i].lacks[k]);
            compiles_then_free(ctx, &cg, p, arch, "packed.cu");
        }
}
END_TEST

/* Which phases' states absorb what lies left of them (codegen.c phase_absorbs): those whose
 * every slot is a scan segmented by head flags or offsets; key segments, a plain scan or a
 * compaction's count beside them absorb nothing. */
START_TEST(segment_heads_absorb) {
    static const struct {
        const char *stages;
        bool absorbs;
    } cases[] = {
        {"  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\noutput: [s]\n", true},
        {"  - map: {h: x > 1.0}\n  - segmented_scan: {of: x, op: max, segments: h, into: s}\n"
         "output: [s]\n",
         true},
        {"  - segmented_scan: {of: x, op: sum, segments: {key: x}, into: s}\noutput: [s]\n", false},
        {"  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\n"
         "  - scan: {of: x, op: sum, into: t}\noutput: [s, t]\n",
         false},
        {"  - map: {h: x > 1.0}\n  - filter: x > 0.0\n"
         "  - segmented_scan: {of: x, op: sum, segments: h, into: s}\noutput: [s]\n",
         false},
        {"  - scan: {of: x, op: sum, into: s}\noutput: [s]\n", false},
    };
    sluice_context *ctx = new_ctx();
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: absorb\ninput:\n  rows: {type: i64, role: offsets}\n  x: f32\n"
                 "stages:\n%s",
                 cases[i].stages);
        sluice_pipeline *p;
        sl_codegen cg = generate(ctx, yaml, &p, 0);
        ck_assert_int_eq(cg.phases, 1);
        ck_assert_msg((strstr(cg.source, "ABSORBS = true") != NULL) == cases[i].absorbs, "case %zu", i);
        sl_cuda_codegen_free(ctx, &cg);
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(layouts) {
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p;
    /* exclusive f32 sum: one phase, a 4-byte state (packed with its status in 8 bytes) */
    sl_codegen cg = generate(ctx,
                             "sluice: 1\nname: s\ninput:\n  x: f32\nstages:\n"
                             "  - scan: {of: x, op: sum, kind: exclusive, into: y}\noutput: [y]\n",
                             &p, 0);
    ck_assert_int_eq(cg.phases, 1);
    ck_assert_uint_eq(cg.state_size[0], 4);
    ck_assert(!cg.compacts);
    ck_assert_int_eq(cg.ninputs, 1);
    ck_assert_int_eq(cg.noutputs, 1);
    ck_assert_int_eq(cg.npassthrough, 0);
    ck_assert_int_eq(cg.items_per_thread * (cg.block_threads - (cg.lookback_warp ? 32 : 0)), (int)cg.tile_rows);
    float zero;
    memcpy(&zero, cg.carry_identity, 4);
    ck_assert(zero == 0.0f);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);

    /* filter: compacts, every needed column written, the count alone in the tuple */
    cg = generate(ctx,
                  "sluice: 1\nname: f\ninput:\n  x: f32\n  id: u32\nstages:\n  - filter: x > 0\n", &p, 0);
    ck_assert(cg.compacts);
    ck_assert_int_eq(cg.noutputs, 2);
    ck_assert_int_eq(cg.phases, 1);
    ck_assert_uint_eq(cg.state_size[0], 8);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);

    /* a map before a sort: inputs needed after the group pass through untouched */
    cg = generate(ctx,
                  "sluice: 1\nname: m\ninput:\n  x: f32\n  id: u32\nstages:\n  - map: {k: x * 2.0}\n"
                  "  - sort: {key: k}\n",
                  &p, 0);
    ck_assert(!cg.compacts);
    ck_assert_int_eq(cg.phases, 0);
    ck_assert_int_eq(cg.noutputs, 1);
    ck_assert_int_eq(cg.npassthrough, 2);
    ck_assert_uint_eq(sl_cuda_codegen_scratch_size(&cg, 1000), 0);
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);

    /* a filter on a scan's output needs a second, chained look-back; min identity is +inf */
    cg = generate(ctx,
                  "sluice: 1\nname: c\ninput:\n  x: f32\nstages:\n"
                  "  - scan: {of: x, op: min, into: m}\n  - filter: m > 0\n",
                  &p, 0);
    ck_assert_int_eq(cg.phases, 2);
    ck_assert(cg.compacts);
    float inf;
    memcpy(&inf, cg.carry_identity, 4);
    ck_assert(inf > 1e38f);
    ck_assert_uint_gt(sl_cuda_codegen_phase_offset(&cg, 1 << 20, 1), sl_cuda_codegen_phase_offset(&cg, 1 << 20, 0));
    ck_assert_uint_ge(sl_cuda_codegen_scratch_size(&cg, 1 << 20), sl_cuda_codegen_phase_offset(&cg, 1 << 20, 1));
    sl_cuda_codegen_free(ctx, &cg);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(six_stages_are_one_kernel) {
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: six\ninput:\n  x: f32\n  y: f32\nstages:\n"
                                      "  - map: {r2: x*x + y*y}\n  - flag: {near: r2 < 4.0}\n"
                                      "  - compact: {by: near}\n"
                                      "  - scan: {of: r2, op: sum, kind: exclusive, into: acc}\n"
                                      "  - map: {z: acc * 0.5}\n  - filter: z > 1.0\n");
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    ck_assert_int_eq(plan.ngroups, 1);
    ck_assert_int_eq(plan.passes, 1);
    sl_codegen cg;
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, &plan, 0, ARCH, &cg), SLUICE_OK);
    /* the filter reads the scan's output: a second look-back chained in the same kernel */
    ck_assert_int_eq(cg.phases, 2);
    ck_assert(cg.compacts);
    ck_assert_ptr_nonnull(strstr(cg.source, SL_CG_KERNEL));
    ck_assert_ptr_null(strstr(cg.source, SL_CG_SEGINDEX_KERNEL));
    sl_cuda_codegen_free(ctx, &cg);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* More columns and params than one kernel's argument block holds: a LIMIT status that says
 * what to do, not a crash or a bad launch. */
START_TEST(too_many_kernel_arguments_is_a_limit) {
    sluice_context *ctx = new_ctx();
    size_t cap = 1 << 16;
    char *yaml = malloc(cap);
    int n = snprintf(yaml, cap, "sluice: 1\nname: wide\ninput:\n  x: f32\nstages:\n  - map:\n");
    for (int k = 0; k < 520; k++) n += snprintf(yaml + n, cap - (size_t)n, "      m%d: x + %d.0\n", k, k);
    sluice_pipeline *p = tu_load(ctx, yaml);
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    sl_codegen cg;
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, &plan, 0, ARCH, &cg), SLUICE_ERR_LIMIT);
    ck_assert_ptr_null(cg.source);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(strstr(d->message, "split the pipeline"));
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    free(yaml);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- the kernel cache ---------------------------------------------------------------- */

static const char *const tiny_kernel =
    "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] += 1.0f; }\n";

static void entry_path(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *ent;
    out[0] = 0;
    while ((ent = readdir(d)))
        if (strstr(ent->d_name, ".cubin")) snprintf(out, cap, "%s/%s", dir, ent->d_name);
    closedir(d);
    ck_assert(out[0] != 0);
}

/* SLUICE_NVRTC_TRACE=1 builds the tile loop's step clocks (kernels/sl_trace.cuh) into the
 * kernels: the option reaches NVRTC, the trace build compiles, and it is another cache entry. */
START_TEST(trace_build_compiles_and_is_its_own_cache_entry) {
    char plain[256], traced[256];
    uint64_t k_plain[2], k_traced[2];
    unsetenv("SLUICE_NVRTC_TRACE");
    sl_cuda_nvrtc_options_line(ARCH, plain, sizeof plain);
    sl_cuda_kcache_key(tiny_kernel, ARCH, 1, k_plain);
    setenv("SLUICE_NVRTC_TRACE", "1", 1);
    sl_cuda_nvrtc_options_line(ARCH, traced, sizeof traced);
    sl_cuda_kcache_key(tiny_kernel, ARCH, 1, k_traced);
    ck_assert_ptr_null(strstr(plain, "-DSL_TRACE"));
    ck_assert_ptr_nonnull(strstr(traced, " -DSL_TRACE"));
    ck_assert(k_plain[0] != k_traced[0] && k_plain[1] != k_traced[1]);
    /* a group with the look-back warp's loop, compiled with the clocks in */
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: t\ninput:\n  x: f32\nstages:\n"
                                      "  - filter: x > 0\n"
                                      "  - scan: {of: x, op: sum, kind: exclusive, into: y}\n"
                                      "output: [y]\n");
    ck_assert_int_eq(compile_all_groups(ctx, p, "traced"), 1);
    unsetenv("SLUICE_NVRTC_TRACE");
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* The kernel library's headers are part of the cache key: a cubin compiled against other
 * headers (an older sluice, an edited kernels/ file) is never taken for the same source. */
START_TEST(kernel_cache_key_covers_the_headers) {
    const char *names[2] = {"sl_a.cuh", "sl_b.cuh"};
    const char *texts[2] = {"#define A 1\n", "#define B 2\n"};
    const uint64_t base = sl_cuda_nvrtc_headers_digest_of(names, texts, 2);
    ck_assert_uint_eq(base, sl_cuda_nvrtc_headers_digest_of(names, texts, 2));
    const char *edited[2] = {"#define A 1\n", "#define B 3\n"};
    ck_assert_uint_ne(base, sl_cuda_nvrtc_headers_digest_of(names, edited, 2));
    const char *renamed[2] = {"sl_a.cuh", "sl_c.cuh"};
    ck_assert_uint_ne(base, sl_cuda_nvrtc_headers_digest_of(renamed, texts, 2));
    /* the boundary between name and text cannot shift */
    const char *shifted_names[2] = {"sl_a.cuh#", "sl_b.cuh"};
    const char *shifted_texts[2] = {"define A 1\n", "#define B 2\n"};
    ck_assert_uint_ne(base, sl_cuda_nvrtc_headers_digest_of(shifted_names, shifted_texts, 2));
    ck_assert_uint_ne(base, sl_cuda_nvrtc_headers_digest_of(names, texts, 1));

    uint64_t k1[2], k2[2];
    sl_cuda_kcache_key(tiny_kernel, ARCH, base, k1);
    sl_cuda_kcache_key(tiny_kernel, ARCH, sl_cuda_nvrtc_headers_digest_of(names, edited, 2), k2);
    ck_assert(k1[0] != k2[0] && k1[1] != k2[1]);

    /* and the entry the cache writes carries the key of the embedded headers */
    char dir[] = "/tmp/sluice-kkey-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    sluice_context_options opt = SLUICE_CONTEXT_OPTIONS_INIT;
    opt.kernel_cache_dir = dir;
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, &opt), SLUICE_OK);
    void *bin = NULL;
    size_t size = 0;
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, NULL), SLUICE_OK);
    sl_free(ctx, bin);
    char path[4096];
    entry_path(dir, path, sizeof path);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char head[24];
    ck_assert_uint_eq(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    uint64_t stored[2], expected[2];
    memcpy(stored, head + 8, sizeof stored);
    sl_cuda_kcache_key(tiny_kernel, ARCH, sl_cuda_nvrtc_headers_digest(), expected);
    ck_assert(stored[0] == expected[0] && stored[1] == expected[1]);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(kernel_cache_hits_and_rebuilds) {
    char dir[] = "/tmp/sluice-kcache-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[256];
    snprintf(sub, sizeof sub, "%s/nested/cache", dir); /* created on demand */
    sluice_context_options opt = SLUICE_CONTEXT_OPTIONS_INIT;
    opt.kernel_cache_dir = sub;
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, &opt), SLUICE_OK);
    char got[4096];
    ck_assert(sl_cuda_kcache_dir(ctx, got, sizeof got));
    ck_assert_str_eq(got, sub);

    void *bin = NULL;
    size_t size = 0;
    bool hit = true;
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(!hit);
    void *first = malloc(size);
    memcpy(first, bin, size);
    size_t first_size = size;
    sl_free(ctx, bin);
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(hit);
    ck_assert_uint_eq(size, first_size);
    ck_assert_int_eq(memcmp(bin, first, size), 0);
    sl_free(ctx, bin);

    /* a flipped byte in the cubin: checksum mismatch, rebuilt, then valid again */
    char path[4096];
    entry_path(sub, path, sizeof path);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -10, SEEK_END);
    int c = fgetc(f);
    fseek(f, -10, SEEK_END);
    fputc(c ^ 0x5a, f);
    fclose(f);
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(!hit);
    ck_assert_int_eq(memcmp(bin, first, size), 0);
    sl_free(ctx, bin);
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(hit);
    sl_free(ctx, bin);

    /* truncated entry: rebuilt */
    ck_assert_int_eq(truncate(path, 40), 0);
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(!hit);
    ck_assert_uint_eq(size, first_size);
    sl_free(ctx, bin);

    /* a stale entry (another key's content under this name): rejected and replaced */
    const char *other = "extern \"C\" __global__ void k2(int *x) { x[0] = 7; }\n";
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, other, "other.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    sl_free(ctx, bin);
    char other_path[4096] = "";
    {
        DIR *d = opendir(sub);
        struct dirent *ent;
        while ((ent = readdir(d)))
            if (strstr(ent->d_name, ".cubin") && !strstr(path, ent->d_name))
                snprintf(other_path, sizeof other_path, "%s/%s", sub, ent->d_name);
        closedir(d);
    }
    ck_assert(other_path[0] != 0);
    ck_assert_int_eq(rename(other_path, path), 0);
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(!hit);
    ck_assert_int_eq(memcmp(bin, first, size), 0);
    sl_free(ctx, bin);

    /* another architecture is another entry */
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", 80, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(!hit);
    sl_free(ctx, bin);
    free(first);
    sluice_context_destroy(ctx);

    /* an empty directory option disables the cache */
    opt.kernel_cache_dir = "";
    ck_assert_int_eq(sluice_context_create(&ctx, &opt), SLUICE_OK);
    ck_assert(!sl_cuda_kcache_dir(ctx, got, sizeof got));
    ck_assert_int_eq(sl_cuda_kcache_get(ctx, tiny_kernel, "tiny.cu", ARCH, 0, 0, &bin, &size, &hit), SLUICE_OK);
    ck_assert(!hit);
    sl_free(ctx, bin);
    sluice_context_destroy(ctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(compile_error_is_a_status_with_the_log) {
    sluice_context *ctx = new_ctx();
    void *bin = NULL;
    size_t size = 0;
    ck_assert_int_eq(sl_cuda_nvrtc_compile(ctx, "this is not CUDA;", "bad.cu", ARCH, &bin, &size),
                     SLUICE_ERR_COMPILE);
    ck_assert_ptr_null(bin);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(strstr(d->message, "bad.cu"));
    sluice_context_destroy(ctx);
}
END_TEST

/* The spill counter reads ptxas -v's lines for every function of the program; the register
 * count is the most any of them uses. */
START_TEST(ptxas_spill_bytes_reads_the_log) {
    static const char log[] =
        "ptxas info    : Compiling entry function 'sl_fused_small' for 'sm_90'\n"
        "ptxas info    : Function properties for sl_fused_small\n"
        "ptxas         .     40 bytes stack frame, 20 bytes spill stores, 24 bytes spill loads\n"
        "ptxas info    : Function properties for _ZN2sl18lookback_exclusive\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Compiling entry function 'sl_fused' for 'sm_90'\n"
        "ptxas         .     32 bytes stack frame, 132 bytes spill stores, 20 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 1 barriers, 32 bytes smem, 400 bytes cmem[0]\n"
        "ptxas info    : Compiling entry function 'sl_reduce_close' for 'sm_90'\n"
        "ptxas info    : Used 32 registers, 384 bytes cmem[0]\n";
    ck_assert_uint_eq(sl_cuda_ptxas_spill_bytes(log), 152);
    ck_assert_int_eq(sl_cuda_ptxas_registers(log), 168);
    ck_assert_int_eq(sl_cuda_ptxas_registers("ptxas info    : Used registers"), 0);
    ck_assert_int_eq(sl_cuda_ptxas_registers(""), 0);
    ck_assert_int_eq(sl_cuda_ptxas_registers(NULL), 0);
    ck_assert_uint_eq(sl_cuda_ptxas_spill_bytes("ptxas .  0 bytes stack frame, 0 bytes spill stores"), 0);
    ck_assert_uint_eq(sl_cuda_ptxas_spill_bytes(""), 0);
    ck_assert_uint_eq(sl_cuda_ptxas_spill_bytes(NULL), 0);
}
END_TEST

/* A group that asks ptxas for several resident blocks compiles at the most, going down, whose
 * spill stores stay within the tuning row's bound (kernels/tuning.h, spill_bytes), or at one.
 * The groups: gpu_bench's f32 recurrence (two 544-thread blocks: 56 registers a thread), the
 * shipped pipelines of a running drawdown and of ragged sums (four 288-thread blocks), which
 * spilled 12 to 556 bytes of stores with this toolkit's ptxas (bench/RESULTS.md, thirty-fourth
 * session), and an i8 max scan (two 288-thread blocks of four rounds; until the thirty-eighth
 * session this was the i16 max scan, which now takes one block in two rounds); the
 * assertions hold for any ptxas. With SLUICE_CUDA_FIT=0 the source is the plain one and asks
 * for no fit. */
START_TEST(fit_compiles_at_the_first_bound_without_spills) {
    static const char *const yamls[] = {
        "sluice: 1\nname: fit-linrec\ninput: {a: f32, b: f32}\nstages:\n"
        "  - scan: {op: linrec, a: a, b: b, into: h}\noutput: [h]\n",
        NULL, NULL,
        "sluice: 1\nname: fit-i8-max\ninput: {x: i8}\nstages:\n"
        "  - scan: {of: x, op: max, into: s}\noutput: [s]\n"};
    const char *files[] = {NULL, "drawdown.yaml", "ragged-cumsum.yaml", NULL};
    sluice_context *ctx = new_ctx();
    sluice_pipeline *p = NULL;
    if (yamls[_i]) {
        p = tu_load(ctx, yamls[_i]);
    } else {
        char path[4096];
        snprintf(path, sizeof path, SLUICE_SOURCE_DIR "/pipelines/%s", files[_i]);
        ck_assert_int_eq(sluice_pipeline_load_file(ctx, path, &p), SLUICE_OK);
    }
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    sl_codegen plain, fit;
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, &plan, 0, ARCH, &fit), SLUICE_OK);
    setenv("SLUICE_CUDA_FIT", "0", 1);
    sluice_status st = sl_cuda_codegen(ctx, p, &plan, 0, ARCH, &plain);
    unsetenv("SLUICE_CUDA_FIT");
    ck_assert_int_eq(st, SLUICE_OK);
    ck_assert_int_eq(plain.fit_blocks, 0);
    ck_assert_int_gt(plain.min_blocks, 1);
    ck_assert_int_eq(fit.fit_blocks, plain.min_blocks);
    ck_assert_int_eq(fit.fit_spill_bytes, sl_tuning_for(ARCH)->spill_bytes);
    const size_t allowed = (size_t)fit.fit_spill_bytes;
    ck_assert_str_ne(fit.source, plain.source); /* entries of their own in the kernel cache */

    void *cubin = NULL;
    size_t size = 0;
    sl_ptxas_usage usage, fitted;
    int bound = 0;
    ck_assert_int_eq(sl_cuda_nvrtc_compile_fitted(ctx, fit.source, "fit.cu", ARCH, fit.fit_blocks,
                                                  fit.fit_spill_bytes, &cubin, &size, &bound, &fitted),
                     SLUICE_OK);
    ck_assert_uint_gt(size, 0);
    sl_free(ctx, cubin);
    ck_assert_int_ge(bound, 1);
    ck_assert_int_le(bound, fit.fit_blocks);
    /* spills within the bound at the count taken (unless one block spills more) ... */
    ck_assert_int_eq(sl_cuda_nvrtc_compile_bounded(ctx, fit.source, "fit.cu", ARCH, bound, &cubin,
                                                   &size, &usage),
                     SLUICE_OK);
    sl_free(ctx, cubin);
    ck_assert_msg(usage.spill_bytes <= allowed || bound == 1, "%s: %zu bytes spilled at %d blocks",
                  sluice_pipeline_name(p), usage.spill_bytes, bound);
    ck_assert_int_gt(usage.registers, 0);
    /* the fit reports what ptxas made at the count it took */
    ck_assert_uint_eq(fitted.spill_bytes, usage.spill_bytes);
    ck_assert_int_eq(fitted.registers, usage.registers);
    /* ... and more at every count above it */
    for (int blocks = bound + 1; blocks <= fit.fit_blocks; blocks++) {
        ck_assert_int_eq(sl_cuda_nvrtc_compile_bounded(ctx, fit.source, "fit.cu", ARCH, blocks,
                                                       &cubin, &size, &usage),
                         SLUICE_OK);
        sl_free(ctx, cubin);
        ck_assert_msg(usage.spill_bytes > allowed, "%s: fitted at %d blocks where %d spill %zu bytes",
                      sluice_pipeline_name(p), bound, blocks, usage.spill_bytes);
    }
    fprintf(stderr, "%s: asks for %d blocks; fitted at %d\n", sluice_pipeline_name(p),
            fit.fit_blocks, bound);
    sl_cuda_codegen_free(ctx, &plain);
    sl_cuda_codegen_free(ctx, &fit);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A case of suite `s` tagged "host" (runnable alone: CK_RUN_CASE=<name>; a ctest entry of
 * its own, tests/CMakeLists.txt) with a time limit of `timeout` seconds. */
static TCase *host_tcase(Suite *s, const char *name, double timeout) {
    TCase *tc = tcase_create(name);
    tcase_set_tags(tc, "host");
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *make_suite(void) {
    Suite *s = suite_create("cuda_codegen");
    /* Cases runnable alone with CK_RUN_CASE; NVRTC takes seconds per kernel. Those tagged
       "host" (generated kernels on host threads under the sanitizers, minutes each) are ctest
       entries of their own (tests/CMakeLists.txt), the test_cuda_codegen entry the others. */
    TCase *tc = tcase_create("basics");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, layouts);
    tcase_add_test(tc, segment_heads_absorb);
    tcase_add_test(tc, compile_error_is_a_status_with_the_log);
    tcase_add_test(tc, ptxas_spill_bytes_reads_the_log);
    tcase_add_loop_test(tc, fit_compiles_at_the_first_bound_without_spills, 0, 4);
    tcase_add_test(tc, kernel_cache_hits_and_rebuilds);
    tcase_add_test(tc, kernel_cache_key_covers_the_headers);
    tcase_add_test(tc, trace_build_compiles_and_is_its_own_cache_entry);
    tcase_add_test(tc, six_stage_pipeline);
    tcase_add_test(tc, six_stages_are_one_kernel);
    tcase_add_test(tc, too_many_kernel_arguments_is_a_limit);
    tcase_add_test(tc, map_entries_read_earlier_entries);
    tcase_add_test(tc, declared_operator_and_chained_phases);
    tcase_add_loop_test(tc, shipped_pipelines_compile, 0, 2);
    tcase_add_loop_test(tc, reduce_of_every_segment_kind, 0, 10);
    tcase_add_test(tc, reduce_layouts);
    tcase_add_loop_test(tc, reduce_state_stays_in_registers, 0, 3);
    tcase_add_test(tc, kernel_shapes);
    tcase_add_test(tc, stages_hold_every_read_input);
    tcase_add_loop_test(tc, items_follow_the_widest_column, 0, (int)SL_ARRAY_LEN(item_cases));
    tcase_add_test(tc, rounds_only_where_rows_need_states_alone);
    tcase_add_test(tc, narrow_values_held_widened);
    tcase_add_test(tc, narrow_columns_packed);
    suite_add_tcase(s, tc);
    tc = tcase_create("types");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, every_operator_over_each_type, 0, 12);
    tcase_add_loop_test(tc, maps_of_every_type_and_compaction, 0, 12);
    tcase_add_loop_test(tc, run_to_run_orders_rounding_lookbacks, 0,
                        2 * (int)SL_ARRAY_LEN(determinism_cases));
    suite_add_tcase(s, tc);
    tc = host_tcase(s, "host", 600);
    tcase_add_loop_test(tc, reduce_on_host, 0, (int)SL_ARRAY_LEN(host_cases));
    tc = host_tcase(s, "host_counts", 600);
    tcase_add_loop_test(tc, compaction_on_host, 0, (int)SL_ARRAY_LEN(count_cases));
    tc = host_tcase(s, "host_ordered", 1200);
    tcase_add_loop_test(tc, ordered_on_host, 0, (int)SL_ARRAY_LEN(ordered_cases));
    tcase_add_loop_test(tc, offsets_scan_on_host, 0, 2);
    tc = host_tcase(s, "host_rounds", 1200);
    tcase_add_loop_test(tc, rounds_on_host, 0, (int)SL_ARRAY_LEN(rounds_cases));
    tcase_add_loop_test(tc, pairs_on_host, 0, (int)SL_ARRAY_LEN(pairs_cases));
    tcase_add_loop_test(tc, staged_items_on_host, 0, (int)SL_ARRAY_LEN(staged_on_host_cases));
    tc = tcase_create("random");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, random_pipelines_compile, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(make_suite()); }

#else /* no CUDA in this build */
int main(void) {
    printf("test_cuda_codegen: built without CUDA, skipped\n");
    return 77;
}
#endif
