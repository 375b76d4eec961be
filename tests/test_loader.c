/* test_loader.c — the YAML loader builds the right IR: every stage kind and key, defaults,
 * accumulator types and identities, filter lowering, live columns, default outputs, declared
 * operators (the affine one of pipelines/SCHEMA.md), and the monoids' combine on the primer's examples. */
#include <math.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/monoid.h"
#include "testutil.h"

static sluice_context *ctx;

static void setup(void) { ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK); }
static void teardown(void) { sluice_context_destroy(ctx); }

static int column_id(const sluice_pipeline *p, const char *name) {
    for (int c = 0; c < p->ncolumns; c++)
        if (strcmp(p->columns[c].name, name) == 0) return c;
    ck_abort_msg("no column %s", name);
    return -1;
}

static const sl_column *column(const sluice_pipeline *p, const char *name) {
    return &p->columns[column_id(p, name)];
}

/* A pipeline over inputs `x: <type>` (plus k: i32, flag: bool, off offsets) with one stage. */
static sluice_pipeline *one_stage(const char *x_type, const char *stage) {
    static char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: t\ninput:\n  x: %s\n  k: i32\n  flag: bool\n"
             "  off: {type: i64, role: offsets}\nstages:\n  - %s\n",
             x_type, stage);
    return tu_load(ctx, yaml);
}

