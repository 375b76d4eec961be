/* test_api.c — the public API's contract: versions, statuses, types, contexts and allocator
 * hooks, misuse (NULL handles, wrong call order), batch validation errors, and that a failed
 * push leaves the session usable without losing accepted output; the f16 conversions. */
#include <float.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *const sum_yaml =
    "sluice: 1\n"
    "name: running-sum\n"
    "params:\n"
    "  bias: {type: i64, default: 0}\n"
    "input:\n"
    "  x: i32\n"
    "  w: f32\n"
    "stages:\n"
    "  - map:\n"
    "      y: x + bias\n"
    "  - scan: {of: y, op: sum, into: total}\n"
    "output: [x, total]\n";

static const char *const ragged_yaml =
    "sluice: 1\n"
    "name: ragged\n"
    "input:\n"
    "  v: i64\n"
    "  rows: {type: i64, role: offsets}\n"
    "stages:\n"
    "  - segmented_scan: {of: v, op: sum, into: c, segments: rows}\n";

START_TEST(version_and_names) {
    ck_assert_int_eq(sluice_version_number(), SLUICE_VERSION_NUMBER);
    ck_assert_str_eq(sluice_version_string(), SLUICE_VERSION_STRING);
    ck_assert_str_eq(sluice_status_name(SLUICE_OK), "SLUICE_OK");
    ck_assert_str_eq(sluice_status_name(SLUICE_ERR_TYPE), "SLUICE_ERR_TYPE");
    ck_assert_str_eq(sluice_status_name((sluice_status)9999), "SLUICE_UNKNOWN_STATUS");
    for (int s = 0; s < SLUICE_STATUS_COUNT_; s++) {
        ck_assert_ptr_nonnull(sluice_strerror((sluice_status)s));
        ck_assert_int_gt((int)strlen(sluice_strerror((sluice_status)s)), 3);
    }
    ck_assert_str_eq(sluice_type_name(SLUICE_F16), "f16");
    ck_assert_ptr_null(sluice_type_name((sluice_type)99));
    ck_assert_uint_eq(sluice_type_size(SLUICE_U64), 8);
    ck_assert_uint_eq(sluice_type_size((sluice_type)-1), 0);
    sluice_type t;
    ck_assert_int_eq(sluice_type_from_name("u16", &t), SLUICE_OK);
    ck_assert_int_eq(t, SLUICE_U16);
    ck_assert_int_eq(sluice_type_from_name("float", &t), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_backend_available(SLUICE_BACKEND_CPU), 1);
    ck_assert_str_eq(sluice_backend_name(SLUICE_BACKEND_CUDA), "cuda");
}
END_TEST

/* Counting allocator: proves every host allocation goes through the hooks and all is freed. */
typedef struct counting {
    long live, total;
} counting;
static void *c_alloc(size_t n, void *o) {
    counting *c = o;
    void *p = malloc(n);
    if (p) c->live++, c->total++;
    return p;
}
static void *c_realloc(void *p, size_t n, void *o) {
    counting *c = o;
    void *q = realloc(p, n);
    if (q && !p) c->live++, c->total++;
    return q;
}
static void c_free(void *p, void *o) {
    counting *c = o;
    if (p) c->live--;
    free(p);
}

START_TEST(allocator_hooks_see_everything) {
    counting cnt = {0, 0};
    sluice_allocator a = {c_alloc, c_realloc, c_free, &cnt};
    sluice_context_options opt = SLUICE_CONTEXT_OPTIONS_INIT;
    opt.allocator = &a;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, &opt), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, sum_yaml);
    int32_t x[5] = {1, 2, 3, 4, 5};
    float w[5] = {0};
    sluice_column cols[] = {{"x", SLUICE_I32, x, 5}, {"w", SLUICE_F32, w, 5}};
    sluice_batch *b;
    ck_assert_int_eq(sluice_run(p, NULL, cols, 2, &b), SLUICE_OK);
    sluice_column total;
    ck_assert_int_eq(sluice_batch_column_by_name(b, "total", &total), SLUICE_OK);
    ck_assert_int_eq(total.type, SLUICE_I64);
    ck_assert_int_eq(((const int64_t *)total.data)[4], 15);
    sluice_batch_free(b);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    ck_assert_int_gt(cnt.total, 3);
    ck_assert_int_eq(cnt.live, 0);
}
END_TEST

