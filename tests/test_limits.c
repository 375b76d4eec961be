/* test_limits.c — the documented hostile-input limits (pipelines/SCHEMA.md, "Limits"): each is
 * checked at its boundary — the largest allowed input loads, one more is refused with
 * SLUICE_ERR_LIMIT and a message of its own that names the limit — so that a hostile file is
 * cheap to reject and a legitimate one near the limit is not. Also: a file full of errors is
 * rejected quickly (the diagnostics it produces are bounded). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

/* ---- building large pipeline texts ----------------------------------------------------- */

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ck_assert(n >= 0);
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        t->s = realloc(t->s, cap);
        ck_assert(t->s != NULL);
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static void put_repeat(text *t, const char *s, int times) {
    for (int i = 0; i < times; i++) put(t, "%s", s);
}

static sluice_context *new_context(void) {
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    return ctx;
}

/* Loads t; returns the status and keeps the first diagnostic's message in msg. */
static sluice_status load(sluice_context *ctx, const text *t, char *msg, size_t cap) {
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, t->s, t->len, "limits.yaml", &p);
    msg[0] = '\0';
    if (st == SLUICE_OK) {
        ck_assert_ptr_nonnull(p);
        sluice_pipeline_free(p);
    } else {
        ck_assert_ptr_null(p);
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
        ck_assert_ptr_nonnull(d);
        snprintf(msg, cap, "%s", d->message);
    }
    return st;
}

/* Expects t to load, and frees it. */
static void expect_ok(text t) {
    sluice_context *ctx = new_context();
    char msg[1024];
    sluice_status st = load(ctx, &t, msg, sizeof msg);
    if (st != SLUICE_OK) tu_print_diags(ctx);
    ck_assert_msg(st == SLUICE_OK, "expected the file to load, got %s: %s", sluice_status_name(st),
                  msg);
    sluice_context_destroy(ctx);
    free(t.s);
}

/* Expects SLUICE_ERR_LIMIT whose first message contains `phrase`; copies the message out
 * when msg_out is given, and frees t. */
static void expect_limit(text t, const char *phrase, char *msg_out, size_t cap) {
    sluice_context *ctx = new_context();
    char msg[1024];
    sluice_status st = load(ctx, &t, msg, sizeof msg);
    ck_assert_msg(st == SLUICE_ERR_LIMIT, "expected SLUICE_ERR_LIMIT, got %s: %s",
                  sluice_status_name(st), msg);
    ck_assert_msg(strstr(msg, phrase) != NULL, "message '%s' does not mention '%s'", msg, phrase);
    if (msg_out) snprintf(msg_out, cap, "%s", msg);
    sluice_context_destroy(ctx);
    free(t.s);
}

static const char *const minimal_pipeline =
    "sluice: 1\nname: limits\ninput:\n  x: f32\nstages:\n  - map: {y: x + 1}\n";

/* ---- file size ------------------------------------------------------------------------- */

/* A valid pipeline padded with a comment to exactly `size` bytes. */
static text padded_pipeline(size_t size) {
    text t = {0};
    put(&t, "%s#", minimal_pipeline);
    while (t.len < size - 1) put(&t, "%s", t.len + 64 < size - 1 ? "padding-padding-padding-padding-padding-padding-padding-padding-" : "p");
    put(&t, "\n");
    ck_assert_uint_eq(t.len, size);
    return t;
}

START_TEST(file_size_at_limit_loads) {
    expect_ok(padded_pipeline((size_t)1 << 20));
}
END_TEST

START_TEST(file_size_past_limit_refused) {
    expect_limit(padded_pipeline(((size_t)1 << 20) + 1), "1048576", NULL, 0);
}
END_TEST

START_TEST(file_size_past_limit_refused_from_file) {
    text t = padded_pipeline(((size_t)1 << 20) + 1);
    char path[] = "/tmp/sluice_limits_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    ck_assert_uint_eq(fwrite(t.s, 1, t.len, f), t.len);
    fclose(f);
    sluice_context *ctx = new_context();
    sluice_pipeline *p = NULL;
    ck_assert_int_eq(sluice_pipeline_load_file(ctx, path, &p), SLUICE_ERR_LIMIT);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "limit"));
    sluice_context_destroy(ctx);
    remove(path);
    free(t.s);
}
END_TEST

/* ---- YAML nesting ---------------------------------------------------------------------- */

