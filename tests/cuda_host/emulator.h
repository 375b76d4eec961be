/* emulator.h — building tests/cuda_host/reduce_emulate.cc around one generated group (its
 * kernels, kernels/sl_tile.cuh's loops and the templates under them, compiled for the host with
 * the address and undefined-behaviour sanitizers), making the inputs it makes, and checking
 * its rows against the CPU backend's, for the C tests that run generated kernels without a
 * GPU (test_cuda_codegen's cases on the host, test_cuda_carry_host, test_cuda_random_host).
 * Header-only: included by those tests after testutil.h, check.h, cuda/codegen.h and
 * plan/plan.h; SLUICE_SOURCE_DIR is the source tree (tests/CMakeLists.txt). */
#ifndef SL_TEST_EMULATOR_H
#define SL_TEST_EMULATOR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64 bytes from `state`, as reduce_emulate.cc makes its inputs. */
static inline void emu_inputs(uint8_t *out, size_t n, uint64_t *state) {
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        out[i] = (uint8_t)(z ^ (z >> 31));
    }
}

/* The emulation of the generated group `cg` of pipeline p, built into dir/emulate (its
 * source written to dir/group.cu); fails the test when the build does. */
static inline void emu_build(const sluice_pipeline *p, const sl_codegen *cg, const char *dir) {
    char path[256], cmd[8192];
    snprintf(path, sizeof path, "%s/group.cu", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(cg->source, f);
    fclose(f);
    int at = snprintf(cmd, sizeof cmd,
                      "c++ -std=c++17 -O1 -g -w -pthread -fsanitize=address,undefined "
                      "-fno-sanitize-recover=all -I'%s/kernels' '-DSL_GENERATED=\"%s\"' "
                      "-DSL_CLOSE_THREADS=%d -DSL_CLOSES=%d -DSL_REDUCE_OFFSETS=%d -DSL_OFFSETS_INPUT=%d "
                      "-DSL_KEEPS_ROWS=%d '-DSL_IN_SIZES=",
                      SLUICE_SOURCE_DIR, path, SL_CG_CLOSE_THREADS, cg->reduces ? 1 : 0,
                      cg->reduce_offsets ? 1 : 0, cg->offsets_input,
                      !cg->compacts && !cg->reduces ? 1 : 0);
    for (int k = 0; k < cg->ninputs; k++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, "%s%zu", k ? "," : "",
                       sluice_type_size(p->columns[cg->inputs[k]].type));
    at += snprintf(cmd + at, sizeof cmd - (size_t)at, "' '-DSL_OUT_SIZES=");
    for (int k = 0; k < cg->noutputs; k++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, "%s%zu", k ? "," : "",
                       sluice_type_size(p->columns[cg->outputs[k]].type));
    at += snprintf(cmd + at, sizeof cmd - (size_t)at, "' '-DSL_CARRY_IDENTITY=");
    for (size_t b = 0; b < cg->carry_bytes; b++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, "%s%u", b ? "," : "", cg->carry_identity[b]);
    at += snprintf(cmd + at, sizeof cmd - (size_t)at,
                   "' '%s/tests/cuda_host/reduce_emulate.cc' -o '%s/emulate' -latomic",
                   SLUICE_SOURCE_DIR, dir);
    ck_assert_int_lt(at, (int)sizeof cmd);
    ck_assert_msg(system(cmd) == 0, "the host build of the generated group failed: %s", cmd);
}

/* The end of a test that built an emulation: its folder removed, the group, plan, pipeline
 * and context freed. */
static inline void emu_finish(sluice_context *ctx, sluice_pipeline *p, sl_plan *plan, sl_codegen *cg,
                              const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    sl_cuda_codegen_free(ctx, cg);
    sl_plan_free(ctx, plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

/* Which of the kernel's outputs (their argument order, as the emulation prints its rows) is
 * the CPU's output column `name`; fails the test if none is. */
static inline int emu_output_index(const sluice_pipeline *p, const sl_codegen *cg, const char *name) {
    int k = 0;
    while (k < cg->noutputs && strcmp(p->columns[cg->outputs[k]].name, name) != 0) k++;
    ck_assert_msg(k < cg->noutputs, "output %s is not the kernel's", name);
    return k;
}

/* The offsets reduce_emulate.cc's offsets_lengths makes for `units` segments from `seed`. */
static inline int64_t *host_offsets(uint64_t seed, int64_t units) {
    uint64_t state = seed ^ 0x0ff5e75ull;
    const int64_t least = (int64_t)(seed & 1); /* odd seeds: no empty segment */
    int64_t *off = malloc((size_t)(units + 1) * sizeof *off);
    ck_assert_ptr_nonnull(off);
    off[0] = 0;
    for (int64_t j = 0; j < units; j++) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        int64_t len = z % 8 == 0 && !least ? 0
                      : z % 40 == 1        ? least + (int64_t)((z >> 8) % 9000)
                                           : least + (int64_t)((z >> 8) % 40);
        off[j + 1] = off[j] + len;
    }
    return off;
}

/* The generated group cg of p, built into dir/emulate (emu_build), run on the host over one
 * batch of `rows` rows (with an offsets input, segments) from `seed`, and unless per_batch cut
 * in three too (the emulation checks the cuts give the same rows): its rows must be the CPU
 * backend's from the same inputs pushed as one batch, bit for bit. */
static inline void host_batch_matches_cpu(sluice_pipeline *p, const sl_codegen *cg, const char *dir,
                                   bool offsets, bool per_batch, uint64_t seed, int64_t rows) {
    char cmd[4096];
    /* the host run's rows */
    snprintf(cmd, sizeof cmd, "'%s/emulate' %llu %lld", dir, (unsigned long long)seed, (long long)rows);
    if (!per_batch && rows > 2)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " %lld %lld",
                 (long long)(rows / 3), (long long)(rows / 3 + rows / 4));
    FILE *run = popen(cmd, "r");
    ck_assert_ptr_nonnull(run);
    long long got_rows = -1;
    ck_assert_int_eq(fscanf(run, "rows %lld", &got_rows), 1);
    unsigned long long *got = calloc((size_t)(got_rows > 0 ? got_rows : 1) * (size_t)cg->noutputs,
                                     sizeof *got);
    for (long long r = 0; r < got_rows * cg->noutputs; r++)
        ck_assert_int_eq(fscanf(run, "%llx", &got[r]), 1);
    ck_assert_msg(pclose(run) == 0, "%s: the host run of the generated group failed (%s)",
                  sluice_pipeline_name(p), cmd);

    /* the CPU backend's rows from the same inputs, pushed as one batch */
    uint64_t state = seed;
    sluice_column cols[8];
    uint8_t *data[8];
    ck_assert_int_le(cg->ninputs, 8);
    int64_t *off = offsets ? host_offsets(seed, rows) : NULL;
    int64_t nrows = off ? off[rows] : rows;
    for (int k = 0; k < cg->ninputs; k++) {
        const sl_column *c = &p->columns[cg->inputs[k]];
        size_t w = sluice_type_size(c->type);
        if (k == cg->offsets_input) {
            data[k] = (uint8_t *)off;
            cols[k] = (sluice_column){.name = c->name, .type = c->type, .data = off, .length = rows + 1};
            continue;
        }
        data[k] = malloc((size_t)(nrows + 1) * w);
        emu_inputs(data[k], (size_t)(nrows + 1) * w, &state);
        cols[k] = (sluice_column){.name = c->name, .type = c->type, .data = data[k], .length = nrows};
    }
    /* inputs the kernel never reads (the narrow cases' k) still go to the CPU: zeros */
    int ncols = cg->ninputs;
    for (int c = 0; c < p->ninputs; c++) {
        bool read = false;
        for (int k = 0; k < cg->ninputs; k++) read = read || cg->inputs[k] == c;
        if (read) continue;
        ck_assert_int_lt(ncols, 8);
        size_t w = sluice_type_size(p->columns[c].type);
        data[ncols] = calloc((size_t)nrows + 1, w);
        cols[ncols] = (sluice_column){.name = p->columns[c].name, .type = p->columns[c].type,
                                      .data = data[ncols], .length = nrows};
        ncols++;
    }
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_push(s, cols, (size_t)ncols), SLUICE_OK);
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    long long ref_rows = 0;
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        int64_t n = sluice_batch_rows(b);
        for (size_t j = 0; j < sluice_batch_column_count(b); j++) {
            sluice_column c;
            ck_assert_int_eq(sluice_batch_column(b, j, &c), SLUICE_OK);
            const int k = emu_output_index(p, cg, c.name);
            size_t w = sluice_type_size(c.type);
            for (int64_t r = 0; r < n; r++) {
                unsigned long long v = 0;
                memcpy(&v, (const uint8_t *)c.data + (size_t)r * w, w);
                ck_assert_msg(ref_rows + r < got_rows, "%s, %lld rows: the host run gives %lld rows",
                              sluice_pipeline_name(p), (long long)rows, got_rows);
                ck_assert_msg(got[(ref_rows + r) * cg->noutputs + k] == v,
                              "%s, %lld rows: %s row %lld: host run %llx, CPU %llx",
                              sluice_pipeline_name(p), (long long)rows, c.name,
                              ref_rows + (long long)r, got[(ref_rows + r) * cg->noutputs + k], v);
            }
        }
        ref_rows += n;
        sluice_batch_free(b);
    }
    ck_assert_msg(ref_rows == got_rows, "%s, %lld rows: the host run gives %lld rows, the CPU %lld",
                  sluice_pipeline_name(p), (long long)rows, got_rows, ref_rows);
    sluice_session_close(s);
    for (int k = 0; k < ncols; k++) free(data[k]);
    free(got);
}