START_TEST(null_handles_and_bad_options) {
    ck_assert_int_eq(sluice_context_create(NULL, NULL), SLUICE_ERR_INVALID_ARGUMENT);
    sluice_context_options bad = SLUICE_CONTEXT_OPTIONS_INIT;
    bad.version = 77;
    sluice_context *ctx = (sluice_context *)0x1;
    ck_assert_int_eq(sluice_context_create(&ctx, &bad), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    sluice_context_destroy(NULL);
    sluice_pipeline_free(NULL);
    sluice_session_close(NULL);
    sluice_batch_free(NULL);
    ck_assert_int_eq(sluice_pipeline_load_string(NULL, "x", 1, NULL, NULL), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_session_open(NULL, NULL, NULL), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_session_push(NULL, NULL, 0), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_session_flush(NULL), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sluice_session_pull(NULL, NULL), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(sluice_context_diagnostic_count(NULL), 0);
    ck_assert_ptr_null(sluice_context_diagnostic(NULL, 0));
    ck_assert_int_eq(sluice_batch_rows(NULL), 0);

    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, sum_yaml);
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.version = 0;
    sluice_session *s = (sluice_session *)0x1;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_uint_ge(sluice_context_diagnostic_count(ctx), 1);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(wrong_call_order) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, sum_yaml);
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, NULL, &s), SLUICE_OK);
    sluice_batch *b = (sluice_batch *)0x1;
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_null(b); /* nothing pushed yet */
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    int32_t x[1] = {1};
    float w[1] = {0};
    sluice_column cols[] = {{"x", SLUICE_I32, x, 1}, {"w", SLUICE_F32, w, 1}};
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_ERR_MISUSE);
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_ERR_MISUSE);
    ck_assert_int_eq(sluice_session_reset(s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

static void push_expect(sluice_session *s, const sluice_column *cols, size_t n,
                        sluice_status want) {
    sluice_status st = sluice_session_push(s, cols, n);
    ck_assert_msg(st == want, "push gave %s, wanted %s", sluice_status_name(st), sluice_status_name(want));
}

START_TEST(bad_batches_are_rejected_and_lose_nothing) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, sum_yaml);
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, NULL, &s), SLUICE_OK);
    int32_t x[4] = {1, 2, 3, 4};
    float w[4] = {0};
    int64_t wrong[4] = {0};
    sluice_column good[] = {{"x", SLUICE_I32, x, 2}, {"w", SLUICE_F32, w, 2}};
    ck_assert_int_eq(sluice_session_push(s, good, 2), SLUICE_OK);

    sluice_column missing[] = {{"x", SLUICE_I32, x, 2}};
    push_expect(s, missing, 1, SLUICE_ERR_BATCH_MISSING_COLUMN);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(strstr(d->message, "'w'"));

    sluice_column typed[] = {{"x", SLUICE_I64, wrong, 2}, {"w", SLUICE_F32, w, 2}};
    push_expect(s, typed, 2, SLUICE_ERR_BATCH_TYPE);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "i32"));

    sluice_column lengths[] = {{"x", SLUICE_I32, x, 2}, {"w", SLUICE_F32, w, 3}};
    push_expect(s, lengths, 2, SLUICE_ERR_BATCH_LENGTH);

    sluice_column extra[] = {{"x", SLUICE_I32, x, 2}, {"w", SLUICE_F32, w, 2}, {"xx", SLUICE_I32, x, 2}};
    push_expect(s, extra, 3, SLUICE_ERR_UNKNOWN_COLUMN);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "did you mean 'x'"));

    sluice_column nodata[] = {{"x", SLUICE_I32, NULL, 2}, {"w", SLUICE_F32, w, 2}};
    push_expect(s, nodata, 2, SLUICE_ERR_INVALID_ARGUMENT);

    /* zero rows are valid, and the stream continues where it was */
    sluice_column empty[] = {{"x", SLUICE_I32, NULL, 0}, {"w", SLUICE_F32, NULL, 0}};
    ck_assert_int_eq(sluice_session_push(s, empty, 2), SLUICE_OK);
    sluice_column rest[] = {{"x", SLUICE_I32, x + 2, 2}, {"w", SLUICE_F32, w, 2}};
    ck_assert_int_eq(sluice_session_push(s, rest, 2), SLUICE_OK);
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);

    int64_t expect[4] = {1, 3, 6, 10}, got[4];
    int64_t n = 0;
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        sluice_column t;
        ck_assert_int_eq(sluice_batch_column(b, 1, &t), SLUICE_OK);
        ck_assert_str_eq(t.name, "total");
        for (int64_t i = 0; i < t.length; i++) got[n++] = ((const int64_t *)t.data)[i];
        sluice_batch_free(b);
    }
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(got[i], expect[i]);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(bad_offsets) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, ragged_yaml);
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, NULL, &s), SLUICE_OK);
    int64_t v[5] = {1, 1, 1, 1, 1};
    int64_t not_zero[3] = {1, 3, 5}, decreasing[3] = {0, 4, 3}, short_end[3] = {0, 2, 4};
    int64_t good[3] = {0, 2, 5};
    struct {
        int64_t *off;
        const char *fragment;
    } cases[] = {{not_zero, "start at 0"}, {decreasing, "decrease"}, {short_end, "row count"}};
    for (size_t i = 0; i < 3; i++) {
        sluice_column cols[] = {{"v", SLUICE_I64, v, 5}, {"rows", SLUICE_I64, cases[i].off, 3}};
        ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_ERR_BAD_OFFSETS);
        ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, cases[i].fragment));
    }
    sluice_column cols[] = {{"v", SLUICE_I64, v, 5}, {"rows", SLUICE_I64, good, 3}};
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK);
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    sluice_batch *b;
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_nonnull(b);
    sluice_column c;
    ck_assert_int_eq(sluice_batch_column_by_name(b, "c", &c), SLUICE_OK);
    const int64_t want[5] = {1, 2, 1, 2, 3};
    ck_assert_int_eq(c.length, 5);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(((const int64_t *)c.data)[i], want[i]);
    sluice_batch_free(b);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(params_at_open_and_between_pushes) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, sum_yaml);
    ck_assert_uint_eq(sluice_pipeline_param_count(p), 1);
    sluice_param_info pi;
    ck_assert_int_eq(sluice_pipeline_param(p, 0, &pi), SLUICE_OK);
    ck_assert_str_eq(pi.name, "bias");
    sluice_param_value bad[] = {{"bais", "3"}};
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.params = bad;
    so.param_count = 1;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_ERR_UNKNOWN_PARAM);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "did you mean 'bias'"));
    sluice_param_value good[] = {{"bias", "10"}};
    so.params = good;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_set_param(s, "bias", "ten"), SLUICE_ERR_BAD_VALUE);
    int32_t x[2] = {1, 2};
    float w[2] = {0};
    sluice_column cols[] = {{"x", SLUICE_I32, x, 2}, {"w", SLUICE_F32, w, 2}};
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK); /* 11, 23 */
    ck_assert_int_eq(sluice_session_set_param(s, "bias", "-1"), SLUICE_OK);
    ck_assert_int_eq(sluice_session_push(s, cols, 2), SLUICE_OK); /* 23, 24 */
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    int64_t want[4] = {11, 23, 23, 24}, n = 0;
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        sluice_column t;
        ck_assert_int_eq(sluice_batch_column_by_name(b, "total", &t), SLUICE_OK);
        for (int64_t i = 0; i < t.length; i++) ck_assert_int_eq(((const int64_t *)t.data)[i], want[n++]);
        sluice_batch_free(b);
    }
    ck_assert_int_eq(n, 4);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* A map entry that only a later entry of the same map reads (a, with only b kept) is still
 * computed: the CPU backend once skipped it as dead and read a null column (found by the
 * pipeline fuzzer, tests/fuzz/regressions/pipeline/map_entry_read_only_by_a_later_entry). */
