/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tu_rng_seed(tu_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

uint64_t tu_rng_next(tu_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

double tu_rng_uniform(tu_rng *r) { return (double)(tu_rng_next(r) >> 11) * 0x1.0p-53; }

double tu_rng_normal(tu_rng *r) {
    double u1 = tu_rng_uniform(r), u2 = tu_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int64_t tu_rng_range(tu_rng *r, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1;
    if (span == 0) return (int64_t)tu_rng_next(r);
    return lo + (int64_t)(tu_rng_next(r) % span);
}

void tu_print_diags(const sluice_context *ctx) {
    char buf[2048];
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++) {
        sluice_diagnostic_format(sluice_context_diagnostic(ctx, i), buf, sizeof buf);
        fputs(buf, stderr);
    }
}

sluice_pipeline *tu_load(sluice_context *ctx, const char *yaml) {
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "<test>", &p);
    if (st != SLUICE_OK) tu_print_diags(ctx);
    ck_assert_msg(st == SLUICE_OK, "pipeline failed to load: %s", sluice_status_name(st));
    return p;
}

sluice_status tu_load_fail(sluice_context *ctx, const char *yaml, char *buf, size_t cap) {
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "<test>", &p);
    ck_assert_msg(st != SLUICE_OK, "pipeline loaded but should have failed:\n%s", yaml);
    ck_assert_ptr_null(p);
    if (buf && cap) {
        buf[0] = 0;
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
        if (d) sluice_diagnostic_format(d, buf, cap);
    }
    return st;
}

static void *failing_alloc(size_t n, void *o) {
    tu_failing *f = o;
    if (f->budget == 0) return NULL;
    if (f->budget > 0) f->budget--;
    return malloc(n);
}
static void *failing_realloc(void *ptr, size_t n, void *o) {
    tu_failing *f = o;
    if (f->budget == 0) return NULL;
    if (f->budget > 0) f->budget--;
    return realloc(ptr, n);
}
static void failing_free(void *ptr, void *o) {
    (void)o;
    free(ptr);
}

sluice_allocator tu_failing_allocator(tu_failing *f) {
    return (sluice_allocator){failing_alloc, failing_realloc, failing_free, f};
}

int tu_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