/* The whole check of an emulated group: cg built into a fresh directory (emu_build), then
 * host_batch_matches_cpu at each of the n sizes (rows; with offsets, segments), the z-th from
 * seed + z, then emu_finish, which frees cg, plan, p and ctx. */
static inline void host_sizes_match_cpu(sluice_context *ctx, sluice_pipeline *p, sl_plan *plan,
                                        sl_codegen *cg, bool offsets, bool per_batch, uint64_t seed,
                                        const int64_t *sizes, size_t n) {
    char dir[] = "/tmp/sluice-host-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    emu_build(p, cg, dir);
    for (size_t z = 0; z < n; z++) host_batch_matches_cpu(p, cg, dir, offsets, per_batch, seed + z, sizes[z]);
    emu_finish(ctx, p, plan, cg, dir);
}

/* The pipeline of an emulated group: `yaml` loaded, planned for the CUDA backend as one fused
 * group and generated for sm_90 into `cg` (the caller checks the kernel's shape, then
 * emu_build and emu_finish). */
static inline sluice_pipeline *host_group(sluice_context *ctx, const char *yaml, sl_plan *plan,
                                          sl_codegen *cg) {
    sluice_pipeline *p = tu_load(ctx, yaml);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, plan), SLUICE_OK);
    ck_assert_int_eq(plan->ngroups, 1);
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, plan, 0, 90, cg), SLUICE_OK);
    return p;
}

#endif