START_TEST(map_entry_read_by_a_later_entry) {
    static const char *const yamls[] = {
        "sluice: 1\nname: sibling\ninput: {x: f32}\nstages:\n"
        "  - map: {a: x + 1, b: a * 2}\noutput: [b]\n",
        "sluice: 1\nname: sibling-chain\ninput: {x: f32}\nstages:\n"
        "  - map: {a: x + 1, c: a * a, b: c - a}\n  - filter: b > 0\noutput: [b]\n",
    };
    for (size_t y = 0; y < sizeof yamls / sizeof yamls[0]; y++) {
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
        sluice_pipeline *p = tu_load(ctx, yamls[y]);
        sluice_session *s;
        ck_assert_int_eq(sluice_session_open(p, NULL, &s), SLUICE_OK);
        enum { N = 5000 }; /* more than one CPU tile */
        float *x = malloc(sizeof(float) * N);
        ck_assert_ptr_nonnull(x);
        for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f;
        sluice_column in[] = {{"x", SLUICE_F32, x, N}};
        ck_assert_int_eq(sluice_session_push(s, in, 1), SLUICE_OK);
        ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
        int64_t row = 0, seen = 0;
        sluice_batch *b;
        while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
            sluice_column out;
            ck_assert_int_eq(sluice_batch_column_by_name(b, "b", &out), SLUICE_OK);
            for (int64_t i = 0; i < out.length; i++) {
                float got = ((const float *)out.data)[i], want;
                if (y == 0) {
                    want = (x[row] + 1.0f) * 2.0f;
                    row++;
                } else { /* the rows with b = a*a - a > 0 */
                    float a, bv;
                    do {
                        a = x[row++] + 1.0f;
                        bv = a * a - a;
                    } while (!(bv > 0));
                    want = bv;
                }
                ck_assert_msg(got == want, "pipeline %zu row %lld: b = %g, want %g", y, (long long)seen, got, want);
                seen++;
            }
            sluice_batch_free(b);
        }
        ck_assert_int_gt(seen, 0);
        if (y == 0) ck_assert_int_eq(seen, N);
        free(x);
        sluice_session_close(s);
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
}
END_TEST

