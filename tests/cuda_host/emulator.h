/* emulator.h — building tests/cuda_host/reduce_emulate.cc around one generated group (its
 * kernels, kernels/sl_tile.cuh's loops and the templates under them, compiled for the host with
 * the address and undefined-behaviour sanitizers) and making the inputs it makes, for the C
 * tests that run generated kernels without a GPU (test_cuda_codegen's reduce_on_host,
 * test_cuda_carry_host). Header-only: included by those tests after testutil.h, check.h and
 * cuda/codegen.h; SLUICE_SOURCE_DIR is the source tree (tests/CMakeLists.txt). */
#ifndef SL_TEST_EMULATOR_H
#define SL_TEST_EMULATOR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
