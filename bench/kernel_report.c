/* kernel_report.c — what ptxas makes of each fused group's generated kernels, without a GPU:
 * for every pipeline file named, each group's launch shape (threads a block, items a thread,
 * dynamic shared memory), the resident blocks its __launch_bounds__ asks for, the bytes of
 * spill stores ptxas reports at that count (NVRTC with the backend's options and ptxas -v), and
 * the count the backend compiles it at (nvrtc.h, sl_cuda_nvrtc_compile_fitted; the count
 * asked under SLUICE_CUDA_FIT=0), and the registers a thread takes at that count with the
 * blocks they let reside (a group asked for one block may still reside two or three).
 * The measurement settings the code generator reads (SLUICE_CUDA_CHUNKS, SLUICE_CUDA_TUNING,
 * ...) apply as they do in a session. A last line counts the groups that spill.
 *
 *   kernel_report [--arch 90] [--source DIR] FILE.yaml...
 *
 * --source DIR also writes each group's generated source to DIR/NAME.gN.cu (NAME: the file's
 * name less its directory and extension), to read; never the kernels' own folder, whose .cu files
 * the build compiles. (nvcc does not take it as NVRTC does: NVRTC
 * compiles every function for the device, so the file is not a .cu nvcc builds as it stands.)
 *
 * Exit status: 0, or 1 when a file does not load or a group does not generate or compile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"
#include "cuda/codegen.h"
#include "cuda/nvrtc.h"
#include "plan/plan.h"

/* Writes `source` to DIR/NAME.gGROUP.cu; 0, or 1 with a message on stderr. */
static int write_source(const char *dir, const char *path, int group, const char *source) {
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *dot = strrchr(name, '.');
    int len = dot ? (int)(dot - name) : (int)strlen(name);
    char out[4096];
    if (snprintf(out, sizeof out, "%s/%.*s.g%d.cu", dir, len, name, group) >= (int)sizeof out) {
        fprintf(stderr, "kernel_report: %s: path too long\n", dir);
        return 1;
    }
    FILE *f = fopen(out, "w");
    if (!f || fputs(source, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "kernel_report: cannot write %s\n", out);
        if (f) fclose(f);
        return 1;
    }
    return 0;
}

/* The blocks of `threads` that a Hopper multiprocessor's 64K registers hold at `registers` a
 * thread: a warp's registers are allocated in units of 256, and no more than 2048 threads
 * (0 for a count ptxas did not report). */
static int blocks_by_registers(int registers, int threads) {
    if (registers <= 0 || threads <= 0) return 0;
    const int warp_registers = (registers * 32 + 255) / 256 * 256;
    const int blocks = 65536 / warp_registers / ((threads + 31) / 32);
    return blocks < 2048 / threads ? blocks : 2048 / threads;
}

/* Prints one line a fused group of the pipeline in `path`; counts into the totals. */
static int report_file(const char *path, int arch, const char *source_dir, int *groups,
                       int *spilling, int *fitted) {
    sluice_context *ctx = NULL;
    if (sluice_context_create(&ctx, NULL) != SLUICE_OK) return 1;
    sluice_pipeline *p = NULL;
    sl_plan plan;
    int rc = 0;
    if (sluice_pipeline_load_file(ctx, path, &p) != SLUICE_OK ||
        sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan) != SLUICE_OK) {
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
        fprintf(stderr, "%s: %s\n", path, d ? d->message : "does not load");
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
        return 1;
    }
    for (int gi = 0; gi < plan.ngroups && rc == 0; gi++) {
        if (plan.groups[gi].kind != SL_GROUP_FUSED) continue;
        sl_codegen cg;
        if (sl_cuda_codegen(ctx, p, &plan, gi, arch, &cg) != SLUICE_OK) {
            rc = 1;
            break;
        }
        if (source_dir && write_source(source_dir, path, gi, cg.source) != 0) {
            sl_cuda_codegen_free(ctx, &cg);
            rc = 1;
            break;
        }
        void *cubin = NULL;
        size_t size = 0;
        sl_ptxas_usage asked, taken;
        int bound = cg.min_blocks;
        sluice_status st = sl_cuda_nvrtc_compile_bounded(ctx, cg.source, "report.cu", arch, 0,
                                                         &cubin, &size, &asked);
        sl_free(ctx, cubin);
        taken = asked;
        if (st == SLUICE_OK && cg.fit_blocks > 1 && asked.spill_bytes > (size_t)cg.fit_spill_bytes) {
            st = sl_cuda_nvrtc_compile_fitted(ctx, cg.source, "report.cu", arch, cg.fit_blocks,
                                              cg.fit_spill_bytes, &cubin, &size, &bound, &taken);
            sl_free(ctx, cubin);
        }
        if (st != SLUICE_OK) {
            rc = 1;
        } else {
            (*groups)++;
            *spilling += asked.spill_bytes > 0;
            *fitted += bound < cg.min_blocks;
            printf("%s group %d: %d threads x %d items x %d rounds, %zu B shared, %d blocks "
                   "asked, %zu B spilled, compiled at %d: %d registers, %d blocks by registers\n",
                   path, gi, cg.block_threads, cg.items_per_thread, cg.rounds, cg.dynamic_smem,
                   cg.min_blocks, asked.spill_bytes, bound, taken.registers,
                   blocks_by_registers(taken.registers, cg.block_threads));
        }
        sl_cuda_codegen_free(ctx, &cg);
    }
    if (rc) {
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
        fprintf(stderr, "%s: %s\n", path, d ? d->message : "a group failed");
    }
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return rc;
}

/* Whether `dir` is the kernels' source folder: the build compiles every .cu file there, so a
 * generated source written there breaks the next build. */
static int holds_kernel_text(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/sl_tile.cuh", dir) >= (int)sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (f) fclose(f);
    return f != NULL;
}

int main(int argc, char **argv) {
    int arch = 90, first = 1;
    const char *source_dir = NULL;
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--arch") == 0) arch = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--source") == 0) source_dir = argv[first + 1];
        else break;
        first += 2;
    }
    if (first >= argc || arch < 70 || argv[first][0] == '-') {
        fprintf(stderr, "usage: kernel_report [--arch 90] [--source DIR] FILE.yaml...\n");
        return 2;
    }
    if (source_dir && holds_kernel_text(source_dir)) {
        fprintf(stderr,
                "kernel_report: --source %s is the kernels' own folder (it holds sl_tile.cuh); the "
                "build compiles every .cu there, so name a folder outside the source tree\n",
                source_dir);
        return 2;
    }
    int rc = 0, groups = 0, spilling = 0, fitted = 0;
    for (int a = first; a < argc; a++) rc |= report_file(argv[a], arch, source_dir, &groups, &spilling, &fitted);
    printf("%d groups: %d spill at the blocks asked, %d compile at fewer\n", groups,
           spilling, fitted);
    return rc;
}