START_TEST(introspection_and_explain) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: two-groups\ninput: {x: f32, k: u32}\nstages:\n"
        "  - filter: x > 0\n  - scan: {of: x, op: sum, into: s}\n  - sort: {key: k}\n"
        "  - map: {y: s * 2}\n");
    ck_assert_str_eq(sluice_pipeline_name(p), "two-groups");
    ck_assert_uint_eq(sluice_pipeline_input_count(p), 2);
    sluice_column_info ci;
    ck_assert_int_eq(sluice_pipeline_input(p, 1, &ci), SLUICE_OK);
    ck_assert_str_eq(ci.name, "k");
    ck_assert_int_eq(sluice_pipeline_input(p, 2, &ci), SLUICE_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(sluice_pipeline_output_count(p), 4); /* x k s y */
    char *text;
    int passes;
    ck_assert_int_eq(sluice_pipeline_explain(p, SLUICE_BACKEND_CPU, &text, &passes), SLUICE_OK);
    ck_assert_int_eq(passes, 1 + 4 + 1); /* fused, 32-bit sort, fused */
    ck_assert_ptr_nonnull(strstr(text, "group 1: fused, 3 stages"));
    ck_assert_ptr_nonnull(strstr(text, "radix sort, 4 passes"));
    ck_assert_ptr_nonnull(strstr(text, "predicted passes over memory: 6"));
    sluice_free_text(ctx, text);
    sluice_pipeline_free(p);
    /* sort orders: one word for keys of one order, each key's own order when they differ */
    static const struct { const char *order, *shown; } orders[] = {
        {"descending", "by k, x descending, whole stream"},
        {"[descending, descending]", "by k, x descending, whole stream"},
        {"[ascending, ascending]", "by k, x ascending, whole stream"},
        {"[descending, ascending]", "by k descending, x ascending, whole stream"},
    };
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: o\ninput: {x: f32, k: u32}\nstages:\n"
                 "  - sort: {keys: [k, x], order: %s}\n", orders[i].order);
        p = tu_load(ctx, yaml);
        ck_assert_int_eq(sluice_pipeline_explain(p, SLUICE_BACKEND_CPU, &text, &passes), SLUICE_OK);
        ck_assert_msg(strstr(text, orders[i].shown), "order %s explained as:\n%s", orders[i].order,
                      text);
        sluice_free_text(ctx, text);
        sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
}
END_TEST