START_TEST(design_example) {
    const char *yaml = "sluice: 1\n"
                       "name: cull-visible\n"
                       "params:\n"
                       "  radius: {type: f32, default: 10.0}\n"
                       "input:\n"
                       "  x: f32\n"
                       "  y: f32\n"
                       "  id: u64\n"
                       "stages:\n"
                       "  - map:\n"
                       "      r2: x*x + y*y\n"
                       "  - flag:\n"
                       "      keep: r2 < radius*radius && !isnan(x)\n"
                       "  - compact: {by: keep}\n"
                       "  - scan: {of: r2, op: sum, kind: exclusive, into: r2_before, acc: f64}\n"
                       "  - sort: {key: r2, order: ascending}\n"
                       "output: [id, r2, r2_before]\n";
    sluice_pipeline *p = tu_load(ctx, yaml);
    ck_assert_str_eq(p->name, "cull-visible");
    ck_assert_str_eq(p->file, "<test>");
    ck_assert_int_eq(p->ninputs, 3);
    ck_assert_int_eq(p->nparams, 1);
    ck_assert_str_eq(p->params[0].name, "radius");
    ck_assert_int_eq(p->params[0].type, SLUICE_F32);
    ck_assert_str_eq(p->params[0].default_text, "10.0");
    ck_assert(fabs(p->params[0].default_value.f - 10.0) < 1e-12);
    ck_assert_int_eq(p->nstages, 5);
    ck_assert_int_eq(p->stages[0].kind, SL_STAGE_MAP);
    ck_assert_str_eq(p->stages[0].kind_name, "map");
    ck_assert_int_eq(p->stages[0].loc.line, 10);
    ck_assert_int_eq(p->stages[1].kind, SL_STAGE_MAP);
    ck_assert_str_eq(p->stages[1].kind_name, "flag");
    ck_assert_int_eq(p->stages[2].kind, SL_STAGE_COMPACT);
    ck_assert_int_eq(p->stages[2].compact.by, column_id(p, "keep"));
    ck_assert_int_eq(p->stages[3].kind, SL_STAGE_SCAN);
    ck_assert_int_eq(p->stages[4].kind, SL_STAGE_SORT);
    ck_assert_int_eq(column(p, "r2")->type, SLUICE_F32);
    ck_assert_int_eq(column(p, "r2")->producer, 0);
    ck_assert_int_eq(column(p, "keep")->type, SLUICE_BOOL);
    ck_assert_int_eq(column(p, "x")->producer, -1);
    const sl_scan *scan = &p->stages[3].scan;
    ck_assert_int_eq(scan->op, SL_SCAN_SUM);
    ck_assert(scan->exclusive);
    ck_assert(!scan->reset_per_batch);
    ck_assert_int_eq(scan->acc[0], SLUICE_F64);
    ck_assert_int_eq(scan->of[0]->type, SLUICE_F64);
    ck_assert_int_eq(scan->into[0], column_id(p, "r2_before"));
    ck_assert_int_eq(column(p, "r2_before")->type, SLUICE_F64);
    ck_assert_int_eq(scan->segments, SL_SEGMENTS_NONE);
    ck_assert_int_eq(p->noutputs, 3);
    ck_assert_int_eq(p->outputs[0], column_id(p, "id"));
    ck_assert_int_eq(p->outputs[1], column_id(p, "r2"));
    ck_assert_int_eq(p->outputs[2], column_id(p, "r2_before"));
    ck_assert_int_eq(p->determinism, SL_DETERMINISM_DEFAULT);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(map_columns_and_order) {
    sluice_pipeline *p = one_stage("f32", "map: {a: x * 2.0, b: a + 1.0, c: k + 1, d: f64(k)}");
    ck_assert_int_eq(p->stages[0].map.count, 4);
    ck_assert_int_eq(p->stages[0].map.columns[1], column_id(p, "b"));
    ck_assert_int_eq(column(p, "a")->type, SLUICE_F32);
    ck_assert_int_eq(column(p, "b")->type, SLUICE_F32);
    ck_assert_int_eq(column(p, "c")->type, p->stages[0].map.exprs[2]->type);
    ck_assert_int_eq(column(p, "d")->type, SLUICE_F64);
    /* inputs first, then defined columns in definition order */
    ck_assert_int_eq(column_id(p, "a"), 4);
    ck_assert_int_eq(column_id(p, "d"), 7);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(default_outputs_and_liveness) {
    sluice_pipeline *p = one_stage("f32", "map: {y: x + 1.0}");
    /* offsets inputs are never live, never outputs */
    ck_assert_int_eq(p->noutputs, 4);
    ck_assert_int_eq(p->outputs[0], column_id(p, "x"));
    ck_assert_int_eq(p->outputs[3], column_id(p, "y"));
    ck_assert(!p->stages[0].live_after[column_id(p, "off")]);
    ck_assert(p->stages[0].live_after[column_id(p, "y")]);
    bool inputs_live[8] = {true, true, true, false};
    ck_assert_ptr_eq(sl_pipeline_live_before(p, 0, inputs_live), inputs_live);
    ck_assert_ptr_eq(sl_pipeline_live_before(p, 1, inputs_live), p->stages[0].live_after);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(compact_columns_drop) {
    const char *yaml = "sluice: 1\nname: t\ninput: {x: f32, y: f32, id: u32}\nstages:\n"
                       "  - flag: {keep: x > 0.0}\n"
                       "  - compact: {by: keep, columns: [id, x]}\n"
                       "  - map: {z: x * 2.0}\n";
    sluice_pipeline *p = tu_load(ctx, yaml);
    const bool *live = p->stages[1].live_after;
    ck_assert(live[column_id(p, "id")]);
    ck_assert(live[column_id(p, "x")]);
    ck_assert(!live[column_id(p, "y")]);
    ck_assert(!live[column_id(p, "keep")]);
    ck_assert(!live[column_id(p, "z")]);
    ck_assert(p->stages[0].live_after[column_id(p, "keep")]);
    ck_assert(p->stages[0].live_after[column_id(p, "y")]);
    ck_assert_int_eq(p->noutputs, 3); /* x, id, z */
    ck_assert_int_eq(p->outputs[0], column_id(p, "x"));
    ck_assert_int_eq(p->outputs[1], column_id(p, "id"));
    ck_assert_int_eq(p->outputs[2], column_id(p, "z"));
    sluice_pipeline_free(p);

    /* without columns, by stays live */
    p = tu_load(ctx, "sluice: 1\nname: t\ninput: {x: f32}\nstages:\n"
                     "  - flag: {keep: x > 0.0}\n  - compact: {by: keep}\n");
    ck_assert(p->stages[1].live_after[column_id(p, "keep")]);
    ck_assert_int_eq(p->noutputs, 2);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(filter_lowering) {
    const char *yaml = "sluice: 1\nname: t\ninput: {x: i32, y: f32}\nstages:\n"
                       "  - filter: x > 0\n"
                       "  - filter: \"y < 2.5\"\n";
    sluice_pipeline *p = tu_load(ctx, yaml);
    ck_assert_int_eq(p->nstages, 4);
    for (int i = 0; i < 4; i++) ck_assert_str_eq(p->stages[i].kind_name, "filter");
    ck_assert_int_eq(p->stages[0].kind, SL_STAGE_MAP);
    ck_assert_int_eq(p->stages[1].kind, SL_STAGE_COMPACT);
    ck_assert_int_eq(p->stages[0].loc.line, 5);
    int flag = p->stages[0].map.columns[0];
    ck_assert(p->columns[flag].hidden);
    ck_assert_int_eq(p->columns[flag].type, SLUICE_BOOL);
    ck_assert_int_eq(p->stages[1].compact.by, flag);
    ck_assert(p->stages[0].live_after[flag]);
    ck_assert(!p->stages[1].live_after[flag]);
    ck_assert(p->stages[1].live_after[column_id(p, "y")]);
    ck_assert_int_ne(p->stages[2].map.columns[0], flag);
    /* hidden flags never appear in the default output */
    ck_assert_int_eq(p->noutputs, 2);
    sluice_pipeline_free(p);
}
END_TEST

/* The accumulator pipelines/SCHEMA.md gives for `op` over an input of `type`. */
static void expect_acc(const char *type, const char *op, const char *extra, sluice_type want) {
    char stage[256];
    if (strcmp(op, "count") == 0)
        snprintf(stage, sizeof stage, "scan: {op: count, into: out%s}", extra);
    else
        snprintf(stage, sizeof stage, "scan: {of: x, op: %s, into: out%s}", op, extra);
    sluice_pipeline *p = one_stage(type, stage);
    const sl_scan *s = &p->stages[0].scan;
    ck_assert_msg(s->acc[0] == want, "%s over %s%s: acc %s, want %s", op, type, extra,
                  sluice_type_name(s->acc[0]), sluice_type_name(want));
    ck_assert_int_eq(column(p, "out")->type, want);
    ck_assert_int_eq(s->of[0]->type, want);
    ck_assert_int_eq(s->nfields, 1);
    ck_assert(!s->exclusive);
    sluice_pipeline_free(p);
}

START_TEST(accumulator_defaults) {
    expect_acc("f16", "sum", "", SLUICE_F32);
    expect_acc("f32", "sum", "", SLUICE_F32);
    expect_acc("f64", "prod", "", SLUICE_F64);
    expect_acc("i8", "sum", "", SLUICE_I64);
    expect_acc("i32", "prod", "", SLUICE_I64);
    expect_acc("bool", "sum", "", SLUICE_I64);
    expect_acc("u8", "sum", "", SLUICE_U64);
    expect_acc("u32", "prod", "", SLUICE_U64);
    expect_acc("i16", "max", "", SLUICE_I16);
    expect_acc("u8", "min", "", SLUICE_U8);
    expect_acc("f16", "max", "", SLUICE_F32);
    expect_acc("f64", "min", "", SLUICE_F64);
    expect_acc("u32", "and", "", SLUICE_U32);
    expect_acc("i64", "or", "", SLUICE_I64);
    expect_acc("bool", "xor", "", SLUICE_BOOL);
    expect_acc("f32", "count", "", SLUICE_I64);
}
END_TEST

START_TEST(accumulator_overrides) {
    expect_acc("i32", "sum", ", acc: i32", SLUICE_I32);
    expect_acc("i32", "sum", ", acc: f64", SLUICE_F64);
    expect_acc("i16", "sum", ", acc: f32", SLUICE_F32);
    expect_acc("u32", "sum", ", acc: i64", SLUICE_I64);
    expect_acc("f16", "sum", ", acc: f64", SLUICE_F64);
    expect_acc("f32", "max", ", acc: f64", SLUICE_F64);
    expect_acc("bool", "and", ", acc: u8", SLUICE_U8);
    expect_acc("f32", "count", ", acc: u64", SLUICE_U64);
}
END_TEST

START_TEST(scan_keys) {
    sluice_pipeline *p =
        one_stage("f32", "scan: {of: x * 2.0, op: max, kind: exclusive, reset: batch, into: m}");
    const sl_scan *s = &p->stages[0].scan;
    ck_assert(s->exclusive);
    ck_assert(s->reset_per_batch);
    ck_assert_int_eq(s->op, SL_SCAN_MAX);
    ck_assert_str_eq(sl_monoid_op_name(s), "max");
    ck_assert_int_eq(s->into[0], column_id(p, "m"));
    ck_assert_int_eq(s->into[1], -1);
    sluice_pipeline_free(p);

    p = one_stage("f32", "scan: {op: count, kind: inclusive, reset: never, into: n}");
    s = &p->stages[0].scan;
    ck_assert_int_eq(s->op, SL_SCAN_COUNT);
    ck_assert(!s->exclusive && !s->reset_per_batch);
    ck_assert(sl_expr_is_constant(s->of[0]));
    ck_assert_int_eq(s->identity[0].i, 0);
    sluice_pipeline_free(p);
}
END_TEST

static sl_value identity_of(const char *type, const char *op) {
    char stage[128];
    snprintf(stage, sizeof stage, "scan: {of: x, op: %s, into: out}", op);
    sluice_pipeline *p = one_stage(type, stage);
    sl_value v = p->stages[0].scan.identity[0];
    ck_assert_int_eq(v.type, p->stages[0].scan.acc[0]);
    sluice_pipeline_free(p);
    return v;
}

START_TEST(identities) {
    ck_assert(isinf(identity_of("f32", "max").f) && identity_of("f32", "max").f < 0);
    ck_assert(isinf(identity_of("f64", "min").f) && identity_of("f64", "min").f > 0);
    ck_assert_int_eq(identity_of("i8", "min").i, 127);
    ck_assert_int_eq(identity_of("i8", "max").i, -128);
    ck_assert_int_eq(identity_of("i64", "max").i, INT64_MIN);
    ck_assert_uint_eq(identity_of("u16", "min").u, 0xFFFF);
    ck_assert_uint_eq(identity_of("u16", "max").u, 0);
    ck_assert_uint_eq(identity_of("u16", "and").u, 0xFFFF);
    ck_assert_int_eq(identity_of("i32", "and").i, -1);
    ck_assert_uint_eq(identity_of("bool", "and").u, 1);
    ck_assert_uint_eq(identity_of("bool", "or").u, 0);
    ck_assert_int_eq(identity_of("i32", "prod").i, 1);
    ck_assert(identity_of("f32", "prod").f == 1.0);
    ck_assert(identity_of("f32", "sum").f == 0.0);
    ck_assert_uint_eq(identity_of("u8", "xor").u, 0);
}
END_TEST

START_TEST(linrec_types) {
    const char *base = "sluice: 1\nname: t\ninput: {a: %s, b: %s}\nstages:\n"
                       "  - scan: {op: linrec, a: a, b: b, into: h%s}\n";
    struct { const char *a, *b, *extra; sluice_type want; } cases[] = {
        {"f32", "f32", "", SLUICE_F32}, {"f16", "f16", "", SLUICE_F32},
        {"f32", "f64", "", SLUICE_F64}, {"i32", "f32", "", SLUICE_F32},
        {"i32", "i16", "", SLUICE_I64}, {"u8", "u8", "", SLUICE_I64},
        {"f32", "f32", ", acc: f64", SLUICE_F64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, base, cases[i].a, cases[i].b, cases[i].extra);
        sluice_pipeline *p = tu_load(ctx, yaml);
        const sl_scan *s = &p->stages[0].scan;
        ck_assert_int_eq(s->op, SL_SCAN_LINREC);
        ck_assert_int_eq(s->nfields, 2);
        ck_assert_int_eq(s->acc[0], cases[i].want);
        ck_assert_int_eq(s->acc[1], cases[i].want);
        ck_assert_int_eq(s->of[0]->type, cases[i].want);
        ck_assert_int_eq(s->of[1]->type, cases[i].want);
        ck_assert_int_eq(s->into[0], -1);
        ck_assert_int_eq(s->into[1], column_id(p, "h"));
        ck_assert_int_eq(column(p, "h")->type, cases[i].want);
        if (sl_type_is_float(cases[i].want)) {
            ck_assert(s->identity[0].f == 1.0 && s->identity[1].f == 0.0);
        } else {
            ck_assert(s->identity[0].i == 1 && s->identity[1].i == 0);
        }
        sluice_pipeline_free(p);
    }
}
END_TEST

START_TEST(segmented_scan_sources) {
    sluice_pipeline *p =
        one_stage("f32", "segmented_scan: {of: x, op: sum, into: s, segments: off}");
    const sl_scan *s = &p->stages[0].scan;
    ck_assert_str_eq(p->stages[0].kind_name, "segmented_scan");
    ck_assert_int_eq(s->segments, SL_SEGMENTS_OFFSETS);
    ck_assert_int_eq(s->segment_column, column_id(p, "off"));
    ck_assert_int_eq(column(p, "off")->role, SLUICE_ROLE_OFFSETS);
    sluice_pipeline_free(p);

    p = one_stage("f32", "segmented_scan: {of: x, op: max, into: s, segments: flag}");
    ck_assert_int_eq(p->stages[0].scan.segments, SL_SEGMENTS_HEADFLAG);
    ck_assert_int_eq(p->stages[0].scan.segment_column, column_id(p, "flag"));
    sluice_pipeline_free(p);

    p = one_stage("f32", "segmented_scan: {op: count, into: s, segments: {key: k}, kind: exclusive}");
    ck_assert_int_eq(p->stages[0].scan.segments, SL_SEGMENTS_KEY);
    ck_assert_int_eq(p->stages[0].scan.segment_column, column_id(p, "k"));
    ck_assert(p->stages[0].scan.exclusive);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(sort_keys) {
    sluice_pipeline *p = one_stage("f32", "sort: {key: x}");
    const sl_sort *s = &p->stages[0].sort;
    ck_assert_int_eq(s->nkeys, 1);
    ck_assert_int_eq(s->keys[0], column_id(p, "x"));
    ck_assert(!s->key_descending[0] && !s->per_batch);
    ck_assert_int_eq(s->bits_lo, 0);
    ck_assert_int_eq(s->bits_hi, 32);
    ck_assert(p->stages[0].live_after[column_id(p, "k")]);
    sluice_pipeline_free(p);

    p = one_stage("u16", "sort: {key: x, order: descending, bits: [4, 12], per: batch}");
    s = &p->stages[0].sort;
    ck_assert(s->key_descending[0] && s->per_batch);
    ck_assert_int_eq(s->bits_lo, 4);
    ck_assert_int_eq(s->bits_hi, 12);
    sluice_pipeline_free(p);

    p = one_stage("f64", "sort: {keys: [k, x], values: [flag]}");
    s = &p->stages[0].sort;
    ck_assert_int_eq(s->nkeys, 2);
    ck_assert_int_eq(s->keys[0], column_id(p, "k"));
    ck_assert_int_eq(s->keys[1], column_id(p, "x"));
    /* values: the kept columns besides the keys */
    ck_assert(p->stages[0].live_after[column_id(p, "flag")]);
    ck_assert(p->stages[0].live_after[column_id(p, "k")]);
    ck_assert_int_eq(p->noutputs, 3);
    sluice_pipeline_free(p);
}
END_TEST

/* `order`: one for every key, or a list of one per key. */
START_TEST(sort_order_per_key) {
    sluice_pipeline *p = one_stage("f64", "sort: {keys: [k, x], order: [descending, ascending]}");
    const sl_sort *s = &p->stages[0].sort;
    ck_assert(s->key_descending[0] && !s->key_descending[1]);
    sluice_pipeline_free(p);

    p = tu_load(ctx, "sluice: 1\nname: t\ninput: {a: u8, b: f32, c: i64}\nstages:\n"
                     "  - sort: {keys: [a, b, c], order: [ascending, descending, ascending]}\n");
    s = &p->stages[0].sort;
    ck_assert(!s->key_descending[0] && s->key_descending[1] && !s->key_descending[2]);
    sluice_pipeline_free(p);

    p = one_stage("f64", "sort: {keys: [k, x], order: [descending, descending]}");
    s = &p->stages[0].sort;
    ck_assert(s->key_descending[0] && s->key_descending[1]);
    sluice_pipeline_free(p);

    /* a scalar order applies to every key */
    p = one_stage("f64", "sort: {keys: [k, x], order: descending}");
    s = &p->stages[0].sort;
    ck_assert(s->key_descending[0] && s->key_descending[1]);
    sluice_pipeline_free(p);

    p = one_stage("f64", "sort: {keys: [k, x]}");
    s = &p->stages[0].sort;
    ck_assert(!s->key_descending[0] && !s->key_descending[1]);
    sluice_pipeline_free(p);

    /* one key: a list of one, with bits */
    p = one_stage("u16", "sort: {key: x, order: [descending], bits: [4, 12]}");
    s = &p->stages[0].sort;
    ck_assert(s->key_descending[0]);
    ck_assert_int_eq(s->bits_lo, 4);
    sluice_pipeline_free(p);

    /* block style */
    p = tu_load(ctx, "sluice: 1\nname: t\ninput: {a: u8, b: f32}\nstages:\n"
                     "  - sort:\n      keys: [a, b]\n      order:\n        - ascending\n"
                     "        - descending\n");
    s = &p->stages[0].sort;
    ck_assert(!s->key_descending[0] && s->key_descending[1]);
    sluice_pipeline_free(p);
}
END_TEST

/* A bad `order` fails with the position of the list (or of the bad entry) in the file. */
static void expect_order_error(const char *stage, const char *at, const char *fragment) {
    char yaml[1024], buf[1024], where[64];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: t\ninput:\n  x: f32\n  k: i32\n  flag: bool\nstages:\n  - %s\n",
             stage);
    ck_assert_int_eq(tu_load_fail(ctx, yaml, buf, sizeof buf), SLUICE_ERR_BAD_VALUE);
    /* the stage is on line 8, after "  - "; `at` is the text the diagnostic points at */
    snprintf(where, sizeof where, "<test>:8:%d:", 5 + (int)(strstr(stage, at) - stage));
    ck_assert_msg(strstr(buf, where) && strstr(buf, fragment), "'%s' lacks '%s' or '%s'", buf,
                  where, fragment);
}

START_TEST(sort_order_list_errors) {
    expect_order_error("sort: {keys: [k, x], order: [descending]}", "[descending]",
                       "order has 1 entry but the sort has 2 keys");
    expect_order_error("sort: {keys: [k, x], order: [descending, ascending, ascending]}",
                       "[descending, ascending, ascending]",
                       "order has 3 entries but the sort has 2 keys");
    expect_order_error("sort: {key: x, order: [ascending, descending]}", "[ascending, descending]",
                       "order has 2 entries but the sort has 1 key:");
    expect_order_error("sort: {keys: [k, x], order: []}", "[]", "order has 0 entries");
    expect_order_error("sort: {keys: [k, x], order: [descending, sideways]}", "sideways",
                       "order 'sideways' is not one of ascending or descending");
    expect_order_error("sort: {keys: [k, x], order: [[descending], ascending]}",
                       "[descending], ascending]", "order must be a single value, not a list");
    expect_order_error("sort: {keys: [k, x], order: {k: descending}}", "{k: descending}",
                       "order must be ascending, descending or a list of them (one per key)");
}
END_TEST

START_TEST(determinism_and_params) {
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: t\ndeterminism: run_to_run\n"
                                      "params:\n  lo: {type: i32, default: -3}\n"
                                      "  on: {type: bool, default: true}\n"
                                      "input: {x: i32}\nstages:\n  - filter: x > lo && on\n");
    ck_assert_int_eq(p->determinism, SL_DETERMINISM_RUN_TO_RUN);
    ck_assert_int_eq(p->nparams, 2);
    ck_assert_int_eq(p->params[0].default_value.i, -3);
    ck_assert_uint_eq(p->params[1].default_value.u, 1);
    ck_assert_int_eq(p->params[1].type, SLUICE_BOOL);
    sluice_pipeline_free(p);
}
END_TEST

static const char *affine_yaml =
    "sluice: 1\n"
    "name: affine\n"
    "input: {decay: f32, u: f32}\n"
    "operators:\n"
    "  affine:                       # (a1, b1) then (a2, b2) = (a1*a2, a2*b1 + b2)\n"
    "    state: {a: f32, b: f32}\n"
    "    identity: {a: 1.0, b: 0.0}\n"
    "    combine:\n"
    "      a: l.a * r.a\n"
    "      b: r.a * l.b + r.b\n"
    "stages:\n"
    "  - scan: {op: affine, of: {a: decay, b: u}, kind: inclusive, into: {b: h}}\n";

START_TEST(declared_affine_operator) {
    sluice_pipeline *p = tu_load(ctx, affine_yaml);
    ck_assert_int_eq(p->noperators, 1);
    const sl_operator *op = &p->operators[0];
    ck_assert_str_eq(op->name, "affine");
    ck_assert_int_eq(op->nfields, 2);
    ck_assert_str_eq(op->field_names[1], "b");
    ck_assert_int_eq(op->field_types[0], SLUICE_F32);
    ck_assert(op->identity[0].f == 1.0 && op->identity[1].f == 0.0);
    ck_assert_int_eq(op->combine[1]->type, SLUICE_F32);
    const sl_scan *s = &p->stages[0].scan;
    ck_assert_int_eq(s->op, SL_SCAN_CUSTOM);
    ck_assert_ptr_eq(s->custom, op);
    ck_assert_str_eq(sl_monoid_op_name(s), "affine");
    ck_assert_int_eq(s->nfields, 2);
    ck_assert_int_eq(s->into[0], -1);
    ck_assert_int_eq(s->into[1], column_id(p, "h"));
    ck_assert_int_eq(column(p, "h")->type, SLUICE_F32);
    /* the primer's recurrence through the declared operator: [1.0, 2.9, 3.29, 7.29] */
    const double a[] = {0.5, 0.9, 0.1, 1.0}, b[] = {1, 2, 3, 4}, want[] = {1.0, 2.9, 3.29, 7.29};
    sl_value state[2] = {s->identity[0], s->identity[1]};
    for (int t = 0; t < 4; t++) {
        sl_value row[2] = {{.type = SLUICE_F32, .f = (float)a[t]}, {.type = SLUICE_F32, .f = b[t]}};
        sl_monoid_combine(s, state, row, state);
        ck_assert_msg(fabs(state[1].f - want[t]) < 1e-5, "h[%d] = %g", t, state[1].f);
    }
    /* left stays left: (2,3)·(4,5) = (8, 4*3+5) but (4,5)·(2,3) = (8, 2*5+3) */
    sl_value l[2] = {{.type = SLUICE_F32, .f = 2}, {.type = SLUICE_F32, .f = 3}};
    sl_value r[2] = {{.type = SLUICE_F32, .f = 4}, {.type = SLUICE_F32, .f = 5}};
    sl_value out[2];
    sl_monoid_combine(s, l, r, out);
    ck_assert(out[0].f == 8 && out[1].f == 17);
    sl_monoid_combine(s, r, l, out);
    ck_assert(out[0].f == 8 && out[1].f == 13);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(declared_integer_operators) {
    /* max with its argument position (an associative pair operator over integers) */
    sluice_pipeline *p = tu_load(ctx, "sluice: 1\nname: t\ninput: {v: i32, i: i64}\n"
                                      "operators:\n"
                                      "  argmax:\n"
                                      "    state: {v: i32, i: i64}\n"
                                      "    identity: {v: -2147483648, i: -1}\n"
                                      "    combine:\n"
                                      "      v: \"r.v > l.v ? r.v : l.v\"\n"
                                      "      i: \"r.v > l.v ? r.i : l.i\"\n"
                                      "stages:\n"
                                      "  - scan: {op: argmax, of: {v: v, i: i}, into: {v: best, i: at}}\n");
    ck_assert_int_eq(column(p, "best")->type, SLUICE_I32);
    ck_assert_int_eq(column(p, "at")->type, SLUICE_I64);
    sluice_pipeline_free(p);
}
END_TEST

START_TEST(declared_float_operators_in_every_format) {
    /* rounding in f16 and f64 is not mistaken for non-associativity */
    const char *types[] = {"f16", "f32", "f64"};
    for (int i = 0; i < 3; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: t\ninput: {x: %s}\noperators:\n"
                 "  plus: {state: {s: %s}, identity: {s: 0}, combine: {s: l.s + r.s}}\n"
                 "  affine:\n    state: {a: %s, b: %s}\n    identity: {a: 1, b: 0}\n"
                 "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"
                 "stages:\n  - scan: {op: plus, of: {s: x}, into: {s: total}}\n"
                 "  - scan: {op: affine, of: {a: x, b: x}, into: {b: h}}\n",
                 types[i], types[i], types[i], types[i]);
        sluice_pipeline *p = tu_load(ctx, yaml);
        ck_assert_int_eq(p->noperators, 2);
        sluice_pipeline_free(p);
    }
}
END_TEST

/* Folds `op` over the primer's array with sl_monoid_combine, inclusive and exclusive. */
START_TEST(monoid_primer_scans) {
    sl_scan sum = {.op = SL_SCAN_SUM, .nfields = 1, .acc = {SLUICE_I64}};
    const int64_t x[] = {3, 1, 7, 0, 4, 1, 6, 3};
    const int64_t inclusive[] = {3, 4, 11, 11, 15, 16, 22, 25};
    const int64_t exclusive[] = {0, 3, 4, 11, 11, 15, 16, 22};
    sl_value acc = sl_monoid_identity(SL_SCAN_SUM, 0, SLUICE_I64);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(acc.i, exclusive[i]);
        sl_value v = {.type = SLUICE_I64, .i = x[i]};
        sl_monoid_combine(&sum, &acc, &v, &acc);
        ck_assert_int_eq(acc.i, inclusive[i]);
    }
    ck_assert_int_eq(acc.i, 25);

    /* the f16 running sum stalls at 256 only with an f16 accumulator; the default is f32 */
    sl_scan f32sum = {.op = SL_SCAN_SUM, .nfields = 1, .acc = {SLUICE_F32}};
    sl_scan f16sum = {.op = SL_SCAN_SUM, .nfields = 1, .acc = {SLUICE_F16}};
    sl_value s32 = sl_monoid_identity(SL_SCAN_SUM, 0, SLUICE_F32);
    sl_value s16 = sl_monoid_identity(SL_SCAN_SUM, 0, SLUICE_F16);
    sl_value tenth = sl_monoid_normalize(SLUICE_F16, (sl_value){.type = SLUICE_F16, .f = 0.1});
    for (int i = 0; i < 4096; i++) {
        sl_monoid_combine(&f32sum, &s32, &tenth, &s32);
        sl_monoid_combine(&f16sum, &s16, &tenth, &s16);
    }
    ck_assert(s16.f == 256.0);
    ck_assert_msg(fabs(s32.f - 409.5) < 0.1, "f32 sum %g", s32.f);
    ck_assert(sl_monoid_default_acc(SL_SCAN_SUM, SLUICE_F16, &f32sum.acc[0], (char[64]){0}, 64));
    ck_assert_int_eq(f32sum.acc[0], SLUICE_F32);
}
END_TEST

START_TEST(monoid_builtin_semantics) {
    sl_value out;
    /* i32 accumulators wrap */
    sl_scan sum32 = {.op = SL_SCAN_SUM, .nfields = 1, .acc = {SLUICE_I32}};
    sl_value big = {.type = SLUICE_I32, .i = INT32_MAX}, one = {.type = SLUICE_I32, .i = 1};
    sl_monoid_combine(&sum32, &big, &one, &out);
    ck_assert_int_eq(out.i, INT32_MIN);
    /* u8 prod wraps */
    sl_scan prod8 = {.op = SL_SCAN_PROD, .nfields = 1, .acc = {SLUICE_U8}};
    sl_value u16v = {.type = SLUICE_U8, .u = 16};
    sl_monoid_combine(&prod8, &u16v, &u16v, &out);
    ck_assert_uint_eq(out.u, 0);
    /* float max propagates NaN; the identity -inf leaves values alone */
    sl_scan maxf = {.op = SL_SCAN_MAX, .nfields = 1, .acc = {SLUICE_F32}};
    sl_value nan = {.type = SLUICE_F32, .f = NAN}, two = {.type = SLUICE_F32, .f = 2};
    sl_monoid_combine(&maxf, &two, &nan, &out);
    ck_assert(isnan(out.f));
    sl_monoid_combine(&maxf, &nan, &two, &out);
    ck_assert(isnan(out.f));
    sl_value id = sl_monoid_identity(SL_SCAN_MAX, 0, SLUICE_F32);
    sl_monoid_combine(&maxf, &id, &two, &out);
    ck_assert(out.f == 2);
    /* signed min compares as signed, unsigned as unsigned */
    sl_scan mini = {.op = SL_SCAN_MIN, .nfields = 1, .acc = {SLUICE_I8}};
    sl_value m1 = {.type = SLUICE_I8, .i = -1}, p1 = {.type = SLUICE_I8, .i = 1};
    sl_monoid_combine(&mini, &p1, &m1, &out);
    ck_assert_int_eq(out.i, -1);
    sl_scan minu = {.op = SL_SCAN_MIN, .nfields = 1, .acc = {SLUICE_U8}};
    sl_value u255 = {.type = SLUICE_U8, .u = 255}, u1 = {.type = SLUICE_U8, .u = 1};
    sl_monoid_combine(&minu, &u255, &u1, &out);
    ck_assert_uint_eq(out.u, 1);
    /* bitwise */
    sl_scan x8 = {.op = SL_SCAN_XOR, .nfields = 1, .acc = {SLUICE_U8}};
    sl_value a = {.type = SLUICE_U8, .u = 0xF0}, b = {.type = SLUICE_U8, .u = 0x3C};
    sl_monoid_combine(&x8, &a, &b, &out);
    ck_assert_uint_eq(out.u, 0xCC);
    /* linrec builtin: the primer's recurrence */
    sl_scan lin = {.op = SL_SCAN_LINREC, .nfields = 2, .acc = {SLUICE_F64, SLUICE_F64}};
    sl_value st[2] = {sl_monoid_identity(SL_SCAN_LINREC, 0, SLUICE_F64),
                      sl_monoid_identity(SL_SCAN_LINREC, 1, SLUICE_F64)};
    const double av[] = {0.5, 0.9, 0.1, 1.0}, bv[] = {1, 2, 3, 4}, want[] = {1.0, 2.9, 3.29, 7.29};
    for (int t = 0; t < 4; t++) {
        sl_value row[2] = {{.type = SLUICE_F64, .f = av[t]}, {.type = SLUICE_F64, .f = bv[t]}};
        sl_monoid_combine(&lin, st, row, st);
        ck_assert(fabs(st[1].f - want[t]) < 1e-12);
    }
}
END_TEST

START_TEST(acc_rules_table) {
    char why[256];
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_F16, SLUICE_F16, why, sizeof why));
    ck_assert(strstr(why, "f32"));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_F32, SLUICE_I64, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_F64, SLUICE_F32, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_I32, SLUICE_I16, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_I32, SLUICE_U64, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_U32, SLUICE_I32, why, sizeof why));
    ck_assert(sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_U32, SLUICE_I64, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_I32, SLUICE_F32, why, sizeof why));
    ck_assert(sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_I32, SLUICE_F64, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_I64, SLUICE_F64, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_OR, SLUICE_I32, SLUICE_F64, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_COUNT, SLUICE_F32, SLUICE_I32, why, sizeof why));
    ck_assert(!sl_monoid_acc_allowed(SL_SCAN_SUM, SLUICE_BOOL, SLUICE_BOOL, why, sizeof why));
    ck_assert(sl_monoid_acc_allowed(SL_SCAN_MAX, SLUICE_BOOL, SLUICE_BOOL, why, sizeof why));
    sluice_type acc;
    ck_assert(!sl_monoid_default_acc(SL_SCAN_AND, SLUICE_F32, &acc, why, sizeof why));
    ck_assert(!sl_monoid_default_acc(SL_SCAN_LINREC, SLUICE_BOOL, &acc, why, sizeof why));
}
END_TEST

