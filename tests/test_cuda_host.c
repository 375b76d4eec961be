/* test_cuda_host.c — the CUDA backend's column flow without a GPU: replays every plan group
 * of a pipeline as core/cuda/backend.c runs it (inputs first; a fused group reads its
 * layout's inputs and passthrough columns and writes its outputs; a sort reads and moves the
 * plan group's columns, and only those exist after it) and checks that no group reads a
 * column no earlier group wrote and that every output exists at the end. On the H200 such a
 * mismatch was a NULL column pointer ("input 2 of a fused GPU group is NULL"): this catches
 * the class in CI. It also checks that the generated kernel's layout is exactly the physical
 * plan's (core/plan/plan.h) input, output and pass-through lists and carry phases: one liveness
 * and one carry analysis for every backend. Pipelines: the shipped ones, ones built to stress
 * liveness, and random ones. Skips (77) in builds without CUDA. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if __has_include(<nvrtc.h>)
#include "cuda/codegen.h"
#include "cuda/fused.h"
#include "plan/plan.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* SLUICE_TEST_DUMP_KERNELS=DIR writes every generated kernel to DIR/<pipeline>-g<group>.cu,
 * so a change meant to leave kernels alone can be checked by diffing two dumps. */
static void dump_source(const sluice_pipeline *p, int g, const char *source) {
    const char *dir = getenv("SLUICE_TEST_DUMP_KERNELS");
    if (!dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-g%d.cu", dir, sluice_pipeline_name(p), g);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(source, f);
    fclose(f);
}

static void check_flow(sluice_context *ctx, const char *yaml) {
    sluice_pipeline *p = tu_load(ctx, yaml);
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    bool *written = calloc((size_t)p->ncolumns + 1, 1), *moved = calloc((size_t)p->ncolumns + 1, 1);
    for (int c = 0; c < p->ninputs; c++) written[c] = true;
    for (int g = 0; g < plan.ngroups; g++) {
        if (plan.groups[g].kind == SL_GROUP_FUSED) {
            sl_codegen cg;
            memset(&cg, 0, sizeof cg);
            sluice_status st = sl_cuda_codegen(ctx, p, &plan, g, 90, &cg);
            if (st != SLUICE_OK) tu_print_diags(ctx);
            ck_assert_int_eq(st, SLUICE_OK);
            dump_source(p, g, cg.source);
            const sl_group *pg = &plan.groups[g];
            int ndata = 0; /* the layout lists an offsets input too; the plan does not */
            for (int i = 0; i < cg.ninputs; i++) {
                if (p->columns[cg.inputs[i]].role == SLUICE_ROLE_OFFSETS) continue;
                ck_assert_msg(ndata < pg->nin && cg.inputs[i] == pg->in[ndata],
                              "%s: group %d: the kernel reads '%s', the plan does not list it",
                              p->name, g, p->columns[cg.inputs[i]].name);
                ndata++;
            }
            ck_assert_msg(ndata == pg->nin, "%s: group %d reads %d columns, the plan lists %d",
                          p->name, g, ndata, pg->nin);
            ck_assert_int_eq(cg.noutputs, pg->nout);
            for (int i = 0; i < cg.noutputs; i++) ck_assert_int_eq(cg.outputs[i], pg->out[i]);
            ck_assert_int_eq(cg.npassthrough, pg->npass);
            for (int i = 0; i < cg.npassthrough; i++) ck_assert_int_eq(cg.passthrough[i], pg->pass[i]);
            ck_assert_int_eq(cg.compacts, pg->compacts);
            ck_assert_msg(cg.phases == pg->phases, "%s: group %d: %d kernel phases, plan %d",
                          p->name, g, cg.phases, pg->phases);
            for (int i = 0; i < cg.ninputs; i++)
                ck_assert_msg(written[cg.inputs[i]], "%s: group %d reads '%s', which nothing wrote",
                              p->name, g, p->columns[cg.inputs[i]].name);
            for (int i = 0; i < cg.npassthrough; i++)
                ck_assert_msg(written[cg.passthrough[i]], "%s: group %d passes '%s' through, which nothing wrote",
                              p->name, g, p->columns[cg.passthrough[i]].name);
            if (cg.compacts) /* rows move: only what the group writes is valid after it */
                for (int c = p->ninputs; c < p->ncolumns; c++) written[c] = false;
            if (cg.compacts)
                for (int c = 0; c < p->ninputs; c++) written[c] = false;
            for (int i = 0; i < cg.noutputs; i++) written[cg.outputs[i]] = true;
            sl_cuda_codegen_free(ctx, &cg);
        } else {
            memset(moved, 0, (size_t)p->ncolumns);
            for (int i = 0; i < plan.groups[g].nin; i++) moved[plan.groups[g].in[i]] = true;
            for (int c = 0; c < p->ncolumns; c++)
                ck_assert_msg(!moved[c] || written[c], "%s: sort group %d moves '%s', which nothing wrote",
                              p->name, g, p->columns[c].name);
            memcpy(written, moved, (size_t)p->ncolumns);
        }
    }
    for (int k = 0; k < p->noutputs; k++)
        ck_assert_msg(written[p->outputs[k]], "%s: output '%s' is not written by the last group",
                      p->name, p->columns[p->outputs[k]].name);
    free(written);
    free(moved);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
}

static const char *const liveness_cases[] = {
    /* a compaction before a sort, another after it reading a column defined after the sort */
    "sluice: 1\nname: sort-computed\ninput: {x: f32, y: f32}\nstages:\n"
    "  - map: {r2: x*x + y*y}\n  - filter: x > -1.0\n  - sort: {key: r2, per: batch}\n"
    "  - scan: {of: r2, op: sum, kind: exclusive, into: before, acc: f64}\n"
    "  - filter: before < 1000.0\noutput: [x, r2, before]\n",
    /* a live column nobody needs after a sort */
    "sluice: 1\nname: unneeded\ninput: {a: i32, b: f64, c: u8}\nstages:\n"
    "  - map: {d: a * 2, e: b + 1.0}\n  - sort: {key: d}\n  - scan: {of: e, op: max, into: m}\noutput: [d, m]\n",
    /* two stream sorts with a scan between, values dropping columns */
    "sluice: 1\nname: two-sorts\ninput: {k: i32, x: i64, y: f32}\nstages:\n"
    "  - sort: {key: k, values: [x]}\n  - scan: {of: x, op: sum, into: s}\n"
    "  - sort: {key: x, order: descending}\noutput: [k, x, s]\n",
    /* compact with columns:, filter, segmented scan by key after a sort */
    "sluice: 1\nname: compact-columns\ninput: {a: u16, b: f32, c: i8}\nstages:\n"
    "  - flag: {f: b > 0}\n  - compact: {by: f, columns: [a, b]}\n  - sort: {key: a}\n"
    "  - segmented_scan: {of: b, op: sum, segments: {key: a}, into: s}\n  - filter: s > 1.0\n"
    "output: [a, s]\n",
    /* map entries nothing needs, after a sort: their reads are not moved, so the kernel
       must not compute them (the plan's liveness, entry by entry) */
    "sluice: 1\nname: dead-entries\ninput: {x: f32, y: f32, k: i32}\nstages:\n"
    "  - sort: {key: k}\n  - map: {a: x + 1.0, b: y * 2.0, c: a * 3.0}\noutput: [b]\n",
    /* an entry only a later entry of the same map reads (9e0817c), after a sort */
    "sluice: 1\nname: entry-chain\ninput: {x: f32, k: i32}\nstages:\n"
    "  - sort: {key: k, per: batch}\n  - map: {a: x + 1.0, b: a * 2.0}\n"
    "  - scan: {of: b, op: sum, into: s}\n  - filter: s > a\noutput: [s]\n",
    /* offsets input with a scan, then a filter */
    "sluice: 1\nname: offsets-then-filter\ninput:\n  rows: {type: i64, role: offsets}\n  x: f32\n"
    "stages:\n  - segmented_scan: {of: x, op: sum, segments: rows, into: s}\n  - filter: s > 0\n"
    "output: [s, x]\n",
};

START_TEST(test_liveness_cases) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    for (size_t i = 0; i < NELEM(liveness_cases); i++) check_flow(ctx, liveness_cases[i]);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(test_shipped_pipelines) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    const char *files[] = {"cull-visible", "drawdown", "linrec", "output-offsets",
                           "ragged-cumsum", "sort-by-depth", "trades-vwap"};
    static char text[65536];
    for (size_t i = 0; i < NELEM(files); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pipelines/%s.yaml", SLUICE_SOURCE_DIR, files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = 0;
        check_flow(ctx, text);
    }
    sluice_context_destroy(ctx);
}
END_TEST