START_TEST(diagnostic_format) {
    sluice_diagnostic d = {SLUICE_ERR_UNKNOWN_STAGE, "unknown stage 'mpa'; did you mean 'map'?",
                           "p.yaml", 7, 5, "  - mpa:"};
    char buf[256];
    size_t need = sluice_diagnostic_format(&d, buf, sizeof buf);
    ck_assert_str_eq(buf, "p.yaml:7:5: error: unknown stage 'mpa'; did you mean 'map'?\n"
                          "    - mpa:\n      ^\n");
    ck_assert_uint_eq(need, strlen(buf));
    char small[10];
    ck_assert_uint_eq(sluice_diagnostic_format(&d, small, sizeof small), need);
    ck_assert_uint_eq(strlen(small), 9);
    sluice_diagnostic nofile = {SLUICE_ERR_IO, "cannot open", NULL, 0, 0, NULL};
    sluice_diagnostic_format(&nofile, buf, sizeof buf);
    ck_assert_str_eq(buf, "error: cannot open\n");
}
END_TEST

START_TEST(load_file_errors) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p;
    ck_assert_int_eq(sluice_pipeline_load_file(ctx, "/nonexistent/x.yaml", &p), SLUICE_ERR_IO);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "/nonexistent/x.yaml"));
    ck_assert_int_eq(sluice_pipeline_load_file(ctx, SLUICE_SOURCE_DIR "/pipelines/cull-visible.yaml", &p),
                     SLUICE_OK);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* ---- f16 conversions ---------------------------------------------------------------------- */

static uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}
static float f32_of_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

