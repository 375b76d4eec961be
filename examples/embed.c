/* embed.c — the smallest useful embedding of sluice: keep the points inside a circle from a
 * stream pushed in batches, with each kept point's running distance total, and print a
 * summary. Build against an installed sluice (examples/CMakeLists.txt or pkg-config). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice.h>

static const char pipeline_yaml[] =
    "sluice: 1\n"
    "name: inside-circle\n"
    "params:\n"
    "  radius: {type: f32, default: 1.0}\n"
    "input: {x: f32, y: f32, id: u32}\n"
    "stages:\n"
    "  - map: {r2: x*x + y*y}\n"
    "  - filter: r2 < radius*radius\n"
    "  - scan: {of: r2, op: sum, kind: exclusive, into: r2_before, acc: f64}\n"
    "output: [id, r2, r2_before]\n";

/* Prints every diagnostic of the context in the compiler-like format. */
static void report(sluice_context *ctx, sluice_status st) {
    char buf[1024];
    fprintf(stderr, "sluice: %s\n", sluice_strerror(st));
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++) {
        sluice_diagnostic_format(sluice_context_diagnostic(ctx, i), buf, sizeof buf);
        fputs(buf, stderr);
    }
}

int main(void) {
    sluice_context *ctx;
    sluice_status st = sluice_context_create(&ctx, NULL);
    if (st != SLUICE_OK) return 1;
    sluice_pipeline *p = NULL;
    sluice_session *s = NULL;
    st = sluice_pipeline_load_string(ctx, pipeline_yaml, strlen(pipeline_yaml), "inside-circle", &p);
    if (st == SLUICE_OK) {
        sluice_param_value radius = {"radius", "0.5"};
        sluice_session_options opt = SLUICE_SESSION_OPTIONS_INIT;
        opt.params = &radius;
        opt.param_count = 1;
        st = sluice_session_open(p, &opt, &s);
    }
    enum { BATCHES = 4, ROWS = 100000 };
    float *x = malloc(ROWS * sizeof *x), *y = malloc(ROWS * sizeof *y);
    uint32_t *id = malloc(ROWS * sizeof *id);
    uint64_t state = 42;
    int64_t kept = 0;
    double last_total = 0;
    for (int b = 0; st == SLUICE_OK && b < BATCHES; b++) {
        for (int i = 0; i < ROWS; i++) { /* points uniform in [-1, 1)^2 */
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((state >> 40) / 8388608.0 - 1.0);
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            y[i] = (float)((state >> 40) / 8388608.0 - 1.0);
            id[i] = (uint32_t)(b * ROWS + i);
        }
        sluice_column cols[] = {{"x", SLUICE_F32, x, ROWS}, {"y", SLUICE_F32, y, ROWS},
                                {"id", SLUICE_U32, id, ROWS}};
        st = sluice_session_push(s, cols, 3);
        if (st == SLUICE_OK && b == BATCHES - 1) st = sluice_session_flush(s);
        sluice_batch *out;
        while (st == SLUICE_OK && (st = sluice_session_pull(s, &out)) == SLUICE_OK && out) {
            sluice_column before;
            sluice_batch_column_by_name(out, "r2_before", &before);
            if (before.length > 0) last_total = ((const double *)before.data)[before.length - 1];
            kept += sluice_batch_rows(out);
            sluice_batch_free(out);
        }
    }
    if (st == SLUICE_OK) {
        printf("kept %lld of %d points (expected about %.0f%%); sum of r2 before the last: %.3f\n",
               (long long)kept, BATCHES * ROWS, 100 * 3.14159265 * 0.25 / 4, last_total);
    } else {
        report(ctx, st);
    }
    free(x);
    free(y);
    free(id);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return st == SLUICE_OK && kept > 0 ? 0 : 1;
}