/* Random stage sequences over columns of random types (as tests/gpu_backend.c makes them). */
START_TEST(test_random_pipelines) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    tu_rng r;
    tu_rng_seed(&r, 99);
    const char *ty[] = {"i8", "i32", "i64", "u16", "u64", "f32", "f64"};
    static char y[8192];
    for (int id = 0; id < 300; id++) {
        int n = snprintf(y, sizeof y, "sluice: 1\nname: random-%d\ninput: {a: %s, b: %s, c: f32}\nstages:\n",
                         id, ty[tu_rng_range(&r, 0, 6)], ty[tu_rng_range(&r, 0, 6)]);
        char live[16][16] = {"a", "b", "c"};
        int nlive = 3, ncol = 0, nstages = (int)tu_rng_range(&r, 2, 7);
        for (int s = 0; s < nstages; s++) {
            const char *x = live[tu_rng_range(&r, 0, nlive - 1)], *z = live[tu_rng_range(&r, 0, nlive - 1)];
            char name[16];
            snprintf(name, sizeof name, "c%d", ncol++);
            size_t cap = sizeof y - (size_t)n;
            switch (tu_rng_range(&r, 0, 5)) {
            case 0: n += snprintf(y + n, cap, "  - map: {%s: f64(%s) * 0.5 + f64(%s)}\n", name, x, z); break;
            case 1: n += snprintf(y + n, cap, "  - filter: f64(%s) > f64(%s)\n", x, z); continue;
            case 2: n += snprintf(y + n, cap, "  - flag: {%s: f64(%s) < 0.5}\n  - compact: {by: %s}\n", name, x, name); continue;
            case 3: n += snprintf(y + n, cap, "  - scan: {of: f64(%s), op: sum, into: %s}\n", x, name); break;
            case 4: n += snprintf(y + n, cap, "  - sort: {key: %s, per: %s}\n", x, tu_rng_range(&r, 0, 1) ? "batch" : "stream"); continue;
            default: n += snprintf(y + n, cap, "  - segmented_scan: {of: f64(%s), op: sum, segments: {key: %s}, into: %s}\n", z, x, name); break;
            }
            if (nlive < 16) snprintf(live[nlive++], 16, "%s", name);
        }
        check_flow(ctx, y);
    }
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *cuda_host_suite(void) {
    Suite *s = suite_create("cuda_host");
    TCase *tc = tcase_create("flow");
    tcase_add_test(tc, test_liveness_cases);
    tcase_add_test(tc, test_shipped_pipelines);
    tcase_add_test(tc, test_random_pipelines);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(cuda_host_suite()); }

#else
int main(void) {
    fprintf(stderr, "test_cuda_host: built without CUDA, skipped\n");
    return 77;
}
#endif