START_TEST(f16_conversions) {
    /* Every half, against its value computed from the binary16 layout, and back. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, sign = h & 0x8000;
        float f = sluice_f16_to_f32((uint16_t)h);
        uint16_t back = sluice_f32_to_f16(f);
        if (exp == 0x1f && mant != 0) { /* NaN: payload kept both ways, quiet on the way back */
            ck_assert_msg(isnan(f) && (f32_bits(f) >> 31) == (sign >> 15) &&
                              ((f32_bits(f) >> 13) & 0x3ff) == mant,
                          "nan %04x -> %08x", h, f32_bits(f));
            ck_assert_msg(back == (h | 0x200), "nan %04x -> %04x", h, back);
            continue;
        }
        double magnitude = exp == 0x1f ? INFINITY
                           : exp == 0  ? ldexp((double)mant, -24)
                                       : ldexp((double)(mant | 0x400), (int)exp - 25);
        double want = sign ? -magnitude : magnitude;
        ck_assert_msg((double)f == want && !signbit(f) == !signbit(want), "%04x -> %a, want %a",
                      h, (double)f, want);
        ck_assert_msg(back == h, "%04x -> %a -> %04x", h, (double)f, back);
    }
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.5f, 0x3800},
        {0.1f, 0x2e66}, {1.0f / 3.0f, 0x3555},                /* round to nearest */
        {2049.0f, 0x6800}, {2051.0f, 0x6802},                 /* ties to even, down and up */
        {0x1.002p0f, 0x3c00}, {0x1.006p0f, 0x3c02},
        {0x1p-14f, 0x0400},                                   /* the smallest normal */
        {0x1p-14f * (1.0f - 0x1p-12f), 0x0400},               /* rounds up into it */
        {0x1.ff8p-15f, 0x03ff},                               /* the largest subnormal */
        {0x1p-24f, 0x0001},                                   /* the smallest subnormal */
        {0x1p-25f, 0x0000}, {-0x1p-25f, 0x8000},              /* a tie: to even, zero */
        {0x1.8p-25f, 0x0001}, {0x1.8p-24f, 0x0002},           /* subnormal ties to even */
        {0x1.4p-24f, 0x0001}, {1e-9f, 0x0000}, {-1e-30f, 0x8000},
        {65504.0f, 0x7bff}, {65519.0f, 0x7bff},               /* the largest half */
        {65520.0f, 0x7c00}, {-65520.0f, 0xfc00},              /* overflow to infinity */
        {-1e10f, 0xfc00}, {FLT_MAX, 0x7c00}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(sluice_f32_to_f16(cases[i].f) == cases[i].h, "%a -> %04x, want %04x",
                      (double)cases[i].f, sluice_f32_to_f16(cases[i].f), cases[i].h);
    /* NaN stays NaN (never infinity, even when only low payload bits are set), sign kept. */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fbfe000u, 0x7fc01fffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = sluice_f32_to_f16(f32_of_bits(nans[i]));
        ck_assert_msg((h & 0x7e00) == 0x7e00 && (h >> 15) == (nans[i] >> 31),
                      "nan %08x -> %04x", nans[i], h);
        ck_assert_msg((h & 0x1ff) == ((nans[i] >> 13) & 0x1ff), "nan %08x -> %04x", nans[i], h);
    }
#if defined(__FLT16_MAX__) && !defined(__clang__)
    /* Against the compiler's correctly rounded conversion, over random bit patterns and,
     * every other draw, exponents near binary16's range (subnormals, ties, overflow). */
    tu_rng rng;
    tu_rng_seed(&rng, 16);
    for (int i = 0; i < 2000000; i++) {
        uint32_t bits = (uint32_t)tu_rng_next(&rng);
        if (i & 1) bits = (bits & 0x8000ffffu) | ((uint32_t)(100 + (bits >> 16) % 60) << 23);
        float f = f32_of_bits(bits);
        if (isnan(f)) continue;
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, sizeof rb);
        ck_assert_msg(sluice_f32_to_f16(f) == rb, "%08x: %04x vs %04x", bits,
                      sluice_f32_to_f16(f), rb);
    }
#endif
}
END_TEST

int main(void) {
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, version_and_names);
    tcase_add_test(tc, allocator_hooks_see_everything);
    tcase_add_test(tc, null_handles_and_bad_options);
    tcase_add_test(tc, wrong_call_order);
    tcase_add_test(tc, bad_batches_are_rejected_and_lose_nothing);
    tcase_add_test(tc, bad_offsets);
    tcase_add_test(tc, params_at_open_and_between_pushes);
    tcase_add_test(tc, map_entry_read_by_a_later_entry);
    tcase_add_test(tc, introspection_and_explain);
    tcase_add_test(tc, diagnostic_format);
    tcase_add_test(tc, load_file_errors);
    tcase_add_test(tc, f16_conversions);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