/* The root mapping is level 1; `extra:` holds `lists` nested flow lists (levels 2..lists+1). */
static text nested_yaml(int lists) {
    text t = {0};
    put(&t, "%sextra: ", minimal_pipeline);
    put_repeat(&t, "[", lists);
    put_repeat(&t, "]", lists);
    put(&t, "\n");
    return t;
}

START_TEST(yaml_depth_at_limit_reaches_the_schema) {
    /* 32 levels: the reader accepts it and the schema check reports the unknown key. */
    text t = nested_yaml(31);
    sluice_context *ctx = new_context();
    char msg[1024];
    ck_assert_int_eq(load(ctx, &t, msg, sizeof msg), SLUICE_ERR_UNKNOWN_KEY);
    sluice_context_destroy(ctx);
    free(t.s);
}
END_TEST

START_TEST(yaml_depth_past_limit_refused) {
    expect_limit(nested_yaml(32), "nesting", NULL, 0);
    /* and far past it: no recursion, no time */
    expect_limit(nested_yaml(100000), "nesting", NULL, 0);
}
END_TEST

/* ---- expressions ----------------------------------------------------------------------- */

/* A map column whose expression is exactly `length` bytes: x, spaces, then " + 1". */
static text long_expression(size_t length) {
    text t = {0};
    put(&t, "sluice: 1\nname: limits\ninput:\n  x: f32\nstages:\n  - map:\n      y: \"x");
    for (size_t i = 0; i < length - 5; i++) put(&t, " ");
    put(&t, " + 1\"\n");
    return t;
}

START_TEST(expression_length_at_limit_loads) {
    expect_ok(long_expression(65536));
}
END_TEST

START_TEST(expression_length_past_limit_refused) {
    expect_limit(long_expression(65537), "65536", NULL, 0);
}
END_TEST

static text nested_expression(const char *open, const char *close, int depth) {
    text t = {0};
    put(&t, "sluice: 1\nname: limits\ninput:\n  x: i32\nstages:\n  - map:\n      y: \"");
    put_repeat(&t, open, depth);
    put(&t, "x");
    put_repeat(&t, close, depth);
    put(&t, "\"\n");
    return t;
}

START_TEST(expression_depth_limits) {
    /* Parentheses, unary operators and long operator chains all count as depth: each makes
     * the tree deeper, and every later pass over the tree recurses. */
    expect_ok(nested_expression("(", ")", 100));
    expect_ok(nested_expression("-", "", 200));
    expect_ok(nested_expression("", " + x", 200));
    expect_limit(nested_expression("(", ")", 300), "nested deeper", NULL, 0);
    expect_limit(nested_expression("-", "", 300), "nested deeper", NULL, 0);
    expect_limit(nested_expression("", " + x", 300), "nested deeper", NULL, 0);
    /* far past it: refused, no stack overflow */
    expect_limit(nested_expression("abs(", ")", 10000), "nested deeper", NULL, 0);
}
END_TEST

/* ---- columns, stages, params, operators ------------------------------------------------ */

static text many_columns(int inputs, int mapped) {
    text t = {0};
    put(&t, "sluice: 1\nname: limits\ninput:\n");
    for (int i = 0; i < inputs; i++) put(&t, "  c%d: u8\n", i);
    put(&t, "stages:\n  - map:\n");
    for (int i = 0; i < mapped; i++) put(&t, "      m%d: c0 + %d\n", i, i);
    return t;
}

START_TEST(columns_limit) {
    expect_ok(many_columns(1000, 24)); /* 1024 columns */
    expect_limit(many_columns(1000, 25), "1024", NULL, 0);
    expect_limit(many_columns(1025, 1), "1024", NULL, 0); /* inputs alone past the limit */
}
END_TEST

static text many_stages(int stages) {
    text t = {0};
    put(&t, "sluice: 1\nname: limits\ninput:\n  x: i32\nstages:\n");
    for (int i = 0; i < stages; i++) put(&t, "  - map: {s%d: x + %d}\n", i, i);
    return t;
}

START_TEST(stages_limit) {
    expect_ok(many_stages(256));
    expect_limit(many_stages(257), "256", NULL, 0);
}
END_TEST

static text many_params(int params) {
    text t = {0};
    put(&t, "sluice: 1\nname: limits\nparams:\n");
    for (int i = 0; i < params; i++) put(&t, "  p%d: {type: i32, default: %d}\n", i, i);
    put(&t, "input:\n  x: i32\nstages:\n  - map: {y: x + p0}\n");
    return t;
}

START_TEST(params_limit) {
    expect_ok(many_params(256));
    expect_limit(many_params(257), "256", NULL, 0);
}
END_TEST