START_TEST(load_failure_frees_everything) {
    /* a partly built pipeline (columns, stages, an operator) is freed on failure; run under
     * ASan/LSan this catches leaks */
    char buf[512];
    sluice_status st = tu_load_fail(ctx, "sluice: 1\nname: t\ninput: {x: f32}\n"
                                         "operators:\n  affine:\n    state: {a: f32, b: f32}\n"
                                         "    identity: {a: 1.0, b: 0.0}\n"
                                         "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"
                                         "stages:\n  - map: {y: x + 1.0}\n"
                                         "  - scan: {of: y, op: sum, into: s}\n"
                                         "output: [nope]\n", buf, sizeof buf);
    ck_assert_int_eq(st, SLUICE_ERR_UNKNOWN_OUTPUT);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("ir");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, design_example);
    tcase_add_test(tc, map_columns_and_order);
    tcase_add_test(tc, default_outputs_and_liveness);
    tcase_add_test(tc, compact_columns_drop);
    tcase_add_test(tc, filter_lowering);
    tcase_add_test(tc, accumulator_defaults);
    tcase_add_test(tc, accumulator_overrides);
    tcase_add_test(tc, scan_keys);
    tcase_add_test(tc, identities);
    tcase_add_test(tc, linrec_types);
    tcase_add_test(tc, segmented_scan_sources);
    tcase_add_test(tc, sort_keys);
    tcase_add_test(tc, sort_order_per_key);
    tcase_add_test(tc, sort_order_list_errors);
    tcase_add_test(tc, determinism_and_params);
    tcase_add_test(tc, declared_affine_operator);
    tcase_add_test(tc, declared_integer_operators);
    tcase_add_test(tc, declared_float_operators_in_every_format);
    tcase_add_test(tc, monoid_primer_scans);
    tcase_add_test(tc, monoid_builtin_semantics);
    tcase_add_test(tc, acc_rules_table);
    tcase_add_test(tc, load_failure_frees_everything);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