static text many_operators(int operators, int fields) {
    text t = {0};
    put(&t, "sluice: 1\nname: limits\noperators:\n");
    for (int i = 0; i < operators; i++) {
        put(&t, "  op%d:\n    state: {", i);
        for (int f = 0; f < fields; f++) put(&t, "%sf%d: i64", f ? ", " : "", f);
        put(&t, "}\n    identity: {");
        for (int f = 0; f < fields; f++) put(&t, "%sf%d: 0", f ? ", " : "", f);
        put(&t, "}\n    combine:\n");
        for (int f = 0; f < fields; f++) put(&t, "      f%d: l.f%d + r.f%d\n", f, f, f);
    }
    put(&t, "input:\n  x: i64\nstages:\n  - scan: {op: op0, of: {");
    for (int f = 0; f < fields; f++) put(&t, "%sf%d: x", f ? ", " : "", f);
    put(&t, "}, into: {f0: s}}\n");
    return t;
}

START_TEST(operators_limit) {
    expect_ok(many_operators(64, 1));
    expect_limit(many_operators(65, 1), "64", NULL, 0);
}
END_TEST

START_TEST(operator_fields_limit) {
    expect_ok(many_operators(1, 8));
    expect_limit(many_operators(1, 9), "8", NULL, 0);
}
END_TEST

/* Each limit says which one was hit: no two share a message. */
START_TEST(limit_messages_are_distinct) {
    char msgs[8][1024];
    text t[8];
    t[0] = padded_pipeline(((size_t)1 << 20) + 1);
    t[1] = nested_yaml(40);
    t[2] = long_expression(70000);
    t[3] = nested_expression("(", ")", 300);
    t[4] = many_columns(1030, 1);
    t[5] = many_stages(300);
    t[6] = many_params(300);
    t[7] = many_operators(70, 1);
    for (int i = 0; i < 8; i++) expect_limit(t[i], "", msgs[i], sizeof msgs[i]);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(msgs[i], msgs[j]) != 0, "limits %d and %d share '%s'", j, i,
                          msgs[i]);
}
END_TEST

/* ---- many errors ----------------------------------------------------------------------- */

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A file just under the size limit that is nothing but errors (unknown keys, each with a
 * did-you-mean search, many of them duplicated) is rejected with a bounded number of
 * diagnostics — the first 100 and one saying there were more — and without the time
 * quadratic in its length that quoting each one's source line used to cost (~190 s). */
START_TEST(file_of_errors_rejected_quickly) {
    text t = {0};
    put(&t, "%s", minimal_pipeline);
    int i = 0;
    while (t.len < ((size_t)1 << 20) - 64) put(&t, "k%d: 1\n", i++ % 40000);
    sluice_context *ctx = new_context();
    char msg[1024];
    double start = seconds_now();
    sluice_status st = load(ctx, &t, msg, sizeof msg);
    double took = seconds_now() - start;
    ck_assert_int_eq(st, SLUICE_ERR_DUPLICATE_KEY); /* the YAML reader reports first */
    size_t n = sluice_context_diagnostic_count(ctx);
    ck_assert_uint_eq(n, 101);
    const sluice_diagnostic *last = sluice_context_diagnostic(ctx, n - 1);
    ck_assert_int_eq(last->status, SLUICE_ERR_LIMIT);
    ck_assert_ptr_nonnull(strstr(last->message, "more than 100 problems"));
    ck_assert_msg(took < 60.0, "rejecting a 1 MiB file of errors took %.1f s", took);
    sluice_context_destroy(ctx);
    free(t.s);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, file_size_at_limit_loads);
    tcase_add_test(tc, file_size_past_limit_refused);
    tcase_add_test(tc, file_size_past_limit_refused_from_file);
    tcase_add_test(tc, yaml_depth_at_limit_reaches_the_schema);
    tcase_add_test(tc, yaml_depth_past_limit_refused);
    tcase_add_test(tc, expression_length_at_limit_loads);
    tcase_add_test(tc, expression_length_past_limit_refused);
    tcase_add_test(tc, expression_depth_limits);
    tcase_add_test(tc, columns_limit);
    tcase_add_test(tc, stages_limit);
    tcase_add_test(tc, params_limit);
    tcase_add_test(tc, operators_limit);
    tcase_add_test(tc, operator_fields_limit);
    tcase_add_test(tc, limit_messages_are_distinct);
    tcase_add_test(tc, file_of_errors_rejected_quickly);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(make_suite()); }
